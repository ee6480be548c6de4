//! The load engine: threads, each with one evq queue, running httperf's open loop or
//! wrk's closed loop over non-blocking HTTP/1.x connections.
//!
//! Latency is measured from each request's *intended* start: in open loop the first
//! call of a connection is due at its scheduled start, so a late generator or a slow
//! connect shows up in the numbers instead of silently shifting the schedule
//! (coordinated omission). Later calls on a connection are due when the previous
//! reply completes (httperf's model), which is when they are sent.
//!
//! The clock is read once per batch of events, as httperf reads it once per
//! `select`: a reply's time is when the wait that reported it returned (it had
//! arrived by then), and a call sent in reply to it is due from that same time, so
//! the generator's own work through the batch counts against the server, never
//! for it.
//!
//! Timeouts are lazy evq timers: each connection keeps a deadline that progress moves
//! forward and at most one pending timer; when it fires early (the deadline moved),
//! it is set again for the new deadline. So progress costs no timer operation.

use crate::config::{resolve, IoModel, LoadConfig, LoopMode};
use crate::request::build_request;
use crate::schedule::{Launcher, Plan};
use crate::slots::{generation_of, Slots};
use crate::stats::{ErrorKind, LoadReport, ThreadStats};
use crate::tally::{Dialer, Shared, Tally};
use evq::{Event, EventQueue, Events, Interest, Mode, Options, TimerId};
use evq_os::CpuUsage;
use evq_wire::{HeadParser, Reply, ResponseReader};
use std::io::{self, IsTerminal, Write};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TIMER_BIT: u64 = 1 << 63;
const MAX_WAIT: Duration = Duration::from_millis(100);
const READ_BUF: usize = 64 * 1024;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Active,
}

struct Conn {
    fd: RawFd,
    phase: Phase,
    conn_intended: Instant,
    connect_started: Instant,
    calls_issued: u32,
    calls_done: u32,
    burst_intended: Instant,
    outstanding: u32,
    write_left: usize,
    write_total: usize,
    reader: ResponseReader,
    deadline: Instant,
    timer: Option<TimerId>,
    interest: Interest,
}

enum Outcome {
    Keep,
    Done,
    Failed(ErrorKind),
}

struct Worker<'a> {
    cfg: &'a LoadConfig,
    t: Tally<'a>,
    dialer: Dialer,
    queue: EventQueue,
    edge: bool,
    /// Boxed so that taking a connection out for its event and putting it back
    /// moves a pointer, not the connection (~170 bytes, twice an event).
    slots: Slots<Box<Conn>>,
    plan: Plan,
    burst_buf: Vec<u8>,
    req_len: usize,
    heads: HeadParser,
    rbuf: Vec<u8>,
}

impl Launcher for Worker<'_> {
    fn plan(&mut self) -> &mut Plan {
        &mut self.plan
    }
    fn active(&self) -> usize {
        self.t.active
    }
    fn launch(&mut self, intended: Instant) -> bool {
        Worker::launch(self, intended)
    }
}

impl<'a> Worker<'a> {
    fn token(&self, slot: u32) -> u64 {
        (u64::from(self.slots.generation(slot)) << 32) | u64::from(slot)
    }

    fn run(&mut self, hard_deadline: Instant) -> io::Result<bool> {
        let mut events = Events::with_capacity(256);
        let mut cut_off = false;
        loop {
            let now = Instant::now();
            if evq_os::stop_requested() || now >= hard_deadline {
                cut_off = true;
                break;
            }
            if self.plan.until().is_some_and(|u| now >= u) {
                break;
            }
            let next_due = self.launch_due(now);
            if self.finished() {
                break;
            }
            let mut wait = MAX_WAIT.min(hard_deadline.saturating_duration_since(now));
            if let Some(due) = next_due {
                wait = wait.min(due.saturating_duration_since(now));
            }
            if let Some(u) = self.plan.until() {
                wait = wait.min(u.saturating_duration_since(now));
            }
            self.queue.get_next_event(&mut events, Some(wait))?;
            // One clock read for the batch: every reply in it had arrived by now.
            let now = Instant::now();
            self.t.batch_at(now);
            for ev in events.iter() {
                self.dispatch(ev, now);
            }
            self.t.publish();
        }
        // Whatever is still open: cut off (an error) or, at the end of a closed-loop
        // duration, simply abandoned.
        for slot in 0..self.slots.count() {
            if let Some(c) = self.slots.take_any(slot) {
                self.t.stats.unanswered += u64::from(c.outstanding);
                if cut_off {
                    self.t.fail_start(ErrorKind::Cutoff);
                }
                self.release(slot, &c);
            }
        }
        Ok(cut_off)
    }

