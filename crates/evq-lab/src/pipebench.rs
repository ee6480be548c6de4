//! `evq pipebench`: the Solaris devpollperf test (SEEDS 004) on every backend.
//!
//! N probe descriptors; each iteration writes one token to a pseudo-random one,
//! waits for it with the backend under test, and reads it. The same loop written
//! with raw syscalls in C (`csrc/raw_loop.c`: no wait at all, `poll`, `epoll`) runs
//! in the same process, interleaved with the evq runs, so every figure can be read
//! as a ratio against the floor measured minutes apart at most. Contenders are
//! rotated between repetitions (A/B alternation) and the median is reported. The
//! measuring thread stays on one CPU for the whole run (`EVQ_LAB_PIN=0`: unpinned).
//!
//! Beside the readiness backends runs [`COMPLETION`]: the same loop on io_uring
//! completions (`evq::completion`), SEEDS 002's shared result ring in today's form.
//! Every probe carries one multishot read, armed once; an iteration writes the
//! token and dequeues the completion that already holds the byte the kernel read
//! — a write and one `io_uring_enter` per event where the readiness loops make a
//! write, a wait and a read.

pub use crate::probe_fds::FdKind;
use crate::probe_fds::ProbeFds;
use crate::resources::raise_nofile;
use evq::completion::{CompletionOptions, CompletionRing, Completions, OpKind, Setup};
use evq::{BackendKind, EventQueue, Events, Interest, Options};
use evq_os::CpuUsage as CpuTime;
use serde::{Deserialize, Serialize};
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

extern "C" {
    fn evq_raw_loop(
        kind: libc::c_int,
        rfds: *const libc::c_int,
        wfds: *const libc::c_int,
        n: libc::c_int,
        iters: i64,
        warmup: i64,
        seed: u64,
        token_bytes: libc::c_int,
        batch: libc::c_int,
        scan_ns: *mut i64,
    ) -> i64;
}

/// What `evq pipebench` measures (its flags, as a value).
#[derive(Debug, Clone)]
pub struct Config {
    /// Backends to measure; empty: every available one.
    pub backends: Vec<String>,
    /// Numbers of descriptors.
    pub fds: Vec<usize>,
    /// Timed iterations per run for O(ready) contenders; O(registered) ones (select,
    /// poll) run `iters * 100 / fds` (at least 1000, at most `iters`) so a sweep
    /// to 10,000 descriptors stays short.
    pub iters: u64,
    /// Repetitions of each run; the median is reported.
    pub reps: usize,
    /// Events per get_next_event call (the batch's capacity).
    pub batch: usize,
    /// Whether the raw C floor runs in the same run.
    pub baseline: Baseline,
    /// Descriptor kind.
    pub fd_kind: FdKind,
    /// Seed of the pseudo-random descriptor sequence.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            backends: Vec::new(),
            fds: vec![1, 10, 100, 1000, 10000],
            iters: 20_000,
            reps: 5,
            batch: 64,
            baseline: Baseline::Raw,
            fd_kind: FdKind::Auto,
            seed: 0x5eed_1999,
        }
    }
}

/// Whether the raw C floor runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Run raw-none, raw-poll and raw-epoll beside evq.
    Raw,
    /// Skip them.
    None,
}

/// The contender name of the completion loop (`evq::completion`, multishot reads).
pub const COMPLETION: &str = "completion";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contender {
    Raw(i32, &'static str),
    Evq(BackendKind),
    Completion,
}

impl Contender {
    fn name(&self) -> &'static str {
        match self {
            Contender::Raw(_, n) => n,
            Contender::Evq(k) => k.name(),
            Contender::Completion => COMPLETION,
        }
    }
    fn cost_grows_with_fds(&self) -> bool {
        match self {
            Contender::Raw(kind, _) => *kind == 1,
            Contender::Evq(k) => k.capabilities().cost_grows_with_interest,
            Contender::Completion => false,
        }
    }
}

