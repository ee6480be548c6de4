//! `--overload pulse` for `evq serve --io completion` and `evq proxy --io
//! completion`: the readiness pulse (`overload.rs`), rebuilt for a loop whose
//! accept the kernel runs.
//!
//! Why it has to differ: a multishot accept takes every connection the listen
//! queue holds each time the loop enters the kernel, so the queue never
//! stands where `TCP_INFO` on the listener could see it; it stands in the
//! ring, as accepted connections whose requests wait, unread, behind other
//! completions. At three times its capacity with no control (1 thread,
//! `--work-us 400`, clients that give up after 0.5 s) the completion server
//! answered no request in time after the warm-up: every answer went to a
//! client that had left.
//!
//! The queue it counts: new connections accepted whose first bytes the loop
//! has not read yet. Bytes it reads are a request taken up at once, or part
//! of one that waits for its client (a trickled head), not for the loop; a
//! connection that sends nothing for an interval and [`EXPIRY_ENTRIES`]
//! drains of the ring is idle (`evq dead`'s), and drops out.
//!
//! What it measures: how long a new connection's first request waited before
//! it was taken up — `TCP_INFO`'s time since the request's packet, read for
//! the first one in each round of completions (the loop's own clock cannot
//! see it: a connection accepted and answered in one round waited in the
//! listen queue since the round before). CoDel's test on it (the least wait
//! over an `interval` above `queue_target`) says the queue stands; a burst
//! worked off within the interval does not. Keep-alive clients are not
//! measured: only work that new clients wait for counts, as in the readiness
//! pulse.
//!
//! What it does while the queue stands and more new connections wait than
//! the loop takes up in `queue_target`: the loop cancels its accept and
//! stops listening (`shutdown`), so the kernel answers each new client's SYN
//! with a reset, in softirq, at no cost to the loop (those already queued
//! are reset too: the slow refusals); it serves the batch it holds and
//! listens again when at most [`PULSE_LEAD`] wait, so the next arrivals are
//! queued by the time it is done. Pulses end when connections arrive no
//! faster than the loop took up new ones over the last interval. The
//! listener never stays shut longer than an `interval`.

use crate::overload::{self, PULSE_LEAD};
use evq::completion::{Completion, CompletionRing, OpId};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Fewest new connections a batch may hold, whatever the rate estimate says.
const MIN_BATCH: usize = 4;
/// Drains of the ring's completions after which (and an interval) a
/// connection whose request was never seen counts as idle: its recv, armed
/// after its accept, has had a drain more to bring its request.
const EXPIRY_ENTRIES: u32 = 3;
/// Fewest arrivals an open pulse counts before it may judge the arrival rate
/// slower than the service.
const MIN_SAMPLE: u32 = 4;
/// Intervals after pulses end in which a long wait starts them again at
/// once (the readiness pulse's memory, `overload.rs`).
const MEMORY: u32 = 10;

/// What the loop does with its listener after a round of completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing changes.
    Keep,
    /// Cancel the accept and stop listening.
    StopListening,
    /// Listen again and arm the accept.
    ListenAgain,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Listening, no overload seen.
    Normal,
    /// Not listening since `since`, serving a batch.
    Closed { since: Instant },
    /// Pulsing, listening again since `since`; `arrivals` accepted since.
    Open { since: Instant, arrivals: u32 },
}

/// A completion loop's listening socket, as the pulse shuts and opens it.
pub(crate) struct PulsedListener {
    pub(crate) fd: RawFd,
    /// Where it listens (a socket bound to port 0 loses its port when shut).
    pub(crate) addr: SocketAddr,
    pub(crate) backlog: i32,
    /// The loop's tokens for its multishot accept and for its own cancels.
    pub(crate) accept_token: u64,
    pub(crate) cancel_token: u64,
}

