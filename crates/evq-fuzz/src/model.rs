//! The reference model of evq's semantics and the `model` target: random
//! operation sequences — declare / modify / revoke in each mode, with and without
//! wake-one, peer writes, drains, close and reuse through [`EventQueue::close`],
//! files replaced behind a number, zero-timeout waits — run on a real backend and
//! checked against the model after every step.
//!
//! The same [`run_ops`] serves the fuzz target (operations decoded from bytes,
//! [`Op::read`]) and the proptest in `tests/model.rs` (operations generated), so
//! there is one model.
//!
//! What the model says (SEEDS 000's semantics, evq's documentation):
//!
//! - `declare_interest` returns the current state (readable iff the peer wrote
//!   and nothing drained it; an idle socket is writable), or refuses with
//!   `Unsupported` what the backend cannot deliver — a mode its capabilities lack,
//!   wake-one where it has none, and exactly what [`BackendKind::check`] refuses —
//!   leaving the previous registration as it was;
//! - a wait reports, once each, exactly the registrations whose condition holds:
//!   level and (armed) oneshot while the state answers the interest, event mode
//!   when something happened since the last report (registration counts) and the
//!   state answers; the mask is the state at dequeue time; nothing for a revoked,
//!   closed or forgotten registration, and no unknown token ever.
//!
//! One allowance, the kernel's: a socket wakes its waiters on every arrival of
//! ordinary data with `EPOLLPRI` in the wake-up key (`sock_def_readable`), so an
//! event-mode registration with `EXCEPT` interest (and no `READ`) may hear of an
//! arrival it did not ask for. Such a report is allowed, not required; the fuzz
//! target found it, and evq cannot tell the two kinds of wake-up apart.

use crate::input::{Input, Seed};
use evq::{BackendKind, Event, EventQueue, Events, Interest, Mode, Options, Readiness};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Socket pairs one run works on.
pub const SLOTS: usize = 5;

/// One step of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `declare_interest` on our end of `slot`: registers, or modifies a
    /// registration; an empty interest revokes.
    Declare {
        /// Which socket pair.
        slot: usize,
        /// `Interest` bits (READ 1, WRITE 2, EXCEPT 4).
        interest: u8,
        /// 0 level, 1 event, 2 oneshot.
        mode: u8,
        /// `Options::wake_one`.
        wake_one: bool,
    },
    /// `declare_interest` with an empty interest.
    Revoke(usize),
    /// The peer writes one byte.
    PeerWrite(usize),
    /// Our end reads everything.
    Drain(usize),
    /// `EventQueue::close` on our end, then a fresh pair (which the kernel will
    /// often give the same numbers).
    Reopen(usize),
    /// A fresh socket `dup2`ed onto our end's number behind the queue's back;
    /// with `forget`, the program then tells the queue (`EventQueue::forget`).
    Replace {
        /// Which socket pair.
        slot: usize,
        /// Whether `forget` follows.
        forget: bool,
    },
    /// `get_next_event` with a zero timeout.
    Wait,
}

impl Op {
    /// Decodes one operation; `None` when the input runs dry.
    pub fn read(input: &mut Input) -> Option<Op> {
        let op = input.u8()?;
        let slot = input.index(SLOTS)?;
        Some(match op % 16 {
            0..=3 => {
                let b = input.u8()?;
                Op::Declare {
                    slot,
                    interest: b & 7,
                    mode: (b >> 3) % 3,
                    wake_one: b & 0x80 != 0,
                }
            }
            4 => Op::Revoke(slot),
            5..=7 => Op::PeerWrite(slot),
            8 | 9 => Op::Drain(slot),
            10 => Op::Reopen(slot),
            11 => Op::Replace {
                slot,
                forget: input.bool()?,
            },
            _ => Op::Wait,
        })
    }

    /// Encodes this operation so that [`Op::read`] gives it back.
    pub fn write(&self, seed: &mut Seed) {
        match *self {
            Op::Declare {
                slot,
                interest,
                mode,
                wake_one,
            } => {
                let b = (interest & 7) | (mode % 3) << 3 | (wake_one as u8) << 7;
                seed.u8(0).u8(slot as u8).u8(b);
            }
            Op::Revoke(slot) => {
                seed.u8(4).u8(slot as u8);
            }
            Op::PeerWrite(slot) => {
                seed.u8(5).u8(slot as u8);
            }
            Op::Drain(slot) => {
                seed.u8(8).u8(slot as u8);
            }
            Op::Reopen(slot) => {
                seed.u8(10).u8(slot as u8);
            }
            Op::Replace { slot, forget } => {
                seed.u8(11).u8(slot as u8).bool(forget);
            }
            Op::Wait => {
                seed.u8(12).u8(0);
            }
        }
    }
}

/// An input for the `model` target: the backend's index in [`BackendKind::ALL`],
/// then the operations.
pub fn encode(backend: usize, ops: &[Op]) -> Vec<u8> {
    let mut seed = Seed::new();
    seed.u8(backend as u8);
    for op in ops {
        op.write(&mut seed);
    }
    seed.finish()
}

