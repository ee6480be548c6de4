//! Run configurations ([`LoadConfig`], [`DeadConfig`]) and the command-line arguments
//! that build them ([`LoadArgs`], [`DeadArgs`]), named as httperf and deadconn name
//! them so the seeds' command lines carry over.

use clap::{Args, ValueEnum};
use serde::Serialize;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// How connection start times are spaced in open loop (httperf `--period`'s `d`/`e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Evenly spaced: one every `1/rate` seconds.
    #[default]
    Fixed,
    /// Exponential inter-arrival times with mean `1/rate` (a Poisson process).
    Poisson,
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
/// [`LoadConfig::closed`] and adjust the public fields, or from [`LoadArgs`].
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
    /// Bind local ports explicitly over 1024–65535 with `SO_REUSEADDR` (httperf
    /// `--hog`) instead of letting `connect` pick from the ephemeral range.
    pub hog: bool,
    /// Local address to bind.
    pub source: Option<IpAddr>,
    /// Worker threads, one evq queue each.
    pub threads: usize,
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
    fn base(server: &str, port: u16, mode: LoopMode, num_calls: u32) -> LoadConfig {
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
            hog: false,
            source: None,
            threads: 1,
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

    pub(crate) fn validate(&self) -> io::Result<()> {
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

fn secs(what: &str, v: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| format!("{what} must be a non-negative number of seconds"))
}

/// `evq load` arguments: httperf's names (`--server --port --uri --rate --num-conns
/// --num-calls --timeout --think-timeout --burst-length --hog`) plus wrk's closed
/// loop (`--connections --duration`).
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Server host name or address.
    #[arg(long, default_value = "localhost")]
    pub server: String,
    /// Server port.
    #[arg(long, default_value_t = 80)]
    pub port: u16,
    /// Request target.
    #[arg(long, default_value = "/")]
    pub uri: String,
    /// Request method.
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(long = "add-header")]
    pub add_header: Vec<String>,
    /// HTTP version of the requests: 1.1 or 1.0.
    #[arg(long = "http-version", default_value = "1.1", value_parser = ["1.0", "1.1"])]
    pub http_version: String,
    /// Open loop: connections started per second, finished or not (httperf).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Spacing of open-loop start times.
    #[arg(long, value_enum, default_value_t = Distribution::Fixed)]
    pub dist: Distribution,
    /// Connections to start in all (open loop; a cap in closed loop).
    #[arg(long = "num-conns")]
    pub num_conns: Option<u64>,
    /// Calls per connection (default 1 in open loop, unlimited in closed loop; 0 =
    /// unlimited).
    #[arg(long = "num-calls")]
    pub num_calls: Option<u32>,
    /// Seconds to wait for any progress before a connection counts as client-timo.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Seconds added to --timeout while waiting for a reply to start.
    #[arg(long = "think-timeout", default_value_t = 0.0)]
    pub think_timeout: f64,
    /// Calls pipelined back to back before waiting for their replies.
    #[arg(long = "burst-length", default_value_t = 1)]
    pub burst_length: u32,
    /// Use the whole port range 1024-65535, binding ports explicitly.
    #[arg(long)]
    pub hog: bool,
    /// Local address to bind.
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Closed loop: connections kept busy (wrk -c).
    #[arg(long)]
    pub connections: Option<usize>,
    /// Closed loop: seconds to run (wrk -d).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Worker threads, one event queue each.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Hard wall-clock cap in seconds (default: expected length plus a margin).
    #[arg(long = "max-time")]
    pub max_time: Option<f64>,
    /// Seed of the Poisson schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON instead of the httperf-style summary.
    #[arg(long)]
    pub json: bool,
    /// No progress line.
    #[arg(long = "no-progress")]
    pub no_progress: bool,
}

