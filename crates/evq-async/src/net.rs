//! TCP and Unix-domain sockets as [`Async`] handles: bind, accept, connect.

use crate::Async;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// Listen backlog: the kernel clamps it to `net.core.somaxconn` (4096 by default
/// since Linux 5.4); std's 128 drops SYNs when a thousand clients connect at once.
const BACKLOG: i32 = 1024;

/// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`: the accepted descriptor needs
/// no `fcntl` before it is registered.
fn accept_nonblocking(listener: RawFd) -> io::Result<(OwnedFd, SockAddr)> {
    // SAFETY: `SockAddr::try_init` hands accept4(2) a zeroed sockaddr_storage and
    // its length, which the kernel fills (at most that many bytes); a non-negative
    // return is a new descriptor we own.
    let (fd, addr) = unsafe {
        SockAddr::try_init(|storage, len| {
            let fd = libc::accept4(
                listener,
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            );
            if fd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(fd)
            }
        })?
    };
    // SAFETY: accept4(2) returned a fresh descriptor that nobody else owns.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, addr))
}

/// A TCP socket for `addr`'s family, non-blocking and close-on-exec from birth.
fn tcp_socket(addr: SocketAddr) -> io::Result<Socket> {
    Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )
}

impl Async<TcpListener> {
    /// Binds a listening TCP socket (`SO_REUSEADDR`, backlog 1024).
    ///
    /// ```
    /// use evq_async::Async;
    /// use std::net::TcpListener;
    /// let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
    /// assert_ne!(listener.get_ref().local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// `socket(2)`, `bind(2)` or `listen(2)`'s error (e.g. `EADDRINUSE`), or the
    /// registration's (see [`Async::new`]).
    pub fn bind(addr: impl Into<SocketAddr>) -> io::Result<Async<TcpListener>> {
        let addr = addr.into();
        let socket = tcp_socket(addr)?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        Async::new_nonblocking(TcpListener::from(socket))
    }

    /// Accepts a connection, registered and non-blocking.
    ///
    /// # Errors
    /// `accept4(2)`'s error (e.g. `EMFILE`: the listener stays usable, and the
    /// connection waits in the backlog), or the registration's.
    pub async fn accept(&self) -> io::Result<(Async<TcpStream>, SocketAddr)> {
        let (fd, addr) = self
            .read_with(|l| accept_nonblocking(l.as_raw_fd()))
            .await?;
        let addr = addr
            .as_socket()
            .ok_or_else(|| io::Error::other("accept4 returned a non-IP peer address"))?;
        Ok((Async::new_stream(TcpStream::from(fd))?, addr))
    }
}

impl Async<TcpStream> {
    /// Connects to `addr` without blocking: `connect(2)` returns `EINPROGRESS`,
    /// the socket is registered, and the future resolves when it is writable and
    /// `SO_ERROR` is clear.
    ///
    /// # Errors
    /// The connection's error (`ECONNREFUSED`, `ETIMEDOUT`, …), or the socket's or
    /// the registration's.
    pub async fn connect(addr: impl Into<SocketAddr>) -> io::Result<Async<TcpStream>> {
        let addr = addr.into();
        let socket = tcp_socket(addr)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let stream = Async::new_stream(TcpStream::from(socket))?;
        wait_connected(&stream, |s| s.take_error(), |s| s.peer_addr().map(drop)).await?;
        Ok(stream)
    }
}

/// Waits until a non-blocking `connect` finished: writable, no `SO_ERROR`, and a
/// peer address (an early, guessed "writable" gives `ENOTCONN`, which waits on).
async fn wait_connected<T>(
    stream: &Async<T>,
    take_error: impl Fn(&T) -> io::Result<Option<io::Error>>,
    peer: impl Fn(&T) -> io::Result<()>,
) -> io::Result<()> {
    stream
        .write_with(|s| {
            if let Some(e) = take_error(s)? {
                return Err(e);
            }
            match peer(s) {
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    Err(io::ErrorKind::WouldBlock.into())
                }
                other => other,
            }
        })
        .await
}

impl Async<UnixListener> {
    /// Binds a listening Unix-domain socket at `path`.
    ///
    /// # Errors
    /// `bind(2)`/`listen(2)`'s error (e.g. `EADDRINUSE` if `path` exists), or the
    /// registration's.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<Async<UnixListener>> {
        let socket = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        socket.bind(&SockAddr::unix(path)?)?;
        socket.listen(BACKLOG)?;
        Async::new_nonblocking(UnixListener::from(OwnedFd::from(socket)))
    }

    /// Accepts a connection, registered and non-blocking.
    ///
    /// # Errors
    /// `accept4(2)`'s error, or the registration's.
    pub async fn accept(&self) -> io::Result<Async<UnixStream>> {
        let (fd, _) = self
            .read_with(|l| accept_nonblocking(l.as_raw_fd()))
            .await?;
        Async::new_stream(UnixStream::from(fd))
    }
}

impl Async<UnixStream> {
    /// Connects to the Unix-domain socket at `path` without blocking.
    ///
    /// # Errors
    /// The connection's error (`ENOENT`, `ECONNREFUSED`, …), or the registration's.
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<Async<UnixStream>> {
        let socket = Socket::new(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        match socket.connect(&SockAddr::unix(path)?) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let stream = Async::new_stream(UnixStream::from(OwnedFd::from(socket)))?;
        wait_connected(&stream, |s| s.take_error(), |s| s.peer_addr().map(drop)).await?;
        Ok(stream)
    }

    /// A connected pair of Unix-domain stream sockets, both registered.
    ///
    /// # Errors
    /// `socketpair(2)`'s error, or the registration's.
    pub fn pair() -> io::Result<(Async<UnixStream>, Async<UnixStream>)> {
        let (a, b) = UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((Async::new_stream(a)?, Async::new_stream(b)?))
    }
}
