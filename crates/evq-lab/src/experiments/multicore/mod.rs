//! Multi-core scaling (issue 17): `evq serve` (on epoll and with `--io
//! completion`) from one worker thread to many, beside nginx and h2o, each
//! server pinned to CPUs of its own and wrk on the others; beside it, what the
//! same machine says of the load clients (`evq load` against wrk, each on CPUs
//! of its own) and of the servers' system calls per request. A 2-CPU machine
//! cannot show these (the client needs CPUs too), so this scenario reports runs
//! of `scripts/scaling-run`, `scripts/load-client-run` and
//! `scripts/serve-syscalls-run` made on a larger machine: those committed in
//! `testdata/device/` (the device tool's 16-CPU machine, 2026-11-27), or the
//! `scaling.jsonl` (and `clients.jsonl`, `syscalls.jsonl` where present) of a
//! directory named by [`RESULTS_ENV`]. Nothing is measured on this machine;
//! the notes say where and when the numbers were taken.

mod judge;
mod judge_clients;
#[cfg(test)]
mod tests;

use crate::experiment::{Ctx, Experiment, Judged, RunSize};
use serde::{Deserialize, Serialize};
use std::io;

/// The scenario.
pub struct Multicore;

/// The environment variable naming a directory whose `scaling.jsonl` (from
/// `scripts/scaling-run`) to report instead of the committed run.
pub const RESULTS_ENV: &str = "EVQ_LAB_SCALING_RESULTS";

/// The committed scaling runs: (file, the CPUs wrk had, the JSON lines); the
/// judged one (wrk on the most CPUs) first.
const RECORDED: &[(&str, usize, &str)] = &[
    (
        "scaling-client10.jsonl",
        10,
        include_str!("../../../testdata/device/scaling-client10.jsonl"),
    ),
    (
        "scaling-client8.jsonl",
        8,
        include_str!("../../../testdata/device/scaling-client8.jsonl"),
    ),
    (
        "scaling-client8-1-2.jsonl",
        8,
        include_str!("../../../testdata/device/scaling-client8-1-2.jsonl"),
    ),
    (
        "scaling-lease3-file-1-2.jsonl",
        8,
        include_str!("../../../testdata/device/scaling-lease3-file-1-2.jsonl"),
    ),
    (
        "scaling-lease3-fixed-1-2-4.jsonl",
        8,
        include_str!("../../../testdata/device/scaling-lease3-fixed-1-2-4.jsonl"),
    ),
];

/// The committed load-client run (`scripts/load-client-run`).
const RECORDED_CLIENTS: &str = include_str!("../../../testdata/device/clients.jsonl");

/// The committed system-call counts (`scripts/serve-syscalls-run`).
const RECORDED_SYSCALLS: &str = include_str!("../../../testdata/device/syscalls.jsonl");

/// Where the committed runs were made.
pub const RECORDED_MACHINE: &str = "the device tool's lent machine: 16 CPUs (Intel Xeon), kernel 6.18, 2026-11-27 (three leases: the scaling runs at 1, 2, 4, 8 and 1, 3, 6 threads and the load clients on the first, the 1-and-2-thread run and the system calls on the second, the `scaling-lease3-*` runs on the third: evq's two servers and h2o at 1 and 2 threads, and evq's two servers answering their fixed reply at 1, 2 and 4); Debian 12's nginx 1.22, h2o 2.2, wrk and strace from `scripts/scaling-bundle`";

/// What to report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// A directory holding an earlier `scaling.jsonl`; `None`: the committed
    /// runs.
    pub from: Option<String>,
}

/// One point: a server with `threads` workers, one round.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalingPoint {
    /// The round (rounds interleave the servers).
    pub round: u32,
    /// `evq` (on epoll), `evq-completion` (`--io completion`), `nginx` or
    /// `h2o`.
    pub server: String,
    /// Worker threads (nginx: processes).
    pub threads: u32,
    /// wrk's requests per second.
    #[serde(default)]
    pub requests_per_s: f64,
    /// What went wrong, if the point has no rate.
    #[serde(default)]
    pub error: Option<String>,
    /// What evq's servers answered: `file` (the static file, as nginx and
    /// h2o) or `fixed` (their fixed reply, `EVQ_REPLY=fixed`: no file read).
    #[serde(default = "file_reply")]
    pub evq_reply: String,
}

/// Runs made before `evq_reply` was written served the file.
fn file_reply() -> String {
    "file".into()
}

/// One run of `scripts/scaling-run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScalingRun {
    /// Its file.
    pub file: String,
    /// CPUs wrk ran on (the servers had the others).
    pub client_cpus: usize,
    /// Its points.
    pub points: Vec<ScalingPoint>,
}

/// One load client's run (`scripts/load-client-run`): closed loop against an
/// nginx with more workers than the client can keep busy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientPoint {
    /// The round (rounds interleave the clients).
    pub round: u32,
    /// `wrk`, `evq-load` or `evq-load-completion` (`--io completion`).
    pub client: String,
    /// The client's threads (each on a CPU of its own).
    pub threads: u32,
    /// Its connections.
    #[serde(default)]
    pub connections: u32,
    /// Replies it counted.
    pub replies: u64,
    /// Replies per second.
    pub replies_per_s: f64,
    /// Its CPU time, user and system, seconds.
    pub cpu_s: f64,
}

