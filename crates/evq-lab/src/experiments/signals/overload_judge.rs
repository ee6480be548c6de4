//! Overload's verdicts (Graphs 3–4): pure functions of the runs.

use super::overload::{Point, CLIENT_KEEPS_UP, NEAR_CAPACITY, PAST_CAPACITY};
use crate::verdict::ClaimCheck;

pub(super) fn collapse_claim(backend: &str) -> String {
    format!("without load limiting, the signal-based server's throughput degrades past its capacity instead of holding (Graph 3's runs without limiting; judged on {backend})")
}

pub(super) fn limited_claim(backend: &str) -> String {
    format!("with load limiting (smoothed events per call, gain 0.3, threshold 18, at most 23 per call; reset new connections above it), throughput levels off near capacity past saturation and the error rate is lower, errors becoming quick resets (Graphs 3–4; judged on {backend})")
}

/// Per (backend, shedding, offered rate), the run with the median replies/s (the
/// lower middle one for an even count), so every field of a point comes from one
/// real run.
pub(super) fn median_runs(runs: &[Point]) -> Vec<Point> {
    let mut out: Vec<Point> = Vec::new();
    for r in runs {
        if out.iter().any(|p| {
            p.backend == r.backend && p.shed == r.shed && p.offered_per_s == r.offered_per_s
        }) {
            continue;
        }
        let mut same: Vec<&Point> = runs
            .iter()
            .filter(|p| {
                p.backend == r.backend && p.shed == r.shed && p.offered_per_s == r.offered_per_s
            })
            .collect();
        same.sort_by(|a, b| a.replies_per_s.total_cmp(&b.replies_per_s));
        out.push(same[(same.len() - 1) / 2].clone());
    }
    out
}

/// The points of one series, by offered rate.
pub(super) fn series<'a>(points: &'a [Point], backend: &str, shed: bool) -> Vec<&'a Point> {
    let mut v: Vec<&Point> = points
        .iter()
        .filter(|p| p.backend == backend && p.shed == shed)
        .collect();
    v.sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    v
}

pub(super) fn keeps_up(p: &Point) -> bool {
    p.client_started_per_s >= CLIENT_KEEPS_UP * p.offered_per_s
}

/// The backend's capacity as seen in the sweep (the best replies/s of either
/// series) and the highest-offered point of the `shed` series that the client
/// kept up with and that lies well past that capacity.
fn judge_point<'a>(
    points: &'a [Point],
    backend: &str,
    shed: bool,
) -> (Option<f64>, Option<&'a Point>) {
    let capacity = points
        .iter()
        .filter(|p| p.backend == backend)
        .map(|p| p.replies_per_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let top = capacity.and_then(|c| {
        series(points, backend, shed)
            .into_iter()
            .rev()
            .find(|p| keeps_up(p) && p.offered_per_s >= PAST_CAPACITY * c)
    });
    (capacity, top)
}

fn resets(p: &Point) -> u64 {
    p.errors_by_kind.get("connreset").copied().unwrap_or(0)
}

fn describe(points: &[Point], backend: &str) -> String {
    let (cap, off) = judge_point(points, backend, false);
    let (_, on) = judge_point(points, backend, true);
    let at = |p: Option<&Point>| {
        match (p, cap) {
        (Some(p), Some(c)) => format!(
            "offered {:.0}/s: {:.0} replies/s ({:.0}% of capacity), {:.0}% errors ({} resets), p99 {:.0} ms",
            p.offered_per_s,
            p.replies_per_s,
            100.0 * p.replies_per_s / c,
            p.error_pct,
            resets(p),
            p.p99_ms
        ),
        _ => format!("no point at ≥ {PAST_CAPACITY}× capacity that the client kept up with"),
    }
    };
    format!(
        "{backend}: capacity seen {:.0} replies/s; without limiting {}; with limiting {}",
        cap.unwrap_or(f64::NAN),
        at(off),
        at(on)
    )
}

/// Graph 3, without limiting: the top point's throughput against capacity.
pub(super) fn check_collapse(points: &[Point], backend: &str, others: &[&str]) -> ClaimCheck {
    let (cap, top) = judge_point(points, backend, false);
    let mut measured = describe(points, backend);
    for o in others {
        measured.push_str("; ");
        measured.push_str(&describe(points, o));
    }
    ClaimCheck::judged(
        &collapse_claim(backend),
        measured,
        cap.zip(top).map(|(c, p)| p.replies_per_s < NEAR_CAPACITY * c),
        &format!(
            "on {backend} without shedding: capacity = the best replies/s either {backend} series reached in the sweep; the judged point is the highest offered rate that is at least {PAST_CAPACITY}× that capacity and that the client kept up with (connections started ≥ {:.0}% of offered). Holds if replies/s there fall below {:.0}% of capacity; differs if they stay at or above it; not measured if no such point exists. Replies/s are counted over the schedule after its first quarter, so replies the server sends after the load stops do not count",
            100.0 * CLIENT_KEEPS_UP,
            100.0 * NEAR_CAPACITY
        ),
    )
}

/// Graphs 3–4, with limiting: throughput held, errors fewer and mostly resets.
pub(super) fn check_limited(points: &[Point], backend: &str) -> ClaimCheck {
    let (cap, top) = judge_point(points, backend, true);
    let unlimited = top.and_then(|t| {
        series(points, backend, false)
            .into_iter()
            .find(|p| (p.offered_per_s - t.offered_per_s).abs() < 0.5)
    });
    let holds = cap.zip(top).zip(unlimited).map(|((c, t), u)| {
        t.replies_per_s >= NEAR_CAPACITY * c
            && 2 * resets(t) >= t.errors
            && t.error_pct <= u.error_pct
    });
    let measured = match cap.zip(top).zip(unlimited) {
        Some(((c, t), u)) => format!(
            "{backend} at offered {:.0}/s ({:.1}× the capacity of {c:.0} replies/s seen): with limiting {:.0} replies/s ({:.0}% of capacity), {:.1}% errors of which {} resets and {} client timeouts, p99 {:.0} ms, server shed {}; without limiting {:.0} replies/s, {:.1}% errors, p99 {:.0} ms",
            t.offered_per_s,
            t.offered_per_s / c,
            t.replies_per_s,
            100.0 * t.replies_per_s / c,
            t.error_pct,
            resets(t),
            t.errors_by_kind.get("client-timo").copied().unwrap_or(0),
            t.p99_ms,
            t.server_shed_resets,
            u.replies_per_s,
            u.error_pct,
            u.p99_ms
        ),
        None => format!(
            "not judged: {}",
            describe(points, backend)
        ),
    };
    ClaimCheck::judged(
        &limited_claim(backend),
        measured,
        holds,
        &format!(
            "on {backend} with shedding, at the highest offered rate at least {PAST_CAPACITY}× capacity that the client kept up with (capacity as in the claim above): holds if (a) replies/s stay at or above {:.0}% of capacity, (b) at least half the failed connections are resets (refused at accept, not left to time out), and (c) the error % is no higher than without shedding at the same offered rate; differs if any fails; not measured without such a point",
            100.0 * NEAR_CAPACITY
        ),
    )
}
