//! Sockets as hostile clients hold them: connected from a chosen loopback
//! source (idle and slow clients come from 127.0.0.2, as on this project's
//! shared machines), and ended in the three ways a peer can end — close (FIN),
//! reset (`SO_LINGER` 0: RST), or vanish.
//!
//! Vanishing is `TCP_REPAIR` (Linux 3.5, `CAP_NET_ADMIN`): a socket in repair
//! mode is destroyed by `close` without a packet, as CRIU uses it. The server
//! hears nothing — no FIN, no RST — exactly as when a client's machine loses
//! power; the connection lives on at its end until a timeout reclaims it, or
//! until it sends something, which this host (still up) answers with a reset.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Source address of live clients.
pub const LIVE_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// Source address of idle, slow and hostile clients.
pub const HOSTILE_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A non-blocking connection from `from` to `to`, under way (the kernel picks
/// the port against the whole 4-tuple, so 10,000 clients fit one source).
///
/// # Errors
/// `socket`, `bind` or `connect` fails at once (`EMFILE`, `EADDRNOTAVAIL`, …).
pub fn connect_nonblocking(from: IpAddr, to: SocketAddr) -> io::Result<OwnedFd> {
    evq_os::connect(
        to,
        evq_os::LocalBind::Address(SocketAddr::new(from, 0)),
        true,
    )
}

/// A blocking connection from `from` to `to`, established within `timeout`,
/// with `timeout` as its read and write timeout.
///
/// # Errors
/// The connection fails or is not established in time.
pub fn connect(from: IpAddr, to: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let fd = connect_nonblocking(from, to)?;
    let until = Instant::now() + timeout;
    loop {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let left = until.saturating_duration_since(Instant::now());
        // SAFETY: poll(2) on one pollfd that lives on this stack for the call.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
        }
        break;
    }
    if let Some(e) = evq_os::socket::take_error(fd.as_raw_fd()) {
        return Err(e);
    }
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(s)
}

/// Closes with a reset (RST) instead of a FIN.
pub fn reset(s: impl Into<OwnedFd>) {
    let fd: OwnedFd = s.into();
    let _ = evq_os::socket::set_reset_on_close(fd.as_raw_fd());
    drop(fd);
}

/// Destroys the socket without a packet (see the module documentation).
///
/// # Errors
/// `TCP_REPAIR` is refused (no `CAP_NET_ADMIN`); the socket is then closed
/// normally.
pub fn vanish(s: impl Into<OwnedFd>) -> io::Result<()> {
    let fd: OwnedFd = s.into();
    let on: libc::c_int = 1;
    // SAFETY: setsockopt(2) on a socket we own, reading one live c_int whose size
    // is passed as the option length.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_REPAIR,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let result = if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    };
    drop(fd);
    result
}

/// Whether this process may make sockets vanish (`TCP_REPAIR` needs
/// `CAP_NET_ADMIN`): tried on a real connection to a listener of its own.
pub fn can_vanish() -> bool {
    let Ok(l) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return false;
    };
    let Ok(addr) = l.local_addr() else {
        return false;
    };
    let Ok(c) = TcpStream::connect(addr) else {
        return false;
    };
    vanish(c).is_ok()
}

/// Shrinks the receive buffer (before the connection carries data), so a
/// client that stops reading stops the server's sends after a few KiB.
pub fn small_receive_buffer(s: &TcpStream) {
    receive_buffer(s, 4096);
}

/// Fixes the receive buffer at `bytes` (before the connection carries data;
/// the kernel doubles it and stops autotuning it).
pub fn receive_buffer(s: &TcpStream, bytes: usize) {
    let _ = socket2::SockRef::from(s).set_recv_buffer_size(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn reset_and_vanish_look_as_they_should_from_the_other_end() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = connect(HOSTILE_SOURCE, addr, Duration::from_secs(5)).unwrap();
        let (mut s, from) = l.accept().unwrap();
        assert_eq!(from.ip(), HOSTILE_SOURCE);
        reset(c);
        let mut b = [0u8; 8];
        let e = s.read(&mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);

        if !can_vanish() {
            evq_testkit::skip(
                "CAP_NET_ADMIN",
                "TCP_REPAIR refused: vanishing clients not tested",
            );
            return;
        }
        let c = connect(HOSTILE_SOURCE, addr, Duration::from_secs(5)).unwrap();
        let (mut s, _) = l.accept().unwrap();
        vanish(c).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        // Nothing arrives: no FIN (a read would give 0), no RST.
        let e = s.read(&mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        // Writing reaches a host with no such connection: reset.
        let _ = s.write_all(b"hello");
        std::thread::sleep(Duration::from_millis(100));
        let e = s.read(&mut b).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    }
}
