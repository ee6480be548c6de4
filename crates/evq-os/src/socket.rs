//! TCP sockets as evq's tools make them, through `socket2`, and the few options on
//! a descriptor held by number that the event loops set.
//!
//! Quirks this file deals with:
//! - `bind(addr, 0)` before `connect` reserves a port for *any* destination, which
//!   caps a client at the size of the ephemeral range per source address; with
//!   `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2; no crate wraps it) the kernel picks the
//!   port at `connect` time against the full 4-tuple instead.
//! - A non-blocking `connect` answers `EINPROGRESS`; the outcome comes later,
//!   through `SO_ERROR` ([`take_error`]) on the first writable or error event.
//! - `SO_LINGER {on, 0}` turns the next `close` into a reset ([`set_reset_on_close`]).
//!
//! Functions that take a `RawFd` act on a descriptor the caller holds open for the
//! call; the kernel checks the number, so a wrong one is an error, never memory
//! unsafety.

use socket2::{Domain, SockRef, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

/// How [`listen`] makes its socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenOptions {
    /// `SO_REUSEPORT`: several sockets (one per thread or process) bind one
    /// address and the kernel spreads connections among them.
    pub reuseport: bool,
    /// The accept queue's length.
    pub backlog: i32,
    /// `O_NONBLOCK` on the listening socket (event loops); off for designs that
    /// sleep in `accept`.
    pub nonblocking: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            reuseport: false,
            backlog: 4096,
            nonblocking: true,
        }
    }
}

/// A listening TCP socket on `addr` (port 0 picks one), close-on-exec, with
/// `SO_REUSEADDR` so a restarted server can bind at once.
///
/// # Errors
/// `socket`, `setsockopt`, `bind` or `listen`'s error; nothing stays open then.
pub fn listen(addr: SocketAddr, opts: ListenOptions) -> io::Result<OwnedFd> {
    let ty = if opts.nonblocking {
        Type::STREAM.nonblocking()
    } else {
        Type::STREAM
    };
    let s = Socket::new(Domain::for_address(addr), ty, None)?;
    s.set_reuse_address(true)?;
    if opts.reuseport {
        s.set_reuse_port(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(opts.backlog)?;
    Ok(s.into())
}

/// How the local end of a client socket is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalBind {
    /// `connect` picks address and port.
    Kernel,
    /// This address (its port is ignored); `connect` picks the port against the
    /// full 4-tuple (`IP_BIND_ADDRESS_NO_PORT`, where the kernel has it).
    Address(SocketAddr),
    /// This address and port, with `SO_REUSEADDR` (httperf's `--hog`).
    Port(SocketAddr),
}

/// A non-blocking, close-on-exec TCP socket connecting to `to`: `Ok` as soon as
/// the connection is under way ([`take_error`] tells its outcome later).
/// `nodelay` sets `TCP_NODELAY` (requests and replies leave at once).
///
/// # Errors
/// `socket`, `setsockopt`, `bind` or an immediate `connect` failure (refused on
/// loopback, no route, `EADDRNOTAVAIL`); nothing stays open then.
pub fn connect(to: SocketAddr, local: LocalBind, nodelay: bool) -> io::Result<OwnedFd> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM.nonblocking(), None)?;
    if nodelay {
        s.set_tcp_nodelay(true)?;
    }
    match local {
        LocalBind::Kernel => {}
        LocalBind::Address(a) => {
            // Best effort: without it the kernel reserves a port at bind time.
            let _ = set_bind_address_no_port(&s);
            s.bind(&SocketAddr::new(a.ip(), 0).into())?;
        }
        LocalBind::Port(a) => {
            s.set_reuse_address(true)?;
            s.bind(&a.into())?;
        }
    }
    match s.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2), which `socket2` does not offer.
fn set_bind_address_no_port(s: &Socket) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live c_int and its size is passed as the option length;
    // the descriptor belongs to `s`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs `f` on `socket2`'s view of a descriptor the caller holds open for the call.
fn with_sock<R>(fd: RawFd, f: impl FnOnce(SockRef<'_>) -> R) -> R {
    // SAFETY: every caller in this file documents that `fd` is held open for the
    // call, and the borrow ends with it; the kernel validates the number on every
    // use, so a wrong one gives EBADF/ENOTSOCK, never memory unsafety.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    f(SockRef::from(&fd))
}

/// `TCP_NODELAY`: small writes leave at once instead of waiting for Nagle.
///
/// # Errors
/// `setsockopt`'s error (`EBADF`, `ENOTSOCK`, `EOPNOTSUPP` on a non-TCP socket).
pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    with_sock(fd, |s| s.set_tcp_nodelay(true))
}

