//! Each signals rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};

fn records() -> Records {
    recorded("signals")
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&Signals.judge(r), claim)
}

fn pickup(r: &mut Records, backend: &str, batch: usize, ns: f64) {
    let p = r
        .pickup
        .points
        .iter_mut()
        .find(|p| p.backend == backend && p.batch == batch)
        .unwrap_or_else(|| panic!("no {backend} at batch {batch}"));
    p.ns_per_event = ns;
}

#[test]
fn bulk_pickup_gains_little() {
    let mut r = records();
    pickup(&mut r, "rtsig", 1, 1000.0);
    pickup(&mut r, "rtsig-bulk", 500, 750.0);
    assert_eq!(judged(&r, pickup_judge::GAINS_LITTLE), Holds);
    pickup(&mut r, "rtsig-bulk", 500, 749.0);
    assert_eq!(judged(&r, pickup_judge::GAINS_LITTLE), Differs);
    r.pickup.points.retain(|p| p.backend != "rtsig-bulk");
    assert_eq!(judged(&r, pickup_judge::GAINS_LITTLE), NotMeasured);
}

#[test]
fn bulk_dequeue_costs_half_over_the_read_floor() {
    let mut r = records();
    r.pickup.read_floor_runs = vec![500.0];
    pickup(&mut r, "rtsig", 500, 1500.0);
    pickup(&mut r, "rtsig-bulk", 500, 1000.0);
    assert_eq!(
        judged(&r, pickup_judge::BULK_HALF),
        Holds,
        "500 / 1000 over the floor"
    );
    pickup(&mut r, "rtsig-bulk", 500, 1001.0);
    assert_eq!(judged(&r, pickup_judge::BULK_HALF), Differs);
    r.pickup.points.retain(|p| p.backend != "rtsig");
    assert_eq!(judged(&r, pickup_judge::BULK_HALF), NotMeasured);
}

#[test]
fn epoll_then_bulk_then_one_at_a_time() {
    let mut r = records();
    pickup(&mut r, "epoll", 500, 600.0);
    pickup(&mut r, "rtsig-bulk", 500, 800.0);
    pickup(&mut r, "rtsig", 500, 1000.0);
    assert_eq!(judged(&r, pickup_judge::ORDER), Holds);
    pickup(&mut r, "epoll", 500, 800.0);
    assert_eq!(judged(&r, pickup_judge::ORDER), Differs);
    r.pickup.points.retain(|p| p.backend != "epoll");
    assert_eq!(judged(&r, pickup_judge::ORDER), NotMeasured);
}

fn overload(r: &mut Records) -> &mut overload::Records {
    match &mut r.overload {
        Outcome::Measured(o) => o,
        Outcome::Failed(why) => panic!("the recorded overload sweep failed: {why}"),
    }
}

/// Every run kept its schedule, served `replies` replies/s and failed `pct` %.
fn every_run(r: &mut Records, replies: f64, pct: f64) {
    for p in &mut overload(r).runs {
        p.client_started_per_s = p.offered_per_s;
        p.replies_per_s = replies;
        p.error_pct = pct;
    }
}

/// The run of (backend, shedding) at the highest offered rate.
fn top<'a>(r: &'a mut Records, backend: &str, shed: bool) -> &'a mut overload::Point {
    overload(r)
        .runs
        .iter_mut()
        .filter(|p| p.backend == backend && p.shed == shed)
        .max_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s))
        .expect("a run")
}

/// A capacity of `cap` replies/s: one low-rate run reached it.
fn capacity(r: &mut Records, cap: f64) {
    let low = overload(r)
        .runs
        .iter_mut()
        .filter(|p| p.backend == JUDGED_ON)
        .min_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s))
        .expect("a run");
    low.replies_per_s = cap;
    let top_rate = top(r, JUDGED_ON, false).offered_per_s;
    assert!(
        top_rate >= 2.0 * cap,
        "the top rate {top_rate} is past 2× {cap}"
    );
}

#[test]
fn without_limiting_throughput_collapses() {
    let claim = overload_judge::collapse_claim(JUDGED_ON);
    let mut r = records();
    every_run(&mut r, 100.0, 50.0);
    let cap = top(&mut r, JUDGED_ON, false).offered_per_s / 3.0;
    capacity(&mut r, cap);
    top(&mut r, JUDGED_ON, false).replies_per_s = 0.79 * cap;
    assert_eq!(judged(&r, &claim), Holds);
    top(&mut r, JUDGED_ON, false).replies_per_s = 0.8 * cap;
    assert_eq!(judged(&r, &claim), Differs);
    for p in &mut overload(&mut r).runs {
        p.client_started_per_s = 0.5 * p.offered_per_s;
    }
    assert_eq!(
        judged(&r, &claim),
        NotMeasured,
        "the client fell behind everywhere"
    );
}

#[test]
fn with_limiting_throughput_holds_and_errors_become_resets() {
    let claim = overload_judge::limited_claim(JUDGED_ON);
    let mut r = records();
    every_run(&mut r, 100.0, 50.0);
    let cap = top(&mut r, JUDGED_ON, true).offered_per_s / 3.0;
    capacity(&mut r, cap);
    let t = top(&mut r, JUDGED_ON, true);
    t.replies_per_s = 0.8 * cap;
    t.errors = 10;
    t.errors_by_kind = [("connreset".to_string(), 5)].into_iter().collect();
    t.error_pct = 50.0;
    assert_eq!(
        judged(&r, &claim),
        Holds,
        "at capacity, half resets, no more errors"
    );
    top(&mut r, JUDGED_ON, true).error_pct = 50.1;
    assert_eq!(
        judged(&r, &claim),
        Differs,
        "more errors than without limiting"
    );
    let t = top(&mut r, JUDGED_ON, true);
    t.error_pct = 50.0;
    t.errors = 11;
    assert_eq!(
        judged(&r, &claim),
        Differs,
        "under half the failures were resets"
    );
    overload(&mut r).runs.retain(|p| !p.shed);
    assert_eq!(judged(&r, &claim), NotMeasured);
}

#[test]
fn a_failed_overload_sweep_leaves_the_pickup_judged() {
    let mut r = records();
    r.overload = Outcome::Failed("the capacity probe got no replies".into());
    let j = Signals.judge(&r);
    assert_eq!(j.checks.len(), 5);
    assert!(j.checks[..3].iter().all(|c| c.verdict != NotMeasured));
    assert!(j.checks[3..]
        .iter()
        .all(|c| c.verdict == NotMeasured && c.measured.contains("no replies")));
}
