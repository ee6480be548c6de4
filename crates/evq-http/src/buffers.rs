//! Spare connection buffers, kept in proportion to the connections open.
//!
//! Allocating and zeroing an 8 KiB head buffer per connection costs more than
//! the rest of a small request, so the server and the proxy keep the buffers
//! of connections that went idle or closed and hand them to the next ones.
//! Kept without a bound tied to load, though, a pool remembers the worst
//! minute forever: 300 clients trickling one byte a second left 300 buffers
//! (2.4 MiB) pooled after they had gone, and the fault suite rightly called it
//! memory that does not return to its baseline (issue 19).
//!
//! The rule here: at most `open + floor` spares, where `open` is the number of
//! connections the loop holds now. Steady churn (as many connections arriving
//! as leaving) finds a spare for every newcomer; a crowd that leaves takes
//! its buffers with it, two per close once the pool is over its bound; and
//! what is dropped is counted into an [`evq_os::memory::Releaser`], which
//! gives the allocator's free pages back to the system after a megabyte, or
//! when the last connection has gone.

use evq_os::memory::Releaser;

/// Spares kept even with no connection open (enough for a burst of small
/// requests to start without allocating).
pub(crate) const POOL_FLOOR: usize = 32;

/// A pool of spare byte buffers, bounded by the connections open.
#[derive(Debug)]
pub(crate) struct BufferPool {
    spare: Vec<Vec<u8>>,
    /// A buffer over this capacity is dropped rather than kept (one huge reply
    /// must not pin its buffer for the next small one).
    max_capacity: usize,
    /// Spares kept with no connection open.
    floor: usize,
    releaser: Releaser,
}

impl BufferPool {
    /// An empty pool keeping buffers up to `max_capacity` bytes.
    pub(crate) fn new(max_capacity: usize) -> Self {
        Self::with_floor(max_capacity, POOL_FLOOR)
    }

    /// An empty pool keeping buffers up to `max_capacity` bytes, and `floor`
    /// spares with no connection open (fewer than [`POOL_FLOOR`] where the
    /// buffers are large: 32 of a file's 64 KiB chunks are 2 MiB).
    pub(crate) fn with_floor(max_capacity: usize, floor: usize) -> Self {
        Self {
            spare: Vec::new(),
            max_capacity,
            floor,
            releaser: Releaser::new(),
        }
    }

    /// A spare buffer, if one is kept (its contents are whatever it held).
    pub(crate) fn take(&mut self) -> Option<Vec<u8>> {
        self.spare.pop()
    }

    /// Takes `buf` back while `open` connections remain. Keeps it if it fits
    /// and the pool is under `open + POOL_FLOOR`; then drops spares down to
    /// that bound, so the pool shrinks as the connections go.
    pub(crate) fn give(&mut self, buf: Vec<u8>, open: usize) {
        let bound = open.saturating_add(self.floor);
        let mut dropped = 0;
        if buf.capacity() > 0 && buf.capacity() <= self.max_capacity && self.spare.len() < bound {
            self.spare.push(buf);
        } else {
            dropped += buf.capacity();
            drop(buf);
        }
        while self.spare.len() > bound {
            dropped += self.spare.pop().map_or(0, |b| b.capacity());
        }
        // The list of spares itself follows them down (10,000 entries are
        // 234 KiB).
        let keep = bound.max(16);
        if self.spare.capacity() > keep * 4 {
            dropped += (self.spare.capacity() - keep * 2) * std::mem::size_of::<Vec<u8>>();
            self.spare.shrink_to(keep * 2);
        }
        if dropped > 0 {
            self.releaser.freed(dropped, open);
        }
    }

    /// Spares held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.spare.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_follow_the_connections_down() {
        let mut pool = BufferPool::new(1 << 20);
        // 300 connections each give a buffer back while 300 are still open.
        for _ in 0..300 {
            pool.give(vec![0; 8192], 300);
        }
        assert_eq!(
            pool.len(),
            300,
            "under the bound: all kept for the next ones"
        );
        // They close one by one (a closing connection with no buffer gives an
        // empty one back).
        for open in (0..300).rev() {
            pool.give(Vec::new(), open);
        }
        assert_eq!(pool.len(), POOL_FLOOR, "nobody left: only the floor stays");
    }

    #[test]
    fn steady_churn_always_finds_a_spare() {
        let mut pool = BufferPool::new(1 << 20);
        let mut allocated = 0;
        for _ in 0..10_000 {
            let buf = pool.take().unwrap_or_else(|| {
                allocated += 1;
                vec![0; 8192]
            });
            pool.give(buf, 100);
        }
        assert_eq!(allocated, 1, "one buffer serves a churn of one at a time");
    }

    #[test]
    fn an_oversized_buffer_is_not_kept_and_capacity_is_what_counts() {
        let mut pool = BufferPool::new(64 * 1024);
        pool.give(Vec::with_capacity(1 << 20), 10);
        pool.give(Vec::new(), 10);
        assert_eq!(
            pool.len(),
            0,
            "too big, or no allocation at all: nothing kept"
        );
        pool.give(Vec::with_capacity(4096), 10);
        assert_eq!(pool.len(), 1);
    }
}
