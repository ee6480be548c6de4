//! `evq load --io completion`: the load threads on io_uring completions
//! ([`evq::completion::CompletionRing`]) instead of readiness events. The kernel
//! sends the requests and receives the replies; a thread's loop only frames the
//! bytes (the same [`ResponseReader`] and [`HeadParser`] as the readiness loop),
//! counts (the same [`Tally`]) and queues the next operations, which go to the
//! kernel with the next wait — one `io_uring_enter` per batch instead of a `send`
//! and a `recv` per reply.
//!
//! Each connection has one multishot recv over the ring's provided buffers (an
//! idle connection holds no buffer) and at most one send in flight: a burst of
//! `--burst-length` requests, copied into a pooled buffer the ring owns until the
//! send completes. Schedules, outcomes, latency from the intended start and the
//! report are the readiness loop's.
//!
//! # Quirks of a client on completions, and what this file does about them
//!
//! a) **The ring has no connect.** `CompletionRing` offers no `IORING_OP_CONNECT`,
//!    and a connect does not need one here: the socket is connected as the
//!    readiness loop connects it (non-blocking `connect(2)`, `--hog` ports,
//!    `--source`), and its recv and first send are queued at once, before the
//!    handshake is known to be done. A TCP send on a socket still in `SYN_SENT`
//!    does not fail: `tcp_sendmsg` waits for the connection
//!    (`sk_stream_wait_connect`), which for io_uring's non-blocking attempt is
//!    `EAGAIN`, so the kernel polls the socket for writability and sends when the
//!    handshake completes — or completes the send with the handshake's error
//!    (`ECONNREFUSED`, `ETIMEDOUT`). A recv on it likewise waits. So the connect
//!    costs no wait of its own and no system call beyond `socket`/`connect`; on
//!    loopback the handshake is usually done before the first enter. The price:
//!    the connection is known to be up only when its first send completes, so
//!    `connect_ms` is measured to the first send's completion (handshake plus
//!    handing ~100 bytes to the kernel), and a `client-timo` counts as
//!    *connecting* while that first send is still in flight — the readiness loop
//!    asks for writability instead. An `IORING_OP_CONNECT` in the library would
//!    give the handshake its own completion; it is not needed for the figures.
//! b) **A refused connection fails two operations, and only one learns why.** The
//!    handshake's error is taken (and cleared) by whichever request the kernel
//!    retries first; the other sees a closed socket — the send `EPIPE`, the recv
//!    end of file. The first completion carries the real error and fails the
//!    connection; the other finds its connection gone and is ignored. An end of
//!    file that comes while the send is still in flight waits for the send's
//!    completion, so a refusal or a reset the send learned is what counts, not a
//!    `premature-close`.
//! c) **A finished connection is cancelled and closed in one go.** A multishot
//!    recv holds the socket and is not ended by `close` (the ring's quirk i), so
//!    its recv and any send in flight are cancelled and the ring closes the
//!    descriptor right behind the cancels, all in the next enter. The hazard of
//!    closing early is a descriptor *number* reused by a new socket while a
//!    request for the old one is still to be issued; there is none: the ring
//!    issues requests in the order they were made (its backlog is FIFO), so
//!    every request naming the old socket is issued — and holds its file —
//!    before the close runs, and the ring re-issues nothing for a cancelled
//!    operation (no re-arm after `ENOBUFS`, no send continuation). The slot is
//!    released at once; the cancelled operations' last completions carry the
//!    old generation and are dropped (a send's buffer still goes back to the
//!    pool). At the end of a run the thread waits up to a second for the ring to
//!    empty before dropping it. Three requests and no system call per closed
//!    connection, beside `socket` and `connect`.
//! d) **A send that ends short was cut off.** The ring continues short sends
//!    itself and reports the bytes sent, even when an error ended it after some
//!    went; a completion for fewer bytes than the burst counts as `connreset` (the
//!    peer went away mid-request).
//! e) **Received bytes are the ring's, for one batch.** They are framed where they
//!    lie, in the batch that delivered them; a burst's next send is queued only
//!    after the buffer is framed (the send needs the ring, which the bytes borrow).
//!    So bytes after the last reply of a burst, in the same buffer, find nothing
//!    asked and are a `bad-reply` — the readiness loop would send the next burst
//!    first and count them against it. Only a server answering what was not asked
//!    tells the two apart.
//! f) **Timeouts are a heap in user space, not ring timeouts.** A ring timeout
//!    costs a request and a completion each time a deadline moves; instead each
//!    connection keeps a deadline that progress moves forward and at most one
//!    heap entry, re-pushed when it comes due early (the readiness loop's lazy
//!    timers), and the wait for completions is bounded by the earliest entry.
//!    A run without `--timeout` has no timer work at all.
//! g) **The ring is the thread's.** `SINGLE_ISSUER`/`DEFER_TASKRUN` tie it to the
//!    thread that built it, so each load thread builds its own; `--threads N` is
//!    N rings. Every mode of the readiness loop runs here — open and closed loop,
//!    `--num-calls`, `--burst-length` pipelining, HTTP/1.0 and `Connection:
//!    close`, `--timeout`/`--think-timeout`, `--hog`, `--source`, `--warm-up` —
//!    so none is refused; a kernel without io_uring completions (Linux 6.0) is,
//!    with an error naming `--io completion`.
//! h) **A reset can be missed** (`evq::completion`'s quirk on multishot recv):
//!    a server that resets right after part of a reply can leave the recv
//!    armed on a dead socket, no completion to end it. A peek per partial
//!    reply would cost a system call per segment of large bodies, so the
//!    socket is peeked only when its `--timeout` comes due: a failure found
//!    there counts as the error it is (`connreset`), not `client-timo`. Without
//!    `--timeout` such a connection waits for the run's end (`unanswered`).
//! i) **A wait gathers a batch when many replies are awaited**
//!    (`evq::completion`'s quirk s). Handling a completion takes a
//!    microsecond or two, so a loop that returns at the first is asleep again
//!    before the next: 0.66 `io_uring_enter` per reply against one server,
//!    each a sleep and a wake-up, where the readiness loop finds ~100 events
//!    per wait. With 8 or more replies awaited, a wait asks the kernel for a
//!    quarter of them, or whatever came within `--gather-us` (50 µs): against
//!    nginx, 0.07 enters per reply and 0.82–0.89× the readiness loop's CPU
//!    per reply, where it was 0.99×. The price is on latency: a reply is timed
//!    when its batch returns, up to `--gather-us` after it arrived — never
//!    with fewer than 8 awaited, so a light open loop times every reply at
//!    once. The readiness loop has the same skew by another road: its
//!    replies are timed when a wait that found many of them returns.
//!    `--gather-us 0` turns it off; a kernel before 6.12 has no batch waits.

