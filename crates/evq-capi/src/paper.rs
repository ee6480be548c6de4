//! The paper's own calls, `declare_interest` and `get_next_event` (SEEDS 000), on
//! a queue that belongs to the calling thread.
//!
//! Interest is per thread in the paper, so each thread gets its own
//! [`EventQueue`], created on its first call (on `EVQ_BACKEND` or the best backend)
//! and freed when the thread exits. Registrations use [`Mode::Event`], the paper's
//! event semantics: a descriptor is reported when something happens to it, not on
//! every call while it stays ready, so a Figure 3 server that declares
//! `EVENT_READ|EVENT_WRITE` on every connection sleeps while they are idle.
//!
//! Backends that see only state (`select`, `select-improved`, `poll`) cannot keep
//! those semantics without losing events (see `evq::Capabilities::event`), so there
//! `declare_interest` fails with `EOPNOTSUPP` — never a silent switch to level mode,
//! which makes an idle writable connection return from every wait. A program that
//! wants level semantics asks for them: `EVQ_PAPER_MODE=level` (on any backend).
//!
//! After `fork()`, the child's first call starts a fresh queue with no interest (it
//! is a new thread in the paper's terms); the parent's queue is never touched by the
//! child, which matters because an epoll instance is shared across `fork`.

use crate::abi::{event_descr_t, paper_mask, EVQ_BATCH_MAX};
use crate::error::{guard_int, CError};
use crate::identity::{self, FileIdentities};
use evq::{EventQueue, Events, Interest, Mode, Options};
use libc::{c_int, timeval};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;

/// The calling thread's queue and the batch reused by `get_next_event`.
struct DefaultQueue {
    queue: EventQueue,
    ids: FileIdentities,
    events: Events,
    mode: Mode,
    fork_generation: u64,
}

thread_local! {
    static DEFAULT: RefCell<Option<DefaultQueue>> = const { RefCell::new(None) };
}

/// Bumped in the child of every `fork()`; a queue from another generation belongs
/// to the parent process.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static ATFORK: Once = Once::new();

