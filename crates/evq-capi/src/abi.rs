//! Everything `include/evq.h` declares besides functions: the numeric constants and
//! the `#[repr(C)]` structs. `tests/header.rs` compiles C against the header and
//! compares every value and size with these, so the two cannot drift apart.

use evq::{Interest, Readiness};

/// The paper's `EVENT_READ`: readable (data, a pending connection, end-of-file).
pub const EVENT_READ: u32 = Interest::READ.bits();
/// The paper's `EVENT_WRITE`: writable.
pub const EVENT_WRITE: u32 = Interest::WRITE.bits();
/// The paper's `EVENT_EXCEPT`: exceptional condition (`POLLPRI`, TCP urgent data).
pub const EVENT_EXCEPT: u32 = Interest::EXCEPT.bits();
/// evq extension, reported only: the peer hung up (also sets `EVENT_READ`).
pub const EVENT_HUP: u32 = Readiness::HUP.bits();
/// evq extension, reported only: an error is pending (also sets `EVENT_READ` and
/// `EVENT_WRITE`).
pub const EVENT_ERROR: u32 = Readiness::ERROR.bits();

/// Handle API interest/state bit: readable.
pub const EVQ_READ: u32 = Readiness::READ.bits();
/// Handle API interest/state bit: writable.
pub const EVQ_WRITE: u32 = Readiness::WRITE.bits();
/// Handle API interest/state bit: exceptional condition.
pub const EVQ_EXCEPT: u32 = Readiness::EXCEPT.bits();
/// Handle API state bit: hang-up.
pub const EVQ_HUP: u32 = Readiness::HUP.bits();
/// Handle API state bit: error pending.
pub const EVQ_ERROR: u32 = Readiness::ERROR.bits();
/// Handle API state bit: the event comes from `evq_notify`.
pub const EVQ_NOTIFY: u32 = Readiness::NOTIFY.bits();
/// Token of the event `evq_notify` produces.
pub const EVQ_NOTIFY_TOKEN: u64 = evq::NOTIFY_TOKEN;

/// `evq_declare` mode: level-triggered.
pub const EVQ_MODE_LEVEL: u32 = 0;
/// `evq_declare` mode: the paper's event semantics (epoll only).
pub const EVQ_MODE_EVENT: u32 = 1;
/// `evq_declare` mode: one event, then disarmed until declared again.
pub const EVQ_MODE_ONESHOT: u32 = 2;
/// `evq_declare` mode flag: wake only one of several queues (epoll only).
pub const EVQ_WAKE_ONE: u32 = 0x100;

/// Most events one `get_next_event` / `evq_wait` call returns, whatever the array
/// size (a larger `array_max` is accepted and simply not filled beyond this).
pub const EVQ_BATCH_MAX: i32 = 4096;

/// Success.
pub const EVQ_OK: i32 = 0;
/// Bad file descriptor (negative, closed, or not registered where it must be).
pub const EVQ_EBADF: i32 = -1;
/// Invalid argument (null pointer, unknown bits, `max <= 0`, bad timeout).
pub const EVQ_EINVAL: i32 = -2;
/// Out of memory.
pub const EVQ_ENOMEM: i32 = -3;
/// The backend cannot do what was asked (e.g. event mode on `poll`).
pub const EVQ_EUNSUPPORTED: i32 = -4;
/// `evq_open` was given a backend name that does not exist.
pub const EVQ_EUNKNOWN_BACKEND: i32 = -5;
/// Another operating-system error; `errno` tells which.
pub const EVQ_EOS: i32 = -6;
/// An internal error in libevq (a caught Rust panic); please report it.
pub const EVQ_EINTERNAL: i32 = -7;
/// The calling thread's default queue is unusable here: re-entered from a signal
/// handler during another call, or used while the thread is exiting.
pub const EVQ_EBUSY: i32 = -8;

/// One event as the paper's `get_next_event` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct event_descr_t {
    /// The descriptor.
    pub fd: libc::c_int,
    /// `EVENT_*` bits: the descriptor's state when the event was dequeued.
    pub mask: libc::c_uint,
}

/// One event as `evq_wait` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct evq_event_t {
    /// The token given to `evq_declare` (`EVQ_NOTIFY_TOKEN` for a notification).
    pub token: u64,
    /// The descriptor, or -1 for a notification.
    pub fd: libc::c_int,
    /// `EVQ_*` state bits.
    pub mask: libc::c_uint,
}

/// The paper's mask for a delivered state: the raw bits, plus `EVENT_READ` when a
/// read would not block and tells what happened (hang-up, error), and
/// `EVENT_WRITE` when a write would fail at once (error) — so that a Figure 3 loop,
/// which only tests `EVENT_READ` / `EVENT_WRITE`, reads the end-of-file or error and
/// closes instead of never hearing of it.
pub fn paper_mask(r: Readiness) -> u32 {
    let mut mask = r.bits() & (EVENT_READ | EVENT_WRITE | EVENT_EXCEPT | EVENT_HUP | EVENT_ERROR);
    if r.intersects(Readiness::HUP | Readiness::ERROR) {
        mask |= EVENT_READ;
    }
    if r.contains(Readiness::ERROR) {
        mask |= EVENT_WRITE;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_values() {
        assert_eq!((EVENT_READ, EVENT_WRITE, EVENT_EXCEPT), (1, 2, 4));
        assert_eq!(std::mem::size_of::<event_descr_t>(), 8);
        assert_eq!(std::mem::size_of::<evq_event_t>(), 16);
    }

    #[test]
    fn hangup_and_error_read_as_readable() {
        assert_eq!(paper_mask(Readiness::HUP), EVENT_HUP | EVENT_READ);
        assert_eq!(
            paper_mask(Readiness::ERROR),
            EVENT_ERROR | EVENT_READ | EVENT_WRITE
        );
        assert_eq!(paper_mask(Readiness::WRITE), EVENT_WRITE);
    }
}
