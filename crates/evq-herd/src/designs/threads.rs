//! The prethreaded designs, each in one forked process: serv06 (thread per
//! client), serv07 (mutex around `accept`), serv08 (main thread accepts and hands
//! off), serv09 (every thread in `accept`).

use super::{accept_blocking, Accepted, Ctx};
use crate::process::Counter;
use crate::Design;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// serv06–serv09: one process, threads.
pub(crate) fn server(design: Design, ctx: Arc<Ctx>, lfd: RawFd) -> i32 {
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
