//! Sockets for the herd: listeners (shared or `SO_REUSEPORT` shards), `accept`, the
//! one-line request and the fixed reply, descriptor passing.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

/// The reply every design sends: a fixed 64-byte body.
pub(crate) const BODY: &[u8; 64] =
    b"evq-herd: 64 bytes of fixed reply, as in Stevens' servers......\n";

/// The request a client sends.
pub(crate) const REQUEST: &[u8] = b"GET /herd HTTP/1.0\n";

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads one live int.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `SO_RCVTIMEO`: a blocking `accept` or `read` returns `EAGAIN` after `t`, so a
/// sleeping worker notices the stop flag.
pub(crate) fn set_recv_timeout(fd: RawFd, t: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt reads one live timeval.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Sets or clears `O_NONBLOCK`.
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL take and return integers.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(drop)
}

/// A listening TCP socket on 127.0.0.1:`port` (0 = any), backlog 4096.
pub(crate) fn listen(port: u16, reuseport: bool) -> io::Result<RawFd> {
    // SAFETY: socket(2) takes integers; a non-negative result is a new fd we own.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    let result = (|| {
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if reuseport {
            set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: bind reads a live sockaddr_in of the given size.
        check(unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        // SAFETY: listen takes integers.
        check(unsafe { libc::listen(fd, 4096) })?;
        Ok(fd)
    })();
    if result.is_err() {
        close(fd);
    }
    result
}

/// The address a listener is bound to.
pub(crate) fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: an all-zero sockaddr_in is valid; getsockname fills at most `len`.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: as above.
    check(unsafe {
        libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len)
    })?;
    let ip = std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
    Ok(SocketAddr::from((ip, u16::from_be(addr.sin_port))))
}

/// `accept4(2)`: the connection (blocking, close-on-exec) or the error.
pub(crate) fn accept(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed; the result is a new fd we own.
    check(unsafe {
        libc::accept4(
            fd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    })
}

/// Closes a descriptor we own.
pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and does not use it afterwards.
    unsafe { libc::close(fd) };
}

/// `shutdown(SHUT_RDWR)`: on a listener this wakes every `accept`, `select` and
/// `epoll_wait` sleeping on it (accept then fails with `EINVAL`).
pub(crate) fn shutdown(fd: RawFd) {
    // SAFETY: shutdown takes integers.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Serves one connection: reads the request line, writes [`BODY`], closes.
pub(crate) fn serve(conn: RawFd) {
    let mut buf = [0u8; 512];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the unused tail of a live buffer.
        let n = unsafe { libc::read(conn, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            break;
        }
        let seen = got;
        got += n as usize;
        if buf[seen..got].contains(&b'\n') {
            break;
        }
    }
    let mut sent = 0;
    while sent < BODY.len() {
        // SAFETY: writes from a live static buffer.
        let n = unsafe { libc::write(conn, BODY[sent..].as_ptr().cast(), BODY.len() - sent) };
        if n <= 0 {
            break;
        }
        sent += n as usize;
    }
    close(conn);
}

/// Sends `fd` over a Unix socket with `SCM_RIGHTS` (Stevens serv05's `write_fd`).
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [b'f'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut space = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; we fill the fields sendmsg reads.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as _;
    // SAFETY: the control buffer is large enough for one fd (CMSG_SPACE above) and
    // aligned for cmsghdr (u64 array); CMSG_FIRSTHDR/CMSG_DATA stay inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    // SAFETY: `msg` points at live buffers set up above.
    check(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) } as libc::c_int).map(drop)
}

/// Receives a descriptor sent by [`send_fd`]; `Ok(None)` at end-of-file.
pub(crate) fn recv_fd(sock: RawFd) -> io::Result<Option<RawFd>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut space = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; we fill the fields recvmsg reads.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    // SAFETY: `msg` points at live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR checks msg_controllen,
    // and we only read the data of an SCM_RIGHTS message carrying one fd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "message without a descriptor",
            ));
        }
        Ok(Some(std::ptr::read_unaligned(
            libc::CMSG_DATA(cmsg).cast::<RawFd>(),
        )))
    }
}

/// A connected pair of Unix stream sockets.
pub(crate) fn socketpair() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two ints into the live array.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    Ok((fds[0], fds[1]))
}
