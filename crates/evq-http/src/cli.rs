//! The command line of `evq serve` and `evq proxy` (feature `cli`): clap flags
//! that build [`ServeConfig`] and [`ProxyConfig`], and the two commands, so a
//! binary mounts them in two lines. Library users leave the feature off and
//! build the configs themselves; their builds carry no clap.

use crate::config::{AcceptMode, DeliveryMode, ProxyConfig, ServeConfig, ShedConfig};
use crate::request::Limits;
use crate::{ProxyHandle, ServerHandle};
use evq::{BackendKind, LoadLimiter};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

fn backend(name: &Option<String>) -> io::Result<Option<BackendKind>> {
    name.as_deref().map(str::parse).transpose()
}

/// `evq serve`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Backend (select, select-improved, poll, epoll, ...); default: EVQ_BACKEND or the best.
    #[arg(long)]
    pub backend: Option<String>,
    /// Worker threads, one event queue each.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// How threads share the listening address.
    #[arg(long, value_enum, default_value_t = AcceptMode::Exclusive)]
    pub accept: AcceptMode,
    /// How connections are registered (default: event where the backend has it,
    /// else level).
    #[arg(long, value_enum)]
    pub mode: Option<DeliveryMode>,
    /// Serve static files beneath this directory (default: the fixed reply).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Size of the fixed reply in bytes.
    #[arg(long, default_value_t = 1024)]
    pub reply_size: usize,
    /// Reset new connections while overloaded (seed 001's load limiting).
    #[arg(long)]
    pub shed: bool,
    /// Gain of the smoothed events-per-call average.
    #[arg(long, default_value_t = LoadLimiter::DEFAULT_GAIN)]
    pub shed_gain: f64,
    /// Events-per-call average above which connections are reset.
    #[arg(long, default_value_t = LoadLimiter::DEFAULT_THRESHOLD)]
    pub shed_threshold: f64,
    /// Most events per get_next_event call while shedding.
    #[arg(long, default_value_t = 23)]
    pub shed_max_events: usize,
    /// Most events per get_next_event call otherwise.
    #[arg(long, default_value_t = 256)]
    pub max_events: usize,
    /// Seconds a client has to finish a request head once started.
    #[arg(long, default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Seconds a connection may stay idle.
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Largest request head in bytes (more: 431).
    #[arg(long, default_value_t = 8192)]
    pub max_head: usize,
    /// Longest request target in bytes (more: 414).
    #[arg(long, default_value_t = 4096)]
    pub max_uri: usize,
    /// Most connections open at once.
    #[arg(long, default_value_t = 100_000)]
    pub max_conns: usize,
    /// Serve the counters as JSON at this path (e.g. /.evq/stats).
    #[arg(long)]
    pub stats_path: Option<String>,
    /// Seconds a graceful shutdown waits for in-flight requests.
    #[arg(long, default_value_t = 5.0)]
    pub grace: f64,
    /// Print the counters as JSON at exit instead of text.
    #[arg(long)]
    pub json: bool,
}

fn secs(v: f64, what: &str) -> io::Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--{what} must be a non-negative number of seconds"),
        )
    })
}

impl ServeArgs {
    /// The config these flags describe (`handle_signals` on).
    ///
    /// # Errors
    /// An unknown backend name or a bad duration.
    pub fn to_config(&self) -> io::Result<ServeConfig> {
        Ok(ServeConfig {
            listen: self.listen,
            backend: backend(&self.backend)?,
            threads: self.threads.max(1),
            accept: self.accept,
            mode: self.mode,
            root: self.root.clone(),
            reply_size: self.reply_size,
            shed: self.shed.then_some(ShedConfig {
                gain: self.shed_gain,
                threshold: self.shed_threshold,
                max_events: self.shed_max_events.max(1),
            }),
            max_events: self.max_events.max(1),
            header_timeout: secs(self.header_timeout, "header-timeout")?,
            idle_timeout: secs(self.idle_timeout, "idle-timeout")?,
            limits: Limits {
                max_head: self.max_head.max(64),
                max_uri: self.max_uri.max(1),
            },
            max_conns: self.max_conns.max(1),
            stats_path: self.stats_path.clone(),
            handle_signals: true,
            grace: secs(self.grace, "grace")?,
            backlog: 4096,
        })
    }
}

/// `evq proxy`'s flags.
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
    /// Seconds the origin has to connect and answer before the client gets 504.
    #[arg(long, default_value_t = 10.0)]
    pub origin_timeout: f64,
    /// Seconds a client connection may stay idle.
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Idle origin connections kept for reuse.
    #[arg(long, default_value_t = 64)]
    pub pool_size: usize,
    /// Print the counters as JSON at exit instead of text.
    #[arg(long)]
    pub json: bool,
}

impl ProxyArgs {
    /// The config these flags describe (`handle_signals` on).
    ///
    /// # Errors
    /// An unknown backend name or a bad duration.
    pub fn to_config(&self) -> io::Result<ProxyConfig> {
        Ok(ProxyConfig {
            listen: self.listen,
            origin: self.origin,
            backend: backend(&self.backend)?,
            origin_timeout: secs(self.origin_timeout, "origin-timeout")?,
            idle_timeout: secs(self.idle_timeout, "idle-timeout")?,
            pool_size: self.pool_size,
            mode: None,
            limits: Limits::default(),
            handle_signals: true,
        })
    }
}

/// `evq serve`: runs the server these flags describe until SIGINT/SIGTERM, then
/// prints its counters (text, or JSON with `--json`) to stdout.
///
/// # Errors
/// Bad flags, bind errors, or the error that ended a worker.
pub fn run_serve(args: &ServeArgs) -> std::io::Result<()> {
    let cfg = args.to_config()?;
    // Connections are descriptors: take all the hard limit allows.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let server = ServerHandle::start(&cfg)?;
    eprintln!(
        "evq serve: listening on {} ({} thread(s), {} backend)",
        server.addr(),
        cfg.threads,
        server.report().backend
    );
    let report = server.wait()?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
    }
    Ok(())
}

/// `evq proxy`: runs the proxy these flags describe until SIGINT/SIGTERM, then
/// prints its counters.
///
/// # Errors
/// Bad flags, bind errors, or the error that ended the loop.
pub fn run_proxy(args: &ProxyArgs) -> std::io::Result<()> {
    let cfg = args.to_config()?;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let handle = ProxyHandle::start(&cfg)?;
    eprintln!(
        "evq proxy: listening on {}, origin {}",
        handle.addr(),
        cfg.origin
    );
    let report = handle.wait()?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).unwrap_or_else(|_| "{}".into())
        );
    } else {
        println!("{report}");
    }
    Ok(())
}
