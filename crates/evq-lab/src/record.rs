//! What the lab writes. `raw.json` ([`RawRun`]) holds what was measured, before
//! any judging; `results.json` ([`LabResults`]) holds the verdicts, notes and
//! figure data judged from it, with the raw records beside each experiment.

use crate::experiment::{Outcome, RunSize};
use crate::machine::{MachineInfo, PeerInfo};
use crate::plot::{Figure, PlotRecord};
use crate::verdict::{ClaimCheck, Verdict};
use serde::{Deserialize, Serialize};

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
