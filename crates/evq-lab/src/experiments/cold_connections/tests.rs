//! Each cold-connections rule on the recorded quick run, moved to hold, to
//! differ and to have nothing to judge; and a failed part.

use super::*;
use crate::experiment::testing::{recorded, the, verdict};
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use detail::TABLE2_RATE;

fn records() -> Records {
    recorded("cold-connections")
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&ColdConnections.judge(r), claim)
}

fn measured<T>(o: &mut Outcome<T>) -> &mut T {
    match o {
        Outcome::Measured(t) => t,
        Outcome::Failed(why) => panic!("the recorded part failed: {why}"),
    }
}

fn throughput(r: &mut Records, backend: &str, cold: usize, replies_per_s: f64) {
    let points = &mut measured(&mut r.throughput).points;
    the(points, backend, |p| p.backend == backend && p.cold == cold).replies_per_s = replies_per_s;
}

#[test]
fn the_recorded_run_is_judged_claim_by_claim() {
    let j = ColdConnections.judge(&records());
    assert_eq!(j.checks.len(), ColdConnections.claims().len());
    for (c, claim) in j.checks.iter().zip(ColdConnections.claims()) {
        assert_eq!(c.claim, claim);
    }
}

#[test]
fn a_failed_part_leaves_only_its_claims_not_measured() {
    let mut r = records();
    r.detail = Outcome::Failed("only 12 of 750 cold connections came up".into());
    let j = ColdConnections.judge(&r);
    for claim in detail_claims() {
        let c = crate::experiment::testing::check(&j, &claim);
        assert_eq!(c.verdict, NotMeasured);
        assert!(c.measured.contains("only 12 of 750"), "{}", c.measured);
    }
    let other = crate::experiment::testing::check(&j, throughput_judge::FLAT);
    assert_eq!(
        other.verdict,
        ColdConnections.judge(&records()).checks[0].verdict
    );
}

#[test]
fn figure_8_epoll_flat_select_falls() {
    let mut r = records();
    let hi = *measured(&mut r.throughput).plan.colds.last().unwrap();
    for b in ["epoll", "select"] {
        throughput(&mut r, b, 0, 1000.0);
    }
    throughput(&mut r, "epoll", hi, 900.0);
    throughput(&mut r, "select", hi, 799.0);
    assert_eq!(judged(&r, throughput_judge::FLAT), Holds);
    throughput(&mut r, "select", hi, 800.0);
    assert_eq!(judged(&r, throughput_judge::FLAT), Differs);
    measured(&mut r.throughput)
        .points
        .retain(|p| p.backend != "select");
    assert_eq!(judged(&r, throughput_judge::FLAT), NotMeasured);
}

#[test]
fn dead_connections_rt_signals_flat_poll_degrades() {
    let mut r = records();
    let hi = *measured(&mut r.throughput).plan.colds.last().unwrap();
    for b in ["rtsig-bulk", "poll"] {
        throughput(&mut r, b, 0, 1000.0);
    }
    throughput(&mut r, "rtsig-bulk", hi, 900.0);
    throughput(&mut r, "poll", hi, 700.0);
    assert_eq!(judged(&r, throughput_judge::RT_FLAT), Holds);
    throughput(&mut r, "rtsig-bulk", hi, 899.0);
    assert_eq!(judged(&r, throughput_judge::RT_FLAT), Differs);
    measured(&mut r.throughput)
        .points
        .retain(|p| !p.backend.starts_with("rtsig"));
    assert_eq!(judged(&r, throughput_judge::RT_FLAT), NotMeasured);
}

fn rate_point<'a>(r: &'a mut Records, backend: &str, rate: f64) -> &'a mut detail::RatePoint {
    the(&mut measured(&mut r.detail).points, backend, |p| {
        p.backend == backend && p.offered_rate == rate
    })
}

