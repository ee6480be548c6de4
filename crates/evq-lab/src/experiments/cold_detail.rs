//! Experiment 3's detail at a fixed cold load (SEEDS 000 Figure 9 and Table 2):
//! response time against offered request rate, and the share of CPU time the
//! server spends in event notification, per backend.
//!
//! One `evq serve` per backend runs in this process on one thread, an `evq dead`
//! child holds the cold connections (from 127.0.0.2, as in
//! [`super::cold_connections`]), and `evq load` offers an open-loop request rate:
//! one request per connection, started on a fixed schedule whether or not earlier
//! ones finished, like the paper's S-Clients. Every backend's server is started
//! with its cold set first; the rates are then swept upward, each run against
//! every server in an order rotated from rate to rate, so that a drift in the
//! shared machine's load is spread over the backends. Around each run the
//! server's counters are read:
//! its thread's CPU time in total and inside `get_next_event`
//! (`CLOCK_THREAD_CPUTIME_ID`, [`evq_http::ServeReport::wait_cpu_ns`]).

use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, PlotRecord};
use crate::rig::DeadConnections;
use crate::Scenario;
use evq::BackendKind;
use evq_http::{ServeConfig, ServeReport, ServerHandle};
use evq_load::{run_load, LoadConfig};
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};

/// The request rate of the paper's Table 2 profile (750 cold, 50 hot, 400 req/s).
const TABLE2_RATE: f64 = 400.0;
/// The paper's claims, in its terms.
const CLAIM_TABLE2: &str = "at 750 cold connections (50 hot, 400 requests/s) event notification takes 34% of the CPU with classic select, 12% with improved select and under 1% with the new API (Table 2)";
const CLAIM_LATENCY: &str = "at 750 cold connections the new API gives much lower response time than select up to saturation (Figure 9)";
const CLAIM_SATURATION: &str = "the new API saturates at a somewhat higher request rate than improved select: 1348 vs 1291 requests/s at 750 cold connections (Figure 9)";
/// A point "kept up" if it achieved at least this share of the offered rate.
const KEPT_UP: f64 = 0.95;
/// The client "kept its schedule" if it started connections at least this fast.
const ON_SCHEDULE: f64 = 0.95;

/// What [`run_detail`] measured: checks, plots, notes, commands and raw data for
/// the cold-connections record.
pub(crate) struct ColdDetail {
    /// Table 2 and Figure 9 checks.
    pub(crate) checks: Vec<ClaimCheck>,
    /// Latency, reply rate and CPU-share plots against the offered rate.
    pub(crate) plots: Vec<PlotRecord>,
    /// Method notes.
    pub(crate) notes: Vec<String>,
    /// Commands that reproduce it.
    pub(crate) commands: Vec<String>,
    /// The points, as JSON.
    pub(crate) data: serde_json::Value,
}

impl ColdDetail {
    /// What to report when the sweep failed: every claim not measured, with why.
    pub(crate) fn failed(e: &io::Error) -> ColdDetail {
        let checks = [CLAIM_TABLE2, CLAIM_LATENCY, CLAIM_SATURATION]
            .into_iter()
            .map(|claim| {
                ClaimCheck::judged(
                    claim,
                    format!("not run: the fixed-cold-load sweep failed: {e}"),
                    None,
                    "no measurement, no verdict",
                )
            })
            .collect();
        ColdDetail {
            checks,
            plots: Vec::new(),
            notes: Vec::new(),
            commands: Vec::new(),
            data: serde_json::json!({ "failed": e.to_string() }),
        }
    }
}

