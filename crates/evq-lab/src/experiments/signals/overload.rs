//! Experiment 4, second half (SEEDS 001, Graphs 3–4): overload. `evq serve` on
//! the RT-signal backends (epoll beside them as the reference), one thread, with
//! and without seed 001's load limiting, driven by an open-loop `evq load` from
//! below to well past its capacity. Does the server without limiting degrade past
//! capacity, and does the one with limiting hold its throughput and turn errors into
//! quick resets?
//!
//! The sweep adapts to the machine: a short closed-loop probe per backend finds the
//! capacity first, and the offered rates are multiples of the largest probe.
//!
//! On loopback the client spends more CPU per connection than the server, so on a
//! small machine an unhindered server can never be offered more than it can take.
//! The server's one thread is therefore given a fixed CPU budget
//! ([`BUDGET_RUNTIME`] in every [`BUDGET_PERIOD`], `SCHED_DEADLINE`): a server
//! machine that much slower than its client, as the seed had a client machine
//! beside its server. Where the kernel refuses the budget, the sweep runs without
//! it and the client's own lag decides which points count.

use crate::experiment::{Ctx, RunSize};
use evq::BackendKind;
use evq_http::{ServeConfig, ServerHandle, ShedConfig};
use evq_load::{run_load, ErrorKind, LoadConfig, LoadReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

/// CPU the server's thread may use in every [`BUDGET_PERIOD`].
pub const BUDGET_RUNTIME: Duration = Duration::from_micros(100);
/// Period of the server's CPU budget.
pub const BUDGET_PERIOD: Duration = Duration::from_millis(1);
/// The name `ServerHandle` gives its first (here: only) worker thread.
const SERVER_THREAD: &str = "evq-serve-0";

/// Connections of the closed-loop capacity probe.
pub const PROBE_CONNECTIONS: usize = 32;
/// Reply size: seed 001 fetched a 1 KB document.
pub const REPLY_SIZE: usize = 1024;
/// The client keeps up if it started connections at least at this share of the
/// offered rate.
pub const CLIENT_KEEPS_UP: f64 = 0.9;
/// "Well past capacity": offered at least this multiple of the measured capacity.
pub const PAST_CAPACITY: f64 = 2.0;
/// Below this share of capacity, throughput has degraded; at or above it, it
/// stayed near capacity.
pub const NEAR_CAPACITY: f64 = 0.8;

/// How big the sweep is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Backends asked for, the judged one first.
    pub backends: Vec<String>,
    /// Length of each capacity probe, seconds.
    pub probe_s: f64,
    /// Offered rates as multiples of the probed capacity.
    pub multiples: Vec<f64>,
    /// Length of each open-loop schedule, seconds.
    pub window_s: f64,
    /// The client's timeout, seconds.
    pub timeout_s: f64,
    /// Runs per point; the point is the median run.
    pub reps: usize,
}

/// The capacity probe of one backend.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Probe {
    /// Backend name.
    pub backend: String,
    /// Whether the server ran under the CPU budget.
    pub server_budget: bool,
    /// Closed-loop connections.
    pub connections: usize,
    /// Length of the probe, seconds.
    pub seconds: f64,
    /// The capacity it found.
    pub replies_per_s: f64,
    /// The load client's errors.
    pub errors: u64,
    /// Server thread CPU per connection started, microseconds.
    pub server_cpu_us_per_conn: Option<f64>,
    /// The rest of the process (the load client) per connection, microseconds.
    pub client_cpu_us_per_conn: Option<f64>,
}

