//! The event loops' connection tables, which follow their crowd down.
//!
//! The server's and the proxies' loops keep one slot per connection, found
//! again from the slot number (and a generation) in the token of each event,
//! timer or completion. Such a table grows to the most connections ever held
//! at once, and a `Vec` never gives capacity back by itself: after 10,000
//! slow clients had come and gone, `evq serve` kept 1.1 MiB of connection
//! slots (and `evq proxy` 3.7 MiB), which the fault table's full-size
//! `trickle` row counts as memory that did not come back (issue 19).
//!
//! The rule is `evq`'s for its own tables (its `table_shrink` module): **a
//! table is as long as its highest slot in use.** [`SlotTable::cut_vacant_tail`]
//! pops the vacant slots off the end and gives back capacity once it is four
//! times what is left; each slot is cut at most once per time it was made, so
//! the cost is O(1) per close, amortized, and a loop whose top slot stays in
//! use pays one comparison per round. The loops cut *between* rounds, never
//! inside one: code handling an event may hold a slot number across a close.
//!
//! What follows from cutting:
//!
//! - the free list may name slots that were cut (or made again and taken):
//!   [`SlotTable::vacant_slot`] pops until it finds one that exists and is
//!   vacant, and the list is trimmed when it outgrows the table twice over;
//! - a cut slot takes its generation with it, so slots made again start at a
//!   *floor* above every generation cut: a token of a cut slot's last tenant
//!   never matches its next one;
//! - a table reserved once at its largest size ([`SlotTable::reserved`], the
//!   completion proxy's, whose capacity is its per-idle-client figure) keeps
//!   its reservation and hands the pages above the cut back to the system
//!   instead (`MADV_DONTNEED`: untouched, they cost nothing until used again).

use crate::token::next_generation;
use evq_os::memory::Releaser;
use std::ops::{Index, IndexMut};

/// Capacity is never given back below this many slots.
const SHRINK_MIN: usize = 1024;

/// What a table needs of its slots.
pub(crate) trait Slot {
    /// No connection holds the slot (it may be handed to the next one).
    fn vacant(&self) -> bool;
    /// The slot's generation (bumped by its owner on each close).
    fn generation(&self) -> u32;
}

/// A table of connection slots with a free list (see the module).
pub(crate) struct SlotTable<T> {
    slots: Vec<T>,
    free: Vec<u32>,
    in_use: usize,
    /// Generation of slots made after a cut: above every generation cut.
    floor: u32,
    reserved: bool,
    /// In a reserved table, slots up to here may have resident pages.
    touched: usize,
    /// What a cut gave back, so the allocator returns it to the system.
    releaser: Releaser,
}

impl<T: Slot> SlotTable<T> {
    /// An empty table that grows by doubling and gives capacity back.
    pub(crate) fn new() -> Self {
        SlotTable {
            slots: Vec::new(),
            free: Vec::new(),
            in_use: 0,
            floor: 0,
            reserved: false,
            touched: 0,
            releaser: Releaser::new(),
        }
    }

    /// An empty table reserved once for `capacity` slots; a cut hands its
    /// pages back to the system and keeps the reservation.
    pub(crate) fn reserved(capacity: usize) -> Self {
        SlotTable {
            slots: Vec::with_capacity(capacity),
            reserved: true,
            ..Self::new()
        }
    }

    /// A slot for a new connection, counted in use: a vacant one from the
    /// free list, or `make(generation)` appended.
    pub(crate) fn take(&mut self, make: impl FnOnce(u32) -> T) -> usize {
        self.in_use += 1;
        while let Some(i) = self.free.pop() {
            let i = i as usize;
            if self.slots.get(i).is_some_and(Slot::vacant) {
                return i;
            }
        }
        self.slots.push(make(self.floor));
        self.touched = self.touched.max(self.slots.len());
        self.slots.len() - 1
    }

    /// Slot `i`, vacant again, may be taken by the next connection.
    pub(crate) fn release(&mut self, i: usize) {
        debug_assert!(self.slots[i].vacant());
        self.in_use -= 1;
        self.free.push(i as u32);
    }

    /// Connections holding a slot.
    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    /// Slots in the table (in use or vacant): the range of slot numbers.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slot `i`, if the table has it.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i)
    }

    /// Slot `i`, if the table has it.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.slots.get_mut(i)
    }

    /// Whether slot `i` exists and is at `generation` (a token for it is
    /// current: not of a tenant gone since, nor of a slot cut since).
    pub(crate) fn current(&self, i: usize, generation: u32) -> bool {
        self.slots
            .get(i)
            .is_some_and(|s| s.generation() == generation)
    }

    /// Every slot, in slot order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.slots.iter()
    }

    /// Pops the vacant slots off the end and gives back what they held (see
    /// the module), and trims the allocator once a crowd has gone
    /// (`evq_os::memory::Releaser::open_now`). Call once between rounds.
    pub(crate) fn cut_vacant_tail(&mut self) {
        // A crowd that has gone gives back what it held, wherever freed.
        self.releaser.open_now(self.in_use);
        if !self.slots.last().is_some_and(Slot::vacant) {
            return;
        }
        while let Some(last) = self.slots.last() {
            if !last.vacant() {
                break;
            }
            self.floor = self.floor.max(next_generation(last.generation()));
            self.slots.pop();
        }
        let bytes = if self.reserved {
            let bytes = release_pages(&mut self.slots, self.touched);
            self.touched = self.slots.len();
            bytes
        } else {
            shrink_capacity(&mut self.slots)
        };
        if bytes > 0 {
            // The trim also returns what the connections' other records
            // (and the queue's own tables) freed as they left.
            self.releaser.freed(bytes, self.in_use);
        }
        if self.free.len() > self.slots.len().saturating_mul(2).max(SHRINK_MIN) {
            let len = self.slots.len();
            self.free.retain(|&i| (i as usize) < len);
            shrink_capacity(&mut self.free);
        }
    }
}

