//! The queue's record of what it watches, indexed by descriptor number.
//!
//! Each slot carries a generation that outlives the registration: it is bumped every
//! time a registration starts or ends, and stamped into the key every backend echoes
//! back with its events. An event whose generation no longer matches belongs to an
//! earlier registration of that number (a closed-and-reused fd, a `dup`'d file that
//! epoll still watches) and is never delivered.

use crate::table_shrink;
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

/// One live registration, as the queue reads and writes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    pub token: u64,
    pub interest: Interest,
    pub mode: Mode,
    pub wake_one: bool,
    /// False after a oneshot registration delivered its event.
    pub armed: bool,
}

const LIVE: u8 = 1;
const WAKE_ONE: u8 = 2;
const ARMED: u8 = 4;

/// One descriptor number's entry: 16 bytes, so four share a cache line.
///
/// The layout is the hot path's: every delivered event reads one slot picked by the
/// kernel in no particular order, so at 10,000 descriptors the table's footprint
/// (160 KB here, against 240 KB for a `generation` beside an
/// `Option<Registration>`) decides how often that read misses the cache. The
/// interest set (three bits) and the flags are packed into bytes; the generation
/// lives beside them instead of in a wrapper.
#[derive(Default, Clone, Copy)]
pub(crate) struct Slot {
    token: u64,
    generation: u32,
    interest: u8,
    mode: Mode,
    flags: u8,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16);

impl Slot {
    fn is_live(&self) -> bool {
        self.flags & LIVE != 0
    }

    fn registration(&self) -> Registration {
        Registration {
            token: self.token,
            interest: Interest::from_bits_truncate(self.interest as u32),
            mode: self.mode,
            wake_one: self.flags & WAKE_ONE != 0,
            armed: self.flags & ARMED != 0,
        }
    }

    fn set(&mut self, reg: &Registration) {
        self.token = reg.token;
        self.interest = reg.interest.bits() as u8;
        self.mode = reg.mode;
        self.flags =
            LIVE | if reg.wake_one { WAKE_ONE } else { 0 } | if reg.armed { ARMED } else { 0 };
    }

    /// The registration's user token.
    #[inline]
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// Records that this registration's event was delivered: a oneshot one is
    /// disarmed until the next `declare_interest`.
    #[inline]
    pub(crate) fn delivered(&mut self) {
        if self.mode == Mode::Oneshot {
            self.flags &= !ARMED;
        }
    }
}

/// fd number → registration.
///
/// The table is as long as the highest descriptor registered
/// (`table_shrink`): once a crowd of connections has gone, the numbers above
/// the survivors are cut, and the generation of a number registered again
/// starts above every generation cut, so an event still carrying a cut
/// registration's key is never taken for the new one.
#[derive(Default)]
pub(crate) struct InterestTable {
    slots: Vec<Slot>,
    count: usize,
    floor: u32,
}

impl InterestTable {
    pub(crate) fn get(&self, fd: RawFd) -> Option<Registration> {
        self.slots
            .get(fd as usize)
            .filter(|s| s.is_live())
            .map(Slot::registration)
    }

    /// The slot a backend event refers to, if its registration is still the current
    /// one.
    #[inline]
    pub(crate) fn current(&mut self, key: Key) -> Option<&mut Slot> {
        let slot = self.slots.get_mut(key_fd(key) as usize)?;
        if slot.generation != key_generation(key) || !slot.is_live() {
            return None;
        }
        Some(slot)
    }

    pub(crate) fn key(&self, fd: RawFd) -> Key {
        make_key(fd, self.slots.get(fd as usize).map_or(0, |s| s.generation))
    }

    /// Whether `fd` has a slot already (registering it does not grow the table).
    pub(crate) fn covers(&self, fd: RawFd) -> bool {
        (fd as usize) < self.slots.len()
    }

