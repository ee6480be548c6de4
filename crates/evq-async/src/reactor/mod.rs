//! The reactor: one evq [`EventQueue`] for the process, shared by every thread.
//!
//! The queue needs `&mut self` both to register (`declare_interest`) and to wait
//! (`get_next_event`), so it lives behind a mutex, and holding that mutex is the
//! right to wait on it. A thread that finds it taken while it needs a registration
//! (a new descriptor, a timer, a oneshot re-arm, a revoke) does not wait for the
//! lock: it appends an [`Op`] to a pending list and, if the holder is blocked in
//! the kernel, wakes it through the queue's own [`Notifier`](evq::Notifier). Every
//! holder applies the pending list before each wait, and whoever releases the lock
//! looks at the list once more after letting go, so an op pushed at any moment is
//! applied by someone (see [`Reactor::push_op`] for the argument). The crate
//! documentation compares this with async-io's reactor.

mod drive;
mod fallback;
mod parking;
mod registration;
mod timers;

use crate::source::Source;
use evq::{BackendKind, EventQueue, Events, Mode, TimerId};
pub(crate) use fallback::ActiveLoop;
pub(crate) use parking::{waker_for, Sleeper};
use slab::Slab;
use std::cell::RefCell;
use std::io;
use std::mem::{self, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::Instant;
use timers::TimerSlot;

/// Events taken from the queue per wait.
const BATCH: usize = 1024;
/// Timer tokens carry this bit; descriptor tokens are slab keys (below 2^32).
const TIMER_TAG: u64 = 1 << 62;

/// A registration change waiting for the thread that holds the queue.
pub(crate) enum Op {
    Register(Arc<Source>),
    Rearm(Arc<Source>),
    Deregister(Arc<Source>, Arc<Completion>),
    AddTimer(usize, Instant),
    CancelTimer(usize),
}

/// Lets a thread wait for an op it pushed (a revoke must finish before the
/// descriptor is closed).
pub(crate) struct Completion {
    done: AtomicBool,
    thread: Thread,
}

impl Completion {
    fn new() -> Arc<Completion> {
        Arc::new(Completion {
            done: AtomicBool::new(false),
            thread: thread::current(),
        })
    }
    fn complete(&self) {
        self.done.store(true, Ordering::Release);
        self.thread.unpark();
    }
    fn wait(&self) {
        while !self.done.load(Ordering::Acquire) {
            thread::park();
        }
    }
}

/// What only the holder of the queue touches.
pub(crate) struct Driver {
    queue: EventQueue,
    events: Events,
    /// Timer slot → evq timer, while armed.
    timer_ids: Vec<Option<TimerId>>,
}

/// The registered descriptors.
#[derive(Default)]
struct Sources {
    slab: Slab<Arc<Source>>,
    /// Descriptor number → source key + 1 (0: none), from the handle's creation to
    /// its revoke, to refuse a second handle on one number (it would silently take
    /// over the first one's registration).
    owners: Vec<usize>,
}

impl Sources {
    fn owner(&self, fd: std::os::fd::RawFd) -> usize {
        self.owners.get(fd as usize).copied().unwrap_or(0)
    }

    fn remove(&mut self, source: &Arc<Source>) {
        if self
            .slab
            .get(source.key)
            .is_some_and(|s| Arc::ptr_eq(s, source))
        {
            self.slab.remove(source.key);
            if self.owner(source.fd) == source.key + 1 {
                self.owners[source.fd as usize] = 0;
            }
        }
    }
}

/// Counters the reactor keeps (relaxed atomics).
#[derive(Default)]
struct Counters {
    waits: AtomicU64,
    events: AtomicU64,
    notifies: AtomicU64,
    deferred_ops: AtomicU64,
}

/// A snapshot of the reactor's state, for diagnostics, tests and benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReactorStats {
    /// The evq backend the reactor runs on (`EVQ_BACKEND` or the best available).
    pub backend: BackendKind,
    /// How descriptors are registered: [`Mode::Event`] (once for their whole life)
    /// or, on backends without event mode, [`Mode::Oneshot`] re-armed per wait.
    pub mode: Mode,
    /// Descriptors registered (live [`Async`](crate::Async) handles).
    pub sources: usize,
    /// `readable()`/`writable()` futures waiting, over all descriptors.
    pub waiters: usize,
    /// Timers armed or fired-but-not-yet-observed.
    pub timers: usize,
    /// Calls to `get_next_event`.
    pub waits: u64,
    /// Events dispatched (descriptor and timer).
    pub events: u64,
    /// Cross-thread wake-ups sent through the queue's notifier.
    pub notifies: u64,
    /// Registrations handed to another thread because it held the queue.
    pub deferred_ops: u64,
}

