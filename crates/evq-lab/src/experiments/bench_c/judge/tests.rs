//! Each bench-c rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
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
    assert_eq!(j.checks.len(), 3);
    assert_eq!(j.figures.len(), r.plan.actives.len());
    assert!(
        r.c_peers.len() == 3,
        "the recorded run had libev, libevent and libuv: {:?}",
        r.c_peers
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
