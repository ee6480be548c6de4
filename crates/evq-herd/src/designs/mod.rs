//! The server designs of Stevens' *UNIX Network Programming* ch. 30 as SEEDS 003
//! ran them, plus epoll wake-one with rotation (alone, and in a fair-share group:
//! evq's default), the kqueue personality and
//! `SO_REUSEPORT` sharding. Every design runs in forked processes, so a run's
//! server shares nothing with the client threads but the listening socket and the
//! counters in shared memory.

mod handoff;
mod threads;

use crate::net::{self, accept, serve};
use crate::process::{
    fork_child, reap, Counter, FcntlLock, SharedCounters, SharedMutex, SleepMeter,
};
use crate::Design;
use evq::{BackendKind, EventQueue, Events, Interest, Options, WakeOneRotation};
use evq_compat::kqueue::{self, Kevent, Kqueue};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

/// How long a sleeping worker waits before looking at the stop flag.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// What every worker needs.
pub(crate) struct Ctx {
    pub listeners: Vec<RawFd>,
    pub counters: Arc<SharedCounters>,
    pub workers: usize,
}

impl Ctx {
    /// Marks the slot ready and starts counting its sleeps (until the meter drops).
    pub(crate) fn ready(&self, slot: usize) -> SleepMeter<'_> {
        self.counters.add(slot, Counter::Ready, 1);
        SleepMeter::start(&self.counters, slot)
    }
    pub(crate) fn served(&self, slot: usize, conn: RawFd) {
        serve(conn);
        self.counters.add(slot, Counter::Handled, 1);
    }
}

/// What a blocking `accept` came back with.
pub(crate) enum Accepted {
    Conn(RawFd),
    /// Timed out (`SO_RCVTIMEO`) or interrupted: look at the stop flag and go on.
    Again,
    /// The listener was shut down, or the run is over.
    Stop,
}

pub(crate) fn accept_blocking(ctx: &Ctx, lfd: RawFd, slot: usize) -> Accepted {
    match accept(lfd) {
        Ok(fd) => {
            ctx.counters.add(slot, Counter::Wakeups, 1);
            Accepted::Conn(fd)
        }
        Err(e) => match e.raw_os_error() {
            _ if ctx.counters.stopping() => Accepted::Stop,
            Some(libc::EAGAIN | libc::EINTR) => Accepted::Again,
            Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE) => {
                ctx.counters.add(slot, Counter::Wakeups, 1);
                Accepted::Again
            }
            _ => Accepted::Stop,
        },
    }
}

/// After a readiness wake-up: one non-blocking `accept`, served or counted as a
/// collision. `false` when the listener is gone.
fn accept_after_wakeup(ctx: &Ctx, lfd: RawFd, slot: usize) -> bool {
    ctx.counters.add(slot, Counter::Wakeups, 1);
    match accept(lfd) {
        Ok(conn) => {
            ctx.served(slot, conn);
            true
        }
        Err(e) => match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EINTR | libc::ECONNABORTED) => {
                ctx.counters.add(slot, Counter::Collisions, 1);
                true
            }
            _ => false,
        },
    }
}

/// A started server: its processes, and the lock it shares with them.
pub(crate) struct Server {
    pub pids: Vec<libc::pid_t>,
    /// serv04's mutex: kept mapped (and not destroyed) until the children are reaped.
    pub _mutex: Option<SharedMutex>,
}

