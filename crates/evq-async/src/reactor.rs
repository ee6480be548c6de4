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

use crate::parking::Sleeper;
use crate::source::Source;
use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options, TimerId};
use slab::Slab;
use std::cell::RefCell;
use std::io;
use std::mem;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

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

enum TimerSlot {
    Waiting(Option<Waker>),
    Fired,
    /// Dropped before it fired; the slot is freed when its `CancelTimer` is applied
    /// (so it cannot be reused while the queue may still fire it).
    Abandoned,
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
                crate::block_on::start_fallback();
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

    fn try_lock(&self) -> Option<MutexGuard<'_, Driver>> {
        match self.driver.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
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

    // ---- registration ------------------------------------------------------

    /// Registers `fd` for its whole life. With the queue free this is done here and
    /// a refusal is returned; with the queue held by a waiting thread it is handed
    /// to that thread, and a refusal (rare: the kernel refusing a descriptor the
    /// type system let through) is reported by the handle's first operation.
    pub(crate) fn register(&self, fd: std::os::fd::RawFd, drains: bool) -> io::Result<Arc<Source>> {
        let source = {
            let mut sources = lock(&self.sources);
            if sources.owner(fd) != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "descriptor {fd} already has an Async handle; a second one would take \
                         over its registration (share the first: `&Async<T>`, `Arc<Async<T>>`)"
                    ),
                ));
            }
            let entry = sources.slab.vacant_entry();
            let source = Arc::new(Source::new(fd, entry.key(), self.oneshot, drains));
            entry.insert(source.clone());
            if sources.owners.len() <= fd as usize {
                sources.owners.resize(fd as usize + 1, 0);
            }
            sources.owners[fd as usize] = source.key + 1;
            source
        };
        if let Some(mut driver) = self.try_lock() {
            let result = with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                let r = self.register_now(&mut driver, &source, wakers);
                self.release(driver, wakers);
                r
            });
            if let Err(e) = result {
                lock(&self.sources).remove(&source);
                return Err(e);
            }
        } else {
            // Until the holder registers it, let the first operation try its luck:
            // the tick protocol keeps a wrong guess harmless (one `WouldBlock`).
            source.set_optimistic();
            self.push_op(Op::Register(source.clone()));
        }
        Ok(source)
    }

    fn register_now(
        &self,
        driver: &mut Driver,
        source: &Arc<Source>,
        wakers: &mut Vec<Waker>,
    ) -> io::Result<()> {
        let mode = if self.oneshot {
            Mode::Oneshot
        } else {
            Mode::Event
        };
        let state = driver.queue.declare_interest(
            source.fd,
            Interest::READ | Interest::WRITE,
            Options::new(source.key as u64).mode(mode),
        )?;
        if self.oneshot {
            source.set_armed_both();
        }
        // The state read after the registration is in place: anything later is an
        // event, anything earlier is here.
        source.set_readiness(state, false, wakers);
        Ok(())
    }

    /// Oneshot mode: a task waits on a direction the kernel is not watching.
    pub(crate) fn rearm(&self, source: &Arc<Source>) {
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.rearm_now(&mut driver, source, wakers);
                self.release(driver, wakers);
            });
        } else {
            self.push_op(Op::Rearm(source.clone()));
        }
    }

    fn rearm_now(&self, driver: &mut Driver, source: &Arc<Source>, wakers: &mut Vec<Waker>) {
        if !self.is_registered(source) {
            return;
        }
        let (read, write) = source.take_rearm();
        let mut interest = Interest::empty();
        if read {
            interest |= Interest::READ;
        }
        if write {
            interest |= Interest::WRITE;
        }
        if interest.is_empty() {
            return;
        }
        let opts = Options::new(source.key as u64).mode(Mode::Oneshot);
        match driver.queue.declare_interest(source.fd, interest, opts) {
            Ok(state) => source.set_readiness(state, false, wakers),
            Err(e) => source.set_error(&e, wakers),
        }
    }

    /// Is `source` registered in the queue now (not failed, not revoked)? Ops are
    /// applied in order, so a `Register` op has been applied before any later op.
    fn is_registered(&self, source: &Arc<Source>) -> bool {
        !source.has_failed()
            && lock(&self.sources)
                .slab
                .get(source.key)
                .is_some_and(|s| Arc::ptr_eq(s, source))
    }

    /// Revokes `source`'s registration; returns when it is revoked, so the caller
    /// may close the descriptor (the number stays held until then: a revoke never
    /// lands on a reused number).
    pub(crate) fn deregister(&self, source: &Arc<Source>) {
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.deregister_now(&mut driver, source);
                self.release(driver, wakers);
            });
        } else {
            let done = Completion::new();
            self.push_op(Op::Deregister(source.clone(), done.clone()));
            done.wait();
        }
    }

    fn deregister_now(&self, driver: &mut Driver, source: &Arc<Source>) {
        if self.is_registered(source) {
            // Errors (the application closed the descriptor itself) change nothing:
            // the queue forgets the registration either way.
            let _ = driver
                .queue
                .declare_interest(source.fd, Interest::empty(), Options::new(0));
        }
        lock(&self.sources).remove(source);
    }

    // ---- timers ------------------------------------------------------------

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

    fn add_timer_now(&self, driver: &mut Driver, slot: usize, deadline: Instant) {
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

    fn cancel_timer_now(&self, driver: &mut Driver, slot: usize) {
        if let Some(id) = driver.timer_ids.get_mut(slot).and_then(Option::take) {
            driver.queue.cancel_timer(id);
        }
        lock(&self.timers).remove(slot);
    }

    // ---- the pending list ----------------------------------------------------

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

    /// Unlocks the queue, wakes a thread in line to take it over (see
    /// [`Reactor::sleep`]), then applies anything pushed while it was held by a
    /// thread that found it taken (see [`Reactor::push_op`]).
    fn release(&self, driver: MutexGuard<'_, Driver>, wakers: &mut Vec<Waker>) {
        drop(driver);
        fence(Ordering::SeqCst);
        self.hand_off();
        while self.ops_pending.load(Ordering::SeqCst) {
            match self.try_lock() {
                Some(mut driver) => {
                    self.apply_ops(&mut driver, wakers);
                    drop(driver);
                    fence(Ordering::SeqCst);
                }
                // The new holder applies it before it waits.
                None => break,
            }
        }
    }

    // ---- driving -------------------------------------------------------------

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

    fn drive(
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

    fn dispatch(&self, driver: &mut Driver, wakers: &mut Vec<Waker>) {
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
    /// comes after the join and wakes someone in line.
    pub(crate) fn sleep(&self, sleeper: &Arc<Sleeper>) {
        if self.try_drive(None, Some(sleeper)) {
            return;
        }
        {
            let mut line = lock(&self.handoff);
            line.push(sleeper.clone());
            self.handoff_len.store(line.len(), Ordering::SeqCst);
        }
        if self.fallback_driving.load(Ordering::SeqCst) {
            // The fallback thread only drives while nobody else will; make it yield.
            self.notify();
        }
        fence(Ordering::SeqCst);
        if self.try_drive(None, Some(sleeper)) {
            self.leave_line(sleeper);
            return;
        }
        sleeper.park();
        self.leave_line(sleeper);
    }

    fn leave_line(&self, sleeper: &Arc<Sleeper>) {
        let mut line = lock(&self.handoff);
        line.retain(|s| !Arc::ptr_eq(s, sleeper));
        self.handoff_len.store(line.len(), Ordering::SeqCst);
    }

    /// The queue was let go: wake one thread in line so that somebody keeps
    /// watching it while the last holder runs tasks.
    fn hand_off(&self) {
        if self.handoff_len.load(Ordering::SeqCst) == 0 {
            return;
        }
        let next = {
            let mut line = lock(&self.handoff);
            let next = line.pop();
            self.handoff_len.store(line.len(), Ordering::SeqCst);
            next
        };
        if let Some(next) = next {
            next.wake_up();
        }
    }

    pub(crate) fn set_fallback_driving(&self, on: bool) {
        self.fallback_driving.store(on, Ordering::SeqCst);
    }
}

/// Locks a mutex whose critical sections cannot leave it inconsistent (each is a
/// few assignments), so a panic elsewhere does not poison the reactor.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