use crate::load::{ThreadResult, ThreadSetup};
use crate::schedule::{Launcher, Plan};
use crate::slots::{generation_of, Slots};
use crate::stats::ErrorKind;
use crate::tally::{Dialer, Tally};
use evq::completion::{Completion, CompletionOptions, CompletionRing, Completions, Gather, OpId};
use evq_wire::{HeadParser, ResponseReader};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Marks a send's token; a recv's token is the bare `(generation << 32) | slot`.
const SEND_BIT: u64 = 1 << 63;
/// Token of cancels and closes: nothing to do when they complete.
const IGNORE: u64 = u64::MAX;
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Completions handled per dequeue.
const BATCH: usize = 256;
/// Provided receive buffers per ring, and their size: 16 MiB a thread, a 1 KiB
/// reply per buffer with room for pipelined bursts and larger bodies.
const RECV_BUFFERS: u32 = 1024;
const RECV_BUFFER_SIZE: u32 = 16 * 1024;
/// How long the end of a run waits for cancelled operations (quirk c).
const DRAIN: Duration = Duration::from_secs(1);
/// Replies awaited before a wait gathers a batch (quirk i), and the share of
/// them it gathers.
const GATHER_FROM: u64 = 8;
const GATHER_SHARE: u64 = 4;

struct Conn {
    fd: RawFd,
    /// Until the first send completed: the handshake is not known to be done
    /// (quirk a).
    connecting: bool,
    conn_intended: Instant,
    connect_started: Instant,
    calls_issued: u32,
    burst_intended: Instant,
    outstanding: u32,
    /// Every reply of the burst is in: the next burst goes once the send in flight
    /// (if any) completed.
    burst_due: bool,
    /// The recv saw end of file while a send was in flight (quirk b).
    eof: bool,
    reader: ResponseReader,
    deadline: Instant,
    /// An entry for this connection is in the timer heap.
    timer: bool,
    recv: Option<OpId>,
    send: Option<OpId>,
    /// Bytes of the send in flight.
    send_len: usize,
}

enum Outcome {
    Keep,
    Done,
    Failed(ErrorKind),
}

struct Worker<'a> {
    t: Tally<'a>,
    dialer: Dialer,
    ring: CompletionRing,
    slots: Slots<Box<Conn>>,
    plan: Plan,
    burst_buf: Vec<u8>,
    req_len: usize,
    heads: HeadParser,
    /// Deadlines by time, with the token of their connection (quirk f).
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Send buffers back from completed sends, for the next bursts.
    spare: Vec<Vec<u8>>,
}

