//! The POSIX real-time signal backends (SEEDS 001, Lever and Tweedie; phhttpd):
//! `rtsig` dequeues one signal per `sigtimedwait(2)`, `rtsig-bulk` reads up to a
//! whole batch of `signalfd_siginfo` records in one `read(2)` of a `signalfd(2)`,
//! today's nearest thing to their `sigtimedwait4()`.
//!
//! # Quirks of RT-signal I/O, and what this file does about them
//!
//! a) **Only files with a `fasync` method signal.** Sockets, pipes, FIFOs and ttys
//!    do; `eventfd`, `timerfd`, `signalfd`, `epoll` and regular files accept
//!    `F_SETFL(O_ASYNC)` without complaint and then never send anything. Only
//!    `fasync` sets the flag, though, so reading it back tells: such descriptors are
//!    refused with `EPERM` (epoll's answer for files it cannot watch) instead of
//!    being accepted and never reported. The queue's own notifier is an eventfd, so
//!    it cannot wake a `sigtimedwait`: [`SignalKick`] makes `Notifier::notify` also
//!    send this queue's signal to the waiting thread with `tgkill(2)` (`si_code ==
//!    SI_TKILL`), at most one in flight, and the notifier is then checked by poll
//!    like any candidate (b).
//! b) **Signals are edges, with stale payloads.** `si_band` is the state *when the
//!    signal was queued*; by dequeue time the data may be read, the fd closed, or
//!    the number reused by another file (which a dup elsewhere can keep signalling
//!    under the old number). So a dequeued signal is only a *hint*: a hint whose
//!    band does not concern the registration's interest (data arriving on a socket
//!    registered for writing) is dropped, the others go into a user-space FIFO of
//!    candidates, one entry per fd however many signals named it (Luban's
//!    one-sig-per-fd, done in user space: rather than ORing the bands, the current
//!    state supersedes them), and each wait checks the front of that FIFO with one
//!    `poll(2)` over just those fds. An event is reported only if the *current*
//!    file under that number is registered, armed and answers its interest: a stale
//!    `si_fd` can cost a poll entry, never a false event, and masks are the state
//!    at dequeue time.
//! c) **Level mode is emulated with that FIFO**: a level registration that was just
//!    delivered goes back to the tail, so the next wait polls it again and reports
//!    it while the state still answers the interest (and rotates through a ready set
//!    larger than the batch). Event mode is the natural signal semantics (reported
//!    when something arrives, coalesced until dequeued); oneshot disarms after one.
//!    Every new or modified registration is a candidate too, so a descriptor that is
//!    already ready when interest is declared is reported, as epoll does.
//! d) **The RT queue is bounded** (`RLIMIT_SIGPENDING`, per user). When it is full
//!    the kernel queues plain `SIGIO` to the owner instead, which collapses. SIGIO
//!    is blocked and waited for with our signal, and since lower-numbered signals are
//!    dequeued first it is seen before the backlog. Recovery: drain our RT signal
//!    (discard), then make *every* registration a candidate; the candidate polls
//!    report exactly what is ready, a batch at a time — nothing lost, nothing
//!    invented. SIGIO is process-wide, so two queues waited on by one thread could
//!    take each other's: a global overflow epoch makes every queue recover.
//! e) **One RT signal per queue.** `F_SETSIG` picks it; queues allocate distinct
//!    numbers from `SIGRTMIN+2..=SIGRTMAX` (glibc keeps the first two) through a
//!    process-global bitmap, so several queues in a process do not steal each
//!    other's events. A file registered in two queues signals only the last one
//!    that armed it (`F_SETSIG`/`F_SETOWN_EX` are per open file description).
//! f) **Signals go to a thread.** `F_SETOWN_EX(F_OWNER_TID)` directs them to the
//!    waiting thread, where they must stay blocked (an unblocked RT signal kills the
//!    process). The queue is `Send`: when it is used from a new thread, that thread
//!    blocks the signals, every descriptor is re-owned, and — because signals
//!    already queued to the old thread are out of reach — every registration becomes
//!    a candidate once. Threads that ever ran the queue keep the signals blocked.
//! g) **Revoking clears `O_ASYNC`**, but only if the file still signals *us*
//!    (`F_GETSIG` is our number): after a close and reuse the number may name a file
//!    someone else set up. A close removes the file's async registration by itself.
//! h) **`O_NONBLOCK` is set** on every registered descriptor: with signal-driven
//!    I/O a blocking read after a stale hint would hang the loop.
//! i) **Cannot do** wake-one (a file signals one owner). Write space arrives as
//!    `POLL_OUT` with `si_band = POLLOUT|POLLWRNORM|POLLWRBAND` (772), but sockets
//!    send it only after a writer found the buffer full (`SOCK_NOSPACE`): an edge
//!    for writers that ran into EAGAIN, which is what event mode promises; level
//!    mode does not depend on it (c).
//! j) **A wait drains the whole signal queue first.** Writers raise a signal per
//!    write, so a busy descriptor can have thousands queued, and most are stale
//!    by the time they are dequeued (the data was read after an earlier one).
//!    Dequeuing only as many signals as the batch holds left a backlog in which a
//!    fresh hint waited behind tens of thousands of stale ones: a zero-timeout wait
//!    returned nothing while a descriptor was ready and its signal queued (found by
//!    `evq torture`: `SigQ` at 46,568, data unread for hundreds of milliseconds).
//!    Every pending signal costs one candidate at most (the FIFO holds one entry per
//!    fd), so a wait now takes everything queued, then polls candidates until one
//!    is ready or all were seen, and returns empty-handed only when the kernel's
//!    queue was found empty.

