//! One worker thread's event loop: its [`EventQueue`], its connections in a slab,
//! its buffer pools, timers and load limiter. [`crate::ServerHandle`] builds one per
//! thread and runs it.
//!
//! A connection that has nothing buffered holds no buffer: an idle connection
//! costs its slab entry, its interest-table entry and one timer. Buffers are taken
//! from the worker's pool when bytes arrive and given back when the connection is
//! quiet again, so the steady state allocates nothing per request.

use crate::buffers::BufferPool;
use crate::date::DateCache;
use crate::intake::{self, Intake, Parts};
use crate::linger::{self, Drained};
use crate::listener::Listener;
use crate::overload::Admission;
use crate::request::{handle_request, write_simple_head, Body, Outcome, Scratch, Site};
use crate::slot_table::{Slot, SlotTable};
use crate::stats::{ServeReport, WorkerCounters};
use crate::sys::{self, later};
use crate::token::{decode, next_generation, token, Kind};
use evq::{BackendKind, EventQueue, Events, Interest, LoadLimiter, Mode, Options, TimerId};
use evq_os::StopPipe;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod reclaim;

/// Output buffered per connection before the server stops answering pipelined
/// requests and waits for the client to read.
const OUT_HIGH_WATER: usize = 64 * 1024;
/// Bytes of a file read and sent at a time when not using `sendfile`.
const FILE_CHUNK: usize = 64 * 1024;
/// Output buffers larger than this are freed rather than pooled: a reply's
/// head and a small body fit; a file's chunks and long pipelines grow a buffer
/// to 64 KiB and more, and the pool's floor of 32 spares would otherwise pin
/// 2 MiB once their connections are gone (the fault table's vanished readers
/// of a big file did).
pub(crate) const OUT_POOLED_CAPACITY: usize = 32 * 1024;

#[derive(Debug)]
enum Sending {
    None,
    Fixed { offset: usize },
    File { fd: RawFd, offset: i64, left: u64 },
}

/// One connection's state. Kept small: idle connections are most connections.
#[derive(Debug)]
pub(crate) struct Conn {
    fd: RawFd,
    generation: u32,
    /// Interest currently registered (level mode changes it; event mode never).
    interest: Interest,
    /// A request head has started arriving (the header timeout runs).
    in_request: bool,
    /// Close once the output is sent.
    close_after: bool,
    /// ... in a lingering close (`linger.rs`): the reply was an error and the
    /// client may still be sending.
    linger_after: bool,
    /// In a lingering close: our side is shut, input is read and dropped.
    lingering: bool,
    /// Timeout for whatever the connection is doing now, in milliseconds since
    /// the worker's epoch (4 bytes instead of an `Instant`'s 16).
    deadline: u32,
    /// The armed timer and the deadline it was armed for.
    timer: Option<(TimerId, u32)>,
    /// When the connection last had an event, as the worker's activity count:
    /// the order in which idle connections are reclaimed (least recent first).
    last_active: u64,
    /// Requests answered on it (saturating): one that has answered more than
    /// one is a keep-alive client in use, reclaimed only after every
    /// single-request one (`worker/reclaim.rs`).
    answered: u32,
    inbuf: Vec<u8>,
    in_len: usize,
    out: Vec<u8>,
    out_pos: usize,
    sending: Sending,
}

impl Slot for Conn {
    fn vacant(&self) -> bool {
        self.fd < 0
    }
    fn generation(&self) -> u32 {
        self.generation
    }
}

pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    pub(crate) open: AtomicUsize,
    pub(crate) counters: Box<[WorkerCounters]>,
    pub(crate) backend: BackendKind,
}

impl Shared {
    pub(crate) fn report(&self) -> ServeReport {
        ServeReport::collect(self.backend.name(), &self.counters)
    }
}

