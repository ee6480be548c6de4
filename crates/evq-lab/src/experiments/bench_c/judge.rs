//! bench-c's verdicts, notes and figures: pure functions of the records.

use super::{BenchPoint, Records};
use crate::experiment::Judged;
use crate::plot::{distinct, Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `bench_c_a`.
const CAPTION_BENCH_C_A: &str = "Time per run of the chain, lower is better. The epoll-based loops (evq-epoll and every peer) stay flat as idle pipes grow; evq-poll and evq-select climb. evq's backends are solid, the peer libraries and crates dashed.";

const FLAT: &str = "epoll-based loops cost (nearly) the same per run as idle pipes grow, while poll-based ones grow (SEEDS 002's dead-pipe runs)";
const VS_C: &str =
    "evq (epoll) is at least as fast as libev, libevent and libuv on the same chain (evq's claim)";
const VS_RUST: &str = "evq (epoll) is at least as fast as the Rust crates mio and polling on the same chain (evq's claim)";
const VS_FLOOR: &str = "evq (epoll) costs at most 5% more than a bare epoll loop in C with no library on the same chain (evq's own target, as in pipe-scaling)";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 4] = [FLAT, VS_C, VS_RUST, VS_FLOOR];

/// The bare C epoll loop's name, as its points carry it.
const FLOOR: &str = super::measure::FLOOR.0;

/// The Rust crates, by the names their points carry.
const RUST_PEERS: [&str; 2] = ["mio", "polling"];

/// Judges the sweep.
pub(super) fn judge(r: &Records) -> Judged {
    let c_peers: Vec<&str> = r.c_peers.iter().map(String::as_str).collect();
    let rounds = r.plan.rounds;
    let per_round = r.plan.per_round;
    let mut notes = r.skipped.clone();
    notes.push(format!("Every contender registers once outside the timed part; contenders take turns in {rounds} rounds of {per_round} timed runs each (plus one dropped warm-up per round), so a slow phase of the shared machine falls on all of them; median of the {} runs, min–max in results.json. Peers: C programs in crates/evq-lab/peers built with cc -O2 against Debian's libev, libevent and libuv; each prints the backend it chose. The floor, raw-epoll (peers/bench_raw_epoll.c, cc -O2, no library): epoll_wait for up to 1,024 events and the callback for each, the system calls every epoll contender makes and next to nothing else; it is not a peer the claims pick the fastest from.", rounds * per_round));
    notes.push(format!(
        "Rust peers, built into the lab (versions as Cargo.lock resolved them): mio {} and polling {}, both on epoll. evq, mio and polling take 1,024 events per wait (libuv's fixed batch; libev and libevent grow theirs to the ready set), and {}. mio is edge-triggered, so each event drains its pipe to EAGAIN (one more recv per event than the C peers, and several bytes per event where chains meet); polling is oneshot, so each event is re-armed with modify (one epoll_ctl per event), and its wait also resets its timer and notifier descriptors.",
        r.mio,
        r.polling,
        if r.as_children {
            "each runs as `evq bench-chain CONTENDER N A W REPS`, a fresh single-threaded process of its own, as each C peer runs"
        } else {
            "each runs in the lab's process on a thread with a descriptor table of its own, as each C peer has in its single-threaded process (a shared table costs an atomic reference-count pair on every recv, send and epoll_wait)"
        }
    ));
    Judged {
        checks: vec![flat(r), vs_c(r, &c_peers), vs_rust(r), vs_floor(r)],
        notes,
        commands: vec![format!(
            "evq lab --only bench-c   (peers: crates/evq-lab/peers/bench_*.c N A {} REPS; evq, mio {} and polling {}: evq bench-chain evq-BACKEND|mio|polling N A {} REPS)",
            r.plan.w, r.mio, r.polling, r.plan.w
        )],
        figures: figures(r),
    }
}

/// The median µs per run of `contender` at (n, a).
fn at(r: &Records, contender: &str, n: usize, a: usize) -> Option<f64> {
    r.points
        .iter()
        .find(|p| p.contender == contender && p.n == n && p.a == a)
        .map(|p| p.us_per_run)
}

/// Growth of a contender's time from the fewest to the most pipes, one active.
fn growth(r: &Records, contender: &str) -> Option<f64> {
    let (lo, hi) = (r.plan.ns[0], *r.plan.ns.last().unwrap_or(&r.plan.ns[0]));
    at(r, contender, hi, 1)
        .zip(at(r, contender, lo, 1))
        .map(|(h, l)| h / l)
}

