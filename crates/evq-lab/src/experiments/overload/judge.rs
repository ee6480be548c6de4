//! The overload claims (issue 15's figures): pure functions of the points.

use super::measure::{
    Point, Records, NGINX, NGINX_DEFAULT, NGINX_TUNED, NGINX_WORK_BYTES, PROXY, PROXY_COMPLETION,
    SERVE, SERVE_COMPLETION, WORK, WORK_RIG,
};
use crate::verdict::ClaimCheck;

/// The policy the claims judge (`evq serve`'s default).
pub const JUDGED: &str = "pulse";
/// The backend the claims are judged on.
pub const BACKEND: &str = "epoll";
/// The client kept up if it started at least this share of the offered rate.
pub const CLIENT_KEEPS_UP: f64 = 0.9;

/// Goodput held under overload, at `threads` threads.
pub fn goodput_claim(threads: usize) -> String {
    format!("with {JUDGED} on {BACKEND} × {threads} thread(s), goodput (replies within the client timeout) stays ≥ 95% of capacity at 2× and 3× offered and ≥ 90% at 5× (issue 15)")
}
/// Latency of served replies.
pub const P99: &str = "with pulse on epoll × 1, the p99 of served replies at 3× offered is at most 5× the p99 at 0.5× (issue 15)";
/// Refusals are fast.
pub const FAST: &str = "with pulse on epoll × 1 at 3× offered, ≥ 99% of the clients not served learn it within 10 ms (a reset or 503), not by timing out (issue 15)";
/// No cost below capacity.
pub const BELOW: &str = "with pulse on epoll × 1 below capacity (0.9× and less), goodput is within 2% of no control's and nobody is refused (issue 15)";
/// Against the seed's policy.
pub const BEATS_SEED: &str = "with pulse on epoll × 1 at 3× offered, goodput is higher than with seed 001's EWMA-and-reset (issue 15, seed 001 Graphs 3–4)";

/// The proxy's goodput under overload.
pub const PROXY_GOODPUT: &str = "with pulse on epoll × 1, evq proxy's goodput stays ≥ 95% of its capacity at 2× and 3× offered and ≥ 90% at 5× (issue 15: overload control in serve and proxy)";
/// The proxy on completions under overload.
pub const COMPLETION_PROXY: &str = "with pulse at 3× offered, evq proxy --io completion answers ≥ 90% of its probed capacity within the client timeout and ≥ 95% of the clients it does not serve learn it within 10 ms, its none series stated beside it (issues 15 and 17: overload control on the completion path)";
/// The completion server's pulse at 3× its capacity.
pub const COMPLETION_SERVE: &str = "with pulse at 3× offered, evq serve --io completion answers ≥ 90% of its probed capacity within the client timeout and ≥ 95% of the clients it does not serve learn it within 10 ms, its none series stated beside it (issues 15 and 17: overload control on the completion path)";
/// Against nginx: goodput.
pub const BEATS_NGINX: &str = "at 3× and 5× offered, evq serve with pulse (epoll × 1) keeps at least as large a share of its capacity as nginx does of its own (within 2 points), as the lab configures it and as tuned against overload (backlog 64, limit_conn 64 → 503) (issue 15)";
/// Against nginx: how the unserved learn it.
pub const FASTER_THAN_NGINX: &str = "at 3× and 5× offered, evq serve with pulse tells a larger share of the clients it does not serve that it will not (within 10 ms) than nginx does in either configuration (issue 15)";

/// `evq serve`'s point of `policy` on the judged rig and backend at
/// `threads` nearest `multiple` (within 0.05).
pub fn at<'a>(
    points: &'a [Point],
    policy: &str,
    threads: usize,
    multiple: f64,
) -> Option<&'a Point> {
    at_server(points, SERVE, policy, threads, multiple)
}

/// [`at`] for any server ([`SERVE`], [`PROXY`], [`NGINX`]; nginx's backend
/// counts as epoll).
pub fn at_server<'a>(
    points: &'a [Point],
    server: &str,
    policy: &str,
    threads: usize,
    multiple: f64,
) -> Option<&'a Point> {
    points.iter().find(|p| {
        p.server == server
            && p.policy == policy
            && p.rig == WORK_RIG
            && p.backend == BACKEND
            && p.threads == threads
            && (p.multiple - multiple).abs() < 0.05
    })
}

/// Whether the client started at least [`CLIENT_KEEPS_UP`] of the offered rate.
pub fn keeps_up(p: &Point) -> bool {
    p.client_started_per_s >= CLIENT_KEEPS_UP * p.offered_per_s
}

