//! The seeds' mechanisms in the kernel (issue 16): `evq.ko`'s `/dev/evq` and
//! `/dev/poll` against epoll, poll and select on the same kernel, in the same
//! run — inside a qemu guest, because this machine's kernel cannot load modules.
//!
//! `scripts/vm-test` builds the module against Debian's kernel headers, boots
//! that kernel under TCG with a busybox initramfs, runs the suites and the
//! benchmarks, and writes JSON (`summary.json`, `figure1.json`, `wakeone.json`,
//! `figure8.json`, `fuzz.json`). Measuring runs it (or, with
//! `EVQ_LAB_VM_RESULTS=DIR`, reads what an earlier `vm-test --out DIR` wrote:
//! CI boots the VM once, in its VM step, and the lab reports that run). The
//! benchmarks boot on one CPU under `-icount shift=0`, where guest time counts
//! executed instructions: only ratios between methods of one boot mean anything.

mod judge;
mod measure;

use crate::experiment::{Ctx, Experiment, Judged, Outcome, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Kernel;

/// The environment variable naming an earlier `scripts/vm-test --out DIR` to
/// report instead of booting the VM again.
pub const RESULTS_ENV: &str = "EVQ_LAB_VM_RESULTS";

/// What a run does.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Read an earlier run's results from this directory instead of booting.
    pub from: Option<String>,
    /// `vm-test --suites` when booting.
    pub suites: String,
    /// `vm-test --bench`: `quick` or `full`.
    pub bench: String,
    /// `vm-test --fuzz-calls`.
    pub fuzz_calls: u64,
    /// Whether this size boots at all (a smoke run does not: minutes of TCG).
    pub boot: bool,
}

/// One method at one descriptor count: devpollperf's loop (write a byte to a
/// random pipe, wait for it, read it) in guest instructions per event.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure1Point {
    /// `none` (no wait: the floor), `kmod-ring`, `kmod-ioctl`, `kmod-ioctl-event`,
    /// `epoll`, `epoll-et`, `devpoll` (in-kernel), `poll`, `select`.
    pub method: String,
    /// Pipes watched.
    pub fds: u64,
    /// Median of the repetitions.
    pub ns_per_event: f64,
    /// Fastest repetition.
    pub min: f64,
    /// Slowest repetition.
    pub max: f64,
    /// Repetitions.
    pub reps: u32,
}

/// Four queues on one listening socket: how connections spread.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WakeOnePoint {
    /// `tcg-realtime` (the test boot, several CPUs) or `icount` (one CPU).
    pub clock: String,
    /// Guest CPUs.
    pub cpus: u32,
    /// `kmod-wakeone`, `kmod-all`, `epoll-exclusive`, `epoll-all`.
    pub method: String,
    /// Queues (worker threads).
    pub queues: u32,
    /// Connections made.
    pub connections: u64,
    /// Wake-ups of all workers.
    pub wakeups: u64,
    /// Wake-ups that found nothing to accept.
    pub futile: u64,
    /// Wake-ups per connection.
    pub wakeups_per_connection: f64,
    /// Connections accepted per queue.
    pub accepted: Vec<u64>,
    /// Most accepted over fewest.
    pub max_min_share: f64,
}

/// `evq serve` on one backend with cold connections: one point of Figure 8.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure8Point {
    /// The server's backend.
    pub backend: String,
    /// Cold connections asked for.
    pub cold: u64,
    /// Cold connections `evq dead` held through the load (its minimum after the ramp).
    pub cold_held: u64,
    /// Replies per guest second (closed loop, 4 connections).
    pub replies_per_s: f64,
    /// The load client's errors.
    pub errors: u64,
    /// The load client's p99 latency, guest milliseconds.
    pub p99_ms: f64,
}

/// The ioctl fuzz run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fuzz {
    /// Calls made.
    pub calls: u64,
    /// Errors outside the documented set.
    pub unexpected_errors: u64,
}

