//! Experiment 4, signals (SEEDS 001, Lever and Tweedie), in two parts:
//!
//! - [`pickup`]: does picking up many events per call pay? Bursts of ready pipes
//!   drained with batches of 1, 23 and 500 on RT signals one at a time, in bulk,
//!   and on epoll (Graphs 1–2);
//! - [`overload`]: `evq serve` past its capacity with and without seed 001's load
//!   limiting (Graphs 3–4).

mod overload;
mod overload_judge;
mod overload_report;
mod pickup;
mod pickup_judge;

use crate::experiment::{Ctx, Experiment, Judged, Outcome, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Signals;

/// The two parts' plans.
pub struct Plan {
    pickup: pickup::Plan,
    overload: overload::Plan,
}

/// What the two parts measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// Graphs 1–2.
    pub pickup: pickup::Records,
    /// Graphs 3–4.
    pub overload: Outcome<overload::Records>,
}

/// The backend the overload claims are judged on (the plan's first).
const JUDGED_ON: &str = "rtsig-bulk";

fn pickup_claims() -> Vec<String> {
    [
        pickup_judge::GAINS_LITTLE,
        pickup_judge::BULK_HALF,
        pickup_judge::ORDER,
    ]
    .iter()
    .map(|c| c.to_string())
    .collect()
}

fn overload_claims() -> Vec<String> {
    vec![
        overload_judge::collapse_claim(JUDGED_ON),
        overload_judge::limited_claim(JUDGED_ON),
    ]
}

impl Experiment for Signals {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "signals";
    const SEED: &'static str = "001 Lever, Tweedie (ALS 2000): sigtimedwait4 and load limiting";
    fn claims(&self) -> Vec<String> {
        let mut all = pickup_claims();
        all.extend(overload_claims());
        all
    }

    fn plan(&self, size: RunSize) -> Plan {
        Plan {
            pickup: pickup::plan(size),
            overload: overload::plan(size),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        Ok(Records {
            pickup: pickup::measure(plan.pickup, ctx)?,
            overload: Outcome::of(overload::measure(plan.overload, ctx)),
        })
    }

    fn judge(&self, r: &Records) -> Judged {
        let mut judged = pickup_judge::judge(&r.pickup);
        judged.extend(
            r.overload
                .judge(&overload_claims(), "the overload sweep failed", |o| {
                    let points = overload_judge::median_runs(&o.runs);
                    let primary = o.backends[0].as_str();
                    let others: Vec<&str> = o.backends[1..].iter().map(String::as_str).collect();
                    Judged {
                        checks: vec![
                            overload_judge::check_collapse(&points, primary, &others),
                            overload_judge::check_limited(&points, primary),
                        ],
                        notes: overload_report::notes(o, &points),
                        commands: overload_report::commands(o),
                        figures: overload_report::figures(o, &points),
                    }
                }),
        );
        judged
    }
}

#[cfg(test)]
mod tests;