fn show(p: &Point) -> String {
    format!(
        "{}× offered ({:.2}× capacity): goodput {:.0}% of capacity, p99 {:.1} ms, {} refused ({} fast), {} timed out{}",
        p.multiple,
        p.offered_over_capacity,
        100.0 * p.goodput_over_capacity,
        p.p99_ms,
        p.refused,
        p.refused_fast,
        p.timed_out,
        if keeps_up(p) { "" } else { " (client fell behind)" }
    )
}

/// Goodput at 2×, 3× and 5×.
pub fn check_goodput(points: &[Point], threads: usize) -> ClaimCheck {
    goodput_held(points, SERVE, threads, &goodput_claim(threads))
}

/// The proxy's goodput at 2×, 3× and 5×.
pub fn check_proxy_goodput(points: &[Point]) -> ClaimCheck {
    goodput_held(points, PROXY, 1, PROXY_GOODPUT)
}

fn goodput_held(points: &[Point], server: &str, threads: usize, claim: &str) -> ClaimCheck {
    let want = [(2.0, 0.95), (3.0, 0.95), (5.0, 0.90)];
    let got: Vec<Option<&Point>> = want
        .iter()
        .map(|&(m, _)| at_server(points, server, JUDGED, threads, m))
        .collect();
    let measured = got
        .iter()
        .zip(&want)
        .map(|(p, (m, _))| p.map_or(format!("{m}×: not run"), show))
        .collect::<Vec<_>>()
        .join("; ");
    let holds = if got.iter().any(|p| p.is_none_or(|p| !keeps_up(p))) {
        None
    } else {
        Some(
            got.iter()
                .zip(&want)
                .all(|(p, &(_, share))| p.is_some_and(|p| p.goodput_over_capacity >= share)),
        )
    };
    ClaimCheck::judged(
        claim,
        measured,
        holds,
        &format!("capacity = the peak goodput of the `none` sweep of the same server, backend and thread count in this run; holds if goodput/capacity ≥ 0.95 at 2× and 3× and ≥ 0.90 at 5× of the probed capacity; not measured if a point is missing or the client started < {:.0}% of its offered rate there", 100.0 * CLIENT_KEEPS_UP),
    )
}

/// p99 at 3× against 0.5×.
pub fn check_p99(points: &[Point]) -> ClaimCheck {
    let (low, high) = (at(points, JUDGED, 1, 0.5), at(points, JUDGED, 1, 3.0));
    let measured = match (low, high) {
        (Some(l), Some(h)) => {
            let (l, h) = (l.settled(), h.settled());
            format!(
                "p99 {:.1} ms at 0.5×, {:.1} ms at 3× ({:.1}×)",
                l.p99_ms,
                h.p99_ms,
                h.p99_ms / l.p99_ms.max(1e-9)
            )
        }
        _ => "a point is missing".into(),
    };
    let holds = low
        .zip(high)
        .filter(|(_, h)| keeps_up(h) && h.settled().served > 0)
        .map(|(l, h)| h.settled().p99_ms <= 5.0 * l.settled().p99_ms);
    ClaimCheck::judged(P99, measured, holds, "holds if the 3× point's p99 of 2xx replies (from the intended start; requests due after the warm-up, the schedule's first quarter, as for goodput) is ≤ 5× the 0.5× point's; not measured without both points, or if the client fell behind or nothing was served at 3×")
}

/// Share of unserved clients refused fast at 3×.
pub fn check_fast(points: &[Point]) -> ClaimCheck {
    let p = at(points, JUDGED, 1, 3.0);
    let unserved = |s: &super::measure::SteadyPoint| s.refused + s.timed_out;
    let measured = p.map_or("not run".into(), |p| {
        let s = p.settled();
        format!(
            "{} of {} clients not served learned it within 10 ms ({} refused, {} timed out) after the warm-up; over the whole run {} of {}",
            s.refused_fast,
            unserved(&s),
            s.refused,
            s.timed_out,
            p.refused_fast,
            p.refused + p.timed_out
        )
    });
    let holds = p.filter(|p| keeps_up(p)).map(|p| {
        let s = p.settled();
        unserved(&s) == 0 || s.refused_fast as f64 >= 0.99 * unserved(&s) as f64
    });
    ClaimCheck::judged(FAST, measured, holds, "holds if refused-within-10-ms ≥ 99% of (refused + timed out) at 3× among requests due after the warm-up (the schedule's first quarter, left out of goodput too: the overload's onset, before any policy has seen it, is not its steady state); trivially if nobody went unserved; not measured without the point or if the client fell behind")
}