/// System calls per request of one server under one load
/// (`scripts/serve-syscalls-run`, `strace -c -f`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyscallPoint {
    /// `fixed` (the 1 KiB fixed reply) or `file` (a 1 KiB file, `--root`).
    pub reply: String,
    /// `readiness` (epoll) or `completion`.
    pub io: String,
    /// Worker threads.
    pub threads: u32,
    /// Requests wrk counted.
    pub requests: u64,
    /// System calls strace counted.
    pub system_calls: u64,
}

/// The runs reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// Where they were measured.
    pub machine: String,
    /// The scaling runs, the one judged (wrk on the most CPUs) first.
    pub runs: Vec<ScalingRun>,
    /// The load clients side by side (empty where none was recorded).
    #[serde(default)]
    pub clients: Vec<ClientPoint>,
    /// System calls per request (empty where none was recorded).
    #[serde(default)]
    pub syscalls: Vec<SyscallPoint>,
}

/// JSON lines of `T`, blank lines skipped; `file` names them in errors.
fn lines<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> io::Result<Vec<T>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<T>(l).map_err(|e| io::Error::other(format!("{file}: {e}"))))
        .collect()
}

/// `dir/name` read as JSON lines, or nothing where the file is absent.
fn optional_lines<T: serde::de::DeserializeOwned>(
    dir: &std::path::Path,
    name: &str,
) -> io::Result<Vec<T>> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => lines(&path.display().to_string(), &text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

fn parse(file: &str, client_cpus: usize, text: &str) -> io::Result<ScalingRun> {
    let points: Vec<ScalingPoint> = lines(file, text)?;
    if points.is_empty() {
        return Err(io::Error::other(format!("{file}: no points")));
    }
    Ok(ScalingRun {
        file: file.into(),
        client_cpus,
        points,
    })
}

impl Experiment for Multicore {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "multicore";
    const SEED: &'static str =
        "issue 17: evq serve from 1 to many threads beside nginx and h2o, and the load clients side by side (a lent 16-CPU machine)";

    fn claims(&self) -> Vec<String> {
        vec![
            judge::LINEAR.into(),
            judge::LINEAR_COMPLETION.into(),
            judge::AHEAD.into(),
            judge::COMPLETION_FIRST.into(),
            judge::SYSCALLS.into(),
            judge_clients::CLOSED_LOOP.into(),
            judge_clients::CPU.into(),
        ]
    }

    fn plan(&self, _size: RunSize) -> Plan {
        Plan {
            from: std::env::var(RESULTS_ENV).ok().filter(|s| !s.is_empty()),
        }
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        ctx.expect(1);
        match plan.from {
            Some(dir) => {
                ctx.step(&format!("multicore: reading {dir}/scaling.jsonl"));
                let dir = std::path::Path::new(&dir);
                let path = dir.join("scaling.jsonl");
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                // scripts/scaling-run gives wrk half the machine unless told.
                Ok(Records {
                    machine: format!("the machine that wrote {}", path.display()),
                    runs: vec![parse("scaling.jsonl", 0, &text)?],
                    clients: optional_lines(dir, "clients.jsonl")?,
                    syscalls: optional_lines(dir, "syscalls.jsonl")?,
                })
            }
            None => {
                ctx.step("multicore: the committed 16-CPU runs");
                Ok(Records {
                    machine: RECORDED_MACHINE.into(),
                    runs: RECORDED
                        .iter()
                        .map(|(f, c, t)| parse(f, *c, t))
                        .collect::<io::Result<_>>()?,
                    clients: lines("clients.jsonl", RECORDED_CLIENTS)?,
                    syscalls: lines("syscalls.jsonl", RECORDED_SYSCALLS)?,
                })
            }
        }
    }

    fn judge(&self, r: &Records) -> Judged {
        Judged {
            checks: vec![
                judge::check_linear(r, "evq", judge::LINEAR),
                judge::check_linear(r, "evq-completion", judge::LINEAR_COMPLETION),
                judge::check_ahead(r),
                judge::check_completion_first(r),
                judge::check_syscalls(r),
                judge_clients::check_closed_loop(r),
                judge_clients::check_cpu(r),
            ],
            notes: judge::notes(r),
            commands: vec![
                "scripts/scaling-bundle target/scaling-bundle   (here: evq, nginx, h2o, wrk, strace and their libraries with this machine's loader)".into(),
                "CLIENT_CPUS=10 scripts/scaling-run target/scaling-bundle OUT 3 2 1 3 6   (there; OUT/scaling.jsonl; CLIENT_CPUS=8 … 1 2 4 8 for the other run)".into(),
                "scripts/load-client-run target/scaling-bundle OUT 3 2 8 1 2 4   (there; OUT/clients.jsonl)".into(),
                "CLIENT_CPUS=8 scripts/serve-syscalls-run target/scaling-bundle OUT 3 1 2   (there; OUT/syscalls.jsonl)".into(),
                format!("{RESULTS_ENV}=OUT evq lab --only multicore   (report that run)"),
            ],
            figures: {
                let mut f = judge::figures(r);
                f.extend(judge_clients::figures(r));
                f
            },
        }
    }
}
