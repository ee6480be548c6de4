//! What evq's test suites share across crates: the rule for a test that cannot run
//! on this machine.
//!
//! A test that needs something a machine may lack — a kernel feature, a peer
//! program, a font, root — calls [`skip`] with what is missing and why, and
//! returns. Run by a developer, that prints a line and the test passes. Under
//! `EVQ_REQUIRE_ALL=1` (CI sets it) it is a failure instead, so a green CI means
//! every test really ran. `EVQ_NOT_HERE` names, comma-separated, the things CI
//! knows are absent on purpose and covers elsewhere (the kernel-module backend,
//! `kmod`, runs in the VM step, not on the host). `evq lab` reads the variable
//! through [`require_all`] too: there a scenario that cannot measure fails the run.
//!
//! ```
//! fn needs_a_tool() {
//!     if which("valgrind").is_none() {
//!         evq_testkit::skip("valgrind", "not on PATH");
//!         return;
//!     }
//!     // ... the test proper
//! }
//! # fn which(_: &str) -> Option<()> { Some(()) }
//! # needs_a_tool();
//! ```

#![deny(missing_docs)]

use std::fmt::Display;
use std::time::{Duration, Instant};

/// True when `EVQ_REQUIRE_ALL` is `1`: a test that cannot run must fail.
pub fn require_all() -> bool {
    matches!(
        std::env::var("EVQ_REQUIRE_ALL").as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// True when `what` is listed in `EVQ_NOT_HERE`: absent on purpose on this machine.
pub fn absent_on_purpose(what: &str) -> bool {
    std::env::var("EVQ_NOT_HERE").is_ok_and(|list| listed(&list, what))
}

/// Whether `what` is an item of the comma-separated `list`.
fn listed(list: &str, what: &str) -> bool {
    list.split(',').any(|item| item.trim() == what)
}

/// Says that the rest of a test cannot run because `what` is missing here (`why`
/// gives the details). Prints and returns; the caller then returns or moves on.
///
/// # Panics
/// Under `EVQ_REQUIRE_ALL=1`, unless `what` is listed in `EVQ_NOT_HERE`.
#[track_caller]
pub fn skip(what: &str, why: impl Display) {
    if require_all() && !absent_on_purpose(what) {
        panic!(
            "cannot run here: {what}: {why} (EVQ_REQUIRE_ALL=1 makes this a failure; \
             list {what:?} in EVQ_NOT_HERE if it is covered elsewhere)"
        );
    }
    eprintln!("skip ({what}): {why}");
}

/// What a backend needs that a machine may lack, as `EVQ_NOT_HERE` names it: the
/// kernel-module flavours (`kmod`, `kmod-ring`) both need `kmod`, the evq.ko
/// module; every other backend is named by itself.
pub fn backend_requirement(backend: &str) -> &str {
    if backend == "kmod" || backend.starts_with("kmod-") {
        "kmod"
    } else {
        backend
    }
}

/// [`skip`] for a test that cannot run on evq backend `backend` here (named by
/// [`backend_requirement`], so `EVQ_NOT_HERE=kmod` covers both module flavours).
///
/// # Panics
/// As [`skip`].
#[track_caller]
pub fn skip_backend(backend: &str, why: impl Display) {
    skip(
        backend_requirement(backend),
        format_args!("backend {backend} unavailable here: {why}"),
    );
}

/// `started`'s value, or `None` after a [`skip`] of "io_uring completions"
/// where the kernel lacks the completion API — the `Unsupported` or
/// `PermissionDenied` error `evq::completion` (and every server and client
/// built on it) reports then. Any other error fails the test, naming `what`.
///
/// # Panics
/// On any other error; on those two, as [`skip`].
#[track_caller]
pub fn completions_or_skip<T>(started: std::io::Result<T>, what: &str) -> Option<T> {
    match started {
        Ok(v) => Some(v),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::Unsupported | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            skip("io_uring completions", e);
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

/// The kernel's own word on a thread of this process: its state letter from
/// `/proc` (`R`, `S`, …) and the system call it is blocked in (the first field of
/// `/proc/self/task/TID/syscall`; -1 while it runs), so a test can wait until a
/// thread really sleeps in its wait instead of sleeping for a guessed time.
pub fn thread_state(tid: libc::pid_t) -> Option<(char, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the state follows ") ".
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    let syscall = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let nr = syscall.split_whitespace().next()?.parse().unwrap_or(-1);
    Some((state, nr))
}

/// The calling thread's kernel id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid(2) takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Waits until thread `tid` sleeps in a system call other than a futex (its event
/// queue's wait: `epoll_wait`, `poll`, `io_uring_enter`, …).
///
/// # Panics
/// After 10 s without that.
pub fn wait_until_blocked_in_wait(tid: libc::pid_t) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(('S', nr)) = thread_state(tid) {
            if nr >= 0 && nr != libc::SYS_futex {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "thread {tid} never blocked in its wait: {:?}",
            thread_state(tid)
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_on_commas_and_match_whole_items() {
        assert!(listed("kmod", "kmod"));
        assert!(listed("valgrind, kmod", "kmod"));
        assert!(!listed("kmods", "kmod"));
        assert!(!listed("", "kmod"));
        assert!(!listed("km,od", "kmod"));
    }

    #[test]
    fn both_module_flavours_need_the_module() {
        assert_eq!(backend_requirement("kmod"), "kmod");
        assert_eq!(backend_requirement("kmod-ring"), "kmod");
        assert_eq!(backend_requirement("uring"), "uring");
        assert_eq!(backend_requirement("kmodx"), "kmodx");
    }

    #[test]
    fn a_thread_asleep_in_a_read_is_seen_blocked() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            tx.send(gettid()).unwrap();
            let mut byte = [0u8];
            // SAFETY: read(2) into a live one-byte buffer from a socket we hold.
            let n = unsafe { libc::read(b.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
            assert_eq!(n, 1);
        });
        let tid = rx.recv().unwrap();
        wait_until_blocked_in_wait(tid);
        assert_eq!(thread_state(tid).map(|s| s.1), Some(libc::SYS_read));
        std::io::Write::write_all(&mut a, b"x").unwrap();
        reader.join().unwrap();
    }
}