use super::syscall::{current_tid, syscall};
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::interest_table::NOTIFY_KEY;
use crate::{Mode, Readiness};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// Not (yet) in the `libc` crate for every target; values from <asm-generic/fcntl.h>.
const F_SETSIG: libc::c_int = 10;
const F_GETSIG: libc::c_int = 11;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// glibc reserves SIGRTMIN and SIGRTMIN+1 internally on some versions; skip two more
/// so applications keep the low numbers they conventionally use.
const FIRST_OFFSET: libc::c_int = 2;

static SIGNALS_IN_USE: Mutex<u64> = Mutex::new(0);
static OVERFLOW_EPOCH: AtomicU64 = AtomicU64::new(0);

/// One RT signal number owned by one queue; freed on drop.
struct RtSignal(libc::c_int);

impl RtSignal {
    fn allocate() -> io::Result<RtSignal> {
        let lo = libc::SIGRTMIN() + FIRST_OFFSET;
        let hi = libc::SIGRTMAX().min(lo + 63);
        let mut used = SIGNALS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        for signo in lo..=hi {
            let bit = 1u64 << (signo - lo);
            if *used & bit == 0 {
                *used |= bit;
                return Ok(RtSignal(signo));
            }
        }
        Err(io::Error::other(format!(
            "all {} real-time signals evq uses (SIGRTMIN+{FIRST_OFFSET}..=SIGRTMAX) are \
             taken by other rtsig queues in this process; drop one or use another backend",
            (hi - lo + 1).max(0)
        )))
    }
}

impl Drop for RtSignal {
    fn drop(&mut self) {
        let lo = libc::SIGRTMIN() + FIRST_OFFSET;
        let mut used = SIGNALS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
        *used &= !(1u64 << (self.0 - lo));
    }
}

/// Lets `Notifier::notify` wake a thread blocked in `sigtimedwait` (quirk a).
#[derive(Debug)]
pub(crate) struct SignalKick {
    tid: AtomicI32,
    signo: libc::c_int,
    pending: AtomicBool,
}

impl SignalKick {
    /// Sends the queue's signal to its waiting thread unless a kick is in flight.
    pub(crate) fn kick(&self) {
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let tid = self.tid.load(Ordering::Acquire);
        // SAFETY: getpid(2) cannot fail.
        let pid = unsafe { libc::getpid() };
        // SAFETY: tgkill(2) takes plain integers. A full RT queue (EAGAIN) falls back
        // to SIGIO, which collapses, never fails for lack of room, and makes the
        // queue poll every registration including the notifier (quirk d). ESRCH (the
        // thread is gone) needs nothing: the next wait runs elsewhere and rechecks
        // everything (quirk f).
        let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, self.signo) };
        if rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
            // SAFETY: as above.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGIO) };
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Slot {
    watch: Option<Watch>,
    /// False once a oneshot registration delivered its event.
    armed: bool,
    /// In the candidate FIFO.
    queued: bool,
}

