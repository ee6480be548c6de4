//! The `io_uring(7)` backend: poll requests whose completions land in a ring shared
//! with the kernel — the general form of /dev/epoll's mmapped result area (SEEDS
//! 002). Needs Linux 5.13 (multishot poll) and `IORING_FEAT_EXT_ARG` (5.11).
//!
//! # Quirks of io_uring polling, and what this file does about them
//!
//! a) **A CQE's `user_data` names a request, not a registration.** After a modify
//!    (cancel + `POLL_ADD`; the crate has no `POLL_UPDATE`) both the old and
//!    the new request may complete under the same queue key, and a final old CQE
//!    without `IORING_CQE_F_MORE` must not make us re-arm a second poll. So
//!    `user_data` is `(arm sequence << 32) | fd` and a completion counts only if its
//!    sequence is the fd's current one; the event then carries the registration's
//!    key, whose generation the queue checks as for every backend. Sequence 0 marks
//!    our own cancel requests, whose CQEs (and the `-ECANCELED` of the request they
//!    cancel) never become user events.
//! b) **Multishot poll is level-like once, then edge-like**: it polls the file when
//!    armed (so an fd already ready posts at once) and then posts on wake-ups. That
//!    is event mode. Level mode uses a *single-shot* poll re-armed when its FIFO
//!    entry is taken for delivery: the re-arm polls the file again, so a still-ready
//!    fd completes at the next submit — level semantics with one SQE per delivery.
//!    Oneshot is a single-shot poll that is not re-armed until modify (unless its
//!    event was suppressed as stale, h: then it has not fired yet and looks again).
//! c) **A multishot request can end on its own** (a CQE without `F_MORE`; 6.x ends
//!    multishot polls while the CQ is overflowing, to let the application catch
//!    up). It is re-armed when its entry is taken for delivery, and the fresh poll
//!    reports the current state, so nothing is lost. Re-arming while reaping is a
//!    trap we fell into: the new request completes straight into the overflow list
//!    again, which ends it again — a livelock inside one wait.
//! d) **The CQ ring can overflow.** With `IORING_FEAT_NODROP` the kernel keeps the
//!    extra CQEs and sets `IORING_SQ_CQ_OVERFLOW`; they come back only on an enter
//!    with `GETEVENTS`, so after draining the CQ we enter again while the flag is
//!    set, until the kernel's list is empty — a parked CQE left behind surfaces
//!    after its fd was delivered and read (we saw exactly that). Without NODROP the
//!    `overflow` counter grows and CQEs are gone: every registration is then
//!    re-armed. `-EBUSY` from a submit is backpressure: reap first.
//!    CQEs are drained into a user-space FIFO (one entry per fd, bands ORed), so a
//!    batch smaller than the ready set neither loses nor starves anyone.
//! e) **`SINGLE_ISSUER` / `DEFER_TASKRUN` tie the ring to one thread** (6.0/6.1):
//!    another task's enter fails with `EEXIST`, and deferred completions are only
//!    posted when the issuer enters with `GETEVENTS` — even a zero-timeout check
//!    must do that. The queue is `Send`, so when it is used from a new thread the
//!    ring is rebuilt there and every registration re-armed (fresh polls report the
//!    current state). Setup flags the kernel refuses (`EINVAL`) are dropped one by
//!    one: defer-taskrun, single-issuer, coop-taskrun.
//! f) **Nothing is submitted outside `wait`**: add/modify/remove only queue work
//!    (spilling to a user-space backlog when the SQ is full), and one
//!    `io_uring_enter` both submits them and waits, with the timeout passed as an
//!    extended argument instead of a linked `TIMEOUT` request. The state that
//!    `declare_interest` reads is still race-free: the poll, when it is armed, looks
//!    at the file's state itself.
//! g) **A poll holds a reference to the file**: closing the fd does not end the
//!    request (epoll's quirk a again), and a request that is never ended keeps the
//!    socket open with no descriptor left anywhere — the peer waits for a FIN that
//!    never comes. A close through the queue cancels first, and it cancels with
//!    `ASYNC_CANCEL`, not `POLL_REMOVE`: `POLL_REMOVE` answers `-EALREADY` to a
//!    poll whose wake-up is being processed (with `DEFER_TASKRUN`, any poll that
//!    fired since our last enter), and a multishot poll then simply goes on. We
//!    found it as HTTP/1.0 connections that never closed, one in a few thousand,
//!    and as a ring whose fdinfo listed polls for files long closed.
//!    `ASYNC_CANCEL` marks the poll cancelled even while it is owned. A reused
//!    number is re-polled by the modify that its new registration causes. A poll
//!    armed on a number already closed completes with `-EBADF`: reported `gone`.
//! h) **A CQE's mask is that of the wake-up** that posted it, not of dequeue time,
//!    and names only its own cause: data arriving on a socket posts `POLLIN` even if
//!    the socket is also writable, and the data may be read by the time the CQE is
//!    reaped. Several CQEs for one fd in one call become one FIFO entry; then the
//!    batch about to be delivered is checked with one `poll(2)` over just its
//!    descriptors, so masks are current and an event whose cause was consumed is
//!    suppressed (the paper's rule, and epoll's `EPOLLET` behaviour). That costs a
//!    second syscall per non-empty wait — the price of the contract; the ring
//!    alone cannot give current state.
//! i) **Ring sizes**: 256 SQ and 1024 CQ entries; `EVQ_URING_ENTRIES=n` sets both
//!    (the CQ overflow test uses 4).
//! j) **No wake-one**: `EPOLLEXCLUSIVE` semantics are not offered for io_uring polls.
//! k) **Dropping a ring interrupts its creator thread**: teardown is deferred and
//!    queues task work on the thread that built the ring, whose next blocking call
//!    (a `read`, a `sleep`) then returns `EINTR`. `probe()` therefore builds its ring
//!    on a short-lived thread; a program that drops a uring queue should expect one
//!    `EINTR` on that thread (evq's own waits retry it).
//! l) **The kernel resolves a `POLL_ADD`'s fd number when it is submitted**, not
//!    when it is queued. A request queued for a connection that is then closed (a
//!    server that accepts, answers and closes inside one pass never waits between)
//!    would be submitted on whatever file that number names by then — in another
//!    thread's hands, perhaps. So poll requests are kept as (fd, sequence) until
//!    the submit in `wait`, built only if the registration still wants them; a
//!    registration removed before that costs the ring nothing at all.
//! m) **A registered ring fd belongs to one thread, and pins the ring.**
//!    `IORING_REGISTER_RING_FDS` puts the ring in the calling task's table so that
//!    `io_uring_enter` skips the fd lookup; the entry holds a reference to the ring,
//!    so a ring closed without unregistering lives on — with every poll it holds,
//!    and every file those polls hold (quirk g) — until that thread exits, and only
//!    that thread can unregister it. A queue is `Send`; one dropped on another
//!    thread would leak exactly so. It saved nothing measurable to pay for that
//!    (pipebench, 1,000 and 10,000 fds: uring / raw epoll 1.55–1.80 with it, 1.56–1.59
//!    without, 6.18 kernel): it is off unless `EVQ_URING_REGISTERED_RING=1`, and
//!    then it is used only on the registering thread and given back on drop or
//!    rebuild when that thread does it.

