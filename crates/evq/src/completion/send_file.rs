//! `send_file`: the `sendfile(2)` equivalent on the ring, as two
//! `IORING_OP_SPLICE` steps (Linux 5.7) through a pipe — file → pipe, pipe → socket
//! — repeated until the length asked for is sent. The pages move by reference
//! into the pipe; only the pipe → socket step may copy.
//!
//! One step is in flight at a time: linking the pair (`IOSQE_IO_LINK`) would save a
//! round trip, but a short file → pipe step would leave the pipe → socket step
//! waiting for bytes that never come (we hold the pipe's write end, so there is no
//! end of file). Pipes come from a per-ring pool; one that an error or a cancel left
//! holding bytes is closed, never pooled (quirk m).

use super::{CompletionRing, Fixed, Op, OpId, OpKind, Target};
use io_uring::{opcode, types};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Pipes kept for reuse; more are closed when their send_file ends.
const POOL: usize = 16;
/// The pipe size asked for (the default `pipe-max-size`): fewer, larger steps.
const PIPE_SIZE: i32 = 1 << 20;

/// A pipe for splicing: the read end, the write end and its capacity.
pub(super) struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    size: usize,
}

impl SplicePipe {
    fn new() -> io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into a live array of two.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A larger pipe where the per-user pipe limit allows; the default otherwise.
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
        let size = if size > 0 {
            size as usize
        } else {
            // SAFETY: as above, no argument.
            let got = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if got > 0 {
                got as usize
            } else {
                64 * 1024
            }
        };
        Ok(SplicePipe { read, write, size })
    }

    /// Whether the pipe holds no bytes (`FIONREAD`); `false` if that cannot be known.
    fn is_empty(&self) -> bool {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int into a live local.
        let rc = unsafe { libc::ioctl(self.read.as_raw_fd(), libc::FIONREAD, &mut n) };
        rc == 0 && n == 0
    }
}

/// A send_file in progress.
pub(super) struct SendFile {
    file: Target,
    offset: u64,
    len: usize,
    /// Bytes spliced from the file so far.
    read_in: usize,
    /// Bytes in the pipe: read in, not yet sent.
    in_pipe: usize,
    /// The step in flight is pipe → socket.
    out_step: bool,
    pipe: SplicePipe,
}

impl SendFile {
    pub(super) fn file(&self) -> Target {
        self.file
    }
}

impl CompletionRing {
    /// Sends `len` bytes of `file` from `offset` to `socket` (`sendfile(2)` on the
    /// ring: `IORING_OP_SPLICE` file → pipe → socket, Linux 5.7), continuing until
    /// all are sent. One [`OpKind::SendFile`] completion carries the total. The
    /// file's own position is neither used nor moved.
    ///
    /// A file that ends before `offset + len` completes with what was sent — a
    /// short count, not an error: the caller decides whether that is one (the file
    /// was truncated) or not. An error (a reset peer: `ECONNRESET` or `EPIPE`; a
    /// cancel: `ECANCELED`) completes with the error, whatever went before it.
    /// `file` must be something `splice` reads at an offset (a regular file or a
    /// block device, not a pipe); `socket` any stream the kernel splices into.
    /// `len` is at most `i32::MAX` (the completion's result); more completes with
    /// `EINVAL`, as does a pipe the ring cannot make (`EMFILE`...).
    pub fn send_file(
        &mut self,
        socket: impl Into<Target>,
        file: impl Into<Target>,
        offset: u64,
        len: usize,
        token: u64,
    ) -> OpId {
        let mut op = Op::new(token, OpKind::SendFile, socket.into());
        let pipe = match self.pipes.pop().map(Ok).unwrap_or_else(SplicePipe::new) {
            Ok(p) => p,
            Err(e) => {
                let id = self.insert(op);
                self.synthesize(id, -e.raw_os_error().unwrap_or(libc::EMFILE));
                return OpId(id);
            }
        };
        let bad = len > i32::MAX as usize || offset > i64::MAX as u64;
        op.send_file = Some(Box::new(SendFile {
            file: file.into(),
            offset,
            len,
            read_in: 0,
            in_pipe: 0,
            out_step: false,
            pipe,
        }));
        let id = self.insert(op);
        if bad {
            self.synthesize(id, -libc::EINVAL);
        } else if len == 0 {
            self.synthesize(id, 0);
        } else {
            self.push_splice(id);
        }
        OpId(id)
    }

    /// Handles one splice CQE of a send_file: `None` while it goes on, or the
    /// final result.
    pub(super) fn send_file_step(&mut self, id: u64, result: i32) -> Option<i32> {
        let op = self.op_mut(id);
        let cancelled = op.cancelled;
        let sf = op.send_file.as_mut().expect("a send_file op");
        if result < 0 {
            return Some(result);
        }
        let n = result as usize;
        if sf.out_step {
            if n == 0 {
                // The socket took nothing and said no error: it cannot go on.
                return Some(-libc::EPIPE);
            }
            sf.in_pipe -= n;
            op.sent += n;
        } else {
            if n == 0 {
                // End of file before `len`: the short total is the answer.
                return Some(op.sent as i32);
            }
            sf.in_pipe += n;
            sf.read_in += n;
        }
        if cancelled {
            return Some(-libc::ECANCELED);
        }
        if sf.in_pipe == 0 && op.sent >= sf.len {
            return Some(op.sent as i32);
        }
        self.push_splice(id);
        None
    }

    /// Pools the pipe of a finished send_file if it is empty; closes it otherwise,
    /// so no byte meant for one socket ever reaches another (quirk m).
    pub(super) fn retire_pipe(&mut self, sf: SendFile) {
        if sf.pipe.is_empty() && self.pipes.len() < POOL {
            self.pipes.push(sf.pipe);
        } else if !sf.pipe.is_empty() {
            self.stats.send_file_pipes_discarded += 1;
        }
    }

    /// Queues the next step: pipe → socket while the pipe holds bytes, file → pipe
    /// otherwise.
    fn push_splice(&mut self, id: u64) {
        let op = self.op_mut(id);
        let socket = op.target;
        let sf = op.send_file.as_mut().expect("a send_file op");
        let e = if sf.in_pipe > 0 {
            sf.out_step = true;
            let (from, n) = (types::Fd(sf.pipe.read.as_raw_fd()), sf.in_pipe as u32);
            on_target!(socket, |to| opcode::Splice::new(from, -1, to, -1, n)
                .build())
        } else {
            sf.out_step = false;
            let n = (sf.len - sf.read_in).min(sf.pipe.size) as u32;
            let at = (sf.offset + sf.read_in as u64) as i64;
            let to = types::Fd(sf.pipe.write.as_raw_fd());
            on_target!(sf.file, |from| opcode::Splice::new(from, at, to, -1, n)
                .build())
        };
        self.push(e.user_data(id));
    }
}
