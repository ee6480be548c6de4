//! The backends, and the contract every one of them keeps.
//!
//! # The contract ([`Backend`])
//!
//! A backend is a kernel mechanism that watches descriptors. The queue owns the
//! interest table, the timers and the notifier; a backend only has to:
//!
//! - `add` / `modify` / `remove` a [`Watch`] (fd, key, interest, mode, wake-one),
//!   returning the OS error unchanged when the kernel refuses;
//! - `wait` at most `max` events for at most `timeout` (`None` = forever), handing
//!   each to the callback as a [`SysEvent`] carrying the key it was given, and
//!   returning as soon as at least one is ready;
//! - report `Readiness` answering the interest (plus `HUP`/`ERROR`), as current as
//!   the mechanism allows;
//! - for `Mode::Oneshot`, stop reporting a watch after one event until `modify`;
//! - never starve: when more descriptors are ready than `max`, later calls must get
//!   to the others (epoll's ready list rotates level items to its tail; select and
//!   poll rotate a scan cursor);
//! - say what it cannot do through [`Capabilities`], so the queue refuses the
//!   registration instead of misbehaving;
//! - return `Err(Interrupted)` on `EINTR` (the queue retries with the remaining time).
//!
//! Dispatch is a closed `enum` rather than `dyn Backend`, so `wait` can take a
//! generic callback that the compiler inlines into the hot loop.

mod epoll;
mod fd_bitmap;
mod poll;
mod rtsig;
mod select_classic;
mod select_improved;
pub(crate) mod syscall;
mod uring;

use crate::interest_table::Key;
use crate::{Interest, Mode, Readiness};
use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::str::FromStr;
use std::time::Duration;

pub(crate) use epoll::EpollBackend;
pub(crate) use poll::PollBackend;
pub(crate) use rtsig::{RtSignalBackend, SignalKick};
pub(crate) use select_classic::SelectClassicBackend;
pub(crate) use select_improved::SelectImprovedBackend;
pub(crate) use uring::UringBackend;

/// What a backend is asked to watch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Watch {
    pub fd: RawFd,
    pub key: Key,
    pub interest: Interest,
    pub mode: Mode,
    pub wake_one: bool,
}

/// One event as a backend reports it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SysEvent {
    pub key: Key,
    pub readiness: Readiness,
    /// The descriptor was closed behind the queue's back (`POLLNVAL`, `EBADF`): its
    /// interest is gone, as the paper says closing implies.
    pub gone: bool,
}

/// The written contract; see the module documentation.
pub(crate) trait Backend: Send + Sized {
    fn new() -> io::Result<Self>;
    fn add(&mut self, w: &Watch) -> io::Result<()>;
    fn modify(&mut self, old: &Watch, new: &Watch) -> io::Result<()>;
    fn remove(&mut self, old: &Watch) -> io::Result<()>;
    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        on_event: F,
    ) -> io::Result<()>;
    /// Rebuilds kernel state from scratch after stale events showed that the kernel
    /// watches files the queue no longer knows (epoll and `dup`); others need not.
    fn rebuild<'a>(&mut self, _watches: impl Iterator<Item = Watch> + 'a) -> io::Result<()> {
        Ok(())
    }
}

/// The mechanisms evq can run on. Names are used everywhere: the CLI, JSON, and the
/// `EVQ_BACKEND` environment variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// `select(2)` as classic applications use it: fd_sets rebuilt from the interest
    /// list on every call, results scanned bit by bit.
    SelectClassic,
    /// `select(2)` with SEEDS 000's user-space improvements: shadow fd_sets copied
    /// rather than rebuilt, results scanned a word at a time.
    SelectImproved,
    /// `poll(2)` over a static array (removed entries set to -1).
    Poll,
    /// `epoll(7)`: interest kept in the kernel, cost proportional to ready events.
    Epoll,
    /// POSIX real-time signals (`F_SETSIG`, `O_ASYNC`), one `sigtimedwait(2)` per
    /// event, with `SIGIO` overflow recovery by `poll(2)` (SEEDS 001, phhttpd).
    RtSig,
    /// Real-time signals dequeued a batch at a time by one `read(2)` of a
    /// `signalfd(2)`: today's `sigtimedwait4()` (SEEDS 001).
    RtSigBulk,
    /// `io_uring(7)` poll requests (multishot for event mode): the completion ring
    /// is /dev/epoll's shared result area made general (SEEDS 002). Linux 5.13+.
    Uring,
}

