//! Experiment 7, the proxy (SEEDS 000): clients → `evq proxy` → origin, with hot
//! load and cold connections at the proxy, comparing select and the event API.

mod judge;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, RunSize, Sweep};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Proxy;

/// The contender that is not a backend: `evq proxy --io completion`
/// (io_uring completions, issue 17), beside the readiness backends.
pub const COMPLETION: &str = "completion";

fn one() -> usize {
    1
}

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Cold connections at the proxy, ascending.
    pub colds: Vec<usize>,
    /// Closed-loop load per round, seconds.
    pub load_s: f64,
    /// Untimed load before each round, seconds (the origin pool filled, the
    /// proxy's buffers grown; 0 in records from before it existed).
    #[serde(default)]
    pub warmup_s: f64,
    /// Rounds per point, interleaved: every backend at every cold count once
    /// a round, the backends' order rotated each round (1 in older records).
    #[serde(default = "one")]
    pub repeats: usize,
    /// Where the proxy, the origin and the load ran (set when measured; empty
    /// in older records).
    #[serde(default)]
    pub placement: String,
    /// The proxy's backends, by name, and [`COMPLETION`] for the proxy on
    /// io_uring completions.
    pub backends: Vec<String>,
}

/// One backend at one cold count.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// Backend name, or [`COMPLETION`].
    pub backend: String,
    /// Cold connections held at the proxy.
    pub cold: usize,
    /// The load client's reply rate: the median of [`Point::rounds`].
    pub replies_per_s: f64,
    /// The reply rate of each round, in the order measured (empty in records
    /// from before rounds).
    #[serde(default)]
    pub rounds: Vec<f64>,
    /// Its p99 latency, ms.
    pub p99_ms: f64,
    /// Its errors.
    pub errors: u64,
    /// Requests the proxy relayed to the origin.
    pub relayed: u64,
}

impl Experiment for Proxy {
    const NAME: &'static str = "proxy";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    const SEED: &'static str =
        "000 Banga, Mogul, Druschel: the event-driven proxy with hot and cold clients";
    type Plan = Plan;
    type Records = Sweep<Plan, Point>;

    fn plan(&self, size: RunSize) -> Plan {
        let (colds, load_s, warmup_s, repeats) = size.pick(
            (vec![0, 50], 0.5, 0.1, 1),
            (vec![0, 2000], 1.0, 0.3, 3),
            (vec![0, 500, 1000, 2000, 4000], 3.0, 0.5, 3),
        );
        Plan {
            colds,
            load_s,
            warmup_s,
            repeats,
            placement: String::new(),
            backends: [
                evq::BackendKind::SelectClassic,
                evq::BackendKind::SelectImproved,
                evq::BackendKind::Poll,
                evq::BackendKind::Epoll,
            ]
            .into_iter()
            .filter(|k| k.available().is_ok())
            .map(|k| k.name().to_string())
            // A kernel without the completion API leaves it out (the
            // claims about it are then not measured).
            .chain(
                evq::completion::CompletionRing::new()
                    .is_ok()
                    .then(|| COMPLETION.to_string()),
            )
            .collect(),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Sweep<Plan, Point>> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Sweep<Plan, Point>) -> Judged {
        judge::judge(records)
    }
}