/// One loop's pulse state.
#[derive(Clone, Debug)]
pub(crate) struct Pulse {
    target: Duration,
    interval: Duration,
    /// New connections first answered in the current interval, and its start.
    served: u32,
    since: Instant,
    /// New connections first answered per second over the last interval.
    rate: f64,
    /// CoDel: least wait of a first answer this interval, and whether the
    /// last interval found the queue standing.
    min_wait: Option<Duration>,
    standing: bool,
    /// The latest wait measured, and when pulses last ended.
    last_wait: Duration,
    ended: Option<Instant>,
    phase: Phase,
    /// The accept cancelled when the listener was last shut, until its final
    /// completion comes: no new accept is armed before (see
    /// [`Pulse::accept_ended`]).
    ending: Option<OpId>,
    /// Times the loop drained the ring's completions so far.
    entry: u32,
    /// New connections whose request has not been seen yet, by the count of
    /// drains when they were accepted: that count, when, how many. Their
    /// request may wait in the ring, unseen behind other completions (under
    /// overload thousands queue there); but one still unseen an `interval`
    /// and [`EXPIRY_ENTRIES`] drains later has not sent it (an idle
    /// connection, as `evq dead` holds), and drops out.
    unseen: VecDeque<(u32, Instant, u32)>,
    unseen_total: usize,
    /// New connections whose first request came and waits in the loop's own
    /// queue, as the loop counts them ([`Pulse::queued`]).
    queued: usize,
    /// Times the listener was shut.
    pub(crate) pulses: u64,
    /// Time spent not listening.
    pub(crate) closed_for: Duration,
}

impl Pulse {
    /// A pulse aiming at `target` of queueing, judged every `interval`.
    pub(crate) fn new(target: Duration, interval: Duration, now: Instant) -> Pulse {
        Pulse {
            target,
            interval,
            served: 0,
            since: now,
            rate: 0.0,
            min_wait: None,
            standing: false,
            last_wait: Duration::ZERO,
            ended: None,
            phase: Phase::Normal,
            ending: None,
            entry: 0,
            unseen: VecDeque::new(),
            unseen_total: 0,
            queued: 0,
            pulses: 0,
            closed_for: Duration::ZERO,
        }
    }

    /// The loop took every completion the kernel had: what was accepted
    /// before has had its request delivered, if it sent one.
    pub(crate) fn drained(&mut self) {
        self.entry = self.entry.wrapping_add(1);
    }

    /// A connection was accepted at `now`; the entry to hand back with its
    /// [`Pulse::request_in`] and [`Pulse::settled`].
    pub(crate) fn accepted(&mut self, now: Instant) -> u32 {
        if let Phase::Open { arrivals, .. } = &mut self.phase {
            *arrivals = arrivals.saturating_add(1);
        }
        match self.unseen.back_mut() {
            Some((e, _, n)) if *e == self.entry => *n += 1,
            _ => self.unseen.push_back((self.entry, now, 1)),
        }
        self.unseen_total += 1;
        self.entry
    }

    /// Takes one connection of `entry` off the unseen count, if it is still
    /// counted there.
    fn unseen_gone(&mut self, entry: u32) {
        // Recent entries are near the back.
        if let Some(e) = self.unseen.iter_mut().rev().find(|e| e.0 == entry) {
            if e.2 > 0 {
                e.2 -= 1;
                self.unseen_total -= 1;
            }
        }
    }

    /// The first bytes of a connection accepted at `entry` came in. The loop
    /// reads them at once: a request they complete is taken up now, and one
    /// they leave unfinished waits for its client, not for the loop, so it
    /// no longer counts as waiting (a crowd of clients trickling heads is
    /// not a queue).
    pub(crate) fn request_in(&mut self, entry: u32) {
        self.unseen_gone(entry);
    }

    /// A connection accepted at `entry` is done with: its first request was
    /// taken up (`answered`), or it closed; `seen` if [`Pulse::request_in`]
    /// was told of it.
    pub(crate) fn settled(&mut self, entry: u32, seen: bool, answered: bool) {
        if answered {
            self.served = self.served.saturating_add(1);
        }
        if !seen {
            self.unseen_gone(entry);
        }
    }

    /// A new connection's first request waited this long before its answer.
    pub(crate) fn waited(&mut self, waited: Duration) {
        self.min_wait = Some(self.min_wait.map_or(waited, |m| m.min(waited)));
        self.last_wait = waited;
    }

    /// A loop that takes up requests after it reads them (the proxy's, quirk
    /// l) says how many new connections' first requests wait in its queue:
    /// they count as waiting until taken up, however long that is.
    pub(crate) fn queued(&mut self, n: usize) {
        self.queued = n;
    }

    /// New connections accepted lately whose first request the loop has not
    /// taken up: those whose first bytes it has not read yet, and those whose
    /// request waits in its queue.
    fn waiting(&self) -> usize {
        self.unseen_total + self.queued
    }

