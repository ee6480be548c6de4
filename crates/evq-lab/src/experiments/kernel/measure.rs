//! Runs `scripts/vm-test` (or reads an earlier run's `--out` directory) and
//! turns its JSON files into [`VmRun`].

use super::{
    Figure1Point, Figure8Point, Fuzz, Harness, Plan, Suite, VmRun, WakeOnePoint, RESULTS_ENV,
};
use crate::experiment::Ctx;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `scripts/vm-test`: `EVQ_VM_TEST` if set, else the one in this source tree.
fn vm_test_script() -> io::Result<PathBuf> {
    let path = std::env::var_os("EVQ_VM_TEST").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/vm-test"),
        PathBuf::from,
    );
    if path.is_file() {
        Ok(path)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} not found (the lab runs the VM from its source tree; name the script with EVQ_VM_TEST)",
                path.display()
            ),
        ))
    }
}

pub(super) fn run(plan: &Plan, ctx: &Ctx) -> io::Result<VmRun> {
    if let Some(dir) = &plan.from {
        ctx.expect(1);
        ctx.step(&format!(
            "reading the results of scripts/vm-test --out {dir}"
        ));
        return read(
            Path::new(dir),
            format!("an earlier `scripts/vm-test --out {dir}` ({RESULTS_ENV})"),
        );
    }
    if !plan.boot {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "a smoke run does not boot the VM (minutes under TCG); `evq lab --quick --only kernel` does, or set {RESULTS_ENV}=DIR to report a `scripts/vm-test --out DIR` run"
            ),
        ));
    }
    let script = vm_test_script()?;
    let out = ctx.out_dir.join("kernel-vm");
    std::fs::create_dir_all(&out)?;
    let log_path = out.join("vm-test.log");
    let log = std::fs::File::create(&log_path)?;
    let args = [
        "--out".to_string(),
        out.display().to_string(),
        "--suites".into(),
        plan.suites.clone(),
        "--bench".into(),
        plan.bench.clone(),
        "--fuzz-calls".into(),
        plan.fuzz_calls.to_string(),
    ];
    ctx.expect(1);
    ctx.step(&format!(
        "scripts/vm-test {} (qemu TCG; log in {})",
        args.join(" "),
        log_path.display()
    ));
    // A failing suite is a finding, not a failed measurement: vm-test still
    // writes summary.json, and the verdicts read it.
    let status = Command::new(&script)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()?;
    if !out.join("summary.json").is_file() {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        return Err(io::Error::other(format!(
            "scripts/vm-test ended ({status}) without results: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    read(
        &out,
        format!("scripts/vm-test {} ({status})", args.join(" ")),
    )
}

fn read_json<T: DeserializeOwned>(dir: &Path, file: &str) -> io::Result<T> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// A record file that a run may not have written (its suite did not run).
fn records<T: DeserializeOwned>(dir: &Path, file: &str) -> io::Result<Vec<T>> {
    if dir.join(file).is_file() {
        read_json(dir, file)
    } else {
        Ok(Vec::new())
    }
}

fn u64_at(v: &Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap_or(0)
}

fn f64_at(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or(f64::NAN)
}

/// Reads the files `scripts/vm-test --out dir` wrote.
pub(super) fn read(dir: &Path, source: String) -> io::Result<VmRun> {
    let summary: Value = read_json(dir, "summary.json")?;
    let suites: Vec<Suite> = serde_json::from_value(summary["tests"].clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("summary.json: {e}")))?;
    let harness: Vec<Harness> =
        serde_json::from_value(summary["rust_harness"].clone()).unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        summary[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let boot_suites = summary["boots"]
        .as_array()
        .map(|boots| {
            boots
                .iter()
                .map(|b| {
                    b["suites"]
                        .as_array()
                        .map(|s| {
                            s.iter()
                                .filter_map(|x| x.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    // The benchmark boot's clock: figure1 runs only there, on one CPU.
    let envs: Vec<Value> = records(dir, "bench_env.json")?;
    let bench_clock = envs
        .iter()
        .find(|e| e["cpus"].as_u64() == Some(1))
        .or(envs.last())
        .and_then(|e| e["clock"].as_str())
        .unwrap_or("")
        .to_string();
    let figure8 = records::<Value>(dir, "figure8.json")?
        .iter()
        .map(|p| Figure8Point {
            backend: p["backend"].as_str().unwrap_or("").to_string(),
            cold: u64_at(p, &["cold"]),
            cold_held: u64_at(p, &["dead", "held_min_after_ramp"]),
            replies_per_s: f64_at(p, &["load", "reply_rate_avg"]),
            errors: u64_at(p, &["load", "errors", "total"]),
            p99_ms: f64_at(p, &["load", "latency_ms", "p99"]),
        })
        .collect();
    Ok(VmRun {
        source,
        kernel: summary["kernel"].as_str().unwrap_or("").to_string(),
        elapsed_seconds: u64_at(&summary, &["elapsed_seconds"]),
        boot_suites,
        suites,
        harness,
        load_unload_cycles: summary["load_unload_cycles"].as_u64(),
        kernel_log_lines: u64_at(&summary, &["kernel_log_lines"]),
        kernel_log_problems: strings("kernel_log_problems"),
        problems: strings("problems"),
        figure1: records::<Figure1Point>(dir, "figure1.json")?,
        bench_clock,
        wakeone: records::<WakeOnePoint>(dir, "wakeone.json")?,
        figure8,
        fuzz: records::<Fuzz>(dir, "fuzz.json")?,
        torture: records::<Value>(dir, "torture.json")?
            .into_iter()
            .map(|r| serde_json::from_value::<Vec<evq_torture::CaseReport>>(r["cases"].clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("torture.json: {e}")))?
            .concat(),
    })
}
