//! The proxy's verdicts, notes and figure: pure functions of the records.

use super::{Plan, Point};
use crate::experiment::{Judged, Sweep};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `proxy`.
const CAPTION_PROXY: &str = "Proxy replies/s on each backend as cold connections pile up at the proxy, higher is better: the event API should stay flat while select falls.";

const GAIN: &str = "with 2,000 cold connections the explicit event API improves the proxy's maximum throughput by 28% over select (1,348 vs 1,291 req/s over improved select at 750)";
const FLAT: &str =
    "the event-API proxy's throughput does not depend on the number of cold connections (Figure 8)";

const COMPLETION_GAIN: &str = "evq proxy on io_uring completions relays ≥ 1.15× the replies/s of evq proxy on epoll (one thread each, keep-alive origin pool; issue 17)";
const COMPLETION_FLAT: &str = "evq proxy on io_uring completions is flat under cold connections: replies/s with the most cold connections ≥ 0.98× with none (issue 17)";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 4] = [GAIN, FLAT, COMPLETION_GAIN, COMPLETION_FLAT];

fn at(r: &Sweep<Plan, Point>, backend: &str, cold: usize) -> Option<f64> {
    r.points
        .iter()
        .find(|p| p.backend == backend && p.cold == cold)
        .map(|p| p.replies_per_s)
}

/// The ratios of `backend`'s round pairs (the same round at `hi` and at
/// `lo` cold: measured back to back, one moment of the machine).
fn pair_ratios(
    r: &Sweep<Plan, Point>,
    backend: &str,
    lo: usize,
    hi: usize,
) -> Option<crate::stats::Spread> {
    let rounds = |cold| {
        r.points
            .iter()
            .find(|p| p.backend == backend && p.cold == cold)
            .map(|p| p.rounds.clone())
            .unwrap_or_default()
    };
    crate::stats::spread(
        rounds(hi)
            .iter()
            .zip(rounds(lo))
            .map(|(h, l)| h / l)
            .collect(),
    )
}

/// `backend`'s replies/s at `hi` cold over those at `lo`: the median of its
/// round pairs' ratios, or, in records without rounds, the ratio of the
/// points.
fn kept(r: &Sweep<Plan, Point>, backend: &str, lo: usize, hi: usize) -> Option<f64> {
    pair_ratios(r, backend, lo, hi)
        .map(|s| s.median)
        .or_else(|| {
            at(r, backend, hi)
                .zip(at(r, backend, lo))
                .map(|(h, l)| h / l)
        })
}

/// " (median of N round pairs, a–b)": how far one round alone could have
/// swung the verdict. Empty with fewer than two rounds.
fn round_pairs(r: &Sweep<Plan, Point>, backend: &str, lo: usize, hi: usize) -> String {
    match pair_ratios(r, backend, lo, hi) {
        Some(s) if s.n > 1 => format!(
            " (median of {} round pairs, {:.2}–{:.2})",
            s.n, s.min, s.max
        ),
        _ => String::new(),
    }
}

/// Judges the sweep.
pub(super) fn judge(r: &Sweep<Plan, Point>) -> Judged {
    let (lo, hi) = (r.plan.colds[0], *r.plan.colds.last().unwrap_or(&0));
    let ratio = |a: &str, b: &str| at(r, a, hi).zip(at(r, b, hi)).map(|(x, y)| x / y);
    let gain = ratio("epoll", "select");
    let flat = kept(r, "epoll", lo, hi);
    let c = super::COMPLETION;
    let completion_gain = at(r, c, lo).zip(at(r, "epoll", lo)).map(|(x, y)| x / y);
    let completion_flat = kept(r, c, lo, hi);
    let names: Vec<&str> = r.plan.backends.iter().map(String::as_str).collect();
    let figure = Figure::new(
        "proxy",
        CAPTION_PROXY,
        Chart::linear(
            "Proxy throughput vs cold connections".into(),
            "cold connections at the proxy",
            "replies/s",
            Series::named(
                &names,
                &r.points,
                |p: &Point| p.backend.as_str(),
                |p| Some((p.cold as f64, p.replies_per_s)),
            ),
        )
        .evq_where(|_| true),
    );
    Judged {
        checks: vec![
            ClaimCheck::judged(
                GAIN,
                format!(
                    "{hi} cold connections at the proxy: epoll / select = {:.2}, epoll / select-improved = {:.2}",
                    gain.unwrap_or(f64::NAN),
                    ratio("epoll", "select-improved").unwrap_or(f64::NAN)
                ),
                gain.map(|g| g >= 1.28),
                "holds if the epoll-based proxy serves at least 1.28× the replies/s of the classic-select proxy under the same closed-loop load",
            ),
            ClaimCheck::judged(
                FLAT,
                format!(
                    "epoll proxy: replies/s at {hi} cold / at {lo} = {:.2}{}",
                    flat.unwrap_or(f64::NAN),
                    round_pairs(r, "epoll", lo, hi)
                ),
                flat.map(|f| f >= 0.9),
                "holds if at least 90% of the throughput is kept",
            ),
            ClaimCheck::judged(
                COMPLETION_GAIN,
                format!(
                    "{lo} cold connections: completion / epoll = {:.2}",
                    completion_gain.unwrap_or(f64::NAN)
                ),
                completion_gain.map(|g| g >= 1.15),
                "holds if the completion proxy serves at least 1.15× the replies/s of the epoll proxy under the same closed-loop load; not measured on a kernel without the completion API",
            ),
            ClaimCheck::judged(
                COMPLETION_FLAT,
                format!(
                    "completion proxy: replies/s at {hi} cold / at {lo} = {:.2}{}",
                    completion_flat.unwrap_or(f64::NAN),
                    round_pairs(r, c, lo, hi)
                ),
                completion_flat.map(|f| f >= 0.98),
                "holds if at least 98% of the throughput is kept: the median of the round pairs' ratios (a backend's cold counts are measured back to back in each round)",
            ),
        ],
        notes: vec![
            format!(
                "Origin: `evq serve` (epoll, 1 thread, 1 KiB reply); proxy: `evq proxy` with a keep-alive origin pool, one thread, the backend under test (`completion`: `evq proxy --io completion`, io_uring completions); hot load: closed loop, 32 connections, {:.1} s after an untimed {:.1} s; cold: `evq dead` from 127.0.0.2. Each point is the median of {} interleaved round(s): every backend at every cold count once a round (a backend's cold counts back to back, reversed every other round; the backends' order rotated), a fresh proxy each time. The seed's hot clients were WAN-like S-Clients; here the load is on loopback (WAN emulation with `evq wan` is not wired into this scenario).",
                r.plan.load_s, r.plan.warmup_s, r.plan.repeats
            ),
            r.plan.placement.clone(),
        ]
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect(),
        commands: vec![
            "evq serve --backend epoll --listen 127.0.0.1:O; evq proxy --backend B --origin 127.0.0.1:O --listen 127.0.0.1:P (or --io completion)".into(),
            format!(
                "evq dead --port P --connections N --source 127.0.0.2 (N in {:?}); evq load --port P --connections 32 --duration {} ({} rounds)",
                r.plan.colds, r.plan.load_s, r.plan.repeats
            ),
        ],
        figures: vec![figure],
    }
}

#[cfg(test)]
mod tests;