/// One load thread on a completion ring: builds the ring (on this thread, quirk
/// g), runs its share of the plan, and hands back its counts.
pub(crate) fn run_thread(th: &ThreadSetup<'_>) -> ThreadResult {
    let cfg = th.cfg;
    let options = CompletionOptions::new()
        .sq_entries(1024)
        .cq_entries(8192)
        .buffers(RECV_BUFFERS)
        .buffer_size(RECV_BUFFER_SIZE);
    let ring = CompletionRing::with_options(options).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--io completion needs io_uring completions (Linux 6.0): {e}"),
        )
    })?;
    let setup = ring.setup();
    let mut flags = Vec::new();
    if setup.single_issuer {
        flags.push("SINGLE_ISSUER");
    }
    if setup.defer_taskrun {
        flags.push("DEFER_TASKRUN");
    }
    let _ = th
        .shared
        .backend
        .set(format!("io_uring completions [{}]", flags.join(", ")));
    let mut w = Worker {
        t: Tally::new(cfg, th.shared, th.start)?,
        dialer: Dialer::new(th.addr, th.index, cfg.threads),
        ring,
        slots: Slots::new(),
        plan: Plan::new(cfg, th.index, th.start),
        burst_buf: th.burst_buf(),
        req_len: th.request.len(),
        heads: HeadParser::new(cfg.method.eq_ignore_ascii_case("HEAD")),
        timers: BinaryHeap::new(),
        spare: Vec::new(),
    };
    let cut = w.run(th.hard_deadline)?;
    let mut stats = w.t.stats;
    stats.ring_enters = w.ring.stats().enters;
    Ok((stats, cut))
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

