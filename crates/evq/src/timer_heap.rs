//! Deadlines folded into `get_next_event`'s timeout: a binary min-heap with lazy
//! cancellation.
//!
//! The server and load generator keep ~10^5 timers (one idle timeout per
//! connection), almost all of which are cancelled or pushed back before they fire. A
//! heap entry is therefore never searched for: cancelling bumps the slot's
//! generation, and stale entries are dropped when they reach the top, or all at once
//! when they outnumber the live ones (so memory stays proportional to live timers).

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
}

impl TimerHeap {
    pub(crate) fn add(&mut self, deadline: Instant, token: u64) -> TimerId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
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
                return None;
            }
            self.heap.pop();
            let token = self.slots[top.index as usize].token;
            self.release(top.index);
            return Some(token);
        }
        None
    }

    fn is_live(&self, e: &Entry) -> bool {
        let slot = &self.slots[e.index as usize];
        slot.live && slot.generation == e.generation
    }

    fn release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.live = false;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
    }

    fn compact(&mut self) {
        let entries = std::mem::take(&mut self.heap).into_vec();
        let kept: Vec<_> = entries
            .into_iter()
            .filter(|Reverse(e)| self.is_live(e))
            .collect();
        self.heap = BinaryHeap::from(kept);
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
}
