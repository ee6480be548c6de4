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
//!
//! One relaxation, the backend's own, read from its capabilities and nowhere
//! else: where [`Capabilities::current_state_masks`] is false (`kmod-ring`, whose
//! masks are the wake-up's: the README's "What the library guarantees"), an
//! event or oneshot registration may be reported with bits that an arrival since
//! its last report (or the state its declaration found) carried, though a read
//! took that arrival before the wait: `READ` with nothing to read, and `EXCEPT`
//! for the `EPOLLPRI` above. Such a report is allowed, not required, and it still
//! counts as the registration's one report (a oneshot is spent by it). Nothing
//! else loosens: a report the model requires is still required (never miss
//! one), a mask still holds every bit the state answers, nothing is reported
//! twice, and level registrations stay exact, because the backend re-polls them
//! before every take (`kmod.rs` quirk j; kernel/README.md, "The ring"). Where
//! masks are current the check is exactly what it was before.
//!
//! [`Capabilities::current_state_masks`]: evq::Capabilities::current_state_masks

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
    /// What a wake-up's mask may carry for this registration since its last
    /// report (or wait): `READ` for the state its declaration found and for every
    /// arrival with `READ` interest, `EXCEPT` for every arrival with `EXCEPT`
    /// interest (the key's `EPOLLPRI`). Consulted only where masks are not the
    /// current state ([`Judge::stale_masks`]).
    heard: Readiness,
}

/// How strictly a backend's reports are judged, from its declared capabilities.
#[derive(Clone, Copy, Debug)]
struct Judge {
    /// `!Capabilities::current_state_masks`: an event or oneshot report may carry
    /// what [`ModelReg::heard`] says (see the module's documentation).
    stale_masks: bool,
}

impl Judge {
    fn of(kind: BackendKind) -> Judge {
        Judge {
            stale_masks: !kind.capabilities().current_state_masks,
        }
    }

    /// The bits beyond the current state that a report of `reg` may carry.
    fn stale(&self, reg: &ModelReg) -> Readiness {
        if self.stale_masks && reg.mode != Mode::Level {
            reg.heard
        } else {
            Readiness::empty()
        }
    }