#[test]
fn table_2_event_notifications_share_of_cpu() {
    let mut r = records();
    rate_point(&mut r, "select", TABLE2_RATE).wait_share_of_cpu = 0.20;
    rate_point(&mut r, "select-improved", TABLE2_RATE).wait_share_of_cpu = 0.15;
    rate_point(&mut r, "epoll", TABLE2_RATE).wait_share_of_cpu = 0.009;
    assert_eq!(judged(&r, detail_judge::TABLE2), Holds);
    rate_point(&mut r, "select-improved", TABLE2_RATE).wait_share_of_cpu = 0.16;
    assert_eq!(
        judged(&r, detail_judge::TABLE2),
        Differs,
        "improved above 3/4"
    );
    rate_point(&mut r, "select-improved", TABLE2_RATE).wait_share_of_cpu = 0.10;
    rate_point(&mut r, "epoll", TABLE2_RATE).wait_share_of_cpu = 0.01;
    assert_eq!(
        judged(&r, detail_judge::TABLE2),
        Differs,
        "epoll not under 1%"
    );
    measured(&mut r.detail)
        .points
        .retain(|p| p.offered_rate != TABLE2_RATE);
    assert_eq!(judged(&r, detail_judge::TABLE2), NotMeasured);
}

/// Every point kept up, on schedule, at latency `p50` ms.
fn all_kept_up(r: &mut Records, p50: f64) {
    for p in &mut measured(&mut r.detail).points {
        p.reply_rate_median = p.offered_rate;
        p.client_limited = false;
        p.p50_ms = p50;
    }
}

#[test]
fn figure_9_epoll_answers_first_at_most_rates() {
    let mut r = records();
    let rates = measured(&mut r.detail).plan.rates.clone();
    all_kept_up(&mut r, 1.0);
    for &rate in &rates[..rates.len() / 2 + 1] {
        rate_point(&mut r, "epoll", rate).p50_ms = 0.5;
    }
    assert_eq!(judged(&r, detail_judge::LATENCY), Holds);
    all_kept_up(&mut r, 1.0);
    for &rate in &rates[..rates.len() / 2] {
        rate_point(&mut r, "epoll", rate).p50_ms = 0.5;
    }
    assert_eq!(
        judged(&r, detail_judge::LATENCY),
        Differs,
        "half is not more than half"
    );
    for p in &mut measured(&mut r.detail).points {
        p.client_limited = true;
    }
    assert_eq!(
        judged(&r, detail_judge::LATENCY),
        NotMeasured,
        "no rate counts"
    );
}

#[test]
fn figure_9_saturation() {
    let mut r = records();
    let top = *measured(&mut r.detail).plan.rates.last().unwrap();
    all_kept_up(&mut r, 1.0);
    assert_eq!(
        judged(&r, detail_judge::SATURATION),
        NotMeasured,
        "nobody saturated"
    );
    rate_point(&mut r, "select-improved", top).reply_rate_median = 0.5 * top;
    assert_eq!(
        judged(&r, detail_judge::SATURATION),
        Holds,
        "epoll's peak is higher"
    );
    rate_point(&mut r, "epoll", top).reply_rate_median = 0.4 * top;
    for p in &mut measured(&mut r.detail).points {
        if p.backend == "epoll" {
            p.reply_rate_median = p.reply_rate_median.min(0.4 * top);
        }
    }
    assert_eq!(judged(&r, detail_judge::SATURATION), Differs);
}

fn peer_points<'a>(r: &'a mut Records, server: &str, cold: usize) -> Vec<&'a mut peers::Point> {
    measured(&mut r.peers)
        .points
        .iter_mut()
        .filter(|p| p.server == server && p.cold == cold && p.skipped.is_none())
        .collect()
}

fn peers_at(r: &mut Records, server: &str, cold: usize, replies_per_s: f64, p99: f64) {
    let points = peer_points(r, server, cold);
    assert!(!points.is_empty(), "no {server} at {cold}");
    for p in points {
        p.replies_per_s = replies_per_s;
        p.p99_ms = p99;
    }
}

