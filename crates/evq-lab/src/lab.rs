//! `evq lab`: runs the scenarios, shows progress, writes the report.

use crate::machine;
use crate::record::{ClaimCheck, ExperimentRecord, LabResults, Verdict};
use indicatif::{ProgressBar, ProgressStyle};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Flags of `evq lab`.
#[derive(clap::Args, Debug, Clone)]
pub struct LabArgs {
    /// Smaller sweeps: the whole lab in a few minutes.
    #[arg(long)]
    pub quick: bool,
    /// Run only these scenarios (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Tiny sweeps that only prove every scenario runs end to end and the report
    /// is well formed (what CI runs); the numbers mean nothing.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Where the report goes.
    #[arg(long, default_value = "lab-report")]
    pub out: PathBuf,
    /// The `evq` program the lab starts `evq serve`, `evq dead` and `evq load`
    /// from (default: this program if it is `evq`, else one built beside it in
    /// target/, else `evq` on PATH).
    #[arg(long, value_name = "PATH")]
    pub evq_bin: Option<PathBuf>,
}

/// What a running scenario is given.
pub struct Scenario {
    /// `--quick`.
    pub quick: bool,
    /// `--smoke`: the smallest sweep that exercises the code.
    pub smoke: bool,
    /// The report directory (plots are written here).
    pub out_dir: PathBuf,
    /// The programs the scenario may start.
    pub tools: crate::tools::Tools,
    bar: ProgressBar,
}

impl Scenario {
    /// Shows what the scenario is doing now.
    pub fn progress(&self, line: &str) {
        self.bar.set_message(line.to_string());
    }
}

type ScenarioFn = fn(&Scenario) -> io::Result<ExperimentRecord>;

