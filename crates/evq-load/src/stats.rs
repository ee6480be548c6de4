//! What a load run counts (per thread, merged at the end) and the report it makes:
//! httperf's summary as text, and everything as JSON.

use crate::config::{IoModel, LoadConfig, LoopMode};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

/// Why a connection (or connection attempt) failed; httperf's error classes plus the
/// framing failures httperf folds into "other".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// No progress within `--timeout` (plus `--think-timeout` while awaiting a reply),
    /// or the kernel's own connect timeout (`ETIMEDOUT`).
    ClientTimeout,
    /// `ECONNREFUSED`.
    ConnRefused,
    /// `ECONNRESET` or `EPIPE`: the server reset the connection.
    ConnReset,
    /// `EMFILE`/`ENFILE`: out of descriptors.
    FdUnavail,
    /// `EADDRNOTAVAIL`/`EADDRINUSE`: out of local ports or addresses.
    AddrUnavail,
    /// The server closed the connection before a reply was complete.
    PrematureClose,
    /// The reply could not be parsed as HTTP/1.x.
    BadReply,
    /// Still in progress when the run's hard time cap (`--max-time`) or a stop signal
    /// ended it.
    Cutoff,
    /// Any other OS error.
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::ClientTimeout,
        ErrorKind::ConnRefused,
        ErrorKind::ConnReset,
        ErrorKind::FdUnavail,
        ErrorKind::AddrUnavail,
        ErrorKind::PrematureClose,
        ErrorKind::BadReply,
        ErrorKind::Cutoff,
        ErrorKind::Other,
    ];

    /// The name used in the summary and the JSON (httperf's where it has one).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::ClientTimeout => "client-timo",
            ErrorKind::ConnRefused => "connrefused",
            ErrorKind::ConnReset => "connreset",
            ErrorKind::FdUnavail => "fd-unavail",
            ErrorKind::AddrUnavail => "addrunavail",
            ErrorKind::PrematureClose => "premature-close",
            ErrorKind::BadReply => "bad-reply",
            ErrorKind::Cutoff => "cutoff",
            ErrorKind::Other => "other",
        }
    }

    /// Classifies an OS error.
    pub fn from_io(e: &io::Error) -> ErrorKind {
        match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => ErrorKind::ConnRefused,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) | Some(libc::ECONNABORTED) => {
                ErrorKind::ConnReset
            }
            Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorKind::FdUnavail,
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => ErrorKind::AddrUnavail,
            Some(libc::ETIMEDOUT) => ErrorKind::ClientTimeout,
            _ => ErrorKind::Other,
        }
    }
}

/// Counts by [`ErrorKind`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; 9]);

impl ErrorCounts {
    /// Adds one of `kind`.
    pub fn add(&mut self, kind: ErrorKind) {
        self.0[kind as usize] += 1;
    }
    /// The count of `kind`.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind as usize]
    }
    /// All errors.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Adds another set of counts.
    pub fn merge(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
    fn to_map(self) -> BTreeMap<&'static str, u64> {
        let mut m: BTreeMap<&'static str, u64> = ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), self.get(*k)))
            .collect();
        m.insert("total", self.total());
        m
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(s)
    }
}

/// Width of the reply-rate buckets the threads keep; samples are built from them.
pub(crate) const BUCKET_MS: u64 = 100;

/// `a / b`, or 0 where there is nothing to divide by (no replies, no rate).
fn per(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// A histogram of microseconds, 1 µs to 1 h, 3 significant digits.
pub(crate) fn micros_histogram() -> io::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| io::Error::other(format!("histogram: {e}")))
}

/// What one thread counted.
pub(crate) struct ThreadStats {
    pub conns_started: u64,
    pub conns_completed: u64,
    pub requests: u64,
    pub replies: u64,
    pub status: [u64; 6],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub body_bytes: u64,
    pub errors: ErrorCounts,
    pub latency: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub lifetime: Histogram<u64>,
    pub start_lag: Histogram<u64>,
    pub reply_buckets: Vec<u64>,
    pub max_concurrent: u64,
    pub unanswered: u64,
    /// 2xx replies' latency from the intended start.
    pub served: Histogram<u64>,
    /// 2xx replies within the timeout of their intended start.
    pub served_in_time: u64,
    /// Time from the intended start to a refusal (see [`Outcomes::refused`]).
    pub refused: Histogram<u64>,
    /// Refusals within the fast-refusal bound.
    pub refused_fast: u64,
    /// `client-timo` failures while still connecting.
    pub timeouts_connecting: u64,
    /// The same outcomes for requests due after the warm-up.
    pub steady: SteadyCounts,
    /// `io_uring_enter` calls made by the thread's completion ring (`--io
    /// completion`; 0 otherwise).
    pub ring_enters: u64,
}

