//! Run configurations ([`LoadConfig`], [`DeadConfig`]). The command-line flags
//! that build them (feature `cli`) are in `cli.rs`, named as httperf and deadconn
//! name them so the seeds' command lines carry over.

use serde::Serialize;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// How connection start times are spaced in open loop (httperf `--period`'s `d`/`e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Evenly spaced: one every `1/rate` seconds.
    #[default]
    Fixed,
    /// Exponential inter-arrival times with mean `1/rate` (a Poisson process).
    Poisson,
}

/// How the load threads do their I/O (`--io`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum IoModel {
    /// Readiness events from an evq queue, then `send`/`recv` system calls.
    #[default]
    Readiness,
    /// io_uring completions (`evq::completion`): the kernel sends and receives,
    /// results come back in batches (Linux 6.0).
    Completion,
}

/// What starts connections.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoopMode {
    /// httperf: connections start on a schedule whether or not earlier ones finished.
    Open {
        /// Connections started per second, over all threads.
        rate: f64,
        /// Spacing of start times.
        dist: Distribution,
        /// Connections to start in all.
        num_conns: u64,
    },
    /// wrk: `connections` are kept open; each sends its next request as soon as the
    /// previous reply arrived, and a closed connection is replaced at once.
    Closed {
        /// Connections kept open at once, over all threads.
        connections: usize,
        /// Stop after this long (requests in flight then are abandoned, not errors).
        #[serde(serialize_with = "opt_secs")]
        duration: Option<Duration>,
        /// Stop after starting this many connections in all.
        num_conns: Option<u64>,
    },
}

/// Everything one load run needs. Build it with [`LoadConfig::open`] /
/// [`LoadConfig::closed`] and adjust the public fields (or from `LoadArgs`, with
/// feature `cli`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadConfig {
    /// Server host name or address.
    pub server: String,
    /// Server port.
    pub port: u16,
    /// Request target.
    pub uri: String,
    /// Request method.
    pub method: String,
    /// Extra header lines (`Name: value`).
    pub headers: Vec<String>,
    /// Send HTTP/1.0 requests (with `Connection: keep-alive`) instead of HTTP/1.1.
    pub http10: bool,
    /// Open or closed loop.
    pub mode: LoopMode,
    /// Calls per connection; 0 means unlimited (until the server closes or the run
    /// ends).
    pub num_calls: u32,
    /// Calls sent back to back (pipelined) before waiting for their replies.
    pub burst_length: u32,
    /// Longest wait for any progress (connect, send, receive); `None` waits forever
    /// (bounded by `max_time`).
    #[serde(serialize_with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// Added to `timeout` while waiting for the first byte of a reply.
    #[serde(serialize_with = "secs_f64")]
    pub think_timeout: Duration,
    /// A refusal learned within this long of the request's intended start counts
    /// as fast ([`crate::Outcomes::refused_fast`]).
    #[serde(serialize_with = "secs_f64")]
    pub fast_refusal: Duration,
    /// Requests due in the run's first this long are a warm-up: counted in the
    /// outcomes as all are, and left out of [`crate::LoadReport::steady`]
    /// (`None`: no steady-state figures).
    #[serde(serialize_with = "opt_secs")]
    pub warm_up: Option<Duration>,
    /// Bind local ports explicitly over 1024–65535 with `SO_REUSEADDR` (httperf
    /// `--hog`) instead of letting `connect` pick from the ephemeral range.
    pub hog: bool,
    /// Local address to bind.
    pub source: Option<IpAddr>,
    /// Worker threads, one evq queue (or completion ring) each.
    pub threads: usize,
    /// Readiness events or io_uring completions.
    pub io: IoModel,
    /// With io_uring completions: how long a wait may hold a reply back to
    /// gather others with it, when at least 8 are awaited (`--gather-us`;
    /// zero: never; `completion.rs`'s quirk i).
    #[serde(serialize_with = "secs_f64")]
    pub gather: Duration,
    /// Hard wall-clock cap on the run; whatever is still in progress then is counted
    /// as `cutoff`. `None` picks the expected length plus a margin.
    #[serde(serialize_with = "opt_secs")]
    pub max_time: Option<Duration>,
    /// Draw a progress line on stderr when it is a terminal.
    pub progress: bool,
    /// Seed of the Poisson schedule.
    pub seed: u64,
}

impl LoadConfig {
    /// The default fast-refusal bound: 10 ms, where a refused client has learned
    /// it quickly enough to go elsewhere.
    pub const FAST_REFUSAL: Duration = Duration::from_millis(10);

