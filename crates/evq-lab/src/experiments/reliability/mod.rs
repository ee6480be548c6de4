//! Reliability (issue 19; SEEDS 000's promise): every event that happens is
//! delivered, once, to the right queue — measured by `evq torture`'s exactly-once
//! ledger on every backend × {1, 2, 4} consumer threads under churn, and with the
//! kernel's own event queue forced to overflow (RT signals, io_uring).

mod judge;
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
}

/// What a run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// One ledger per torture case, each run in its own process.
    pub torture: Outcome<Vec<CaseReport>>,
}

impl Experiment for Reliability {
    const NAME: &'static str = "reliability";
    const SEED: &'static str =
        "000 Banga, Mogul, Druschel: every event delivered, once, to the right queue (evq torture)";
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
        Plan { torture: cases }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Records) -> Judged {
        judge::judge(records)
    }
}
