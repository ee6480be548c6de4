//! The overload sweep's measurement: `evq serve` in this process given a
//! capacity one client thread can offer several times over, each policy at
//! each multiple of the probed capacity, open loop, one request per
//! connection.
//!
//! Two rigs give the server its capacity. `work` (judged): every request
//! costs [`WORK`] of CPU (`--work-us`, an application's work), and the
//! server's threads run on a CPU of their own, the client on another — a
//! server that is busy all the time it is overloaded, as real ones are.
//! `quota` (the full run, and the rig of earlier rounds): a 1 KiB static
//! reply on a CPU budget of [`BUDGET_RUNTIME`] per [`BUDGET_PERIOD`]
//! (`SCHED_DEADLINE`, as the signals scenario's overload half). The kernel
//! enforces that budget at its tick (4 ms here), so the server runs in bursts
//! and then stands still for tens of milliseconds while connections queue —
//! the regime of a container throttled by its CPU quota.

use super::series::{self, Shape};
use crate::experiment::{Ctx, RunSize};
use crate::rig::PeerServerKind;
use evq::BackendKind;
use evq_http::OverloadPolicy;
use evq_load::{run_load, LoadConfig, LoadReport};
use serde::{Deserialize, Serialize};
use std::io;
use std::time::Duration;

/// CPU each server thread may use in every [`BUDGET_PERIOD`] (`SCHED_DEADLINE`).
pub const BUDGET_RUNTIME: Duration = Duration::from_micros(100);
/// Period of the server's CPU budget.
pub const BUDGET_PERIOD: Duration = Duration::from_millis(1);
/// Reply size: seed 001 fetched a 1 KB document.
pub const REPLY_SIZE: usize = 1024;
/// CPU each request costs on the `work` rig.
pub const WORK: Duration = Duration::from_micros(400);
/// The rig the claims are judged on.
pub const WORK_RIG: &str = "work";
/// The CPU-budget rig.
pub const QUOTA_RIG: &str = "quota";
/// Connections of the closed-loop capacity probe.
pub const PROBE_CONNECTIONS: usize = 32;
/// The backlog of the `backlog64` series.
pub const SMALL_BACKLOG: i32 = 64;
/// A refusal learned within this long counts as fast.
pub const FAST_REFUSAL_MS: f64 = 10.0;

fn quota_rig() -> String {
    QUOTA_RIG.into()
}

fn serve_name() -> String {
    SERVE.into()
}

/// `evq serve`, in this process.
pub const SERVE: &str = "evq serve";
/// `evq proxy`, in this process, in front of an `evq serve`.
pub const PROXY: &str = "evq proxy";
/// `evq proxy --io completion`, in this process, in front of an `evq serve`
/// (issue 17): its policies are [`COMPLETION_POLICIES`].
pub const PROXY_COMPLETION: &str = "evq proxy --io completion";
/// `evq serve --io completion`, in this process (issue 17): its policies are
/// [`COMPLETION_POLICIES`]; it runs where the completion proxy does.
pub const SERVE_COMPLETION: &str = "evq serve --io completion";
/// The policies the completion loops take.
pub const COMPLETION_POLICIES: [&str; 2] = ["none", "pulse"];
/// nginx from Debian's package, a process of its own.
pub const NGINX: &str = "nginx";
/// nginx as the lab configures it for every comparison (backlog 4096), with
/// gzip as its work.
pub const NGINX_DEFAULT: &str = "default";
/// nginx as a user tunes it against overload: a listen backlog of
/// [`SMALL_BACKLOG`] and `limit_conn` of [`NGINX_LIMIT_CONN`] connections,
/// answered with 503 past it.
pub const NGINX_TUNED: &str = "tuned";
/// Connections nginx's `limit_conn` lets in at once, in the tuned series.
pub const NGINX_LIMIT_CONN: usize = 64;
/// The text file nginx compresses for each request on the work rig.
pub const NGINX_WORK_FILE: &str = "work.txt";
/// Its size: gzip at level 9 then costs nginx about [`WORK`] per request
/// on this kind of machine (the capacity is probed either way).
pub const NGINX_WORK_BYTES: usize = 14 * 1024;