extern "C" fn after_fork_in_child() {
    // Relaxed is enough: in the child only the forking thread exists.
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn open_default() -> Result<DefaultQueue, CError> {
    ATFORK.call_once(|| {
        // SAFETY: registers a handler that only touches an atomic; it needs no
        // pointers from us. Its failure (ENOMEM) only loses fork detection.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    });
    let queue = EventQueue::with_backend(crate::backend::resolve(None)?)?;
    let mode = paper_mode()?;
    Ok(DefaultQueue {
        queue,
        ids: FileIdentities::default(),
        events: Events::with_capacity(64),
        mode,
        fork_generation: FORK_GENERATION.load(Ordering::Relaxed),
    })
}

/// The paper API's delivery mode, from `EVQ_PAPER_MODE`: `event` (the default) or
/// `level`; anything else is `EINVAL`, as an unknown `EVQ_BACKEND` is.
fn paper_mode() -> Result<Mode, CError> {
    match std::env::var("EVQ_PAPER_MODE").as_deref() {
        Err(_) | Ok("") | Ok("event") => Ok(Mode::Event),
        Ok("level") => Ok(Mode::Level),
        Ok(_) => Err(CError::inval()),
    }
}

/// Runs `f` on the calling thread's queue, creating it if needed.
fn with_default<T>(f: impl FnOnce(&mut DefaultQueue) -> Result<T, CError>) -> Result<T, CError> {
    DEFAULT
        .try_with(|cell| {
            // Busy only if a signal handler calls in while this thread is inside a call.
            let mut slot = cell.try_borrow_mut().map_err(|_| CError::busy())?;
            let generation = FORK_GENERATION.load(Ordering::Relaxed);
            if slot
                .as_ref()
                .is_some_and(|dq| dq.fork_generation != generation)
            {
                *slot = None;
            }
            let dq = match slot.as_mut() {
                Some(dq) => dq,
                None => slot.insert(open_default()?),
            };
            f(dq)
        })
        // The thread is exiting and its queue is already gone.
        .unwrap_or(Err(CError::busy()))
}

/// Registers, modifies or (with `interestmask` 0) revokes the calling thread's
/// interest in `fd`, and stores the descriptor's current state in `*statemask`.
///
/// The state is read after the interest is in place, so data that arrived before the
/// call shows in `*statemask` and anything later produces an event. Returns 0, or -1
/// with `errno`: `EBADF` (negative or closed fd), `EINVAL` (bits other than
/// `EVENT_READ|EVENT_WRITE|EVENT_EXCEPT`, or an unknown `EVQ_BACKEND` or
/// `EVQ_PAPER_MODE`), `EOPNOTSUPP` (event semantics on a backend that sees only
/// state: select, select-improved, poll — unless `EVQ_PAPER_MODE=level`), `EPERM` (a
/// regular file on epoll), `EBUSY` (called from a signal handler that interrupted
/// another call on this thread).
///
/// # Safety
/// `statemask` is null or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn declare_interest(
    fd: c_int,
    interestmask: c_int,
    statemask: *mut c_int,
) -> c_int {
    guard_int(
        |_| -1,
        || {
            if fd < 0 {
                return Err(CError::badf());
            }
            let interest = u32::try_from(interestmask)
                .ok()
                .and_then(Interest::from_bits)
                .ok_or(CError::inval())?;
            with_default(|dq| {
                let options = Options::new(fd as u64).mode(dq.mode);
                let state = identity::declare(&mut dq.queue, &mut dq.ids, fd, interest, options)?;
                if !statemask.is_null() {
                    // SAFETY: non-null, and the caller promises it points to a
                    // writable int.
                    unsafe { statemask.write(paper_mask(state) as c_int) };
                }
                Ok(0)
            })
        },
    )
}

/// A `struct timeval` as a `Duration`, refusing what `select(2)` refuses.
pub(crate) fn timeval_duration(tv: &timeval) -> Result<Duration, CError> {
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(CError::inval());
    }
    Ok(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

/// Dequeues up to `array_max` of the calling thread's events into `ev_array`.
///
/// Returns the number of events (at most `min(array_max, EVQ_BATCH_MAX)`) as soon as
/// at least one is ready; otherwise waits for one until `*timeout` passes (0 is
/// returned) or forever if `timeout` is NULL. `*timeout` is not modified. Signals
/// do not interrupt the wait (`EINTR` is retried with the time left). Returns -1
/// with `errno`: `EINVAL` (`array_max <= 0`, null `ev_array`, negative or
/// non-normalized timeout, unknown `EVQ_BACKEND`), `EBUSY` (see
/// `declare_interest`), or the kernel's error.
///
/// # Safety
/// `ev_array` points to `array_max` writable `event_descr_t`; `timeout` is null or
/// points to a readable `struct timeval`.
#[no_mangle]
pub unsafe extern "C" fn get_next_event(
    array_max: c_int,
    ev_array: *mut event_descr_t,
    timeout: *mut timeval,
) -> c_int {
    guard_int(
        |_| -1,
        || {
            if array_max <= 0 || ev_array.is_null() {
                return Err(CError::inval());
            }
            let timeout = if timeout.is_null() {
                None
            } else {
                // SAFETY: non-null, and the caller promises a readable timeval.
                Some(timeval_duration(unsafe { &*timeout })?)
            };
            let max = array_max.min(EVQ_BATCH_MAX) as usize;
            with_default(|dq| {
                if dq.events.capacity() != max {
                    dq.events = Events::with_capacity(max);
                }
                dq.queue.get_next_event(&mut dq.events, timeout)?;
                let mut n = 0;
                // The default queue has no timers and no notifier, so every event has
                // an fd; the filter only keeps a future change from leaking fd -1.
                for ev in dq.events.iter().filter(|ev| ev.fd() >= 0) {
                    let descr = event_descr_t {
                        fd: ev.fd(),
                        mask: paper_mask(ev.readiness()),
                    };
                    // SAFETY: n < max <= array_max, and the caller promises that many
                    // writable elements; `write` never reads the (maybe uninitialised)
                    // old value.
                    unsafe { ev_array.add(n).write(descr) };
                    n += 1;
                }
                Ok(n as c_int)
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeval_rules() {
        let tv = |s, us| timeval {
            tv_sec: s,
            tv_usec: us,
        };
        assert_eq!(
            timeval_duration(&tv(1, 500_000)),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(timeval_duration(&tv(0, 0)), Ok(Duration::ZERO));
        assert!(timeval_duration(&tv(-1, 0)).is_err());
        assert!(timeval_duration(&tv(0, 1_000_000)).is_err());
        assert!(timeval_duration(&tv(0, -1)).is_err());
    }
}
