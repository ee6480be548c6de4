//! The cold-connections experiment's second half: `evq serve` beside nginx, h2o
//! and lighttpd, serving the same files to the same client, with and without idle
//! connections held open — the HTTP server issue's figures (throughput ratios,
//! p99, the drop under 10,000 idle connections, user-space bytes per idle
//! connection).
//!
//! Every point starts a fresh server process — `evq serve` too, so that its
//! memory and CPU are measured exactly as the peers' are and not mixed with the
//! load client's — holds the cold connections from an `evq dead` child bound to
//! 127.0.0.2, checks that the server really holds them (its socket descriptors
//! that are established connections from 127.0.0.2), reads the server's
//! anonymous resident memory, then runs the same closed loop from this process.
//! Servers alternate point by point (A/B interleaving), and each repeat rotates
//! their order.

use crate::plot::{render, Chart, Series};
use crate::procinfo::{loadavg, machine_cpu};
use crate::record::{ClaimCheck, PlotRecord, Verdict};
use crate::rig::{
    DeadConnections, Docroot, EvqServeChild, PeerServer, PeerServerKind, ServerProcess,
};
use crate::stats::spread;
use crate::Scenario;
use evq::BackendKind;
use evq_load::{run_load, LoadConfig, LoadReport};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

/// What the peer comparison adds to the cold-connections record.
pub(crate) struct PeerPart {
    /// Claims checked.
    pub checks: Vec<ClaimCheck>,
    /// Plots.
    pub plots: Vec<PlotRecord>,
    /// Notes on method.
    pub notes: Vec<String>,
    /// Commands that reproduce it.
    pub commands: Vec<String>,
    /// Raw measurements.
    pub data: serde_json::Value,
}

impl PeerPart {
    /// The part when the comparison could not run at all.
    pub fn failed(e: &io::Error) -> PeerPart {
        PeerPart {
            checks: vec![ClaimCheck {
                claim: "evq serve ≥ 1.2× nginx's and ≥ 1.0× h2o's requests/s, p99 ≤ both, ≤ 2% drop with 10,000 idle connections, ≤ 256 B per idle connection (HTTP server issue)".into(),
                measured: format!("not run: the peer comparison failed: {e}"),
                verdict: Verdict::NotMeasured,
                reasoning: "no measurement, no verdict".into(),
            }],
            plots: Vec::new(),
            notes: Vec::new(),
            commands: Vec::new(),
            data: json!({ "failed": e.to_string() }),
        }
    }
}

/// Hot connections of the closed loop, the same for every server.
const HOT_CONNECTIONS: usize = 32;
/// Threads of the load client.
const CLIENT_THREADS: usize = 1;
/// A ramp that gains no connection for this long has stalled.
const STALL: Duration = Duration::from_secs(3);

/// The servers compared, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Evq,
    Peer(PeerServerKind),
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Evq => "evq",
            Server::Peer(k) => k.name(),
        }
    }
}