/// What a backend can do. The queue refuses registrations that need more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// `Mode::Level`.
    pub level: bool,
    /// `Mode::Event` (the paper's event semantics).
    pub event: bool,
    /// `Mode::Oneshot`.
    pub oneshot: bool,
    /// Wake one of several queues per event (`Options::wake_one`).
    pub wake_one: bool,
    /// True when the cost of a wait grows with the number of registered (even idle)
    /// descriptors: the behaviour the paper set out to remove.
    pub cost_grows_with_interest: bool,
    /// The mask in an event is the state at dequeue time (not a stale snapshot).
    pub current_state_masks: bool,
    /// Ready descriptors are delivered in the order they became ready. Backends that
    /// only know state (select, poll) rotate through the ready set instead, which
    /// still never starves anyone.
    pub fifo: bool,
    /// One descriptor may be registered in several queues (on different threads)
    /// at once, each seeing its events. RT signals cannot: a file has a single
    /// signal owner (`F_SETOWN_EX`), so only the last queue to register would hear.
    pub shared_descriptors: bool,
}

impl BackendKind {
    /// Every backend compiled into this build, best first.
    pub const ALL: &'static [BackendKind] = &[
        BackendKind::Epoll,
        BackendKind::Uring,
        BackendKind::Poll,
        BackendKind::RtSigBulk,
        BackendKind::RtSig,
        BackendKind::SelectImproved,
        BackendKind::SelectClassic,
    ];

    /// Backends this kernel supports (each probed), best first.
    pub fn candidates() -> Vec<BackendKind> {
        Self::ALL
            .iter()
            .copied()
            .filter(|k| k.available().is_ok())
            .collect()
    }

    /// The backend a queue uses by default: `EVQ_BACKEND` if set (an unknown or
    /// unavailable name is an error, never silently replaced), else the best candidate.
    ///
    /// # Errors
    /// `InvalidInput` for an unknown `EVQ_BACKEND`; the probe's error if it is
    /// unavailable.
    pub fn from_env_or_best() -> io::Result<BackendKind> {
        match std::env::var("EVQ_BACKEND") {
            Ok(name) if !name.is_empty() => {
                let kind: BackendKind = name.parse()?;
                kind.available()?;
                Ok(kind)
            }
            // Probe in preference order and stop at the first that works: probing
            // creates kernel objects (rings, signal numbers), so later ones are not
            // touched when the best is there.
            _ => Self::ALL
                .iter()
                .copied()
                .find(|k| k.available().is_ok())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::Unsupported, "no evq backend is available")
                }),
        }
    }

    /// The backend's name: `select`, `select-improved`, `poll`, `epoll`, `rtsig`,
    /// `rtsig-bulk`, `uring`.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::SelectClassic => "select",
            BackendKind::SelectImproved => "select-improved",
            BackendKind::Poll => "poll",
            BackendKind::Epoll => "epoll",
            BackendKind::RtSig => "rtsig",
            BackendKind::RtSigBulk => "rtsig-bulk",
            BackendKind::Uring => "uring",
        }
    }

    /// Probes the kernel: `Ok` if a queue of this kind can be created here.
    ///
    /// # Errors
    /// The OS error the probe met (e.g. `ENOSYS`).
    pub fn available(self) -> io::Result<()> {
        match self {
            BackendKind::Epoll => EpollBackend::new().map(drop),
            BackendKind::RtSig => RtSignalBackend::probe(false),
            BackendKind::RtSigBulk => RtSignalBackend::probe(true),
            BackendKind::Uring => UringBackend::probe(),
            _ => Ok(()),
        }
    }

    /// What this backend can do.
    pub const fn capabilities(self) -> Capabilities {
        match self {
            BackendKind::SelectClassic | BackendKind::SelectImproved | BackendKind::Poll => {
                Capabilities {
                    level: true,
                    event: false,
                    oneshot: true,
                    wake_one: false,
                    cost_grows_with_interest: true,
                    current_state_masks: true,
                    fifo: false,
                    shared_descriptors: true,
                }
            }
            BackendKind::Epoll => Capabilities {
                level: true,
                event: true,
                oneshot: true,
                wake_one: true,
                cost_grows_with_interest: false,
                current_state_masks: true,
                fifo: true,
                shared_descriptors: true,
            },
            // Every candidate is checked by poll(2) before it is reported, so masks are
            // current; a file signals one owner, so no wake-one.
            BackendKind::RtSig | BackendKind::RtSigBulk => Capabilities {
                level: true,
                event: true,
                oneshot: true,
                wake_one: false,
                cost_grows_with_interest: false,
                current_state_masks: true,
                // The RT queue is FIFO, and so is the candidate list (after an
                // overflow, recovery reports in descriptor order).
                fifo: true,
                shared_descriptors: false,
            },
            // CQE masks are checked by poll(2) over the batch before delivery.
            BackendKind::Uring => Capabilities {
                level: true,
                event: true,
                oneshot: true,
                wake_one: false,
                cost_grows_with_interest: false,
                current_state_masks: true,
                fifo: true,
                shared_descriptors: true,
            },
        }
    }

    pub(crate) fn open(self) -> io::Result<AnyBackend> {
        Ok(match self {
            BackendKind::SelectClassic => AnyBackend::SelectClassic(Backend::new()?),
            BackendKind::SelectImproved => AnyBackend::SelectImproved(Backend::new()?),
            BackendKind::Poll => AnyBackend::Poll(Backend::new()?),
            BackendKind::Epoll => AnyBackend::Epoll(Backend::new()?),
            BackendKind::RtSig => AnyBackend::RtSig(RtSignalBackend::open(false)?),
            BackendKind::RtSigBulk => AnyBackend::RtSig(RtSignalBackend::open(true)?),
            BackendKind::Uring => AnyBackend::Uring(Box::new(Backend::new()?)),
        })
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = io::Error;
    fn from_str(s: &str) -> io::Result<BackendKind> {
        BackendKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = BackendKind::ALL.iter().map(|k| k.name()).collect();
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown evq backend {s:?}; known: {}", names.join(", ")),
                )
            })
    }
}