/// One offered rate on one backend.
#[derive(Serialize, Clone, Debug)]
struct RatePoint {
    backend: String,
    /// Cold connections asked for, and open at the server when the run began.
    cold: usize,
    cold_held: u64,
    /// Offered request rate (connections per second, one request each).
    offered_rate: f64,
    num_conns: u64,
    /// Connections the client started per second, estimated from its median
    /// start lag: a client that falls steadily behind lags more and more, linearly,
    /// so its last start is about twice the median lag late. Occasional stalls
    /// (the machine is shared) move the median little.
    client_start_rate: f64,
    /// How late the client started connections against the schedule.
    start_lag_p50_ms: f64,
    start_lag_p99_ms: f64,
    /// `client_start_rate` under 95% of `offered_rate`: the load client, not the
    /// server, set the pace.
    client_limited: bool,
    requests: u64,
    replies: u64,
    /// Replies per second over the run (httperf's reply rate: replies over the
    /// time to the last reply, so one late reply at the end lowers it).
    reply_rate: f64,
    /// Median of the run's reply-rate samples (0.1 s each under 3 s, else 1 s):
    /// the achieved rate, robust to a stall at the end. What "kept up" and the
    /// peak use.
    reply_rate_median: f64,
    /// Latency from each request's scheduled start to its complete reply.
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
    cut_off: bool,
    /// Wall time between the two counter snapshots around the run.
    wall_s: f64,
    /// Server thread CPU time in the run, and the part inside `get_next_event`.
    server_cpu_s: f64,
    server_wait_cpu_s: f64,
    /// `server_cpu_s / wall_s`: how busy the server thread was.
    server_busy: f64,
    /// `server_wait_cpu_s / wall_s`: event notification's share of one CPU (the
    /// paper's Table 2 measure: its profile is of one CPU, idle time included).
    wait_share_of_cpu: f64,
    /// `server_wait_cpu_s / server_cpu_s`: its share of the server's own CPU time.
    wait_share_of_server: f64,
    server_events_per_call: f64,
    /// CPU time of this whole process during the run (the load client's thread,
    /// the server's, and the rest) and the part that was not the server's.
    process_cpu_s: f64,
    client_cpu_s: f64,
}

impl RatePoint {
    fn kept_up(&self) -> bool {
        self.reply_rate_median >= KEPT_UP * self.offered_rate
    }
}

/// Sizes of the sweep.
struct Plan {
    cold: usize,
    rates: Vec<f64>,
    point_for: Duration,
    kinds: Vec<BackendKind>,
}

fn plan(scenario: &Scenario) -> Plan {
    let four: Vec<BackendKind> = [
        BackendKind::SelectClassic,
        BackendKind::SelectImproved,
        BackendKind::Poll,
        BackendKind::Epoll,
    ]
    .into_iter()
    .filter(|k| k.available().is_ok())
    .collect();
    if scenario.smoke {
        Plan {
            cold: 20,
            rates: vec![TABLE2_RATE, 1000.0],
            point_for: Duration::from_millis(300),
            kinds: four,
        }
    } else if scenario.quick {
        Plan {
            cold: 750,
            rates: vec![TABLE2_RATE, 2000.0, 4000.0, 6000.0, 8000.0],
            point_for: Duration::from_secs(1),
            kinds: four,
        }
    } else {
        Plan {
            cold: 750,
            rates: vec![
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
            point_for: Duration::from_secs(3),
            kinds: BackendKind::candidates(),
        }
    }
}

fn server_config(kind: BackendKind) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        backend: Some(kind),
        threads: 1,
        reply_size: 1024,
        idle_timeout: Duration::from_secs(600),
        header_timeout: Duration::from_secs(600),
        ..ServeConfig::default()
    }
}

/// Waits until the server holds at least `n` connections; the count it reached.
fn wait_open(server: &ServerHandle, n: usize, limit: Duration) -> u64 {
    let since = Instant::now();
    loop {
        let open = server.report().open_conns;
        if open as usize >= n || since.elapsed() > limit {
            return open;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// One backend's server with its cold connections held.
struct Rig {
    kind: BackendKind,
    server: ServerHandle,
    held: u64,
    _cold: DeadConnections,
}

fn rig(kind: BackendKind, plan: &Plan, scenario: &Scenario) -> io::Result<Rig> {
    let server = ServerHandle::start(&server_config(kind))?;
    let runs = (plan.rates.len() * plan.kinds.len()) as u64;
    let hold_for = runs * (plan.point_for.as_secs() + 5) + 60;
    let cold = DeadConnections::start(&scenario.tools, server.addr().port(), plan.cold, hold_for)?;
    scenario.progress(&format!("{kind}: opening {} cold connections", plan.cold));
    let held = wait_open(&server, plan.cold, Duration::from_secs(30));
    if (held as usize) < plan.cold {
        let _ = server.stop();
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "{kind}: only {held} of {} cold connections came up",
                plan.cold
            ),
        ));
    }
    Ok(Rig {
        kind,
        server,
        held,
        _cold: cold,
    })
}