use super::syscall::{current_tid, syscall};
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::{Mode, Readiness};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

const DEFAULT_SQ_ENTRIES: u32 = 256;
const DEFAULT_CQ_ENTRIES: u32 = 1024;
/// `user_data` of our own `POLL_REMOVE` requests (sequence 0).
const INTERNAL: u64 = u32::MAX as u64;

#[derive(Clone, Copy, Default)]
struct Slot {
    watch: Option<Watch>,
    /// Sequence of the current poll request; its CQEs are the only ones that count.
    seq: u32,
    /// A poll request is in flight (or waiting in `arms` for submission).
    armed: bool,
    /// The current request is still in `arms`: the kernel has not seen it, so
    /// cancelling it is forgetting it (quirk l).
    unsubmitted: bool,
    /// A oneshot registration delivered its event.
    spent: bool,
    /// In the ready FIFO.
    queued: bool,
    /// ORed poll bits of CQEs not yet delivered.
    bits: u32,
    /// The fd was found closed.
    gone: bool,
}

pub(crate) struct UringBackend {
    ring: IoUring,
    single_issuer: bool,
    issuer: libc::pid_t,
    sq_entries: u32,
    cq_entries: u32,
    slots: Vec<Slot>,
    ready: VecDeque<RawFd>,
    backlog: VecDeque<squeue::Entry>,
    /// Poll requests to build at the next submit: (fd, sequence) (quirk l).
    arms: Vec<(RawFd, u32)>,
    next_seq: u32,
    lost_seen: u32,
    /// This call's events: (fd, poll bits).
    batch: Vec<(RawFd, u32)>,
    pollfds: Vec<libc::pollfd>,
    /// The ring's registered index, when `EVQ_URING_REGISTERED_RING=1` (quirk m).
    registered: Option<RegisteredRing>,
    /// Waits that found the CQ overflowed, parked or lost CQEs (quirk d).
    overflows: u64,
}

