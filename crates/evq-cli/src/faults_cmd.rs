//! `evq faults` and `evq soak`: faults injected into `evq serve`, `evq proxy`
//! and `evq load` with live clients measured beside them, and the long mixed
//! soak (issue 19). Both run this same binary's `serve`, `proxy` and `load` as
//! children; `evq faults --origin ADDR` is the scripted origin they use.

use evq_faults::soak::{self, SoakConfig, SoakIo};
use evq_faults::{select, table, Size, SuiteConfig};
use evq_http::IoModel;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Flags of `evq faults`.
#[derive(clap::Args, Debug)]
pub struct FaultsArgs {
    /// The short form (a few seconds a row, as the tests run it) instead of the
    /// issue's sizes (10,000 tricklers, 4 s windows, three fault rounds).
    #[arg(long)]
    quick: bool,
    /// Only the faults whose id (`serve/trickle`, `proxy/origin-stall`,
    /// `load/origin-reset`) contains one of these (repeatable or
    /// comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// List the faults and exit.
    #[arg(long)]
    list: bool,
    /// `--backend` for serve and proxy (their default otherwise).
    #[arg(long)]
    backend: Option<String>,
    /// Print the rows as JSON (one array) instead of the table.
    #[arg(long)]
    json: bool,
    /// Internal: run the scripted origin on ADDR (the suite starts it).
    #[arg(long, hide = true)]
    origin: Option<SocketAddr>,
}

/// Flags of `evq soak`.
#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    /// How long the mixed load runs, seconds (10 minutes by default).
    #[arg(long, default_value_t = 600.0)]
    seconds: f64,
    /// How often descriptors and memory are read, seconds.
    #[arg(long, default_value_t = 5.0)]
    sample: f64,
    /// `--backend` for serve and proxy.
    #[arg(long)]
    backend: Option<String>,
    /// Soak the readiness loops, or serve, proxy and load on io_uring
    /// completions (each with `--io completion`).
    #[arg(long, value_enum, default_value_t = IoModel::Readiness)]
    io: IoModel,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn this_binary() -> io::Result<std::path::PathBuf> {
    std::env::current_exe()
}

/// Runs `evq faults`; whether every row passed.
pub fn run_faults(args: &FaultsArgs) -> io::Result<bool> {
    if let Some(addr) = args.origin {
        evq_faults::origin::run(addr)?;
        return Ok(true);
    }
    let chosen = select(&args.only);
    if chosen.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--only {:?} names no fault; `evq faults --list` lists them",
                args.only
            ),
        ));
    }
    if args.list {
        for f in &chosen {
            println!("{}", f.id());
        }
        return Ok(true);
    }
    let cfg = SuiteConfig {
        evq: this_binary()?,
        backend: args.backend.clone(),
        size: if args.quick { Size::Short } else { Size::Long },
    };
    let mut rows = Vec::new();
    for f in &chosen {
        eprintln!("evq faults: {} …", f.id());
        let row = f.run(&cfg);
        eprintln!(
            "evq faults: {} {} ({:.0} s)",
            f.id(),
            if row.passed() { "pass" } else { "FAIL" },
            row.seconds
        );
        rows.push(row);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(io::Error::other)?
        );
    } else {
        print!("{}", table(&rows));
    }
    Ok(rows.iter().all(|r| r.passed()))
}

/// Runs `evq soak`; whether it passed.
pub fn run_soak(args: &SoakArgs) -> io::Result<bool> {
    if !(args.seconds.is_finite() && (5.0..=86_400.0).contains(&args.seconds)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--seconds takes 5 to 86400",
        ));
    }
    if !(args.sample.is_finite() && (0.1..=60.0).contains(&args.sample)) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--sample takes 0.1 to 60 seconds",
        ));
    }
    let cfg = SoakConfig {
        suite: SuiteConfig {
            evq: this_binary()?,
            backend: args.backend.clone(),
            size: Size::Long,
        },
        io: match args.io {
            IoModel::Readiness => SoakIo::Readiness,
            IoModel::Completion => SoakIo::Completion,
        },
        duration: Duration::from_secs_f64(args.seconds),
        sample_every: Duration::from_secs_f64(args.sample),
    };
    // Refused before anything starts, as the other flags are.
    cfg.check()?;
    let report = soak::run(&cfg);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(io::Error::other)?
        );
    } else {
        print!("{}", report.describe());
    }
    Ok(report.passed())
}
