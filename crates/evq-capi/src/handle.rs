//! The handle API: explicit queues (`evq_t`), a chosen backend, tokens, modes, and
//! cross-thread wake-up, for programs that want more than one queue per thread.
//!
//! One thread at a time may use a handle, except for `evq_notify`, which any thread
//! may call while the handle is open, and `evq_notifier_t`, which outlives it. The
//! queue therefore sits in an `UnsafeCell` beside the (thread-safe) `Notifier`: no
//! call ever makes a `&mut` to the whole handle that a concurrent `evq_notify` could
//! alias.

use crate::abi::*;
use crate::backend;
use crate::error::{guard, guard_int, last_error, CError};
use crate::identity::{self, FileIdentities};
use evq::{EventQueue, Events, Interest, Mode, Notifier, Options};
use libc::{c_char, c_int, c_uint};
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::ptr;
use std::time::Duration;

/// What `evq_t` points to (opaque to C).
pub struct EvqHandle {
    inner: UnsafeCell<HandleQueue>,
    notifier: Notifier,
}

struct HandleQueue {
    queue: EventQueue,
    ids: FileIdentities,
    events: Events,
}

/// What `evq_notifier_t` points to (opaque to C): wakes one queue from any thread,
/// even after `evq_close` (it then does nothing harmful).
pub struct EvqNotifier {
    notifier: Notifier,
}

/// The queue behind `q`, for the one thread using it.
///
/// # Safety
/// `q` is null or a live handle from `evq_open` that no other thread is using (other
/// than through `evq_notify`).
unsafe fn queue<'a>(q: *const EvqHandle) -> Result<&'a mut HandleQueue, CError> {
    if q.is_null() {
        return Err(CError::inval());
    }
    // SAFETY: per this function's contract, `q` is live and only this thread reaches
    // `inner`; `evq_notify` only reads `notifier`, outside the cell.
    Ok(unsafe { &mut *(*q).inner.get() })
}

/// Opens a queue on `backend` (`"epoll"`, `"poll"`, `"select"`,
/// `"select-improved"`), or when `backend` is NULL on `EVQ_BACKEND` or the best
/// available one. Returns NULL with `errno` set and `evq_last_error()` telling why:
/// `EVQ_EUNKNOWN_BACKEND` (`EINVAL`), `EVQ_EOS` (e.g. `EMFILE`), `EVQ_ENOMEM`.
///
/// # Safety
/// `backend` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn evq_open(backend: *const c_char) -> *mut EvqHandle {
    let opened = guard(|| {
        let name = if backend.is_null() {
            None
        } else {
            // SAFETY: non-null, and the caller promises a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(backend) };
            // A name that is not UTF-8 is no backend's name.
            Some(name.to_str().unwrap_or("\u{fffd}"))
        };
        let queue = EventQueue::with_backend(backend::resolve(name)?)?;
        let notifier = queue.notifier();
        Ok(Box::new(EvqHandle {
            inner: UnsafeCell::new(HandleQueue {
                queue,
                ids: FileIdentities::default(),
                events: Events::with_capacity(64),
            }),
            notifier,
        }))
    });
    opened.map_or(ptr::null_mut(), Box::into_raw)
}

/// Closes a queue opened by `evq_open` (NULL is ignored). Descriptors registered in
/// it stay open; notifier handles stay valid.
///
/// # Safety
/// `q` is null or a live handle, not used again afterwards by any thread.
#[no_mangle]
pub unsafe extern "C" fn evq_close(q: *mut EvqHandle) {
    if !q.is_null() {
        // Dropping closes the queue's kernel objects and cannot panic in practice;
        // guard anyway so nothing unwinds into C.
        let _ = guard(|| {
            // SAFETY: `q` came from `Box::into_raw` in `evq_open` and is given back
            // exactly once, per the caller's contract.
            drop(unsafe { Box::from_raw(q) });
            Ok(())
        });
    }
}

fn mode_options(mode: c_uint, token: u64) -> Result<Options, CError> {
    let delivery = match mode & !EVQ_WAKE_ONE {
        EVQ_MODE_LEVEL => Mode::Level,
        EVQ_MODE_EVENT => Mode::Event,
        EVQ_MODE_ONESHOT => Mode::Oneshot,
        _ => return Err(CError::inval()),
    };
    Ok(Options::new(token)
        .mode(delivery)
        .wake_one(mode & EVQ_WAKE_ONE != 0))
}

