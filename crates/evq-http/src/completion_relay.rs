//! `evq proxy --io completion`: the proxy's loop on [`evq::completion`] — the
//! kernel accepts clients, receives from clients and origins and sends to both;
//! the loop only reads heads, frames bodies and moves bytes between buffers.
//!
//! The protocol is the readiness relay's, byte for byte: both run on
//! `exchange.rs` (request heads read and rewritten, bodies framed, interim
//! responses passed or dropped), with the same keep-alive pool to the origin,
//! the same retry rule (an idempotent request without a body, dropped unanswered
//! on a pooled connection, is sent again once on a fresh one), 502 and 504, the
//! lingering close after an error reply, and the same graceful stop. One thread,
//! as the readiness proxy.
//!
//! # Quirks
//!
//! a) **A multishot recv holds the socket**, so closing a connection is three
//!    steps: cancel its recv (and a send still in flight), wait for their final
//!    completions, then close through the ring. Its slot (and descriptor) is
//!    free when the close completes; until then completions for it are taken
//!    and only finish the close.
//! b) **Slots come back** while completions for their last connection may
//!    still be queued: tokens carry the slot's generation (`token.rs`), bumped
//!    when the close completes.
//! c) **Backpressure on a client is a cancelled recv, and a body is paced.**
//!    A multishot recv keeps receiving whatever the other side does. A
//!    client whose unread input passes [`INPUT_PAUSE`] (pipelined requests)
//!    has its recv cancelled (the bytes wait in the socket, where TCP's
//!    window pushes back) and armed again once it has drained. While a
//!    request body is under way the client's multishot is cancelled and one
//!    paced `recv_into` at a time ([`CLIENT_BODY_READ`] bytes) takes its place
//!    (as for origins, quirk m), and the body goes to the origin at most
//!    [`BODY_HIGH_WATER`] at a time: 200 clients uploading 5 MB each at once
//!    took 57–59 MB at the peak with the multishot, 33–37 MB so (the
//!    readiness proxy 10 MB; each paced upload still holds a recv buffer, its
//!    input, the origin's output and the send in flight). An
//!    origin is always paced: its response waiting unsent to the client past
//!    [`HIGH_WATER`] means no recv is armed.
//! d) **A pooled origin connection keeps a recv armed**: whatever it
//!    delivers while idle (end of file, an error, bytes nobody asked for)
//!    closes it at once, before a request can be sent on it. A close the ring
//!    has not reported yet is caught two ways: a request the retry rule covers
//!    (idempotent, no body) goes out at once and, dropped unanswered, goes
//!    again on a fresh connection; any other request is sent only after a
//!    peek (`MSG_PEEK`, as the readiness relay does for every request) finds
//!    the connection open — one system call it spares GETs, which were most
//!    of this loop's system calls (1 per request, against 0.1 `io_uring_enter`).
//! e) **Connecting to the origin** is a non-blocking `connect(2)` with the
//!    recv and the request's send queued at once: the kernel holds the send
//!    until the handshake is done, so a new origin connection costs no round
//!    trip through the loop. A refused connection fails the send and the recv.
//! f) **Timeouts are a sweep**, as in the completion server: every
//!    `min(idle, origin) / 8` (50 ms to 1 s) the clients past their deadline are
//!    answered 504 (an exchange the origin has not begun to answer) or closed.
//! g) **Out of descriptors**: an accept that fails with `EMFILE` waits (the
//!    client stays in the listen queue) while an idle descriptor is closed for
//!    room in the readiness relay's order (`relay/reclaim.rs`), and goes again
//!    when a close completes. A connect to the origin that meets `EMFILE` makes
//!    room the same way and its exchange waits for the descriptor (up to the
//!    origin timeout: then 504), or takes over the first origin connection
//!    an exchange finishes with; with nothing to wait for it gets a 502 at
//!    once. Four descriptors are held back from clients (opened on
//!    `/dev/null`) and given up one at a time to connect to the origin: a
//!    crowd that takes every other descriptor before its requests arrive
//!    (the multishot accept takes all the listen queue holds) would otherwise
//!    leave every one of those requests without a way to the origin. A client not answered yet is never closed for room (accepts
//!    complete in batches before their requests, so a fresh client's request
//!    is likely on its way), nor a keep-alive client in use active within the
//!    last second.
//! h) **Not here** (refused with a clear error): `--backend`, `--mode`,
//!    `--overload` other than none or pulse, and `--deadline`. The loop wakes
//!    at least every 200 ms to notice a stop.
//! i) **An idle client holds no buffer**: its slot is its socket's state, a
//!    deadline and a few flags (~100 bytes, plus the ring's slot for its armed
//!    recv); the input, the output, the request head kept for a retry and the
//!    exchange's protocol state live in a record taken from a pool of spares
//!    when bytes arrive and given back when the exchange is over and
//!    everything is sent. With the client table reserved once
//!    (`descriptor_limit`): 251 bytes of memory an idle client at 10,000,
//!    where the first version took 400.
//! j) **A reset can be missed** (`evq::completion`'s quirk on multishot recv):
//!    a client that sends part of a head and resets at once can leave its
//!    recv armed on a dead socket, no completion to end it — about one in
//!    10,000 such clients on Linux 6.18 under load, each holding a descriptor
//!    until the idle timeout (60 s). Bytes that leave a head unfinished are
//!    followed by one peek (`evq_os::socket::has_failed`): a reset closes the
//!    client. A complete request needs none (its response's send fails on a
//!    dead socket), and a head arriving whole, as nearly every one does,
//!    costs nothing.
//!    The origin's side can meet the same: an origin that resets after part
//!    of its response would leave the client waiting for `--origin-timeout`
//!    (10 s) instead of being reset at once. A peek after every partial
//!    response would cost a system call per segment of a large body, so the
//!    sweep (quirk f) peeks instead, once, the origin of each exchange that
//!    has been quiet for a sweep or more: a reset found ends the exchange as
//!    a reset seen by its recv does (a 502, or the client reset if the
//!    response had begun), within a second or two. Both count in
//!    `resets_peeked`.
//! k) **Overload** (`--overload pulse`, the default; `completion_pulse.rs`, as
//!    in `evq serve --io completion`): the multishot accept empties the listen
//!    queue at every entry to the kernel, so the queue stands in the ring and
//!    here, as new clients whose first request has not been taken up. While
//!    it stands and more wait than the proxy takes up in `--queue-target`,
//!    the accept is cancelled and the listener shut: the kernel resets new
//!    clients at once while the batch is relayed. At 3× its capacity
//!    (`--work-us 400`, clients giving up after 0.5 s) the proxy without it
//!    answered about a hundred clients in time and let ~21,000 time out.
//!    The pulse counts a new client waiting from its accept until its first
//!    request is taken up (quirk l), however long that is; a cancelled accept
//!    must end before another is armed (`evq::completion`'s quirk q: without
//!    it, 1 run in 3 at 3× stopped accepting for good). With both, at 3× its
//!    capacity (`scripts/overload-ab.sh`): every refusal fast, as many
//!    answered in time as the readiness proxy, served p50 7 ms and p90 9–15
//!    ms (before quirk l: p50 176–345 ms).
//! l) **Work in flight goes first.** A completion is cheap (bytes copied, a
//!    send queued); taking up a request is the proxy's own work
//!    (`--work-us`), and under overload a batch of completions holds
//!    hundreds of new requests. Taken up in the order they came, an origin's
//!    response queued behind them waited for all of them — p50 48 ms, p90 444
//!    ms at 3× — while its client's time ran out, and every such exchange
//!    held an origin connection (4,780 connects for 9,000 requests). So a
//!    complete request joins a queue (`ready`) instead, and the loop takes
//!    requests up from it for at most 4 ms (1 ms while the pulse is engaged)
//!    before it looks for completions again, without waiting: responses,
//!    sends and new clients are dealt with between slices. At 3×: 20 origin
//!    connects for 9,000 requests. The queue is the proxy's queue, in first
//!    come order; a client reset meanwhile is closed at once and one that
//!    shut its side after a whole request is still answered.
//! m) **An origin is received from one paced recv at a time**
//!    (`CompletionRing::recv_into` into the origin's own buffer, armed again
//!    only while the client's output has room: [`ORIGIN_READ`] bytes, and
//!    [`ORIGIN_READ_BULK`] once the client has taken [`BULK_AFTER`] of the
//!    response — a client that leaves early never gets there). A
//!    multishot recv takes everything the origin sends until a cancel lands,
//!    and the kernel runs it for as long as data keeps coming: relaying 8 MiB
//!    bodies to 200 clients a second that closed at once
//!    (`request-then-close`), this loop took ~400 KB from the origin per
//!    exchange (795 MB for 2,000 clients, 566 MB of it after the close was
//!    asked), twice the readiness proxy's CPU per such client, and kept 90%
//!    of its live clients' throughput (the readiness proxy 98%). Paced, it
//!    moves less than the readiness proxy and keeps 99%. A pooled
//!    connection's recv holds a [`POOLED_READ`] buffer — room for the whole
//!    of most small responses, so a reused connection takes its response in
//!    one recv — the one buffer an idle origin connection holds.

