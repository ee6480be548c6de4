//! The bench.c chain (the bench-c scenario's workload) on the Rust event
//! crates people use instead of evq: [`mio`] and [`polling`], both on epoll here.
//!
//! The workload is the C peers' (`peers/bench_common.h`), step for step: `n`
//! nonblocking `AF_UNIX` socketpairs, all read ends registered once before any
//! timing; each repetition writes one byte to `a` pipes spaced `n / a` apart, then
//! the clock runs until every byte written has been read, each read of one byte
//! writing one byte to the next pipe until `w` writes are done. Every repetition is
//! timed alone (monotonic clock, µs), so the caller can drop the warm-up and take a
//! median exactly as it does for evq and the C peers.
//!
//! How each crate is driven, and what that costs beyond the C peers:
//!
//! * **mio** registers every read end with [`mio::unix::SourceFd`] and
//!   [`mio::Interest::READABLE`]. mio is edge-triggered only (`EPOLLET`), so one
//!   event may stand for several bytes (two chains can meet on one pipe) and the
//!   read callback must drain the socket: it reads one byte at a time, each byte
//!   read writing the next one as in C, until `recv` says `EAGAIN`. That final
//!   failing `recv` is one system call per event the level-triggered C peers do
//!   not make; it is the price of using mio correctly, so it is timed. A wake-up
//!   whose bytes an earlier drain already took reads nothing and writes nothing.
//! * **polling** (v3) registers with [`polling::Poller::add`] in its default
//!   oneshot mode, so after each event the callback (the C one: one `recv`, one
//!   `send`) re-arms the source with [`polling::Poller::modify`], one `epoll_ctl`
//!   per event. Its [`polling::Poller::wait`] also resets its timer and notifier
//!   descriptors on every call (a few more system calls per wait), and appends to
//!   [`polling::Events`], so the list is cleared before each wait. Sources are
//!   deleted from the poller before the sockets close, as `add`'s contract asks.
//!
//! Both take 1,024 events per wait (`EVENTS_PER_WAIT`, with why), as evq's run
//! does.

use std::io;
use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::time::Instant;

use crate::bench_chain::{Chain, EVENTS_PER_WAIT};

/// mio's version as Cargo resolved it (read from Cargo.lock by the build script).
pub const MIO_VERSION: &str = env!("EVQ_LAB_MIO_VERSION");
/// polling's version as Cargo resolved it (read from Cargo.lock by the build script).
pub const POLLING_VERSION: &str = env!("EVQ_LAB_POLLING_VERSION");

/// A Rust crate the chain runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RustPeer {
    /// The `mio` crate (edge-triggered epoll).
    Mio,
    /// The `polling` crate, v3 (oneshot epoll).
    Polling,
}

impl RustPeer {
    /// Both, in the order the report lists them.
    pub const ALL: [RustPeer; 2] = [RustPeer::Mio, RustPeer::Polling];

    /// The crate's name (the contender's name in the report).
    pub fn name(self) -> &'static str {
        match self {
            RustPeer::Mio => "mio",
            RustPeer::Polling => "polling",
        }
    }

    /// The crate version built in.
    pub fn version(self) -> &'static str {
        match self {
            RustPeer::Mio => MIO_VERSION,
            RustPeer::Polling => POLLING_VERSION,
        }
    }

    /// The kernel mechanism the crate uses on Linux.
    pub fn backend(self) -> &'static str {
        "epoll"
    }

    /// Runs the chain `reps` times; returns (µs per repetition, reads in all).
    pub fn run(self, n: usize, a: usize, w: usize, reps: usize) -> io::Result<(Vec<f64>, u64)> {
        match self {
            RustPeer::Mio => run_mio(n, a, w, reps),
            RustPeer::Polling => run_polling(n, a, w, reps),
        }
    }
}

fn retry_eintr(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        r => r,
    }
}

/// The chain on mio; returns (µs per repetition, reads in all).
pub fn run_mio(n: usize, a: usize, w: usize, reps: usize) -> io::Result<(Vec<f64>, u64)> {
    use mio::unix::SourceFd;
    use mio::{Events, Interest, Poll, Token};

    let mut chain = Chain::new(n, a)?;
    let mut poll = Poll::new()?;
    for (i, fd) in chain.reads_fd.iter().enumerate() {
        poll.registry()
            .register(&mut SourceFd(fd), Token(i), Interest::READABLE)?;
    }
    let mut events = Events::with_capacity(EVENTS_PER_WAIT);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        chain.start_run(a, w);
        let start = Instant::now();
        while !chain.done() {
            // An interrupted wait returns no events; the loop waits again.
            retry_eintr(poll.poll(&mut events, None))?;
            for e in events.iter() {
                let idx = e.token().0;
                // Edge-triggered: drain, each byte read writing the next.
                while chain.read_one(idx) {
                    chain.write_next(idx);
                }
            }
        }
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    for fd in &chain.reads_fd {
        poll.registry().deregister(&mut SourceFd(fd))?;
    }
    Ok((times, chain.total_reads))
}

/// The chain on polling; returns (µs per repetition, reads in all).
pub fn run_polling(n: usize, a: usize, w: usize, reps: usize) -> io::Result<(Vec<f64>, u64)> {
    use polling::{Event, Events, Poller};

    let mut chain = Chain::new(n, a)?;
    let poller = Poller::new()?;
    for (i, (r, _)) in chain.pairs.iter().enumerate() {
        // SAFETY: every source added here is deleted below, before `chain` (which
        // owns the sockets) is dropped; on an early error return the poller is
        // dropped before `chain` (reverse declaration order), so no registered
        // descriptor outlives it either.
        unsafe { poller.add(r, Event::readable(i))? };
    }
    let mut events = Events::with_capacity(
        NonZeroUsize::new(EVENTS_PER_WAIT).expect("EVENTS_PER_WAIT is not zero"),
    );
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        chain.start_run(a, w);
        let start = Instant::now();
        while !chain.done() {
            events.clear();
            poller.wait(&mut events, None)?;
            for e in events.iter() {
                let idx = e.key;
                chain.read_one(idx);
                chain.write_next(idx);
                // Oneshot: the source is disarmed until re-armed.
                poller.modify(chain.pairs[idx].0.as_fd(), Event::readable(idx))?;
            }
        }
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    for (r, _) in &chain.pairs {
        poller.delete(r)?;
    }
    Ok((times, chain.total_reads))
}