/// No cost below capacity.
pub fn check_below(points: &[Point]) -> ClaimCheck {
    let low: Vec<(&Point, &Point)> = points
        .iter()
        .filter(|p| {
            p.policy == JUDGED
                && p.server == SERVE
                && p.rig == WORK_RIG
                && p.backend == BACKEND
                && p.threads == 1
                && p.multiple <= 0.9
        })
        .filter_map(|p| at(points, "none", 1, p.multiple).map(|n| (p, n)))
        .collect();
    // Below capacity the throughput is the offered rate, so the share of
    // clients served in time says what the control costs (a reply-rate sample
    // over a second of Poisson arrivals would vary by more than 2% by itself).
    let in_time = |p: &Point| p.served_in_time as f64 / p.conns.max(1) as f64;
    let measured = low
        .iter()
        .map(|(g, n)| format!("{}×: {:.1}% of clients served in time vs none {:.1}%, {} refused by the client's count, {} by the server's", g.multiple, 100.0 * in_time(g), 100.0 * in_time(n), g.refused, g.server_refused))
        .collect::<Vec<_>>()
        .join("; ");
    let holds =
        (!low.is_empty() && low.iter().all(|(g, n)| keeps_up(g) && keeps_up(n))).then(|| {
            low.iter().all(|(g, n)| {
                in_time(g) >= in_time(n) - 0.02 && g.refused == 0 && g.server_refused == 0
            })
        });
    ClaimCheck::judged(BELOW, if measured.is_empty() { "no point at ≤ 0.9×".into() } else { measured }, holds, "holds if at every multiple ≤ 0.9× the judged policy serves in time a share of its clients within 2 points of no control's at the same offered rate, and neither client nor server counted a refusal; not measured without such points or if the client fell behind")
}

/// Against seed 001.
pub fn check_beats_seed(points: &[Point]) -> ClaimCheck {
    let (g, s) = (at(points, JUDGED, 1, 3.0), at(points, "seed001", 1, 3.0));
    let measured = match (g, s) {
        (Some(g), Some(s)) => format!("{JUDGED}: {}; seed001: {}", show(g), show(s)),
        _ => "a point is missing".into(),
    };
    let holds = g
        .zip(s)
        .filter(|(g, s)| keeps_up(g) && keeps_up(s))
        .map(|(g, s)| g.goodput_per_s > s.goodput_per_s);
    ClaimCheck::judged(BEATS_SEED, measured, holds, "holds if the judged policy's goodput at 3× exceeds seed001's at 3× in the same run; not measured without both points or if the client fell behind")
}

/// The points of pulse and of nginx's two configurations at `m`.
fn against_nginx(points: &[Point], m: f64) -> [Option<&Point>; 3] {
    [
        at(points, JUDGED, 1, m),
        at_server(points, NGINX, NGINX_DEFAULT, 1, m),
        at_server(points, NGINX, NGINX_TUNED, 1, m),
    ]
}

/// Judges `better(ours, theirs)` at 3× and 5× against both nginx
/// configurations; `describe` says what each point measured.
fn judge_against_nginx(
    points: &[Point],
    claim: &str,
    rule: &str,
    describe: impl Fn(&Point) -> String,
    better: impl Fn(&Point, &Point) -> bool,
) -> ClaimCheck {
    let mut measured = Vec::new();
    let mut holds = Some(true);
    for m in [3.0, 5.0] {
        let [ours, default, tuned] = against_nginx(points, m);
        let show = |p: Option<&Point>| {
            p.map_or("not run".into(), |p| {
                format!(
                    "{}{}",
                    describe(p),
                    if keeps_up(p) {
                        ""
                    } else {
                        " (client fell behind)"
                    }
                )
            })
        };
        measured.push(format!(
            "{m}×: pulse {}; nginx {NGINX_DEFAULT} {}; nginx {NGINX_TUNED} {}",
            show(ours),
            show(default),
            show(tuned)
        ));
        holds = match (ours, default, tuned, holds) {
            (Some(o), Some(d), Some(t), Some(h)) if [o, d, t].iter().all(|p| keeps_up(p)) => {
                Some(h && better(o, d) && better(o, t))
            }
            _ => None,
        };
    }
    ClaimCheck::judged(claim, measured.join("; "), holds, rule)
}