/// Whether this kernel runs the completion loop (multishot read: Linux 6.7).
pub fn completion_available() -> bool {
    let Ok(mut ring) = CompletionRing::new() else {
        return false;
    };
    let Ok(fd) = ProbeFds::open(FdKind::Eventfd, 1) else {
        return false;
    };
    ring.read_multishot(fd.read_fds[0], 0).is_ok()
}

#[derive(Clone, Copy)]
struct Sample {
    ns_per_event: f64,
    scan_ns: Option<f64>,
    /// The completion loop's `io_uring_enter` calls per event.
    enters: Option<f64>,
    user_ns: f64,
    sys_ns: f64,
}

/// One JSON record: a contender at one size.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PipebenchRecord {
    /// Contender: an evq backend name or raw-none, raw-poll, raw-epoll.
    pub backend: String,
    /// Descriptors registered.
    pub fds: usize,
    /// Timed iterations per repetition.
    pub iters: u64,
    /// Repetitions.
    pub reps: usize,
    /// Probe descriptor kind.
    pub fd_kind: FdKind,
    /// Median wall-clock ns per event.
    pub ns_per_event: f64,
    /// Fastest repetition, ns per event.
    pub min: f64,
    /// Slowest repetition, ns per event.
    pub max: f64,
    /// Median user CPU ns per event (NaN where not measured).
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub user_ns_per_event: f64,
    /// Median system CPU ns per event (NaN where not measured).
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub sys_ns_per_event: f64,
    /// raw-poll only: median ns per event spent scanning the result array in user
    /// space (timed directly, not tick-sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scan_ns_per_event: Option<f64>,
    /// The completion loop only: median `io_uring_enter` calls per event (the
    /// readiness loops make one wait and one read per event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enters_per_event: Option<f64>,
}

fn median(v: Vec<f64>) -> f64 {
    crate::stats::median(v).unwrap_or(f64::NAN)
}

struct Xorshift(u64);

impl Xorshift {
    /// xorshift64*, identical to `next_random` in csrc/raw_loop.c.
    #[inline]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// One timed run of the loop: which descriptors, how long, which sequence.
#[derive(Clone, Copy)]
struct Loop<'a> {
    probes: &'a ProbeFds,
    iters: u64,
    warmup: u64,
    seed: u64,
    batch: usize,
}

fn run_evq(kind: BackendKind, l: &Loop) -> io::Result<Sample> {
    let (probes, iters, warmup, seed, batch) = (l.probes, l.iters, l.warmup, l.seed, l.batch);
    let mut queue = EventQueue::with_backend(kind)?;
    for (i, &fd) in probes.read_fds.iter().enumerate() {
        queue.declare_interest(fd, Interest::READ, Options::new(i as u64))?;
    }
    let mut events = Events::with_capacity(batch);
    let token = 1u64.to_ne_bytes();
    let bytes = probes.token_bytes();
    let mut sink = [0u8; 8];
    let mut rng = Xorshift(seed);
    let n = probes.read_fds.len() as u64;
    let mut start = Instant::now();
    let mut cpu0 = CpuTime::of_thread();
    for it in 0..warmup + iters {
        if it == warmup {
            cpu0 = CpuTime::of_thread();
            start = Instant::now();
        }
        let p = (rng.next() % n) as usize;
        // SAFETY: writes `bytes` (1 or 8) bytes from a live 8-byte array.
        if unsafe { libc::write(probes.write_fds[p], token.as_ptr().cast(), bytes) }
            != bytes as isize
        {
            return Err(io::Error::last_os_error());
        }
        queue.get_next_event(&mut events, None)?;
        for e in &events {
            // SAFETY: reads at most 8 bytes into a live 8-byte array.
            if unsafe { libc::read(e.fd(), sink.as_mut_ptr().cast(), bytes) } != bytes as isize {
                return Err(io::Error::last_os_error());
            }
        }
    }
    let elapsed = start.elapsed();
    let cpu = CpuTime::of_thread().since(cpu0);
    Ok(sample(elapsed, cpu, iters))
}