/// One measured point of the sweep.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// Backend name.
    pub backend: String,
    /// Whether the server shed load (`--shed`).
    pub shed: bool,
    /// Which run of the point this is (0-based).
    pub rep: usize,
    /// Offered rate as a multiple of the probed capacity.
    pub multiple: f64,
    /// Connections (one request each) per second the schedule asked for.
    pub offered_per_s: f64,
    /// Connections in the schedule.
    pub conns: u64,
    /// Length of the schedule, seconds.
    pub window_s: f64,
    /// Connections the client started per second, at least: connections started /
    /// (window + the largest start lag). Below the offered rate, the client was the
    /// limit. (Requests follow once a connection is up, which an overloaded server
    /// may never let happen, so they measure the server, not the client.)
    pub client_started_per_s: f64,
    /// The client's start lag against its schedule, milliseconds.
    pub start_lag_p99_ms: f64,
    /// Largest start lag, milliseconds.
    pub start_lag_max_ms: f64,
    /// Replies received, in all.
    pub replies: u64,
    /// Replies per second during the schedule, after its first quarter (warm-up).
    pub replies_per_s: f64,
    /// Replies in all over the schedule's length (includes replies that came in the
    /// tail after the last connection started).
    pub replies_per_s_whole: f64,
    /// Whether the server ran under the CPU budget.
    pub server_budget: bool,
    /// Failed connections.
    pub errors: u64,
    /// Failed connections per connection started, percent.
    pub error_pct: f64,
    /// Failures by `evq load`'s kind (only the kinds seen).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Reply latency from the intended start, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile of the same.
    pub p99_ms: f64,
    /// Connections the server accepted (including those it then reset).
    pub server_accepts: u64,
    /// Connections the server reset because its load limiter said overloaded.
    pub server_shed_resets: u64,
    /// Requests the server parsed.
    pub server_requests: u64,
    /// Responses the server sent (whether or not the client was still there).
    pub server_responses: u64,
    /// Events per `get_next_event` call in the server.
    pub server_events_per_call: f64,
    /// Server thread CPU over the load run's wall time (the budget caps it).
    pub server_cpu_share: Option<f64>,
    /// Server thread CPU per connection started, microseconds.
    pub server_cpu_us_per_conn: Option<f64>,
    /// The rest of the process (the load client) per connection, microseconds.
    pub client_cpu_us_per_conn: Option<f64>,
}

/// The sweep's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// The backends available here (the first is judged).
    pub backends: Vec<String>,
    /// The capacity probes.
    pub probes: Vec<Probe>,
    /// The largest probe's replies/s: what the multiples multiply.
    pub capacity: f64,
    /// The descriptor limit the rates were capped by.
    pub fd_limit: f64,
    /// The highest rate the descriptor limit allows.
    pub rate_cap: f64,
    /// (multiple, rate) pairs the cap lowered.
    pub capped: Vec<(f64, f64)>,
    /// Why the CPU budget was not applied, run by run (empty: it always was).
    pub refusals: Vec<String>,
    /// The server thread's CPU budget: runtime per period, microseconds.
    pub budget_us: (u64, u64),
    /// The load limiter of `--shed`: gain, threshold, most events per call.
    pub shed: (f64, f64, usize),
    /// Every run.
    pub runs: Vec<Point>,
}

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let (backends, probe_s, multiples, window_s, timeout_s, reps): (&[&str], _, &[f64], _, _, _) =
        size.pick(
            (&["rtsig-bulk"], 0.3, &[0.5, 2.0], 0.4, 0.3, 1),
            (
                &["rtsig-bulk", "epoll"],
                0.5,
                &[0.5, 1.0, 2.0, 3.0],
                1.2,
                0.4,
                1,
            ),
            (
                &["rtsig-bulk", "rtsig", "epoll"],
                2.0,
                &[0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
                3.0,
                1.0,
                3,
            ),
        );
    Plan {
        backends: backends.iter().map(|b| b.to_string()).collect(),
        probe_s,
        multiples: multiples.to_vec(),
        window_s,
        timeout_s,
        reps,
    }
}

