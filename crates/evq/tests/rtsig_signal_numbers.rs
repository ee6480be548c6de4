//! Each rtsig queue owns one real-time signal number; running out is a clear error
//! and a freed number is reused. Its own test binary: it holds every number for a
//! moment, which would make rtsig queues in concurrent tests fail.

use evq::{BackendKind, EventQueue};

#[test]
fn many_queues_exhaust_signals_cleanly() {
    let mut held = Vec::new();
    let err = loop {
        match EventQueue::with_backend(BackendKind::RtSig) {
            Ok(q) => held.push(q),
            Err(e) => break e,
        }
        assert!(held.len() < 100, "no limit on rtsig queues?");
    };
    eprintln!("after {} queues: {err}", held.len());
    assert!(err.to_string().contains("real-time signals"), "{err}");
    held.pop();
    EventQueue::with_backend(BackendKind::RtSigBulk).expect("a freed signal is reused");
}
