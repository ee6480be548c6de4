//! `evq serve` beside nginx, h2o and lighttpd, serving the same files to the same
//! client, with and without idle connections held open — the HTTP server issue's
//! figures (throughput ratios, p99, the drop under 10,000 idle connections,
//! user-space bytes per idle connection).
//!
//! Every point starts a fresh server process — `evq serve` too, so that its
//! memory and CPU are measured exactly as the peers' are and not mixed with the
//! load client's — holds the cold connections from an `evq dead` child bound to
//! 127.0.0.2, checks that the server really holds them (its socket descriptors
//! that are established connections from 127.0.0.2), reads the server's
//! anonymous resident memory, then runs the same closed loop from this process.
//! Servers alternate point by point (A/B interleaving), and each repeat rotates
//! their order.

use crate::experiment::{Ctx, RunSize};
use crate::procinfo::{loadavg, machine_cpu};
use crate::rig::{
    DeadConnections, Docroot, EvqServeChild, PeerServer, PeerServerKind, ServerProcess,
};
use evq::BackendKind;
use evq_load::{run_load, LoadConfig, LoadReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

/// Hot connections of the closed loop, the same for every server.
pub const HOT_CONNECTIONS: usize = 32;
/// Threads of the load client.
pub const CLIENT_THREADS: usize = 1;
/// A ramp that gains no connection for this long has stalled.
const STALL: Duration = Duration::from_secs(3);
/// A point during whose load other processes surely used more than this share
/// of a core (`others_cpu_low`) is measured again (up to `Plan::attempts` in
/// all), and the least disturbed attempt is kept.
pub const DISTURBED: f64 = 0.25;

/// The servers compared, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Evq,
    /// `evq serve --io completion`.
    EvqCompletion,
    Peer(PeerServerKind),
}

/// The name of `evq serve --io completion`'s rows.
pub const EVQ_COMPLETION: &str = "evq-completion";

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Evq => "evq",
            Server::EvqCompletion => EVQ_COMPLETION,
            Server::Peer(k) => k.name(),
        }
    }
}

/// Sizes of the comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Cold connections, ascending (the first is the baseline).
    pub colds: Vec<usize>,
    /// File sizes, bytes (the last is the headline size).
    pub sizes: Vec<usize>,
    /// Repeats of the whole grid.
    pub repeats: usize,
    /// Seconds of timed load per point.
    pub load_s: f64,
    /// Attempts at a point disturbed by other processes (see [`DISTURBED`]).
    pub attempts: usize,
}

/// One server at one (cold count, file size, repeat).
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// "evq" or the peer's name.
    pub server: String,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// Cold connections asked for.
    pub cold: usize,
    /// Cold connections the server held when the load started.
    pub cold_held: u64,
    /// And 100 ms after it ended.
    pub cold_held_after: u64,
    /// File size, bytes.
    pub reply_size: usize,
    /// Why the load did not run (the cold connections did not all come up).
    pub skipped: Option<String>,
    /// The load client's reply rate.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub replies_per_s: f64,
    /// Median latency.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub p50_ms: f64,
    /// 99th-percentile latency.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub p99_ms: f64,
    /// Load errors plus non-2xx replies.
    pub errors: u64,
    /// Replies whose status was not 2xx.
    pub non_2xx: u64,
    /// Response bytes (heads and bodies) per reply.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub bytes_per_reply: f64,
    /// Anonymous resident memory (smaps_rollup) of the server before the cold
    /// connections: evq's is this whole process.
    pub rss_anon_before: u64,
    /// And with them held.
    pub rss_anon_cold: u64,
    /// (rss_anon_cold - rss_anon_before) / cold_held.
    pub bytes_per_idle_conn: Option<f64>,
    /// CPU of the load client (this process)
    /// per wall second of the load.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub client_cpu_share: f64,
    /// CPU of the server per wall second of the load.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub server_cpu_share: f64,
    /// CPU that other processes (neither the client nor the server) used per
    /// wall second of the load, a lower bound: the machine's user + system time
    /// less the client's and the server's. Without IRQ time accounting
    /// (`CONFIG_IRQ_TIME_ACCOUNTING`) /proc/stat books a tick that lands in a
    /// softirq as softirq even when a process's runtime includes it, so this
    /// can undercount.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub others_cpu_low: f64,
    /// The upper bound: the machine's user + system + irq + softirq time less
    /// the client's and the server's (counts softirq work done outside them,
    /// which may still be theirs).
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub others_cpu_high: f64,
    /// The machine's irq + softirq time per wall second of the load (much of
    /// it loopback networking for client and server).
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub softirq_cpu_share: f64,
    /// Attempts made at this point (more than one when other processes
    /// disturbed the earlier ones); the figures are the least disturbed one's.
    pub attempts: usize,
    /// Wall-clock seconds of the whole point (every attempt): start, ramp,
    /// loads, stop.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub seconds: f64,
}

