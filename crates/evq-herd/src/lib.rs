//! # evq-herd — many workers, one listening socket
//!
//! The Stevens *UNIX Network Programming* server family that DragonFly used to
//! measure `EV_WAKEONE` (SEEDS 003), on Linux: each design is started on loopback,
//! driven by a closed-loop client at several concurrencies, and measured for total
//! time, requests/s, **wakeups per accepted connection** (returns from the call a
//! worker sleeps in, summed over workers, counted in `MAP_SHARED` memory),
//! **accept collisions** (`EAGAIN` from `accept` after a wake-up) and the
//! **per-worker share** of connections (max/min and Jain's fairness index).
//!
//! Besides Stevens' designs it runs epoll wake-one (`EPOLLEXCLUSIVE`) alone and with
//! [`evq::WakeOneRotation`] (`serv02l-kone-r1`, `-r16`), evq's default — rotation
//! every 1 in a fair-share group, [`evq::WakeOneRotation::fair_among`], which keeps
//! shares even while every worker is busy (`serv02l-kone-fair`) — the kqueue
//! personality's `EV_WAKEONE` (`serv02l-kone-kq`) and `SO_REUSEPORT` sharding
//! (`reuseport`).
//!
//! [`run`] does the work. With feature `cli`, `HerdArgs` is the command line, so
//! a CLI can mount it as a subcommand and call `cli` (without the feature a
//! library user's build carries no clap):
//!
//! ```text
//! // in the CLI's subcommand enum:
//! Herd(evq_herd::HerdArgs),
//! // in its dispatch:
//! Command::Herd(args) => evq_herd::cli(&args),
//! ```
//!
//! Measured numbers and what they show: `RESULTS.md` beside this crate.
//!
//! Wakeups are counted at: `accept` (blocking designs, and the acceptor of
//! serv01/05/06/08), `select`/`epoll_wait`/`kevent` returns with an event (serv02l*),
//! and the hand-off (`recvmsg` of serv05's workers, condition-variable returns with
//! work in serv08). Lock waits (serv03/04/07) are not counted: the lock admits one
//! waiter into `accept`. Hand-off designs therefore show about two wakeups per
//! connection by construction (acceptor + worker).

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "cli")]
mod cli;
mod client;
mod design;
mod designs;
mod net;
mod process;

#[cfg(feature = "cli")]
pub use cli::{cli, HerdArgs};
pub use design::Design;
use process::{reap, Counter, SharedCounters};
use serde::Serialize;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What [`run`] runs.
#[derive(Clone, Debug)]
pub struct HerdConfig {
    /// Designs, in order.
    pub designs: Vec<Design>,
    /// Workers per design.
    pub workers: usize,
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// Requests per run (split among clients) unless `requests_per_client` is set.
    pub requests_per_run: usize,
    /// Requests each client makes, overriding `requests_per_run`.
    pub requests_per_client: Option<usize>,
    /// Deadline of each run.
    pub run_timeout: Duration,
}

impl HerdConfig {
    /// Checks the ranges: 1 to 256 workers, concurrencies of 1 to 4,096, and no
    /// zero request count or run timeout.
    ///
    /// # Errors
    /// `InvalidInput` saying which; the messages name the command-line flags.
    pub fn validate(&self) -> io::Result<()> {
        let invalid = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
        if self.workers == 0 || self.workers > 256 {
            return invalid("--workers must be between 1 and 256");
        }
        if self.concurrency.is_empty() || self.concurrency.iter().any(|&c| c == 0 || c > 4096) {
            return invalid("--concurrency values must be between 1 and 4096");
        }
        if self.requests_per_client == Some(0)
            || self.requests_per_run == 0
            || self.run_timeout.is_zero()
        {
            return invalid("--requests-per-client and --run-timeout must be > 0");
        }
        Ok(())
    }
}

/// The measurements of one design at one concurrency.
#[derive(Clone, Debug, Serialize)]
pub struct HerdRecord {
    /// Design name.
    pub design: String,
    /// Workers configured.
    pub workers: usize,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Requests completed (reply received in full).
    pub requests: u64,
    /// Requests that failed (connect, short reply, timeout).
    pub errors: u64,
    /// Wall time from the clients' start to the last reply, in milliseconds.
    pub total_ms: f64,
    /// `requests / total time`.
    pub requests_per_s: f64,
    /// Connections the server accepted and served.
    pub accepted: u64,
    /// Wake-ups summed over workers (see the crate documentation).
    pub wakeups: u64,
    /// `wakeups / accepted`.
    pub wakeups_per_conn: f64,
    /// Voluntary context switches of the workers, summed, over `accepted`: every
    /// time a worker slept and was woken, including wake-ups the kernel absorbs
    /// (Linux's `epoll_wait` and `select` re-check and sleep again without
    /// returning when another worker took the event), which `wakeups` cannot see.
    pub sleeps_per_conn: f64,
    /// `EAGAIN` from `accept` after a wake-up.
    pub accept_collisions: u64,
    /// Connections served per worker slot.
    pub per_worker: Vec<u64>,
    /// Largest over smallest per-worker count (`null` if some worker served none).
    pub share_max_over_min: Option<f64>,
    /// Jain's fairness index of the per-worker counts (1 = even, 1/n = one did all).
    pub jain: f64,
    /// The run hit its deadline before every client finished.
    pub timed_out: bool,
    /// Server processes that had to be killed at the end (0 when shut down cleanly).
    pub killed: usize,
}

