//! Closing a descriptor without telling the queue. Alone in its own test binary:
//! select and poll watch numbers, so a test running in parallel that took the freed
//! number before the wait would make the old registration report the new file
//! (the limitation their quirks essays document, and why `EventQueue::close`
//! exists) — a race of the test harness, not of the backends.

mod util;

use evq::{EventQueue, Interest, Options};
use std::time::{Duration, Instant};
use util::*;

/// Closing a descriptor implicitly removes its interest (SEEDS 000), even when the
/// application did not go through the queue.
#[test]
fn plain_close_removes_interest_without_errors_or_spinning() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        let (other, other_peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        q.declare_interest(fd(&other), Interest::READ, Options::new(2))
            .unwrap();
        drop(ours);
        drop(peer);
        let t = Instant::now();
        let got = wait(&mut q, 8, Some(Duration::from_millis(50)));
        assert!(got.is_empty(), "{got:?}");
        assert!(t.elapsed() >= Duration::from_millis(45));
        send(&other_peer, 1);
        let got = wait_some(&mut q, 8);
        assert_eq!(got.iter().map(|e| e.token()).collect::<Vec<_>>(), vec![2]);
    });
}
