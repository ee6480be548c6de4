//! A `Notifier` still wakes a queue that moved to another thread while a wake-up
//! sent to its old thread was in flight.
//!
//! On the RT-signal backends a notify also sends the queue's signal to the waiting
//! thread, at most one in flight. A signal sent to a thread that then stops using
//! the queue stays pending there, out of reach; if the "in flight" mark stayed set
//! with it, every later notify to the queue's new thread would be silent (the
//! eventfd write alone cannot wake `sigtimedwait`). evq-async's reactor, whose
//! queue is waited on by whichever thread is idle, met exactly this.

use evq::{BackendKind, EventQueue, Events};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(10);

#[test]
fn notify_reaches_the_new_thread_after_a_kick_was_left_on_the_old_one() {
    for kind in BackendKind::candidates() {
        let mut queue = EventQueue::with_backend(kind).expect("queue");
        let notifier = queue.notifier();
        let mut events = Events::with_capacity(8);
        // This thread waits once (it becomes the queue's thread), then a notify is
        // sent to it that it never collects.
        queue
            .get_next_event(&mut events, Some(Duration::ZERO))
            .unwrap();
        notifier.notify().unwrap();
        let (to_waiter, ready) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            // The first wait on the new thread sees the pending notification.
            queue.get_next_event(&mut events, Some(PATIENCE)).unwrap();
            assert!(
                events.iter().any(|e| e.is_notify()),
                "{kind}: first notify lost"
            );
            to_waiter.send(()).unwrap();
            // The second must be woken by a notify sent while (or just before) it
            // waits, well before PATIENCE runs out.
            let n = queue.get_next_event(&mut events, Some(PATIENCE)).unwrap();
            (n, events.iter().any(|e| e.is_notify()))
        });
        ready.recv().unwrap();
        notifier.notify().unwrap();
        let (n, notified) = waiter.join().unwrap();
        assert!(
            n == 1 && notified,
            "{kind}: the notify after the move was lost"
        );
    }
}
