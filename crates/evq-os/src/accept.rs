//! `accept4(2)` as a server needs it: every error sorted into what to do next,
//! and the spare-descriptor trick for running out of descriptors.
//!
//! Quirks this file deals with:
//! - Out of descriptors (`EMFILE`, `ENFILE`), `accept` fails but the connection
//!   stays in the listen queue, so a level-triggered listener reports it again at
//!   once and the loop spins. The trick (libev's, nginx's): keep one spare
//!   descriptor open (`/dev/null`); when descriptors run out, close it, accept
//!   the connection into the freed slot, close that at once (the client sees the
//!   connection end instead of waiting), and reopen the spare. When even the
//!   spare cannot be had back, accepting must pause: the caller stops watching
//!   the listener until a descriptor is freed or a moment has passed.
//! - `ENOBUFS`/`ENOMEM`: memory, not descriptors, is short; the spare cannot
//!   help, so accepting pauses.
//! - Linux passes errors already pending on a new connection out of `accept`
//!   itself (accept(2), "Error handling": `ENETDOWN`, `EPROTO`, `ENOPROTOOPT`,
//!   `EHOSTDOWN`, `ENONET`, `EHOSTUNREACH`, `EOPNOTSUPP`, `ENETUNREACH`), and
//!   `ECONNABORTED` for one reset while queued, `EPERM` for one a firewall
//!   refused: that connection is gone, the next may be fine.
//! - `EINTR`: retried here.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Accepts one connection from `listener` with `accept4(2)`, close-on-exec, and
/// non-blocking when `nonblocking` (the peer's address is not asked for).
///
/// # Errors
/// `accept4`'s error, as is (see [`Acceptor`] for what each means).
pub fn accept(listener: RawFd, nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: accept4(2) allows null address pointers (the address is not wanted);
    // the listener is a number the kernel validates.
    let fd = unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 just returned this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What one [`Acceptor::accept`] came back with.
#[derive(Debug)]
pub enum Accept {
    /// A new connection, non-blocking and close-on-exec.
    Conn(OwnedFd),
    /// No connection is waiting (`EAGAIN`).
    Empty,
    /// A connection failed before it could be taken (reset while queued, a
    /// pending network error, refused by a firewall): accept the next.
    Skipped,
    /// Out of descriptors: one waiting connection was taken into the spare's
    /// slot and closed, so the queue moves on; accept the next (it will most
    /// likely be shed the same way until descriptors are freed).
    Shed,
    /// Out of descriptors, from [`Acceptor::try_accept`] only: the connection
    /// still waits in the queue. Free a descriptor (an idle connection) and
    /// accept again, or [`Acceptor::shed`] it.
    NoDescriptor(io::Error),
    /// Out of descriptors with no spare to shed with, or out of memory: stop
    /// watching the listener until a descriptor is freed or a moment has passed,
    /// then [`Acceptor::reserve`] and watch it again.
    Exhausted(io::Error),
    /// The listener itself cannot accept (closed, shut down, not listening):
    /// stop watching it; trying again later is harmless.
    Failed(io::Error),
}

/// Accepts connections with every `accept` error handled, holding the spare
/// descriptor of the trick described above (one per thread that accepts).
#[derive(Debug)]
pub struct Acceptor {
    spare: Option<OwnedFd>,
}

impl Default for Acceptor {
    fn default() -> Self {
        Acceptor::new()
    }
}

impl Acceptor {
    /// An acceptor with its spare open (if a descriptor can be had now).
    pub fn new() -> Acceptor {
        Acceptor {
            spare: open_spare(),
        }
    }

    /// True while the spare descriptor is held.
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    /// Reopens the spare if it is missing (before watching the listener again).
    pub fn reserve(&mut self) {
        if self.spare.is_none() {
            self.spare = open_spare();
        }
    }

    /// Accepts one connection from the non-blocking `listener`; out of
    /// descriptors, sheds it ([`Acceptor::shed`]).
    pub fn accept(&mut self, listener: RawFd) -> Accept {
        match self.try_accept(listener) {
            Accept::NoDescriptor(err) => self.shed(listener, err),
            other => other,
        }
    }

    /// As [`Acceptor::accept`], but out of descriptors it leaves the
    /// connection waiting and says [`Accept::NoDescriptor`]: a caller that can
    /// close an idle connection serves the new one instead of shedding it.
    pub fn try_accept(&mut self, listener: RawFd) -> Accept {
        loop {
            let err = match accept(listener, true) {
                Ok(fd) => return Accept::Conn(fd),
                Err(e) => e,
            };
            return match err.raw_os_error().unwrap_or(0) {
                libc::EINTR => continue,
                libc::EAGAIN => Accept::Empty,
                libc::ECONNABORTED
                | libc::EPERM
                | libc::EPROTO
                | libc::ENETDOWN
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH => Accept::Skipped,
                libc::EMFILE | libc::ENFILE => Accept::NoDescriptor(err),
                libc::ENOBUFS | libc::ENOMEM => Accept::Exhausted(err),
                _ => Accept::Failed(err),
            };
        }
    }

    /// The trick, once out of descriptors (`err` said so): free the spare,
    /// take one waiting connection into its slot and close it, take the spare
    /// back. [`Accept::Shed`], or [`Accept::Exhausted`] with `err` when there
    /// is no spare to do it with.
    pub fn shed(&mut self, listener: RawFd, err: io::Error) -> Accept {
        if self.spare.take().is_none() {
            return Accept::Exhausted(err);
        }
        // Whatever this gives, the connection (if any) is closed at once; EAGAIN
        // means another thread took it.
        drop(accept(listener, true));
        self.spare = open_spare();
        if self.spare.is_some() {
            Accept::Shed
        } else {
            Accept::Exhausted(err)
        }
    }
}

/// Opens `/dev/null` as the spare; `None` if no descriptor is free.
fn open_spare() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::{listen, local_addr, ListenOptions};
    use std::os::fd::AsRawFd;

    #[test]
    fn accepts_then_reports_empty() {
        let l = listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = local_addr(l.as_raw_fd()).unwrap();
        let mut acceptor = Acceptor::new();
        assert!(acceptor.has_spare());
        assert!(matches!(acceptor.accept(l.as_raw_fd()), Accept::Empty));
        let _c = std::net::TcpStream::connect(addr).unwrap();
        // The connection is queued by the time connect returns on loopback.
        let conn = match acceptor.accept(l.as_raw_fd()) {
            Accept::Conn(fd) => fd,
            other => panic!("{other:?}"),
        };
        // SAFETY: F_GETFL on a descriptor we own.
        let flags = unsafe { libc::fcntl(conn.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(
            flags & libc::O_NONBLOCK,
            0,
            "accepted sockets are non-blocking"
        );
        assert!(matches!(acceptor.accept(l.as_raw_fd()), Accept::Empty));
    }

    /// Runs in a child process (the limit is process-wide and other tests run on
    /// threads beside this one): the test binary again, this test only.
    #[test]
    fn out_of_descriptors_sheds_then_pauses() {
        if crate::isolation::in_own_process("accept::tests::out_of_descriptors_sheds_then_pauses") {
            return;
        }
        descriptor_exhaustion_child();
    }

    fn descriptor_exhaustion_child() {
        use std::io::Read;
        let l = listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = local_addr(l.as_raw_fd()).unwrap();
        let mut clients: Vec<std::net::TcpStream> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let mut acceptor = Acceptor::new();
        // A low limit, then every descriptor under it taken.
        let mut fillers = crate::isolation::exhaust_descriptors(64);
        // The first client is taken into the spare's slot and closed at once.
        assert!(matches!(acceptor.accept(l.as_raw_fd()), Accept::Shed));
        assert!(acceptor.has_spare(), "the spare is taken back");
        let mut buf = [0u8; 1];
        clients[0]
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        assert_eq!(
            clients[0].read(&mut buf).unwrap(),
            0,
            "the client sees the end"
        );
        // Without a spare, accepting must pause.
        drop(acceptor);
        fillers.push(std::fs::File::open("/dev/null").unwrap());
        let mut acceptor = Acceptor::new();
        assert!(!acceptor.has_spare());
        match acceptor.accept(l.as_raw_fd()) {
            Accept::Exhausted(e) => assert_eq!(e.raw_os_error(), Some(libc::EMFILE)),
            other => panic!("{other:?}"),
        }
        // Descriptors freed: the spare comes back, and a connection is accepted.
        fillers.truncate(fillers.len() - 2);
        acceptor.reserve();
        assert!(acceptor.has_spare());
        assert!(matches!(acceptor.accept(l.as_raw_fd()), Accept::Conn(_)));
        clients.clear();
    }

    #[test]
    fn a_broken_listener_is_failed_not_empty() {
        // A socket that was never put in listening state: accept says EINVAL.
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let mut acceptor = Acceptor::new();
        match acceptor.accept(s.as_raw_fd()) {
            Accept::Failed(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL)),
            other => panic!("{other:?}"),
        }
    }
}
