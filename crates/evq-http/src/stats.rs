//! Counters. The server's: one block per worker thread, written only by that
//! thread (relaxed load + store, no locked instruction on the hot path), read by
//! anyone for `--stats-path` and the exit report. The proxy's: one plain struct,
//! owned by its one thread.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Statuses the server can answer with, in counter order.
pub const STATUSES: [u16; 15] = [
    200, 304, 400, 403, 404, 405, 408, 413, 414, 431, 500, 501, 502, 503, 504,
];

fn status_index(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|&s| s == status)
        .unwrap_or(STATUSES.len() - 1)
}

/// One worker's counters.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    requests: AtomicU64,
    statuses: [AtomicU64; STATUSES.len()],
    accepts: AtomicU64,
    shed_resets: AtomicU64,
    admitted: AtomicU64,
    refused_queue_delay: AtomicU64,
    refused_deadline: AtomicU64,
    refused_flushed: AtomicU64,
    flushes: AtomicU64,
    pulses: AtomicU64,
    not_listening_us: AtomicU64,
    served_late: AtomicU64,
    queue_delay: [AtomicU64; QUEUE_DELAY_BOUNDS_MS.len() + 1],
    rejected_max_conns: AtomicU64,
    accept_fd_exhausted: AtomicU64,
    idle_reclaimed: AtomicU64,
    timeouts: AtomicU64,
    wakeups: AtomicU64,
    events: AtomicU64,
    bytes_sent: AtomicU64,
    open_conns: AtomicU64,
    /// Thread CPU time since the worker started, as of its latest clock read.
    cpu_ns: AtomicU64,
    /// Thread CPU time spent inside `get_next_event`; never more than `cpu_ns` as
    /// read after it (stored after `cpu_ns`, with release ordering).
    wait_cpu_ns: AtomicU64,
}

/// Upper bounds (inclusive, ms) of the queue-delay histogram's buckets; one
/// more bucket holds the rest. The kernel measures in jiffies (4 ms at HZ=250).
pub const QUEUE_DELAY_BOUNDS_MS: [u32; 11] = [0, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];

fn bump(c: &AtomicU64, n: u64) {
    // Single writer: a plain load and store is enough and avoids a locked add.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl WorkerCounters {
    pub(crate) fn request(&self) {
        bump(&self.requests, 1);
    }
    pub(crate) fn status(&self, status: u16) {
        bump(&self.statuses[status_index(status)], 1);
    }
    pub(crate) fn accept(&self) {
        bump(&self.accepts, 1);
    }
    pub(crate) fn shed_reset(&self) {
        bump(&self.shed_resets, 1);
    }
    /// A connection let in after `waited_ms` in the listen queue (`None`: not
    /// measured); `late` if past the late bound.
    pub(crate) fn admitted(&self, waited_ms: Option<u32>, late: bool) {
        bump(&self.admitted, 1);
        if let Some(ms) = waited_ms {
            let i = QUEUE_DELAY_BOUNDS_MS.partition_point(|&b| b < ms);
            bump(&self.queue_delay[i], 1);
        }
        bump(&self.served_late, u64::from(late));
    }
    pub(crate) fn refused_queue_delay(&self) {
        bump(&self.refused_queue_delay, 1);
    }
    pub(crate) fn refused_deadline(&self) {
        bump(&self.refused_deadline, 1);
    }
    /// The listen queue was reset with `waiting` connections in it.
    pub(crate) fn flushed(&self, waiting: u32) {
        bump(&self.flushes, 1);
        bump(&self.refused_flushed, u64::from(waiting));
    }
    /// `pulse` stopped listening; `waiting` connections beyond its batch were
    /// reset in the queue.
    pub(crate) fn pulse(&self, waiting: u32) {
        bump(&self.pulses, 1);
        bump(&self.refused_flushed, u64::from(waiting));
    }
    /// `pulse` listened again after not listening for `paused`.
    pub(crate) fn listened_again(&self, paused: std::time::Duration) {
        bump(&self.not_listening_us, paused.as_micros() as u64);
    }
    pub(crate) fn rejected(&self) {
        bump(&self.rejected_max_conns, 1);
    }
    pub(crate) fn fd_exhausted(&self) {
        bump(&self.accept_fd_exhausted, 1);
    }
    pub(crate) fn reclaimed(&self, n: usize) {
        bump(&self.idle_reclaimed, n as u64);
    }
    pub(crate) fn timeout(&self) {
        bump(&self.timeouts, 1);
    }
    pub(crate) fn wakeup(&self, events: usize) {
        bump(&self.wakeups, 1);
        bump(&self.events, events as u64);
    }
    pub(crate) fn sent(&self, n: usize) {
        bump(&self.bytes_sent, n as u64);
    }
    pub(crate) fn set_open(&self, n: usize) {
        self.open_conns.store(n as u64, Ordering::Relaxed);
    }
    /// The thread has used `total_ns` of CPU since it started.
    pub(crate) fn set_cpu(&self, total_ns: u64) {
        self.cpu_ns.store(total_ns, Ordering::Relaxed);
    }
    /// A wait returned: the thread has used `total_ns` of CPU since it started,
    /// `wait_ns` of it inside this `get_next_event` call.
    pub(crate) fn waited(&self, total_ns: u64, wait_ns: u64) {
        self.cpu_ns.store(total_ns, Ordering::Relaxed);
        // Release: whoever sees this wait total also sees the CPU total stored
        // above (or a later one), so a snapshot never has wait > total.
        let w = self
            .wait_cpu_ns
            .load(Ordering::Relaxed)
            .wrapping_add(wait_ns);
        self.wait_cpu_ns.store(w, Ordering::Release);
    }
}

