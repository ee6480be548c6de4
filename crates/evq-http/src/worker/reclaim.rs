//! Reclaiming idle keep-alive connections when descriptors or the connection
//! limit run out (issue 19, hostile item 3).
//!
//! An idle keep-alive connection holds a descriptor and a `--max-conns` slot
//! for nothing but the chance of a next request. Under a low `RLIMIT_NOFILE`,
//! 53 idle clients held every descriptor and each new client was reset until
//! the idle timeout (60 s) freed one. HTTP lets a server close an idle
//! connection at any time (RFC 9112 §9.3.1: the client must be ready to retry
//! on a new one), so when a slot is missing the oldest idle connections go
//! first, as nginx's `ngx_drain_connections` does:
//!
//! - over `--max-conns`, the oldest idle connection makes room for the new
//!   one, which loses nothing;
//! - out of descriptors, the oldest idle connection is closed for the client
//!   that met `EMFILE`, which stays in the listen queue and is accepted on the
//!   next turn (`intake.rs`); only with nothing idle is it shed (the
//!   spare-descriptor trick, `evq_os::Acceptor`), and then a batch of idle
//!   connections is closed at once so the clients behind it get in.
//!
//! Idle means: no request begun, nothing to send, not lingering. The order is
//! a segmented LRU (as caches protect what is used more than once):
//! connections that have answered one request go first, least recently
//! active first (by the worker's count of connection events, an exact order);
//! connections that have answered several — keep-alive clients in use, whose
//! next request may be on its way — only after them. With the millisecond
//! deadlines this once used, ties went to the lowest slots, the long-lived
//! busy clients: the fault table's four live clients were closed in one batch
//! while a crowd of one-request connections was arriving, their requests lost
//! in flight. A scan over the worker's connections finds them; it runs only
//! when a slot is missing.

use super::Worker;
use std::sync::atomic::Ordering;

/// Idle connections closed, at most, when an accept met `EMFILE` (nginx's
/// batch): enough for a burst of clients to get in after one shed — and
/// never more than half of the worker's idle connections, so the more
/// recently used half stays (a worker's idle set can be smaller than the
/// batch, and then the batch took every keep-alive client in use too).
pub(super) const EXHAUSTED_BATCH: usize = 32;

impl Worker {
    /// Closes up to `n` idle keep-alive connections in reclaim order (the
    /// module says which; with `spare_half`, never more than half of them);
    /// returns how many it closed.
    pub(super) fn reclaim_idle(&mut self, n: usize, spare_half: bool) -> usize {
        let mut idle: Vec<(bool, u64, usize)> = (0..self.conns.len())
            .filter(|&i| self.is_idle(i))
            .map(|i| {
                let c = &self.conns[i];
                (c.answered > 1, c.last_active, i)
            })
            .collect();
        let n = if spare_half {
            n.min(idle.len().div_ceil(2))
        } else {
            n.min(idle.len())
        };
        if n == 0 {
            return 0;
        }
        if n < idle.len() {
            idle.select_nth_unstable(n - 1);
        }
        for &(_, _, i) in &idle[..n] {
            self.close_conn(i);
        }
        self.shared.counters[self.id].reclaimed(n);
        n
    }

    fn is_idle(&self, i: usize) -> bool {
        let c = &self.conns[i];
        c.fd >= 0 && !c.in_request && c.in_len == 0 && !c.lingering && !self.has_output(i)
    }

    /// Takes one of the `--max-conns` slots shared by all workers for a new
    /// connection, closing this worker's oldest idle connection if none is
    /// free. False if every slot is busy.
    pub(super) fn take_slot(&mut self) -> bool {
        loop {
            if self.shared.open.fetch_add(1, Ordering::Relaxed) < self.max_conns {
                return true;
            }
            self.shared.open.fetch_sub(1, Ordering::Relaxed);
            if self.reclaim_idle(1, false) == 0 {
                return false;
            }
        }
    }
}
