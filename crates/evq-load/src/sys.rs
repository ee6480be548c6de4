//! The syscall boundary: non-blocking TCP sockets, explicit binding, resource limits,
//! CPU accounting and stop signals. Every `unsafe` block of the crate lives here.
//!
//! Quirks this file deals with:
//! - `bind(addr, 0)` before `connect` reserves a port for *any* destination, which caps
//!   a client at the size of the ephemeral range per source address; with
//!   `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2) the kernel picks the port at `connect` time
//!   against the full 4-tuple instead.
//! - A non-blocking `connect` that fails reports the failure through `SO_ERROR` on the
//!   first writable/error event, not through `connect` itself.
//! - `send` on a socket the peer reset raises `SIGPIPE` unless `MSG_NOSIGNAL` is given.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the SIGINT/SIGTERM handler that [`install_stop_signals`] installs; the run
/// loops look at it at least every 100 ms and wind down.
pub(crate) static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM ask running `run_load`/`run_dead` calls to stop early and
/// still report (instead of killing the process). For command-line use; a second
/// signal is handled the same way.
///
/// # Errors
/// `sigaction(2)`'s error.
pub fn install_stop_signals() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the
        // handler only stores to an atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

pub(crate) fn stop_requested() -> bool {
    STOP_REQUESTED.load(Ordering::Relaxed)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit.
pub(crate) fn raise_nofile_limit() -> io::Result<u64> {
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        let mut lim: libc::rlimit = mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(io::Error::last_os_error());
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(lim.rlim_cur as u64)
    }
}

/// User and system CPU seconds used by this process so far.
pub(crate) fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage writes only into the struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// Whether stderr is a terminal (progress lines are only drawn there).
pub(crate) fn stderr_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a c_int that lives across the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&val as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// How the local end of a client socket is chosen.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LocalBind {
    /// Let `connect` pick address and port.
    Kernel,
    /// Bind the address, let `connect` pick the port against the 4-tuple.
    Address(SocketAddr),
    /// Bind address and port explicitly, with `SO_REUSEADDR` (httperf's `--hog`).
    Port(SocketAddr),
}

/// Closes a descriptor this module handed out, ignoring errors (nothing to do then).
pub(crate) fn close_fd(fd: RawFd) {
    // SAFETY: callers pass descriptors they own and no longer use.
    unsafe { libc::close(fd) };
}

/// Opens a non-blocking TCP socket and starts connecting it to `to`. Returns the
/// descriptor; the connection completes (or fails) asynchronously. On error nothing
/// is left open.
pub(crate) fn start_connect(to: &SocketAddr, local: LocalBind, nodelay: bool) -> io::Result<RawFd> {
    let family = if to.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = (|| {
        if nodelay {
            set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        }
        let bind_to = match local {
            LocalBind::Kernel => None,
            LocalBind::Address(a) => {
                // Best effort: older kernels lack it and then reserve a port at bind.
                let _ = set_int_opt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
                Some(a)
            }
            LocalBind::Port(a) => {
                set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
                Some(a)
            }
        };
        if let Some(a) = bind_to {
            let (sa, len) = sockaddr(&a);
            // SAFETY: sa is a valid sockaddr of length len.
            let rc = unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let (sa, len) = sockaddr(to);
        // SAFETY: sa is a valid sockaddr of length len.
        let rc = unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(err);
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(fd),
        Err(e) => {
            close_fd(fd);
            Err(e)
        }
    }
}

/// The pending error of a socket (`SO_ERROR`), `None` if there is none.
pub(crate) fn take_socket_error(fd: RawFd) -> Option<io::Error> {
    let mut val: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: val/len are valid out-parameters of the right size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Some(io::Error::last_os_error());
    }
    if val == 0 {
        None
    } else {
        Some(io::Error::from_raw_os_error(val))
    }
}

/// `send(2)` with `MSG_NOSIGNAL`.
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid readable slice for its length.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recv(2)` into `buf`; `Ok(0)` is end-of-file.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a valid writable slice for its length.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `shutdown(fd, SHUT_WR)`: sends FIN after queued data; errors are moot (the peer is
/// gone then, which the next read reports).
pub(crate) fn shutdown_write(fd: RawFd) {
    // SAFETY: shutdown only acts on the descriptor, which the caller owns.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}