/// The loop on completions: each probe's multishot read is armed once, outside
/// the timed part, as the readiness loops register once.
fn run_completion(l: &Loop) -> io::Result<Sample> {
    let (probes, iters, warmup, seed, batch) = (l.probes, l.iters, l.warmup, l.seed, l.batch);
    let bytes = probes.token_bytes();
    // Enough provided buffers for a batch and its successor; a probe holds a
    // buffer only while its byte waits in the completion queue.
    let buffers = (2 * batch as u32).next_power_of_two().max(64);
    // Without DEFER_TASKRUN: the writer is the waiter here, so the kernel's read
    // runs as the write returns and the dequeue finds the result in shared memory
    // without entering at all (with it, every dequeue must enter; measured within
    // noise of each other on 6.18, the enter-free form is SEEDS 002's point).
    let mut ring = CompletionRing::with_options(
        CompletionOptions::new()
            .defer_taskrun(Setup::Off)
            .buffers(buffers)
            .buffer_size(64)
            .cq_entries(
                (2 * probes.read_fds.len() as u32)
                    .next_power_of_two()
                    .max(256),
            ),
    )?;
    for (i, &fd) in probes.read_fds.iter().enumerate() {
        ring.read_multishot(fd, i as u64)?;
    }
    ring.submit()?;
    let mut done = Completions::with_capacity(batch);
    let token = 1u64.to_ne_bytes();
    let mut rng = Xorshift(seed);
    let n = probes.read_fds.len() as u64;
    let mut start = Instant::now();
    let mut cpu0 = CpuTime::of_thread();
    let mut enters0 = 0;
    for it in 0..warmup + iters {
        if it == warmup {
            cpu0 = CpuTime::of_thread();
            enters0 = ring.stats().enters;
            start = Instant::now();
        }
        let p = (rng.next() % n) as usize;
        // SAFETY: writes `bytes` (1 or 8) bytes from a live 8-byte array.
        if unsafe { libc::write(probes.write_fds[p], token.as_ptr().cast(), bytes) }
            != bytes as isize
        {
            return Err(io::Error::last_os_error());
        }
        ring.get_next_completion(&mut done, None)?;
        for c in done.iter() {
            let got = c.result()? as usize;
            if c.kind() != OpKind::Read || got != bytes || !c.more() {
                return Err(io::Error::other(format!(
                    "probe {}: a read of {got} bytes (more: {}) where {bytes} were written",
                    c.token(),
                    c.more()
                )));
            }
        }
    }
    let elapsed = start.elapsed();
    let cpu = CpuTime::of_thread().since(cpu0);
    let mut s = sample(elapsed, cpu, iters);
    s.enters = Some((ring.stats().enters - enters0) as f64 / iters as f64);
    Ok(s)
}

fn run_raw(kind: i32, l: &Loop) -> io::Result<Sample> {
    let (probes, iters, warmup, seed, batch) = (l.probes, l.iters, l.warmup, l.seed, l.batch);
    let cpu0 = CpuTime::of_thread();
    let mut scan_ns = 0i64;
    // SAFETY: the fd arrays are live, `n` long, and stay open for the call;
    // `scan_ns` points to a live i64.
    let ns = unsafe {
        evq_raw_loop(
            kind,
            probes.read_fds.as_ptr(),
            probes.write_fds.as_ptr(),
            probes.read_fds.len() as libc::c_int,
            iters as i64,
            warmup as i64,
            seed,
            probes.token_bytes() as libc::c_int,
            batch as libc::c_int,
            &mut scan_ns,
        )
    };
    if ns < 0 {
        return Err(io::Error::from_raw_os_error(-ns as i32));
    }
    let cpu = CpuTime::of_thread().since(cpu0);
    let mut s = sample(Duration::from_nanos(ns as u64), cpu, iters);
    if kind == 1 {
        s.scan_ns = Some(scan_ns as f64 / iters as f64);
    }
    Ok(s)
}

fn sample(elapsed: Duration, cpu: CpuTime, iters: u64) -> Sample {
    let per = |d: Duration| d.as_nanos() as f64 / iters as f64;
    Sample {
        ns_per_event: per(elapsed),
        scan_ns: None,
        enters: None,
        user_ns: per(cpu.user),
        sys_ns: per(cpu.system),
    }
}

