//! How an idle thread sleeps: it drives the reactor if nobody else does, and parks
//! otherwise — and how another thread wakes it in either case.
//!
//! A [`Sleeper`] is one thread's wake-up target. Its state says where the thread is:
//! running (`IDLE`), woken while running (`NOTIFIED`), parked on its futex
//! (`PARKED`), blocked in `get_next_event` (`DRIVING`), or handed the queue by the
//! thread that let it go (`HANDED`). [`Sleeper::wake_up`] swaps in `NOTIFIED` and,
//! depending on what it replaced, unparks the thread or wakes the queue through
//! evq's [`Notifier`](evq::Notifier) — the cross-thread waker. Because the swap is
//! one atomic step, a wake that races with the thread going to sleep either finds
//! it already asleep (and wakes it the right way) or leaves `NOTIFIED` behind,
//! which makes the sleep return at once.
//!
//! `HANDED` is a different wake-up: not "your task is ready" but "the queue is
//! free and you are next in line to watch it". A thread woken that way goes back
//! to the queue instead of returning to its loop, which might end (a `block_on`
//! whose future is done, the fallback thread while loops of ours run) and leave
//! the rest of the line asleep with nobody in the kernel. If a wake-up for the
//! thread itself replaces `HANDED`, the thread will return to run its task, so the
//! waker passes the queue on to the next in line.

use super::Reactor;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

const IDLE: u8 = 0;
const NOTIFIED: u8 = 1;
const PARKED: u8 = 2;
const DRIVING: u8 = 3;
const HANDED: u8 = 4;

/// One thread's wake-up target (see the module documentation).
pub(crate) struct Sleeper {
    state: AtomicU8,
    thread: Thread,
}

impl Sleeper {
    /// A sleeper for the calling thread.
    pub(crate) fn for_current_thread() -> Arc<Sleeper> {
        Arc::new(Sleeper {
            state: AtomicU8::new(IDLE),
            thread: thread::current(),
        })
    }

    /// Wakes the thread wherever it sleeps; if it is running, its next sleep
    /// returns at once.
    pub(crate) fn wake_up(&self) {
        match self.state.swap(NOTIFIED, Ordering::AcqRel) {
            PARKED => self.thread.unpark(),
            DRIVING => {
                if let Ok(reactor) = Reactor::get() {
                    reactor.notify();
                }
            }
            // Already unparked to take the queue over; now it will return to its
            // loop instead, so the queue goes to the next in line.
            HANDED => {
                if let Ok(reactor) = Reactor::get() {
                    reactor.hand_off();
                }
            }
            _ => {}
        }
    }

