//! The bench.c chain's pipes and counters (`peers/bench_common.h`), step for step:
//! `n` nonblocking `AF_UNIX` socketpairs; each run writes one byte to `a` pipes
//! spaced `n / a` apart, and every byte read writes one byte to the next pipe
//! until `w` writes are done. evq's loop and the Rust peers' drive the same chain.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

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
