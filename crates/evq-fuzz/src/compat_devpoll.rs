//! The `compat_devpoll` target: arbitrary bytes written as `pollfd` records to a
//! real [`DevPoll`] (descriptor fields mapped onto held descriptors, numbers that
//! cannot be open, or left negative), with `DP_POLL` and `DP_ISPOLLED` of
//! arbitrary arguments and stimuli between them.
//!
//! Asserted, against poll(7d) and the personality's quirks essay:
//!
//! - no panic; `write` returns the bytes given, or a documented error;
//! - the set is a model's: records OR into an entry (quirk a), `POLLREMOVE`
//!   removes (quirk b), negative descriptors are ignored (quirk c) — checked after
//!   every operation through `DP_ISPOLLED` of every candidate and `len()`;
//! - `DP_POLL` returns a dense, duplicate-free list of entries in the set, each
//!   with its `events`, a non-zero `revents` within `events | POLLHUP | POLLERR |
//!   POLLNVAL`; `POLLNVAL` alone, and always, for a number that is not open
//!   (quirk d), never for a held one; an empty array returns 0.

use crate::fds::{never_open, Descriptors, NEGATIVE};
use crate::input::Input;
use evq::BackendKind;
use evq_compat::devpoll::{DevPoll, POLLREMOVE};
use std::collections::{BTreeMap, HashSet};
use std::os::fd::RawFd;

/// Errors `write` may give (quirks d and e take `EBADF` and `EPERM` off the table).
const WRITE_ERRORS: [i32; 2] = [libc::ENOMEM, libc::ENOSPC];
/// Bits `DP_POLL` may report beyond those asked for (poll(2): always reported).
const ALWAYS: i16 = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
/// Bits that select interest (quirk h); an entry with none of them is not watched.
const INTEREST: i16 = libc::POLLIN
    | libc::POLLRDNORM
    | libc::POLLOUT
    | libc::POLLWRNORM
    | libc::POLLPRI
    | libc::POLLRDBAND;

/// Runs one input: the first byte picks the backend, the rest are operations.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    if let Some(kind) = input.u8().and_then(crate::backend_of) {
        run_on(kind, input.rest());
    }
}

/// The descriptors an operation may name: held ones, then never-open ones.
fn candidates(fds: &Descriptors) -> Vec<RawFd> {
    let mut c = fds.open();
    c.extend(never_open());
    c
}

/// A descriptor field as written: negative stays negative (quirk c); anything
/// else becomes a candidate.
fn map_fd(raw: i32, fds: &Descriptors) -> RawFd {
    if raw < 0 {
        return raw;
    }
    let c = candidates(fds);
    c[raw as usize % c.len()]
}

/// Runs the operations in `ops` on a /dev/poll set over `kind`.
pub fn run_on(kind: BackendKind, ops: &[u8]) {
    let mut fds = Descriptors::new();
    let mut dp = DevPoll::with_backend(kind).expect("/dev/poll on an available backend");
    let mut model: BTreeMap<RawFd, i16> = BTreeMap::new();
    let mut input = Input::new(ops);
    while let Some(op) = input.u8() {
        match op % 10 {
            0..=3 => {
                let n = input.u8().unwrap_or(0) % 9;
                let mut records = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let (Some(fd), Some(events), Some(revents)) =
                        (input.i32(), input.i16(), input.i16())
                    else {
                        break;
                    };
                    records.push(libc::pollfd {
                        fd: map_fd(fd, &fds),
                        events,
                        revents,
                    });
                }
                write(&mut dp, &fds, &mut model, &records);
            }
            4 | 5 => {
                let (Some(len), Some(timeout)) = (input.u8(), input.i32()) else {
                    break;
                };
                dp_poll(&mut dp, &fds, &model, len, timeout);
            }
            6 => {
                let Some(fd) = input.i32() else { break };
                let fd = map_fd(fd, &fds);
                let want = model.get(&fd).map(|&events| (fd, events, 0));
                let got = dp.dp_ispolled(fd).map(|p| (p.fd, p.events, p.revents));
                assert_eq!(got, want, "DP_ISPOLLED({fd})");
            }
            _ => {
                if fds.stimulate_from(&mut input).is_none() {
                    break;
                }
            }
        }
    }
}

