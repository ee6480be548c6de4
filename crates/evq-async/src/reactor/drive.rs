//! Waiting on the queue and dispatching what it delivers; idle threads that wait
//! in line to take the queue over.

use super::timers::TimerSlot;
use super::Sleeper;
use super::{lock, with_wakers, Driver, Reactor, TIMER_TAG};
use crate::source::Source;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

impl Reactor {
    /// Waits on the queue (at most `timeout`) if no other thread holds it, and
    /// dispatches what comes. Returns false if the queue was held elsewhere.
    /// `sleeper`, if given, is the calling thread's: a wake-up for it while it is
    /// blocked here goes through the notifier.
    pub(crate) fn try_drive(&self, timeout: Option<Duration>, sleeper: Option<&Sleeper>) -> bool {
        let Some(mut driver) = self.try_lock() else {
            return false;
        };
        with_wakers(|wakers| {
            self.drive(&mut driver, timeout, sleeper, wakers);
            self.release(driver, wakers);
        });
        true
    }

    /// For the fallback thread while loops of ours run: if no thread has waited
    /// on the queue since `seen` (the count of waits at its last look), the loops
    /// are held elsewhere, so it looks at the queue without waiting, if nobody
    /// holds it. True if that look dispatched anything. Loops that keep waiting
    /// (an idle one in the kernel, a busy one between tasks) are left alone: a
    /// look then would only move their events to another thread.
    pub(super) fn look_if_stalled(&self, seen: &mut u64) -> bool {
        let waits = self.counters.waits.load(Ordering::Relaxed);
        if waits != *seen {
            *seen = waits;
            return false;
        }
        let before = self.counters.events.load(Ordering::Relaxed);
        let looked = self.try_drive(Some(Duration::ZERO), None);
        *seen = self.counters.waits.load(Ordering::Relaxed);
        looked && self.counters.events.load(Ordering::Relaxed) != before
    }

    // `drive` and `dispatch` are inlined into both callers (`try_drive`, `sleep`):
    // out of line they cost ~75 instructions a request in `bench_async`'s echo
    // (callgrind: 1,776 against 1,701), 4% of it.
    #[inline(always)]
    pub(super) fn drive(
        &self,
        driver: &mut Driver,
        mut timeout: Option<Duration>,
        sleeper: Option<&Sleeper>,
        wakers: &mut Vec<Waker>,
    ) {
        let blocking = timeout != Some(Duration::ZERO);
        if blocking {
            self.waiting.store(true, Ordering::SeqCst);
            // From here on a notify must reach the eventfd. Cleared *before* the
            // pending list is read: a thread that pushed an op and found the flag
            // still set from an earlier, already consumed notify would otherwise
            // skip its notify, and the op would wait for an unrelated event. A
            // notify sent before this point either left the eventfd readable (the
            // wait returns at once) or announced an op that the list read below
            // sees.
            self.notify_sent.store(false, Ordering::SeqCst);
        }
        self.apply_ops(driver, wakers);
        let mut driving = false;
        if blocking {
            driving = sleeper.is_none_or(Sleeper::begin_driving);
            if !driving || !wakers.is_empty() {
                // Something is already due: look, do not sleep.
                timeout = Some(Duration::ZERO);
            }
        }
        self.counters.waits.fetch_add(1, Ordering::Relaxed);
        let Driver { queue, events, .. } = driver;
        let result = queue.get_next_event(events, timeout);
        if blocking {
            self.waiting.store(false, Ordering::SeqCst);
            if driving {
                if let Some(s) = sleeper {
                    s.end_driving();
                }
            }
        }
        if let Err(e) = result {
            // The queue's errors are the kernel's (EINTR is retried inside evq);
            // nothing can be done here but not spin on it.
            debug_assert!(false, "get_next_event failed: {e}");
            return;
        }
        self.dispatch(driver, wakers);
    }

