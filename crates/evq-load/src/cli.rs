//! The command line of `evq load`, `evq dead` and `evq wan` (feature `cli`): clap
//! flags named as httperf and deadconn name them, so the seeds' command lines
//! carry over, the configs they build, and the three commands. Library users
//! leave the feature off and build [`LoadConfig`], [`DeadConfig`] and
//! [`WanConfig`] themselves; their builds carry no clap.

use crate::config::{DeadConfig, DeadStyle, Distribution, IoModel, LoadConfig, LoopMode};
use crate::{run_dead, run_load, run_wan, LinkSpec, WanConfig};
use clap::Args;
use std::io;
use std::net::IpAddr;
use std::time::Duration;

fn secs(what: &str, v: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(v)
        .map_err(|_| format!("{what} must be a non-negative number of seconds"))
}

fn ms(what: &str, v: f64) -> io::Result<Duration> {
    Duration::try_from_secs_f64(v / 1000.0)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} must be >= 0")))
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
    /// Seconds within which a refusal (connection refused or reset, 503, 429)
    /// counts as fast in the outcomes.
    #[arg(long = "fast-refusal", default_value_t = 0.01)]
    pub fast_refusal: f64,
    /// Seconds of warm-up: requests due before then are left out of the
    /// steady-state outcomes (reported besides the whole run's).
    #[arg(long = "warm-up")]
    pub warm_up: Option<f64>,
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
    /// Worker threads, one event queue (or completion ring) each.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// I/O model: readiness events (an evq queue, then send/recv system calls) or
    /// io_uring completions (the kernel sends and receives; Linux 6.0).
    #[arg(long, value_enum, default_value_t = IoModel::Readiness)]
    pub io: IoModel,
    /// With `--io completion`: how long, in microseconds, a wait may hold a
    /// reply back to gather others with it, when at least 8 are awaited
    /// (0 = every reply at once; needs Linux 6.12, ignored before). A reply
    /// is timed when its batch returns, so this bounds what gathering adds
    /// to a latency.
    #[arg(long = "gather-us", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub gather_us: u32,
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
        cfg.fast_refusal = secs("--fast-refusal", self.fast_refusal)?;
        cfg.warm_up = self.warm_up.map(|t| secs("--warm-up", t)).transpose()?;
        cfg.hog = self.hog;
        cfg.source = self.source;
        cfg.threads = self.threads;
        cfg.io = self.io;
        cfg.gather = Duration::from_micros(u64::from(self.gather_us));
        cfg.max_time = self.max_time.map(|t| secs("--max-time", t)).transpose()?;
        cfg.progress = !self.no_progress && !self.json;
        cfg.seed = self.seed;
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
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

/// `evq wan` arguments: namespaces, relay impairment, and an optional command to run
/// in every namespace.
#[derive(Args, Debug, Clone)]
pub struct WanArgs {
    /// Client namespaces to create.
    #[arg(long, default_value_t = 1)]
    pub namespaces: usize,
    /// The real server (as seen from the host).
    #[arg(long, default_value = "127.0.0.1")]
    pub server: String,
    /// The real server's port.
    #[arg(long, default_value_t = 80)]
    pub port: u16,
    /// Port each namespace's relay listens on (at its host address).
    #[arg(long = "relay-port", default_value_t = 8000)]
    pub relay_port: u16,
    /// One-way delay in each direction, milliseconds.
    #[arg(long = "delay-ms", default_value_t = 0.0)]
    pub delay_ms: f64,
    /// Client → server delay, overriding --delay-ms.
    #[arg(long = "up-delay-ms")]
    pub up_delay_ms: Option<f64>,
    /// Server → client delay, overriding --delay-ms.
    #[arg(long = "down-delay-ms")]
    pub down_delay_ms: Option<f64>,
    /// Extra random delay per chunk, uniform in [0, jitter], milliseconds.
    #[arg(long = "jitter-ms", default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Bandwidth cap per direction and connection, kilobits per second.
    #[arg(long = "bandwidth-kbps")]
    pub bandwidth_kbps: Option<f64>,
    /// Hard cap in seconds: commands still running then are killed; without a
    /// command, how long to keep the namespaces up.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Command to run in every namespace; `{host}` and `{port}` become that
    /// namespace's relay address, `{ns}` its name, `{i}` its index.
    #[arg(last = true)]
    pub command: Vec<String>,
}

