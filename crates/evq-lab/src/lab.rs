//! `evq lab`: measures the chosen scenarios into `raw.json`, then judges and
//! renders what that file holds; `evq lab --rejudge DIR` does the second half
//! again on a run's `raw.json` without measuring.

use crate::experiment::{Ctx, Judged, Outcome, RunSize, Scenario};
use crate::experiments;
use crate::machine;
use crate::record::{ExperimentRecord, LabResults, RawExperiment, RawRun, RAW_FORMAT};
use crate::tools::Tools;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The raw records' file, in the report directory.
pub const RAW_FILE: &str = "raw.json";

/// What `evq lab` is asked to do.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// How big the sweeps are.
    pub size: RunSize,
    /// Only these scenarios (all when empty).
    pub only: Vec<String>,
    /// Where the report goes.
    pub out: PathBuf,
    /// The `evq` program to start servers and clients from (found when `None`;
    /// see [`Tools::resolve`]).
    pub evq_bin: Option<PathBuf>,
    /// The command line, for the report.
    pub command_line: String,
    /// Install missing peer packages before measuring (root and apt-get
    /// permitting), so that every comparison row is measured.
    pub install_peers: bool,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Installs the peer packages that are missing, if allowed and possible, saying
/// what and why; otherwise says which report rows will be missing and the command
/// that fills them (the report repeats it on its first screen).
fn prepare_peers(allowed: bool) {
    use crate::peer_packages::{self as pp, Plan};
    let list = pp::for_the_lab();
    match pp::plan(&list, pp::dpkg_installed, pp::Machine::here(), allowed) {
        Plan::AllPresent => {}
        Plan::Install(missing) => {
            eprintln!(
                "evq lab: installing {} missing peer package(s) so that every comparison row is measured (--no-install-peers skips this):",
                missing.len()
            );
            for p in &missing {
                eprintln!("  {:<18} {}", p.package, p.used_by);
            }
            match pp::install(&missing) {
                Ok(()) => eprintln!("evq lab: peers installed"),
                Err(e) => eprintln!(
                    "evq lab: could not install them ({e}); their rows will be missing. To fill them: {}",
                    pp::install_command(&missing)
                ),
            }
        }
        Plan::Missing {
            packages,
            why,
            command,
        } => {
            let names: Vec<&str> = packages.iter().map(|p| p.package).collect();
            eprintln!(
                "evq lab: peer packages missing ({}): {why}, so their rows will not be measured. To fill them: {command}",
                names.join(", ")
            );
        }
    }
}

/// The scenarios `only` names (all when empty), in report order.
///
/// # Errors
/// An unknown name, with the known ones.
pub fn chosen(only: &[String]) -> io::Result<Vec<&'static dyn Scenario>> {
    for name in only {
        if experiments::find(name).is_none() {
            let known: Vec<_> = experiments::ALL.iter().map(|s| s.name()).collect();
            return Err(invalid(format!(
                "unknown scenario {name:?}; known: {}",
                known.join(", ")
            )));
        }
    }
    Ok(experiments::ALL
        .iter()
        .copied()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name()))
        .collect())
}

/// Measures the scenarios into `OUT/raw.json` (rewritten after each one, so an
/// interrupted run keeps what it measured), then judges and renders it.
///
/// # Errors
/// An unknown scenario name, an `--evq-bin` that is not evq, failure to write
/// the report. A scenario that fails is recorded with its error and its claims
/// are not measured; the others still run.
pub fn run(opts: &LabOptions) -> io::Result<LabResults> {
    let chosen = chosen(&opts.only)?;
    let tools = Tools::resolve(opts.evq_bin.as_deref())?;
    std::fs::create_dir_all(&opts.out)?;
    prepare_peers(opts.install_peers);
    let mut raw = RawRun {
        format: RAW_FORMAT,
        machine: machine::machine(),
        kernel: machine::kernel(),
        peers: machine::peers(),
        size: opts.size,
        command: opts.command_line.clone(),
        experiments: Vec::new(),
    };
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template(
        "{prefix:<20} [{bar:24}] {pos:>3}/{len:<3} {elapsed:>4} ~{eta:<4} left  {wide_msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    for (i, scenario) in chosen.iter().enumerate() {
        let bar = bars.add(
            ProgressBar::new(0)
                .with_style(style.clone())
                .with_prefix(format!("{}/{} {}", i + 1, chosen.len(), scenario.name())),
        );
        bar.enable_steady_tick(Duration::from_millis(500));
        let ctx = Ctx::new(&opts.out, &tools, &bar);
        let started = Instant::now();
        let outcome = Outcome::of(scenario.measure_raw(opts.size, &ctx));
        let seconds = started.elapsed().as_secs_f64();
        bar.finish_with_message(match &outcome {
            Outcome::Measured(_) => format!("measured ({seconds:.1} s)"),
            Outcome::Failed(why) => format!("failed ({seconds:.1} s): {why}"),
        });
        raw.experiments.push(RawExperiment {
            name: scenario.name().to_string(),
            seconds,
            outcome,
        });
        write_raw(&opts.out, &raw)?;
    }
    // Judge what the file holds, exactly as a re-judging run will.
    let results = rejudge(&opts.out)?;
    let failed: Vec<String> = raw
        .experiments
        .iter()
        .filter_map(|e| match &e.outcome {
            Outcome::Failed(why) => Some(format!("{}: {why}", e.name)),
            Outcome::Measured(_) => None,
        })
        .collect();
    // Under EVQ_REQUIRE_ALL (CI) a scenario that cannot measure at all fails
    // `evq lab` instead of leaving its claims quietly not measured.
    if evq_testkit::require_all() && !failed.is_empty() {
        return Err(io::Error::other(format!(
            "EVQ_REQUIRE_ALL=1 and {} scenario(s) could not measure (the report in {} says so too): {}",
            failed.len(),
            opts.out.display(),
            failed.join("; ")
        )));
    }
    Ok(results)
}

