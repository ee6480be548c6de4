//! Experiment 2, libevent's `bench.c` shape (SEEDS 002's pipetest family): `n`
//! socketpairs, `a` active, `w` writes chained from each readable pipe to the
//! next; time per run. evq on every backend beside libev, libevent and libuv
//! (C programs in `peers/`, compiled at run time against Debian's packages) and
//! the Rust crates mio and polling ([`crate::bench_rust_peers`], built in).
//!
//! Registration happens once, outside the timed part, for every contender alike;
//! the first repetition of each run is a warm-up and is dropped.

use crate::bench_rust_peers::RustPeer;
use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, ExperimentRecord};
use crate::Scenario;
use evq::{BackendKind, EventQueue, Events, Interest, Options};
use serde::Serialize;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const COMMON_H: &str = include_str!("../../peers/bench_common.h");
const PEERS: &[(&str, &str, &str)] = &[
    ("libev", include_str!("../../peers/bench_libev.c"), "-lev"),
    (
        "libevent",
        include_str!("../../peers/bench_libevent.c"),
        "pkg-config:libevent",
    ),
    (
        "libuv",
        include_str!("../../peers/bench_libuv.c"),
        "pkg-config:libuv",
    ),
];

/// One contender at one point.
#[derive(Serialize, Clone, Debug)]
pub struct BenchPoint {
    /// `evq-<backend>`, the C peer library or the Rust crate.
    pub contender: String,
    /// The mechanism it ran on.
    pub backend: String,
    /// Pipes.
    pub n: usize,
    /// Active pipes.
    pub a: usize,
    /// Chained writes.
    pub w: usize,
    /// Median microseconds per run.
    pub us_per_run: f64,
    /// Fastest and slowest timed run.
    pub us_min: f64,
    /// Slowest timed run.
    pub us_max: f64,
    /// Reads performed in all runs, warm-ups included (must be
    /// (runs + rounds) × (w + a)).
    pub reads: u64,
    /// Timed runs.
    pub runs: usize,
}

fn median(v: Vec<f64>) -> f64 {
    crate::stats::median(v).unwrap_or(f64::NAN)
}

/// evq's version of the chain; returns (µs per run for each rep, total reads).
pub fn run_evq(
    kind: BackendKind,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<(Vec<f64>, u64)> {
    let pairs: Vec<(UnixStream, UnixStream)> = (0..n)
        .map(|_| UnixStream::pair())
        .collect::<io::Result<_>>()?;
    for (r, s) in &pairs {
        r.set_nonblocking(true)?;
        s.set_nonblocking(true)?;
    }
    let reads_fd: Vec<RawFd> = pairs.iter().map(|p| p.0.as_raw_fd()).collect();
    let writes_fd: Vec<RawFd> = pairs.iter().map(|p| p.1.as_raw_fd()).collect();
    let mut q = EventQueue::with_backend(kind)?;
    for (i, &fd) in reads_fd.iter().enumerate() {
        q.declare_interest(fd, Interest::READ, Options::new(i as u64))?;
    }
    let mut events = Events::with_capacity(64);
    let (mut times, mut total) = (Vec::new(), 0u64);
    let send = |fd: RawFd| {
        // SAFETY: one byte from a static buffer to a socket we own.
        unsafe { libc::send(fd, b"e".as_ptr().cast(), 1, 0) == 1 }
    };
    for _ in 0..reps {
        let space = n / a;
        for i in 0..a {
            send(writes_fd[i * space]);
        }
        let (mut fired, mut count, mut writes) = (a, 0usize, w);
        let start = Instant::now();
        while count != fired {
            q.get_next_event(&mut events, None)?;
            for e in &events {
                let idx = e.token() as usize;
                let mut ch = 0u8;
                // SAFETY: reads one byte into a live u8.
                if unsafe { libc::recv(reads_fd[idx], (&mut ch as *mut u8).cast(), 1, 0) } == 1 {
                    count += 1;
                    total += 1;
                }
                if writes > 0 {
                    let widx = if idx + 1 >= n { idx + 1 - n } else { idx + 1 };
                    if send(writes_fd[widx]) {
                        writes -= 1;
                        fired += 1;
                    }
                }
            }
        }
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok((times, total))
}

/// Compiles a peer program; `Err` says why it cannot run here.
pub fn build_peer(dir: &Path, name: &str, source: &str, libs: &str) -> Result<PathBuf, String> {
    let flags: Vec<String> = if let Some(pkg) = libs.strip_prefix("pkg-config:") {
        let out = Command::new("pkg-config")
            .args(["--cflags", "--libs", pkg])
            .output()
            .map_err(|e| format!("pkg-config: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{pkg} not installed (scripts/install-peers.sh installs it)"
            ));
        }
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    } else {
        vec![libs.to_string()]
    };
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("bench_common.h"), COMMON_H).map_err(|e| e.to_string())?;
    let src = dir.join(format!("bench_{name}.c"));
    std::fs::write(&src, source).map_err(|e| e.to_string())?;
    let bin = dir.join(format!("bench_{name}"));
    let out = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .args(&flags)
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{name} did not build (scripts/install-peers.sh installs it): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ));
    }
    Ok(bin)
}

