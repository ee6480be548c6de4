//! The descriptors pipebench waits on: pipes, as devpollperf used, or eventfds when
//! pipes would not fit under the descriptor limit (a pipe costs two descriptors;
//! 10,000 pipes need 20,000, which is this machine's hard limit).

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What kind of descriptor the run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FdKind {
    /// Pipes if the largest size fits under the limit, else eventfds.
    Auto,
    /// `pipe2(2)`: one byte written, one read (devpollperf's choice).
    Pipe,
    /// `eventfd(2)`: one 8-byte counter; one descriptor per probe.
    Eventfd,
}

/// N probe descriptors: `read_fds[i]` becomes readable when `write_fds[i]` is written.
pub struct ProbeFds {
    owned: Vec<OwnedFd>,
    pub read_fds: Vec<RawFd>,
    pub write_fds: Vec<RawFd>,
    pub kind: FdKind,
}

impl ProbeFds {
    pub fn token_bytes(&self) -> usize {
        if self.kind == FdKind::Eventfd {
            8
        } else {
            1
        }
    }

    /// Resolves `Auto` for a run whose largest size is `max_n` under `limit` fds.
    pub fn resolve(kind: FdKind, max_n: usize, limit: u64) -> FdKind {
        match kind {
            FdKind::Auto if (2 * max_n + 64) as u64 <= limit => FdKind::Pipe,
            FdKind::Auto => FdKind::Eventfd,
            k => k,
        }
    }

    pub fn open(kind: FdKind, n: usize) -> io::Result<ProbeFds> {
        let mut probes = ProbeFds {
            owned: Vec::new(),
            read_fds: Vec::new(),
            write_fds: Vec::new(),
            kind,
        };
        for _ in 0..n {
            if kind == FdKind::Eventfd {
                // SAFETY: eventfd takes no pointers; a non-negative result is ours.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: `fd` is a fresh descriptor owned by nobody else.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                probes.read_fds.push(fd.as_raw_fd());
                probes.write_fds.push(fd.as_raw_fd());
                probes.owned.push(fd);
            } else {
                let mut pair = [0; 2];
                // SAFETY: pipe2 writes two descriptors into a live [c_int; 2].
                if unsafe { libc::pipe2(pair.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) }
                    != 0
                {
                    return Err(io::Error::last_os_error());
                }
                for fd in pair {
                    // SAFETY: each is a fresh descriptor owned by nobody else.
                    probes.owned.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
                probes.read_fds.push(pair[0]);
                probes.write_fds.push(pair[1]);
            }
        }
        Ok(probes)
    }
}