pub(crate) struct Worker {
    pub(crate) id: usize,
    pub(crate) queue: EventQueue,
    pub(crate) shared: Arc<Shared>,
    pub(crate) listener: Listener,
    /// Watched when the worker stops on SIGINT/SIGTERM.
    pub(crate) signal: Option<StopPipe>,
    /// How connections are registered: `Event` (edge) where the backend has it,
    /// else `Level`, else `Oneshot` (re-armed after every event).
    pub(crate) conn_mode: Mode,
    /// The connections by slot; cut to the highest in use between rounds
    /// (`slot_table`).
    pub(crate) conns: SlotTable<Conn>,
    pub(crate) open: usize,
    /// Spare head buffers (`--max-head` bytes each), kept in proportion to the
    /// connections open (`buffers.rs` says why).
    pub(crate) in_pool: BufferPool,
    /// Spare output buffers, likewise.
    pub(crate) out_pool: BufferPool,
    pub(crate) site: Site,
    pub(crate) fixed: Option<Arc<[u8]>>,
    /// Send files with `sendfile` (zero-copy; bytes queued in the socket are
    /// the page cache's, so a file changed in place changes them) instead of
    /// reading each chunk into the output buffer (`--sendfile`).
    pub(crate) sendfile: bool,
    pub(crate) scratch: Scratch,
    pub(crate) date: DateCache,
    pub(crate) limiter: Option<LoadLimiter>,
    /// Overload control other than seed 001's (`overload.rs`).
    pub(crate) admission: Admission,
    /// Connections let in (not shed) since the last `get_next_event`.
    pub(crate) round_accepts: usize,
    pub(crate) max_events: usize,
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_conns: usize,
    pub(crate) grace: Duration,
    pub(crate) shutdown_deadline: Option<Instant>,
    pub(crate) now: Instant,
    pub(crate) epoch: Instant,
    /// Counts connection events: each connection's `last_active` is a reading.
    pub(crate) activity: u64,
}

enum Flush {
    Done,
    Blocked,
    Failed,
}

impl Worker {
    pub(crate) fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(self.max_events);
        // CPU accounting: two thread-clock reads per wait, one before and one after
        // `get_next_event`; the difference is event-notification time.
        let cpu_start = evq_os::thread_cpu_ns();
        let result = loop {
            let timeout = self
                .shutdown_deadline
                .map(|d| d.saturating_duration_since(Instant::now()));
            let before = evq_os::thread_cpu_ns();
            self.shared.counters[self.id].set_cpu(before.saturating_sub(cpu_start));
            let got = self.queue.get_next_event(&mut events, timeout);
            let after = evq_os::thread_cpu_ns();
            self.shared.counters[self.id].waited(
                after.saturating_sub(cpu_start),
                after.saturating_sub(before),
            );
            let n = match got {
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            self.now = Instant::now();
            self.shared.counters[self.id].wakeup(n);
            self.date.refresh();
            self.round_accepts = 0;
            let mut listener_events = 0;
            for ev in events.iter() {
                if ev.is_notify() {
                    continue;
                }
                match decode(ev.token()) {
                    Some((Kind::Client, index, generation)) => {
                        self.on_conn_event(index, generation)
                    }
                    Some((Kind::Timer, index, generation)) => self.on_timer(index, generation),
                    Some((Kind::Listener, ..)) => {
                        listener_events += 1;
                        if ev.is_timer() {
                            self.resume_accepting();
                        } else {
                            self.on_accept();
                        }
                    }
                    // The stop flag, looked at below, says what a signal meant.
                    _ => {}
                }
            }
            // Connections closed this round freed the descriptors a pause waited for.
            if self.listener.end_round(&mut self.queue) {
                self.on_accept();
            }
            // The limiter's load is seed 001's "events per call", where every new
            // connection was its own signal: one listener event here can stand
            // for a whole accept batch, so it counts as the connections it let in.
            // (Counting it as one event, the limiter never saw an accept backlog;
            // counting the shed ones too, it never recovered from one: shedding
            // keeps the backlog coming as fast as it is reset.)
            if let Some(l) = &mut self.limiter {
                l.observe(n - listener_events + self.round_accepts);
            }
            let stop = self.shared.stop.load(Ordering::Relaxed)
                || (self.signal.is_some() && evq_os::stop_requested());
            if stop && self.shutdown_deadline.is_none() {
                self.begin_shutdown();
            }
            if let Some(d) = self.shutdown_deadline {
                if self.open == 0 || Instant::now() >= d {
                    break Ok(());
                }
            }
            self.shared.counters[self.id].set_open(self.open);
            self.conns.cut_vacant_tail();
        };
        self.teardown();
        self.shared.counters[self.id].set_cpu(evq_os::thread_cpu_ns().saturating_sub(cpu_start));
        result
    }