use crate::buffers::BufferPool;
use crate::completion_pulse::{Pulse, PulsedListener};
use crate::config::ProxyConfig;
use crate::date::DateCache;
use crate::exchange::{Begin, Exchange, Step};
use crate::linger;
use crate::overload::OverloadPolicy;
use crate::relay::reclaim::{victims, EXHAUSTED_BATCH, RECENTLY_ACTIVE};
use crate::relay::still_open;
use crate::request::{spend_cpu, write_error};
use crate::slot_table::{Slot, SlotTable};
use crate::stats::ProxyReport;
use crate::sys::{self, later};
use crate::token::{decode, next_generation, token, Kind};
use evq::completion::{Completion, CompletionRing, Completions, OpId, OpKind};
use evq_wire::Framing;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Unread client input, bytes, past which its recv pauses (quirk c); never
/// less than the longest head allowed.
pub(crate) const INPUT_PAUSE: usize = 64 * 1024;
/// Response bytes waiting to go to a client, past which its origin's recv
/// pauses (quirks c and m).
const HIGH_WATER: usize = 64 * 1024;
/// The longest response head taken from the origin (the readiness relay's
/// origin buffer).
const ORIGIN_HEAD: usize = 16 * 1024;
/// Bytes one recv takes from the origin during an exchange (quirk m): the
/// readiness relay's read...
const ORIGIN_READ: usize = 16 * 1024;
/// ...and once the client has taken [`BULK_AFTER`] bytes of the response,
/// as much as its output may hold: a large body to a client that reads goes
/// in fewer rounds.
const ORIGIN_READ_BULK: usize = HIGH_WATER;
/// Request-body bytes one paced recv takes from a client (quirk c).
const CLIENT_BODY_READ: usize = 16 * 1024;
/// Request-body bytes waiting to go to the origin (beside the send in
/// flight), past which no more are moved (quirk c).
const BODY_HIGH_WATER: usize = 16 * 1024;
/// Response bytes a client's sends must have completed before its origin is
/// read [`ORIGIN_READ_BULK`] at a time.
const BULK_AFTER: usize = 256 * 1024;
/// Bytes the recv armed on a pooled origin connection may take (quirks d and
/// m): the buffer an idle connection holds, and room for the whole of most
/// small responses once it is in use again.
const POOLED_READ: usize = 4096;
/// Token of the multishot accept.
const ACCEPT: u64 = u64::MAX - 1;
/// Token of our own cancels, whose completions need nothing done.
const CANCEL: u64 = u64::MAX;
/// The longest the loop waits before looking at the stop flag again.
const STOP_POLL: Duration = Duration::from_millis(200);
/// The longest the loop takes up requests before it looks for completions
/// again while `--overload pulse` is engaged (quirks k and l).
const PULSE_LOOK: Duration = Duration::from_millis(1);
/// The same, otherwise (quirk l).
const TAKE_UP_SLICE: Duration = Duration::from_millis(4);

/// Refuses, before anything binds, the settings this loop does not have.
pub(crate) fn check(cfg: &ProxyConfig) -> io::Result<()> {
    let refuse = |what: &str| {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("--io completion does not take {what} (the readiness relay's)"),
        ))
    };
    if cfg.backend.is_some() {
        return refuse("--backend");
    }
    if cfg.mode.is_some() {
        return refuse("--mode");
    }
    match cfg.overload.policy {
        OverloadPolicy::None | OverloadPolicy::Pulse => {}
        other => return refuse(&format!("--overload {}", other.name())),
    }
    if cfg.overload.deadline.is_some() {
        return refuse("--deadline");
    }
    // Fail here, not in the thread, on a kernel without the API.
    drop(CompletionRing::new()?);
    Ok(())
}

/// A socket on the ring: its recv and send in flight and its close (quirk a).
impl Slot for Client {
    fn vacant(&self) -> bool {
        self.sock.fd < 0
    }
    fn generation(&self) -> u32 {
        self.sock.generation
    }
}

impl Slot for Origin {
    fn vacant(&self) -> bool {
        self.sock.fd < 0
    }
    fn generation(&self) -> u32 {
        self.sock.generation
    }
}

struct Sock {
    fd: RawFd,
    generation: u32,
    /// The recv in the kernel, if one is: multishot, or paced (`recv_into`,
    /// quirk m) when `recv_paced`.
    recv: Option<OpId>,
    recv_paced: bool,
    /// A cancel of `recv` was asked (to pause it or to close).
    recv_cancelled: bool,
    /// The input ended: end of file (`eof`) or an error. No recv again.
    input_ended: bool,
    eof: bool,
    /// The send in the kernel, if one is.
    send: Option<OpId>,
    /// The send in flight carries bytes (a client taking them is alive).
    in_flight_bytes: bool,
    /// Closing: nothing new starts; the close goes once nothing is in flight.
    closing: bool,
    close_queued: bool,
}

impl Sock {
    fn new(fd: RawFd, generation: u32) -> Sock {
        Sock {
            fd,
            generation,
            recv: None,
            recv_paced: false,
            recv_cancelled: false,
            input_ended: false,
            eof: false,
            send: None,
            in_flight_bytes: false,
            closing: false,
            close_queued: false,
        }
    }

    /// Arms or pauses the recv so that one runs exactly when `want` (and the
    /// socket is open and its input has not ended).
    fn sync_recv(&mut self, ring: &mut CompletionRing, want: bool, tok: u64) {
        let want = want && !self.closing && !self.input_ended;
        match self.recv {
            None if want => {
                self.recv = Some(ring.recv_multishot(self.fd, tok));
                self.recv_paced = false;
            }
            Some(id) if !want && !self.recv_cancelled => {
                self.recv_cancelled = true;
                ring.cancel(id, CANCEL);
            }
            _ => {}
        }
    }

    /// A recv ended — a multishot's last completion, or any paced one's:
    /// whether the input ended (end of file or an error, not our cancel).
    /// Bytes leave it open: a paced recv's, and a multishot's whose cancel
    /// (a pause, or the switch to a paced body) met data on its way.
    fn recv_ended(&mut self, c: &Completion) {
        let cancelled = self.recv_cancelled
            && matches!(c.result(), Err(e) if e.raw_os_error() == Some(libc::ECANCELED));
        self.recv = None;
        self.recv_cancelled = false;
        match c.result() {
            Ok(0) => {
                self.input_ended = true;
                self.eof = true;
            }
            Ok(_) => {}
            Err(_) if cancelled => {}
            Err(_) => {
                self.input_ended = true;
                self.eof = false;
            }
        }
    }

    /// Arms one paced recv (`recv_into`, quirk m) into `buf` with room for
    /// `size` bytes when `want` and none is in flight. A pause is no recv
    /// armed: one in flight takes at most its room, so it is never cancelled
    /// but to close.
    fn arm_paced_recv(
        &mut self,
        ring: &mut CompletionRing,
        want: bool,
        buf: &mut Vec<u8>,
        size: usize,
        tok: u64,
    ) {
        if want && self.recv.is_none() && !self.closing && !self.input_ended {
            let mut b = std::mem::take(buf);
            b.clear();
            b.reserve(size);
            self.recv = Some(ring.recv_into(self.fd, b, tok));
            self.recv_paced = true;
        }
    }

    /// The send in flight completed: its buffer goes to the spares. Whether
    /// it carried bytes.
    fn send_done(&mut self, c: &mut Completion, spare: &mut BufferPool, open: usize) -> bool {
        self.send = None;
        if let Some(b) = returned(c) {
            spare.give(b, open);
        }
        std::mem::take(&mut self.in_flight_bytes)
    }

    /// Starts a close (quirk a). A send still in flight is cancelled, and the
    /// connection reset: its peer must not take a cut-off reply for a whole one.
    fn begin_close(&mut self, ring: &mut CompletionRing) {
        if self.closing {
            return;
        }
        self.closing = true;
        if let (Some(id), false) = (self.recv, self.recv_cancelled) {
            self.recv_cancelled = true;
            ring.cancel(id, CANCEL);
        }
        if let Some(id) = self.send {
            let _ = evq_os::socket::set_reset_on_close(self.fd);
            ring.cancel(id, CANCEL);
        }
    }

    /// Queues the close once nothing is in flight.
    fn finish_close(&mut self, ring: &mut CompletionRing, tok: u64) {
        if self.closing && !self.close_queued && self.recv.is_none() && self.send.is_none() {
            self.close_queued = true;
            ring.close(self.fd, tok);
        }
    }

    /// Open: not closing, not yet free.
    fn open(&self) -> bool {
        self.fd >= 0 && !self.closing
    }
}

