//! A user-space WAN delay relay over evq: accepts TCP connections, connects each to
//! the upstream server, and forwards bytes both ways after a per-direction delay (plus
//! jitter) and at most a per-direction bandwidth. This kernel has no `tc netem`, so
//! this is how load from a namespace gets a wide-area round-trip time.
//!
//! Model, per direction: a chunk read at time `t` is released at
//! `max(t, link_free) + len/bandwidth + delay + jitter`, never before the previous
//! chunk of the same direction (a byte stream cannot reorder). When a direction holds
//! more than [`QUEUE_LIMIT`] bytes the relay stops reading that side, so the sender
//! sees TCP back-pressure as it would behind a slow link. End-of-file travels as a
//! marker with the same delay and becomes `shutdown(SHUT_WR)` on the other side.
//!
//! One thread, level mode, interest recomputed after each step; one evq timer per
//! direction for the head of its queue.
//!
//! Accepting pauses when it cannot go on: out of descriptors with no spare to shed
//! with (or out of memory), or a listener that failed (shut down). A level-triggered
//! listener stays readable then, so watching it would return at once for ever: it
//! is unwatched and watched again after [`ACCEPT_PAUSE`], or sooner once a pair
//! closed and freed descriptors.

use crate::slots::{generation_of, Slots};
use evq::{EventQueue, Events, Interest, Options, TimerId};
use evq_os::{Accept, Acceptor, LocalBind};
use serde::Serialize;
use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most bytes one direction holds before the relay stops reading its sender.
pub const QUEUE_LIMIT: usize = 1 << 20;
const LISTEN_TOKEN: u64 = (1 << 62) - 1;
const TIMER_BIT: u64 = 1 << 63;
/// How long accepting pauses when it cannot go on and no descriptor is freed.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Impairment of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkSpec {
    /// One-way delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per chunk.
    pub jitter: Duration,
    /// Bytes per second; `None`: unlimited.
    pub bandwidth: Option<u64>,
}

/// What the relay does.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayConfig {
    /// Where to accept clients.
    pub listen: SocketAddr,
    /// The server to connect each client to.
    pub upstream: SocketAddr,
    /// Client → server impairment.
    pub to_server: LinkSpec,
    /// Server → client impairment.
    pub to_client: LinkSpec,
}

/// What a relay run forwarded.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RelayReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Upstream connections that failed.
    pub upstream_failures: u64,
    /// Bytes forwarded client → server.
    pub bytes_to_server: u64,
    /// Bytes forwarded server → client.
    pub bytes_to_client: u64,
    /// Times accepting paused: out of descriptors with no spare, out of
    /// memory, or the listener failed.
    pub accept_pauses: u64,
}

struct Chunk {
    release: Instant,
    data: Vec<u8>,
    /// End-of-file marker (data empty).
    eof: bool,
}

#[derive(Default)]
struct Dir {
    queue: VecDeque<Chunk>,
    queued: usize,
    /// Offset already written of the head chunk.
    head_off: usize,
    link_free: Option<Instant>,
    last_release: Option<Instant>,
    read_eof: bool,
    write_shut: bool,
    /// The last write into the receiving side would have blocked.
    blocked: bool,
    timer: Option<TimerId>,
}

struct Pair {
    /// `fds[0]` the client, `fds[1]` the server.
    fds: [RawFd; 2],
    upstream_connected: bool,
    /// `dirs[0]` client → server, `dirs[1]` server → client.
    dirs: [Dir; 2],
    interest: [Interest; 2],
}

/// A relay bound to its listening address, ready to [`Relay::run`].
pub struct Relay {
    cfg: RelayConfig,
    listener: TcpListener,
    /// Accepts with the spare-descriptor trick, so running out of descriptors
    /// sheds connections instead of spinning on a listener that stays readable.
    acceptor: Acceptor,
    queue: EventQueue,
    pairs: Slots<Pair>,
    rng: u64,
    report: RelayReport,
    /// Accepting is paused until then (the listener unwatched).
    paused_until: Option<Instant>,
}

impl Relay {
    /// Binds the listening socket (so callers know it is ready before clients start).
    ///
    /// # Errors
    /// `bind`/`listen` errors, or failure to create the event queue.
    pub fn bind(cfg: &RelayConfig) -> io::Result<Relay> {
        let listener = TcpListener::bind(cfg.listen)?;
        listener.set_nonblocking(true)?;
        let mut queue = EventQueue::new()?;
        queue.declare_interest(
            listener.as_raw_fd(),
            Interest::READ,
            Options::new(LISTEN_TOKEN),
        )?;
        Ok(Relay {
            cfg: cfg.clone(),
            listener,
            acceptor: Acceptor::new(),
            queue,
            pairs: Slots::new(),
            rng: 0x2545_f491_4f6c_dd1d,
            report: RelayReport::default(),
            paused_until: None,
        })
    }