/// A (server, cold count) whose point failed or whose cold connections did not
/// all come up: not tried again in later repeats or sizes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stall {
    /// The server.
    pub server: String,
    /// The cold count.
    pub cold: usize,
    /// What happened.
    pub why: String,
}

/// The comparison's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// The backend `evq serve` ran on.
    pub backend: String,
    /// The servers compared, evq first (then `evq-completion` where the kernel has
    /// completions).
    pub servers: Vec<String>,
    /// Peer servers not installed here.
    pub missing: Vec<String>,
    /// Why each missing one is missing.
    pub missing_why: Vec<String>,
    /// Pairs not measured after their first failure.
    pub stalled: Vec<Stall>,
    /// Every point, skipped ones included.
    pub points: Vec<Point>,
    /// Load average (1, 5, 15 min) at the start.
    pub loadavg_start: String,
    /// And at the end.
    pub loadavg_end: String,
    /// Wall-clock seconds of the whole comparison.
    pub seconds: f64,
    /// Where servers and clients ran (CPU placement).
    pub placement: String,
    /// CPUs this process may use.
    pub cores: usize,
}

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let (colds, sizes, repeats, load_s, attempts) = size.pick(
        (vec![0, 20], vec![1024], 1, 0.3, 1),
        (vec![0, 2000], vec![1024], 3, 1.0, 1),
        (vec![0, 2500, 5000, 10_000], vec![128, 512, 1024], 3, 2.0, 3),
    );
    Plan {
        colds,
        sizes,
        repeats,
        load_s,
        attempts,
    }
}

