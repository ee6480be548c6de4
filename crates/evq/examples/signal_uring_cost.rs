//! Per-event cost of each backend on pipes, in one thread (issue 3's measurement).
//!
//! - `ping`: 1,000 pipes registered, one made readable at a time: write a byte,
//!   `get_next_event`, read it back. Cost per event includes the write and read.
//! - `burst`: 1,000 pipes registered, 64 made readable, then all 64 collected and
//!   read (batches of 64): the per-event cost when events come in batches, which is
//!   where bulk dequeue and the completion ring should help.
//!
//! ```text
//! cargo run -p evq --release --example signal_uring_cost [iterations [backend]]
//! ```

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options};
use std::os::fd::RawFd;
use std::time::Duration;

const PIPES: usize = 1000;
const BURST: usize = 64;

fn pipes() -> Vec<(RawFd, RawFd)> {
    (0..PIPES)
        .map(|_| {
            let mut fds = [0; 2];
            // SAFETY: pipe2 writes two descriptors into a live array.
            let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
            assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
            (fds[0], fds[1])
        })
        .collect()
}

fn poke(fd: RawFd) {
    // SAFETY: one byte from a live buffer.
    let n = unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    assert_eq!(n, 1);
}

fn take(fd: RawFd) {
    let mut b = [0u8; 8];
    // SAFETY: reads into a live buffer of the given length.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
    assert_eq!(n, 1);
}

/// CPU time of this process (user + system): on a shared, loaded machine it is far
/// steadier than wall time, and this loop never sleeps while events are pending.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn run(kind: BackendKind, mode: Mode, iterations: usize) -> std::io::Result<(f64, f64)> {
    let mut q = EventQueue::with_backend(kind)?;
    let p = pipes();
    for (i, &(r, _)) in p.iter().enumerate() {
        q.declare_interest(r, Interest::READ, Options::new(i as u64).mode(mode))?;
    }
    let mut events = Events::with_capacity(BURST);
    let patience = Some(Duration::from_secs(5));
    // Settle (registration makes some backends look once at every fd).
    while q.get_next_event(&mut events, Some(Duration::ZERO))? > 0 {}

    let start = cpu_now();
    for i in 0..iterations {
        let (r, w) = p[(i * 7) % PIPES];
        poke(w);
        let n = q.get_next_event(&mut events, patience)?;
        assert!(n >= 1, "{kind}: lost a ping");
        take(r);
    }
    let ping = (cpu_now() - start).as_nanos() as f64 / iterations as f64;

    let rounds = (iterations / BURST).max(1);
    let start = cpu_now();
    for round in 0..rounds {
        let base = (round * BURST * 3) % PIPES;
        for k in 0..BURST {
            poke(p[(base + k) % PIPES].1);
        }
        let mut got = 0;
        while got < BURST {
            q.get_next_event(&mut events, patience)?;
            for e in events.iter() {
                take(e.fd());
                got += 1;
            }
        }
        assert_eq!(got, BURST);
    }
    let burst = (cpu_now() - start).as_nanos() as f64 / (rounds * BURST) as f64;
    for (r, w) in p {
        q.forget(r);
        // SAFETY: closing descriptors this function opened.
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
    Ok((ping, burst))
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    // SAFETY: raising the soft descriptor limit with a live rlimit struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
    let only: Option<BackendKind> = std::env::args().nth(2).and_then(|s| s.parse().ok());
    println!("{PIPES} pipes registered, {iterations} iterations; CPU ns per event, best of 3");
    println!(
        "{:<16} {:>6} {:>12} {:>12}",
        "backend", "mode", "ping", "burst64"
    );
    for kind in [
        BackendKind::Epoll,
        BackendKind::Uring,
        BackendKind::RtSigBulk,
        BackendKind::RtSig,
        BackendKind::Poll,
    ] {
        if only.is_some_and(|o| o != kind) {
            continue;
        }
        if let Err(e) = kind.available() {
            println!("{kind:<16} unavailable: {e}");
            continue;
        }
        for mode in [Mode::Level, Mode::Event] {
            if mode == Mode::Event && !kind.capabilities().event {
                continue;
            }
            let n = if kind == BackendKind::Poll {
                iterations / 10
            } else {
                iterations
            };
            let best = (0..3).try_fold((f64::MAX, f64::MAX), |best, _| {
                run(kind, mode, n).map(|(p, b)| (best.0.min(p), best.1.min(b)))
            });
            match best {
                Ok((ping, burst)) => println!(
                    "{:<16} {:>6} {:>12.0} {:>12.0}",
                    kind.name(),
                    if mode == Mode::Level {
                        "level"
                    } else {
                        "event"
                    },
                    ping,
                    burst
                ),
                Err(e) => println!("{kind:<16} {mode:?}: error: {e}"),
            }
        }
    }
}
