//! One registered descriptor's readiness, as the reactor reports it and tasks
//! consume it: a flag and a tick per direction (one atomic word each), and the
//! wakers waiting on them (behind a mutex).
//!
//! # The protocol, and why it loses no wake-up
//!
//! A registration in [`Mode::Event`](evq::Mode::Event) reports *changes* (data
//! arrived, buffer space freed), once each, and is never re-armed. So readiness is
//! state kept here, not something asked of the kernel again: the reactor sets
//! `ready` and bumps `tick` for every event (under this source's lock), and an I/O
//! operation that meets `WouldBlock` clears `ready` — but only if `tick` is still
//! the value it read *before* the operation:
//!
//! ```text
//! loop {
//!     tick = poll_ready(dir, cx)?;           // Pending: waker stored under the lock
//!     match op() {                           // read/write/accept on the descriptor
//!         Err(WouldBlock) => clear_ready(dir, tick),  // no-op if an event came since
//!         done => return done,
//!     }
//! }
//! ```
//!
//! Take an event E that the kernel queues after `op()` saw `WouldBlock` (in event
//! mode the kernel queues one for every arrival after that moment, and
//! `declare_interest`'s returned state covers a registration made later). The
//! reactor applies E under the lock: `tick += 1; ready = true; wake the stored
//! wakers`. Three orders are possible:
//!
//! 1. E before `clear_ready`: the tick no longer matches, `ready` stays set, and the
//!    loop tries `op()` again.
//! 2. E after `clear_ready` but before `poll_ready` takes the lock: `poll_ready`
//!    sees `ready` and returns at once.
//! 3. E after `poll_ready` stored the waker: E takes that waker and wakes it.
//!
//! The flag and tick are one atomic word, so the common paths (ready, or clearing
//! after a transfer) take no lock. The waker is stored under the waiters' mutex
//! and the word is read again *after* storing it; the reactor updates the word
//! (`SeqCst`) *before* it takes that mutex to collect wakers. If the reactor takes
//! the mutex after the task let go, it finds the waker (case 3); if before, its
//! update happened before the task took the mutex, so the task's re-read sees
//! `ready` (case 2). So there is no fourth order. An event from *before* the
//! failed `op()` either was consumed by it or left the tick changed (case 1); at
//! worst the loop makes one extra attempt. The unit tests at the end of this file take each order
//! in turn; `ping_pong_between_threads_loses_no_wake_up` in `tests/conformance.rs`
//! races them 4,000 times between two threads, on every backend.
//!
//! A *short* read or write (fewer bytes than asked) on a stream socket or pipe
//! means the kernel buffer was emptied (or filled) by that very call, so the same
//! `clear_ready(dir, tick)` is applied after it, saving the `WouldBlock` call that
//! would only confirm it; the argument above holds unchanged, since the tick was
//! read before the call. Only handles whose I/O object is known to make one system
//! call per transfer use this (`Source::drains`): a type that buffers in user space
//! could return short from its buffer while the descriptor still holds data.
//!
//! Backends without event mode (`select` and `poll` see only state; evq refuses
//! event mode there) use
//! [`Mode::Oneshot`](evq::Mode::Oneshot): the same protocol, plus the registration
//! is re-armed when a waiter appears for a direction the kernel is not watching.
//! `declare_interest` returns the state read after the re-arm, which the reactor
//! applies like an event, so a readiness that came before the re-arm is not lost.

use evq::Readiness;
use slab::Slab;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Which half of a descriptor an operation waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

impl Direction {
    fn index(self) -> usize {
        self as usize
    }
}

/// Bit 0 of a direction's word: ready. The rest: the tick, moved by every event.
const READY: u64 = 1;
const TICK: u64 = 2;

/// A `readable()`/`writable()` future's place in line.
#[derive(Default)]
struct Waiter {
    waker: Option<Waker>,
    /// Set when an event arrived while this waiter was in line: the future resolves
    /// even if another task has consumed (and cleared) the readiness since.
    notified: bool,
}

#[derive(Default)]
struct DirectionWaiters {
    /// The task of the I/O-trait path (`poll_read`, `poll_write`, `accept`): one per
    /// direction, the last one to poll (as in tokio and async-io).
    waker: Option<Waker>,
    /// `readable()` / `writable()` futures: any number.
    waiters: Slab<Waiter>,
}

impl DirectionWaiters {
    fn has_waiters(&self) -> bool {
        self.waker.is_some() || !self.waiters.is_empty()
    }
}