impl Worker<'_> {
    fn token(&self, slot: u32) -> u64 {
        (u64::from(self.slots.generation(slot)) << 32) | u64::from(slot)
    }

    fn run(&mut self, hard_deadline: Instant) -> io::Result<bool> {
        let mut batch = Completions::with_capacity(BATCH);
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
            if let Some(Reverse((at, _))) = self.timers.peek() {
                wait = wait.min(at.saturating_duration_since(now));
            }
            let gather = self.gather();
            self.ring
                .get_next_completion_gathered(&mut batch, Some(wait), gather)?;
            // One clock read for the batch: every reply in it had arrived by now.
            let now = Instant::now();
            self.t.batch_at(now);
            for comp in batch.iter_mut() {
                self.dispatch(comp, now);
            }
            self.expire(now);
            self.t.publish();
        }
        // Whatever is still open: cut off (an error) or, at the end of a closed-loop
        // duration, simply abandoned.
        for slot in 0..self.slots.count() {
            let Some(c) = self.slots.take_any(slot) else {
                continue;
            };
            self.t.stats.unanswered += u64::from(c.outstanding);
            if cut_off {
                self.t.fail_start(ErrorKind::Cutoff);
            }
            self.retire(slot, &c);
        }
        self.drain(&mut batch)?;
        Ok(cut_off)
    }

    /// Waits (a while) for the cancelled operations and the closes (quirk c),
    /// so that no close is left unsubmitted when the ring is dropped.
    fn drain(&mut self, batch: &mut Completions) -> io::Result<()> {
        let give_up = Instant::now() + DRAIN;
        while self.ring.in_flight() > 0 {
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            self.ring
                .get_next_completion(batch, Some(give_up.saturating_duration_since(now)))?;
        }
        self.ring.submit()
    }

    /// What the next wait gathers (quirk i): a quarter of the replies
    /// awaited, within `--gather-us`, once at least [`GATHER_FROM`] are.
    fn gather(&self) -> Gather {
        let st = &self.t.stats;
        let awaited = st
            .requests
            .saturating_sub(st.replies)
            .saturating_sub(st.unanswered);
        if awaited < GATHER_FROM {
            return Gather::NONE;
        }
        Gather::new((awaited / GATHER_SHARE) as usize, self.t.cfg.gather)
    }

    fn finished(&self) -> bool {
        self.t.active == 0 && self.plan.exhausted()
    }

    /// Opens one connection due at `intended` and queues its recv and first
    /// burst (quirk a); false if it failed at once.
    fn launch(&mut self, intended: Instant) -> bool {
        let now = Instant::now();
        self.t.starting(intended, now);
        let fd = match self.dialer.connect(self.t.cfg) {
            Ok(fd) => fd,
            Err(e) => {
                self.t
                    .fail(ErrorKind::from_io(&e), intended, Instant::now(), true);
                return false;
            }
        };
        let slot = self.slots.vacant();
        let token = self.token(slot);
        let mut c = Box::new(Conn {
            fd,
            connecting: true,
            conn_intended: intended,
            connect_started: now,
            calls_issued: 0,
            burst_intended: intended,
            outstanding: 0,
            burst_due: false,
            eof: false,
            reader: ResponseReader::new(),
            deadline: now,
            timer: false,
            recv: None,
            send: None,
            send_len: 0,
        });
        c.recv = Some(self.ring.recv_multishot(fd, token));
        self.t.opened();
        if let Some(t) = self.t.cfg.timeout {
            self.touch(&mut c, slot, now + t);
        }
        let outcome = self.next_burst(&mut c, slot, now);
        self.conclude(slot, c, outcome, now);
        true
    }

    fn touch(&mut self, c: &mut Conn, slot: u32, deadline: Instant) {
        c.deadline = deadline;
        if !c.timer {
            c.timer = true;
            self.timers.push(Reverse((deadline, self.token(slot))));
        }
    }

    fn progress(&mut self, c: &mut Conn, slot: u32, now: Instant) {
        if let Some(t) = self.t.cfg.timeout {
            let waiting_for_reply = c.outstanding > 0 && c.send.is_none() && !c.reader.started();
            let d = if waiting_for_reply {
                t + self.t.cfg.think_timeout
            } else {
                t
            };
            self.touch(c, slot, now + d);
        }
    }

    /// Fails the connections whose deadline passed; re-files the entries of those
    /// whose deadline moved on (quirk f).
    fn expire(&mut self, now: Instant) {
        while let Some(&Reverse((at, token))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let slot = (token & 0xffff_ffff) as u32;
            let Some(mut c) = self.slots.take(slot, generation_of(token, 32)) else {
                continue;
            };
            c.timer = false;
            let outcome = if now >= c.deadline {
                // Quirk h: a reset the recv missed is a reset, not a timeout.
                match evq_os::socket::failure(c.fd) {
                    Some(e) => Outcome::Failed(ErrorKind::from_io(&e)),
                    None => Outcome::Failed(ErrorKind::ClientTimeout),
                }
            } else {
                let d = c.deadline;
                self.touch(&mut c, slot, d);
                Outcome::Keep
            };
            self.conclude(slot, c, outcome, now);
        }
    }

    fn dispatch(&mut self, comp: &mut Completion, now: Instant) {
        let token = comp.token();
        if token == IGNORE {
            return;
        }
        let is_send = token & SEND_BIT != 0;
        if is_send {
            if let Some(buf) = comp.take_buffers().and_then(|mut b| b.pop()) {
                self.spare.push(buf);
            }
        }
        let slot = (token & 0xffff_ffff) as u32;
        // A connection already finished finds nothing here (quirk c).
        let Some(mut c) = self.slots.take(slot, generation_of(token, 32)) else {
            return;
        };
        let outcome = if is_send {
            c.send = None;
            self.on_sent(&mut c, slot, comp.result(), now)
        } else {
            if !comp.more() {
                c.recv = None;
            }
            self.on_recv(&mut c, slot, comp, now)
        };
        self.conclude(slot, c, outcome, now);
    }

    fn on_sent(
        &mut self,
        c: &mut Conn,
        slot: u32,
        result: io::Result<u32>,
        now: Instant,
    ) -> Outcome {
        let n = match result {
            Ok(n) => n as usize,
            Err(e) => return Outcome::Failed(ErrorKind::from_io(&e)),
        };
        self.t.stats.bytes_sent += n as u64;
        if n < c.send_len {
            // Quirk d: the ring stopped short on an error it did not report.
            return Outcome::Failed(ErrorKind::ConnReset);
        }
        if c.connecting {
            c.connecting = false;
            self.t.connected(c.connect_started, now);
        }
        if c.eof {
            return self.on_eof(c, now);
        }
        if c.burst_due {
            return self.next_burst(c, slot, now);
        }
        self.progress(c, slot, now);
        Outcome::Keep
    }

    fn on_recv(&mut self, c: &mut Conn, slot: u32, comp: &Completion, now: Instant) -> Outcome {
        let n = match comp.result() {
            Ok(n) => n,
            Err(e) => return Outcome::Failed(ErrorKind::from_io(&e)),
        };
        if n == 0 {
            if c.send.is_some() {
                // Quirk b: what the send learns decides.
                c.eof = true;
                return Outcome::Keep;
            }
            return self.on_eof(c, now);
        }
        self.t.stats.bytes_received += u64::from(n);
        let Some(data) = self.ring.received(comp) else {
            return Outcome::Failed(ErrorKind::Other);
        };
        // Framed where the bytes lie, in the ring's buffer (quirk e); the fields
        // used are disjoint from the ring that lends them.
        match frame(&mut self.t, &mut self.heads, c, data, now) {
            Ok(Outcome::Keep) => {}
            Ok(other) => return other,
            Err(kind) => return Outcome::Failed(kind),
        }
        if c.burst_due && c.send.is_none() {
            return self.next_burst(c, slot, now);
        }
        self.progress(c, slot, now);
        Outcome::Keep
    }

    /// The server closed the connection.
    fn on_eof(&mut self, c: &mut Conn, now: Instant) -> Outcome {
        match c.reader.eof() {
            Ok(Some(reply)) => {
                c.outstanding = c.outstanding.saturating_sub(1);
                self.t.reply(reply, c.burst_intended, now);
            }
            Ok(None) => {}
            Err(_) => return Outcome::Failed(ErrorKind::PrematureClose),
        }
        if c.outstanding > 0 {
            Outcome::Failed(ErrorKind::PrematureClose)
        } else {
            Outcome::Done
        }
    }

    /// Queues the next burst's send, or reports the connection done.
    fn next_burst(&mut self, c: &mut Conn, slot: u32, now: Instant) -> Outcome {
        c.burst_due = false;
        let calls = self.t.cfg.num_calls;
        let remaining = if calls == 0 {
            u32::MAX
        } else {
            calls.saturating_sub(c.calls_issued)
        };
        if remaining == 0 {
            return Outcome::Done;
        }
        let k = remaining.min(self.t.cfg.burst_length);
        c.calls_issued += k;
        c.outstanding += k;
        let len = k as usize * self.req_len;
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&self.burst_buf[..len]);
        let token = self.token(slot) | SEND_BIT;
        c.send = Some(self.ring.send(c.fd, buf, token));
        c.send_len = len;
        self.t.stats.requests += u64::from(k);
        self.progress(c, slot, now);
        Outcome::Keep
    }

    fn conclude(&mut self, slot: u32, c: Box<Conn>, outcome: Outcome, now: Instant) {
        match outcome {
            Outcome::Keep => self.slots.put(slot, c),
            Outcome::Done => {
                self.t.completed(c.conn_intended, now);
                self.retire(slot, &c);
            }
            Outcome::Failed(kind) => {
                self.t.stats.unanswered += u64::from(c.outstanding);
                self.t.fail(kind, c.burst_intended, now, c.connecting);
                self.retire(slot, &c);
                self.plan.backoff(now);
            }
        }
    }

    /// The connection is counted and over: cancel what it has on the ring and
    /// close it right behind the cancels (quirk c).
    fn retire(&mut self, slot: u32, c: &Conn) {
        self.t.closed();
        if let Some(op) = c.recv {
            self.ring.cancel(op, IGNORE);
        }
        if let Some(op) = c.send {
            self.ring.cancel(op, IGNORE);
        }
        self.ring.close(c.fd, IGNORE);
        self.slots.release(slot);
    }
}