    pub(crate) fn base(server: &str, port: u16, mode: LoopMode, num_calls: u32) -> LoadConfig {
        LoadConfig {
            server: server.to_string(),
            port,
            uri: "/".into(),
            method: "GET".into(),
            headers: Vec::new(),
            http10: false,
            mode,
            num_calls,
            burst_length: 1,
            timeout: None,
            think_timeout: Duration::ZERO,
            fast_refusal: LoadConfig::FAST_REFUSAL,
            warm_up: None,
            hog: false,
            source: None,
            threads: 1,
            io: IoModel::Readiness,
            gather: Duration::from_micros(50),
            max_time: None,
            progress: false,
            seed: 1,
        }
    }

    /// Open loop: `num_conns` connections at `rate` per second, one call each.
    pub fn open(server: &str, port: u16, rate: f64, num_conns: u64) -> LoadConfig {
        let mode = LoopMode::Open {
            rate,
            dist: Distribution::Fixed,
            num_conns,
        };
        LoadConfig::base(server, port, mode, 1)
    }

    /// Closed loop: `connections` kept busy for `duration`, unlimited calls each.
    pub fn closed(server: &str, port: u16, connections: usize, duration: Duration) -> LoadConfig {
        let mode = LoopMode::Closed {
            connections,
            duration: Some(duration),
            num_conns: None,
        };
        LoadConfig::base(server, port, mode, 0)
    }

    /// The hard cap this run will use.
    pub fn effective_max_time(&self) -> Duration {
        if let Some(m) = self.max_time {
            return m;
        }
        let wait = self
            .timeout
            .map_or(30.0, |t| (t + self.think_timeout).as_secs_f64());
        let expected = match &self.mode {
            LoopMode::Open {
                rate, num_conns, ..
            } if *rate > 0.0 => *num_conns as f64 / rate,
            LoopMode::Closed {
                duration: Some(d), ..
            } => return *d + Duration::from_secs(5),
            _ => 300.0,
        };
        Duration::from_secs_f64((expected + (2.0 * wait).max(10.0)).min(86_400.0))
    }

    /// Checks every field's range; the messages name the command-line flags.
    ///
    /// # Errors
    /// `InvalidInput` with what is wrong.
    pub fn validate(&self) -> io::Result<()> {
        let bad = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
        if self.threads == 0 || self.threads > 1024 {
            return bad("--threads must be 1..=1024");
        }
        if self.burst_length == 0 {
            return bad("--burst-length must be at least 1");
        }
        if self.method.is_empty() || self.method.bytes().any(|b| !b.is_ascii_alphabetic()) {
            return bad("--method must be a token of letters");
        }
        if self.uri.is_empty() || self.uri.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return bad("--uri must be non-empty without spaces or control characters");
        }
        match &self.mode {
            LoopMode::Open { rate, .. }
                if !(rate.is_finite() && *rate > 0.0 && *rate <= 10_000_000.0) =>
            {
                bad("--rate must be in (0, 1e7]")
            }
            LoopMode::Closed { connections, .. } if *connections == 0 => {
                bad("--connections must be at least 1")
            }
            _ => Ok(()),
        }
    }
}

/// Durations go to JSON as seconds.
fn secs_f64<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Resolves `server:port` to its first address.
pub(crate) fn resolve(server: &str, port: u16) -> io::Result<SocketAddr> {
    (server, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{server} has no address")))
}

/// Slow-client behaviour of a held connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeadStyle {
    /// Send nothing (deadconn; SEEDS 000's cold client).
    Idle,
    /// Send the start of a request and never finish it.
    Partial,
    /// Send a never-ending request one byte per interval.
    Trickle(Duration),
}

/// Everything one dead-connection run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct DeadConfig {
    /// Server host name or address.
    pub server: String,
    /// Server port.
    pub port: u16,
    /// Connections to hold.
    pub connections: usize,
    /// Local address to bind (`None`: the kernel's choice).
    pub source: Option<IpAddr>,
    /// What the held connections send.
    pub style: DeadStyle,
    /// How long to hold them.
    pub duration: Duration,
    /// Connection attempts in flight at once (to avoid overflowing the listen queue).
    pub connect_batch: usize,
    /// Print a status line this often (to stderr); `None`: never.
    pub report_every: Option<Duration>,
}

impl DeadConfig {
    /// Hold `connections` idle connections to `server:port` from the kernel's choice of
    /// address for `duration`.
    pub fn new(server: &str, port: u16, connections: usize, duration: Duration) -> DeadConfig {
        DeadConfig {
            server: server.to_string(),
            port,
            connections,
            source: None,
            style: DeadStyle::Idle,
            duration,
            connect_batch: 256,
            report_every: None,
        }
    }
}
