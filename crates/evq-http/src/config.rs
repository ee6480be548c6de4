//! What `evq serve` and `evq proxy` are told: plain config structs for library
//! users, and clap `Args` structs that build them for the command line.

use crate::request::Limits;
use evq::{BackendKind, LoadLimiter};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How worker threads share the listening address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
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
    /// Load shedding; `None` serves everyone.
    pub shed: Option<ShedConfig>,
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
    /// Stop on SIGINT/SIGTERM (the command line sets this; in-process servers use
    /// `ServerHandle::stop`).
    pub handle_signals: bool,
    /// How long a graceful shutdown waits for in-flight requests.
    pub grace: Duration,
    /// Listen backlog.
    pub backlog: i32,
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
            max_events: 256,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            limits: Limits::default(),
            max_conns: 100_000,
            stats_path: None,
            handle_signals: false,
            grace: Duration::from_secs(5),
            backlog: 4096,
        }
    }
}

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
        }
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