/// Probes each backend's capacity, then runs every (backend, shedding) pair at
/// every multiple of it, rotated from run to run.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    crate::resources::raise_nofile()?;
    let kinds: Vec<BackendKind> = plan
        .backends
        .iter()
        .filter_map(|n| n.parse::<BackendKind>().ok())
        .filter(|k| k.available().is_ok())
        .collect();
    if kinds.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "none of the backends is available here",
        ));
    }
    ctx.expect(kinds.len() + plan.reps * plan.multiples.len() * 2 * kinds.len());
    let mut probes = Vec::new();
    let mut refusals = Vec::new();
    for &kind in &kinds {
        ctx.step(&format!("overload: capacity probe on {kind}"));
        probes.push(probe(
            kind,
            Duration::from_secs_f64(plan.probe_s),
            &mut refusals,
        )?);
    }
    let capacity = probes.iter().map(|p| p.replies_per_s).fold(0.0, f64::max);
    if capacity <= 0.0 {
        return Err(io::Error::other("the capacity probe got no replies"));
    }
    let fd_limit = crate::resources::raise_nofile()? as f64;
    // Client and server share this process's descriptors: each in-flight
    // connection may hold two for up to the timeout. Keep a quarter spare.
    let rate_cap = 0.75 * fd_limit / (2.0 * plan.timeout_s);
    let combos: Vec<(BackendKind, bool)> = kinds
        .iter()
        .flat_map(|&k| [(k, false), (k, true)])
        .collect();
    let mut capped = Vec::new();
    let rates: Vec<(f64, f64)> = plan
        .multiples
        .iter()
        .map(|&m| {
            let rate = (m * capacity).round().max(1.0);
            if rate > rate_cap {
                capped.push((m, rate));
                (m, rate_cap.floor())
            } else {
                (m, rate)
            }
        })
        .collect();
    let mut runs = Vec::new();
    for rep in 0..plan.reps {
        for (step, &(m, rate)) in rates.iter().enumerate() {
            for i in 0..combos.len() {
                let (kind, shed) = combos[(i + step + rep) % combos.len()];
                ctx.step(&format!(
                    "overload: run {}/{} {kind} shed {} at {rate:.0}/s ({m}× capacity)",
                    rep + 1,
                    plan.reps,
                    if shed { "on" } else { "off" }
                ));
                runs.push(run(kind, shed, rep, m, rate, &plan, &mut refusals)?);
            }
        }
    }
    Ok(Records {
        backends: kinds.iter().map(|k| k.name().to_string()).collect(),
        plan,
        probes,
        capacity,
        fd_limit,
        rate_cap,
        capped,
        refusals,
        budget_us: (
            BUDGET_RUNTIME.as_micros() as u64,
            BUDGET_PERIOD.as_micros() as u64,
        ),
        shed: {
            let s = ShedConfig::default();
            (s.gain, s.threshold, s.max_events)
        },
        runs,
    })
}

fn server_config(kind: BackendKind, shed: bool) -> ServeConfig {
    ServeConfig {
        shed: shed.then(ShedConfig::default),
        grace: Duration::from_millis(100),
        ..crate::rig::in_process::one_thread(kind, REPLY_SIZE)
    }
}

/// A started server: its handle, its thread's id if found, and why the CPU
/// budget could not be set, if it could not.
struct Started {
    server: ServerHandle,
    tid: Option<libc::pid_t>,
    refused: Option<String>,
}

/// Starts the server and puts its thread on the CPU budget.
fn start(kind: BackendKind, shed: bool) -> io::Result<Started> {
    let server = ServerHandle::start(&server_config(kind, shed))?;
    let tid = crate::procinfo::thread_named(SERVER_THREAD, Duration::from_secs(1));
    let refused = match tid {
        None => Some(format!("no single {SERVER_THREAD} thread found")),
        Some(tid) => crate::resources::limit_thread_cpu(tid, BUDGET_RUNTIME, BUDGET_PERIOD)
            .err()
            .map(|e| format!("SCHED_DEADLINE refused: {e}")),
    };
    Ok(Started {
        server,
        tid,
        refused,
    })
}

/// The server thread's CPU time now, if it can be read.
fn server_cpu(tid: Option<libc::pid_t>) -> Option<Duration> {
    tid.and_then(|t| crate::resources::thread_cpu_time(t).ok())
}

/// CPU of the server thread and of the rest of the process (the client) during a
/// load run, in microseconds per connection started.
fn cpu_split(
    report: &LoadReport,
    server: Option<(Duration, Duration)>,
) -> (Option<f64>, Option<f64>) {
    let conns = report.connections.max(1) as f64;
    let server_s = server.map(|(a, b)| b.saturating_sub(a).as_secs_f64());
    let process_s = report.cpu_user_s + report.cpu_sys_s;
    (
        server_s.map(|s| s * 1e6 / conns),
        server_s.map(|s| (process_s - s).max(0.0) * 1e6 / conns),
    )
}

/// Stops the server and returns its counters, or the error that ended its worker.
fn finish(server: ServerHandle) -> io::Result<evq_http::ServeReport> {
    server.request_stop();
    server.wait()
}

