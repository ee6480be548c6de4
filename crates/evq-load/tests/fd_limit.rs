//! Running out of descriptors is counted (`fd-unavail`), not fatal. A test binary of
//! its own, because it lowers this process's `RLIMIT_NOFILE` for good.

mod support;

use evq_load::{run_load, ErrorKind, LoadConfig};
use std::time::{Duration, Instant};
use support::{start, Behaviour};

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count() as u64)
}

#[test]
fn emfile_is_fd_unavail_and_the_run_ends() {
    let srv = start(Behaviour::Silent);
    let limit = open_fds() + 40;
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads a valid rlimit struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
    let mut cfg = LoadConfig::open("127.0.0.1", srv.port, 400.0, 100);
    cfg.timeout = Some(Duration::from_secs(1));
    cfg.max_time = Some(Duration::from_secs(30));
    let t = Instant::now();
    let r = run_load(&cfg).expect("running out of descriptors is not fatal");
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(r.connections, 100);
    assert!(r.errors.get(ErrorKind::FdUnavail) > 0, "{}", r.summary());
    assert_eq!(r.errors.total(), 100, "{}", r.summary());
}
