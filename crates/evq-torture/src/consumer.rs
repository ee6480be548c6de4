//! A consumer: one thread, one queue, its own channels. It reads a channel only
//! when an event — or the state `declare_interest` returns, the paper's race-free
//! statemask — says so, checks every event and record against what it registered,
//! and churns its registrations from a seed (`churn.rs`).

use crate::channel::{self, ChannelKind, ReadEnd, WriteEnd};
use crate::ledger::{Failure, Ledger, Step, Trace, DELAY_BOUND_MS};
use crate::shared::Shared;
use evq::{
    BackendKind, Capabilities, Event, EventQueue, Events, Interest, Mode, Options, Readiness,
    TimerId, NOTIFY_TOKEN,
};
use std::collections::HashMap;
use std::io;
use std::net::TcpListener;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Timer tokens carry this bit; listener tokens `LISTENER_BIT`; channel tokens
/// neither (they count up from 1).
pub(crate) const TIMER_BIT: u64 = 1 << 62;
pub(crate) const LISTENER_BIT: u64 = 1 << 61;

/// How one consumer runs.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    pub id: usize,
    pub backend: BackendKind,
    /// `shared.slots[first_slot..first_slot + channels]` are this consumer's.
    pub first_slot: usize,
    pub channels: usize,
    pub seed: u64,
    /// Chance per round of one churn operation.
    pub churn: f64,
    /// Register the shared listeners (wake-one where the backend has it).
    pub listeners: bool,
}

/// Where a channel's registration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Registered and able to produce events.
    Armed,
    /// A oneshot registration that delivered its event, not yet declared again.
    Spent,
    /// Revoked on purpose until round `until`.
    Revoked { until: u64 },
}

pub(crate) struct Chan {
    pub slot: usize,
    pub reader: ReadEnd,
    pub token: u64,
    pub mode: Mode,
    pub watch: Watch,
    /// Records written before this were written while the channel was not watched
    /// (revoked, spent, or before a new queue): their delay says nothing.
    pub watched_since_ns: u64,
}

#[derive(Clone, Copy)]
pub(crate) struct TokenInfo {
    pub chan: usize,
    pub fd: RawFd,
    pub live: bool,
}

pub(crate) struct PendingTimer {
    pub id: TimerId,
    pub deadline: Instant,
}

/// What a consumer hands back at the end.
pub struct Outcome {
    pub ledger: Ledger,
    pub failures: Vec<Failure>,
}

pub(crate) struct Consumer<'a> {
    pub cfg: ConsumerConfig,
    pub shared: &'a Shared,
    pub caps: Capabilities,
    pub queue: EventQueue,
    pub rng: fastrand::Rng,
    pub chans: Vec<Chan>,
    pub tokens: HashMap<u64, TokenInfo>,
    pub next_token: u64,
    pub timers: HashMap<u64, PendingTimer>,
    pub listener: TcpListener,
    pub kind_cursor: usize,
    /// False once the backend refused an eventfd (RT signals cannot watch one).
    pub eventfd_ok: bool,
    pub ledger: Ledger,
    pub failures: Vec<Failure>,
    pub trace: Trace,
    pub round: u64,
    /// The last checkpoint this consumer acknowledged.
    pub seen_checkpoint: u64,
    /// Consecutive waits without a channel event since the current checkpoint began.
    pub quiet_waits: u32,
    pub checkpoint_began: Option<std::time::Instant>,
    /// Channel events in the last batch.
    pub channel_events: usize,
    /// Write ends of eventfds whose number was reused behind the queue's back: the
    /// old file lives on (as it would in another thread or process) and keeps
    /// being written, until round `.1` — a steady source of stale events.
    pub ghosts: Vec<(WriteEnd, u64)>,
    /// When the last NOTIFY event arrived (for the report of a missed one).
    pub last_notify: Option<Instant>,
}

/// Batch capacities a consumer picks from: 1 … 1,024.
const BATCHES: [usize; 7] = [1, 2, 3, 7, 64, 257, 1024];

