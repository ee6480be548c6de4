//! The command line of `evq serve` and `evq proxy` (feature `cli`): clap flags
//! that build [`ServeConfig`] and [`ProxyConfig`], and the two commands, so a
//! binary mounts them in two lines. Library users leave the feature off and
//! build the configs themselves; their builds carry no clap.

use crate::completion_server::IoModel;
use crate::config::{bounds, AcceptMode, DeliveryMode, ProxyConfig, ServeConfig, ShedConfig};
use crate::overload::{OverloadConfig, OverloadPolicy};
use crate::request::Limits;
use crate::{ProxyHandle, ServerHandle};
use clap::builder::TypedValueParser;
use evq::{BackendKind, LoadLimiter};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

fn backend(name: &Option<String>) -> io::Result<Option<BackendKind>> {
    name.as_deref().map(str::parse).transpose()
}

/// A count flag that must fall in `range` ([`crate::bounds`]): clap refuses
/// anything else before the command starts, naming the flag and the range.
fn count_in(range: RangeInclusive<usize>) -> impl TypedValueParser<Value = usize> {
    let (lo, hi) = (*range.start() as u64, *range.end() as u64);
    clap::value_parser!(u64).range(lo..=hi).map(|v| v as usize)
}

/// A number flag (seconds, a gain) that must be finite and fall in `range`.
fn number_in(range: RangeInclusive<f64>) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number"))?;
        if v.is_finite() && range.contains(&v) {
            Ok(v)
        } else {
            Err(format!("{s} is not in {}..={}", range.start(), range.end()))
        }
    }
}

/// Seconds, in a range already checked by [`number_in`].
fn secs(v: f64) -> Duration {
    Duration::from_secs_f64(v)
}

