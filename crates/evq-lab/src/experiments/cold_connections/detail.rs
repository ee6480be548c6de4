//! Figure 9 and Table 2 at a fixed cold load (SEEDS 000): response time against
//! offered request rate, and the share of CPU time the server spends in event
//! notification, per backend.
//!
//! One `evq serve` per backend runs in this process on one thread, an `evq dead`
//! child holds the cold connections (from 127.0.0.2), and `evq load` offers an
//! open-loop request rate: one request per connection, started on a fixed
//! schedule whether or not earlier ones finished, like the paper's S-Clients.
//! Every backend's server is started with its cold set first; the rates are then
//! swept upward, each run against every server in an order rotated from rate to
//! rate, so that a drift in the shared machine's load is spread over the
//! backends. Around each run the server's counters are read: its thread's CPU
//! time in total and inside `get_next_event` (`CLOCK_THREAD_CPUTIME_ID`,
//! [`evq_http::ServeReport::wait_cpu_ns`]).

use crate::experiment::{Ctx, RunSize};
use crate::rig::in_process::{holding_cold, require_open};
use crate::rig::DeadConnections;
use evq::BackendKind;
use evq_http::{ServeReport, ServerHandle};
use evq_load::{run_load, LoadConfig};
use serde::{Deserialize, Serialize};
use std::io;
use std::time::{Duration, Instant};

/// The request rate of the paper's Table 2 profile (750 cold, 50 hot, 400 req/s).
pub const TABLE2_RATE: f64 = 400.0;
/// A point "kept up" if it achieved at least this share of the offered rate.
pub const KEPT_UP: f64 = 0.95;
/// The client "kept its schedule" if it started connections at least this fast.
pub const ON_SCHEDULE: f64 = 0.95;

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Cold connections held at every server.
    pub cold: usize,
    /// Offered rates, ascending (requests/s, one per connection).
    pub rates: Vec<f64>,
    /// Seconds of load per rate.
    pub point_s: f64,
    /// The backends, by name.
    pub backends: Vec<String>,
}

/// One offered rate on one backend.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RatePoint {
    /// Backend name.
    pub backend: String,
    /// Cold connections asked for, and open at the server when the run began.
    pub cold: usize,
    /// (open at the server when the run began)
    pub cold_held: u64,
    /// Offered request rate (connections per second, one request each).
    pub offered_rate: f64,
    /// Connections in the schedule.
    pub num_conns: u64,
    /// Connections the client started per second, estimated from its median
    /// start lag: a client that falls steadily behind lags more and more, linearly,
    /// so its last start is about twice the median lag late. Occasional stalls
    /// (the machine is shared) move the median little.
    pub client_start_rate: f64,
    /// How late the client started connections against the schedule.
    pub start_lag_p50_ms: f64,
    /// (99th percentile)
    pub start_lag_p99_ms: f64,
    /// `client_start_rate` under 95% of `offered_rate`: the load client, not the
    /// server, set the pace.
    pub client_limited: bool,
    /// Requests sent.
    pub requests: u64,
    /// Replies received.
    pub replies: u64,
    /// Replies per second over the run (httperf's reply rate: replies over the
    /// time to the last reply, so one late reply at the end lowers it).
    pub reply_rate: f64,
    /// Median of the run's reply-rate samples (0.1 s each under 3 s, else 1 s):
    /// the achieved rate, robust to a stall at the end. What "kept up" and the
    /// peak use.
    pub reply_rate_median: f64,
    /// Latency from each request's scheduled start to its complete reply.
    pub p50_ms: f64,
    /// (99th percentile)
    pub p99_ms: f64,
    /// The load client's errors.
    pub errors: u64,
    /// The client stopped at its time limit with requests outstanding.
    pub cut_off: bool,
    /// Wall time between the two counter snapshots around the run.
    pub wall_s: f64,
    /// Server thread CPU time in the run, and the part inside `get_next_event`.
    pub server_cpu_s: f64,
    /// (inside `get_next_event`)
    pub server_wait_cpu_s: f64,
    /// `server_cpu_s / wall_s`: how busy the server thread was.
    pub server_busy: f64,
    /// `server_wait_cpu_s / wall_s`: event notification's share of one CPU (the
    /// paper's Table 2 measure: its profile is of one CPU, idle time included).
    pub wait_share_of_cpu: f64,
    /// `server_wait_cpu_s / server_cpu_s`: its share of the server's own CPU time.
    pub wait_share_of_server: f64,
    /// Events per `get_next_event` call that returned.
    pub server_events_per_call: f64,
    /// CPU time of this whole process during the run (the load client's thread,
    /// the server's, and the rest) and the part that was not the server's.
    pub process_cpu_s: f64,
    /// (not the server's)
    pub client_cpu_s: f64,
}

