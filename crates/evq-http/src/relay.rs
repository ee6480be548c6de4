//! The proxy's event loop: client and origin connections in two slabs, the
//! keep-alive pool of origin connections, and the relay of each exchange (see
//! `proxy.rs` for what it does and why).

use crate::buffers::BufferPool;
use crate::config::{DeliveryMode, ProxyConfig};
use crate::date::DateCache;
use crate::exchange::{Begin, Exchange, Step};
use crate::intake::{self, Intake, Parts};
use crate::linger::{self, Drained};
use crate::listener::Listener;
use crate::overload::{Admission, OverloadPolicy};
use crate::request::{spend_cpu, write_error};
use crate::slot_table::{Slot, SlotTable};
use crate::stats::{ProxyReport, ServeReport, WorkerCounters};
use crate::sys::{self, later};
use crate::token::{decode, next_generation, token, Kind};
use evq::{
    BackendKind, EventQueue, Events, Interest, LoadLimiter, Mode, Notifier, Options, TimerId,
};
use evq_os::StopPipe;
use evq_wire::Framing;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub(crate) mod reclaim;

const HIGH_WATER: usize = 64 * 1024;
const ORIGIN_BUF: usize = 16 * 1024;

struct Client {
    fd: RawFd,
    generation: u32,
    registered: Interest,
    inbuf: Vec<u8>,
    in_len: usize,
    out: Vec<u8>,
    out_pos: usize,
    origin: Option<usize>,
    exchange: bool,
    /// The exchange under way, or the last one (`exchange.rs`).
    ex: Exchange,
    close_after: bool,
    /// The client half-closed (EOF) during an exchange: answer, then close.
    eof: bool,
    /// Close after a lingering close: the proxy answered with an error and the
    /// client may still be sending (see `linger.rs`).
    linger_after: bool,
    /// In a lingering close: our side is shut, input is read and dropped.
    lingering: bool,
    sent_head: Vec<u8>,
    retried: bool,
    deadline: Instant,
    timer: Option<(TimerId, Instant)>,
    /// Exchanges finished on this connection (saturating): one with more
    /// than one is a keep-alive client in use, reclaimed only after every
    /// single-exchange one (`relay/reclaim.rs`).
    exchanges: u32,
}

impl Client {
    /// A slot holding no connection.
    fn closed(now: Instant) -> Client {
        Client {
            fd: -1,
            generation: 0,
            registered: Interest::empty(),
            inbuf: Vec::new(),
            in_len: 0,
            out: Vec::new(),
            out_pos: 0,
            origin: None,
            exchange: false,
            ex: Exchange::default(),
            close_after: false,
            eof: false,
            linger_after: false,
            lingering: false,
            sent_head: Vec::new(),
            retried: false,
            deadline: now,
            timer: None,
            exchanges: 0,
        }
    }

    /// The slot takes connection `fd`: everything the last connection left is
    /// reset but the generation and the buffers. (A flag left over once made a
    /// malformed request on a reused slot close without its 400: `forwarded`
    /// from the slot's last exchange said the reply had begun.)
    fn open(&mut self, fd: RawFd, now: Instant) {
        let inbuf = std::mem::take(&mut self.inbuf);
        let mut out = std::mem::take(&mut self.out);
        let mut sent_head = std::mem::take(&mut self.sent_head);
        out.clear();
        sent_head.clear();
        *self = Client {
            fd,
            generation: self.generation,
            inbuf,
            out,
            sent_head,
            ..Client::closed(now)
        };
    }
}

impl Slot for Client {
    fn vacant(&self) -> bool {
        self.fd < 0
    }
    fn generation(&self) -> u32 {
        self.generation
    }
}

struct Origin {
    fd: RawFd,
    generation: u32,
    registered: Interest,
    connecting: bool,
    reused: bool,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    in_len: usize,
    client: Option<usize>,
}

impl Slot for Origin {
    fn vacant(&self) -> bool {
        self.fd < 0
    }
    fn generation(&self) -> u32 {
        self.generation
    }
}

