//! `evq serve --io completion`: the server on [`evq::completion`] — the kernel
//! accepts, receives and sends; the loop only parses and answers.
//!
//! One [`CompletionRing`] per thread and one `SO_REUSEPORT` listener per thread
//! (the kernel spreads connections). Each connection has one multishot recv
//! (provided buffers: an idle connection holds no receive buffer, only its small
//! state) and at most one send in flight; replies produced while a send is in
//! flight are appended and sent in one go when it completes, so pipelined requests
//! cost one send per burst. Requests go through the same [`handle_request`] as the
//! readiness server, so both answer byte for byte alike: the fixed reply, or files
//! beneath `--root` (up to 16 KiB copied into the reply with its head; larger ones
//! read in 64 KiB chunks into the send buffer, as the readiness server does by
//! default, so a file changed later cannot alter bytes already queued).
//!
//! # Quirks
//!
//! a) **A multishot recv holds the socket**: closing the descriptor does not end
//!    it. A connection is closed by cancelling its recv first; `close` goes to the
//!    ring only after the recv's final completion and any send in flight.
//! b) **Descriptor numbers come back** while completions for the old connection may
//!    still be queued: tokens carry `(generation << 32) | fd`, and a completion
//!    whose generation is not the slot's is dropped.
//! c) **A multishot recv keeps receiving while the output is stuck.** A client that
//!    pipelines requests and never reads would grow the input without bound, so a
//!    connection whose unanswered input passes [`INPUT_PAUSE`] has its recv
//!    cancelled (the bytes wait in the socket, where TCP's window pushes back) and
//!    re-armed once its output has drained. Replies wait likewise: no more than
//!    [`OUTPUT_HOLD`] bytes of replies are made ahead of the socket.
//! d) **Timeouts are a sweep**, not a timer per connection: every
//!    `min(header, idle) / 8` (50 ms to 1 s) the thread walks its connections and
//!    closes those past their deadline — a header started and not finished within
//!    `--header-timeout`, nothing asked within `--idle-timeout`, or a reply the
//!    client has not taken within `--idle-timeout`. The walk costs a few
//!    nanoseconds a connection per sweep (10,000 idle ones: ~20 µs a second);
//!    a timer per connection would cost a ring request each time a deadline moves.
//! e) **An idle connection holds no buffer.** Its state is a recv's id, a
//!    deadline and a few flags; the input, the replies being made and the file
//!    being sent live in a separate record taken from a pool of spares when a
//!    request arrives and given back when its replies are out.
//! f) **Out of descriptors, a multishot accept ends with `EMFILE`**, and one armed
//!    again at once fails again: a spin. The accept waits instead (the connection
//!    stays in the kernel's backlog) until a connection closes or a sweep passes,
//!    and an idle keep-alive connection is closed to make room, in the readiness
//!    server's order (`worker/reclaim.rs`): those answered once before those
//!    answered several times (a keep-alive client in use, whose next request
//!    may be on its way), least recently active first; never one not answered
//!    yet (its first request may be on the way), nor a client in use that was
//!    active within the last second. Here accepts complete in batches before
//!    their requests are received, so at the limit the table can hold nothing
//!    but unanswered newcomers and the busy clients: closing a busy one lost a
//!    request in flight (the fault table's live clients), where waiting a
//!    moment for a newcomer to be answered (and become the one to close) loses
//!    nothing.
//! g) **A graceful stop** (SIGINT/SIGTERM) cancels the accept (the listening
//!    socket closes when the cancel completes, so a new client is refused, not
//!    left in a backlog nobody reads), gives idle connections a second (a
//!    request on its way is answered with `Connection: close` rather than met
//!    by a closed socket), answers what is under way with `Connection: close`,
//!    and ends the thread when the last connection has closed or `--grace` is
//!    over.
//! h) **Overload** (`--overload pulse`, the default; `completion_pulse.rs`): a
//!    multishot accept empties the listen queue at every entry to the kernel,
//!    so the queue stands in the server, as new connections whose first
//!    request waits. When it stands (CoDel's test on their wait from accept to
//!    first answer) and more wait than the thread answers in
//!    `--queue-target`, the accept is cancelled and the listener shut
//!    (`shutdown`): the kernel resets new clients at once, at no cost here,
//!    while the batch is served; it listens again before the batch's last two
//!    and pulses end when arrivals slow. Within a long batch of completions
//!    the loop has the kernel take up new connections every few
//!    milliseconds (`run_kernel_work`, the ring's quirk p): left to the next
//!    wait, up to 765 queued unseen in the listen queue at 3× capacity, and
//!    6–36% of the clients the pulse refused learned it after 10–140 ms
//!    (after: none over 12 ms). `--overload none` serves everyone however
//!    late. Not here (refused with a clear error): `--overload
//!    seed001`, `gate`, `codel`, `--deadline`, load shedding (`--shed`), the
//!    stats path and the status listener.
//! i) **A reset can be missed** (`evq::completion`'s quirk on multishot recv):
//!    a client that sends part of a request and resets at once can leave its
//!    recv armed on a dead socket with no completion to end it, holding a
//!    descriptor until the header timeout. Bytes that leave a request
//!    unfinished, with nothing being sent, are followed by one peek
//!    (`evq_os::socket::has_failed`); a reset closes the connection. A
//!    request that arrives whole, as nearly every one does, costs nothing.

