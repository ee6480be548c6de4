//! Waking a queue from another thread: an `eventfd(2)` registered in the queue like
//! any other descriptor, so every backend wakes the same way.

use crate::sys::SignalKick;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// A handle that wakes one [`EventQueue`](crate::EventQueue) from any thread.
///
/// Cheap to clone; notifications coalesce (one `NOTIFY` event however many calls).
/// The eventfd stays open while any clone lives, so notifying a dropped queue is
/// harmless.
#[derive(Clone, Debug)]
pub struct Notifier {
    fd: Arc<OwnedFd>,
    /// The RT-signal backends cannot see an eventfd (it has no `fasync`), so they
    /// are also sent a signal.
    kick: Option<Arc<SignalKick>>,
}

impl Notifier {
    pub(crate) fn new(kick: Option<Arc<SignalKick>>) -> io::Result<Notifier> {
        // SAFETY: eventfd(2) takes no pointers; a non-negative return is a new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        Ok(Notifier {
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
            kick,
        })
    }

    /// Wakes the queue: its current or next `get_next_event` returns a `NOTIFY` event.
    ///
    /// # Errors
    /// Only if `write(2)` on the eventfd fails, which it cannot in practice (a full
    /// counter, `EAGAIN`, already means "notified" and is treated as success).
    pub fn notify(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we hold open.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(kick) = &self.kick {
            kick.kick();
        }
        if n == 8 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::WouldBlock {
            Ok(())
        } else {
            Err(err)
        }
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Resets the counter so the (level-triggered) registration goes quiet.
    pub(crate) fn drain(&self) {
        let mut buf: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN (already drained) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
    }
}
