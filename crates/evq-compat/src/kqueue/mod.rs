//! The FreeBSD `kqueue(2)`/`kevent(2)` personality, with DragonFly's `EV_WAKEONE`
//! (SEEDS 003), built on one [`evq::EventQueue`].
//!
//! # Quirks of kqueue on Linux, and what this file does about them
//!
//! a) **A knote per (ident, filter), a registration per fd.** kevent(2) keeps
//!    `EVFILT_READ` and `EVFILT_WRITE` as separate knotes with their own flags and
//!    `udata`; evq (like epoll) has one registration per descriptor. The enabled
//!    knotes of an fd are combined into one registration's interest, and every
//!    change re-declares it. A failed declaration leaves the knotes as they were
//!    (kevent(2) DESCRIPTION: a failing change does not half-apply).
//! b) **`EV_CLEAR` per knote, mode per registration.** If every enabled knote of an
//!    fd has `EV_CLEAR` the registration is edge (`Mode::Event`); if none has, level.
//!    If they differ the registration is edge and the level knotes are emulated: a
//!    delivered level knote is re-polled (`poll(2)`, zero timeout) at the next
//!    `kevent` call and reported again while it is still ready.
//! c) **`EV_ONESHOT` is per knote here, per registration in evq**, so it is done in
//!    user space: the knote is deleted when its event is returned (kevent(2) flags,
//!    `EV_ONESHOT`: "the event is deleted after it is retrieved").
//! d) **`EV_WAKEONE` (0x0040, DragonFly; FreeBSD spends that bit on `EV_RECEIPT`,
//!    which this personality therefore does not offer)** becomes evq wake-one
//!    (`EPOLLEXCLUSIVE`) with [`evq::WakeOneRotation`]: after each delivery the
//!    registration moves to the back of the wait queue, which is DragonFly's "mkII".
//!    The move is split in two: the delivering call takes the registration off the
//!    wait queue (`DEL`), and the next `kevent` call adds it again (`ADD`, at the
//!    tail), once the application has acted on the event. Re-adding at once,
//!    while the descriptor is still ready, would queue a stale activation here
//!    beside the one the next waiter gets, and cause accept collisions.
//!    Exclusivity is per registration on Linux, so if one knote of an fd has
//!    `EV_WAKEONE`, the fd's whole registration is wake-one.
//! e) **Receipts.** kevent(2) RETURN VALUES / DESCRIPTION: a change that fails is
//!    reported in the eventlist with `EV_ERROR` set and the errno in `data` when
//!    there is room; then `kevent` returns the number of receipts *without*
//!    scanning for events (FreeBSD `kern_kevent_fp`). With no room, the call fails
//!    with that errno and later changes are not applied.
//! f) **`data`.** For `EVFILT_READ` on a socket or pipe, the bytes readable
//!    (`FIONREAD`); on a listening socket, the accept backlog (read from `TCP_INFO`'s
//!    `tcpi_unacked`, which Linux fills with the backlog for listeners). For
//!    `EVFILT_WRITE`, the free space (`SO_SNDBUF` − `SIOCOUTQ` for sockets, pipe size −
//!    `FIONREAD` for pipes). `fflags` stays 0: reading `SO_ERROR` would clear it.
//! g) **`EV_EOF`** is set on `EVFILT_READ` when the peer has shut down its writing
//!    side (`EPOLLRDHUP`/`EPOLLHUP`), and on `EVFILT_WRITE` when `poll(2)` reports
//!    `POLLHUP` or `POLLERR` (writes would fail).
//! h) **Closing an fd does not remove its knotes here** (FreeBSD's `knote_fdclose`
//!    has no Linux analogue visible to user space). The kernel forgets the file, so
//!    nothing is reported; call [`Kqueue::forget_fd`] before reusing the number, or
//!    `EV_DELETE` first.
//! i) **Regular files** are refused by epoll (`EPERM`), and that errno comes back as
//!    the change's error; FreeBSD would accept them (always readable).
//! j) **Unknown filters** are `EINVAL`; an ident that is not an open descriptor is
//!    `EBADF`; `EV_DELETE`/`EV_ENABLE`/`EV_DISABLE` of a missing knote is `ENOENT`.
//! k) **One event per knote per call.** In FreeBSD a knote sits on the active list
//!    once, so `kevent` returns it at most once. Here an event can be found twice
//!    in one call — kept over from a full eventlist, re-polled as a level knote
//!    (quirk b), and reported again by evq — so each call remembers which knotes it
//!    returned and which wait in the overflow, and drops the second sighting.