use crate::buffers::BufferPool;
use crate::completion_pulse::{Pulse, PulsedListener};
use crate::date::DateCache;
use crate::overload::{self, OverloadConfig, OverloadPolicy};
use crate::request::{handle_request, Body, Content, FileRoot, Outcome, Scratch, Site};
use crate::{sys, ServeConfig};
use evq::completion::{CompletionRing, Completions, OpId, OpKind};
use evq_os::memory::Releaser;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Unanswered input, bytes, past which a connection's recv is paused (quirk c).
pub const INPUT_PAUSE: usize = 64 * 1024;
/// Replies made ahead of the socket, bytes, past which answering waits (quirk c).
pub const OUTPUT_HOLD: usize = 64 * 1024;
/// A keep-alive client in use (several requests answered) that was active this
/// recently is not closed to make room (quirk f).
const RECENTLY_ACTIVE: Duration = Duration::from_secs(1);
/// Completions taken at a time while `--overload pulse` is engaged (quirk h):
/// with DEFER_TASKRUN the kernel accepts only while the loop waits in it, so
/// a batch's work is as long as new clients go unseen.
const PULSE_BATCH: usize = 16;
/// How often `--overload pulse` looks again within a batch of completions
/// (quirk h).
const PULSE_LOOK: Duration = Duration::from_millis(1);
/// How long a batch may go without the kernel taking up new connections
/// while the pulse is not engaged (quirk h; the ring's quirk p): under the
/// 10 ms in which a refusal counts as fast, and longer than a batch takes
/// below capacity, so a server that is keeping up makes no extra call.
const KERNEL_LOOK: Duration = Duration::from_millis(4);
/// A file body is read into the send buffer this much at a time.
const FILE_CHUNK: usize = 64 * 1024;

/// How `evq serve` does its I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum IoModel {
    /// Readiness events from an evq backend, then `read`/`write` system calls.
    #[default]
    Readiness,
    /// io_uring completions (`evq::completion`): the kernel does the I/O.
    Completion,
}

/// What a completion server did, summed over its threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompletionServeReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Requests answered.
    pub requests: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// Receives re-armed after the buffer ring ran dry.
    pub enobufs_rearms: u64,
    /// Connections closed by a timeout (header, idle or a reply not taken).
    pub timed_out: u64,
    /// Receives paused because the client sent far ahead of its replies.
    pub paused: u64,
    /// Accepts that failed for want of a descriptor (`EMFILE`/`ENFILE`).
    pub fd_exhausted: u64,
    /// Idle connections closed to make room for a new one.
    pub reclaimed: u64,
    /// Connections whose bytes left a request unfinished and that a peek then
    /// found reset, closed at once (quirk i).
    pub resets_peeked: u64,
    /// Times `--overload pulse` stopped listening (quirk h).
    pub pulses: u64,
    /// Microseconds spent not listening.
    pub not_listening_us: u64,
}

impl std::fmt::Display for CompletionServeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "io: completion; accepted {}; requests {}; io_uring_enter calls {} ({:.3} per request); ENOBUFS re-arms {}; timed out {}; receives paused {}; out of descriptors {}; idle closed for room {}; resets peeked {}; pulses {} (not listening {:.3} s)",
            self.accepted,
            self.requests,
            self.enters,
            self.enters as f64 / self.requests.max(1) as f64,
            self.enobufs_rearms,
            self.timed_out,
            self.paused,
            self.fd_exhausted,
            self.reclaimed,
            self.resets_peeked,
            self.pulses,
            self.not_listening_us as f64 / 1e6
        )
    }
}

impl CompletionServeReport {
    /// The counters as one JSON object (`evq serve --io completion --json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    fn add(&mut self, r: &CompletionServeReport) {
        self.accepted += r.accepted;
        self.requests += r.requests;
        self.enters += r.enters;
        self.enobufs_rearms += r.enobufs_rearms;
        self.timed_out += r.timed_out;
        self.paused += r.paused;
        self.fd_exhausted += r.fd_exhausted;
        self.reclaimed += r.reclaimed;
        self.resets_peeked += r.resets_peeked;
        self.pulses += r.pulses;
        self.not_listening_us += r.not_listening_us;
    }
}

const ACCEPT: u64 = u64::MAX;
/// Token of our own cancels, whose completions need nothing done.
const CANCEL: u64 = u64::MAX - 1;

/// The rest of a file body, read into the send buffer a chunk at a time.
struct FileBody {
    file: OwnedFd,
    offset: u64,
    left: u64,
}

/// A connection's buffers and work in progress: only while it has some (an idle
/// connection holds none; quirk e).
#[derive(Default)]
struct ConnIo {
    input: Vec<u8>,
    out: Vec<u8>,
    file: Option<FileBody>,
    /// The send in flight, while `sending` (cancelled when its client does not
    /// take it in time).
    send: Option<OpId>,
}

impl ConnIo {
    fn idle(&self) -> bool {
        self.input.is_empty() && self.out.is_empty() && self.file.is_none() && self.send.is_none()
    }
}

/// Spare [`ConnIo`]s kept for the next busy connection, at most.
const IO_POOL: usize = 256;
/// Spare send buffers kept with no connection open (each may be a file's
/// 64 KiB chunk).
const SEND_SPARES_IDLE: usize = 4;
/// Spares kept beyond the connections open (the pool follows them down).
const IO_FLOOR: usize = 16;
/// While spares outnumber the connections open, a spare keeps no buffer
/// larger than this (a file's 64 KiB chunks go back to the allocator).
const KEPT_BUFFER: usize = 16 * 1024;