/// Outcomes of the requests due after the warm-up ([`LoadConfig::warm_up`]).
#[derive(Clone, Debug)]
pub(crate) struct SteadyCounts {
    pub served: Histogram<u64>,
    pub served_in_time: u64,
    pub refused: u64,
    pub refused_fast: u64,
    pub timed_out: u64,
    pub timed_out_connecting: u64,
}

impl SteadyCounts {
    fn merge(&mut self, o: &SteadyCounts) {
        let _ = self.served.add(&o.served);
        self.served_in_time += o.served_in_time;
        self.refused += o.refused;
        self.refused_fast += o.refused_fast;
        self.timed_out += o.timed_out;
        self.timed_out_connecting += o.timed_out_connecting;
    }
}

impl ThreadStats {
    pub(crate) fn new() -> io::Result<ThreadStats> {
        Ok(ThreadStats {
            conns_started: 0,
            conns_completed: 0,
            requests: 0,
            replies: 0,
            status: [0; 6],
            bytes_sent: 0,
            bytes_received: 0,
            body_bytes: 0,
            errors: ErrorCounts::default(),
            latency: micros_histogram()?,
            connect: micros_histogram()?,
            lifetime: micros_histogram()?,
            start_lag: micros_histogram()?,
            reply_buckets: Vec::new(),
            max_concurrent: 0,
            unanswered: 0,
            served: micros_histogram()?,
            served_in_time: 0,
            refused: micros_histogram()?,
            refused_fast: 0,
            timeouts_connecting: 0,
            steady: SteadyCounts {
                served: micros_histogram()?,
                served_in_time: 0,
                refused: 0,
                refused_fast: 0,
                timed_out: 0,
                timed_out_connecting: 0,
            },
            ring_enters: 0,
        })
    }

    /// A 2xx reply `us` microseconds after its request was due; `in_time` if that
    /// is within the run's timeout; `steady` if it was due after the warm-up.
    pub(crate) fn count_served(&mut self, us: u64, in_time: bool, steady: bool) {
        let us = us.clamp(1, 3_600_000_000);
        let _ = self.served.record(us);
        self.served_in_time += u64::from(in_time);
        if steady {
            let _ = self.steady.served.record(us);
            self.steady.served_in_time += u64::from(in_time);
        }
    }

    /// A refusal the client learned `us` microseconds after the request was due;
    /// `fast` if within the fast-refusal bound; `steady` as above.
    pub(crate) fn count_refused(&mut self, us: u64, fast: bool, steady: bool) {
        let _ = self.refused.record(us.clamp(1, 3_600_000_000));
        self.refused_fast += u64::from(fast);
        if steady {
            self.steady.refused += 1;
            self.steady.refused_fast += u64::from(fast);
        }
    }

    /// A client timeout of a request due after the warm-up.
    pub(crate) fn count_steady_timeout(&mut self, connecting: bool) {
        self.steady.timed_out += 1;
        self.steady.timed_out_connecting += u64::from(connecting);
    }

    pub(crate) fn count_reply_at(&mut self, elapsed_ms: u64) {
        let i = (elapsed_ms / BUCKET_MS) as usize;
        if i >= self.reply_buckets.len() {
            // Bounded by the run's hard cap, so this cannot grow without limit.
            self.reply_buckets.resize(i + 1, 0);
        }
        self.reply_buckets[i] += 1;
    }

