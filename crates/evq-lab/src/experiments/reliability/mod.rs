//! Reliability (issue 19; SEEDS 000's promise): every event that happens is
//! delivered, once, to the right queue — measured by `evq torture`'s exactly-once
//! ledger on every backend × {1, 2, 4} consumer threads under churn, and with the
//! kernel's own event queue forced to overflow (RT signals, io_uring) — and a
//! server built on it keeps serving whatever its clients do: `evq faults`' table
//! (every fault injected into `evq serve`, `evq proxy` and `evq load` with live
//! clients measured beside it, a verdict per row) and a short `evq soak`.

mod judge;
mod judge_faults;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, Outcome, RunSize};
use evq_torture::CaseReport;
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Reliability;

/// What a run does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// The torture cases (backend, threads, forced overflow, sizes, seed).
    pub torture: Vec<evq_torture::Case>,
    /// The fault table's rows to run (`serve/trickle`, …; empty: none).
    pub faults: Vec<String>,
    /// The faults' short form (seconds a row) rather than the sizes.
    pub faults_short: bool,
    /// Seconds of `evq soak` (0: none).
    pub soak_seconds: f64,
    /// Seconds of `evq soak --io completion` (0: none; records made before
    /// it have none).
    #[serde(default)]
    pub soak_completion_seconds: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// One ledger per torture case, each run in its own process.
    pub torture: Outcome<Vec<CaseReport>>,
    /// The fault table.
    pub faults: Outcome<Vec<evq_faults::FaultRow>>,
    /// The soak.
    pub soak: Outcome<evq_faults::soak::SoakReport>,
    /// The soak on io_uring completions (`evq soak --io completion`).
    #[serde(default = "no_completion_soak")]
    pub soak_completion: Outcome<evq_faults::soak::SoakReport>,
}

/// Records made before the completion soak say so.
fn no_completion_soak() -> Outcome<evq_faults::soak::SoakReport> {
    Outcome::Failed("these records were made before the lab soaked the completion loops".into())
}

impl Experiment for Reliability {
    const NAME: &'static str = "reliability";
    const SEED: &'static str =
        "000 Banga, Mogul, Druschel: every event delivered, once, to the right queue (evq torture); a server that keeps serving whatever its clients do (evq faults, evq soak)";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    type Plan = Plan;
    type Records = Records;

    fn plan(&self, size: RunSize) -> Plan {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let mut cases = match size {
            // Two backends, one thread, half a second: the path runs end to end.
            RunSize::Smoke => evq_torture::cases(
                evq_torture::Size::Quick,
                &[evq::BackendKind::Epoll, evq::BackendKind::Poll],
                &[1],
                seed,
            ),
            RunSize::Quick | RunSize::Full => {
                evq_torture::cases(evq_torture::Size::Quick, &[], &[1, 2, 4], seed)
            }
        };
        let seconds = size.pick(0.5, 1.5, 5.0);
        for c in &mut cases {
            c.max_seconds = seconds;
        }
        let faults = match size {
            // One row of each kind of target: the path runs end to end.
            RunSize::Smoke => vec![
                "serve/reset-mid-request".to_string(),
                "proxy/origin-stall".to_string(),
                "load/origin-reset".to_string(),
            ],
            RunSize::Quick | RunSize::Full => evq_faults::faults().iter().map(|f| f.id()).collect(),
        };
        Plan {
            torture: cases,
            faults,
            faults_short: size != RunSize::Full,
            soak_seconds: size.pick(10.0, 60.0, 600.0),
            soak_completion_seconds: size.pick(5.0, 60.0, 600.0),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Records) -> Judged {
        let mut j = judge::judge(records);
        j.extend(judge_faults::judge(records));
        j
    }
}