fn quota_rigs() -> Vec<String> {
    vec![quota_rig()]
}

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Rigs (`work`, `quota`): the judged one first; the others run the
    /// first backend on one thread. (Records of earlier rounds had only the
    /// quota rig.)
    #[serde(default = "quota_rigs")]
    pub rigs: Vec<String>,
    /// Backends, the judged one (epoll) first.
    pub backends: Vec<String>,
    /// Worker thread counts, run on the first backend (the others run one).
    pub threads: Vec<usize>,
    /// Policies by `--overload` name.
    pub policies: Vec<String>,
    /// Offered rates as multiples of the probed capacity.
    pub multiples: Vec<f64>,
    /// Length of each capacity probe, seconds.
    pub probe_s: f64,
    /// Length of each open-loop schedule, seconds.
    pub window_s: f64,
    /// The client's timeout, seconds (also the servers' `--deadline`).
    pub timeout_s: f64,
    /// `evq proxy` series by policy, on the work rig, the first backend × 1
    /// thread: the proxy spends [`WORK`] on each request, its origin (an
    /// `evq serve` without work) shares its CPU. (Absent in records of
    /// earlier rounds.)
    #[serde(default)]
    pub proxy_policies: Vec<String>,
    /// nginx series by configuration ([`NGINX_DEFAULT`], [`NGINX_TUNED`]), on
    /// the work rig: nginx gzips [`NGINX_WORK_FILE`] for each request.
    #[serde(default)]
    pub nginx: Vec<String>,
}

/// The outcomes of the requests due after the warm-up (the first quarter of
/// the schedule, as for goodput).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct SteadyPoint {
    /// 2xx replies.
    pub served: u64,
    /// p99 of their latency from the intended start, ms.
    pub p99_ms: f64,
    /// Clients refused.
    pub refused: u64,
    /// Of those, within [`FAST_REFUSAL_MS`].
    pub refused_fast: u64,
    /// Clients that timed out.
    pub timed_out: u64,
}

/// One measured point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// The rig ([`WORK_RIG`] or [`QUOTA_RIG`]).
    #[serde(default = "quota_rig")]
    pub rig: String,
    /// The server: [`SERVE`], [`PROXY`] or [`NGINX`] (records of earlier
    /// rounds ran `evq serve` only).
    #[serde(default = "serve_name")]
    pub server: String,
    /// `--overload` name (nginx: its configuration's name).
    pub policy: String,
    /// Backend name.
    pub backend: String,
    /// Worker threads.
    pub threads: usize,
    /// Offered rate as a multiple of the probed capacity.
    pub multiple: f64,
    /// Connections per second the schedule asked for.
    pub offered_per_s: f64,
    /// Offered rate over the capacity seen in the sweep (the peak goodput of
    /// `none` on this backend and thread count).
    pub offered_over_capacity: f64,
    /// Goodput over that capacity.
    pub goodput_over_capacity: f64,
    /// Connections in the schedule.
    pub conns: u64,
    /// Connections the client started per second, at least (connections /
    /// (window + largest start lag)).
    pub client_started_per_s: f64,
    /// 2xx replies.
    pub served: u64,
    /// 2xx replies within the client timeout of their intended start.
    pub served_in_time: u64,
    /// `served_in_time` over the schedule's length.
    pub goodput_per_s: f64,
    /// p50 of served replies from the intended start, ms.
    pub p50_ms: f64,
    /// p99 of the same.
    pub p99_ms: f64,
    /// Clients refused (reset, refused, 503).
    pub refused: u64,
    /// Of those, refused within [`FAST_REFUSAL_MS`].
    pub refused_fast: u64,
    /// Clients that timed out.
    pub timed_out: u64,
    /// Of those, still connecting (their SYN never answered).
    pub timed_out_connecting: u64,
    /// Failures of other kinds.
    pub other_errors: u64,
    /// Server: connections accepted.
    pub server_accepts: u64,
    /// Server: connections admitted.
    pub server_admitted: u64,
    /// Server: refusals by seed 001, codel, deadline and gate's queue resets.
    pub server_refused: u64,
    /// Server: connections reset in the listen queue by gate.
    pub server_flushed: u64,
    /// Server: admitted after waiting over the late bound (the client timeout).
    pub server_served_late: u64,
    /// Server: responses sent.
    pub server_responses: u64,
    /// Whether every server thread ran on the CPU budget (quota rig) or
    /// was pinned to its CPU (work rig).
    pub server_budget: bool,
    /// The same outcomes after the warm-up (absent in records of earlier
    /// rounds).
    #[serde(default)]
    pub steady: Option<SteadyPoint>,
}

impl Point {
    /// The outcomes after the warm-up where measured, else the whole run's:
    /// (served, p99 ms, refused, refused fast, timed out).
    pub fn settled(&self) -> SteadyPoint {
        self.steady.unwrap_or(SteadyPoint {
            served: self.served,
            p99_ms: self.p99_ms,
            refused: self.refused,
            refused_fast: self.refused_fast,
            timed_out: self.timed_out,
        })
    }
}