/// Decodes the operations of an input (after its backend byte).
pub fn decode(ops: &[u8]) -> Vec<Op> {
    let mut input = Input::new(ops);
    std::iter::from_fn(|| Op::read(&mut input))
        .take(400)
        .collect()
}

/// Runs one input: the first byte picks the backend, the rest are operations.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    if let Some(kind) = input.u8().and_then(crate::backend_of) {
        run_ops(kind, &decode(input.rest()));
    }
}

#[derive(Clone, Copy, Debug)]
struct ModelReg {
    token: u64,
    interest: Interest,
    mode: Mode,
    armed: bool,
    /// Event mode: something happened since the last delivery (or registration).
    pending: bool,
    /// Event mode: something happened that the kernel may count for this interest
    /// though the model does not (see [`run_ops`]): a report is allowed, not due.
    maybe_pending: bool,
    /// The file behind the number was replaced and the queue not told: what the
    /// backend reports for it is its own business until the next declaration.
    zombie: bool,
}

struct Slot {
    ours: UnixStream,
    peer: UnixStream,
    readable: bool,
    reg: Option<ModelReg>,
}

fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().expect("socketpair");
    a.set_nonblocking(true).expect("non-blocking");
    b.set_nonblocking(true).expect("non-blocking");
    (a, b)
}

fn fresh_slot() -> Slot {
    let (ours, peer) = pair();
    Slot {
        ours,
        peer,
        readable: false,
        reg: None,
    }
}

/// Writes one byte to the peer; false when its buffer is full (a few hundred
/// writes without a drain fill a socket pair: each byte is an skb). A write
/// that did not happen brings no new data and no new edge, so the model must
/// not expect one (a fuzz input of 300 writes found the harness asserting it).
fn send_one(s: &UnixStream) -> bool {
    // SAFETY: writes one byte from a live buffer; MSG_DONTWAIT so a full buffer
    // answers EAGAIN instead of blocking; MSG_NOSIGNAL in case the peer is gone
    // (it never is here, but a signal would kill a fuzzing process).
    let n = unsafe {
        libc::send(
            s.as_raw_fd(),
            b"x".as_ptr().cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
        return false;
    }
    assert_eq!(n, 1, "peer write: {}", io::Error::last_os_error());
    true
}

fn drain(s: &UnixStream) {
    crate::fds::drain(s.as_raw_fd());
}

fn answers(reg: &ModelReg, readable: bool) -> bool {
    (reg.interest.contains(Interest::READ) && readable) || reg.interest.contains(Interest::WRITE)
}

/// Whether the backend's declared capabilities rule this registration out.
fn beyond_capabilities(kind: BackendKind, mode: Mode, wake_one: bool) -> bool {
    let caps = kind.capabilities();
    let mode_ok = match mode {
        Mode::Level => caps.level,
        Mode::Event => caps.event,
        Mode::Oneshot => caps.oneshot,
    };
    !mode_ok || (wake_one && !caps.wake_one)
}

/// Runs `ops` on a fresh queue of `kind`, asserting the model after every step.
///
/// # Panics
/// On the first disagreement, naming the step.
pub fn run_ops(kind: BackendKind, ops: &[Op]) {
    let mut q = EventQueue::with_backend(kind).expect("queue on an available backend");
    let mut slots: Vec<Slot> = (0..SLOTS).map(|_| fresh_slot()).collect();
    let mut events = Events::with_capacity(1024);
    let mut next_token = 1u64;
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Declare {
                slot,
                interest,
                mode,
                wake_one,
            } => {
                let interest = Interest::from_bits_truncate(interest as u32);
                let mode = [Mode::Level, Mode::Event, Mode::Oneshot][mode as usize % 3];
                let token = next_token;
                next_token += 1;
                let options = Options::new(token).mode(mode).wake_one(wake_one);
                let s = &mut slots[slot];
                let result = q.declare_interest(fd(&s.ours), interest, options);
                if interest.is_empty() {
                    revoked(result, s, step);
                    continue;
                }
                let refused = kind.check(interest, options).is_err();
                assert!(
                    refused || !beyond_capabilities(kind, mode, wake_one),
                    "step {step}: check() lets through {mode:?} wake_one={wake_one} on {kind}"
                );
                let state = match result {
                    Err(e) => {
                        assert!(
                            refused,
                            "step {step}: {interest:?} {mode:?} wake_one={wake_one}: {e}"
                        );
                        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "step {step}: {e}");
                        continue;
                    }
                    Ok(state) => state,
                };
                assert!(
                    !refused,
                    "step {step}: {kind} accepted what check() refuses"
                );
                assert_eq!(
                    state.contains(Readiness::READ),
                    s.readable,
                    "step {step}: state {state:?}"
                );
                assert!(
                    state.contains(Readiness::WRITE),
                    "step {step}: state {state:?}"
                );
                s.reg = Some(ModelReg {
                    token,
                    interest,
                    mode,
                    armed: true,
                    pending: true,
                    maybe_pending: false,
                    zombie: false,
                });
            }
            Op::Revoke(slot) => {
                let s = &mut slots[slot];
                let result = q.declare_interest(fd(&s.ours), Interest::empty(), Options::new(0));
                revoked(result, s, step);
            }
            Op::PeerWrite(slot) => {
                let s = &mut slots[slot];
                if !send_one(&s.peer) {
                    continue;
                }
                s.readable = true;
                if let Some(r) = &mut s.reg {
                    if r.interest.contains(Interest::READ) {
                        r.pending = true;
                    } else if r.interest.contains(Interest::EXCEPT) {
                        r.maybe_pending = true;
                    }
                }
            }
            Op::Drain(slot) => {
                let s = &mut slots[slot];
                drain(&s.ours);
                s.readable = false;
            }
            Op::Reopen(slot) => {
                let old = std::mem::replace(&mut slots[slot], fresh_slot());
                q.close(old.ours.into_raw_fd())
                    .unwrap_or_else(|e| panic!("step {step}: close: {e}"));
            }
            Op::Replace { slot, forget } => {
                let s = &mut slots[slot];
                let (new, peer) = pair();
                // SAFETY: dup2 onto our own end's number, which this run holds: the
                // old file closes, the number stays ours.
                let rc = unsafe { libc::dup2(new.as_raw_fd(), s.ours.as_raw_fd()) };
                assert!(rc >= 0, "dup2: {}", io::Error::last_os_error());
                s.peer = peer;
                s.readable = false;
                if forget {
                    q.forget(fd(&s.ours));
                    s.reg = None;
                } else if let Some(r) = &mut s.reg {
                    r.zombie = true;
                }
            }
            Op::Wait => {
                let n = q
                    .get_next_event(&mut events, Some(Duration::ZERO))
                    .unwrap_or_else(|e| panic!("step {step}: get_next_event: {e}"));
                assert_eq!(n, events.len());
                check_wait(events.as_slice(), &mut slots, step);
            }
        }
    }
}

