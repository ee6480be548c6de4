//! What `evq serve` and `evq proxy` are told: plain config structs, and the
//! range every setting must fall in ([`bounds`]). The command line's flags that
//! build the configs are in `cli.rs` (feature `cli`) and check the same ranges
//! as they are parsed; [`ServeConfig::validate`] and [`ProxyConfig::validate`]
//! check them again for library users, and `start` calls them. Nothing is
//! clamped: a value out of range is an error that names the setting and the
//! range.

use crate::overload::OverloadConfig;
use crate::request::Limits;
use evq::{BackendKind, LoadLimiter};
use std::io;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

/// The range of every setting of [`ServeConfig`] and [`ProxyConfig`], and why
/// it ends where it does. The flags of `evq serve` and `evq proxy` have the same
/// ranges (a flag in seconds takes the `*_SECS` range).
pub mod bounds {
    use std::ops::RangeInclusive;

    /// Worker threads (`--threads`): at least one; at most 1,024, more than any
    /// machine evq runs on has CPUs. Each thread costs an event queue, a stop
    /// pipe, a spare descriptor and, with `--accept reuseport`, a socket.
    pub const THREADS: RangeInclusive<usize> = 1..=1024;
    /// Bytes of the fixed reply (`--reply-size`): it is built in memory once, at
    /// start, and sent from there. 256 MiB is five orders of magnitude past the
    /// sizes the sources measured and stays well inside memory; larger bodies
    /// belong in a file served with `--root` (sent by `sendfile`, never held in
    /// memory).
    pub const REPLY_SIZE: RangeInclusive<usize> = 0..=256 << 20;
    /// Events per `get_next_event` (`--max-events`, `--shed-max-events`): the
    /// batch buffer is allocated once; past 65,536 a larger batch buys nothing.
    pub const MAX_EVENTS: RangeInclusive<usize> = 1..=65_536;
    /// Connections open at once (`--max-conns`): 2^30 is the kernel's ceiling on
    /// descriptors per process (`fs.nr_open`), so no larger value can be reached.
    pub const MAX_CONNS: RangeInclusive<usize> = 1..=1 << 30;
    /// Bytes of a request head (`--max-head`): each connection reading a head
    /// holds a buffer this size. 64 holds the shortest request with a `Host`;
    /// 1 MiB is 128 times the usual 8 KiB.
    pub const MAX_HEAD: RangeInclusive<usize> = 64..=1 << 20;
    /// Bytes of a request target (`--max-uri`).
    pub const MAX_URI: RangeInclusive<usize> = 1..=1 << 20;
    /// Header, idle and origin timeouts in seconds (`--header-timeout`,
    /// `--idle-timeout`, `--origin-timeout`): from a millisecond (the timers'
    /// resolution) to a day (deadlines are kept as milliseconds in 32 bits, 49
    /// days at most).
    pub const TIMEOUT_SECS: RangeInclusive<f64> = 0.001..=86_400.0;
    /// Seconds a graceful stop waits for in-flight requests (`--grace`): 0 closes
    /// them at once; an hour at most.
    pub const GRACE_SECS: RangeInclusive<f64> = 0.0..=3_600.0;
    /// Seconds an open file is trusted without looking up its path again
    /// (`--file-cache-valid`, nginx's `open_file_cache_valid`): 0 looks it up for
    /// every request; an hour at most.
    pub const FILE_CACHE_VALID_SECS: RangeInclusive<f64> = 0.0..=3_600.0;
    /// CPU microseconds spent on each request (`--work-us`): up to a second,
    /// a slow application's request.
    pub const WORK_US: RangeInclusive<u64> = 0..=1_000_000;
    /// Gain of the load limiter's smoothed average (`--shed-gain`): above 0 (0
    /// would never move) and at most 1 (the latest batch alone).
    pub const SHED_GAIN: RangeInclusive<f64> = 0.001..=1.0;
    /// Events per call above which the server sheds (`--shed-threshold`): no
    /// batch holds more than [`MAX_EVENTS`].
    pub const SHED_THRESHOLD: RangeInclusive<f64> = 0.0..=65_536.0;
    /// Idle origin connections the proxy keeps (`--pool-size`): 0 keeps none.
    pub const POOL_SIZE: RangeInclusive<usize> = 0..=65_536;
}

/// `Err(InvalidInput)` naming `what` and its range unless `v` is in `range`.
fn check<T: PartialOrd + std::fmt::Display>(
    what: &str,
    v: T,
    range: &RangeInclusive<T>,
) -> io::Result<()> {
    if range.contains(&v) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} is {v}, not in {}..={}", range.start(), range.end()),
        ))
    }
}

/// As [`check`], for a duration against a range in seconds.
fn check_secs(what: &str, d: Duration, range: &RangeInclusive<f64>) -> io::Result<()> {
    check(what, d.as_secs_f64(), range)
}

