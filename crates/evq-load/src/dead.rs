//! Dead (cold) connections: deadconn of SEEDS 002 and the load-adding client of SEEDS
//! 000. Opens N connections, holds them, and reopens any the server closes, so the
//! server carries a constant population of idle descriptors. Optionally slow: a
//! partial request, or a request trickled one byte per interval.
//!
//! One thread, one evq queue, level mode with the interest switched from WRITE
//! (connecting) to READ (held): a held connection only produces an event when the
//! server sends or closes, which is exactly what the experiment needs to be cheap.

use crate::config::{resolve, DeadConfig, DeadStyle};
use crate::slots::{generation_of, Slots};
use crate::stats::{ErrorCounts, ErrorKind};
use evq::{EventQueue, Events, Interest, Options};
use evq_os::LocalBind;
use serde::Serialize;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::time::{Duration, Instant};

const RETRY_AFTER_ERROR: Duration = Duration::from_millis(100);

/// What a dead-connection run did.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeadReport {
    /// Connections asked for.
    pub target: usize,
    /// Connections held when the run ended.
    pub held: usize,
    /// Most held at once.
    pub held_max: usize,
    /// Fewest held at once after the target was first reached (`None` if never).
    pub held_min_after_ramp: Option<usize>,
    /// Seconds until the target was first reached (`None` if never).
    pub ramp_s: Option<f64>,
    /// Connection attempts.
    pub attempts: u64,
    /// Attempts that connected.
    pub opened: u64,
    /// Held connections the server closed or reset (each was replaced).
    pub closed_by_server: u64,
    /// Failed attempts and broken connections by kind.
    pub errors: ErrorCounts,
    /// Bytes sent (partial or trickled requests).
    pub bytes_sent: u64,
    /// Bytes the server sent on held connections.
    pub bytes_received: u64,
    /// What the connections sent: `idle`, `partial` or `trickle`.
    pub style: String,
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// `[seconds since start, held]` at each status interval.
    pub samples: Vec<(f64, usize)>,
}

