//! Helpers shared by evq-async's test files.
#![allow(dead_code)]

use std::process::Command;
use std::time::Duration;

/// Long enough for a loaded 2-core box; tests only wait this long when failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// True if `tool` runs here; otherwise says why the caller skips (a failure under
/// `EVQ_REQUIRE_ALL=1`, see `evq_testkit::skip`).
pub fn require_tool(tool: &str, package: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    evq_testkit::skip(
        tool,
        format!("not installed (Debian package `{package}`: apt-get install -y {package})"),
    );
    false
}

/// Raises the soft descriptor limit to the hard one (20,000 on the CI machine) and
/// returns the new soft limit.
pub fn raise_nofile() -> u64 {
    rlimit::increase_nofile_limit(u64::MAX).expect("getrlimit/setrlimit NOFILE")
}

/// Runs this test binary again once per other backend evq has here, each in a
/// child process with `EVQ_BACKEND` set (the reactor is one per process), passing
/// `args` (test-name filters and harness options). Prints one line per backend and
/// fails naming the backend whose run failed. Backends evq cannot open here are
/// skipped with `evq_testkit::skip` (a failure under `EVQ_REQUIRE_ALL=1`).
///
/// Does nothing in a child (`EVQ_ASYNC_CHILD` set), so it may be called from a
/// test that the child runs too.
pub fn rerun_on_other_backends(args: &[&str]) {
    if std::env::var_os("EVQ_ASYNC_CHILD").is_some() {
        return;
    }
    let here = evq::BackendKind::from_env_or_best().expect("a backend");
    let mut missing = Vec::new();
    for &kind in evq::BackendKind::ALL {
        if let Err(e) = kind.available() {
            missing.push((kind, e));
            continue;
        }
        if kind == here {
            continue; // this process runs on it
        }
        let out = Command::new(std::env::current_exe().expect("the test binary"))
            .env("EVQ_BACKEND", kind.name())
            .env("EVQ_ASYNC_CHILD", "1")
            .args(args)
            .output()
            .expect("spawn the test binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = text
            .lines()
            .find(|l| l.starts_with("test result:"))
            .unwrap_or("no summary line");
        eprintln!("{kind}: {summary}");
        assert!(
            out.status.success(),
            "failed on the {kind} backend:\n{text}"
        );
    }
    for (kind, why) in &missing {
        evq_testkit::skip_backend(kind.name(), why);
    }
}