#[test]
fn evq_serve_against_nginx_and_h2o() {
    let mut r = records();
    peers_at(&mut r, "nginx", 0, 1000.0, 5.0);
    peers_at(&mut r, "h2o", 0, 1200.0, 5.0);
    peers_at(&mut r, "evq", 0, 1200.0, 5.0);
    assert_eq!(judged(&r, peers_judge::THROUGHPUT), Holds);
    assert_eq!(judged(&r, peers_judge::P99), Holds, "equal p99 is at most");
    peers_at(&mut r, "evq", 0, 1199.0, 5.1);
    assert_eq!(judged(&r, peers_judge::THROUGHPUT), Differs);
    assert_eq!(judged(&r, peers_judge::P99), Differs);
    measured(&mut r.peers).points.retain(|p| p.server != "h2o");
    assert_eq!(
        judged(&r, peers_judge::THROUGHPUT),
        NotMeasured,
        "h2o missing"
    );
    assert_eq!(judged(&r, peers_judge::P99), NotMeasured);
}

#[test]
fn evq_serve_drops_at_most_2_percent_under_cold_connections() {
    let mut r = records();
    let hi = *measured(&mut r.peers).plan.colds.last().unwrap();
    peers_at(&mut r, "evq", 0, 1000.0, 5.0);
    peers_at(&mut r, "evq", hi, 981.0, 5.0);
    assert_eq!(judged(&r, peers_judge::DROP), Holds);
    peers_at(&mut r, "evq", hi, 979.0, 5.0);
    assert_eq!(judged(&r, peers_judge::DROP), Differs);
    for p in peer_points(&mut r, "evq", hi) {
        p.skipped = Some("evq held 12 of 2000 cold connections".into());
    }
    assert_eq!(
        judged(&r, peers_judge::DROP),
        NotMeasured,
        "the largest count not held"
    );
}

/// The drop is the median of each repeat's own ratio: a repeat measures a
/// server's cold counts back to back, and a repeat that found the machine
/// faster or slower for both its points does not move the verdict the way
/// it moves a ratio of medians.
#[test]
fn the_drop_is_judged_repeat_by_repeat() {
    let mut r = records();
    let hi = *measured(&mut r.peers).plan.colds.last().unwrap();
    let set = |r: &mut Records, cold: usize, rates: [f64; 2]| {
        let mut points = peer_points(r, "evq", cold);
        points.sort_by_key(|p| p.repeat);
        assert_eq!(points.len(), 2, "the recorded run has two repeats");
        for (p, rate) in points.into_iter().zip(rates) {
            p.replies_per_s = rate;
        }
    };
    // Pairs 1.000 and 0.965, median 0.9825: 1.75% lost. The medians of the
    // points alone, 1200 and 1175.5, would say 2.04%.
    set(&mut r, 0, [1000.0, 1400.0]);
    set(&mut r, hi, [1000.0, 1351.0]);
    assert_eq!(judged(&r, peers_judge::DROP), Holds);
    let check = crate::experiment::testing::check(&ColdConnections.judge(&r), peers_judge::DROP)
        .measured
        .clone();
    assert!(
        check.contains("evq -1.8% (median of 2 repeat pairs, -3.5% to +0.0%)"),
        "{check}"
    );
    // Both pairs 3% down: lost.
    set(&mut r, hi, [970.0, 1358.0]);
    assert_eq!(judged(&r, peers_judge::DROP), Differs);
}

