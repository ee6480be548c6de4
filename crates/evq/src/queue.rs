//! [`EventQueue`]: the paper's explicit event-delivery API over any backend.

use crate::event::NOTIFY_TOKEN;
use crate::interest_table::{key_fd, InterestTable, Registration, NOTIFY_KEY};
use crate::sys::{
    syscall, unsupported, AnyBackend, Backend, BackendKind, Capabilities, ModifyError, SysEvent,
    Watch,
};
use crate::timer_heap::{TimerHeap, TimerId};
use crate::{Event, Events, Interest, Mode, Notifier, Options, Readiness};
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Counters a queue keeps about itself (cheap: plain integers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Calls into the kernel's wait (`epoll_wait`, `poll`, `select`), including
    /// those interrupted or returning nothing.
    pub waits: u64,
    /// Events delivered to the application (descriptor, timer and notify).
    pub events: u64,
    /// Backend events dropped because their registration was gone or replaced.
    pub stale_dropped: u64,
    /// Times the kernel's interest set was rebuilt after stale events (epoll + dup).
    pub rebuilds: u64,
    /// Times the kernel's own event queue overflowed and the backend recovered
    /// without losing an event: the RT signal queue filled (`SIGIO`, then every
    /// registration looked at), or io_uring's completion ring overflowed.
    pub overflows: u64,
}

/// An event queue: declare interest once, then dequeue batches of ready events.
///
/// One per thread is the normal use; it is `Send`, so it may be built on one thread
/// and moved to the one that waits. See the crate documentation for an example.
pub struct EventQueue {
    kind: BackendKind,
    backend: AnyBackend,
    table: InterestTable,
    timers: TimerHeap,
    notifier: Notifier,
    needs_rebuild: bool,
    stats: QueueStats,
}

fn watch(fd: RawFd, key: u64, reg: &Registration) -> Watch {
    Watch {
        fd,
        key,
        interest: reg.interest,
        mode: reg.mode,
        wake_one: reg.wake_one,
    }
}

impl EventQueue {
    /// A queue on the default backend: `EVQ_BACKEND` if set, else the best available.
    ///
    /// # Errors
    /// An unknown or unavailable `EVQ_BACKEND`; the OS error if the kernel objects
    /// (e.g. `EMFILE`).
    pub fn new() -> io::Result<EventQueue> {
        EventQueue::with_backend(BackendKind::from_env_or_best()?)
    }

    /// A queue on the given backend.
    ///
    /// # Errors
    /// The OS error from creating the backend's kernel object or the notifier.
    pub fn with_backend(kind: BackendKind) -> io::Result<EventQueue> {
        let mut backend = kind.open()?;
        let notifier = Notifier::new(backend.signal_kick())?;
        let notify_watch = Watch {
            fd: notifier.raw_fd(),
            key: NOTIFY_KEY,
            interest: Interest::READ,
            mode: Mode::Level,
            wake_one: false,
        };
        backend.add(&notify_watch)?;
        Ok(EventQueue {
            kind,
            backend,
            table: InterestTable::default(),
            timers: TimerHeap::default(),
            notifier,
            needs_rebuild: false,
            stats: QueueStats::default(),
        })
    }

    /// The backend this queue runs on.
    pub fn backend(&self) -> BackendKind {
        self.kind
    }

