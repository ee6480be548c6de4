//! One registered descriptor's readiness, as the reactor reports it and tasks
//! consume it: a flag and a tick per direction, and the wakers waiting on them.
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
//! `poll_ready`'s check-and-store and the reactor's set-and-take run under the same
//! lock, so there is no fourth order. An event from *before* the failed `op()`
//! either was consumed by it or left the tick changed (case 1); at worst the loop
//! makes one extra attempt. `tests/lost_wakeup.rs` drives these interleavings.
//!
//! A *short* read or write (fewer bytes than asked) on a stream socket or pipe
//! means the kernel buffer was emptied (or filled) by that very call, so the same
//! `clear_ready(dir, tick)` is applied after it, saving the `WouldBlock` call that
//! would only confirm it; the argument above holds unchanged, since the tick was
//! read before the call. Only handles whose I/O object is known to make one system
//! call per transfer use this (`Source::drains`): a type that buffers in user space
//! could return short from its buffer while the descriptor still holds data.
//!
//! Backends without event mode (until evq has it on `select` and `poll`) use
//! [`Mode::Oneshot`](evq::Mode::Oneshot): the same protocol, plus the registration
//! is re-armed when a waiter appears for a direction the kernel is not watching.
//! `declare_interest` returns the state read after the re-arm, which the reactor
//! applies like an event, so a readiness that came before the re-arm is not lost.

use evq::Readiness;
use slab::Slab;
use std::io;
use std::os::fd::RawFd;
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

/// A `readable()`/`writable()` future's place in line.
#[derive(Default)]
struct Waiter {
    waker: Option<Waker>,
    /// Set when an event arrived while this waiter was in line: the future resolves
    /// even if another task has consumed (and cleared) the readiness since.
    notified: bool,
}

#[derive(Default)]
struct DirectionState {
    /// Bumped by every event for this direction.
    tick: u64,
    /// An event (or the registration's initial state) said this direction is ready,
    /// and no operation has met `WouldBlock` since.
    ready: bool,
    /// The task of the I/O-trait path (`poll_read`, `poll_write`, `accept`): one per
    /// direction, the last one to poll (as in tokio and async-io).
    waker: Option<Waker>,
    /// `readable()` / `writable()` futures: any number.
    waiters: Slab<Waiter>,
}

impl DirectionState {
    fn has_waiters(&self) -> bool {
        self.waker.is_some() || !self.waiters.is_empty()
    }
}

pub(crate) struct SourceState {
    dirs: [DirectionState; 2],
    /// Oneshot mode only: the directions the kernel registration currently watches.
    armed: [bool; 2],
    /// Oneshot mode only: a re-arm is queued for the reactor.
    rearm_queued: bool,
    /// A deferred registration the queue refused; every operation reports it.
    error: Option<(io::ErrorKind, String)>,
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
    state: Mutex<SourceState>,
}