/// What a dequeued signal says.
enum Hint {
    /// A descriptor and the poll bits (`si_band`) of what happened to it.
    Fd(RawFd, u32),
    Kick,
    Overflow,
}

/// `BULK`: `rtsig-bulk` (a `signalfd` read of a whole batch) rather than `rtsig`
/// (one `sigtimedwait` per signal).
pub(crate) struct RtSignalBackend<const BULK: bool> {
    signal: RtSignal,
    /// Our RT signal and SIGIO.
    set: libc::sigset_t,
    signalfd: Option<OwnedFd>,
    owner: libc::pid_t,
    slots: Vec<Slot>,
    candidates: VecDeque<RawFd>,
    seen_epoch: u64,
    infos: Vec<libc::signalfd_siginfo>,
    pollfds: Vec<libc::pollfd>,
    kick: Arc<SignalKick>,
    notify_fd: RawFd,
    /// Recoveries from a full RT queue (quirk d).
    overflows: u64,
}

/// The part of `siginfo_t` that `SIGPOLL`-class signals fill (see `<bits/siginfo.h>`).
#[repr(C)]
struct SigPollInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    #[cfg(target_pointer_width = "64")]
    _pad: libc::c_int,
    band: libc::c_long,
    fd: libc::c_int,
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

fn hint(signo: libc::c_int, code: libc::c_int, fd: RawFd, band: u32) -> Hint {
    if signo == libc::SIGIO {
        Hint::Overflow
    } else if code > 0 {
        // POLL_IN .. POLL_HUP: sent by the kernel for a file.
        Hint::Fd(fd, band)
    } else {
        // SI_TKILL (our kick) or anything user space queued: treat as a wake-up.
        Hint::Kick
    }
}

