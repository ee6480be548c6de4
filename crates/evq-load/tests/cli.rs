//! The `evq-load` binary: summary and JSON output, and SIGTERM ending a run early
//! with its report still printed.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{start, Behaviour};

const BIN: &str = env!("CARGO_BIN_EXE_evq-load");

#[test]
fn load_prints_an_httperf_style_summary() {
    let srv = start(Behaviour::Length(100));
    let out = Command::new(BIN)
        .args([
            "load",
            "--server",
            "127.0.0.1",
            "--port",
            &srv.port.to_string(),
        ])
        .args([
            "--rate",
            "50",
            "--num-conns",
            "10",
            "--num-calls",
            "2",
            "--timeout",
            "5",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Total: connections 10 requests 20 replies 20",
        "Reply rate [replies/s]",
        "Reply status: 1xx=0 2xx=20",
        "Errors: total 0",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn bad_arguments_fail_cleanly() {
    let out = Command::new(BIN)
        .args(["load", "--rate", "10", "--connections", "3"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be combined"));
}

#[test]
fn io_completion_runs_and_bad_combinations_are_refused_by_flag() {
    let srv = start(Behaviour::Length(100));
    let port = srv.port.to_string();
    let out = Command::new(BIN)
        .args(["load", "--server", "127.0.0.1", "--port", &port, "--io"])
        .args(["completion", "--connections", "3", "--num-conns", "6"])
        .args(["--num-calls", "4", "--threads", "2", "--json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["replies"], 24, "{v}");
    assert_eq!(v["config"]["io"], "completion");
    for (args, needle) in [
        (
            &["--io", "completion", "--rate", "10", "--connections", "3"][..],
            "cannot be combined",
        ),
        (&["--io", "uring"][..], "--io"),
        (
            &["--io", "completion", "--burst-length", "0"][..],
            "--burst-length",
        ),
        (&["--io", "completion", "--threads", "0"][..], "--threads"),
    ] {
        let out = Command::new(BIN)
            .args(["load", "--port", &port])
            .args(args)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn sigterm_ends_dead_early_with_a_report() {
    let srv = start(Behaviour::Hold);
    let mut child = Command::new(BIN)
        .args([
            "dead",
            "--server",
            "127.0.0.1",
            "--port",
            &srv.port.to_string(),
        ])
        .args([
            "-n",
            "5",
            "--duration",
            "60",
            "--report-every",
            "0",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawns");
    let t = Instant::now();
    // Wait until the server has all five, then ask the holder to stop.
    while srv.accepted.load(std::sync::atomic::Ordering::SeqCst) < 5
        && t.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill sends a signal to the child we spawned.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = loop {
        if let Some(_st) = child.try_wait().expect("wait") {
            break child.wait_with_output().expect("output");
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "dead did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["held"], 5, "{v}");
    assert!(v["duration_s"].as_f64().unwrap_or(99.0) < 30.0);
}
