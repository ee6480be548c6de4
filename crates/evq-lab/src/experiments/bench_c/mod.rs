//! Experiment 2, libevent's `bench.c` shape (SEEDS 002's pipetest family): `n`
//! socketpairs, `a` active, `w` writes chained from each readable pipe to the
//! next; time per run. evq on every backend beside libev, libevent and libuv
//! (C programs in `peers/`, compiled at run time against Debian's packages) and
//! the Rust crates mio and polling ([`crate::bench_rust_peers`], built in), and
//! the floor: the same chain on a bare epoll loop in C with no library
//! (`raw-epoll`), so the report can say what each library adds to the kernel's
//! work and how much any library could still gain over the fastest.
//!
//! Registration happens once, outside the timed part, for every contender alike;
//! the first repetition of each run is a warm-up and is dropped.

mod judge;
mod measure;

pub use measure::{build_peer, chain_json, run_evq, run_evq_child, run_peer, FLOOR, PEERS};

use crate::experiment::{Ctx, Experiment, Judged, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct BenchC;

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Pipes.
    pub ns: Vec<usize>,
    /// Active pipes (each at most n).
    pub actives: Vec<usize>,
    /// Chained writes.
    pub w: usize,
    /// Rounds: every contender runs once per round, in turn.
    pub rounds: usize,
    /// Timed runs per contender per round (plus one dropped warm-up).
    pub per_round: usize,
}

/// One contender at one point.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct BenchPoint {
    /// `evq-<backend>`, the C peer library or the Rust crate.
    pub contender: String,
    /// The mechanism it ran on.
    pub backend: String,
    /// Pipes.
    pub n: usize,
    /// Active pipes.
    pub a: usize,
    /// Chained writes.
    pub w: usize,
    /// Median microseconds per run.
    pub us_per_run: f64,
    /// Fastest timed run.
    pub us_min: f64,
    /// Slowest timed run.
    pub us_max: f64,
    /// Reads performed in all runs, warm-ups included (must be
    /// (runs + rounds) × (w + a)).
    pub reads: u64,
    /// Timed runs.
    pub runs: usize,
}

/// What the sweep measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// Every contender at every point.
    pub points: Vec<BenchPoint>,
    /// The C peers that built and ran.
    pub c_peers: Vec<String>,
    /// The C peers that did not, and why.
    pub skipped: Vec<String>,
    /// mio's version as built in.
    pub mio: String,
    /// polling's version as built in.
    pub polling: String,
    /// evq, mio and polling ran as `evq bench-chain` children, each in a
    /// process of its own as the C peers; false: in the lab's process (and
    /// in records from before the children).
    #[serde(default)]
    pub as_children: bool,
}

impl Experiment for BenchC {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "bench-c";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    const SEED: &'static str = "002 Libenzi /dev/epoll: pipetest; libevent's bench.c";
    fn plan(&self, size: RunSize) -> Plan {
        // A run of the chain takes ~250 µs: bench.c's 25 of them are 6 ms a
        // contender, and medians of so little swung by ±10% from one lab run
        // to the next (n=100, a=1 read 0.74, 1.20 and 1.10). Hundreds of runs,
        // in many short rounds: this machine has slow phases of a few hundred
        // milliseconds (the bare C loop alone, 3,000 runs in a row: 1,100 of
        // them ~11% slower, back to back), and with six rounds of ~20 runs a
        // phase fell on a few contenders' turns only (quick lab, three runs:
        // the bare loop read 408 µs where it reads 312, evq 372). Thirty
        // rounds of four spread a phase over every contender's turns, for a
        // process start per turn (a few ms).
        let (ns, actives, w, reps) = size.pick(
            (vec![10, 50], vec![1], 10, 2usize),
            (vec![100, 1000], vec![1, 100], 100, 120),
            (vec![100, 1000, 5000], vec![1, 10, 100], 100, 300),
        );
        let rounds = size.pick(1, 30, 50);
        Plan {
            ns,
            actives,
            w,
            rounds,
            per_round: reps.div_ceil(rounds),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::run(plan, ctx)
    }

    fn judge(&self, records: &Records) -> Judged {
        judge::judge(records)
    }
}