impl<const BULK: bool> RtSignalBackend<BULK> {
    fn open_flavour(bulk: bool) -> io::Result<Self> {
        let signal = RtSignal::allocate()?;
        // SAFETY: an all-zero sigset_t is a valid (if unspecified) value; sigemptyset
        // initialises it properly before use.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal.0);
            libc::sigaddset(&mut set, libc::SIGIO);
        }
        let signalfd = if bulk {
            let fd = syscall!(signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC))?;
            // SAFETY: signalfd(2) with fd -1 returns a new descriptor that we own.
            Some(unsafe { OwnedFd::from_raw_fd(fd) })
        } else {
            None
        };
        let tid = current_tid();
        block(&set)?;
        Ok(RtSignalBackend {
            kick: Arc::new(SignalKick {
                tid: AtomicI32::new(tid),
                signo: signal.0,
                pending: AtomicBool::new(false),
            }),
            signal,
            set,
            signalfd,
            owner: tid,
            slots: Vec::new(),
            candidates: VecDeque::new(),
            seen_epoch: OVERFLOW_EPOCH.load(Ordering::Acquire),
            infos: Vec::new(),
            pollfds: Vec::new(),
            notify_fd: -1,
            overflows: 0,
        })
    }

    /// Probes without side effects on the calling thread's signal mask.
    fn probe_flavour(bulk: bool) -> io::Result<()> {
        let signal = RtSignal::allocate()?;
        if bulk {
            // SAFETY: as in `open`.
            let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: `set` is a live sigset_t.
            unsafe {
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, signal.0);
            }
            let fd = syscall!(signalfd(-1, &set, libc::SFD_CLOEXEC))?;
            // SAFETY: a new descriptor from signalfd(2), closed here.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        Ok(())
    }

    fn slot(&mut self, fd: RawFd) -> &mut Slot {
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::default());
        }
        &mut self.slots[i]
    }

    fn push_candidate(&mut self, fd: RawFd) {
        if let Some(slot) = self.slots.get_mut(fd as usize) {
            if slot.watch.is_some() && slot.armed && !slot.queued {
                slot.queued = true;
                self.candidates.push_back(fd);
            }
        }
    }

    fn arm(&self, fd: RawFd) -> io::Result<()> {
        let flags = syscall!(fcntl(fd, libc::F_GETFL))?;
        syscall!(fcntl(fd, F_SETSIG, self.signal.0))?;
        let owner = FOwnerEx {
            kind: F_OWNER_TID,
            pid: self.owner,
        };
        syscall!(fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx))?;
        if flags & (libc::O_ASYNC | libc::O_NONBLOCK) != libc::O_ASYNC | libc::O_NONBLOCK {
            syscall!(fcntl(
                fd,
                libc::F_SETFL,
                flags | libc::O_ASYNC | libc::O_NONBLOCK
            ))?;
            // Quirk a: only a file's `fasync` method sets O_ASYNC, so if it did not
            // stick, this file will never signal. Refuse, as epoll refuses files it
            // cannot watch, rather than accept a registration that never fires.
            if syscall!(fcntl(fd, libc::F_GETFL))? & libc::O_ASYNC == 0 {
                let _ = syscall!(fcntl(fd, libc::F_SETFL, flags));
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        Ok(())
    }

    fn disarm(&self, fd: RawFd) {
        // Quirk g: leave a file alone that no longer signals us.
        if syscall!(fcntl(fd, F_GETSIG)).ok() != Some(self.signal.0) {
            return;
        }
        if let Ok(flags) = syscall!(fcntl(fd, libc::F_GETFL)) {
            let _ = syscall!(fcntl(fd, libc::F_SETFL, flags & !libc::O_ASYNC));
        }
    }

    /// Quirk f: the queue moved to another thread.
    fn follow_thread(&mut self) -> io::Result<()> {
        let tid = current_tid();
        if tid == self.owner {
            return Ok(());
        }
        block(&self.set)?;
        self.owner = tid;
        self.kick.tid.store(tid, Ordering::Release);
        // A kick still in flight went to the old thread, where nobody dequeues it:
        // left set, the mark would silence every later notify (the notifier is a
        // candidate below, so what that kick announced is not lost).
        self.kick.pending.store(false, Ordering::Release);
        let owner = FOwnerEx {
            kind: F_OWNER_TID,
            pid: tid,
        };
        for fd in 0..self.slots.len() {
            if self.slots[fd].watch.is_some() && fd as RawFd != self.notify_fd {
                // A closed fd shows up as POLLNVAL when polled as a candidate.
                let _ = syscall!(fcntl(fd as RawFd, F_SETOWN_EX, &owner as *const FOwnerEx));
            }
            self.push_candidate(fd as RawFd);
        }
        Ok(())
    }

    /// Quirk d: drop the backlog, then look at everything.
    fn recover(&mut self) -> io::Result<()> {
        self.overflows += 1;
        self.seen_epoch = OVERFLOW_EPOCH.load(Ordering::Acquire);
        while self.dequeue(1024, Some(Duration::ZERO), |_| {})? > 0 {}
        self.kick.pending.store(false, Ordering::Release);
        for fd in 0..self.slots.len() {
            self.push_candidate(fd as RawFd);
        }
        Ok(())
    }

    /// Dequeues up to `max` signals, blocking for the first one as long as `timeout`
    /// allows, handing each to `on_hint`; returns how many.
    fn dequeue<F: FnMut(Hint)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_hint: F,
    ) -> io::Result<usize> {
        if let Some(sfd) = &self.signalfd {
            let sfd = sfd.as_raw_fd();
            if timeout != Some(Duration::ZERO) {
                let mut pfd = libc::pollfd {
                    fd: sfd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                if syscall!(poll(&mut pfd, 1, super::syscall::timeout_ms(timeout)))? == 0 {
                    return Ok(0);
                }
            }
            let want = max.clamp(1, 1024);
            if self.infos.len() < want {
                // SAFETY: signalfd_siginfo is plain integers; all-zero is valid.
                let zero: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
                self.infos.resize(want, zero);
            }
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let n = match syscall!(read(sfd, self.infos.as_mut_ptr().cast(), want * size)) {
                Ok(n) => n as usize / size,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(e),
            };
            for info in &self.infos[..n] {
                on_hint(hint(
                    info.ssi_signo as i32,
                    info.ssi_code,
                    info.ssi_fd,
                    info.ssi_band,
                ));
            }
            return Ok(n);
        }
        let zero = timespec(Duration::ZERO);
        let first = timeout.map(timespec);
        let mut taken = 0;
        while taken < max {
            // SAFETY: siginfo_t is plain data; all-zero is valid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let ts: *const libc::timespec = match (taken, &first) {
                (0, None) => std::ptr::null(),
                (0, Some(t)) => t,
                _ => &zero,
            };
            match syscall!(sigtimedwait(&self.set, &mut info, ts)) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                Err(e) => return Err(e),
            }
            // SAFETY: siginfo_t is at least as large as SigPollInfo (128 bytes), and
            // for SIGPOLL-class codes the kernel fills si_band and si_fd there.
            let p = unsafe {
                std::ptr::read_unaligned((&info as *const libc::siginfo_t).cast::<SigPollInfo>())
            };
            on_hint(hint(p.signo, p.code, p.fd, p.band as u32));
            taken += 1;
        }
        Ok(taken)
    }

    /// Dequeues up to `max` signals (blocking for the first as `timeout` allows) into
    /// the candidate FIFO; returns how many it dequeued.
    fn take_hints(&mut self, max: usize, timeout: Option<Duration>) -> io::Result<usize> {
        let mut overflow = false;
        let mut fds = std::mem::take(&mut self.pollfds);
        fds.clear();
        let result = self.dequeue(max, timeout, |h| match h {
            Hint::Overflow => overflow = true,
            Hint::Kick => fds.push(libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0,
            }),
            Hint::Fd(fd, band) => fds.push(libc::pollfd {
                fd,
                events: 0,
                revents: band as u16 as i16,
            }),
        });
        for pfd in &fds {
            if pfd.fd == -1 {
                self.kick.pending.store(false, Ordering::Release);
                self.push_candidate(self.notify_fd);
            } else if self.band_answers(pfd.fd, pfd.revents) {
                self.push_candidate(pfd.fd);
            }
        }
        self.pollfds = fds;
        if overflow {
            OVERFLOW_EPOCH.fetch_add(1, Ordering::AcqRel);
            self.recover()?;
        }
        result
    }

    /// Whether a signal's band concerns the registration: data arriving on a
    /// socket registered for writing only is not an event for it.
    fn band_answers(&self, fd: RawFd, band: i16) -> bool {
        match self.slots.get(fd as usize).and_then(|s| s.watch) {
            Some(w) => band & (w.interest.to_poll() | libc::POLLHUP | libc::POLLERR) != 0,
            None => false,
        }
    }

    /// Checks up to `max` candidates with one `poll(2)` and reports the ready ones;
    /// returns how many it reported.
    fn report<F: FnMut(SysEvent)>(&mut self, max: usize, on_event: &mut F) -> io::Result<usize> {
        self.pollfds.clear();
        while self.pollfds.len() < max {
            let Some(fd) = self.candidates.pop_front() else {
                break;
            };
            let slot = &mut self.slots[fd as usize];
            slot.queued = false;
            if let (Some(w), true) = (slot.watch, slot.armed) {
                self.pollfds.push(libc::pollfd {
                    fd,
                    events: w.interest.to_poll(),
                    revents: 0,
                });
            }
        }
        if self.pollfds.is_empty() {
            return Ok(0);
        }
        loop {
            match syscall!(poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                0
            )) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Put them back so nothing is lost, then report.
                    for i in (0..self.pollfds.len()).rev() {
                        let fd = self.pollfds[i].fd;
                        self.slots[fd as usize].queued = true;
                        self.candidates.push_front(fd);
                    }
                    return Err(e);
                }
            }
        }
        let mut reported = 0;
        for i in 0..self.pollfds.len() {
            let pfd = self.pollfds[i];
            let slot = &mut self.slots[pfd.fd as usize];
            let Some(w) = slot.watch else { continue };
            if pfd.revents & libc::POLLNVAL != 0 {
                *slot = Slot {
                    queued: slot.queued,
                    ..Slot::default()
                };
                on_event(SysEvent {
                    key: w.key,
                    readiness: Readiness::empty(),
                    gone: true,
                });
                continue;
            }
            let readiness = Readiness::from_poll(pfd.revents).answering(w.interest);
            if readiness.is_empty() {
                // Not ready: the next arrival signals.
                continue;
            }
            on_event(SysEvent {
                key: w.key,
                readiness,
                gone: false,
            });
            reported += 1;
            match w.mode {
                Mode::Level => self.push_candidate(pfd.fd),
                Mode::Oneshot => slot.armed = false,
                Mode::Event => {}
            }
        }
        Ok(reported)
    }
}