/// Against nginx at 3× and 5×: goodput.
pub fn check_beats_nginx(points: &[Point]) -> ClaimCheck {
    judge_against_nginx(
        points,
        BEATS_NGINX,
        &format!("each server's capacity is the peak goodput of its own uncontrolled sweep in this run (nginx: as the lab configures it); nginx's work is gzip at level 9 of a {} KiB text per request, near evq's {} µs; holds if pulse's goodput share is at least each nginx configuration's less 0.02, at 3× and at 5×; not measured if a point is missing or the client fell behind", NGINX_WORK_BYTES / 1024, WORK.as_micros()),
        |p| format!("{:.0}% of capacity", 100.0 * p.goodput_over_capacity),
        |o, n| o.goodput_over_capacity >= n.goodput_over_capacity - 0.02,
    )
}

/// The share of the clients a point did not serve that learned it within
/// 10 ms (refused fast ÷ refused + timed out) after the warm-up; 1 when it
/// served everyone.
fn fast_share(p: &Point) -> f64 {
    let s = p.settled();
    let unserved = s.refused + s.timed_out;
    if unserved == 0 {
        1.0
    } else {
        s.refused_fast as f64 / unserved as f64
    }
}

/// Against nginx at 3× and 5×: fast refusals.
pub fn check_faster_than_nginx(points: &[Point]) -> ClaimCheck {
    judge_against_nginx(
        points,
        FASTER_THAN_NGINX,
        "share = refused within 10 ms ÷ (refused + timed out) among the requests due after the warm-up; holds if pulse's share exceeds each nginx configuration's at 3× and at 5×; not measured if a point is missing or the client fell behind",
        move |p| {
            let s = p.settled();
            format!(
                "{:.0}% fast ({} refused, {} timed out)",
                100.0 * fast_share(p),
                s.refused,
                s.timed_out
            )
        },
        move |o, n| fast_share(o) > fast_share(n),
    )
}

/// The completion proxy's pulse at 3×, against its probed capacity.
pub fn check_completion_proxy(r: &Records) -> ClaimCheck {
    check_completion(r, PROXY_COMPLETION, COMPLETION_PROXY)
}

/// The completion server's pulse at 3×, against its probed capacity.
pub fn check_completion_serve(r: &Records) -> ClaimCheck {
    check_completion(r, SERVE_COMPLETION, COMPLETION_SERVE)
}

/// A completion loop's (`server`'s) pulse at 3×, against its probed capacity
/// (its `none` sweep has no point near capacity in a quick run, so the probe
/// is the measure here), with `none` beside it, as `claim`.
fn check_completion(r: &Records, server: &str, claim: &str) -> ClaimCheck {
    let key = format!("{WORK_RIG} {server}");
    let capacity = r
        .rig_probes
        .iter()
        .find(|(name, _, threads, _)| *name == key && *threads == 1)
        .map(|p| p.3);
    let pulse = at_server(&r.points, server, JUDGED, 1, 3.0);
    let none = at_server(&r.points, server, "none", 1, 3.0);
    let describe = |p: &Point, cap: f64| {
        let s = p.settled();
        format!(
            "{}: {:.0} replies/s in time ({:.0}% of capacity), {} refused ({} fast), {} timed out after the warm-up",
            p.policy,
            p.goodput_per_s,
            100.0 * p.goodput_per_s / cap,
            s.refused,
            s.refused_fast,
            s.timed_out
        )
    };
    let measured = match (capacity, pulse) {
        (Some(cap), Some(p)) if cap > 0.0 => format!(
            "probed capacity {cap:.0}/s, offered {:.0}/s; {}{}",
            p.offered_per_s,
            describe(p, cap),
            none.map_or(String::new(), |n| format!("; {}", describe(n, cap)))
        ),
        (None, _) => format!("no capacity probe of {server}"),
        _ => "3× with pulse not run".into(),
    };
    let holds = match (capacity, pulse) {
        (Some(cap), Some(p)) if cap > 0.0 && keeps_up(p) => {
            Some(p.goodput_per_s >= 0.9 * cap && fast_share(p) >= 0.95)
        }
        _ => None,
    };
    ClaimCheck::judged(
        claim,
        measured,
        holds,
        &format!("capacity = the closed-loop probe of {server} (32 connections) in this run; holds if pulse's goodput at 3× ≥ 0.90 of it and refused-within-10-ms ≥ 95% of (refused + timed out) after the warm-up; `none` is stated, not judged; not measured without the probe or the point, or if the client started < {:.0}% of its offered rate", 100.0 * CLIENT_KEEPS_UP),
    )
}
