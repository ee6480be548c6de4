//! The fallback thread that drives the reactor when no thread of ours does.
//!
//! Threads that run our loops ([`block_on`](crate::block_on), [`Executor`](crate::Executor)
//! workers) drive the reactor themselves when they are idle, so an event is
//! dispatched by a thread that is about to run the woken task anyway. A task on a
//! foreign executor (`futures::executor`, `async-executor`, …) has nobody of ours
//! waiting, so one background thread, `evq-async-fallback`, drives the reactor
//! while no loop of ours is active (the async-io design, without its polling with
//! back-off: the fallback parks until the last loop ends, and a loop that starts
//! while the fallback holds the queue makes it yield through the notifier).

use super::{Reactor, Sleeper};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;

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
    loop {
        sleeper.take_notification();
        if ACTIVE_LOOPS.load(Ordering::SeqCst) == 0 {
            reactor.set_fallback_driving(true);
            reactor.sleep(sleeper);
            reactor.set_fallback_driving(false);
        } else {
            // A loop of ours drives; wait until the last one ends.
            sleeper.park();
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