struct Conn {
    recv: OpId,
    recv_live: bool,
    /// The recv was cancelled for backpressure (quirk c), not to close.
    paused: bool,
    sending: bool,
    close_after_send: bool,
    closing: bool,
    /// Its close went to the ring: the descriptor is the kernel's to close,
    /// and its number may belong to another file by the time the close's
    /// completion comes (never closed again here).
    close_issued: bool,
    /// When the connection is closed if nothing moves (quirk d).
    deadline: Instant,
    io: Option<Box<ConnIo>>,
    /// Requests answered (saturating). Between requests, an answered
    /// connection is an idle keep-alive one that may be closed to make room
    /// (quirk f); a fresh one may have its first request on the way, and is
    /// never closed for room.
    answered: u32,
    /// The thread's event count at this connection's last completion: an
    /// exact least-recently-active order (quirk f).
    last_active: u64,
    /// No request of it answered yet (quirk h: the pulse is told when one is,
    /// or when it closes first).
    awaiting_first: bool,
    /// The pulse's count of drains at its accept, and whether
    /// its first request has come in (quirk h).
    accept_entry: u32,
    request_seen: bool,
}

/// The two timeouts and the sweep's period (quirk d).
#[derive(Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
    sweep: Duration,
    /// How long a graceful stop lets replies in flight finish.
    grace: Duration,
}

impl Timeouts {
    fn of(cfg: &ServeConfig) -> Timeouts {
        let sweep = (cfg.header_timeout.min(cfg.idle_timeout) / 8)
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        Timeouts {
            header: cfg.header_timeout,
            idle: cfg.idle_timeout,
            sweep,
            grace: cfg.grace,
        }
    }
}

/// Binds the listeners (one per thread, `SO_REUSEPORT`) and returns them with the
/// address they got.
fn listeners(cfg: &ServeConfig) -> io::Result<(Vec<TcpListener>, SocketAddr)> {
    let mut addr = cfg.listen;
    let mut out = Vec::new();
    for _ in 0..cfg.threads.max(1) {
        let domain = socket2::Domain::for_address(addr);
        let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.bind(&addr.into())?;
        s.listen(cfg.backlog)?;
        let l: TcpListener = s.into();
        addr = l.local_addr()?;
        out.push(l);
    }
    Ok((out, addr))
}

fn refuse(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("--io completion does not support {what} yet"),
    )
}

/// Runs the completion server until SIGINT/SIGTERM; `on_listening` gets the bound
/// address first. Returns the summed counters.
///
/// # Errors
/// As [`CompletionServerHandle::start`], or the error that ended a thread.
pub fn serve_completion(
    cfg: &ServeConfig,
    on_listening: impl FnOnce(SocketAddr),
) -> io::Result<CompletionServeReport> {
    let server = CompletionServerHandle::spawn(cfg, true)?;
    on_listening(server.addr());
    server.wait()
}

/// A completion server running in this process (tests, the lab): its threads
/// (named `evq-serve-N`, as the readiness server's) serve until
/// [`CompletionServerHandle::request_stop`], which stops them gracefully as
/// SIGINT/SIGTERM stops [`serve_completion`] (quirk g). Dropped, it stops and
/// waits.
pub struct CompletionServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<io::Result<CompletionServeReport>>>,
}

impl CompletionServerHandle {
    /// Binds one listener per thread and starts serving.
    ///
    /// # Errors
    /// A setting the completion server does not have (`--shed`, a stats path, a
    /// status listener, `--overload` other than none or pulse, `--deadline`), a
    /// setting out of range, an unreadable `--root`, a kernel without the
    /// completion API, bind errors.
    pub fn start(cfg: &ServeConfig) -> io::Result<CompletionServerHandle> {
        CompletionServerHandle::spawn(cfg, false)
    }

    /// As `start`; with `signals`, SIGINT/SIGTERM stop it too.
    fn spawn(cfg: &ServeConfig, signals: bool) -> io::Result<CompletionServerHandle> {
        if cfg.shed.is_some() {
            return Err(refuse("--shed"));
        }
        if cfg.stats_path.is_some() {
            return Err(refuse("--stats-path"));
        }
        if cfg.status_listen.is_some() {
            return Err(refuse("--status-listen"));
        }
        match cfg.overload.policy {
            OverloadPolicy::None | OverloadPolicy::Pulse => {}
            other => {
                return Err(refuse(&format!(
                    "--overload {} (it takes none or pulse)",
                    other.name()
                )))
            }
        }
        if cfg.overload.deadline.is_some() {
            return Err(refuse("--deadline"));
        }
        cfg.validate()?;
        if signals {
            evq_os::signals::stop_on_signals()?;
        }
        evq_os::signals::ignore_sigpipe();
        let body: Arc<[u8]> = fixed_body(cfg.reply_size);
        let content = match &cfg.root {
            Some(dir) => Content::Files(FileRoot::open(dir)?.cache_valid(cfg.file_cache_valid)),
            None => Content::Fixed(body.clone()),
        };
        let (listeners, addr) = listeners(cfg)?;
        let content = Arc::new(content);
        // The site as it answers while running, and while stopping (every reply
        // then says `Connection: close`).
        let sites = Arc::new([false, true].map(|closing| Site {
            content: content.clone(),
            limits: cfg.limits,
            closing,
            stats_path: None,
            work: cfg.work,
        }));
        // Build one ring here first, so a kernel without the API fails before
        // anyone is told we are listening.
        drop(CompletionRing::new()?);
        let timeouts = Timeouts::of(cfg);
        let (overload, backlog) = (cfg.overload, cfg.backlog);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (i, l) in listeners.into_iter().enumerate() {
            let (sites, body) = (sites.clone(), body.clone());
            let until = Stop {
                flag: stop.clone(),
                signals,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("evq-serve-{i}"))
                .spawn(move || run_thread(l, &sites, &body, timeouts, overload, backlog, &until));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // The threads already running stop with this handle.
                    drop(CompletionServerHandle {
                        addr,
                        stop,
                        threads,
                    });
                    return Err(e);
                }
            }
        }
        Ok(CompletionServerHandle {
            addr,
            stop,
            threads,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts a graceful stop without waiting for it (quirk g): the listeners
    /// close, idle connections close, replies under way go out saying
    /// `Connection: close` within `--grace`. The threads notice within 200 ms.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Waits until every thread has stopped; the counters summed.
    ///
    /// # Errors
    /// The first error that ended a thread (a ring error), or a panic's.
    pub fn wait(mut self) -> io::Result<CompletionServeReport> {
        self.join()
    }

    /// [`CompletionServerHandle::request_stop`], then
    /// [`CompletionServerHandle::wait`].
    ///
    /// # Errors
    /// As [`CompletionServerHandle::wait`].
    pub fn stop(self) -> io::Result<CompletionServeReport> {
        self.request_stop();
        self.wait()
    }

    fn join(&mut self) -> io::Result<CompletionServeReport> {
        let mut total = CompletionServeReport::default();
        let mut first_error = None;
        for t in std::mem::take(&mut self.threads) {
            match t.join() {
                Ok(Ok(r)) => total.add(&r),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(io::Error::other("a completion worker panicked"));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }
}

impl Drop for CompletionServerHandle {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.request_stop();
            let _ = self.join();
        }
    }
}

/// What stops a thread: its handle's flag, and SIGINT/SIGTERM where the server
/// runs as `evq serve`.
struct Stop {
    flag: Arc<AtomicBool>,
    signals: bool,
}

impl Stop {
    fn requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || (self.signals && evq_os::signals::stop_requested())
    }
}