/// Runs a built peer; returns (backend, µs per rep, reads).
pub fn run_peer(
    bin: &Path,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<(String, Vec<f64>, u64)> {
    let out = Command::new(bin)
        .args([n, a, w, reps].map(|x| x.to_string()))
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(io::Error::other)?;
    let times = v["us_per_run"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    Ok((
        v["backend"].as_str().unwrap_or("?").to_string(),
        times,
        v["reads"].as_u64().unwrap_or(0),
    ))
}

/// One of the programs the chain runs on.
enum Contender {
    Evq(BackendKind),
    C(String, PathBuf),
    Rust(RustPeer),
}

impl Contender {
    fn name(&self) -> String {
        match self {
            Contender::Evq(k) => format!("evq-{}", k.name()),
            Contender::C(name, _) => name.clone(),
            Contender::Rust(p) => p.name().into(),
        }
    }

    /// (backend, µs per repetition, reads).
    fn run(
        &self,
        n: usize,
        a: usize,
        w: usize,
        reps: usize,
    ) -> io::Result<(String, Vec<f64>, u64)> {
        match self {
            Contender::Evq(k) => {
                let (t, reads) = run_evq(*k, n, a, w, reps)?;
                Ok((k.name().into(), t, reads))
            }
            Contender::C(_, bin) => run_peer(bin, n, a, w, reps),
            Contender::Rust(p) => {
                let (t, reads) = p.run(n, a, w, reps)?;
                Ok((p.backend().into(), t, reads))
            }
        }
    }
}

/// Runs the sweep and judges the claims.
pub fn run(scenario: &Scenario) -> io::Result<ExperimentRecord> {
    let (ns, actives, w, reps) = if scenario.smoke {
        (vec![10, 50], vec![1], 10, 2usize)
    } else if scenario.quick {
        (vec![100, 1000], vec![1, 100], 100, 9)
    } else {
        (vec![100, 1000, 5000], vec![1, 10, 100], 100, 25)
    };
    crate::resources::raise_nofile()?;
    let peer_dir = scenario.out_dir.join("peers-build");
    let mut notes = Vec::new();
    let mut peers = Vec::new();
    for (name, src, libs) in PEERS {
        match build_peer(&peer_dir, name, src, libs) {
            Ok(bin) => peers.push((name.to_string(), bin)),
            Err(why) => notes.push(format!("{name} skipped: {why}")),
        }
    }
    let kinds = BackendKind::candidates();
    // Every contender runs once per round, in turn, and the rounds repeat: slow
    // phases of a shared machine then fall on everyone alike instead of on
    // whoever ran during them (A/B/A/B, not AAA/BBB).
    let rounds: usize = if scenario.smoke { 1 } else { 3 };
    let per_round = reps.div_ceil(rounds);
    let mut contenders: Vec<Contender> = kinds.iter().map(|&k| Contender::Evq(k)).collect();
    contenders.extend(
        peers
            .iter()
            .map(|(name, bin)| Contender::C(name.clone(), bin.clone())),
    );
    contenders.extend(RustPeer::ALL.iter().map(|&p| Contender::Rust(p)));
    let mut points = Vec::new();
    for &n in &ns {
        for &a in actives.iter().filter(|&&a| a <= n) {
            scenario.progress(&format!("n={n} a={a} w={w}"));
            let mut runs: Vec<(String, Vec<f64>, u64)> =
                vec![(String::new(), Vec::new(), 0); contenders.len()];
            for _ in 0..rounds {
                for (c, acc) in contenders.iter().zip(runs.iter_mut()) {
                    // +1: the first repetition is a warm-up, dropped for everyone alike.
                    let (backend, mut t, reads) = c.run(n, a, w, per_round + 1)?;
                    if t.len() < 2 {
                        return Err(io::Error::other(format!("{} reported no runs", c.name())));
                    }
                    t.remove(0);
                    acc.0 = backend;
                    acc.1.extend(t);
                    acc.2 += reads;
                }
            }
            for (c, (backend, t, reads)) in contenders.iter().zip(runs) {
                let min = t.iter().copied().fold(f64::INFINITY, f64::min);
                let max = t.iter().copied().fold(0.0, f64::max);
                points.push(BenchPoint {
                    contender: c.name(),
                    backend,
                    n,
                    a,
                    w,
                    runs: t.len(),
                    us_per_run: median(t),
                    us_min: min,
                    us_max: max,
                    reads,
                });
            }
        }
    }
    let at = |c: &str, n: usize, a: usize| {
        points
            .iter()
            .find(|p| p.contender == c && p.n == n && p.a == a)
            .map(|p| p.us_per_run)
    };
    let (lo, hi) = (ns[0], *ns.last().unwrap_or(&ns[0]));
    let growth = |c: &str| at(c, hi, 1).zip(at(c, lo, 1)).map(|(h, l)| h / l);
    let fmt = |c: &str| growth(c).map_or("-".into(), |g| format!("×{g:.2}"));
    let mut checks = Vec::new();
    let flat = ["evq-epoll", "libevent", "libev", "libuv", "mio", "polling"]
        .iter()
        .filter_map(|c| growth(c))
        .collect::<Vec<_>>();
    checks.push(ClaimCheck::judged(
        "epoll-based loops cost (nearly) the same per run as idle pipes grow, while poll-based ones grow (SEEDS 002's dead-pipe runs)",
        format!(
            "a=1, {lo} → {hi} pipes: evq-epoll {}, libevent {}, libev {}, libuv {}, mio {}, polling {}, evq-poll {}, evq-select {}",
            fmt("evq-epoll"), fmt("libevent"), fmt("libev"), fmt("libuv"), fmt("mio"), fmt("polling"), fmt("evq-poll"), fmt("evq-select")
        ),
        growth("evq-poll").filter(|_| !flat.is_empty()).map(|p| flat.iter().all(|g| *g <= 2.0) && p > 2.0),
        "holds if every epoll-based contender grows at most 2× over the sweep and evq's poll backend grows more than 2×",
    ));
    // evq-epoll's median over the fastest of `rivals` at every point.
    let ratios_against = |rivals: &[&str]| {
        let mut ratios = Vec::new();
        for &n in &ns {
            for &a in actives.iter().filter(|&&a| a <= n) {
                let best = rivals
                    .iter()
                    .filter_map(|name| at(name, n, a).map(|t| (t, name.to_string())))
                    .min_by(|x, y| x.0.total_cmp(&y.0));
                if let (Some(e), Some((b, who))) = (at("evq-epoll", n, a), best) {
                    ratios.push((n, a, e, b, who));
                }
            }
        }
        ratios
    };
    let c_peers: Vec<&str> = peers.iter().map(|(name, _)| name.as_str()).collect();
    let ratios = ratios_against(&c_peers);
    checks.push(ClaimCheck::judged(
        "evq (epoll) is at least as fast as libev, libevent and libuv on the same chain (evq's claim)",
        ratios.iter().map(|(n, a, e, b, who)| format!("n={n} a={a}: evq-epoll / best peer ({who}) = {:.2}", e / b)).collect::<Vec<_>>().join("; "),
        (!ratios.is_empty()).then(|| ratios.iter().all(|r| r.2 / r.3 <= 1.05)),
        "holds if the ratio of medians is at most 1.05 at every point",
    ));
    let rust_names: Vec<&str> = RustPeer::ALL.iter().map(|p| p.name()).collect();
    let ratios = ratios_against(&rust_names);
    checks.push(ClaimCheck::judged(
        "evq (epoll) is at least as fast as the Rust crates mio and polling on the same chain (evq's claim)",
        ratios
            .iter()
            .map(|(n, a, e, b, who)| {
                let us = |c: &str| at(c, *n, *a).map_or("-".into(), |t| format!("{t:.1}"));
                format!(
                    "n={n} a={a}: evq-epoll {e:.1} µs, mio {} µs, polling {} µs; evq-epoll / best ({who}) = {:.2}",
                    us("mio"),
                    us("polling"),
                    e / b
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        (!ratios.is_empty()).then(|| ratios.iter().all(|r| r.2 / r.3 <= 1.05)),
        "holds if the ratio of medians is at most 1.05 at every point",
    ));
    let mut record = ExperimentRecord::new(
        "bench-c",
        "002 Libenzi /dev/epoll: pipetest; libevent's bench.c",
        checks,
    );
    let contenders: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for p in &points {
            if !v.contains(&p.contender) {
                v.push(p.contender.clone());
            }
        }
        v
    };
    for &a in &actives {
        let series = contenders
            .iter()
            .map(|c| Series {
                name: c.clone(),
                points: points
                    .iter()
                    .filter(|p| &p.contender == c && p.a == a)
                    .map(|p| (p.n as f64, p.us_per_run))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect();
        record.plots.push(render(
            &Chart {
                title: format!("bench.c chain: time per run, {a} active, {w} writes"),
                x_label: "pipes".into(),
                y_label: "µs per run (median)".into(),
                log_x: true,
                log_y: true,
                series,
            },
            &scenario.out_dir,
            &format!("bench-c-a{a}"),
        ));
    }
    notes.push(format!("Every contender registers once outside the timed part; contenders take turns in {rounds} rounds of {per_round} timed runs each (plus one dropped warm-up per round), so a slow phase of the shared machine falls on all of them; median of the {} runs, min–max in results.json. Peers: C programs in crates/evq-lab/peers built with cc -O2 against Debian's libev, libevent and libuv; each prints the backend it chose.", rounds * per_round));
    notes.push(format!(
        "Rust peers, built into the lab (versions as Cargo.lock resolved them): mio {} and polling {}, both on epoll, 64 events per wait. mio is edge-triggered, so each event drains its pipe to EAGAIN (one more recv per event than the C peers, and several bytes per event where chains meet); polling is oneshot, so each event is re-armed with modify (one epoll_ctl per event), and its wait also resets its timer and notifier descriptors.",
        RustPeer::Mio.version(),
        RustPeer::Polling.version()
    ));
    record.notes = notes;
    record.commands.push(format!(
        "evq lab --only bench-c   (peers: crates/evq-lab/peers/bench_*.c N A {w} REPS; mio {} and polling {} in-process: evq_lab::bench_rust_peers)",
        RustPeer::Mio.version(),
        RustPeer::Polling.version()
    ));
    record.data = serde_json::to_value(&points).map_err(io::Error::other)?;
    Ok(record)
}
