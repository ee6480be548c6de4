//! The proxy on each backend at each cold count, in front of one origin.
//!
//! Three threads do the work here — the proxy's, the origin's and the load's —
//! and on a 2-CPU machine the scheduler decided from moment to moment which two
//! shared a core: unplaced, one-second points of the same proxy ran from 38,000
//! to 60,000 replies/s, and the "flat under cold connections" ratios came out
//! 0.92, 1.21, 1.42 in three runs. So the proxy and its origin run on the
//! server CPU and the load on the client CPU (`placement.rs`): the proxy is
//! then most of the work on the CPU that sets the rate (the origin's share is
//! the same for every backend), as a server is beside its client elsewhere in
//! the lab. (The proxy alone on one CPU, with the origin beside the load, left
//! the other CPU the limit: every backend read ~63,000 replies/s at no cold
//! connections, and nothing about the proxy could show.) Each round starts
//! with an untimed warm-up, and every point is measured `repeats` times in
//! interleaved rounds (every backend at every cold count once a round: a
//! backend's cold counts back to back, in reverse order every other round;
//! the backends' order rotated), its figure the median; the cold-flatness
//! verdicts read the median of the round pairs' own ratios.

use super::{Plan, Point, COMPLETION};
use crate::experiment::Ctx;
use crate::experiment::Sweep;
use crate::placement::{placement, ThreadPin};
use crate::rig::DeadConnections;
use evq::BackendKind;
use evq_http::{IoModel, ProxyConfig, ProxyHandle, ServerHandle};
use evq_load::{run_load, LoadConfig};
use std::io;
use std::time::{Duration, Instant};

pub(super) fn run(mut plan: Plan, ctx: &Ctx) -> io::Result<Sweep<Plan, Point>> {
    crate::resources::raise_nofile()?;
    plan.placement = match placement() {
        Some(p) => format!(
            "The proxy and the origin pinned to CPU {}, the load client to CPU {} (sched_setaffinity; cold-connection holders unpinned).",
            p.server, p.client
        ),
        None => crate::placement::describe(),
    };
    let origin = {
        // The origin's thread inherits this pin: it shares the server CPU
        // with the proxy, the same share for every backend.
        let _pin = ThreadPin::to(placement().map(|p| p.server));
        ServerHandle::start(&crate::rig::in_process::one_thread(
            BackendKind::Epoll,
            1024,
        ))?
    };
    let repeats = plan.repeats.max(1);
    ctx.expect(repeats * plan.colds.len() * plan.backends.len());
    // A point per backend and cold count, its rounds in the order measured.
    let mut points: Vec<Point> = Vec::new();
    for round in 0..repeats {
        let n = plan.backends.len();
        for k in 0..n {
            let name = &plan.backends[(k + round) % n];
            // A backend's cold counts back to back, so the rounds compared
            // see the same moment of the machine; every other round in the
            // reverse order, so a drift within one cancels out.
            let mut colds = plan.colds.clone();
            if round % 2 == 1 {
                colds.reverse();
            }
            for cold in colds {
                ctx.step(&format!(
                    "proxy on {name}: {cold} cold connections, round {} of {repeats}",
                    round + 1
                ));
                let one = point(ctx, &plan, name, origin.addr(), cold)?;
                match points
                    .iter_mut()
                    .find(|p| p.backend == *name && p.cold == cold)
                {
                    Some(p) => merge(p, one),
                    None => points.push(one),
                }
            }
        }
    }
    let _ = origin.stop();
    points.sort_by_key(|p| {
        let b = plan.backends.iter().position(|b| *b == p.backend);
        let c = plan.colds.iter().position(|&c| c == p.cold);
        (c, b)
    });
    Ok(Sweep { plan, points })
}

/// Adds round `one` to point `p`: the rate becomes the median of the rounds,
/// p99 the worst, errors and relayed requests the sums.
fn merge(p: &mut Point, one: Point) {
    p.rounds.extend(one.rounds);
    p.replies_per_s = crate::stats::median(p.rounds.clone()).unwrap_or(f64::NAN);
    p.p99_ms = p.p99_ms.max(one.p99_ms);
    p.errors += one.errors;
    p.relayed += one.relayed;
}

/// One round of the proxy named `name` (a backend, or [`COMPLETION`]) at one
/// cold count.
fn point(
    ctx: &Ctx,
    plan: &Plan,
    name: &str,
    origin: std::net::SocketAddr,
    cold: usize,
) -> io::Result<Point> {
    let (backend, io) = if name == COMPLETION {
        (None, IoModel::Completion)
    } else {
        (Some(name.parse::<BackendKind>()?), IoModel::Readiness)
    };
    let cfg = ProxyConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        origin,
        backend,
        io,
        idle_timeout: Duration::from_secs(600),
        ..ProxyConfig::default()
    };
    let proxy = {
        let _pin = ThreadPin::to(placement().map(|p| p.server));
        ProxyHandle::start(&cfg)?
    };
    let port = proxy.addr().port();
    let held_for = (plan.warmup_s + plan.load_s) as u64 + 60;
    let _cold = DeadConnections::start(ctx.tools, port, cold, held_for)?;
    // The proxy's counters do not say what it holds; the kernel's table does.
    let ramp = Instant::now();
    while crate::procinfo::established_to(port) < cold {
        if ramp.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{name}: only {} of {cold} cold connections came up",
                    crate::procinfo::established_to(port)
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The load's threads inherit this pin (dropped after the load).
    let _pin = crate::placement::pin_this_thread_as_client();
    let load = |seconds: f64| {
        let mut load = LoadConfig::closed("127.0.0.1", port, 32, Duration::from_secs_f64(seconds));
        load.threads = 1;
        run_load(&load)
    };
    if plan.warmup_s > 0.0 {
        load(plan.warmup_s)?;
    }
    let report = load(plan.load_s)?;
    let stats = proxy.stop();
    Ok(Point {
        backend: name.into(),
        cold,
        replies_per_s: report.reply_rate_avg,
        rounds: vec![report.reply_rate_avg],
        p99_ms: report.latency_ms.p99,
        errors: report.errors.total(),
        relayed: stats.relayed,
    })
}