fn fd(s: &UnixStream) -> RawFd {
    s.as_raw_fd()
}

/// A revocation's result: the current state (the fd is open), and no
/// registration afterwards. After a replacement behind the queue's back the
/// kernel may have forgotten the old file already; the revocation may say so.
fn revoked(result: io::Result<Readiness>, s: &mut Slot, step: usize) {
    match result {
        Ok(state) => assert_eq!(state.contains(Readiness::READ), s.readable, "step {step}"),
        Err(e) => assert!(
            s.reg.is_some_and(|r| r.zombie),
            "step {step}: revoke failed: {e}"
        ),
    }
    s.reg = None;
}

fn check_wait(got: &[Event], slots: &mut [Slot], step: usize) {
    let mut by_token: HashMap<u64, Event> = HashMap::new();
    for e in got {
        assert!(
            by_token.insert(e.token(), *e).is_none(),
            "step {step}: duplicate {e:?} in {got:?}"
        );
    }
    for (i, s) in slots.iter_mut().enumerate() {
        let Some(reg) = &mut s.reg else { continue };
        let reported = by_token.remove(&reg.token);
        if reg.zombie {
            if let Some(e) = reported {
                assert_eq!(e.fd(), fd(&s.ours), "step {step}: {e:?}");
            }
            continue;
        }
        let expected = match reg.mode {
            Mode::Level | Mode::Oneshot => reg.armed && answers(reg, s.readable),
            Mode::Event => reg.pending && answers(reg, s.readable),
        };
        let allowed =
            expected || (reg.mode == Mode::Event && reg.maybe_pending && answers(reg, s.readable));
        assert!(
            reported.is_some() == expected || (reported.is_some() && allowed),
            "step {step}: slot {i} {reg:?} readable={} got {got:?}",
            s.readable
        );
        if let Some(e) = reported {
            let r = e.readiness();
            assert_eq!(e.fd(), fd(&s.ours), "step {step}: {e:?}");
            let want_read = reg.interest.contains(Interest::READ) && s.readable;
            assert_eq!(
                r.contains(Readiness::READ),
                want_read,
                "step {step}: slot {i} mask {r:?}"
            );
            assert_eq!(
                r.contains(Readiness::WRITE),
                reg.interest.contains(Interest::WRITE),
                "step {step}: mask {r:?}"
            );
            assert!(
                !r.intersects(Readiness::EXCEPT | Readiness::HUP | Readiness::ERROR),
                "step {step}: mask {r:?} on an idle connected socket"
            );
            if reg.mode == Mode::Oneshot {
                reg.armed = false;
            }
            reg.pending = false;
            reg.maybe_pending = false;
        } else if reg.mode == Mode::Event {
            reg.pending = false;
            reg.maybe_pending = false;
        }
    }
    assert!(
        by_token.is_empty(),
        "step {step}: events for unknown or stale tokens: {by_token:?}"
    );
}