/// Runs the comparison.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let started = Instant::now();
    let loadavg_start = loadavg();
    crate::resources::raise_nofile()?;
    let backend = BackendKind::from_env_or_best().unwrap_or(BackendKind::Epoll);
    let root = Docroot::with_sizes(&[128, 512, 1024])?;
    let mut servers = vec![Server::Evq];
    let (mut missing, mut missing_why) = (Vec::new(), Vec::new());
    match evq::completion::CompletionRing::new() {
        Ok(_) => servers.push(Server::EvqCompletion),
        Err(e) => {
            missing_why.push(format!(
                "{EVQ_COMPLETION} (evq serve --io completion): this kernel has no io_uring completion API ({e}); it is left out of this comparison."
            ));
            missing.push(EVQ_COMPLETION.to_string());
        }
    }
    for kind in PeerServerKind::ALL {
        match kind.available() {
            Ok(()) => servers.push(Server::Peer(kind)),
            Err(why) => {
                missing_why.push(format!("{why}; it is left out of this comparison."));
                missing.push(kind.name().to_string());
            }
        }
    }
    let rig = Rig {
        ctx,
        backend,
        root: &root,
        load_for: Duration::from_secs_f64(plan.load_s),
    };
    ctx.expect(plan.repeats * plan.sizes.len() * plan.colds.len() * servers.len());
    let mut points: Vec<Point> = Vec::new();
    let mut stalled: BTreeMap<(&'static str, usize), String> = BTreeMap::new();
    for repeat in 0..plan.repeats {
        for &size in &plan.sizes {
            let mut order = servers.clone();
            order.rotate_left(repeat % servers.len());
            for &server in &order {
                // A server's cold counts back to back, so its "flat under
                // cold connections" ratio compares moments of the machine
                // seconds apart, not a whole pass of the other servers apart
                // (quick runs read evq-completion 119k and 182k at 0 cold in
                // two repeats); every other repeat in reverse, so a drift
                // within a pair cancels out.
                let mut colds = plan.colds.clone();
                if repeat % 2 == 1 {
                    colds.reverse();
                }
                for cold in colds {
                    let at = At {
                        server,
                        repeat,
                        cold,
                        size,
                    };
                    if let Some(why) = stalled.get(&(server.name(), cold)) {
                        ctx.step(&format!(
                            "peers: {} at {cold} skipped: {why}",
                            server.name()
                        ));
                        points.push(Point {
                            skipped: Some(why.clone()),
                            ..skipped_point(at)
                        });
                        continue;
                    }
                    let p = rig.least_disturbed(at, plan.attempts);
                    if let Some(why) = &p.skipped {
                        stalled.insert((server.name(), cold), why.clone());
                    }
                    points.push(p);
                }
            }
        }
    }
    Ok(Records {
        plan,
        backend: backend.name().into(),
        servers: servers.iter().map(|s| s.name().to_string()).collect(),
        missing,
        missing_why,
        stalled: stalled
            .into_iter()
            .map(|((server, cold), why)| Stall {
                server: server.into(),
                cold,
                why,
            })
            .collect(),
        points,
        loadavg_start,
        loadavg_end: loadavg(),
        seconds: started.elapsed().as_secs_f64(),
        placement: crate::placement::describe(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// Where one point stands in the grid.
#[derive(Clone, Copy)]
struct At {
    server: Server,
    repeat: usize,
    cold: usize,
    size: usize,
}

/// What every point shares.
struct Rig<'a> {
    ctx: &'a Ctx<'a>,
    backend: BackendKind,
    root: &'a Docroot,
    load_for: Duration,
}

impl Rig<'_> {
    /// Measures the point up to `attempts` times while other processes disturb
    /// it, keeping the least disturbed attempt.
    fn least_disturbed(&self, at: At, attempts: usize) -> Point {
        self.ctx.step(&format!(
            "peers: {} with {} cold connections, {} B files (repeat {})",
            at.server.name(),
            at.cold,
            at.size,
            at.repeat + 1
        ));
        let t = Instant::now();
        let (mut kept, mut made): (Option<Point>, usize) = (None, 0);
        for _ in 0..attempts {
            made += 1;
            let p = self.point(at).unwrap_or_else(|e| Point {
                skipped: Some(format!("{} failed: {e}", at.server.name())),
                ..skipped_point(at)
            });
            let done = p.skipped.is_some() || p.others_cpu_low <= DISTURBED;
            if kept
                .as_ref()
                .is_none_or(|k| p.others_cpu_low < k.others_cpu_low)
                || p.skipped.is_some()
            {
                kept = Some(p);
            }
            if done {
                break;
            }
        }
        let mut p = kept.expect("at least one attempt");
        p.attempts = made;
        p.seconds = t.elapsed().as_secs_f64();
        p
    }

    /// One attempt: a fresh server, its cold connections, memory, then the load.
    fn point(&self, at: At) -> io::Result<Point> {
        let (server, cold, size, load_for) = (at.server, at.cold, at.size, self.load_for);
        let running = match server {
            Server::Evq => Running::Evq(EvqServeChild::start(
                self.ctx.tools,
                self.backend,
                self.root,
            )?),
            Server::EvqCompletion => {
                Running::Evq(EvqServeChild::start_completion(self.ctx.tools, self.root)?)
            }
            Server::Peer(kind) => Running::Peer(PeerServer::start(kind, self.root, 1)?),
        };
        let port = running.port();
        // Accepting is not serving (the kernel completes handshakes into the listen
        // backlog while nginx's worker may still be setting up): wait for a real
        // reply before reading the baseline.
        crate::rig::child::wait_answering(port, &Docroot::uri(size))?;
        std::thread::sleep(Duration::from_millis(50));
        let rss_anon_before = running.process().anon_rss();
        let mut point = Point {
            rss_anon_before,
            rss_anon_cold: rss_anon_before,
            ..skipped_point(at)
        };
        let cold_clients =
            DeadConnections::start(self.ctx.tools, port, cold, load_for.as_secs() + 120)?;
        if let Some((held, why)) = ramp(&running, at) {
            point.cold_held = held;
            point.skipped = Some(why);
            return Ok(point);
        }
        // Let the last accepts settle (the same wait with no cold connections).
        std::thread::sleep(Duration::from_millis(200));
        point.cold_held = running.held(cold);
        point.rss_anon_cold = running.process().anon_rss();
        if point.cold_held > 0 {
            point.bytes_per_idle_conn = Some(
                (point.rss_anon_cold as f64 - rss_anon_before as f64) / point.cold_held as f64,
            );
        }
        let mut load = LoadConfig::closed("127.0.0.1", port, HOT_CONNECTIONS, load_for);
        load.threads = CLIENT_THREADS;
        load.uri = Docroot::uri(size);
        // A short untimed run first, after the memory reading: a fresh server's first
        // requests fault in its heap and open the file, which is not the steady state.
        let mut warm = load.clone();
        warm.mode = evq_load::LoopMode::Closed {
            connections: HOT_CONNECTIONS,
            duration: Some(warm_up(load_for)),
            num_conns: None,
        };
        // The client threads inherit this thread's pin (dropped after the load).
        let _pin = crate::placement::pin_this_thread_as_client();
        run_load(&warm)?;
        let (cpu0, machine0) = (running.process().cpu_time(), machine_cpu());
        let report: LoadReport = run_load(&load)?;
        let server_cpu = running
            .process()
            .cpu_time()
            .saturating_sub(cpu0)
            .as_secs_f64();
        let machine1 = machine_cpu();
        let tasks = machine1.0.saturating_sub(machine0.0).as_secs_f64();
        let interrupts = machine1.1.saturating_sub(machine0.1).as_secs_f64();
        // The client has closed its hot connections; give the server a moment to see
        // that, so what it still holds is the cold connections.
        std::thread::sleep(Duration::from_millis(100));
        point.cold_held_after = running.held(cold);
        let wall = report.duration_s.max(1e-9);
        // This process runs only the client now (and the lab's progress line).
        let client_cpu = report.cpu_user_s + report.cpu_sys_s;
        point.replies_per_s = report.reply_rate_avg;
        point.p50_ms = report.latency_ms.p50;
        point.p99_ms = report.latency_ms.p99;
        point.non_2xx = report.replies.saturating_sub(report.status.s2xx);
        point.errors = report.errors.total() + point.non_2xx;
        point.bytes_per_reply = report.bytes_received as f64 / report.replies.max(1) as f64;
        point.client_cpu_share = client_cpu / wall;
        point.server_cpu_share = server_cpu / wall;
        point.others_cpu_low = ((tasks - client_cpu - server_cpu) / wall).max(0.0);
        point.others_cpu_high = ((tasks + interrupts - client_cpu - server_cpu) / wall).max(0.0);
        point.softirq_cpu_share = interrupts / wall;
        // The cold connections go first, so that no server waits on them to stop.
        drop(cold_clients);
        drop(running);
        Ok(point)
    }
}

/// Waits until the server holds all its cold connections; `Some((held, why))`
/// if the ramp stalls (no gain for [`STALL`], or a minute in all).
fn ramp(running: &Running, at: At) -> Option<(u64, String)> {
    let cold = at.cold;
    let (mut best, mut gained_at, ramp) = (0u64, Instant::now(), Instant::now());
    loop {
        let held = running.held(cold);
        if held as usize >= cold {
            return None;
        }
        if held > best {
            (best, gained_at) = (held, Instant::now());
        }
        if gained_at.elapsed() > STALL || ramp.elapsed() > Duration::from_secs(60) {
            return Some((
                held,
                format!(
                    "{} held {held} of {cold} cold connections (no gain for {} s); load not run",
                    at.server.name(),
                    STALL.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The untimed run before each timed one.
pub fn warm_up(load_for: Duration) -> Duration {
    (load_for / 5).max(Duration::from_millis(100))
}

/// One running server, whichever kind.
enum Running {
    Evq(ServerProcess),
    Peer(PeerServer),
}

impl Running {
    fn process(&self) -> &ServerProcess {
        match self {
            Running::Evq(s) => s,
            Running::Peer(p) => p.process(),
        }
    }

    fn port(&self) -> u16 {
        self.process().addr().port()
    }

    /// Cold connections the server holds (none to look for when `cold` is 0).
    fn held(&self, cold: usize) -> u64 {
        if cold == 0 {
            return 0;
        }
        let from = crate::rig::evq_programs::COLD_SOURCE.into();
        let inodes = crate::procinfo::established_from(self.port(), from);
        crate::procinfo::sockets_held(&self.process().processes(), &inodes)
    }
}

fn skipped_point(at: At) -> Point {
    Point {
        server: at.server.name().to_string(),
        repeat: at.repeat,
        cold: at.cold,
        cold_held: 0,
        cold_held_after: 0,
        reply_size: at.size,
        skipped: None,
        replies_per_s: f64::NAN,
        p50_ms: f64::NAN,
        p99_ms: f64::NAN,
        errors: 0,
        non_2xx: 0,
        bytes_per_reply: f64::NAN,
        rss_anon_before: 0,
        rss_anon_cold: 0,
        bytes_per_idle_conn: None,
        client_cpu_share: f64::NAN,
        server_cpu_share: f64::NAN,
        others_cpu_low: f64::NAN,
        others_cpu_high: f64::NAN,
        softirq_cpu_share: f64::NAN,
        attempts: 1,
        seconds: 0.0,
    }
}
