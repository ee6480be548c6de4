//! Sockets for the herd, by number (the designs fork and share them): listeners
//! (shared or `SO_REUSEPORT` shards) and `accept` from `evq_os`, the one-line
//! request and the fixed reply, and descriptor passing (`SCM_RIGHTS`, which only
//! the herd's hand-off designs use).

use evq_os::ListenOptions;
use std::io;
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::os::fd::{IntoRawFd, RawFd};
use std::os::unix::net::UnixStream;

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

/// A listening TCP socket on 127.0.0.1:`port` (0 = any), backlog 4096, blocking
/// (the designs that want it non-blocking say so with [`set_nonblocking`]).
pub(crate) fn listen(port: u16, reuseport: bool) -> io::Result<RawFd> {
    let opts = ListenOptions {
        reuseport,
        backlog: 4096,
        nonblocking: false,
    };
    evq_os::listen(SocketAddr::from((Ipv4Addr::LOCALHOST, port)), opts).map(IntoRawFd::into_raw_fd)
}

pub(crate) use evq_os::socket::{local_addr, set_nonblocking, set_recv_timeout};

/// `accept4(2)`: the connection (blocking, close-on-exec) or the error.
pub(crate) fn accept(fd: RawFd) -> io::Result<RawFd> {
    evq_os::accept::accept(fd, false).map(IntoRawFd::into_raw_fd)
}

pub(crate) use evq_os::io::close;

/// `shutdown(SHUT_RDWR)`: on a listener this wakes every `accept`, `select` and
/// `epoll_wait` sleeping on it (accept then fails with `EINVAL`).
pub(crate) fn shutdown(fd: RawFd) {
    evq_os::io::shutdown(fd, Shutdown::Both);
}

/// Serves one connection: reads the request line, writes [`BODY`], closes.
pub(crate) fn serve(conn: RawFd) {
    let mut buf = [0u8; 512];
    let mut got = 0;
    while got < buf.len() {
        match evq_os::io::recv(conn, &mut buf[got..]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got += n;
                if buf[got - n..got].contains(&b'\n') {
                    break;
                }
            }
        }
    }
    let mut sent = 0;
    while sent < BODY.len() {
        match evq_os::io::send(conn, &BODY[sent..]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    close(conn);
}

/// Runs `f` on a one-byte message (`byte`) with room for one descriptor in its
/// control data: what both ends of the hand-off pass.
fn one_byte_message<R>(byte: &mut u8, f: impl FnOnce(&mut libc::msghdr) -> R) -> R {
    let mut iov = libc::iovec {
        iov_base: (byte as *mut u8).cast(),
        iov_len: 1,
    };
    // u64s: aligned for cmsghdr.
    let mut space = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; the fields sendmsg/recvmsg read are
    // filled in below and point at buffers that outlive `f`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    f(&mut msg)
}

/// Sends `fd` over a Unix socket with `SCM_RIGHTS` (Stevens serv05's `write_fd`).
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    one_byte_message(&mut b'f', |msg| {
        // SAFETY: CMSG_SPACE is a pure size computation; the control buffer is
        // larger than one descriptor's space and aligned for cmsghdr, so
        // CMSG_FIRSTHDR/CMSG_DATA stay inside it.
        unsafe {
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        }
        // SAFETY: `msg` points at live buffers set up above.
        check(unsafe { libc::sendmsg(sock, msg, libc::MSG_NOSIGNAL) } as libc::c_int).map(drop)
    })
}

/// Receives a descriptor sent by [`send_fd`]; `Ok(None)` at end-of-file.
pub(crate) fn recv_fd(sock: RawFd) -> io::Result<Option<RawFd>> {
    one_byte_message(&mut 0, |msg| {
        // SAFETY: `msg` points at live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(sock, msg, libc::MSG_CMSG_CLOEXEC) };
        if n <= 0 {
            return if n == 0 {
                Ok(None)
            } else {
                Err(io::Error::last_os_error())
            };
        }
        // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR checks
        // msg_controllen, and only the data of an SCM_RIGHTS message carrying
        // one fd is read.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(msg);
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
    })
}

/// A connected pair of Unix stream sockets (close-on-exec).
pub(crate) fn socketpair() -> io::Result<(RawFd, RawFd)> {
    let (a, b) = UnixStream::pair()?;
    Ok((a.into_raw_fd(), b.into_raw_fd()))
}
