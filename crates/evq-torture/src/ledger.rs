//! What each consumer counts, and the verdict over a whole case.
//!
//! The promise under test is the paper's: every event that happens is delivered,
//! once, to the right queue. In the ledger's terms, for one case:
//!
//! - **lost**: records left unread, at the end, on channels that were watched and
//!   armed — the consumer reads a channel only when an event (or the state that
//!   `declare_interest` returns) says so, so an event that never came leaves its
//!   data behind; also timers that never fired, notifications never seen, and
//!   wake-one connections never accepted;
//! - **duplicated**: one token twice in one batch (coalescing broken), a record read
//!   twice, a connection accepted twice;
//! - **stale**: an event for a registration after it was revoked, modified, closed,
//!   reused or forgotten (a retired token), for a oneshot registration already
//!   spent, or for a cancelled timer;
//! - **misdelivered**: an event whose descriptor is not its token's, a record of
//!   another channel instance or out of order;
//! - **late**: a record read more than [`DELAY_BOUND_MS`] after it was written while
//!   its channel was watched — starvation.
//!
//! Everything else is context: `spurious` events (the descriptor had nothing by the
//! time it was read — allowed, the paper says a reported descriptor can become
//! unready), records discarded by the consumer closing a channel on purpose, the
//! overflows the backends recovered from, the churn done.

use serde::{Deserialize, Serialize};

/// The starvation bound: a record written while its channel is watched is read
/// within this long. Generous for a loaded 2-core machine; the worst seen is
/// reported as `max_delay_ms`.
pub const DELAY_BOUND_MS: u64 = 2_000;

/// One consumer's counts (summed over consumers for a case); the fields mean what
/// [`crate::CaseReport`]'s fields of the same names do.
#[derive(Clone, Debug, Default, Serialize)]
#[allow(missing_docs)]
pub struct Ledger {
    pub events: u64,
    pub records: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub stale: u64,
    pub misdelivered: u64,
    pub late: u64,
    pub max_delay_ns: u64,
    pub spurious: u64,
    pub discarded_on_close: u64,
    pub timers_fired: u64,
    pub timers_cancelled: u64,
    pub timers_lost: u64,
    pub timers_early: u64,
    pub notifies: u64,
    pub listener_events: u64,
    pub accepted: u64,
    pub overflows: u64,
    pub rebuilds: u64,
    pub stale_filtered: u64,
    pub modifies: u64,
    pub revokes: u64,
    pub reuses: u64,
    pub forgets: u64,
    pub recreates: u64,
    pub checkpoints: u64,
    pub wrong_state: u64,
}

impl Ledger {
    /// Adds another consumer's counts.
    pub fn add(&mut self, o: &Ledger) {
        macro_rules! sum {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        sum!(
            events,
            records,
            lost,
            duplicated,
            stale,
            misdelivered,
            late,
            spurious,
            discarded_on_close,
            timers_fired,
            timers_cancelled,
            timers_lost,
            timers_early,
            notifies,
            listener_events,
            accepted,
            overflows,
            rebuilds,
            stale_filtered,
            modifies,
            revokes,
            reuses,
            forgets,
            recreates,
            checkpoints,
            wrong_state
        );
        self.max_delay_ns = self.max_delay_ns.max(o.max_delay_ns);
    }

    /// True when nothing was lost, duplicated, stale, misdelivered or late.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.timers_lost == 0
            && self.duplicated == 0
            && self.stale == 0
            && self.misdelivered == 0
            && self.late == 0
            && self.timers_early == 0
    }
}

/// A broken promise, with the operations that led to it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Failure {
    /// `lost`, `stale`, `duplicated`, `misdelivered`, `late`, …
    pub kind: String,
    /// Which consumer saw it.
    pub consumer: usize,
    /// When, in milliseconds since the case began.
    pub at_ms: f64,
    /// The descriptor concerned (-1: none).
    pub fd: i32,
    /// The token concerned (0: none).
    pub token: u64,
    /// What was wrong.
    pub detail: String,
    /// The consumer's operations on this descriptor or token, oldest first.
    pub trace: Vec<String>,
}

/// One operation a consumer did or saw, for failure reports.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// When, in nanoseconds since the case began.
    pub at_ns: u64,
    /// What: `declare`, `event`, `read`, `revoke`, `reuse`, …
    pub op: &'static str,
    /// The descriptor (-1: none).
    pub fd: i32,
    /// The token (0: none).
    pub token: u64,
    /// A detail: the mode, the records read, the readiness bits…
    pub arg: u64,
}

/// The last operations of one consumer (a ring), to explain a failure.
pub struct Trace {
    steps: Vec<Step>,
    next: usize,
}

const TRACE_LEN: usize = 16_384;

impl Default for Trace {
    fn default() -> Trace {
        Trace {
            steps: Vec::with_capacity(TRACE_LEN),
            next: 0,
        }
    }
}

impl Trace {
    /// Records a step.
    pub fn push(&mut self, step: Step) {
        if self.steps.len() < TRACE_LEN {
            self.steps.push(step);
        } else {
            self.steps[self.next] = step;
        }
        self.next = (self.next + 1) % TRACE_LEN;
    }

    /// The steps on `fd` or with `token`, oldest first: the shortest account of
    /// what happened to the registration that failed (at most the last 60).
    pub fn about(&self, fd: i32, token: u64) -> Vec<String> {
        let ordered = self.steps[self.next.min(self.steps.len())..]
            .iter()
            .chain(&self.steps[..self.next.min(self.steps.len())]);
        let mut lines: Vec<String> = ordered
            .filter(|s| (fd >= 0 && s.fd == fd) || (token != 0 && s.token == token))
            .map(|s| {
                format!(
                    "{:>10.3} ms  {:<18} fd {:>5} token {:#x} {}",
                    s.at_ns as f64 / 1e6,
                    s.op,
                    s.fd,
                    s.token,
                    s.arg
                )
            })
            .collect();
        let skip = lines.len().saturating_sub(60);
        lines.drain(..skip);
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_keeps_the_newest_steps_in_order() {
        let mut t = Trace::default();
        for i in 0..(TRACE_LEN as u64 + 10) {
            t.push(Step {
                at_ns: i,
                op: "x",
                fd: (i % 2) as i32,
                token: 0,
                arg: i,
            });
        }
        let about = t.about(1, 0);
        assert_eq!(about.len(), 60);
        let last: u64 = about[59].rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(last, TRACE_LEN as u64 + 9);
    }

    #[test]
    fn a_ledger_with_any_broken_promise_is_not_clean() {
        assert!(Ledger::default().clean());
        for f in [
            |l: &mut Ledger| l.lost = 1,
            |l: &mut Ledger| l.stale = 1,
            |l: &mut Ledger| l.duplicated = 1,
            |l: &mut Ledger| l.misdelivered = 1,
            |l: &mut Ledger| l.late = 1,
            |l: &mut Ledger| l.timers_lost = 1,
        ] {
            let mut l = Ledger::default();
            f(&mut l);
            assert!(!l.clean());
        }
    }
}
