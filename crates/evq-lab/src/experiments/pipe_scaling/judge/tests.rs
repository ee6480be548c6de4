//! Each pipe-scaling rule on the recorded quick run, moved to hold, to differ and
//! to have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiments::pipe_scaling::PipeScaling;
use crate::verdict::Verdict::{Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("pipe-scaling")
}

fn set(records: &mut [PipebenchRecord], backend: &str, fds: usize, ns: f64) {
    let mut found = false;
    for r in records
        .iter_mut()
        .filter(|r| r.backend == backend && r.fds == fds)
    {
        r.ns_per_event = ns;
        found = true;
    }
    assert!(found, "no {backend} at {fds} in the recorded run");
}

fn without(records: &mut Vec<PipebenchRecord>, backend: &str) {
    records.retain(|r| r.backend != backend);
}

fn judged(r: &Records, claim: &str) -> crate::verdict::Verdict {
    verdict(&PipeScaling.judge(r), claim)
}

#[test]
fn the_recorded_run_is_judged_claim_by_claim() {
    let r = records();
    let j = PipeScaling.judge(&r);
    // The quick sweep ran on pipes: the RT-signal claim is the main sweep's, not
    // the pipe sweep's, so seven checks, and the result ring's.
    assert_eq!(j.checks.len(), 8, "{:#?}", j.checks);
    assert_eq!(j.figures.len(), 3);
    assert!(j.checks.iter().all(|c| !c.measured.is_empty()));
}

#[test]
fn poll_grows_while_epoll_stays_flat() {
    let mut r = records();
    let (lo, hi) = ends(&r);
    set(&mut r.main, "raw-poll", lo, 100.0);
    set(&mut r.main, "raw-poll", hi, 500.0);
    set(&mut r.main, "epoll", lo, 100.0);
    set(&mut r.main, "epoll", hi, 200.0);
    assert_eq!(judged(&r, POLL_GROWS), Holds, "exactly 5× and 2× hold");
    set(&mut r.main, "epoll", hi, 201.0);
    assert_eq!(judged(&r, POLL_GROWS), Differs);
    set(&mut r.main, "epoll", hi, 150.0);
    set(&mut r.main, "raw-poll", hi, 400.0);
    assert_eq!(judged(&r, POLL_GROWS), Differs, "poll grew only 4×");
    without(&mut r.main, "raw-poll");
    assert_eq!(judged(&r, POLL_GROWS), NotMeasured);
}

#[test]
fn the_gap_is_held_to_half_the_seeds_scaled_ratio() {
    let mut r = records();
    let (_, hi) = ends(&r);
    let expected = SEED_RATIO_AT_10K * hi as f64 / 10_000.0;
    set(&mut r.main, "raw-epoll", hi, 1000.0);
    set(&mut r.main, "raw-poll", hi, 1000.0 * 0.51 * expected);
    assert_eq!(judged(&r, GAP), Holds);
    set(&mut r.main, "raw-poll", hi, 1000.0 * 0.49 * expected);
    assert_eq!(judged(&r, GAP), Differs);
    without(&mut r.main, "raw-epoll");
    assert_eq!(judged(&r, GAP), NotMeasured);
}

#[test]
fn polls_scan_against_epolls_whole_loop() {
    let mut r = records();
    let (_, hi) = ends(&r);
    set(&mut r.main, "raw-epoll", hi, 1000.0);
    let scan = |r: &mut Records, v: Option<f64>| {
        for x in r
            .main
            .iter_mut()
            .filter(|x| x.backend == "raw-poll" && x.fds == hi)
        {
            x.scan_ns_per_event = v;
        }
    };
    scan(&mut r, Some(1001.0));
    assert_eq!(judged(&r, USER_SCAN), Holds);
    scan(&mut r, Some(1000.0));
    assert_eq!(judged(&r, USER_SCAN), Differs, "equal is not more");
    scan(&mut r, None);
    assert_eq!(judged(&r, USER_SCAN), NotMeasured);
}

#[test]
fn improved_select_must_be_cheaper() {
    let mut r = records();
    let (_, hi) = ends(&r);
    set(&mut r.main, "select", hi, 1000.0);
    set(&mut r.main, "select-improved", hi, 999.0);
    assert_eq!(judged(&r, IMPROVED_SELECT), Holds);
    set(&mut r.main, "select-improved", hi, 1000.0);
    assert_eq!(judged(&r, IMPROVED_SELECT), Differs);
    without(&mut r.main, "select");
    assert_eq!(judged(&r, IMPROVED_SELECT), NotMeasured);
}