    /// The address actually bound (useful with port 0).
    ///
    /// # Errors
    /// `getsockname`'s error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Forwards until `stop` is set (checked every 100 ms), then closes everything.
    ///
    /// # Errors
    /// A failure of the event queue itself; connection failures only end their pair.
    pub fn run(mut self, stop: &AtomicBool) -> io::Result<RelayReport> {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Relaxed) && !evq_os::stop_requested() {
            self.queue
                .get_next_event(&mut events, Some(Duration::from_millis(100)))?;
            let now = Instant::now();
            for ev in events.iter() {
                let token = ev.token();
                if token == LISTEN_TOKEN {
                    if self.paused_until.is_none() {
                        self.accept_all();
                    }
                    continue;
                }
                let slot = (token & 0xffff_ffff) as u32;
                let gen = generation_of(token, 33);
                let side = ((token >> 32) & 1) as usize;
                let Some(mut p) = self.pairs.take(slot, gen) else {
                    continue;
                };
                let alive = if ev.is_timer() && token & TIMER_BIT != 0 {
                    p.dirs[side].timer = None;
                    self.flush(&mut p, slot, side, now)
                } else {
                    self.on_ready(&mut p, slot, side, ev.is_readable(), ev.is_writable(), now)
                };
                let alive = alive && self.update_interest(&mut p, slot).is_ok();
                let done = p.dirs.iter().all(|d| d.write_shut);
                if alive && !done {
                    self.pairs.put(slot, p);
                } else {
                    self.release(slot, p);
                    // The descriptors a pause waits for.
                    if self.paused_until.is_some() {
                        self.paused_until = Some(now);
                    }
                }
            }
            if self.paused_until.is_some_and(|t| Instant::now() >= t) {
                self.resume_accepting();
            }
        }
        for slot in 0..self.pairs.count() {
            if let Some(p) = self.pairs.take_any(slot) {
                self.release(slot, p);
            }
        }
        Ok(self.report)
    }

    fn token(&self, slot: u32, side: usize) -> u64 {
        (u64::from(self.pairs.generation(slot)) << 33) | ((side as u64) << 32) | u64::from(slot)
    }

    fn accept_all(&mut self) {
        loop {
            let client = match self.acceptor.accept(self.listener.as_raw_fd()) {
                Accept::Conn(fd) => fd,
                Accept::Skipped | Accept::Shed => continue,
                Accept::Empty => return,
                // Out of descriptors with no spare, out of memory, or a broken
                // listener: the listener stays readable, so pause.
                Accept::Exhausted(_) | Accept::NoDescriptor(_) | Accept::Failed(_) => {
                    return self.pause_accepting()
                }
            };
            self.report.accepted += 1;
            let _ = evq_os::socket::set_nodelay(client.as_raw_fd());
            let server = match evq_os::connect(self.cfg.upstream, LocalBind::Kernel, true) {
                Ok(fd) => fd.into_raw_fd(),
                Err(_) => {
                    self.report.upstream_failures += 1;
                    continue;
                }
            };
            // The pair owns both descriptors from here on.
            let cfd = client.into_raw_fd();
            let slot = self.pairs.vacant();
            let mut p = Pair {
                fds: [cfd, server],
                upstream_connected: false,
                dirs: [Dir::default(), Dir::default()],
                interest: [Interest::empty(); 2],
            };
            if self.update_interest(&mut p, slot).is_err() {
                self.report.upstream_failures += 1;
                self.release(slot, p);
                continue;
            }
            self.pairs.put(slot, p);
        }
    }

    fn pause_accepting(&mut self) {
        let _ = self.queue.declare_interest(
            self.listener.as_raw_fd(),
            Interest::empty(),
            Options::new(LISTEN_TOKEN),
        );
        self.paused_until = Some(Instant::now() + ACCEPT_PAUSE);
        self.report.accept_pauses += 1;
    }

    /// Watches the listener again (level mode: waiting clients are reported
    /// by the next wait), with the spare reopened if it can be.
    fn resume_accepting(&mut self) {
        self.paused_until = None;
        self.acceptor.reserve();
        if self
            .queue
            .declare_interest(
                self.listener.as_raw_fd(),
                Interest::READ,
                Options::new(LISTEN_TOKEN),
            )
            .is_err()
        {
            self.pause_accepting();
        }
    }

    fn release(&mut self, slot: u32, p: Pair) {
        for (side, d) in p.dirs.iter().enumerate() {
            if let Some(t) = d.timer {
                self.queue.cancel_timer(t);
            }
            let _ = self.queue.close(p.fds[side]);
        }
        self.pairs.release(slot);
    }

    fn update_interest(&mut self, p: &mut Pair, slot: u32) -> io::Result<()> {
        for side in 0..2 {
            let out = &p.dirs[side]; // read from `side`
            let inbound = &p.dirs[1 - side]; // written to `side`
            let mut want = Interest::empty();
            let readable_side = side == 0 || p.upstream_connected;
            if readable_side && !out.read_eof && out.queued < QUEUE_LIMIT {
                want |= Interest::READ;
            }
            let connecting = side == 1 && !p.upstream_connected;
            if connecting || inbound.blocked {
                want |= Interest::WRITE;
            }
            if want != p.interest[side] {
                let token = self.token(slot, side);
                self.queue
                    .declare_interest(p.fds[side], want, Options::new(token))?;
                p.interest[side] = want;
            }
        }
        Ok(())
    }

    fn jitter(&mut self, max: Duration) -> Duration {
        if max.is_zero() {
            return Duration::ZERO;
        }
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let u = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        max.mul_f64(u)
    }

    /// Queues a chunk read from `side` (for the other side) and sets its timer.
    fn enqueue(
        &mut self,
        p: &mut Pair,
        slot: u32,
        side: usize,
        data: Vec<u8>,
        eof: bool,
        now: Instant,
    ) {
        let spec = if side == 0 {
            self.cfg.to_server
        } else {
            self.cfg.to_client
        };
        let jitter = self.jitter(spec.jitter);
        let d = &mut p.dirs[side];
        let mut sent_at = now.max(d.link_free.unwrap_or(now));
        if let Some(bw) = spec.bandwidth.filter(|b| *b > 0) {
            sent_at += Duration::from_secs_f64(data.len() as f64 / bw as f64);
        }
        d.link_free = Some(sent_at);
        let mut release = sent_at + spec.delay + jitter;
        if let Some(last) = d.last_release {
            release = release.max(last);
        }
        d.last_release = Some(release);
        d.queued += data.len();
        let was_empty = d.queue.is_empty();
        d.queue.push_back(Chunk { release, data, eof });
        if was_empty && d.timer.is_none() {
            let token = self.token(slot, side) | TIMER_BIT;
            d.timer = Some(self.queue.add_timer(release, token));
        }
    }

    /// Writes due chunks of direction `side` to the other side; false if the pair broke.
    fn flush(&mut self, p: &mut Pair, slot: u32, side: usize, now: Instant) -> bool {
        let to = 1 - side;
        if to == 1 && !p.upstream_connected {
            return true;
        }
        loop {
            let d = &mut p.dirs[side];
            let Some(head) = d.queue.front() else {
                return true;
            };
            if head.release > now {
                if d.timer.is_none() {
                    let release = head.release;
                    let token = self.token(slot, side) | TIMER_BIT;
                    p.dirs[side].timer = Some(self.queue.add_timer(release, token));
                }
                return true;
            }
            if head.eof {
                evq_os::io::shutdown(p.fds[to], std::net::Shutdown::Write);
                d.write_shut = true;
                d.queue.pop_front();
                continue;
            }
            match evq_os::io::send(p.fds[to], &head.data[d.head_off..]) {
                Ok(n) => {
                    d.blocked = false;
                    d.head_off += n;
                    if side == 0 {
                        self.report.bytes_to_server += n as u64;
                    } else {
                        self.report.bytes_to_client += n as u64;
                    }
                    if d.head_off == head.data.len() {
                        d.queued -= head.data.len();
                        d.head_off = 0;
                        d.queue.pop_front();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // WRITE interest on the receiving side resumes it.
                    d.blocked = true;
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    fn on_ready(
        &mut self,
        p: &mut Pair,
        slot: u32,
        side: usize,
        readable: bool,
        writable: bool,
        now: Instant,
    ) -> bool {
        if side == 1 && !p.upstream_connected {
            if evq_os::socket::take_error(p.fds[1]).is_some() {
                self.report.upstream_failures += 1;
                return false;
            }
            if !writable {
                return true;
            }
            p.upstream_connected = true;
            return self.flush(p, slot, 0, now);
        }
        if readable && !p.dirs[side].read_eof {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if p.dirs[side].queued >= QUEUE_LIMIT {
                    break;
                }
                match evq_os::io::recv(p.fds[side], &mut buf) {
                    Ok(0) => {
                        p.dirs[side].read_eof = true;
                        self.enqueue(p, slot, side, Vec::new(), true, now);
                        break;
                    }
                    Ok(n) => self.enqueue(p, slot, side, buf[..n].to_vec(), false, now),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
        }
        if writable {
            // `side` can take more of what flows into it.
            return self.flush(p, slot, 1 - side, now);
        }
        true
    }
}