/// The sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan run.
    pub plan: Plan,
    /// Closed-loop capacity per (backend, threads), replies/s, on the first
    /// rig.
    pub probes: Vec<(String, usize, f64)>,
    /// The same for the other rigs: (rig, backend, threads, replies/s).
    #[serde(default)]
    pub rig_probes: Vec<(String, String, usize, f64)>,
    /// Offered rates were capped here by the descriptor limit.
    pub rate_cap: f64,
    /// Why the CPU budget was not applied, where it was not.
    pub refusals: Vec<String>,
    /// Every point, in the order run.
    pub points: Vec<Point>,
}

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let (backends, threads, multiples, probe_s, window_s, timeout_s): (
        &[&str],
        &[usize],
        &[f64],
        _,
        _,
        _,
    ) = size.pick(
        (&["epoll"], &[1], &[0.5, 3.0], 0.3, 0.8, 0.5),
        (
            &["epoll", "rtsig-bulk"],
            &[1, 2],
            &[0.5, 0.9, 2.0, 3.0, 5.0],
            0.5,
            1.0,
            0.5,
        ),
        (
            &["epoll", "rtsig-bulk"],
            &[1, 2],
            &[0.5, 0.9, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0],
            1.0,
            3.0,
            1.0,
        ),
    );
    let rigs: &[&str] = size.pick(&[WORK_RIG], &[WORK_RIG], &[WORK_RIG, QUOTA_RIG]);
    let proxy_policies: &[&str] = size.pick(
        &["pulse"],
        &["none", "seed001", "pulse"],
        &["none", "seed001", "gate", "codel", "pulse"],
    );
    let nginx: &[&str] = size.pick(
        &[],
        &[NGINX_DEFAULT, NGINX_TUNED],
        &[NGINX_DEFAULT, NGINX_TUNED],
    );
    Plan {
        rigs: rigs.iter().map(|s| s.to_string()).collect(),
        backends: backends.iter().map(|s| s.to_string()).collect(),
        threads: threads.to_vec(),
        policies: ["none", "seed001", "gate", "codel", "pulse", "backlog64"]
            .map(String::from)
            .to_vec(),
        multiples: multiples.to_vec(),
        probe_s,
        window_s,
        timeout_s,
        proxy_policies: proxy_policies.iter().map(|s| s.to_string()).collect(),
        nginx: nginx.iter().map(|s| s.to_string()).collect(),
    }
}

/// Parses a policy name: `--overload`'s, or `backlog64` (no control, a listen
/// backlog of [`SMALL_BACKLOG`]: the kernel drops SYNs beyond it, at the
/// client's cost, and those clients time out rather than learn fast).
pub fn policy(name: &str) -> io::Result<OverloadPolicy> {
    Ok(match name {
        "none" => OverloadPolicy::None,
        "seed001" => OverloadPolicy::Seed001,
        "gate" => OverloadPolicy::Gate,
        "codel" => OverloadPolicy::Codel,
        "pulse" => OverloadPolicy::Pulse,
        "backlog64" => OverloadPolicy::None,
        _ => return Err(io::Error::other(format!("unknown policy {name}"))),
    })
}

/// Runs one load against a started server, the client on its own CPU.
fn load(cfg: &LoadConfig) -> io::Result<LoadReport> {
    let _pin = crate::placement::pin_this_thread_as_client();
    run_load(cfg)
}

/// Closed-loop capacity of `shape`'s server with no control.
fn probe(shape: Shape, plan: &Plan, refusals: &mut Vec<String>) -> io::Result<f64> {
    let server = series::start(shape, shape.baseline(), plan.timeout_s)?;
    refusals.extend(server.refused.clone());
    let mut load = LoadConfig::closed(
        "127.0.0.1",
        server.addr().port(),
        PROBE_CONNECTIONS,
        Duration::from_secs_f64(plan.probe_s),
    );
    (load.uri, load.headers) = server.request();
    load.num_calls = 1;
    load.hog = true;
    load.timeout = Some(Duration::from_secs(2));
    let report = self::load(&load);
    server.finish()?;
    Ok(report?.reply_rate_avg)
}

