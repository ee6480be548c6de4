//! What the lab writes: one [`ExperimentRecord`] per scenario, collected with the
//! machine's description into [`LabResults`] (`results.json`).

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
    /// A check whose verdict follows from `holds`: `Some(true)` holds,
    /// `Some(false)` differs, `None` (nothing measured) is not measured.
    pub fn judged(
        claim: &str,
        measured: String,
        holds: Option<bool>,
        reasoning: &str,
    ) -> ClaimCheck {
        ClaimCheck {
            claim: claim.to_string(),
            measured,
            verdict: match holds {
                Some(true) => Verdict::Holds,
                Some(false) => Verdict::Differs,
                None => Verdict::NotMeasured,
            },
            reasoning: reasoning.to_string(),
        }
    }
}

/// A plot: SVG text for the HTML, and the PNG copy's file name.
#[derive(Clone, Debug, Serialize)]
pub struct PlotRecord {
    /// Short title.
    pub title: String,
    /// PNG file written next to the report (empty if PNG rendering failed).
    pub png: String,
    /// The SVG, embedded in the HTML (not in JSON).
    #[serde(skip)]
    pub svg: String,
}

/// One scenario's result.
#[derive(Clone, Debug, Serialize)]
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
    /// Plots.
    pub plots: Vec<PlotRecord>,
    /// The raw measurements.
    pub data: serde_json::Value,
    /// Wall-clock seconds the scenario took.
    pub seconds: f64,
}

impl ExperimentRecord {
    /// Builds the record, deriving the headline from the checks.
    pub fn new(name: &str, seed: &str, checks: Vec<ClaimCheck>) -> ExperimentRecord {
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
            commands: Vec::new(),
            notes: Vec::new(),
            plots: Vec::new(),
            data: serde_json::Value::Null,
            seconds: 0.0,
        }
    }
}

/// Everything `results.json` holds.
#[derive(Clone, Debug, Serialize)]
pub struct LabResults {
    /// CPU, cores, memory, descriptor limit.
    pub machine: crate::machine::MachineInfo,
    /// `uname -r` and more.
    pub kernel: String,
    /// Peers found (or not) on this machine.
    pub peers: Vec<crate::machine::PeerInfo>,
    /// `--quick` or full.
    pub quick: bool,
    /// The command line that produced this.
    pub command: String,
    /// One record per scenario run.
    pub experiments: Vec<ExperimentRecord>,
}
