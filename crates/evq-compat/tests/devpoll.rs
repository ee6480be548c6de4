//! The /dev/poll personality against Solaris poll(7d) semantics (sections cited per
//! test: "write" for adding, OR-ing and POLLREMOVE; DP_POLL; DP_ISPOLLED).

use evq_compat::devpoll::{devpollperf, DevPoll, POLLREMOVE};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn pfd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

fn dp_poll(dp: &mut DevPoll, max: usize, timeout_ms: i32) -> Vec<libc::pollfd> {
    let mut out = vec![pfd(-1, 0); max];
    let n = dp.ioctl_dp_poll(&mut out, timeout_ms).unwrap();
    out.truncate(n);
    out
}

/// write: entries are added by writing pollfd records; the return is the bytes
/// written. DP_POLL: a dense array of ready entries with revents set.
#[test]
fn write_then_dp_poll_returns_dense_ready_entries() {
    let (mut a, b) = pair();
    let (_c, d) = pair();
    let mut dp = DevPoll::open().unwrap();
    let written = dp
        .write(&[
            pfd(b.as_raw_fd(), libc::POLLIN),
            pfd(d.as_raw_fd(), libc::POLLIN),
        ])
        .unwrap();
    assert_eq!(written, 2 * std::mem::size_of::<libc::pollfd>());
    assert!(dp_poll(&mut dp, 8, 0).is_empty());
    a.write_all(b"x").unwrap();
    let got = dp_poll(&mut dp, 8, 5000);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].fd, b.as_raw_fd());
    assert_eq!(got[0].events, libc::POLLIN);
    assert!(got[0].revents & libc::POLLIN != 0);
    // Level-triggered: still there until read.
    assert_eq!(dp_poll(&mut dp, 8, 0).len(), 1);
}

/// write: "If a pollfd entry for a fd is written more than once, the events are
/// OR'ed"; DP_ISPOLLED returns the entry's events.
#[test]
fn writes_or_events_and_ispolled_reports_them() {
    let (_a, b) = pair();
    let fd = b.as_raw_fd();
    let mut dp = DevPoll::open().unwrap();
    assert!(dp.dp_ispolled(fd).is_none());
    dp.write(&[pfd(fd, libc::POLLIN)]).unwrap();
    dp.write(&[pfd(fd, libc::POLLOUT)]).unwrap();
    let e = dp.dp_ispolled(fd).unwrap();
    assert_eq!(e.events, libc::POLLIN | libc::POLLOUT);
    assert_eq!(e.revents, 0);
    // Writable now: reported with POLLOUT since the OR added it.
    let got = dp_poll(&mut dp, 4, 5000);
    assert_eq!(got.len(), 1);
    assert!(got[0].revents & libc::POLLOUT != 0);
    assert_eq!(dp.len(), 1);
}

/// write with POLLREMOVE removes the entry; removing an absent fd is harmless.
#[test]
fn pollremove_removes() {
    let (mut a, b) = pair();
    let fd = b.as_raw_fd();
    let mut dp = DevPoll::open().unwrap();
    dp.write(&[pfd(fd, libc::POLLIN)]).unwrap();
    a.write_all(b"x").unwrap();
    assert_eq!(dp_poll(&mut dp, 4, 5000).len(), 1);
    dp.write(&[pfd(fd, POLLREMOVE)]).unwrap();
    assert!(dp.dp_ispolled(fd).is_none());
    assert!(dp_poll(&mut dp, 4, 50).is_empty());
    dp.write(&[pfd(fd, POLLREMOVE)]).unwrap();
    // Narrowing: remove, then write again with fewer events.
    dp.write(&[pfd(fd, libc::POLLIN | libc::POLLOUT)]).unwrap();
    dp.write(&[pfd(fd, POLLREMOVE), pfd(fd, libc::POLLIN)])
        .unwrap();
    assert_eq!(dp.dp_ispolled(fd).unwrap().events, libc::POLLIN);
    assert!(!dp.is_empty());
}

/// DP_POLL returns at most dp_nfds entries; the rest come on later calls.
#[test]
fn small_output_array_gets_everything_eventually() {
    let pairs: Vec<_> = (0..10).map(|_| pair()).collect();
    let mut dp = DevPoll::open().unwrap();
    for (a, b) in &pairs {
        dp.write(&[pfd(b.as_raw_fd(), libc::POLLIN)]).unwrap();
        (&*a).write_all(b"x").unwrap();
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let got = dp_poll(&mut dp, 4, 5000);
        assert!(got.len() <= 4);
        seen.extend(got.iter().map(|p| p.fd));
    }
    assert_eq!(seen.len(), 10);
}

/// DP_POLL: POLLNVAL for an entry that is not an open descriptor; poll(2) semantics
/// for a regular file (always ready).
#[test]
fn invalid_fds_and_regular_files() {
    let mut dp = DevPoll::open().unwrap();
    dp.write(&[pfd(900_000, libc::POLLIN), pfd(-1, libc::POLLIN)])
        .unwrap();
    let got = dp_poll(&mut dp, 4, 0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].fd, 900_000);
    assert_eq!(got[0].revents, libc::POLLNVAL);
    dp.write(&[pfd(900_000, POLLREMOVE)]).unwrap();
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    dp.write(&[pfd(file.as_raw_fd(), libc::POLLIN)]).unwrap();
    let got = dp_poll(&mut dp, 4, 0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].revents, libc::POLLIN);
}

/// A hang-up is reported as POLLHUP even if not asked for, as poll(2) does.
#[test]
fn hangup_is_reported() {
    let (a, b) = pair();
    let mut dp = DevPoll::open().unwrap();
    dp.write(&[pfd(b.as_raw_fd(), libc::POLLIN)]).unwrap();
    drop(a);
    let got = dp_poll(&mut dp, 4, 5000);
    assert_eq!(got.len(), 1);
    assert!(got[0].revents & libc::POLLHUP != 0, "{:#x}", got[0].revents);
}

/// dp_timeout: 0 returns at once, a positive value waits that long, and an empty
/// output array returns 0.
#[test]
fn timeouts() {
    let (_a, b) = pair();
    let mut dp = DevPoll::open().unwrap();
    dp.write(&[pfd(b.as_raw_fd(), libc::POLLIN)]).unwrap();
    let t = Instant::now();
    assert!(dp_poll(&mut dp, 4, 60).is_empty());
    assert!(t.elapsed() >= Duration::from_millis(55));
    assert_eq!(dp.ioctl_dp_poll(&mut [], -1).unwrap(), 0);
}

/// devpollperf runs and reports a positive time per event; bad sizes are refused.
#[test]
fn devpollperf_measures() {
    let ns = devpollperf(50, 2000).unwrap();
    eprintln!("devpollperf(50 fds): {ns:.0} ns/event");
    assert!(ns.is_finite() && ns > 0.0);
    assert_eq!(
        devpollperf(0, 10).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}
