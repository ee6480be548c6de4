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

use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, PlotRecord};
use crate::Scenario;
use evq::BackendKind;
use evq_http::{ServeConfig, ServerHandle, ShedConfig};
use evq_load::{run_load, ErrorKind, LoadConfig, LoadReport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

/// CPU the server's thread may use in every [`BUDGET_PERIOD`].
pub(crate) const BUDGET_RUNTIME: Duration = Duration::from_micros(100);
/// Period of the server's CPU budget.
pub(crate) const BUDGET_PERIOD: Duration = Duration::from_millis(1);
/// The name `ServerHandle` gives its first (here: only) worker thread.
const SERVER_THREAD: &str = "evq-serve-0";

/// Connections of the closed-loop capacity probe.
const PROBE_CONNECTIONS: usize = 32;
/// Reply size: seed 001 fetched a 1 KB document.
const REPLY_SIZE: usize = 1024;
/// The client keeps up if it started connections at least at this share of the
/// offered rate.
const CLIENT_KEEPS_UP: f64 = 0.9;
/// "Well past capacity": offered at least this multiple of the measured capacity.
const PAST_CAPACITY: f64 = 2.0;
/// Below this share of capacity, throughput has degraded; at or above it, it
/// stayed near capacity.
const NEAR_CAPACITY: f64 = 0.8;

/// How big the sweep is.
struct Sizes {
    backends: &'static [&'static str],
    probe: Duration,
    multiples: &'static [f64],
    window: Duration,
    timeout: Duration,
    /// Runs per point; the point is the median run.
    reps: usize,
}