#[derive(Default)]
pub(crate) struct Waiters {
    dirs: [DirectionWaiters; 2],
    /// Oneshot mode only: the directions the kernel registration currently watches.
    armed: [bool; 2],
    /// Oneshot mode only: a re-arm is queued for the reactor.
    rearm_queued: bool,
    /// A deferred registration the queue refused; every operation reports it (the
    /// OS error code where there is one, else the kind and message).
    error: Option<(Option<i32>, io::ErrorKind, String)>,
}

/// A descriptor registered with the reactor.
pub(crate) struct Source {
    pub(crate) fd: RawFd,
    /// Slab key in the reactor, and the registration's evq token.
    pub(crate) key: usize,
    /// Oneshot re-arm mode (the backend has no event mode).
    pub(crate) oneshot: bool,
    /// The handle's I/O object is a std stream socket (or pipe) whose `read` and
    /// `write` are one system call each: a short transfer means the kernel buffer
    /// was drained (or filled), so readiness can be cleared without the `WouldBlock`
    /// call that would confirm it (tokio's rule for its own sockets).
    pub(crate) drains: bool,
    /// Per direction: `tick << 1 | ready`.
    readiness: [AtomicU64; 2],
    /// Set (before the flag words) when `Waiters::error` is.
    failed: AtomicBool,
    waiters: Mutex<Waiters>,
}