#[test]
fn evq_within_five_percent_of_the_floor_at_every_size() {
    let mut r = records();
    for n in r.plan.fds.clone() {
        set(&mut r.main, "raw-epoll", n, 1000.0);
        set(&mut r.main, "epoll", n, 1050.0);
    }
    assert_eq!(judged(&r, EVQ_FLOOR), Holds);
    set(&mut r.main, "epoll", r.plan.fds[1], 1051.0);
    assert_eq!(judged(&r, EVQ_FLOOR), Differs, "one size over is enough");
    without(&mut r.main, "epoll");
    assert_eq!(judged(&r, EVQ_FLOOR), NotMeasured);
}

#[test]
fn epolls_wait_cost_over_the_no_poll_floor() {
    let mut r = records();
    let (_, hi) = ends(&r);
    set(&mut r.main, "raw-none", 100, 500.0);
    set(&mut r.main, "raw-none", hi, 600.0);
    set(&mut r.main, "epoll", 100, 700.0);
    set(&mut r.main, "epoll", hi, 900.0);
    assert_eq!(judged(&r, EPOLL_FLAT), Holds, "(900-600)/(700-500) = 1.5");
    set(&mut r.main, "epoll", hi, 901.0);
    assert_eq!(judged(&r, EPOLL_FLAT), Differs);
    // Without a point at 100 descriptors the claim is not checked at all.
    r.main.retain(|x| x.fds != 100);
    assert!(PipeScaling
        .judge(&r)
        .checks
        .iter()
        .all(|c| c.claim != EPOLL_FLAT));
}

#[test]
fn the_devpoll_personality_stays_flat_on_pipes() {
    let mut r = records();
    let (first, last) = (r.pipes.sizes[0], *r.pipes.sizes.last().unwrap());
    set(&mut r.pipes.records, DEVPOLL, first, 1000.0);
    set(&mut r.pipes.records, DEVPOLL, last, 2000.0);
    assert_eq!(judged(&r, DEVPOLL_FLAT), Holds);
    set(&mut r.pipes.records, DEVPOLL, last, 2001.0);
    assert_eq!(judged(&r, DEVPOLL_FLAT), Differs);
    without(&mut r.pipes.records, DEVPOLL);
    assert_eq!(judged(&r, DEVPOLL_FLAT), NotMeasured);
}

#[test]
fn rt_signals_on_the_pipe_sweep() {
    let mut r = records();
    let (first, last) = (r.pipes.sizes[0], *r.pipes.sizes.last().unwrap());
    // A pipe sweep that carried the RT-signal backends (as a full run does).
    r.pipes.signal_names = vec!["rtsig".into(), "rtsig-bulk".into()];
    for b in ["rtsig", "rtsig-bulk"] {
        for (n, ns) in [(first, 1000.0), (last, 2000.0)] {
            let mut x = r.pipes.records[0].clone();
            (x.backend, x.fds, x.ns_per_event) = (b.into(), n, ns);
            r.pipes.records.push(x);
        }
    }
    assert_eq!(judged(&r, RTSIG_FLAT), Holds);
    set(&mut r.pipes.records, "rtsig-bulk", last, 2001.0);
    assert_eq!(judged(&r, RTSIG_FLAT), Differs);
    without(&mut r.pipes.records, "rtsig");
    assert_eq!(judged(&r, RTSIG_FLAT), NotMeasured);
}

/// The recorded run with completion rows made from epoll's (runs recorded
/// before the completion loop was measured have none).
fn with_completion(r: &mut Records) {
    let copies: Vec<PipebenchRecord> = r
        .main
        .iter()
        .filter(|p| p.backend == "epoll")
        .map(|p| PipebenchRecord {
            backend: COMPLETION.into(),
            enters_per_event: Some(0.0),
            ..p.clone()
        })
        .collect();
    r.main.retain(|p| p.backend != COMPLETION);
    r.main.extend(copies);
}

#[test]
fn a_result_ring_beats_a_system_call_per_event() {
    let mut r = records();
    without(&mut r.main, COMPLETION);
    assert_eq!(judged(&r, RESULT_RING), NotMeasured, "no completion rows");
    with_completion(&mut r);
    let fds = r.plan.fds.clone();
    for &n in &fds {
        set(&mut r.main, "epoll", n, 1000.0);
        set(&mut r.main, COMPLETION, n, 999.0);
    }
    assert_eq!(judged(&r, RESULT_RING), Holds);
    set(&mut r.main, COMPLETION, *fds.last().unwrap(), 1000.0);
    assert_eq!(judged(&r, RESULT_RING), Differs, "a tie is not a win");
}
