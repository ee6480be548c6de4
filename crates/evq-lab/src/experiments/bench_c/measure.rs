//! The bench.c chain on every contender: evq's own loop, the C peers (built here
//! against Debian's libraries) and the Rust crates.

use super::{BenchPoint, Plan, Records};
use crate::bench_chain::{on_private_fd_table, Chain, EVENTS_PER_WAIT};
use crate::bench_rust_peers::RustPeer;
use crate::experiment::Ctx;
use crate::stats::{spread, Spread};
use evq::{BackendKind, EventQueue, Events, Interest, Options};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const COMMON_H: &str = include_str!("../../../peers/bench_common.h");
/// The C peers: (name, source, how to link it: `-lfoo` or `pkg-config:NAME`).
pub const PEERS: &[(&str, &str, &str)] = &[
    (
        "libev",
        include_str!("../../../peers/bench_libev.c"),
        "-lev",
    ),
    (
        "libevent",
        include_str!("../../../peers/bench_libevent.c"),
        "pkg-config:libevent",
    ),
    (
        "libuv",
        include_str!("../../../peers/bench_libuv.c"),
        "pkg-config:libuv",
    ),
];

/// The floor: the chain on a bare epoll loop in C, no library (name, source).
/// It is not a peer — nothing to choose — but what every epoll contender pays
/// at least, so the report can say what a library costs over it.
pub const FLOOR: (&str, &str) = (
    "raw-epoll",
    include_str!("../../../peers/bench_raw_epoll.c"),
);