    fn finished(&self) -> bool {
        self.t.active == 0 && self.plan.exhausted()
    }

    /// Opens one connection due at `intended`; false if it failed at once.
    fn launch(&mut self, intended: Instant) -> bool {
        let now = Instant::now();
        self.t.starting(intended, now);
        let fd = match self.dialer.connect(self.cfg) {
            Ok(fd) => fd,
            Err(e) => {
                self.t
                    .fail(ErrorKind::from_io(&e), intended, Instant::now(), true);
                return false;
            }
        };
        let slot = self.slots.vacant();
        let token = self.token(slot);
        let interest = if self.edge {
            Interest::READ | Interest::WRITE
        } else {
            Interest::WRITE
        };
        let mode = if self.edge { Mode::Event } else { Mode::Level };
        if let Err(e) = self
            .queue
            .declare_interest(fd, interest, Options::new(token).mode(mode))
        {
            evq_os::io::close(fd);
            self.slots.release(slot);
            self.t.fail_start(ErrorKind::from_io(&e));
            return false;
        }
        let mut conn = Conn {
            fd,
            phase: Phase::Connecting,
            conn_intended: intended,
            connect_started: now,
            calls_issued: 0,
            calls_done: 0,
            burst_intended: intended,
            outstanding: 0,
            write_left: 0,
            write_total: 0,
            reader: ResponseReader::new(),
            deadline: now,
            timer: None,
            interest,
        };
        if let Some(t) = self.cfg.timeout {
            self.touch(&mut conn, slot, now + t);
        }
        self.slots.put(slot, Box::new(conn));
        self.t.opened();
        true
    }

    fn touch(&mut self, c: &mut Conn, slot: u32, deadline: Instant) {
        c.deadline = deadline;
        if c.timer.is_none() {
            let token = self.token(slot) | TIMER_BIT;
            c.timer = Some(self.queue.add_timer(deadline, token));
        }
    }

    fn progress(&mut self, c: &mut Conn, slot: u32, now: Instant) {
        if let Some(t) = self.cfg.timeout {
            let waiting_for_reply = c.outstanding > 0 && c.write_left == 0 && !c.reader.started();
            let d = if waiting_for_reply {
                t + self.cfg.think_timeout
            } else {
                t
            };
            self.touch(c, slot, now + d);
        }
    }

    fn dispatch(&mut self, ev: &Event, now: Instant) {
        let token = ev.token();
        let is_timer = ev.is_timer() && token & TIMER_BIT != 0;
        let slot = (token & 0xffff_ffff) as u32;
        let Some(mut c) = self.slots.take(slot, generation_of(token, 32)) else {
            return;
        };
        let outcome = if is_timer {
            c.timer = None;
            if now >= c.deadline {
                Outcome::Failed(ErrorKind::ClientTimeout)
            } else {
                let d = c.deadline;
                self.touch(&mut c, slot, d);
                Outcome::Keep
            }
        } else {
            self.on_ready(&mut c, slot, ev, now)
        };
        match outcome {
            Outcome::Keep => self.slots.put(slot, c),
            Outcome::Done => {
                self.t.completed(c.conn_intended, now);
                self.release(slot, &c);
            }
            Outcome::Failed(kind) => {
                self.t.stats.unanswered += u64::from(c.outstanding);
                self.t
                    .fail(kind, c.burst_intended, now, c.phase == Phase::Connecting);
                self.release(slot, &c);
                self.plan.backoff(now);
            }
        }
    }

    fn release(&mut self, slot: u32, c: &Conn) {
        if let Some(t) = c.timer {
            self.queue.cancel_timer(t);
        }
        let _ = self.queue.close(c.fd);
        self.slots.release(slot);
        self.t.closed();
    }