impl RatePoint {
    /// Whether the server achieved the offered rate (median of the run's samples).
    pub fn kept_up(&self) -> bool {
        self.reply_rate_median >= KEPT_UP * self.offered_rate
    }
}

/// The sweep's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// Load average (1, 5, 15 min) before the sweep.
    pub loadavg_before: String,
    /// And after it.
    pub loadavg_after: String,
    /// Every backend at every rate.
    pub points: Vec<RatePoint>,
}

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let four: Vec<BackendKind> = [
        BackendKind::SelectClassic,
        BackendKind::SelectImproved,
        BackendKind::Poll,
        BackendKind::Epoll,
    ]
    .into_iter()
    .filter(|k| k.available().is_ok())
    .collect();
    let (cold, rates, point_s, kinds) = size.pick(
        (20, vec![TABLE2_RATE, 1000.0], 0.3, four.clone()),
        (
            750,
            vec![TABLE2_RATE, 2000.0, 4000.0, 6000.0, 8000.0],
            1.0,
            four,
        ),
        (
            750,
            vec![
                TABLE2_RATE,
                1000.0,
                2000.0,
                3000.0,
                4000.0,
                5000.0,
                6500.0,
                8000.0,
                10_000.0,
            ],
            3.0,
            BackendKind::candidates(),
        ),
    );
    Plan {
        cold,
        rates,
        point_s,
        backends: kinds.iter().map(|k| k.name().to_string()).collect(),
    }
}

/// One backend's server with its cold connections held.
struct Rig {
    kind: BackendKind,
    server: ServerHandle,
    held: u64,
    _cold: DeadConnections,
}

fn rig(kind: BackendKind, plan: &Plan, ctx: &Ctx) -> io::Result<Rig> {
    let server = ServerHandle::start(&holding_cold(kind, 1024))?;
    let runs = (plan.rates.len() * plan.backends.len()) as u64;
    let hold_for = runs * (Duration::from_secs_f64(plan.point_s).as_secs() + 5) + 60;
    let cold = DeadConnections::start(ctx.tools, server.addr().port(), plan.cold, hold_for)?;
    ctx.step(&format!("{kind}: opening {} cold connections", plan.cold));
    match require_open(
        &server,
        plan.cold,
        Duration::from_secs(30),
        &format!("{kind}: "),
    ) {
        Ok(held) => Ok(Rig {
            kind,
            server,
            held,
            _cold: cold,
        }),
        Err(e) => {
            let _ = server.stop();
            Err(e)
        }
    }
}