/// Probes capacity, then runs every (rig, backend, threads, policy) at every
/// multiple; the series rotate from point to point so a slow phase of the
/// shared machine falls on all of them.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let fd_limit = crate::resources::raise_nofile()? as f64;
    let mut missing = Vec::new();
    let completion_policies: Vec<String> =
        COMPLETION_POLICIES.iter().map(|s| s.to_string()).collect();
    let mut shapes: Vec<(Shape, &[String])> = Vec::new();
    for (r, rig) in plan.rigs.iter().enumerate() {
        if rig != WORK_RIG && rig != QUOTA_RIG {
            return Err(io::Error::other(format!("unknown rig {rig}")));
        }
        for (i, name) in plan.backends.iter().enumerate() {
            let Ok(kind) = name.parse::<BackendKind>() else {
                continue;
            };
            if kind.available().is_err() || (r > 0 && i > 0) {
                continue;
            }
            let threads: &[usize] = if i == 0 && r == 0 {
                &plan.threads
            } else {
                &[1]
            };
            shapes.extend(threads.iter().map(|&threads| {
                let shape = Shape {
                    rig: rig.as_str(),
                    server: SERVE,
                    kind,
                    threads,
                };
                (shape, &plan.policies[..])
            }));
        }
    }
    // The proxy and nginx on the judged rig, beside the server's first series.
    if let Some(&(first, _)) = shapes.first() {
        let one = Shape {
            rig: plan.rigs[0].as_str(),
            threads: 1,
            ..first
        };
        if !plan.proxy_policies.is_empty() {
            shapes.push((
                Shape {
                    server: PROXY,
                    ..one
                },
                &plan.proxy_policies[..],
            ));
        }
        if !plan.proxy_policies.is_empty() && one.rig == WORK_RIG {
            match evq::completion::CompletionRing::new() {
                Ok(_) => {
                    for server in [SERVE_COMPLETION, PROXY_COMPLETION] {
                        shapes.push((Shape { server, ..one }, &completion_policies[..]));
                    }
                }
                Err(e) => missing.push(format!(
                    "{SERVE_COMPLETION} and {PROXY_COMPLETION} series not run: this kernel has no io_uring completion API ({e})"
                )),
            }
        }
        if !plan.nginx.is_empty() && one.rig == WORK_RIG {
            match PeerServerKind::Nginx.available() {
                Ok(()) => shapes.push((
                    Shape {
                        server: NGINX,
                        kind: BackendKind::Epoll,
                        ..one
                    },
                    &plan.nginx[..],
                )),
                Err(why) => missing.push(format!("nginx series not run: {why}")),
            }
        }
    }
    if shapes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "none of the backends is available here",
        ));
    }
    for p in plan.policies.iter().chain(&plan.proxy_policies) {
        policy(p)?;
    }
    ctx.expect(
        shapes
            .iter()
            .map(|(_, names)| 1 + names.len() * plan.multiples.len())
            .sum(),
    );
    // Client and server share this process's descriptors: each connection in
    // flight may hold two for up to the timeout. Keep a quarter spare.
    let rate_cap = 0.75 * fd_limit / (2.0 * plan.timeout_s);
    let mut refusals = Vec::new();
    let mut probes = Vec::new();
    let mut rig_probes = Vec::new();
    let mut points = Vec::new();
    for &(shape, names) in &shapes {
        let Shape {
            rig,
            server,
            kind,
            threads,
        } = shape;
        ctx.step(&format!(
            "overload: capacity probe, {rig} rig, {server} {kind} × {threads}"
        ));
        let capacity = probe(shape, &plan, &mut refusals)?;
        if server != SERVE {
            rig_probes.push((
                format!("{rig} {server}"),
                kind.name().to_string(),
                threads,
                capacity,
            ));
        } else if rig == plan.rigs[0] {
            probes.push((kind.name().to_string(), threads, capacity));
        } else {
            rig_probes.push((rig.to_string(), kind.name().to_string(), threads, capacity));
        }
        for (step, &m) in plan.multiples.iter().enumerate() {
            for i in 0..names.len() {
                let p = names[(i + step) % names.len()].as_str();
                let rate = (m * capacity).round().clamp(1.0, rate_cap.floor());
                ctx.step(&format!(
                    "overload: {rig} rig, {server} {kind} × {threads}, {p} at {rate:.0}/s ({m}×)"
                ));
                points.push(run(shape, p, m, rate, &plan, &mut refusals)?);
            }
        }
    }
    fill_ratios(&mut points);
    refusals.extend(missing);
    Ok(Records {
        plan,
        probes,
        rig_probes,
        rate_cap,
        refusals,
        points,
    })
}

