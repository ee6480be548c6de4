//! The queue's record of what it watches, indexed by descriptor number.
//!
//! Each slot carries a generation that outlives the registration: it is bumped every
//! time a registration starts or ends, and stamped into the key every backend echoes
//! back with its events. An event whose generation no longer matches belongs to an
//! earlier registration of that number (a closed-and-reused fd, a `dup`'d file that
//! epoll still watches) and is never delivered.

use crate::{Interest, Mode};
use std::os::fd::RawFd;

/// Key a backend echoes back with each event: generation in the high half, fd low.
pub(crate) type Key = u64;

/// Key of the queue's own notifier registration.
pub(crate) const NOTIFY_KEY: Key = u64::MAX;

pub(crate) fn make_key(fd: RawFd, generation: u32) -> Key {
    ((generation as u64) << 32) | fd as u32 as u64
}

pub(crate) fn key_fd(key: Key) -> RawFd {
    key as u32 as RawFd
}

pub(crate) fn key_generation(key: Key) -> u32 {
    (key >> 32) as u32
}

/// One live registration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    pub token: u64,
    pub interest: Interest,
    pub mode: Mode,
    pub wake_one: bool,
    /// False after a oneshot registration delivered its event.
    pub armed: bool,
}

#[derive(Default, Clone, Copy)]
struct Slot {
    generation: u32,
    registration: Option<Registration>,
}

/// fd number → registration.
#[derive(Default)]
pub(crate) struct InterestTable {
    slots: Vec<Slot>,
    count: usize,
}

impl InterestTable {
    pub(crate) fn get(&self, fd: RawFd) -> Option<&Registration> {
        self.slots
            .get(fd as usize)
            .and_then(|s| s.registration.as_ref())
    }

    /// The registration a backend event refers to, if it is still the current one.
    #[inline]
    pub(crate) fn current(&mut self, key: Key) -> Option<&mut Registration> {
        let slot = self.slots.get_mut(key_fd(key) as usize)?;
        if slot.generation != key_generation(key) {
            return None;
        }
        slot.registration.as_mut()
    }

    pub(crate) fn key(&self, fd: RawFd) -> Key {
        make_key(fd, self.slots.get(fd as usize).map_or(0, |s| s.generation))
    }

    /// Starts a new registration (new generation) and returns its key.
    pub(crate) fn insert(&mut self, fd: RawFd, reg: Registration) -> Key {
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::default());
        }
        let slot = &mut self.slots[i];
        if slot.registration.is_none() {
            self.count += 1;
        }
        slot.generation = slot.generation.wrapping_add(1);
        slot.registration = Some(reg);
        make_key(fd, slot.generation)
    }

    /// Replaces an existing registration in place (same generation).
    pub(crate) fn update(&mut self, fd: RawFd, reg: Registration) -> Key {
        let slot = &mut self.slots[fd as usize];
        slot.registration = Some(reg);
        make_key(fd, slot.generation)
    }

    /// Ends a registration; later events carrying its key are stale.
    pub(crate) fn remove(&mut self, fd: RawFd) -> Option<Registration> {
        let slot = self.slots.get_mut(fd as usize)?;
        let old = slot.registration.take();
        if old.is_some() {
            self.count -= 1;
            slot.generation = slot.generation.wrapping_add(1);
        }
        old
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Every live registration with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (RawFd, Key, &Registration)> + '_ {
        self.slots.iter().enumerate().filter_map(|(fd, s)| {
            s.registration
                .as_ref()
                .map(|r| (fd as RawFd, make_key(fd as RawFd, s.generation), r))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(token: u64) -> Registration {
        Registration {
            token,
            interest: Interest::READ,
            mode: Mode::Level,
            wake_one: false,
            armed: true,
        }
    }

    #[test]
    fn reused_number_gets_a_new_generation() {
        let mut t = InterestTable::default();
        let old = t.insert(7, reg(1));
        t.remove(7);
        assert!(t.current(old).is_none());
        let new = t.insert(7, reg(2));
        assert_ne!(old, new);
        assert!(t.current(old).is_none());
        assert_eq!(t.current(new).map(|r| r.token), Some(2));
        assert_eq!(key_fd(new), 7);
        assert_eq!(t.len(), 1);
    }
}
