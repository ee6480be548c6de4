//! Experiment 1, pipe scaling (SEEDS 004, devpollperf; Figures 1 and 2): cost per
//! event against the number of descriptors, for every backend and the raw C floor.
//!
//! Two sweeps. The main one is `evq pipebench` at the plan's sizes (eventfds when
//! pipes would not fit under the descriptor limit). The pipe sweep adds what the
//! main one cannot carry on eventfds: the RT-signal backends (which need files that
//! raise SIGIO) and the /dev/poll personality (whose devpollperf loop is written
//! for pipes), at the same sizes capped where two descriptors per probe still fit.

mod judge;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, RunSize};
use crate::pipebench::PipebenchRecord;
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct PipeScaling;

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Descriptor counts, ascending.
    pub fds: Vec<usize>,
    /// Timed iterations per run.
    pub iters: u64,
    /// Repetitions of each point (the median is reported).
    pub reps: usize,
}

/// What the two sweeps measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// The main sweep: every backend and the raw C floor.
    pub main: Vec<PipebenchRecord>,
    /// The pipe sweep.
    pub pipes: PipeSweep,
}

/// The pipe sweep's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipeSweep {
    /// Descriptor counts.
    pub sizes: Vec<usize>,
    /// `raw-epoll`, the RT-signal backends, evq's epoll as [`PIPE_EPOLL`] and the
    /// /dev/poll personality as [`DEVPOLL`].
    pub records: Vec<PipebenchRecord>,
    /// The RT-signal backends measured here (none when the main sweep already
    /// ran on pipes and carried them).
    pub signal_names: Vec<String>,
}

/// Series name of the /dev/poll personality.
pub const DEVPOLL: &str = "devpoll-personality";
/// Series name of evq's epoll backend in the pipe sweep (beside the RT-signal ones).
pub const PIPE_EPOLL: &str = "epoll (pipes)";

impl Experiment for PipeScaling {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "pipe-scaling";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    const SEED: &'static str = "004 Solaris /dev/poll (Sun, 2002): devpollperf";
    fn plan(&self, size: RunSize) -> Plan {
        let (fds, iters, reps) = size.pick(
            (vec![1, 100], 300, 1),
            (vec![1, 10, 100, 1000], 20_000, 3),
            (vec![1, 10, 100, 1000, 3000, 10_000], 20_000, 5),
        );
        Plan { fds, iters, reps }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Records) -> Judged {
        judge::judge(records)
    }
}
