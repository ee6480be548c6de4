//! `evq torture`: every backend under churn, an exactly-once ledger per case.

use evq::BackendKind;
use evq_torture::{cases, run_case, run_isolated, shrink, Case, CaseReport, Size};
use std::io;

/// Flags of `evq torture`.
#[derive(clap::Args, Debug)]
pub struct TortureArgs {
    /// Every backend × {1, 2, 4} threads and the forced overflows in under a minute
    /// (1.5 s a case), instead of ≥ 10^6 events a case (10^5 under overflow).
    #[arg(long)]
    quick: bool,
    /// Only these backends (repeatable or comma-separated; default: every one this
    /// kernel has).
    #[arg(long, value_delimiter = ',')]
    backend: Vec<String>,
    /// Consumer thread counts (each thread has its own queue).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    threads: Vec<usize>,
    /// Seed of every random choice (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Print one JSON record per case on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Do not look for a smaller failing run after a failure.
    #[arg(long)]
    no_shrink: bool,
    /// Internal: run one case in this process and print its report (JSON).
    #[arg(long, hide = true)]
    run_case: Option<String>,
}

pub fn run(args: &TortureArgs) -> io::Result<bool> {
    if let Some(json) = &args.run_case {
        let case: Case = serde_json::from_str(json)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("--run-case: {e}")))?;
        let report = run_case(&case);
        println!(
            "{}",
            serde_json::to_string(&report).map_err(io::Error::other)?
        );
        return Ok(report.passed());
    }
    if args.threads.is_empty() || args.threads.iter().any(|&t| t == 0 || t > 64) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--threads takes counts from 1 to 64",
        ));
    }
    let only = args
        .backend
        .iter()
        .map(|b| b.parse::<BackendKind>())
        .collect::<io::Result<Vec<_>>>()?;
    for b in &only {
        b.available()
            .map_err(|e| io::Error::new(e.kind(), format!("backend {b}: {e}")))?;
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let size = if args.quick {
        Size::Quick
    } else {
        Size::Default
    };
    let exe = std::env::current_exe()?;
    let plan = cases(size, &only, &args.threads, seed);
    eprintln!(
        "evq torture: {} cases, seed {seed} (rerun with --seed {seed})",
        plan.len()
    );
    let mut reports = Vec::new();
    for case in &plan {
        let report = run_isolated(&exe, &["torture"], case);
        eprintln!("  {}", one_line(&report));
        if !report.passed() {
            describe_failure(&report);
            if !args.no_shrink {
                eprintln!(
                    "    looking for a smaller run with seed {} that fails…",
                    case.seed
                );
                match shrink(&exe, &["torture"], case) {
                    Some((small, r)) => eprintln!(
                        "    still fails at {} events ({:.1} s): {}",
                        small.target_events,
                        r.seconds,
                        one_line(&r)
                    ),
                    None => eprintln!("    no smaller run failed again (timing-dependent)"),
                }
            }
        }
        reports.push(report);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).map_err(io::Error::other)?
        );
    } else {
        print_table(&reports);
    }
    Ok(reports.iter().all(CaseReport::passed))
}

fn one_line(r: &CaseReport) -> String {
    format!(
        "{:<16} {} thread{} {:<9} {:>10} events {:>6.1} s  lost {} dup {} stale {} misdelivered {} late {}  overflows {}  {}",
        r.backend,
        r.threads,
        if r.threads == 1 { " " } else { "s" },
        if r.overflow { "overflow" } else { "" },
        r.events,
        r.seconds,
        r.all_lost(),
        r.all_duplicated(),
        r.stale,
        r.misdelivered,
        r.late,
        r.overflows_recovered,
        if r.passed() { "ok" } else { "FAILED" }
    )
}

fn describe_failure(r: &CaseReport) {
    eprintln!("    seed {}", r.seed);
    for e in &r.errors {
        eprintln!("    error: {e}");
    }
    for f in &r.failures {
        eprintln!(
            "    {} (consumer {}, {:.3} ms, fd {}, token {:#x}): {}",
            f.kind, f.consumer, f.at_ms, f.fd, f.token, f.detail
        );
        for line in &f.trace {
            eprintln!("      {line}");
        }
    }
}

fn print_table(reports: &[CaseReport]) {
    println!(
        "{:<16} {:>7} {:>8} {:>11} {:>11} {:>5} {:>4} {:>5} {:>5} {:>5} {:>9} {:>9} {:>7} {:>7}",
        "backend",
        "threads",
        "overflow",
        "events",
        "records",
        "lost",
        "dup",
        "stale",
        "misd.",
        "late",
        "max delay",
        "overflows",
        "conns",
        "verdict"
    );
    for r in reports {
        println!(
            "{:<16} {:>7} {:>8} {:>11} {:>11} {:>5} {:>4} {:>5} {:>5} {:>5} {:>6.1} ms {:>9} {:>7} {:>7}",
            r.backend,
            r.threads,
            if r.overflow { "forced" } else { "-" },
            r.events,
            r.records,
            r.all_lost(),
            r.all_duplicated(),
            r.stale,
            r.misdelivered,
            r.late,
            r.max_delay_ms,
            r.overflows_recovered,
            r.connections,
            if r.passed() { "ok" } else { "FAILED" }
        );
    }
    let events: u64 = reports.iter().map(|r| r.events).sum();
    let failed = reports.iter().filter(|r| !r.passed()).count();
    println!(
        "{} cases, {events} events: {} passed, {failed} failed",
        reports.len(),
        reports.len() - failed
    );
}