/// A ring fd registered in one thread's table (`IORING_REGISTER_RING_FDS`, 5.18).
#[derive(Clone, Copy)]
struct RegisteredRing {
    index: u32,
    thread: libc::pid_t,
}

#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

impl RegisteredRing {
    /// Registers `ring` in this thread's table if the environment asks for it.
    fn register(ring: &IoUring) -> Option<RegisteredRing> {
        if std::env::var("EVQ_URING_REGISTERED_RING").as_deref() != Ok("1") {
            return None;
        }
        let mut up = RsrcUpdate {
            offset: u32::MAX,
            resv: 0,
            data: ring.as_raw_fd() as u64,
        };
        // SAFETY: `up` is a live io_uring_rsrc_update; the count is 1.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd(),
                20, // IORING_REGISTER_RING_FDS
                &mut up as *mut RsrcUpdate,
                1,
            )
        };
        (rc == 1).then(|| RegisteredRing {
            index: up.offset,
            thread: current_tid(),
        })
    }

    /// Gives the index back; only the registering thread can (its table is per task).
    fn unregister(self, ring: &IoUring) {
        if current_tid() != self.thread {
            return;
        }
        let up = RsrcUpdate {
            offset: self.index,
            resv: 0,
            data: 0,
        };
        // SAFETY: `up` is a live io_uring_rsrc_update; the count is 1.
        unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                ring.as_raw_fd(),
                21, // IORING_UNREGISTER_RING_FDS
                &up as *const RsrcUpdate,
                1,
            )
        };
    }

    /// `io_uring_enter(index, len, 1, GETEVENTS | EXT_ARG | REGISTERED_RING, ts)`.
    fn submit_and_wait(self, to_submit: usize, timeout: Option<Duration>) -> io::Result<()> {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let arg = GeteventsArg {
            sigmask: 0,
            sigmask_sz: 0,
            min_wait_usec: 0,
            ts: ts.as_ref().map_or(0, |t| t as *const libc::timespec as u64),
        };
        const GETEVENTS: u32 = 1;
        const REGISTERED_RING: u32 = 16;
        const EXT_ARG: u32 = 8;
        // SAFETY: `arg` (and the timespec it points to) outlive the call; the SQ tail
        // was published when the submission queue handles were dropped.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                self.index,
                to_submit as u32,
                1u32,
                GETEVENTS | EXT_ARG | REGISTERED_RING,
                &arg as *const GeteventsArg,
                std::mem::size_of::<GeteventsArg>(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

fn ring_sizes() -> (u32, u32) {
    // EVQ_URING_ENTRIES sets both rings (tests use it to force CQ overflow).
    match std::env::var("EVQ_URING_ENTRIES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        Some(n) if n > 0 => (n, n),
        _ => (DEFAULT_SQ_ENTRIES, DEFAULT_CQ_ENTRIES),
    }
}

/// Builds a ring with the best setup flags the kernel accepts (quirk e).
fn build_ring(sq: u32, cq: u32) -> io::Result<(IoUring, bool)> {
    // (single_issuer, defer_taskrun, coop_taskrun)
    const TRIES: [(bool, bool, bool); 4] = [
        (true, true, true),
        (true, false, true),
        (false, false, true),
        (false, false, false),
    ];
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for (single, defer, coop) in TRIES {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq.max(sq)).setup_clamp();
        if coop {
            b.setup_coop_taskrun();
        }
        if single {
            b.setup_single_issuer();
        }
        if defer {
            b.setup_defer_taskrun();
        }
        match b.build(sq) {
            Ok(ring) => {
                if !ring.params().is_feature_ext_arg() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "io_uring lacks IORING_FEAT_EXT_ARG (Linux 5.11)",
                    ));
                }
                return Ok((ring, single));
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        if let Some(r) = self.registered.take() {
            r.unregister(&self.ring);
        }
    }
}

impl UringBackend {
    fn with_registered_ring(mut self) -> Self {
        self.registered = RegisteredRing::register(&self.ring);
        self
    }