/// `SO_LINGER {1, 0}`: the next `close` sends a reset instead of FIN (seed 001's
/// way of refusing a connection under overload).
///
/// # Errors
/// `setsockopt`'s error.
pub fn set_reset_on_close(fd: RawFd) -> io::Result<()> {
    with_sock(fd, |s| s.set_linger(Some(Duration::ZERO)))
}

/// The pending error of a socket (`SO_ERROR`, which reading clears): how a
/// non-blocking `connect` failed; `None` when there is none. If `SO_ERROR`
/// itself cannot be read, that failure is the answer.
pub fn take_error(fd: RawFd) -> Option<io::Error> {
    with_sock(fd, |s| s.take_error()).unwrap_or_else(Some)
}

/// True once a non-blocking `connect` has completed (`getpeername` succeeds);
/// false while it is in progress or after it failed (see [`take_error`]).
pub fn is_connected(fd: RawFd) -> bool {
    with_sock(fd, |s| s.peer_addr().is_ok())
}

/// True when bytes wait in the socket's receive queue: something the peer sent
/// that nobody has read yet (one byte peeked with `MSG_PEEK | MSG_DONTWAIT`,
/// so nothing is consumed and a blocking socket does not block). A server
/// stopping gracefully answers such a connection instead of closing it as idle.
/// `fd` must be held open for the call.
pub fn has_pending_input(fd: RawFd) -> bool {
    with_sock(fd, |s| {
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        matches!(
            s.recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT),
            Ok(n) if n > 0
        )
    })
}

/// True when the connection has failed — reset by its peer, timed out — with
/// nothing left to read: a one-byte `MSG_PEEK | MSG_DONTWAIT` receive fails
/// with an error other than would-block. That read takes the socket's pending
/// error (`SO_ERROR`), so call it only to decide whether to close. False for a
/// connection that is open (with or without bytes waiting) or at end of file.
///
/// What it is for: Linux (seen on 6.18) can let a multishot `io_uring` recv
/// miss a reset that lands while the recv is taking the bytes sent just
/// before it — the recv stays armed on a dead socket and no completion ever
/// ends it (`evq::completion`'s quirks). A loop that waits for the rest of a
/// message after such bytes asks this once. `fd` must be held open.
pub fn has_failed(fd: RawFd) -> bool {
    failure(fd).is_some()
}

/// The error a failed connection holds (`ECONNRESET`, `ETIMEDOUT`, …), taken
/// by the same one-byte peek as [`has_failed`]; `None` for a connection open
/// or at end of file. For a loop that must say why a connection it waited on
/// ended. `fd` must be held open.
pub fn failure(fd: RawFd) -> Option<io::Error> {
    with_sock(fd, |s| {
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        match s.recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
            Ok(_) => None,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                None
            }
            Err(e) => Some(e),
        }
    })
}

/// The address a socket is bound to.
///
/// # Errors
/// `getsockname`'s error, or an address family other than IPv4/IPv6.
pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    with_sock(fd, |s| s.local_addr())?
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))
}

/// Sets or clears `O_NONBLOCK`.
///
/// # Errors
/// `fcntl`'s error.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    with_sock(fd, |s| s.set_nonblocking(on))
}

/// `SO_RCVTIMEO`: a blocking `accept` or `read` gives `EAGAIN` after `t`, so a
/// thread sleeping in one still looks at its stop flag now and then.
///
/// # Errors
/// `setsockopt`'s error.
pub fn set_recv_timeout(fd: RawFd, t: Duration) -> io::Result<()> {
    with_sock(fd, |s| s.set_read_timeout(Some(t)))
}

/// `TCP_INFO`: the kernel's view of a TCP socket (state, queues, timers).
///
/// # Errors
/// `getsockopt`'s error (`EBADF`, `ENOTSOCK`, `EOPNOTSUPP` on a non-TCP socket).
pub fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `info`, which is
    // that large, and stores the length it wrote in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(info)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `TCP_LISTEN` in `tcpi_state` (include/net/tcp_states.h; libc does not export it).
const TCP_STATE_LISTEN: u8 = 10;

