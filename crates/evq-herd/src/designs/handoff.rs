//! The designs where one process accepts and another serves: serv01 (fork per
//! client) and serv05 (prefork, descriptors passed with `SCM_RIGHTS`).

use super::{accept_blocking, Accepted, Ctx, TICK};
use crate::net::{self, serve};
use crate::process::{fork_child, reap, Counter};
use std::os::fd::RawFd;
use std::time::Duration;

/// serv01: the master accepts and forks a child per connection.
pub(crate) fn serv01_master(ctx: &Ctx, lfd: RawFd) -> i32 {
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
pub(crate) fn serv05_master(ctx: &Ctx, lfd: RawFd) -> i32 {
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