/// One thread's connections, indexed by descriptor number.
struct Thread<'a> {
    ring: CompletionRing,
    /// Connections by descriptor number, cut to the highest open between
    /// rounds (`slot_table`'s rule; the generations stay, so a token of a
    /// number cut never matches its next connection).
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    /// Connections open (or closing): admitted and their close not complete.
    open: usize,
    /// Spare send buffers, as many as connections open and a floor.
    pool: BufferPool,
    /// Counts what the spares dropped and trims the allocator after a crowd.
    releaser: Releaser,
    /// Boxed because each moves into a connection whole (`Conn::io`): a spare
    /// box saves an allocation per busy period.
    #[allow(clippy::vec_box)]
    io_pool: Vec<Box<ConnIo>>,
    /// A spare may hold a buffer over [`KEPT_BUFFER`] (set on keeping one,
    /// cleared by the pass that lets them go).
    spares_hold_big: bool,
    scratch: Scratch,
    date: DateCache,
    site: &'a Site,
    body: &'a [u8],
    timeouts: Timeouts,
    now: Instant,
    report: CompletionServeReport,
    /// The accept ended out of descriptors and waits for one (quirk f).
    accept_waiting: bool,
    /// A connection closed since: the accept may go again.
    descriptor_freed: bool,
    /// Connection completions handled (the order of `Conn::last_active`).
    events: u64,
    /// `--overload pulse` (quirk h); `None` for `--overload none`.
    pulse: Option<Pulse>,
    /// This round's wait of a new request was read (quirk h).
    wait_sampled: bool,
}