/// Registers, modifies, or (with `interest` 0) revokes interest in `fd` on `q`.
///
/// `interest` is `EVQ_READ|EVQ_WRITE|EVQ_EXCEPT` bits; `mode` is one of
/// `EVQ_MODE_LEVEL`, `EVQ_MODE_EVENT`, `EVQ_MODE_ONESHOT`, optionally ORed with
/// `EVQ_WAKE_ONE`; every event carries `token`. If `state` is non-NULL it receives
/// the current `EVQ_*` state, read after the registration is in place. Returns
/// `EVQ_OK`, or a negative `EVQ_E*` code with `errno` set: `EVQ_EBADF`,
/// `EVQ_EINVAL` (null handle, unknown bits or mode), `EVQ_EUNSUPPORTED` (the
/// backend lacks the mode or wake-one; `errno` `EOPNOTSUPP`), `EVQ_EOS`. When
/// several apply, the first in that order after `EVQ_EINVAL` wins, `EVQ_EINVAL`
/// first of all: the arguments are judged before any system call touches `fd`.
///
/// # Safety
/// `q` as for every handle call; `state` is null or points to a writable `unsigned`.
#[no_mangle]
pub unsafe extern "C" fn evq_declare(
    q: *mut EvqHandle,
    fd: c_int,
    interest: c_uint,
    mode: c_uint,
    token: u64,
    state: *mut c_uint,
) -> c_int {
    guard_int(
        |code| code,
        || {
            // SAFETY: the caller's contract for `q`.
            let hq = unsafe { queue(q)? };
            let interest = Interest::from_bits(interest).ok_or(CError::inval())?;
            let options = mode_options(mode, token)?;
            let s = identity::declare(&mut hq.queue, &mut hq.ids, fd, interest, options)?;
            if !state.is_null() {
                // SAFETY: non-null, and the caller promises a writable unsigned.
                unsafe { state.write(s.bits()) };
            }
            Ok(EVQ_OK)
        },
    )
}

/// Waits up to `timeout_ms` milliseconds (negative: forever; 0: just look) for
/// events on `q` and stores up to `max` of them (at most `EVQ_BATCH_MAX`) in
/// `events`. Returns the count (0 on timeout), or a negative `EVQ_E*` code with
/// `errno` set (`EVQ_EINVAL` for a null handle or array, or `max <= 0`). Signals do
/// not interrupt the wait.
///
/// # Safety
/// `q` as for every handle call; `events` points to `max` writable `evq_event_t`.
#[no_mangle]
pub unsafe extern "C" fn evq_wait(
    q: *mut EvqHandle,
    events: *mut evq_event_t,
    max: c_int,
    timeout_ms: c_int,
) -> c_int {
    guard_int(
        |code| code,
        || {
            // SAFETY: the caller's contract for `q`.
            let hq = unsafe { queue(q)? };
            if max <= 0 || events.is_null() {
                return Err(CError::inval());
            }
            let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
            let max = max.min(EVQ_BATCH_MAX) as usize;
            if hq.events.capacity() != max {
                hq.events = Events::with_capacity(max);
            }
            hq.queue.get_next_event(&mut hq.events, timeout)?;
            for (i, ev) in hq.events.iter().enumerate() {
                let out = evq_event_t {
                    token: ev.token(),
                    fd: ev.fd(),
                    mask: ev.readiness().bits(),
                };
                // SAFETY: i < len <= max, within the `max` elements the caller
                // promises; `write` does not read the old value.
                unsafe { events.add(i).write(out) };
            }
            Ok(hq.events.len() as c_int)
        },
    )
}

/// Wakes `q`: its current or next `evq_wait` returns an event with token
/// `EVQ_NOTIFY_TOKEN`, fd -1 and mask `EVQ_NOTIFY` (several calls coalesce). Safe
/// from any thread while `q` is open. Returns `EVQ_OK` or a negative code.
///
/// # Safety
/// `q` is null or a handle that stays open for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn evq_notify(q: *const EvqHandle) -> c_int {
    guard_int(
        |code| code,
        || {
            if q.is_null() {
                return Err(CError::inval());
            }
            // SAFETY: `q` is live per the contract; `notifier` is outside the
            // `UnsafeCell` and `Notifier` is `Sync`, so a shared borrow is sound
            // while another thread uses the queue.
            let notifier = unsafe { &(*q).notifier };
            notifier.notify()?;
            Ok(EVQ_OK)
        },
    )
}

