//! Reads, writes, shutdowns and closes on a socket held by number: the calls every event
//! loop of the tools makes per request, so each is `#[inline]` across crates.
//!
//! Writes say `MSG_NOSIGNAL`: a write to a peer that reset raises `SIGPIPE`
//! without it, and a load generator or proxy must not die of a peer's reset.
//! The descriptor is one the caller holds open for the call; the kernel checks
//! the number, so a wrong one is an error, never memory unsafety.

use std::io;
use std::net::Shutdown;
use std::os::fd::RawFd;

#[inline]
fn size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `send(2)` of `buf`, with `MSG_NOSIGNAL`.
///
/// # Errors
/// `send`'s error (`WouldBlock` on a full non-blocking socket).
#[inline]
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    send_more(fd, buf, false)
}

/// Like [`send`], with `MSG_MORE` when `more`: a response head whose body follows
/// (by `sendfile`) leaves in the same segments as the body's start (nginx's
/// `tcp_nopush`, without a cork/uncork pair of system calls).
///
/// # Errors
/// `send`'s error.
#[inline]
pub fn send_more(fd: RawFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    // SAFETY: `buf` is a live, readable slice of `buf.len()` bytes.
    size(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) })
}

/// Receives into `buf`; `Ok(0)` is end-of-file. This is `read(2)`: on a socket
/// the same as `recv(2)` without flags, and glibc's wrapper for it is the
/// shorter (callgrind: 53 against 61 instructions a call, in the server's loop).
///
/// # Errors
/// `read`'s error (`WouldBlock` when nothing is there).
#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
    size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `shutdown(2)`: `Write` sends FIN after what is queued; `Both` on a listener
/// wakes every thread sleeping in `accept` on it. An error is moot (the peer is
/// gone then, which the next read reports).
pub fn shutdown(fd: RawFd, how: Shutdown) {
    let how = match how {
        Shutdown::Read => libc::SHUT_RD,
        Shutdown::Write => libc::SHUT_WR,
        Shutdown::Both => libc::SHUT_RDWR,
    };
    // SAFETY: shutdown(2) takes integers only.
    unsafe { libc::shutdown(fd, how) };
}

/// Closes a descriptor the caller owns by number and forgets. An error from
/// `close(2)` leaves the number released on Linux, so there is nothing to retry.
#[inline]
pub fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and does not use the number afterwards.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn send_recv_shutdown_and_a_vanished_peer() {
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(send(a.as_raw_fd(), b"abc").unwrap(), 3);
        assert_eq!(send_more(a.as_raw_fd(), b"de", true).unwrap(), 2);
        let mut buf = [0u8; 8];
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"abcde");
        shutdown(a.as_raw_fd(), Shutdown::Write);
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 0, "FIN");
        // The peer is gone: EPIPE, not SIGPIPE (which would end the test binary).
        // Another test of this binary that forks at this moment holds a copy
        // of `a` until its child execs (close-on-exec), and the peer stays
        // open that long (seen once in a workspace run): retry briefly.
        drop(a);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let e = loop {
            match send(b.as_raw_fd(), b"x") {
                Err(e) => break e,
                Ok(_) if std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Ok(n) => panic!("the peer stayed open: sent {n}"),
            }
        };
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
