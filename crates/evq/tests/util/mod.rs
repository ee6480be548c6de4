//! Shared helpers for the conformance suite: sockets, waiting, and running a check
//! once per available backend.
#![allow(dead_code)]

use evq::{BackendKind, Capabilities, Event, EventQueue, Events, Interest, Mode, Options};
use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Long enough for a loaded 2-core box; tests only wait this long when failing.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Raises the soft descriptor limit to the hard one (20,000 on the CI machine).
pub fn raise_nofile() {
    rlimit::increase_nofile_limit(u64::MAX).expect("raise RLIMIT_NOFILE");
}

/// A connected, non-blocking socket pair: (ours, peer).
pub fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().expect("socketpair");
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

/// Runs `check` once per backend this kernel supports, naming the backend if it
/// panics. `needs` filters by capability; a backend this kernel lacks is printed,
/// and under `EVQ_REQUIRE_ALL=1` fails the test (`evq_testkit::skip`).
pub fn for_each_backend(needs: impl Fn(&Capabilities) -> bool, mut check: impl FnMut(BackendKind)) {
    raise_nofile();
    let mut ran = 0;
    for &kind in BackendKind::ALL {
        if !selected(kind) {
            continue;
        }
        if let Err(e) = kind.available() {
            evq_testkit::skip_backend(kind.name(), e);
            continue;
        }
        if !needs(&kind.capabilities()) {
            // Not a skip of something missing: the backend says it cannot do this.
            eprintln!("-- {kind}: capability not declared, not run");
            continue;
        }
        eprintln!("-- {kind}");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(kind)));
        if let Err(panic) = result {
            eprintln!("FAILED on backend {kind}");
            std::panic::resume_unwind(panic);
        }
        ran += 1;
    }
    assert!(ran > 0, "no backend ran this check");
}

/// Whether `EVQ_TEST_BACKENDS` (comma-separated names; unset = all) lets this run
/// cover `kind`. The kernel-module backends run inside a TCG guest
/// (`scripts/vm-test`), where time is dear: there the suites cover only them.
pub fn selected(kind: BackendKind) -> bool {
    std::env::var("EVQ_TEST_BACKENDS").map_or(true, |list| {
        list.split(',').any(|n| n.trim() == kind.name())
    })
}

/// Every backend.
pub fn every_backend(_: &Capabilities) -> bool {
    true
}

/// One `get_next_event` call, returning the events.
pub fn wait(q: &mut EventQueue, capacity: usize, timeout: Option<Duration>) -> Vec<Event> {
    let mut events = Events::with_capacity(capacity);
    let n = q
        .get_next_event(&mut events, timeout)
        .expect("get_next_event");
    assert_eq!(n, events.len());
    events.iter().copied().collect()
}

/// Waits until at least one event arrives (or PATIENCE passes, which fails).
pub fn wait_some(q: &mut EventQueue, capacity: usize) -> Vec<Event> {
    let got = wait(q, capacity, Some(PATIENCE));
    assert!(!got.is_empty(), "no event within {PATIENCE:?}");
    got
}

/// Looks without blocking.
pub fn peek(q: &mut EventQueue) -> Vec<Event> {
    wait(q, 1024, Some(Duration::ZERO))
}

pub fn fd(s: &impl AsRawFd) -> RawFd {
    s.as_raw_fd()
}

/// Writes `bytes` bytes to a socket (non-blocking; must fit).
pub fn send(s: &UnixStream, bytes: usize) {
    let buf = vec![b'x'; bytes];
    let n = unsafe_write(s.as_raw_fd(), &buf);
    assert_eq!(n, bytes as isize, "short write");
}

fn unsafe_write(fd: RawFd, buf: &[u8]) -> isize {
    // SAFETY: writes from a live slice of the given length.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) }
}

/// Reads everything available; returns the byte count.
pub fn drain(s: &UnixStream) -> usize {
    let mut total = 0;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reads into a live buffer of the given length.
        let n = unsafe { libc::read(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return total;
        }
        total += n as usize;
    }
}

/// `n` socket pairs from [`pair`]: (ours, peer).
pub fn pairs(n: usize) -> Vec<(UnixStream, UnixStream)> {
    (0..n).map(|_| pair()).collect()
}

/// Declares READ interest in our end of every pair, pair `i`'s with token `i` in
/// `queues[i % queues.len()]`.
pub fn declare_readers(queues: &mut [EventQueue], pairs: &[(UnixStream, UnixStream)], mode: Mode) {
    let n = queues.len();
    for (i, (ours, _)) in pairs.iter().enumerate() {
        queues[i % n]
            .declare_interest(fd(ours), Interest::READ, Options::new(i as u64).mode(mode))
            .expect("declare_interest");
    }
}

/// After each peer sent one byte: waits on `queues` in turn (`slice` each) until
/// our end of every pair was reported, or [`PATIENCE`] passes, and asserts that
/// each was reported exactly once, by the queue [`declare_readers`] put it in, and
/// that each report finds its byte (no event invented).
pub fn expect_each_reported_once(
    queues: &mut [EventQueue],
    pairs: &[(UnixStream, UnixStream)],
    events: &mut Events,
    slice: Duration,
    what: &str,
) {
    let mut seen = vec![0u32; pairs.len()];
    let mut buf = [0u8; 16];
    let deadline = Instant::now() + PATIENCE;
    while seen.contains(&0) && Instant::now() < deadline {
        let count = queues.len();
        for (n, q) in queues.iter_mut().enumerate() {
            q.get_next_event(events, Some(slice))
                .expect("get_next_event");
            for e in events.iter() {
                let i = e.token() as usize;
                assert!(i < pairs.len() && e.is_readable(), "{what}: {e:?}");
                assert_eq!(i % count, n, "{what}: event on the wrong queue");
                let r = (&pairs[i].0).read(&mut buf);
                assert!(
                    matches!(r, Ok(1)),
                    "{what}: {i} reported but read gave {r:?} (seen {} times)",
                    seen[i]
                );
                seen[i] += 1;
            }
        }
    }
    let missing: Vec<_> = (0..pairs.len()).filter(|&i| seen[i] == 0).collect();
    assert!(missing.is_empty(), "{what}: lost {missing:?}");
    assert!(seen.iter().all(|&n| n == 1), "{what}: duplicates");
}

/// The delivery modes `kind` declares it supports.
pub fn supported_modes(kind: BackendKind) -> Vec<Mode> {
    let caps = kind.capabilities();
    [
        (Mode::Level, caps.level),
        (Mode::Event, caps.event),
        (Mode::Oneshot, caps.oneshot),
    ]
    .into_iter()
    .filter_map(|(mode, has)| has.then_some(mode))
    .collect()
}

pub mod completion;