    /// Whether overload was seen: the queue stood in the last interval, or
    /// pulses are under way.
    pub(crate) fn engaged(&self) -> bool {
        self.standing || self.phase != Phase::Normal
    }

    /// Whether the listener is open.
    pub(crate) fn listening(&self) -> bool {
        !matches!(self.phase, Phase::Closed { .. })
    }

    /// Most new requests a batch holds: what the loop answers in `target` at
    /// its recent rate.
    fn batch(&self) -> usize {
        ((self.rate * self.target.as_secs_f64()) as usize).max(MIN_BATCH)
    }

    /// After a round of completions: what to do with the listener.
    pub(crate) fn decide(&mut self, now: Instant) -> Action {
        while let Some(&(entry, at, n)) = self.unseen.front() {
            let old = now.saturating_duration_since(at) >= self.interval
                && self.entry.wrapping_sub(entry) >= EXPIRY_ENTRIES;
            if !old {
                break;
            }
            self.unseen_total -= n as usize;
            self.unseen.pop_front();
        }
        let waiting = self.waiting();
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= self.interval {
            self.rate = f64::from(self.served) / elapsed.as_secs_f64();
            self.standing = self.min_wait.is_some_and(|w| w > self.target);
            self.served = 0;
            self.min_wait = None;
            self.since = now;
        }
        let batch = self.batch();
        // Pulses that ended lately start again on one long wait: the
        // overload was proven (CoDel, too, remembers its dropping state),
        // and a whole interval let in unchecked at three times the capacity
        // is a queue twice the interval long.
        let relapse = self.last_wait > self.target
            && self
                .ended
                .is_some_and(|t| now.saturating_duration_since(t) < self.interval * MEMORY);
        match self.phase {
            Phase::Normal if (self.standing || relapse) && waiting > batch => self.close(now),
            Phase::Normal => Action::Keep,
            Phase::Closed { since } => {
                let shut = now.saturating_duration_since(since);
                if waiting <= PULSE_LEAD || shut >= self.interval {
                    self.closed_for += shut;
                    self.phase = Phase::Open {
                        since: now,
                        arrivals: 0,
                    };
                    Action::ListenAgain
                } else {
                    Action::Keep
                }
            }
            Phase::Open { since, arrivals } => {
                let open_for = now.saturating_duration_since(since);
                if waiting >= batch {
                    return self.close(now);
                }
                // Arrivals no faster than the service (or the listener open a
                // whole interval without filling a batch): the overload is over.
                let slow = arrivals >= MIN_SAMPLE
                    && self.rate > 0.0
                    && f64::from(arrivals) / open_for.as_secs_f64().max(1e-6) <= self.rate;
                if slow || open_for >= self.interval {
                    self.phase = Phase::Normal;
                    self.ended = Some(now);
                }
                Action::Keep
            }
        }
    }

    /// [`Pulse::decide`], carried out on the loop's listener: the accept in
    /// flight (`accept`) is cancelled and the socket shut, or the socket
    /// listens again and, unless the loop waits for a descriptor
    /// (`accept_waiting`), a new multishot accept is armed.
    pub(crate) fn round(
        &mut self,
        now: Instant,
        ring: &mut CompletionRing,
        accept: &mut Option<OpId>,
        accept_waiting: bool,
        l: &PulsedListener,
    ) {
        match self.decide(now) {
            Action::Keep => {}
            Action::StopListening => {
                if let Some(id) = accept.take() {
                    ring.cancel(id, l.cancel_token);
                    self.ending = Some(id);
                }
                overload::stop_listening(l.fd);
                // The cancel ends the accept only when the kernel runs its
                // work (the ring's quirk p): have it run now.
                let _ = ring.run_kernel_work();
            }
            Action::ListenAgain => {
                // A socket that cannot listen again is left as a failed
                // listener is: its accept fails and goes again later.
                let _ = overload::listen_again(l.fd, l.addr, l.backlog);
                if accept.is_none() && !accept_waiting && self.ending.is_none() {
                    *accept = Some(ring.accept_multishot(l.fd, l.accept_token));
                }
            }
        }
    }

