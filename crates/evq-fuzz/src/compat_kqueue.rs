//! The `compat_kqueue` target: arbitrary changelists applied to a real
//! [`Kqueue`] over descriptors the input holds, interleaved with zero-timeout
//! `kevent` calls, forgets and stimuli (writes, reads, shutdowns, connections,
//! files replaced behind a number).
//!
//! Asserted on every call, against kevent(2) and the personality's quirks essay:
//!
//! - no panic; a failing call fails only for a change with no room for its
//!   receipt, with one of the documented errnos;
//! - receipts are well formed: `EV_ERROR` alone in `flags`, the errno in `data`,
//!   `ident`/`filter`/`fflags`/`udata` those of the change, in changelist order;
//!   a change with an unknown filter is `EINVAL`, one whose ident is not an open
//!   descriptor `EBADF`, one that needs an existing knote and has none `ENOENT`;
//! - events name only held descriptors, `EVFILT_READ`/`EVFILT_WRITE`, a knote
//!   that exists and is enabled (tracked by a small model of the changes applied),
//!   with its `udata` and kept flags, at most once per call; an `EV_ONESHOT`
//!   knote is gone after its event.

use crate::fds::{never_open, Descriptors, NEGATIVE};
use crate::input::Input;
use evq::BackendKind;
use evq_compat::kqueue::*;
use std::collections::{HashMap, HashSet};
use std::os::fd::RawFd;
use std::time::Duration;

/// Flags a knote keeps (kevent(2): the action flags are not kept).
const KEPT: u16 = EV_ONESHOT | EV_CLEAR | EV_WAKEONE;
/// Errnos kevent(2) and the quirks essay name for a change (quirks i, j; `EINVAL`
/// also for a mode or wake-one the backend cannot deliver).
const DOCUMENTED: [i32; 5] = [
    libc::EBADF,
    libc::EINVAL,
    libc::ENOENT,
    libc::EPERM,
    libc::ENOMEM,
];
/// `udata` of eventlist slots the call did not write.
const UNWRITTEN: usize = usize::MAX;

/// What the model knows of one knote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Knote {
    Absent,
    Present {
        udata: usize,
        flags: u16,
        enabled: bool,
    },
    /// A change of unknown outcome touched it (a call failed before its receipt).
    Unknown,
}

/// Runs one input: the first byte picks the backend, the rest are operations.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    if let Some(kind) = input.u8().and_then(crate::backend_of) {
        run_on(kind, input.rest());
    }
}

/// Runs the operations in `ops` on a kqueue over `kind`.
pub fn run_on(kind: BackendKind, ops: &[u8]) {
    let mut fds = Descriptors::new();
    let mut kq = Kqueue::with_backend(kind).expect("kqueue on an available backend");
    let mut model: HashMap<(RawFd, i16), Knote> = HashMap::new();
    let mut input = Input::new(ops);
    let mut next_udata = 0usize;
    while let Some(op) = input.u8() {
        match op % 10 {
            0..=4 => {
                let Some(call) = read_call(&mut input, &fds, &mut next_udata) else {
                    break;
                };
                kevent(&mut kq, &fds, &mut model, call);
            }
            5 => {
                let Some(fd) = ident(&mut input, &fds) else {
                    break;
                };
                if let Ok(fd) = RawFd::try_from(fd) {
                    kq.forget_fd(fd);
                    model.retain(|&(f, _), _| f != fd);
                }
            }
            6 => {
                let Some(every) = input.pick(&[0, 1, 2, 3, u32::MAX]) else {
                    break;
                };
                kq.set_wakeone_rotation(every);
            }
            _ => {
                if fds.stimulate_from(&mut input).is_none() {
                    break;
                }
            }
        }
    }
}

/// An ident: a held descriptor, a number that cannot be open, a negative one as
/// `usize`, `usize::MAX`, or a held number with high bits set (which a truncating
/// conversion would mistake for it).
fn ident(input: &mut Input, fds: &Descriptors) -> Option<usize> {
    let open = fds.open();
    let mut choices: Vec<usize> = open.iter().map(|&fd| fd as usize).collect();
    choices.extend(never_open().iter().map(|&fd| fd as usize));
    choices.extend(NEGATIVE.iter().map(|&fd| fd as isize as usize));
    choices.push(usize::MAX);
    choices.push((1usize << 32) | open[0] as usize);
    input.pick(&choices)
}

