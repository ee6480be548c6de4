//! Experiment 5, burst (SEEDS 002): httperf `--num-calls 2 --num-conns 27000 --hog
//! --rate 5000` against the server on every backend, scaled to this machine.

mod judge;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, RunSize, Sweep};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Burst;

/// Sizes of the burst.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Connections (two calls each).
    pub num_conns: u64,
    /// Connections started per second.
    pub rate: f64,
    /// Repetitions per backend.
    pub reps: usize,
    /// The backends, by name.
    pub backends: Vec<String>,
}

/// One backend's run.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// Backend name.
    pub backend: String,
    /// Which repetition (0-based).
    pub rep: usize,
    /// Connections in the schedule.
    pub num_conns: u64,
    /// Offered connections per second.
    pub rate: f64,
    /// Replies received.
    pub replies: u64,
    /// Replies per second (the client's average).
    pub reply_rate_avg: f64,
    /// The client's errors.
    pub errors: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
    /// The client's test duration, seconds.
    pub duration_s: f64,
    /// The server's events per `get_next_event` call.
    pub server_events_per_call: f64,
}

impl Experiment for Burst {
    const NAME: &'static str = "burst";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    const SEED: &'static str =
        "002 Libenzi /dev/epoll: burst, 27,000 connections × 2 calls at 5,000/s";
    type Plan = Plan;
    type Records = Sweep<Plan, Point>;

    fn plan(&self, size: RunSize) -> Plan {
        let (num_conns, rate, reps) =
            size.pick((200, 1000.0, 1), (5000, 5000.0, 1), (27_000, 5000.0, 3));
        Plan {
            num_conns,
            rate,
            reps,
            backends: evq::BackendKind::candidates()
                .iter()
                .map(|k| k.name().to_string())
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
