//! SIGINT and SIGTERM as a request to stop, the same way in every evq tool: a
//! process-wide flag that run loops look at, and pipes that wake the event loops
//! sleeping in `get_next_event`. `signal-hook` does the async-signal-safe part
//! (its handlers only store to an atomic and write a byte).
//!
//! A pipe rather than an eventfd: every evq backend can watch a pipe, while the
//! RT-signal backends cannot arm `O_ASYNC` on an eventfd (`EPERM`). One pipe per
//! event loop, because an RT-signal registration has one owner per file.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::SigId;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Makes SIGINT and SIGTERM set the flag [`stop_requested`] reads instead of
/// ending the process. Once per process; later calls do nothing.
///
/// # Errors
/// `sigaction`'s error (the next call tries again).
pub fn stop_on_signals() -> io::Result<()> {
    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if !*installed {
        for sig in [SIGINT, SIGTERM] {
            signal_hook::flag::register(sig, &STOP_REQUESTED)?;
        }
        *installed = true;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived after [`stop_on_signals`] (or a
/// [`StopPipe`]) was set up. One atomic load: cheap enough for every turn of a
/// run loop.
#[inline]
pub fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::SeqCst)
}

/// The read end of a pipe that SIGINT and SIGTERM write a byte to (besides
/// setting the stop flag), for an event loop to watch. Dropping it ends the
/// registration and closes both ends.
#[derive(Debug)]
pub struct StopPipe {
    read: OwnedFd,
    ids: [SigId; 2],
}

impl StopPipe {
    /// A new pipe, registered for SIGINT and SIGTERM (the flag too).
    ///
    /// # Errors
    /// Out of descriptors, or `sigaction`'s error.
    pub fn new() -> io::Result<StopPipe> {
        stop_on_signals()?;
        let (read, write) = pipe()?;
        let second = write.try_clone()?;
        let first = signal_hook::low_level::pipe::register(SIGINT, write)?;
        let ids = match signal_hook::low_level::pipe::register(SIGTERM, second) {
            Ok(id) => [first, id],
            Err(e) => {
                signal_hook::low_level::unregister(first);
                return Err(e);
            }
        };
        Ok(StopPipe { read, ids })
    }

    /// The descriptor to watch for reading.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

impl Drop for StopPipe {
    fn drop(&mut self) {
        for id in self.ids {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// `pipe2(O_CLOEXEC | O_NONBLOCK)`.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into a live [c_int; 2].
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned both; nobody else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Ignores `SIGPIPE` process-wide: a peer that vanished must not kill a server.
/// (`send` can say `MSG_NOSIGNAL`; `sendfile` cannot.) An ignored disposition,
/// not a handler, so programs the process starts inherit it as before.
pub fn ignore_sigpipe() {
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child process (the test binary again, this test only): a signal sent
    /// to the process must not disturb the other tests running beside it.
    #[test]
    fn sigterm_sets_the_flag_and_wakes_every_pipe() {
        if crate::isolation::in_own_process(
            "signals::tests::sigterm_sets_the_flag_and_wakes_every_pipe",
        ) {
            return;
        }
        signal_child();
    }

    fn signal_child() {
        let a = StopPipe::new().unwrap();
        let b = StopPipe::new().unwrap();
        let dropped = StopPipe::new().unwrap();
        drop(dropped);
        assert!(!stop_requested());
        // SAFETY: raise(3) sends SIGTERM to this (child) process, whose handlers
        // were installed above.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert!(stop_requested());
        for p in [&a, &b] {
            let mut byte = [0u8; 4];
            // SAFETY: reads into a live 4-byte buffer from a pipe we own.
            let n = unsafe { libc::read(p.fd(), byte.as_mut_ptr().cast(), 4) };
            assert_eq!(n, 1, "one byte per signal in each pipe");
        }
    }
}