#[derive(Serialize, Clone, Debug)]
struct Point {
    server: &'static str,
    repeat: usize,
    cold: usize,
    /// Cold connections the server held when the load started.
    cold_held: u64,
    /// And 100 ms after it ended.
    cold_held_after: u64,
    reply_size: usize,
    /// Why the load did not run (the cold connections did not all come up).
    skipped: Option<String>,
    replies_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Load errors plus non-2xx replies.
    errors: u64,
    non_2xx: u64,
    /// Response bytes (heads and bodies) per reply.
    bytes_per_reply: f64,
    /// Anonymous resident memory (smaps_rollup) of the server before the cold
    /// connections: evq's is this whole process.
    rss_anon_before: u64,
    /// And with them held.
    rss_anon_cold: u64,
    /// (rss_anon_cold - rss_anon_before) / cold_held.
    bytes_per_idle_conn: Option<f64>,
    /// CPU of the load client (this process)
    /// per wall second of the load.
    client_cpu_share: f64,
    /// CPU of the server per wall second of the load.
    server_cpu_share: f64,
    /// CPU that other processes (neither the client nor the server) used per
    /// wall second of the load, a lower bound: the machine's user + system time
    /// less the client's and the server's. Without IRQ time accounting
    /// (`CONFIG_IRQ_TIME_ACCOUNTING`) /proc/stat books a tick that lands in a
    /// softirq as softirq even when a process's runtime includes it, so this
    /// can undercount.
    others_cpu_low: f64,
    /// The upper bound: the machine's user + system + irq + softirq time less
    /// the client's and the server's (counts softirq work done outside them,
    /// which may still be theirs).
    others_cpu_high: f64,
    /// The machine's irq + softirq time per wall second of the load (much of
    /// it loopback networking for client and server).
    softirq_cpu_share: f64,
    /// Attempts made at this point (more than one when other processes
    /// disturbed the earlier ones); the figures are the least disturbed one's.
    attempts: usize,
    /// Wall-clock seconds of the whole point (every attempt): start, ramp,
    /// loads, stop.
    seconds: f64,
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

struct Plan {
    colds: Vec<usize>,
    sizes: Vec<usize>,
    repeats: usize,
    load_for: Duration,
    /// Attempts at a point disturbed by other processes (see [`DISTURBED`]).
    attempts: usize,
}

/// A point during whose load other processes surely used more than this share
/// of a core (`others_cpu_low`) is measured again (up to `Plan::attempts` in all), and the least
/// disturbed attempt is kept.
const DISTURBED: f64 = 0.25;

fn plan(scenario: &Scenario) -> Plan {
    if scenario.smoke {
        Plan {
            colds: vec![0, 20],
            sizes: vec![1024],
            repeats: 1,
            load_for: Duration::from_millis(300),
            attempts: 1,
        }
    } else if scenario.quick {
        Plan {
            colds: vec![0, 2000],
            sizes: vec![1024],
            repeats: 2,
            load_for: Duration::from_millis(800),
            attempts: 1,
        }
    } else {
        Plan {
            colds: vec![0, 2500, 5000, 10_000],
            sizes: vec![128, 512, 1024],
            repeats: 3,
            load_for: Duration::from_secs(2),
            attempts: 3,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    tools: &crate::tools::Tools,
    server: Server,
    backend: BackendKind,
    root: &Docroot,
    cold: usize,
    size: usize,
    repeat: usize,
    load_for: Duration,
) -> io::Result<Point> {
    let running = match server {
        Server::Evq => Running::Evq(EvqServeChild::start(tools, backend, root)?),
        Server::Peer(kind) => Running::Peer(PeerServer::start(kind, root, 1)?),
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
        ..skipped_point(server, repeat, cold, size)
    };
    let cold_clients = DeadConnections::start(tools, port, cold, load_for.as_secs() + 120)?;
    let (mut best, mut gained_at, ramp) = (0u64, Instant::now(), Instant::now());
    loop {
        let held = running.held(cold);
        if held as usize >= cold {
            break;
        }
        if held > best {
            (best, gained_at) = (held, Instant::now());
        }
        if gained_at.elapsed() > STALL || ramp.elapsed() > Duration::from_secs(60) {
            point.cold_held = held;
            point.skipped = Some(format!(
                "{} held {held} of {cold} cold connections (no gain for {} s); load not run",
                server.name(),
                STALL.as_secs()
            ));
            return Ok(point);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Let the last accepts settle (the same wait with no cold connections).
    std::thread::sleep(Duration::from_millis(200));
    point.cold_held = running.held(cold);
    point.rss_anon_cold = running.process().anon_rss();
    if point.cold_held > 0 {
        point.bytes_per_idle_conn =
            Some((point.rss_anon_cold as f64 - rss_anon_before as f64) / point.cold_held as f64);
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

/// The untimed run before each timed one.
fn warm_up(load_for: Duration) -> Duration {
    (load_for / 5).max(Duration::from_millis(100))
}

/// Median (and spread) of one measure over the repeats of one point.
fn summary<'a>(
    points: &'a [Point],
    server: &'a str,
    cold: usize,
    size: usize,
) -> impl Iterator<Item = &'a Point> + 'a {
    points
        .iter()
        .filter(move |p| p.server == server && p.cold == cold && p.reply_size == size)
        .filter(|p| p.skipped.is_none())
}

fn med(
    points: &[Point],
    server: &str,
    cold: usize,
    size: usize,
    f: fn(&Point) -> f64,
) -> Option<f64> {
    spread(summary(points, server, cold, size).map(f).collect()).map(|s| s.median)
}

/// Runs the comparison and judges the figures.
pub(crate) fn run_peers(scenario: &Scenario) -> io::Result<PeerPart> {
    let started = Instant::now();
    let load_at_start = loadavg();
    let plan = plan(scenario);
    crate::resources::raise_nofile()?;
    let backend = BackendKind::from_env_or_best().unwrap_or(BackendKind::Epoll);
    let root = Docroot::with_sizes(&[128, 512, 1024])?;
    let mut notes = Vec::new();
    let mut servers = vec![Server::Evq];
    let mut missing = Vec::new();
    for kind in PeerServerKind::ALL {
        match kind.available() {
            Ok(()) => servers.push(Server::Peer(kind)),
            Err(why) => {
                notes.push(format!("{why}; it is left out of this comparison."));
                missing.push(kind.name());
            }
        }
    }
    let mut points: Vec<Point> = Vec::new();
    // A (server, cold) pair whose cold connections did not all come up, or whose
    // point failed, is not tried again in later repeats or sizes.
    let mut stalled: BTreeMap<(&'static str, usize), String> = BTreeMap::new();
    for repeat in 0..plan.repeats {
        for &size in &plan.sizes {
            for &cold in &plan.colds {
                let mut order = servers.clone();
                order.rotate_left(repeat % servers.len());
                for &server in &order {
                    if let Some(why) = stalled.get(&(server.name(), cold)) {
                        points.push(Point {
                            skipped: Some(why.clone()),
                            ..skipped_point(server, repeat, cold, size)
                        });
                        continue;
                    }
                    scenario.progress(&format!(
                        "peers: {} with {cold} cold connections, {size} B files (repeat {})",
                        server.name(),
                        repeat + 1
                    ));
                    let t = Instant::now();
                    let (mut kept, mut made): (Option<Point>, usize) = (None, 0);
                    for _ in 0..plan.attempts {
                        made += 1;
                        let p = measure(
                            &scenario.tools,
                            server,
                            backend,
                            &root,
                            cold,
                            size,
                            repeat,
                            plan.load_for,
                        )
                        .unwrap_or_else(|e| Point {
                            skipped: Some(format!("{} failed: {e}", server.name())),
                            ..skipped_point(server, repeat, cold, size)
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
                    if let Some(why) = &p.skipped {
                        stalled.insert((server.name(), cold), why.clone());
                    }
                    points.push(p);
                }
            }
        }
    }
    let names: Vec<&'static str> = servers.iter().map(|s| s.name()).collect();
    let big = *plan.sizes.last().unwrap_or(&1024);
    let lo = plan.colds[0];
    let hi = *plan.colds.last().unwrap_or(&0);
    let rps = |p: &Point| p.replies_per_s;
    let p99 = |p: &Point| p.p99_ms;
    let mut checks = Vec::new();

    // 1. Throughput ratios at 0 cold, every size.
    let ratio_at = |other: &str, size: usize| {
        med(&points, "evq", lo, size, rps)
            .zip(med(&points, other, lo, size, rps))
            .map(|(e, o)| e / o)
    };
    let ratios_text = |other: &str| {
        plan.sizes
            .iter()
            .map(|&s| ratio_at(other, s).map_or(format!("{s} B -"), |r| format!("{s} B {r:.2}×")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let all_at_least = |other: &str, min: f64| -> Option<bool> {
        let r: Option<Vec<f64>> = plan.sizes.iter().map(|&s| ratio_at(other, s)).collect();
        r.map(|r| r.iter().all(|&x| x >= min))
    };
    let rate_text = |size: usize| {
        names
            .iter()
            .map(
                |n| match spread(summary(&points, n, lo, size).map(rps).collect()) {
                    Some(s) => format!("{n} {:.0} ({:.0}–{:.0})", s.median, s.min, s.max),
                    None => format!("{n} -"),
                },
            )
            .collect::<Vec<_>>()
            .join(", ")
    };
    checks.push(ClaimCheck::judged(
        "evq serve answers ≥ 1.2× nginx's and ≥ 1.0× h2o's requests/s (same files, same client, one worker each; HTTP server issue)",
        format!(
            "replies/s at {lo} cold, {big} B, median (min–max) of {}: {}. evq/nginx: {}; evq/h2o: {}; evq/lighttpd (no target): {}",
            plan.repeats,
            rate_text(big),
            ratios_text("nginx"),
            ratios_text("h2o"),
            ratios_text("lighttpd")
        ),
        all_at_least("nginx", 1.2).zip(all_at_least("h2o", 1.0)).map(|(a, b)| a && b),
        "holds if, at every reply size measured, evq's median replies/s is at least 1.2× nginx's and at least 1.0× h2o's; not measured if nginx or h2o is missing",
    ));

    // 2. p99 at 0 cold.
    let p99_text = names
        .iter()
        .map(|n| {
            let per: Vec<String> = plan
                .sizes
                .iter()
                .map(|&s| med(&points, n, lo, s, p99).map_or("-".into(), |v| format!("{v:.2}")))
                .collect();
            format!("{n} {}", per.join("/"))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let p99_holds: Option<bool> = plan
        .sizes
        .iter()
        .map(|&s| {
            let e = med(&points, "evq", lo, s, p99)?;
            let n = med(&points, "nginx", lo, s, p99)?;
            let h = med(&points, "h2o", lo, s, p99)?;
            Some(e <= n && e <= h)
        })
        .collect::<Option<Vec<bool>>>()
        .map(|v| v.iter().all(|&b| b));
    checks.push(ClaimCheck::judged(
        "evq serve's p99 latency is at most nginx's and h2o's (HTTP server issue)",
        format!(
            "median p99 ms at {lo} cold ({} B): {p99_text}",
            plan.sizes
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join("/")
        ),
        p99_holds,
        "holds if, at every reply size, evq's median p99 is no larger than nginx's and h2o's; not measured if either is missing",
    ));

    // 3. Drop at the largest cold count.
    let drop_of = |n: &str| -> Option<(f64, usize)> {
        // The largest cold count this server was measured at.
        let c = plan
            .colds
            .iter()
            .rev()
            .copied()
            .find(|&c| c > lo && med(&points, n, c, big, rps).is_some())?;
        let at = med(&points, n, c, big, rps)?;
        let base = med(&points, n, lo, big, rps)?;
        Some((1.0 - at / base, c))
    };
    let drops_text = names
        .iter()
        .map(|n| match drop_of(n) {
            Some((d, c)) if c == hi => format!("{n} {:+.1}%", -100.0 * d),
            Some((d, c)) => format!("{n} {:+.1}% (at {c}; {hi} not held)", -100.0 * d),
            None => format!("{n} -"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let evq_drop = drop_of("evq").filter(|&(_, c)| c == hi && hi > lo);
    let evq_spread = |c: usize| {
        spread(summary(&points, "evq", c, big).map(rps).collect()).map_or("-".into(), |s| {
            format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)
        })
    };
    checks.push(ClaimCheck::judged(
        "with 10,000 idle connections held open, evq serve's throughput drops ≤ 2% (nginx's drop stated beside it; HTTP server issue)",
        format!(
            "change in median replies/s ({big} B) from {lo} to {hi} cold connections: {drops_text}; evq's replies/s median (min–max): {} at {lo}, {} at {hi}",
            evq_spread(lo),
            evq_spread(hi)
        ),
        evq_drop.map(|(d, _)| d <= 0.02),
        &format!(
            "holds if evq's median replies/s at {hi} cold connections is at least 98% of that at {lo}; this run's largest cold count is {hi} (the issue's figure is at 10,000; the quick and smoke runs use fewer)"
        ),
    ));

    // 4. Bytes per idle connection at the largest cold count.
    let bpc = |n: &str| -> Option<f64> {
        spread(
            points
                .iter()
                .filter(|p| p.server == n && p.cold == hi && p.skipped.is_none())
                .filter_map(|p| p.bytes_per_idle_conn)
                .collect(),
        )
        .map(|s| s.median)
    };
    let bpc_text = names
        .iter()
        .map(|n| bpc(n).map_or(format!("{n} -"), |b| format!("{n} {b:.0} B")))
        .collect::<Vec<_>>()
        .join(", ");
    let base_text = names
        .iter()
        .map(|n| {
            let b = spread(
                points
                    .iter()
                    .filter(|p| p.server == *n && p.skipped.is_none() && p.rss_anon_before > 0)
                    .map(|p| p.rss_anon_before as f64)
                    .collect(),
            );
            b.map_or(format!("{n} -"), |b| {
                format!("{n} {:.1} MiB", b.median / 1048576.0)
            })
        })
        .collect::<Vec<_>>()
        .join(", ");
    let bpc_text = format!(
        "{bpc_text} (anonymous RSS before the cold connections, median: {base_text}; nginx's sums master and worker and includes the connection slots it preallocates for worker_connections)"
    );
    let evq_by_count = plan
        .colds
        .iter()
        .filter(|&&c| c > 0)
        .filter_map(|&c| {
            spread(
                points
                    .iter()
                    .filter(|p| p.server == "evq" && p.cold == c && p.skipped.is_none())
                    .filter_map(|p| p.bytes_per_idle_conn)
                    .collect(),
            )
            .map(|s| format!("{c}: {:.0} B", s.median))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let bpc_text = format!("{bpc_text}; evq at each cold count: {evq_by_count}");
    let enough = hi >= 1000;
    checks.push(ClaimCheck::judged(
        "user-space memory per idle connection is ≤ 256 B for evq serve (nginx ~470 B; HTTP server issue)",
        if enough {
            format!("(anonymous RSS with {hi} cold connections held − before) / connections held, median over points: {bpc_text}")
        } else {
            format!("only {hi} cold connections in this run: too few for page-granular RSS ({bpc_text})")
        },
        if enough { bpc("evq").map(|b| b <= 256.0) } else { None },
        "holds if evq's median growth of anonymous resident memory (heap and stacks, not the binary's pages, which the kernel may drop and fault back) per held idle connection is at most 256 B (anonymous memory counted page by page from /proc/PID/smaps_rollup); needs at least 1,000 connections so that 4 KiB pages do not dominate; every server, evq included, is a fresh process at every point",
    ));

    // Plots.
    let mut plots = Vec::new();
    let series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            points: plan
                .colds
                .iter()
                .filter_map(|&c| med(&points, n, c, big, rps).map(|r| (c as f64, r)))
                .collect(),
        })
        .collect();
    plots.push(render(
        &Chart {
            title: format!(
                "replies/s vs cold connections, {big} B files, one worker each (median)"
            ),
            x_label: "cold (idle) connections".into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series,
        },
        &scenario.out_dir,
        "cold-connections-peers",
    ));
    if plan.sizes.len() > 1 {
        let series: Vec<Series> = names
            .iter()
            .map(|n| Series {
                name: n.to_string(),
                points: plan
                    .sizes
                    .iter()
                    .filter_map(|&s| med(&points, n, lo, s, rps).map(|r| (s as f64, r)))
                    .collect(),
            })
            .collect();
        plots.push(render(
            &Chart {
                title: format!("replies/s per file size at {lo} cold connections (median)"),
                x_label: "file size (bytes)".into(),
                y_label: "replies/s".into(),
                log_x: false,
                log_y: false,
                series,
            },
            &scenario.out_dir,
            "cold-connections-peers-sizes",
        ));
    }

    // Is the client the bottleneck?
    let share = |n: &str, f: fn(&Point) -> f64| {
        spread(
            points
                .iter()
                .filter(|p| p.server == n && p.skipped.is_none())
                .map(f)
                .collect(),
        )
    };
    let cpu_text = names
        .iter()
        .map(|n| {
            let c = share(n, |p| p.client_cpu_share);
            let s = share(n, |p| p.server_cpu_share);
            match c.zip(s) {
                Some((c, s)) => format!(
                    "{n}: client {:.0}% ({:.0}–{:.0}%), server {:.0}%",
                    100.0 * c.median,
                    100.0 * c.min,
                    100.0 * c.max,
                    100.0 * s.median
                ),
                None => format!("{n}: -"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    // Points where the single client thread was near a full core, per server.
    let saturated: Vec<String> = names
        .iter()
        .filter_map(|n| {
            let all = points
                .iter()
                .filter(|p| p.server == *n && p.skipped.is_none())
                .count();
            let hot = points
                .iter()
                .filter(|p| p.server == *n && p.skipped.is_none())
                .filter(|p| p.client_cpu_share >= 0.9)
                .count();
            (hot > 0).then(|| format!("{n} {hot} of {all}"))
        })
        .collect();
    let busy_max = names
        .iter()
        .filter_map(|n| share(n, |p| p.client_cpu_share + p.server_cpu_share))
        .map(|s| s.median)
        .fold(0.0f64, f64::max);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    notes.push(format!(
        "Load client check (CPU per wall second of the load, median over points; 100% = one core): {cpu_text}. {} {}",
        if saturated.is_empty() {
            "The client stayed below 90% of a core at every point, so it is not what limited the rates.".to_string()
        } else {
            format!(
                "The single client thread used 90% of a core or more at some points ({}): there the client, not the server, may have set the rate, which understates that server.",
                saturated.join(", ")
            )
        },
        {
            let measured = || points.iter().filter(|p| p.skipped.is_none());
            let low = spread(measured().map(|p| p.others_cpu_low).collect());
            let high = spread(measured().map(|p| p.others_cpu_high).collect());
            let irq = spread(measured().map(|p| p.softirq_cpu_share).collect());
            match low.zip(high).zip(irq) {
                Some(((lo, hi), q)) => format!(
                    "Other processes used between {:.0}% and {:.0}% of a core (medians of a lower and an upper bound; largest upper bound {:.0}%) of the machine's {cores} while the loads ran{}; the machine's interrupt and softirq time (much of it loopback networking for client and server) was {:.0}% of a core (median), and client and server together used at most {:.0}% (median per server). Bounds, not one figure: this kernel has no IRQ time accounting, so softirq work appears both in /proc/stat's softirq column and in the runtime of the process it interrupted. Per-point figures are in the data (client_cpu_share, server_cpu_share, others_cpu_low, others_cpu_high, softirq_cpu_share).",
                    100.0 * lo.median,
                    100.0 * hi.median,
                    100.0 * hi.max,
                    if lo.max >= 0.2 {
                        ": where they were busy the servers competed with them, one reason repeats spread"
                    } else {
                        ""
                    },
                    100.0 * q.median,
                    100.0 * busy_max
                ),
                None => String::new(),
            }
        }
    ));
    let bytes_text = names
        .iter()
        .map(|n| {
            let per: Vec<String> = plan
                .sizes
                .iter()
                .map(|&s| {
                    med(&points, n, lo, s, |p| p.bytes_per_reply)
                        .map_or(format!("{s} B: -"), |b| format!("{s} B: {b:.0}"))
                })
                .collect();
            format!("{n} {}", per.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let non_2xx: u64 = points.iter().map(|p| p.non_2xx).sum();
    notes.push(format!(
        "Same content: {non_2xx} non-2xx replies over all points (they count as errors); response bytes (head + body) per reply at {lo} cold: {bytes_text}. The bodies are the same files; the heads differ from server to server (Server, Date, ETag, Last-Modified and so on)."
    ));
    let errors: u64 = points.iter().map(|p| p.errors).sum();
    let retried = points.iter().filter(|p| p.attempts > 1).count();
    let skipped: Vec<String> = {
        let mut s: Vec<String> = stalled
            .iter()
            .map(|((srv, c), why)| format!("{srv} at {c}: {why}"))
            .collect();
        s.dedup();
        s
    };
    notes.push(format!(
        "Peer comparison: `evq serve` ({backend} backend, one thread, a child process like the peers, files from the docroot) and {} (one worker each, configs from peer_servers.rs), every server restarted for every point and given the same files ({} B). Per point: cold connections from an `evq dead` child on 127.0.0.2, checked as held the same way for every server (its processes' socket descriptors that are ESTABLISHED connections from 127.0.0.2), then (after a {:.1} s untimed warm-up with the same load) a closed loop of {HOT_CONNECTIONS} connections, {CLIENT_THREADS} thread, {:.1} s, from this process. {} repeat(s), servers interleaved and rotated each repeat. A point during whose load other processes surely used more than {:.0}% of a core (the lower bound, others_cpu_low) was measured again (at most {} attempt(s) in all; 1 means never), keeping the least disturbed: {retried} of {} points were. Errors (load errors + non-2xx replies) over all points: {errors}.{}",
        if servers.len() > 1 {
            names[1..].join(", ")
        } else {
            "no peer server".into()
        },
        plan.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("/"),
        warm_up(plan.load_for).as_secs_f64(),
        plan.load_for.as_secs_f64(),
        plan.repeats,
        100.0 * DISTURBED,
        plan.attempts,
        points.len(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" Not measured: {}.", skipped.join("; "))
        }
    ));
    notes.push(format!(
        "Machine load while the peer comparison ran (1/5/15-min load average): {load_at_start} at the start, {} at the end; client and servers share the machine's cores with whatever else runs, so compare servers within this run, not with other runs. The comparison took {:.0} s.",
        loadavg(),
        started.elapsed().as_secs_f64()
    ));
    let lighttpd_text = if names.contains(&"lighttpd") {
        format!(
            "lighttpd beside evq: evq/lighttpd replies/s at {lo} cold {}; lighttpd's change at the largest cold count it held: {}; bytes per idle connection {}.",
            ratios_text("lighttpd"),
            drop_of("lighttpd").map_or("-".into(), |(d, c)| format!("{:+.1}% at {c}", -100.0 * d)),
            bpc("lighttpd").map_or("-".into(), |b| format!("{b:.0} B")),
        )
    } else {
        "lighttpd is not installed here (scripts/install-peers.sh installs it).".into()
    };
    notes.push(lighttpd_text);
    notes.push(crate::placement::describe());
    let mut commands = vec![
        format!(
            "evq serve --backend {backend} --threads 1 --root DOCROOT --idle-timeout 600 --header-timeout 600 --grace 0 --listen 127.0.0.1:P"
        ),
        "nginx -c DIR/nginx.conf | h2o -c DIR/h2o.conf | lighttpd -D -f DIR/lighttpd.conf   (one worker; configs written by crates/evq-lab/src/peer_servers.rs)".into(),
        format!(
            "evq dead --port P --connections N --source 127.0.0.2   (N in {:?})",
            plan.colds
        ),
        format!(
            "evq load --port P --connections {HOT_CONNECTIONS} --threads {CLIENT_THREADS} --duration {} --uri /SIZE.bin   (SIZE in {:?})",
            plan.load_for.as_secs_f64(),
            plan.sizes
        ),
    ];
    if !missing.is_empty() {
        commands.push(format!(
            "scripts/install-peers.sh   (installs {})",
            missing.join(", ")
        ));
    }
    let mut table = Vec::new();
    for n in &names {
        for &c in &plan.colds {
            for &s in &plan.sizes {
                let sel: Vec<&Point> = summary(&points, n, c, s).collect();
                table.push(json!({
                    "server": n,
                    "cold": c,
                    "reply_size": s,
                    "replies_per_s": spread(sel.iter().map(|p| p.replies_per_s).collect()),
                    "p99_ms": spread(sel.iter().map(|p| p.p99_ms).collect()),
                    "errors": sel.iter().map(|p| p.errors).sum::<u64>(),
                    "bytes_per_idle_conn": spread(sel.iter().filter_map(|p| p.bytes_per_idle_conn).collect()),
                }));
            }
        }
    }
    let data = json!({
        "backend": backend.name(),
        "servers": names,
        "missing": missing,
        "colds": plan.colds,
        "reply_sizes": plan.sizes,
        "repeats": plan.repeats,
        "load_s": plan.load_for.as_secs_f64(),
        "hot_connections": HOT_CONNECTIONS,
        "client_threads": CLIENT_THREADS,
        "loadavg_start": load_at_start,
        "loadavg_end": loadavg(),
        "seconds": started.elapsed().as_secs_f64(),
        "disturbed_share": DISTURBED,
        "attempts": plan.attempts,
        "summary": table,
        "points": points,
    });
    Ok(PeerPart {
        checks,
        plots,
        notes,
        commands,
        data,
    })
}

fn skipped_point(server: Server, repeat: usize, cold: usize, size: usize) -> Point {
    Point {
        server: server.name(),
        repeat,
        cold,
        cold_held: 0,
        cold_held_after: 0,
        reply_size: size,
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