    /// An accept's final completion came (`op`): whether the loop should arm
    /// a new one now — it was the accept the pulse cancelled, and the
    /// listener listens again already.
    ///
    /// Why the pulse waits for it: the kernel wakes one accept per new
    /// connection (an accept waits on its listener as an exclusive waiter),
    /// and a cancelled accept stays on the listener's wait queue until the
    /// kernel runs the cancel's work. An accept armed beside it sleeps while
    /// the wake-ups go to the dying one; by the time it is gone the listen
    /// queue can be full, and a full queue wakes nobody again: the loop
    /// stopped accepting for good, listening, with 4,097 clients in the
    /// queue (seen at three times the capacity, 1 run in 3, once listening
    /// again came before the cancel ended).
    pub(crate) fn accept_ended(&mut self, op: OpId) -> bool {
        if self.ending != Some(op) {
            return false;
        }
        self.ending = None;
        self.listening()
    }

    /// Whether a loop with `pulse` (or none) may arm a new accept: its
    /// listener listens and no accept the pulse cancelled is still ending
    /// ([`Pulse::accept_ended`]).
    pub(crate) fn allows_accept(pulse: Option<&Pulse>) -> bool {
        pulse.is_none_or(|p| p.listening() && p.ending.is_none())
    }

    fn close(&mut self, now: Instant) -> Action {
        self.pulses += 1;
        self.phase = Phase::Closed { since: now };
        Action::StopListening
    }
}