impl WanArgs {
    /// The run these arguments ask for.
    ///
    /// # Errors
    /// A negative or non-finite delay, jitter or duration.
    pub fn to_config(&self) -> io::Result<WanConfig> {
        let bandwidth = self
            .bandwidth_kbps
            .map(|k| (k * 1000.0 / 8.0).max(1.0) as u64);
        let to_server = LinkSpec {
            delay: ms("--up-delay-ms", self.up_delay_ms.unwrap_or(self.delay_ms))?,
            jitter: ms("--jitter-ms", self.jitter_ms)?,
            bandwidth,
        };
        let to_client = LinkSpec {
            delay: ms(
                "--down-delay-ms",
                self.down_delay_ms.unwrap_or(self.delay_ms),
            )?,
            ..to_server
        };
        let duration = Duration::try_from_secs_f64(self.duration)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--duration must be >= 0"))?;
        Ok(WanConfig {
            namespaces: self.namespaces,
            server: self.server.clone(),
            port: self.port,
            relay_port: self.relay_port,
            to_server,
            to_client,
            duration,
            command: self.command.clone(),
        })
    }
}

fn print_json<T: serde::Serialize>(v: &T) -> io::Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(io::Error::other)?;
    println!("{s}");
    Ok(())
}

/// `evq wan`: runs [`run_wan`] (SIGINT/SIGTERM end it early and still clean up) and
/// prints the report (`--json`) or a line per namespace.
///
/// # Errors
/// [`run_wan`]'s errors.
pub fn wan_command(args: &WanArgs) -> io::Result<()> {
    let cfg = args.to_config()?;
    evq_os::stop_on_signals()?;
    let report = run_wan(&cfg)?;
    if args.json {
        return print_json(&report);
    }
    for (i, ns) in report.namespaces.iter().enumerate() {
        let r = report.relays.get(i).cloned().unwrap_or_default();
        let code = report.exit_codes.get(i).copied().flatten();
        println!(
            "{}: accepted {} upstream-failures {} bytes up {} down {} exit {}",
            ns.name,
            r.accepted,
            r.upstream_failures,
            r.bytes_to_server,
            r.bytes_to_client,
            code.map_or("-".to_string(), |c| c.to_string())
        );
    }
    Ok(())
}

/// `evq load`: runs [`run_load`] with SIGINT/SIGTERM ending the run early (still
/// reporting), and prints the summary or (`--json`) the JSON report to stdout.
///
/// # Errors
/// Bad arguments (`InvalidInput`) or [`run_load`]'s errors.
pub fn load_command(args: &LoadArgs) -> io::Result<()> {
    let cfg = args
        .to_config()
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    evq_os::stop_on_signals()?;
    let report = run_load(&cfg)?;
    if args.json {
        print_json(&report)
    } else {
        print!("{}", report.summary());
        Ok(())
    }
}

/// `evq dead`: runs [`run_dead`] with SIGINT/SIGTERM ending it early, status lines on
/// stderr, and the summary or (`--json`) the JSON report on stdout.
///
/// # Errors
/// Bad arguments (`InvalidInput`) or [`run_dead`]'s errors.
pub fn dead_command(args: &DeadArgs) -> io::Result<()> {
    let cfg = args
        .to_config()
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    evq_os::stop_on_signals()?;
    let report = run_dead(&cfg)?;
    if args.json {
        print_json(&report)
    } else {
        println!("{}", report.summary());
        Ok(())
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
        assert_eq!(
            load("--connections 2").expect("parses").io,
            IoModel::Readiness
        );
        let cfg = load("--io completion --connections 2 --threads 2").expect("parses");
        assert_eq!((cfg.io, cfg.threads), (IoModel::Completion, 2));
        assert!(load("--io completion --rate 10 --duration 5").is_err());
        assert!(load("--io epoll").is_err());
        assert_eq!(
            load("--io completion --connections 2 --gather-us 0")
                .expect("parses")
                .gather,
            Duration::ZERO
        );
        assert_eq!(
            load("--connections 2").expect("parses").gather,
            Duration::from_micros(50)
        );
        assert!(load("--connections 2 --gather-us 10001").is_err());
        assert!(load("--connections 2 --gather-us -1").is_err());
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