/// Connections waiting in a listening socket's accept queue: Linux reports the
/// backlog as `tcpi_unacked` of a socket in `LISTEN`. `None` when `fd` is not a
/// listening TCP socket (or `TCP_INFO` cannot be read).
pub fn accept_backlog(fd: RawFd) -> Option<u32> {
    tcp_info(fd)
        .ok()
        .filter(|i| i.tcpi_state == TCP_STATE_LISTEN)
        .map(|i| i.tcpi_unacked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn listen_connect_and_options_round_trip() {
        let l = listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = local_addr(l.as_raw_fd()).unwrap();
        assert_ne!(addr.port(), 0);
        let local = LocalBind::Address("127.0.0.2:0".parse().unwrap());
        let c = connect(addr, local, true).unwrap();
        assert_eq!(
            local_addr(c.as_raw_fd()).unwrap().ip().to_string(),
            "127.0.0.2"
        );
        // Blocking accept (with a timeout, so a failure cannot hang the test).
        set_nonblocking(l.as_raw_fd(), false).unwrap();
        set_recv_timeout(l.as_raw_fd(), Duration::from_secs(5)).unwrap();
        let listener = std::net::TcpListener::from(l);
        let (mut server, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip().to_string(), "127.0.0.2");
        let fd = c.as_raw_fd();
        assert!(take_error(fd).is_none());
        assert!(is_connected(fd));
        let mut client = std::net::TcpStream::from(c);
        client.set_nonblocking(false).unwrap();
        client.write_all(b"ping").unwrap();
        let mut buf = [0; 4];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        // A reset instead of FIN: the peer's read fails rather than seeing EOF.
        set_reset_on_close(server.as_raw_fd()).unwrap();
        drop(server);
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let err = client.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    }

    #[test]
    fn has_failed_tells_a_reset_from_open_and_end_of_file() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let pair = || {
            let c = std::net::TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            (c, s)
        };
        // Open, nothing to read; then bytes waiting (still open).
        let (mut c, s) = pair();
        assert!(!has_failed(s.as_raw_fd()));
        c.write_all(b"GET / HTT").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.peek(&mut [0; 1]).unwrap();
        assert!(!has_failed(s.as_raw_fd()));
        // End of file is not a failure.
        drop(c);
        let mut rest = Vec::new();
        (&s).read_to_end(&mut rest).unwrap();
        assert!(!has_failed(s.as_raw_fd()));
        // A reset after bytes, once the bytes are read: failed.
        let (mut c, s) = pair();
        c.write_all(b"GET / HTT").unwrap();
        let mut head = [0; 9];
        (&s).read_exact(&mut head).unwrap();
        set_reset_on_close(c.as_raw_fd()).unwrap();
        drop(c);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !has_failed(s.as_raw_fd()) {
            assert!(std::time::Instant::now() < until, "the reset never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
        // `failure` says which error: the reset.
        let (c, s) = pair();
        assert!(failure(s.as_raw_fd()).is_none(), "open");
        set_reset_on_close(c.as_raw_fd()).unwrap();
        drop(c);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let e = loop {
            if let Some(e) = failure(s.as_raw_fd()) {
                break e;
            }
            assert!(std::time::Instant::now() < until, "the reset never showed");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
    }

    #[test]
    fn refused_connect_reports_through_so_error() {
        // A port that is bound but not listening refuses, and stays ours while
        // the test runs (no other test can take it).
        let bound = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        bound
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let port = bound.local_addr().unwrap().as_socket().unwrap();
        match connect(port, LocalBind::Kernel, false) {
            // Loopback may refuse at once...
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused),
            // ...or through SO_ERROR once the attempt is over.
            Ok(c) => {
                let fd = c.as_raw_fd();
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one live pollfd, count 1.
                assert_eq!(unsafe { libc::poll(&mut pfd, 1, 5000) }, 1);
                let e = take_error(fd).expect("a pending error");
                assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
                assert!(!is_connected(fd));
            }
        }
    }

    #[test]
    fn reuseport_binds_one_address_twice() {
        let opts = ListenOptions {
            reuseport: true,
            ..ListenOptions::default()
        };
        let a = listen("127.0.0.1:0".parse().unwrap(), opts).unwrap();
        let addr = local_addr(a.as_raw_fd()).unwrap();
        let b = listen(addr, opts).unwrap();
        assert_eq!(local_addr(b.as_raw_fd()).unwrap(), addr);
        let plain = listen(addr, ListenOptions::default());
        assert_eq!(plain.unwrap_err().kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn accept_backlog_counts_unaccepted_connections() {
        let l = listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = local_addr(l.as_raw_fd()).unwrap();
        assert_eq!(accept_backlog(l.as_raw_fd()), Some(0));
        let c = std::net::TcpStream::connect(addr).unwrap();
        // The client's last ACK may still be on its way through loopback: wait
        // until the listener is readable, i.e. the connection is in its queue.
        let mut p = libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, count 1.
        assert_eq!(
            unsafe { libc::poll(&mut p, 1, 10_000) },
            1,
            "no connection queued"
        );
        assert_eq!(accept_backlog(l.as_raw_fd()), Some(1));
        // A connected socket is not listening: no backlog to report.
        assert_eq!(accept_backlog(c.as_raw_fd()), None);
        assert!(tcp_info(c.as_raw_fd()).is_ok());
    }
}
