//! Each case runs in a child process: the forced-overflow settings (a tiny
//! `RLIMIT_SIGPENDING`, a 4-entry io_uring CQ or kmod result ring) stay with the case they belong to,
//! and a crash or a hang is reported as that case's failure instead of ending the
//! whole run.

use crate::case::{Case, CaseReport};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `RLIMIT_SIGPENDING` of a forced-overflow RT-signal case.
pub const OVERFLOW_SIGPENDING: u64 = 32;
/// io_uring ring entries (SQ and CQ) of a forced-overflow uring case.
pub const OVERFLOW_URING_ENTRIES: u32 = 4;
/// Result-ring slots of a forced-overflow kmod-ring case.
pub const OVERFLOW_KMOD_RING_ENTRIES: u32 = 4;

/// Runs `case` as `program leading_args… --run-case JSON`, which must call
/// [`crate::run_case`] and print its report as JSON on the last line of stdout.
pub fn run_isolated(program: &Path, leading_args: &[&str], case: &Case) -> CaseReport {
    let json = serde_json::to_string(case).expect("a case serializes");
    let mut cmd = Command::new(program);
    cmd.args(leading_args)
        .arg("--run-case")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.env_remove("EVQ_URING_ENTRIES");
    cmd.env_remove("EVQ_KMOD_RING_ENTRIES");
    if case.overflow && case.backend == "uring" {
        cmd.env("EVQ_URING_ENTRIES", OVERFLOW_URING_ENTRIES.to_string());
    }
    if case.overflow && case.backend == "kmod-ring" {
        cmd.env(
            "EVQ_KMOD_RING_ENTRIES",
            OVERFLOW_KMOD_RING_ENTRIES.to_string(),
        );
    }
    if case.overflow && case.backend.starts_with("rtsig") {
        // SAFETY: between fork and exec only async-signal-safe calls are allowed;
        // setrlimit(2) on a local struct is one.
        unsafe {
            cmd.pre_exec(|| {
                let r = libc::rlimit {
                    rlim_cur: OVERFLOW_SIGPENDING,
                    rlim_max: libc::RLIM_INFINITY,
                };
                if libc::setrlimit(libc::RLIMIT_SIGPENDING, &r) != 0 {
                    // Lowering only the soft limit needs no privilege.
                    let mut cur = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    libc::getrlimit(libc::RLIMIT_SIGPENDING, &mut cur);
                    cur.rlim_cur = OVERFLOW_SIGPENDING;
                    libc::setrlimit(libc::RLIMIT_SIGPENDING, &cur);
                }
                Ok(())
            });
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return broken(case, format!("cannot start {}: {e}", program.display())),
    };
    // Read both pipes on threads so a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let limit = Duration::from_secs_f64(case.max_seconds + 60.0);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return broken(case, format!("waiting for the case: {e}")),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    let Some(status) = status else {
        return broken(
            case,
            format!("hung: killed after {limit:?}\n{}", tail(&stderr)),
        );
    };
    // The case prints its report and exits 1 if it failed: the report is the
    // answer either way; without one, the process died.
    match stdout
        .lines()
        .last()
        .map(serde_json::from_str::<CaseReport>)
    {
        Some(Ok(report)) => report,
        _ => broken(
            case,
            format!(
                "the case process ended with {status} and no report\n{}",
                tail(&stderr)
            ),
        ),
    }
}

fn broken(case: &Case, why: String) -> CaseReport {
    CaseReport::not_run(case, why)
}
