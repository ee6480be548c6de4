//! The syscall boundary helpers shared by the backends.

use crate::Readiness;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Calls a libc function and turns `-1` into `io::Error::last_os_error()`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        #[allow(unused_unsafe)]
        // SAFETY: every caller passes arguments that satisfy the named syscall's
        // contract (valid pointers with the lengths given, descriptors it owns or
        // was handed); the macro only checks the return value.
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;

/// A descriptor's current state, from a zero-timeout `poll(2)` of that fd alone.
pub(crate) fn current_state(fd: RawFd) -> io::Result<Readiness> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLOUT | libc::POLLPRI | libc::POLLRDHUP,
        revents: 0,
    };
    loop {
        match syscall!(poll(&mut pfd, 1, 0)) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if pfd.revents & libc::POLLNVAL != 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(Readiness::from_poll(pfd.revents))
}

/// The calling thread's id, cached per thread (`gettid(2)` is a real syscall).
pub(crate) fn current_tid() -> libc::pid_t {
    thread_local! {
        static TID: std::cell::Cell<libc::pid_t> = const { std::cell::Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid(2) takes no arguments and cannot fail.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t);
        }
        t.get()
    })
}

/// True if `fd` names an open file description.
pub(crate) fn is_open(fd: RawFd) -> bool {
    syscall!(fcntl(fd, libc::F_GETFD)).is_ok()
}

/// Milliseconds for `poll`/`epoll_wait`, rounded *up* so a wait never ends early and
/// spins; `None` is -1 (forever).
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(libc::c_int::MAX as u128) as libc::c_int
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_micros(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(1500))), 1500);
        assert_eq!(timeout_ms(Some(Duration::MAX)), libc::c_int::MAX);
    }
}
