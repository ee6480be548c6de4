//! For tests. Tests that change what a whole process shares — its descriptor limit, its
//! signal handlers — cannot run on the test harness's threads beside the other
//! tests: they would change the others' world. They run again in a child
//! process instead: the same test binary with only that test selected.

use std::process::Command;

const CHILD: &str = "EVQ_ISOLATED_TEST";

/// Runs `test` (its path in the test binary, `module::tests::name`) again in a
/// child process and panics with the child's output unless it passed there.
/// Returns true in the parent once the child passed, and false in the child,
/// where the caller goes on to do the work:
///
/// ```no_run
/// #[test]
/// fn lowers_its_own_descriptor_limit() {
///     if evq_os::isolation::in_own_process("tests::lowers_its_own_descriptor_limit") {
///         return;
///     }
///     // ... setrlimit, then the test proper, in the child only.
/// }
/// ```
///
/// # Panics
/// When the child fails, runs no test (a wrong path), or cannot be started.
pub fn in_own_process(test: &str) -> bool {
    if std::env::var(CHILD).is_ok_and(|t| t == test) {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD, test)
        .output()
        .expect("the test binary runs again");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{test} failed in its own process:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "{test} did not run in its own process:\n{text}"
    );
    true
}

/// Lowers this process's `RLIMIT_NOFILE` (soft and hard) to `limit`, then opens
/// `/dev/null` until no descriptor is left under it, and returns those files:
/// drop some to free descriptors again. Only in a process of its own
/// ([`in_own_process`]): the limit is the whole process's.
///
/// # Panics
/// When the limit cannot be set (it was already lower).
pub fn exhaust_descriptors(limit: u64) -> Vec<std::fs::File> {
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit(2) reads a live rlimit.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
    let mut files = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        files.push(f);
    }
    files
}
