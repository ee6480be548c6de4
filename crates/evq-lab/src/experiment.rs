//! The shape of a lab scenario: **plan → measure → judge**, and then the lab
//! renders what was judged.
//!
//! - [`Experiment::plan`] decides what to run from the run's size alone.
//! - [`Experiment::measure`] runs it and returns raw records: every number the
//!   verdicts and plots will use, plus whatever the notes say about the run (load
//!   average, versions, placement). The lab writes them to `raw.json` before any
//!   judging.
//! - [`Experiment::judge`] is a pure function of those records: claim checks with
//!   their verdicts, notes, the commands that reproduce the run, and the figures
//!   (chart data, not drawings). `evq lab --rejudge DIR` calls it again on a
//!   run's `raw.json` without measuring anything.
//! - Rendering (SVG/PNG plots, `index.html`, `results.json`) reads only what
//!   `judge` returned.
//!
//! [`Scenario`] is the same thing with the record types erased to JSON, so the
//! lab can hold every scenario in one list (`experiments::ALL`).

#[cfg(test)]
pub mod testing;

use crate::plot::Figure;
use crate::tools::Tools;
use crate::verdict::{ClaimCheck, Verdict};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// How big a run is: `--smoke` (proves every path runs; the numbers mean
/// nothing), `--quick` (the whole lab in minutes) or full size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunSize {
    /// The smallest sweep that exercises the code.
    Smoke,
    /// Smaller sweeps.
    Quick,
    /// The sweeps the report is meant to be read at.
    Full,
}

impl RunSize {
    /// The value for this size.
    pub fn pick<T>(self, smoke: T, quick: T, full: T) -> T {
        match self {
            RunSize::Smoke => smoke,
            RunSize::Quick => quick,
            RunSize::Full => full,
        }
    }
}

/// Where a measurement reports how far it is: it announces the steps it will
/// take, then takes them one by one, each with a line saying what it does.
pub trait Progress: Sync {
    /// `steps` more steps are coming.
    fn expect(&self, steps: u64);
    /// One step begins; `line` says what it does.
    fn step(&self, line: &str);
}

/// No progress shown.
impl Progress for () {
    fn expect(&self, _: u64) {}
    fn step(&self, _: &str) {}
}

/// A bar per scenario: its length grows as parts announce their steps, and
/// indicatif estimates the time left from the steps taken so far.
impl Progress for indicatif::ProgressBar {
    fn expect(&self, steps: u64) {
        self.inc_length(steps);
    }
    fn step(&self, line: &str) {
        // The step that just began is not done: the position counts finished
        // ones, so the first step shows 0 of N.
        if self.message().is_empty() {
            self.set_message(line.to_string());
        } else {
            self.inc(1);
            self.set_message(line.to_string());
        }
    }
}

/// What a measurement is given besides its plan.
pub struct Ctx<'a> {
    /// Scratch space in the report directory (bench-c builds its peers there).
    pub out_dir: &'a Path,
    /// The programs it may start.
    pub tools: &'a Tools,
    progress: &'a dyn Progress,
}

impl<'a> Ctx<'a> {
    /// A context reporting its steps to `progress`.
    pub fn new(out_dir: &'a Path, tools: &'a Tools, progress: &'a dyn Progress) -> Self {
        Ctx {
            out_dir,
            tools,
            progress,
        }
    }

    /// `steps` more steps are coming (a part of the measurement announces its
    /// own once it knows them).
    pub fn expect(&self, steps: usize) {
        self.progress.expect(steps as u64);
    }

    /// One step begins; `line` says what it does.
    pub fn step(&self, line: &str) {
        self.progress.step(line);
    }
}

/// What judging a scenario's records yields; rendering reads nothing else.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Judged {
    /// Every claim checked, in report order.
    pub checks: Vec<ClaimCheck>,
    /// Notes on method (descriptor kinds, scaling, noise, what was left out).
    pub notes: Vec<String>,
    /// Commands that reproduce the measurement.
    pub commands: Vec<String>,
    /// The figures to draw.
    pub figures: Vec<Figure>,
}

impl Judged {
    /// Appends another part's checks, notes, commands and figures.
    pub fn extend(&mut self, part: Judged) {
        self.checks.extend(part.checks);
        self.notes.extend(part.notes);
        self.commands.extend(part.commands);
        self.figures.extend(part.figures);
    }

