//! Turning Rust errors (and panics) into what a C caller expects: a stable `EVQ_E*`
//! code, `errno`, and the thread's last error for calls that return a pointer.

use crate::abi::*;
use std::cell::Cell;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An error on its way to C: the `EVQ_E*` code and the `errno` value that go with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CError {
    pub code: i32,
    pub errno: i32,
}

impl CError {
    pub(crate) const fn new(code: i32, errno: i32) -> CError {
        CError { code, errno }
    }
    pub(crate) const fn inval() -> CError {
        CError::new(EVQ_EINVAL, libc::EINVAL)
    }
    pub(crate) const fn badf() -> CError {
        CError::new(EVQ_EBADF, libc::EBADF)
    }
    pub(crate) const fn busy() -> CError {
        CError::new(EVQ_EBUSY, libc::EBUSY)
    }
    const fn internal() -> CError {
        CError::new(EVQ_EINTERNAL, libc::EIO)
    }
}

impl From<io::Error> for CError {
    fn from(e: io::Error) -> CError {
        match e.raw_os_error() {
            Some(libc::EBADF) => CError::badf(),
            Some(libc::EINVAL) => CError::inval(),
            Some(libc::ENOMEM) => CError::new(EVQ_ENOMEM, libc::ENOMEM),
            Some(n) => CError::new(EVQ_EOS, n),
            None => match e.kind() {
                io::ErrorKind::Unsupported => CError::new(EVQ_EUNSUPPORTED, libc::EOPNOTSUPP),
                io::ErrorKind::InvalidInput => CError::inval(),
                io::ErrorKind::OutOfMemory => CError::new(EVQ_ENOMEM, libc::ENOMEM),
                _ => CError::new(EVQ_EOS, libc::EIO),
            },
        }
    }
}

thread_local! {
    static LAST_ERROR: Cell<i32> = const { Cell::new(EVQ_OK) };
}

/// Sets `errno` and the thread's last evq error.
pub(crate) fn report(e: CError) {
    // A thread-local `Cell` with a const initializer and no destructor is usable
    // even while the thread is exiting; ignore the impossible failure anyway.
    let _ = LAST_ERROR.try_with(|c| c.set(e.code));
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for
    // the whole life of the thread.
    unsafe { *libc::__errno_location() = e.errno };
}

/// The thread's last evq error code.
pub(crate) fn last_error() -> i32 {
    LAST_ERROR.try_with(|c| c.get()).unwrap_or(EVQ_OK)
}

/// Runs `f` for a C caller: a panic becomes `EVQ_EINTERNAL` instead of unwinding
/// into C; an error sets `errno` and the last error.
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T, CError>) -> Result<T, CError> {
    // The closures capture raw pointers and the thread's queue; if one panics, the
    // queue may be mid-update, but every queue operation leaves its tables
    // consistent before calling into the kernel, and a panic here is a bug reported
    // as EVQ_EINTERNAL rather than hidden.
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or(Err(CError::internal()));
    if let Err(e) = result {
        report(e);
    }
    result
}

/// `guard` for calls returning `int`: the value, or `on_error(code)`.
pub(crate) fn guard_int(on_error: fn(i32) -> i32, f: impl FnOnce() -> Result<i32, CError>) -> i32 {
    match guard(f) {
        Ok(n) => n,
        Err(e) => on_error(e.code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_einternal_and_eio() {
        // Keep the expected panic's message out of the test output.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result: Result<i32, CError> = guard(|| panic!("boom"));
        std::panic::set_hook(hook);
        assert_eq!(result, Err(CError::new(EVQ_EINTERNAL, libc::EIO)));
        assert_eq!(last_error(), EVQ_EINTERNAL);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EIO));
        assert_eq!(guard_int(|code| code, || panic!("again")), EVQ_EINTERNAL);
    }

    #[test]
    fn io_errors_map_to_stable_codes() {
        let os = |n| CError::from(io::Error::from_raw_os_error(n));
        assert_eq!(os(libc::EBADF), CError::badf());
        assert_eq!(os(libc::EINVAL), CError::inval());
        assert_eq!(os(libc::ENOMEM).code, EVQ_ENOMEM);
        assert_eq!(os(libc::EPERM), CError::new(EVQ_EOS, libc::EPERM));
        let unsupported = io::Error::new(io::ErrorKind::Unsupported, "no");
        assert_eq!(
            CError::from(unsupported),
            CError::new(EVQ_EUNSUPPORTED, libc::EOPNOTSUPP)
        );
    }
}