    /// The report for a run whose merged counts these are.
    pub(crate) fn into_report(
        self,
        cfg: &LoadConfig,
        backend: String,
        duration_s: f64,
        cut_off: bool,
        cpu: (f64, f64),
    ) -> LoadReport {
        let total = self;
        let d = duration_s.max(1e-9);
        let st = total.status;
        let (cpu_user_s, cpu_sys_s) = cpu;
        LoadReport {
            mode: match cfg.mode {
                LoopMode::Open { .. } => "open".into(),
                LoopMode::Closed { .. } => "closed".into(),
            },
            threads: cfg.threads,
            backend,
            duration_s,
            cut_off,
            connections: total.conns_started,
            connections_completed: total.conns_completed,
            max_concurrent: total.max_concurrent,
            connection_rate: total.conns_started as f64 / d,
            requests: total.requests,
            request_rate: total.requests as f64 / d,
            replies: total.replies,
            reply_rate_avg: total.replies as f64 / d,
            reply_rate: RateSamples::from_buckets(&total.reply_buckets, duration_s),
            status: StatusClasses {
                s1xx: st[0],
                s2xx: st[1],
                s3xx: st[2],
                s4xx: st[3],
                s5xx: st[4],
                other: st[5],
            },
            errors: total.errors,
            unanswered: total.unanswered,
            outcomes: Outcomes {
                served: total.served.len(),
                served_in_time: total.served_in_time,
                refused: total.refused.len(),
                refused_fast: total.refused_fast,
                fast_refusal_ms: cfg.fast_refusal.as_secs_f64() * 1000.0,
                timed_out: total.errors.get(ErrorKind::ClientTimeout),
                timed_out_connecting: total.timeouts_connecting,
            },
            steady: cfg.warm_up.map(|w| Steady {
                warm_up_s: w.as_secs_f64(),
                outcomes: Outcomes {
                    served: total.steady.served.len(),
                    served_in_time: total.steady.served_in_time,
                    refused: total.steady.refused,
                    refused_fast: total.steady.refused_fast,
                    fast_refusal_ms: cfg.fast_refusal.as_secs_f64() * 1000.0,
                    timed_out: total.steady.timed_out,
                    timed_out_connecting: total.steady.timed_out_connecting,
                },
                served_ms: Percentiles::of(&total.steady.served),
            }),
            served_ms: Percentiles::of(&total.served),
            refused_ms: Percentiles::of(&total.refused),
            latency_ms: Percentiles::of(&total.latency),
            connect_ms: Percentiles::of(&total.connect),
            connection_time_ms: Percentiles::of(&total.lifetime),
            start_lag_ms: Percentiles::of(&total.start_lag),
            bytes_sent: total.bytes_sent,
            bytes_received: total.bytes_received,
            cpu_user_s,
            cpu_sys_s,
            cpu_per_reply_us: per((cpu_user_s + cpu_sys_s) * 1e6, total.replies as f64),
            io_uring_enters: (cfg.io == IoModel::Completion).then_some(total.ring_enters),
            config: cfg.clone(),
        }
    }

    pub(crate) fn merge(&mut self, o: &ThreadStats) {
        self.conns_started += o.conns_started;
        self.conns_completed += o.conns_completed;
        self.requests += o.requests;
        self.replies += o.replies;
        for (a, b) in self.status.iter_mut().zip(o.status.iter()) {
            *a += b;
        }
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.body_bytes += o.body_bytes;
        self.errors.merge(&o.errors);
        let _ = self.latency.add(&o.latency);
        let _ = self.connect.add(&o.connect);
        let _ = self.lifetime.add(&o.lifetime);
        let _ = self.start_lag.add(&o.start_lag);
        if self.reply_buckets.len() < o.reply_buckets.len() {
            self.reply_buckets.resize(o.reply_buckets.len(), 0);
        }
        for (a, b) in self.reply_buckets.iter_mut().zip(o.reply_buckets.iter()) {
            *a += b;
        }
        self.max_concurrent += o.max_concurrent;
        self.unanswered += o.unanswered;
        let _ = self.served.add(&o.served);
        self.served_in_time += o.served_in_time;
        let _ = self.refused.add(&o.refused);
        self.refused_fast += o.refused_fast;
        self.timeouts_connecting += o.timeouts_connecting;
        self.steady.merge(&o.steady);
        self.ring_enters += o.ring_enters;
    }
}

/// What became of the requests, as an overload study counts them: served (and
/// whether in time), refused (and whether fast), or timed out (and where).
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Outcomes {
    /// 2xx replies.
    pub served: u64,
    /// 2xx replies that came within `--timeout` of their request's intended start
    /// (goodput; every 2xx reply when the run has no timeout). `--timeout` is a
    /// limit on waiting for progress, so a reply can come later than it.
    pub served_in_time: u64,
    /// Requests the server turned away: a refused connection (`ECONNREFUSED`), a
    /// reset (`ECONNRESET`, `EPIPE`, `ECONNABORTED`), or a `503`/`429` reply.
    pub refused: u64,
    /// Refusals the client learned of within `fast_refusal_ms` of the request's
    /// intended start.
    pub refused_fast: u64,
    /// The fast-refusal bound (`--fast-refusal`), milliseconds.
    pub fast_refusal_ms: f64,
    /// `client-timo` failures.
    pub timed_out: u64,
    /// Those that timed out still connecting: the SYN was not answered (a full
    /// listen queue drops it, and the retransmission comes a second later).
    pub timed_out_connecting: u64,
}