mod filter_data;

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options, Readiness, WakeOneRotation};
use filter_data::{is_open, poll_now, readable_bytes, writable_space};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Readable-data filter (FreeBSD `EVFILT_READ`).
pub const EVFILT_READ: i16 = -1;
/// Writable-space filter (FreeBSD `EVFILT_WRITE`).
pub const EVFILT_WRITE: i16 = -2;
/// Add the knote, or modify an existing one; enables it unless `EV_DISABLE`.
pub const EV_ADD: u16 = 0x0001;
/// Delete the knote.
pub const EV_DELETE: u16 = 0x0002;
/// Report the knote's events again.
pub const EV_ENABLE: u16 = 0x0004;
/// Keep the knote but report nothing.
pub const EV_DISABLE: u16 = 0x0008;
/// Delete the knote once its first event has been retrieved.
pub const EV_ONESHOT: u16 = 0x0010;
/// Reset the state after retrieval: report again only when something happens (edge).
pub const EV_CLEAR: u16 = 0x0020;
/// DragonFly: of all `EV_WAKEONE` knotes on one descriptor, activate one per event.
pub const EV_WAKEONE: u16 = 0x0040;
/// Set in a returned event whose change failed; `data` holds the errno.
pub const EV_ERROR: u16 = 0x4000;
/// Set in a returned event when the filter met end-of-file.
pub const EV_EOF: u16 = 0x8000;

/// Flags a knote keeps and returns with its events (kevent(2): the action flags
/// `EV_ADD`/`EV_DELETE`/`EV_ENABLE`/`EV_DISABLE` are not kept).
const KEPT_FLAGS: u16 = EV_ONESHOT | EV_CLEAR | EV_WAKEONE;

/// One change or one event: FreeBSD's `struct kevent` (without `ext[]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kevent {
    /// The descriptor.
    pub ident: usize,
    /// [`EVFILT_READ`] or [`EVFILT_WRITE`].
    pub filter: i16,
    /// Action flags in a change; kept flags plus `EV_EOF`/`EV_ERROR` in an event.
    pub flags: u16,
    /// Filter-specific flags (always 0 here).
    pub fflags: u32,
    /// Bytes readable / writable, or the errno with `EV_ERROR`.
    pub data: i64,
    /// Opaque user value, returned unchanged with every event of the knote.
    pub udata: usize,
}

