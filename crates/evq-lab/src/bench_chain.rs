//! The bench.c chain's pipes and counters (`peers/bench_common.h`), step for step:
//! `n` nonblocking `AF_UNIX` socketpairs; each run writes one byte to `a` pipes
//! spaced `n / a` apart, and every byte read writes one byte to the next pipe
//! until `w` writes are done. evq's loop and the Rust peers' drive the same chain.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// Events taken per wait by the in-process contenders (evq, mio, polling): as many
/// as libuv's loop takes (its fixed 1,024), so that a wait takes the whole ready set
/// as every C peer's does. libev and libevent grow their arrays whenever a wait fills
/// them, so at `a = 100` they too drain the 200 ready pipes of a run in 2 waits; with
/// 64 a contender needed 4, and the level-triggered entries it left behind were
/// polled again by the kernel on each extra wait (n = 100, a = 100: 328 µs a run at
/// 64 against 292 µs at 128 or more, libuv 298 µs).
pub const EVENTS_PER_WAIT: usize = 1024;

/// Runs `f` on a thread of its own whose descriptor table is private to it
/// (`unshare(CLONE_FILES)`), so that the chain's system calls cost what they cost in
/// the C peers' single-threaded processes.
///
/// The kernel looks a descriptor up without touching the file's reference count
/// only when the table is not shared (`fdget`'s fast path); in a process with other
/// threads — the lab has the progress bar's ticker — every `recv`, `send` and
/// `epoll_wait` pays an atomic increment and decrement of the file's count. Measured
/// here (Linux 6.18, `recv` returning `EAGAIN`, best of 200 × 2,000): 306 ns single
/// threaded, 359 ns with a second thread alive, 311 ns after `unshare`. The chain
/// makes three such calls per event, so without this the in-process contenders ran
/// a few per cent behind the C peers for a reason that has nothing to do with the
/// library. What stays against them: glibc's cancellation bookkeeping in a process
/// with threads (the last few ns of those figures).
///
/// Descriptors opened by `f` live in the private table and are closed when the
/// thread ends; the copies of the lab's own descriptors it holds meanwhile are
/// released then too. Where `unshare` is refused (a seccomp filter), `f` runs on the
/// thread all the same, on the shared table.
///
/// # Errors
/// `f`'s error; a panic in `f` is resumed on the caller.
pub fn on_private_fd_table<T: Send>(f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: `unshare(2)` with CLONE_FILES only gives this thread its own
            // copy of the descriptor table; no memory is passed.
            unsafe { libc::unshare(libc::CLONE_FILES) };
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// The pipes and the counters of `bench_common.h`.
pub struct Chain {
    /// The socketpairs (read end, write end); kept so the descriptors live as
    /// long as the chain.
    pub pairs: Vec<(UnixStream, UnixStream)>,
    /// The read ends, by pipe index.
    pub reads_fd: Vec<RawFd>,
    writes_fd: Vec<RawFd>,
    count: usize,
    fired: usize,
    writes: usize,
    /// Bytes read in all runs.
    pub total_reads: u64,
}

impl Chain {
    /// `n` nonblocking socketpairs, `a` of them to be written per run.
    ///
    /// # Errors
    /// `a` is 0 or more than `n`, or a socketpair cannot be made.
    pub fn new(n: usize, a: usize) -> io::Result<Chain> {
        if n == 0 || a == 0 || a > n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad n/a: {n}/{a}"),
            ));
        }
        let pairs: Vec<(UnixStream, UnixStream)> = (0..n)
            .map(|_| UnixStream::pair())
            .collect::<io::Result<_>>()?;
        for (r, s) in &pairs {
            r.set_nonblocking(true)?;
            s.set_nonblocking(true)?;
        }
        Ok(Chain {
            reads_fd: pairs.iter().map(|p| p.0.as_raw_fd()).collect(),
            writes_fd: pairs.iter().map(|p| p.1.as_raw_fd()).collect(),
            pairs,
            count: 0,
            fired: 0,
            writes: 0,
            total_reads: 0,
        })
    }

    fn send(fd: RawFd) -> bool {
        // SAFETY: one byte from a static buffer to a socket the chain owns.
        unsafe { libc::send(fd, b"e".as_ptr().cast(), 1, 0) == 1 }
    }

    /// `start_run()`: one byte into each of `a` pipes spaced `n / a` apart.
    pub fn start_run(&mut self, a: usize, w: usize) {
        let space = self.reads_fd.len() / a;
        for i in 0..a {
            Chain::send(self.writes_fd[i * space]);
        }
        self.fired = a;
        self.count = 0;
        self.writes = w;
    }

    /// The first half of `on_readable()`: read one byte; whether one came.
    pub fn read_one(&mut self, idx: usize) -> bool {
        let mut ch = 0u8;
        // SAFETY: reads at most one byte into a live u8 from a socket the chain owns.
        let got = unsafe { libc::recv(self.reads_fd[idx], (&mut ch as *mut u8).cast(), 1, 0) } == 1;
        if got {
            self.count += 1;
            self.total_reads += 1;
        }
        got
    }

    /// The second half of `on_readable()`: while writes remain, one byte to the
    /// next pipe.
    pub fn write_next(&mut self, idx: usize) {
        if self.writes > 0 {
            let n = self.reads_fd.len();
            let widx = if idx + 1 >= n { idx + 1 - n } else { idx + 1 };
            if Chain::send(self.writes_fd[widx]) {
                self.writes -= 1;
                self.fired += 1;
            }
        }
    }

    /// Whether every byte written has been read.
    pub fn done(&self) -> bool {
        self.count == self.fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor opened on the private table is not in the caller's, and is
    /// closed when the thread ends; the result comes back.
    #[test]
    fn the_private_table_is_private() {
        // A number far above what the test process uses.
        const HIGH: RawFd = 900;
        let got = on_private_fd_table(|| {
            let (a, _b) = UnixStream::pair()?;
            // SAFETY: duplicates a socket this closure owns onto a number nothing
            // else in this thread's (private) table uses.
            let fd = unsafe { libc::dup2(a.as_raw_fd(), HIGH) };
            assert_eq!(fd, HIGH);
            Ok(7)
        })
        .unwrap();
        assert_eq!(got, 7);
        // SAFETY: F_GETFD only reads the descriptor flags.
        let rc = unsafe { libc::fcntl(HIGH, libc::F_GETFD) };
        assert_eq!(rc, -1, "fd {HIGH} leaked into the shared table");
    }
}
