//! What a load thread does the same way whichever I/O model drives it: counting
//! connection starts, replies and failures into its [`ThreadStats`] (and the
//! progress line's shared counters), and opening the non-blocking socket of a new
//! connection (`--hog` ports, `--source`). The readiness loop (`load.rs`) and the
//! completion loop (`completion.rs`) both count through a [`Tally`], so their
//! reports mean the same thing.

use crate::config::LoadConfig;
use crate::stats::{ErrorKind, ThreadStats};
use evq_os::LocalBind;
use evq_wire::Reply;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Counters the progress line reads while threads run.
#[derive(Default)]
pub(crate) struct Shared {
    pub conns: AtomicU64,
    pub replies: AtomicU64,
    pub errors: AtomicU64,
    pub active: AtomicI64,
    pub done: AtomicUsize,
    /// What the report names as the backend: set once, by the first thread that
    /// knows it (a completion ring knows its setup flags only once built).
    pub backend: OnceLock<String>,
}

/// One thread's counts, and the batch clock they are taken against.
pub(crate) struct Tally<'a> {
    pub cfg: &'a LoadConfig,
    pub shared: &'a Shared,
    pub stats: ThreadStats,
    pub start: Instant,
    /// Milliseconds since the start at the current batch's clock read.
    pub batch_ms: u64,
    /// Replies in the current batch, published to the progress line after it.
    pub batch_replies: u64,
    /// Connections open (or being opened) by this thread.
    pub active: usize,
}

impl<'a> Tally<'a> {
    pub(crate) fn new(cfg: &'a LoadConfig, shared: &'a Shared, start: Instant) -> io::Result<Self> {
        Ok(Tally {
            cfg,
            shared,
            stats: ThreadStats::new()?,
            start,
            batch_ms: 0,
            batch_replies: 0,
            active: 0,
        })
    }

    /// The batch's one clock read: every reply in it had arrived by `now`.
    #[inline]
    pub(crate) fn batch_at(&mut self, now: Instant) {
        self.batch_ms = now.saturating_duration_since(self.start).as_millis() as u64;
    }

    /// Publishes the batch's replies to the progress line.
    #[inline]
    pub(crate) fn publish(&mut self) {
        if self.batch_replies > 0 {
            self.shared
                .replies
                .fetch_add(self.batch_replies, Ordering::Relaxed);
            self.batch_replies = 0;
        }
    }

