//! Experiment 8, the load client (SEEDS 002 and 000 drove their servers with
//! httperf): `evq load` beside httperf with the same command line (open loop) and
//! beside wrk at the same connections and threads (closed loop), all against the
//! same nginx.
//!
//! Every client runs as a child process of the lab and is measured alike: its
//! reply rate from its own report, its CPU from `wait4`'s rusage (user + system of
//! the child and its threads, start-up and exit included) divided by the replies
//! it counted. The clients alternate (A/B/A/B) and each is repeated; the claims
//! judge ratios of medians.

mod judge;
mod measure;
mod parse;
mod report;

use crate::experiment::{Ctx, Experiment, Judged, RunSize};
use parse::ToolSummary;
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct LoadClient;

/// The clients, in the order each repeat runs them (A/B for each mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// httperf, open loop.
    Httperf,
    /// `evq load` with httperf's command line.
    EvqOpen,
    /// wrk, closed loop.
    Wrk,
    /// `evq load` closed loop with wrk's connections and threads.
    EvqClosed,
    /// `evq load --io completion` with httperf's command line (io_uring does
    /// the client's I/O; issue 17).
    EvqOpenCompletion,
    /// `evq load --io completion` closed loop with wrk's connections and threads.
    EvqClosedCompletion,
}

impl Client {
    /// Every client, in run order.
    pub const ALL: [Client; 6] = [
        Client::Httperf,
        Client::EvqOpen,
        Client::EvqOpenCompletion,
        Client::Wrk,
        Client::EvqClosed,
        Client::EvqClosedCompletion,
    ];

    /// The client's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Client::Httperf => "httperf",
            Client::EvqOpen => "evq load",
            Client::Wrk => "wrk",
            Client::EvqClosed => "evq load (closed)",
            Client::EvqOpenCompletion => "evq load --io completion",
            Client::EvqClosedCompletion => "evq load --io completion (closed)",
        }
    }

    /// "open" or "closed" loop.
    pub fn mode(self) -> &'static str {
        match self {
            Client::Httperf | Client::EvqOpen | Client::EvqOpenCompletion => "open",
            Client::Wrk | Client::EvqClosed | Client::EvqClosedCompletion => "closed",
        }
    }
}

/// One client run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    /// The client's name.
    pub client: String,
    /// "open" or "closed" loop.
    pub mode: String,
    /// 1-based repeat.
    pub repeat: usize,
    /// The tool's own figures (`None` if its output could not be parsed).
    pub summary: Option<ToolSummary>,
    /// The child's CPU from wait4, seconds.
    pub cpu_user_s: f64,
    /// (system)
    pub cpu_sys_s: f64,
    /// (user + system) × 10^6 / replies.
    pub cpu_us_per_reply: Option<f64>,
    /// Spawn to reap, seconds.
    pub wall_s: f64,
    /// nginx's CPU (all its processes) over the same interval, seconds.
    pub server_cpu_s: f64,
    /// `server_cpu_s / wall_s`: 1.0 is one core busy throughout.
    pub server_core_share: f64,
    /// Exit status (`None`: ended by a signal).
    pub exit: Option<i32>,
    /// Why the run does not count, if it does not.
    pub failure: Option<String>,
}

/// Sizes of the runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Open loop: connections.
    pub num_conns: u64,
    /// Open loop: calls per connection.
    pub num_calls: u32,
    /// Open loop: connections per second.
    pub rate: u32,
    /// Closed loop: connections.
    pub connections: usize,
    /// Closed loop: threads.
    pub threads: usize,
    /// Closed loop: seconds.
    pub seconds: u64,
    /// Repeats of the six clients.
    pub repeats: usize,
    /// A client still running after this many seconds is killed.
    pub limit_s: u64,
}

/// What the clients measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// Why nothing ran: nginx is missing.
    pub server_missing: Option<String>,
    /// The file's size, bytes.
    pub reply_size: usize,
    /// The file's path.
    pub uri: String,
    /// Clients that could not run here, and why.
    pub not_run: Vec<(String, String)>,
    /// Load average (1, 5, 15 min) before the runs.
    pub loadavg_before: String,
    /// And after them.
    pub loadavg_after: String,
    /// Where servers and clients ran (CPU placement).
    pub placement: String,
    /// Every run.
    pub runs: Vec<Run>,
}

impl Experiment for LoadClient {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "load-client";
    const SEED: &'static str =
        "002 Libenzi /dev/epoll and 000 Banga et al.: httperf as the load client";
    fn claims(&self) -> Vec<String> {
        judge::CLAIMS.iter().map(|(c, _)| c.to_string()).collect()
    }

    fn plan(&self, size: RunSize) -> Plan {
        let (num_calls, seconds, repeats, limit_s) =
            size.pick((20, 1, 1, 30), (200, 2, 3, 60), (2000, 10, 3, 300));
        let (num_conns, rate, connections) =
            size.pick((5, 100, 5), (100, 1000, 100), (100, 1000, 100));
        Plan {
            num_conns,
            num_calls,
            rate,
            connections,
            threads: 1,
            seconds,
            repeats,
            limit_s,
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, r: &Records) -> Judged {
        let summaries = judge::summaries(r);
        let checks = judge::checks(r, &summaries);
        if r.server_missing.is_some() {
            return Judged {
                checks,
                ..Judged::default()
            };
        }
        Judged {
            checks,
            notes: report::notes(r, &summaries),
            commands: report::commands(r),
            figures: report::figures(r),
        }
    }
}
