//! # evq-load — load and dead connections for evq experiments
//!
//! The client side of the sources' rigs, built on evq itself:
//!
//! - [`run_load`]: httperf's open loop (connections started on a schedule, finished
//!   or not; `--rate --num-conns --num-calls --burst-length --timeout --think-timeout
//!   --hog`) and wrk's closed loop (`--connections --duration`), over many threads with
//!   one evq queue each, latency measured from each request's intended start and kept
//!   in an HdrHistogram, reported as httperf's summary ([`LoadReport::summary`]) or
//!   JSON.
//! - [`run_dead`]: deadconn (SEEDS 002) and the cold client of SEEDS 000 — hold N idle
//!   (or partial, or trickling) connections and reopen whatever the server closes.
//! - [`run_wan`]: client network namespaces ([`NetnsLab`]) behind user-space delay
//!   relays ([`Relay`]: per-direction delay, jitter, bandwidth), since this kernel has
//!   no `tc netem`.
//!
//! The `evq` binary mounts [`LoadArgs`] and [`DeadArgs`] as `evq load` / `evq dead`
//! and calls [`load_command`] / [`dead_command`].
//!
//! ```no_run
//! use evq_load::{run_load, LoadConfig};
//! let mut cfg = LoadConfig::open("127.0.0.1", 8080, 200.0, 400);
//! cfg.num_calls = 2;
//! let report = run_load(&cfg)?;
//! println!("{}", report.summary());
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(missing_docs)]

mod config;
mod dead;
mod load;
mod relay;
mod request;
mod schedule;
mod stats;
mod wan;

pub use config::{DeadArgs, DeadConfig, DeadStyle, Distribution, LoadArgs, LoadConfig, LoopMode};
pub use dead::{run_dead, DeadReport};
pub use evq_wire::{Fed, FramingError, HeadParser, Reply, ResponseReader};
pub use load::run_load;
pub use relay::{LinkSpec, Relay, RelayConfig, RelayReport, QUEUE_LIMIT};
pub use stats::{ErrorCounts, ErrorKind, LoadReport, Percentiles, RateSamples, StatusClasses};
pub use wan::{run_wan, Namespace, NetnsLab, WanArgs, WanReport};

use std::io;

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
    evq_os::stop_on_signals()?;
    let report = run_wan(args)?;
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
