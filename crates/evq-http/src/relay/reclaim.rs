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

/// A keep-alive client in use active this recently is not closed for room:
/// between two of its requests it is idle for microseconds, and a user
/// connected before the crowd must not be the one reset (the fault table's
/// exhaustion row once saw 1 live request in 63,741 reset so).
pub(crate) const RECENTLY_ACTIVE: std::time::Duration = std::time::Duration::from_secs(1);

/// What to close for room, in the order above: clients answered once, then
/// pooled origin connections, then keep-alive clients in use. Shared by
/// both relays (the completion relay's is `completion_relay.rs`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Victims {
    /// Idle clients answered once (or not at all), longest idle first.
    pub(crate) clients_first: Vec<usize>,
    /// Pooled origin connections to close from the pool's bottom (its
    /// longest idle: the pool is a stack).
    pub(crate) from_pool: usize,
    /// Idle keep-alive clients in use, longest idle first.
    pub(crate) clients_then: Vec<usize>,
}

impl Victims {
    /// How many descriptors they are.
    pub(crate) fn count(&self) -> usize {
        self.clients_first.len() + self.from_pool + self.clients_then.len()
    }
}

/// Up to `n` victims among the idle clients `(in use, deadline, slot)` and
/// a pool of `pool` connections of which the last `pool_kept` stay.
pub(crate) fn victims(
    idle: &mut [(bool, std::time::Instant, usize)],
    pool: usize,
    pool_kept: usize,
    n: usize,
) -> Victims {
    idle.sort_unstable();
    let singles = idle.iter().take_while(|(in_use, ..)| !in_use).count();
    let clients_first: Vec<usize> = idle[..singles].iter().take(n).map(|v| v.2).collect();
    let from_pool = (n - clients_first.len()).min(pool.saturating_sub(pool_kept));
    let clients_then = idle[singles..]
        .iter()
        .take(n - clients_first.len() - from_pool)
        .map(|v| v.2)
        .collect();
    Victims {
        clients_first,
        from_pool,
        clients_then,
    }
}

impl Relay {
    /// Closes up to `n` idle descriptors in the order above — never the more
    /// recently active half of the idle clients (`worker/reclaim.rs` says
    /// why), nor a keep-alive client in use active within
    /// [`RECENTLY_ACTIVE`]. Returns how many it closed.
    pub(super) fn reclaim_idle(&mut self, n: usize) -> usize {
        // An idle client's deadline is its last activity plus the idle
        // timeout: one past this was active within the last second.
        let quiet_until = crate::sys::later(
            self.now,
            self.cfg.idle_timeout.saturating_sub(RECENTLY_ACTIVE),
        );
        let mut idle: Vec<_> = (0..self.clients.len())
            .filter(|&i| self.client_idle(i))
            .filter(|&i| self.clients[i].exchanges <= 1 || self.clients[i].deadline <= quiet_until)
            .map(|i| {
                let c = &self.clients[i];
                (c.exchanges > 1, c.deadline, i)
            })
            .collect();
        idle.sort_unstable();
        idle.truncate(idle.len().div_ceil(2));
        let v = victims(&mut idle, self.pool.len(), 0, n);
        for &i in &v.clients_first {
            self.close_client(i);
        }
        let pooled: Vec<usize> = self.pool.drain(..v.from_pool).collect();
        for o in pooled {
            self.close_origin(o);
        }
        for &i in &v.clients_then {
            self.close_client(i);
        }
        let closed = v.count();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn singles_then_the_pool_then_clients_in_use_oldest_first() {
        let t = Instant::now();
        let at = |s| t + Duration::from_secs(s);
        let mut idle = vec![
            (true, at(1), 10),
            (false, at(5), 11),
            (false, at(2), 12),
            (true, at(0), 13),
        ];
        let v = victims(&mut idle, 3, 0, 10);
        assert_eq!(v.clients_first, [12, 11]);
        assert_eq!(v.from_pool, 3);
        assert_eq!(v.clients_then, [13, 10]);
        assert_eq!(v.count(), 7);
        // The pool's last connections stay; fewer asked, fewer given.
        let v = victims(&mut idle, 3, 2, 4);
        assert_eq!(
            (v.clients_first.len(), v.from_pool, v.clients_then),
            (2, 1, vec![13])
        );
        assert_eq!(victims(&mut idle, 3, 0, 1).count(), 1);
    }
}