    /// Hands the queue to this thread, which waits in line: true if it takes it
    /// (it was parked or about to park), false if it is already awake for itself
    /// (`NOTIFIED`) and so will not watch the queue. Called under the line's lock,
    /// on a sleeper just taken out of the line.
    pub(crate) fn hand_over(&self) -> bool {
        if self
            .state
            .compare_exchange(PARKED, HANDED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.thread.unpark();
            return true;
        }
        // Between joining the line and parking: its park returns at once.
        self.state
            .compare_exchange(IDLE, HANDED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Takes a hand-over (only the owning thread calls this, out of the line):
    /// true if the thread was handed the queue and must go back to it.
    pub(crate) fn take_hand_over(&self) -> bool {
        self.state
            .compare_exchange(HANDED, IDLE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Consumes a pending notification (only the owning thread calls this).
    pub(crate) fn take_notification(&self) -> bool {
        self.state.swap(IDLE, Ordering::AcqRel) == NOTIFIED
    }

    /// Marks the thread as about to block in the reactor; false if a notification
    /// is already pending (then the thread must not block).
    pub(crate) fn begin_driving(&self) -> bool {
        self.state
            .compare_exchange(IDLE, DRIVING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Back from the reactor (the notification, if any, stays pending).
    pub(crate) fn end_driving(&self) {
        let _ = self
            .state
            .compare_exchange(DRIVING, IDLE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Parks until woken (or handed the queue). Returns at once if a notification
    /// is pending.
    pub(crate) fn park(&self) {
        self.park_until(None);
    }

    /// Parks until woken or until `timeout` has passed. Returns at once if a
    /// notification is pending.
    pub(crate) fn park_timeout(&self, timeout: Duration) {
        self.park_until(Some(Instant::now() + timeout));
    }

    fn park_until(&self, deadline: Option<Instant>) {
        if self
            .state
            .compare_exchange(IDLE, PARKED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        // `thread::park` may return spuriously; only a wake-up, a hand-over or the
        // deadline moves PARKED on.
        while self.state.load(Ordering::Acquire) == PARKED {
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        // Back to running unless a wake-up got there first (then
                        // it stays).
                        let _ = self.state.compare_exchange(
                            PARKED,
                            IDLE,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        return;
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
    }

    /// True while the thread is parked or driving (for tests of the hand-off).
    #[cfg(test)]
    pub(crate) fn is_asleep(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire), PARKED | DRIVING)
    }
}

impl Wake for Sleeper {
    fn wake(self: Arc<Self>) {
        self.wake_up();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_up();
    }
}

/// A waker that wakes `sleeper`.
pub(crate) fn waker_for(sleeper: &Arc<Sleeper>) -> Waker {
    Waker::from(sleeper.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `act` on another thread once `s`'s owner is asleep.
    fn once_asleep(
        s: &Arc<Sleeper>,
        act: impl FnOnce(&Sleeper) + Send + 'static,
    ) -> thread::JoinHandle<()> {
        let s = s.clone();
        thread::spawn(move || {
            while !s.is_asleep() {
                thread::sleep(Duration::from_millis(1));
            }
            act(&s);
        })
    }

    #[test]
    fn a_wake_before_park_is_not_lost() {
        let s = Sleeper::for_current_thread();
        s.wake_up();
        s.park(); // returns at once
        assert!(s.take_notification());
        assert!(!s.take_notification());
    }

    #[test]
    fn a_wake_from_another_thread_unparks() {
        let s = Sleeper::for_current_thread();
        let t = once_asleep(&s, Sleeper::wake_up);
        s.park();
        assert!(s.take_notification());
        t.join().unwrap();
    }

    #[test]
    fn a_pending_notification_refuses_to_drive() {
        let s = Sleeper::for_current_thread();
        s.wake_up();
        assert!(!s.begin_driving());
        assert!(s.take_notification());
        assert!(s.begin_driving());
        s.end_driving();
        assert!(!s.take_notification());
    }

    #[test]
    fn a_hand_over_unparks_and_is_taken_once() {
        let s = Sleeper::for_current_thread();
        let t = once_asleep(&s, |s| assert!(s.hand_over()));
        s.park();
        t.join().unwrap();
        assert!(s.take_hand_over());
        assert!(!s.take_hand_over());
        assert!(!s.take_notification(), "a hand-over is not a wake-up");
    }

    #[test]
    fn a_hand_over_before_park_makes_park_return() {
        let s = Sleeper::for_current_thread();
        assert!(s.hand_over());
        s.park(); // returns at once
        assert!(s.take_hand_over());
    }

    #[test]
    fn a_thread_woken_for_itself_refuses_the_queue() {
        let s = Sleeper::for_current_thread();
        s.wake_up();
        assert!(!s.hand_over());
        assert!(s.take_notification());
        assert!(s.begin_driving());
        assert!(!s.hand_over(), "a driving thread is not handed the queue");
        s.end_driving();
    }

    #[test]
    fn park_timeout_returns_by_itself_and_early_when_woken() {
        let s = Sleeper::for_current_thread();
        let start = Instant::now();
        s.park_timeout(Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(!s.take_notification());
        let t = once_asleep(&s, Sleeper::wake_up);
        let start = Instant::now();
        s.park_timeout(Duration::from_secs(60));
        assert!(start.elapsed() < Duration::from_secs(30));
        assert!(s.take_notification());
        t.join().unwrap();
    }
}