/// What became of the requests due after a warm-up: an overload study's
/// steady state, without the transient of the load's first moments.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Steady {
    /// The warm-up left out, seconds from the run's start.
    pub warm_up_s: f64,
    /// Served, refused or timed out.
    pub outcomes: Outcomes,
    /// Latency of their 2xx replies from the intended start, milliseconds.
    pub served_ms: Percentiles,
}

/// Percentiles of a latency distribution, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Number of values.
    pub count: u64,
}

impl Percentiles {
    pub(crate) fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Percentiles {
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            stddev: h.stdev() / 1000.0,
            count: h.len(),
        }
    }
}

/// Reply counts by status class.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct StatusClasses {
    /// 1xx (only 101 reaches here; other interim replies are skipped).
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    /// 2xx.
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    /// 3xx.
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    /// 4xx.
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    /// 5xx.
    #[serde(rename = "5xx")]
    pub s5xx: u64,
    /// Outside 100–599.
    pub other: u64,
}

/// Reply-rate samples (httperf samples every 5 s).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RateSamples {
    /// Length of one sample, seconds.
    pub interval_s: f64,
    /// Replies per second in each complete interval.
    pub samples: Vec<f64>,
    /// Smallest sample.
    pub min: f64,
    /// Mean of the samples.
    pub avg: f64,
    /// Largest sample.
    pub max: f64,
    /// Standard deviation of the samples.
    pub stddev: f64,
}

impl RateSamples {
    /// Samples of 5 s as httperf; shorter runs get 1 s samples (under 15 s) or 0.1 s
    /// samples (under 3 s), so they still get a few. The summary names the length.
    /// Every whole interval of the run is a sample: the buckets end at the last
    /// reply, and an interval after it is a sample of zero, not a missing one.
    pub(crate) fn from_buckets(buckets: &[u64], duration_s: f64) -> RateSamples {
        let interval_s = if duration_s >= 15.0 {
            5.0
        } else if duration_s >= 3.0 {
            1.0
        } else {
            BUCKET_MS as f64 / 1000.0
        };
        let per = ((interval_s * 1000.0) as u64 / BUCKET_MS).max(1) as usize;
        let whole = (duration_s * 1000.0 / BUCKET_MS as f64) as usize / per;
        let samples: Vec<f64> = (0..whole)
            .map(|i| {
                let from = (i * per).min(buckets.len());
                let to = ((i + 1) * per).min(buckets.len());
                buckets[from..to].iter().sum::<u64>() as f64 / interval_s
            })
            .collect();
        if samples.is_empty() {
            return RateSamples {
                interval_s,
                ..RateSamples::default()
            };
        }
        let n = samples.len() as f64;
        let avg = samples.iter().sum::<f64>() / n;
        let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n;
        RateSamples {
            interval_s,
            min: samples.iter().cloned().fold(f64::INFINITY, f64::min),
            max: samples.iter().cloned().fold(0.0, f64::max),
            avg,
            stddev: var.sqrt(),
            samples,
        }
    }
}