    /// Really creates a ring (and drops it).
    fn probe_ring() -> io::Result<()> {
        // Built and dropped on a short-lived thread: a ring's teardown is deferred
        // and queues task work on the thread that created it, which then sees EINTR
        // from its next blocking call. `available()` must not do that to its caller
        // (found when an HTTP test client's read returned EINTR after a probe).
        let (sq, cq) = ring_sizes();
        // A plain spawn, not `thread::scope`: scope gives the *calling* thread a std
        // `Thread` handle, which a C caller's thread then never frees (valgrind).
        std::thread::Builder::new()
            .name("evq-uring-probe".into())
            .spawn(move || build_ring(sq, cq).map(drop))?
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("io_uring probe thread panicked")))
    }

    fn slot(&mut self, fd: RawFd) -> &mut Slot {
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::default());
        }
        &mut self.slots[i]
    }

    fn queue_sqe(&mut self, e: squeue::Entry) {
        if !self.backlog.is_empty() {
            self.backlog.push_back(e);
            return;
        }
        // SAFETY: our entries (POLL_ADD, POLL_REMOVE) carry only integers, no
        // pointers into user memory that would have to outlive the request.
        if unsafe { self.ring.submission().push(&e) }.is_err() {
            self.backlog.push_back(e);
        }
    }

    /// Asks for a poll request for `fd`'s current watch (quirk b); it is built
    /// from the watch at the next submit, if the watch still wants it (quirk l).
    fn arm(&mut self, fd: RawFd) {
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        let seq = self.next_seq;
        let slot = self.slot(fd);
        if slot.watch.is_none() {
            return;
        }
        slot.seq = seq;
        slot.armed = true;
        slot.unsubmitted = true;
        self.arms.push((fd, seq));
    }

    /// Ends `fd`'s current request: forgotten if the kernel has not seen it yet,
    /// else cancelled with `ASYNC_CANCEL` (quirk g: `POLL_REMOVE` can refuse).
    fn cancel(&mut self, fd: RawFd) {
        let slot = self.slot(fd);
        if !slot.armed {
            return;
        }
        slot.armed = false;
        let target = ((slot.seq as u64) << 32) | fd as u32 as u64;
        slot.seq = 0;
        if std::mem::take(&mut slot.unsubmitted) {
            // Its entry in `arms` no longer matches the slot's sequence: skipped.
            return;
        }
        self.queue_sqe(opcode::AsyncCancel::new(target).build().user_data(INTERNAL));
    }

    /// Builds the SQEs of the poll requests still wanted, at the last moment: the
    /// fd number is resolved by the kernel at submit (quirk l).
    fn build_arms(&mut self) {
        let arms = std::mem::take(&mut self.arms);
        for &(fd, seq) in &arms {
            let slot = &mut self.slots[fd as usize];
            let Some(w) = slot.watch else { continue };
            if !slot.armed || !slot.unsubmitted || slot.seq != seq {
                continue;
            }
            slot.unsubmitted = false;
            let e = opcode::PollAdd::new(types::Fd(fd), w.interest.to_poll() as u16 as u32)
                .multi(w.mode == Mode::Event)
                .build()
                .user_data(((seq as u64) << 32) | fd as u32 as u64);
            self.queue_sqe(e);
        }
        // Keep the allocation.
        self.arms = arms;
        self.arms.clear();
    }

    /// Re-arms every registration that should be polled (quirks c, d, e).
    fn rearm_all(&mut self) {
        for fd in 0..self.slots.len() {
            let s = self.slots[fd];
            if s.watch.is_some() && !s.spent && !s.gone {
                if s.armed {
                    self.cancel(fd as RawFd);
                }
                self.arm(fd as RawFd);
            }
        }
    }

    /// Quirk e: a ring bound to another thread is rebuilt on this one.
    fn follow_thread(&mut self) -> io::Result<()> {
        if !self.single_issuer || current_tid() == self.issuer {
            return Ok(());
        }
        let (ring, single) = build_ring(self.sq_entries, self.cq_entries)?;
        if let Some(r) = self.registered.take() {
            r.unregister(&self.ring);
        }
        self.ring = ring;
        self.registered = RegisteredRing::register(&self.ring);
        self.single_issuer = single;
        self.issuer = current_tid();
        self.backlog.clear();
        self.arms.clear();
        self.lost_seen = 0;
        for s in &mut self.slots {
            s.armed = false;
            s.unsubmitted = false;
        }
        self.rearm_all();
        Ok(())
    }

    /// Builds the wanted poll requests and moves the backlog into the SQ,
    /// submitting (without waiting) when it fills.
    fn fill_sq(&mut self) -> io::Result<()> {
        self.build_arms();
        while let Some(e) = self.backlog.front() {
            // SAFETY: as in `queue_sqe`.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                self.backlog.pop_front();
                continue;
            }
            match self.ring.submit() {
                Ok(_) => {}
                // CQ overflow backpressure: reap first, the rest waits.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            self.reap();
        }
        Ok(())
    }

    /// Drains the CQ into the ready FIFO; returns how many CQEs it took.
    fn reap(&mut self) -> usize {
        let mut taken = 0;
        for cqe in self.ring.completion() {
            taken += 1;
            let ud = cqe.user_data();
            let seq = (ud >> 32) as u32;
            let fd = ud as u32 as RawFd;
            if seq == 0 {
                continue;
            }
            let Some(slot) = self.slots.get_mut(fd as usize) else {
                continue;
            };
            if slot.seq != seq || slot.watch.is_none() {
                // Quirk a: an older request of this fd (stale or cancelled).
                continue;
            }
            if !cqueue::more(cqe.flags()) {
                slot.armed = false;
            }
            let res = cqe.result();
            if res >= 0 {
                slot.bits |= res as u32;
            } else if res == -libc::EBADF {
                slot.gone = true;
            } else if res != -libc::ECANCELED {
                // (ECANCELED of the current request was not our doing: it is re-armed
                // when its FIFO entry comes up, like any request that ended.)
                slot.bits |= libc::POLLERR as u16 as u32;
                slot.spent = true;
            }
            // Re-arming happens at delivery, not here: a request re-armed while the
            // CQ overflows would complete into the overflow again at once (livelock).
            if !slot.queued {
                slot.queued = true;
                self.ready.push_back(fd);
            }
        }
        taken
    }

    /// Takes up to `max` entries off the ready FIFO into `batch`, re-arming ended
    /// requests and reporting closed descriptors as they come.
    fn take_batch<F: FnMut(SysEvent)>(&mut self, max: usize, on_event: &mut F) {
        self.batch.clear();
        while self.batch.len() < max {
            let Some(fd) = self.ready.pop_front() else {
                break;
            };
            let slot = &mut self.slots[fd as usize];
            slot.queued = false;
            let Some(w) = slot.watch else { continue };
            if slot.gone {
                *slot = Slot::default();
                on_event(SysEvent {
                    key: w.key,
                    readiness: Readiness::empty(),
                    gone: true,
                });
                continue;
            }
            let bits = std::mem::take(&mut slot.bits);
            if !slot.armed && !slot.spent && w.mode != Mode::Oneshot {
                // Level: the single-shot poll fired; event: the multishot request
                // ended (quirks b, c). The fresh poll looks at the current state.
                self.arm(fd);
            }
            self.batch.push((fd, bits));
        }
    }

    /// Quirk h: replaces the wake-up masks of this batch by the current state, from
    /// one `poll(2)` over just the batch's descriptors.
    fn current_masks(&mut self) {
        self.pollfds.clear();
        for &(fd, _) in &self.batch {
            if let Some(w) = self.slots[fd as usize].watch {
                self.pollfds.push(libc::pollfd {
                    fd,
                    events: w.interest.to_poll(),
                    revents: 0,
                });
            }
        }
        if self.pollfds.is_empty() {
            return;
        }
        let polled = loop {
            match syscall!(poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                0
            )) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        if polled.is_err() {
            // Keep the wake-up masks: stale is better than lost.
            return;
        }
        let mut p = 0;
        for entry in &mut self.batch {
            if p < self.pollfds.len() && self.pollfds[p].fd == entry.0 {
                entry.1 = self.pollfds[p].revents as u16 as u32;
                p += 1;
            }
        }
    }

    fn lost_cqes(&mut self) -> bool {
        let lost = self.ring.completion().overflow();
        if lost != self.lost_seen {
            self.lost_seen = lost;
            return true;
        }
        false
    }
}