/// Every backend's server is started with its cold connections first; then, rate
/// by rate upward, each server gets its run, in an order rotated from one rate to
/// the next, so that a change in the shared machine's load is spread over the
/// backends instead of landing on whichever ran last.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    crate::resources::raise_nofile()?;
    let loadavg_before = crate::procinfo::loadavg();
    ctx.expect(plan.backends.len() * (1 + plan.rates.len()));
    let mut rigs = Vec::new();
    for name in &plan.backends {
        rigs.push(rig(name.parse()?, &plan, ctx)?);
    }
    let point_for = Duration::from_secs_f64(plan.point_s);
    let mut points = Vec::new();
    for (step, &rate) in plan.rates.iter().enumerate() {
        for k in 0..rigs.len() {
            let r = &rigs[(k + step) % rigs.len()];
            ctx.step(&format!(
                "{}: {} cold connections, {rate} requests/s offered",
                r.kind, plan.cold
            ));
            wait_drained(&r.server, r.held, Duration::from_secs(3));
            points.push(one_rate(r.kind, &r.server, plan.cold, rate, point_for)?);
        }
    }
    for r in rigs {
        let _ = r.server.stop();
    }
    Ok(Records {
        plan,
        loadavg_before,
        loadavg_after: crate::procinfo::loadavg(),
        points,
    })
}

/// Waits until the hot connections of the last run are gone (at most `limit`).
fn wait_drained(server: &ServerHandle, cold: u64, limit: Duration) {
    let since = Instant::now();
    while server.report().open_conns > cold && since.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn one_rate(
    kind: BackendKind,
    server: &ServerHandle,
    cold: usize,
    rate: f64,
    point_for: Duration,
) -> io::Result<RatePoint> {
    let cold_held = server.report().open_conns;
    let num_conns = (rate * point_for.as_secs_f64()).round().max(1.0) as u64;
    let mut load = LoadConfig::open("127.0.0.1", server.addr().port(), rate, num_conns);
    load.num_calls = 1;
    load.threads = 1;
    load.timeout = Some(Duration::from_secs(2));
    load.max_time = Some(point_for + Duration::from_secs(3));
    let before = server.report();
    let t0 = Instant::now();
    let report = run_load(&load)?;
    let after = server.report();
    let wall_s = t0.elapsed().as_secs_f64().max(1e-9);
    let span_s = num_conns as f64 / rate;
    let client_start_rate =
        report.connections as f64 / (span_s + 2.0 * report.start_lag_ms.p50 / 1000.0).max(1e-9);
    let process_cpu_s = report.cpu_user_s + report.cpu_sys_s;
    let d = |a: &ServeReport, b: &ServeReport| {
        (
            b.cpu_ns.saturating_sub(a.cpu_ns) as f64 / 1e9,
            b.wait_cpu_ns.saturating_sub(a.wait_cpu_ns) as f64 / 1e9,
            b.wakeups.saturating_sub(a.wakeups),
            b.events.saturating_sub(a.events),
        )
    };
    let (cpu_s, wait_s, wakeups, events) = d(&before, &after);
    Ok(RatePoint {
        backend: kind.name().into(),
        cold,
        cold_held,
        offered_rate: rate,
        num_conns,
        client_start_rate,
        start_lag_p50_ms: report.start_lag_ms.p50,
        start_lag_p99_ms: report.start_lag_ms.p99,
        client_limited: client_start_rate < ON_SCHEDULE * rate,
        requests: report.requests,
        replies: report.replies,
        reply_rate: report.reply_rate_avg,
        reply_rate_median: crate::stats::median(report.reply_rate.samples.clone())
            .unwrap_or(report.reply_rate_avg),
        p50_ms: report.latency_ms.p50,
        p99_ms: report.latency_ms.p99,
        errors: report.errors.total(),
        cut_off: report.cut_off,
        wall_s,
        server_cpu_s: cpu_s,
        server_wait_cpu_s: wait_s,
        server_busy: cpu_s / wall_s,
        wait_share_of_cpu: wait_s / wall_s,
        wait_share_of_server: if cpu_s > 0.0 { wait_s / cpu_s } else { 0.0 },
        server_events_per_call: if wakeups > 0 {
            events as f64 / wakeups as f64
        } else {
            0.0
        },
        process_cpu_s,
        client_cpu_s: (process_cpu_s - cpu_s).max(0.0),
    })
}