    /// Every claim not measured, for `why`.
    pub fn not_measured(claims: &[String], why: &str) -> Judged {
        Judged {
            checks: claims
                .iter()
                .map(|c| ClaimCheck {
                    claim: c.clone(),
                    measured: why.to_string(),
                    verdict: Verdict::NotMeasured,
                    reasoning: "no measurement, no verdict".into(),
                })
                .collect(),
            ..Judged::default()
        }
    }
}

/// A measurement that may have failed: a failed part of a scenario leaves its
/// claims not measured (with the error) while the other parts still count.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome<T> {
    /// The raw records.
    Measured(T),
    /// Why there are none.
    Failed(String),
}

impl<T> Outcome<T> {
    /// The outcome of a measurement.
    pub fn of(result: io::Result<T>) -> Outcome<T> {
        match result {
            Ok(t) => Outcome::Measured(t),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    }

    /// Judges the records, or marks `claims` not measured with `failed` (a
    /// sentence that the error completes).
    pub fn judge(&self, claims: &[String], failed: &str, judge: impl Fn(&T) -> Judged) -> Judged {
        match self {
            Outcome::Measured(t) => judge(t),
            Outcome::Failed(why) => {
                Judged::not_measured(claims, &format!("not run: {failed}: {why}"))
            }
        }
    }
}

/// The raw records of a plain sweep: the plan that was run and every point it
/// measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sweep<P, T> {
    /// The plan that was run.
    pub plan: P,
    /// Every point, in the order measured.
    pub points: Vec<T>,
}

/// One scenario of the lab, typed.
pub trait Experiment: Sync {
    /// What to run.
    type Plan;
    /// What a run measured: everything [`Experiment::judge`] reads.
    type Records: Serialize + DeserializeOwned;

    /// `--only` name.
    const NAME: &'static str;
    /// The source: "004 Solaris /dev/poll (Sun, 2002): devpollperf" and so on.
    const SEED: &'static str;
    /// The claims, where they are fixed texts.
    const CLAIMS: &'static [&'static str] = &[];

    /// Every claim the scenario can check, in report order (listed as not
    /// measured when the measurement fails as a whole).
    fn claims(&self) -> Vec<String> {
        Self::CLAIMS.iter().map(|c| c.to_string()).collect()
    }
    /// The plan for a run of this size.
    fn plan(&self, size: RunSize) -> Self::Plan;
    /// Runs the plan.
    ///
    /// # Errors
    /// Whatever stops the measurement as a whole (its claims are then not
    /// measured, with this error).
    fn measure(&self, plan: Self::Plan, ctx: &Ctx) -> io::Result<Self::Records>;
    /// The verdicts, notes, commands and figures the records support. Pure.
    fn judge(&self, records: &Self::Records) -> Judged;
}

/// A scenario with its record types erased to JSON.
pub trait Scenario: Sync {
    /// `--only` name.
    fn name(&self) -> &'static str;
    /// The source.
    fn seed(&self) -> &'static str;
    /// Every claim it can check.
    fn claims(&self) -> Vec<String>;
    /// Plans and measures a run of `size`; the raw records as JSON.
    ///
    /// # Errors
    /// As [`Experiment::measure`].
    fn measure_raw(&self, size: RunSize, ctx: &Ctx) -> io::Result<serde_json::Value>;
    /// Judges raw records.
    ///
    /// # Errors
    /// The JSON does not hold this scenario's records.
    fn judge_raw(&self, raw: &serde_json::Value) -> Result<Judged, String>;
}

impl<E: Experiment> Scenario for E {
    fn name(&self) -> &'static str {
        E::NAME
    }

    fn seed(&self) -> &'static str {
        E::SEED
    }

    fn claims(&self) -> Vec<String> {
        Experiment::claims(self)
    }

    fn measure_raw(&self, size: RunSize, ctx: &Ctx) -> io::Result<serde_json::Value> {
        let records = self.measure(self.plan(size), ctx)?;
        serde_json::to_value(&records).map_err(io::Error::other)
    }

    fn judge_raw(&self, raw: &serde_json::Value) -> Result<Judged, String> {
        let records: E::Records = serde_json::from_value(raw.clone())
            .map_err(|e| format!("raw records of {} unreadable: {e}", E::NAME))?;
        Ok(self.judge(&records))
    }
}
