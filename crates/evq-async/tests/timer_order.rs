//! Timers are woken in deadline order — checked alone in this process, because
//! the order is the reactor's dispatch order and, with other threads of the
//! process driving the reactor too (other tests), wake-ups of two batches
//! dispatched by two threads may interleave.

mod util;

use evq_async::{Executor, Timer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Time left to arm every timer before the first one is due.
const ARMING: Duration = Duration::from_millis(200);

#[test]
fn timers_fire_in_deadline_order() {
    let ex = Executor::with_threads(0); // one worker: wake order is run order
    let fired = Arc::new(Mutex::new(Vec::new()));
    // When the last timer was armed (just before its first poll).
    let armed_by: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let start = Instant::now();
    ex.block_on(async {
        let tasks: Vec<_> = (0..40u64)
            .map(|i| {
                // Deadlines 2 ms apart, armed out of order — all of them before
                // the first is due. (The first was 5 ms away: under load, the
                // 40 spawns and first polls took longer, the earliest timers were
                // already due when armed and fired at once in the order they
                // were armed, which is the reverse: [0, 4, 3, 2, 1, 5, …]. A
                // timer due when armed fires at its first poll, by design.)
                let slot = (i * 17) % 40;
                let deadline = start + ARMING + Duration::from_millis(2 * slot);
                let fired = fired.clone();
                let armed_by = armed_by.clone();
                ex.spawn(async move {
                    let timer = Timer::at(deadline);
                    {
                        let mut last = armed_by.lock().unwrap();
                        let now = Instant::now();
                        *last = Some(last.map_or(now, |t| t.max(now)));
                    }
                    assert_eq!(timer.await, deadline);
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
    assert!(
        armed_by.lock().unwrap().is_some_and(|t| t < start + ARMING),
        "the timers were not all armed within {ARMING:?} (a very loaded machine): their \
         order says nothing"
    );
    assert_eq!(*fired.lock().unwrap(), (0..40).collect::<Vec<_>>());
    util::rerun_on_other_backends(&["--exact", "timers_fire_in_deadline_order"]);
}