fn run_thread(
    listener: TcpListener,
    sites: &[Site; 2],
    body: &[u8],
    timeouts: Timeouts,
    overload: OverloadConfig,
    backlog: i32,
    stop: &Stop,
) -> io::Result<CompletionServeReport> {
    let site = &sites[0];
    let mut t = Thread {
        ring: CompletionRing::new()?,
        conns: Vec::new(),
        generations: Vec::new(),
        open: 0,
        pool: BufferPool::with_floor(usize::MAX, SEND_SPARES_IDLE),
        releaser: Releaser::new(),
        io_pool: Vec::new(),
        spares_hold_big: false,
        scratch: Scratch::default(),
        date: DateCache::new(),
        site,
        body,
        timeouts,
        now: Instant::now(),
        report: CompletionServeReport::default(),
        accept_waiting: false,
        descriptor_freed: false,
        events: 0,
        pulse: (overload.policy == OverloadPolicy::Pulse)
            .then(|| Pulse::new(overload.queue_target, overload.interval, Instant::now())),
        wait_sampled: false,
    };
    let lfd = listener.as_raw_fd();
    let pulsed = PulsedListener {
        fd: lfd,
        addr: listener.local_addr()?,
        backlog,
        accept_token: ACCEPT,
        cancel_token: CANCEL,
    };
    let mut listener = Some(listener);
    let mut accept = Some(t.ring.accept_multishot(lfd, ACCEPT));
    let mut full = Completions::with_capacity(256);
    // While the pulse is engaged (quirk h), batches this small bring the
    // kernel's accepts to the loop every few milliseconds of work.
    let mut small = Completions::with_capacity(PULSE_BATCH);
    let mut next_sweep = t.now + timeouts.sweep;
    let mut stop_at: Option<Instant> = None;
    loop {
        if stop_at.is_none() && stop.requested() {
            // A graceful stop (quirk g): no new connection, every reply from
            // now on says close, idle connections close at once, and the
            // thread ends when the last one has or the grace is over.
            stop_at = Some(t.now + timeouts.grace);
            t.site = &sites[1];
            if let Some(id) = accept.take() {
                t.ring.cancel(id, CANCEL);
            }
            t.accept_waiting = false;
            // The ring's accept holds the socket until its cancel completes;
            // then it closes, and a new client is refused.
            drop(listener.take());
            t.close_idle(timeouts.grace);
        }
        if let Some(deadline) = stop_at {
            if t.open == 0 || t.now >= deadline {
                break;
            }
        }
        // Not listening (quirk h), the loop looks again soon: the listener
        // opens again within an interval even if nothing completes.
        let most = if t.pulse.as_ref().is_some_and(|p| !p.listening()) {
            Duration::from_millis(10)
        } else {
            Duration::from_millis(200)
        };
        let wait = next_sweep.saturating_duration_since(t.now).min(most);
        let batch = if t.pulse.as_ref().is_some_and(Pulse::engaged) {
            &mut small
        } else {
            &mut full
        };
        t.ring.get_next_completion(batch, Some(wait))?;
        if let (true, Some(p)) = (batch.len() < batch.capacity(), t.pulse.as_mut()) {
            // Every completion the kernel had is in this batch.
            p.drained();
        }
        t.now = Instant::now();
        t.date.refresh();
        t.wait_sampled = t.pulse.is_none();

        let (mut decided, mut asked) = (t.now, t.now);
        for (k, c) in batch.iter_mut().enumerate() {
            // Quirk h: a batch of completions can hold far more work than
            // the queue target (each request's `--work-us`); the pulse looks
            // again within it, every millisecond or so.
            if k % 8 == 7 && stop_at.is_none() && t.pulse.is_some() {
                let now = Instant::now();
                if now.saturating_duration_since(decided) >= PULSE_LOOK {
                    t.now = now;
                    decided = now;
                    t.wait_sampled = false;
                    // The ring's quirk p: while completions queue, the
                    // kernel accepts only when asked. Unasked through a
                    // batch of 256 (100 ms of work at 400 µs a request),
                    // new clients wait in the listen queue unseen by the
                    // pulse, and those it then refuses learn it late.
                    if t.pulse.as_ref().is_some_and(Pulse::engaged)
                        || now.saturating_duration_since(asked) >= KERNEL_LOOK
                    {
                        t.ring.run_kernel_work()?;
                        asked = now;
                    }
                    t.pulse_round(&mut accept, &pulsed);
                }
            }
            if c.token() == ACCEPT {
                // The accept the pulse cancelled has ended: the one that
                // replaces it may be armed now (quirk h).
                crate::completion_pulse::accept_completed(
                    t.pulse.as_mut(),
                    c,
                    &mut accept,
                    !t.accept_waiting && stop_at.is_none(),
                    &mut t.ring,
                    (lfd, ACCEPT),
                );
                match c.accepted_fd() {
                    // Accepted as the stop began: refused (closed) at once.
                    Some(fd) if stop_at.is_some() => {
                        // SAFETY: the ring handed us this new descriptor.
                        drop(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                    Some(fd) => t.admit(fd),
                    None if c.more() || stop_at.is_some() => {}
                    // Ended by the pulse's cancel or shutdown (quirk h).
                    None if !t.listening() => {}
                    // Out of descriptors (quirk f): the connection waits in the
                    // backlog while an idle connection makes room; accepting
                    // again at once would fail again, round after round.
                    None if matches!(
                        c.result().err().and_then(|e| e.raw_os_error()),
                        Some(libc::EMFILE | libc::ENFILE)
                    ) =>
                    {
                        t.out_of_descriptors();
                    }
                    // Anything else ends this multishot accept only; an
                    // accept cancelled by the pulse ends in an error too,
                    // once another may be armed.
                    None if accept.is_none() => {
                        accept = Some(t.ring.accept_multishot(lfd, ACCEPT));
                    }
                    None => {}
                }
                continue;
            }
            if c.token() != CANCEL {
                t.completed(c);
            }
        }
        if stop_at.is_none() {
            t.pulse_round(&mut accept, &pulsed);
        }
        if t.accept_waiting && t.may_arm_accept() && (t.descriptor_freed || t.now >= next_sweep) {
            // A descriptor came back (or a sweep's time passed): try again.
            t.accept_waiting = false;
            t.descriptor_freed = false;
            accept = Some(t.ring.accept_multishot(lfd, ACCEPT));
        }
        if t.now >= next_sweep {
            t.sweep();
            // Stopping, idle connections wait a second at most (quirk g).
            let every = if stop_at.is_some() {
                timeouts.sweep.min(Duration::from_millis(100))
            } else {
                timeouts.sweep
            };
            next_sweep = t.now + every;
        }
        t.cut_closed_tail();
    }
    if let Some(p) = t.pulse.as_ref() {
        t.report.pulses = p.pulses;
        t.report.not_listening_us = u64::try_from(p.closed_for.as_micros()).unwrap_or(u64::MAX);
    }
    let stats = t.ring.stats();
    t.report.enters = stats.enters;
    t.report.enobufs_rearms = stats.enobufs_rearms;
    // Closes queued in the last round go to the kernel now (a close runs at
    // once); the requests still in flight end when the ring drops.
    let _ = t.ring.submit();
    // Connections whose close never went to the ring close here. One whose
    // close did is not closed again: the kernel closed it, and its number may
    // already be another thread's file (in a process that runs the server
    // beside other work, as the lab does, closing it twice closed a load
    // client's socket).
    for (fd, conn) in t.conns.iter().enumerate() {
        if conn.as_ref().is_some_and(|c| !c.close_issued) {
            // SAFETY: an open connection's descriptor is ours (accepted, its
            // close never issued); the ring cancels its requests when it drops
            // below.
            drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
    }
    Ok(t.report)
}

impl Thread<'_> {
    /// Whether the listener listens (always, but in a pulse's closed phase).
    fn listening(&self) -> bool {
        self.pulse.as_ref().is_none_or(Pulse::listening)
    }

    /// Whether a new accept may be armed: the listener listens and no accept
    /// the pulse cancelled is still ending (quirk h).
    fn may_arm_accept(&self) -> bool {
        Pulse::allows_accept(self.pulse.as_ref())
    }

    /// `--overload pulse` after some completions (quirk h): stops listening
    /// while a batch of new clients is served, or listens again.
    fn pulse_round(&mut self, accept: &mut Option<OpId>, listener: &PulsedListener) {
        if let Some(p) = self.pulse.as_mut() {
            p.round(
                self.now,
                &mut self.ring,
                accept,
                self.accept_waiting,
                listener,
            );
        }
    }

    fn token(&self, fd: i32) -> u64 {
        (self.generations[fd as usize] as u64) << 32 | fd as u64
    }

    /// A new connection: its slot, its recv, an idle deadline.
    fn admit(&mut self, fd: i32) {
        self.report.accepted += 1;
        let now = self.now;
        let accept_entry = self.pulse.as_mut().map_or(0, |p| p.accepted(now));
        let slot = fd as usize;
        if self.conns.len() <= slot {
            self.conns.resize_with(slot + 1, || None);
        }
        if self.generations.len() <= slot {
            self.generations.resize(slot + 1, 0);
        }
        self.open += 1;
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        let token = self.token(fd);
        let recv = self.ring.recv_multishot(fd, token);
        self.conns[slot] = Some(Conn {
            recv,
            io: None,
            recv_live: true,
            paused: false,
            sending: false,
            close_after_send: false,
            closing: false,
            close_issued: false,
            deadline: self.now + self.timeouts.idle,
            answered: 0,
            last_active: self.events,
            awaiting_first: true,
            accept_entry,
            request_seen: false,
        });
    }

    /// A completion for one connection's recv, send or close.
    fn completed(&mut self, c: &mut evq::completion::Completion) {
        let fd = (c.token() & u32::MAX as u64) as i32;
        let slot = fd as usize;
        if self.generations.get(slot).copied() != Some((c.token() >> 32) as u32) {
            return; // quirk b
        }
        // The number may have been cut since its connection closed.
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.events += 1;
        conn.last_active = self.events;
        let mut io = self.io_of(&mut conn);
        match c.kind() {
            OpKind::Recv => {
                if let (Ok(n), false) = (c.result(), conn.closing) {
                    if n > 0 {
                        let data = self.ring.received(c).unwrap_or(&[]);
                        if io.input.is_empty() {
                            // A request starts: the header timeout runs.
                            conn.deadline = self.now + self.timeouts.header;
                        }
                        if conn.awaiting_first && !conn.request_seen {
                            conn.request_seen = true;
                            if let Some(p) = self.pulse.as_mut() {
                                p.request_in(conn.accept_entry);
                            }
                        }
                        io.input.extend_from_slice(data);
                        let first = conn.awaiting_first;
                        self.answer(&mut conn, &mut io);
                        if first && !conn.awaiting_first && !self.wait_sampled {
                            // Quirk h: the round's sample of how long new
                            // requests wait.
                            self.wait_sampled = true;
                            if let (Some(p), Ok(ms)) =
                                (self.pulse.as_mut(), overload::queue_delay_ms(fd))
                            {
                                p.waited(Duration::from_millis(u64::from(ms)));
                            }
                        }
                        if c.more()
                            && !io.input.is_empty()
                            && io.out.is_empty()
                            && !conn.sending
                            && evq_os::socket::has_failed(fd)
                        {
                            // Quirk i: the reset that came with these bytes.
                            self.report.resets_peeked += 1;
                            begin_close(&mut self.ring, &mut conn);
                        }
                        if io.input.len() > INPUT_PAUSE && conn.recv_live && !conn.paused {
                            conn.paused = true;
                            self.report.paused += 1;
                            self.ring.cancel(conn.recv, CANCEL);
                        }
                    }
                }
                if !c.more() {
                    conn.recv_live = false;
                    let cancelled =
                        matches!(c.result(), Err(e) if e.raw_os_error() == Some(libc::ECANCELED));
                    if !(conn.paused && cancelled) {
                        // EOF, reset, or our cancel to close: send what is
                        // answered, then close.
                        conn.paused = false;
                        conn.close_after_send = true;
                    }
                }
            }
            OpKind::Send => {
                conn.sending = false;
                io.send = None;
                if let Some(mut bufs) = c.take_buffers() {
                    if let Some(mut b) = bufs.pop() {
                        b.clear();
                        self.pool.give(b, self.open);
                    }
                }
                if c.result().is_err() {
                    begin_close(&mut self.ring, &mut conn);
                } else {
                    // The client is taking its replies: it has an idle
                    // timeout's worth of time for the next part. Only a
                    // connection with nothing left to send is idle (and, while
                    // stopping, given just a second; quirk g).
                    let more = !io.out.is_empty() || io.file.as_ref().is_some_and(|f| f.left > 0);
                    conn.deadline = if more {
                        self.now + self.timeouts.idle
                    } else {
                        self.idle_deadline()
                    };
                    if io.out.is_empty() && io.file.is_none() && !io.input.is_empty() {
                        // Requests held back behind the output (quirk c).
                        self.answer(&mut conn, &mut io);
                    }
                }
            }
            OpKind::Close => {
                self.open -= 1;
                self.release_io(io);
                self.descriptor_freed = true;
                if let (true, Some(p)) = (conn.awaiting_first, self.pulse.as_mut()) {
                    p.settled(conn.accept_entry, conn.request_seen, false);
                }
                return;
            }
            _ => {}
        }
        self.flush(&mut conn, &mut io, fd);
        self.keep_io(&mut conn, io);
        self.conns[slot] = Some(conn);
    }

    /// The connection's buffers, from the spare ones if it had none.
    fn io_of(&mut self, conn: &mut Conn) -> Box<ConnIo> {
        conn.io
            .take()
            .unwrap_or_else(|| self.io_pool.pop().unwrap_or_default())
    }

    /// Gives the buffers back to the connection, or to the spares if it is idle.
    fn keep_io(&mut self, conn: &mut Conn, io: Box<ConnIo>) {
        if io.idle() {
            self.release_io(io);
        } else {
            conn.io = Some(io);
        }
    }

    /// Keeps a connection's buffers for the next busy one. Spares follow the
    /// connections down (at most `open + IO_FLOOR`), and once they outnumber
    /// the connections open, they keep no buffer over [`KEPT_BUFFER`]: 10,000
    /// clients that asked for a big file and vanished left 256 spares with
    /// their 64 KiB chunks, 12 MiB resident after they had all gone.
    fn release_io(&mut self, mut io: Box<ConnIo>) {
        let bytes =
            |io: &ConnIo| std::mem::size_of::<ConnIo>() + io.input.capacity() + io.out.capacity();
        let bound = self.open.saturating_add(IO_FLOOR).min(IO_POOL);
        let mut dropped = 0;
        if self.io_pool.len() < bound {
            io.input.clear();
            io.out.clear();
            io.file = None;
            io.send = None;
            self.spares_hold_big |= io.input.capacity().max(io.out.capacity()) > KEPT_BUFFER;
            self.io_pool.push(io);
        } else {
            dropped += bytes(&io);
            drop(io);
        }
        while self.io_pool.len() > bound {
            dropped += self.io_pool.pop().map_or(0, |io| bytes(&io));
        }
        if self.spares_hold_big && self.io_pool.len() > self.open {
            self.spares_hold_big = false;
            for spare in &mut self.io_pool {
                for b in [&mut spare.input, &mut spare.out] {
                    if b.capacity() > KEPT_BUFFER {
                        dropped += b.capacity();
                        *b = Vec::new();
                    }
                }
            }
        }
        if dropped > 0 {
            self.releaser.freed(dropped, self.open);
        }
    }

    /// Parses every complete request in `io.input` that the output has room
    /// for, and appends the replies to `io.out`.
    fn answer(&mut self, conn: &mut Conn, io: &mut ConnIo) {
        let mut consumed = 0;
        while consumed < io.input.len()
            && !conn.close_after_send
            && io.file.is_none()
            && io.out.len() < OUTPUT_HOLD
        {
            match handle_request(
                &io.input[consumed..],
                self.site,
                self.date.text(),
                &mut self.scratch,
                &mut io.out,
            ) {
                Outcome::Incomplete => break,
                Outcome::Done(reply) | Outcome::Stats { reply, .. } => {
                    consumed += reply.consumed;
                    self.report.requests += 1;
                    conn.answered = conn.answered.saturating_add(1);
                    if let (true, Some(p)) = (
                        std::mem::take(&mut conn.awaiting_first),
                        self.pulse.as_mut(),
                    ) {
                        p.settled(conn.accept_entry, conn.request_seen, true);
                    }
                    if reply.status < 400 {
                        self.site.work();
                    }
                    match reply.body {
                        Body::None => {}
                        Body::Fixed { offset } => io.out.extend_from_slice(&self.body[offset..]),
                        Body::File { fd, len } => {
                            io.file = Some(FileBody {
                                // SAFETY: handle_request gave us this open file
                                // to send and close.
                                file: unsafe { OwnedFd::from_raw_fd(fd) },
                                offset: 0,
                                left: len,
                            });
                        }
                    }
                    if !reply.keep_alive {
                        conn.close_after_send = true;
                    }
                }
            }
        }
        io.input.drain(..consumed);
        if io.input.is_empty() {
            io.input = Vec::new(); // an idle connection holds no buffer
            conn.deadline = self.idle_deadline();
        } else if consumed > 0 {
            // The next request has begun.
            conn.deadline = self.now + self.timeouts.header;
        }
    }

    /// Starts a send of what is waiting (the next file chunk if the replies are
    /// out), resumes a paused recv once the output has drained, or finishes a
    /// close once nothing is in flight.
    fn flush(&mut self, conn: &mut Conn, io: &mut ConnIo, fd: i32) {
        let token = self.token(fd);
        if !conn.sending && !conn.closing && io.out.is_empty() {
            if let Some(f) = io.file.as_mut() {
                match next_chunk(f, &mut io.out) {
                    Ok(true) => {}
                    Ok(false) => io.file = None,
                    Err(()) => {
                        // The file shrank or failed mid-body: a reset, never a
                        // short body the client would take for the whole.
                        io.out.clear();
                        io.file = None;
                        let _ = evq_os::socket::set_reset_on_close(fd);
                        begin_close(&mut self.ring, conn);
                    }
                }
                if io.file.is_none() && !conn.closing && !io.input.is_empty() {
                    self.answer(conn, io);
                }
            }
        }
        if !conn.sending && !io.out.is_empty() && !conn.closing {
            let next = self.pool.take().unwrap_or_default();
            let out = std::mem::replace(&mut io.out, next);
            io.send = Some(self.ring.send(fd, out, token));
            conn.sending = true;
            return;
        }
        if conn.paused
            && !conn.recv_live
            && !conn.closing
            && io.out.is_empty()
            && io.file.is_none()
            && io.input.len() <= INPUT_PAUSE
        {
            conn.paused = false;
            conn.recv = self.ring.recv_multishot(fd, token);
            conn.recv_live = true;
        }
        if conn.close_after_send && !conn.sending && io.file.is_none() {
            begin_close(&mut self.ring, conn);
        }
        if conn.closing && !conn.recv_live && !conn.sending {
            self.ring.close(fd, token);
            conn.close_issued = true;
            conn.sending = true; // nothing more may start on this connection
        }
    }

    /// The accept failed for want of a descriptor (quirk f): the least recently
    /// active idle connection is closed to make room, if there is one.
    fn out_of_descriptors(&mut self) {
        self.report.fd_exhausted += 1;
        self.accept_waiting = true;
        // An idle connection's deadline is its last activity + the idle timeout.
        let in_use_after = self.now + self.timeouts.idle.saturating_sub(RECENTLY_ACTIVE);
        let idle = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(fd, c)| c.as_ref().map(|c| (fd, c)))
            .filter(|(_, c)| c.answered > 0 && !c.closing && !c.sending && c.io.is_none())
            // A keep-alive client in use, active within the last second, is
            // kept: its next request is likely on the way.
            .filter(|(_, c)| c.answered == 1 || c.deadline <= in_use_after)
            .min_by_key(|(_, c)| (c.answered > 1, c.last_active))
            .map(|(fd, _)| fd);
        if let Some(fd) = idle {
            let mut conn = self.conns[fd].take().expect("found above");
            let mut io = self.io_of(&mut conn);
            self.report.reclaimed += 1;
            begin_close(&mut self.ring, &mut conn);
            self.flush(&mut conn, &mut io, fd as i32);
            self.keep_io(&mut conn, io);
            self.conns[fd] = Some(conn);
        }
    }

    /// When a connection with nothing under way closes: after the idle timeout,
    /// or, stopping, after `STOP_IDLE_WAIT` (quirk g).
    fn idle_deadline(&self) -> Instant {
        if self.site.closing {
            self.now + self.timeouts.grace.min(sys::STOP_IDLE_WAIT)
        } else {
            self.now + self.timeouts.idle
        }
    }

    /// Cuts the numbers above the highest connection open, gives back
    /// capacity once it is four times what is left, and trims the allocator
    /// once a crowd has gone (`evq_os::memory`; once between rounds).
    fn cut_closed_tail(&mut self) {
        self.releaser.open_now(self.open);
        if !self.conns.last().is_some_and(Option::is_none) {
            return;
        }
        while self.conns.last().is_some_and(Option::is_none) {
            self.conns.pop();
        }
        let bytes = crate::slot_table::shrink_capacity(&mut self.conns);
        if bytes > 0 {
            self.releaser.freed(bytes, self.open);
        }
    }

    /// A graceful stop's idle connections (quirk g): with no grace they close
    /// now; otherwise each is given `STOP_IDLE_WAIT` (a busy client about to
    /// send its next request gets it answered with `Connection: close` rather
    /// than meeting a closed socket), after which the sweep closes it.
    fn close_idle(&mut self, grace: Duration) {
        let until = self.now + grace.min(sys::STOP_IDLE_WAIT);
        for fd in 0..self.conns.len() {
            let idle = self.conns[fd]
                .as_ref()
                .is_some_and(|c| !c.closing && !c.sending && c.io.is_none());
            if !idle {
                continue;
            }
            let mut conn = self.conns[fd].take().expect("checked above");
            if grace.is_zero() {
                let mut io = self.io_of(&mut conn);
                begin_close(&mut self.ring, &mut conn);
                self.flush(&mut conn, &mut io, fd as i32);
                self.keep_io(&mut conn, io);
            } else {
                conn.deadline = conn.deadline.min(until);
            }
            self.conns[fd] = Some(conn);
        }
    }

    /// Closes every connection past its deadline (quirk d).
    fn sweep(&mut self) {
        for fd in 0..self.conns.len() {
            let expired = match &self.conns[fd] {
                Some(c) => !c.closing && c.deadline <= self.now,
                None => false,
            };
            if expired {
                let mut conn = self.conns[fd].take().expect("checked above");
                let mut io = self.io_of(&mut conn);
                if !self.site.closing {
                    self.report.timed_out += 1;
                }
                io.out.clear();
                io.file = None;
                if let Some(send) = io.send {
                    // A reply the client has not taken: drop it with a reset.
                    let _ = evq_os::socket::set_reset_on_close(fd as i32);
                    self.ring.cancel(send, CANCEL);
                }
                begin_close(&mut self.ring, &mut conn);
                self.flush(&mut conn, &mut io, fd as i32);
                self.keep_io(&mut conn, io);
                self.conns[fd] = Some(conn);
            }
        }
    }
}

/// Reads the next chunk of `f` into `out`. `Ok(false)`: the body is complete;
/// `Err`: the file shrank or could not be read.
fn next_chunk(f: &mut FileBody, out: &mut Vec<u8>) -> Result<bool, ()> {
    if f.left == 0 {
        return Ok(false);
    }
    let want = f.left.min(FILE_CHUNK as u64) as usize;
    out.resize(want, 0);
    loop {
        match sys::pread(f.file.as_raw_fd(), &mut out[..want], f.offset as i64) {
            Ok(0) => return Err(()),
            Ok(n) => {
                out.truncate(n);
                f.offset += n as u64;
                f.left -= n as u64;
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(()),
        }
    }
}

/// Quirk a: a close starts by cancelling the recv.
fn begin_close(ring: &mut CompletionRing, conn: &mut Conn) {
    if conn.closing {
        return;
    }
    conn.closing = true;
    if conn.recv_live {
        ring.cancel(conn.recv, CANCEL);
    }
}

fn fixed_body(n: usize) -> Arc<[u8]> {
    // The readiness server's pattern, so both serve the same bytes.
    (0..n)
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect()
}
