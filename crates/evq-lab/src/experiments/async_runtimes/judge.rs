//! The async verdicts: per-round ratios of evq-async to tokio's current-thread
//! runtime (the contenders run interleaved, so a round's ratio cancels most of a
//! shared machine's drift), and callgrind's instructions per request.

use super::{CallgrindRecord, Records, RunRecord};
use crate::experiment::Judged;
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

const HYPER: &str = "hyper 1.x on evq-async serves 1 KiB keep-alive replies to 100 connections at least as fast as on tokio (current-thread, the same one-worker shape): req/s ≥ 1.0× and p99 latency ≤ tokio's, with no client errors";
const ECHO: &str = "a 64-byte echo ping-pong on evq-async keeps up with tokio (current-thread) on 1 and on 1,000 connections: req/s ≥ 1.0×, with no client errors";
const INSTRUCTIONS: &str = "evq-async costs the server no more instructions per request than tokio (current-thread) does, on every workload (callgrind: the figure a shared machine cannot move)";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 3] = [HYPER, ECHO, INSTRUCTIONS];

const OURS: &str = "evq-async";
const BASELINE: &str = "tokio-ct";

pub(super) fn judge(r: &Records) -> Judged {
    let mut judged = Judged::default();
    judged.extend(r.runs.judge(
        &[HYPER.to_string(), ECHO.to_string()],
        "bench_async run did not complete",
        |runs| Judged {
            checks: vec![hyper(runs), echo(runs)],
            figures: figures(runs, &r.plan.workloads, &r.plan.runtimes),
            ..Judged::default()
        },
    ));
    judged.extend(r.callgrind.judge(
        &[INSTRUCTIONS.to_string()],
        "bench_async callgrind did not complete",
        |cg| Judged {
            checks: vec![instructions(cg)],
            ..Judged::default()
        },
    ));
    judged.notes.push(format!(
        "bench_async (an example of the evq-async crate): the same hyper 1.x service and echo server on each runtime; hyper loaded by wrk (100 connections, 1 KiB bodies), echo by a closed-loop client (64 bytes, 1 and 1,000 connections). Server pinned to CPU 0 and client to CPU 1 where two CPUs are allowed, so every runtime runs its one-worker configuration; a fresh server per measurement; the order of contenders rotates each round. {} round(s) of {} s after {} s of warm-up. Ratios are taken within a round, then the median over rounds. Load average at the start: {}.",
        r.plan.rounds, r.plan.seconds, r.plan.warmup, r.loadavg
    ));
    judged.commands.push(format!(
        "cargo run --release -p evq-async --example bench_async -- run --rounds {} --seconds {} --warmup {}",
        r.plan.rounds, r.plan.seconds, r.plan.warmup
    ));
    if let Some((_, w, c)) = r.plan.callgrind.first() {
        judged.commands.push(format!(
            "cargo run --release -p evq-async --example bench_async -- callgrind --runtime evq-async --workload {w} --connections {c} --requests {}",
            r.plan.callgrind_requests
        ));
    }
    judged
}

/// Per-round ratios `f(ours) / f(baseline)` on `workload`, in round order.
fn ratios(runs: &[RunRecord], workload: &str, f: fn(&RunRecord) -> f64) -> Vec<f64> {
    let of = |runtime: &str, round: u32| {
        runs.iter()
            .find(|r| r.workload == workload && r.runtime == runtime && r.round == round)
    };
    let mut rounds: Vec<u32> = runs
        .iter()
        .filter(|r| r.workload == workload)
        .map(|r| r.round)
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds
        .into_iter()
        .filter_map(|round| {
            let (a, b) = (of(OURS, round)?, of(BASELINE, round)?);
            let (x, y) = (f(a), f(b));
            (x.is_finite() && y.is_finite() && y > 0.0).then_some(x / y)
        })
        .collect()
}

/// A claim with nothing to compare: no measurement of evq-async has its
/// tokio-ct counterpart.
fn unpaired(claim: &str, what: &str) -> ClaimCheck {
    ClaimCheck::judged(
        claim,
        what.to_string(),
        None,
        "no pair of measurements, no ratio",
    )
}

fn median(v: &[f64]) -> Option<f64> {
    crate::stats::median(v.to_vec())
}

fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.2}–{hi:.2}")
}

fn errors(runs: &[RunRecord], workload: &str) -> u64 {
    runs.iter()
        .filter(|r| r.workload == workload && r.runtime == OURS)
        .map(|r| r.errors)
        .sum()
}