fn contenders(args: &Config) -> io::Result<Vec<Contender>> {
    let mut list = Vec::new();
    if args.baseline == Baseline::Raw {
        list.extend([
            Contender::Raw(0, "raw-none"),
            Contender::Raw(1, "raw-poll"),
            Contender::Raw(2, "raw-epoll"),
        ]);
    }
    if args.backends.is_empty() {
        list.extend(BackendKind::candidates().into_iter().map(Contender::Evq));
        if completion_available() {
            list.push(Contender::Completion);
        }
    } else {
        for name in &args.backends {
            if name == COMPLETION {
                if !completion_available() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "the completion loop needs io_uring's multishot read (Linux 6.7)",
                    ));
                }
                list.push(Contender::Completion);
                continue;
            }
            let kind: BackendKind = name.parse()?;
            kind.available().map_err(|e| {
                io::Error::new(e.kind(), format!("backend {kind} is unavailable here: {e}"))
            })?;
            list.push(Contender::Evq(kind));
        }
    }
    Ok(list)
}

/// Runs the benchmark and returns its records (also used by the lab).
///
/// # Errors
/// A flag out of range, more descriptors than the limit allows, an unknown or
/// unavailable backend asked for by name, or a system call failing mid-run.
pub fn measure(args: &Config, mut progress: impl FnMut(&str)) -> io::Result<Vec<PipebenchRecord>> {
    if args.fds.is_empty() || args.fds.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--fds values must be at least 1",
        ));
    }
    if args.iters == 0 || args.reps == 0 || args.batch == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--iters, --reps and --batch must be at least 1",
        ));
    }
    let limit = raise_nofile()?;
    let max_n = *args.fds.iter().max().unwrap_or(&1);
    let kind = ProbeFds::resolve(args.fd_kind, max_n, limit);
    let per_probe = if kind == FdKind::Pipe { 2 } else { 1 };
    if (max_n * per_probe + 64) as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{max_n} {kind:?} probes need {} descriptors; the limit is {limit}",
                max_n * per_probe + 64
            ),
        ));
    }
    let list = contenders(args)?;
    // One thread does all the work: keep it on one CPU, so no contender pays for a
    // migration another did not (the lab's client CPU; none with a single CPU).
    let _pin = crate::placement::pin_this_thread_as_client();
    let mut records = Vec::new();
    for &fds in &args.fds {
        let probes = ProbeFds::open(kind, fds)?;
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); list.len()];
        let iters_for = |c: &Contender| {
            if c.cost_grows_with_fds() {
                (args.iters * 100 / fds as u64).clamp(1000.min(args.iters), args.iters)
            } else {
                args.iters
            }
        };
        for rep in 0..args.reps {
            for step in 0..list.len() {
                // Rotate the order every repetition so no contender always runs first.
                let i = (step + rep) % list.len();
                let c = list[i];
                progress(&format!(
                    "fds {fds:>6}  rep {}/{}  {:<16}",
                    rep + 1,
                    args.reps,
                    c.name()
                ));
                let iters = iters_for(&c);
                let warmup = (iters / 20).max(10);
                let seed = args.seed.wrapping_add(rep as u64) | 1;
                let l = Loop {
                    probes: &probes,
                    iters,
                    warmup,
                    seed,
                    batch: args.batch,
                };
                let s = match c {
                    Contender::Raw(k, _) => run_raw(k, &l)?,
                    Contender::Completion => run_completion(&l).map_err(|e| {
                        io::Error::new(e.kind(), format!("{COMPLETION} at {fds} fds: {e}"))
                    })?,
                    Contender::Evq(k) => match run_evq(k, &l) {
                        // The rtsig backends refuse files that cannot signal (eventfd
                        // probes): leave them out of this size unless asked for by name.
                        Err(e)
                            if e.raw_os_error() == Some(libc::EPERM)
                                && args.backends.is_empty() =>
                        {
                            continue
                        }
                        r => r.map_err(|e| {
                            io::Error::new(e.kind(), format!("{k} at {fds} fds: {e}"))
                        })?,
                    },
                };
                samples[i].push(s);
            }
        }
        for (c, s) in list.iter().zip(samples) {
            if s.is_empty() {
                continue;
            }
            let ns: Vec<f64> = s.iter().map(|x| x.ns_per_event).collect();
            records.push(PipebenchRecord {
                backend: c.name().to_string(),
                fds,
                iters: iters_for(c),
                reps: args.reps,
                fd_kind: kind,
                ns_per_event: median(ns.clone()),
                min: ns.iter().copied().fold(f64::INFINITY, f64::min),
                max: ns.iter().copied().fold(0.0, f64::max),
                user_ns_per_event: median(s.iter().map(|x| x.user_ns).collect()),
                sys_ns_per_event: median(s.iter().map(|x| x.sys_ns).collect()),
                scan_ns_per_event: if s.iter().all(|x| x.scan_ns.is_some()) {
                    Some(median(s.iter().filter_map(|x| x.scan_ns).collect()))
                } else {
                    None
                },
                enters_per_event: if s.iter().all(|x| x.enters.is_some()) {
                    Some(median(s.iter().filter_map(|x| x.enters).collect()))
                } else {
                    None
                },
            });
        }
    }
    Ok(records)
}

