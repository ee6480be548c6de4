//! The fallback thread that drives the reactor when no thread of ours does.
//!
//! Threads that run our loops ([`block_on`](crate::block_on), [`Executor`](crate::Executor)
//! workers) drive the reactor themselves when they are idle, so an event is
//! dispatched by a thread that is about to run the woken task anyway. A task on a
//! foreign executor (`futures::executor`, `async-executor`, …) has nobody of ours
//! waiting, so one background thread, `evq-async-fallback`, drives the reactor
//! while no loop of ours is active (the async-io design), and a loop that starts
//! while the fallback holds the queue makes it yield through the notifier.
//!
//! While loops of ours run, the fallback does not sit out entirely: a loop drives
//! only when it is idle, and one whose thread is held elsewhere — a synchronous
//! wait inside its future (`block_on(async { thread.join() })`), a long
//! computation — would leave a foreign task waiting on an event nobody dispatches
//! (a hang, if the thread joined is that task's). So the fallback checks now and
//! then — every [`LOOK_MIN`] at first, backing off to [`LOOK_MAX`] while there is
//! nothing to do — whether any thread has waited on the queue since its last
//! check, and if none has, it takes a look itself: a wait that does not block, if
//! the queue is free ([`Reactor::look_if_stalled`]; async-io polls with back-off
//! the same way). Loops that keep waiting are left alone: a first version looked
//! whenever the queue was free and, with one busy loop on one CPU, took hyper's
//! p99 from 0.9 ms to 2–3 ms by moving events to the fallback's thread.

use super::{Reactor, Sleeper};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

/// The fallback's first look at the queue after loops of ours start, and after
/// a look that dispatched something.
const LOOK_MIN: Duration = Duration::from_millis(1);
/// Its longest pause between looks while they find nothing.
const LOOK_MAX: Duration = Duration::from_millis(100);

/// Loops of ours (block_on calls, executor workers) now running.
static ACTIVE_LOOPS: AtomicUsize = AtomicUsize::new(0);

/// The fallback thread's wake-up target, once it is started.
static FALLBACK: OnceLock<Arc<Sleeper>> = OnceLock::new();

/// Starts the fallback thread (once). Called when the reactor is first used.
pub(super) fn start() {
    FALLBACK.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        thread::Builder::new()
            .name("evq-async-fallback".into())
            .spawn(move || {
                let sleeper = Sleeper::for_current_thread();
                // The receiver outlives this send: `get_or_init` waits for it.
                let _ = tx.send(sleeper.clone());
                fallback_main(&sleeper);
            })
            .expect("evq-async: cannot start the fallback thread");
        rx.recv()
            .expect("evq-async: the fallback thread died at start")
    });
}

fn fallback_main(sleeper: &Arc<Sleeper>) {
    let Ok(reactor) = Reactor::get() else {
        return;
    };
    let mut pause = LOOK_MIN;
    let mut seen_waits = 0;
    loop {
        sleeper.take_notification();
        if ACTIVE_LOOPS.load(Ordering::SeqCst) == 0 {
            reactor.set_fallback_driving(true);
            reactor.sleep(sleeper);
            reactor.set_fallback_driving(false);
            pause = LOOK_MIN;
        } else {
            // Loops of ours drive when they are idle; look now and then in case
            // none is (see the module documentation), until the last one ends.
            sleeper.park_timeout(pause);
            pause = if reactor.look_if_stalled(&mut seen_waits) {
                LOOK_MIN
            } else {
                (pause * 2).min(LOOK_MAX)
            };
        }
    }
}

/// Marks a loop of ours as running for its lifetime.
pub(crate) struct ActiveLoop(());

impl ActiveLoop {
    pub(crate) fn enter() -> ActiveLoop {
        ACTIVE_LOOPS.fetch_add(1, Ordering::SeqCst);
        ActiveLoop(())
    }
}

impl Drop for ActiveLoop {
    fn drop(&mut self) {
        if ACTIVE_LOOPS.fetch_sub(1, Ordering::SeqCst) == 1 {
            if let Some(fallback) = FALLBACK.get() {
                fallback.wake_up();
            }
        }
    }
}