fn stats_path(s: &str) -> Result<String, String> {
    crate::config::check_stats_path(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

/// Overload control's flags, the same for `evq serve` and `evq proxy`.
#[derive(Clone, Debug, clap::Args)]
pub struct OverloadArgs {
    /// Overload control: none, seed001 (the seed's EWMA-and-reset), gate
    /// (keep the listen queue within --queue-target, refuse the rest in the
    /// kernel), codel (reset what waited over twice --queue-target while the
    /// queue stands) or pulse, the default (under overload, take
    /// --queue-target of work and stop listening while serving it: the
    /// kernel refuses the rest at once; below capacity it changes nothing).
    #[arg(long, value_enum, default_value_t = OverloadPolicy::Pulse)]
    pub overload: OverloadPolicy,
    /// Queueing delay gate, codel and pulse aim for, milliseconds.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub queue_target: f64,
    /// CoDel's interval, milliseconds.
    #[arg(long, default_value_t = 100.0, allow_negative_numbers = true)]
    pub codel_interval: f64,
    /// Reset connections that waited longer than this in the listen queue,
    /// seconds (their clients have given up); with any policy but none.
    #[arg(long, allow_negative_numbers = true)]
    pub deadline: Option<f64>,
    /// Connections admitted after waiting longer than this count as served
    /// late, seconds.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub late_after: f64,
}

impl OverloadArgs {
    /// The config these flags describe, with `policy` in place of the flag's
    /// (as `--shed` asks).
    fn to_config(&self, policy: OverloadPolicy) -> io::Result<OverloadConfig> {
        Ok(OverloadConfig {
            policy,
            queue_target: checked_millis(self.queue_target, "queue-target")?,
            interval: checked_millis(self.codel_interval, "codel-interval")?,
            deadline: self
                .deadline
                .map(|d| checked_secs(d, "deadline"))
                .transpose()?,
            late_after: checked_secs(self.late_after, "late-after")?,
        })
    }
}

/// `evq serve`'s flags. Every number has a range ([`crate::bounds`]); a value
/// outside it stops the command before it starts, with a message naming the
/// flag and the range.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Backend (select, select-improved, poll, epoll, ...); default: EVQ_BACKEND or the best.
    #[arg(long)]
    pub backend: Option<String>,
    /// Worker threads, one event queue each (1..=1024).
    #[arg(long, default_value_t = 1, value_parser = count_in(bounds::THREADS))]
    pub threads: usize,
    /// How threads share the listening address (default: exclusive; reuseport
    /// when --overload gate or pulse runs several threads).
    #[arg(long, value_enum)]
    pub accept: Option<AcceptMode>,
    /// How connections are registered (default: event where the backend has it,
    /// else level).
    #[arg(long, value_enum)]
    pub mode: Option<DeliveryMode>,
    /// Serve static files beneath this directory (default: the fixed reply).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Size of the fixed reply in bytes (0..=268435456: it is held in memory;
    /// serve larger bodies from a file with --root).
    #[arg(long, default_value_t = 1024, value_parser = count_in(bounds::REPLY_SIZE))]
    pub reply_size: usize,
    /// Overload control.
    #[command(flatten)]
    pub overload: OverloadArgs,
    /// Same as --overload seed001 (seed 001's load limiting).
    #[arg(long)]
    pub shed: bool,
    /// Gain of the smoothed events-per-call average (0.001..=1).
    #[arg(long, default_value_t = LoadLimiter::DEFAULT_GAIN, value_parser = number_in(bounds::SHED_GAIN))]
    pub shed_gain: f64,
    /// Events-per-call average above which connections are reset (0..=65536).
    #[arg(long, default_value_t = LoadLimiter::DEFAULT_THRESHOLD, value_parser = number_in(bounds::SHED_THRESHOLD))]
    pub shed_threshold: f64,
    /// Most events per get_next_event call while shedding (1..=65536).
    #[arg(long, default_value_t = 23, value_parser = count_in(bounds::MAX_EVENTS))]
    pub shed_max_events: usize,
    /// Most events per get_next_event call otherwise (1..=65536).
    #[arg(long, default_value_t = 256, value_parser = count_in(bounds::MAX_EVENTS))]
    pub max_events: usize,
    /// Seconds a client has to finish a request head once started (0.001..=86400).
    #[arg(long, default_value_t = 10.0, value_parser = number_in(bounds::TIMEOUT_SECS))]
    pub header_timeout: f64,
    /// Seconds a connection may stay idle (0.001..=86400).
    #[arg(long, default_value_t = 60.0, value_parser = number_in(bounds::TIMEOUT_SECS))]
    pub idle_timeout: f64,
    /// Largest request head in bytes, more is 431 (64..=1048576).
    #[arg(long, default_value_t = 8192, value_parser = count_in(bounds::MAX_HEAD))]
    pub max_head: usize,
    /// Longest request target in bytes, more is 414 (1..=1048576).
    #[arg(long, default_value_t = 4096, value_parser = count_in(bounds::MAX_URI))]
    pub max_uri: usize,
    /// Most connections open at once (1..=1073741824); past it, the oldest idle
    /// keep-alive connection makes room, or the new one is closed.
    #[arg(long, default_value_t = 100_000, value_parser = count_in(bounds::MAX_CONNS))]
    pub max_conns: usize,
    /// Send files over 16 KiB with sendfile (zero-copy). Only for files that
    /// are replaced by rename, never changed in place: with sendfile, a file
    /// truncated or rewritten while it is sent changes bytes already promised
    /// to the client (a truncation sends zeros), which nothing can detect.
    /// Default: each chunk is read into a buffer and sent, and a file that
    /// shrinks meanwhile ends the reply with a reset.
    #[arg(long)]
    pub sendfile: bool,
    /// CPU microseconds to spend on each request before replying: a stand-in
    /// for an application's work, to give the server a capacity in
    /// experiments (0..=1000000; default 0).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub work_us: u64,
    /// Serve the counters as JSON at this path (e.g. /.evq/stats).
    #[arg(long, value_parser = stats_path)]
    pub stats_path: Option<String>,
    /// Also answer the counters (at --stats-path, default /.evq/stats) and
    /// /health on this address, from a thread of its own: overload control
    /// never refuses it, so a health check sees a busy server as alive.
    #[arg(long)]
    pub status_listen: Option<SocketAddr>,
    /// Seconds a graceful stop (SIGINT/SIGTERM) lets in-flight requests finish
    /// (0..=3600).
    #[arg(long, default_value_t = 5.0, value_parser = number_in(bounds::GRACE_SECS))]
    pub grace: f64,
    /// Seconds an open file is served without looking its path up again
    /// (0..=3600; nginx's open_file_cache_valid).
    #[arg(long, default_value_t = 1.0, value_parser = number_in(bounds::FILE_CACHE_VALID_SECS))]
    pub file_cache_valid: f64,
    /// Print the counters as JSON at exit instead of text.
    #[arg(long)]
    pub json: bool,
    /// I/O model: readiness (an evq backend) or completion (io_uring accepts,
    /// receives and sends; --backend does not apply; --overload takes none or
    /// pulse, the default, without --deadline; --shed, a stats path or a
    /// status listener are refused; see `serve_completion`).
    #[arg(long, value_enum, default_value_t = IoModel::Readiness)]
    pub io: IoModel,
}

fn checked_secs(v: f64, what: &str) -> io::Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--{what} must be a non-negative number of seconds"),
        )
    })
}