/// Every backend's server is started with its cold connections first; then, rate
/// by rate upward, each server gets its run, in an order rotated from one rate to
/// the next, so that a change in the shared machine's load is spread over the
/// backends instead of landing on whichever ran last.
fn sweep(plan: &Plan, scenario: &Scenario) -> io::Result<Vec<RatePoint>> {
    let mut rigs = Vec::new();
    for &kind in &plan.kinds {
        rigs.push(rig(kind, plan, scenario)?);
    }
    let mut points = Vec::new();
    for (step, &rate) in plan.rates.iter().enumerate() {
        for k in 0..rigs.len() {
            let r = &rigs[(k + step) % rigs.len()];
            scenario.progress(&format!(
                "{}: {} cold connections, {rate} requests/s offered",
                r.kind, plan.cold
            ));
            wait_drained(&r.server, r.held, Duration::from_secs(3));
            points.push(one_rate(
                r.kind,
                &r.server,
                plan.cold,
                rate,
                plan.point_for,
            )?);
        }
    }
    for r in rigs {
        let _ = r.server.stop();
    }
    Ok(points)
}

fn pct(x: f64) -> String {
    if x < 0.01 {
        format!("{:.2}%", 100.0 * x)
    } else {
        format!("{:.1}%", 100.0 * x)
    }
}

