//! One delivered event ([`Event`]) and the caller-owned batch that
//! `get_next_event` fills ([`Events`]).

use crate::Readiness;
use std::os::fd::RawFd;

/// Token carried by the event a [`Notifier`](crate::Notifier) produces.
pub const NOTIFY_TOKEN: u64 = u64::MAX;

/// One event: which registration (token and descriptor) and what state it is in.
///
/// The paper's `event_descr_t { int fd; unsigned mask; }`, plus the token given at
/// registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    token: u64,
    fd: RawFd,
    readiness: Readiness,
}

impl Event {
    pub(crate) const fn new(token: u64, fd: RawFd, readiness: Readiness) -> Event {
        Event {
            token,
            fd,
            readiness,
        }
    }

    /// The token given to `declare_interest` (or `add_timer`); [`NOTIFY_TOKEN`] for a
    /// notification.
    pub const fn token(&self) -> u64 {
        self.token
    }
    /// The descriptor, or -1 for timer and notify events.
    pub const fn fd(&self) -> RawFd {
        self.fd
    }
    /// The descriptor's state when the event was dequeued.
    pub const fn readiness(&self) -> Readiness {
        self.readiness
    }
    /// Readable, or hung up / in error (a read will not block and tells what happened).
    pub const fn is_readable(&self) -> bool {
        self.readiness.intersects(
            Readiness::READ
                .bitor_const(Readiness::HUP)
                .bitor_const(Readiness::ERROR),
        )
    }
    /// Writable, or in error (a write will not block).
    pub const fn is_writable(&self) -> bool {
        self.readiness
            .intersects(Readiness::WRITE.bitor_const(Readiness::ERROR))
    }
    /// A timer expired.
    pub const fn is_timer(&self) -> bool {
        self.readiness.contains(Readiness::TIMER)
    }
    /// A `Notifier` woke the queue.
    pub const fn is_notify(&self) -> bool {
        self.readiness.contains(Readiness::NOTIFY)
    }
}

impl Readiness {
    const fn bitor_const(self, other: Readiness) -> Readiness {
        match Readiness::from_bits(self.bits() | other.bits()) {
            Some(r) => r,
            None => self,
        }
    }
}

/// A batch of events, owned by the caller and reused across calls: its capacity is
/// the paper's `array_max`.
///
/// ```
/// let mut events = evq::Events::with_capacity(64);
/// assert_eq!(events.capacity(), 64);
/// assert!(events.is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct Events {
    list: Vec<Event>,
    capacity: usize,
}

impl Events {
    /// A batch that holds up to `capacity` events per `get_next_event` call.
    pub fn with_capacity(capacity: usize) -> Events {
        Events {
            list: Vec::with_capacity(capacity),
            capacity,
        }
    }
    /// Most events one call delivers.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Events delivered by the last call.
    pub fn len(&self) -> usize {
        self.list.len()
    }
    /// True if the last call delivered nothing.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    /// The delivered events, in delivery order.
    pub fn iter(&self) -> std::slice::Iter<'_, Event> {
        self.list.iter()
    }
    /// The delivered events as a slice.
    pub fn as_slice(&self) -> &[Event] {
        &self.list
    }
    pub(crate) fn clear(&mut self) {
        self.list.clear();
    }
    pub(crate) fn room(&self) -> usize {
        self.capacity - self.list.len()
    }
    #[inline]
    pub(crate) fn push(&mut self, e: Event) {
        debug_assert!(self.list.len() < self.capacity);
        self.list.push(e);
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}