    /// What this queue's backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.kind.capabilities()
    }

    /// Registers, modifies, or (with an empty `interest`) revokes interest in `fd`,
    /// and returns the descriptor's **current state**.
    ///
    /// The state is read *after* the registration is in place, so any change after
    /// that read produces an event: nothing falls between them unseen (SEEDS 000's
    /// accept-then-register race). With an edge-capable backend the first event may
    /// repeat what the state already said; that is the safe direction.
    ///
    /// Declaring interest again for a registered fd modifies it (new interest, mode,
    /// token) and re-arms a oneshot registration.
    ///
    /// # Errors
    /// - `Unsupported` if the backend lacks the mode or wake-one asked for;
    /// - `EBADF` for a negative or closed fd;
    /// - the kernel's error otherwise (e.g. `EPERM` from epoll for a regular file),
    ///   with the previous registration left as it was.
    pub fn declare_interest(
        &mut self,
        fd: RawFd,
        interest: Interest,
        options: Options,
    ) -> io::Result<Readiness> {
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if fd as u32 == self.notifier.raw_fd() as u32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "that fd is this queue's own notifier",
            ));
        }
        if interest.is_empty() {
            self.revoke(fd)?;
            return syscall::current_state(fd);
        }
        let reg = Registration {
            token: options.token(),
            interest,
            mode: options.delivery_mode(),
            wake_one: options.is_wake_one(),
            armed: true,
        };
        if let Some(what) = self.backend.refusal(&watch(fd, 0, &reg)) {
            return Err(unsupported(self.kind, what));
        }
        match self.table.get(fd) {
            None => self.register(fd, reg)?,
            Some(old) => {
                let old_watch = watch(fd, self.table.key(fd), &old);
                let key = self.table.update(fd, reg);
                match self.backend.modify(&old_watch, &watch(fd, key, &reg)) {
                    Ok(()) => {}
                    // The kernel no longer knows this number under this file: it was
                    // closed and reused behind the queue's back. A new file is a new
                    // registration, so it gets a new generation; anything the old
                    // file still produces (kept alive by a dup) is stale.
                    Err(ModifyError::Vanished) => self.register(fd, reg)?,
                    Err(ModifyError::Refused(e)) => {
                        if syscall::is_open(fd) {
                            self.table.update(fd, old);
                        } else {
                            self.table.remove(fd);
                        }
                        return Err(e);
                    }
                    Err(ModifyError::Lost(e)) => {
                        self.table.remove(fd);
                        return Err(e);
                    }
                }
            }
        }
        syscall::current_state(fd)
    }

    /// A new registration (new generation), or nothing if the kernel refuses it.
    fn register(&mut self, fd: RawFd, reg: Registration) -> io::Result<()> {
        let key = self.table.insert(fd, reg);
        self.backend.add(&watch(fd, key, &reg)).inspect_err(|_| {
            self.table.remove(fd);
        })
    }

    fn revoke(&mut self, fd: RawFd) -> io::Result<()> {
        if let Some(old) = self.table.get(fd) {
            let w = watch(fd, self.table.key(fd), &old);
            self.table.remove(fd);
            self.backend.remove(&w)?;
        }
        Ok(())
    }

    /// Revokes interest in `fd` (if any) and closes it: the stale-safe way to close a
    /// registered descriptor. Events already in the kernel for it are never delivered.
    ///
    /// # Errors
    /// `close(2)`'s error. The descriptor is closed (and forgotten) either way.
    pub fn close(&mut self, fd: RawFd) -> io::Result<()> {
        let revoked = self.revoke(fd);
        syscall::syscall!(close(fd))?;
        revoked
    }

    /// Drops the registration of an fd the application has already closed (or
    /// handed to someone else) without making any call on that number. Any event the
    /// kernel still holds for it is filtered out by generation.
    pub fn forget(&mut self, fd: RawFd) {
        if let Some(old) = self.table.get(fd) {
            let w = watch(fd, self.table.key(fd), &old);
            self.table.remove(fd);
            self.backend.forget(&w);
        }
    }

    /// Number of registered descriptors.
    pub fn registered(&self) -> usize {
        self.table.len()
    }

    /// A handle that wakes this queue from any thread.
    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }

    /// Sets a timer: at `deadline`, `get_next_event` delivers an event with `token`,
    /// fd -1 and `Readiness::TIMER`.
    pub fn add_timer(&mut self, deadline: Instant, token: u64) -> TimerId {
        self.timers.add(deadline, token)
    }

    /// Sets a timer `after` from now.
    pub fn add_timer_after(&mut self, after: Duration, token: u64) -> TimerId {
        let deadline = Instant::now().checked_add(after).unwrap_or_else(far_future);
        self.timers.add(deadline, token)
    }

    /// Cancels a timer; false if it already fired or was cancelled.
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        self.timers.cancel(id)
    }

    /// Number of pending timers.
    pub fn timers(&self) -> usize {
        self.timers.len()
    }

    /// Counters about this queue.
    pub fn stats(&self) -> QueueStats {
        QueueStats {
            overflows: self.backend.overflows(),
            ..self.stats
        }
    }

    /// Dequeues up to `events.capacity()` events into `events`, returning how many.
    ///
    /// Returns at once if anything is ready (it never waits to fill the batch);
    /// otherwise blocks until something is, a timer expires, a [`Notifier`] fires, or
    /// `timeout` passes (`None` waits forever, `Some(Duration::ZERO)` only looks).
    /// Returns `Ok(0)` on timeout. `EINTR` is retried with the time that is left.
    ///
    /// Order is FIFO among ready descriptors as far as the backend can know it, and
    /// a batch smaller than the ready set never starves anyone: later calls get to
    /// the rest.
    ///
    /// # Errors
    /// `InvalidInput` for a batch of capacity 0; the kernel's error otherwise.
    pub fn get_next_event(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        events.clear();
        if events.capacity() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "event batch has capacity 0",
            ));
        }
        // The hot path, written out for backends whose wait is one system call
        // (`Backend::SLIM_WAIT`: epoll): no timers to pop, no deadline to keep, no
        // rebuild pending — one `epoll_wait` and the table lookups. Kept apart from
        // the general loop so that the loop's monomorphized backends do not make
        // every call pay for their frame (callgrind, pipebench at 1,000 fds: 187 →
        // 140 instructions a call).
        if self.timers.len() == 0 && !self.needs_rebuild && timeout.is_none_or(|t| t.is_zero()) {
            if let Some(backend) = self.backend.as_slim() {
                self.stats.waits += 1;
                let table = &mut self.table;
                let mut notified = false;
                let mut stale = 0u64;
                let result = backend.wait(events.room(), timeout, |ev| {
                    deliver(table, events, ev, &mut notified, &mut stale)
                });
                if !notified && stale == 0 && result.is_ok() && !events.is_empty() {
                    self.stats.events += events.len() as u64;
                    return Ok(events.len());
                }
                return self.after_first_wait(events, timeout, notified, stale, result);
            }
        }
        self.wait_general(events, timeout)
    }

    /// The rest of a fast-path call that did not simply return events: a notify, a
    /// stale event, an error or an empty wait.
    #[cold]
    #[inline(never)]
    fn after_first_wait(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
        notified: bool,
        stale: u64,
        result: io::Result<()>,
    ) -> io::Result<usize> {
        self.settle_wait(events, notified, stale, result)?;
        // A zero timeout looks once; with none, the general loop waits on (the
        // fast path only runs without a deadline, so none has to be carried over).
        if !events.is_empty() || timeout.is_some() {
            self.stats.events += events.len() as u64;
            return Ok(events.len());
        }
        self.wait_general(events, timeout)
    }

    /// What one backend wait left besides events: a notify becomes its event, stale
    /// events are counted (and on epoll schedule a rebuild), and an error other than
    /// `EINTR` is returned unless events were already gathered.
    fn settle_wait(
        &mut self,
        events: &mut Events,
        notified: bool,
        stale: u64,
        result: io::Result<()>,
    ) -> io::Result<()> {
        if notified {
            self.notifier.drain();
            events.push(Event::new(NOTIFY_TOKEN, -1, Readiness::NOTIFY));
        }
        if stale > 0 {
            self.stats.stale_dropped += stale;
            self.needs_rebuild = self.backend.rebuilds_on_stale();
        }
        match result {
            Err(e) if e.kind() != io::ErrorKind::Interrupted && events.is_empty() => Err(e),
            _ => Ok(()),
        }
    }

    /// `get_next_event` for every backend and every case: timers, deadlines,
    /// rebuilds, retries.
    #[inline(never)]
    fn wait_general(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        // `Instant::now()` costs a vDSO call; skip it on the common paths.
        let needs_clock = self.timers.len() > 0 || matches!(timeout, Some(t) if !t.is_zero());
        let start = if needs_clock {
            Some(Instant::now())
        } else {
            None
        };
        let deadline = match (start, timeout) {
            (Some(s), Some(t)) => Some(s.checked_add(t).unwrap_or_else(far_future)),
            _ => None,
        };
        loop {
            let now = if self.timers.len() > 0 {
                Some(Instant::now())
            } else {
                None
            };
            if let Some(now) = now {
                while events.room() > 0 {
                    match self.timers.pop_expired(now) {
                        Some(token) => events.push(Event::new(token, -1, Readiness::TIMER)),
                        None => break,
                    }
                }
            }
            if events.room() == 0 {
                break;
            }
            let wait_for = if !events.is_empty() {
                Some(Duration::ZERO)
            } else {
                let until_deadline = match (deadline, timeout) {
                    (Some(d), _) => {
                        Some(d.saturating_duration_since(now.unwrap_or_else(Instant::now)))
                    }
                    (None, t) => t,
                };
                match (until_deadline, self.timers.next_deadline(), now) {
                    (t, Some(next), Some(now)) => {
                        let until_timer = next.saturating_duration_since(now);
                        Some(t.map_or(until_timer, |t| t.min(until_timer)))
                    }
                    (t, _, _) => t,
                }
            };
            if self.needs_rebuild {
                self.rebuild()?;
            }
            self.stats.waits += 1;
            let table = &mut self.table;
            let mut notified = false;
            let mut stale = 0u64;
            let result = self.backend.wait(events.room(), wait_for, |ev| {
                deliver(table, events, ev, &mut notified, &mut stale)
            });
            self.settle_wait(events, notified, stale, result)?;
            if !events.is_empty() {
                break;
            }
            let expired = match (deadline, timeout) {
                (Some(d), _) => Instant::now() >= d,
                (None, Some(t)) => t.is_zero(),
                (None, None) => false,
            };
            if expired
                && self
                    .timers
                    .next_deadline()
                    .is_none_or(|d| d > Instant::now())
            {
                break;
            }
        }
        self.stats.events += events.len() as u64;
        Ok(events.len())
    }

    fn rebuild(&mut self) -> io::Result<()> {
        self.needs_rebuild = false;
        self.stats.rebuilds += 1;
        let notify = Watch {
            fd: self.notifier.raw_fd(),
            key: NOTIFY_KEY,
            interest: Interest::READ,
            mode: Mode::Level,
            wake_one: false,
        };
        let watches = self
            .table
            .iter()
            .filter(|(_, _, r)| r.armed)
            .map(|(fd, key, r)| watch(fd, key, &r))
            .chain(std::iter::once(notify))
            .collect::<Vec<_>>();
        self.backend.rebuild(watches.into_iter())
    }
}

/// One backend event into the batch: the notifier's key sets `notified`, a current
/// registration yields an event (disarming a oneshot), a replaced or removed one is
/// counted as stale and dropped.
#[inline(always)]
fn deliver(
    table: &mut InterestTable,
    events: &mut Events,
    ev: SysEvent,
    notified: &mut bool,
    stale: &mut u64,
) {
    if ev.key == NOTIFY_KEY {
        *notified = true;
        return;
    }
    let fd = key_fd(ev.key);
    match table.current(ev.key) {
        Some(_) if ev.gone => {
            table.remove(fd);
        }
        Some(slot) => {
            slot.delivered();
            events.push(Event::new(slot.token(), fd, ev.readiness));
        }
        None => *stale += 1,
    }
}

// The queue is built on one thread and moved to the one that waits.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<EventQueue>();
    assert_send::<Notifier>();
};

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

impl std::fmt::Debug for EventQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("backend", &self.kind)
            .field("registered", &self.table.len())
            .field("timers", &self.timers.len())
            .finish()
    }
}