/// A separate handle that wakes `q` from any thread and stays valid after
/// `evq_close(q)` (notifying then does nothing). Free it with `evq_notifier_free`.
/// NULL with `errno` `EINVAL` for a null `q`.
///
/// # Safety
/// `q` is null or a live handle (this only reads its notifier).
#[no_mangle]
pub unsafe extern "C" fn evq_notifier(q: *const EvqHandle) -> *mut EvqNotifier {
    let made = guard(|| {
        if q.is_null() {
            return Err(CError::inval());
        }
        // SAFETY: as in `evq_notify`.
        let notifier = unsafe { &(*q).notifier }.clone();
        Ok(Box::new(EvqNotifier { notifier }))
    });
    made.map_or(ptr::null_mut(), Box::into_raw)
}

/// Wakes the queue `n` was made from (see `evq_notify`). Thread-safe.
///
/// # Safety
/// `n` is null or a live notifier from `evq_notifier`.
#[no_mangle]
pub unsafe extern "C" fn evq_notifier_notify(n: *const EvqNotifier) -> c_int {
    guard_int(
        |code| code,
        || {
            if n.is_null() {
                return Err(CError::inval());
            }
            // SAFETY: `n` is live per the contract and only read.
            unsafe { &(*n).notifier }.notify()?;
            Ok(EVQ_OK)
        },
    )
}

/// Frees a notifier handle (NULL is ignored).
///
/// # Safety
/// `n` is null or a live notifier, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn evq_notifier_free(n: *mut EvqNotifier) {
    if !n.is_null() {
        let _ = guard(|| {
            // SAFETY: `n` came from `Box::into_raw` in `evq_notifier` and is given
            // back exactly once, per the caller's contract.
            drop(unsafe { Box::from_raw(n) });
            Ok(())
        });
    }
}

/// Revokes interest in `fd` (if any) and closes it: the stale-safe close. Returns
/// `EVQ_OK`, or `EVQ_EBADF` if `fd` was not open (it is closed either way).
///
/// # Safety
/// `q` as for every handle call.
#[no_mangle]
pub unsafe extern "C" fn evq_close_fd(q: *mut EvqHandle, fd: c_int) -> c_int {
    guard_int(
        |code| code,
        || {
            // SAFETY: the caller's contract for `q`.
            let hq = unsafe { queue(q)? };
            if fd < 0 {
                return Err(CError::badf());
            }
            hq.ids.clear(fd);
            hq.queue.close(fd)?;
            Ok(EVQ_OK)
        },
    )
}

/// Drops the registration of an `fd` the program already closed itself, without
/// any call on that number (which may name another file by now). Events the kernel
/// still holds for the old file are never delivered. Returns `EVQ_OK` or
/// `EVQ_EINVAL` (null handle).
///
/// # Safety
/// `q` as for every handle call.
#[no_mangle]
pub unsafe extern "C" fn evq_forget_fd(q: *mut EvqHandle, fd: c_int) -> c_int {
    guard_int(
        |code| code,
        || {
            // SAFETY: the caller's contract for `q`.
            let hq = unsafe { queue(q)? };
            hq.ids.clear(fd);
            hq.queue.forget(fd);
            Ok(EVQ_OK)
        },
    )
}

/// The backend `q` runs on (`"epoll"`, ...), a static string; NULL for a null `q`.
///
/// # Safety
/// `q` as for every handle call.
#[no_mangle]
pub unsafe extern "C" fn evq_backend_name(q: *const EvqHandle) -> *const c_char {
    guard(|| {
        // SAFETY: the caller's contract for `q`.
        let hq = unsafe { queue(q)? };
        Ok(backend::c_name(hq.queue.backend()).as_ptr())
    })
    .unwrap_or(ptr::null())
}

/// A static, human-readable description of an `EVQ_E*` code (any int is accepted).
#[no_mangle]
pub extern "C" fn evq_strerror(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        EVQ_OK => c"success",
        EVQ_EBADF => c"bad file descriptor",
        EVQ_EINVAL => c"invalid argument",
        EVQ_ENOMEM => c"out of memory",
        EVQ_EUNSUPPORTED => c"not supported by this backend",
        EVQ_EUNKNOWN_BACKEND => c"unknown backend name",
        EVQ_EOS => c"operating system error (see errno)",
        EVQ_EINTERNAL => c"internal error in libevq",
        EVQ_EBUSY => c"the thread's queue is busy (signal handler re-entry) or gone (thread exit)",
        _ => c"unknown evq error code",
    };
    text.as_ptr()
}

/// The `EVQ_E*` code of the calling thread's last failed evq call (`EVQ_OK` if
/// none), for calls that return a pointer (`evq_open`, `evq_notifier`). Like `errno`,
/// it is not reset by successful calls.
#[no_mangle]
pub extern "C" fn evq_last_error() -> c_int {
    last_error()
}