fn flat(r: &Records) -> ClaimCheck {
    let (lo, hi) = (r.plan.ns[0], *r.plan.ns.last().unwrap_or(&r.plan.ns[0]));
    let fmt = |c: &str| growth(r, c).map_or("-".into(), |g| format!("×{g:.2}"));
    let flat: Vec<f64> = [
        "evq-epoll",
        "libevent",
        "libev",
        "libuv",
        "mio",
        "polling",
        FLOOR,
    ]
    .iter()
    .filter_map(|c| growth(r, c))
    .collect();
    ClaimCheck::judged(
        FLAT,
        format!(
            "a=1, {lo} → {hi} pipes: evq-epoll {}, libevent {}, libev {}, libuv {}, mio {}, polling {}, raw-epoll {}, evq-poll {}, evq-select {}",
            fmt("evq-epoll"), fmt("libevent"), fmt("libev"), fmt("libuv"), fmt("mio"), fmt("polling"), fmt(FLOOR), fmt("evq-poll"), fmt("evq-select")
        ),
        growth(r, "evq-poll")
            .filter(|_| !flat.is_empty())
            .map(|p| flat.iter().all(|g| *g <= 2.0) && p > 2.0),
        "holds if every epoll-based contender grows at most 2× over the sweep and evq's poll backend grows more than 2×",
    )
}

/// evq-epoll against the fastest of `rivals` at one point.
struct Against {
    n: usize,
    a: usize,
    evq: f64,
    best: f64,
    who: String,
}

/// evq-epoll's median over the fastest of `rivals` at every point.
fn against(r: &Records, rivals: &[&str]) -> Vec<Against> {
    let mut out = Vec::new();
    for &n in &r.plan.ns {
        for &a in r.plan.actives.iter().filter(|&&a| a <= n) {
            let best = rivals
                .iter()
                .filter_map(|name| at(r, name, n, a).map(|t| (t, name.to_string())))
                .min_by(|x, y| x.0.total_cmp(&y.0));
            if let (Some(evq), Some((best, who))) = (at(r, "evq-epoll", n, a), best) {
                out.push(Against {
                    n,
                    a,
                    evq,
                    best,
                    who,
                });
            }
        }
    }
    out
}

/// Judges evq-epoll against the fastest of `rivals` at every point, each point
/// described by `line`: holds if the ratio of medians is at most 1.05 everywhere.
fn versus(
    r: &Records,
    claim: &str,
    rivals: &[&str],
    line: impl Fn(&Against) -> String,
) -> ClaimCheck {
    let v = against(r, rivals);
    ClaimCheck::judged(
        claim,
        v.iter().map(line).collect::<Vec<_>>().join("; "),
        (!v.is_empty()).then(|| v.iter().all(|x| x.evq / x.best <= 1.05)),
        "holds if the ratio of medians is at most 1.05 at every point",
    )
}

fn vs_c(r: &Records, c_peers: &[&str]) -> ClaimCheck {
    versus(r, VS_C, c_peers, |x| {
        // The bare loop against the same peer: how far below the fastest
        // library any library could go at this point.
        let floor = at(r, FLOOR, x.n, x.a).map_or(String::new(), |t| {
            format!(" (raw-epoll: {:.2})", t / x.best)
        });
        format!(
            "n={} a={}: evq-epoll / best peer ({}) = {:.2}{floor}",
            x.n,
            x.a,
            x.who,
            x.evq / x.best
        )
    })
}

fn vs_floor(r: &Records) -> ClaimCheck {
    versus(r, VS_FLOOR, &[FLOOR], |x| {
        format!(
            "n={} a={}: evq-epoll {:.1} µs, raw-epoll {:.1} µs: {:.3}×",
            x.n,
            x.a,
            x.evq,
            x.best,
            x.evq / x.best
        )
    })
}

fn vs_rust(r: &Records) -> ClaimCheck {
    versus(r, VS_RUST, &RUST_PEERS, |x| {
        let us = |c: &str| at(r, c, x.n, x.a).map_or("-".into(), |t| format!("{t:.1}"));
        format!(
            "n={} a={}: evq-epoll {:.1} µs, mio {} µs, polling {} µs; evq-epoll / best ({}) = {:.2}",
            x.n,
            x.a,
            x.evq,
            us("mio"),
            us("polling"),
            x.who,
            x.evq / x.best
        )
    })
}

fn figures(r: &Records) -> Vec<Figure> {
    let contenders = distinct(r.points.iter().map(|p| p.contender.as_str()));
    r.plan
        .actives
        .iter()
        .map(|&a| {
            let mut series = Series::named(
                &contenders,
                &r.points,
                |p: &BenchPoint| p.contender.as_str(),
                |p| (p.a == a).then_some((p.n as f64, p.us_per_run)),
            );
            series.retain(|s| !s.points.is_empty());
            Figure::new(
                &format!("bench-c-a{a}"),
                CAPTION_BENCH_C_A,
                Chart {
                    title: format!(
                        "bench.c chain: time per run, {a} active, {} writes",
                        r.plan.w
                    ),
                    x_label: "pipes".into(),
                    y_label: "µs per run (median)".into(),
                    log_x: true,
                    log_y: true,
                    series,
                }
                .evq_where(|n| n.starts_with("evq")),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
