//! The proxy's side of reclaiming idle connections when descriptors run out
//! (the server's is `worker/reclaim.rs`, which says why).
//!
//! The proxy holds two kinds of idle descriptor: pooled origin connections and
//! idle keep-alive clients. Pooled origin connections go first (losing one
//! costs a connect later, no client notices), oldest first; then idle clients,
//! oldest first. As in the server, the client that met `EMFILE` has been shed
//! already; the batch makes room for the clients behind it.

use super::Relay;

/// Idle descriptors closed, at most, when an accept met `EMFILE`.
pub(super) const EXHAUSTED_BATCH: usize = 32;

impl Relay {
    /// Closes up to `n` idle descriptors: pooled origin connections, then idle
    /// clients, oldest first — never the more recently active half of the idle
    /// clients (`worker/reclaim.rs` says why). Returns how many it closed.
    pub(super) fn reclaim_idle(&mut self, n: usize) -> usize {
        // The pool is a stack: its bottom is the longest idle.
        let from_pool = n.min(self.pool.len());
        let pooled: Vec<usize> = self.pool.drain(..from_pool).collect();
        for o in pooled {
            self.close_origin(o);
        }
        let mut idle: Vec<_> = (0..self.clients.len())
            .filter(|&i| self.client_idle(i))
            .map(|i| (self.clients[i].deadline, i))
            .collect();
        let from_clients = (n - from_pool).min(idle.len().div_ceil(2));
        if from_clients > 0 && from_clients < idle.len() {
            idle.select_nth_unstable(from_clients - 1);
        }
        for &(_, i) in &idle[..from_clients] {
            self.close_client(i);
        }
        self.report.idle_reclaimed += (from_pool + from_clients) as u64;
        from_pool + from_clients
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
