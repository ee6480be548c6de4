//! io_uring completion-ring overflow: with 4-entry rings (`EVQ_URING_ENTRIES=4`,
//! read when a uring queue is created) 500 sockets become readable at once, so the
//! kernel must park most CQEs (`IORING_SQ_CQ_OVERFLOW`) or end multishot polls.
//! Every socket must still be reported exactly once per arrival.
//!
//! The environment variable is process-wide, so this is its own test binary.

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const SOCKETS: usize = 500;

fn raise_nofile() {
    let (_, hard) = rlimit::Resource::NOFILE.get().expect("getrlimit");
    rlimit::Resource::NOFILE
        .set(hard.min(4096), hard)
        .expect("setrlimit NOFILE");
}

fn run(mode: Mode, already_ready: bool) {
    let mut q = EventQueue::with_backend(BackendKind::Uring).unwrap();
    let pairs: Vec<(UnixStream, UnixStream)> = (0..SOCKETS)
        .map(|_| {
            let (a, b) = UnixStream::pair().unwrap();
            b.set_nonblocking(true).unwrap();
            (a, b)
        })
        .collect();
    let mut events = Events::with_capacity(32);
    if already_ready {
        for (a, _) in &pairs {
            (&*a).write_all(b"x").unwrap();
        }
    }
    for (i, (_, b)) in pairs.iter().enumerate() {
        q.declare_interest(
            b.as_raw_fd(),
            Interest::READ,
            Options::new(i as u64).mode(mode),
        )
        .unwrap();
    }
    if !already_ready {
        // Arm every poll while quiet, then make all ready at once.
        q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(events.is_empty());
        for (a, _) in &pairs {
            (&*a).write_all(b"x").unwrap();
        }
    }
    let mut seen = vec![0u32; SOCKETS];
    let mut buf = [0u8; 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.contains(&0) && Instant::now() < deadline {
        q.get_next_event(&mut events, Some(Duration::from_millis(200)))
            .unwrap();
        for e in events.iter() {
            let i = e.token() as usize;
            assert!(i < SOCKETS && e.is_readable(), "{e:?}");
            let r = (&pairs[i].1).read(&mut buf);
            assert!(
                matches!(r, Ok(1)),
                "{mode:?} ready={already_ready}: {i} reported but read gave {r:?} (seen {} times)",
                seen[i]
            );
            seen[i] += 1;
        }
    }
    let missing: Vec<_> = (0..SOCKETS).filter(|&i| seen[i] == 0).collect();
    assert!(missing.is_empty(), "{mode:?}: lost {missing:?}");
    assert!(seen.iter().all(|&n| n == 1), "{mode:?}: duplicates");
    // The CQ (4 entries) really overflowed, and the queue says it recovered.
    // When the sockets become ready after their polls were armed, the wake-ups post
    // 500 completions into a 4-entry CQ: it overflows, and the queue says it
    // recovered. Polls armed on sockets already ready complete at submission,
    // which the kernel flow-controls instead (-EBUSY, quirk d), except multishot.
    if !already_ready || mode == Mode::Event {
        assert!(q.stats().overflows >= 1, "{mode:?}: {:?}", q.stats());
    }
    assert_eq!(
        q.get_next_event(&mut events, Some(Duration::from_millis(50)))
            .unwrap(),
        0,
        "{mode:?}: events after everything was read"
    );
    if mode == Mode::Oneshot {
        q.declare_interest(
            pairs[321].1.as_raw_fd(),
            Interest::READ,
            Options::new(321).mode(mode),
        )
        .unwrap();
    }
    (&pairs[321].0).write_all(b"y").unwrap();
    q.get_next_event(&mut events, Some(Duration::from_secs(5)))
        .unwrap();
    let tokens: Vec<_> = events.iter().map(|e| e.token()).collect();
    assert_eq!(tokens, vec![321], "{mode:?}");
}

#[test]
fn every_ready_socket_is_reported_after_cq_overflow() {
    raise_nofile();
    std::env::set_var("EVQ_URING_ENTRIES", "4");
    if let Err(e) = BackendKind::Uring.available() {
        evq_testkit::skip("uring", format!("io_uring unavailable: {e}"));
        return;
    }
    for mode in [Mode::Level, Mode::Event, Mode::Oneshot] {
        for already_ready in [false, true] {
            run(mode, already_ready);
        }
    }
}