impl LoadArgs {
    /// The run these arguments ask for. Without `--rate`, `--connections` or
    /// `--duration`, it is httperf's default: `--num-conns` connections one after
    /// another (a closed loop of one).
    ///
    /// # Errors
    /// A message for contradictory or out-of-range values.
    pub fn to_config(&self) -> Result<LoadConfig, String> {
        let closed = self.connections.is_some() || self.duration.is_some();
        if closed && self.rate.is_some() {
            return Err(
                "--rate (open loop) cannot be combined with --connections/--duration (closed loop)"
                    .into(),
            );
        }
        let duration = self.duration.map(|d| secs("--duration", d)).transpose()?;
        let mode = match self.rate {
            Some(rate) if !closed => LoopMode::Open {
                rate,
                dist: self.dist,
                num_conns: self.num_conns.unwrap_or(1),
            },
            _ if closed => LoopMode::Closed {
                connections: self.connections.unwrap_or(1),
                duration,
                num_conns: self.num_conns,
            },
            _ => LoopMode::Closed {
                connections: 1,
                duration: None,
                num_conns: Some(self.num_conns.unwrap_or(1)),
            },
        };
        let default_calls = if closed { 0 } else { 1 };
        let mut cfg = LoadConfig::base(
            &self.server,
            self.port,
            mode,
            self.num_calls.unwrap_or(default_calls),
        );
        cfg.uri = self.uri.clone();
        cfg.method = self.method.clone();
        cfg.headers = self.add_header.clone();
        cfg.http10 = self.http_version == "1.0";
        cfg.burst_length = self.burst_length;
        cfg.timeout = self.timeout.map(|t| secs("--timeout", t)).transpose()?;
        cfg.think_timeout = secs("--think-timeout", self.think_timeout)?;
        cfg.hog = self.hog;
        cfg.source = self.source;
        cfg.threads = self.threads;
        cfg.max_time = self.max_time.map(|t| secs("--max-time", t)).transpose()?;
        cfg.progress = !self.no_progress && !self.json;
        cfg.seed = self.seed;
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
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

/// `evq dead` arguments (deadconn: hold idle connections, reopen what the server
/// closes).
#[derive(Args, Debug, Clone)]
pub struct DeadArgs {
    /// Server host name or address.
    #[arg(long, default_value = "127.0.0.1")]
    pub server: String,
    /// Server port.
    #[arg(long, default_value_t = 80)]
    pub port: u16,
    /// Connections to hold.
    #[arg(long, short = 'n', default_value_t = 1000)]
    pub connections: usize,
    /// Local address to bind. Default: 127.0.0.2 when the server is on loopback (so
    /// the load client's ephemeral ports on 127.0.0.1 stay free), else the kernel's
    /// choice. 0.0.0.0 always means the kernel's choice.
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Send a partial request on each connection and never finish it.
    #[arg(long, conflicts_with = "trickle")]
    pub partial: bool,
    /// Send a never-ending request, one byte every SECS seconds.
    #[arg(long)]
    pub trickle: Option<f64>,
    /// Seconds to hold the connections.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Connection attempts in flight at once.
    #[arg(long = "connect-batch", default_value_t = 256)]
    pub connect_batch: usize,
    /// Seconds between status lines on stderr (0: none).
    #[arg(long = "report-every", default_value_t = 5.0)]
    pub report_every: f64,
    /// Print the final report as JSON.
    #[arg(long)]
    pub json: bool,
}

impl DeadArgs {
    /// The run these arguments ask for.
    ///
    /// # Errors
    /// A message for out-of-range values.
    pub fn to_config(&self) -> Result<DeadConfig, String> {
        let style = match (self.partial, self.trickle) {
            (true, _) => DeadStyle::Partial,
            (false, Some(t)) => {
                let d = secs("--trickle", t)?;
                if d < Duration::from_millis(1) {
                    return Err("--trickle must be at least 0.001 s".into());
                }
                DeadStyle::Trickle(d)
            }
            (false, None) => DeadStyle::Idle,
        };
        let source = match self.source {
            Some(ip) if ip.is_unspecified() => None,
            Some(ip) => Some(ip),
            None => {
                let loopback = self.server == "localhost"
                    || self
                        .server
                        .parse::<IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback() && ip.is_ipv4());
                loopback.then(|| IpAddr::from([127, 0, 0, 2]))
            }
        };
        let every = secs("--report-every", self.report_every)?;
        Ok(DeadConfig {
            server: self.server.clone(),
            port: self.port,
            connections: self.connections,
            source,
            style,
            duration: secs("--duration", self.duration)?,
            connect_batch: self.connect_batch.max(1),
            report_every: if every.is_zero() { None } else { Some(every) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct LoadCli {
        #[command(flatten)]
        args: LoadArgs,
    }

    #[derive(Parser)]
    struct DeadCli {
        #[command(flatten)]
        args: DeadArgs,
    }

    fn load(line: &str) -> Result<LoadConfig, String> {
        let argv = std::iter::once("load").chain(line.split_whitespace());
        LoadCli::try_parse_from(argv)
            .map_err(|e| e.to_string())?
            .args
            .to_config()
    }

    #[test]
    fn seed_002_httperf_line_translates() {
        let cfg =
            load("--think-timeout 5 --timeout 5 --num-calls 2500 --num-conns 100 --hog --rate 100")
                .expect("parses");
        assert_eq!(
            cfg.mode,
            LoopMode::Open {
                rate: 100.0,
                dist: Distribution::Fixed,
                num_conns: 100
            }
        );
        assert_eq!(cfg.num_calls, 2500);
        assert_eq!(cfg.timeout, Some(Duration::from_secs(5)));
        assert_eq!(cfg.think_timeout, Duration::from_secs(5));
        assert!(cfg.hog);
        // Burst test: --num-calls 2 --num-conns 27000 --hog --rate 5000.
        let cfg = load("--num-calls 2 --num-conns 27000 --hog --rate 5000").expect("parses");
        assert_eq!(cfg.num_calls, 2);
        assert!(cfg.effective_max_time() >= Duration::from_secs_f64(27000.0 / 5000.0));
    }

    #[test]
    fn closed_and_sequential_modes() {
        let cfg = load("--connections 64 --duration 5").expect("parses");
        assert_eq!(
            cfg.mode,
            LoopMode::Closed {
                connections: 64,
                duration: Some(Duration::from_secs(5)),
                num_conns: None
            }
        );
        assert_eq!(cfg.num_calls, 0);
        let cfg = load("--num-conns 10").expect("parses");
        assert_eq!(
            cfg.mode,
            LoopMode::Closed {
                connections: 1,
                duration: None,
                num_conns: Some(10)
            }
        );
        assert_eq!(cfg.num_calls, 1);
        assert!(load("--rate 10 --connections 5").is_err());
        assert!(load("--rate 0").is_err());
        assert!(load("--rate nan").is_err());
        assert!(load("--timeout -1").is_err());
        assert!(load("--burst-length 0").is_err());
        assert!(load("--uri /a\u{1}b").is_err());
    }

    #[test]
    fn dead_source_defaults_to_127_0_0_2_on_loopback_only() {
        let dead = |line: &str| {
            let argv = std::iter::once("dead").chain(line.split_whitespace());
            DeadCli::try_parse_from(argv)
                .expect("parses")
                .args
                .to_config()
                .expect("valid")
        };
        assert_eq!(
            dead("--server 127.0.0.1").source,
            Some(IpAddr::from([127, 0, 0, 2]))
        );
        assert_eq!(dead("--server 10.1.2.3").source, None);
        assert_eq!(dead("--server 127.0.0.1 --source 0.0.0.0").source, None);
        assert_eq!(
            dead("--trickle 2").style,
            DeadStyle::Trickle(Duration::from_secs(2))
        );
        assert_eq!(dead("--partial").style, DeadStyle::Partial);
    }
}