struct Call {
    changes: Vec<Kevent>,
    room: usize,
    timeout: Option<Duration>,
}

fn read_call(input: &mut Input, fds: &Descriptors, next_udata: &mut usize) -> Option<Call> {
    let n = input.u8()? % 9;
    let mut changes = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let ident = ident(input, fds)?;
        let f = input.u8()?;
        let filter = match f % 4 {
            0 | 1 => EVFILT_READ,
            2 => EVFILT_WRITE,
            _ => input.i16()?,
        };
        let flags = input.u16()?;
        let fflags = input.u8()? as u32 * 0x0101_0101;
        // Unique, so each receipt names its change.
        *next_udata += 1;
        changes.push(Kevent {
            ident,
            filter,
            flags,
            fflags,
            data: 0x5a5a,
            udata: *next_udata,
        });
    }
    let room = input.u8()? as usize % 17;
    // A call with no eventlist returns without waiting, so `None` cannot hang it.
    let timeout = if room == 0 && input.bool()? {
        None
    } else {
        Some(Duration::ZERO)
    };
    Some(Call {
        changes,
        room,
        timeout,
    })
}

/// What a change must give, as far as the model can tell before the call.
fn predicted(c: &Kevent, fds: &Descriptors, model: &HashMap<(RawFd, i16), Knote>) -> Option<i32> {
    if c.filter != EVFILT_READ && c.filter != EVFILT_WRITE {
        return Some(libc::EINVAL);
    }
    let fd = match RawFd::try_from(c.ident) {
        Ok(fd) if fds.holds(fd) => fd,
        _ => return Some(libc::EBADF),
    };
    let absent = matches!(model.get(&(fd, c.filter)), None | Some(Knote::Absent));
    if c.flags & EV_ADD == 0 && absent {
        return Some(libc::ENOENT);
    }
    None
}

fn kevent(
    kq: &mut Kqueue,
    fds: &Descriptors,
    model: &mut HashMap<(RawFd, i16), Knote>,
    call: Call,
) {
    let sentinel = Kevent {
        udata: UNWRITTEN,
        ..Kevent::default()
    };
    let mut out = vec![sentinel; call.room];
    let result = kq.kevent(&call.changes, &mut out, call.timeout);
    let written = match &result {
        Ok(n) => *n,
        Err(_) => call.room,
    };
    assert!(
        written <= call.room,
        "{written} events for {} slots",
        call.room
    );
    assert!(
        out[written..].iter().all(|e| e.udata == UNWRITTEN),
        "wrote past the count"
    );
    let out = &out[..written];
    let receipts = out.iter().take_while(|e| e.flags & EV_ERROR != 0).count();
    assert!(
        receipts == 0 || receipts == written,
        "receipts and events mixed in one call: {out:?}"
    );
    if let Err(e) = &result {
        assert!(
            call.changes.len() > call.room,
            "kevent failed with room for every receipt: {e}"
        );
        let errno = e.raw_os_error().expect("kevent's error carries an errno");
        assert!(
            DOCUMENTED.contains(&errno),
            "undocumented errno {errno} ({e})"
        );
    }

    // Walk the changes with the receipts: each receipt is the next failing change.
    let mut r = 0;
    let mut unknown_from = call.changes.len();
    for (i, c) in call.changes.iter().enumerate() {
        let failed = if r < receipts && out[r].udata == c.udata {
            let receipt = out[r];
            r += 1;
            check_receipt(&receipt, c);
            Some(receipt.data as i32)
        } else if result.is_err() && r == receipts {
            // Past the last receipt of a failed call: some change here failed
            // without a receipt and the rest were not applied; which one the model
            // cannot tell, so it forgets what these touched.
            unknown_from = i;
            break;
        } else {
            None
        };
        let want = predicted(c, fds, model);
        match (want, failed) {
            (Some(w), Some(got)) => assert_eq!(got, w, "change {c:?}"),
            (Some(w), None) => panic!("change {c:?} should have failed with errno {w}"),
            (None, Some(got)) => {
                let present = matches!(
                    model.get(&(c.ident as RawFd, c.filter)),
                    Some(Knote::Present { .. })
                );
                assert!(
                    got != libc::EBADF
                        && (got != libc::ENOENT || (c.flags & EV_ADD == 0 && !present)),
                    "change {c:?} failed with errno {got}, which does not fit it"
                );
            }
            (None, None) => apply(c, model),
        }
    }
    assert_eq!(
        r, receipts,
        "receipts that match no change, or out of order: {out:?}"
    );
    for c in &call.changes[unknown_from..] {
        if let Ok(fd) = RawFd::try_from(c.ident) {
            if fds.holds(fd) && (c.filter == EVFILT_READ || c.filter == EVFILT_WRITE) {
                model.insert((fd, c.filter), Knote::Unknown);
            }
        }
    }
    if receipts > 0 || result.is_err() {
        return;
    }

    let mut seen = HashSet::new();
    for ev in out {
        check_event(ev, fds, model);
        assert!(
            seen.insert((ev.ident, ev.filter)),
            "one knote twice in one call: {out:?}"
        );
    }
}

