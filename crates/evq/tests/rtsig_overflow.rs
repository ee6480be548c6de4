//! RT signal queue overflow (SEEDS 001): with `RLIMIT_SIGPENDING` lowered to 64,
//! 500 sockets become readable at once; the kernel can queue only 64 signals and
//! raises SIGIO for the rest. Every socket must still be reported, exactly once per
//! arrival, and none that is not ready.
//!
//! The limit is lowered for this whole process, so this is its own test binary with
//! one test (the backends run one after the other).

mod util;

use evq::{BackendKind, EventQueue, Events, Mode};
use std::time::Duration;
use util::*;

const SOCKETS: usize = 500;
const LIMIT: u64 = 64;

fn sigq() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("SigQ:"))
        .unwrap_or("SigQ: ?")
        .to_string()
}

fn set_limits() {
    let (_, hard) = rlimit::Resource::NOFILE.get().expect("getrlimit");
    let soft = hard.min(4096);
    rlimit::Resource::NOFILE
        .set(soft, hard)
        .expect("setrlimit NOFILE");
    assert!(soft as usize > 2 * SOCKETS + 64, "RLIMIT_NOFILE too low");
    let (_, hard) = rlimit::Resource::SIGPENDING.get().expect("getrlimit");
    rlimit::Resource::SIGPENDING
        .set(LIMIT, hard)
        .expect("setrlimit SIGPENDING");
}

fn run(kind: BackendKind, mode: Mode) {
    let mut q = EventQueue::with_backend(kind).unwrap();
    let pairs = pairs(SOCKETS);
    declare_readers(std::slice::from_mut(&mut q), &pairs, mode);
    // Registration makes each fd a candidate once; let the queue look at them while
    // they are quiet so that only the signals below can report them.
    let mut events = Events::with_capacity(64);
    while q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap() > 0 {}

    for (_, peer) in &pairs {
        send(peer, 1);
    }
    let queued = sigq();
    eprintln!("{kind} {mode:?}: after {SOCKETS} writes: {queued}");
    let count: u64 = queued
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(count >= LIMIT, "the RT queue did not fill: {queued}");

    let what = format!("{kind} {mode:?}");
    expect_each_reported_once(
        std::slice::from_mut(&mut q),
        &pairs,
        &mut events,
        Duration::from_millis(200),
        &what,
    );
    // The queue says it went through the recovery this test is about.
    assert!(q.stats().overflows >= 1, "{kind} {mode:?}: {:?}", q.stats());
    assert_eq!(
        q.get_next_event(&mut events, Some(Duration::from_millis(50)))
            .unwrap(),
        0,
        "{kind} {mode:?}: events after everything was read"
    );

    // Signals work again after recovery.
    send(&pairs[123].1, 1);
    q.get_next_event(&mut events, Some(Duration::from_secs(5)))
        .unwrap();
    let tokens: Vec<_> = events.iter().map(|e| e.token()).collect();
    assert_eq!(tokens, vec![123], "{kind} {mode:?}");
}

/// Two queues waited on by one thread share its SIGIO: whichever dequeues it, both
/// must recover (the overflow epoch).
fn two_queues_one_thread(kind: BackendKind) {
    let mut queues = [
        EventQueue::with_backend(kind).unwrap(),
        EventQueue::with_backend(kind).unwrap(),
    ];
    let pairs = pairs(SOCKETS);
    declare_readers(&mut queues, &pairs, Mode::Level);
    let mut events = Events::with_capacity(64);
    for q in &mut queues {
        while q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap() > 0 {}
    }
    for (_, peer) in &pairs {
        send(peer, 1);
    }
    let what = format!("{kind} two queues");
    expect_each_reported_once(
        &mut queues,
        &pairs,
        &mut events,
        Duration::from_millis(20),
        &what,
    );
}

#[test]
fn every_ready_socket_is_reported_after_sigio_overflow() {
    set_limits();
    for kind in [BackendKind::RtSig, BackendKind::RtSigBulk] {
        for mode in [Mode::Level, Mode::Event] {
            run(kind, mode);
        }
        two_queues_one_thread(kind);
    }
}
