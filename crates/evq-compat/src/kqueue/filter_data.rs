//! What a filter reports beside readiness (quirks f and g of the kqueue
//! personality): `data` for `EVFILT_READ`/`EVFILT_WRITE`, and the descriptor checks
//! a change needs.

use std::os::fd::RawFd;

pub(super) fn is_open(fd: RawFd) -> bool {
    // SAFETY: fcntl(F_GETFD) takes no pointer and only reads the descriptor table.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

/// `poll(2)` with a zero timeout: the descriptor's revents, or `None` on error.
pub(super) fn poll_now(fd: RawFd) -> Option<i16> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one live pollfd, count 1, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    (n >= 0).then_some(p.revents)
}

fn int_ioctl(fd: RawFd, request: libc::Ioctl) -> Option<i64> {
    let mut v: libc::c_int = 0;
    // SAFETY: FIONREAD/SIOCOUTQ write one int through the pointer, which is live.
    let rc = unsafe { libc::ioctl(fd, request, &mut v) };
    (rc >= 0).then_some(v as i64)
}

/// Quirk f: bytes readable, or a listener's backlog.
pub(super) fn readable_bytes(fd: RawFd) -> i64 {
    if let Some(n) = int_ioctl(fd, libc::FIONREAD) {
        return n;
    }
    // A listener's backlog; zero for anything else.
    evq_os::socket::accept_backlog(fd).map_or(0, i64::from)
}

/// Quirk f: free space for writing.
pub(super) fn writable_space(fd: RawFd) -> i64 {
    let mut sndbuf: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int into the live `sndbuf`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&mut sndbuf as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        let queued = int_ioctl(fd, libc::TIOCOUTQ).unwrap_or(0);
        return (sndbuf as i64 - queued).max(0);
    }
    // SAFETY: F_GETPIPE_SZ takes no pointer.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    if size > 0 {
        let queued = int_ioctl(fd, libc::FIONREAD).unwrap_or(0);
        return (size as i64 - queued).max(0);
    }
    0
}
