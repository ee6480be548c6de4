//! Tables that give back what a crowd made them grow.
//!
//! The queue's tables — registrations by descriptor number, timer slots and
//! their heap, a completion ring's operation slots — grow to the most the
//! program ever held at once, and a `Vec` never gives capacity back by
//! itself. A server that held 10,000 slow clients for a minute kept ~2 MiB
//! of such tables after they had all gone: the allocator cannot return them,
//! because they are in use (issue 19's fault table asks that memory return to
//! within 2 MiB of its baseline once the clients leave).
//!
//! The rule, the same for every table here: **a table is as long as its
//! highest slot in use, and never shorter than [`SHRINK_MIN`] slots.**
//! Releasing the last slot cuts every vacant slot below it too, and the
//! capacity follows once it is four times what is left. (The floor matters
//! for the interest table: registering a number past its end asks the kernel
//! whether the descriptor is open, so a table cut to a server's few
//! connections would pay a system call on every accept of a short-lived
//! one; below 1,024 slots a table is 16 KiB.)
//! Each slot is cut at most once per time it was made, so the cost is O(1)
//! per release, amortized; a steady server whose top slot stays in use never
//! cuts anything. One long-lived connection in a high slot holds the slots
//! below it (nothing moves: slot numbers are in the tokens the kernel hands
//! back), and they go when it does.
//!
//! Two consequences for the tables' users:
//!
//! - a free list may name slots that were cut; it is popped until it yields
//!   a slot that exists and is vacant (an entry for a slot made again and in
//!   use is skipped the same way), and emptied outright when it grows past
//!   twice the table;
//! - a cut slot takes its generation with it, so a table that stamps
//!   generations into keys makes slots again at a *floor* above every
//!   generation it cut: a stale key for a cut slot never matches its next
//!   tenant.

/// Tables are never cut below this many slots, nor their capacity given back
/// below it (their memory is noise).
pub(crate) const SHRINK_MIN: usize = 1024;

/// Pops the vacant slots off the end of `table` while it is longer than
/// [`SHRINK_MIN`], handing each to `cut`, and gives back capacity once it is
/// more than four times the length.
pub(crate) fn cut_vacant_tail<T>(
    table: &mut Vec<T>,
    vacant: impl Fn(&T) -> bool,
    mut cut: impl FnMut(T),
) {
    while table.len() > SHRINK_MIN && table.last().is_some_and(&vacant) {
        if let Some(slot) = table.pop() {
            cut(slot);
        }
    }
    shrink_capacity(table);
}

/// Gives back capacity above four times the length (keeping twice it, and
/// never less than [`SHRINK_MIN`]).
pub(crate) fn shrink_capacity<T>(v: &mut Vec<T>) {
    let len = v.len().max(SHRINK_MIN / 2);
    if v.capacity() > len.saturating_mul(4) {
        v.shrink_to(len * 2);
    }
}

/// A free list popped from its end: the next entry naming a slot below `len`
/// that `vacant` says is free. Entries for cut slots are dropped on the way.
pub(crate) fn pop_free(
    free: &mut Vec<u32>,
    len: usize,
    vacant: impl Fn(usize) -> bool,
) -> Option<usize> {
    while let Some(i) = free.pop() {
        let i = i as usize;
        if i < len && vacant(i) {
            return Some(i);
        }
    }
    None
}

/// Drops a free list's entries for cut slots once it holds more than twice
/// the table (amortized: each pass removes at least half of what it reads).
pub(crate) fn trim_free_list(free: &mut Vec<u32>, len: usize) {
    if free.len() > len.saturating_mul(2).max(SHRINK_MIN) {
        free.retain(|&i| (i as usize) < len);
        shrink_capacity(free);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vacant_tail_is_cut_and_capacity_follows() {
        let mut t: Vec<Option<u32>> = (0..100_000).map(Some).collect();
        for s in &mut t[5..] {
            *s = None;
        }
        t[3] = None;
        t[2000] = Some(7);
        let mut cut = 0;
        cut_vacant_tail(&mut t, Option::is_none, |_| cut += 1);
        assert_eq!(t.len(), 2001, "cut down to the highest slot in use");
        assert_eq!(cut, 100_000 - 2001);
        assert!(t.capacity() <= 2 * 2001, "capacity {}", t.capacity());
        t[2000] = None;
        cut_vacant_tail(&mut t, Option::is_none, |_| cut += 1);
        assert_eq!(t.len(), SHRINK_MIN, "never below the floor");
    }

    #[test]
    fn capacity_is_kept_while_the_table_is_a_quarter_full() {
        let mut v: Vec<u64> = Vec::with_capacity(8192);
        v.extend(0..2048);
        shrink_capacity(&mut v);
        assert_eq!(v.capacity(), 8192);
        v.truncate(2047);
        shrink_capacity(&mut v);
        assert!(v.capacity() >= 4094 && v.capacity() < 8192);
    }

    #[test]
    fn a_free_list_skips_cut_slots_and_slots_in_use() {
        let in_use = [false, true, false];
        let mut free = vec![0, 1, 2, 2000];
        assert_eq!(pop_free(&mut free, 3, |i| !in_use[i]), Some(2));
        assert_eq!(pop_free(&mut free, 3, |i| !in_use[i]), Some(0));
        assert_eq!(pop_free(&mut free, 3, |i| !in_use[i]), None);
        let mut free: Vec<u32> = (0..5000).collect();
        trim_free_list(&mut free, 10);
        assert_eq!(free, (0..10).collect::<Vec<_>>());
    }
}