/// The process-wide reactor (see the module documentation).
pub(crate) struct Reactor {
    driver: Mutex<Driver>,
    ops: Mutex<Vec<Op>>,
    ops_pending: AtomicBool,
    /// A thread is in, or about to enter, a blocking `get_next_event`.
    waiting: AtomicBool,
    /// A notify was sent since the last wait returned (coalesces eventfd writes).
    notify_sent: AtomicBool,
    notifier: evq::Notifier,
    sources: Mutex<Sources>,
    timers: Mutex<Slab<TimerSlot>>,
    backend: BackendKind,
    oneshot: bool,
    /// Threads parked because another held the queue; one is woken to take over
    /// when the driver leaves to run tasks.
    handoff: Mutex<Vec<Arc<Sleeper>>>,
    handoff_len: AtomicUsize,
    /// The fallback thread is the one blocked in the queue (it must yield).
    fallback_driving: AtomicBool,
    counters: Counters,
}

static REACTOR: OnceLock<Result<Reactor, (io::ErrorKind, String)>> = OnceLock::new();

thread_local! {
    /// Wakers collected under the reactor's locks, woken after they are released.
    static WAKERS: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// Wakes every waker in `wakers`, outside any reactor lock.
fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        w.wake();
    }
}

/// Runs `f` with this thread's waker buffer (or a fresh one if it is in use, as
/// when a waker's wake-up drops a handle and re-enters the reactor).
fn with_wakers<R>(f: impl FnOnce(&mut Vec<Waker>) -> R) -> R {
    let mut buf = WAKERS.with(|w| {
        w.try_borrow_mut()
            .map(|mut v| mem::take(&mut *v))
            .unwrap_or_default()
    });
    let r = f(&mut buf);
    wake_all(&mut buf);
    WAKERS.with(|w| {
        if let Ok(mut v) = w.try_borrow_mut() {
            if v.capacity() < buf.capacity() {
                *v = buf;
            }
        }
    });
    r
}

impl Reactor {
    /// The reactor, created on first use on `EVQ_BACKEND` or the best backend.
    ///
    /// # Errors
    /// The queue could not be created (an unknown or unavailable `EVQ_BACKEND`,
    /// `EMFILE`); the same error is returned on every call.
    pub(crate) fn get() -> io::Result<&'static Reactor> {
        let r = REACTOR.get_or_init(|| {
            let r = Reactor::new().map_err(|e| {
                (
                    e.kind(),
                    format!("evq-async cannot create its event queue: {e}"),
                )
            });
            if r.is_ok() {
                fallback::start();
            }
            r
        });
        match r {
            Ok(r) => Ok(r),
            Err((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
        }
    }

    fn new() -> io::Result<Reactor> {
        let queue = EventQueue::new()?;
        let backend = queue.backend();
        let notifier = queue.notifier();
        Ok(Reactor {
            driver: Mutex::new(Driver {
                queue,
                events: Events::with_capacity(BATCH),
                timer_ids: Vec::new(),
            }),
            ops: Mutex::new(Vec::new()),
            ops_pending: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            notify_sent: AtomicBool::new(false),
            notifier,
            sources: Mutex::new(Sources::default()),
            timers: Mutex::new(Slab::new()),
            backend,
            // The paper's event mode where the backend has it: registered once,
            // never re-armed. Otherwise oneshot, re-armed when a task waits.
            oneshot: !backend.capabilities().event,
            handoff: Mutex::new(Vec::new()),
            handoff_len: AtomicUsize::new(0),
            fallback_driving: AtomicBool::new(false),
            counters: Counters::default(),
        })
    }

    pub(crate) fn stats(&self) -> ReactorStats {
        let (sources, waiters) = {
            let s = lock(&self.sources);
            (
                s.slab.len(),
                s.slab.iter().map(|(_, s)| s.waiter_count()).sum(),
            )
        };
        ReactorStats {
            backend: self.backend,
            mode: if self.oneshot {
                Mode::Oneshot
            } else {
                Mode::Event
            },
            sources,
            waiters,
            timers: lock(&self.timers).len(),
            waits: self.counters.waits.load(Ordering::Relaxed),
            events: self.counters.events.load(Ordering::Relaxed),
            notifies: self.counters.notifies.load(Ordering::Relaxed),
            deferred_ops: self.counters.deferred_ops.load(Ordering::Relaxed),
        }
    }

    fn try_lock(&self) -> Option<Held<'_>> {
        let guard = match self.driver.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(Held {
            reactor: self,
            guard: ManuallyDrop::new(guard),
        })
    }

