//! The load clients side by side on the larger machine (issue 17): `evq load`
//! against wrk, and `evq load --io completion` against `evq load`, each with
//! its threads on CPUs of its own against an nginx it cannot keep busy — the
//! client is the limit, which a 2-CPU machine cannot arrange.

use super::{ClientPoint, Records};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// Closed loop against wrk.
pub const CLOSED_LOOP: &str = "evq load's closed loop replies at least as fast as wrk at the same threads and connections, each client on CPUs of its own against a server it cannot keep busy (issue 17, a lent 16-CPU machine)";
/// CPU per reply on completions.
pub const CPU: &str = "evq load --io completion spends at most 0.9× the CPU per reply of evq load on epoll at the same threads and connections (issue 17, a lent 16-CPU machine)";
/// evq load over wrk, asked.
pub const OVER_WRK: f64 = 1.0;
/// Completion CPU per reply over epoll's, at most.
pub const CPU_SHARE: f64 = 0.9;
/// The clients, as `scripts/load-client-run` names them.
pub const CLIENTS: [&str; 3] = ["wrk", "evq-load", "evq-load-completion"];

fn of<'a>(r: &'a Records, client: &'a str, t: u32) -> impl Iterator<Item = &'a ClientPoint> {
    r.clients
        .iter()
        .filter(move |p| p.client == client && p.threads == t && p.replies > 0)
}

/// Mean replies per second of `client` at `t` threads over the rounds.
pub fn rate(r: &Records, client: &str, t: u32) -> Option<f64> {
    let v: Vec<f64> = of(r, client, t).map(|p| p.replies_per_s).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// CPU microseconds per reply of `client` at `t` threads, pooled over the
/// rounds.
pub fn cpu_us(r: &Records, client: &str, t: u32) -> Option<f64> {
    let (cpu, replies) =
        of(r, client, t).fold((0.0, 0u64), |(c, n), p| (c + p.cpu_s, n + p.replies));
    (replies > 0).then(|| cpu * 1e6 / replies as f64)
}

fn threads(r: &Records) -> Vec<u32> {
    let mut t: Vec<u32> = r.clients.iter().map(|p| p.threads).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// Judges `ours` against `theirs` by `value` at every thread count; `holds`
/// decides a ratio.
fn compare(
    r: &Records,
    claim: &str,
    (ours, theirs): (&str, &str),
    value: fn(&Records, &str, u32) -> Option<f64>,
    unit: &str,
    holds_at: fn(f64) -> bool,
    rule: &str,
) -> ClaimCheck {
    let mut measured = Vec::new();
    let mut holds = None;
    let mut missing = false;
    for t in threads(r) {
        let (Some(a), Some(b)) = (value(r, ours, t), value(r, theirs, t)) else {
            measured.push(format!("{t} threads: {ours} or {theirs} has no replies"));
            missing = true;
            continue;
        };
        measured.push(format!(
            "{t} thread{}: {ours} {a:.1}{unit}, {theirs} {b:.1}{unit} ({:.2}×)",
            if t == 1 { "" } else { "s" },
            a / b
        ));
        holds = Some(holds.unwrap_or(true) && holds_at(a / b));
    }
    if measured.is_empty() {
        measured.push("no load-client run recorded".into());
    }
    ClaimCheck::judged(claim, measured.join("; "), holds.filter(|_| !missing), rule)
}

/// evq load's closed loop against wrk.
pub fn check_closed_loop(r: &Records) -> ClaimCheck {
    compare(
        r,
        CLOSED_LOOP,
        ("evq-load", "wrk"),
        |r, c, t| rate(r, c, t).map(|v| v / 1e3),
        "k replies/s",
        |x| x >= OVER_WRK,
        "mean replies/s over the rounds (`scripts/load-client-run`: 50 connections per client thread, keep-alive, a 1 KiB file from nginx with 8 workers on CPUs of their own); holds if evq load ≥ wrk at every thread count",
    )
}

/// evq load on completions against evq load on epoll, CPU per reply.
pub fn check_cpu(r: &Records) -> ClaimCheck {
    compare(
        r,
        CPU,
        ("evq-load-completion", "evq-load"),
        cpu_us,
        " µs CPU/reply",
        |x| x <= CPU_SHARE,
        "the client's user + system CPU (the shell's `times`) ÷ its replies, pooled over the rounds; holds if ≤ 0.9× at every thread count",
    )
}

/// Replies per second of each client against its threads.
pub fn figures(r: &Records) -> Vec<Figure> {
    if r.clients.is_empty() {
        return Vec::new();
    }
    let series = CLIENTS
        .iter()
        .map(|c| Series {
            name: (*c).into(),
            points: threads(r)
                .into_iter()
                .filter_map(|t| rate(r, c, t).map(|v| (f64::from(t), v)))
                .collect(),
            evq: c.starts_with("evq"),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    vec![Figure::new(
        "multicore-clients",
        "Load clients on a 16-CPU machine, closed loop, 1 KiB keep-alive from nginx with 8 workers: replies per second against the client's threads (each on a CPU of its own).",
        Chart::linear(
            "load clients (a lent 16-CPU machine)".into(),
            "client threads",
            "replies/s",
            series,
        ),
    )]
}