struct Client {
    sock: Sock,
    /// Buffers and exchange state, only while the client has some (an idle
    /// client holds none: quirk i).
    io: Option<Box<ClientIo>>,
    origin: Option<usize>,
    exchange: bool,
    /// The exchange waits for a descriptor to connect to the origin (quirk g).
    waiting: bool,
    /// Close once the output is out and no exchange is under way.
    close_after: bool,
    /// Close with a lingering close (`linger.rs`) after an error reply.
    linger_after: bool,
    lingering: bool,
    /// When the client is closed if nothing moves; for an idle one, its last
    /// activity plus the idle timeout (quirk g's "in use" reads it).
    deadline: Instant,
    /// Exchanges finished on this connection (saturating).
    exchanges: u32,
    /// No request of this client has been taken up yet (quirk j's pulse
    /// counts it as waiting), whether its first bytes came, and the pulse's
    /// count of drains at its accept.
    awaiting_first: bool,
    request_seen: bool,
    accept_entry: u32,
    /// A request of this client waits its turn in `ready` (quirk l).
    queued: bool,
}

impl Client {
    /// Its first request waits its turn (quirk k counts it as waiting).
    fn first_queued(&self) -> bool {
        self.queued && self.awaiting_first
    }
}

/// What a client holds only while it is busy (quirk i).
#[derive(Default)]
struct ClientIo {
    /// Bytes received and not yet used: a request head, body bytes for the
    /// origin, pipelined requests.
    input: Vec<u8>,
    /// Bytes for the client not yet handed to a send.
    out: Vec<u8>,
    /// The request head as sent to the origin (kept for a retry).
    sent_head: Vec<u8>,
    ex: Exchange,
    retried: bool,
    /// Bytes the client's sends completed during this exchange (quirk m).
    delivered: usize,
}

impl Client {
    /// Bytes received and not yet used.
    fn input_len(&self) -> usize {
        self.io.as_ref().map_or(0, |io| io.input.len())
    }

    /// Nothing waits to be handed to a send.
    fn out_empty(&self) -> bool {
        self.io.as_ref().is_none_or(|io| io.out.is_empty())
    }

    /// The exchange state (the default one for an idle client).
    fn ex(&self) -> Exchange {
        self.io.as_ref().map_or_else(Exchange::default, |io| io.ex)
    }
}

struct Origin {
    sock: Sock,
    /// Response bytes received and not yet relayed.
    input: Vec<u8>,
    /// The buffer for the next paced recv (quirk m), while none is in flight.
    recv_buf: Vec<u8>,
    out: Vec<u8>,
    reused: bool,
    client: Option<usize>,
}

/// The proxy's state on one thread.
pub(crate) struct CompletionRelay {
    cfg: ProxyConfig,
    ring: CompletionRing,
    listener: Option<OwnedFd>,
    accept: Option<OpId>,
    accept_waiting: bool,
    /// When the accept last failed other than for want of descriptors.
    listener_failed: Option<Instant>,
    descriptor_freed: bool,
    stop: Arc<AtomicBool>,
    /// Clients by slot, reserved once (quirk i) and cut to the highest in
    /// use between rounds, its pages above given back (`slot_table`); a slot
    /// holds a connection until its close completes (closing ones count).
    clients: SlotTable<Client>,
    origins: SlotTable<Origin>,
    pool: Vec<usize>,
    /// Clients waiting for a descriptor to reach the origin (quirk g).
    waiting: VecDeque<usize>,
    /// Closes queued and not yet complete (each frees a descriptor).
    closes_pending: usize,
    /// An exchange finished this round (its client may be idle now).
    answered_since: bool,
    /// Descriptors held for connections to the origin (quirk g).
    spare_fds: Vec<OwnedFd>,
    /// Spare client records (quirk i), boxed because each moves into a
    /// client whole.
    #[allow(clippy::vec_box)]
    io_pool: Vec<Box<ClientIo>>,
    /// Spare send and receive buffers, as many as the clients open and
    /// [`SPARES_FLOOR`] more (`buffers.rs`).
    spare: BufferPool,
    date: DateCache,
    now: Instant,
    stopping: Option<Instant>,
    sweep: Duration,
    report: ProxyReport,
    /// `--overload pulse` (quirk k); `None` for `--overload none`.
    pulse: Option<Pulse>,
    /// This round's wait of a new request was read (quirk k).
    wait_sampled: bool,
    /// Clients whose request waits to be taken up, first come first, with
    /// the generation of their slot (quirk l).
    ready: VecDeque<(usize, u32)>,
    /// The loop is taking up requests from `ready` (quirk l).
    taking_up: bool,
    /// Clients in `ready` whose first request it is (quirk k).
    ready_first: usize,
    /// Counts memory freed in bulk and gives it back to the system (quirk i).
    releaser: evq_os::memory::Releaser,
    /// Where the listener listens, to listen again after a pulse.
    listen_addr: Option<std::net::SocketAddr>,
}

/// Descriptors held back from clients for connections to the origin, so a
/// crowd of clients that takes every other descriptor cannot leave their
/// requests with no way to the origin (quirk g).
const SPARE_FDS: usize = 4;

/// Spare client records kept (quirk i).
const IO_POOL: usize = 64;
/// Entries of `ready`'s storage kept once it has emptied (quirks i and l).
const READY_KEPT: usize = 1024;
/// The largest buffer a spare client record keeps.
const KEPT_BUFFER: usize = 4096;

/// The largest spare buffer kept: an output that went one origin read past
/// [`HIGH_WATER`].
const SPARE_BUFFER: usize = HIGH_WATER + ORIGIN_READ_BULK;
/// Spare buffers kept beyond the connections open.
const SPARES_FLOOR: usize = 4;

impl CompletionRelay {
    /// The relay's state around `listener` (already listening).
    pub(crate) fn new(
        cfg: &ProxyConfig,
        listener: OwnedFd,
        stop: Arc<AtomicBool>,
    ) -> io::Result<CompletionRelay> {
        if cfg.handle_signals {
            evq_os::signals::stop_on_signals()?;
        }
        let sweep = (cfg.idle_timeout.min(cfg.origin_timeout) / 8)
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        let listen_addr = {
            use std::os::fd::AsRawFd;
            evq_os::socket::local_addr(listener.as_raw_fd()).ok()
        };
        Ok(CompletionRelay {
            cfg: cfg.clone(),
            ring: CompletionRing::new()?,
            listener: Some(listener),
            accept: None,
            accept_waiting: false,
            listener_failed: None,
            descriptor_freed: false,
            stop,
            clients: SlotTable::reserved(descriptor_limit()),
            origins: SlotTable::new(),
            pool: Vec::new(),
            waiting: VecDeque::new(),
            closes_pending: 0,
            answered_since: false,
            spare_fds: Vec::new(),
            io_pool: Vec::new(),
            spare: BufferPool::with_floor(SPARE_BUFFER, SPARES_FLOOR),
            date: DateCache::new(),
            now: Instant::now(),
            stopping: None,
            sweep,
            report: ProxyReport::default(),
            pulse: (cfg.overload.policy == OverloadPolicy::Pulse).then(|| {
                Pulse::new(
                    cfg.overload.queue_target,
                    cfg.overload.interval,
                    Instant::now(),
                )
            }),
            wait_sampled: false,
            ready: VecDeque::new(),
            taking_up: false,
            ready_first: 0,
            releaser: evq_os::memory::Releaser::new(),
            listen_addr,
        })
    }

    /// Relays until stopped; the counters, and the error that ended the loop
    /// if one did.
    pub(crate) fn run(mut self) -> (ProxyReport, io::Result<()>) {
        let result = self.relay();
        // Closes queued in the last round go to the kernel now (a close runs
        // at once); the requests still in flight end when the ring drops.
        let _ = self.ring.submit();
        self.report.io_uring_enters = self.ring.stats().enters;
        if let Some(p) = self.pulse.as_ref() {
            self.report.overload.refused.pulses = p.pulses;
            self.report.overload.refused.not_listening_us =
                u64::try_from(p.closed_for.as_micros()).unwrap_or(u64::MAX);
        }
        // Descriptors whose close was never queued close here.
        for c in self.clients.iter() {
            if c.sock.fd >= 0 && !c.sock.close_queued {
                // SAFETY: an open slot's descriptor is ours (accepted, not
                // closed: its close was never queued).
                drop(unsafe { OwnedFd::from_raw_fd(c.sock.fd) });
            }
        }
        for o in self.origins.iter() {
            if o.sock.fd >= 0 && !o.sock.close_queued {
                // SAFETY: as above, for a connection we opened.
                drop(unsafe { OwnedFd::from_raw_fd(o.sock.fd) });
            }
        }
        (std::mem::take(&mut self.report), result)
    }