fn hyper(runs: &[RunRecord]) -> ClaimCheck {
    let rps = ratios(runs, "hyper", |r| r.req_per_s);
    let p99 = ratios(runs, "hyper", |r| r.p99_us as f64);
    let errs = errors(runs, "hyper");
    let (Some(m_rps), Some(m_p99)) = (median(&rps), median(&p99)) else {
        return unpaired(
            HYPER,
            "no round measured both evq-async and tokio-ct on hyper",
        );
    };
    ClaimCheck::judged(
        HYPER,
        format!(
            "evq-async ÷ tokio-ct, median of {} per-round ratios: req/s ×{m_rps:.2} (rounds {}), p99 ×{m_p99:.2} (rounds {}); {errs} client errors on evq-async",
            rps.len(),
            range(&rps),
            range(&p99)
        ),
        Some(m_rps >= 1.0 && m_p99 <= 1.0 && errs == 0),
        "holds when the median per-round req/s ratio is at least 1.0, the median p99 ratio at most 1.0, and evq-async's clients saw no error",
    )
}

fn echo(runs: &[RunRecord]) -> ClaimCheck {
    let parts: Vec<(&str, Vec<f64>, u64)> = ["echo1", "echo1000"]
        .into_iter()
        .map(|w| (w, ratios(runs, w, |r| r.req_per_s), errors(runs, w)))
        .filter(|(_, v, _)| !v.is_empty())
        .collect();
    if parts.is_empty() {
        return unpaired(
            ECHO,
            "no round measured both evq-async and tokio-ct on an echo workload",
        );
    }
    let measured = parts
        .iter()
        .map(|(w, v, e)| {
            format!(
                "{w}: req/s ×{:.2} (median of {}, rounds {}), {e} errors",
                median(v).unwrap_or(f64::NAN),
                v.len(),
                range(v)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let holds = parts.len() == 2
        && parts
            .iter()
            .all(|(_, v, e)| median(v).is_some_and(|m| m >= 1.0) && *e == 0);
    ClaimCheck::judged(
        ECHO,
        format!("evq-async ÷ tokio-ct, {measured}"),
        Some(holds),
        "holds when both echo workloads were measured and on each the median per-round req/s ratio is at least 1.0 with no client error",
    )
}

fn instructions(cg: &[CallgrindRecord]) -> ClaimCheck {
    let of = |runtime: &str, w: &str, c: u32| {
        cg.iter()
            .find(|r| r.runtime == runtime && r.workload == w && r.connections == c)
            .map(|r| r.instructions_per_request)
    };
    let mut pairs = Vec::new();
    for r in cg.iter().filter(|r| r.runtime == OURS) {
        if let Some(base) = of(BASELINE, &r.workload, r.connections) {
            pairs.push((r, base));
        }
    }
    if pairs.is_empty() {
        return unpaired(
            INSTRUCTIONS,
            "no workload measured under callgrind on both evq-async and tokio-ct",
        );
    }
    let measured = pairs
        .iter()
        .map(|(r, base)| {
            format!(
                "{} ({} conn): {:.0} ÷ {:.0} = {:.2}",
                r.workload,
                r.connections,
                r.instructions_per_request,
                base,
                r.instructions_per_request / base
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    ClaimCheck::judged(
        INSTRUCTIONS,
        format!("server instructions per request, evq-async ÷ tokio-ct: {measured}"),
        Some(
            pairs
                .iter()
                .all(|(r, base)| r.instructions_per_request <= *base),
        ),
        "holds when evq-async's count is at most tokio-ct's on every workload measured on both",
    )
}

fn figures(runs: &[RunRecord], workloads: &[String], runtimes: &[String]) -> Vec<Figure> {
    let names: Vec<&str> = runtimes.iter().map(String::as_str).collect();
    workloads
        .iter()
        .map(|w| {
            let items: Vec<&RunRecord> = runs.iter().filter(|r| &r.workload == w).collect();
            let series = Series::named(
                &names,
                &items,
                |r| r.runtime.as_str(),
                |r| Some((r.round as f64, r.req_per_s)),
            );
            let what = match w.as_str() {
                "hyper" => "hyper 1.x, 1 KiB keep-alive, 100 wrk connections",
                "echo1" => "64-byte echo ping-pong, 1 connection",
                _ => "64-byte echo ping-pong, 1,000 connections",
            };
            Figure::new(
                &format!("async-{w}"),
                &format!("{what}: replies per second in each round, every runtime measured in the same round one after another (higher is better; compare the points of one round, not rounds with each other — the machine is shared)."),
                Chart::linear(
                    format!("{what}: req/s per round"),
                    "round",
                    "replies per second",
                    series,
                )
                .evq_where(|n| n == OURS),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
