//! The server designs of Stevens' *UNIX Network Programming* ch. 30 as SEEDS 003
//! ran them, plus epoll wake-one with rotation, the kqueue personality and
//! `SO_REUSEPORT` sharding. Every design runs in forked processes, so a run's
//! server shares nothing with the client threads but the listening socket and the
//! counters in shared memory.

use crate::net::{self, accept, serve};
use crate::process::{
    fork_child, reap, Counter, FcntlLock, SharedCounters, SharedMutex, SleepMeter,
};
use crate::Design;
use evq::{BackendKind, EventQueue, Events, Interest, Options, WakeOneRotation};
use evq_compat::kqueue::{self, Kevent, Kqueue};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

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
    fn ready(&self, slot: usize) -> SleepMeter<'_> {
        self.counters.add(slot, Counter::Ready, 1);
        SleepMeter::start(&self.counters, slot)
    }
    fn served(&self, slot: usize, conn: RawFd) {
        serve(conn);
        self.counters.add(slot, Counter::Handled, 1);
    }
}

/// What a blocking `accept` came back with.
enum Accepted {
    Conn(RawFd),
    /// Timed out (`SO_RCVTIMEO`) or interrupted: look at the stop flag and go on.
    Again,
    /// The listener was shut down, or the run is over.
    Stop,
}