impl Sizes {
    fn for_scenario(scenario: &Scenario) -> Sizes {
        if scenario.smoke {
            Sizes {
                backends: &["rtsig-bulk"],
                probe: Duration::from_millis(300),
                multiples: &[0.5, 2.0],
                window: Duration::from_millis(400),
                timeout: Duration::from_millis(300),
                reps: 1,
            }
        } else if scenario.quick {
            Sizes {
                backends: &["rtsig-bulk", "epoll"],
                probe: Duration::from_millis(500),
                multiples: &[0.5, 1.0, 2.0, 3.0],
                window: Duration::from_millis(1200),
                timeout: Duration::from_millis(400),
                reps: 1,
            }
        } else {
            Sizes {
                backends: &["rtsig-bulk", "rtsig", "epoll"],
                probe: Duration::from_secs(2),
                multiples: &[0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
                window: Duration::from_secs(3),
                timeout: Duration::from_secs(1),
                reps: 3,
            }
        }
    }
}

/// The capacity probe of one backend.
#[derive(Serialize, Clone, Debug)]
struct Probe {
    backend: String,
    /// Whether the server ran under the CPU budget.
    server_budget: bool,
    connections: usize,
    seconds: f64,
    replies_per_s: f64,
    errors: u64,
    /// Server thread CPU per connection started, microseconds.
    server_cpu_us_per_conn: Option<f64>,
    /// The rest of the process (the load client) per connection, microseconds.
    client_cpu_us_per_conn: Option<f64>,
}

/// One measured point of the sweep.
#[derive(Serialize, Clone, Debug)]
struct Point {
    backend: String,
    shed: bool,
    /// Which run of the point this is (0-based).
    rep: usize,
    /// Offered rate as a multiple of the probed capacity.
    multiple: f64,
    /// Connections (one request each) per second the schedule asked for.
    offered_per_s: f64,
    /// Connections in the schedule.
    conns: u64,
    /// Length of the schedule, seconds.
    window_s: f64,
    /// Connections the client started per second, at least: connections started /
    /// (window + the largest start lag). Below the offered rate, the client was the
    /// limit. (Requests follow once a connection is up, which an overloaded server
    /// may never let happen, so they measure the server, not the client.)
    client_started_per_s: f64,
    /// The client's start lag against its schedule, milliseconds.
    start_lag_p99_ms: f64,
    /// Largest start lag, milliseconds.
    start_lag_max_ms: f64,
    /// Replies received, in all.
    replies: u64,
    /// Replies per second during the schedule, after its first quarter (warm-up).
    replies_per_s: f64,
    /// Replies in all over the schedule's length (includes replies that came in the
    /// tail after the last connection started).
    replies_per_s_whole: f64,
    /// Whether the server ran under the CPU budget.
    server_budget: bool,
    /// Failed connections.
    errors: u64,
    /// Failed connections per connection started, percent.
    error_pct: f64,
    /// Failures by `evq load`'s kind (only the kinds seen).
    errors_by_kind: BTreeMap<&'static str, u64>,
    /// Reply latency from the intended start, milliseconds.
    p50_ms: f64,
    /// 99th percentile of the same.
    p99_ms: f64,
    /// Connections the server accepted (including those it then reset).
    server_accepts: u64,
    /// Connections the server reset because its load limiter said overloaded.
    server_shed_resets: u64,
    /// Requests the server parsed.
    server_requests: u64,
    /// Responses the server sent (whether or not the client was still there).
    server_responses: u64,
    /// Events per `get_next_event` call in the server.
    server_events_per_call: f64,
    /// Server thread CPU over the load run's wall time (the budget caps it).
    server_cpu_share: Option<f64>,
    /// Server thread CPU per connection started, microseconds.
    server_cpu_us_per_conn: Option<f64>,
    /// The rest of the process (the load client) per connection, microseconds.
    client_cpu_us_per_conn: Option<f64>,
}

/// What the overload half adds to the signals record.
pub(crate) struct Overload {
    /// Graph 3 and Graph 4 claims, judged.
    pub checks: Vec<ClaimCheck>,
    /// Replies/s and error % against the offered rate.
    pub plots: Vec<PlotRecord>,
    /// Notes on method.
    pub notes: Vec<String>,
    /// The commands that reproduce it.
    pub commands: Vec<String>,
    /// Probes and points.
    pub data: serde_json::Value,
}

fn collapse_claim(backend: &str) -> String {
    format!("without load limiting, the signal-based server's throughput degrades past its capacity instead of holding (Graph 3's runs without limiting; judged on {backend})")
}

fn limited_claim(backend: &str) -> String {
    format!("with load limiting (smoothed events per call, gain 0.3, threshold 18, at most 23 per call; reset new connections above it), throughput levels off near capacity past saturation and the error rate is lower, errors becoming quick resets (Graphs 3–4; judged on {backend})")
}

impl Overload {
    /// Both claims not measured, with the error that stopped the sweep.
    pub fn not_run(e: &io::Error) -> Overload {
        let why = format!("not run: the overload sweep failed: {e}");
        let backend = "rtsig-bulk";
        Overload {
            checks: vec![
                ClaimCheck::judged(
                    &collapse_claim(backend),
                    why.clone(),
                    None,
                    "no measurement, no verdict",
                ),
                ClaimCheck::judged(
                    &limited_claim(backend),
                    why.clone(),
                    None,
                    "no measurement, no verdict",
                ),
            ],
            plots: Vec::new(),
            notes: Vec::new(),
            commands: Vec::new(),
            data: serde_json::json!({ "not_run": why }),
        }
    }
}

fn server_config(kind: BackendKind, shed: bool) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        backend: Some(kind),
        threads: 1,
        reply_size: REPLY_SIZE,
        shed: shed.then(ShedConfig::default),
        grace: Duration::from_millis(100),
        ..ServeConfig::default()
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

fn measure(
    kind: BackendKind,
    shed: bool,
    rep: usize,
    multiple: f64,
    rate: f64,
    sizes: &Sizes,
    refusals: &mut Vec<String>,
) -> io::Result<Point> {
    let Started {
        server,
        tid,
        refused,
    } = start(kind, shed)?;
    let server_budget = refused.is_none();
    refusals.extend(refused);
    let window = sizes.window.as_secs_f64();
    let conns = (rate * window).round().max(1.0) as u64;
    let mut load = LoadConfig::open("127.0.0.1", server.addr().port(), rate, conns);
    load.num_calls = 1;
    load.hog = true;
    load.timeout = Some(sizes.timeout);
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
            .map(|k| (k.name(), report.errors.get(*k)))
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

/// Per (backend, shedding, offered rate), the run with the median replies/s (the
/// lower middle one for an even count), so every field of a point comes from one
/// real run.
fn median_runs(runs: &[Point]) -> Vec<Point> {
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
fn series<'a>(points: &'a [Point], backend: &str, shed: bool) -> Vec<&'a Point> {
    let mut v: Vec<&Point> = points
        .iter()
        .filter(|p| p.backend == backend && p.shed == shed)
        .collect();
    v.sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    v
}

fn keeps_up(p: &Point) -> bool {
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
fn check_collapse(points: &[Point], backend: &str, others: &[&str]) -> ClaimCheck {
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
fn check_limited(points: &[Point], backend: &str) -> ClaimCheck {
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

/// Runs the overload sweep and judges Graphs 3–4.
pub(crate) fn run(scenario: &Scenario) -> io::Result<Overload> {
    let sizes = Sizes::for_scenario(scenario);
    crate::resources::raise_nofile()?;
    let kinds: Vec<BackendKind> = sizes
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
    let mut probes = Vec::new();
    let mut refusals = Vec::new();
    for &kind in &kinds {
        scenario.progress(&format!("overload: capacity probe on {kind}"));
        probes.push(probe(kind, sizes.probe, &mut refusals)?);
    }
    let capacity = probes.iter().map(|p| p.replies_per_s).fold(0.0, f64::max);
    if capacity <= 0.0 {
        return Err(io::Error::other("the capacity probe got no replies"));
    }
    let fd_limit = crate::resources::raise_nofile()? as f64;
    // Client and server share this process's descriptors: each in-flight
    // connection may hold two for up to the timeout. Keep a quarter spare.
    let rate_cap = 0.75 * fd_limit / (2.0 * sizes.timeout.as_secs_f64());
    let combos: Vec<(BackendKind, bool)> = kinds
        .iter()
        .flat_map(|&k| [(k, false), (k, true)])
        .collect();
    let mut runs = Vec::new();
    let mut capped = Vec::new();
    let rates: Vec<(f64, f64)> = sizes
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
    for rep in 0..sizes.reps {
        for (step, &(m, rate)) in rates.iter().enumerate() {
            for i in 0..combos.len() {
                let (kind, shed) = combos[(i + step + rep) % combos.len()];
                scenario.progress(&format!(
                    "overload: run {}/{} {kind} shed {} at {rate:.0}/s ({m}× capacity)",
                    rep + 1,
                    sizes.reps,
                    if shed { "on" } else { "off" }
                ));
                runs.push(measure(kind, shed, rep, m, rate, &sizes, &mut refusals)?);
            }
        }
    }
    let points = median_runs(&runs);
    let primary = kinds[0].name();
    let others: Vec<&str> = kinds[1..].iter().map(|k| k.name()).collect();
    let checks = vec![
        check_collapse(&points, primary, &others),
        check_limited(&points, primary),
    ];
    let names = |p: &Point| format!("{} {}", p.backend, if p.shed { "shed" } else { "no shed" });
    let lines = |y: &dyn Fn(&Point) -> f64| -> Vec<Series> {
        combos
            .iter()
            .map(|&(k, shed)| {
                let s = series(&points, k.name(), shed);
                Series {
                    name: s.first().map_or_else(|| k.name().to_string(), |p| names(p)),
                    points: s.iter().map(|p| (p.offered_per_s, y(p))).collect(),
                }
            })
            .collect()
    };
    let window = sizes.window.as_secs_f64();
    let timeout = sizes.timeout.as_secs_f64();
    let plots = vec![
        render(
            &Chart {
                title: format!(
                    "evq serve under overload: replies/s vs offered rate (1 thread, {REPLY_SIZE} B)"
                ),
                x_label: "offered rate (connections/s, one request each)".into(),
                y_label: "replies/s".into(),
                log_x: false,
                log_y: false,
                series: lines(&|p| p.replies_per_s),
            },
            &scenario.out_dir,
            "signals-overload-throughput",
        ),
        render(
            &Chart {
                title: format!(
                    "evq serve under overload: errors vs offered rate (timeout {timeout} s)"
                ),
                x_label: "offered rate (connections/s, one request each)".into(),
                y_label: "failed connections (%)".into(),
                log_x: false,
                log_y: false,
                series: lines(&|p| p.error_pct),
            },
            &scenario.out_dir,
            "signals-overload-errors",
        ),
    ];
    let budget = format!(
        "{} µs of CPU in every {} µs ({:.0}% of one core)",
        BUDGET_RUNTIME.as_micros(),
        BUDGET_PERIOD.as_micros(),
        100.0 * BUDGET_RUNTIME.as_secs_f64() / BUDGET_PERIOD.as_secs_f64()
    );
    let mut notes = vec![format!(
        "Overload: `evq serve` in this process, one thread, {REPLY_SIZE} B fixed reply, on {} with and without `--shed` (gain {}, threshold {}, at most {} events per call); a fresh server per run. Capacity first: a {:.1} s closed loop of {PROBE_CONNECTIONS} connections, one request each, per backend ({}); the offered rates are {:?} × the largest, {capacity:.0}/s. Each run is an open loop (httperf-like, fixed spacing) of one request per connection for {window} s with a {timeout} s client timeout, `--hog` ports; {}. Replies/s are the client's rate samples over the last three quarters of the schedule (a sample after the last reply counts as 0); error % is failed connections over connections started, by evq-load's kinds (client-timo, connreset, connrefused, ...).",
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        evq::LoadLimiter::DEFAULT_GAIN,
        evq::LoadLimiter::DEFAULT_THRESHOLD,
        ShedConfig::default().max_events,
        sizes.probe.as_secs_f64(),
        probes
            .iter()
            .map(|p| format!("{} {:.0}/s", p.backend, p.replies_per_s))
            .collect::<Vec<_>>()
            .join(", "),
        sizes.multiples,
        if sizes.reps > 1 {
            format!("each point is the median run by replies/s of {} (all runs are in the raw data), runs rotated between series", sizes.reps)
        } else {
            "one run per point".to_string()
        },
    )];
    refusals.sort();
    refusals.dedup();
    let cpu_of = |f: &dyn Fn(&Probe) -> Option<f64>| {
        probes
            .iter()
            .map(|p| {
                f(p).map_or(format!("{} -", p.backend), |v| {
                    format!("{} {v:.0}", p.backend)
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let client_dearer = probes.iter().all(|p| {
        p.client_cpu_us_per_conn
            .zip(p.server_cpu_us_per_conn)
            .is_some_and(|(c, s)| c > s)
    });
    let why = format!(
        "CPU per connection in the capacity probes, µs: client (the rest of this process) {}; server thread {}. {}",
        cpu_of(&|p| p.client_cpu_us_per_conn),
        cpu_of(&|p| p.server_cpu_us_per_conn),
        if client_dearer {
            "The client costs more than the server, so with a core each one client thread could not offer the server more than it can take."
        } else {
            "The client did not cost more than the server everywhere here; the budget still makes the overload reachable with room to spare for the client."
        }
    );
    let max_share = runs
        .iter()
        .filter_map(|p| p.server_cpu_share)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    notes.push(if refusals.is_empty() {
        format!(
            "Server CPU budget: the server's thread ran under SCHED_DEADLINE with {budget} in every run; its measured CPU over a load run was at most {} of the run's wall time. {why} The budget plays the seed's slower server machine and, as a deadline thread is served before ordinary ones, also keeps the capacity steady while other work shares the cores. It slows the server's event pickup and its request handling alike.",
            max_share.map_or("-".to_string(), |m| format!("{:.1}%", 100.0 * m))
        )
    } else {
        format!(
            "Server CPU budget ({budget}, SCHED_DEADLINE) not applied in every run: {}. Those runs had the server unhindered. {why} The client-lag rule below decides which points count.",
            refusals.join("; ")
        )
    });
    let lagging: Vec<String> = runs
        .iter()
        .filter(|p| !keeps_up(p))
        .map(|p| {
            format!(
                "{} at {:.0}/s (run {}) started {:.0}/s",
                names(p),
                p.offered_per_s,
                p.rep + 1,
                p.client_started_per_s
            )
        })
        .collect();
    let worst_lag = runs.iter().map(|p| p.start_lag_p99_ms).fold(0.0, f64::max);
    notes.push(if lagging.is_empty() {
        format!(
            "Client: one `evq load` thread in this process, sharing the cores with the server. It kept its schedule in every run: connections started ≥ {:.0}% of the offered rate everywhere (started rate = connections / (schedule + largest start lag)); worst p99 start lag {worst_lag:.1} ms. By this rule the client was not the bottleneck.",
            100.0 * CLIENT_KEEPS_UP
        )
    } else {
        format!(
            "Client: one `evq load` thread in this process, sharing the cores with the server. It fell behind its schedule (started < {:.0}% of the offered rate) in: {}; such runs measure the client as much as the server, and a point whose median run is one of them is not judged. Worst p99 start lag {worst_lag:.1} ms.",
            100.0 * CLIENT_KEEPS_UP,
            lagging.join("; ")
        )
    });
    let limiter_input: Vec<String> = kinds
        .iter()
        .filter_map(|k| series(&points, k.name(), true).last().copied())
        .map(|p| {
            format!(
                "{} at {:.0}/s: {:.1} events per call, {} resets, {} responses sent, {} replies received",
                p.backend,
                p.offered_per_s,
                p.server_events_per_call,
                p.server_shed_resets,
                p.server_responses,
                p.replies
            )
        })
        .collect();
    notes.push(format!(
        "Limiter input at the highest offered rate, with shedding (threshold {}, mean over the whole run): {}. `evq serve` accepts up to 64 connections per listener event and reads and answers each at once, so one event can stand for many connections; responses sent beyond replies received went to clients that had already given up.",
        evq::LoadLimiter::DEFAULT_THRESHOLD,
        limiter_input.join("; ")
    ));
    if !capped.is_empty() {
        notes.push(format!(
            "Offered rates capped at {rate_cap:.0}/s by the descriptor limit ({fd_limit:.0}, client and server in one process, {timeout} s timeout): {}.",
            capped
                .iter()
                .map(|(m, r)| format!("{m}× ({r:.0}/s)"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    notes.push("The seed ran httperf and phhttpd on separate machines over a LAN, 35,000 connections per point; here client and server share loopback and the machine's cores, with shorter runs, so the numbers are this machine's and the shapes are what compare.".into());
    let commands = vec![
        "evq serve --backend B --threads 1 --reply-size 1024 [--shed] --listen 127.0.0.1:P".to_string(),
        format!(
            "chrt -d --sched-runtime {} --sched-deadline {p} --sched-period {p} -p 0 TID   (TID: the server's evq-serve-0 thread)",
            BUDGET_RUNTIME.as_nanos(),
            p = BUDGET_PERIOD.as_nanos()
        ),
        format!(
            "evq load --server 127.0.0.1 --port P --connections {PROBE_CONNECTIONS} --num-calls 1 --duration {} --hog   (capacity probe)",
            sizes.probe.as_secs_f64()
        ),
        format!(
            "evq load --server 127.0.0.1 --port P --rate R --num-conns R×{window} --num-calls 1 --timeout {timeout} --hog   (R = {:?} × capacity)",
            sizes.multiples
        ),
    ];
    let data = serde_json::json!({
        "capacity_per_s": capacity,
        "server_cpu_budget": {
            "runtime_us": BUDGET_RUNTIME.as_micros() as u64,
            "period_us": BUDGET_PERIOD.as_micros() as u64,
            "refused": refusals,
        },
        "probes": probes,
        "timeout_s": timeout,
        "window_s": window,
        "points": points,
        "runs": runs,
    });
    Ok(Overload {
        checks,
        plots,
        notes,
        commands,
        data,
    })
}