impl Backend for UringBackend {
    // Quirk h: CQE masks are checked by poll(2) over the batch before delivery. Quirk
    // j: no wake-one.
    const CAPABILITIES: Capabilities = Capabilities {
        level: true,
        event: true,
        oneshot: true,
        wake_one: false,
        cost_grows_with_interest: false,
        current_state_masks: true,
        fifo: true,
        shared_descriptors: true,
        regular_files: true,
    };

    fn probe() -> io::Result<()> {
        UringBackend::probe_ring()
    }

    fn overflows(&self) -> u64 {
        self.overflows
    }

    fn open() -> io::Result<Self> {
        let (sq_entries, cq_entries) = ring_sizes();
        let (ring, single_issuer) = build_ring(sq_entries, cq_entries)?;
        Ok(UringBackend {
            ring,
            single_issuer,
            issuer: current_tid(),
            sq_entries,
            cq_entries,
            slots: Vec::new(),
            ready: VecDeque::new(),
            backlog: VecDeque::new(),
            arms: Vec::new(),
            next_seq: 0,
            lost_seen: 0,
            batch: Vec::new(),
            pollfds: Vec::new(),
            registered: None,
            overflows: 0,
        }
        .with_registered_ring())
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        if w.fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if !super::syscall::is_open(w.fd) {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        self.cancel(w.fd);
        let slot = self.slot(w.fd);
        *slot = Slot {
            watch: Some(*w),
            queued: slot.queued,
            ..Slot::default()
        };
        self.arm(w.fd);
        Ok(())
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        // `add` checks the descriptor before it changes anything.
        Ok(self.add(new)?)
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.forget(old);
        Ok(())
    }

    fn forget(&mut self, old: &Watch) {
        // Cancelling names the request by `user_data`, never the fd number.
        if (old.fd as usize) < self.slots.len() {
            self.cancel(old.fd);
            let slot = self.slot(old.fd);
            *slot = Slot {
                queued: slot.queued,
                ..Slot::default()
            };
        }
    }

    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        self.follow_thread()?;
        let max = max.max(1);
        self.fill_sq()?;
        self.reap();
        let mut interrupted = false;
        let must_enter = self.ready.is_empty() || !self.ring.submission().is_empty();
        if must_enter {
            // Events already in hand: only look. `None`: wait for good.
            let wait = if self.ready.is_empty() {
                timeout
            } else {
                Some(Duration::ZERO)
            };
            let entered = match self.registered {
                Some(r) if r.thread == current_tid() => {
                    r.submit_and_wait(self.ring.submission().len(), wait)
                }
                _ => {
                    let ts = types::Timespec::from(wait.unwrap_or_default());
                    let until = types::SubmitArgs::new().timespec(&ts);
                    let forever = types::SubmitArgs::new();
                    let args = if wait.is_none() { &forever } else { &until };
                    self.ring.submitter().submit_with_args(1, args).map(drop)
                }
            };
            match entered {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => interrupted = true,
                // Quirk d: CQ overflow backpressure; reap and let the next call submit.
                Err(e)
                    if e.raw_os_error() == Some(libc::EBUSY)
                        || e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(e) => return Err(e),
            }
        }
        self.reap();
        // Quirk d: bring back CQEs the kernel parked while the CQ was full.
        let mut overflowed = self.ring.submission().cq_overflow();
        while self.ring.submission().cq_overflow() {
            match self.ring.submit_and_wait(0) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => return Err(e),
            }
            // Until the kernel's list is empty: a parked CQE left behind would
            // surface after its fd was delivered and read, as a stale event.
            if self.reap() == 0 {
                break;
            }
        }
        if self.lost_cqes() {
            overflowed = true;
            self.rearm_all();
        }
        self.overflows += overflowed as u64;
        self.take_batch(max, &mut on_event);
        self.current_masks();
        let mut delivered = 0;
        for i in 0..self.batch.len() {
            let (fd, bits) = self.batch[i];
            let Some(w) = self.slots[fd as usize].watch else {
                continue;
            };
            if bits & libc::POLLNVAL as u16 as u32 != 0 {
                self.cancel(fd);
                self.slots[fd as usize] = Slot::default();
                on_event(SysEvent {
                    key: w.key,
                    readiness: Readiness::empty(),
                    gone: true,
                });
                continue;
            }
            let readiness = Readiness::from_poll(bits as u16 as i16).answering(w.interest);
            if readiness.is_empty() {
                // Suppressed (its cause was consumed): a oneshot request that ended
                // must look again, it has not delivered its one event.
                let slot = self.slots[fd as usize];
                if w.mode == Mode::Oneshot && !slot.armed && !slot.spent {
                    self.arm(fd);
                }
                continue;
            }
            on_event(SysEvent {
                key: w.key,
                readiness,
                gone: false,
            });
            delivered += 1;
            if w.mode == Mode::Oneshot {
                let slot = &mut self.slots[fd as usize];
                slot.spent = true;
                if slot.armed {
                    self.cancel(fd);
                }
            }
        }
        if delivered == 0 && interrupted {
            return Err(io::Error::from_raw_os_error(libc::EINTR));
        }
        Ok(())
    }
}