/// A snapshot of all counters, summed over workers: the exit report and the JSON
/// served at `--stats-path`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ServeReport {
    /// Backend name.
    pub backend: String,
    /// Worker threads.
    pub threads: usize,
    /// Requests parsed (including those answered with an error).
    pub requests: u64,
    /// Responses by status code.
    pub responses: BTreeMap<u16, u64>,
    /// Connections accepted (including those then shed or rejected).
    pub accepts: u64,
    /// Connections reset because the load limiter said "overloaded".
    pub shed_resets: u64,
    /// Connections taken on (not refused by overload control or `--max-conns`).
    pub admitted: u64,
    /// Overload control's refusals, by reason.
    pub refused: Refused,
    /// Admitted connections that had waited in the listen queue longer than
    /// `--late-after` (their clients may have given up).
    pub served_late: u64,
    /// Admitted connections by time waited in the listen queue (measured by
    /// every policy but `none`; by `pulse` without a `--deadline`, the first
    /// of each accept batch only): `[upper bound ms, count]`, the last bound
    /// `null` for the rest.
    pub queue_delay_ms: Vec<(Option<u32>, u64)>,
    /// Connections closed at once because `--max-conns` were open.
    pub rejected_max_conns: u64,
    /// Accepts that met `EMFILE`/`ENFILE`: the waiting client then got an idle
    /// connection's descriptor (`idle_reclaimed`), or, with none idle, was
    /// accepted and closed via the spare descriptor.
    pub accept_fd_exhausted: u64,
    /// Idle keep-alive connections closed to make room for new clients when
    /// descriptors or `--max-conns` ran out.
    pub idle_reclaimed: u64,
    /// Connections closed by the header or idle timeout.
    pub timeouts: u64,
    /// `get_next_event` calls that returned.
    pub wakeups: u64,
    /// Events they returned.
    pub events: u64,
    /// `events / wakeups`.
    pub events_per_call: f64,
    /// Bytes written to clients.
    pub bytes_sent: u64,
    /// Connections open when the snapshot was taken.
    pub open_conns: u64,
    /// CPU time the worker threads have used since they started (user plus system,
    /// `CLOCK_THREAD_CPUTIME_ID`, summed over threads), in nanoseconds, as of each
    /// thread's latest pass through its event loop. Time blocked is not CPU time.
    pub cpu_ns: u64,
    /// The part of `cpu_ns` spent inside `get_next_event` (event notification: the
    /// backend's system calls, its scans of interest and results, and the
    /// scheduler's work to put the thread to sleep and wake it). Read with two
    /// clock reads around each call, so it includes a share of those reads too.
    /// Never more than `cpu_ns`.
    pub wait_cpu_ns: u64,
    /// `wait_cpu_ns / cpu_ns`: the share of the server's CPU time spent in event
    /// notification (0 before any CPU time is counted).
    pub wait_cpu_share: f64,
}