/// Capacity of each (rig, server, backend, threads) = the peak goodput of
/// its `none` sweep (nginx: its default configuration's); every point's
/// offered rate and goodput as multiples of it.
pub fn fill_ratios(points: &mut [Point]) {
    let keys: Vec<(String, String, String, usize)> = points
        .iter()
        .map(|p| {
            (
                p.rig.clone(),
                p.server.clone(),
                p.backend.clone(),
                p.threads,
            )
        })
        .collect();
    for (rig, server, backend, threads) in keys {
        let same = |p: &Point| {
            p.rig == rig && p.server == server && p.backend == backend && p.threads == threads
        };
        let baseline = if server == NGINX {
            NGINX_DEFAULT
        } else {
            "none"
        };
        let cap = points
            .iter()
            .filter(|p| same(p) && p.policy == baseline)
            .map(|p| p.goodput_per_s)
            .fold(0.0, f64::max);
        for p in points.iter_mut().filter(|p| same(p)) {
            if cap > 0.0 {
                p.offered_over_capacity = p.offered_per_s / cap;
                p.goodput_over_capacity = p.goodput_per_s / cap;
            }
        }
    }
}

/// Replies in time per second in the steady part of the schedule: the reply
/// rate over the samples wholly inside its last three quarters (the first is
/// warm-up; after it, a server still works off its queue), times the share of
/// replies that came within the timeout. Counting all in-time replies over the
/// schedule's length instead would credit a server with the tail it serves
/// after the load stops.
pub fn goodput(r: &LoadReport, window_s: f64) -> f64 {
    let in_time = if r.outcomes.served > 0 {
        r.outcomes.served_in_time as f64 / r.outcomes.served as f64
    } else {
        return 0.0;
    };
    let iv = r.reply_rate.interval_s;
    let first = (window_s / 4.0 / iv - 1e-9).ceil().max(0.0) as usize;
    let end = (window_s / iv + 1e-9).floor() as usize;
    if iv <= 0.0 || end <= first {
        return r.outcomes.served_in_time as f64 / window_s;
    }
    let sum: f64 = (first..end)
        .map(|i| r.reply_rate.samples.get(i).copied().unwrap_or(0.0))
        .sum();
    in_time * sum / (end - first) as f64
}

fn run(
    shape: Shape,
    policy: &str,
    multiple: f64,
    rate: f64,
    plan: &Plan,
    refusals: &mut Vec<String>,
) -> io::Result<Point> {
    let server = series::start(shape, policy, plan.timeout_s)?;
    let server_budget = server.refused.is_none();
    refusals.extend(server.refused.clone());
    let conns = (rate * plan.window_s).round().max(1.0) as u64;
    let mut load = LoadConfig::open("127.0.0.1", server.addr().port(), rate, conns);
    (load.uri, load.headers) = server.request();
    load.num_calls = 1;
    load.hog = true;
    load.timeout = Some(Duration::from_secs_f64(plan.timeout_s));
    load.fast_refusal = Duration::from_secs_f64(FAST_REFUSAL_MS / 1000.0);
    load.warm_up = Some(Duration::from_secs_f64(plan.window_s / 4.0));
    let report = self::load(&load);
    let stats = server.finish()?;
    let r: LoadReport = report?;
    let o = &r.outcomes;
    Ok(Point {
        rig: shape.rig.into(),
        server: shape.server.into(),
        steady: r.steady.map(|s| SteadyPoint {
            served: s.outcomes.served,
            p99_ms: s.served_ms.p99,
            refused: s.outcomes.refused,
            refused_fast: s.outcomes.refused_fast,
            timed_out: s.outcomes.timed_out,
        }),
        policy: policy.into(),
        backend: shape.kind.name().into(),
        threads: shape.threads,
        multiple,
        offered_per_s: rate,
        offered_over_capacity: 0.0,
        goodput_over_capacity: 0.0,
        conns,
        client_started_per_s: r.connections as f64 / (plan.window_s + r.start_lag_ms.max / 1000.0),
        served: o.served,
        served_in_time: o.served_in_time,
        goodput_per_s: goodput(&r, plan.window_s),
        p50_ms: r.served_ms.p50,
        p99_ms: r.served_ms.p99,
        refused: o.refused,
        refused_fast: o.refused_fast,
        timed_out: o.timed_out,
        timed_out_connecting: o.timed_out_connecting,
        other_errors: r.errors.total().saturating_sub(o.refused + o.timed_out),
        server_accepts: stats.accepts,
        server_admitted: stats.admitted,
        server_refused: stats.refused,
        server_flushed: stats.flushed,
        server_served_late: stats.served_late,
        server_responses: stats.responses,
        server_budget,
    })
}
