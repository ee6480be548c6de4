//! Helpers shared by evq-async's test files.
#![allow(dead_code)]

use std::process::Command;
use std::time::Duration;

/// Long enough for a loaded 2-core box; tests only wait this long when failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// True if `tool` runs here. Otherwise prints why the caller skips — and under
/// `EVQ_REQUIRE_ALL=1` (CI) fails instead, so a skip never hides there.
pub fn require_tool(tool: &str, package: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    if found {
        return true;
    }
    let msg = format!(
        "{tool} is not installed (Debian package `{package}`: apt-get install -y {package})"
    );
    if std::env::var_os("EVQ_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("EVQ_REQUIRE_ALL=1 and {msg}");
    }
    eprintln!("skip: {msg}");
    false
}

/// Raises the soft descriptor limit to the hard one (20,000 on the CI machine) and
/// returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}