/// Runs the Figure 9 sweep (with the Table 2 measurement at its 400 req/s point)
/// and judges the claims.
pub(crate) fn run_detail(scenario: &Scenario) -> io::Result<ColdDetail> {
    let plan = plan(scenario);
    crate::resources::raise_nofile()?;
    let load_before = crate::procinfo::loadavg();
    let points = sweep(&plan, scenario)?;
    let load_after = crate::procinfo::loadavg();
    let at = |b: &str, rate: f64| {
        points
            .iter()
            .find(|p| p.backend == b && p.offered_rate == rate)
    };
    let names: Vec<&str> = plan.kinds.iter().map(|k| k.name()).collect();
    let cold = plan.cold;
    let mut checks = Vec::new();

    // Table 2: event notification's share of CPU at the paper's 400 req/s.
    let share = |b: &str| at(b, TABLE2_RATE).map(|p| p.wait_share_of_cpu);
    let shares: Vec<String> = names
        .iter()
        .filter_map(|b| {
            at(b, TABLE2_RATE).map(|p| {
                format!(
                    "{b} {} ({} of the server thread's CPU)",
                    pct(p.wait_share_of_cpu),
                    pct(p.wait_share_of_server)
                )
            })
        })
        .collect();
    let table2 = match (share("select"), share("select-improved"), share("epoll")) {
        (Some(s), Some(i), Some(e)) => Some(e < 0.01 && i <= 0.75 * s && i > e),
        _ => None,
    };
    checks.push(ClaimCheck::judged(
        CLAIM_TABLE2,
        format!(
            "CPU time inside get_next_event as a share of one CPU, at {cold} cold connections and {TABLE2_RATE} requests/s offered: {}{}",
            shares.join(", "),
            match (share("select"), share("select-improved")) {
                (Some(s), Some(i)) if s > 0.0 => {
                    format!("; improved/classic select {:.2}", i / s)
                }
                _ => String::new(),
            }
        ),
        table2,
        "holds if epoll (the new API's counterpart) spends under 1% of one CPU in get_next_event, the paper's bound, improved select at most three quarters of classic select's share (the paper: about a third) and epoll less than improved select; the paper's 34% and 12% are a 500 MHz Alpha's and are compared by ratio and order, not value. Share of one CPU = the server thread's CPU time inside get_next_event (CLOCK_THREAD_CPUTIME_ID read before and after each call) over the wall time of the run, as the paper's profile is of one CPU with idle time included. evq's improved select has only the user-space half of the paper's improvements (shadow fd_sets, word-wise scans); the kernel half (skip re-testing descriptors whose state did not change) cannot be done from user space, so the ratio of the two selects tests what the user-space half buys",
    ));

    // Figure 9, latency: at the rates every select/epoll server kept up with.
    let trio = ["epoll", "select", "select-improved"];
    let common: Vec<f64> = plan
        .rates
        .iter()
        .copied()
        .filter(|&r| {
            trio.iter()
                .all(|b| at(b, r).is_some_and(|p| p.kept_up() && !p.client_limited))
        })
        .collect();
    let p50 = |b: &str, r: f64| at(b, r).map_or(f64::NAN, |p| p.p50_ms);
    let lower = common
        .iter()
        .filter(|&&r| {
            p50("epoll", r) < p50("select", r) && p50("epoll", r) < p50("select-improved", r)
        })
        .count();
    let per_rate: Vec<String> = common
        .iter()
        .map(|&r| {
            format!(
                "{r}/s: epoll {:.2}, select {:.2}, select-improved {:.2}",
                p50("epoll", r),
                p50("select", r),
                p50("select-improved", r)
            )
        })
        .collect();
    checks.push(ClaimCheck::judged(
        CLAIM_LATENCY,
        if common.is_empty() {
            format!("no offered rate that epoll, select and select-improved all kept up with at {cold} cold connections")
        } else {
            format!(
                "median latency (ms) at {cold} cold connections: {}; epoll lowest at {lower} of {} rates",
                per_rate.join("; "),
                common.len()
            )
        },
        (!common.is_empty()).then_some(2 * lower > common.len()),
        "holds if, over the offered rates that epoll, select and select-improved all kept up with (median replies/s at least 95% of offered) with the client on schedule (connections started at least 95% as fast as offered, estimated from the median start lag), epoll's median latency is below both selects' at more than half of them; not measured without such a rate",
    ));

    // Figure 9, saturation.
    let peak = |b: &str| {
        points
            .iter()
            .filter(|p| p.backend == b)
            .max_by(|a, b| a.reply_rate_median.total_cmp(&b.reply_rate_median))
    };
    let top = *plan.rates.last().unwrap_or(&TABLE2_RATE);
    let saturated = |b: &str| at(b, top).is_some_and(|p| !p.kept_up());
    let describe = |b: &str| {
        peak(b).map_or(format!("{b} -"), |p| {
            format!(
                "{b} {:.0}/s at {}/s offered (server thread {} busy{})",
                p.reply_rate_median,
                p.offered_rate,
                pct(p.server_busy),
                if p.client_limited {
                    ", client behind schedule"
                } else {
                    ""
                }
            )
        })
    };
    let sat_verdict = match (peak("epoll"), peak("select-improved")) {
        (Some(e), Some(i)) if saturated("epoll") || saturated("select-improved") => {
            Some(e.reply_rate_median >= i.reply_rate_median)
        }
        _ => None,
    };
    checks.push(ClaimCheck::judged(
        CLAIM_SATURATION,
        format!(
            "peak replies/s at {cold} cold connections, offered up to {top}/s: {}; saturated at {top}/s: epoll {}, select-improved {}",
            names.iter().map(|b| describe(b)).collect::<Vec<_>>().join(", "),
            saturated("epoll"),
            saturated("select-improved")
        ),
        sat_verdict,
        "holds if epoll's peak reply rate over the sweep (median of each run's rate samples) is at least improved select's; not measured if neither fell below 95% of the offered rate at the sweep's top rate (no saturation reached). Client and server share the machine's 2 cores, so the saturation is the pair's: a server that spends less CPU per request leaves more to the client",
    ));

    let series = |f: &dyn Fn(&RatePoint) -> f64| -> Vec<Series> {
        names
            .iter()
            .map(|b| Series {
                name: (*b).to_string(),
                points: points
                    .iter()
                    .filter(|p| p.backend == *b)
                    .map(|p| (p.offered_rate, f(p)))
                    .collect(),
            })
            .collect()
    };
    let chart = |title: String, y_label: &str, log_y: bool, s: Vec<Series>, stem: &str| {
        render(
            &Chart {
                title,
                x_label: "offered requests/s (one request per connection)".into(),
                y_label: y_label.into(),
                log_x: false,
                log_y,
                series: s,
            },
            &scenario.out_dir,
            stem,
        )
    };
    let plots = vec![
        chart(
            format!("Median response time vs offered rate, {cold} cold connections (Figure 9)"),
            "median latency (ms)",
            true,
            series(&|p| p.p50_ms),
            "cold-detail-latency-p50",
        ),
        chart(
            format!("99th-percentile response time vs offered rate, {cold} cold connections"),
            "p99 latency (ms)",
            true,
            series(&|p| p.p99_ms),
            "cold-detail-latency-p99",
        ),
        chart(
            format!("Achieved reply rate vs offered rate, {cold} cold connections"),
            "replies/s (median of the run's samples)",
            false,
            series(&|p| p.reply_rate_median),
            "cold-detail-reply-rate",
        ),
        chart(
            format!("CPU in get_next_event (share of one CPU) vs offered rate, {cold} cold connections (Table 2)"),
            "% of one CPU",
            false,
            series(&|p| 100.0 * p.wait_share_of_cpu),
            "cold-detail-wait-cpu",
        ),
    ];

    let mut notes = vec![
        format!(
            "Figure 9 / Table 2 detail: per backend, one `evq serve` thread (1 KiB reply) holding {cold} cold connections from its own `evq dead` child on 127.0.0.2; all the servers are started first and run side by side (an idle one blocks and costs nothing), then each offered rate ({:?} requests/s, {:.1} s each) is run against every server in turn, the order rotated from rate to rate. The load is open loop from this process, one request per connection on a fixed schedule (httperf's --rate; the paper's S-Clients also opened a connection per request). The paper's Table 2 had 50 hot S-Client connections at 400 requests/s in total; here the hot concurrency is whatever the rate and the latency make it. Latency is from each request's scheduled start (the client's own lateness included).",
            plan.rates,
            plan.point_for.as_secs_f64()
        ),
        "CPU accounting: the server thread reads CLOCK_THREAD_CPUTIME_ID before and after every get_next_event; the lab reads the totals before and after each run. Time inside get_next_event includes the backend's system call and scans, the scheduler's work to sleep and wake the thread (which the paper's profile charged elsewhere) and part of the two clock reads themselves. On loopback the kernel also charges part of the client's TCP receive work to the sending thread, so the server's total CPU includes some of the client's.".into(),
        "The load client shares the 2 cores with the server: each point records the client's start rate against the offered rate (estimated from the median start lag; a client that falls steadily behind lags linearly, so its last start is about twice the median lag late), and the CPU time of the whole process beside the server's. A point whose client started under 95% of the offered rate is marked client_limited in the data and left out of the latency check.".into(),
        format!(
            "The machine is shared: load average {load_before} before the sweep, {load_after} after (1, 5, 15 min). Work outside this process takes CPU from client and server alike, so stalls of tens of milliseconds show in the p99 figures."
        ),
    ];
    let limited: Vec<String> = points
        .iter()
        .filter(|p| p.client_limited)
        .map(|p| {
            format!(
                "{} at {}/s (started {:.0}/s, start lag p99 {:.1} ms)",
                p.backend, p.offered_rate, p.client_start_rate, p.start_lag_p99_ms
            )
        })
        .collect();
    notes.push(if limited.is_empty() {
        "The client kept its schedule at every point (started at least 95% of the offered rate)."
            .into()
    } else {
        format!(
            "Client behind schedule (achieved start rate under 95% of offered): {}.",
            limited.join("; ")
        )
    });
    for b in &names {
        let row: Vec<String> = points
            .iter()
            .filter(|p| p.backend == *b)
            .map(|p| {
                format!(
                    "{}/s → {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, wait {} of one CPU ({} of server CPU), {} errors{}",
                    p.offered_rate,
                    p.reply_rate_median,
                    p.p50_ms,
                    p.p99_ms,
                    pct(p.wait_share_of_cpu),
                    pct(p.wait_share_of_server),
                    p.errors,
                    if p.cut_off { ", cut off" } else { "" }
                )
            })
            .collect();
        notes.push(format!("{b}: {}", row.join("; ")));
    }
    if cold != 750 {
        notes.push(format!(
            "Scaled: {cold} cold connections instead of the paper's 750 (smoke run)."
        ));
    }
    let commands = vec![
        "evq serve --backend B --threads 1 --reply-size 1024 --idle-timeout 600 --header-timeout 600 --stats-path /.evq/stats --listen 127.0.0.1:P".into(),
        format!("evq dead --server 127.0.0.1 --port P --connections {cold} --source 127.0.0.2"),
        format!(
            "evq load --server 127.0.0.1 --port P --rate R --num-conns {}×R --num-calls 1 --timeout 2   (R in {:?})",
            plan.point_for.as_secs_f64(),
            plan.rates
        ),
        "curl http://127.0.0.1:P/.evq/stats   (before and after each load run: cpu_ns, wait_cpu_ns)".into(),
    ];
    let data = serde_json::json!({
        "cold": cold,
        "table2_rate": TABLE2_RATE,
        "seconds_per_point": plan.point_for.as_secs_f64(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "points": points,
    });
    Ok(ColdDetail {
        checks,
        plots,
        notes,
        commands,
        data,
    })
}