fn block(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

impl<const BULK: bool> Backend for RtSignalBackend<BULK> {
    // Every candidate is checked by poll(2) before it is reported, so masks are
    // current; the RT queue is FIFO, and so is the candidate list (after an overflow,
    // recovery reports in descriptor order); a file signals one owner, so no
    // wake-one and no sharing (quirks b, d, e, i).
    const CAPABILITIES: Capabilities = Capabilities {
        level: true,
        event: true,
        oneshot: true,
        wake_one: false,
        cost_grows_with_interest: false,
        current_state_masks: true,
        fifo: true,
        shared_descriptors: false,
        regular_files: false,
    };

    fn probe() -> io::Result<()> {
        Self::probe_flavour(BULK)
    }

    fn open() -> io::Result<Self> {
        Self::open_flavour(BULK)
    }

    fn signal_kick(&self) -> Option<Arc<SignalKick>> {
        Some(self.kick.clone())
    }

    fn overflows(&self) -> u64 {
        self.overflows
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        self.follow_thread()?;
        if w.key == NOTIFY_KEY {
            // Quirk a: woken by SignalKick, checked like any candidate.
            self.notify_fd = w.fd;
        } else {
            self.arm(w.fd)?;
        }
        let queued = self.slot(w.fd).queued;
        *self.slot(w.fd) = Slot {
            watch: Some(*w),
            armed: true,
            queued,
        };
        self.push_candidate(w.fd);
        Ok(())
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        // `add` re-applies the same signal and owner (idempotent) before it changes
        // the slot, so a failure leaves the old watch in force.
        Ok(self.add(new)?)
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.forget(old);
        if old.key != NOTIFY_KEY {
            self.disarm(old.fd);
        }
        Ok(())
    }

    fn forget(&mut self, old: &Watch) {
        // A close removes the file's async registration by itself (quirk g).
        if let Some(slot) = self.slots.get_mut(old.fd as usize) {
            // `queued` stays: the FIFO entry is skipped when it comes up.
            slot.watch = None;
            slot.armed = false;
        }
    }

    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let max = max.max(1);
        self.follow_thread()?;
        if OVERFLOW_EPOCH.load(Ordering::Acquire) != self.seen_epoch {
            self.recover()?;
        }
        // Quirk j: everything the kernel has queued first, then the candidates until
        // one is ready; block only when the queue was empty and no candidate was.
        let mut result = self.drain_queued();
        let mut blocked = false;
        let mut reported = 0;
        loop {
            reported += self.report(max - reported, &mut on_event)?;
            if reported > 0 || result.is_err() {
                break;
            }
            if !self.candidates.is_empty() {
                continue;
            }
            if blocked || timeout == Some(Duration::ZERO) {
                break;
            }
            blocked = true;
            result = self.take_hints(1, timeout).map(drop);
            if result.is_ok() {
                result = self.drain_queued();
            }
        }
        result
    }
}

