//! The proxy's side of reclaiming idle connections when descriptors run out
//! (the server's is `worker/reclaim.rs`, which says why).
//!
//! The proxy holds two kinds of idle descriptor: pooled origin connections and
//! idle keep-alive clients. Idle clients that have finished one exchange go
//! first, oldest first (the crowd that holds descriptors for nothing); then
//! pooled origin connections, oldest first (losing one costs the next exchange
//! a connect; closing them first made every exchange connect anew while a
//! crowd held the descriptors, and the live clients lost 15% of their
//! throughput in the fault table's exhaustion row); then keep-alive clients in
//! use (more than one exchange) — the server's segmented order. A connect to
//! the origin that meets `EMFILE` makes room the same way. As in the server, the client that met `EMFILE` gets the
//! descriptor one of them held; only with nothing idle is it shed, and a batch
//! then makes room for the clients behind it.

use super::Relay;

/// Idle descriptors closed, at most, when an accept met `EMFILE`.
pub(crate) const EXHAUSTED_BATCH: usize = 32;

impl Relay {
    /// Closes up to `n` idle descriptors in the order above — never the more
    /// recently active half of the idle clients (`worker/reclaim.rs` says
    /// why). Returns how many it closed.
    pub(super) fn reclaim_idle(&mut self, n: usize) -> usize {
        let mut idle: Vec<_> = (0..self.clients.len())
            .filter(|&i| self.client_idle(i))
            .map(|i| {
                let c = &self.clients[i];
                (c.exchanges > 1, c.deadline, i)
            })
            .collect();
        idle.sort_unstable();
        idle.truncate(idle.len().div_ceil(2));
        let singles = idle.iter().take_while(|(in_use, ..)| !in_use).count();
        let mut closed = 0;
        for &(_, _, i) in idle[..singles].iter().take(n) {
            self.close_client(i);
            closed += 1;
        }
        // The pool is a stack: its bottom is the longest idle.
        let from_pool = (n - closed).min(self.pool.len());
        let pooled: Vec<usize> = self.pool.drain(..from_pool).collect();
        for o in pooled {
            self.close_origin(o);
        }
        closed += from_pool;
        for &(_, _, i) in idle[singles..].iter().take(n - closed) {
            self.close_client(i);
            closed += 1;
        }
        self.report.idle_reclaimed += closed as u64;
        closed
    }

    /// No exchange, nothing buffered either way, not closing.
    fn client_idle(&self, i: usize) -> bool {
        let c = &self.clients[i];
        c.fd >= 0
            && !c.exchange
            && c.in_len == 0
            && c.out_pos >= c.out.len()
            && !c.close_after
            && !c.lingering
    }
}
