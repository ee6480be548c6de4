//! What `evq serve` and `evq proxy` are told: plain config structs. The command
//! line's flags that build them are in `cli.rs` (feature `cli`).

use crate::request::Limits;
use evq::{BackendKind, LoadLimiter};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