fn accept_blocking(ctx: &Ctx, lfd: RawFd, slot: usize) -> Accepted {
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
            Design::Serv01 => pids.push(fork_child(|| serv01_master(ctx, lfd))?),
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
            Design::Serv02lK
            | Design::Serv02lKone
            | Design::Serv02lKoneR1
            | Design::Serv02lKoneR16 => {
                let rotation = match design {
                    Design::Serv02lK => None,
                    Design::Serv02lKone => Some(0),
                    Design::Serv02lKoneR1 => Some(1),
                    _ => Some(16),
                };
                for slot in 0..w {
                    pids.push(fork_child(|| epoll_worker(ctx, lfd, slot, rotation))?);
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
            Design::Serv05 => pids.push(fork_child(|| serv05_master(ctx, lfd))?),
            Design::Serv06 | Design::Serv07 | Design::Serv08 | Design::Serv09 => {
                let ctx2 = ctx.clone();
                pids.push(fork_child(move || threads_server(design, ctx2, lfd))?);
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
/// wakes) and serv02l-kone (wake-one; `Some(k)` rotates every k deliveries, 0 never).
fn epoll_worker(ctx: &Ctx, lfd: RawFd, slot: usize, rotation: Option<u32>) -> i32 {
    let Ok(mut q) = EventQueue::with_backend(BackendKind::Epoll) else {
        return 2;
    };
    let mut rot =
        rotation.map(|k| WakeOneRotation::new(lfd, Interest::READ, Options::new(0)).every(k));
    let declared = match rot.as_mut() {
        Some(r) => r.declare(&mut q),
        None => q.declare_interest(lfd, Interest::READ, Options::new(0)),
    };
    if declared.is_err() {
        return 2;
    }
    let _meter = ctx.ready(slot);
    let mut events = Events::with_capacity(4);
    while !ctx.counters.stopping() {
        match q.get_next_event(&mut events, Some(TICK)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => return 3,
        }
        if !accept_after_wakeup(ctx, lfd, slot) {
            break;
        }
        if let Some(r) = rot.as_mut() {
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

/// serv01: the master accepts and forks a child per connection.
fn serv01_master(ctx: &Ctx, lfd: RawFd) -> i32 {
    let slot = 0;
    let _meter = ctx.ready(slot);
    let mut live = 0usize;
    loop {
        match accept_blocking(ctx, lfd, slot) {
            Accepted::Conn(c) => {
                match fork_child(|| {
                    serve(c);
                    0
                }) {
                    Ok(_) => {
                        live += 1;
                        ctx.counters.add(slot, Counter::Handled, 1);
                    }
                    Err(_) => ctx.served(slot, c),
                }
                net::close(c);
            }
            Accepted::Again => {}
            Accepted::Stop => break,
        }
        // Reap finished children without blocking.
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status into a live int.
            if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
                break;
            }
            live = live.saturating_sub(1);
        }
    }
    while live > 0 {
        let mut status = 0;
        // SAFETY: as above; blocks for a child that is about to exit.
        if unsafe { libc::waitpid(-1, &mut status, 0) } <= 0 {
            break;
        }
        live -= 1;
    }
    0
}

/// serv05: the master accepts and passes each connection (`SCM_RIGHTS`) to the
/// first idle worker; a worker writes a byte back when done.
fn serv05_master(ctx: &Ctx, lfd: RawFd) -> i32 {
    let w = ctx.workers;
    let master_slot = w;
    let mut ends = Vec::with_capacity(w);
    let mut pids = Vec::with_capacity(w);
    for slot in 0..w {
        let Ok((ours, theirs)) = net::socketpair() else {
            break;
        };
        let others: Vec<RawFd> = ends.clone();
        let child = fork_child(|| {
            net::close(ours);
            for &o in &others {
                net::close(o);
            }
            serv05_worker(ctx, theirs, slot)
        });
        net::close(theirs);
        match child {
            Ok(pid) => {
                pids.push(pid);
                ends.push(ours);
            }
            Err(_) => {
                net::close(ours);
                break;
            }
        }
    }
    if ends.len() == w {
        let _meter = ctx.ready(master_slot);
        serv05_dispatch(ctx, lfd, &ends, master_slot);
    }
    for &e in &ends {
        net::close(e);
    }
    reap(&pids, Duration::from_secs(3));
    0
}

fn serv05_dispatch(ctx: &Ctx, lfd: RawFd, ends: &[RawFd], master_slot: usize) {
    let mut idle = vec![true; ends.len()];
    let mut alive = vec![true; ends.len()];
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(ends.len() + 1);
    while !ctx.counters.stopping() {
        fds.clear();
        for &e in ends {
            fds.push(libc::pollfd {
                fd: e,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let any_idle = idle.iter().zip(&alive).any(|(&i, &a)| i && a);
        fds.push(libc::pollfd {
            fd: if any_idle { lfd } else { -1 },
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: a live array of `fds.len()` pollfds.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                TICK.as_millis() as i32,
            )
        };
        if n <= 0 {
            continue;
        }
        for (i, p) in fds[..ends.len()].iter().enumerate() {
            if p.revents != 0 {
                let mut b = [0u8; 16];
                // SAFETY: reads into a live buffer.
                let r = unsafe { libc::read(ends[i], b.as_mut_ptr().cast(), b.len()) };
                if r > 0 {
                    idle[i] = true;
                } else {
                    alive[i] = false;
                }
            }
        }
        if fds[ends.len()].revents == 0 {
            continue;
        }
        match accept_blocking(ctx, lfd, master_slot) {
            Accepted::Conn(c) => {
                let pick = (0..ends.len()).find(|&i| idle[i] && alive[i]);
                match pick {
                    Some(i) if net::send_fd(ends[i], c).is_ok() => idle[i] = false,
                    _ => ctx.served(master_slot, c),
                }
                net::close(c);
            }
            Accepted::Again => {}
            Accepted::Stop => return,
        }
    }
}

fn serv05_worker(ctx: &Ctx, sock: RawFd, slot: usize) -> i32 {
    let _meter = ctx.ready(slot);
    loop {
        match net::recv_fd(sock) {
            Ok(Some(c)) => {
                ctx.counters.add(slot, Counter::Wakeups, 1);
                ctx.served(slot, c);
                // SAFETY: writes one byte from a live buffer.
                unsafe { libc::write(sock, b"d".as_ptr().cast(), 1) };
            }
            Ok(None) => return 0,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => return 3,
        }
    }
}

/// serv06–serv09: one process, threads.
fn threads_server(design: Design, ctx: Arc<Ctx>, lfd: RawFd) -> i32 {
    let w = ctx.workers;
    match design {
        Design::Serv06 => {
            let in_flight = Arc::new(AtomicUsize::new(0));
            let _meter = ctx.ready(0);
            loop {
                match accept_blocking(&ctx, lfd, 0) {
                    Accepted::Conn(c) => {
                        in_flight.fetch_add(1, Ordering::AcqRel);
                        let (ctx2, n2) = (ctx.clone(), in_flight.clone());
                        let spawned =
                            std::thread::Builder::new()
                                .stack_size(64 * 1024)
                                .spawn(move || {
                                    ctx2.served(0, c);
                                    n2.fetch_sub(1, Ordering::AcqRel);
                                });
                        if spawned.is_err() {
                            in_flight.fetch_sub(1, Ordering::AcqRel);
                            ctx.served(0, c);
                        }
                    }
                    Accepted::Again => {}
                    Accepted::Stop => break,
                }
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            while in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            0
        }
        Design::Serv07 | Design::Serv09 => {
            let lock = Arc::new(Mutex::new(()));
            let threads: Vec<_> = (0..w)
                .map(|slot| {
                    let (ctx, lock) = (ctx.clone(), lock.clone());
                    let locking = design == Design::Serv07;
                    std::thread::spawn(move || {
                        let _meter = ctx.ready(slot);
                        loop {
                            let got = if locking {
                                let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
                                accept_blocking(&ctx, lfd, slot)
                            } else {
                                accept_blocking(&ctx, lfd, slot)
                            };
                            match got {
                                Accepted::Conn(c) => ctx.served(slot, c),
                                Accepted::Again => {}
                                Accepted::Stop => break,
                            }
                        }
                    })
                })
                .collect();
            for t in threads {
                let _ = t.join();
            }
            0
        }
        _ => serv08(ctx, lfd),
    }
}

/// serv08: the main thread accepts and hands each connection to a worker thread
/// through a mutex-protected queue and a condition variable.
fn serv08(ctx: Arc<Ctx>, lfd: RawFd) -> i32 {
    let w = ctx.workers;
    let shared = Arc::new((
        Mutex::new((VecDeque::<RawFd>::new(), false)),
        Condvar::new(),
    ));
    let threads: Vec<_> = (0..w)
        .map(|slot| {
            let (ctx, shared) = (ctx.clone(), shared.clone());
            std::thread::spawn(move || {
                let _meter = ctx.ready(slot);
                let (m, cv) = &*shared;
                let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if let Some(c) = g.0.pop_front() {
                        drop(g);
                        ctx.counters.add(slot, Counter::Wakeups, 1);
                        ctx.served(slot, c);
                        g = m.lock().unwrap_or_else(|p| p.into_inner());
                    } else if g.1 {
                        return;
                    } else {
                        g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                }
            })
        })
        .collect();
    let master = w;
    let _meter = ctx.ready(master);
    loop {
        match accept_blocking(&ctx, lfd, master) {
            Accepted::Conn(c) => {
                let (m, cv) = &*shared;
                m.lock().unwrap_or_else(|p| p.into_inner()).0.push_back(c);
                cv.notify_one();
            }
            Accepted::Again => {}
            Accepted::Stop => break,
        }
    }
    {
        let (m, cv) = &*shared;
        m.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        cv.notify_all();
    }
    for t in threads {
        let _ = t.join();
    }
    0
}
