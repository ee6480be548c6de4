//! Figure 8: `evq serve` in this process on one thread, per backend, replies/s
//! under a closed loop as idle connections pile up.

use crate::experiment::{Ctx, RunSize, Sweep};
use crate::rig::in_process::{holding_cold, require_open};
use crate::rig::DeadConnections;
use evq::BackendKind;
use evq_http::ServerHandle;
use evq_load::{run_load, LoadConfig};
use serde::{Deserialize, Serialize};
use std::io;
use std::time::Duration;

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Cold connections, ascending (the first is the baseline).
    pub colds: Vec<usize>,
    /// Closed-loop load per point, seconds.
    pub load_s: f64,
    /// Reply sizes (the last is judged).
    pub reply_sizes: Vec<usize>,
    /// The backends, by name.
    pub backends: Vec<String>,
}

/// One backend at one cold count and reply size.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// Backend name.
    pub backend: String,
    /// Cold connections asked for.
    pub cold: usize,
    /// Cold connections the server held when the load started.
    pub cold_held: u64,
    /// Reply size, bytes.
    pub reply_size: usize,
    /// The load client's reply rate.
    pub replies_per_s: f64,
    /// The load client's p99 latency.
    pub p99_ms: f64,
    /// The server's events per `get_next_event` call.
    pub server_events_per_call: f64,
    /// The load client's errors.
    pub errors: u64,
}

/// The sweep's results.
pub type Records = Sweep<Plan, Point>;

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let (colds, load_s, reply_sizes) = size.pick(
        (vec![0, 50], 0.5, vec![1024]),
        (vec![0, 2000], 1.0, vec![1024]),
        (vec![0, 1000, 2500, 5000, 9000], 4.0, vec![128, 1024]),
    );
    Plan {
        colds,
        load_s,
        reply_sizes,
        backends: BackendKind::candidates()
            .iter()
            .map(|k| k.name().to_string())
            .collect(),
    }
}

/// Every backend at every cold count and reply size.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    crate::resources::raise_nofile()?;
    let load_for = Duration::from_secs_f64(plan.load_s);
    ctx.expect(plan.reply_sizes.len() * plan.colds.len() * plan.backends.len());
    let mut points = Vec::new();
    for &reply in &plan.reply_sizes {
        for &cold in &plan.colds {
            for name in &plan.backends {
                let kind: BackendKind = name.parse()?;
                ctx.step(&format!(
                    "{kind}: {cold} cold connections, {reply} B replies"
                ));
                points.push(point(ctx, kind, cold, reply, load_for)?);
            }
        }
    }
    Ok(Sweep { plan, points })
}

fn point(
    ctx: &Ctx,
    kind: BackendKind,
    cold: usize,
    reply_size: usize,
    load_for: Duration,
) -> io::Result<Point> {
    let server = ServerHandle::start(&holding_cold(kind, reply_size))?;
    let port = server.addr().port();
    let _cold = DeadConnections::start(ctx.tools, port, cold, load_for.as_secs() + 60)?;
    let held = require_open(&server, cold, Duration::from_secs(30), "")?;
    let mut load = LoadConfig::closed("127.0.0.1", port, 32, load_for);
    load.threads = 1;
    let report = run_load(&load)?;
    let stats = server.report();
    let _ = server.stop();
    Ok(Point {
        backend: kind.name().into(),
        cold,
        cold_held: held,
        reply_size,
        replies_per_s: report.reply_rate_avg,
        p99_ms: report.latency_ms.p99,
        server_events_per_call: stats.events_per_call,
        errors: report.errors.total(),
    })
}