/// Frames received bytes into replies exactly as the readiness loop does: any
/// number of replies in one buffer, a reply across buffers (the reader keeps its
/// place), counted against the burst's intended start.
fn frame(
    t: &mut Tally<'_>,
    heads: &mut HeadParser,
    c: &mut Conn,
    mut data: &[u8],
    now: Instant,
) -> Result<Outcome, ErrorKind> {
    while !data.is_empty() {
        let fed = c
            .reader
            .feed(data, heads)
            .map_err(|_| ErrorKind::BadReply)?;
        data = &data[fed.used..];
        match fed.reply {
            Some(reply) => {
                if c.outstanding == 0 {
                    // A reply nobody asked for (quirk e).
                    return Err(ErrorKind::BadReply);
                }
                c.outstanding -= 1;
                t.reply(reply, c.burst_intended, now);
                if !reply.keep_alive {
                    // The server ends the connection here; pipelined calls after
                    // this reply will not be answered.
                    t.stats.unanswered += u64::from(c.outstanding);
                    c.outstanding = 0;
                    return Ok(Outcome::Done);
                }
                if c.outstanding == 0 {
                    // The next burst is due from now, as in the readiness loop.
                    c.burst_due = true;
                    c.burst_intended = now;
                }
            }
            None if fed.used == 0 => break,
            None => {}
        }
    }
    Ok(Outcome::Keep)
}
