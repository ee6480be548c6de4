//! Deadlines folded into `get_next_event`'s timeout: a binary min-heap with lazy
//! cancellation.
//!
//! The server and load generator keep ~10^5 timers (one idle timeout per
//! connection), almost all of which are cancelled or pushed back before they fire. A
//! heap entry is therefore never searched for: cancelling bumps the slot's
//! generation, and stale entries are dropped when they reach the top, or all at once
//! when they outnumber the live ones (so memory stays proportional to live timers).
//! The slots are cut to the highest one in use and the heap's capacity follows
//! it (`table_shrink`): a server that timed 10,000 slow clients kept ~1 MiB of
//! heap after they had left.

use crate::table_shrink;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Names one timer for [`EventQueue::cancel_timer`](crate::EventQueue::cancel_timer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    deadline: Instant,
    sequence: u64,
    index: u32,
    generation: u32,
}

struct Slot {
    generation: u32,
    token: u64,
    live: bool,
}

/// The timers of one queue.
#[derive(Default)]
pub(crate) struct TimerHeap {
    heap: BinaryHeap<Reverse<Entry>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
    sequence: u64,
    /// Generation of slots made again after a cut: above every generation cut.
    floor: u32,
}

impl TimerHeap {
    pub(crate) fn add(&mut self, deadline: Instant, token: u64) -> TimerId {
        let slots = &self.slots;
        let index = match table_shrink::pop_free(&mut self.free, slots.len(), |i| !slots[i].live) {
            Some(i) => i as u32,
            None => {
                self.slots.push(Slot {
                    generation: self.floor,
                    token: 0,
                    live: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.token = token;
        slot.live = true;
        let generation = slot.generation;
        self.sequence += 1;
        self.heap.push(Reverse(Entry {
            deadline,
            sequence: self.sequence,
            index,
            generation,
        }));
        self.live += 1;
        TimerId { index, generation }
    }

    pub(crate) fn cancel(&mut self, id: TimerId) -> bool {
        match self.slots.get_mut(id.index as usize) {
            Some(slot) if slot.live && slot.generation == id.generation => {
                self.release(id.index);
                if self.heap.len() > 1024 && self.heap.len() > 2 * self.live {
                    self.compact();
                }
                true
            }
            _ => false,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The earliest live deadline, dropping cancelled entries on the way.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.is_live(top) {
                return Some(top.deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// Pops one timer whose deadline is at or before `now`, returning its token.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<u64> {
        while let Some(Reverse(top)) = self.heap.peek().copied() {
            if !self.is_live(&top) {
                self.heap.pop();
                continue;
            }
            if top.deadline > now {
                self.shrink_heap();
                return None;
            }
            self.heap.pop();
            let token = self.slots[top.index as usize].token;
            self.release(top.index);
            return Some(token);
        }
        self.shrink_heap();
        None
    }

    fn is_live(&self, e: &Entry) -> bool {
        // A stale entry may name a slot that was cut.
        self.slots
            .get(e.index as usize)
            .is_some_and(|slot| slot.live && slot.generation == e.generation)
    }

    fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.live = false;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
        if index as usize + 1 == self.slots.len() {
            let floor = &mut self.floor;
            table_shrink::cut_vacant_tail(
                &mut self.slots,
                |s| !s.live,
                |s| *floor = (*floor).max(s.generation),
            );
            table_shrink::trim_free_list(&mut self.free, self.slots.len());
        }
    }

    fn compact(&mut self) {
        let entries = std::mem::take(&mut self.heap).into_vec();
        let kept: Vec<_> = entries
            .into_iter()
            .filter(|Reverse(e)| self.is_live(e))
            .collect();
        self.heap = BinaryHeap::from(kept);
        self.shrink_heap();
    }

    /// Gives back the heap's capacity once it is four times its entries
    /// (after a compaction, or as timers fire and stale entries pop).
    fn shrink_heap(&mut self) {
        let keep = self.heap.len().max(table_shrink::SHRINK_MIN / 2);
        if self.heap.capacity() > keep * 4 {
            self.heap.shrink_to(keep * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn expires_in_deadline_order_and_fifo_on_ties() {
        let mut t = TimerHeap::default();
        let now = Instant::now();
        t.add(now + Duration::from_millis(5), 5);
        t.add(now + Duration::from_millis(1), 1);
        t.add(now + Duration::from_millis(1), 2);
        let later = now + Duration::from_millis(10);
        let got: Vec<_> = std::iter::from_fn(|| t.pop_expired(later)).collect();
        assert_eq!(got, vec![1, 2, 5]);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn cancelled_timers_never_fire_and_memory_is_reclaimed() {
        let mut t = TimerHeap::default();
        let now = Instant::now();
        let ids: Vec<_> = (0..100_000).map(|i| t.add(now, i)).collect();
        for id in &ids[..99_999] {
            assert!(t.cancel(*id));
        }
        assert!(!t.cancel(ids[0]), "double cancel must be refused");
        assert!(
            t.heap.len() < 3000,
            "heap kept {} stale entries",
            t.heap.len()
        );
        assert_eq!(t.pop_expired(now), Some(99_999));
        assert_eq!(t.pop_expired(now), None);
        // A reused slot does not answer to an old id.
        let fresh = t.add(now, 7);
        assert!(!t.cancel(ids[fresh.index as usize]) || ids[fresh.index as usize] == fresh);
    }

    #[test]
    fn a_crowd_that_leaves_takes_its_slots_and_heap_with_it() {
        let mut t = TimerHeap::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        // Survivors at the lowest slots; the crowd leaves in every order.
        let keep: Vec<_> = (0..4).map(|i| t.add(later, i)).collect();
        let crowd: Vec<_> = (0..10_000).map(|i| t.add(later, 100 + i)).collect();
        let grown = (t.slots.capacity(), t.heap.capacity());
        for (n, id) in crowd.iter().enumerate().filter(|(n, _)| n % 3 == 1) {
            assert!(t.cancel(*id), "{n}");
        }
        for id in crowd.iter().step_by(3) {
            assert!(t.cancel(*id));
        }
        for id in crowd.iter().skip(2).step_by(3) {
            assert!(t.cancel(*id));
        }
        assert_eq!(
            t.slots.len(),
            table_shrink::SHRINK_MIN,
            "cut down to the floor"
        );
        assert!(
            t.slots.capacity() <= 2 * table_shrink::SHRINK_MIN,
            "slot capacity {} (was {})",
            t.slots.capacity(),
            grown.0
        );
        // The heap compacts (and gives capacity back) while over 1,024
        // entries: what is left is under two thousand.
        assert!(
            t.heap.capacity() <= 2 * table_shrink::SHRINK_MIN,
            "heap capacity {} (was {})",
            t.heap.capacity(),
            grown.1
        );
        // The slots under the floor are taken first (entries for cut slots
        // skipped), then slots are made again past it: an id of the crowd
        // cannot cancel the timer that takes its slot number again.
        let below = table_shrink::SHRINK_MIN - keep.len();
        let fresh: Vec<_> = (0..below + 10)
            .map(|i| t.add(now, 1000 + i as u64))
            .collect();
        assert!(fresh[..below]
            .iter()
            .all(|f| (f.index as usize) < table_shrink::SHRINK_MIN));
        let made_again = &fresh[below..];
        for (f, old) in made_again.iter().zip(&crowd[below..]) {
            assert_eq!(f.index, old.index, "the same slot number");
            assert!(!t.cancel(*old), "a stale id cancelled a new timer");
        }
        let fired: Vec<_> = std::iter::from_fn(|| t.pop_expired(now)).collect();
        assert_eq!(fired.len(), below + 10, "every new timer fires");
        let fired: Vec<_> = std::iter::from_fn(|| t.pop_expired(later)).collect();
        assert_eq!(fired, vec![0, 1, 2, 3]);
        assert!(
            keep.iter().all(|id| !t.cancel(*id)),
            "fired timers are gone"
        );
    }
}