impl DeadReport {
    /// A one-line human summary.
    pub fn summary(&self) -> String {
        format!(
            "dead: held {}/{} at end (max {}, min after ramp {}), ramp {} s, attempts {}, opened {}, closed by server {}, errors {}, duration {:.1} s",
            self.held,
            self.target,
            self.held_max,
            self.held_min_after_ramp.map_or("-".to_string(), |m| m.to_string()),
            self.ramp_s.map_or("-".to_string(), |r| format!("{r:.2}")),
            self.attempts,
            self.opened,
            self.closed_by_server,
            self.errors.total(),
            self.duration_s
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    Held,
}

struct Conn {
    fd: RawFd,
    state: State,
    sent: usize,
}

struct Holder {
    queue: EventQueue,
    addr: SocketAddr,
    local: LocalBind,
    slots: Slots<Conn>,
    connecting: usize,
    held: usize,
    prefix: Vec<u8>,
    report: DeadReport,
    retry_at: Instant,
}

impl Holder {
    fn token(&self, slot: u32) -> u64 {
        (u64::from(self.slots.generation(slot)) << 32) | u64::from(slot)
    }

    fn launch(&mut self, now: Instant) {
        self.report.attempts += 1;
        let fd = match evq_os::connect(self.addr, self.local, false).map(IntoRawFd::into_raw_fd) {
            Ok(fd) => fd,
            Err(e) => {
                self.report.errors.add(ErrorKind::from_io(&e));
                self.retry_at = now + RETRY_AFTER_ERROR;
                return;
            }
        };
        let slot = self.slots.vacant();
        let token = self.token(slot);
        if let Err(e) = self
            .queue
            .declare_interest(fd, Interest::WRITE, Options::new(token))
        {
            evq_os::io::close(fd);
            self.slots.release(slot);
            self.report.errors.add(ErrorKind::from_io(&e));
            self.retry_at = now + RETRY_AFTER_ERROR;
            return;
        }
        self.slots.put(
            slot,
            Conn {
                fd,
                state: State::Connecting,
                sent: 0,
            },
        );
        self.connecting += 1;
    }

    fn release(&mut self, slot: u32, c: Conn) {
        let _ = self.queue.close(c.fd);
        match c.state {
            State::Connecting => self.connecting -= 1,
            State::Held => self.held -= 1,
        }
        self.slots.release(slot);
    }

    /// Sends the next byte(s) of the slow request; false if the connection broke.
    fn send_next(&mut self, c: &mut Conn, all_prefix: bool) -> Result<(), ErrorKind> {
        let bytes: &[u8] = if all_prefix {
            &self.prefix[c.sent.min(self.prefix.len())..]
        } else if c.sent < self.prefix.len() {
            &self.prefix[c.sent..c.sent + 1]
        } else {
            b"a"
        };
        if bytes.is_empty() {
            return Ok(());
        }
        match evq_os::io::send(c.fd, bytes) {
            Ok(n) => {
                c.sent += n;
                self.report.bytes_sent += n as u64;
                Ok(())
            }
            // A full send buffer just means the server is not reading: still held.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(ErrorKind::from_io(&e)),
        }
    }

    fn on_event(&mut self, token: u64, style: DeadStyle, now: Instant) {
        let slot = token as u32;
        let Some(mut c) = self.slots.take(slot, generation_of(token, 32)) else {
            return;
        };
        match c.state {
            State::Connecting => {
                if let Some(e) = evq_os::socket::take_error(c.fd) {
                    self.report.errors.add(ErrorKind::from_io(&e));
                    self.retry_at = now + RETRY_AFTER_ERROR;
                    self.release(slot, c);
                    return;
                }
                let token = self.token(slot);
                if let Err(e) =
                    self.queue
                        .declare_interest(c.fd, Interest::READ, Options::new(token))
                {
                    self.report.errors.add(ErrorKind::from_io(&e));
                    self.release(slot, c);
                    return;
                }
                c.state = State::Held;
                self.connecting -= 1;
                self.held += 1;
                self.report.opened += 1;
                let first = match style {
                    DeadStyle::Idle => Ok(()),
                    DeadStyle::Partial => self.send_next(&mut c, true),
                    DeadStyle::Trickle(_) => self.send_next(&mut c, false),
                };
                if let Err(k) = first {
                    self.report.errors.add(k);
                    self.report.closed_by_server += 1;
                    self.release(slot, c);
                    return;
                }
            }
            State::Held => {
                let mut buf = [0u8; 4096];
                loop {
                    match evq_os::io::recv(c.fd, &mut buf) {
                        Ok(0) => {
                            self.report.closed_by_server += 1;
                            self.release(slot, c);
                            return;
                        }
                        Ok(n) => self.report.bytes_received += n as u64,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            self.report.closed_by_server += 1;
                            self.report.errors.add(ErrorKind::from_io(&e));
                            self.release(slot, c);
                            return;
                        }
                    }
                }
            }
        }
        self.slots.put(slot, c);
    }

    fn trickle_all(&mut self) {
        for slot in 0..self.slots.count() {
            let Some(mut c) = self.slots.take_any(slot) else {
                continue;
            };
            if c.state == State::Held {
                if let Err(k) = self.send_next(&mut c, false) {
                    self.report.errors.add(k);
                    self.report.closed_by_server += 1;
                    self.release(slot, c);
                    continue;
                }
            }
            self.slots.put(slot, c);
        }
    }
}

/// Holds `cfg.connections` connections open for `cfg.duration`, reopening any the
/// server closes, and reports how many were held. Ends by itself at the duration, or
/// early on [`evq_os::stop_on_signals`]'s signal. Raises `RLIMIT_NOFILE` first.
///
/// # Errors
/// An unresolvable server or a failure of the event queue itself; connection failures
/// are counted, never fatal.
pub fn run_dead(cfg: &DeadConfig) -> io::Result<DeadReport> {
    let addr = resolve(&cfg.server, cfg.port)?;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let local = match cfg.source {
        Some(ip) => LocalBind::Address(SocketAddr::new(ip, 0)),
        None => LocalBind::Kernel,
    };
    let host = if cfg.port == 80 {
        cfg.server.clone()
    } else {
        format!("{}:{}", cfg.server, cfg.port)
    };
    let prefix = format!("GET / HTTP/1.1\r\nHost: {host}\r\nX-Evq-Dead: ");
    let start = Instant::now();
    let end = start + cfg.duration;
    let mut h = Holder {
        queue: EventQueue::new()?,
        addr,
        local,
        slots: Slots::new(),
        connecting: 0,
        held: 0,
        prefix: match cfg.style {
            DeadStyle::Idle => Vec::new(),
            _ => prefix.into_bytes(),
        },
        report: DeadReport {
            target: cfg.connections,
            held: 0,
            held_max: 0,
            held_min_after_ramp: None,
            ramp_s: None,
            attempts: 0,
            opened: 0,
            closed_by_server: 0,
            errors: ErrorCounts::default(),
            bytes_sent: 0,
            bytes_received: 0,
            style: match cfg.style {
                DeadStyle::Idle => "idle".into(),
                DeadStyle::Partial => "partial".into(),
                DeadStyle::Trickle(_) => "trickle".into(),
            },
            duration_s: 0.0,
            samples: Vec::new(),
        },
        retry_at: start,
    };
    let trickle = match cfg.style {
        DeadStyle::Trickle(t) => Some(t),
        _ => None,
    };
    let mut next_trickle = trickle.map(|t| start + t);
    let mut next_report = cfg.report_every.map(|e| start + e);
    let mut events = Events::with_capacity(256);
    loop {
        let now = Instant::now();
        if now >= end || evq_os::stop_requested() {
            break;
        }
        while h.connecting < cfg.connect_batch
            && h.connecting + h.held < cfg.connections
            && now >= h.retry_at
        {
            h.launch(now);
        }
        let mut wait = Duration::from_millis(100).min(end - now);
        if h.connecting + h.held < cfg.connections && h.retry_at > now {
            wait = wait.min(h.retry_at - now);
        }
        for t in [next_trickle, next_report].into_iter().flatten() {
            wait = wait.min(t.saturating_duration_since(now));
        }
        h.queue.get_next_event(&mut events, Some(wait))?;
        let now = Instant::now();
        for ev in events.iter() {
            h.on_event(ev.token(), cfg.style, now);
        }
        h.report.held_max = h.report.held_max.max(h.held);
        if h.report.ramp_s.is_none() && h.held >= cfg.connections {
            h.report.ramp_s = Some(now.saturating_duration_since(start).as_secs_f64());
        }
        if h.report.ramp_s.is_some() {
            let m = h
                .report
                .held_min_after_ramp
                .map_or(h.held, |m| m.min(h.held));
            h.report.held_min_after_ramp = Some(m);
        }
        if let (Some(t), Some(every)) = (next_trickle, trickle) {
            if now >= t {
                h.trickle_all();
                next_trickle = Some(now + every);
            }
        }
        if let (Some(t), Some(every)) = (next_report, cfg.report_every) {
            if now >= t {
                let el = now.saturating_duration_since(start).as_secs_f64();
                h.report.samples.push((el, h.held));
                let _ = writeln!(
                    io::stderr(),
                    "[{el:6.1}s] held {}/{} connecting {} closed-by-server {} errors {}",
                    h.held,
                    cfg.connections,
                    h.connecting,
                    h.report.closed_by_server,
                    h.report.errors.total()
                );
                next_report = Some(now + every);
            }
        }
    }
    let mut report = h.report.clone();
    report.held = h.held;
    report.duration_s = start.elapsed().as_secs_f64();
    for slot in 0..h.slots.count() {
        if let Some(c) = h.slots.take_any(slot) {
            h.release(slot, c);
        }
    }
    Ok(report)
}