impl<T> Index<usize> for SlotTable<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.slots[i]
    }
}

impl<T> IndexMut<usize> for SlotTable<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.slots[i]
    }
}

/// Gives back capacity above four times the length (keeping twice it, and
/// never less than [`SHRINK_MIN`]); returns the bytes given back. The
/// completion server's descriptor table follows the same rule.
pub(crate) fn shrink_capacity<T>(v: &mut Vec<T>) -> usize {
    let len = v.len().max(SHRINK_MIN / 2);
    let before = v.capacity();
    if before > len.saturating_mul(4) {
        v.shrink_to(len * 2);
    }
    (before - v.capacity()) * std::mem::size_of::<T>()
}

/// Hands the whole pages of `v`'s spare capacity below slot `touched` back
/// to the system; the reservation stays, and the pages come back (zeroed)
/// when slots are made there again. Returns the bytes handed back.
fn release_pages<T>(v: &mut Vec<T>, touched: usize) -> usize {
    let page = 4096usize;
    let len = v.len();
    let spare = v.spare_capacity_mut();
    let below = touched.saturating_sub(len).min(spare.len());
    let spare = &mut spare[..below];
    let start = spare.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(spare);
    let first = start.div_ceil(page) * page;
    let last = end / page * page;
    if last > first {
        // SAFETY: [first, last) is whole pages inside the vector's spare
        // capacity: memory this process allocated and that holds no value (it
        // is past `len`, and nothing points into it). MADV_DONTNEED on private
        // anonymous memory only drops the pages' contents; the mapping stays
        // valid and reads as zeros, which a later push overwrites anyway.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_DONTNEED,
            );
        }
    }
    last.saturating_sub(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Conn {
        fd: i32,
        generation: u32,
    }

    impl Slot for Conn {
        fn vacant(&self) -> bool {
            self.fd < 0
        }
        fn generation(&self) -> u32 {
            self.generation
        }
    }

    fn open(t: &mut SlotTable<Conn>, fd: i32) -> usize {
        let i = t.take(|generation| Conn { fd: -1, generation });
        t[i].fd = fd;
        i
    }

    fn close(t: &mut SlotTable<Conn>, i: usize) {
        t[i].fd = -1;
        t[i].generation = next_generation(t[i].generation);
        t.release(i);
    }

    #[test]
    fn a_crowd_that_leaves_takes_its_slots_with_it() {
        for reserved in [false, true] {
            let mut t = if reserved {
                SlotTable::reserved(20_000)
            } else {
                SlotTable::new()
            };
            let survivors: Vec<usize> = (0..3).map(|n| open(&mut t, n)).collect();
            let crowd: Vec<(usize, u32)> = (0..10_000)
                .map(|n| {
                    let i = open(&mut t, 100 + n);
                    (i, t[i].generation)
                })
                .collect();
            assert_eq!(t.in_use(), 10_003);
            // The crowd leaves in an order that is not the table's.
            for &(i, _) in crowd.iter().rev().step_by(2) {
                close(&mut t, i);
            }
            for &(i, _) in crowd.iter().step_by(2) {
                close(&mut t, i);
            }
            t.cut_vacant_tail();
            assert_eq!(t.len(), 3, "cut down to the survivors");
            assert_eq!(t.in_use(), 3);
            if reserved {
                assert_eq!(t.slots.capacity(), 20_000, "the reservation stays");
            } else {
                assert!(t.slots.capacity() <= SHRINK_MIN, "{}", t.slots.capacity());
            }
            // New connections take slots past the survivors, with
            // generations no token of the crowd carries.
            for n in 0..5 {
                let i = open(&mut t, 50 + n);
                let (old, old_generation) = crowd[i - 3];
                assert_eq!(i, old, "slot {i} made again");
                assert_ne!(t[i].generation, old_generation);
            }
            assert_eq!(t.len(), 8);
            assert_eq!(survivors, vec![0, 1, 2]);
        }
    }

    #[test]
    fn the_free_list_skips_slots_that_were_cut() {
        let mut t = SlotTable::new();
        let a = open(&mut t, 1);
        let b = open(&mut t, 2);
        let c = open(&mut t, 3);
        close(&mut t, b);
        close(&mut t, c);
        t.cut_vacant_tail();
        assert_eq!(t.len(), 1);
        // The free list still names slots 1 and 2, which are gone: the next
        // connection gets a slot made again at the end, the one after it too.
        assert_eq!(open(&mut t, 4), 1);
        assert_eq!(open(&mut t, 5), 2);
        close(&mut t, a);
        assert_eq!(open(&mut t, 6), 0, "a vacant slot below is taken first");
        assert_eq!(t.in_use(), 3);
    }
}