    /// A connection due at `intended` is being started at `now`.
    pub(crate) fn starting(&mut self, intended: Instant, now: Instant) {
        self.stats.conns_started += 1;
        let lag = now.saturating_duration_since(intended).as_micros().max(1) as u64;
        let _ = self.stats.start_lag.record(lag.min(3_600_000_000));
        self.shared.conns.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was opened and now counts as active.
    pub(crate) fn opened(&mut self) {
        self.active += 1;
        self.stats.max_concurrent = self.stats.max_concurrent.max(self.active as u64);
        self.shared.active.fetch_add(1, Ordering::Relaxed);
    }

    /// An active connection ended (done, failed or cut off).
    pub(crate) fn closed(&mut self) {
        self.active -= 1;
        self.shared.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// The connection's handshake finished `connect_started` ago.
    pub(crate) fn connected(&mut self, connect_started: Instant, now: Instant) {
        let us = now.saturating_duration_since(connect_started).as_micros();
        let _ = self.stats.connect.record(us.max(1) as u64);
    }

    /// A connection finished all its calls (or the server ended it cleanly).
    pub(crate) fn completed(&mut self, conn_intended: Instant, now: Instant) {
        self.stats.conns_completed += 1;
        let us = now.saturating_duration_since(conn_intended).as_micros();
        let _ = self.stats.lifetime.record(us.max(1) as u64);
    }

    /// A failure counted by kind alone (a start that failed at once).
    pub(crate) fn fail_start(&mut self, kind: ErrorKind) {
        self.stats.errors.add(kind);
        self.shared.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection failed at `now` with its request due at `due`: counted by
    /// kind, and as a refusal (with how long the client waited to learn it) or a
    /// timeout (and whether still connecting).
    pub(crate) fn fail(&mut self, kind: ErrorKind, due: Instant, now: Instant, connecting: bool) {
        self.fail_start(kind);
        let steady = self.steady(due);
        match kind {
            ErrorKind::ConnRefused | ErrorKind::ConnReset => {
                let waited = now.saturating_duration_since(due);
                self.stats.count_refused(
                    waited.as_micros() as u64,
                    waited < self.cfg.fast_refusal,
                    steady,
                );
            }
            ErrorKind::ClientTimeout => {
                if connecting {
                    self.stats.timeouts_connecting += 1;
                }
                if steady {
                    self.stats.count_steady_timeout(connecting);
                }
            }
            _ => {}
        }
    }

    /// Whether a request due at `due` falls after the warm-up.
    pub(crate) fn steady(&self, due: Instant) -> bool {
        self.cfg
            .warm_up
            .is_some_and(|w| due.saturating_duration_since(self.start) >= w)
    }

    /// A complete reply to a request due at `due`, framed at `now`.
    pub(crate) fn reply(&mut self, reply: Reply, due: Instant, now: Instant) {
        self.stats.replies += 1;
        self.stats.body_bytes += reply.body_len;
        let class = match reply.status {
            100..=599 => (reply.status / 100) as usize - 1,
            _ => 5,
        };
        self.stats.status[class] += 1;
        let waited = now.saturating_duration_since(due);
        let lat = waited.as_micros().max(1) as u64;
        let _ = self.stats.latency.record(lat.min(3_600_000_000));
        let steady = self.steady(due);
        match reply.status {
            200..=299 => {
                self.stats
                    .count_served(lat, self.cfg.timeout.is_none_or(|t| waited <= t), steady)
            }
            // Service Unavailable, Too Many Requests: the server's way of saying no.
            429 | 503 => self
                .stats
                .count_refused(lat, waited < self.cfg.fast_refusal, steady),
            _ => {}
        }
        self.stats.count_reply_at(self.batch_ms);
        self.batch_replies += 1;
    }
}

/// Opens connections' sockets: non-blocking `connect` from the local address and
/// port `--hog` / `--source` ask for. Each thread has its own share of the port
/// range.
pub(crate) struct Dialer {
    addr: SocketAddr,
    next_port: u32,
    port_lo: u32,
    port_hi: u32,
}

impl Dialer {
    /// Thread `k` of `threads`: ports 1024–65535 split evenly between them.
    pub(crate) fn new(addr: SocketAddr, k: usize, threads: usize) -> Dialer {
        let (lo, hi) = (1024u32, 65535u32);
        let span = (hi - lo + 1) / threads.max(1) as u32;
        let port_lo = lo + span * k as u32;
        Dialer {
            addr,
            next_port: port_lo,
            port_lo,
            port_hi: port_lo + span.saturating_sub(1),
        }
    }

    fn local_bind(&mut self, cfg: &LoadConfig) -> LocalBind {
        let ip = cfg.source;
        if cfg.hog {
            let ip = ip.unwrap_or(if self.addr.is_ipv4() {
                std::net::Ipv4Addr::UNSPECIFIED.into()
            } else {
                std::net::Ipv6Addr::UNSPECIFIED.into()
            });
            let port = self.next_port;
            self.next_port = if self.next_port >= self.port_hi {
                self.port_lo
            } else {
                self.next_port + 1
            };
            return LocalBind::Port(SocketAddr::new(ip, port as u16));
        }
        match ip {
            Some(ip) => LocalBind::Address(SocketAddr::new(ip, 0)),
            None => LocalBind::Kernel,
        }
    }

    /// A non-blocking socket whose `connect` is under way (or done). With `--hog`
    /// a port in use is skipped, up to 64 tries.
    pub(crate) fn connect(&mut self, cfg: &LoadConfig) -> io::Result<RawFd> {
        let tries = if cfg.hog { 64 } else { 1 };
        let mut result = Err(io::Error::from_raw_os_error(libc::EADDRNOTAVAIL));
        for _ in 0..tries {
            let local = self.local_bind(cfg);
            result = evq_os::connect(self.addr, local, true).map(IntoRawFd::into_raw_fd);
            match &result {
                Err(e) if cfg.hog && ErrorKind::from_io(e) == ErrorKind::AddrUnavail => continue,
                _ => break,
            }
        }
        result
    }
}