    fn set_interest(&mut self, c: &mut Conn, slot: u32, want: Interest) -> Result<(), ErrorKind> {
        if self.edge || c.interest == want {
            return Ok(());
        }
        let token = self.token(slot);
        self.queue
            .declare_interest(c.fd, want, Options::new(token))
            .map_err(|e| ErrorKind::from_io(&e))?;
        c.interest = want;
        Ok(())
    }

    fn on_ready(&mut self, c: &mut Conn, slot: u32, ev: &Event, now: Instant) -> Outcome {
        if c.phase == Phase::Connecting {
            if let Some(e) = evq_os::socket::take_error(c.fd) {
                return Outcome::Failed(ErrorKind::from_io(&e));
            }
            if !ev.is_writable() {
                if ev.readiness().contains(evq::Readiness::HUP) {
                    return Outcome::Failed(ErrorKind::ConnRefused);
                }
                return Outcome::Keep;
            }
            c.phase = Phase::Active;
            self.t.connected(c.connect_started, now);
            return match self.next_burst(c, slot, now) {
                Ok(true) => Outcome::Done,
                Ok(false) => Outcome::Keep,
                Err(k) => Outcome::Failed(k),
            };
        }
        if ev.is_readable() {
            let peer_closed = ev.readiness().contains(evq::Readiness::HUP);
            match self.read_all(c, slot, peer_closed, now) {
                Ok(Outcome::Keep) => {}
                other => return other.unwrap_or_else(Outcome::Failed),
            }
        }
        if c.write_left > 0 && ev.is_writable() {
            if let Err(k) = self.write_some(c, slot, now) {
                return Outcome::Failed(k);
            }
        }
        Outcome::Keep
    }

    /// Sends the next burst, or reports the connection done (`Ok(true)`).
    fn next_burst(&mut self, c: &mut Conn, slot: u32, now: Instant) -> Result<bool, ErrorKind> {
        let calls = self.cfg.num_calls;
        let remaining = if calls == 0 {
            u32::MAX
        } else {
            calls.saturating_sub(c.calls_issued)
        };
        if remaining == 0 {
            return Ok(true);
        }
        let k = remaining.min(self.cfg.burst_length);
        if c.calls_issued > 0 {
            c.burst_intended = now;
        }
        c.calls_issued += k;
        c.outstanding += k;
        c.write_total = k as usize * self.req_len;
        c.write_left = c.write_total;
        self.t.stats.requests += u64::from(k);
        self.write_some(c, slot, now)?;
        Ok(false)
    }

    fn write_some(&mut self, c: &mut Conn, slot: u32, now: Instant) -> Result<(), ErrorKind> {
        while c.write_left > 0 {
            let off = c.write_total - c.write_left;
            match evq_os::io::send(c.fd, &self.burst_buf[off..c.write_total]) {
                Ok(n) => {
                    c.write_left -= n;
                    self.t.stats.bytes_sent += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.set_interest(c, slot, Interest::READ | Interest::WRITE)?;
                    self.progress(c, slot, now);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ErrorKind::from_io(&e)),
            }
        }
        self.set_interest(c, slot, Interest::READ)?;
        self.progress(c, slot, now);
        Ok(())
    }

    fn read_all(
        &mut self,
        c: &mut Conn,
        slot: u32,
        peer_closed: bool,
        now: Instant,
    ) -> Result<Outcome, ErrorKind> {
        let mut buf = std::mem::take(&mut self.rbuf);
        let result = self.read_into(c, slot, &mut buf, peer_closed, now);
        self.rbuf = buf;
        result
    }

