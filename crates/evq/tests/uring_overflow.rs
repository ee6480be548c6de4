//! io_uring completion-ring overflow: with 4-entry rings (`EVQ_URING_ENTRIES=4`,
//! read when a uring queue is created) 500 sockets become readable at once, so the
//! kernel must park most CQEs (`IORING_SQ_CQ_OVERFLOW`) or end multishot polls.
//! Every socket must still be reported exactly once per arrival.
//!
//! The environment variable is process-wide, so this is its own test binary.

mod util;

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options};
use std::time::Duration;
use util::*;

const SOCKETS: usize = 500;

fn run(mode: Mode, already_ready: bool) {
    let mut q = EventQueue::with_backend(BackendKind::Uring).unwrap();
    let pairs = pairs(SOCKETS);
    let mut events = Events::with_capacity(32);
    if already_ready {
        for (_, peer) in &pairs {
            send(peer, 1);
        }
    }
    declare_readers(std::slice::from_mut(&mut q), &pairs, mode);
    if !already_ready {
        // Arm every poll while quiet, then make all ready at once.
        q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(events.is_empty());
        for (_, peer) in &pairs {
            send(peer, 1);
        }
    }
    let what = format!("{mode:?} ready={already_ready}");
    expect_each_reported_once(
        std::slice::from_mut(&mut q),
        &pairs,
        &mut events,
        Duration::from_millis(200),
        &what,
    );
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
            fd(&pairs[321].0),
            Interest::READ,
            Options::new(321).mode(mode),
        )
        .unwrap();
    }
    send(&pairs[321].1, 1);
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
