//! What the lab writes. `raw.json` ([`RawRun`]) holds what was measured, before
//! any judging; `results.json` ([`LabResults`]) holds the verdicts, notes and
//! figure data judged from it, with the raw records beside each experiment.

use crate::experiment::{Outcome, RunSize};
use crate::machine::{MachineInfo, PeerInfo};
use crate::plot::Figure;
use serde::{Deserialize, Serialize};

/// Whether a source's claim holds on this kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The measured figure agrees with the claim.
    Holds,
    /// It does not; `measured` says how.
    Differs,
    /// The scenario could not measure it here (a peer or a piece is missing);
    /// `measured` says what and how to get it.
    NotMeasured,
}

impl Verdict {
    /// The word the report prints.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Differs => "differs",
            Verdict::NotMeasured => "not measured",
        }
    }

    /// `Some(true)` holds, `Some(false)` differs, `None` (nothing to judge) is
    /// not measured.
    pub fn of(holds: Option<bool>) -> Verdict {
        match holds {
            Some(true) => Verdict::Holds,
            Some(false) => Verdict::Differs,
            None => Verdict::NotMeasured,
        }
    }
}

/// One claim of a source, checked against one figure measured here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The source's claim, in its own terms.
    pub claim: String,
    /// What was measured here, with numbers.
    pub measured: String,
    /// How the measurement compares with the claim.
    pub verdict: Verdict,
    /// Why the verdict follows from the numbers (the rule applied).
    pub reasoning: String,
}

impl ClaimCheck {
    /// A check whose verdict follows from `holds` ([`Verdict::of`]).
    pub fn judged(
        claim: &str,
        measured: String,
        holds: Option<bool>,
        reasoning: &str,
    ) -> ClaimCheck {
        ClaimCheck {
            claim: claim.to_string(),
            measured,
            verdict: Verdict::of(holds),
            reasoning: reasoning.to_string(),
        }
    }
}

/// A drawn figure: SVG text for the HTML, and the PNG copy's file name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlotRecord {
    /// Short title.
    pub title: String,
    /// PNG file written next to the report (empty if PNG rendering failed).
    pub png: String,
    /// The SVG, embedded in the HTML (not in JSON).
    #[serde(skip)]
    pub svg: String,
}

/// One scenario's judged result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExperimentRecord {
    /// Scenario name (`--only NAME`).
    pub name: String,
    /// The source: "004 Solaris /dev/poll (Sun, 2002)" and so on.
    pub seed: String,
    /// The headline claim (the first check's).
    pub claim: String,
    /// The headline measurement.
    pub measured: String,
    /// The headline verdict: `differs` if any check differs, `holds` if all hold.
    pub verdict: Verdict,
    /// Every claim checked.
    pub checks: Vec<ClaimCheck>,
    /// The commands that reproduce the measurement.
    pub commands: Vec<String>,
    /// Notes on method (descriptor kinds, scaling, noise).
    pub notes: Vec<String>,
    /// The figures' data.
    pub figures: Vec<Figure>,
    /// The figures as drawn (filled by rendering).
    pub plots: Vec<PlotRecord>,
    /// The raw records the verdicts were judged from.
    pub data: serde_json::Value,
    /// Wall-clock seconds the measurement took.
    pub seconds: f64,
}

impl ExperimentRecord {
    /// The record of a judged scenario, its headline derived from the checks.
    pub fn new(
        name: &str,
        seed: &str,
        judged: crate::experiment::Judged,
        data: serde_json::Value,
        seconds: f64,
    ) -> ExperimentRecord {
        let checks = judged.checks;
        let verdict = if checks.iter().any(|c| c.verdict == Verdict::Differs) {
            Verdict::Differs
        } else if checks.iter().any(|c| c.verdict == Verdict::Holds) {
            Verdict::Holds
        } else {
            Verdict::NotMeasured
        };
        let (claim, measured) = checks
            .first()
            .map(|c| (c.claim.clone(), c.measured.clone()))
            .unwrap_or_default();
        ExperimentRecord {
            name: name.to_string(),
            seed: seed.to_string(),
            claim,
            measured,
            verdict,
            checks,
            commands: judged.commands,
            notes: judged.notes,
            figures: judged.figures,
            plots: Vec::new(),
            data,
            seconds,
        }
    }
}

/// Everything `results.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LabResults {
    /// CPU, cores, memory, descriptor limit.
    pub machine: MachineInfo,
    /// `uname -r` and more.
    pub kernel: String,
    /// Peers found (or not) on this machine.
    pub peers: Vec<PeerInfo>,
    /// How big the run was.
    pub size: RunSize,
    /// `--quick` (or `--smoke`).
    pub quick: bool,
    /// The command line that measured this.
    pub command: String,
    /// One record per scenario run.
    pub experiments: Vec<ExperimentRecord>,
}

/// The version of `raw.json`'s layout this build writes and reads.
pub const RAW_FORMAT: u32 = 1;

/// Everything `raw.json` holds: what was measured, before any judging.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RawRun {
    /// [`RAW_FORMAT`] when written.
    pub format: u32,
    /// CPU, cores, memory, descriptor limit.
    pub machine: MachineInfo,
    /// `uname -srvm`.
    pub kernel: String,
    /// Peers found (or not) on this machine.
    pub peers: Vec<PeerInfo>,
    /// How big the run was.
    pub size: RunSize,
    /// The command line that measured this.
    pub command: String,
    /// One entry per scenario measured, in order.
    pub experiments: Vec<RawExperiment>,
}

/// One scenario's raw records, or why there are none.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RawExperiment {
    /// Scenario name.
    pub name: String,
    /// Wall-clock seconds the measurement took.
    pub seconds: f64,
    /// The records, as the scenario's JSON.
    pub outcome: Outcome<serde_json::Value>,
}