/// Everything a load run measured. `--json` prints it whole.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LoadReport {
    /// `"open"` (httperf: connections started on a schedule) or `"closed"` (wrk: a
    /// fixed number of connections, each sending as soon as its reply arrives).
    pub mode: String,
    /// Threads (one event queue each).
    pub threads: usize,
    /// evq backend the threads used.
    pub backend: String,
    /// Wall-clock length of the run, seconds.
    pub duration_s: f64,
    /// Whether the hard cap or a stop signal ended the run early.
    pub cut_off: bool,
    /// Connections started (attempted).
    pub connections: u64,
    /// Connections that finished all their calls (or were closed cleanly by the
    /// server after a complete reply).
    pub connections_completed: u64,
    /// Upper bound on connections open at once (sum of per-thread maxima).
    pub max_concurrent: u64,
    /// Connections started per second.
    pub connection_rate: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests sent per second.
    pub request_rate: f64,
    /// Complete replies received.
    pub replies: u64,
    /// Replies per second over the whole run.
    pub reply_rate_avg: f64,
    /// Reply-rate samples.
    pub reply_rate: RateSamples,
    /// Replies by status class.
    pub status: StatusClasses,
    /// Errors by kind (a failed connection counts once).
    pub errors: ErrorCounts,
    /// Requests sent whose reply never came (their connection failed or was cut off).
    pub unanswered: u64,
    /// Served, refused or timed out.
    pub outcomes: Outcomes,
    /// The outcomes of the requests due after the warm-up, when the run had one
    /// ([`LoadConfig::warm_up`]).
    pub steady: Option<Steady>,
    /// Latency of the 2xx replies alone, from the intended start, milliseconds.
    pub served_ms: Percentiles,
    /// Time from a request's intended start until the client learned it was
    /// refused ([`Outcomes::refused`]), milliseconds.
    pub refused_ms: Percentiles,
    /// Reply latency from each request's *intended* start (the schedule in open
    /// loop; the send time of a burst otherwise), milliseconds.
    pub latency_ms: Percentiles,
    /// Time to establish a connection, milliseconds.
    pub connect_ms: Percentiles,
    /// Life of a successful connection, from intended start to close, milliseconds.
    pub connection_time_ms: Percentiles,
    /// How late connections were started against their intended time: the
    /// generator's own lag (timer granularity, a busy thread). Already inside
    /// `latency_ms`; large values mean the generator, not the server, was the limit.
    pub start_lag_ms: Percentiles,
    /// Request bytes sent.
    pub bytes_sent: u64,
    /// Response bytes received (heads and bodies).
    pub bytes_received: u64,
    /// User CPU of this process during the run (getrusage), seconds.
    pub cpu_user_s: f64,
    /// System CPU of this process during the run (getrusage), seconds.
    pub cpu_sys_s: f64,
    /// CPU (user+system) per reply, microseconds.
    pub cpu_per_reply_us: f64,
    /// `io_uring_enter` calls the completion rings made (`--io completion`; `null`
    /// for the readiness loop, whose system calls are not counted).
    pub io_uring_enters: Option<u64>,
    /// The configuration that produced these numbers (durations in seconds).
    pub config: LoadConfig,
}