    #[inline(always)]
    pub(super) fn dispatch(&self, driver: &mut Driver, wakers: &mut Vec<Waker>) {
        if driver.events.is_empty() {
            return;
        }
        let mut dispatched = 0u64;
        let mut rearm: Vec<Arc<Source>> = Vec::new();
        {
            let sources = lock(&self.sources);
            for ev in driver.events.iter() {
                if ev.is_notify() {
                    continue;
                }
                if ev.is_timer() {
                    continue;
                }
                dispatched += 1;
                if let Some(source) = sources.slab.get(ev.token() as usize) {
                    source.set_readiness(ev.readiness(), true, wakers);
                    if self.oneshot {
                        rearm.push(source.clone());
                    }
                }
            }
        }
        for ev in driver.events.iter().filter(|e| e.is_timer()) {
            let slot = (ev.token() & !TIMER_TAG) as usize;
            if let Some(id) = driver.timer_ids.get_mut(slot) {
                *id = None;
            }
            let mut timers = lock(&self.timers);
            if let Some(TimerSlot::Waiting(w)) = timers.get_mut(slot) {
                wakers.extend(w.take());
                timers[slot] = TimerSlot::Fired;
            }
            dispatched += 1;
        }
        self.counters
            .events
            .fetch_add(dispatched, Ordering::Relaxed);
        // Oneshot: the event disarmed the registration; directions still waited on
        // are armed again at once.
        for source in rearm {
            self.rearm_now(driver, &source, wakers);
        }
    }

    // ---- idle threads --------------------------------------------------------

    /// Puts an idle thread to sleep until `sleeper` is woken or events it may care
    /// about were dispatched: it waits on the queue if it is free, else parks in
    /// line to take the queue over when its holder lets go.
    ///
    /// Why a thread in line is not stranded: it joins the line (`SeqCst`) and then
    /// tries the lock once more; a holder unlocks and then looks at the line
    /// ([`Reactor::release`]). Either the second try succeeds or the holder's look
    /// comes after the join and hands the queue to someone in line. A thread handed
    /// the queue comes back here to take it (or joins the line again if another
    /// was quicker, whose release then looks at the line); one woken for itself
    /// first is skipped, and one woken for itself after it was handed the queue
    /// passes it on ([`Sleeper::wake_up`]). So the queue is never let go with the
    /// line asleep, whatever the woken thread's loop does next.
    pub(crate) fn sleep(&self, sleeper: &Arc<Sleeper>) {
        loop {
            if self.try_drive(None, Some(sleeper)) {
                return;
            }
            {
                let mut line = lock(&self.handoff);
                line.push(sleeper.clone());
                self.handoff_len.store(line.len(), Ordering::SeqCst);
            }
            if self.fallback_driving.load(Ordering::SeqCst) {
                // The fallback thread only drives while nobody else will; make it
                // yield. Written past `notify`'s coalescing: a flag left set by a
                // notify the fallback already consumed (it clears the flag only as
                // it starts its next wait) would swallow this one.
                self.counters.notifies.fetch_add(1, Ordering::Relaxed);
                let _ = self.notifier.notify();
            }
            fence(Ordering::SeqCst);
            if let Some(mut driver) = self.try_lock() {
                self.leave_line(sleeper);
                // Out of the line nobody can hand it the queue; a hand-over made
                // before that is this very lock.
                sleeper.take_hand_over();
                with_wakers(|wakers| {
                    self.drive(&mut driver, None, Some(sleeper), wakers);
                    self.release(driver, wakers);
                });
                return;
            }
            sleeper.park();
            self.leave_line(sleeper);
            if !sleeper.take_hand_over() {
                return; // woken for itself
            }
        }
    }

    pub(super) fn leave_line(&self, sleeper: &Arc<Sleeper>) {
        let mut line = lock(&self.handoff);
        line.retain(|s| !Arc::ptr_eq(s, sleeper));
        self.handoff_len.store(line.len(), Ordering::SeqCst);
    }

    /// The queue was let go: hand it to a thread in line so that somebody keeps
    /// watching it while the last holder runs tasks. Threads in line already woken
    /// for themselves are passed over (they leave the line on their own).
    #[inline]
    pub(super) fn hand_off(&self) {
        if self.handoff_len.load(Ordering::SeqCst) != 0 {
            self.hand_off_to_the_line();
        }
    }

    #[cold]
    #[inline(never)]
    fn hand_off_to_the_line(&self) {
        let mut line = lock(&self.handoff);
        while let Some(next) = line.pop() {
            if next.hand_over() {
                break;
            }
        }
        self.handoff_len.store(line.len(), Ordering::SeqCst);
    }

    pub(crate) fn set_fallback_driving(&self, on: bool) {
        self.fallback_driving.store(on, Ordering::SeqCst);
    }
}