pub(crate) struct Relay {
    mode: Mode,
    cfg: ProxyConfig,
    queue: EventQueue,
    listener: Listener,
    stop: Arc<AtomicBool>,
    /// Watched when the proxy stops on SIGINT/SIGTERM.
    signal: Option<StopPipe>,
    /// Clients and origin connections by slot, cut to the highest in use
    /// between rounds (`slot_table`).
    clients: SlotTable<Client>,
    origins: SlotTable<Origin>,
    pool: Vec<usize>,
    /// Spare client head buffers (`--max-head` bytes), in proportion to the
    /// clients open (`buffers.rs` says why).
    head_buffers: BufferPool,
    /// Spare output buffers of clients and origins (and request-head copies).
    out_buffers: BufferPool,
    /// Spare origin input buffers (`ORIGIN_BUF` bytes).
    origin_buffers: BufferPool,
    date: DateCache,
    now: Instant,
    report: ProxyReport,
    /// A graceful stop began: no new clients, every response says close, and
    /// the loop ends when no client is left or at this deadline.
    stopping: Option<Instant>,
    /// Overload control of new clients (`overload.rs`, `intake.rs`).
    admission: Admission,
    /// Seed 001's limiter, with `--overload seed001`.
    limiter: Option<LoadLimiter>,
    /// Clients let in since the last `get_next_event` (the limiter's load).
    round_accepts: usize,
    /// Most events a `get_next_event` takes (seed 001 takes fewer).
    max_events: usize,
    /// The intake's counters: accepts, admissions, refusals, queue delays.
    intake_counters: WorkerCounters,
}

enum Io {
    Progress,
    Blocked,
    Closed,
}

