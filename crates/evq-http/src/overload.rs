//! Overload control: which new connections a server (or the proxy) takes on
//! when more arrive than it can serve, and how it turns the rest away.
//!
//! Where the capacity goes without it (issue 15): connections wait in the
//! kernel's listen queue (4096 deep) for longer than their clients wait, so the
//! server spends its time answering clients that have already given up; once
//! the queue is full the kernel drops SYNs, and those clients learn nothing
//! until their retransmission a second later. Seed 001's limiter resets new
//! connections while its events-per-call average is high, but every reset
//! still costs an `accept` and a `close`, and the average swings.
//!
//! The policies ([`OverloadPolicy`]):
//!
//! - `seed001`: the seed's EWMA-and-reset, kept as the baseline.
//! - `gate`: keeps the listen queue short. Before each accept batch it reads the
//!   queue's length (`TCP_INFO` on a listening socket reports it as
//!   `tcpi_unacked`); longer than the connections the worker serves in
//!   `queue_target` while the queue stands (the last connection admitted
//!   waited longer than `queue_target`), the queue is refused whole by the kernel: `shutdown` of a
//!   listening socket resets every connection waiting in it, and `listen` at
//!   once opens it again. Those clients learn of the refusal fast. It is not
//!   free: the kernel resets each queued connection in the worker's context,
//!   about 7 µs each here against about 22 µs for an `accept` and a reset
//!   `close` (measured from Python, so the second includes its overhead).
//! - `pulse`: refuses for free. A socket that is not listening has the kernel
//!   answer each new client's SYN with a reset, in the softirq of the packet's
//!   arrival — not in the worker's time. Once the queue has stood for a
//!   CoDel `interval` and is longer than a batch, the worker listens in pulses: it takes what waits (at
//!   most `queue_target` of work), stops listening (`shutdown`), serves the
//!   batch, and listens again before the batch's last [`PULSE_LEAD`]
//!   connections, so the next arrivals are queued by the time it is done;
//!   they are the next batch. Only connections queued beyond a batch cost the
//!   worker a reset; everyone else learns of the refusal from the kernel
//!   within a round trip. Pulses end when connections arrive more slowly than
//!   the worker admitted them in the last interval. Where the worker's CPU
//!   comes in bursts (a CPU quota enforced at the scheduler's tick, or a
//!   machine too busy to run it), the queue fills while it is held off with
//!   the listener open, and `pulse` falls back to resetting the excess as
//!   `gate` does.
//! - `codel`: Facebook's CoDel for the accept queue (wangle `Codel.h`): each
//!   accepted connection's time in the listen queue is measured; if the least of
//!   them over an `interval` exceeded `queue_target`, the queue is standing, and
//!   until an interval says otherwise connections that waited more than twice
//!   the target are reset (after their `accept`, so each still costs one).
//!
//! Any policy but `none` can also drop work past a **deadline**: a connection
//! that waited longer than it in the queue is reset, its client having given up.
//!
//! Quirks: a listening socket bound to port 0 loses its port on `shutdown`, so
//! the flush binds it again to the address it had (which `SO_REUSEADDR` allows);
//! with several threads sharing one listening socket, another thread's `accept`
//! between `shutdown` and `listen` would fail with `EINVAL` and pause, so `gate`
//! wants one socket per thread (`--accept reuseport`). The time in the queue is
//! `tcpi_last_ack_recv` of the accepted socket: the time since the handshake's
//! last ACK (or the request, if it came later), in jiffies — 4 ms steps where
//! `HZ` is 250.

