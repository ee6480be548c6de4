//! Each bench-c rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{check, recorded, verdict};
use crate::experiments::bench_c::BenchC;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("bench-c")
}

fn set(r: &mut Records, contender: &str, n: usize, a: usize, us: f64) {
    let p = r
        .points
        .iter_mut()
        .find(|p| p.contender == contender && p.n == n && p.a == a)
        .unwrap_or_else(|| panic!("no {contender} at n={n} a={a}"));
    p.us_per_run = us;
}

fn without(r: &mut Records, contender: &str) {
    r.points.retain(|p| p.contender != contender);
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&BenchC.judge(r), claim)
}

/// Every contender at every point at `us`.
fn all_at(r: &mut Records, us: f64) {
    for p in &mut r.points {
        p.us_per_run = us;
    }
}

#[test]
fn the_recorded_run_is_judged_claim_by_claim() {
    let r = records();
    let j = BenchC.judge(&r);
    assert_eq!(j.checks.len(), 4);
    assert_eq!(j.figures.len(), r.plan.actives.len());
    assert!(
        r.c_peers.len() == 3,
        "the recorded run had libev, libevent and libuv: {:?}",
        r.c_peers
    );
    assert!(
        !r.c_peers.iter().any(|p| p == FLOOR),
        "the bare loop is not a peer"
    );
}

#[test]
fn epoll_loops_flat_poll_grows() {
    let mut r = records();
    let (lo, hi) = (r.plan.ns[0], *r.plan.ns.last().unwrap());
    all_at(&mut r, 100.0);
    for c in ["evq-epoll", "libevent", "libev", "libuv", "mio", "polling"] {
        set(&mut r, c, hi, 1, 200.0);
    }
    set(&mut r, "evq-poll", lo, 1, 100.0);
    set(&mut r, "evq-poll", hi, 1, 201.0);
    assert_eq!(judged(&r, FLAT), Holds);
    set(&mut r, "libuv", hi, 1, 201.0);
    assert_eq!(
        judged(&r, FLAT),
        Differs,
        "one epoll loop grew more than 2×"
    );
    let mut r = records();
    all_at(&mut r, 100.0);
    set(&mut r, "evq-poll", hi, 1, 200.0);
    assert_eq!(judged(&r, FLAT), Differs, "poll did not grow more than 2×");
    without(&mut r, "evq-poll");
    assert_eq!(judged(&r, FLAT), NotMeasured);
}

#[test]
fn evq_against_the_fastest_c_peer_at_every_point() {
    let mut r = records();
    all_at(&mut r, 100.0);
    for p in r.points.iter_mut().filter(|p| p.contender == "evq-epoll") {
        p.us_per_run = 105.0;
    }
    assert_eq!(judged(&r, VS_C), Holds, "1.05× is at most 1.05×");
    let lo = r.plan.ns[0];
    set(&mut r, "libev", lo, 1, 99.0);
    assert_eq!(judged(&r, VS_C), Differs, "105 / 99 > 1.05");
    r.c_peers.clear();
    assert_eq!(judged(&r, VS_C), NotMeasured, "no C peer built");
}

/// The bare loop is never the "best peer", however fast, and each point's line
/// says where it stands against the peer that is.
#[test]
fn the_bare_loop_is_shown_beside_the_peers_but_not_one_of_them() {
    let mut r = records();
    all_at(&mut r, 100.0);
    let lo = r.plan.ns[0];
    set(&mut r, FLOOR, lo, 1, 50.0);
    let j = BenchC.judge(&r);
    assert_eq!(verdict(&j, VS_C), Holds, "evq 100 against peers at 100");
    let line = &check(&j, VS_C).measured;
    assert!(
        line.contains(&format!("n={lo} a=1: evq-epoll / best peer ("))
            && line.contains("= 1.00 (raw-epoll: 0.50)"),
        "{line}"
    );
    without(&mut r, FLOOR);
    let line = check(&BenchC.judge(&r), VS_C).measured.clone();
    assert!(!line.contains("raw-epoll"), "{line}");
}

#[test]
fn evq_against_the_bare_loop_at_every_point() {
    let mut r = records();
    all_at(&mut r, 100.0);
    for p in r.points.iter_mut().filter(|p| p.contender == "evq-epoll") {
        p.us_per_run = 105.0;
    }
    assert_eq!(judged(&r, VS_FLOOR), Holds, "5% over the floor is allowed");
    let hi = *r.plan.ns.last().unwrap();
    set(&mut r, FLOOR, hi, 1, 99.0);
    assert_eq!(judged(&r, VS_FLOOR), Differs, "105 / 99 > 1.05");
    without(&mut r, FLOOR);
    assert_eq!(judged(&r, VS_FLOOR), NotMeasured, "the floor did not build");
}

#[test]
fn evq_against_the_fastest_rust_crate_at_every_point() {
    let mut r = records();
    all_at(&mut r, 100.0);
    assert_eq!(judged(&r, VS_RUST), Holds);
    let hi = *r.plan.ns.last().unwrap();
    set(&mut r, "mio", hi, 1, 90.0);
    assert_eq!(judged(&r, VS_RUST), Differs);
    without(&mut r, "mio");
    without(&mut r, "polling");
    assert_eq!(judged(&r, VS_RUST), NotMeasured);
}
