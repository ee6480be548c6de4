//! Experiment 6, the herd (SEEDS 003): the Stevens server family on loopback, with
//! and without wake-one, with and without rotation.

mod judge;

use crate::experiment::{Ctx, Experiment, Judged, RunSize, Sweep};
use evq_herd::{Design, HerdConfig};
use serde::{Deserialize, Serialize};
use std::io;
use std::time::Duration;

/// The scenario.
pub struct Herd;

/// What to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// The designs, by name.
    pub designs: Vec<String>,
    /// Concurrent clients, ascending.
    pub concurrency: Vec<usize>,
    /// Requests per design and concurrency.
    pub requests: usize,
    /// Worker processes or threads per design.
    pub workers: usize,
}

/// One design at one concurrency: the figures the verdicts read, and every other
/// field `evq herd --json` reports, kept as it came.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    /// Design name.
    pub design: String,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Requests per second.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub requests_per_s: f64,
    /// Voluntary context switches of the workers per connection.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub sleeps_per_conn: f64,
    /// Returns from the wait per connection.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub wakeups_per_conn: f64,
    /// Jain's fairness index of the per-worker counts.
    #[serde(deserialize_with = "crate::stats::nan_if_null")]
    pub jain: f64,
    /// The rest of the record.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

impl Experiment for Herd {
    const NAME: &'static str = "herd";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    const SEED: &'static str = "003 DragonFly BSD EV_WAKEONE: the Stevens server family";
    type Plan = Plan;
    type Records = Sweep<Plan, Run>;

    fn plan(&self, size: RunSize) -> Plan {
        let designs: Vec<String> = match size {
            RunSize::Smoke => ["serv02", "serv02l-k", "serv02l-kone", "serv02l-kone-fair"]
                .iter()
                .map(|d| d.to_string())
                .collect(),
            _ => Design::ALL.iter().map(|d| d.name().to_string()).collect(),
        };
        let (concurrency, requests) = size.pick(
            (vec![1], 256),
            (vec![1, 8, 32], 2048),
            (vec![1, 8, 32, 128], 32_768),
        );
        Plan {
            designs,
            concurrency,
            requests,
            workers: 4,
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Sweep<Plan, Run>> {
        let cfg = HerdConfig {
            designs: plan
                .designs
                .iter()
                .map(|n| n.parse())
                .collect::<io::Result<Vec<Design>>>()?,
            workers: plan.workers,
            concurrency: plan.concurrency.clone(),
            requests_per_run: plan.requests,
            requests_per_client: None,
            run_timeout: Duration::from_secs(30),
        };
        ctx.expect(1);
        ctx.step(&format!(
            "{} designs × {:?} clients, {} requests each",
            plan.designs.len(),
            plan.concurrency,
            plan.requests
        ));
        let records = evq_herd::run(&cfg)?;
        let runs = serde_json::to_value(&records)
            .and_then(serde_json::from_value)
            .map_err(io::Error::other)?;
        Ok(Sweep { plan, points: runs })
    }

    fn judge(&self, records: &Sweep<Plan, Run>) -> Judged {
        judge::judge(records)
    }
}