impl ServeReport {
    /// Sums the counters of `workers`.
    pub(crate) fn collect(backend: &str, workers: &[WorkerCounters]) -> ServeReport {
        let mut r = ServeReport {
            backend: backend.to_string(),
            threads: workers.len(),
            ..ServeReport::default()
        };
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        for w in workers {
            r.requests += get(&w.requests);
            for (i, s) in STATUSES.iter().enumerate() {
                let n = get(&w.statuses[i]);
                if n > 0 {
                    *r.responses.entry(*s).or_insert(0) += n;
                }
            }
            r.accepts += get(&w.accepts);
            r.shed_resets += get(&w.shed_resets);
            r.admitted += get(&w.admitted);
            r.refused.queue_delay += get(&w.refused_queue_delay);
            r.refused.deadline += get(&w.refused_deadline);
            r.refused.flushed += get(&w.refused_flushed);
            r.refused.flushes += get(&w.flushes);
            r.refused.pulses += get(&w.pulses);
            r.refused.not_listening_us += get(&w.not_listening_us);
            r.served_late += get(&w.served_late);
            if r.queue_delay_ms.is_empty() {
                r.queue_delay_ms = QUEUE_DELAY_BOUNDS_MS
                    .iter()
                    .map(|&b| Some(b))
                    .chain([None])
                    .map(|b| (b, 0))
                    .collect();
            }
            for (slot, c) in r.queue_delay_ms.iter_mut().zip(&w.queue_delay) {
                slot.1 += get(c);
            }
            r.rejected_max_conns += get(&w.rejected_max_conns);
            r.accept_fd_exhausted += get(&w.accept_fd_exhausted);
            r.idle_reclaimed += get(&w.idle_reclaimed);
            r.timeouts += get(&w.timeouts);
            r.wakeups += get(&w.wakeups);
            r.events += get(&w.events);
            r.bytes_sent += get(&w.bytes_sent);
            r.open_conns += get(&w.open_conns);
            // Wait first (acquire), then the total it was stored after.
            let wait = w.wait_cpu_ns.load(Ordering::Acquire);
            r.wait_cpu_ns += wait;
            r.cpu_ns += get(&w.cpu_ns);
        }
        r.refused.seed001 = r.shed_resets;
        r.events_per_call = if r.wakeups > 0 {
            r.events as f64 / r.wakeups as f64
        } else {
            0.0
        };
        r.wait_cpu_share = if r.cpu_ns > 0 {
            r.wait_cpu_ns as f64 / r.cpu_ns as f64
        } else {
            0.0
        };
        r
    }

    /// Overload control's counts alone.
    pub fn overload(&self) -> OverloadCounts {
        OverloadCounts {
            admitted: self.admitted,
            refused: self.refused,
            served_late: self.served_late,
            queue_delay_ms: self.queue_delay_ms.clone(),
        }
    }

    /// Responses with `status` so far.
    pub fn responses_with(&self, status: u16) -> u64 {
        self.responses.get(&status).copied().unwrap_or(0)
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }
}

impl std::fmt::Display for ServeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "backend {} threads {}: {} requests, {} accepts, {} shed resets, {} rejected (max-conns), {} fd-exhausted accepts, {} idle reclaimed, {} timeouts",
            self.backend,
            self.threads,
            self.requests,
            self.accepts,
            self.shed_resets,
            self.rejected_max_conns,
            self.accept_fd_exhausted,
            self.idle_reclaimed,
            self.timeouts
        )?;
        let late_or_slow: u64 = self
            .queue_delay_ms
            .iter()
            .filter(|(b, _)| b.is_none_or(|b| b > 16))
            .map(|(_, n)| n)
            .sum();
        writeln!(
            f,
            "overload: {} admitted, refused {} (seed001 {}, queue delay {}, deadline {}, listen queue reset {} in {} flushes), {} pulses not listening for {:.3} s, {} served late, {} waited > 16 ms",
            self.admitted,
            self.refused.total(),
            self.refused.seed001,
            self.refused.queue_delay,
            self.refused.deadline,
            self.refused.flushed,
            self.refused.flushes,
            self.refused.pulses,
            self.refused.not_listening_us as f64 / 1e6,
            self.served_late,
            late_or_slow
        )?;
        let by: Vec<String> = self
            .responses
            .iter()
            .map(|(s, n)| format!("{s}:{n}"))
            .collect();
        write!(
            f,
            "responses {}; {} wakeups, {} events ({:.2} per call), {} bytes sent; CPU {:.3} s, {:.3} s of it waiting for events ({:.1}%)",
            by.join(" "),
            self.wakeups,
            self.events,
            self.events_per_call,
            self.bytes_sent,
            self.cpu_ns as f64 / 1e9,
            self.wait_cpu_ns as f64 / 1e9,
            100.0 * self.wait_cpu_share
        )
    }
}

/// Connections overload control turned away, by reason.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Refused {
    /// Reset by seed 001's limiter (the same as `shed_resets`).
    pub seed001: u64,
    /// Reset by `codel`: the queue stood and they waited over twice the target.
    pub queue_delay: u64,
    /// Reset for waiting past `--deadline`.
    pub deadline: u64,
    /// Reset in the listen queue by `gate`, or by `pulse` beyond a batch
    /// (counted as the queue's length when it was reset; a few more may have
    /// arrived in between).
    pub flushed: u64,
    /// Times `gate` reset the listen queue.
    pub flushes: u64,
    /// Times `pulse` stopped listening to serve a batch. The clients that
    /// came meanwhile were refused by the kernel (a reset to their SYN) and
    /// are not counted here: only they know.
    pub pulses: u64,
    /// Microseconds `pulse` spent not listening.
    pub not_listening_us: u64,
}

