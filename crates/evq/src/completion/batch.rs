//! What [`CompletionRing::get_next_completion`](super::CompletionRing::get_next_completion)
//! hands back: one [`Completion`] per finished (or continuing, for multishot)
//! operation, in a caller-owned [`Completions`] batch.

use std::io;
use std::os::fd::RawFd;

/// Which kind of operation a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Multishot `accept`: each completion carries one new connection.
    Accept,
    /// Multishot `recv` into the provided-buffer ring.
    Recv,
    /// One `recv` into the caller's own buffer, handed back with the bytes
    /// appended.
    RecvInto,
    /// Multishot `read` of a pipe, eventfd or other pollable non-socket, into the
    /// same provided-buffer ring as `Recv`.
    Read,
    /// `send` of one owned buffer, continued by the ring until all is sent.
    Send,
    /// `send_zc` of one owned buffer: like `Send`, zero copy, completed only after
    /// the kernel's notification that it let go of the buffer.
    SendZc,
    /// `send_file`: a file's bytes spliced through a pipe into a socket until the
    /// length asked for is sent (or the file ends).
    SendFile,
    /// `writev` of several owned buffers (one attempt; the count may be short).
    Writev,
    /// `connect` of a socket to an address.
    Connect,
    /// `close` of a descriptor.
    Close,
    /// A relative timeout.
    Timeout,
    /// A cancel request for another operation.
    Cancel,
    /// A no-op, completed at once (useful to wake or to measure the ring).
    Nop,
}

/// Names one submitted operation, for [`CompletionRing::cancel`](super::CompletionRing::cancel).
///
/// It stays unique while the operation is in flight and is never confused with a
/// later operation that reuses the same internal slot (it carries a generation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub(super) u64);

/// One completion: the user token given at submission, the operation's kind, and
/// its result.
#[derive(Debug)]
pub struct Completion {
    pub(super) token: u64,
    pub(super) op: OpId,
    pub(super) kind: OpKind,
    pub(super) result: i32,
    pub(super) more: bool,
    /// For `Recv`/`Read`: the provided buffer holding the data (id, length).
    pub(super) buffer: Option<(u16, u32)>,
    /// For `Send`/`SendZc`/`Writev`/`RecvInto`: the caller's buffers, handed back.
    pub(super) returned: Option<Vec<Vec<u8>>>,
    /// The dequeue that delivered it; received data is valid only in that one.
    pub(super) epoch: u64,
}

impl Completion {
    pub(super) fn epoch_matches(&self, epoch: u64) -> bool {
        self.epoch == epoch
    }

    /// The token given when the operation was submitted.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The operation this completion belongs to.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// The kind of operation.
    pub fn kind(&self) -> OpKind {
        self.kind
    }

    /// The result: for `Accept` the new descriptor (the caller owns it), for `Recv`,
    /// `RecvInto` and `Read` the byte count (0 = the peer closed its side, or end of
    /// file; the receive is over), for
    /// `Send`/`SendZc`/`Writev`/`SendFile` the bytes sent, for `Timeout` 0 when it expired, 0 otherwise.
    /// Errors are the kernel's: `ECANCELED` for a cancelled operation, `ENOENT` for a
    /// cancel whose target had already finished, `ECONNRESET`, `EPIPE`, `EBADF`...
    pub fn result(&self) -> io::Result<u32> {
        if self.result < 0 {
            Err(io::Error::from_raw_os_error(-self.result))
        } else {
            Ok(self.result as u32)
        }
    }

    /// For an `Accept` completion, the accepted descriptor.
    pub fn accepted_fd(&self) -> Option<RawFd> {
        (self.kind == OpKind::Accept && self.result >= 0).then_some(self.result)
    }

    /// Whether the operation goes on and will complete again (multishot accept,
    /// recv and read). `false` on the last completion of any operation.
    pub fn more(&self) -> bool {
        self.more
    }

    /// For `Send`/`SendZc`/`Writev`, takes back the buffers that were submitted;
    /// for `RecvInto`, its one buffer, grown by the bytes received (and
    /// unchanged after an error).
    pub fn take_buffers(&mut self) -> Option<Vec<Vec<u8>>> {
        self.returned.take()
    }
}

/// A caller-owned batch of completions, filled by
/// [`CompletionRing::get_next_completion`](super::CompletionRing::get_next_completion) up
/// to its capacity.
///
/// Received data is read through
/// [`CompletionRing::received`](super::CompletionRing::received) and stays valid until the
/// next `get_next_completion` on the same batch, which lends its buffers back to the
/// kernel.
#[derive(Debug)]
pub struct Completions {
    pub(super) items: Vec<Completion>,
    pub(super) capacity: usize,
}

impl Completions {
    /// A batch of at most `capacity` completions per dequeue (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Completions {
            items: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// The most completions one dequeue delivers.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of completions in the batch.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The completions, in the order the kernel posted them.
    pub fn iter(&self) -> std::slice::Iter<'_, Completion> {
        self.items.iter()
    }

    /// The completions, mutably (to take back send buffers).
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Completion> {
        self.items.iter_mut()
    }
}