/// An accept's completion `c` in a loop with `pulse` (or none): once the
/// accept ends, `accept` forgets it; if it is the accept the pulse cancelled
/// and the listener listens again, its replacement is armed now, unless the
/// loop may not arm one (`may_arm` false: it waits for descriptors, or stops).
pub(crate) fn accept_completed(
    pulse: Option<&mut Pulse>,
    c: &Completion,
    accept: &mut Option<OpId>,
    may_arm: bool,
    ring: &mut CompletionRing,
    (listen_fd, accept_token): (RawFd, u64),
) {
    if c.more() {
        return;
    }
    if *accept == Some(c.op()) {
        *accept = None;
    }
    let replace = pulse.is_some_and(|p| p.accept_ended(c.op()));
    if replace && accept.is_none() && may_arm {
        *accept = Some(ring.accept_multishot(listen_fd, accept_token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn pulse(t0: Instant) -> Pulse {
        Pulse::new(5 * MS, 100 * MS, t0)
    }

    /// An entry at `at`: `new` connections accepted,
    /// then `answer` of the earliest still waiting answered after `wait`.
    struct Rig {
        p: Pulse,
        waiting: VecDeque<u32>,
    }

    impl Rig {
        fn new(t0: Instant) -> Rig {
            Rig {
                p: pulse(t0),
                waiting: VecDeque::new(),
            }
        }

        fn round(&mut self, at: Instant, new: u32, answer: u32, wait: Duration) -> Action {
            self.prepare(at, new, answer, wait);
            self.p.decide(at)
        }

        /// [`Rig::round`] but the decision.
        fn prepare(&mut self, at: Instant, new: u32, answer: u32, wait: Duration) {
            self.p.drained();
            for _ in 0..new {
                let e = self.p.accepted(at);
                self.waiting.push_back(e);
            }
            for _ in 0..answer {
                if let Some(e) = self.waiting.pop_front() {
                    self.p.request_in(e);
                    self.p.settled(e, true, true);
                    self.p.waited(wait);
                }
            }
        }
    }

    #[test]
    fn a_burst_answered_in_time_within_the_interval_is_no_overload() {
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        // 500 connect at once; the first is answered at once, the rest late:
        // the queue drained within the interval.
        assert_eq!(g.round(t0, 500, 1, MS), Action::Keep);
        assert_eq!(g.round(t0 + 100 * MS, 0, 200, 50 * MS), Action::Keep);
        assert_eq!(g.round(t0 + 101 * MS, 0, 0, MS), Action::Keep);
        assert!(g.p.listening());
    }

    #[test]
    fn a_standing_queue_pulses_and_pulses_end_when_arrivals_slow() {
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        // 2,000 new connections a second answered, each after 40 ms: the
        // queue stands. A batch is 2,000 × 5 ms = 10.
        g.round(t0 + 50 * MS, 209, 0, MS);
        let a = g.round(t0 + 100 * MS, 0, 200, 40 * MS);
        assert_eq!(a, Action::Keep, "9 wait: no more than a batch");
        assert_eq!(g.round(t0 + 101 * MS, 41, 0, MS), Action::StopListening);
        assert_eq!(g.p.waiting(), 50);
        assert!(!g.p.listening());
        // Serving the batch: shut until at most PULSE_LEAD wait.
        assert_eq!(g.round(t0 + 104 * MS, 0, 40, 40 * MS), Action::Keep);
        assert_eq!(g.round(t0 + 106 * MS, 0, 8, 40 * MS), Action::ListenAgain);
        assert!(g.p.listening());
        // A batch's worth arrives at once: shut again.
        assert_eq!(g.round(t0 + 107 * MS, 10, 0, MS), Action::StopListening);
        assert_eq!(g.round(t0 + 112 * MS, 0, 11, 40 * MS), Action::ListenAgain);
        // Arrivals slower than 2,000 a second: 4 in 10 ms. Pulses end.
        assert_eq!(g.round(t0 + 122 * MS, 4, 0, MS), Action::Keep);
        assert!(g.p.listening());
        assert_eq!(g.p.pulses, 2);
        assert_eq!(g.p.closed_for, 10 * MS);
        // Back to normal: an interval of quick answers, no standing queue.
        assert_eq!(g.round(t0 + 222 * MS, 50, 4, MS), Action::Keep);
    }

    #[test]
    fn connections_that_never_send_stop_counting_after_an_interval() {
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        // 10,000 idle connections (`evq dead`), then a standing queue.
        g.round(t0, 10_000, 0, MS);
        assert_eq!(g.p.waiting(), 10_000);
        g.round(t0 + 50 * MS, 0, 0, MS);
        // An interval, but not yet three drains: still counted.
        g.round(t0 + 100 * MS, 0, 0, MS);
        assert_eq!(g.p.waiting(), 10_000);
        assert_eq!(g.round(t0 + 101 * MS, 0, 0, MS), Action::Keep);
        assert_eq!(g.p.waiting(), 0);
        g.waiting.clear();
        g.round(t0 + 150 * MS, 205, 200, 40 * MS);
        assert_eq!(g.p.waiting(), 5);
        // Only the 5 recent ones wait: fewer than a batch (4 minimum and the
        // rate's), so nothing is shut for the idle crowd.
        assert_eq!(g.round(t0 + 200 * MS, 0, 0, MS), Action::Keep);
        assert!(g.p.listening());
    }

    #[test]
    fn the_listener_is_never_shut_longer_than_an_interval() {
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        g.round(t0 + 50 * MS, 200, 0, MS);
        g.round(t0 + 99 * MS, 50, 0, MS);
        let a = g.round(t0 + 100 * MS, 0, 200, 40 * MS);
        assert_eq!(a, Action::StopListening);
        // The batch's clients went quiet: it never drains.
        assert_eq!(g.round(t0 + 150 * MS, 0, 0, MS), Action::Keep);
        assert_eq!(g.round(t0 + 200 * MS, 0, 0, MS), Action::ListenAgain);
    }
    #[test]
    fn clients_that_trickle_their_heads_are_not_a_queue() {
        let t0 = Instant::now();
        let mut p = Pulse::new(Duration::from_millis(5), Duration::from_millis(100), t0);
        // 2,000 clients send part of a head and stop (slowloris, `evq dead
        // --partial`): their bytes were read, nothing waits for the loop.
        p.drained();
        for _ in 0..2000 {
            let e = p.accepted(t0);
            p.request_in(e);
        }
        assert_eq!(p.waiting(), 0);
        // A standing queue of new clients meanwhile: only they count.
        p.drained();
        let mut recent = Vec::new();
        for _ in 0..209 {
            recent.push(p.accepted(t0 + Duration::from_millis(50)));
        }
        for e in recent.drain(..200) {
            p.request_in(e);
            p.settled(e, true, true);
            p.waited(Duration::from_millis(40));
        }
        assert_eq!(p.decide(t0 + Duration::from_millis(100)), Action::Keep);
        assert_eq!(p.waiting(), 9);
    }

    /// As in the test above: a standing queue, one pulse, arrivals slower
    /// than the service ending the pulses at 116 ms, then an interval of
    /// short waits (216 ms).
    fn pulses_ended(t0: Instant) -> Rig {
        let mut g = Rig::new(t0);
        g.round(t0 + 50 * MS, 209, 0, MS);
        g.round(t0 + 100 * MS, 0, 200, 40 * MS);
        assert_eq!(g.round(t0 + 101 * MS, 41, 0, MS), Action::StopListening);
        assert_eq!(g.round(t0 + 106 * MS, 0, 48, 40 * MS), Action::ListenAgain);
        assert_eq!(g.round(t0 + 116 * MS, 4, 0, MS), Action::Keep);
        assert_eq!(g.p.phase, Phase::Normal, "pulses ended");
        assert_eq!(g.round(t0 + 216 * MS, 0, 4, MS), Action::Keep);
        assert!(!g.p.standing);
        g
    }

    #[test]
    fn pulses_that_ended_lately_start_again_on_one_long_wait() {
        let t0 = Instant::now();
        // The flood comes back: one long wait and more than a batch waiting
        // shut the listener at once, not an interval later.
        let mut g = pulses_ended(t0);
        assert_eq!(
            g.round(t0 + 220 * MS, 30, 1, 20 * MS),
            Action::StopListening
        );
        // Long after the pulses ended, one long wait is only a burst.
        let mut h = pulses_ended(t0);
        h.round(t0 + 2_000 * MS, 0, 0, MS);
        assert_eq!(h.round(t0 + 2_004 * MS, 30, 1, 20 * MS), Action::Keep);
    }

    #[test]
    fn requests_waiting_in_the_loop_count_however_long_they_wait() {
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        // A standing queue measured; 300 new connections whose requests came
        // (bytes read), all waiting in the loop's own queue.
        g.round(t0 + 50 * MS, 209, 0, MS);
        g.round(t0 + 100 * MS, 0, 200, 40 * MS);
        g.prepare(t0 + 100 * MS, 300, 0, MS);
        for e in g.waiting.drain(..).collect::<Vec<_>>() {
            g.p.request_in(e);
        }
        g.p.queued(300);
        assert_eq!(g.p.decide(t0 + 101 * MS), Action::StopListening);
        // Three drains and an interval later they are not idle connections:
        // they still wait, and the listener stays shut.
        for k in 0..4 {
            g.p.drained();
            assert_eq!(g.p.decide(t0 + (150 + k) * MS), Action::Keep);
        }
        assert_eq!(g.p.waiting(), 300);
        assert!(!g.p.listening());
        // Taken up (the loop says none wait): it listens again.
        g.p.queued(0);
        assert_eq!(g.p.decide(t0 + 160 * MS), Action::ListenAgain);
    }

    #[test]
    fn no_accept_is_armed_beside_the_one_the_pulse_cancelled() {
        use std::os::fd::AsRawFd;
        let Some(mut ring) = evq_testkit::completions_or_skip(CompletionRing::new(), "ring") else {
            return;
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let l = PulsedListener {
            fd: listener.as_raw_fd(),
            addr: listener.local_addr().unwrap(),
            backlog: 16,
            accept_token: 1,
            cancel_token: 2,
        };
        let first = ring.accept_multishot(l.fd, l.accept_token);
        let mut accept = Some(first);
        let t0 = Instant::now();
        let mut g = Rig::new(t0);
        g.round(t0 + 50 * MS, 200, 0, MS);
        g.round(t0 + 99 * MS, 50, 0, MS);
        g.prepare(t0 + 100 * MS, 0, 200, 40 * MS);
        g.p.round(t0 + 100 * MS, &mut ring, &mut accept, false, &l);
        assert!(!g.p.listening(), "shut");
        assert_eq!(accept, None, "the accept is cancelled");
        assert!(g.p.ending.is_some());
        // An interval later it listens again, but arms nothing while the
        // cancelled accept has not ended (the ring's quirk q).
        g.prepare(t0 + 200 * MS, 0, 0, MS);
        g.p.round(t0 + 200 * MS, &mut ring, &mut accept, false, &l);
        assert!(g.p.listening());
        assert_eq!(accept, None, "armed beside the cancelled accept");
        assert!(!g.p.accept_ended(ring.nop(3)), "another operation's end");
        // The cancelled accept's last completion: now a new one may go.
        let mut batch = evq::completion::Completions::with_capacity(8);
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < until, "the cancelled accept never ended");
            ring.get_next_completion(&mut batch, Some(10 * MS)).unwrap();
            if let Some(c) = batch.iter().find(|c| c.op() == first && !c.more()) {
                assert!(g.p.accept_ended(c.op()));
                break;
            }
        }
        assert!(g.p.ending.is_none());
        assert!(!g.p.accept_ended(first), "told once");
        // It listens at the same address.
        std::net::TcpStream::connect(l.addr).expect("listening again");
    }
}