    /// Starts a new registration (new generation) and returns its key.
    pub(crate) fn insert(&mut self, fd: RawFd, reg: Registration) -> Key {
        let i = fd as usize;
        if i >= self.slots.len() {
            let fresh = Slot {
                generation: self.floor,
                ..Slot::default()
            };
            self.slots.resize(i + 1, fresh);
        }
        let slot = &mut self.slots[i];
        if !slot.is_live() {
            self.count += 1;
        }
        slot.generation = slot.generation.wrapping_add(1);
        slot.set(&reg);
        make_key(fd, slot.generation)
    }

    /// Replaces an existing registration in place (same generation).
    pub(crate) fn update(&mut self, fd: RawFd, reg: Registration) -> Key {
        let slot = &mut self.slots[fd as usize];
        slot.set(&reg);
        make_key(fd, slot.generation)
    }

    /// Ends a registration; later events carrying its key are stale. Ending
    /// the highest one cuts the table (`table_shrink`).
    pub(crate) fn remove(&mut self, fd: RawFd) -> Option<Registration> {
        let slot = self.slots.get_mut(fd as usize)?;
        if !slot.is_live() {
            return None;
        }
        let old = slot.registration();
        slot.flags = 0;
        self.count -= 1;
        slot.generation = slot.generation.wrapping_add(1);
        if fd as usize + 1 == self.slots.len() {
            let floor = &mut self.floor;
            table_shrink::cut_vacant_tail(
                &mut self.slots,
                |s| !s.is_live(),
                |s| *floor = (*floor).max(s.generation),
            );
        }
        Some(old)
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Every live registration with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (RawFd, Key, Registration)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_live())
            .map(|(fd, s)| {
                (
                    fd as RawFd,
                    make_key(fd as RawFd, s.generation),
                    s.registration(),
                )
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
        assert_eq!(t.current(new).map(|s| s.token()), Some(2));
        assert_eq!(t.get(7).map(|r| r.token), Some(2));
        assert_eq!(key_fd(new), 7);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn slot_round_trips_every_field_and_oneshot_disarms() {
        let mut t = InterestTable::default();
        let reg = Registration {
            token: u64::MAX - 3,
            interest: Interest::READ | Interest::WRITE | Interest::EXCEPT,
            mode: Mode::Oneshot,
            wake_one: true,
            armed: true,
        };
        let key = t.insert(3, reg);
        let back = t.get(3).unwrap();
        assert_eq!(back.token, reg.token);
        assert_eq!(back.interest, reg.interest);
        assert_eq!(back.mode, Mode::Oneshot);
        assert!(back.wake_one && back.armed);
        t.current(key).unwrap().delivered();
        assert!(!t.get(3).unwrap().armed);
        assert_eq!(t.remove(3).map(|r| r.token), Some(reg.token));
        assert!(t.get(3).is_none() && t.remove(3).is_none());
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_crowd_that_leaves_takes_its_numbers_with_it() {
        let mut t = InterestTable::default();
        let keys: Vec<Key> = (0..10_000).map(|fd| t.insert(fd, reg(fd as u64))).collect();
        let grown = t.slots.capacity();
        // Everyone but 3 and 5 leaves, the top ones not last.
        for fd in (6..10_000).rev().filter(|fd| fd % 2 == 0) {
            t.remove(fd);
        }
        for fd in (0..10_000).filter(|fd| fd % 2 == 1 && *fd != 3 && *fd != 5) {
            t.remove(fd);
        }
        for fd in [0, 2, 4] {
            t.remove(fd);
        }
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.slots.len(),
            table_shrink::SHRINK_MIN,
            "cut down to the floor"
        );
        assert!(
            t.slots.capacity() <= 2 * table_shrink::SHRINK_MIN,
            "capacity {} (was {grown})",
            t.slots.capacity()
        );
        assert_eq!(t.get(5).map(|r| r.token), Some(5));
        // A number registered again never answers to a key of before the cut.
        for fd in [9_000, 9_999, 4] {
            let new = t.insert(fd, reg(7));
            assert_ne!(new, keys[fd as usize]);
            assert!(t.current(keys[fd as usize]).is_none(), "fd {fd}");
            assert_eq!(t.current(new).map(|s| s.token()), Some(7));
        }
    }
}
