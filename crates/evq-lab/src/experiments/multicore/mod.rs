//! Multi-core scaling (issue 17): `evq serve` from one worker thread to many,
//! beside nginx and h2o, each server pinned to CPUs of its own and wrk on the
//! others. A 2-CPU machine cannot show it (the client needs CPUs too), so this
//! scenario reports a run of `scripts/scaling-run` made on a larger machine:
//! the one committed in `testdata/device/` (the device tool's 16-CPU machine,
//! 2026-11-26), or the `scaling.jsonl` of a directory named by
//! [`RESULTS_ENV`]. Nothing is measured on this machine; the notes say where
//! and when the numbers were taken.

mod judge;
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

/// The committed runs: (file, the CPUs wrk had, the JSON lines).
const RECORDED: &[(&str, usize, &str)] = &[
    (
        "scaling-16cpu-client10.jsonl",
        10,
        include_str!("../../../testdata/device/scaling-16cpu-client10.jsonl"),
    ),
    (
        "scaling-16cpu-client8.jsonl",
        8,
        include_str!("../../../testdata/device/scaling-16cpu-client8.jsonl"),
    ),
];

/// Where the committed runs were made.
pub const RECORDED_MACHINE: &str = "the device tool's lent machine: 16 CPUs (Intel Xeon, model 207), kernel 6.18, 2026-11-26; Debian 12's nginx 1.22, h2o 2.2 and wrk from `scripts/scaling-bundle`";

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
    /// `evq`, `nginx` or `h2o`.
    pub server: String,
    /// Worker threads (nginx: processes).
    pub threads: u32,
    /// wrk's requests per second.
    #[serde(default)]
    pub requests_per_s: f64,
    /// What went wrong, if the point has no rate.
    #[serde(default)]
    pub error: Option<String>,
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

/// The runs reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// Where they were measured.
    pub machine: String,
    /// The runs, the one judged (wrk on the most CPUs) first.
    pub runs: Vec<ScalingRun>,
}

fn parse(file: &str, client_cpus: usize, text: &str) -> io::Result<ScalingRun> {
    let points = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<ScalingPoint>(l).map_err(io::Error::other))
        .collect::<io::Result<Vec<_>>>()?;
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
        "issue 17: evq serve from 1 to many threads beside nginx and h2o (a lent 16-CPU machine)";

    fn claims(&self) -> Vec<String> {
        vec![judge::LINEAR.into(), judge::AHEAD.into()]
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
                let path = std::path::Path::new(&dir).join("scaling.jsonl");
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                // scripts/scaling-run gives wrk half the machine unless told.
                Ok(Records {
                    machine: format!("the machine that wrote {}", path.display()),
                    runs: vec![parse("scaling.jsonl", 0, &text)?],
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
                })
            }
        }
    }

    fn judge(&self, r: &Records) -> Judged {
        Judged {
            checks: vec![judge::check_linear(r), judge::check_ahead(r)],
            notes: judge::notes(r),
            commands: vec![
                "scripts/scaling-bundle target/scaling-bundle   (here: evq, nginx, h2o, wrk and their libraries with this machine's loader)".into(),
                "CLIENT_CPUS=10 scripts/scaling-run target/scaling-bundle OUT 4 2 1 3 6   (there; OUT/scaling.jsonl)".into(),
                format!("{RESULTS_ENV}=OUT evq lab --only multicore   (report that run)"),
            ],
            figures: judge::figures(r),
        }
    }
}
