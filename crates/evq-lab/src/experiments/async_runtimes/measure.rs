//! Finds `bench_async` (building it when the lab runs from a source checkout),
//! runs its comparison and its callgrind count, and reads their JSON records.
//!
//! `bench_async` is an example of the `evq-async` crate: it links hyper, tokio
//! and smol, which the lab itself does not need, so it is a program of its own.
//! It is looked for beside the `evq` program (`target/<profile>/examples/`, where
//! `cargo test` and `cargo build --examples` leave it); when it is not there and
//! `evq` sits in a checkout's `target/`, the lab builds it with cargo, saying so.

use super::{CallgrindRecord, Plan, Records, RunRecord};
use crate::experiment::{Ctx, Outcome};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let loadavg = crate::procinfo::loadavg();
    let program = ctx
        .tools
        .evq()
        .and_then(|evq| bench_async_program(evq, plan.build_if_missing));
    let runs = Outcome::of(
        program
            .as_ref()
            .map_err(clone_err)
            .and_then(|p| comparison(p, &plan, ctx)),
    );
    let callgrind = Outcome::of(
        program
            .as_ref()
            .map_err(clone_err)
            .and_then(|p| instructions(p, &plan, ctx)),
    );
    Ok(Records {
        plan,
        loadavg,
        runs,
        callgrind,
    })
}

fn clone_err(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}

/// `bench_async` beside `evq`, or built from the checkout `evq` was built in.
fn bench_async_program(evq: &Path, build_if_missing: bool) -> io::Result<PathBuf> {
    let dir = evq.parent().unwrap_or(Path::new("."));
    let beside = dir.join("examples/bench_async");
    if beside.is_file() {
        return Ok(beside);
    }
    if !build_if_missing {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no bench_async beside {} (a smoke run does not build it; `cargo build -p evq-async --example bench_async` does)",
                evq.display()
            ),
        ));
    }
    // evq at <checkout>/target/<profile>/evq: build the release example there.
    let checkout = dir
        .ancestors()
        .find(|a| a.join("crates/evq-async/Cargo.toml").is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no bench_async beside {} and no evq checkout above it; build it with `cargo build --release -p evq-async --example bench_async`",
                    evq.display()
                ),
            )
        })?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "lab: building bench_async (hyper, tokio and smol servers) for the async scenario: cargo build --release -p evq-async --example bench_async"
    );
    let status = Command::new(&cargo)
        .current_dir(checkout)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "evq-async",
            "--example",
            "bench_async",
        ])
        .stdin(Stdio::null())
        .status()
        .map_err(|e| io::Error::new(e.kind(), format!("running cargo: {e}")))?;
    let built = checkout.join("target/release/examples/bench_async");
    if !status.success() || !built.is_file() {
        return Err(io::Error::other(format!(
            "cargo build --release -p evq-async --example bench_async failed ({status})"
        )));
    }
    Ok(built)
}

/// Runs `program args`, forwarding its stderr lines that start with `prefix` to
/// the progress bar, killed after `limit`. Returns its stdout.
fn run_bounded(
    program: &Path,
    args: &[String],
    limit: Duration,
    prefix: &str,
    ctx: &Ctx,
) -> io::Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let started = Instant::now();
    std::thread::scope(|s| {
        let out = s.spawn(move || {
            let mut text = String::new();
            if let Some(mut o) = stdout {
                let _ = io::Read::read_to_string(&mut o, &mut text);
            }
            text
        });
        let err = s.spawn(move || {
            let mut tail = Vec::new();
            if let Some(e) = stderr {
                for line in BufReader::new(e).lines().map_while(Result::ok) {
                    if line.starts_with(prefix) {
                        ctx.step(&format!("bench_async {line}"));
                    }
                    tail.push(line);
                    if tail.len() > 20 {
                        tail.remove(0);
                    }
                }
            }
            tail.join("\n")
        });
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break Some(st);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = out.join().unwrap_or_default();
        let tail = err.join().unwrap_or_default();
        match status {
            Some(st) if st.success() => Ok(stdout),
            Some(st) => Err(io::Error::other(format!(
                "{} {} failed ({st}): {tail}",
                program.display(),
                args.join(" ")
            ))),
            None => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{} {} still running after {} s; killed",
                    program.display(),
                    args.join(" "),
                    limit.as_secs()
                ),
            )),
        }
    })
}

/// The JSON lines of `text` that parse as `T`.
fn records<T: serde::de::DeserializeOwned>(text: &str) -> Vec<T> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn comparison(program: &Path, plan: &Plan, ctx: &Ctx) -> io::Result<Vec<RunRecord>> {
    let measurements = plan.rounds as u64 * (plan.workloads.len() * plan.runtimes.len()) as u64;
    ctx.expect(measurements as usize);
    let args: Vec<String> = [
        "run",
        "--rounds",
        &plan.rounds.to_string(),
        "--seconds",
        &plan.seconds.to_string(),
        "--warmup",
        &plan.warmup.to_string(),
        "--runtimes",
        &plan.runtimes.join(","),
        "--workloads",
        &plan.workloads.join(","),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Each measurement: warm-up, measurement, server start and stop.
    let limit = Duration::from_secs(60 + measurements * (plan.seconds + plan.warmup + 10));
    let out = run_bounded(program, &args, limit, "round ", ctx)?;
    let got: Vec<RunRecord> = records(&out);
    if got.len() as u64 != measurements {
        return Err(io::Error::other(format!(
            "bench_async printed {} records, {measurements} expected",
            got.len()
        )));
    }
    Ok(got)
}

fn instructions(program: &Path, plan: &Plan, ctx: &Ctx) -> io::Result<Vec<CallgrindRecord>> {
    ctx.expect(plan.callgrind.len());
    let mut out = Vec::new();
    for (runtime, workload, connections) in &plan.callgrind {
        ctx.step(&format!(
            "callgrind {runtime} {workload}, {connections} connection(s)"
        ));
        let args: Vec<String> = vec![
            "callgrind".into(),
            "--runtime".into(),
            runtime.clone(),
            "--workload".into(),
            workload.clone(),
            "--connections".into(),
            connections.to_string(),
            "--requests".into(),
            plan.callgrind_requests.to_string(),
        ];
        let text = run_bounded(program, &args, Duration::from_secs(600), "\u{0}", ctx)?;
        let mut got: Vec<CallgrindRecord> = records(&text);
        match got.pop() {
            Some(r) => out.push(r),
            None => {
                return Err(io::Error::other(format!(
                "bench_async callgrind --runtime {runtime} --workload {workload} printed no record"
            )))
            }
        }
    }
    Ok(out)
}
