//! Timers are woken in deadline order — checked alone in this process, because
//! the order is the reactor's dispatch order and, with other threads of the
//! process driving the reactor too (other tests), wake-ups of two batches
//! dispatched by two threads may interleave.

mod util;

use evq_async::{Executor, Timer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn timers_fire_in_deadline_order() {
    let ex = Executor::with_threads(0); // one worker: wake order is run order
    let fired = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    ex.block_on(async {
        let tasks: Vec<_> = (0..40u64)
            .map(|i| {
                // Deadlines 2 ms apart, armed out of order.
                let slot = (i * 17) % 40;
                let deadline = start + Duration::from_millis(5 + 2 * slot);
                let fired = fired.clone();
                ex.spawn(async move {
                    assert_eq!(Timer::at(deadline).await, deadline);
                    assert!(Instant::now() >= deadline, "fired early");
                    fired.lock().unwrap().push(slot);
                })
            })
            .collect();
        for t in tasks {
            evq_async::timeout(util::PATIENCE, t)
                .await
                .expect("a timer never fired");
        }
    });
    assert_eq!(*fired.lock().unwrap(), (0..40).collect::<Vec<_>>());
    util::rerun_on_other_backends(&["--exact", "timers_fire_in_deadline_order"]);
}
