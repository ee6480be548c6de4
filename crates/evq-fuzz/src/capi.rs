//! The `capi` target: evq-capi's C functions called from Rust with hostile
//! arguments — descriptors (held, never open, negative), raw interest and mode
//! bits, tokens, `array_max`/`max`, timeouts (negative, non-normalized), NULL
//! wherever the header allows it — on several handles, their notifiers, and the
//! paper API's per-thread queue.
//!
//! Each input runs on a thread of its own, so the paper API's queue (created on a
//! thread's first call, from `EVQ_BACKEND` and `EVQ_PAPER_MODE`) starts empty and
//! is freed at the end. Those two variables are read, never set, here: the replay
//! test runs the corpus under several values in child processes.
//!
//! Asserted, against `include/evq.h`:
//!
//! - every call returns success or one of the codes its comment lists, with the
//!   matching `errno`; `EVQ_EINTERNAL` (a caught panic) never;
//!   `evq_last_error()` is the code of the last failed handle call;
//! - NULL handles and arrays, `max <= 0`, unknown bits and modes, and bad
//!   timevals are `EINVAL` / -1 `EINVAL`; negative and never-open descriptors
//!   `EBADF`; a declaration wrong in both ways is `EINVAL` (the header's order);
//! - no call writes past `min(max, EVQ_BATCH_MAX)` elements; states and masks use
//!   only the header's bits;
//! - every event carries the token of a live registration of its descriptor on
//!   that handle (never one revoked, forgotten or closed through it), or is the
//!   notification `{EVQ_NOTIFY_TOKEN, -1, EVQ_NOTIFY}`; the paper API reports only
//!   descriptors the thread declared and has not revoked or closed.

use crate::fds::{never_open, Descriptors, NEGATIVE};
use crate::input::Input;
use evqc::*;
use libc::{c_int, c_uint, timeval};
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::ptr;

const NAMES: [&CStr; 7] = [
    c"epoll",
    c"uring",
    c"poll",
    c"rtsig-bulk",
    c"rtsig",
    c"select-improved",
    c"select",
];
const MAX_HANDLES: usize = 4;
const MAX_NOTIFIERS: usize = 4;
const STATE_BITS: c_uint = EVQ_READ | EVQ_WRITE | EVQ_EXCEPT | EVQ_HUP | EVQ_ERROR;
const PAPER_BITS: u32 = EVENT_READ | EVENT_WRITE | EVENT_EXCEPT | EVENT_HUP | EVENT_ERROR;
/// Elements past the promised ones, checked for writes that overrun.
const GUARD: usize = 4;