fn write_raw(dir: &Path, raw: &RawRun) -> io::Result<()> {
    let json = serde_json::to_string_pretty(raw).map_err(io::Error::other)?;
    let tmp = dir.join(format!("{RAW_FILE}.tmp"));
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, dir.join(RAW_FILE))
}

/// Reads `DIR/raw.json`, judges it and renders the report into `DIR`
/// (`index.html`, the PNG plots, `results.json`), measuring nothing.
///
/// # Errors
/// No readable `raw.json` in `DIR`, one written in another format, or failure
/// to write the report.
pub fn rejudge(dir: &Path) -> io::Result<LabResults> {
    let path = dir.join(RAW_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{}: {e} (a lab run writes it into its --out directory)",
                path.display()
            ),
        )
    })?;
    let raw: RawRun = serde_json::from_str(&text).map_err(|e| {
        invalid(format!(
            "{}: not a lab run's raw records: {e}",
            path.display()
        ))
    })?;
    if raw.format != RAW_FORMAT {
        return Err(invalid(format!(
            "{}: raw records in format {}, this lab reads format {RAW_FORMAT}",
            path.display(),
            raw.format
        )));
    }
    let mut results = judge(&raw);
    crate::report::write(&mut results, dir)?;
    Ok(results)
}

/// The verdicts, notes and figures the raw records support. Pure: the same
/// records always give the same results.
pub fn judge(raw: &RawRun) -> LabResults {
    LabResults {
        machine: raw.machine.clone(),
        kernel: raw.kernel.clone(),
        peers: raw.peers.clone(),
        size: raw.size,
        quick: raw.size != RunSize::Full,
        command: raw.command.clone(),
        experiments: raw.experiments.iter().map(judge_one).collect(),
    }
}

fn judge_one(e: &RawExperiment) -> ExperimentRecord {
    let Some(scenario) = experiments::find(&e.name) else {
        let why = format!("not judged: this lab has no scenario {:?}", e.name);
        return ExperimentRecord::new(
            &e.name,
            "",
            Judged::not_measured(&[format!("the claims of {}", e.name)], &why),
            serde_json::Value::Null,
            e.seconds,
        );
    };
    let (judged, data) = match &e.outcome {
        Outcome::Measured(records) => match scenario.judge_raw(records) {
            Ok(judged) => (judged, records.clone()),
            Err(why) => (
                Judged::not_measured(&scenario.claims(), &format!("not judged: {why}")),
                records.clone(),
            ),
        },
        Outcome::Failed(why) => (
            Judged::not_measured(&scenario.claims(), &format!("not run: failed: {why}")),
            serde_json::json!({ "not_run": why }),
        ),
    };
    ExperimentRecord::new(scenario.name(), scenario.seed(), judged, data, e.seconds)
}

/// The claim-by-claim summary `evq lab` prints.
pub fn summary(results: &LabResults) -> String {
    let mut text = format!("\n{:<18} {:<13} measured here\n", "experiment", "verdict");
    for e in &results.experiments {
        for (i, c) in e.checks.iter().enumerate() {
            let name = if i == 0 { e.name.as_str() } else { "" };
            text.push_str(&format!(
                "{:<18} {:<13} {}\n",
                name,
                c.verdict.label(),
                c.measured
            ));
        }
    }
    text
}