    /// Reads until the socket is drained. A read shorter than the buffer already
    /// drained it (epoll(7) allows concluding so for stream sockets): the next
    /// bytes, or the peer's FIN, will raise a new event, so the `EAGAIN` read
    /// that would confirm it is skipped — one system call in four per request.
    /// Not when the event already said the peer closed: then the FIN may have
    /// come with the data, and only reading on finds the end of the stream.
    fn read_into(
        &mut self,
        c: &mut Conn,
        slot: u32,
        buf: &mut [u8],
        peer_closed: bool,
        now: Instant,
    ) -> Result<Outcome, ErrorKind> {
        loop {
            let n = match evq_os::io::recv(c.fd, buf) {
                Ok(0) => {
                    return match c.reader.eof() {
                        Ok(Some(reply)) => {
                            self.count_reply(c, reply, now);
                            Ok(self.after_close(c))
                        }
                        Ok(None) => Ok(self.after_close(c)),
                        Err(_) => Err(ErrorKind::PrematureClose),
                    };
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Outcome::Keep),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ErrorKind::from_io(&e)),
            };
            self.t.stats.bytes_received += n as u64;
            let mut data = &buf[..n];
            while !data.is_empty() {
                let fed = c
                    .reader
                    .feed(data, &mut self.heads)
                    .map_err(|_| ErrorKind::BadReply)?;
                data = &data[fed.used..];
                match fed.reply {
                    Some(reply) => {
                        if c.outstanding == 0 {
                            // A reply nobody asked for.
                            return Err(ErrorKind::BadReply);
                        }
                        self.count_reply(c, reply, now);
                        if !reply.keep_alive {
                            // The server ends the connection here; pipelined calls
                            // after this reply will not be answered.
                            self.t.stats.unanswered += u64::from(c.outstanding);
                            c.outstanding = 0;
                            return Ok(Outcome::Done);
                        }
                        if c.outstanding == 0 && self.next_burst(c, slot, now)? {
                            return Ok(Outcome::Done);
                        }
                    }
                    None if fed.used == 0 => break,
                    None => {}
                }
            }
            self.progress(c, slot, now);
            if n < buf.len() && !peer_closed {
                return Ok(Outcome::Keep);
            }
        }
    }

    /// The server closed the connection with no response in progress.
    fn after_close(&mut self, c: &mut Conn) -> Outcome {
        if c.outstanding > 0 {
            Outcome::Failed(ErrorKind::PrematureClose)
        } else {
            Outcome::Done
        }
    }

    fn count_reply(&mut self, c: &mut Conn, reply: Reply, now: Instant) {
        c.outstanding = c.outstanding.saturating_sub(1);
        c.calls_done += 1;
        self.t.reply(reply, c.burst_intended, now);
    }
}

/// Runs one load test and reports what it measured. Blocks until the run ends: the
/// schedule is done and every connection finished, the closed-loop duration passed,
/// the hard cap (`max_time`) hit, or [`evq_os::stop_on_signals`]'s signal came.
///
/// [`LoadConfig::io`] picks the loop: readiness events from an evq queue, or
/// io_uring completions ([`IoModel::Completion`]); both count and report alike.
///
/// Raises the soft `RLIMIT_NOFILE` to the hard limit first. Connection failures are
/// counted, never fatal.
///
/// # Errors
/// Invalid configuration, an unresolvable server, or a failure of the event queue
/// (or completion ring) itself.
pub fn run_load(cfg: &LoadConfig) -> io::Result<LoadReport> {
    cfg.validate()?;
    let addr = resolve(&cfg.server, cfg.port)?;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let host = if cfg.port == 80 {
        cfg.server.clone()
    } else {
        format!("{}:{}", cfg.server, cfg.port)
    };
    let request = build_request(&cfg.method, &cfg.uri, &host, &cfg.headers, cfg.http10);
    let shared = Shared::default();
    match cfg.io {
        IoModel::Readiness => {
            let mut queues = Vec::with_capacity(cfg.threads);
            for _ in 0..cfg.threads {
                queues.push(EventQueue::new()?);
            }
            if let Some(q) = queues.first() {
                let _ = shared.backend.set(q.backend().to_string());
            }
            drive(cfg, addr, &request, &shared, queues, run_readiness)
        }
        IoModel::Completion => {
            let seeds = vec![(); cfg.threads];
            drive(cfg, addr, &request, &shared, seeds, |(), th| {
                crate::completion::run_thread(th)
            })
        }
    }
}

/// What a load thread is given: the run, its share of it, and the clock.
pub(crate) struct ThreadSetup<'a> {
    pub cfg: &'a LoadConfig,
    pub shared: &'a Shared,
    pub addr: SocketAddr,
    /// This thread's index, 0..threads.
    pub index: usize,
    pub start: Instant,
    pub hard_deadline: Instant,
    /// One request's bytes.
    pub request: &'a [u8],
}

impl ThreadSetup<'_> {
    /// The request repeated for a whole burst.
    pub(crate) fn burst_buf(&self) -> Vec<u8> {
        self.request.repeat(self.cfg.burst_length as usize)
    }
}