fn checked_millis(v: f64, what: &str) -> io::Result<Duration> {
    checked_secs(v / 1000.0, what).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--{what} must be a non-negative number of milliseconds"),
        )
    })
}

impl ServeArgs {
    /// The config these flags describe (`handle_signals` on).
    ///
    /// # Errors
    /// An unknown backend name, or a value out of range (flags built by clap
    /// were checked already; this checks flags built by hand).
    pub fn to_config(&self) -> io::Result<ServeConfig> {
        let cfg = ServeConfig {
            listen: self.listen,
            backend: backend(&self.backend)?,
            threads: self.threads,
            accept: self.accept.unwrap_or(
                if self.overload.overload.needs_own_socket() && self.threads > 1 {
                    AcceptMode::Reuseport
                } else {
                    AcceptMode::Exclusive
                },
            ),
            mode: self.mode,
            root: self.root.clone(),
            reply_size: self.reply_size,
            shed: self.shed.then_some(ShedConfig {
                gain: self.shed_gain,
                threshold: self.shed_threshold,
                max_events: self.shed_max_events,
            }),
            overload: self.overload.to_config(if self.shed {
                OverloadPolicy::Seed001
            } else {
                self.overload.overload
            })?,
            max_events: self.max_events,
            header_timeout: duration("--header-timeout", self.header_timeout)?,
            idle_timeout: duration("--idle-timeout", self.idle_timeout)?,
            limits: Limits {
                max_head: self.max_head,
                max_uri: self.max_uri,
            },
            max_conns: self.max_conns,
            stats_path: self.stats_path.clone(),
            status_listen: self.status_listen,
            sendfile: self.sendfile,
            work: Duration::from_micros(self.work_us),
            handle_signals: true,
            grace: duration("--grace", self.grace)?,
            file_cache_valid: duration("--file-cache-valid", self.file_cache_valid)?,
            backlog: 4096,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Seconds as a duration; a negative or non-finite value (possible only in
/// flags built by hand) is an error naming the flag.
fn duration(flag: &str, v: f64) -> io::Result<Duration> {
    if v.is_finite() && v >= 0.0 {
        Ok(secs(v))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{flag} is {v}, not a number of seconds"),
        ))
    }
}

/// `evq proxy`'s flags, with ranges as `evq serve`'s.
#[derive(Clone, Debug, clap::Args)]
pub struct ProxyArgs {
    /// Address clients connect to.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// The origin server's address.
    #[arg(long)]
    pub origin: SocketAddr,
    /// Backend (select, select-improved, poll, epoll, ...).
    #[arg(long)]
    pub backend: Option<String>,
    /// How connections are registered: level or oneshot (default: level where
    /// the backend has it).
    #[arg(long, value_enum)]
    pub mode: Option<DeliveryMode>,
    /// Seconds the origin has to connect and answer before the client gets 504
    /// (0.001..=86400).
    #[arg(long, default_value_t = 10.0, value_parser = number_in(bounds::TIMEOUT_SECS))]
    pub origin_timeout: f64,
    /// Seconds a client connection may stay idle (0.001..=86400).
    #[arg(long, default_value_t = 60.0, value_parser = number_in(bounds::TIMEOUT_SECS))]
    pub idle_timeout: f64,
    /// Idle origin connections kept for reuse (0..=65536).
    #[arg(long, default_value_t = 64, value_parser = count_in(bounds::POOL_SIZE))]
    pub pool_size: usize,
    /// Largest request head in bytes, more is 431 (64..=1048576).
    #[arg(long, default_value_t = 8192, value_parser = count_in(bounds::MAX_HEAD))]
    pub max_head: usize,
    /// Longest request target in bytes, more is 414 (1..=1048576).
    #[arg(long, default_value_t = 4096, value_parser = count_in(bounds::MAX_URI))]
    pub max_uri: usize,
    /// Seconds a graceful stop (SIGINT/SIGTERM) lets exchanges in flight finish
    /// (0..=3600).
    #[arg(long, default_value_t = 5.0, value_parser = number_in(bounds::GRACE_SECS))]
    pub grace: f64,
    /// Overload control of new clients, as `evq serve`'s (seed001 with the
    /// seed's numbers).
    #[command(flatten)]
    pub overload: OverloadArgs,
    /// CPU microseconds to spend on each request before relaying it: a
    /// stand-in for a proxy's own work, to give it a capacity in experiments
    /// (0..=1000000; default 0).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub work_us: u64,
    /// Print the counters as JSON at exit instead of text.
    #[arg(long)]
    pub json: bool,
    /// I/O model: readiness (an evq backend) or completion (io_uring accepts,
    /// receives and sends; --backend and --mode are refused; --overload takes
    /// none or pulse, the default, without --deadline).
    #[arg(long, value_enum, default_value_t = IoModel::Readiness)]
    pub io: IoModel,
}

impl ProxyArgs {
    /// The config these flags describe (`handle_signals` on).
    ///
    /// # Errors
    /// An unknown backend name, or a value out of range.
    pub fn to_config(&self) -> io::Result<ProxyConfig> {
        let cfg = ProxyConfig {
            listen: self.listen,
            origin: self.origin,
            backend: backend(&self.backend)?,
            origin_timeout: duration("--origin-timeout", self.origin_timeout)?,
            idle_timeout: duration("--idle-timeout", self.idle_timeout)?,
            pool_size: self.pool_size,
            mode: self.mode,
            limits: Limits {
                max_head: self.max_head,
                max_uri: self.max_uri,
            },
            handle_signals: true,
            grace: duration("--grace", self.grace)?,
            // The completion relay takes none or pulse (it refuses the rest).
            overload: self.overload.to_config(self.overload.overload)?,
            backlog: 4096,
            work: Duration::from_micros(self.work_us),
            io: self.io,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Writes one line to stdout, returning the error instead of panicking as
/// `println!` does when stdout is closed (`evq serve --json | head -c 10`):
/// the command then fails with a message, never by a signal or a panic.
fn print_line(line: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// A status line on stderr; a closed stderr loses it, and nothing else.
fn note(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

/// `evq serve`: runs the server these flags describe until SIGINT/SIGTERM, then
/// prints its counters (text, or JSON with `--json`) to stdout.
///
/// # Errors
/// Bad flags, bind errors, the error that ended a worker, or stdout closed.
pub fn run_serve(args: &ServeArgs) -> io::Result<()> {
    let cfg = args.to_config()?;
    // Connections are descriptors: take all the hard limit allows.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    if args.io == IoModel::Completion {
        let report = crate::serve_completion(&cfg, |addr| {
            eprintln!(
                "evq serve: listening on {addr} ({} thread(s), io_uring completions, overload control {})",
                cfg.threads,
                cfg.overload.policy.name()
            )
        })?;
        if args.json {
            return print_line(&report.to_json());
        }
        println!("{report}");
        return Ok(());
    }
    let server = ServerHandle::start(&cfg)?;
    note(&format!(
        "evq serve: listening on {} ({} thread(s), {} backend)",
        server.addr(),
        cfg.threads,
        server.report().backend
    ));
    if let Some(addr) = server.status_addr() {
        note(&format!("evq serve: status and /health on {addr}"));
    }
    let report = server.wait()?;
    if args.json {
        print_line(&report.to_json())
    } else {
        print_line(&report.to_string())
    }
}

/// `evq proxy`: runs the proxy these flags describe until SIGINT/SIGTERM, then
/// prints its counters.
///
/// # Errors
/// Bad flags, bind errors, the error that ended the loop, or stdout closed.
pub fn run_proxy(args: &ProxyArgs) -> io::Result<()> {
    let cfg = args.to_config()?;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let handle = ProxyHandle::start(&cfg)?;
    let io = match cfg.io {
        IoModel::Readiness => String::new(),
        IoModel::Completion => format!(
            " (io_uring completions, overload control {})",
            cfg.overload.policy.name()
        ),
    };
    note(&format!(
        "evq proxy: listening on {}, origin {}{io}",
        handle.addr(),
        cfg.origin
    ));
    let report = handle.wait()?;
    if args.json {
        print_line(&serde_json::to_string(&report).map_err(io::Error::other)?)
    } else {
        print_line(&report.to_string())
    }
}