impl<const BULK: bool> RtSignalBackend<BULK> {
    /// Quirk j: dequeues every signal already queued (without blocking) into the
    /// candidate FIFO, a chunk at a time, up to `DRAIN_LIMIT` per wait.
    fn drain_queued(&mut self) -> io::Result<()> {
        const CHUNK: usize = 1024;
        for _ in 0..DRAIN_LIMIT / CHUNK {
            if self.take_hints(CHUNK, Some(Duration::ZERO))? < CHUNK {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Signals one wait dequeues at most (quirk j): above any `RLIMIT_SIGPENDING` seen
/// in practice (96,364 here), so a wait sees the whole queue; a bound all the same,
/// so that writers faster than the drain cannot keep one wait going for ever.
const DRAIN_LIMIT: usize = 128 * 1024;

impl<const BULK: bool> Drop for RtSignalBackend<BULK> {
    fn drop(&mut self) {
        for fd in 0..self.slots.len() {
            if self.slots[fd].watch.is_some() && fd as RawFd != self.notify_fd {
                self.disarm(fd as RawFd);
            }
        }
        if current_tid() == self.owner {
            // Leave no backlog for the next queue that gets this number; SIGIO may be
            // another queue's, so bump the epoch rather than swallow it silently.
            let mut overflow = false;
            while let Ok(1..) = self.dequeue(1024, Some(Duration::ZERO), |h| {
                overflow |= matches!(h, Hint::Overflow);
            }) {}
            if overflow {
                OVERFLOW_EPOCH.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}