impl<'a> Consumer<'a> {
    /// A consumer with its queue and its channels open and registered.
    pub fn new(cfg: ConsumerConfig, shared: &'a Shared) -> io::Result<Consumer<'a>> {
        let queue = EventQueue::with_backend(cfg.backend)?;
        *shared.wakeups[cfg.id]
            .notifier
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(queue.notifier());
        let mut c = Consumer {
            caps: cfg.backend.capabilities(),
            rng: fastrand::Rng::with_seed(cfg.seed),
            queue,
            chans: Vec::new(),
            tokens: HashMap::new(),
            next_token: 1,
            timers: HashMap::new(),
            listener: TcpListener::bind("127.0.0.1:0")?,
            kind_cursor: cfg.id,
            eventfd_ok: true,
            ledger: Ledger::default(),
            failures: Vec::new(),
            trace: Trace::default(),
            round: 0,
            seen_checkpoint: 0,
            quiet_waits: 0,
            checkpoint_began: None,
            channel_events: 0,
            last_notify: None,
            ghosts: Vec::new(),
            shared,
            cfg,
        };
        for i in 0..c.cfg.channels {
            let slot = c.cfg.first_slot + i;
            let reader = c.open_channel(slot)?;
            c.chans.push(Chan {
                slot,
                reader,
                token: 0,
                mode: Mode::Level,
                watch: Watch::Armed,
                watched_since_ns: 0,
            });
            c.register(i, None)?;
        }
        c.register_listeners()?;
        Ok(c)
    }

    pub fn step(&mut self, op: &'static str, fd: RawFd, token: u64, arg: u64) {
        self.trace.push(Step {
            at_ns: self.shared.now_ns(),
            op,
            fd,
            token,
            arg,
        });
    }

    pub fn fail(&mut self, kind: &str, fd: RawFd, token: u64, detail: String) {
        if self.failures.len() < 8 {
            self.failures.push(Failure {
                kind: kind.to_string(),
                consumer: self.cfg.id,
                at_ms: self.shared.now_ns() as f64 / 1e6,
                fd,
                token,
                detail,
                trace: self.trace.about(fd, token),
            });
        }
    }

    /// Opens a new channel instance for `slot`, hands its write end to the slot's
    /// producer, and returns the read end. Returns the old write end through
    /// `self` only in `churn.rs` (`swap_writer`).
    pub fn open_channel(&mut self, slot: usize) -> io::Result<ReadEnd> {
        let (reader, old) = self.swap_writer(slot)?;
        drop(old);
        Ok(reader)
    }

    /// Opens a new channel instance for `slot` and puts its write end in the slot;
    /// returns the new read end and the write end it replaced.
    pub fn swap_writer(&mut self, slot: usize) -> io::Result<(ReadEnd, Option<WriteEnd>)> {
        let kind = self.next_kind();
        let (r, w) = channel::open(kind, &self.listener)?;
        let uid = self.shared.new_uid();
        let mut guard = self.shared.slots[slot]
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let old = guard.replace(WriteEnd::new(w, kind, uid));
        Ok((ReadEnd::new(r, kind, uid), old))
    }

    pub fn next_kind(&mut self) -> ChannelKind {
        loop {
            let kind = ChannelKind::ALL[self.kind_cursor % ChannelKind::ALL.len()];
            self.kind_cursor += 1;
            if kind != ChannelKind::Eventfd || self.eventfd_ok {
                return kind;
            }
        }
    }

    /// A mode this backend has, at random.
    pub fn random_mode(&mut self) -> Mode {
        loop {
            let m = [Mode::Level, Mode::Event, Mode::Oneshot][self.rng.usize(0..3)];
            let ok = match m {
                Mode::Level => self.caps.level,
                Mode::Event => self.caps.event,
                Mode::Oneshot => self.caps.oneshot,
            };
            if ok {
                return m;
            }
        }
    }

    /// Retires a channel token: any later event carrying it is stale.
    pub fn retire(&mut self, token: u64) {
        if let Some(t) = self.tokens.get_mut(&token) {
            t.live = false;
        }
    }

    /// Declares interest in channel `i` under a new token (`mode`, or one at random)
    /// and reads at once if the returned state says there is data: the paper's
    /// answer to the accept-then-register race, and what the ledger relies on.
    pub fn register(&mut self, i: usize, mode: Option<Mode>) -> io::Result<()> {
        let mode = mode.unwrap_or_else(|| self.random_mode());
        let old = self.chans[i].token;
        self.retire(old);
        let token = self.next_token;
        self.next_token += 1;
        let fd = self.chans[i].reader.raw_fd();
        let declared =
            self.queue
                .declare_interest(fd, Interest::READ, Options::new(token).mode(mode));
        let state = match declared {
            Ok(s) => s,
            Err(e)
                if e.raw_os_error() == Some(libc::EPERM)
                    && self.chans[i].reader.kind() == ChannelKind::Eventfd =>
            {
                // RT signals cannot watch an eventfd (it has no fasync): use
                // streams only from now on, and give this slot one.
                self.step("eventfd-refused", fd, token, 0);
                self.eventfd_ok = false;
                let slot = self.chans[i].slot;
                let (reader, old) = self.swap_writer(slot)?;
                drop(old);
                self.chans[i].reader = reader;
                return self.register(i, Some(mode));
            }
            Err(e) => return Err(e),
        };
        self.tokens.insert(
            token,
            TokenInfo {
                chan: i,
                fd,
                live: true,
            },
        );
        let c = &mut self.chans[i];
        // A registration that replaces an armed one of the same channel watched it
        // all along: its records keep counting their delay from when they were
        // written, so a modify cannot hide an event that never came.
        let continuous = c.watch == Watch::Armed && old != 0;
        c.token = token;
        c.mode = mode;
        c.watch = Watch::Armed;
        if !continuous {
            c.watched_since_ns = self.shared.now_ns();
        }
        self.step("declare", fd, token, mode as u64);
        if state.intersects(Readiness::READ | Readiness::HUP) {
            // The kernel may report this data too (epoll polls at ADD): the read
            // that event leads to then finds nothing, which the ledger calls
            // spurious, not wrong.
            self.read_channel(i, None, "state-read")?;
        }
        Ok(())
    }

    /// Reads channel `i` (until `EAGAIN`, or `limit` records), checking each record.
    pub fn read_channel(
        &mut self,
        i: usize,
        limit: Option<u64>,
        why: &'static str,
    ) -> io::Result<channel::Drained> {
        let now = self.shared.now_ns();
        let c = &mut self.chans[i];
        let (uid, since, token, fd) = (
            c.reader.uid(),
            c.watched_since_ns,
            c.token,
            c.reader.raw_fd(),
        );
        let mut expected = c.reader.consumed;
        let mut problems: Vec<(&'static str, String)> = Vec::new();
        let mut max_delay = 0u64;
        let mut late = 0u64;
        let drained = c.reader.read(limit, |r| {
            if r.uid != uid {
                problems.push((
                    "misdelivered",
                    format!("record of channel {} in channel {uid}", r.uid),
                ));
            } else if r.seq as u64 != expected {
                let kind = if (r.seq as u64) < expected {
                    "duplicated"
                } else {
                    "misdelivered"
                };
                problems.push((
                    kind,
                    format!("seq {} where {expected} was due (channel {uid})", r.seq),
                ));
            }
            expected = r.seq as u64 + 1;
            if r.written_ns >= since {
                let delay = now.saturating_sub(r.written_ns);
                max_delay = max_delay.max(delay);
                if delay > DELAY_BOUND_MS * 1_000_000 {
                    late += 1;
                }
            }
        });
        let drained = match drained {
            Ok(d) => d,
            Err(e) => {
                self.fail("error", fd, token, format!("read: {e}"));
                return Err(e);
            }
        };
        self.ledger.records += drained.taken;
        self.ledger.max_delay_ns = self.ledger.max_delay_ns.max(max_delay);
        if late > 0 {
            self.ledger.late += late;
            self.fail(
                "late",
                fd,
                token,
                format!(
                    "{late} records waited over {DELAY_BOUND_MS} ms (worst {} ms)",
                    max_delay / 1_000_000
                ),
            );
        }
        for (kind, detail) in problems {
            match kind {
                "duplicated" => self.ledger.duplicated += 1,
                _ => self.ledger.misdelivered += 1,
            }
            self.fail(kind, fd, token, detail);
        }
        self.step(why, fd, token, drained.taken);
        Ok(drained)
    }

    /// Runs until the case tells it to finish.
    pub fn run(mut self) -> Outcome {
        let mut batches: Vec<Events> = BATCHES.iter().map(|&n| Events::with_capacity(n)).collect();
        let result = (|| -> io::Result<()> {
            while !self.shared.finish.load(Ordering::Acquire) {
                self.round += 1;
                let draining = self.shared.stop_churn.load(Ordering::Acquire);
                let checkpoint = self.shared.checkpoint.load(Ordering::Acquire);
                let checking = checkpoint > self.seen_checkpoint;
                if draining {
                    self.settle()?;
                } else if !checking {
                    if self.rng.f64() < self.cfg.churn {
                        self.churn()?;
                    }
                    self.revive_due()?;
                    self.haunt();
                }
                let b = self.rng.usize(0..batches.len());
                let timeout = if draining {
                    Some(Duration::from_millis(20))
                } else if checking {
                    Some(Duration::from_millis(5))
                } else {
                    match self.rng.u8(0..8) {
                        0 => None,
                        1 | 2 => Some(Duration::ZERO),
                        3..=5 => Some(Duration::from_millis(1)),
                        _ => Some(Duration::from_millis(10)),
                    }
                };
                let events = &mut batches[b];
                self.queue.get_next_event(events, timeout)?;
                let got: Vec<Event> = events.iter().copied().collect();
                self.handle(&got, checking || draining)?;
                if checking && !draining {
                    // A full batch may have left ready channels behind it (a batch of
                    // one filled by an expired timer, a listener, a notification), so
                    // it says nothing about whether the queue went quiet.
                    let batch_full = got.len() == events.capacity();
                    self.checkpoint_step(checkpoint, batch_full);
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.fail("error", -1, 0, format!("consumer {}: {e}", self.cfg.id));
        }
        self.finish()
    }

    /// A quiet checkpoint: the producers are still and have flushed, so once three
    /// waits in a row bring no channel event and leave room in their batch (a full
    /// batch of timers or listener events does not show the queue empty — under a
    /// starved CPU many timers expire at once and fill batches of one, which once
    /// passed here for three quiet waits), every armed channel must have been
    /// read to the end — data left on one is an event that was never delivered,
    /// whatever the mode (a spent oneshot or a revoked registration may keep its
    /// data; an armed one may not).
    fn checkpoint_step(&mut self, checkpoint: u64, batch_full: bool) {
        let began = *self.checkpoint_began.get_or_insert_with(Instant::now);
        if self.channel_events == 0 && !batch_full {
            self.quiet_waits += 1;
        } else {
            self.quiet_waits = 0;
        }
        let timed_out = began.elapsed() > Duration::from_secs(5);
        if self.quiet_waits < 3 && !timed_out {
            return;
        }
        if timed_out {
            self.fail(
                "error",
                -1,
                0,
                "checkpoint never went quiet: channel events for 5 s with producers still".into(),
            );
        }
        for (i, n) in self.unread() {
            if n > 0 && self.chans[i].watch == Watch::Armed {
                self.ledger.lost += n;
                let (fd, token) = (self.chans[i].reader.raw_fd(), self.chans[i].token);
                let kernel = describe_fd(fd);
                self.fail(
                    "lost",
                    fd,
                    token,
                    format!(
                        "checkpoint {checkpoint}: {n} records unread on an armed {:?} registration ({:?}) after 3 quiet waits; {kernel}; queue {:?}",
                        self.chans[i].mode,
                        self.chans[i].reader.kind(),
                        self.queue.stats()
                    ),
                );
            }
        }
        self.ledger.checkpoints += 1;
        self.quiet_waits = 0;
        self.checkpoint_began = None;
        self.seen_checkpoint = checkpoint;
        self.shared.checkpoint_acks[self.cfg.id].store(checkpoint, Ordering::Release);
    }

    /// At the end: if this queue's last notification was not seen in the time the
    /// case gave it, say whether one zero-timeout wait finds it now (delivered, only
    /// late) or not (lost), with what the queue and the thread did meanwhile.
    pub(crate) fn last_notification_check(&mut self) {
        let w = &self.shared.wakeups[self.cfg.id];
        let (sent, acked) = (
            w.sent.load(Ordering::Acquire),
            w.acked.load(Ordering::Acquire),
        );
        if acked >= sent {
            return;
        }
        let since = self.last_notify.map_or("never".to_string(), |t| {
            format!("{} ms ago", t.elapsed().as_millis())
        });
        let mut events = Events::with_capacity(1024);
        let now = match self.queue.get_next_event(&mut events, Some(Duration::ZERO)) {
            Ok(_) if events.iter().any(|e| e.token() == NOTIFY_TOKEN) => {
                "finds it (late, not lost)".to_string()
            }
            Ok(n) => format!("finds {n} other event(s) and no NOTIFY"),
            Err(e) => format!("fails: {e}"),
        };
        self.fail(
            "lost",
            -1,
            NOTIFY_TOKEN,
            format!(
                "consumer {}: last notification not seen: sent {sent}, acked {acked}; last NOTIFY {since}; a zero-timeout wait now {now}; queue {:?}",
                self.cfg.id,
                self.queue.stats()
            ),
        );
    }

    /// One batch: every event checked against what is registered, then handled.
    fn handle(&mut self, events: &[Event], settling: bool) -> io::Result<()> {
        self.channel_events = 0;
        self.ledger.events += events.len() as u64;
        self.shared
            .delivered
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        let mut seen: Vec<u64> = Vec::with_capacity(events.len());
        for e in events {
            if seen.contains(&e.token()) {
                self.ledger.duplicated += 1;
                self.fail(
                    "duplicated",
                    e.fd(),
                    e.token(),
                    "one token twice in one batch".into(),
                );
                continue;
            }
            seen.push(e.token());
            if e.token() == NOTIFY_TOKEN {
                let w = &self.shared.wakeups[self.cfg.id];
                w.acked
                    .fetch_max(w.sent.load(Ordering::Acquire), Ordering::AcqRel);
                self.ledger.notifies += 1;
                self.last_notify = Some(Instant::now());
            } else if e.token() & TIMER_BIT != 0 {
                self.on_timer(e);
            } else if e.token() & LISTENER_BIT != 0 {
                self.on_listener(e)?;
            } else {
                self.channel_events += 1;
                self.on_channel(e, settling)?;
            }
        }
        Ok(())
    }

    fn on_channel(&mut self, e: &Event, settling: bool) -> io::Result<()> {
        let Some(info) = self.tokens.get(&e.token()).copied() else {
            self.ledger.stale += 1;
            self.fail(
                "stale",
                e.fd(),
                e.token(),
                "a token this consumer never issued".into(),
            );
            return Ok(());
        };
        if !info.live {
            self.ledger.stale += 1;
            self.fail(
                "stale",
                e.fd(),
                e.token(),
                format!("retired token, event {:?}", e.readiness()),
            );
            return Ok(());
        }
        if e.fd() != info.fd {
            self.ledger.misdelivered += 1;
            self.fail(
                "misdelivered",
                e.fd(),
                e.token(),
                format!("token registered for fd {}", info.fd),
            );
            return Ok(());
        }
        let i = info.chan;
        if self.chans[i].watch != Watch::Armed {
            self.ledger.stale += 1;
            self.fail(
                "stale",
                e.fd(),
                e.token(),
                format!("event for a {:?} registration", self.chans[i].watch),
            );
            return Ok(());
        }
        self.step("event", e.fd(), e.token(), e.readiness().bits() as u64);
        // Level mode may leave data behind (it is reported again); the others must
        // read to EAGAIN, as the paper says.
        // (Not while settling: a checkpoint counts on every read going to EAGAIN.)
        let limit = match self.chans[i].mode {
            Mode::Level if !settling && self.rng.u8(0..5) == 0 => Some(self.rng.u64(1..4)),
            _ => None,
        };
        let d = self.read_channel(i, limit, "read")?;
        if d.taken == 0 && !d.eof {
            self.ledger.spurious += 1;
            if e.readiness().contains(Readiness::READ) && self.caps.current_state_masks {
                // Masks that are the state at dequeue, and only this consumer
                // reading this descriptor: READ with nothing to read is the mark of
                // an event that belongs to another file (a stale one). A backend
                // whose masks are the wake-up's (kmod-ring) may report an arrival
                // that an earlier read already took: only spurious there.
                self.ledger.wrong_state += 1;
                self.fail(
                    "wrong-state",
                    e.fd(),
                    e.token(),
                    format!("event said {:?}; the descriptor had nothing", e.readiness()),
                );
            }
        }
        if self.chans[i].mode == Mode::Oneshot {
            self.chans[i].watch = Watch::Spent;
            if !settling && self.rng.u8(0..5) != 0 {
                self.register(i, Some(Mode::Oneshot))?;
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, e: &Event) {
        match self.timers.remove(&e.token()) {
            None => {
                self.ledger.stale += 1;
                self.fail(
                    "stale",
                    -1,
                    e.token(),
                    "a cancelled or already fired timer".into(),
                );
            }
            Some(t) => {
                self.ledger.timers_fired += 1;
                if Instant::now() < t.deadline {
                    self.ledger.timers_early += 1;
                    self.fail(
                        "early-timer",
                        -1,
                        e.token(),
                        "fired before its deadline".into(),
                    );
                }
            }
        }
    }

    fn on_listener(&mut self, e: &Event) -> io::Result<()> {
        self.ledger.listener_events += 1;
        let li = (e.token() & !LISTENER_BIT) as usize;
        if li >= self.shared.listeners.len() {
            self.ledger.stale += 1;
            self.fail("stale", e.fd(), e.token(), "no such listener".into());
            return Ok(());
        }
        self.accept_all(li)
    }

    /// Accepts every pending connection of shared listener `li` and records its id.
    fn accept_all(&mut self, li: usize) -> io::Result<()> {
        let shared = self.shared;
        let listener = &shared.listeners[li];
        // Accept until EAGAIN (event mode needs it; level mode is fine with it).
        loop {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    use std::io::Read;
                    conn.set_nonblocking(false)?;
                    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
                    let mut id = [0u8; 4];
                    match conn.read_exact(&mut id) {
                        Ok(()) => {
                            let id = u32::from_le_bytes(id) as usize;
                            if let Some(n) = self.shared.accepted.get(id) {
                                n.fetch_add(1, Ordering::AcqRel);
                            }
                            self.ledger.accepted += 1;
                        }
                        Err(err) => self.fail(
                            "error",
                            -1,
                            LISTENER_BIT | li as u64,
                            format!("accepted connection said nothing: {err}"),
                        ),
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) if err.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(err) => return Err(err),
            }
        }
    }

    /// Registers the shared listeners if this consumer takes part in accepting.
    pub fn register_listeners(&mut self) -> io::Result<()> {
        if !self.cfg.listeners {
            return Ok(());
        }
        let mode = if self.caps.event {
            Mode::Event
        } else {
            Mode::Level
        };
        let shared = self.shared;
        for (i, l) in shared.listeners.iter().enumerate() {
            use std::os::fd::AsRawFd;
            let token = LISTENER_BIT | i as u64;
            let opts = Options::new(token).mode(mode).wake_one(self.caps.wake_one);
            let state = self
                .queue
                .declare_interest(l.as_raw_fd(), Interest::READ, opts)?;
            if state.contains(Readiness::READ) {
                self.accept_all(i)?;
            }
        }
        Ok(())
    }
}

/// What the kernel says about a descriptor a failure concerns: its poll state, and
/// the signal-driven I/O settings the RT-signal backends depend on.
fn describe_fd(fd: RawFd) -> String {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one live pollfd; fcntl(2) with integer arguments.
    let (polled, flags, sig) = unsafe {
        (
            libc::poll(&mut pfd, 1, 0),
            libc::fcntl(fd, libc::F_GETFL),
            libc::fcntl(fd, 11 /* F_GETSIG */),
        )
    };
    let sigq = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("SigQ"))
                .map(str::to_string)
        })
        .unwrap_or_default();
    format!(
        "poll {polled} revents {:#x}, O_ASYNC {}, F_GETSIG {sig}, {sigq}",
        pfd.revents,
        flags >= 0 && flags & libc::O_ASYNC != 0
    )
}