/// How a scenario runs while the lab moves to plan → measure → judge.
#[derive(Clone, Copy)]
pub enum Run {
    /// Measures, judges and plots in one function.
    Legacy(ScenarioFn),
    /// Plan, measure, judge.
    Shaped(&'static dyn crate::experiment::Scenario),
}

impl Run {
    fn run(self, scenario: &Scenario) -> io::Result<ExperimentRecord> {
        let f = match self {
            Run::Legacy(f) => f,
            Run::Shaped(s) => return shaped(s, scenario),
        };
        f(scenario)
    }
}

fn shaped(
    s: &dyn crate::experiment::Scenario,
    scenario: &Scenario,
) -> io::Result<ExperimentRecord> {
    use crate::experiment::{Ctx, RunSize};
    let size = if scenario.smoke {
        RunSize::Smoke
    } else if scenario.quick {
        RunSize::Quick
    } else {
        RunSize::Full
    };
    let bar = scenario.bar.clone();
    let progress = move |line: &str| bar.set_message(line.to_string());
    let ctx = Ctx::new(&scenario.out_dir, &scenario.tools, &progress);
    let raw = s.measure_raw(size, &ctx)?;
    // Judge what a file would give back, as a re-judging run will.
    let text = serde_json::to_string(&raw).map_err(io::Error::other)?;
    let raw: serde_json::Value = serde_json::from_str(&text).map_err(io::Error::other)?;
    let judged = s.judge_raw(&raw).map_err(io::Error::other)?;
    let mut record = ExperimentRecord::new(s.name(), s.seed(), judged.checks);
    record.notes = judged.notes;
    record.commands = judged.commands;
    record.plots = judged
        .figures
        .iter()
        .map(|f| crate::plot::render(&f.chart, &scenario.out_dir, &f.stem))
        .collect();
    record.data = raw;
    Ok(record)
}

/// A scenario the lab can run, or one it knows of but this build cannot run yet.
pub struct ScenarioEntry {
    /// `--only` name.
    pub name: &'static str,
    /// The source.
    pub seed: &'static str,
    /// The claim it checks.
    pub claim: &'static str,
    /// How to run it, or `Err(why not)`.
    pub run: Result<Run, &'static str>,
}

/// Every scenario, in report order.
pub const SCENARIOS: &[ScenarioEntry] = &[
    ScenarioEntry {
        name: "pipe-scaling",
        seed: "004 Solaris /dev/poll (Sun, 2002): devpollperf",
        claim: "poll's cost grows with descriptors; /dev/poll (epoll) stays flat",
        run: Ok(Run::Shaped(&crate::experiments::pipe_scaling::PipeScaling)),
    },
    ScenarioEntry {
        name: "bench-c",
        seed: "002 Libenzi /dev/epoll: pipetest; libevent's bench.c",
        claim: "epoll-based loops stay flat with idle pipes; evq vs libev, libevent, libuv, mio, polling",
        run: Ok(Run::Shaped(&crate::experiments::bench_c::BenchC)),
    },
    ScenarioEntry {
        name: "cold-connections",
        seed: "000 Banga, Mogul, Druschel (USENIX 1999): Fig 8, 9, Table 2; 002 dead connections",
        claim: "throughput with the explicit API is flat as cold connections grow; select falls",
        run: Ok(Run::Shaped(&crate::experiments::cold_connections::ColdConnections)),
    },
    ScenarioEntry {
        name: "signals",
        seed: "001 Lever, Tweedie (ALS 2000): sigtimedwait4 and load limiting",
        claim: "bulk pickup gains little; load limiting keeps overloaded throughput from collapsing",
        run: Ok(Run::Legacy(crate::experiments::signals::run)),
    },
    ScenarioEntry {
        name: "burst",
        seed: "002 Libenzi /dev/epoll: 27,000 connections × 2 calls at rate 5,000",
        claim: "RT signals suffer in bursts as the signal queue fills; epoll does not",
        run: Ok(Run::Legacy(crate::experiments::burst::run)),
    },
    ScenarioEntry {
        name: "herd",
        seed: "003 DragonFly BSD EV_WAKEONE: the Stevens server family",
        claim: "wake-one matches or beats blocking in accept and removes the thundering herd",
        run: Ok(Run::Legacy(crate::experiments::herd::run)),
    },
    ScenarioEntry {
        name: "proxy",
        seed: "000 Banga, Mogul, Druschel: the event-driven proxy with hot and cold clients",
        claim: "with 2,000 connections the explicit API improves maximum throughput by 28%",
        run: Ok(Run::Legacy(crate::experiments::proxy::run)),
    },
    ScenarioEntry {
        name: "load-client",
        seed: "002 Libenzi /dev/epoll and 000 Banga et al.: httperf as the load client",
        claim: "an event-driven load client built on evq outdoes httperf",
        run: Ok(Run::Legacy(crate::experiments::load_client::run)),
    },
];

fn not_run(entry: &ScenarioEntry, why: &str) -> ExperimentRecord {
    let mut record = ExperimentRecord::new(
        entry.name,
        entry.seed,
        vec![ClaimCheck {
            claim: entry.claim.to_string(),
            measured: format!("not run: {why}"),
            verdict: Verdict::NotMeasured,
            reasoning: "no measurement, no verdict".to_string(),
        }],
    );
    record.data = serde_json::json!({ "not_run": why });
    record
}

/// Runs the lab and writes the report; returns the results.
///
/// # Errors
/// An unknown `--only` name; failure to write the report. A scenario that fails
/// is recorded as not measured with its error, and the others still run.
pub fn run(args: &LabArgs, command_line: &str) -> io::Result<LabResults> {
    for name in &args.only {
        if !SCENARIOS.iter().any(|s| s.name == name) {
            let known: Vec<_> = SCENARIOS.iter().map(|s| s.name).collect();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown scenario {name:?}; known: {}", known.join(", ")),
            ));
        }
    }
    let tools = crate::tools::Tools::resolve(args.evq_bin.as_deref())?;
    std::fs::create_dir_all(&args.out)?;
    let machine = machine::machine();
    let mut experiments = Vec::new();
    let chosen: Vec<&ScenarioEntry> = SCENARIOS
        .iter()
        .filter(|s| args.only.is_empty() || args.only.iter().any(|o| o == s.name))
        .collect();
    let style =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix:<17} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
    for (i, entry) in chosen.iter().enumerate() {
        let bar = ProgressBar::new_spinner()
            .with_style(style.clone())
            .with_prefix(format!("{}/{} {}", i + 1, chosen.len(), entry.name));
        bar.enable_steady_tick(Duration::from_millis(200));
        let scenario = Scenario {
            quick: args.quick || args.smoke,
            smoke: args.smoke,
            out_dir: args.out.clone(),
            tools: tools.clone(),
            bar: bar.clone(),
        };
        let started = Instant::now();
        let mut record = match entry.run {
            Ok(f) => f
                .run(&scenario)
                .unwrap_or_else(|e| not_run(entry, &format!("failed: {e}"))),
            Err(why) => not_run(entry, why),
        };
        record.seconds = started.elapsed().as_secs_f64();
        bar.finish_with_message(format!(
            "{} ({:.1} s)",
            record.verdict.label(),
            record.seconds
        ));
        experiments.push(record);
    }
    let results = LabResults {
        machine,
        kernel: machine::kernel(),
        peers: machine::peers(),
        quick: args.quick,
        command: command_line.to_string(),
        experiments,
    };
    let json = serde_json::to_string_pretty(&results).map_err(io::Error::other)?;
    std::fs::write(args.out.join("results.json"), json)?;
    std::fs::write(args.out.join("index.html"), crate::report::html(&results))?;
    print_summary(&results, args);
    Ok(results)
}

fn print_summary(results: &LabResults, args: &LabArgs) {
    println!();
    println!("{:<18} {:<13} measured here", "experiment", "verdict");
    for e in &results.experiments {
        for (i, c) in e.checks.iter().enumerate() {
            let name = if i == 0 { e.name.as_str() } else { "" };
            println!("{:<18} {:<13} {}", name, c.verdict.label(), c.measured);
        }
    }
    println!();
    println!(
        "report: {}  (results.json beside it)",
        args.out.join("index.html").display()
    );
}