    fn begin_shutdown(&mut self) {
        self.shutdown_deadline = Some(later(Instant::now(), self.grace));
        self.site.closing = true;
        sys::stop_taking_clients(&mut self.listener, &mut self.signal, &mut self.queue);
        // Connections in a request finish it and close (every response now says
        // close). A keep-alive client whose next request already sits unread is
        // answered now. An idle one is given `STOP_IDLE_WAIT`: a busy client
        // about to send its next request gets it answered with `Connection:
        // close` rather than meeting a closed socket (a reset, the request
        // lost); still idle then, its timer closes it.
        let idle_until = later(Instant::now(), self.grace.min(sys::STOP_IDLE_WAIT));
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.fd >= 0 && c.in_len == 0 && !self.has_output(i) {
                if evq_os::socket::has_pending_input(c.fd) {
                    self.drive(i);
                } else if self.grace.is_zero() {
                    self.close_conn(i);
                } else {
                    self.set_deadline(i, idle_until);
                }
            }
        }
    }

    fn teardown(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].fd >= 0 {
                self.close_conn(i);
            }
        }
        self.listener.close(&mut self.queue);
        self.shared.counters[self.id].set_open(0);
    }

    fn resume_accepting(&mut self) {
        if self.listener.resume(&mut self.queue) {
            self.on_accept();
        }
    }

    fn on_accept(&mut self) {
        intake::on_accept(self, self.now);
    }

    fn add_conn(&mut self, fd: RawFd) -> Option<usize> {
        let index = self.conns.take(|generation| Conn {
            fd: -1,
            generation,
            interest: Interest::empty(),
            in_request: false,
            close_after: false,
            linger_after: false,
            lingering: false,
            deadline: 0,
            timer: None,
            last_active: 0,
            answered: 0,
            inbuf: Vec::new(),
            in_len: 0,
            out: Vec::new(),
            out_pos: 0,
            sending: Sending::None,
        });
        let mode = self.conn_mode;
        let interest = if mode == Mode::Event {
            Interest::READ | Interest::WRITE
        } else {
            Interest::READ
        };
        let c = &mut self.conns[index];
        c.fd = fd;
        c.interest = interest;
        c.in_request = false;
        c.close_after = false;
        c.linger_after = false;
        c.lingering = false;
        c.answered = 0;
        let tok = token(Kind::Client, index, c.generation);
        if self
            .queue
            .declare_interest(fd, interest, Options::new(tok).mode(mode))
            .is_err()
        {
            let c = &mut self.conns[index];
            c.fd = -1;
            self.conns.release(index);
            evq_os::io::close(fd);
            self.shared.open.fetch_sub(1, Ordering::Relaxed);
            self.listener.descriptor_freed();
            return None;
        }
        self.open += 1;
        let deadline = later(self.now, self.idle_timeout);
        self.set_deadline(index, deadline);
        Some(index)
    }

    fn close_conn(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd < 0 {
            return;
        }
        let fd = c.fd;
        c.fd = -1;
        c.generation = next_generation(c.generation);
        c.in_len = 0;
        c.out_pos = 0;
        if let Sending::File { fd, .. } = c.sending {
            evq_os::io::close(fd);
        }
        c.sending = Sending::None;
        let timer = c.timer.take();
        let inbuf = std::mem::take(&mut c.inbuf);
        let out = std::mem::take(&mut c.out);
        if let Some((id, _)) = timer {
            self.queue.cancel_timer(id);
        }
        // Counted closed first: the pools keep spares in proportion to the
        // connections left (and give memory back when none is).
        self.open -= 1;
        self.give_in(inbuf);
        self.give_out(out);
        let _ = self.queue.close(fd);
        self.conns.release(i);
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
        self.listener.descriptor_freed();
    }

    fn give_in(&mut self, buf: Vec<u8>) {
        self.in_pool.give(buf, self.open);
    }

    fn give_out(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        self.out_pool.give(buf, self.open);
    }

    /// Moves the connection's deadline, re-arming its timer only when it must fire
    /// earlier; a later deadline is picked up when the current timer fires.
    fn set_deadline(&mut self, i: usize, deadline: Instant) {
        let deadline = self.millis(deadline);
        let c = &mut self.conns[i];
        c.deadline = deadline;
        match c.timer {
            Some((_, at)) if at <= deadline => {}
            Some((id, _)) => {
                self.queue.cancel_timer(id);
                self.arm_timer(i);
            }
            None => self.arm_timer(i),
        }
    }

    fn arm_timer(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let at = self.epoch + Duration::from_millis(c.deadline as u64);
        let id = self
            .queue
            .add_timer(at, token(Kind::Timer, i, c.generation));
        c.timer = Some((id, c.deadline));
    }

    /// Milliseconds from the worker's epoch to `t` (saturating: 49 days of range).
    fn millis(&self, t: Instant) -> u32 {
        u32::try_from(t.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u32::MAX)
    }

    fn live(&self, i: usize, generation: u32) -> Option<usize> {
        match self.conns.get(i) {
            Some(c) if c.fd >= 0 && c.generation == generation => Some(i),
            _ => None,
        }
    }

    fn on_timer(&mut self, index: usize, generation: u32) {
        let Some(i) = self.live(index, generation) else {
            return;
        };
        self.conns[i].timer = None;
        if self.millis(self.now) >= self.conns[i].deadline {
            self.shared.counters[self.id].timeout();
            self.close_conn(i);
        } else {
            self.arm_timer(i);
        }
    }

    fn on_conn_event(&mut self, index: usize, generation: u32) {
        if let Some(i) = self.live(index, generation) {
            self.drive(i);
        }
    }

    fn has_output(&self, i: usize) -> bool {
        let c = &self.conns[i];
        c.out_pos < c.out.len() || !matches!(c.sending, Sending::None)
    }

    /// Does everything the connection allows without blocking: send what is
    /// pending, answer buffered requests, read more; then registers the interest
    /// that will bring it back.
    fn drive(&mut self, i: usize) {
        self.activity += 1;
        self.conns[i].last_active = self.activity;
        let mut want = Interest::READ;
        if self.conns[i].lingering {
            if linger::drain(self.conns[i].fd) == Drained::Done {
                return self.close_conn(i);
            }
            return self.rearm(i, want);
        }
        loop {
            if self.has_output(i) {
                match self.flush(i) {
                    Flush::Done => {}
                    Flush::Blocked => {
                        want = Interest::WRITE;
                        break;
                    }
                    Flush::Failed => return self.close_conn(i),
                }
                if self.conns[i].close_after {
                    if !self.conns[i].linger_after {
                        return self.close_conn(i);
                    }
                    // The error reply is out; the client may still be sending.
                    self.conns[i].lingering = true;
                    linger::begin(self.conns[i].fd);
                    self.set_deadline(i, later(self.now, linger::LINGER));
                    return self.drive(i);
                }
                let timeout = if self.conns[i].in_request {
                    self.header_timeout
                } else {
                    self.idle_timeout
                };
                let deadline = later(self.now, timeout);
                self.set_deadline(i, deadline);
                if self.shutdown_deadline.is_some() && self.conns[i].in_len == 0 {
                    return self.close_conn(i);
                }
            }
            if self.conns[i].in_len > 0 && self.answer(i) {
                continue;
            }
            match self.read(i) {
                Ok(true) => {
                    if self.answer(i) {
                        continue;
                    }
                    // A partial head: keep reading (event mode needs EAGAIN).
                }
                Ok(false) => break,
                Err(()) => return self.close_conn(i),
            }
        }
        if self.conns[i].in_len == 0 {
            let buf = std::mem::take(&mut self.conns[i].inbuf);
            self.give_in(buf);
        }
        self.rearm(i, want);
    }

    /// Registers the interest that brings the connection back.
    fn rearm(&mut self, i: usize, want: Interest) {
        let rearm = match self.conn_mode {
            Mode::Event => false,
            Mode::Level => self.conns[i].interest != want,
            Mode::Oneshot => true,
        };
        if rearm {
            let c = &mut self.conns[i];
            c.interest = want;
            let tok = token(Kind::Client, i, c.generation);
            if self
                .queue
                .declare_interest(c.fd, want, Options::new(tok).mode(self.conn_mode))
                .is_err()
            {
                self.close_conn(i);
            }
        }
    }

    /// Reads what fits into the connection's input buffer. `Ok(true)`: new bytes;
    /// `Ok(false)`: nothing now (wait for readiness); `Err`: close.
    fn read(&mut self, i: usize) -> Result<bool, ()> {
        let max_head = self.site.limits.max_head;
        if self.conns[i].inbuf.is_empty() {
            let buf = self
                .in_pool
                .take()
                .filter(|b| b.len() == max_head)
                .unwrap_or_else(|| vec![0; max_head]);
            self.conns[i].inbuf = buf;
        }
        let c = &mut self.conns[i];
        if c.in_len >= c.inbuf.len() {
            // Full and still incomplete: answer() has already replied 431.
            return Err(());
        }
        loop {
            match evq_os::io::recv(c.fd, &mut c.inbuf[c.in_len..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    let started = c.in_len == 0;
                    c.in_len += n;
                    if started && !c.in_request {
                        c.in_request = true;
                        let d = later(self.now, self.header_timeout);
                        self.set_deadline(i, d);
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => return Err(()),
            }
        }
    }

    /// Answers as many buffered requests as the output allows. True if it made
    /// progress (a response is queued).
    fn answer(&mut self, i: usize) -> bool {
        let mut progressed = false;
        loop {
            let c = &mut self.conns[i];
            if c.in_len == 0
                || c.close_after
                || !matches!(c.sending, Sending::None)
                || c.out.len() >= OUT_HIGH_WATER
            {
                break;
            }
            if c.out.capacity() == 0 {
                c.out = self.out_pool.take().unwrap_or_default();
            }
            let c = &mut self.conns[i];
            let outcome = handle_request(
                &c.inbuf[..c.in_len],
                &self.site,
                self.date.text(),
                &mut self.scratch,
                &mut c.out,
            );
            let counters = &self.shared.counters[self.id];
            let reply = match outcome {
                Outcome::Incomplete => break,
                Outcome::Done(r) => {
                    if r.status < 400 {
                        self.site.work();
                    }
                    r
                }
                Outcome::Stats { reply, head_only } => {
                    let json = self.shared.report().to_json();
                    write_simple_head(
                        &mut c.out,
                        200,
                        self.date.text(),
                        "application/json",
                        json.len() as u64 + 1,
                        reply.keep_alive,
                    );
                    if !head_only {
                        c.out.extend_from_slice(json.as_bytes());
                        c.out.push(b'\n');
                    }
                    reply
                }
            };
            counters.request();
            counters.status(reply.status);
            progressed = true;
            c.answered = c.answered.saturating_add(1);
            let consumed = reply.consumed.min(c.in_len);
            c.inbuf.copy_within(consumed..c.in_len, 0);
            c.in_len -= consumed;
            c.in_request = c.in_len > 0;
            if !reply.keep_alive {
                c.close_after = true;
                c.linger_after = reply.status >= 400;
                c.in_len = 0;
            }
            c.sending = match reply.body {
                Body::None => Sending::None,
                Body::Fixed { offset } => Sending::Fixed { offset },
                Body::File { fd, len } => Sending::File {
                    fd,
                    offset: 0,
                    left: len,
                },
            };
        }
        progressed
    }

    fn flush(&mut self, i: usize) -> Flush {
        let counters = &self.shared.counters[self.id];
        let c = &mut self.conns[i];
        let more = !matches!(c.sending, Sending::None);
        match send_buffered(c, counters, more) {
            Flush::Done => {}
            Flush::Blocked => return self.blocked(i),
            Flush::Failed => return Flush::Failed,
        }
        loop {
            match &mut c.sending {
                Sending::None => break,
                Sending::Fixed { offset } => {
                    let Some(body) = &self.fixed else {
                        c.sending = Sending::None;
                        break;
                    };
                    if *offset >= body.len() {
                        c.sending = Sending::None;
                        break;
                    }
                    match evq_os::io::send(c.fd, &body[*offset..]) {
                        Ok(n) => {
                            *offset += n;
                            counters.sent(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.blocked(i),
                        Err(_) => return Flush::Failed,
                    }
                }
                Sending::File { fd, offset, left } => {
                    if *left == 0 {
                        evq_os::io::close(*fd);
                        c.sending = Sending::None;
                        break;
                    }
                    if !self.sendfile {
                        // The next chunk is read into the output buffer and sent
                        // from there: the socket queues a copy, so a change to
                        // the file later cannot alter bytes already promised
                        // (with `sendfile` the queue holds the page cache's own
                        // pages, which a truncation zeroes in place).
                        let want = (*left).min(FILE_CHUNK as u64) as usize;
                        c.out.resize(want, 0);
                        match sys::pread(*fd, &mut c.out[..want], *offset) {
                            // The file shrank while it was being sent: a reset,
                            // as below.
                            Ok(0) => {
                                c.out.clear();
                                let _ = evq_os::socket::set_reset_on_close(c.fd);
                                return Flush::Failed;
                            }
                            Ok(n) => {
                                c.out.truncate(n);
                                *offset += n as i64;
                                *left -= n as u64;
                            }
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                                c.out.clear();
                                continue;
                            }
                            Err(_) => {
                                c.out.clear();
                                return Flush::Failed;
                            }
                        }
                        let more = *left > 0;
                        match send_buffered(c, counters, more) {
                            Flush::Done => {}
                            Flush::Blocked => return self.blocked(i),
                            Flush::Failed => return Flush::Failed,
                        }
                        continue;
                    }
                    let chunk = (*left).min(1 << 30) as usize;
                    match sys::sendfile(c.fd, *fd, offset, chunk) {
                        // The file shrank while it was being sent: the length in
                        // the head, already gone, cannot be kept. A reset, not a
                        // FIN, so that no client takes the short body for the
                        // whole (an HTTP/1.0 client reading until close would).
                        Ok(0) => {
                            let _ = evq_os::socket::set_reset_on_close(c.fd);
                            return Flush::Failed;
                        }
                        Ok(n) => {
                            *left -= n as u64;
                            counters.sent(n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.blocked(i),
                        Err(_) => return Flush::Failed,
                    }
                }
            }
        }
        let out = std::mem::take(&mut self.conns[i].out);
        self.give_out(out);
        Flush::Done
    }

    /// Output is stuck: give the client an idle timeout's worth of time to read.
    fn blocked(&mut self, i: usize) -> Flush {
        let d = later(self.now, self.idle_timeout);
        self.set_deadline(i, d);
        Flush::Blocked
    }
}

/// Sends what the connection's output buffer holds from `out_pos` on (`more`:
/// a body follows, so the kernel may wait to fill a segment), then empties
/// it. `Blocked` with the rest kept when the socket is full.
fn send_buffered(c: &mut Conn, counters: &WorkerCounters, more: bool) -> Flush {
    while c.out_pos < c.out.len() {
        match evq_os::io::send_more(c.fd, &c.out[c.out_pos..], more) {
            Ok(n) => {
                c.out_pos += n;
                counters.sent(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Flush::Blocked,
            Err(_) => return Flush::Failed,
        }
    }
    c.out.clear();
    c.out_pos = 0;
    Flush::Done
}

/// The server's side of the intake (`intake.rs`): seed 001's limiter,
/// `--max-conns`, and a connection served as soon as it is taken.
impl Intake for Worker {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            listener: &mut self.listener,
            queue: &mut self.queue,
            admission: &mut self.admission,
            counters: &self.shared.counters[self.id],
        }
    }

    fn shed(&mut self) -> bool {
        // Connections let in earlier in this round count too, or a burst
        // taken in one accept batch would all get in before anything is shed.
        let load = self.round_accepts + 1;
        self.limiter.is_some_and(|l| l.overloaded_with(load))
    }

    fn has_room(&mut self) -> bool {
        self.take_slot()
    }

    fn take(&mut self, fd: RawFd) {
        self.round_accepts += 1;
        if let Some(i) = self.add_conn(fd) {
            // phhttpd's habit: the request is often already here, so read now
            // instead of going round the event loop first.
            self.drive(i);
        }
    }

    fn make_room(&mut self) -> bool {
        self.reclaim_idle(1, true) > 0
    }

    fn out_of_descriptors(&mut self) {
        // Make room for the clients behind the one just shed.
        self.reclaim_idle(reclaim::EXHAUSTED_BATCH, true);
    }
}