/// What a caller of `poll_ready` must do after a `Pending` in oneshot mode.
pub(crate) enum Rearm {
    No,
    Needed,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, oneshot: bool, drains: bool) -> Source {
        Source {
            fd,
            key,
            oneshot,
            drains,
            readiness: [AtomicU64::new(0), AtomicU64::new(0)],
            failed: AtomicBool::new(false),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// A registration handed to another thread: until it reports the real state,
    /// assume both directions ready (a wrong guess costs one `WouldBlock`).
    pub(crate) fn set_optimistic(&self) {
        for word in &self.readiness {
            word.fetch_or(READY, Ordering::SeqCst);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        // A panic while holding this lock cannot leave the state half-written (every
        // critical section is a few field assignments), so a poisoned lock is used.
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, waiters: &Waiters) -> Option<io::Error> {
        waiters.error.as_ref().map(|(code, kind, msg)| match code {
            Some(code) => io::Error::from_raw_os_error(*code),
            None => io::Error::new(*kind, msg.clone()),
        })
    }

    /// Ready (returns the tick to pass to `clear_ready`), or the waker is stored and
    /// `Pending` returned. The second value says whether a oneshot re-arm must be
    /// queued (the caller does it, outside this lock).
    #[inline]
    pub(crate) fn poll_ready(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
    ) -> (Poll<io::Result<u64>>, Rearm) {
        let word = self.readiness[dir.index()].load(Ordering::Acquire);
        if word & READY != 0 && !self.failed.load(Ordering::Relaxed) {
            return (Poll::Ready(Ok(word >> 1)), Rearm::No);
        }
        self.poll_ready_slow(dir, cx)
    }

    #[cold]
    fn poll_ready_slow(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
    ) -> (Poll<io::Result<u64>>, Rearm) {
        let mut waiters = self.lock();
        if let Some(e) = self.error(&waiters) {
            return (Poll::Ready(Err(e)), Rearm::No);
        }
        match &mut waiters.dirs[dir.index()].waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        // Read again after storing the waker (see the module documentation).
        let word = self.readiness[dir.index()].load(Ordering::SeqCst);
        if word & READY != 0 {
            return (Poll::Ready(Ok(word >> 1)), Rearm::No);
        }
        (Poll::Pending, self.want_rearm(&mut waiters, dir))
    }

    /// Clears `ready` after an operation met `WouldBlock` (or a short transfer),
    /// unless an event arrived since `tick` was read.
    #[inline]
    pub(crate) fn clear_ready(&self, dir: Direction, tick: u64) {
        let _ = self.readiness[dir.index()].compare_exchange(
            (tick << 1) | READY,
            tick << 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }

    fn is_ready(&self, dir: Direction) -> bool {
        self.readiness[dir.index()].load(Ordering::SeqCst) & READY != 0
    }

    /// `readable()`/`writable()`: resolves if notified while in line or ready now;
    /// otherwise joins (or stays in) the line.
    pub(crate) fn poll_waiter(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        slot: &mut Option<usize>,
    ) -> (Poll<io::Result<()>>, Rearm) {
        if slot.is_none() && self.is_ready(dir) && !self.failed.load(Ordering::Relaxed) {
            return (Poll::Ready(Ok(())), Rearm::No);
        }
        let mut waiters = self.lock();
        if let Some(e) = self.error(&waiters) {
            if let Some(key) = slot.take() {
                waiters.dirs[dir.index()].waiters.remove(key);
            }
            return (Poll::Ready(Err(e)), Rearm::No);
        }
        let line = &mut waiters.dirs[dir.index()].waiters;
        let key = match *slot {
            Some(key) => {
                match &mut line[key].waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                key
            }
            None => {
                let key = line.insert(Waiter {
                    waker: Some(cx.waker().clone()),
                    notified: false,
                });
                *slot = Some(key);
                key
            }
        };
        // Read again after joining the line (see the module documentation).
        if line[key].notified || self.is_ready(dir) {
            line.remove(key);
            *slot = None;
            return (Poll::Ready(Ok(())), Rearm::No);
        }
        (Poll::Pending, self.want_rearm(&mut waiters, dir))
    }

    /// A `readable()`/`writable()` future dropped before it resolved leaves the line.
    pub(crate) fn remove_waiter(&self, dir: Direction, key: usize) {
        let mut waiters = self.lock();
        let line = &mut waiters.dirs[dir.index()].waiters;
        if line.contains(key) {
            line.remove(key);
        }
    }

    fn want_rearm(&self, waiters: &mut Waiters, dir: Direction) -> Rearm {
        if self.oneshot && !waiters.armed[dir.index()] && !waiters.rearm_queued {
            waiters.rearm_queued = true;
            Rearm::Needed
        } else {
            Rearm::No
        }
    }

    /// Applies an event or a registration's returned state: every direction it
    /// answers becomes ready, its tick moves, and its wakers are pushed to `wakers`
    /// (woken by the caller after it lets go of the reactor's locks).
    pub(crate) fn set_readiness(&self, readiness: Readiness, event: bool, wakers: &mut Vec<Waker>) {
        let everything = readiness.intersects(Readiness::HUP | Readiness::ERROR);
        let hits = [
            everything || readiness.contains(Readiness::READ),
            everything || readiness.contains(Readiness::WRITE),
        ];
        // The words first, then the mutex (see the module documentation).
        for (word, hit) in self.readiness.iter().zip(hits) {
            if hit {
                let _ = word.fetch_update(Ordering::SeqCst, Ordering::Relaxed, |w| {
                    Some(((w & !READY) + TICK) | READY)
                });
            }
        }
        let mut waiters = self.lock();
        if event && self.oneshot {
            // A oneshot registration is disarmed by the event that reported it.
            waiters.armed = [false; 2];
        }
        for (d, hit) in waiters.dirs.iter_mut().zip(hits) {
            if !hit {
                continue;
            }
            wakers.extend(d.waker.take());
            for (_, waiter) in d.waiters.iter_mut() {
                waiter.notified = true;
                wakers.extend(waiter.waker.take());
            }
        }
    }

    /// Oneshot mode: the directions to arm now (those with a waiter and not ready),
    /// recorded as armed. Empty means nothing to arm.
    pub(crate) fn take_rearm(&self) -> (bool, bool) {
        let mut waiters = self.lock();
        waiters.rearm_queued = false;
        let want = |i: usize, d: &DirectionWaiters| {
            d.has_waiters() && self.readiness[i].load(Ordering::SeqCst) & READY == 0
        };
        let (r, w) = (want(0, &waiters.dirs[0]), want(1, &waiters.dirs[1]));
        waiters.armed = [r, w];
        (r, w)
    }

    /// Records that the registration watches both directions (oneshot mode, at
    /// registration).
    pub(crate) fn set_armed_both(&self) {
        self.lock().armed = [true, true];
    }

    /// A deferred registration failed: every operation on the handle reports it, and
    /// every waiter is woken to see it.
    pub(crate) fn set_error(&self, err: &io::Error, wakers: &mut Vec<Waker>) {
        let mut waiters = self.lock();
        waiters.error = Some((err.raw_os_error(), err.kind(), err.to_string()));
        self.failed.store(true, Ordering::SeqCst);
        for d in &mut waiters.dirs {
            wakers.extend(d.waker.take());
            wakers.extend(d.waiters.iter_mut().filter_map(|(_, w)| w.waker.take()));
        }
    }

    /// A deferred registration failed.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Waiters in line (both directions), for the reactor's statistics and tests.
    pub(crate) fn waiter_count(&self) -> usize {
        let waiters = self.lock();
        waiters.dirs.iter().map(|d| d.waiters.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    //! The three orders of the module documentation, one at a time.
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Counter>, Waker) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn ready_tick(s: &Source, cx: &mut Context<'_>) -> u64 {
        match s.poll_ready(Direction::Read, cx).0 {
            Poll::Ready(Ok(t)) => t,
            other => panic!(
                "expected ready, got {:?}",
                other.map(|r| r.map_err(|e| e.kind()))
            ),
        }
    }

    fn event(s: &Source) -> Vec<Waker> {
        let mut wakers = Vec::new();
        s.set_readiness(Readiness::READ, true, &mut wakers);
        wakers
    }

    #[test]
    fn event_before_clear_keeps_ready() {
        let s = Source::new(0, 0, false, true);
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        event(&s);
        let tick = ready_tick(&s, &mut cx);
        // op() meets WouldBlock; meanwhile another event lands:
        event(&s);
        s.clear_ready(Direction::Read, tick);
        assert_ne!(
            ready_tick(&s, &mut cx),
            tick,
            "order 1: still ready, new tick"
        );
    }

    #[test]
    fn event_between_clear_and_poll_is_seen() {
        let s = Source::new(0, 0, false, true);
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        event(&s);
        let tick = ready_tick(&s, &mut cx);
        s.clear_ready(Direction::Read, tick);
        assert!(event(&s).is_empty(), "no waker stored yet");
        ready_tick(&s, &mut cx); // order 2: ready at once
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn event_after_the_waker_is_stored_wakes_it() {
        let s = Source::new(0, 0, false, true);
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        event(&s);
        let tick = ready_tick(&s, &mut cx);
        s.clear_ready(Direction::Read, tick);
        assert!(s.poll_ready(Direction::Read, &mut cx).0.is_pending());
        for w in event(&s) {
            w.wake(); // order 3
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        ready_tick(&s, &mut cx);
    }

    #[test]
    fn a_dropped_waiter_is_not_woken_and_others_are() {
        let s = Source::new(0, 0, false, true);
        let (gone, gone_waker) = counting();
        let (kept, kept_waker) = counting();
        let mut gone_slot = None;
        let mut kept_slot = None;
        let p = s.poll_waiter(
            Direction::Read,
            &mut Context::from_waker(&gone_waker),
            &mut gone_slot,
        );
        assert!(p.0.is_pending());
        let p = s.poll_waiter(
            Direction::Read,
            &mut Context::from_waker(&kept_waker),
            &mut kept_slot,
        );
        assert!(p.0.is_pending());
        s.remove_waiter(Direction::Read, gone_slot.unwrap());
        assert_eq!(s.waiter_count(), 1);
        for w in event(&s) {
            w.wake();
        }
        assert_eq!(gone.0.load(Ordering::SeqCst), 0);
        assert_eq!(kept.0.load(Ordering::SeqCst), 1);
        // Notified while in line: resolves even if the readiness is consumed first.
        let tick = ready_tick(&s, &mut Context::from_waker(&kept_waker));
        s.clear_ready(Direction::Read, tick);
        let p = s.poll_waiter(
            Direction::Read,
            &mut Context::from_waker(&kept_waker),
            &mut kept_slot,
        );
        assert!(matches!(p.0, Poll::Ready(Ok(()))));
        assert_eq!(s.waiter_count(), 0);
    }

    #[test]
    fn a_short_transfer_clear_loses_nothing_either() {
        // The clear after a short read uses the tick read before the call, exactly
        // like the one after WouldBlock: an event in between survives it.
        let s = Source::new(0, 0, false, true);
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        event(&s);
        let tick = ready_tick(&s, &mut cx);
        event(&s); // data arrived after the short read returned
        s.clear_ready(Direction::Read, tick);
        ready_tick(&s, &mut cx);
    }

    #[test]
    fn a_failed_registration_is_reported_to_every_waiter() {
        let s = Source::new(0, 0, false, true);
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        s.set_optimistic();
        let tick = ready_tick(&s, &mut cx);
        s.clear_ready(Direction::Read, tick);
        assert!(s.poll_ready(Direction::Read, &mut cx).0.is_pending());
        let mut wakers = Vec::new();
        s.set_error(&io::Error::from_raw_os_error(libc::EPERM), &mut wakers);
        wakers.into_iter().for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        match s.poll_ready(Direction::Write, &mut cx).0 {
            Poll::Ready(Err(e)) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
            _ => panic!("the error is reported on every direction"),
        }
    }
}