impl Kevent {
    /// `EV_SET(kev, ident, filter, flags, 0, 0, udata)`.
    pub const fn new(ident: usize, filter: i16, flags: u16, udata: usize) -> Kevent {
        Kevent {
            ident,
            filter,
            flags,
            fflags: 0,
            data: 0,
            udata,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Knote {
    flags: u16,
    enabled: bool,
    udata: usize,
}

#[derive(Clone, Copy, Debug, Default)]
struct FdKnotes {
    read: Option<Knote>,
    write: Option<Knote>,
    /// What evq has registered for this fd: (interest, mode, wake-one).
    declared: Option<(Interest, Mode, bool)>,
    rotation: Option<WakeOneRotation>,
    /// Wake-one deliveries since the last rotation.
    since_rotation: u32,
}

impl FdKnotes {
    fn slot(&mut self, filter: i16) -> &mut Option<Knote> {
        if filter == EVFILT_READ {
            &mut self.read
        } else {
            &mut self.write
        }
    }

    fn get(&self, filter: i16) -> Option<Knote> {
        if filter == EVFILT_READ {
            self.read
        } else {
            self.write
        }
    }

    fn enabled(&self) -> impl Iterator<Item = (i16, Knote)> {
        [(EVFILT_READ, self.read), (EVFILT_WRITE, self.write)]
            .into_iter()
            .filter_map(|(f, k)| k.filter(|k| k.enabled).map(|k| (f, k)))
    }

    /// The registration the enabled knotes need (quirks a, b, d): edge if any
    /// enabled knote has `EV_CLEAR` (the others are then re-polled as level).
    fn wanted(&self) -> Option<(Interest, Mode, bool)> {
        let mut interest = Interest::empty();
        let (mut clear, mut wake_one) = (false, false);
        for (filter, k) in self.enabled() {
            interest |= if filter == EVFILT_READ {
                Interest::READ
            } else {
                Interest::WRITE
            };
            clear |= k.flags & EV_CLEAR != 0;
            wake_one |= k.flags & EV_WAKEONE != 0;
        }
        if interest.is_empty() {
            return None;
        }
        let mode = if clear { Mode::Event } else { Mode::Level };
        Some((interest, mode, wake_one))
    }
}

/// A kqueue: knotes per (descriptor, filter), changes and events through
/// [`kevent`](Kqueue::kevent).
///
/// ```
/// use evq_compat::kqueue::{Kevent, Kqueue, EVFILT_READ, EV_ADD};
/// use std::io::Write;
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
/// use std::time::Duration;
///
/// let (mut a, b) = UnixStream::pair()?;
/// let mut kq = Kqueue::new()?;
/// let change = Kevent::new(b.as_raw_fd() as usize, EVFILT_READ, EV_ADD, 42);
/// kq.kevent(&[change], &mut [], None)?;
/// a.write_all(b"hi")?;
/// let mut out = [Kevent::default(); 4];
/// let n = kq.kevent(&[], &mut out, Some(Duration::from_secs(5)))?;
/// assert_eq!((n, out[0].udata, out[0].data), (1, 42, 2));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Kqueue {
    queue: EventQueue,
    knotes: HashMap<RawFd, FdKnotes>,
    batch: Events,
    /// Level knotes delivered under an edge registration (quirk b).
    repoll: Vec<(RawFd, i16)>,
    /// Events found but not yet returned (the eventlist was full).
    overflow: VecDeque<Kevent>,
    /// The knotes (fd, filter) with an event in `overflow`.
    queued: HashSet<(RawFd, i16)>,
    /// The knotes the current `kevent` call has returned: a knote is on the active
    /// list once, so a call returns it at most once (quirk k).
    reported: HashSet<(RawFd, i16)>,
    /// Wake-one descriptors taken off their wait queue by the last call, to be
    /// added again (at the tail) by the next (quirk d).
    parked: Vec<RawFd>,
    rotate_every: u32,
}

impl Kqueue {
    /// A kqueue on evq's default backend.
    ///
    /// # Errors
    /// Those of [`EventQueue::new`].
    pub fn new() -> io::Result<Kqueue> {
        Self::with_queue(EventQueue::new()?)
    }

    /// A kqueue on the given evq backend (`EV_WAKEONE` needs one with wake-one).
    ///
    /// # Errors
    /// Those of [`EventQueue::with_backend`].
    pub fn with_backend(kind: BackendKind) -> io::Result<Kqueue> {
        Self::with_queue(EventQueue::with_backend(kind)?)
    }

    fn with_queue(queue: EventQueue) -> io::Result<Kqueue> {
        Ok(Kqueue {
            queue,
            knotes: HashMap::new(),
            batch: Events::with_capacity(64),
            repoll: Vec::new(),
            overflow: VecDeque::new(),
            queued: HashSet::new(),
            reported: HashSet::new(),
            parked: Vec::new(),
            rotate_every: WakeOneRotation::DEFAULT_EVERY,
        })
    }

    /// Sets how often an `EV_WAKEONE` registration rotates (0 = never, DragonFly's
    /// first prototype; 1 = after every event, "mkII", the default). Applies to
    /// knotes added afterwards.
    pub fn set_wakeone_rotation(&mut self, every: u32) {
        self.rotate_every = every;
    }

    /// Forgets every knote of `fd` without touching the number (quirk h): use it
    /// when the descriptor has been closed.
    pub fn forget_fd(&mut self, fd: RawFd) {
        if self.knotes.remove(&fd).is_some() {
            self.queue.forget(fd);
        }
        self.repoll.retain(|&(f, _)| f != fd);
        self.parked.retain(|&f| f != fd);
    }

    /// Applies `changelist`, then returns up to `eventlist.len()` events, waiting up
    /// to `timeout` (`None` = forever) for the first.
    ///
    /// kevent(2): changes are applied in order; a failing change is returned as an
    /// `EV_ERROR` receipt if `eventlist` has room (and then no events are scanned),
    /// else the call fails with its errno. An empty `eventlist` returns at once.
    ///
    /// # Errors
    /// A failing change with no room for its receipt; the queue's error while
    /// waiting.
    pub fn kevent(
        &mut self,
        changelist: &[Kevent],
        eventlist: &mut [Kevent],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.rejoin();
        let mut receipts = 0;
        for change in changelist {
            if let Err(errno) = self.register(change) {
                if receipts >= eventlist.len() {
                    return Err(io::Error::from_raw_os_error(errno));
                }
                eventlist[receipts] = Kevent {
                    flags: EV_ERROR,
                    data: errno as i64,
                    ..*change
                };
                receipts += 1;
            }
        }
        if receipts > 0 {
            return Ok(receipts);
        }
        if eventlist.is_empty() {
            return Ok(0);
        }
        self.scan(eventlist, timeout)
    }

    /// Applies one change; `Err(errno)` on failure with nothing changed.
    fn register(&mut self, kev: &Kevent) -> Result<(), i32> {
        if kev.filter != EVFILT_READ && kev.filter != EVFILT_WRITE {
            return Err(libc::EINVAL);
        }
        let fd = RawFd::try_from(kev.ident).map_err(|_| libc::EBADF)?;
        if !is_open(fd) {
            return Err(libc::EBADF);
        }
        let before = self.knotes.get(&fd).copied().unwrap_or_default();
        let mut after = before;
        let slot = after.slot(kev.filter);
        if kev.flags & EV_ADD != 0 {
            *slot = Some(Knote {
                flags: kev.flags & KEPT_FLAGS,
                enabled: kev.flags & EV_DISABLE == 0,
                udata: kev.udata,
            });
        } else {
            let Some(knote) = slot.as_mut() else {
                return Err(libc::ENOENT);
            };
            if kev.flags & EV_DELETE != 0 {
                *slot = None;
            } else if kev.flags & EV_DISABLE != 0 {
                knote.enabled = false;
            } else if kev.flags & EV_ENABLE != 0 {
                knote.enabled = true;
            }
        }
        self.commit(fd, before, after)
    }

    /// Makes evq's registration match `after`'s enabled knotes; on failure restores
    /// `before`.
    fn commit(&mut self, fd: RawFd, before: FdKnotes, mut after: FdKnotes) -> Result<(), i32> {
        let wanted = after.wanted();
        if wanted != before.declared {
            let result = match wanted {
                None => self
                    .queue
                    .declare_interest(fd, Interest::empty(), Options::new(fd as u64))
                    .map(|_| None),
                Some((interest, mode, false)) => self
                    .queue
                    .declare_interest(fd, interest, Options::new(fd as u64).mode(mode))
                    .map(|_| None),
                Some((interest, mode, true)) => {
                    let mut rot =
                        WakeOneRotation::new(fd, interest, Options::new(fd as u64).mode(mode))
                            .every(self.rotate_every);
                    rot.declare(&mut self.queue).map(|_| Some(rot))
                }
            };
            match result {
                Ok(rotation) => {
                    after.rotation = rotation;
                    after.declared = wanted;
                }
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(libc::EINVAL);
                    self.restore(fd, before);
                    return Err(errno);
                }
            }
        }
        if after.read.is_none() && after.write.is_none() {
            self.knotes.remove(&fd);
        } else {
            self.knotes.insert(fd, after);
        }
        self.repoll
            .retain(|&(f, filter)| f != fd || after.get(filter).is_some_and(|k| k.enabled));
        Ok(())
    }

    fn restore(&mut self, fd: RawFd, before: FdKnotes) {
        if before.read.is_none() && before.write.is_none() {
            self.knotes.remove(&fd);
        } else {
            self.knotes.insert(fd, before);
        }
    }

    /// Quirk d, first half: every `k`-th wake-one delivery takes this queue's
    /// registration off the descriptor's wait queue (`EPOLL_CTL_DEL`), so the next
    /// event goes to the next queue in line while this one is busy with this event.
    fn count_wakeone_delivery(&mut self, fd: RawFd) {
        let Some(k) = self.knotes.get_mut(&fd) else {
            return;
        };
        let Some(rot) = k.rotation else {
            return;
        };
        if rot.period() == 0 || k.declared.is_none() {
            return;
        }
        k.since_rotation += 1;
        if k.since_rotation < rot.period() {
            return;
        }
        k.since_rotation = 0;
        let revoked = self
            .queue
            .declare_interest(fd, Interest::empty(), Options::new(fd as u64));
        if revoked.is_ok() {
            k.declared = None;
            self.parked.push(fd);
        }
    }

    /// Quirk d, second half: at the next `kevent` call, once the application has
    /// acted on the event, the parked registrations are added again, at the tail
    /// of the wait queue. (Re-adding at once, while the descriptor is still ready,
    /// would queue a stale activation here beside the one the next waiter gets.)
    fn rejoin(&mut self) {
        for fd in std::mem::take(&mut self.parked) {
            let Some(notes) = self.knotes.get(&fd).copied() else {
                continue;
            };
            if notes.declared.is_some() {
                continue;
            }
            let before = FdKnotes {
                declared: None,
                ..notes
            };
            // On failure the knotes stay undeclared; the next change retries.
            let _ = self.commit(fd, before, notes);
        }
    }

    fn scan(&mut self, out: &mut [Kevent], timeout: Option<Duration>) -> io::Result<usize> {
        let mut n = 0;
        self.reported.clear();
        // Events found earlier that did not fit.
        while n < out.len() {
            let Some(ev) = self.overflow.pop_front() else {
                break;
            };
            self.queued.remove(&(ev.ident as RawFd, ev.filter));
            n += self.emit(ev, &mut out[n..]);
        }
        // Level knotes under an edge registration (quirk b).
        if n < out.len() && !self.repoll.is_empty() {
            let pending = std::mem::take(&mut self.repoll);
            for (fd, filter) in pending {
                if let Some(ev) = self.poll_knote(fd, filter) {
                    n += self.offer(ev, out, n);
                }
            }
        }
        if n == out.len() {
            return Ok(n);
        }
        let wait = if n > 0 { Some(Duration::ZERO) } else { timeout };
        let want = (out.len() - n).clamp(1, 1024);
        if self.batch.capacity() != want {
            self.batch = Events::with_capacity(want);
        }
        self.queue.get_next_event(&mut self.batch, wait)?;
        let batch = std::mem::replace(&mut self.batch, Events::with_capacity(0));
        for event in &batch {
            let fd = event.fd();
            let Some(notes) = self.knotes.get(&fd).copied() else {
                continue;
            };
            for (filter, _) in notes.enabled() {
                if let Some(ev) = self.make_event(fd, filter, event.readiness()) {
                    n += self.offer(ev, out, n);
                }
            }
            self.count_wakeone_delivery(fd);
        }
        self.batch = batch;
        Ok(n)
    }

    /// Returns `ev` in `out[n]` if there is room, else keeps it for the next call —
    /// unless its knote was already returned by this call or already waits in the
    /// overflow (quirk k). Returns how many events it wrote (0 or 1).
    fn offer(&mut self, ev: Kevent, out: &mut [Kevent], n: usize) -> usize {
        let knote = (ev.ident as RawFd, ev.filter);
        if self.reported.contains(&knote) || self.queued.contains(&knote) {
            return 0;
        }
        if n < out.len() {
            self.emit(ev, &mut out[n..])
        } else {
            self.queued.insert(knote);
            self.overflow.push_back(ev);
            0
        }
    }

    /// Writes `ev` to `out[0]` if its knote still exists and is enabled; applies
    /// `EV_ONESHOT` (quirk c) and the level re-poll (quirk b). Returns 0 or 1.
    fn emit(&mut self, mut ev: Kevent, out: &mut [Kevent]) -> usize {
        let fd = ev.ident as RawFd;
        let Some(notes) = self.knotes.get(&fd).copied() else {
            return 0;
        };
        let Some(knote) = notes.get(ev.filter).filter(|k| k.enabled) else {
            return 0;
        };
        ev.flags |= knote.flags;
        ev.udata = knote.udata;
        out[0] = ev;
        self.reported.insert((fd, ev.filter));
        if knote.flags & EV_ONESHOT != 0 {
            let mut after = notes;
            *after.slot(ev.filter) = None;
            // If the narrower registration cannot be declared, the knote stays
            // deleted in the table and the stale interest only costs spurious
            // wake-ups, which `scan` filters out.
            if self.commit(fd, notes, after).is_err() {
                self.restore(fd, after);
            }
        } else if knote.flags & EV_CLEAR == 0 && notes.declared.map(|d| d.1) == Some(Mode::Event) {
            self.repoll.push((fd, ev.filter));
        }
        1
    }

    fn poll_knote(&self, fd: RawFd, filter: i16) -> Option<Kevent> {
        let revents = poll_now(fd)?;
        self.make_event(fd, filter, evq::Readiness::from_poll(revents))
    }

    /// The event `filter` reports for a descriptor in state `r`, if any.
    fn make_event(&self, fd: RawFd, filter: i16, r: Readiness) -> Option<Kevent> {
        let mut ev = Kevent::new(fd as usize, filter, 0, 0);
        if filter == EVFILT_READ {
            if !r.intersects(Readiness::READ | Readiness::HUP | Readiness::ERROR) {
                return None;
            }
            if r.contains(Readiness::HUP) {
                ev.flags |= EV_EOF;
            }
            ev.data = readable_bytes(fd);
        } else {
            if !r.intersects(Readiness::WRITE | Readiness::ERROR) {
                return None;
            }
            if r.intersects(Readiness::HUP | Readiness::ERROR)
                && poll_now(fd).is_some_and(|p| p & (libc::POLLHUP | libc::POLLERR) != 0)
            {
                ev.flags |= EV_EOF;
            }
            ev.data = writable_space(fd);
        }
        Some(ev)
    }
}

impl std::fmt::Debug for Kqueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kqueue")
            .field("queue", &self.queue)
            .field("descriptors", &self.knotes.len())
            .finish()
    }
}