/// What a caller of `poll_ready` must do after a `Pending` in oneshot mode.
pub(crate) enum Rearm {
    No,
    Needed,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, oneshot: bool, drains: bool) -> Source {
        let state = SourceState {
            dirs: Default::default(),
            armed: [false; 2],
            rearm_queued: false,
            error: None,
        };
        Source {
            fd,
            key,
            oneshot,
            drains,
            state: Mutex::new(state),
        }
    }

    /// A registration handed to another thread: until it reports the real state,
    /// assume both directions ready (a wrong guess costs one `WouldBlock`).
    pub(crate) fn set_optimistic(&self) {
        let mut state = self.lock();
        state.dirs[0].ready = true;
        state.dirs[1].ready = true;
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SourceState> {
        // A panic while holding this lock cannot leave the state half-written (every
        // critical section is a few field assignments), so a poisoned lock is used.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ready (returns the tick to pass to `clear_ready`), or the waker is stored and
    /// `Pending` returned. The second value says whether a oneshot re-arm must be
    /// queued (the caller does it, outside this lock).
    pub(crate) fn poll_ready(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
    ) -> (Poll<io::Result<u64>>, Rearm) {
        let mut state = self.lock();
        if let Some((kind, msg)) = &state.error {
            return (
                Poll::Ready(Err(io::Error::new(*kind, msg.clone()))),
                Rearm::No,
            );
        }
        let d = &mut state.dirs[dir.index()];
        if d.ready {
            return (Poll::Ready(Ok(d.tick)), Rearm::No);
        }
        match &mut d.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        (Poll::Pending, self.want_rearm(&mut state, dir))
    }

    /// Clears `ready` after an operation met `WouldBlock`, unless an event arrived
    /// since `tick` was read (see the module documentation).
    pub(crate) fn clear_ready(&self, dir: Direction, tick: u64) {
        let mut state = self.lock();
        let d = &mut state.dirs[dir.index()];
        if d.tick == tick {
            d.ready = false;
        }
    }

    /// `readable()`/`writable()`: resolves if notified while in line or ready now;
    /// otherwise joins (or stays in) the line.
    pub(crate) fn poll_waiter(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        slot: &mut Option<usize>,
    ) -> (Poll<io::Result<()>>, Rearm) {
        let mut state = self.lock();
        if let Some((kind, msg)) = state.error.clone() {
            if let Some(key) = slot.take() {
                state.dirs[dir.index()].waiters.remove(key);
            }
            return (Poll::Ready(Err(io::Error::new(kind, msg))), Rearm::No);
        }
        let d = &mut state.dirs[dir.index()];
        if let Some(key) = *slot {
            if d.waiters[key].notified || d.ready {
                d.waiters.remove(key);
                *slot = None;
                return (Poll::Ready(Ok(())), Rearm::No);
            }
            match &mut d.waiters[key].waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
        } else {
            if d.ready {
                return (Poll::Ready(Ok(())), Rearm::No);
            }
            *slot = Some(d.waiters.insert(Waiter {
                waker: Some(cx.waker().clone()),
                notified: false,
            }));
        }
        (Poll::Pending, self.want_rearm(&mut state, dir))
    }

    /// A `readable()`/`writable()` future dropped before it resolved leaves the line.
    pub(crate) fn remove_waiter(&self, dir: Direction, key: usize) {
        let mut state = self.lock();
        let waiters = &mut state.dirs[dir.index()].waiters;
        if waiters.contains(key) {
            waiters.remove(key);
        }
    }

    fn want_rearm(&self, state: &mut SourceState, dir: Direction) -> Rearm {
        if self.oneshot && !state.armed[dir.index()] && !state.rearm_queued {
            state.rearm_queued = true;
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
        let read = everything || readiness.contains(Readiness::READ);
        let write = everything || readiness.contains(Readiness::WRITE);
        let mut state = self.lock();
        if event && self.oneshot {
            // A oneshot registration is disarmed by the event that reported it.
            state.armed = [false; 2];
        }
        for (dir, hit) in [(0, read), (1, write)] {
            if !hit {
                continue;
            }
            let d = &mut state.dirs[dir];
            d.tick = d.tick.wrapping_add(1);
            d.ready = true;
            if let Some(w) = d.waker.take() {
                wakers.push(w);
            }
            for (_, waiter) in d.waiters.iter_mut() {
                waiter.notified = true;
                if let Some(w) = waiter.waker.take() {
                    wakers.push(w);
                }
            }
        }
    }

    /// Oneshot mode: the directions to arm now (those with a waiter and not ready),
    /// recorded as armed. Empty means nothing to arm.
    pub(crate) fn take_rearm(&self) -> (bool, bool) {
        let mut state = self.lock();
        state.rearm_queued = false;
        let want = |d: &DirectionState| d.has_waiters() && !d.ready;
        let (r, w) = (want(&state.dirs[0]), want(&state.dirs[1]));
        state.armed = [r, w];
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
        let mut state = self.lock();
        state.error = Some((err.kind(), err.to_string()));
        for d in &mut state.dirs {
            wakers.extend(d.waker.take());
            wakers.extend(d.waiters.iter_mut().filter_map(|(_, w)| w.waker.take()));
        }
    }

    /// Waiters in line (both directions), for the reactor's statistics and tests.
    pub(crate) fn waiter_count(&self) -> usize {
        let state = self.lock();
        state.dirs.iter().map(|d| d.waiters.len()).sum()
    }
}