use crate::stats::WorkerCounters;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Which overload control a server runs (`--overload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum OverloadPolicy {
    /// Serve everyone, however late.
    None,
    /// Seed 001: reset new connections while the smoothed events-per-call
    /// average is above a threshold ([`crate::ShedConfig`]).
    Seed001,
    /// Keep the listen queue within `queue_target` of work; refuse the rest in
    /// the kernel (reset the queue and listen again).
    Gate,
    /// CoDel on the listen queue's delay: while the queue stands, reset
    /// connections that waited more than twice `queue_target`.
    Codel,
    /// Listen in pulses under overload: take a batch of `queue_target` of
    /// work, stop listening while serving it (the kernel resets new clients
    /// at no cost to the worker), listen again just before it is done.
    Pulse,
}

impl OverloadPolicy {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            OverloadPolicy::None => "none",
            OverloadPolicy::Seed001 => "seed001",
            OverloadPolicy::Gate => "gate",
            OverloadPolicy::Codel => "codel",
            OverloadPolicy::Pulse => "pulse",
        }
    }

    /// Whether the policy shuts or resets the listening socket, so that each
    /// thread needs a socket of its own (`--accept reuseport`).
    pub fn needs_own_socket(self) -> bool {
        matches!(self, OverloadPolicy::Gate | OverloadPolicy::Pulse)
    }
}

/// How a server controls overload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverloadConfig {
    /// The policy.
    pub policy: OverloadPolicy,
    /// Queueing delay the policy aims for (`gate`, `codel`). CoDel's 5 ms.
    pub queue_target: Duration,
    /// CoDel's interval: how long the queue must stand before it counts as
    /// overloaded. 100 ms.
    pub interval: Duration,
    /// Connections that waited in the listen queue longer than this are reset
    /// (their client has given up); `None`: no deadline.
    pub deadline: Option<Duration>,
    /// Admitted connections that waited longer than this count as served late.
    pub late_after: Duration,
}

impl Default for OverloadConfig {
    fn default() -> Self {
        OverloadConfig {
            policy: OverloadPolicy::None,
            queue_target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            deadline: None,
            late_after: Duration::from_secs(1),
        }
    }
}

impl OverloadConfig {
    /// Checks the numbers.
    ///
    /// # Errors
    /// `InvalidInput` with a message naming the flag: a zero target or
    /// interval, a zero deadline or late bound.
    pub fn validate(&self) -> io::Result<()> {
        let bad = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
        if self.queue_target.is_zero() {
            return bad("--queue-target must be more than 0 ms");
        }
        if self.interval.is_zero() {
            return bad("--codel-interval must be more than 0 ms");
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return bad("--deadline must be more than 0 seconds (leave it out for none)");
        }
        if self.late_after.is_zero() {
            return bad("--late-after must be more than 0 seconds");
        }
        Ok(())
    }

    /// Whether the policy reads each accepted connection's time in the queue.
    pub(crate) fn measures(&self) -> bool {
        self.policy != OverloadPolicy::None
    }
}

/// Why a connection was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// CoDel: the queue stands and this one waited over twice the target.
    QueueDelay,
    /// It waited past the deadline.
    Deadline,
}

/// Fewest connections `gate` lets wait, whatever the rate estimate says: a
/// worker woken for one connection finds a few more queued behind it.
const GATE_MIN_QUEUE: u32 = 16;

/// One event loop's overload control state.
pub(crate) struct Admission {
    cfg: OverloadConfig,
    /// The listening socket's address and backlog, to open it again after a
    /// flush or a pulse.
    pub(crate) listen_addr: SocketAddr,
    pub(crate) backlog: i32,
    /// Connections admitted in the current rate interval, and its start.
    admitted: u64,
    since: Instant,
    /// Admissions per second over the last whole interval.
    rate: f64,
    /// CoDel: least queue delay seen this interval (ms), and whether the last
    /// interval found the queue standing.
    min_delay_ms: u32,
    interval_end: Instant,
    overloaded: bool,
    /// `gate`: the time the last admitted connection waited in the queue (ms):
    /// a long queue is only refused while it also stands, so a burst that a
    /// worker back from a pause takes at once is not.
    last_delay_ms: u32,
    /// `pulse`, while overloaded: when the listener last opened and the
    /// connections taken since.
    open_since: Option<(Instant, u32)>,
    /// `pulse`: the next connection judged is the first of an accept batch.
    measure_next: bool,
    /// `pulse`: since when every batch's oldest connection waited over the
    /// target.
    standing_since: Option<Instant>,
    /// `pulse`: when pulses last ended.
    pulses_ended: Option<Instant>,
}

/// What to do with a listener's readiness ([`Admission::plan_accept`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcceptPlan {
    /// Accept what waits, as usual, but at most `most` before asking again.
    All {
        /// Connections to take before the next plan (`u32::MAX`: all).
        most: u32,
    },
    /// `pulse`: accept at most `take`, stop listening, serve them, and listen
    /// again before the last [`PULSE_LEAD`] of them.
    Batch {
        /// Connections to take.
        take: u32,
    },
}

impl AcceptPlan {
    /// Everything waiting.
    pub(crate) const ALL: AcceptPlan = AcceptPlan::All { most: u32::MAX };
}

/// Connections of a batch still to serve when `pulse` listens again: the next
/// arrivals queue while they are served, so the worker does not wait idle
/// for the first of them.
pub(crate) const PULSE_LEAD: usize = 2;
/// Fewest connections a `pulse` batch may take, whatever the rate estimate
/// says (a worker that has just started knows no rate).
const PULSE_MIN_BATCH: u32 = 4;
/// Intervals after pulses end in which a standing queue starts them again at
/// once.
const PULSE_MEMORY: u32 = 10;
/// Fewest arrivals an open pulse counts before it may judge the arrival rate
/// slower than the service.
const PULSE_MIN_SAMPLE: u32 = 4;

impl Admission {
    pub(crate) fn new(cfg: OverloadConfig, listen_addr: SocketAddr, backlog: i32) -> Admission {
        let now = Instant::now();
        Admission {
            cfg,
            listen_addr,
            backlog,
            admitted: 0,
            since: now,
            rate: 0.0,
            min_delay_ms: u32::MAX,
            interval_end: now + cfg.interval,
            overloaded: false,
            last_delay_ms: 0,
            open_since: None,
            measure_next: false,
            standing_since: None,
            pulses_ended: None,
        }
    }

    /// Before accepting on a ready listener: what to take. Every policy but
    /// `pulse` takes all (after `gate`'s check, [`Admission::before_accept`]).
    pub(crate) fn plan_accept(
        &mut self,
        listen_fd: RawFd,
        now: Instant,
        counters: &WorkerCounters,
    ) -> AcceptPlan {
        if self.cfg.policy != OverloadPolicy::Pulse {
            self.before_accept(listen_fd, now, counters);
            return AcceptPlan::ALL;
        }
        self.roll(now);
        self.measure_next = true;
        let quota = self.batch_limit();
        // Taking a batch at a time, the worker looks at the queue again
        // between batches: a flood's onset does not keep it in one accept
        // loop while the queue grows behind it.
        let chunk = AcceptPlan::All { most: quota };
        let Some((since, taken)) = self.open_since else {
            // Not pulsing: start when the queue has stood (the oldest
            // connection of every batch waited over the target) for a whole
            // `interval`, as CoDel asks, and is long — a burst the worker
            // works off within the interval (a crowd connecting at once) is
            // no overload — and once an interval has measured the rate the
            // worker serves at (a server's first moments are no evidence).
            let standing = u128::from(self.last_delay_ms) > self.cfg.queue_target.as_millis();
            if !standing {
                self.standing_since = None;
                return chunk;
            }
            // Pulses that ended lately start again at once: the overload
            // was already proven (CoDel, too, remembers its last dropping
            // state).
            let since = *self.standing_since.get_or_insert(now);
            let recently = self.pulses_ended.is_some_and(|t| {
                now.saturating_duration_since(t) < PULSE_MEMORY * self.cfg.interval
            });
            if self.rate <= 0.0
                || (!recently && now.saturating_duration_since(since) < self.cfg.interval)
            {
                return chunk;
            }
            let Ok(pending) = listen_queue_len(listen_fd) else {
                return chunk;
            };
            if pending > quota {
                return AcceptPlan::Batch {
                    take: pending.min(quota),
                };
            }
            return chunk;
        };
        let Ok(pending) = listen_queue_len(listen_fd) else {
            return chunk;
        };
        // Time per connection served: the admission rate of the last
        // interval, when the worker was busy (as it is while pulsing). A
        // batch's own wall time says little: under a CPU quota or beside other
        // work a thread runs in bursts.
        let service_s = if self.rate > 0.0 {
            1.0 / self.rate
        } else {
            self.cfg.queue_target.as_secs_f64() / f64::from(quota)
        };
        let arrived = taken + pending;
        let open_for = now.saturating_duration_since(since).as_secs_f64();
        let arrival_rate = if open_for > 0.0 {
            f64::from(arrived) / open_for
        } else {
            f64::INFINITY
        };
        if arrived >= PULSE_MIN_SAMPLE && arrival_rate * service_s < 1.0 {
            // Arrivals slower than the service: the overload is over.
            self.open_since = None;
            self.pulses_ended = Some(now);
            return chunk;
        }
        if pending > 0 {
            AcceptPlan::Batch {
                take: pending.min(quota),
            }
        } else {
            chunk
        }
    }

    /// `pulse`: the listener opened again at `now`.
    pub(crate) fn pulse_opened(&mut self, now: Instant) {
        self.open_since = Some((now, 0));
    }

    /// Before an accept batch on `listen_fd`: `gate` refuses the whole queue if
    /// it holds more than `queue_target` of work. Returns how many waited.
    pub(crate) fn before_accept(
        &mut self,
        listen_fd: RawFd,
        now: Instant,
        counters: &WorkerCounters,
    ) -> u32 {
        self.roll(now);
        if self.cfg.policy != OverloadPolicy::Gate {
            return 0;
        }
        let Ok(waiting) = listen_queue_len(listen_fd) else {
            return 0;
        };
        let standing = u128::from(self.last_delay_ms) > self.cfg.queue_target.as_millis();
        if standing
            && waiting > self.gate_limit()
            && flush_listen_queue(listen_fd, self.listen_addr, self.backlog).is_ok()
        {
            counters.flushed(waiting);
            return waiting;
        }
        0
    }

    /// Most connections `gate` lets wait: what this worker serves in
    /// `queue_target` at its recent rate.
    fn gate_limit(&self) -> u32 {
        let by_rate = self.rate * self.cfg.queue_target.as_secs_f64();
        (by_rate as u32).max(GATE_MIN_QUEUE)
    }

    /// Most connections `pulse` takes in a batch: what this worker serves in
    /// `queue_target` at its recent rate, so the last of a batch waits about
    /// that long.
    fn batch_limit(&self) -> u32 {
        let by_rate = self.rate * self.cfg.queue_target.as_secs_f64();
        (by_rate as u32).max(PULSE_MIN_BATCH)
    }

    /// Starts a new rate (and CoDel) interval when the current one is over.
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= self.cfg.interval {
            self.rate = self.admitted as f64 / elapsed.as_secs_f64();
            self.admitted = 0;
            self.since = now;
        }
        if now >= self.interval_end {
            self.overloaded = self.min_delay_ms != u32::MAX
                && u128::from(self.min_delay_ms) > self.cfg.queue_target.as_millis();
            self.min_delay_ms = u32::MAX;
            self.interval_end = now + self.cfg.interval;
        }
    }

    /// A new connection: how long it waited in the queue (ms, when the policy
    /// measures it) and whether to refuse it.
    pub(crate) fn judge(&mut self, fd: RawFd) -> (Option<u32>, Option<Refusal>) {
        // `pulse` without a deadline reads only the first connection of each
        // accept batch — the oldest, which is all its standing test needs —
        // and saves the rest a system call each.
        let measure = self.cfg.measures()
            && (self.cfg.policy != OverloadPolicy::Pulse
                || self.cfg.deadline.is_some()
                || std::mem::take(&mut self.measure_next));
        let waited_ms = if measure {
            queue_delay_ms(fd).ok()
        } else {
            None
        };
        if let Some(waited_ms) = waited_ms {
            let waited = Duration::from_millis(u64::from(waited_ms));
            if self.cfg.deadline.is_some_and(|d| waited > d) {
                return (Some(waited_ms), Some(Refusal::Deadline));
            }
            if self.cfg.policy == OverloadPolicy::Codel {
                self.min_delay_ms = self.min_delay_ms.min(waited_ms);
                if self.overloaded && waited > 2 * self.cfg.queue_target {
                    return (Some(waited_ms), Some(Refusal::QueueDelay));
                }
            }
            self.last_delay_ms = waited_ms;
        }
        self.admitted += 1;
        if let Some((_, taken)) = &mut self.open_since {
            *taken += 1;
        }
        (waited_ms, None)
    }

    /// Whether a connection admitted after `waited_ms` in the queue is late.
    pub(crate) fn is_late(&self, waited_ms: u32) -> bool {
        u128::from(waited_ms) > self.cfg.late_after.as_millis()
    }
}

/// Connections waiting in a listening socket's accept queue (Linux reports it
/// as `tcpi_unacked` of a socket in `LISTEN`).
pub(crate) fn listen_queue_len(listen_fd: RawFd) -> io::Result<u32> {
    evq_os::socket::tcp_info(listen_fd).map(|i| i.tcpi_unacked)
}

/// Milliseconds an accepted connection waited since its last packet (the
/// handshake's ACK, or the request if it came later).
pub(crate) fn queue_delay_ms(fd: RawFd) -> io::Result<u32> {
    evq_os::socket::tcp_info(fd).map(|i| i.tcpi_last_ack_recv)
}

/// Stops listening on `listen_fd`: the connections waiting in its queue are
/// reset, and until [`listen_again`] the kernel answers new clients with a
/// reset.
pub(crate) fn stop_listening(listen_fd: RawFd) {
    // SAFETY: shutdown(2) on the caller's listening socket: it stops listening
    // and resets the connections queued on it; the descriptor stays valid.
    unsafe { libc::shutdown(listen_fd, libc::SHUT_RD) };
}

/// Listens again on `listen_fd` (stopped by [`stop_listening`]) at `addr`,
/// the address it had.
///
/// # Errors
/// `bind`'s error if the socket lost its port and cannot have it back (it is
/// then left not listening: `listen` on a socket without a port would pick a
/// new one at random), else `listen`'s.
pub(crate) fn listen_again(listen_fd: RawFd, addr: SocketAddr, backlog: i32) -> io::Result<()> {
    let fd = borrow(listen_fd);
    let sock = socket2::SockRef::from(&fd);
    // A socket bound to port 0 gave its port back when it stopped listening:
    // bind it again (`SO_REUSEADDR` allows it). One bound to an explicit port
    // kept it, and bind says EINVAL.
    match sock.bind(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(e),
    }
    sock.listen(backlog)
}

/// Resets every connection waiting in the accept queue of `listen_fd` and
/// listens again on `addr`.
///
/// # Errors
/// `listen`'s error: the socket no longer listens (the caller's next `accept`
/// fails and pauses the listener, as for any failed listener).
pub(crate) fn flush_listen_queue(
    listen_fd: RawFd,
    addr: SocketAddr,
    backlog: i32,
) -> io::Result<()> {
    stop_listening(listen_fd);
    listen_again(listen_fd, addr, backlog)
}

fn borrow(fd: RawFd) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: the caller holds `fd` open for the duration of the call that
    // uses the borrow (listen_again), which does not outlive it.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ServeReport;
    use evq_os::ListenOptions;
    use std::os::fd::AsRawFd;

    #[test]
    fn bad_numbers_are_refused_with_the_flag_named() {
        let ok = OverloadConfig::default();
        assert!(ok.validate().is_ok());
        for (cfg, flag) in [
            (
                OverloadConfig {
                    queue_target: Duration::ZERO,
                    ..ok
                },
                "--queue-target",
            ),
            (
                OverloadConfig {
                    interval: Duration::ZERO,
                    ..ok
                },
                "--codel-interval",
            ),
            (
                OverloadConfig {
                    deadline: Some(Duration::ZERO),
                    ..ok
                },
                "--deadline",
            ),
        ] {
            let e = cfg.validate().unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
        }
    }

    #[test]
    fn a_flush_resets_the_queue_and_keeps_the_port() {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let waiting: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 3);
        flush_listen_queue(l.as_raw_fd(), addr, 128).unwrap();
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 0);
        for mut s in waiting {
            use std::io::Read;
            let e = s.read(&mut [0; 8]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
        }
        // Still listening on the same port.
        let _c = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 1);
    }

    #[test]
    fn a_socket_not_listening_is_refused_by_the_kernel_and_listens_again_on_its_port() {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let _queued = queued(addr, 2);
        stop_listening(l.as_raw_fd());
        // The kernel answers the SYN with a reset: the client learns at once.
        let started = Instant::now();
        let e = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert!(started.elapsed() < Duration::from_secs(1));
        listen_again(l.as_raw_fd(), addr, 128).unwrap();
        assert_eq!(evq_os::socket::local_addr(l.as_raw_fd()).unwrap(), addr);
        let _c = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 1);
    }

    #[test]
    fn pulse_starts_on_a_standing_long_queue_and_ends_when_arrivals_slow() {
        let cfg = OverloadConfig {
            policy: OverloadPolicy::Pulse,
            ..OverloadConfig::default()
        };
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let counters = WorkerCounters::default();
        let mut a = Admission::new(cfg, addr, 128);
        let t0 = Instant::now();
        // A long queue that does not stand (a burst): take it all, a batch's
        // worth at a time.
        let _burst = queued(addr, PULSE_MIN_BATCH as usize + 4);
        let chunk = AcceptPlan::All {
            most: PULSE_MIN_BATCH,
        };
        assert_eq!(a.plan_accept(l.as_raw_fd(), t0, &counters), chunk);
        // The same queue standing, before an interval has measured the rate
        // the worker serves at: still no evidence of overload.
        a.last_delay_ms = 6;
        assert_eq!(a.plan_accept(l.as_raw_fd(), t0, &counters), chunk);
        // With a rate measured, standing but not yet for an interval: a
        // burst, perhaps.
        a.rate = 100.0;
        assert_eq!(a.plan_accept(l.as_raw_fd(), t0, &counters), chunk);
        // Standing for the whole interval (in which the worker admitted ten:
        // 100/s): a batch of at most the limit.
        a.admitted = 10;
        assert_eq!(
            a.plan_accept(l.as_raw_fd(), t0 + cfg.interval, &counters),
            AcceptPlan::Batch {
                take: PULSE_MIN_BATCH
            }
        );
        // Listening again, connections arriving faster than the worker
        // admitted them (100/s over the last interval): each readiness is a
        // batch of what waits.
        a.pulse_opened(t0);
        let before = listen_queue_len(l.as_raw_fd()).unwrap();
        assert_eq!(
            a.plan_accept(l.as_raw_fd(), t0 + Duration::from_millis(10), &counters),
            AcceptPlan::Batch {
                take: before.min(PULSE_MIN_BATCH)
            }
        );
        // The same arrivals over a whole second: 20/s, slower than the 100/s
        // the worker admitted in that second — the overload is over and
        // everything is taken again.
        a.pulse_opened(t0);
        a.admitted = 100;
        assert_eq!(
            a.plan_accept(l.as_raw_fd(), t0 + Duration::from_secs(1), &counters),
            chunk
        );
        assert!(a.open_since.is_none());
    }

    #[test]
    fn codel_refuses_only_while_the_queue_stands() {
        let cfg = OverloadConfig {
            policy: OverloadPolicy::Codel,
            ..OverloadConfig::default()
        };
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut a = Admission::new(cfg, addr, 128);
        let t0 = Instant::now();
        // An interval whose least delay was 20 ms: the queue stood.
        a.min_delay_ms = 20;
        a.roll(t0 + Duration::from_millis(150));
        assert!(a.overloaded);
        // An interval with one connection served at once clears it.
        a.min_delay_ms = 0;
        a.roll(t0 + Duration::from_millis(300));
        assert!(!a.overloaded);
        // An interval with nothing measured is not overload.
        a.roll(t0 + Duration::from_millis(450));
        assert!(!a.overloaded);
    }

    /// Connects `n` clients that wait in `l`'s queue, unaccepted.
    fn queued(addr: SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
        (0..n)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect()
    }

    fn accept(l: &std::os::fd::OwnedFd) -> std::os::fd::OwnedFd {
        use std::os::fd::FromRawFd;
        // SAFETY: accept(2) on a listening socket this test owns; null address
        // arguments are allowed; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = unsafe { libc::accept(l.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut()) };
        assert!(fd >= 0, "{}", io::Error::last_os_error());
        // SAFETY: see above: the descriptor is new and ours.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
    }

    fn reset(s: &mut std::net::TcpStream) -> bool {
        use std::io::Read;
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        matches!(s.read(&mut [0; 8]), Err(e) if e.kind() == io::ErrorKind::ConnectionReset)
    }

    #[test]
    fn gate_refuses_a_long_queue_in_the_kernel_and_lets_a_short_one_wait() {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let cfg = OverloadConfig {
            policy: OverloadPolicy::Gate,
            ..OverloadConfig::default()
        };
        let mut gate = Admission::new(cfg, addr, 128);
        let counters = WorkerCounters::default();
        // Within the least queue it keeps: nothing is refused.
        let mut short = queued(addr, GATE_MIN_QUEUE as usize);
        assert_eq!(
            gate.before_accept(l.as_raw_fd(), Instant::now(), &counters),
            0
        );
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), GATE_MIN_QUEUE);
        // One more than that, while the queue stands (the last connection
        // admitted waited over the target): the whole queue is reset, each
        // client learns it at once, and the port still takes new connections.
        short.extend(queued(addr, 1));
        assert_eq!(
            gate.before_accept(l.as_raw_fd(), Instant::now(), &counters),
            0,
            "a burst, not a standing queue"
        );
        gate.last_delay_ms = 6;
        let waited = gate.before_accept(l.as_raw_fd(), Instant::now(), &counters);
        assert_eq!(waited, GATE_MIN_QUEUE + 1);
        for s in &mut short {
            assert!(reset(s), "a queued client was not reset");
        }
        let report = ServeReport::collect("test", std::slice::from_ref(&counters));
        assert_eq!(report.refused.flushed, u64::from(GATE_MIN_QUEUE + 1));
        assert_eq!(report.refused.flushes, 1);
        let _next = std::net::TcpStream::connect(addr).unwrap();
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 1);
        // Policies other than gate never flush.
        let mut other = Admission::new(OverloadConfig::default(), addr, 128);
        let _many = queued(addr, 40);
        assert_eq!(
            other.before_accept(l.as_raw_fd(), Instant::now(), &counters),
            0
        );
        assert_eq!(listen_queue_len(l.as_raw_fd()).unwrap(), 41);
    }

    #[test]
    fn deadline_refuses_connections_that_waited_past_it() {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let cfg = OverloadConfig {
            policy: OverloadPolicy::Gate,
            deadline: Some(Duration::from_millis(20)),
            ..OverloadConfig::default()
        };
        let mut a = Admission::new(cfg, addr, 128);
        let _old = queued(addr, 1);
        // Sleeping is a lower bound on the wait, whatever the machine's load.
        std::thread::sleep(Duration::from_millis(60));
        let old = accept(&l);
        let (waited, refusal) = a.judge(old.as_raw_fd());
        assert!(waited.is_some_and(|w| w >= 40), "{waited:?}");
        assert_eq!(refusal, Some(Refusal::Deadline));
        // Without a deadline the same wait is admitted (and measured).
        let mut none = Admission::new(
            OverloadConfig {
                deadline: None,
                ..cfg
            },
            addr,
            128,
        );
        let _old = queued(addr, 1);
        std::thread::sleep(Duration::from_millis(60));
        let old = accept(&l);
        let (waited, refusal) = none.judge(old.as_raw_fd());
        assert!(waited.is_some_and(|w| w >= 40), "{waited:?}");
        assert_eq!(refusal, None);
        assert!(none.is_late(2000) && !none.is_late(1000));
    }

    #[test]
    fn codel_refuses_long_waits_only_after_an_interval_of_standing_queue() {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        let cfg = OverloadConfig {
            policy: OverloadPolicy::Codel,
            queue_target: Duration::from_millis(5),
            interval: Duration::from_millis(30),
            ..OverloadConfig::default()
        };
        let counters = WorkerCounters::default();
        let mut a = Admission::new(cfg, addr, 128);
        let waited_long = |a: &mut Admission| {
            let _c = std::net::TcpStream::connect(addr).unwrap();
            std::thread::sleep(Duration::from_millis(40));
            let s = accept(&l);
            a.judge(s.as_raw_fd())
        };
        // The first interval has not seen a standing queue: a long wait is
        // served (and is the interval's least delay, over the target).
        let (w, refusal) = waited_long(&mut a);
        assert!(w.is_some_and(|w| w > 10), "{w:?}");
        assert_eq!(refusal, None);
        // The interval is over (the 40 ms wait outlasted its 30): the queue
        // stood, so the next long wait is refused.
        a.before_accept(l.as_raw_fd(), Instant::now(), &counters);
        assert!(a.overloaded);
        let (_, refusal) = waited_long(&mut a);
        assert_eq!(refusal, Some(Refusal::QueueDelay));
    }
}
