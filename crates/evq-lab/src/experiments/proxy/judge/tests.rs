//! Each proxy rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, the, verdict};
use crate::experiments::proxy::Proxy;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Sweep<Plan, Point> {
    recorded("proxy")
}

fn judged(r: &Sweep<Plan, Point>, claim: &str) -> Verdict {
    verdict(&Proxy.judge(r), claim)
}

fn set(r: &mut Sweep<Plan, Point>, backend: &str, cold: usize, replies_per_s: f64) {
    the(&mut r.points, backend, |p| {
        p.backend == backend && p.cold == cold
    })
    .replies_per_s = replies_per_s;
}

#[test]
fn the_event_api_gains_28_percent_over_select() {
    let mut r = records();
    let hi = *r.plan.colds.last().unwrap();
    set(&mut r, "select", hi, 1000.0);
    set(&mut r, "epoll", hi, 1280.0);
    assert_eq!(judged(&r, GAIN), Holds);
    set(&mut r, "epoll", hi, 1279.0);
    assert_eq!(judged(&r, GAIN), Differs);
    r.points.retain(|p| p.backend != "select");
    assert_eq!(judged(&r, GAIN), NotMeasured);
}

#[test]
fn the_event_api_keeps_its_throughput_under_cold_connections() {
    let mut r = records();
    let (lo, hi) = (r.plan.colds[0], *r.plan.colds.last().unwrap());
    set(&mut r, "epoll", lo, 1000.0);
    set(&mut r, "epoll", hi, 900.0);
    assert_eq!(judged(&r, FLAT), Holds);
    set(&mut r, "epoll", hi, 899.0);
    assert_eq!(judged(&r, FLAT), Differs);
    r.points.retain(|p| !(p.backend == "epoll" && p.cold == lo));
    assert_eq!(judged(&r, FLAT), NotMeasured);
}

/// The recorded run with completion points beside epoll's at both ends.
fn with_completion(lo_rate: f64, hi_rate: f64) -> Sweep<Plan, Point> {
    let mut r = records();
    let (lo, hi) = (r.plan.colds[0], *r.plan.colds.last().unwrap());
    r.points
        .retain(|p| p.backend != crate::experiments::proxy::COMPLETION);
    for (cold, rate) in [(lo, lo_rate), (hi, hi_rate)] {
        r.points.push(Point {
            backend: crate::experiments::proxy::COMPLETION.into(),
            cold,
            replies_per_s: rate,
            rounds: Vec::new(),
            p99_ms: 1.0,
            errors: 0,
            relayed: 1,
        });
    }
    set(&mut r, "epoll", lo, 1000.0);
    r
}

#[test]
fn the_completion_proxy_gains_15_percent_over_epoll() {
    assert_eq!(
        judged(&with_completion(1150.0, 1150.0), COMPLETION_GAIN),
        Holds
    );
    assert_eq!(
        judged(&with_completion(1149.0, 1150.0), COMPLETION_GAIN),
        Differs
    );
    let mut r = with_completion(1150.0, 1150.0);
    r.points
        .retain(|p| p.backend != crate::experiments::proxy::COMPLETION);
    assert_eq!(judged(&r, COMPLETION_GAIN), NotMeasured);
}

#[test]
fn the_completion_proxy_keeps_98_percent_under_cold_connections() {
    assert_eq!(
        judged(&with_completion(1000.0, 980.0), COMPLETION_FLAT),
        Holds
    );
    assert_eq!(
        judged(&with_completion(1000.0, 979.0), COMPLETION_FLAT),
        Differs
    );
    let mut r = with_completion(1000.0, 980.0);
    let lo = r.plan.colds[0];
    r.points
        .retain(|p| !(p.backend == crate::experiments::proxy::COMPLETION && p.cold == lo));
    assert_eq!(judged(&r, COMPLETION_FLAT), NotMeasured);
}

/// The rounds of a point are paired with the other end's by index: the
/// detail shows their smallest and largest ratio, and nothing for records
/// from before rounds (or with one round).
#[test]
fn round_pairs_show_how_far_one_round_swings() {
    let mut r = with_completion(1000.0, 990.0);
    let completion = crate::experiments::proxy::COMPLETION;
    let measured = |r: &Sweep<Plan, Point>| {
        crate::experiment::testing::check(&Proxy.judge(r), COMPLETION_FLAT)
            .measured
            .clone()
    };
    assert!(!measured(&r).contains("round pairs"), "{}", measured(&r));
    let (lo, hi) = (r.plan.colds[0], *r.plan.colds.last().unwrap());
    the(&mut r.points, "lo", |p| {
        p.backend == completion && p.cold == lo
    })
    .rounds = vec![1000.0, 1100.0, 900.0];
    the(&mut r.points, "hi", |p| {
        p.backend == completion && p.cold == hi
    })
    .rounds = vec![990.0, 1210.0, 855.0];
    let m = measured(&r);
    assert!(
        m.ends_with("= 0.99 (median of 3 round pairs, 0.95–1.10)"),
        "{m}"
    );
    // The verdict is the pairs' median, not the ratio of the points' own
    // medians (here 990 / 1000).
    the(&mut r.points, "hi", |p| {
        p.backend == completion && p.cold == hi
    })
    .replies_per_s = 950.0;
    assert_eq!(judged(&r, COMPLETION_FLAT), Holds);
}