    fn relay(&mut self) -> io::Result<()> {
        let lfd = self.listener.as_ref().map_or(-1, |l| {
            use std::os::fd::AsRawFd;
            l.as_raw_fd()
        });
        self.refill_spare_fds();
        self.accept = Some(self.ring.accept_multishot(lfd, ACCEPT));
        let mut batch = Completions::with_capacity(256);
        let mut next_sweep = self.now + self.sweep;
        let mut room = false;
        loop {
            let stop = self.stop.load(Ordering::Relaxed)
                || (self.cfg.handle_signals && evq_os::signals::stop_requested());
            if stop && self.stopping.is_none() {
                self.begin_stop();
            }
            if let Some(deadline) = self.stopping {
                if self.clients.in_use() == 0 || self.now >= deadline {
                    return Ok(());
                }
            }
            let most = if !self.ready.is_empty() {
                // Requests wait their turn (quirk l): only look for what
                // came meanwhile.
                Duration::ZERO
            } else if self.listening() {
                STOP_POLL
            } else {
                PULSE_LOOK * 10
            };
            let wait = next_sweep.saturating_duration_since(self.now).min(most);
            self.ring.get_next_completion(&mut batch, Some(wait))?;
            self.now = Instant::now();
            self.date.refresh();
            self.wait_sampled = self.pulse.is_none();
            if let (true, Some(p)) = (batch.len() < batch.capacity(), self.pulse.as_mut()) {
                // Every completion the kernel had is in this batch.
                p.drained();
            }
            // Cheap work first: every completion moves its exchange on, but
            // a request to take up joins `ready` (quirk l).
            for c in batch.iter_mut() {
                match c.token() {
                    ACCEPT => self.on_accept(c, lfd),
                    CANCEL => {}
                    t => match decode(t) {
                        Some((Kind::Client, i, g)) if self.clients.current(i, g) => {
                            self.on_client(i, c);
                        }
                        Some((Kind::Origin, o, g)) if self.origins.current(o, g) => {
                            self.on_origin(o, c);
                        }
                        _ => {}
                    },
                }
            }
            if self.stopping.is_none() {
                // New clients just accepted may be a queue to stop at once.
                self.pulse_round(lfd);
            }
            let engaged = self.pulse.as_ref().is_some_and(Pulse::engaged);
            self.take_up_ready(if engaged { PULSE_LOOK } else { TAKE_UP_SLICE });
            if self.stopping.is_none() {
                self.pulse_round(lfd);
            }
            if self.descriptor_freed {
                self.descriptor_freed = false;
                room = true;
                self.retry_waiting();
                self.refill_spare_fds();
            }
            // The accept waits for room and nothing was idle when it
            // stopped (a batch accepted before its requests came): clients
            // answered since can make it.
            if self.accept_waiting && !room && self.answered_since && self.closes_pending == 0 {
                self.reclaim_idle(EXHAUSTED_BATCH);
            }
            self.answered_since = false;
            // A descriptor came back since the accept stopped, and no
            // exchange waits for one: accept again.
            if room
                && self.accept_waiting
                && self.stopping.is_none()
                && self.waiting.is_empty()
                && self.may_arm_accept()
            {
                room = false;
                self.accept_waiting = false;
                self.accept = Some(self.ring.accept_multishot(lfd, ACCEPT));
            }
            if self.now >= next_sweep {
                self.retry_waiting();
                self.refill_spare_fds();
                if self.accept_waiting
                    && self.stopping.is_none()
                    && self.waiting.is_empty()
                    && self.listening()
                {
                    // No close came; try again now and then.
                    self.accept_waiting = false;
                    self.accept = Some(self.ring.accept_multishot(lfd, ACCEPT));
                }
                self.sweep_deadlines();
                let every = if self.stopping.is_some() {
                    self.sweep.min(Duration::from_millis(100))
                } else {
                    self.sweep
                };
                next_sweep = self.now + every;
            }
            self.clients.cut_vacant_tail();
            self.origins.cut_vacant_tail();
        }
    }

    /// Whether the listener listens (always, but in a pulse's closed phase).
    fn listening(&self) -> bool {
        self.pulse.as_ref().is_none_or(Pulse::listening)
    }

    /// Whether a new accept may be armed: the listener listens and no accept
    /// the pulse cancelled is still ending (quirk k).
    fn may_arm_accept(&self) -> bool {
        Pulse::allows_accept(self.pulse.as_ref())
    }

    /// `--overload pulse` after some completions (quirk k): stops listening
    /// while a batch of new clients is taken up, or listens again.
    fn pulse_round(&mut self, lfd: RawFd) {
        let (Some(p), Some(addr)) = (self.pulse.as_mut(), self.listen_addr) else {
            return;
        };
        let listener = PulsedListener {
            fd: lfd,
            addr,
            backlog: self.cfg.backlog,
            accept_token: ACCEPT,
            cancel_token: CANCEL,
        };
        p.queued(self.ready_first);
        p.round(
            self.now,
            &mut self.ring,
            &mut self.accept,
            self.accept_waiting,
            &listener,
        );
    }