#[test]
fn evq_serve_spends_at_most_256_bytes_per_idle_connection() {
    let mut r = records();
    let hi = *measured(&mut r.peers).plan.colds.last().unwrap();
    assert!(hi >= 1000, "the recorded quick run holds {hi}");
    let set = |r: &mut Records, b: f64| {
        for p in peer_points(r, "evq", hi) {
            p.bytes_per_idle_conn = Some(b);
        }
    };
    set(&mut r, 256.0);
    assert_eq!(judged(&r, peers_judge::MEMORY), Holds);
    set(&mut r, 257.0);
    assert_eq!(judged(&r, peers_judge::MEMORY), Differs);
    let plan = &mut measured(&mut r.peers).plan;
    *plan.colds.last_mut().unwrap() = 999;
    assert_eq!(
        judged(&r, peers_judge::MEMORY),
        NotMeasured,
        "too few for pages"
    );
}

/// The recorded run with `evq-completion` points made from evq's (runs recorded
/// before the completion row was measured have none).
fn with_completion_rows() -> Records {
    let mut r = records();
    let peers = measured(&mut r.peers);
    let copies: Vec<peers::Point> = peers
        .points
        .iter()
        .filter(|p| p.server == "evq")
        .map(|p| peers::Point {
            server: peers::EVQ_COMPLETION.into(),
            ..p.clone()
        })
        .collect();
    peers.points.extend(copies);
    peers.servers.insert(1, peers::EVQ_COMPLETION.into());
    r
}

#[test]
fn completions_against_epoll_and_h2o() {
    let mut r = records();
    measured(&mut r.peers)
        .points
        .retain(|p| p.server != peers::EVQ_COMPLETION);
    assert_eq!(
        judged(&r, peers_judge::COMPLETION),
        NotMeasured,
        "a run without the completion row judges nothing"
    );
    let mut r = with_completion_rows();
    peers_at(&mut r, "evq", 0, 1000.0, 5.0);
    peers_at(&mut r, "h2o", 0, 880.0, 5.0);
    peers_at(&mut r, peers::EVQ_COMPLETION, 0, 1150.0, 5.0);
    assert_eq!(judged(&r, peers_judge::COMPLETION), Holds);
    peers_at(&mut r, peers::EVQ_COMPLETION, 0, 1149.0, 5.0);
    assert_eq!(
        judged(&r, peers_judge::COMPLETION),
        Differs,
        "under 1.15× epoll"
    );
    peers_at(&mut r, peers::EVQ_COMPLETION, 0, 1200.0, 5.0);
    peers_at(&mut r, "h2o", 0, 950.0, 5.0);
    assert_eq!(
        judged(&r, peers_judge::COMPLETION),
        Differs,
        "under 1.3× h2o"
    );
    measured(&mut r.peers).points.retain(|p| p.server != "h2o");
    assert_eq!(
        judged(&r, peers_judge::COMPLETION),
        NotMeasured,
        "h2o missing"
    );
}

#[test]
fn completions_under_cold_connections() {
    let mut r = with_completion_rows();
    let hi = *measured(&mut r.peers).plan.colds.last().unwrap();
    let c = peers::EVQ_COMPLETION;
    peers_at(&mut r, c, 0, 1000.0, 5.0);
    peers_at(&mut r, c, hi, 981.0, 5.0);
    for p in peer_points(&mut r, c, hi) {
        p.bytes_per_idle_conn = Some(200.0);
    }
    assert_eq!(judged(&r, peers_judge::COMPLETION_COLD), Holds);
    peers_at(&mut r, c, hi, 979.0, 5.0);
    assert_eq!(judged(&r, peers_judge::COMPLETION_COLD), Differs, "3% lost");
    peers_at(&mut r, c, hi, 990.0, 5.0);
    for p in peer_points(&mut r, c, hi) {
        p.bytes_per_idle_conn = Some(257.0);
    }
    assert_eq!(judged(&r, peers_judge::COMPLETION_COLD), Differs, "257 B");
    for p in peer_points(&mut r, c, hi) {
        p.skipped = Some("held 3 of 2000".into());
    }
    assert_eq!(judged(&r, peers_judge::COMPLETION_COLD), NotMeasured);
}