/// Jain's fairness index: (Σx)² / (n·Σx²); 1 for an even share.
pub fn jain_index(xs: &[u64]) -> f64 {
    let sum: f64 = xs.iter().map(|&x| x as f64).sum();
    let sq: f64 = xs.iter().map(|&x| (x as f64) * (x as f64)).sum();
    if xs.is_empty() || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

/// Runs every design at every concurrency, one after another.
///
/// # Errors
/// A configuration out of range ([`HerdConfig::validate`]); setting up a run (sockets, shared memory, `fork`) failed; the processes already
/// started for that run are reaped first.
pub fn run(cfg: &HerdConfig) -> io::Result<Vec<HerdRecord>> {
    cfg.validate()?;
    let mut records = Vec::new();
    for &design in &cfg.designs {
        for &c in &cfg.concurrency {
            records.push(run_one(cfg, design, c)?);
        }
    }
    Ok(records)
}

fn run_one(cfg: &HerdConfig, design: Design, concurrency: usize) -> io::Result<HerdRecord> {
    let workers = cfg.workers;
    let reuseport = design == Design::Reuseport;
    let mut listeners = vec![net::listen(0, reuseport)?];
    let result = (|| {
        let addr = net::local_addr(listeners[0])?;
        if reuseport {
            for _ in 1..workers {
                listeners.push(net::listen(addr.port(), true)?);
            }
        }
        for &l in &listeners {
            net::set_nonblocking(l, design.nonblocking_listener())?;
            net::set_recv_timeout(l, designs::TICK)?;
        }
        let (share_slots, slots) = design.slots(workers);
        let counters = Arc::new(SharedCounters::new(slots)?);
        let ctx = Arc::new(designs::Ctx {
            listeners: listeners.clone(),
            counters: counters.clone(),
            workers,
        });
        let server = designs::start(design, &ctx)?;
        // Wait until every slot is set up (not part of the measured time).
        let expected = expected_ready(design, workers);
        let ready_by = Instant::now() + Duration::from_secs(10);
        while (0..slots)
            .map(|s| counters.get(s, Counter::Ready))
            .sum::<u64>()
            < expected
            && Instant::now() < ready_by
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let per_client = cfg
            .requests_per_client
            .unwrap_or_else(|| cfg.requests_per_run.div_ceil(concurrency));
        let (ok, errors, elapsed, timed_out) =
            client::drive(addr, concurrency, per_client, cfg.run_timeout);
        counters.stop();
        for &l in &listeners {
            net::shutdown(l);
        }
        let killed = reap(&server.pids, Duration::from_secs(5));
        drop(server);
        let per_worker: Vec<u64> = (0..share_slots)
            .map(|s| counters.get(s, Counter::Handled))
            .collect();
        let sum = |c: Counter| (0..slots).map(|s| counters.get(s, c)).sum::<u64>();
        let accepted = sum(Counter::Handled);
        let wakeups = sum(Counter::Wakeups);
        let max = per_worker.iter().copied().max().unwrap_or(0);
        let min = per_worker.iter().copied().min().unwrap_or(0);
        let secs = elapsed.as_secs_f64().max(1e-9);
        Ok(HerdRecord {
            design: design.name().to_string(),
            workers,
            concurrency,
            requests: ok,
            errors,
            total_ms: secs * 1e3,
            requests_per_s: ok as f64 / secs,
            accepted,
            wakeups,
            wakeups_per_conn: if accepted == 0 {
                0.0
            } else {
                wakeups as f64 / accepted as f64
            },
            sleeps_per_conn: if accepted == 0 {
                0.0
            } else {
                sum(Counter::Sleeps) as f64 / accepted as f64
            },
            accept_collisions: sum(Counter::Collisions),
            share_max_over_min: (min > 0).then(|| max as f64 / min as f64),
            jain: jain_index(&per_worker),
            per_worker,
            timed_out,
            killed,
        })
    })();
    for &l in &listeners {
        net::close(l);
    }
    result
}

fn expected_ready(design: Design, workers: usize) -> u64 {
    match design {
        Design::Serv00 | Design::Serv01 | Design::Serv06 => 1,
        Design::Serv05 | Design::Serv08 => workers as u64 + 1,
        _ => workers as u64,
    }
}

/// Renders records as an aligned text table.
pub fn table(records: &[HerdRecord]) -> String {
    let mut out = format!(
        "{:<17} {:>3} {:>5} {:>6} {:>4} {:>9} {:>10} {:>9} {:>8} {:>10} {:>8} {:>6}  {}\n",
        "design",
        "W",
        "conc",
        "reqs",
        "err",
        "total_ms",
        "req/s",
        "wakeups/c",
        "sleeps/c",
        "collisions",
        "max/min",
        "jain",
        "per-worker"
    );
    for r in records {
        let share = r
            .share_max_over_min
            .map_or_else(|| "inf".to_string(), |s| format!("{s:.2}"));
        out.push_str(&format!(
            "{:<17} {:>3} {:>5} {:>6} {:>4} {:>9.1} {:>10.0} {:>9.2} {:>8.2} {:>10} {:>8} {:>6.3}  {:?}{}\n",
            r.design,
            r.workers,
            r.concurrency,
            r.requests,
            r.errors,
            r.total_ms,
            r.requests_per_s,
            r.wakeups_per_conn,
            r.sleeps_per_conn,
            r.accept_collisions,
            share,
            r.jain,
            r.per_worker,
            if r.timed_out { " (timed out)" } else { "" }
        ));
    }
    out
}
