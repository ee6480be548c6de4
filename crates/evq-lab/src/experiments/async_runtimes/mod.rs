//! Async Rust on evq (issue 18): hyper 1.x and a 64-byte echo on `evq-async`
//! against the same servers on tokio (current-thread and multi-thread) and smol,
//! measured by `evq-async`'s own `bench_async` program — contenders interleaved
//! round by round, server and client pinned to different CPUs — plus callgrind's
//! instruction count per request, the figure that holds on a shared machine.
//!
//! Not one of the five seeds' experiments: it answers the question a Rust user
//! asks before the seeds' ones — does the paper's interface cost anything once
//! an async runtime sits on it?

mod judge;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, Outcome, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct AsyncRuntimes;

/// What a run does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Rounds; every round runs every workload on every runtime.
    pub rounds: u32,
    /// Measured seconds per runtime per workload per round.
    pub seconds: u64,
    /// Warm-up seconds before each measurement.
    pub warmup: u64,
    /// The contenders (`bench_async`'s names; `evq-async` first).
    pub runtimes: Vec<String>,
    /// `hyper` (1 KiB keep-alive, 100 wrk connections), `echo1`, `echo1000`.
    pub workloads: Vec<String>,
    /// Callgrind measurements: (runtime, server workload, connections).
    pub callgrind: Vec<(String, String, u32)>,
    /// The smaller of callgrind's two request counts (the other is twice it).
    pub callgrind_requests: u64,
    /// Build `bench_async` with cargo when it is not beside `evq` (not in a smoke
    /// run, which must stay seconds long: there a missing program is reported).
    #[serde(default)]
    pub build_if_missing: bool,
}

/// One contender × workload × round, as `bench_async --json` writes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// `hyper`, `echo1` or `echo1000`.
    pub workload: String,
    /// `evq-async`, `tokio-ct`, `tokio-mt` or `smol`.
    pub runtime: String,
    /// 1-based round.
    pub round: u32,
    /// Client connections.
    pub connections: u32,
    /// `wrk` or `closed-loop`.
    pub client: String,
    /// evq's backend under evq-async.
    pub backend: String,
    /// Replies completed in the measured interval.
    pub requests: u64,
    /// Replies per second.
    pub req_per_s: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
    /// Client-side errors of every kind.
    pub errors: u64,
    /// Server CPU time (all threads) per reply, ns.
    pub server_cpu_ns_per_request: f64,
}

/// One callgrind measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CallgrindRecord {
    /// The runtime.
    pub runtime: String,
    /// `hyper` or `echo`.
    pub workload: String,
    /// Client connections.
    pub connections: u32,
    /// Server instructions per request (difference of two runs over the
    /// difference of their request counts: start-up cancels out).
    pub instructions_per_request: f64,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// The load average when the runs began (the machine may be shared).
    pub loadavg: String,
    /// Every round of every workload on every runtime.
    pub runs: Outcome<Vec<RunRecord>>,
    /// Instructions per request.
    pub callgrind: Outcome<Vec<CallgrindRecord>>,
}

impl Experiment for AsyncRuntimes {
    const NAME: &'static str = "async";
    const SEED: &'static str =
        "evq's own question (issue 18): hyper and echo on evq-async against tokio and smol";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    type Plan = Plan;
    type Records = Records;

    fn plan(&self, size: RunSize) -> Plan {
        let all = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let callgrind = |runtimes: &[&str]| {
            let mut out = Vec::new();
            for (workload, connections) in [("hyper", 100), ("echo", 1), ("echo", 1000)] {
                for r in runtimes {
                    out.push((r.to_string(), workload.to_string(), connections));
                }
            }
            out
        };
        match size {
            RunSize::Smoke => Plan {
                rounds: 1,
                seconds: 1,
                warmup: 0,
                runtimes: all(&["evq-async", "tokio-ct"]),
                workloads: all(&["hyper"]),
                callgrind: Vec::new(),
                callgrind_requests: 0,
                build_if_missing: false,
            },
            RunSize::Quick | RunSize::Full => Plan {
                rounds: size.pick(1, 3, 10),
                seconds: size.pick(1, 1, 3),
                warmup: 1,
                runtimes: all(&["evq-async", "tokio-ct", "tokio-mt", "smol"]),
                workloads: all(&["hyper", "echo1", "echo1000"]),
                callgrind: callgrind(&["evq-async", "tokio-ct"]),
                callgrind_requests: size.pick(0, 10_000, 20_000),
                build_if_missing: true,
            },
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Records) -> Judged {
        judge::judge(records)
    }
}