impl Refused {
    /// All refusals.
    pub fn total(&self) -> u64 {
        self.seed001 + self.queue_delay + self.deadline + self.flushed
    }
}

/// What overload control did with new connections (the proxy's report
/// carries these; the server's has them among its own fields, as
/// [`ServeReport::overload`] gives them).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct OverloadCounts {
    /// Connections taken on.
    pub admitted: u64,
    /// Connections turned away, by reason.
    pub refused: Refused,
    /// Admitted after waiting in the listen queue longer than `late_after`.
    pub served_late: u64,
    /// Admitted connections by time waited in the listen queue, as
    /// [`ServeReport::queue_delay_ms`].
    pub queue_delay_ms: Vec<(Option<u32>, u64)>,
}

/// The proxy's counters.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ProxyReport {
    /// Client connections accepted.
    pub accepts: u64,
    /// Requests read from clients.
    pub requests: u64,
    /// Responses relayed from the origin completely.
    pub relayed: u64,
    /// 400/431 answers to malformed client requests.
    pub bad_requests: u64,
    /// 502 answers (origin refused, reset, or sent garbage).
    pub bad_gateway: u64,
    /// 504 answers (origin did not answer in time).
    pub gateway_timeout: u64,
    /// Responses the origin finished before the request body had all come
    /// (a 401, 405 or 413 sent without reading it): the rest of the body is
    /// dropped, never read as a request, and the client's connection closes
    /// after the response.
    pub answered_before_body: u64,
    /// New connections to the origin.
    pub origin_connects: u64,
    /// Exchanges that reused a pooled origin connection.
    pub origin_reuses: u64,
    /// Idempotent requests without a body resent on a fresh connection after
    /// the pooled one they went out on closed without an answer.
    pub retries: u64,
    /// Pooled origin connections found closed (or written to) when about to be
    /// reused, and dropped before a request was sent on them.
    pub stale_pooled: u64,
    /// Client connections refused for want of descriptors or memory (shed
    /// with the spare descriptor, or accepting paused).
    pub refused: u64,
    /// Idle descriptors (pooled origin connections, then idle keep-alive
    /// clients) closed to make room for new clients when descriptors ran out.
    pub idle_reclaimed: u64,
    /// Times the listening socket itself failed (`accept` said it cannot
    /// accept: shut down, closed) and accepting paused.
    pub listener_failures: u64,
    /// Overload control of new clients.
    pub overload: OverloadCounts,
    /// `io_uring_enter` calls (`--io completion`; 0 on readiness).
    pub io_uring_enters: u64,
    /// Clients whose bytes left a request head unfinished and that a peek
    /// then found reset, closed at once (`--io completion`, whose multishot
    /// recv can miss such a reset; 0 on readiness).
    pub resets_peeked: u64,
}

impl std::fmt::Display for ProxyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} accepts, {} requests, {} relayed ({} before the request body ended), {} bad requests, {} 502, {} 504, {} origin connects, {} reuses, {} retries, {} stale pooled, {} refused, {} idle reclaimed, {} listener failures; overload: {} admitted, refused {} (seed001 {}, queue delay {}, deadline {}, listen queue reset {}), {} pulses not listening for {:.3} s, {} served late",
            self.accepts,
            self.requests,
            self.relayed,
            self.answered_before_body,
            self.bad_requests,
            self.bad_gateway,
            self.gateway_timeout,
            self.origin_connects,
            self.origin_reuses,
            self.retries,
            self.stale_pooled,
            self.refused,
            self.idle_reclaimed,
            self.listener_failures,
            self.overload.admitted,
            self.overload.refused.total(),
            self.overload.refused.seed001,
            self.overload.refused.queue_delay,
            self.overload.refused.deadline,
            self.overload.refused.flushed,
            self.overload.refused.pulses,
            self.overload.refused.not_listening_us as f64 / 1e6,
            self.overload.served_late
        )?;
        if self.io_uring_enters > 0 {
            write!(
                f,
                "; io_uring_enter calls {} ({:.3} per request), {} resets peeked",
                self.io_uring_enters,
                self.io_uring_enters as f64 / self.requests.max(1) as f64,
                self.resets_peeked
            )?;
        }
        Ok(())
    }
}