/// How worker threads share the listening address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum AcceptMode {
    /// One listening socket, registered wake-one in every thread (`EPOLLEXCLUSIVE`):
    /// one thread is woken per connection.
    Exclusive,
    /// One `SO_REUSEPORT` socket per thread: the kernel spreads connections.
    Reuseport,
    /// One listening socket, plain level registration in every thread: every
    /// thread wakes for every connection (the thundering herd, for comparison).
    Shared,
}

/// How connections are registered with the queue (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum DeliveryMode {
    /// Level-triggered; interest switched between read and write as needed.
    Level,
    /// The paper's event (edge) mode: read and write interest registered once.
    Event,
    /// One event, then re-armed by `declare_interest` after every handling.
    Oneshot,
}

impl DeliveryMode {
    /// The evq mode.
    pub fn to_mode(self) -> evq::Mode {
        match self {
            DeliveryMode::Level => evq::Mode::Level,
            DeliveryMode::Event => evq::Mode::Event,
            DeliveryMode::Oneshot => evq::Mode::Oneshot,
        }
    }
}

/// Seed 001's load limiting, as the server applies it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShedConfig {
    /// Gain of the smoothed events-per-call average.
    pub gain: f64,
    /// Above this average, new connections are reset.
    pub threshold: f64,
    /// Most events taken per `get_next_event` while shedding is on.
    pub max_events: usize,
}

impl Default for ShedConfig {
    fn default() -> Self {
        ShedConfig {
            gain: LoadLimiter::DEFAULT_GAIN,
            threshold: LoadLimiter::DEFAULT_THRESHOLD,
            max_events: 23,
        }
    }
}

/// Everything `serve` needs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on (port 0 picks one; see `ServerHandle::addr`).
    pub listen: SocketAddr,
    /// Backend; `None` uses `EVQ_BACKEND` or the best available.
    pub backend: Option<BackendKind>,
    /// Worker threads, one event queue each.
    pub threads: usize,
    /// How threads share the listening address.
    pub accept: AcceptMode,
    /// How connections are registered; `None`: event mode where the backend has
    /// it, else level, else oneshot.
    pub mode: Option<DeliveryMode>,
    /// Serve files beneath this directory; `None` serves the fixed reply.
    pub root: Option<PathBuf>,
    /// Size of the fixed reply in bytes.
    pub reply_size: usize,
    /// Seed 001's load shedding; `Some` turns it on (as `overload.policy =
    /// Seed001` does, with these numbers or the defaults).
    pub shed: Option<ShedConfig>,
    /// Overload control (`overload.rs`).
    pub overload: OverloadConfig,
    /// Most events per `get_next_event` when not shedding.
    pub max_events: usize,
    /// Time a client has to send a complete request head once it started one.
    pub header_timeout: Duration,
    /// Time a connection may sit idle (between requests, or blocked writing).
    pub idle_timeout: Duration,
    /// Request size limits.
    pub limits: Limits,
    /// Most connections open at once (more are accepted and closed).
    pub max_conns: usize,
    /// Serve the counters as JSON at this path.
    pub stats_path: Option<String>,
    /// Answer the counters (at `stats_path`, or `/.evq/stats`) and `/health`
    /// on this address too, from a thread of its own that overload control
    /// never touches (`status.rs`).
    pub status_listen: Option<SocketAddr>,
    /// Send files over 16 KiB with `sendfile` (zero-copy) rather than a read
    /// into a buffer and a send. Faster for large files, but the bytes queued
    /// in the socket are the page cache's own: a file truncated or written in
    /// place while it is being sent changes bytes the client has been
    /// promised (a truncation zeroes them), and no check can catch it. For
    /// files that are only ever replaced by rename.
    pub sendfile: bool,
    /// CPU time spent on each request before its reply: a stand-in for an
    /// application's work, so an experiment can give the server a capacity
    /// (zero: none).
    pub work: Duration,
    /// Stop on SIGINT/SIGTERM (the command line sets this; in-process servers use
    /// `ServerHandle::stop`).
    pub handle_signals: bool,
    /// How long a graceful shutdown waits for in-flight requests.
    pub grace: Duration,
    /// How long an open file is trusted before its path is looked up again
    /// (files are served from a per-thread cache of open descriptors).
    pub file_cache_valid: Duration,
    /// Listen backlog.
    pub backlog: i32,
}