/// One suite's exit status (`summary.json`'s `tests`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Suite {
    /// `evq_semantics`, `rust_evq-conformance`, `capi_api_test_kmod`, …
    pub name: String,
    /// Exit status; `None` when it never ended.
    pub rc: Option<i32>,
    /// Guest seconds.
    pub seconds: Option<u64>,
}

/// One Rust test binary's summary line, attributed to its suite.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Harness {
    /// The suite that printed it.
    pub suite: String,
    /// Tests passed.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
    /// Tests ignored.
    pub ignored: u64,
}

/// What one `scripts/vm-test` run found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VmRun {
    /// How the results were obtained: the command, or the directory read.
    pub source: String,
    /// The guest kernel's release.
    pub kernel: String,
    /// Wall-clock seconds of the whole vm-test run.
    pub elapsed_seconds: u64,
    /// The suites each boot ran.
    pub boot_suites: Vec<Vec<String>>,
    /// Every suite's exit status.
    pub suites: Vec<Suite>,
    /// Every Rust test binary's counts.
    pub harness: Vec<Harness>,
    /// Load/unload cycles completed (when that suite ran).
    pub load_unload_cycles: Option<u64>,
    /// Kernel log lines read, and the bad ones (BUG, WARNING, Oops, lockdep, …).
    pub kernel_log_lines: u64,
    /// The kernel log lines that fail a run.
    pub kernel_log_problems: Vec<String>,
    /// Everything vm-test's judge counted as a failure.
    pub problems: Vec<String>,
    /// Figure 1 in the benchmark boot (`icount`) — each clock's points.
    pub figure1: Vec<Figure1Point>,
    /// The benchmark boot's clock (`icount` or `tcg-realtime`).
    pub bench_clock: String,
    /// Wake-one runs, both boots.
    pub wakeone: Vec<WakeOnePoint>,
    /// Figure 8 points.
    pub figure8: Vec<Figure8Point>,
    /// The fuzz run, when it ran.
    pub fuzz: Vec<Fuzz>,
    /// `evq torture --quick` on kmod and kmod-ring: every case's ledger.
    pub torture: Vec<evq_torture::CaseReport>,
}

/// What a run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// The VM's results.
    pub vm: Outcome<VmRun>,
}

impl Experiment for Kernel {
    const NAME: &'static str = "kernel";
    const SEED: &'static str = "000 declare_interest/get_next_event, 002 /dev/epoll's mapped ring, 003 EV_WAKEONE, 004 /dev/poll — in the kernel, as evq.ko (issue 16; qemu guest)";
    const CLAIMS: &'static [&'static str] = &judge::CLAIMS;
    type Plan = Plan;
    type Records = Records;

    fn plan(&self, size: RunSize) -> Plan {
        let from = std::env::var(RESULTS_ENV).ok().filter(|d| !d.is_empty());
        // Figure 8 (evq serve, dead and load) boots on its own, one CPU under
        // -icount; at the quick size (3 cold counts x 4 backends x 1 s of load)
        // it adds about two minutes of TCG time on an idle host.
        let all = "semantics,devpoll,fuzz,bench,rust,loadunload,figure8";
        Plan {
            boot: from.is_some() || size != RunSize::Smoke,
            from,
            suites: all.into(),
            bench: size.pick("quick", "quick", "full").into(),
            fuzz_calls: 1_000_000,
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        let vm = measure::run(&plan, ctx);
        // A VM that was meant to boot and could not is a failed scenario under
        // EVQ_REQUIRE_ALL=1 (and `evq lab` then fails): CI must not report the
        // kernel's claims as merely "not measured". A smoke run, which never
        // boots, stays a run whose claims are not measured, saying why.
        match vm {
            Err(e) if plan.boot && evq_testkit::require_all() => Err(io::Error::new(
                e.kind(),
                format!("the VM did not run and EVQ_REQUIRE_ALL=1 forbids reporting that as not measured: {e}"),
            )),
            vm => Ok(Records {
                plan,
                vm: Outcome::of(vm),
            }),
        }
    }

    fn judge(&self, records: &Records) -> Judged {
        judge::judge(records)
    }
}