/// Runs one input on a thread of its own (a fresh paper-API queue).
///
/// The thread is joined explicitly: `thread::scope` alone returns once the
/// closure is done, while the thread may still be running its thread-local
/// destructors (the paper API's queue among them), so libFuzzer's leak check
/// could see glibc's 32-byte destructor-list node of a thread that was still
/// exiting, and report a leak (it did once, in a campaign). `join` is
/// `pthread_join`, which returns after the thread has fully exited.
pub fn run(data: &[u8]) {
    std::thread::scope(|s| {
        let worker = s.spawn(|| Harness::new().run(data));
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn set_errno(v: i32) {
    // SAFETY: the calling thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = v };
}

/// The errno a handle call's code must come with.
fn check_code(code: c_int, allowed: &[c_int], what: &str) {
    assert_ne!(
        code, EVQ_EINTERNAL,
        "{what}: EVQ_EINTERNAL (a panic inside libevq)"
    );
    assert!(
        allowed.contains(&code),
        "{what}: code {code} is not documented for it"
    );
    let e = errno();
    match code {
        EVQ_EBADF => assert_eq!(e, libc::EBADF, "{what}"),
        EVQ_EINVAL | EVQ_EUNKNOWN_BACKEND => assert_eq!(e, libc::EINVAL, "{what}"),
        EVQ_ENOMEM => assert_eq!(e, libc::ENOMEM, "{what}"),
        EVQ_EUNSUPPORTED => assert_eq!(e, libc::EOPNOTSUPP, "{what}"),
        EVQ_EBUSY => assert_eq!(e, libc::EBUSY, "{what}"),
        EVQ_EOS => assert!(
            e != 0 && ![libc::EBADF, libc::EINVAL, libc::ENOMEM].contains(&e),
            "{what}: EVQ_EOS with errno {e}"
        ),
        _ => {}
    }
}

struct Handle {
    q: *mut EvqHandle,
    id: u32,
    /// fd → the tokens an event for it may carry.
    allowed: HashMap<RawFd, HashSet<u64>>,
    /// A notification is on its way (so a wait returns at once).
    notified: bool,
}

struct Notifier {
    n: *mut EvqNotifier,
    handle_id: u32,
}

struct Harness {
    fds: Descriptors,
    handles: Vec<Handle>,
    notifiers: Vec<Notifier>,
    next_id: u32,
    /// The code `evq_last_error` must return, when known.
    last_error: Option<c_int>,
    /// Descriptors the paper API may report.
    paper: HashSet<RawFd>,
    /// Descriptors closed or replaced behind the paper API's epoll queue while
    /// another holder (an io_uring handle's poll request) may keep the old file
    /// open: epoll then goes on reporting it (evq.h). Allowed, not required.
    paper_maybe: HashSet<RawFd>,
    /// The paper API's queue is on epoll (`EVQ_BACKEND`, or the best backend).
    paper_on_epoll: bool,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            fds: Descriptors::new(),
            handles: Vec::new(),
            notifiers: Vec::new(),
            next_id: 0,
            last_error: None,
            paper: HashSet::new(),
            paper_maybe: HashSet::new(),
            paper_on_epoll: match std::env::var("EVQ_BACKEND") {
                Ok(name) if !name.is_empty() => name == "epoll",
                _ => crate::available_backends().first() == Some(&evq::BackendKind::Epoll),
            },
        }
    }

    /// A handle by selector: an open one, or (one past them) NULL.
    fn handle(&self, sel: u8) -> Option<usize> {
        let i = sel as usize % (self.handles.len() + 1);
        (i < self.handles.len()).then_some(i)
    }

    fn q(&self, h: Option<usize>) -> *mut EvqHandle {
        h.map_or(ptr::null_mut(), |i| self.handles[i].q)
    }

    fn fd(&self, sel: u8) -> RawFd {
        let mut c = self.fds.open();
        c.extend(never_open());
        c.extend(NEGATIVE);
        c[sel as usize % c.len()]
    }

    fn failed(&mut self, code: c_int) {
        self.last_error = Some(code);
    }

    fn run(mut self, data: &[u8]) {
        let mut input = Input::new(data);
        while let Some(op) = input.u8() {
            if self.step(op, &mut input).is_none() {
                break;
            }
            if let Some(code) = self.last_error {
                assert_eq!(evq_last_error(), code, "evq_last_error after op {op}");
            }
        }
        for h in std::mem::take(&mut self.handles) {
            // SAFETY: a live handle from evq_open, closed once.
            unsafe { evq_close(h.q) };
        }
        for n in std::mem::take(&mut self.notifiers) {
            // SAFETY: a live notifier from evq_notifier, freed once.
            unsafe { evq_notifier_free(n.n) };
        }
    }

    fn step(&mut self, op: u8, input: &mut Input) -> Option<()> {
        match op % 20 {
            0 => self.open(input)?,
            1 => {
                let h = self.handle(input.u8()?);
                // SAFETY: a live handle (then forgotten here) or NULL.
                unsafe { evq_close(self.q(h)) };
                if let Some(i) = h {
                    self.handles.swap_remove(i);
                }
            }
            2 | 3 => self.declare(input)?,
            4 | 5 => self.wait(input)?,
            6 => {
                let h = self.handle(input.u8()?);
                set_errno(0);
                // SAFETY: a live handle or NULL.
                let rc = unsafe { evq_notify(self.q(h)) };
                self.notified(h.map(|i| self.handles[i].id), rc, h.is_none());
            }
            7 => {
                let h = self.handle(input.u8()?);
                set_errno(0);
                // SAFETY: a live handle or NULL.
                let n = unsafe { evq_notifier(self.q(h)) };
                match h {
                    None => {
                        assert!(n.is_null(), "evq_notifier(NULL)");
                        assert_eq!(errno(), libc::EINVAL);
                        self.failed(EVQ_EINVAL);
                    }
                    Some(i) => {
                        assert!(!n.is_null(), "evq_notifier of a live handle");
                        let handle_id = self.handles[i].id;
                        if self.notifiers.len() < MAX_NOTIFIERS {
                            self.notifiers.push(Notifier { n, handle_id });
                        } else {
                            // SAFETY: just made, freed once.
                            unsafe { evq_notifier_free(n) };
                        }
                    }
                }
            }
            8 => {
                let i = input.u8()? as usize % (self.notifiers.len() + 1);
                let (n, id) = self
                    .notifiers
                    .get(i)
                    .map_or((ptr::null_mut(), None), |n| (n.n, Some(n.handle_id)));
                set_errno(0);
                // SAFETY: a live notifier or NULL.
                let rc = unsafe { evq_notifier_notify(n) };
                self.notified(id, rc, n.is_null());
            }
            9 => {
                let i = input.u8()? as usize % (self.notifiers.len() + 1);
                if i < self.notifiers.len() {
                    let n = self.notifiers.swap_remove(i);
                    // SAFETY: a live notifier, freed once.
                    unsafe { evq_notifier_free(n.n) };
                } else {
                    // SAFETY: NULL is ignored.
                    unsafe { evq_notifier_free(ptr::null_mut()) };
                }
            }
            10 => self.close_fd(input)?,
            11 => {
                let h = self.handle(input.u8()?);
                let fd = self.fd(input.u8()?);
                set_errno(0);
                // SAFETY: a live handle or NULL; forgetting makes no call on `fd`.
                let rc = unsafe { evq_forget_fd(self.q(h), fd) };
                match h {
                    Some(i) => {
                        assert_eq!(rc, EVQ_OK, "evq_forget_fd");
                        self.handles[i].allowed.remove(&fd);
                    }
                    None => {
                        check_code(rc, &[EVQ_EINVAL], "evq_forget_fd(NULL)");
                        self.failed(rc);
                    }
                }
            }
            12 => {
                let h = self.handle(input.u8()?);
                // SAFETY: a live handle or NULL.
                let name = unsafe { evq_backend_name(self.q(h)) };
                if h.is_none() {
                    assert!(name.is_null(), "evq_backend_name(NULL)");
                    // A failed pointer call sets the last error too.
                    self.failed(EVQ_EINVAL);
                } else {
                    assert!(!name.is_null());
                    // SAFETY: a static NUL-terminated string, per the header.
                    let name = unsafe { CStr::from_ptr(name) };
                    assert!(NAMES.contains(&name), "backend name {name:?}");
                }
            }
            13 => {
                let code = input.i32()?;
                let text = evq_strerror(code);
                assert!(!text.is_null());
                // SAFETY: a static NUL-terminated string, per the header.
                assert!(!unsafe { CStr::from_ptr(text) }.to_bytes().is_empty());
            }
            14 | 15 => self.paper_declare(input)?,
            16 => self.paper_wait(input)?,
            _ => {
                let (fd, what) = self.fds.stimulate_from(input)?;
                if what % 8 == 7 {
                    // The file behind `fd` was replaced: closing a descriptor
                    // removes the paper API's interest in it (evq.h).
                    self.paper_closed(fd);
                }
            }
        }
        Some(())
    }

    /// `fd`'s file was closed (or replaced) behind the paper API's back.
    fn paper_closed(&mut self, fd: RawFd) {
        if self.paper.remove(&fd) && self.paper_on_epoll {
            self.paper_maybe.insert(fd);
        }
    }

    fn notified(&mut self, id: Option<u32>, rc: c_int, null: bool) {
        if null {
            check_code(rc, &[EVQ_EINVAL], "notify(NULL)");
            self.failed(rc);
            return;
        }
        assert_eq!(rc, EVQ_OK, "notify of a live handle or notifier");
        if let Some(h) = self.handles.iter_mut().find(|h| Some(h.id) == id) {
            h.notified = true;
        }
    }

    fn open(&mut self, input: &mut Input) -> Option<()> {
        let choice = input.u8()?;
        let name: Option<CString> = match choice % 10 {
            0..=6 => Some(NAMES[choice as usize % 10].into()),
            7 => None,
            _ => {
                let len = input.u8()? as usize % 20;
                let bytes: Vec<u8> = input
                    .bytes(len)?
                    .iter()
                    .copied()
                    .filter(|&b| b != 0)
                    .collect();
                Some(CString::new(bytes).expect("NULs removed"))
            }
        };
        set_errno(0);
        let p = name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
        // SAFETY: NULL or a NUL-terminated string that outlives the call.
        let q = unsafe { evq_open(p) };
        if q.is_null() {
            let code = evq_last_error();
            check_code(
                code,
                &[EVQ_EUNKNOWN_BACKEND, EVQ_EOS, EVQ_ENOMEM, EVQ_EUNSUPPORTED],
                "evq_open",
            );
            if code == EVQ_EUNKNOWN_BACKEND {
                let known = name.as_ref().is_some_and(|n| NAMES.contains(&n.as_c_str()));
                assert!(!known, "evq_open({name:?}): a known name called unknown");
            }
            self.failed(code);
            return Some(());
        }
        if let Some(n) = &name {
            assert!(
                NAMES.contains(&n.as_c_str()),
                "evq_open({n:?}) opened something"
            );
            // SAFETY: a live handle.
            let got = unsafe { CStr::from_ptr(evq_backend_name(q)) };
            assert_eq!(got, n.as_c_str(), "evq_open gives the backend asked for");
        }
        if self.handles.len() >= MAX_HANDLES {
            // SAFETY: just opened, closed once.
            unsafe { evq_close(q) };
            return Some(());
        }
        self.next_id += 1;
        self.handles.push(Handle {
            q,
            id: self.next_id,
            allowed: HashMap::new(),
            notified: false,
        });
        Some(())
    }

    fn declare(&mut self, input: &mut Input) -> Option<()> {
        let h = self.handle(input.u8()?);
        let fd = self.fd(input.u8()?);
        let interest = match input.u8()? {
            b @ 0..=239 => (b % 8) as c_uint,
            _ => input.u32()?,
        };
        let mode = match input.u8()? {
            b @ 0..=239 => [0, 1, 2, 0x100, 0x101, 0x102][b as usize % 6],
            _ => input.u32()?,
        };
        let token = match input.u8()? {
            b @ 0..=239 => b as u64,
            _ => input.u64()?,
        };
        let with_state = input.bool()?;
        let mut state: c_uint = 0xdead_beef;
        let state_ptr = if with_state {
            &mut state as *mut c_uint
        } else {
            ptr::null_mut()
        };
        set_errno(0);
        // SAFETY: a live handle or NULL; `state_ptr` is NULL or a live unsigned.
        let rc = unsafe { evq_declare(self.q(h), fd, interest, mode, token, state_ptr) };
        let what = format!("evq_declare(fd {fd}, interest {interest:#x}, mode {mode:#x})");
        let Some(i) = h else {
            check_code(rc, &[EVQ_EINVAL], &what);
            self.failed(rc);
            return Some(());
        };
        if rc != EVQ_OK {
            check_code(
                rc,
                &[EVQ_EBADF, EVQ_EINVAL, EVQ_EUNSUPPORTED, EVQ_EOS, EVQ_ENOMEM],
                &what,
            );
            // The header's order: bad bits or mode first, then the descriptor.
            let bad_bits = interest & !7 != 0 || !matches!(mode & !0x100, 0..=2);
            if bad_bits {
                assert_eq!(rc, EVQ_EINVAL, "{what}");
            } else if !self.fds.holds(fd) {
                assert_eq!(rc, EVQ_EBADF, "{what}");
            }
            assert_eq!(state, 0xdead_beef, "{what}: state written on failure");
            self.failed(rc);
            return Some(());
        }
        assert!(interest & !7 == 0 && self.fds.holds(fd), "{what} succeeded");
        if with_state {
            assert_eq!(state & !STATE_BITS, 0, "{what}: state {state:#x}");
        }
        let allowed = self.handles[i].allowed.entry(fd).or_default();
        allowed.clear();
        if interest != 0 {
            allowed.insert(token);
        }
        Some(())
    }

    fn wait(&mut self, input: &mut Input) -> Option<()> {
        let h = self.handle(input.u8()?);
        let max = match input.u8()? {
            b @ 0..=249 => b as c_int % 20 - 2,
            _ => input.i32()?,
        };
        let null_events = input.u8()? == 0;
        let raw_timeout = input.i32()?;
        // A wait that could block is only made when it cannot: a notification is
        // pending, or the arguments are refused first.
        let refused = h.is_none() || max <= 0 || null_events;
        let timeout = if refused || h.is_some_and(|i| self.handles[i].notified) {
            raw_timeout
        } else {
            0
        };
        let room = if max > 0 {
            (max as usize).min(EVQ_BATCH_MAX as usize)
        } else {
            0
        };
        let sentinel = evq_event_t {
            token: 0x5e57_1e15,
            fd: -77,
            mask: 0xffff_ffff,
        };
        let mut buf = vec![sentinel; room + GUARD];
        let p = if null_events {
            ptr::null_mut()
        } else {
            buf.as_mut_ptr()
        };
        set_errno(0);
        // SAFETY: a live handle or NULL; `p` is NULL or has at least
        // min(max, EVQ_BATCH_MAX) elements, all the header lets the call write.
        let rc = unsafe { evq_wait(self.q(h), p, max, timeout) };
        assert!(
            buf[room..].iter().all(|e| *e == sentinel),
            "evq_wait wrote past {room}"
        );
        if refused {
            check_code(rc, &[EVQ_EINVAL], "evq_wait with NULL or max <= 0");
            self.failed(rc);
            return Some(());
        }
        let i = h.expect("not refused");
        assert!(rc >= 0, "evq_wait failed with {rc} (errno {})", errno());
        let n = rc as usize;
        assert!(n <= room, "{n} events for max {max}");
        let handle = &mut self.handles[i];
        let mut seen = HashSet::new();
        for e in &buf[..n] {
            if e.fd == -1 {
                assert_eq!(
                    (e.token, e.mask),
                    (EVQ_NOTIFY_TOKEN, EVQ_NOTIFY),
                    "notification {e:?}"
                );
                handle.notified = false;
            } else {
                assert_eq!(e.mask & !STATE_BITS, 0, "mask of {e:?}");
                assert!(
                    handle
                        .allowed
                        .get(&e.fd)
                        .is_some_and(|t| t.contains(&e.token)),
                    "event {e:?} is not of a live registration: {:?}",
                    handle.allowed
                );
            }
            assert!(seen.insert(e.fd), "fd {} twice in one wait", e.fd);
        }
        Some(())
    }

    fn close_fd(&mut self, input: &mut Input) -> Option<()> {
        let h = self.handle(input.u8()?);
        let fd = self.fd(input.u8()?);
        set_errno(0);
        // SAFETY: a live handle or NULL; `fd` is held (and given up below), never
        // open, or negative.
        let rc = unsafe { evq_close_fd(self.q(h), fd) };
        let Some(i) = h else {
            check_code(rc, &[EVQ_EINVAL], "evq_close_fd(NULL)");
            self.failed(rc);
            return Some(());
        };
        if self.fds.holds(fd) {
            assert_eq!(rc, EVQ_OK, "evq_close_fd of an open descriptor");
            self.fds.closed_by_callee(fd);
            self.handles[i].allowed.remove(&fd);
            self.paper_closed(fd);
        } else {
            check_code(rc, &[EVQ_EBADF], "evq_close_fd of a closed descriptor");
            self.failed(rc);
        }
        Some(())
    }

    fn paper_declare(&mut self, input: &mut Input) -> Option<()> {
        let fd = self.fd(input.u8()?);
        let mask = match input.u8()? {
            b @ 0..=239 => (b % 8) as c_int,
            _ => input.i32()?,
        };
        let with_state = input.bool()?;
        let mut state: c_int = -12345;
        let state_ptr = if with_state {
            &mut state as *mut c_int
        } else {
            ptr::null_mut()
        };
        set_errno(0);
        // SAFETY: `state_ptr` is NULL or a live int.
        let rc = unsafe { declare_interest(fd, mask, state_ptr) };
        let what = format!("declare_interest({fd}, {mask:#x})");
        if rc == 0 {
            assert!(mask & !7 == 0 && self.fds.holds(fd), "{what} succeeded");
            if with_state {
                assert_eq!(state as u32 & !PAPER_BITS, 0, "{what}: state {state:#x}");
            }
            self.paper_maybe.remove(&fd);
            if mask == 0 {
                self.paper.remove(&fd);
            } else {
                self.paper.insert(fd);
            }
            return Some(());
        }
        assert_eq!(rc, -1, "{what}");
        assert_eq!(state, -12345, "{what}: state written on failure");
        let e = errno();
        assert!(
            [
                libc::EBADF,
                libc::EINVAL,
                libc::EOPNOTSUPP,
                libc::EPERM,
                libc::ENOMEM
            ]
            .contains(&e),
            "{what}: undocumented errno {e}"
        );
        // The header's order: bad bits first, then the descriptor (the
        // environment is valid here, and no signal handler calls in).
        if !(0..8).contains(&mask) {
            assert_eq!(e, libc::EINVAL, "{what}");
        } else if !self.fds.holds(fd) {
            assert_eq!(e, libc::EBADF, "{what}");
        }
        // The paper API's failures set the last error too, with a code this
        // harness does not see.
        self.last_error = None;
        Some(())
    }

    fn paper_wait(&mut self, input: &mut Input) -> Option<()> {
        let array_max = match input.u8()? {
            b @ 0..=249 => b as c_int % 20 - 2,
            _ => input.i32()?,
        };
        let null_array = input.u8()? == 0;
        let (sec, usec) = match input.u8()? % 4 {
            0 => (0, 0),
            1 | 2 => (
                input.pick(&[0, 1, -1, i64::MIN, i64::MAX])?,
                input.pick(&[0, 1, -1, 999_999, 1_000_000, i64::MIN, i64::MAX])?,
            ),
            _ => (input.i64()?, input.i64()?),
        };
        let valid = sec >= 0 && (0..1_000_000).contains(&usec);
        let refused = array_max <= 0 || null_array || !valid;
        // A valid non-zero timeout could block: only zero is passed then.
        let mut tv = if valid {
            timeval {
                tv_sec: 0,
                tv_usec: 0,
            }
        } else {
            timeval {
                tv_sec: sec as libc::time_t,
                tv_usec: usec as libc::suseconds_t,
            }
        };
        let room = if array_max > 0 {
            (array_max as usize).min(EVQ_BATCH_MAX as usize)
        } else {
            0
        };
        let sentinel = event_descr_t {
            fd: -77,
            mask: 0xffff,
        };
        let mut buf = vec![sentinel; room + GUARD];
        let p = if null_array {
            ptr::null_mut()
        } else {
            buf.as_mut_ptr()
        };
        let before = (tv.tv_sec, tv.tv_usec);
        set_errno(0);
        // SAFETY: `p` is NULL or has min(array_max, EVQ_BATCH_MAX) elements, all
        // the header lets the call write; `tv` is a live timeval.
        let rc = unsafe { get_next_event(array_max, p, &mut tv) };
        assert_eq!(
            (tv.tv_sec, tv.tv_usec),
            before,
            "*timeout is never modified"
        );
        assert!(
            buf[room..].iter().all(|e| *e == sentinel),
            "get_next_event wrote past {room}"
        );
        if refused {
            assert_eq!(
                (rc, errno()),
                (-1, libc::EINVAL),
                "get_next_event({array_max}, {sec}s {usec}us)"
            );
            self.last_error = None;
            return Some(());
        }
        if rc < 0 {
            let e = errno();
            // EINVAL/EOPNOTSUPP: the queue could not be made (a bad EVQ_BACKEND
            // or EVQ_PAPER_MODE in the environment).
            assert!(
                [libc::EINVAL, libc::ENOMEM].contains(&e),
                "get_next_event: errno {e}"
            );
            self.last_error = None;
            return Some(());
        }
        let n = rc as usize;
        assert!(n <= room, "{n} events for array_max {array_max}");
        let mut seen = HashSet::new();
        for e in &buf[..n] {
            assert!(
                self.paper.contains(&e.fd) || self.paper_maybe.contains(&e.fd),
                "paper event for an undeclared or closed fd: {e:?}"
            );
            assert_eq!(e.mask & !PAPER_BITS, 0, "paper mask {e:?}");
            assert!(seen.insert(e.fd), "fd {} twice in one get_next_event", e.fd);
        }
        Some(())
    }
}