impl Relay {
    /// The relay's state, with the listener (and the stop pipe, if any)
    /// registered in a new queue of `kind`.
    pub(crate) fn new(
        cfg: &ProxyConfig,
        kind: BackendKind,
        listener: OwnedFd,
        stop: Arc<AtomicBool>,
        signal: Option<StopPipe>,
    ) -> io::Result<Relay> {
        let caps = kind.capabilities();
        // Level where the backend has it; otherwise oneshot, re-armed after
        // every event (the update_*_interest calls always declare then).
        let mode = match cfg.mode {
            Some(DeliveryMode::Level) if caps.level => Mode::Level,
            Some(DeliveryMode::Oneshot) if caps.oneshot => Mode::Oneshot,
            Some(m) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the proxy cannot run in {m:?} mode on the {kind} backend"),
                ))
            }
            None if caps.level => Mode::Level,
            None if caps.oneshot => Mode::Oneshot,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the {kind} backend has neither level nor oneshot delivery"),
                ))
            }
        };
        let mut queue = EventQueue::with_backend(kind)?;
        let fd = listener.as_raw_fd();
        let listen_addr = evq_os::socket::local_addr(fd)?;
        let seed001 = cfg.overload.policy == OverloadPolicy::Seed001;
        let shed = crate::config::ShedConfig::default();
        let opts = Options::new(Listener::token()).mode(mode);
        let listener = Listener::watch(fd, Some(listener), opts, &mut queue)?;
        if let Some(pipe) = &signal {
            let opts = Options::new(token(Kind::Signal, 0, 0)).mode(mode);
            queue.declare_interest(pipe.fd(), Interest::READ, opts)?;
        }
        Ok(Relay {
            cfg: cfg.clone(),
            queue,
            listener,
            stop,
            signal,
            clients: SlotTable::new(),
            origins: SlotTable::new(),
            pool: Vec::new(),
            head_buffers: BufferPool::new(usize::MAX),
            out_buffers: BufferPool::new(4 * HIGH_WATER),
            origin_buffers: BufferPool::new(usize::MAX),
            date: DateCache::new(),
            now: Instant::now(),
            report: ProxyReport::default(),
            stopping: None,
            mode,
            admission: Admission::new(cfg.overload, listen_addr, cfg.backlog),
            limiter: seed001.then(|| LoadLimiter::new(shed.gain, shed.threshold)),
            round_accepts: 0,
            max_events: if seed001 { shed.max_events } else { 256 },
            intake_counters: WorkerCounters::default(),
        })
    }

    /// A handle that wakes the relay's queue (to notice `stop`).
    pub(crate) fn notifier(&self) -> Notifier {
        self.queue.notifier()
    }

    /// Relays until stopped; the counters, and the error that ended the loop
    /// if one did (the counters are true either way).
    pub(crate) fn run(mut self) -> (ProxyReport, io::Result<()>) {
        let result = self.relay();
        self.report.listener_failures = self.listener.failures();
        let intake = ServeReport::collect("", std::slice::from_ref(&self.intake_counters));
        self.report.accepts = intake.accepts;
        self.report.overload = intake.overload();
        self.listener.close(&mut self.queue);
        for i in 0..self.clients.len() {
            if self.clients[i].fd >= 0 {
                self.close_client(i);
            }
        }
        for i in 0..self.origins.len() {
            if self.origins[i].fd >= 0 {
                self.close_origin(i);
            }
        }
        (std::mem::take(&mut self.report), result)
    }

    fn relay(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(self.max_events);
        loop {
            let timeout = self
                .stopping
                .map(|d| d.saturating_duration_since(Instant::now()));
            let n = self.queue.get_next_event(&mut events, timeout)?;
            self.now = Instant::now();
            self.date.refresh();
            let mut listener_events = 0;
            self.round_accepts = 0;
            for ev in events.iter() {
                if ev.is_notify() {
                    continue;
                }
                let Some((kind, index, generation)) = decode(ev.token()) else {
                    continue;
                };
                match kind {
                    Kind::Client if self.client_live(index, generation) => self.drive_client(index),
                    Kind::Origin if self.origin_live(index, generation) => self.drive_origin(index),
                    Kind::Timer if self.client_live(index, generation) => self.on_timer(index),
                    Kind::Listener if ev.is_timer() => {
                        if self.listener.resume(&mut self.queue) {
                            self.on_accept();
                        }
                    }
                    Kind::Listener => {
                        listener_events += 1;
                        self.on_accept();
                    }
                    // Stale events; the stop flag says what a signal meant.
                    Kind::Client | Kind::Origin | Kind::Timer | Kind::Signal => {}
                }
            }
            // Connections closed this round freed the descriptors a pause waited for.
            if self.listener.end_round(&mut self.queue) {
                self.on_accept();
            }
            // Seed 001's load, counted as the server counts it (`worker.rs`):
            // a listener event stands for the clients it let in.
            if let Some(l) = &mut self.limiter {
                l.observe(n - listener_events + self.round_accepts);
            }
            self.clients.cut_vacant_tail();
            self.origins.cut_vacant_tail();
            let stop = self.stop.load(Ordering::Relaxed)
                || (self.signal.is_some() && evq_os::stop_requested());
            if stop && self.stopping.is_none() {
                self.begin_stop();
            }
            if let Some(deadline) = self.stopping {
                let open = self.clients.in_use();
                if open == 0 || Instant::now() >= deadline {
                    return Ok(());
                }
            }
        }
    }

    /// A graceful stop: the listener closes (new clients are refused), pooled
    /// origin connections close, idle clients close after `STOP_IDLE_WAIT`
    /// unless a request comes first, and exchanges in flight
    /// (a request head begun included) go on for up to the grace period, their
    /// responses saying `Connection: close`.
    fn begin_stop(&mut self) {
        self.stopping = Some(later(Instant::now(), self.cfg.grace));
        sys::stop_taking_clients(&mut self.listener, &mut self.signal, &mut self.queue);
        // An idle client gets `STOP_IDLE_WAIT` (sys.rs says why): a request it
        // sends meanwhile is answered with `Connection: close`.
        let idle_until = later(Instant::now(), self.cfg.grace.min(sys::STOP_IDLE_WAIT));
        for i in 0..self.clients.len() {
            let c = &mut self.clients[i];
            if c.fd < 0 {
                continue;
            }
            // A response whose head already went out said keep-alive: the
            // client may send its next request as soon as it has the body, so
            // after it the connection is idle like the others (below), not
            // closed under that request.
            if !(c.exchange && c.ex.resp_head) {
                c.ex.keep_alive = false;
            }
            if !c.exchange && c.in_len == 0 && c.out_pos >= c.out.len() {
                if self.cfg.grace.is_zero() {
                    self.close_client(i);
                } else {
                    self.set_deadline(i, idle_until);
                }
            }
        }
        for o in std::mem::take(&mut self.pool) {
            self.close_origin(o);
        }
    }

    fn origin_live(&self, o: usize, generation: u32) -> bool {
        self.origins
            .get(o)
            .is_some_and(|or| or.fd >= 0 && or.generation == generation)
    }

    fn client_live(&self, i: usize, generation: u32) -> bool {
        self.clients
            .get(i)
            .is_some_and(|c| c.fd >= 0 && c.generation == generation)
    }

    fn on_accept(&mut self) {
        intake::on_accept(self, self.now);
    }

    fn set_deadline(&mut self, i: usize, deadline: Instant) {
        let c = &mut self.clients[i];
        c.deadline = deadline;
        match c.timer {
            Some((_, at)) if at <= deadline => {}
            other => {
                if let Some((id, _)) = other {
                    self.queue.cancel_timer(id);
                }
                let id = self
                    .queue
                    .add_timer(deadline, token(Kind::Timer, i, c.generation));
                c.timer = Some((id, deadline));
            }
        }
    }

    fn on_timer(&mut self, i: usize) {
        self.clients[i].timer = None;
        let deadline = self.clients[i].deadline;
        if self.now < deadline {
            self.clients[i].timer = None;
            self.set_deadline(i, deadline);
            return;
        }
        let c = &self.clients[i];
        if c.exchange && !c.ex.forwarded {
            self.report.gateway_timeout += 1;
            self.fail_exchange(i, 504);
            self.drive_client(i);
        } else {
            self.close_client(i);
        }
    }

    fn close_client(&mut self, i: usize) {
        if let Some(o) = self.clients[i].origin.take() {
            self.close_origin(o);
        }
        let c = &mut self.clients[i];
        if c.fd < 0 {
            return;
        }
        let fd = c.fd;
        c.fd = -1;
        c.generation = next_generation(c.generation);
        c.exchange = false;
        c.in_len = 0;
        c.out_pos = 0;
        if let Some((id, _)) = c.timer.take() {
            self.queue.cancel_timer(id);
        }
        let inbuf = std::mem::take(&mut c.inbuf);
        let mut out = std::mem::take(&mut c.out);
        let mut head = std::mem::take(&mut c.sent_head);
        let _ = self.queue.close(fd);
        self.clients.release(i);
        self.listener.descriptor_freed();
        // The buffers go back to pools kept in proportion to the clients left.
        let open = self.clients.in_use();
        out.clear();
        head.clear();
        self.head_buffers.give(inbuf, open);
        self.out_buffers.give(out, open);
        self.out_buffers.give(head, open);
    }

    fn close_origin(&mut self, o: usize) {
        let or = &mut self.origins[o];
        if or.fd < 0 {
            return;
        }
        let fd = or.fd;
        or.fd = -1;
        or.generation = next_generation(or.generation);
        or.client = None;
        or.out_pos = 0;
        or.in_len = 0;
        let inbuf = std::mem::take(&mut or.inbuf);
        let mut out = std::mem::take(&mut or.out);
        let _ = self.queue.close(fd);
        self.pool.retain(|&p| p != o);
        self.origins.release(o);
        self.listener.descriptor_freed();
        let open = self.origins.in_use();
        out.clear();
        self.origin_buffers.give(inbuf, open);
        self.out_buffers.give(out, open);
    }

    /// Ends the exchange with an error status (or just a close when part of the
    /// response already went out).
    fn fail_exchange(&mut self, i: usize, status: u16) {
        if let Some(o) = self.clients[i].origin.take() {
            self.close_origin(o);
        }
        let c = &mut self.clients[i];
        // Part of a response already went out only if an exchange is under way
        // (a malformed next request on a keep-alive connection still gets its
        // 400, whatever the last exchange forwarded).
        if !(c.exchange && c.ex.forwarded) {
            write_error(&mut c.out, status, self.date.text(), "");
            c.linger_after = !c.eof;
        }
        c.exchange = false;
        c.close_after = true;
        c.in_len = 0;
    }

    fn connect_origin(&mut self) -> io::Result<usize> {
        let fd = loop {
            match evq_os::connect(self.cfg.origin, evq_os::LocalBind::Kernel, true) {
                Ok(fd) => break fd.into_raw_fd(),
                // Out of descriptors: an idle client or a pooled origin
                // connection makes room, as for a new client (`relay/reclaim.rs`);
                // each turn closes one, so the loop ends.
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
                        && self.reclaim_idle(1) > 0 => {}
                Err(e) => return Err(e),
            }
        };
        self.report.origin_connects += 1;
        let o = self.origins.take(|generation| Origin {
            fd: -1,
            generation,
            registered: Interest::empty(),
            connecting: false,
            reused: false,
            out: Vec::new(),
            out_pos: 0,
            inbuf: Vec::new(),
            in_len: 0,
            client: None,
        });
        let or = &mut self.origins[o];
        or.fd = fd;
        or.registered = Interest::empty();
        or.connecting = true;
        or.reused = false;
        or.out.clear();
        or.out_pos = 0;
        or.in_len = 0;
        if or.inbuf.len() != ORIGIN_BUF {
            or.inbuf = self
                .origin_buffers
                .take()
                .filter(|b| b.len() == ORIGIN_BUF)
                .unwrap_or_else(|| vec![0; ORIGIN_BUF]);
        }
        if or.out.capacity() == 0 {
            or.out = self.out_buffers.take().unwrap_or_default();
        }
        Ok(o)
    }

    /// Starts an exchange if a complete request head is buffered. True if the
    /// client's state changed.
    fn start_exchange(&mut self, i: usize) -> bool {
        self.unpark_buffers(i);
        let c = &mut self.clients[i];
        let full = c.in_len >= c.inbuf.len();
        let stopping = self.stopping.is_some();
        let begun =
            c.ex.begin(&c.inbuf[..c.in_len], full, stopping, &mut c.sent_head);
        let head_len = match begun {
            Begin::Incomplete => return false,
            Begin::Malformed(status) => {
                self.report.bad_requests += 1;
                self.fail_exchange(i, status);
                return true;
            }
            Begin::Refused(status) => {
                self.report.requests += 1;
                self.report.bad_requests += 1;
                self.fail_exchange(i, status);
                return true;
            }
            Begin::Started(n) => n,
        };
        self.report.requests += 1;
        spend_cpu(self.cfg.work);
        let c = &mut self.clients[i];
        c.inbuf.copy_within(head_len..c.in_len, 0);
        c.in_len -= head_len;
        c.retried = false;
        c.exchange = true;
        let o = match self.pooled_origin() {
            Some(o) => {
                self.report.origin_reuses += 1;
                self.origins[o].reused = true;
                o
            }
            None => match self.connect_origin() {
                Ok(o) => o,
                Err(_) => {
                    self.report.bad_gateway += 1;
                    self.fail_exchange(i, 502);
                    return true;
                }
            },
        };
        let c = &mut self.clients[i];
        c.origin = Some(o);
        let or = &mut self.origins[o];
        or.client = Some(i);
        or.out.extend_from_slice(&c.sent_head);
        let d = later(self.now, self.cfg.origin_timeout);
        self.set_deadline(i, d);
        self.pump_request_body(i);
        true
    }

    /// An idle pooled origin connection that still looks open. One the origin
    /// closed (or wrote to) while idle is dropped here, before a request is
    /// sent on it: a request that cannot have been received needs no retry,
    /// whatever its method.
    fn pooled_origin(&mut self) -> Option<usize> {
        while let Some(o) = self.pool.pop() {
            if still_open(self.origins[o].fd) {
                return Some(o);
            }
            self.report.stale_pooled += 1;
            self.close_origin(o);
        }
        None
    }

    /// Moves buffered request-body bytes to the origin's output.
    fn pump_request_body(&mut self, i: usize) {
        let c = &mut self.clients[i];
        let Some(o) = c.origin else { return };
        if c.ex.req_body.is_done() || c.in_len == 0 {
            return;
        }
        let or = &mut self.origins[o];
        if or.out.len() >= HIGH_WATER {
            return;
        }
        match c.ex.pump_body(&c.inbuf[..c.in_len], &mut or.out) {
            Ok(n) => {
                c.inbuf.copy_within(n..c.in_len, 0);
                c.in_len -= n;
            }
            Err(()) => {
                self.report.bad_requests += 1;
                self.fail_exchange(i, 400);
            }
        }
    }

    fn drive_client(&mut self, i: usize) {
        if self.clients[i].lingering {
            return match linger::drain(self.clients[i].fd) {
                Drained::Done => self.close_client(i),
                Drained::Waiting => self.update_client_interest(i),
            };
        }
        loop {
            let c = &mut self.clients[i];
            let pending = c.out.len() - c.out_pos;
            let result = flush(c.fd, &mut c.out, &mut c.out_pos);
            if pending > 0 && c.out.len() - c.out_pos < pending && c.exchange {
                // The client reads: the exchange is alive, and the origin may
                // have been paused by backpressure.
                let d = later(self.now, self.cfg.origin_timeout);
                self.set_deadline(i, d);
                if let Some(o) = self.clients[i].origin {
                    self.update_origin_interest(o);
                }
            }
            match result {
                Io::Progress => {}
                Io::Blocked => break,
                Io::Closed => return self.close_client(i),
            }
            let c = &mut self.clients[i];
            if c.close_after && !c.exchange {
                if !c.linger_after {
                    return self.close_client(i);
                }
                // The error reply is out: shut our side, drop what the client
                // still sends, close when it is done or the time is up.
                c.lingering = true;
                c.in_len = 0;
                linger::begin(c.fd);
                let d = later(self.now, linger::LINGER);
                self.set_deadline(i, d);
                return self.drive_client(i);
            }
            if !c.exchange && c.in_len > 0 && self.start_exchange(i) {
                if let Some(o) = self.clients[i].origin {
                    self.drive_origin(o);
                    if self.clients[i].fd < 0 {
                        return;
                    }
                }
                continue;
            }
            if !self.client_reading(i) {
                break;
            }
            let max_head = self.cfg.limits.max_head;
            if self.clients[i].inbuf.len() != max_head {
                self.clients[i].inbuf = self
                    .head_buffers
                    .take()
                    .filter(|b| b.len() == max_head)
                    .unwrap_or_else(|| vec![0; max_head]);
            }
            let c = &mut self.clients[i];
            if c.in_len >= c.inbuf.len() {
                break;
            }
            match evq_os::io::recv(c.fd, &mut c.inbuf[c.in_len..]) {
                Ok(0) if c.exchange => {
                    c.eof = true;
                    if c.ex.body_cut_short(&c.inbuf[..c.in_len]) {
                        // Ended in the middle of its body: it can never
                        // finish, so the exchange ends now, not at the
                        // origin timeout.
                        self.report.bad_requests += 1;
                        self.fail_exchange(i, 400);
                        continue;
                    }
                    // Half-closed after its request: still owed the response.
                    c.close_after = true;
                    break;
                }
                Ok(0) => return self.close_client(i),
                Ok(n) => {
                    c.in_len += n;
                    if c.exchange {
                        self.pump_request_body(i);
                        if let Some(o) = self.clients[i].origin {
                            self.drive_origin(o);
                            if self.clients[i].fd < 0 {
                                return;
                            }
                        }
                    } else if c.in_len == n {
                        // A request head starts: the idle timeout becomes the (same) head timeout.
                        let d = later(self.now, self.cfg.idle_timeout);
                        self.set_deadline(i, d);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return self.close_client(i),
            }
        }
        self.park_buffers(i);
        self.update_client_interest(i);
    }

    /// A quiet client (no exchange, nothing read, nothing left to send)
    /// holds no buffer: its input, output and request-head buffers go back
    /// to the pools until bytes arrive again, as the server's connections
    /// do. An idle keep-alive client then costs its slot, its registration
    /// and a timer, and thousands of cold ones do not spread the hot
    /// clients' buffers over memory.
    fn park_buffers(&mut self, i: usize) {
        let c = &mut self.clients[i];
        if c.exchange || c.lingering || c.in_len > 0 || c.out_pos < c.out.len() {
            return;
        }
        let inbuf = std::mem::take(&mut c.inbuf);
        let mut out = std::mem::take(&mut c.out);
        let mut head = std::mem::take(&mut c.sent_head);
        c.out_pos = 0;
        out.clear();
        head.clear();
        let open = self.clients.in_use();
        self.head_buffers.give(inbuf, open);
        self.out_buffers.give(out, open);
        self.out_buffers.give(head, open);
    }

    /// Output and request-head buffers for an exchange about to start, from
    /// the pool where it has spares.
    fn unpark_buffers(&mut self, i: usize) {
        if self.clients[i].out.capacity() == 0 {
            self.clients[i].out = self.out_buffers.take().unwrap_or_default();
        }
        if self.clients[i].sent_head.capacity() == 0 {
            self.clients[i].sent_head = self.out_buffers.take().unwrap_or_default();
        }
    }

    /// Whether the client's next bytes are wanted. During an exchange the client
    /// stays readable (its next, pipelined request is buffered, and a vanished
    /// client is noticed at once) unless a request body is waiting for the
    /// origin to drain: keeping the interest steady saves two epoll_ctl calls
    /// per request.
    fn client_reading(&self, i: usize) -> bool {
        let c = &self.clients[i];
        c.lingering
            || !c.eof
                && if c.exchange {
                    c.ex.req_body.is_done()
                        || c.origin
                            .is_some_and(|o| self.origins[o].out.len() < HIGH_WATER)
                } else {
                    !c.close_after
                }
    }

    fn update_client_interest(&mut self, i: usize) {
        let c = &self.clients[i];
        if c.fd < 0 {
            return;
        }
        let mut want = Interest::empty();
        if c.out_pos < c.out.len() {
            want |= Interest::WRITE;
        }
        if self.client_reading(i) && c.in_len < self.cfg.limits.max_head {
            want |= Interest::READ;
        }
        let (fd, tok) = (c.fd, token(Kind::Client, i, c.generation));
        let registered = &mut self.clients[i].registered;
        if declare(&mut self.queue, self.mode, fd, registered, want, tok).is_err() {
            self.close_client(i);
        }
    }

    fn update_origin_interest(&mut self, o: usize) {
        let or = &self.origins[o];
        if or.fd < 0 {
            return;
        }
        let mut want = Interest::empty();
        if or.connecting || or.out_pos < or.out.len() {
            want |= Interest::WRITE;
        }
        let reading = match or.client {
            None => true,
            Some(c) => {
                !or.connecting
                    && self.clients[c].out.len() < HIGH_WATER
                    && or.in_len < or.inbuf.len()
            }
        };
        if reading {
            want |= Interest::READ;
        }
        let (fd, tok) = (or.fd, token(Kind::Origin, o, or.generation));
        let registered = &mut self.origins[o].registered;
        if declare(&mut self.queue, self.mode, fd, registered, want, tok).is_err() {
            self.origin_gone(o, true);
        }
    }

    fn drive_origin(&mut self, o: usize) {
        let Some(i) = self.origins[o].client else {
            // Pooled and idle: any event means the origin closed it (or sent junk).
            return self.close_origin(o);
        };
        if self.origins[o].connecting {
            let fd = self.origins[o].fd;
            if evq_os::socket::take_error(fd).is_some() {
                return self.origin_gone(o, false);
            }
            if !evq_os::socket::is_connected(fd) {
                // Still connecting: writability will say when it is done.
                self.update_origin_interest(o);
                return;
            }
            self.origins[o].connecting = false;
        }
        loop {
            let or = &mut self.origins[o];
            match flush(or.fd, &mut or.out, &mut or.out_pos) {
                Io::Progress => {
                    or.connecting = false;
                    self.pump_request_body(i);
                    if self.clients[i].origin != Some(o) {
                        return;
                    }
                }
                Io::Blocked => {
                    break;
                }
                Io::Closed => return self.origin_gone(o, false),
            }
            let or = &mut self.origins[o];
            if or.out_pos < or.out.len() {
                continue;
            }
            if self.clients[i].out.len() >= HIGH_WATER || or.in_len >= or.inbuf.len() {
                break;
            }
            match evq_os::io::recv(or.fd, &mut or.inbuf[or.in_len..]) {
                Ok(0) => return self.origin_gone(o, true),
                Ok(n) => {
                    or.connecting = false;
                    or.in_len += n;
                    let d = later(self.now, self.cfg.origin_timeout);
                    self.set_deadline(i, d);
                    if !self.relay_response(o, i) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return self.origin_gone(o, false),
            }
        }
        self.update_origin_interest(o);
        self.update_client_interest(i);
        if self.clients[i].out_pos < self.clients[i].out.len() {
            self.drive_client(i);
        }
    }

    /// The origin closed (`eof`) or failed. Ends, retries or fails the exchange.
    fn origin_gone(&mut self, o: usize, eof: bool) {
        let Some(i) = self.origins[o].client else {
            return self.close_origin(o);
        };
        let reused = self.origins[o].reused;
        let nothing_back = self.origins[o].in_len == 0 && !self.clients[i].ex.resp_head;
        self.close_origin(o);
        self.clients[i].origin = None;
        let c = &self.clients[i];
        if c.ex.resp_head && c.ex.resp_body == Framing::UntilClose && eof {
            // The body ran until close: complete. The client must close too, since
            // nothing else can tell it where the body ended.
            let c = &mut self.clients[i];
            c.ex.resp_body = Framing::Done;
            c.exchange = false;
            c.close_after = true;
            self.report.relayed += 1;
        } else if reused && nothing_back && !c.retried && c.ex.retryable {
            // A pooled connection the origin closed as the request went out
            // (its idle timeout, say): it may or may not have received it, so
            // only an idempotent request without a body is sent again, once.
            // Anything else gets a 502 (RFC 9110 §9.2.2: a proxy must not
            // retry a non-idempotent request automatically).
            self.report.retries += 1;
            match self.connect_origin() {
                Ok(n) => {
                    let c = &mut self.clients[i];
                    c.retried = true;
                    c.origin = Some(n);
                    self.origins[n].client = Some(i);
                    let head = std::mem::take(&mut self.clients[i].sent_head);
                    self.origins[n].out.extend_from_slice(&head);
                    self.clients[i].sent_head = head;
                    self.drive_origin(n);
                    return;
                }
                Err(_) => {
                    self.report.bad_gateway += 1;
                    self.fail_exchange(i, 502);
                }
            }
        } else {
            if !c.ex.forwarded {
                self.report.bad_gateway += 1;
            }
            self.fail_exchange(i, 502);
        }
        self.drive_client(i);
    }

    /// Relays buffered origin bytes to the client. False if the exchange ended in
    /// a way that closed the origin connection (the caller must stop using `o`).
    fn relay_response(&mut self, o: usize, i: usize) -> bool {
        let or = &mut self.origins[o];
        let c = &mut self.clients[i];
        let full = or.in_len >= or.inbuf.len();
        let stopping = self.stopping.is_some();
        let (used, step) =
            c.ex.relay_response(&or.inbuf[..or.in_len], full, stopping, &mut c.out);
        or.inbuf.copy_within(used..or.in_len, 0);
        or.in_len -= used;
        match step {
            Step::More => true,
            Step::Done => {
                self.finish_exchange(o, i);
                false
            }
            Step::BadHead | Step::BadBody => {
                if step == Step::BadHead {
                    self.report.bad_gateway += 1;
                }
                self.fail_exchange(i, 502);
                self.drive_client(i);
                false
            }
        }
    }

    fn finish_exchange(&mut self, o: usize, i: usize) {
        self.report.relayed += 1;
        let c = &mut self.clients[i];
        c.exchange = false;
        c.exchanges = c.exchanges.saturating_add(1);
        c.origin = None;
        if !c.ex.keep_alive {
            c.close_after = true;
        }
        // Answered before the body was all here: the rest is not a request
        // (`Exchange::body_left_behind`; `keep_alive` turned false with the
        // response head, so the connection closes after it), and it may still
        // be coming: linger.
        let left_behind = c.ex.body_left_behind();
        if left_behind {
            debug_assert!(c.close_after, "a body left behind keeps no connection");
            self.report.answered_before_body += 1;
            c.linger_after = !c.eof;
            c.in_len = 0;
        }
        let reusable = c.ex.origin_reusable && !left_behind;
        // Stopping, an idle client waits `STOP_IDLE_WAIT` at most (begin_stop).
        let idle = match self.stopping {
            Some(_) => self.cfg.idle_timeout.min(sys::STOP_IDLE_WAIT),
            None => self.cfg.idle_timeout,
        };
        let d = later(self.now, idle);
        self.set_deadline(i, d);
        let or = &mut self.origins[o];
        if reusable
            && or.in_len == 0
            && or.out_pos >= or.out.len()
            && self.pool.len() < self.cfg.pool_size
        {
            or.client = None;
            or.out.clear();
            or.out_pos = 0;
            self.pool.push(o);
            self.update_origin_interest(o);
        } else {
            self.close_origin(o);
        }
        self.drive_client(i);
    }
}

/// Whether an idle connection is still open with nothing to read: a peek that
/// would block. End of file, bytes the origin sent unasked, or an error all
/// mean it cannot carry a request.
pub(crate) fn still_open(fd: RawFd) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: recv(2) writes at most 1 byte into `b`, which lives across the
    // call; MSG_PEEK leaves the socket's data in place, MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// Sends `out[*pos..]`; clears the buffer when all is sent.
fn flush(fd: RawFd, out: &mut Vec<u8>, pos: &mut usize) -> Io {
    while *pos < out.len() {
        match evq_os::io::send(fd, &out[*pos..]) {
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Io::Blocked,
            Err(_) => return Io::Closed,
        }
    }
    out.clear();
    *pos = 0;
    Io::Progress
}

/// Declares `want` for a connection registered for `registered`, only when it
/// changes (level) or always (a oneshot registration is re-armed every time).
fn declare(
    queue: &mut EventQueue,
    mode: Mode,
    fd: RawFd,
    registered: &mut Interest,
    want: Interest,
    token: u64,
) -> io::Result<()> {
    if want != *registered || mode == Mode::Oneshot {
        *registered = want;
        queue.declare_interest(fd, want, Options::new(token).mode(mode))?;
    }
    Ok(())
}

/// The proxy's side of the intake (`intake.rs`): a client admitted gets a
/// slot, an idle deadline and a first read.
impl Intake for Relay {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            listener: &mut self.listener,
            queue: &mut self.queue,
            admission: &mut self.admission,
            counters: &self.intake_counters,
        }
    }

    fn shed(&mut self) -> bool {
        let load = self.round_accepts + 1;
        self.limiter.is_some_and(|l| l.overloaded_with(load))
    }

    fn has_room(&mut self) -> bool {
        true
    }

    fn take(&mut self, fd: RawFd) {
        self.round_accepts += 1;
        let now = self.now;
        let i = self.clients.take(|generation| Client {
            generation,
            ..Client::closed(now)
        });
        self.clients[i].open(fd, now);
        let d = later(self.now, self.cfg.idle_timeout);
        self.set_deadline(i, d);
        self.drive_client(i);
    }

    fn make_room(&mut self) -> bool {
        self.reclaim_idle(1) > 0
    }

    fn out_of_descriptors(&mut self) {
        self.report.refused += 1;
        // Make room for the clients behind the one just shed.
        self.reclaim_idle(reclaim::EXHAUSTED_BATCH);
    }
}