/// The record of `backend` at `fds` descriptors.
pub fn find<'a>(
    records: &'a [PipebenchRecord],
    backend: &str,
    fds: usize,
) -> Option<&'a PipebenchRecord> {
    records
        .iter()
        .find(|r| r.backend == backend && r.fds == fds)
}

/// `evq pipebench`: measures and prints a table (or, with `json`, the records).
///
/// # Errors
/// As [`measure`].
pub fn run(args: &Config, json: bool) -> io::Result<()> {
    let tty = io::stderr().is_terminal();
    let records = measure(args, |line| {
        if tty {
            eprint!("\r\x1b[2K{line}");
            let _ = io::stderr().flush();
        }
    })?;
    if tty {
        eprint!("\r\x1b[2K");
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&records).map_err(io::Error::other)?
        );
        return Ok(());
    }
    print_table(args, &records);
    Ok(())
}

fn print_table(args: &Config, records: &[PipebenchRecord]) {
    let mut names: Vec<&str> = Vec::new();
    for r in records {
        if !names.contains(&r.backend.as_str()) {
            names.push(&r.backend);
        }
    }
    let kind = records.first().map(|r| r.fd_kind);
    println!(
        "pipebench: ns per event, median of {} reps ({:?} descriptors, batch {}); min-max spread in JSON",
        args.reps,
        kind.unwrap_or(FdKind::Pipe),
        args.batch
    );
    print!("{:>7}", "fds");
    for n in &names {
        print!(" {n:>15}");
    }
    println!();
    for &fds in &args.fds {
        print!("{fds:>7}");
        for n in &names {
            match find(records, n, fds) {
                Some(r) => print!(" {:>15.0}", r.ns_per_event),
                None => print!(" {:>15}", "-"),
            }
        }
        println!();
    }
    if find(records, "raw-epoll", args.fds[0]).is_some() && names.contains(&"epoll") {
        println!();
        println!("evq epoll / raw C epoll (same run; 1.00 = the floor):");
        for &fds in &args.fds {
            if let (Some(e), Some(r)) =
                (find(records, "epoll", fds), find(records, "raw-epoll", fds))
            {
                println!("  {fds:>6} fds: {:.3}", e.ns_per_event / r.ns_per_event);
            }
        }
    }
    let (lo, hi) = (100, 10_000);
    if let (Some(e_lo), Some(e_hi), Some(n_lo), Some(n_hi)) = (
        find(records, "epoll", lo),
        find(records, "epoll", hi),
        find(records, "raw-none", lo),
        find(records, "raw-none", hi),
    ) {
        let growth =
            (e_hi.ns_per_event - n_hi.ns_per_event) / (e_lo.ns_per_event - n_lo.ns_per_event);
        println!("epoll cost of waiting at {hi} fds / at {lo} fds (no-poll floor subtracted): {growth:.2}");
    }
}