impl ServeConfig {
    /// Checks every setting against its range in [`bounds`].
    ///
    /// # Errors
    /// `InvalidInput` naming the first setting out of range and its range.
    pub fn validate(&self) -> io::Result<()> {
        check("threads", self.threads, &bounds::THREADS)?;
        check("reply_size", self.reply_size, &bounds::REPLY_SIZE)?;
        check("max_events", self.max_events, &bounds::MAX_EVENTS)?;
        if let Some(shed) = &self.shed {
            check("shed.gain", shed.gain, &bounds::SHED_GAIN)?;
            check("shed.threshold", shed.threshold, &bounds::SHED_THRESHOLD)?;
            check("shed.max_events", shed.max_events, &bounds::MAX_EVENTS)?;
        }
        check_secs("header_timeout", self.header_timeout, &bounds::TIMEOUT_SECS)?;
        check_secs("idle_timeout", self.idle_timeout, &bounds::TIMEOUT_SECS)?;
        check("limits.max_head", self.limits.max_head, &bounds::MAX_HEAD)?;
        check("limits.max_uri", self.limits.max_uri, &bounds::MAX_URI)?;
        check("max_conns", self.max_conns, &bounds::MAX_CONNS)?;
        check_secs("grace", self.grace, &bounds::GRACE_SECS)?;
        check_secs(
            "file_cache_valid",
            self.file_cache_valid,
            &bounds::FILE_CACHE_VALID_SECS,
        )?;
        check_backlog(self.backlog)?;
        if let Some(p) = &self.stats_path {
            check_stats_path(p)?;
        }
        check("work (µs)", self.work.as_micros() as u64, &bounds::WORK_US)?;
        Ok(())
    }
}

/// A listen backlog is at least 1 (the kernel caps it at `somaxconn`).
fn check_backlog(backlog: i32) -> io::Result<()> {
    if backlog < 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("backlog is {backlog}, not at least 1"),
        ));
    }
    Ok(())
}

/// A stats path is a request target's path: it starts with `/`.
pub(crate) fn check_stats_path(p: &str) -> io::Result<()> {
    if p.starts_with('/') && !p.bytes().any(|b| b <= b' ' || b == 0x7f) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("stats path {p:?} must start with / and hold no spaces or control characters"),
        ))
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            backend: None,
            threads: 1,
            accept: AcceptMode::Exclusive,
            mode: None,
            root: None,
            reply_size: 1024,
            shed: None,
            overload: OverloadConfig::default(),
            max_events: 256,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            limits: Limits::default(),
            max_conns: 100_000,
            stats_path: None,
            status_listen: None,
            sendfile: false,
            work: Duration::ZERO,
            handle_signals: false,
            grace: Duration::from_secs(5),
            file_cache_valid: Duration::from_secs(1),
            backlog: 4096,
        }
    }
}

/// Everything `proxy` needs.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Address clients connect to.
    pub listen: SocketAddr,
    /// The origin server.
    pub origin: SocketAddr,
    /// Backend; `None` uses `EVQ_BACKEND` or the best available.
    pub backend: Option<BackendKind>,
    /// Time the origin has to connect and to answer (else 504).
    pub origin_timeout: Duration,
    /// Time a client connection may stay idle.
    pub idle_timeout: Duration,
    /// Idle origin connections kept for reuse.
    pub pool_size: usize,
    /// How connections are registered: `Level` or `Oneshot` (`None`: level where
    /// the backend has it, else oneshot). The relay does not use event mode.
    pub mode: Option<DeliveryMode>,
    /// Request and response head limits.
    pub limits: Limits,
    /// Stop on SIGINT/SIGTERM.
    pub handle_signals: bool,
    /// How long a graceful stop lets exchanges in flight finish.
    pub grace: Duration,
    /// Overload control of new clients (`overload.rs`), as `evq serve`'s.
    /// `Seed001` uses [`ShedConfig::default`]'s numbers.
    pub overload: OverloadConfig,
    /// The listening socket's backlog.
    pub backlog: i32,
    /// CPU time spent on each request before it is relayed: a stand-in for
    /// a proxy's own work (TLS, authentication, rewriting), so an experiment
    /// can give the proxy a capacity (zero: none).
    pub work: Duration,
    /// How the proxy does its I/O: readiness events from `backend`, or
    /// io_uring completions (`backend`, `mode` and `overload` then do not
    /// apply and are refused).
    pub io: crate::IoModel,
}

impl ProxyConfig {
    /// Checks every setting against its range in [`bounds`].
    ///
    /// # Errors
    /// `InvalidInput` naming the first setting out of range and its range.
    pub fn validate(&self) -> io::Result<()> {
        check_secs("origin_timeout", self.origin_timeout, &bounds::TIMEOUT_SECS)?;
        check_secs("idle_timeout", self.idle_timeout, &bounds::TIMEOUT_SECS)?;
        check("pool_size", self.pool_size, &bounds::POOL_SIZE)?;
        check("limits.max_head", self.limits.max_head, &bounds::MAX_HEAD)?;
        check("limits.max_uri", self.limits.max_uri, &bounds::MAX_URI)?;
        check_secs("grace", self.grace, &bounds::GRACE_SECS)?;
        check_backlog(self.backlog)?;
        check("work (µs)", self.work.as_micros() as u64, &bounds::WORK_US)?;
        self.overload.validate()
    }
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            origin: SocketAddr::from(([127, 0, 0, 1], 8080)),
            backend: None,
            origin_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            pool_size: 64,
            mode: None,
            limits: Limits::default(),
            handle_signals: false,
            grace: Duration::from_secs(5),
            overload: OverloadConfig::default(),
            backlog: 1024,
            work: Duration::ZERO,
            io: crate::IoModel::Readiness,
        }
    }
}