    /// Checks one registration at a wait: `reported` is its event's mask, if
    /// one came. `Err` says what is wrong.
    fn check(
        &self,
        reg: &ModelReg,
        readable: bool,
        reported: Option<Readiness>,
    ) -> Result<(), String> {
        let stale = self.stale(reg);
        let expected = match reg.mode {
            Mode::Level | Mode::Oneshot => reg.armed && answers(reg, readable),
            Mode::Event => reg.pending && answers(reg, readable),
        };
        let allowed = expected
            || (reg.mode == Mode::Event && reg.maybe_pending && answers(reg, readable))
            || (reg.armed && !stale.is_empty());
        let Some(r) = reported else {
            return if expected {
                Err("not reported".into())
            } else {
                Ok(())
            };
        };
        if !allowed {
            return Err(format!("reported {r:?}, not due"));
        }
        let want_read = reg.interest.contains(Interest::READ) && readable;
        if want_read && !r.contains(Readiness::READ) {
            return Err(format!("mask {r:?} lacks READ"));
        }
        if r.contains(Readiness::READ) && !want_read && !stale.contains(Readiness::READ) {
            return Err(format!("mask {r:?}: READ, not readable"));
        }
        if r.contains(Readiness::WRITE) != reg.interest.contains(Interest::WRITE) {
            return Err(format!("mask {r:?}: WRITE against interest"));
        }
        if r.contains(Readiness::EXCEPT) && !stale.contains(Readiness::EXCEPT) {
            return Err(format!("mask {r:?}: EXCEPT on an idle connected socket"));
        }
        if r.intersects(Readiness::HUP | Readiness::ERROR) {
            return Err(format!("mask {r:?} on an idle connected socket"));
        }
        Ok(())
    }
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
    let judge = Judge::of(kind);
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
                    heard: if interest.contains(Interest::READ) && s.readable {
                        Readiness::READ
                    } else {
                        Readiness::empty()
                    },
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
                        r.heard |= Readiness::READ;
                    } else if r.interest.contains(Interest::EXCEPT) {
                        r.maybe_pending = true;
                    }
                    if r.interest.contains(Interest::EXCEPT) {
                        r.heard |= Readiness::EXCEPT;
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
                check_wait(judge, events.as_slice(), &mut slots, step);
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

fn check_wait(judge: Judge, got: &[Event], slots: &mut [Slot], step: usize) {
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
        if let Some(e) = reported {
            assert_eq!(e.fd(), fd(&s.ours), "step {step}: {e:?}");
        }
        if reg.zombie {
            continue;
        }
        if let Err(why) = judge.check(reg, s.readable, reported.map(|e| e.readiness())) {
            panic!(
                "step {step}: slot {i} {reg:?} readable={}: {why}; got {got:?}",
                s.readable
            );
        }
        if reported.is_some() && reg.mode == Mode::Oneshot {
            reg.armed = false;
        }
        if reported.is_some() || reg.mode == Mode::Event {
            reg.pending = false;
            reg.maybe_pending = false;
        }
        // Whatever a backend posted for this registration was taken by this
        // wait (a wait takes everything its batch holds; 1,024 is more than a
        // run makes), so nothing older can come later.
        reg.heard = Readiness::empty();
    }
    assert!(
        by_token.is_empty(),
        "step {step}: events for unknown or stale tokens: {by_token:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const CURRENT: Judge = Judge { stale_masks: false };
    const STALE: Judge = Judge { stale_masks: true };

    fn reg(interest: Interest, mode: Mode) -> ModelReg {
        ModelReg {
            token: 1,
            interest,
            mode,
            armed: true,
            pending: false,
            maybe_pending: false,
            zombie: false,
            heard: Readiness::empty(),
        }
    }

    /// Declared, the peer wrote, our end drained it: the wait comes after the read.
    fn written_then_drained(interest: Interest, mode: Mode) -> ModelReg {
        let mut r = reg(interest, mode);
        r.pending = interest.contains(Interest::READ);
        r.maybe_pending = !interest.contains(Interest::READ) && interest.contains(Interest::EXCEPT);
        if interest.contains(Interest::READ) {
            r.heard |= Readiness::READ;
        }
        if interest.contains(Interest::EXCEPT) {
            r.heard |= Readiness::EXCEPT;
        }
        r
    }

    #[test]
    fn the_capability_picks_the_judge() {
        assert!(!Judge::of(BackendKind::Epoll).stale_masks);
        assert!(!Judge::of(BackendKind::Kmod).stale_masks);
        assert!(Judge::of(BackendKind::KmodRing).stale_masks);
        for &kind in BackendKind::ALL {
            assert_eq!(
                Judge::of(kind).stale_masks,
                !kind.capabilities().current_state_masks,
                "{kind}"
            );
        }
    }

    #[test]
    fn current_masks_refuse_an_arrival_a_read_took() {
        for mode in [Mode::Event, Mode::Oneshot, Mode::Level] {
            let r = written_then_drained(Interest::READ, mode);
            assert!(
                CURRENT.check(&r, false, Some(Readiness::READ)).is_err(),
                "{mode:?}"
            );
            assert!(CURRENT.check(&r, false, None).is_ok(), "{mode:?}");
        }
        let r = written_then_drained(Interest::READ | Interest::WRITE, Mode::Event);
        assert!(CURRENT
            .check(&r, false, Some(Readiness::READ | Readiness::WRITE))
            .is_err());
        assert!(CURRENT.check(&r, false, Some(Readiness::WRITE)).is_ok());
        let r = written_then_drained(Interest::EXCEPT | Interest::READ, Mode::Event);
        assert!(CURRENT
            .check(&r, true, Some(Readiness::READ | Readiness::EXCEPT))
            .is_err());
    }

    #[test]
    fn stale_masks_allow_it_for_event_and_oneshot_only() {
        for mode in [Mode::Event, Mode::Oneshot] {
            let r = written_then_drained(Interest::READ, mode);
            assert!(
                STALE.check(&r, false, Some(Readiness::READ)).is_ok(),
                "{mode:?}"
            );
            // Allowed, not required.
            assert!(STALE.check(&r, false, None).is_ok(), "{mode:?}");
        }
        // Level registrations are re-polled before every take: exact.
        let r = written_then_drained(Interest::READ, Mode::Level);
        assert!(STALE.check(&r, false, Some(Readiness::READ)).is_err());
        // The wake-up's EPOLLPRI, with and without READ interest.
        let r = written_then_drained(Interest::EXCEPT, Mode::Event);
        assert!(STALE.check(&r, false, Some(Readiness::EXCEPT)).is_ok());
        let r = written_then_drained(Interest::EXCEPT | Interest::READ, Mode::Event);
        assert!(STALE
            .check(&r, true, Some(Readiness::READ | Readiness::EXCEPT))
            .is_ok());
        // What the state found at declaration counts as heard (the kernel posts it).
        let mut r = reg(Interest::READ | Interest::WRITE, Mode::Event);
        r.pending = true;
        r.heard = Readiness::READ;
        assert!(STALE
            .check(&r, false, Some(Readiness::READ | Readiness::WRITE))
            .is_ok());
    }

    #[test]
    fn stale_masks_loosen_nothing_else() {
        // Nothing heard since the last report: no second report, no stale bit.
        let r = reg(Interest::READ, Mode::Event);
        assert!(STALE.check(&r, false, Some(Readiness::READ)).is_err());
        let mut r = reg(Interest::READ | Interest::WRITE, Mode::Event);
        r.pending = true;
        assert!(STALE
            .check(&r, false, Some(Readiness::READ | Readiness::WRITE))
            .is_err());
        // A spent oneshot stays quiet.
        let mut r = written_then_drained(Interest::READ, Mode::Oneshot);
        r.armed = false;
        assert!(STALE.check(&r, false, Some(Readiness::READ)).is_err());
        // A due report is still due, and its mask still holds the state.
        let mut r = written_then_drained(Interest::READ, Mode::Event);
        assert!(STALE.check(&r, true, None).is_err());
        assert!(STALE.check(&r, true, Some(Readiness::WRITE)).is_err());
        r.heard = Readiness::READ;
        assert!(STALE.check(&r, true, Some(Readiness::READ)).is_ok());
        // EXCEPT only when the wake-up carried it; WRITE only as the interest says;
        // never HUP or ERROR on these sockets.
        let r = written_then_drained(Interest::READ, Mode::Event);
        assert!(STALE
            .check(&r, true, Some(Readiness::READ | Readiness::EXCEPT))
            .is_err());
        assert!(STALE
            .check(&r, true, Some(Readiness::READ | Readiness::WRITE))
            .is_err());
        assert!(STALE
            .check(&r, true, Some(Readiness::READ | Readiness::HUP))
            .is_err());
        let r = written_then_drained(Interest::READ | Interest::WRITE, Mode::Oneshot);
        assert!(STALE.check(&r, false, Some(Readiness::READ)).is_err());
    }
}