/// Static dispatch over the compiled backends.
pub(crate) enum AnyBackend {
    SelectClassic(SelectClassicBackend),
    SelectImproved(SelectImprovedBackend),
    Poll(PollBackend),
    Epoll(EpollBackend),
    RtSig(RtSignalBackend),
    // Boxed: the ring and its tables are several times the other backends' size.
    Uring(Box<UringBackend>),
}

macro_rules! dispatch {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::SelectClassic($b) => $e,
            AnyBackend::SelectImproved($b) => $e,
            AnyBackend::Poll($b) => $e,
            AnyBackend::Epoll($b) => $e,
            AnyBackend::RtSig($b) => $e,
            AnyBackend::Uring($b) => $e,
        }
    };
}

impl AnyBackend {
    /// How a `Notifier` must wake this backend besides writing its eventfd.
    pub(crate) fn signal_kick(&self) -> Option<std::sync::Arc<SignalKick>> {
        match self {
            AnyBackend::RtSig(b) => Some(b.kick()),
            _ => None,
        }
    }
    pub(crate) fn add(&mut self, w: &Watch) -> io::Result<()> {
        dispatch!(self, b => b.add(w))
    }
    pub(crate) fn modify(&mut self, old: &Watch, new: &Watch) -> io::Result<()> {
        dispatch!(self, b => b.modify(old, new))
    }
    pub(crate) fn remove(&mut self, old: &Watch) -> io::Result<()> {
        dispatch!(self, b => b.remove(old))
    }
    #[inline]
    pub(crate) fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        on_event: F,
    ) -> io::Result<()> {
        dispatch!(self, b => b.wait(max, timeout, on_event))
    }
    pub(crate) fn rebuild<'a>(
        &mut self,
        watches: impl Iterator<Item = Watch> + 'a,
    ) -> io::Result<()> {
        dispatch!(self, b => b.rebuild(watches))
    }
}
