//! `evq torture`: drives every evq backend hard and keeps an exactly-once ledger of
//! what was produced and what was delivered (issue 19; the paper's promise, as
//! figures a user who must trust evq can read).
//!
//! # What one case does
//!
//! - **Consumers** (1, 2 or 4 threads) each own an [`evq::EventQueue`] and a set of
//!   channels — pipes, Unix socket pairs, TCP loopback connections and eventfds
//!   (RT signals cannot watch an eventfd; they get streams only). A consumer reads
//!   a channel *only* when an event for it arrives, or when `declare_interest`
//!   returns a state that says data is there (the paper's race-free statemask), so
//!   an event that is never delivered leaves data behind.
//! - **Producers** (two threads) write 16-byte records into the channels: channel
//!   instance, sequence number, time written.
//! - **Churn**, from the consumer's seed: modify (new token, new mode), revoke and
//!   revive, close and reuse the number four ways (revoke + `dup2`; `dup2` behind
//!   the queue's back; `EventQueue::close`; `close(2)` + `forget`), eventfds whose
//!   file the producer's copy keeps alive after the consumer's number is gone (a
//!   stale source for epoll), timers set and cancelled, the whole queue dropped and
//!   recreated, batch sizes from 1 to 1,024, zero, short and unbounded timeouts.
//! - A **notifier storm** thread notifies random queues in bursts; a **connector**
//!   makes connections to shared listeners that every queue able to share a
//!   descriptor registers (wake-one where the backend has it).
//! - Then the **drain**: producers stop and flush, consumers re-arm what they had
//!   revoked or spent and wait; a last notification goes to every queue.
//!
//! # The ledger ([`CaseReport`], [`ledger`])
//!
//! 0 **lost** (records unread on watched channels, timers never fired, the last
//! notification never seen, connections never accepted), 0 **duplicated** (a token
//! twice in one batch, a record twice, a connection accepted twice), 0 **stale**
//! (an event for a retired token, a spent oneshot, a cancelled timer), 0
//! **misdelivered**, 0 **late** (a record read more than
//! [`ledger::DELAY_BOUND_MS`] after it was written while watched). A failure
//! carries the consumer's operations on the descriptor or token concerned and the
//! case's seed; [`shrink`] looks for a smaller run with that seed that still fails.
//!
//! # Forced overflow
//!
//! Each case runs in its own process ([`run_isolated`]): the RT-signal backends
//! with `RLIMIT_SIGPENDING` at 32 so their queue overflows (`SIGIO`, then every
//! registration is looked at), io_uring with a 4-entry ring, kmod-ring with a
//! 4-slot result ring (the kernel keeps the rest in its ready list). `overflows_recovered`
//! counts what the queues report (`QueueStats::overflows`).
//!
//! Thread scheduling is not reproducible, so neither is a run, exactly: the seed
//! fixes every choice the consumers and producers make, not the interleaving.

#![deny(missing_docs)]

mod case;
mod channel;
mod churn;
mod consumer;
mod isolate;
pub mod ledger;
mod plan;
mod producer;
mod record;
mod shared;

pub use case::{run_case, Case, CaseReport};
pub use isolate::{run_isolated, OVERFLOW_SIGPENDING, OVERFLOW_URING_ENTRIES};
pub use plan::{cases, Size};

use std::path::Path;

/// Looks for a smaller run of a failed `case` with the same seed that still fails:
/// halving the event target (and the time) while it does, two tries each. Returns
/// the smallest failing case and its report, or `None` if none failed again.
pub fn shrink(program: &Path, leading_args: &[&str], case: &Case) -> Option<(Case, CaseReport)> {
    let mut best = None;
    let mut current = case.clone();
    loop {
        let smaller = Case {
            target_events: if current.target_events == u64::MAX {
                50_000
            } else {
                current.target_events / 2
            },
            max_seconds: (current.max_seconds / 2.0).max(0.5),
            ..current.clone()
        };
        if smaller.target_events < 1_000 {
            return best;
        }
        let failing = (0..2)
            .map(|_| run_isolated(program, leading_args, &smaller))
            .find(|r| !r.passed());
        match failing {
            Some(report) => {
                best = Some((smaller.clone(), report));
                current = smaller;
            }
            None => return best,
        }
    }
}