fn write(
    dp: &mut DevPoll,
    fds: &Descriptors,
    model: &mut BTreeMap<RawFd, i16>,
    records: &[libc::pollfd],
) {
    match dp.write(records) {
        Ok(n) => {
            assert_eq!(
                n,
                std::mem::size_of_val(records),
                "write returns the bytes given"
            );
            for p in records {
                if p.fd < 0 {
                    continue;
                }
                if p.events & POLLREMOVE != 0 {
                    model.remove(&p.fd);
                } else {
                    *model.entry(p.fd).or_insert(0) |= p.events;
                }
            }
        }
        Err(e) => {
            let errno = e.raw_os_error();
            assert!(
                errno.is_some_and(|n| WRITE_ERRORS.contains(&n)),
                "write of {records:?} failed with an undocumented error: {e}"
            );
            // A partial write: the entries before the refused one stay applied.
            // Which one was refused the error does not say, so the model is taken
            // from DP_ISPOLLED for the descriptors written.
            for p in records.iter().filter(|p| p.fd >= 0) {
                match dp.dp_ispolled(p.fd) {
                    Some(entry) => model.insert(p.fd, entry.events),
                    None => model.remove(&p.fd),
                };
            }
        }
    }
    check_set(dp, fds, model);
}

/// The whole set agrees with the model: every candidate's `DP_ISPOLLED`, and
/// `len()`.
fn check_set(dp: &DevPoll, fds: &Descriptors, model: &BTreeMap<RawFd, i16>) {
    for fd in candidates(fds).into_iter().chain(NEGATIVE) {
        let want = model.get(&fd).map(|&events| (fd, events, 0));
        let got = dp.dp_ispolled(fd).map(|p| (p.fd, p.events, p.revents));
        assert_eq!(got, want, "DP_ISPOLLED({fd}) after write");
    }
    assert_eq!(dp.len(), model.len(), "entries in the set");
    assert_eq!(dp.is_empty(), model.is_empty());
}

fn dp_poll(
    dp: &mut DevPoll,
    fds: &Descriptors,
    model: &BTreeMap<RawFd, i16>,
    len: u8,
    timeout: i32,
) {
    // Mostly small arrays; 255 asks for more than any set here holds.
    let len = if len == 255 { 5000 } else { len as usize % 17 };
    let invalid: Vec<RawFd> = model
        .iter()
        .filter(|(fd, events)| !fds.holds(**fd) && **events & INTEREST != 0)
        .map(|(fd, _)| *fd)
        .collect();
    // A wait that may block is only made when something is certainly ready: an
    // entry for a number that is not open is reported at once (quirk d).
    let timeout = if invalid.is_empty() { 0 } else { timeout };
    let sentinel = libc::pollfd {
        fd: i32::MIN,
        events: 0,
        revents: 0,
    };
    let mut out = vec![sentinel; len];
    let n = dp
        .ioctl_dp_poll(&mut out, timeout)
        .expect("DP_POLL with a zero or moot timeout");
    assert!(n <= len, "{n} entries for an array of {len}");
    assert!(
        out[n..].iter().all(|p| p.fd == i32::MIN),
        "DP_POLL wrote past its count"
    );
    // With room for the whole set, every not-open entry is in (quirk d); with
    // less, other always-ready entries (regular files) may take the room.
    if len >= model.len() {
        for fd in &invalid {
            assert!(
                out[..n].iter().any(|p| p.fd == *fd),
                "not-open entry {fd} missing from DP_POLL: {:?}",
                &out[..n]
            );
        }
    }
    let mut seen = HashSet::new();
    for p in &out[..n] {
        assert!(
            seen.insert(p.fd),
            "fd {} twice in one DP_POLL: {:?}",
            p.fd,
            &out[..n]
        );
        let Some(&events) = model.get(&p.fd) else {
            panic!("DP_POLL reported {p:?}, which is not in the set");
        };
        assert_eq!(p.events, events, "events as registered");
        assert_ne!(p.revents, 0, "a reported entry is ready: {p:?}");
        assert_eq!(
            p.revents & !(events | ALWAYS),
            0,
            "revents beyond events: {p:?}"
        );
        if fds.holds(p.fd) {
            assert_eq!(
                p.revents & libc::POLLNVAL,
                0,
                "POLLNVAL for an open descriptor: {p:?}"
            );
        } else {
            assert_eq!(p.revents, libc::POLLNVAL, "not open: POLLNVAL alone: {p:?}");
        }
    }
}