fn check_receipt(receipt: &Kevent, c: &Kevent) {
    assert_eq!(receipt.flags, EV_ERROR, "receipt flags {receipt:?}");
    let errno = receipt.data as i32;
    assert!(
        receipt.data == errno as i64 && DOCUMENTED.contains(&errno),
        "receipt with undocumented errno {receipt:?}"
    );
    assert_eq!(
        (receipt.ident, receipt.filter, receipt.fflags, receipt.udata),
        (c.ident, c.filter, c.fflags, c.udata),
        "a receipt must carry its change"
    );
}

/// A change that succeeded, applied to the model as kevent(2) describes it.
fn apply(c: &Kevent, model: &mut HashMap<(RawFd, i16), Knote>) {
    let key = (c.ident as RawFd, c.filter);
    let k = model.entry(key).or_insert(Knote::Absent);
    if c.flags & EV_ADD != 0 {
        *k = Knote::Present {
            udata: c.udata,
            flags: c.flags & KEPT,
            enabled: c.flags & EV_DISABLE == 0,
        };
    } else if c.flags & EV_DELETE != 0 {
        *k = Knote::Absent;
    } else if let Knote::Present { enabled, .. } = k {
        if c.flags & EV_DISABLE != 0 {
            *enabled = false;
        } else if c.flags & EV_ENABLE != 0 {
            *enabled = true;
        }
    }
}

fn check_event(ev: &Kevent, fds: &Descriptors, model: &mut HashMap<(RawFd, i16), Knote>) {
    let fd = RawFd::try_from(ev.ident).expect("event ident is a descriptor");
    assert!(
        fds.holds(fd),
        "event for a descriptor nobody registered: {ev:?}"
    );
    assert!(
        ev.filter == EVFILT_READ || ev.filter == EVFILT_WRITE,
        "event filter {ev:?}"
    );
    assert!(ev.data >= 0, "negative data {ev:?}");
    assert_eq!(ev.fflags, 0, "fflags stay 0 (quirk f): {ev:?}");
    match model
        .get(&(fd, ev.filter))
        .copied()
        .unwrap_or(Knote::Absent)
    {
        Knote::Absent => panic!("event for a knote that does not exist: {ev:?}"),
        Knote::Present { enabled: false, .. } => panic!("event for a disabled knote: {ev:?}"),
        Knote::Present { udata, flags, .. } => {
            assert_eq!(ev.udata, udata, "udata of another change: {ev:?}");
            assert_eq!(ev.flags & !EV_EOF, flags, "flags are the knote's: {ev:?}");
            if flags & EV_ONESHOT != 0 {
                model.insert((fd, ev.filter), Knote::Absent);
            }
        }
        Knote::Unknown => {
            assert_eq!(ev.flags & !(EV_EOF | KEPT), 0, "flags {ev:?}");
            if ev.flags & EV_ONESHOT != 0 {
                model.insert((fd, ev.filter), Knote::Absent);
            }
        }
    }
}