    fn on_accept(&mut self, c: &Completion, lfd: RawFd) {
        // The accept the pulse cancelled has ended: the one that replaces it
        // may be armed now (quirk k).
        let may_arm = !self.accept_waiting && self.stopping.is_none();
        crate::completion_pulse::accept_completed(
            self.pulse.as_mut(),
            c,
            &mut self.accept,
            may_arm,
            &mut self.ring,
            (lfd, ACCEPT),
        );
        match c.accepted_fd() {
            Some(fd) if self.stopping.is_some() => {
                // SAFETY: the ring handed us this new descriptor.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            Some(fd) => self.admit(fd),
            None if c.more() || self.stopping.is_some() => {}
            // Our cancel (quirk g: exchanges waiting for a descriptor go first).
            None if matches!(c.result(), Err(e) if e.raw_os_error() == Some(libc::ECANCELED)) => {}
            // Ended by the pulse's shutdown (quirk k).
            None if !self.listening() => {}
            None if matches!(
                c.result().err().and_then(|e| e.raw_os_error()),
                Some(libc::EMFILE | libc::ENFILE)
            ) =>
            {
                // Quirk g: wait in the listen queue while descriptors free,
                // a batch of them, so the clients queued behind this one do
                // not each wait a round for one.
                self.report.refused += 1;
                self.accept_waiting = true;
                self.reclaim_idle(EXHAUSTED_BATCH);
            }
            None if self.accept.is_none() => {
                // The accept failed: once, it goes again at once (a passing
                // error); again within a sweep, the listening socket itself
                // failed (shut down, say), and accepting at once would fail
                // round after round: it waits for the next close or sweep.
                self.report.listener_failures += 1;
                let again = self
                    .listener_failed
                    .is_some_and(|t| self.now.duration_since(t) < self.sweep);
                self.listener_failed = Some(self.now);
                if again {
                    self.accept_waiting = true;
                } else {
                    self.accept = Some(self.ring.accept_multishot(lfd, ACCEPT));
                }
            }
            None => {}
        }
    }

    fn admit(&mut self, fd: RawFd) {
        self.report.accepts += 1;
        // As the readiness intake: a response relayed in pieces (a head, then
        // its body) must not wait on Nagle for the client's delayed ACK.
        let _ = evq_os::socket::set_nodelay(fd);
        self.report.overload.admitted += 1;
        let now = self.now;
        let i = self.clients.take(|generation| Client {
            sock: Sock::new(-1, generation),
            io: None,
            origin: None,
            exchange: false,
            waiting: false,
            close_after: false,
            linger_after: false,
            lingering: false,
            deadline: now,
            exchanges: 0,
            awaiting_first: false,
            request_seen: false,
            accept_entry: 0,
            queued: false,
        });
        let c = &mut self.clients[i];
        c.sock = Sock::new(fd, c.sock.generation);
        c.origin = None;
        c.exchange = false;
        c.waiting = false;
        c.close_after = false;
        c.linger_after = false;
        c.lingering = false;
        c.deadline = later(self.now, self.cfg.idle_timeout);
        c.exchanges = 0;
        c.awaiting_first = true;
        c.request_seen = false;
        c.queued = false;
        let now = self.now;
        c.accept_entry = self.pulse.as_mut().map_or(0, |p| p.accepted(now));
        let tok = token(Kind::Client, i, c.sock.generation);
        c.sock.sync_recv(&mut self.ring, true, tok);
    }

    /// Client connections held (closing ones too): the bound of the spare
    /// buffers. Not the origins: a pooled one, idle, needs no spare (with 50
    /// pooled after a burst of uploads, counting them kept 7 MiB of spares).
    fn open_connections(&self) -> usize {
        self.clients.in_use()
    }

    fn client_token(&self, i: usize) -> u64 {
        token(Kind::Client, i, self.clients[i].sock.generation)
    }

    fn origin_token(&self, o: usize) -> u64 {
        token(Kind::Origin, o, self.origins[o].sock.generation)
    }

    fn on_client(&mut self, i: usize, c: &mut Completion) {
        // Bytes came and the recv stays armed: if they leave a head
        // unfinished, the reset that may have followed them is asked after
        // (quirk j).
        let mut check_reset = false;
        match c.kind() {
            OpKind::Recv => {
                let cl = &mut self.clients[i];
                if let (Ok(n), false) = (c.result(), cl.sock.closing) {
                    check_reset = n > 0 && c.more();
                    if n > 0 && cl.awaiting_first && !cl.request_seen {
                        cl.request_seen = true;
                        if let Some(p) = self.pulse.as_mut() {
                            p.request_in(cl.accept_entry);
                        }
                    }
                    if n > 0 && !cl.lingering {
                        if !cl.exchange && cl.input_len() == 0 {
                            // A request head starts: the idle timeout becomes
                            // the (same) head timeout.
                            cl.deadline = later(self.now, self.cfg.idle_timeout);
                        }
                        let pool = &mut self.io_pool;
                        let io = cl.io.get_or_insert_with(|| pool.pop().unwrap_or_default());
                        io.input
                            .extend_from_slice(self.ring.received(c).unwrap_or(&[]));
                    }
                }
                if !c.more() {
                    cl.sock.recv_ended(c);
                }
            }
            OpKind::RecvInto => {
                // A request body, paced (quirk c).
                let open = self.open_connections();
                let cl = &mut self.clients[i];
                cl.sock.recv_ended(c);
                let got = returned(c).unwrap_or_default();
                if !cl.sock.closing && !cl.lingering && !got.is_empty() {
                    let pool = &mut self.io_pool;
                    let io = cl.io.get_or_insert_with(|| pool.pop().unwrap_or_default());
                    io.input.extend_from_slice(&got);
                }
                self.spare.give(got, open);
            }
            OpKind::Send => {
                let open = self.open_connections();
                let cl = &mut self.clients[i];
                let sent = cl.sock.send_done(c, &mut self.spare, open);
                let Ok(n) = c.result() else {
                    return self.close_client(i);
                };
                if let (true, Some(io)) = (cl.exchange, cl.io.as_mut()) {
                    io.delivered = io.delivered.saturating_add(n as usize);
                }
                if cl.exchange && sent {
                    // The client reads: the exchange is alive, and its origin
                    // may have been paused for it (quirk c).
                    cl.deadline = later(self.now, self.cfg.origin_timeout);
                    if let Some(o) = cl.origin {
                        self.sync_origin_recv(o);
                    }
                }
            }
            OpKind::Close => {
                self.closes_pending -= 1;
                self.descriptor_freed = true;
                let cl = &mut self.clients[i];
                if let (true, Some(p)) = (cl.awaiting_first, self.pulse.as_mut()) {
                    p.settled(cl.accept_entry, cl.request_seen, false);
                }
                cl.awaiting_first = false;
                cl.sock.fd = -1;
                cl.sock.generation = next_generation(cl.sock.generation);
                self.clients.release(i);
                return;
            }
            _ => {}
        }
        self.drive_client(i);
        let cl = &self.clients[i];
        if check_reset
            && cl.sock.open()
            && cl.sock.recv.is_some()
            && !cl.exchange
            && cl.input_len() > 0
            && evq_os::socket::has_failed(cl.sock.fd)
        {
            self.report.resets_peeked += 1;
            self.close_client(i);
        }
    }

    fn on_origin(&mut self, o: usize, c: &mut Completion) {
        match c.kind() {
            OpKind::RecvInto => {
                let or = &mut self.origins[o];
                or.sock.recv_ended(c);
                let mut got = returned(c).unwrap_or_default();
                if !or.sock.closing && !got.is_empty() {
                    if or.input.is_empty() {
                        // The received buffer becomes the input; the old
                        // (empty) input takes the next recv.
                        std::mem::swap(&mut or.input, &mut got);
                    } else {
                        or.input.extend_from_slice(&got);
                    }
                }
                got.clear();
                or.recv_buf = got;
            }
            OpKind::Send => {
                let open = self.open_connections();
                let or = &mut self.origins[o];
                or.sock.send_done(c, &mut self.spare, open);
                if c.result().is_err() && !or.sock.closing {
                    return self.origin_gone(o);
                }
            }
            OpKind::Close => {
                self.closes_pending -= 1;
                self.descriptor_freed = true;
                let or = &mut self.origins[o];
                or.sock.fd = -1;
                or.sock.generation = next_generation(or.sock.generation);
                self.origins.release(o);
                return;
            }
            _ => {}
        }
        self.drive_origin(o);
    }

    /// Moves a client's connection on: starts its next exchange, moves its
    /// request body to the origin, sends what is waiting, closes it when it
    /// is done, and arms or pauses its recv.
    fn drive_client(&mut self, i: usize) {
        let tok = self.client_token(i);
        let cl = &mut self.clients[i];
        if cl.sock.closing {
            return self.finish_client_close(i);
        }
        if cl.lingering {
            if let Some(io) = cl.io.as_mut() {
                io.input.clear();
            }
            if cl.sock.input_ended {
                return self.close_client(i);
            }
            cl.sock.sync_recv(&mut self.ring, true, tok);
            return self.park(i);
        }
        if !cl.exchange && !cl.close_after && cl.input_len() > 0 {
            if !self.taking_up {
                // Quirk l: the request waits its turn.
                if !cl.queued {
                    cl.queued = true;
                    self.ready_first += usize::from(cl.awaiting_first);
                    self.ready.push_back((i, cl.sock.generation));
                }
            } else {
                self.start_exchange(i);
                if self.clients[i].sock.closing {
                    return self.finish_client_close(i);
                }
            }
        }
        if let Some(o) = self.clients[i].origin {
            self.pump_request_body(i, o);
            self.flush_origin(o);
        }
        let cl = &self.clients[i];
        if cl.exchange
            && cl.sock.input_ended
            && cl.sock.eof
            && cl
                .io
                .as_ref()
                .is_some_and(|io| io.ex.body_cut_short(&io.input))
        {
            // Ended in the middle of its body: it can never finish, so the
            // exchange ends now, not at the origin timeout.
            self.report.bad_requests += 1;
            self.fail_exchange(i, 400);
        }
        let cl = &mut self.clients[i];
        if let (None, Some(io)) = (cl.sock.send, cl.io.as_mut()) {
            if !io.out.is_empty() {
                let next = take_spare(&mut self.spare);
                let out = std::mem::replace(&mut io.out, next);
                cl.sock.in_flight_bytes = !out.is_empty();
                cl.sock.send = Some(self.ring.send(cl.sock.fd, out, tok));
            }
        }
        let quiet = cl.sock.send.is_none() && cl.out_empty();
        // A request waiting its turn (quirk l) is not "between exchanges": a
        // client that sent it and shut its side still gets the response (a
        // reset ends it below, at once).
        if cl.sock.input_ended && !cl.exchange && !cl.close_after && !cl.queued {
            // Gone (or half-closed) between exchanges: an unfinished head
            // is dropped with the connection.
            cl.close_after = true;
            cl.linger_after = false;
        }
        if cl.sock.input_ended && !cl.sock.eof {
            // Reset (or failed): nobody is left to answer.
            return self.close_client(i);
        }
        if cl.sock.input_ended && cl.exchange {
            // Half-closed after its request: still owed the response.
            cl.close_after = true;
        }
        if cl.close_after && !cl.exchange && quiet {
            if !cl.linger_after || cl.sock.input_ended {
                return self.close_client(i);
            }
            // The error reply is out: shut our side, drop what the client
            // still sends, close when it is done or the time is up.
            cl.lingering = true;
            if let Some(io) = cl.io.as_mut() {
                io.input.clear();
            }
            linger::begin(cl.sock.fd);
            cl.deadline = later(self.now, linger::LINGER);
            cl.sock.sync_recv(&mut self.ring, true, tok);
            return self.park(i);
        }
        let pause_at = INPUT_PAUSE.max(self.cfg.limits.max_head);
        let want = cl.input_len() < pause_at && (cl.exchange || !cl.close_after);
        let uploading = cl.exchange && cl.io.as_ref().is_some_and(|io| !io.ex.req_body.is_done());
        match (uploading, cl.sock.recv, cl.sock.recv_paced) {
            // A body under way is received paced (quirk c): the multishot
            // goes first (its cancel's end arms the paced recv)...
            (true, Some(_), false) => cl.sock.sync_recv(&mut self.ring, false, tok),
            (true, None, _) if want => {
                let room = (pause_at - cl.input_len()).min(CLIENT_BODY_READ);
                let mut buf = take_spare(&mut self.spare);
                cl.sock
                    .arm_paced_recv(&mut self.ring, true, &mut buf, room, tok);
                if buf.capacity() > 0 {
                    // Not armed (closing, or the input ended).
                    let open = self.open_connections();
                    self.spare.give(buf, open);
                }
            }
            (true, _, _) => {}
            // ...and a paced recv in flight takes at most its room: it is
            // left to end, then the multishot comes back.
            (false, Some(_), true) => {}
            (false, _, _) => cl.sock.sync_recv(&mut self.ring, want, tok),
        }
        self.park(i);
    }

    /// An idle client holds no buffer (quirk i): its record goes back to the
    /// spares, buffers cleared but kept for the next busy client.
    fn park(&mut self, i: usize) {
        let cl = &mut self.clients[i];
        if cl.exchange || cl.sock.closing || cl.input_len() > 0 || !cl.out_empty() {
            return;
        }
        if let Some(io) = cl.io.take() {
            self.release_io(io);
        }
    }

    /// Keeps a client's record for the next busy client, if there are not
    /// too many spares; a buffer that grew past [`KEPT_BUFFER`] is let go (a
    /// burst of large responses must not stay resident after it: the fault
    /// table holds memory to its baseline).
    fn release_io(&mut self, mut io: Box<ClientIo>) {
        if self.io_pool.len() >= IO_POOL {
            // Freed: counted so the allocator gives a crowd's records back
            // once it has gone (quirk i; `evq_os::memory`).
            let bytes = std::mem::size_of::<ClientIo>()
                + io.input.capacity()
                + io.out.capacity()
                + io.sent_head.capacity();
            drop(io);
            self.releaser.freed(bytes, self.clients.in_use());
            return;
        }
        let mut dropped = 0;
        for b in [&mut io.input, &mut io.out, &mut io.sent_head] {
            if b.capacity() > KEPT_BUFFER {
                dropped += b.capacity();
                *b = Vec::new();
            }
            b.clear();
        }
        if dropped > 0 {
            self.releaser.freed(dropped, self.clients.in_use());
        }
        io.ex = Exchange::default();
        io.retried = false;
        io.delivered = 0;
        self.io_pool.push(io);
    }

    /// Takes up the requests waiting in `ready`, first come first, for up to
    /// `slice` (quirk l).
    fn take_up_ready(&mut self, slice: Duration) {
        let start = self.now;
        self.taking_up = true;
        while let Some((i, g)) = self.ready.pop_front() {
            // The slot may have been cut since its client closed.
            if !self.clients.current(i, g) || !self.clients[i].queued {
                continue;
            }
            let cl = &mut self.clients[i];
            self.ready_first -= usize::from(cl.first_queued());
            cl.queued = false;
            self.drive_client(i);
            self.now = Instant::now();
            if self.now.saturating_duration_since(start) >= slice {
                break;
            }
        }
        self.taking_up = false;
        if self.ready.is_empty() && self.ready.capacity() > READY_KEPT {
            // A crowd's queue does not stay resident after it (quirk i).
            let bytes = self.ready.capacity() * std::mem::size_of::<(usize, u32)>();
            self.ready = VecDeque::new();
            self.releaser.freed(bytes, self.clients.in_use());
        }
    }

    /// A client's request is taken up: if it is the client's first, the
    /// pulse counts it served, and the round's first such one tells it how
    /// long the request waited (quirk k).
    fn first_taken_up(&mut self, i: usize) {
        let cl = &mut self.clients[i];
        if !std::mem::take(&mut cl.awaiting_first) {
            return;
        }
        let Some(p) = self.pulse.as_mut() else {
            return;
        };
        p.settled(cl.accept_entry, cl.request_seen, true);
        if !self.wait_sampled {
            self.wait_sampled = true;
            if let Ok(ms) = crate::overload::queue_delay_ms(cl.sock.fd) {
                p.waited(Duration::from_millis(u64::from(ms)));
            }
        }
    }

    /// Reads a request head, and starts its exchange or refuses it.
    fn start_exchange(&mut self, i: usize) {
        let max_head = self.cfg.limits.max_head;
        let stopping = self.stopping.is_some();
        let Some(io) = self.clients[i].io.as_mut() else {
            return;
        };
        let head = &io.input[..io.input.len().min(max_head)];
        let full = io.input.len() >= max_head;
        let begun = io.ex.begin(head, full, stopping, &mut io.sent_head);
        if !matches!(begun, Begin::Incomplete) {
            self.first_taken_up(i);
        }
        let Some(io) = self.clients[i].io.as_mut() else {
            return;
        };
        let head_len = match begun {
            Begin::Incomplete => return,
            Begin::Malformed(status) => {
                self.report.bad_requests += 1;
                return self.fail_exchange(i, status);
            }
            Begin::Refused(status) => {
                self.report.requests += 1;
                self.report.bad_requests += 1;
                return self.fail_exchange(i, status);
            }
            Begin::Started(n) => n,
        };
        self.report.requests += 1;
        spend_cpu(self.cfg.work);
        io.input.drain(..head_len);
        io.retried = false;
        io.delivered = 0;
        let cl = &mut self.clients[i];
        cl.exchange = true;
        cl.deadline = later(self.now, self.cfg.origin_timeout);
        let o = match self.pooled_origin(i) {
            Some(o) => {
                self.report.origin_reuses += 1;
                self.origins[o].reused = true;
                o
            }
            None => match self.connect_origin() {
                Ok(o) => o,
                Err(e) => return self.no_origin(i, &e),
            },
        };
        self.link(i, o);
    }

    /// A connect to the origin failed: out of descriptors, the exchange waits
    /// while one is freed (quirk g); otherwise a 502.
    fn no_origin(&mut self, i: usize, e: &io::Error) {
        let emfile = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        // Something will free a descriptor or hand over a connection: an idle
        // one closed for room, a close under way, or an exchange that will
        // give its origin connection to the first waiting (`finish_exchange`).
        let busy = |r: &Self| {
            r.origins
                .iter()
                .any(|o| o.sock.open() && o.client.is_some())
        };
        if emfile && (self.reclaim_idle(1) > 0 || self.closes_pending > 0 || busy(self)) {
            self.clients[i].waiting = true;
            self.waiting.push_back(i);
            // The descriptors freed go to exchanges under way before new
            // clients: the accept waits until none is waiting.
            self.pause_accept();
            return;
        }
        self.report.bad_gateway += 1;
        self.fail_exchange(i, 502);
    }

    /// The first exchange still waiting for an origin connection, taken off
    /// the queue.
    fn next_waiting(&mut self) -> Option<usize> {
        while let Some(i) = self.waiting.pop_front() {
            // The slot may have been cut since its client closed.
            let Some(cl) = self.clients.get_mut(i) else {
                continue;
            };
            if cl.waiting && cl.sock.open() {
                cl.waiting = false;
                return Some(i);
            }
        }
        None
    }

    /// Exchanges that waited for a descriptor try again (one came back).
    fn retry_waiting(&mut self) {
        for i in std::mem::take(&mut self.waiting) {
            let Some(cl) = self.clients.get_mut(i) else {
                continue;
            };
            if !cl.waiting || !cl.sock.open() {
                continue;
            }
            cl.waiting = false;
            if let Some(o) = self.pooled_origin(i) {
                self.report.origin_reuses += 1;
                self.origins[o].reused = true;
                self.link(i, o);
                self.drive_client(i);
                continue;
            }
            match self.connect_origin() {
                Ok(o) => {
                    self.link(i, o);
                    self.drive_client(i);
                }
                Err(e) => {
                    self.no_origin(i, &e);
                    if !self.clients[i].waiting {
                        self.drive_client(i);
                    }
                }
            }
        }
    }

    /// Gives the exchange of client `i` origin connection `o`, and sends the
    /// request head (and what of the body is here).
    fn link(&mut self, i: usize, o: usize) {
        self.clients[i].origin = Some(o);
        let or = &mut self.origins[o];
        or.client = Some(i);
        if or.out.capacity() == 0 {
            or.out = take_spare(&mut self.spare);
        }
        if let Some(io) = &self.clients[i].io {
            or.out.extend_from_slice(&io.sent_head);
        }
        self.pump_request_body(i, o);
        self.flush_origin(o);
    }

    /// Moves buffered request-body bytes to the origin's output while it
    /// holds under [`BODY_HIGH_WATER`] (beside the send in flight): the rest
    /// waits in the client's input, whose recv pauses past [`INPUT_PAUSE`]
    /// (quirk c). Moving all of it at once let a fast upload grow the
    /// origin's output by whatever the client's recv had taken.
    fn pump_request_body(&mut self, i: usize, o: usize) {
        let Some(io) = self.clients[i].io.as_mut() else {
            return;
        };
        let or = &mut self.origins[o];
        let room = BODY_HIGH_WATER.saturating_sub(or.out.len());
        if room == 0 {
            return;
        }
        let some = &io.input[..io.input.len().min(room)];
        match io.ex.pump_body(some, &mut or.out) {
            Ok(n) => {
                io.input.drain(..n);
                if io.input.capacity() > 4 * CLIENT_BODY_READ && io.input.len() <= CLIENT_BODY_READ
                {
                    // What the multishot took before the body was paced is
                    // gone: the input need not keep its room.
                    io.input.shrink_to(2 * CLIENT_BODY_READ);
                }
            }
            Err(()) => {
                self.report.bad_requests += 1;
                self.fail_exchange(i, 400);
            }
        }
    }

    /// Sends the origin's output if no send is in flight.
    fn flush_origin(&mut self, o: usize) {
        let tok = self.origin_token(o);
        let or = &mut self.origins[o];
        if or.sock.send.is_none() && !or.out.is_empty() && or.sock.open() {
            let next = take_spare(&mut self.spare);
            let out = std::mem::replace(&mut or.out, next);
            or.sock.in_flight_bytes = !out.is_empty();
            or.sock.send = Some(self.ring.send(or.sock.fd, out, tok));
        }
    }

    /// The origin's recv runs while its client can take more of the response
    /// (or, pooled, always: quirk d), one paced recv at a time (quirk m).
    fn sync_origin_recv(&mut self, o: usize) {
        let tok = self.origin_token(o);
        let (want, size) = match self.origins[o].client {
            None => (true, POOLED_READ),
            Some(i) => {
                let io = self.clients[i].io.as_ref();
                let (out, delivered) = io.map_or((0, 0), |io| (io.out.len(), io.delivered));
                let size = if delivered >= BULK_AFTER {
                    ORIGIN_READ_BULK
                } else {
                    ORIGIN_READ
                };
                (out < HIGH_WATER, size)
            }
        };
        let open = self.open_connections();
        let or = &mut self.origins[o];
        if or.client.is_none() && or.sock.recv.is_none() && or.input.is_empty() {
            // Pooled, it holds one small buffer, in its recv: the input's
            // if that is small (as after a small response: no allocation
            // from one exchange to the next), else a new one.
            let small = |b: &Vec<u8>| (1..=POOLED_READ).contains(&b.capacity());
            if !small(&or.recv_buf) && small(&or.input) {
                std::mem::swap(&mut or.recv_buf, &mut or.input);
            }
            if or.recv_buf.capacity() > POOLED_READ {
                self.spare.give(std::mem::take(&mut or.recv_buf), open);
            }
            self.spare.give(std::mem::take(&mut or.input), open);
        }
        or.sock
            .arm_paced_recv(&mut self.ring, want, &mut or.recv_buf, size, tok);
    }

    /// Moves an origin connection on: relays what it sent, notices its end.
    fn drive_origin(&mut self, o: usize) {
        if self.origins[o].sock.closing {
            return self.finish_origin_close(o);
        }
        let Some(i) = self.origins[o].client else {
            // Pooled (quirk d): anything it delivers closes it.
            let or = &self.origins[o];
            if !or.input.is_empty() || or.sock.input_ended {
                self.close_origin(o);
            }
            return;
        };
        if !self.origins[o].input.is_empty() {
            let stopping = self.stopping.is_some();
            let or = &mut self.origins[o];
            let cl = &mut self.clients[i];
            cl.deadline = later(self.now, self.cfg.origin_timeout);
            // An exchange under way always has its record (never parked).
            let pool = &mut self.io_pool;
            let io = cl.io.get_or_insert_with(|| pool.pop().unwrap_or_default());
            let full = !io.ex.resp_head && or.input.len() >= ORIGIN_HEAD;
            let (used, step) = io.ex.relay_response(&or.input, full, stopping, &mut io.out);
            or.input.drain(..used);
            match step {
                Step::More => {}
                Step::Done => return self.finish_exchange(o, i),
                Step::BadHead | Step::BadBody => {
                    if step == Step::BadHead {
                        self.report.bad_gateway += 1;
                    }
                    self.fail_exchange(i, 502);
                    return self.drive_client(i);
                }
            }
        }
        if self.origins[o].sock.input_ended {
            return self.origin_gone(o);
        }
        self.flush_origin(o);
        self.sync_origin_recv(o);
        self.drive_client(i);
    }

    /// The origin closed or failed. Ends, retries or fails the exchange.
    fn origin_gone(&mut self, o: usize) {
        let Some(i) = self.origins[o].client else {
            return self.close_origin(o);
        };
        let or = &self.origins[o];
        let (reused, eof) = (or.reused, or.sock.eof);
        let ex = self.clients[i].ex();
        let nothing_back = or.input.is_empty() && !ex.resp_head;
        self.close_origin(o);
        self.clients[i].origin = None;
        let cl = &mut self.clients[i];
        let retried = cl.io.as_ref().is_some_and(|io| io.retried);
        if ex.resp_head && ex.resp_body == Framing::UntilClose && eof {
            // The body ran until close: complete. The client must close too,
            // since nothing else can tell it where the body ended.
            if let Some(io) = cl.io.as_mut() {
                io.ex.resp_body = Framing::Done;
            }
            cl.exchange = false;
            cl.close_after = true;
            self.report.relayed += 1;
        } else if reused && nothing_back && !retried && ex.retryable {
            // A pooled connection the origin closed as the request went out:
            // an idempotent request without a body goes again, once (RFC 9110
            // §9.2.2; `proxy.rs`).
            self.report.retries += 1;
            if let Some(io) = self.clients[i].io.as_mut() {
                io.retried = true;
            }
            match self.connect_origin() {
                Ok(n) => self.link(i, n),
                // Out of descriptors it waits like a new exchange (quirk g).
                Err(e) => self.no_origin(i, &e),
            }
        } else {
            if !ex.forwarded {
                self.report.bad_gateway += 1;
            }
            self.fail_exchange(i, 502);
        }
        self.drive_client(i);
    }

    fn finish_exchange(&mut self, o: usize, i: usize) {
        let open = self.open_connections();
        self.report.relayed += 1;
        self.answered_since = true;
        let cl = &mut self.clients[i];
        cl.exchange = false;
        cl.exchanges = cl.exchanges.saturating_add(1);
        cl.origin = None;
        let ex = cl.ex();
        if !ex.keep_alive {
            cl.close_after = true;
        }
        // Answered before the body was all here: the rest is not a request
        // (`Exchange::body_left_behind`; `keep_alive` turned false with the
        // response head, so the connection closes after it), and it may still
        // be coming: linger.
        let left_behind = ex.body_left_behind();
        if left_behind {
            debug_assert!(cl.close_after, "a body left behind keeps no connection");
            self.report.answered_before_body += 1;
            cl.linger_after = !cl.sock.input_ended;
            if let Some(io) = cl.io.as_mut() {
                io.input.clear();
            }
        }
        let reusable = ex.origin_reusable && !left_behind;
        // Stopping, an idle client waits `STOP_IDLE_WAIT` at most.
        let idle = match self.stopping {
            Some(_) => self.cfg.idle_timeout.min(sys::STOP_IDLE_WAIT),
            None => self.cfg.idle_timeout,
        };
        cl.deadline = later(self.now, idle);
        let or = &mut self.origins[o];
        if reusable
            && or.input.is_empty()
            && or.out.is_empty()
            && or.sock.send.is_none()
            && !or.sock.input_ended
            && self.stopping.is_none()
            && self.pool.len() < self.cfg.pool_size
        {
            or.client = None;
            self.spare.give(std::mem::take(&mut or.out), open);
            match self.next_waiting() {
                // Out of descriptors, an exchange waits: it takes this
                // connection now (quirk g).
                Some(w) => {
                    self.report.origin_reuses += 1;
                    self.origins[o].reused = true;
                    self.link(w, o);
                    self.drive_client(w);
                }
                None => {
                    self.pool.push(o);
                    self.sync_origin_recv(o);
                }
            }
        } else {
            self.close_origin(o);
        }
        self.drive_client(i);
    }

    /// Ends the exchange with an error status (or just a close when part of
    /// the response already went out).
    fn fail_exchange(&mut self, i: usize, status: u16) {
        if let Some(o) = self.clients[i].origin.take() {
            self.close_origin(o);
        }
        let cl = &mut self.clients[i];
        cl.waiting = false;
        let forwarded = cl.ex().forwarded;
        let pool = &mut self.io_pool;
        let io = cl.io.get_or_insert_with(|| pool.pop().unwrap_or_default());
        if !(cl.exchange && forwarded) {
            write_error(&mut io.out, status, self.date.text(), "");
            cl.linger_after = !cl.sock.input_ended;
        }
        io.input.clear();
        cl.exchange = false;
        cl.close_after = true;
    }

    /// An idle pooled origin connection that still looks open (quirk d), for
    /// the exchange of client `i`.
    fn pooled_origin(&mut self, i: usize) -> Option<usize> {
        // A request the retry rule covers needs no peek: if the origin closed
        // the connection unseen, the request goes again on a fresh one.
        let peek = !self.clients[i].ex().retryable;
        while let Some(o) = self.pool.pop() {
            let or = &self.origins[o];
            if or.sock.open() && !or.sock.input_ended && (!peek || still_open(or.sock.fd)) {
                return Some(o);
            }
            self.report.stale_pooled += 1;
            self.close_origin(o);
        }
        None
    }

    /// Stops the accept until descriptors come back (quirk g).
    fn pause_accept(&mut self) {
        if let Some(id) = self.accept.take() {
            self.ring.cancel(id, CANCEL);
            self.accept_waiting = self.stopping.is_none();
        }
    }

    /// Holds [`SPARE_FDS`] descriptors (quirk g), as far as there are any.
    fn refill_spare_fds(&mut self) {
        while self.spare_fds.len() < SPARE_FDS {
            match std::fs::File::open("/dev/null") {
                Ok(f) => self.spare_fds.push(f.into()),
                Err(_) => break,
            }
        }
    }

    /// A new connection to the origin, its recv armed (quirk e). Out of
    /// descriptors, a spare one is given up for it (quirk g).
    fn connect_origin(&mut self) -> io::Result<usize> {
        let origin = self.cfg.origin;
        let connect = || evq_os::connect(origin, evq_os::LocalBind::Kernel, true);
        let fd = match connect() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                match self.spare_fds.pop() {
                    Some(spare) => {
                        drop(spare);
                        connect()?
                    }
                    None => return Err(e),
                }
            }
            other => other?,
        }
        .into_raw_fd();
        self.report.origin_connects += 1;
        let o = self.origins.take(|generation| Origin {
            sock: Sock::new(-1, generation),
            input: Vec::new(),
            recv_buf: Vec::new(),
            out: Vec::new(),
            reused: false,
            client: None,
        });
        let or = &mut self.origins[o];
        or.sock = Sock::new(fd, or.sock.generation);
        or.reused = false;
        or.client = None;
        or.input.clear();
        or.out.clear();
        let tok = self.origin_token(o);
        let or = &mut self.origins[o];
        or.sock
            .arm_paced_recv(&mut self.ring, true, &mut or.recv_buf, ORIGIN_READ, tok);
        Ok(o)
    }

    fn close_client(&mut self, i: usize) {
        if let Some(o) = self.clients[i].origin.take() {
            self.close_origin(o);
        }
        let cl = &mut self.clients[i];
        if cl.sock.fd < 0 {
            return;
        }
        if !cl.sock.closing {
            cl.waiting = false;
            cl.exchange = false;
            // Out of `ready` (its entry there is passed over).
            self.ready_first -= usize::from(cl.first_queued());
            cl.queued = false;
            cl.sock.begin_close(&mut self.ring);
            if let Some(io) = cl.io.as_mut() {
                io.input.clear();
                io.out.clear();
            }
        }
        // Called again on a closing connection (a completion that ended its
        // last request), it queues the close: never a descriptor left open.
        self.finish_client_close(i);
    }

    fn finish_client_close(&mut self, i: usize) {
        let tok = self.client_token(i);
        let cl = &mut self.clients[i];
        let queued = cl.sock.close_queued;
        cl.sock.finish_close(&mut self.ring, tok);
        if !queued && cl.sock.close_queued {
            self.closes_pending += 1;
            if let Some(io) = cl.io.take() {
                self.release_io(io);
            }
        }
    }

    fn close_origin(&mut self, o: usize) {
        let or = &mut self.origins[o];
        if or.sock.fd < 0 {
            return;
        }
        if !or.sock.closing {
            or.client = None;
            or.sock.begin_close(&mut self.ring);
            or.input.clear();
            or.out.clear();
            self.pool.retain(|&p| p != o);
        }
        self.finish_origin_close(o);
    }

    fn finish_origin_close(&mut self, o: usize) {
        let tok = self.origin_token(o);
        let open = self.open_connections();
        let or = &mut self.origins[o];
        let queued = or.sock.close_queued;
        or.sock.finish_close(&mut self.ring, tok);
        if !queued && or.sock.close_queued {
            self.closes_pending += 1;
            for b in [&mut or.input, &mut or.recv_buf, &mut or.out] {
                self.spare.give(std::mem::take(b), open);
            }
        }
    }

    /// A graceful stop: the accept is cancelled (the listening socket closes
    /// when the cancel completes, so a new client is refused), pooled origin
    /// connections close, idle clients close after `STOP_IDLE_WAIT` unless a
    /// request comes first, and exchanges in flight go on for up to the grace
    /// period, their responses saying `Connection: close`.
    fn begin_stop(&mut self) {
        self.stopping = Some(later(self.now, self.cfg.grace));
        if let Some(id) = self.accept.take() {
            self.ring.cancel(id, CANCEL);
        }
        self.accept_waiting = false;
        drop(self.listener.take());
        let idle_until = later(self.now, self.cfg.grace.min(sys::STOP_IDLE_WAIT));
        for i in 0..self.clients.len() {
            let cl = &mut self.clients[i];
            if !cl.sock.open() {
                continue;
            }
            // A response whose head already went out said keep-alive: the
            // client may send its next request as soon as it has the body.
            let head_out = cl.exchange && cl.ex().resp_head;
            if let (Some(io), false) = (cl.io.as_mut(), head_out) {
                io.ex.keep_alive = false;
            }
            let idle = !cl.exchange && cl.input_len() == 0 && cl.out_empty();
            if idle && cl.sock.send.is_none() && !cl.close_after {
                if self.cfg.grace.is_zero() {
                    self.close_client(i);
                } else {
                    cl.deadline = cl.deadline.min(idle_until);
                }
            }
        }
        for o in std::mem::take(&mut self.pool) {
            self.close_origin(o);
        }
    }

    /// Peeks the origin of every exchange quiet for a sweep or more, ending
    /// those whose origin has failed with no completion to say so (quirk j).
    fn peek_quiet_origins(&mut self) {
        // Every byte of an exchange moves its client's deadline to now plus
        // the origin timeout.
        let Some(quiet) = later(self.now, self.cfg.origin_timeout).checked_sub(self.sweep) else {
            return;
        };
        for o in 0..self.origins.len() {
            let or = &self.origins[o];
            let Some(i) = or.client else { continue };
            if !or.sock.open()
                || or.sock.input_ended
                || or.sock.recv.is_none()
                || self.clients[i].deadline > quiet
                || !evq_os::socket::has_failed(or.sock.fd)
            {
                continue;
            }
            self.report.resets_peeked += 1;
            let or = &mut self.origins[o];
            or.sock.input_ended = true;
            or.sock.eof = false;
            self.origin_gone(o);
        }
    }

    /// Answers 504 to exchanges past their deadline that have had no response
    /// yet, and closes every other client past its deadline (quirk f).
    fn sweep_deadlines(&mut self) {
        self.peek_quiet_origins();
        for i in 0..self.clients.len() {
            let cl = &self.clients[i];
            if !cl.sock.open() || cl.deadline > self.now {
                continue;
            }
            if cl.exchange && !cl.ex().forwarded {
                self.report.gateway_timeout += 1;
                self.fail_exchange(i, 504);
                // The 504 gets the linger's time to go out.
                self.clients[i].deadline = later(self.now, linger::LINGER);
                self.drive_client(i);
            } else {
                self.close_client(i);
            }
        }
    }

    /// Closes up to `n` idle descriptors for room (quirk g), in the readiness
    /// relay's order: clients answered once, oldest first; then pooled origin
    /// connections, longest idle first, all but the last [`SPARE_FDS`]; then
    /// keep-alive clients in use that have been quiet for a second. Returns
    /// how many it closed.
    fn reclaim_idle(&mut self, n: usize) -> usize {
        // An idle client's deadline is its last activity plus the idle
        // timeout: one past this was active within the last second.
        let quiet_until = later(
            self.now,
            self.cfg.idle_timeout.saturating_sub(RECENTLY_ACTIVE),
        );
        let mut idle: Vec<_> = (0..self.clients.len())
            .filter(|&i| {
                let cl = &self.clients[i];
                cl.sock.open()
                    && !cl.exchange
                    && !cl.close_after
                    && !cl.lingering
                    && cl.input_len() == 0
                    && cl.out_empty()
                    && cl.sock.send.is_none()
                    && cl.exchanges > 0
                    && (cl.exchanges == 1 || cl.deadline <= quiet_until)
            })
            .map(|i| (self.clients[i].exchanges > 1, self.clients[i].deadline, i))
            .collect();
        // The pool's last `SPARE_FDS` stay: with every other descriptor
        // held by clients, they are the only way left to the origin (closing
        // them for room made the exchanges of the clients let in meet
        // `EMFILE` with nothing to wait for: 502s).
        let v = victims(&mut idle, self.pool.len(), SPARE_FDS, n);
        for &i in &v.clients_first {
            self.close_client(i);
        }
        for o in self.pool.drain(..v.from_pool).collect::<Vec<_>>() {
            self.close_origin(o);
        }
        for &i in &v.clients_then {
            self.close_client(i);
        }
        let closed = v.count();
        self.report.idle_reclaimed += closed as u64;
        closed
    }
}

/// The most clients this process can hold (its descriptor limit, at most
/// 2^20): the client table is reserved at this size once. Pages of it are
/// resident only as clients fill them, where a table grown by doubling left
/// each outgrown copy in the heap (~100 bytes an idle client at 10,000).
fn descriptor_limit() -> usize {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) writes one rlimit into `l`, which lives across the call.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0;
    if ok {
        l.rlim_cur.min(1 << 20) as usize
    } else {
        1024
    }
}

/// The one buffer a send or a paced recv hands back.
fn returned(c: &mut Completion) -> Option<Vec<u8>> {
    c.take_buffers().and_then(|mut bufs| bufs.pop())
}

/// A spare buffer, emptied, or a new one.
fn take_spare(spare: &mut BufferPool) -> Vec<u8> {
    let mut b = spare.take().unwrap_or_default();
    b.clear();
    b
}