/// What a load thread hands back: its counts and whether the run was cut off.
pub(crate) type ThreadResult = io::Result<(ThreadStats, bool)>;

fn run_readiness(queue: EventQueue, th: &ThreadSetup<'_>) -> ThreadResult {
    let cfg = th.cfg;
    let mut w = Worker {
        cfg,
        t: Tally::new(cfg, th.shared, th.start)?,
        dialer: Dialer::new(th.addr, th.index, cfg.threads),
        edge: queue.capabilities().event,
        queue,
        slots: Slots::new(),
        plan: Plan::new(cfg, th.index, th.start),
        burst_buf: th.burst_buf(),
        req_len: th.request.len(),
        heads: HeadParser::new(cfg.method.eq_ignore_ascii_case("HEAD")),
        rbuf: vec![0; READ_BUF],
    };
    let cut = w.run(th.hard_deadline)?;
    Ok((w.t.stats, cut))
}

/// Runs one thread per seed (`body(seed, setup)`), draws the progress line, and
/// merges what the threads counted into the report.
fn drive<S, F>(
    cfg: &LoadConfig,
    addr: SocketAddr,
    request: &[u8],
    shared: &Shared,
    seeds: Vec<S>,
    body: F,
) -> io::Result<LoadReport>
where
    S: Send,
    F: Fn(S, &ThreadSetup<'_>) -> ThreadResult + Sync,
{
    let max_time = cfg.effective_max_time();
    let cpu0 = CpuUsage::of_process();
    // A little head room so every thread is waiting before the first start is due.
    let start = Instant::now() + Duration::from_millis(10);
    let hard_deadline = start + max_time;
    let progress = cfg.progress && io::stderr().is_terminal();
    let body = &body;
    // Each worker says when it finished: the test ends with the last of them, not
    // when the supervisor's 50 ms poll notices (which would understate the rate).
    let results: Vec<io::Result<(ThreadStats, bool, Instant)>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (k, seed) in seeds.into_iter().enumerate() {
            handles.push(
                s.spawn(move || -> io::Result<(ThreadStats, bool, Instant)> {
                    let setup = ThreadSetup {
                        cfg,
                        shared,
                        addr,
                        index: k,
                        start,
                        hard_deadline,
                        request,
                    };
                    let r = body(seed, &setup);
                    let finished = Instant::now();
                    shared.done.fetch_add(1, Ordering::SeqCst);
                    let (stats, cut) = r?;
                    Ok((stats, cut, finished))
                }),
            );
        }
        let mut last = Instant::now();
        while shared.done.load(Ordering::SeqCst) < cfg.threads {
            std::thread::sleep(Duration::from_millis(50));
            if progress && last.elapsed() >= Duration::from_millis(500) {
                last = Instant::now();
                let _ = write!(
                    io::stderr(),
                    "\r[{:6.1}s] conns {} replies {} errors {} open {}   ",
                    start.elapsed().as_secs_f64(),
                    shared.conns.load(Ordering::Relaxed),
                    shared.replies.load(Ordering::Relaxed),
                    shared.errors.load(Ordering::Relaxed),
                    shared.active.load(Ordering::Relaxed)
                );
            }
        }
        if progress {
            let _ = write!(io::stderr(), "\r\x1b[K");
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("load thread panicked")))
            })
            .collect()
    });
    let used = CpuUsage::of_process().since(cpu0);
    let mut total = ThreadStats::new()?;
    let mut cut_off = false;
    let mut end = start;
    for r in results {
        let (st, cut, finished) = r?;
        total.merge(&st);
        cut_off |= cut;
        end = end.max(finished);
    }
    let duration_s = match &cfg.mode {
        LoopMode::Closed {
            duration: Some(d), ..
        } if !cut_off => end
            .saturating_duration_since(start)
            .as_secs_f64()
            .min(d.as_secs_f64()),
        _ => end.saturating_duration_since(start).as_secs_f64(),
    };
    let cpu = (used.user.as_secs_f64(), used.system.as_secs_f64());
    let backend = shared.backend.get().cloned().unwrap_or_default();
    Ok(total.into_report(cfg, backend, duration_s, cut_off, cpu))
}