    /// Wakes the thread blocked in `get_next_event`, once per wait.
    pub(crate) fn notify(&self) {
        if !self.notify_sent.swap(true, Ordering::AcqRel) {
            self.counters.notifies.fetch_add(1, Ordering::Relaxed);
            // A failing eventfd write cannot happen in practice (a full counter
            // already means "notified"); there is nobody to report it to.
            let _ = self.notifier.notify();
        }
    }

    /// Wakes the queue's holder if it is blocked in the kernel.
    fn wake_driver(&self) {
        if self.waiting.load(Ordering::SeqCst) {
            self.notify();
        }
    }

    /// Hands `op` to the queue's holder and wakes it if it is blocked.
    ///
    /// Why nothing is stranded: the op is pushed (under the list's mutex, setting
    /// `ops_pending`) *before* this thread tries the queue's lock. Whoever holds the
    /// lock applies the list before each wait, with `waiting` set first, so either
    /// it sees the op or this thread sees `waiting` and notifies it. A holder that
    /// is not going to wait (it only registered something) re-checks
    /// `ops_pending` after unlocking ([`Reactor::release`]); if this thread's
    /// `try_lock` failed because that holder was still inside, the holder's re-check
    /// comes after its unlock and so after this push. Both sides use `SeqCst`.
    fn push_op(&self, op: Op) {
        self.push_op_quietly(op);
        // Pairs with the fence in `release` between unlocking and re-reading
        // `ops_pending` (a failed `try_lock` is not itself an ordering point).
        fence(Ordering::SeqCst);
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.release(driver, wakers);
            });
        } else {
            self.wake_driver();
        }
    }

    fn push_op_quietly(&self, op: Op) {
        self.counters.deferred_ops.fetch_add(1, Ordering::Relaxed);
        let mut ops = lock(&self.ops);
        ops.push(op);
        self.ops_pending.store(true, Ordering::SeqCst);
    }

    fn apply_ops(&self, driver: &mut Driver, wakers: &mut Vec<Waker>) {
        if !self.ops_pending.load(Ordering::SeqCst) {
            return;
        }
        let ops = {
            let mut ops = lock(&self.ops);
            self.ops_pending.store(false, Ordering::SeqCst);
            mem::take(&mut *ops)
        };
        for op in ops {
            match op {
                Op::Register(source) => {
                    if let Err(e) = self.register_now(driver, &source, wakers) {
                        source.set_error(&e, wakers);
                    }
                }
                Op::Rearm(source) => self.rearm_now(driver, &source, wakers),
                Op::Deregister(source, done) => {
                    self.deregister_now(driver, &source);
                    done.complete();
                }
                Op::AddTimer(slot, deadline) => self.add_timer_now(driver, slot, deadline),
                Op::CancelTimer(slot) => self.cancel_timer_now(driver, slot),
            }
        }
    }

    /// Lets the queue go (which hands it to a thread in line, see [`Held`]), then
    /// applies anything pushed while it was held by a thread that found it taken
    /// (see [`Reactor::push_op`]) — and every time it lets the queue go again
    /// after that, the line is looked at again: a thread that found the queue
    /// taken by this very re-take joined the line and parked.
    fn release(&self, driver: Held<'_>, wakers: &mut Vec<Waker>) {
        drop(driver);
        while self.ops_pending.load(Ordering::SeqCst) {
            match self.try_lock() {
                // Let go at the end of the arm, handing off again.
                Some(mut driver) => self.apply_ops(&mut driver, wakers),
                // The new holder applies them before it waits.
                None => return,
            }
        }
    }
}

/// The queue, held: the right to wait on it. However it is let go — by
/// [`Reactor::release`], or unwound by a panic in the middle of a wait or a
/// registration — the letting go is followed by a look at the line: the unlock,
/// a `SeqCst` fence, then [`Reactor::hand_off`] (the other half of the argument
/// in [`Reactor::sleep`]). A panic therefore cannot leave the line asleep with
/// the queue free.
pub(crate) struct Held<'a> {
    reactor: &'a Reactor,
    guard: ManuallyDrop<MutexGuard<'a, Driver>>,
}

impl Deref for Held<'_> {
    type Target = Driver;
    #[inline]
    fn deref(&self) -> &Driver {
        &self.guard
    }
}

impl DerefMut for Held<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Driver {
        &mut self.guard
    }
}

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard is dropped exactly once, here, and never touched after.
        unsafe { ManuallyDrop::drop(&mut self.guard) };
        fence(Ordering::SeqCst);
        self.reactor.hand_off();
    }
}

/// Locks a mutex whose critical sections cannot leave it inconsistent (each is a
/// few assignments), so a panic elsewhere does not poison the reactor.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