impl LoadReport {
    /// The httperf-style text summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let d = self.duration_s.max(1e-9);
        let _ = writeln!(
            s,
            "Total: connections {} requests {} replies {} test-duration {:.3} s{}",
            self.connections,
            self.requests,
            self.replies,
            self.duration_s,
            if self.cut_off { " (cut off)" } else { "" }
        );
        let _ = writeln!(
            s,
            "Mode: {} loop, {} thread(s), evq backend {}",
            self.mode, self.threads, self.backend
        );
        let _ = writeln!(s);
        let (c, lag) = (&self.connection_time_ms, &self.start_lag_ms);
        let _ = writeln!(
            s,
            "Connection rate: {:.1} conn/s ({:.1} ms/conn, <={} concurrent connections)\n\
             Connection time [ms]: min {:.1} avg {:.1} max {:.1} median {:.1} stddev {:.1}\n\
             Connection time [ms]: connect {:.3}\n\
             Start lag [ms] (actual - intended start): p50 {:.3} p99 {:.3} max {:.3}\n\
             Connection length [replies/conn]: {:.3}\n",
            self.connection_rate,
            per(1000.0, self.connection_rate),
            self.max_concurrent,
            c.min,
            c.mean,
            c.max,
            c.p50,
            c.stddev,
            self.connect_ms.mean,
            lag.p50,
            lag.p99,
            lag.max,
            per(self.replies as f64, self.connections_completed as f64)
        );
        let _ = writeln!(
            s,
            "Request rate: {:.1} req/s ({:.3} ms/req)\nRequest size [B]: {:.1}\n",
            self.request_rate,
            per(1000.0, self.request_rate),
            per(self.bytes_sent as f64, self.requests as f64)
        );
        let (r, l, st) = (&self.reply_rate, &self.latency_ms, &self.status);
        let other = if st.other > 0 {
            format!(" other={}", st.other)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "Reply rate [replies/s]: min {:.1} avg {:.1} max {:.1} stddev {:.1} ({} samples of {:.1} s)\n\
             Reply time [ms] (from intended start): p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}\n\
             Reply size [B]: {:.1} (total incl. header)\n\
             Reply status: 1xx={} 2xx={} 3xx={} 4xx={} 5xx={}{other}\n",
            r.min,
            r.avg,
            r.max,
            r.stddev,
            r.samples.len(),
            r.interval_s,
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.max,
            per(self.bytes_received as f64, self.replies as f64),
            st.s1xx,
            st.s2xx,
            st.s3xx,
            st.s4xx,
            st.s5xx
        );
        let _ = writeln!(
            s,
            "CPU time [s]: user {:.2} system {:.2} (user {:.1}% system {:.1}% total {:.1}%); {:.1} us/reply",
            self.cpu_user_s,
            self.cpu_sys_s,
            100.0 * self.cpu_user_s / d,
            100.0 * self.cpu_sys_s / d,
            100.0 * (self.cpu_user_s + self.cpu_sys_s) / d,
            self.cpu_per_reply_us
        );
        if let Some(n) = self.io_uring_enters {
            let _ = writeln!(
                s,
                "io_uring_enter calls: {n} ({:.3} per reply)",
                per(n as f64, self.replies as f64)
            );
        }
        let _ = writeln!(
            s,
            "Net I/O: {:.1} KB/s ({:.1}*10^6 bps)",
            (self.bytes_sent + self.bytes_received) as f64 / d / 1024.0,
            (self.bytes_sent + self.bytes_received) as f64 * 8.0 / d / 1e6
        );
        let o = &self.outcomes;
        let _ = writeln!(
            s,
            "Outcomes: served {} ({} in time), refused {} ({} within {} ms), timed out {} ({} connecting)\n\
             Served reply time [ms]: p50 {:.3} p99 {:.3}; time to refusal [ms]: p50 {:.3} p99 {:.3}",
            o.served,
            o.served_in_time,
            o.refused,
            o.refused_fast,
            o.fast_refusal_ms,
            o.timed_out,
            o.timed_out_connecting,
            self.served_ms.p50,
            self.served_ms.p99,
            self.refused_ms.p50,
            self.refused_ms.p99
        );
        if let Some(st) = &self.steady {
            let o = &st.outcomes;
            let _ = writeln!(
                s,
                "After the {:.3} s warm-up: served {} ({} in time), refused {} ({} fast), timed out {} ({} connecting); served p50 {:.3} p99 {:.3} ms",
                st.warm_up_s,
                o.served,
                o.served_in_time,
                o.refused,
                o.refused_fast,
                o.timed_out,
                o.timed_out_connecting,
                st.served_ms.p50,
                st.served_ms.p99
            );
        }
        let _ = writeln!(s);
        let _ = write!(s, "Errors: total {}", self.errors.total());
        for k in ErrorKind::ALL {
            let _ = write!(s, " {} {}", k.name(), self.errors.get(k));
        }
        let _ = writeln!(s);
        if self.unanswered > 0 {
            let _ = writeln!(s, "Unanswered requests: {}", self.unanswered);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_use_whole_intervals() {
        let buckets = vec![10; 35]; // 3.5 s of 100 replies/s
        let r = RateSamples::from_buckets(&buckets, 3.5);
        let short = RateSamples::from_buckets(&buckets, 0.35);
        assert_eq!(short.samples, vec![100.0; 3]);
        assert_eq!(r.interval_s, 1.0);
        assert_eq!(r.samples, vec![100.0, 100.0, 100.0]);
        assert_eq!(r.stddev, 0.0);
        let r = RateSamples::from_buckets(&[], 0.2);
        assert_eq!(r.samples, vec![0.0, 0.0]);
        let r = RateSamples::from_buckets(&[], 0.05);
        assert!(r.samples.is_empty());
    }

    #[test]
    fn intervals_after_the_last_reply_are_zero_samples() {
        // Replies for 2.5 s of a 4 s run: the buckets stop at the last reply.
        let r = RateSamples::from_buckets(&[10; 25], 4.0);
        assert_eq!(r.interval_s, 1.0);
        assert_eq!(r.samples, vec![100.0, 100.0, 50.0, 0.0]);
        assert_eq!(r.min, 0.0);
        let short = RateSamples::from_buckets(&[10; 2], 0.4);
        assert_eq!(short.samples, vec![100.0, 100.0, 0.0, 0.0]);
    }

    #[test]
    fn error_map_has_every_kind_and_total() {
        let mut e = ErrorCounts::default();
        e.add(ErrorKind::ConnReset);
        e.add(ErrorKind::ConnReset);
        let v = serde_json::to_value(e).expect("serializes");
        assert_eq!(v["connreset"], 2);
        assert_eq!(v["total"], 2);
        assert_eq!(v["client-timo"], 0);
    }
}