/// evq's version of the chain; returns (µs per run for each rep, total reads).
pub fn run_evq(
    kind: BackendKind,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<(Vec<f64>, u64)> {
    let mut chain = Chain::new(n, a)?;
    let mut q = EventQueue::with_backend(kind)?;
    for (i, &fd) in chain.reads_fd.iter().enumerate() {
        q.declare_interest(fd, Interest::READ, Options::new(i as u64))?;
    }
    let mut events = Events::with_capacity(EVENTS_PER_WAIT);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        chain.start_run(a, w);
        let start = Instant::now();
        while !chain.done() {
            q.get_next_event(&mut events, None)?;
            for e in &events {
                let idx = e.token() as usize;
                chain.read_one(idx);
                chain.write_next(idx);
            }
        }
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok((times, chain.total_reads))
}

/// Compiles a peer program (`libs`: `-lfoo`, `pkg-config:NAME`, or empty for
/// none); `Err` says why it cannot run here.
pub fn build_peer(dir: &Path, name: &str, source: &str, libs: &str) -> Result<PathBuf, String> {
    let flags: Vec<String> = if libs.is_empty() {
        Vec::new()
    } else if let Some(pkg) = libs.strip_prefix("pkg-config:") {
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
    run_child(Command::new(bin), n, a, w, reps)
}

/// Runs `evq bench-chain CONTENDER …`: evq (`evq-<backend>`) or a Rust peer
/// (`mio`, `polling`) in a fresh process of its own, as each C peer runs.
/// Returns (backend, µs per rep, reads).
pub fn run_evq_child(
    evq: &Path,
    contender: &str,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<(String, Vec<f64>, u64)> {
    let mut cmd = Command::new(evq);
    cmd.args(["bench-chain", contender]);
    run_child(cmd, n, a, w, reps)
}

/// The chain of `contender` (`evq-<backend>`, `mio` or `polling`) in this
/// process, as the JSON line a C peer prints: what `evq bench-chain` runs.
///
/// # Errors
/// An unknown contender, bad sizes, or the chain's own error.
pub fn chain_json(
    contender: &str,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<String> {
    let (backend, times, reads) = if let Some(name) = contender.strip_prefix("evq-") {
        let kind: BackendKind = name.parse()?;
        let (t, r) = run_evq(kind, n, a, w, reps)?;
        (kind.name().to_string(), t, r)
    } else if let Some(p) = RustPeer::ALL.iter().find(|p| p.name() == contender) {
        let (t, r) = p.run(n, a, w, reps)?;
        (p.backend().to_string(), t, r)
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown contender {contender:?}: evq-<backend>, mio or polling"),
        ));
    };
    Ok(serde_json::json!({ "backend": backend, "us_per_run": times, "reads": reads }).to_string())
}

/// Runs `cmd` with the chain's sizes as its last arguments and reads the JSON
/// line it prints.
fn run_child(
    mut cmd: Command,
    n: usize,
    a: usize,
    w: usize,
    reps: usize,
) -> io::Result<(String, Vec<f64>, u64)> {
    let bin = cmd.get_program().to_owned();
    let bin = Path::new(&bin);
    let out = cmd.args([n, a, w, reps].map(|x| x.to_string())).output()?;
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

    /// (backend, µs per repetition, reads). evq and the Rust peers run as
    /// `evq bench-chain` children of `evq` where it is given — fresh
    /// single-threaded processes, as each C peer is — and in the lab's
    /// process (on a private descriptor table) where it is not: in the lab's
    /// process evq-epoll read 268 µs a run at n=100, a=1 where the same chain
    /// as its own process read 239 µs, while the C peers read the same in
    /// both rigs.
    fn run(
        &self,
        evq: Option<&Path>,
        n: usize,
        a: usize,
        w: usize,
        reps: usize,
    ) -> io::Result<(String, Vec<f64>, u64)> {
        match (self, evq) {
            (Contender::C(_, bin), _) => run_peer(bin, n, a, w, reps),
            (_, Some(evq)) => run_evq_child(evq, &self.name(), n, a, w, reps),
            // In the lab's process, but on a descriptor table of its own, as each C
            // peer has in its process (`on_private_fd_table` says what that costs
            // otherwise).
            (Contender::Evq(k), None) => {
                let (t, reads) = on_private_fd_table(|| run_evq(*k, n, a, w, reps))?;
                Ok((k.name().into(), t, reads))
            }
            (Contender::Rust(p), None) => {
                let (t, reads) = on_private_fd_table(|| p.run(n, a, w, reps))?;
                Ok((p.backend().into(), t, reads))
            }
        }
    }
}

/// Builds the C peers, then runs every contender at every point, in rounds.
pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    crate::resources::raise_nofile()?;
    let peer_dir = ctx.out_dir.join("peers-build");
    let mut skipped = Vec::new();
    let mut c_peers = Vec::new();
    let floor = match build_peer(&peer_dir, FLOOR.0, FLOOR.1, "") {
        Ok(bin) => Some(bin),
        Err(why) => {
            skipped.push(format!("{} skipped: {why}", FLOOR.0));
            None
        }
    };
    for (name, src, libs) in PEERS {
        match build_peer(&peer_dir, name, src, libs) {
            Ok(bin) => c_peers.push((name.to_string(), bin)),
            Err(why) => skipped.push(format!("{name} skipped: {why}")),
        }
    }
    let evq = ctx.tools.evq().ok().map(Path::to_path_buf);
    let mut contenders: Vec<Contender> = BackendKind::candidates()
        .into_iter()
        .map(Contender::Evq)
        .collect();
    contenders.extend(
        c_peers
            .iter()
            .map(|(name, bin)| Contender::C(name.clone(), bin.clone())),
    );
    contenders.extend(RustPeer::ALL.iter().map(|&p| Contender::Rust(p)));
    // The floor runs right after evq-epoll in every round, so that the two
    // its claim compares meet the same phase of a busy machine.
    if let Some(bin) = floor {
        let at = contenders
            .iter()
            .position(|c| matches!(c, Contender::Evq(BackendKind::Epoll)))
            .map_or(contenders.len(), |i| i + 1);
        contenders.insert(at, Contender::C(FLOOR.0.into(), bin));
    }
    let pairs = |n: &usize| plan.actives.iter().filter(|&&a| a <= *n).count();
    ctx.expect(plan.ns.iter().map(pairs).sum());
    let mut points = Vec::new();
    for &n in &plan.ns {
        for &a in plan.actives.iter().filter(|&&a| a <= n) {
            ctx.step(&format!("n={n} a={a} w={}", plan.w));
            points.extend(one_point(&plan, &contenders, evq.as_deref(), n, a)?);
        }
    }
    Ok(Records {
        c_peers: c_peers.into_iter().map(|(name, _)| name).collect(),
        skipped,
        mio: RustPeer::Mio.version().into(),
        polling: RustPeer::Polling.version().into(),
        as_children: evq.is_some(),
        points,
        plan,
    })
}

/// Every contender at one point: it runs once per round, in turn, and the rounds
/// repeat, so slow phases of a shared machine fall on everyone alike instead of
/// on whoever ran during them (A/B/A/B, not AAA/BBB).
fn one_point(
    plan: &Plan,
    contenders: &[Contender],
    evq: Option<&Path>,
    n: usize,
    a: usize,
) -> io::Result<Vec<BenchPoint>> {
    let w = plan.w;
    let mut runs: Vec<(String, Vec<f64>, u64)> =
        vec![(String::new(), Vec::new(), 0); contenders.len()];
    for _ in 0..plan.rounds {
        for (c, acc) in contenders.iter().zip(runs.iter_mut()) {
            // +1: the first repetition is a warm-up, dropped for everyone alike.
            let (backend, mut t, reads) = c.run(evq, n, a, w, plan.per_round + 1)?;
            if t.len() < 2 {
                return Err(io::Error::other(format!("{} reported no runs", c.name())));
            }
            t.remove(0);
            acc.0 = backend;
            acc.1.extend(t);
            acc.2 += reads;
        }
    }
    Ok(contenders
        .iter()
        .zip(runs)
        .map(|(c, (backend, t, reads))| {
            let s = spread(t).unwrap_or(Spread {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                n: 0,
            });
            BenchPoint {
                contender: c.name(),
                backend,
                n,
                a,
                w,
                runs: s.n,
                us_per_run: s.median,
                us_min: s.min,
                us_max: s.max,
                reads,
            }
        })
        .collect())
}
