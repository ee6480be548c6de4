//! Timers on evq's heap: armed at first poll, cancelled on drop, their slots
//! freed only when the queue can no longer fire them.

use super::{lock, with_wakers, Driver, Op, Reactor, TIMER_TAG};
use std::task::Waker;
use std::time::Instant;

/// A timer's state, shared between its future and the reactor.
pub(super) enum TimerSlot {
    Waiting(Option<Waker>),
    Fired,
    /// Dropped before it fired; the slot is freed when its `CancelTimer` is applied
    /// (so it cannot be reused while the queue may still fire it).
    Abandoned,
}

impl Reactor {
    /// Arms a timer; returns its slot.
    pub(crate) fn insert_timer(&self, deadline: Instant, waker: Waker) -> usize {
        let slot = lock(&self.timers).insert(TimerSlot::Waiting(Some(waker)));
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.add_timer_now(&mut driver, slot, deadline);
                self.release(driver, wakers);
            });
        } else {
            self.push_op(Op::AddTimer(slot, deadline));
        }
        slot
    }

    pub(super) fn add_timer_now(&self, driver: &mut Driver, slot: usize, deadline: Instant) {
        if driver.timer_ids.len() <= slot {
            driver.timer_ids.resize(slot + 1, None);
        }
        driver.timer_ids[slot] = Some(driver.queue.add_timer(deadline, TIMER_TAG | slot as u64));
    }

    /// True once the timer fired (its slot is then freed); else updates the waker.
    pub(crate) fn poll_timer(&self, slot: usize, waker: &Waker) -> bool {
        let mut timers = lock(&self.timers);
        match &mut timers[slot] {
            TimerSlot::Fired => {
                timers.remove(slot);
                true
            }
            TimerSlot::Waiting(w) => {
                match w {
                    Some(w) if w.will_wake(waker) => {}
                    w => *w = Some(waker.clone()),
                }
                false
            }
            TimerSlot::Abandoned => unreachable!("a live timer's slot is never abandoned"),
        }
    }

    /// A timer dropped or reset: frees a fired slot, or cancels an armed one.
    pub(crate) fn remove_timer(&self, slot: usize) {
        {
            let mut timers = lock(&self.timers);
            if let TimerSlot::Fired = timers[slot] {
                timers.remove(slot);
                return;
            }
            timers[slot] = TimerSlot::Abandoned;
        }
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.cancel_timer_now(&mut driver, slot);
                self.release(driver, wakers);
            });
        } else {
            // No wake-up: a cancelled timer that fires meanwhile is ignored, and the
            // slot is freed when the holder gets to this op.
            self.push_op_quietly(Op::CancelTimer(slot));
        }
    }

    pub(super) fn cancel_timer_now(&self, driver: &mut Driver, slot: usize) {
        if let Some(id) = driver.timer_ids.get_mut(slot).and_then(Option::take) {
            driver.queue.cancel_timer(id);
        }
        lock(&self.timers).remove(slot);
    }
}