/// Closed loop, one request per connection (the sweep's work), no shedding.
fn probe(kind: BackendKind, length: Duration, refusals: &mut Vec<String>) -> io::Result<Probe> {
    let Started {
        server,
        tid,
        refused,
    } = start(kind, false)?;
    let server_budget = refused.is_none();
    refusals.extend(refused);
    let mut load = LoadConfig::closed("127.0.0.1", server.addr().port(), PROBE_CONNECTIONS, length);
    load.num_calls = 1;
    load.hog = true;
    load.timeout = Some(Duration::from_secs(2));
    let cpu0 = server_cpu(tid);
    let report = run_load(&load);
    let cpu = cpu0.zip(server_cpu(tid));
    finish(server)?;
    let report = report?;
    let (server_us, client_us) = cpu_split(&report, cpu);
    Ok(Probe {
        backend: kind.name().into(),
        server_budget,
        connections: PROBE_CONNECTIONS,
        seconds: report.duration_s,
        replies_per_s: report.reply_rate_avg,
        errors: report.errors.total(),
        server_cpu_us_per_conn: server_us,
        client_cpu_us_per_conn: client_us,
    })
}

/// Replies per second over the rate samples that lie wholly inside `[from, to]`
/// seconds of the run; `None` if none does. The client keeps samples only up to
/// its last reply, so a missing sample is a sample of zero.
fn rate_between(report: &LoadReport, from: f64, to: f64) -> Option<f64> {
    let iv = report.reply_rate.interval_s;
    if iv <= 0.0 || to > report.duration_s + 1e-9 {
        return None;
    }
    let first = (from / iv - 1e-9).ceil().max(0.0) as usize;
    let end = (to / iv + 1e-9).floor() as usize;
    (end > first).then(|| {
        let sum: f64 = (first..end)
            .map(|i| report.reply_rate.samples.get(i).copied().unwrap_or(0.0))
            .sum();
        sum / (end - first) as f64
    })
}

fn run(
    kind: BackendKind,
    shed: bool,
    rep: usize,
    multiple: f64,
    rate: f64,
    plan: &Plan,
    refusals: &mut Vec<String>,
) -> io::Result<Point> {
    let Started {
        server,
        tid,
        refused,
    } = start(kind, shed)?;
    let server_budget = refused.is_none();
    refusals.extend(refused);
    let window = plan.window_s;
    let conns = (rate * window).round().max(1.0) as u64;
    let mut load = LoadConfig::open("127.0.0.1", server.addr().port(), rate, conns);
    load.num_calls = 1;
    load.hog = true;
    load.timeout = Some(Duration::from_secs_f64(plan.timeout_s));
    let cpu0 = server_cpu(tid);
    let report = run_load(&load);
    let cpu = cpu0.zip(server_cpu(tid));
    let stats = finish(server)?;
    let report = report?;
    let (server_us, client_us) = cpu_split(&report, cpu);
    let started = report.connections.max(1);
    let replies_per_s =
        rate_between(&report, window / 4.0, window).unwrap_or(report.replies as f64 / window);
    Ok(Point {
        backend: kind.name().into(),
        shed,
        rep,
        multiple,
        offered_per_s: rate,
        conns,
        window_s: window,
        client_started_per_s: report.connections as f64
            / (window + report.start_lag_ms.max / 1000.0),
        start_lag_p99_ms: report.start_lag_ms.p99,
        start_lag_max_ms: report.start_lag_ms.max,
        replies: report.replies,
        replies_per_s,
        replies_per_s_whole: report.replies as f64 / window,
        server_budget,
        errors: report.errors.total(),
        error_pct: 100.0 * report.errors.total() as f64 / started as f64,
        errors_by_kind: ErrorKind::ALL
            .iter()
            .map(|k| (k.name().to_string(), report.errors.get(*k)))
            .filter(|(_, n)| *n > 0)
            .collect(),
        p50_ms: report.latency_ms.p50,
        p99_ms: report.latency_ms.p99,
        server_accepts: stats.accepts,
        server_shed_resets: stats.shed_resets,
        server_requests: stats.requests,
        server_responses: stats.responses.values().sum(),
        server_events_per_call: stats.events_per_call,
        server_cpu_share: cpu
            .map(|(a, b)| b.saturating_sub(a).as_secs_f64() / report.duration_s.max(1e-9)),
        server_cpu_us_per_conn: server_us,
        client_cpu_us_per_conn: client_us,
    })
}