/// Starts `design`; returns the processes to reap when the run is over.
pub(crate) fn start(design: Design, ctx: &Arc<Ctx>) -> io::Result<Server> {
    let w = ctx.workers;
    let lfd = ctx.listeners[0];
    let mut pids = Vec::new();
    let mut kept_mutex = None;
    let result = (|| -> io::Result<()> {
        match design {
            Design::Serv00 => pids.push(fork_child(|| serv02_worker(ctx, lfd, 0))?),
            Design::Serv01 => pids.push(fork_child(|| handoff::serv01_master(ctx, lfd))?),
            Design::Serv02 => {
                for slot in 0..w {
                    pids.push(fork_child(|| serv02_worker(ctx, lfd, slot))?);
                }
            }
            Design::Reuseport => {
                for slot in 0..w {
                    let l = ctx.listeners[slot];
                    pids.push(fork_child(|| serv02_worker(ctx, l, slot))?);
                }
            }
            Design::Serv02l => {
                for slot in 0..w {
                    pids.push(fork_child(|| select_worker(ctx, lfd, slot))?);
                }
            }
            Design::Serv02lK => {
                for slot in 0..w {
                    pids.push(fork_child(|| epoll_worker(ctx, lfd, slot, None))?);
                }
            }
            Design::Serv02lKone
            | Design::Serv02lKoneR1
            | Design::Serv02lKoneR16
            | Design::Serv02lKoneFair => {
                let one = WakeOneRotation::new(lfd, Interest::READ, Options::new(0));
                let rotations = match design {
                    Design::Serv02lKone => vec![one.every(0); w],
                    Design::Serv02lKoneR1 => vec![one.every(1); w],
                    Design::Serv02lKoneR16 => vec![one.every(16); w],
                    // evq's default: rotation every DEFAULT_EVERY in a fair-share
                    // group, its ledger in shared memory made before the fork.
                    _ => one.fair_among(w)?,
                };
                for (slot, rot) in rotations.into_iter().enumerate() {
                    pids.push(fork_child(|| epoll_worker(ctx, lfd, slot, Some(rot)))?);
                }
            }
            Design::Serv02lKoneKq => {
                for slot in 0..w {
                    pids.push(fork_child(|| kqueue_worker(ctx, lfd, slot))?);
                }
            }
            Design::Serv03 => {
                let lock = FcntlLock::new()?;
                for slot in 0..w {
                    pids.push(fork_child(|| {
                        locked_worker(ctx, lfd, slot, || lock.lock(), || lock.unlock())
                    })?);
                }
            }
            Design::Serv04 => {
                let mutex = kept_mutex.insert(SharedMutex::new()?);
                for slot in 0..w {
                    pids.push(fork_child(|| {
                        locked_worker(ctx, lfd, slot, || mutex.lock(), || mutex.unlock())
                    })?);
                }
            }
            Design::Serv05 => pids.push(fork_child(|| handoff::serv05_master(ctx, lfd))?),
            Design::Serv06 | Design::Serv07 | Design::Serv08 | Design::Serv09 => {
                let ctx2 = ctx.clone();
                pids.push(fork_child(move || threads::server(design, ctx2, lfd))?);
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        ctx.counters.stop();
        for &l in &ctx.listeners {
            net::shutdown(l);
        }
        reap(&pids, Duration::from_secs(2));
        return Err(e);
    }
    Ok(Server {
        pids,
        _mutex: kept_mutex,
    })
}

/// serv00 (one worker) and serv02 / reuseport: block in `accept`, no locking.
fn serv02_worker(ctx: &Ctx, lfd: RawFd, slot: usize) -> i32 {
    let _meter = ctx.ready(slot);
    loop {
        match accept_blocking(ctx, lfd, slot) {
            Accepted::Conn(c) => ctx.served(slot, c),
            Accepted::Again => {}
            Accepted::Stop => return 0,
        }
    }
}

/// serv03 / serv04: a lock (fcntl or process-shared mutex) around `accept`.
fn locked_worker(ctx: &Ctx, lfd: RawFd, slot: usize, lock: impl Fn(), unlock: impl Fn()) -> i32 {
    let _meter = ctx.ready(slot);
    loop {
        lock();
        let got = accept_blocking(ctx, lfd, slot);
        unlock();
        match got {
            Accepted::Conn(c) => ctx.served(slot, c),
            Accepted::Again => {}
            Accepted::Stop => return 0,
        }
    }
}

/// serv02l: every worker sleeps in `select` on the (non-blocking) listener; all of
/// them wake per connection, one wins the `accept`.
fn select_worker(ctx: &Ctx, lfd: RawFd, slot: usize) -> i32 {
    if lfd as usize >= libc::FD_SETSIZE {
        return 2;
    }
    let _meter = ctx.ready(slot);
    while !ctx.counters.stopping() {
        // SAFETY: an all-zero fd_set is empty; FD_SET with an fd < FD_SETSIZE
        // (checked above) stays in bounds; select reads and writes the live set.
        let n = unsafe {
            let mut set: libc::fd_set = std::mem::zeroed();
            libc::FD_SET(lfd, &mut set);
            let mut tv = libc::timeval {
                tv_sec: 0,
                tv_usec: TICK.as_micros() as libc::suseconds_t,
            };
            libc::select(
                lfd + 1,
                &mut set,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut tv,
            )
        };
        if n > 0 && !accept_after_wakeup(ctx, lfd, slot) {
            break;
        }
    }
    0
}

/// serv02l-k (`rotation` None: a plain epoll registration per worker, everybody
/// wakes) and serv02l-kone (wake-one, rotating as `rotation` says; a member of a
/// fair-share group that is ahead of the others waits out of line in `rejoin`
/// until they catch up).
fn epoll_worker(ctx: &Ctx, lfd: RawFd, slot: usize, mut rotation: Option<WakeOneRotation>) -> i32 {
    let Ok(mut q) = EventQueue::with_backend(BackendKind::Epoll) else {
        return 2;
    };
    let declared = match rotation.as_mut() {
        Some(r) => r.declare(&mut q),
        None => q.declare_interest(lfd, Interest::READ, Options::new(0)),
    };
    if declared.is_err() {
        return 2;
    }
    let _meter = ctx.ready(slot);
    let mut events = Events::with_capacity(4);
    while !ctx.counters.stopping() {
        if let Some(r) = rotation.as_mut().filter(|r| r.is_yielding()) {
            if r.rejoin(&mut q, TICK).is_err() {
                return 3;
            }
            continue;
        }
        match q.get_next_event(&mut events, Some(TICK)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => return 3,
        }
        if !accept_after_wakeup(ctx, lfd, slot) {
            break;
        }
        if let Some(r) = rotation.as_mut() {
            if r.delivered(&mut q).is_err() {
                return 3;
            }
        }
    }
    0
}

/// serv02l-kone on the kqueue personality: `EV_ADD | EV_WAKEONE` on the listener,
/// DragonFly mkII rotation (the personality's default).
fn kqueue_worker(ctx: &Ctx, lfd: RawFd, slot: usize) -> i32 {
    let Ok(mut kq) = Kqueue::with_backend(BackendKind::Epoll) else {
        return 2;
    };
    let add = Kevent::new(
        lfd as usize,
        kqueue::EVFILT_READ,
        kqueue::EV_ADD | kqueue::EV_WAKEONE,
        slot,
    );
    if kq.kevent(&[add], &mut [], None).is_err() {
        return 2;
    }
    let _meter = ctx.ready(slot);
    let mut out = [Kevent::default(); 4];
    while !ctx.counters.stopping() {
        match kq.kevent(&[], &mut out, Some(TICK)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => return 3,
        }
        if !accept_after_wakeup(ctx, lfd, slot) {
            break;
        }
    }
    0
}
