//! Completions: the kernel does the I/O and hands back results through a shared
//! ring — SEEDS 002's "results in shared memory instead of a system call per event",
//! in its io_uring form. Beside the readiness API ([`EventQueue`](crate::EventQueue)),
//! a [`CompletionRing`] takes operations (each with a caller's token) and
//! [`CompletionRing::get_next_completion`] dequeues their results in batches; one
//! `io_uring_enter` both submits everything queued since the last call and waits.
//! Needs Linux 6.0 (multishot recv); `SINGLE_ISSUER` 6.0, `DEFER_TASKRUN` 6.1;
//! `send_zc` 6.2 (usage reports), `read_multishot` 6.7. Beyond sockets: multishot
//! read of pipes and eventfds, registered (fixed) files ([`Target`], [`Fixed`]),
//! `send_file` (splice through a pooled pipe) and zero-copy `send_zc`.
//!
//! ```no_run
//! use evq::completion::{CompletionRing, Completions, OpKind};
//! use std::os::fd::AsRawFd;
//!
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let mut ring = CompletionRing::new()?;
//! ring.accept_multishot(listener.as_raw_fd(), 0);
//! let mut batch = Completions::with_capacity(64);
//! ring.get_next_completion(&mut batch, None)?;
//! for c in batch.iter() {
//!     if let Some(fd) = c.accepted_fd() {
//!         ring.recv_multishot(fd, fd as u64);
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Quirks of io_uring completions, and what this module does about them
//!
//! a) **A CQE names a request by its `user_data`, and requests outlive their slot.**
//!    `user_data` is `(generation << 32) | slot`; a slot's generation moves on when it
//!    is freed, so an [`OpId`] kept after its operation ended can be cancelled
//!    harmlessly (the cancel answers `ENOENT`) and never hits a newer operation.
//! b) **Memory an SQE points at must stay put until its CQE.** Sends, writevs and
//!    timeouts therefore take *owned* buffers, kept in the slot until the final CQE
//!    (send buffers come back in the completion for reuse). Dropping the ring cancels
//!    everything in flight and waits for the cancellations before freeing memory; if
//!    the kernel does not confirm within two seconds the memory is leaked, not freed
//!    under the kernel's feet.
//! c) **Multishot requests end on their own.** A CQE without `IORING_CQE_F_MORE` ends
//!    the request — at EOF and on errors, but also when the CQ overflowed or (recv)
//!    when the provided-buffer ring ran dry (`ENOBUFS`). Ends that are not the
//!    operation's own (`ENOBUFS`, a final CQE that still carried data or a
//!    connection) are re-armed by the ring under the same [`OpId`], so the caller sees
//!    one unbroken operation; only EOF, real errors and cancels end it for the caller.
//! d) **`ENOBUFS` loses nothing, if the re-arm waits for buffers.** The data stays in
//!    the socket; what must not happen is re-arming at once, which would fail again
//!    and spin. Buffers handed out in a batch are lent back to the kernel at the start
//!    of the next `get_next_completion` (one release store of the ring tail), and
//!    recvs stopped by `ENOBUFS` are re-armed right after that, before the wait. A
//!    batch that holds no buffers frees none, so a dequeue that reaped only `ENOBUFS`
//!    ends recycles and re-arms within the same call.
//! e) **Received data lives in the ring's buffers**, not in the caller's:
//!    [`CompletionRing::received`] borrows the ring, so the borrow checker ends the
//!    loan before the next dequeue recycles it; a completion kept past that carries
//!    an old epoch and `received` answers `None` rather than another connection's
//!    bytes. An idle connection holds no buffer at all (the point of provided buffers).
//! f) **The CQ ring can overflow.** With `IORING_FEAT_NODROP` (required) the kernel
//!    parks extra CQEs and sets `IORING_SQ_CQ_OVERFLOW`; they come back only on an
//!    enter with `GETEVENTS`, which the dequeue makes whenever the flag is up and the
//!    batch has room. CQEs the kernel could not even park (the `overflow` counter)
//!    are unrecoverable: the dequeue then fails with an error saying so.
//! g) **`SINGLE_ISSUER` / `DEFER_TASKRUN` tie the ring to its creating thread**: another
//!    thread's enter fails with `EEXIST`, and deferred completions are posted only
//!    when the owner enters with `GETEVENTS` — so even a zero-timeout dequeue enters.
//!    A [`CompletionRing`] is therefore neither `Send` nor `Sync`: build one per thread.
//!    Flags the kernel refuses are dropped ([`Setup::IfAvailable`]) or reported
//!    ([`Setup::Required`]).
//! h) **Submission is lazy.** Operations only queue SQEs (spilling to a user-space
//!    backlog when the SQ is full); the next dequeue submits them in the same enter
//!    that waits. [`CompletionRing::submit`] flushes without waiting.
//! i) **A request holds a reference to its file**: closing a descriptor (even with
//!    [`CompletionRing::close`]) does not end a multishot recv or accept armed on it;
//!    cancel those first, or shut the socket down. A stream `send` may complete
//!    short; the ring sends the rest itself before completing (one completion per
//!    send, carrying the total). `writev` completes after one attempt, possibly short.
//! j) **Dropping a ring interrupts its creator thread** (see the uring backend's quirk
//!    k): its next blocking call may return `EINTR` once.
//! k) **Multishot read is multishot recv for files, with the file's limits.**
//!    [`CompletionRing::read_multishot`] (`IORING_OP_READ_MULTISHOT`, Linux 6.7) shares
//!    the provided-buffer ring and every rule of quirks c–e; an `ENOBUFS` end reads
//!    nothing, so the re-arm loses no byte. The kernel drives it by polling, so the
//!    file must be pollable: a pipe, an eventfd (each completion is one 8-byte
//!    counter read, which resets the counter), a tty, a socket. A regular file
//!    completes at once with `EBADFD`. On an older kernel the opcode is unknown and
//!    would complete with a bare `EINVAL`; the ring probes its opcodes once when
//!    built, and `read_multishot` refuses up front with an error naming Linux 6.7.
//! l) **A registered-file index is a descriptor number with the same reuse hazard.**
//!    Operations may name a file by its index in the ring's table ([`Fixed`], see
//!    [`CompletionRing::register_files`]), which spares the kernel a descriptor
//!    lookup and reference count per operation. But the kernel resolves the index
//!    only when it issues the request — and this ring issues more requests for an
//!    operation than the caller made (re-arms, send continuations, quirk h's lazy
//!    submission). Were an unregistered index handed straight out again, those
//!    would reach the new file. So the ring counts the live operations naming each
//!    index and hands an index out again only when none does; until then they fail
//!    with `EBADF`, as after a `close`. Unregistering, like closing, does not end a
//!    request the kernel already holds (quirk i). An index that is empty or past
//!    the table fails with `EBADF` (a `close` of one too: the kernel's `EINVAL` and
//!    `ENXIO` for it are mapped). The table dies with the ring.
//!
//!    The ring's own descriptor is *not* registered (`IORING_REGISTER_RING_FDS`):
//!    io-uring 0.7's `Submitter` forgets the registration between calls, so it
//!    would take a hand-written `io_uring_enter`; left for when it is measured to
//!    matter.
//! m) **`send_file` goes through a pipe, and a pipe remembers.** There is no
//!    io_uring sendfile: [`CompletionRing::send_file`] splices file → pipe → socket
//!    (`IORING_OP_SPLICE`), one step at a time (linked steps would hang on a short
//!    read: the pipe has no end of file while we hold its write end). When the
//!    socket fails mid-way — a reset peer — what was spliced in but not out is
//!    still in the pipe, and a pooled pipe would hand those bytes to the *next*
//!    `send_file`'s socket: another connection's data. So a pipe goes back to the
//!    ring's pool only if `FIONREAD` says it is empty; otherwise it is closed
//!    ([`CompletionStats::send_file_pipes_discarded`]). Splice runs in the
//!    kernel's worker threads (io-wq), so a send_file costs a thread hop per step;
//!    pipes are grown to 1 MiB where the per-user pipe limit allows, to take fewer
//!    steps. A file shorter than asked completes with the short count; an error
//!    completes with the error, even after some bytes went. A worker can let go
//!    of its request after the completion was taken; with `DEFER_TASKRUN` the
//!    request, and its reference to the socket, is then freed by task work at
//!    the ring's next entry (the kernel's `io_free_req`), so a socket closed
//!    with `close(2)` right after its `send_file` may stay connected until the
//!    thread next waits on the ring or calls [`CompletionRing::run_kernel_work`]
//!    — a loop does at once; a thread that stops using the ring should close
//!    through it and take that close's completion ([`CompletionRing::close`]),
//!    or enter it once more.
//! n) **A zero-copy send has two ends.** `IORING_OP_SEND_ZC`'s own CQE says how
//!    much was queued; the pages stay pinned until a second CQE with
//!    `IORING_CQE_F_NOTIF` (announced by `IORING_CQE_F_MORE` on the first) — for
//!    TCP, once the peer acknowledged them. Reusing the buffer before that would
//!    change bytes not yet sent. So [`CompletionRing::send_zc`] counts the
//!    notifications each of its requests announced (a short send is continued
//!    with another request, with its own notification) and delivers its one
//!    completion, with the buffer, only after the last; a dropped ring waits for
//!    them too before freeing — and a peer that stops reading keeps the pages
//!    pinned indefinitely (they sit in the send queue), so such a drop ends in
//!    quirk b's leak after two seconds. Zero copy is not free: pinning pages and the extra
//!    CQE cost more than copying a small buffer, and loopback copies anyway
//!    (a local receiver cannot be handed pinned pages): the notification then
//!    carries `IORING_NOTIF_USAGE_ZC_COPIED`, counted in
//!    [`CompletionStats::send_zc_copied`].
//!
//!    Measured (`cargo run --release -p evq --example send_zc_vs_send`: one TCP
//!    loopback connection, one operation in flight, median of 5 alternating
//!    300 ms rounds; Linux 6.18, a 2-core VM under a load average of 5–7 from other
//!    work, so ±30% between runs), send_zc throughput as a share of send's, two
//!    runs: 1 KiB 0.19 / 0.10, 4 KiB 0.11 / 0.12, 16 KiB 0.31 / 0.43, 64 KiB
//!    0.36 / 0.84, 256 KiB 0.87 / 0.59 (send: 0.2 GB/s at 1 KiB to 3–3.6 GB/s at
//!    256 KiB). Every notification said the kernel copied. So on loopback there is
//!    no crossover up to 256 KiB: send_zc pays its bookkeeping and a later
//!    completion and saves nothing. The crossover near 8 KiB reported for real
//!    NICs (compio#771) cannot be checked here; use send_zc only for large
//!    buffers to remote peers, and measure there.
//! o) **A multishot recv can miss a reset that follows bytes.** Seen on Linux
//!    6.18: a TCP peer that sends a few bytes and resets at once can leave the
//!    recv with its data completion (`IORING_CQE_F_MORE` set) and then nothing —
//!    no error, no end — while `poll` on the socket says `POLLERR | POLLHUP`
//!    and `SO_ERROR` holds `ECONNRESET`. About one such peer in 10,000–40,000
//!    under CPU load, with or without `DEFER_TASKRUN` (a C program on liburing
//!    shows the same: not this crate). The likely path: the recv reads the
//!    bytes, TCP's "more to read" hint says the queue is empty (it counts a
//!    FIN, not a reset), so the kernel waits for the next wake-up — which the
//!    reset already spent. A FIN is not missed. Nothing here can see it
//!    without a system call, so the caller decides when one is worth it: a
//!    loop that waits for the rest of a message after such bytes peeks once
//!    (`MSG_PEEK | MSG_DONTWAIT`: an error other than `EAGAIN` means the peer
//!    is gone); a complete message needs no peek, since the reply's send fails
//!    on a dead socket. `evq serve --io completion` and `evq proxy --io
//!    completion` do this for unfinished request heads.
//! p) **With `DEFER_TASKRUN`, the kernel works only while asked for
//!    completions.** A multishot accept or recv whose socket became ready is
//!    finished by task work that runs when the thread enters the kernel to get
//!    events — and [`CompletionRing::get_next_completion`] does not enter while
//!    completions are already queued. A loop working through a long backlog 16
//!    completions at a time (an overloaded server) can so leave new connections
//!    in the listen queue for the whole backlog: 40–140 ms at 3× capacity in
//!    `evq serve --io completion`, each refused connection learning it that
//!    late. [`CompletionRing::run_kernel_work`] has the kernel catch up without
//!    waiting: one system call, for a loop to make every few milliseconds of
//!    its own work.
//! q) **A cancelled accept takes the wake-ups of the one armed after it.** The
//!    kernel wakes one accept per new connection (an accept waits on its
//!    listener as an exclusive waiter), and a cancelled multishot accept stays
//!    on the listener's wait queue until the cancel's work runs — with
//!    `DEFER_TASKRUN`, when the thread next asks for events (quirk p). A
//!    connection arriving meanwhile wakes the dying accept, not a new one armed
//!    beside it; the new one sleeps on, with the connection queued, until
//!    another arrives. Once the listen queue is full none arrives: seen as a
//!    server that stopped accepting for good, listening, 4,097 clients queued.
//!    Arm the replacement after the cancelled accept's last completion (or
//!    have the kernel run the cancel at once with
//!    [`CompletionRing::run_kernel_work`], which narrows the window only).
//! r) **A multishot recv takes all the peer sends, not what the caller can
//!    use.** It stops only when a cancel lands, and with a fast peer the
//!    kernel keeps it running — dozens of buffers per socket in one enter —
//!    so a caller that pauses it at a high-water mark still takes hundreds of
//!    kilobytes past it, and a caller closing the connection takes them
//!    after it has stopped caring (`evq proxy --io completion` relaying large
//!    bodies to clients that left: ~400 KB per exchange, most after the
//!    close was asked). For a stream the caller paces — one whose data must
//!    go somewhere at the pace of something else — [`CompletionRing::recv_into`]
//!    is one recv into the caller's buffer: the kernel takes nothing more
//!    until the caller asks again, and the peer is held back by TCP's window.
//!    Multishot stays the right form for many connections sending small
//!    messages (an idle connection holds no buffer); `recv_into` holds the
//!    caller's buffer while it waits.
//! s) **A fast loop wakes for every completion.** A wait returns at the first
//!    completion, and a loop that handles one in a microsecond or two is back
//!    asleep before the next arrives: `evq load --io completion` against one
//!    server made 0.66 `io_uring_enter` per reply, a sleep and a wake-up each,
//!    where the readiness loop — slower per event — finds ~100 ready per
//!    `epoll_wait`. [`CompletionRing::get_next_completion_gathered`] lets the
//!    kernel gather a batch ([`Gather`]: `min_complete` with `min_wait_usec`,
//!    Linux 6.12): the thread sleeps until `at_least` completions are in or
//!    `within` has passed with one. The price is that much delay on the
//!    first completion of a batch, so a caller asks for a batch only when
//!    that many are on their way (the load generator: a quarter of the
//!    replies awaited, within 50 µs — 0.07 enters per reply, and 0.82–0.89×
//!    the readiness loop's CPU per reply against nginx where it was 0.99×).
//!    A kernel without it (before 6.12) refuses a nonzero
//!    `min_wait_usec`; there a gathered wait is a plain one
//!    ([`RingSetup::gathers`]).

/// Builds an SQE on a [`Target`]: `$f` is io-uring's `types::Fd` or `types::Fixed`
/// (every opcode builder is generic over the two), `$build` the builder call.
macro_rules! on_target {
    ($target:expr, |$f:ident| $build:expr) => {
        match $target {
            Target::Fd(raw) => {
                let $f = types::Fd(raw);
                $build
            }
            Target::Fixed(Fixed(index)) => {
                let $f = types::Fixed(index);
                $build
            }
        }
    };
}

mod batch;
mod buffer_ring;
mod fixed;
mod gather;
mod send_file;
mod send_zc;
mod setup;

pub use batch::{Completion, Completions, OpId, OpKind};
pub use fixed::{Fixed, Target};
pub use gather::Gather;
pub use setup::{CompletionOptions, RingSetup, Setup};

use crate::table_shrink;
use buffer_ring::BufferRing;
use fixed::FixedTable;
use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};
use send_file::{SendFile, SplicePipe};
use send_zc::ZeroCopy;
use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Operation slots per chunk of the slot table.
const SLOT_CHUNK: usize = 256;
/// `user_data` of the ring's own cancel-everything request at drop.
const INTERNAL: u64 = u64::MAX;
/// The buffer group id used for receives.
const RECV_GROUP: u16 = 0;

/// Counters of what the ring did on the caller's behalf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompletionStats {
    /// `io_uring_enter` calls made by the ring.
    pub enters: u64,
    /// Multishot recvs re-armed after the buffer ring ran dry (`ENOBUFS`).
    pub enobufs_rearms: u64,
    /// Multishot requests re-armed after ending on their own with a result.
    pub multishot_rearms: u64,
    /// Enters made to bring back CQEs the kernel parked while the CQ was full.
    pub cq_overflow_flushes: u64,
    /// Short sends continued by the ring.
    pub partial_sends: u64,
    /// Splice pipes closed instead of pooled because a failed or cancelled
    /// `send_file` left bytes in them (quirk m).
    pub send_file_pipes_discarded: u64,
    /// `send_zc` notifications saying the kernel copied the data after all
    /// (`IORING_NOTIF_USAGE_ZC_COPIED`; loopback always does).
    pub send_zc_copied: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpState {
    /// The kernel has (or the SQ/backlog holds) the request.
    Submitted,
    /// A multishot request that ended on its own, waiting to be re-armed.
    AwaitingRearm,
}

struct Op {
    token: u64,
    kind: OpKind,
    target: Target,
    state: OpState,
    cancelled: bool,
    /// Send/writev payload, kept until the final CQE (quirk b).
    bufs: Vec<Vec<u8>>,
    iovecs: Vec<libc::iovec>,
    sent: usize,
    timespec: Option<Box<types::Timespec>>,
    /// For `SendFile`: the file side, and the pipe between.
    send_file: Option<Box<SendFile>>,
    /// For `SendZc`: the sends and notifications still due (quirk n).
    zc: ZeroCopy,
}

/// An io_uring owned by one thread, running accept, recv, recv_into, read, send, send_zc,
/// send_file, writev, close, timeout and cancel operations and handing back their results in batches.
///
/// Every operation takes a caller's `token` (returned in its completions) and
/// returns an [`OpId`] (for [`cancel`](Self::cancel)). See the module docs for the
/// quirks this type handles.
pub struct CompletionRing {
    // Field order is drop order: the ring (and every request in it) goes first.
    ring: IoUring,
    /// Dropped by hand in `Drop`, and only once the kernel is done with it (quirk b).
    buffers: ManuallyDrop<BufferRing>,
    /// Operation slots in fixed chunks of [`SLOT_CHUNK`]: growth never copies
    /// nor doubles them, so a ring holding one multishot recv per idle
    /// connection pays one slot per connection, not up to two.
    slots: Vec<Vec<Option<Op>>>,
    /// Slots made so far (in `slots`' chunks).
    slot_count: usize,
    generations: Vec<u32>,
    free: Vec<u32>,
    live: usize,
    backlog: VecDeque<squeue::Entry>,
    /// Buffers handed out in the current batch, lent back at the next dequeue.
    lent: Vec<u16>,
    rearm: Vec<u64>,
    /// CQEs copied out of the ring before handling (user_data, result, flags).
    scratch: Vec<(u64, i32, u32)>,
    synthetic: VecDeque<Completion>,
    epoch: u64,
    setup: RingSetup,
    /// Which registered-file indices are in use (quirk l).
    fixed: FixedTable,
    /// send_zc asks for usage reports (Linux 6.2); cleared the first time the
    /// kernel refuses the flag, and the send goes again without it (quirk n).
    zc_report: bool,
    /// Empty pipes for `send_file`, kept for reuse (quirk m).
    pipes: Vec<SplicePipe>,
    /// The opcodes this kernel has, asked once at construction.
    probe: Probe,
    stats: CompletionStats,
    /// Quirk g: the ring belongs to the thread that built it.
    _not_send: PhantomData<*const ()>,
}

impl CompletionRing {
    /// A ring with [`CompletionOptions::default`].
    pub fn new() -> io::Result<Self> {
        Self::with_options(CompletionOptions::default())
    }

    /// A ring with the given sizes and setup flags; every field is range-checked.
    pub fn with_options(options: CompletionOptions) -> io::Result<Self> {
        options.validate()?;
        let (ring, setup) = setup::build(&options)?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        let buffers = BufferRing::register(
            &ring,
            RECV_GROUP,
            options.buffers as u16,
            options.buffer_size,
        )?;
        Ok(CompletionRing {
            ring,
            buffers: ManuallyDrop::new(buffers),
            slots: Vec::new(),
            slot_count: 0,
            generations: Vec::new(),
            free: Vec::new(),
            live: 0,
            backlog: VecDeque::new(),
            lent: Vec::new(),
            rearm: Vec::new(),
            scratch: Vec::new(),
            synthetic: VecDeque::new(),
            epoch: 0,
            setup,
            fixed: FixedTable::default(),
            zc_report: true,
            pipes: Vec::new(),
            probe,
            stats: CompletionStats::default(),
            _not_send: PhantomData,
        })
    }

    /// The setup flags this ring got from the kernel.
    pub fn setup(&self) -> RingSetup {
        self.setup
    }

    /// What the ring did on the caller's behalf so far.
    pub fn stats(&self) -> CompletionStats {
        self.stats
    }

    /// Operations submitted whose final completion has not been dequeued yet.
    pub fn in_flight(&self) -> usize {
        self.live
    }

    /// Number of receive buffers, and bytes per buffer.
    pub fn buffer_geometry(&self) -> (u32, u32) {
        (self.buffers.count() as u32, self.buffers.buffer_size())
    }

    /// Multishot accept on a listening socket: one completion per connection, whose
    /// [`Completion::accepted_fd`] the caller owns (close-on-exec, blocking mode —
    /// io_uring does not need non-blocking sockets).
    pub fn accept_multishot(&mut self, listener: impl Into<Target>, token: u64) -> OpId {
        let id = self.insert(Op::new(token, OpKind::Accept, listener.into()));
        self.arm(id);
        OpId(id)
    }

    /// Multishot recv into the provided-buffer ring: one completion per arrival, with
    /// the data readable through [`received`](Self::received); a result of 0 means the
    /// peer closed its side and ends the operation.
    pub fn recv_multishot(&mut self, fd: impl Into<Target>, token: u64) -> OpId {
        let id = self.insert(Op::new(token, OpKind::Recv, fd.into()));
        self.arm(id);
        OpId(id)
    }

    /// One recv into the spare capacity of `buf` — at most `buf.capacity() -
    /// buf.len()` bytes, appended after what it already holds — for a stream the
    /// caller paces: nothing more is taken from the socket until the caller asks
    /// again, so a fast sender is held back by TCP's window rather than by a
    /// cancel racing a multishot recv (quirk r). The completion
    /// ([`OpKind::RecvInto`]) carries the count (0: the peer closed its side)
    /// and hands `buf` back, grown by it ([`Completion::take_buffers`]); the
    /// buffer is the ring's until then (quirk b).
    ///
    /// A `buf` with no spare capacity completes at once with `EINVAL`: a recv
    /// of zero bytes would read as end of file.
    pub fn recv_into(&mut self, fd: impl Into<Target>, buf: Vec<u8>, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::RecvInto, fd.into());
        let room = buf.capacity() - buf.len();
        op.bufs.push(buf);
        let id = self.insert(op);
        if room == 0 {
            self.synthesize(id, -libc::EINVAL);
            return OpId(id);
        }
        let b = &mut self.op_mut(id).bufs[0];
        let at = b.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        let len = room.min(u32::MAX as usize) as u32;
        let target = self.op(id).target;
        let e = on_target!(target, |f| opcode::Recv::new(f, at, len).build()).user_data(id);
        self.push(e);
        OpId(id)
    }

    /// Multishot read (`IORING_OP_READ_MULTISHOT`, Linux 6.7) of a descriptor that is
    /// not a socket — a pipe, an eventfd, a tty — into the same provided-buffer ring
    /// as [`recv_multishot`](Self::recv_multishot), with the same rules: one
    /// [`OpKind::Read`] completion per read, the data through
    /// [`received`](Self::received), `ENOBUFS` re-armed without losing data, and the
    /// operation ended by end of file (result 0), an error or a cancel. Reads go
    /// from the file's current position (offset -1), as `read(2)` does.
    ///
    /// The kernel requires a file it can poll: a regular file completes with `EBADFD`
    /// (quirk k).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Unsupported`], saying so, where the kernel lacks multishot
    /// read (older than 6.7; it would otherwise complete with a bare `EINVAL`). The
    /// ring asks the kernel once, when it is built (`IORING_REGISTER_PROBE`).
    pub fn read_multishot(&mut self, fd: impl Into<Target>, token: u64) -> io::Result<OpId> {
        if !self.probe.is_supported(opcode::ReadMulti::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel lacks multishot read (IORING_OP_READ_MULTISHOT needs Linux 6.7)",
            ));
        }
        let id = self.insert(Op::new(token, OpKind::Read, fd.into()));
        self.arm(id);
        Ok(OpId(id))
    }

    /// Sends all of `data` (`MSG_NOSIGNAL`: a closed peer is `EPIPE`, not a signal),
    /// continuing short sends itself; the completion carries the total and hands
    /// `data` back ([`Completion::take_buffers`]).
    pub fn send(&mut self, fd: impl Into<Target>, data: Vec<u8>, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::Send, fd.into());
        op.bufs.push(data);
        let id = self.insert(op);
        self.push_send(id);
        OpId(id)
    }

    /// One `writev` of `bufs` (may complete short; the count says how much went).
    pub fn writev(&mut self, fd: impl Into<Target>, bufs: Vec<Vec<u8>>, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::Writev, fd.into());
        op.iovecs = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        op.bufs = bufs;
        let id = self.insert(op);
        let o = self.op(id);
        let (iov, n) = (o.iovecs.as_ptr(), o.iovecs.len() as u32);
        let e = on_target!(o.target, |f| opcode::Writev::new(f, iov, n).build()).user_data(id);
        self.push(e);
        OpId(id)
    }

    /// Connects the socket `fd` to `addr` (`IORING_OP_CONNECT`): the completion's
    /// result is 0 once the connection is up, or the error `connect(2)` would give
    /// (`ECONNREFUSED`, `ETIMEDOUT`, `ENETUNREACH`...). The socket may be blocking
    /// or not: the ring waits for the handshake either way. The address is kept by
    /// the ring until the completion (quirk b).
    pub fn connect(&mut self, fd: impl Into<Target>, addr: SocketAddr, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::Connect, fd.into());
        op.bufs.push(sockaddr_bytes(addr));
        let id = self.insert(op);
        let o = self.op(id);
        let (ptr, len) = (
            o.bufs[0].as_ptr().cast::<libc::sockaddr>(),
            o.bufs[0].len() as libc::socklen_t,
        );
        let e = on_target!(o.target, |f| opcode::Connect::new(f, ptr, len).build()).user_data(id);
        self.push(e);
        OpId(id)
    }

    /// Closes `fd` through the ring. The caller gives up the descriptor now. A
    /// [`Fixed`] index is taken out of the registered-file table (the file closes
    /// when no operation holds it any more); the index is handed out again once the
    /// close has completed and nothing names it.
    pub fn close(&mut self, fd: impl Into<Target>, token: u64) -> OpId {
        let target = fd.into();
        let id = self.insert(Op::new(token, OpKind::Close, target));
        let e = on_target!(target, |f| opcode::Close::new(f).build());
        self.push(e.user_data(id));
        OpId(id)
    }

    /// A timeout completing after `after` with result 0 (or `ECANCELED`).
    pub fn timeout(&mut self, after: Duration, token: u64) -> OpId {
        let mut op = Op::new(token, OpKind::Timeout, Target::Fd(-1));
        op.timespec = Some(Box::new(types::Timespec::from(after)));
        let id = self.insert(op);
        let ts: *const types::Timespec = &**self.op(id).timespec.as_ref().expect("just set");
        self.push(opcode::Timeout::new(ts).build().user_data(id));
        OpId(id)
    }

    /// A no-op that completes at once with result 0.
    pub fn nop(&mut self, token: u64) -> OpId {
        let id = self.insert(Op::new(token, OpKind::Nop, Target::Fd(-1)));
        self.push(opcode::Nop::new().build().user_data(id));
        OpId(id)
    }

    /// Cancels `target`. The cancel completes (with `token`) with 0 if the target was
    /// found, `ENOENT` if it had already finished, `EALREADY` if it was running and
    /// could not be stopped; the target itself then completes with `ECANCELED` (or
    /// with its own result, if it won the race).
    pub fn cancel(&mut self, target: OpId, token: u64) -> OpId {
        let id = self.insert(Op::new(token, OpKind::Cancel, Target::Fd(-1)));
        match self.live_op(target.0).map(|o| o.state) {
            None => self.synthesize(id, -libc::ENOENT),
            Some(OpState::AwaitingRearm) => {
                // Not in the kernel: end it here (quirk c), and the cancel succeeds.
                self.rearm.retain(|&r| r != target.0);
                self.synthesize(target.0, -libc::ECANCELED);
                self.synthesize(id, 0);
            }
            Some(OpState::Submitted) => {
                self.op_mut(target.0).cancelled = true;
                let e = opcode::AsyncCancel::new(target.0).build().user_data(id);
                self.push(e);
            }
        }
        OpId(id)
    }

    /// Submits queued operations and has the kernel finish the work it holds
    /// for this ring — accepts and receives whose sockets are ready — without
    /// waiting for any completion (quirk p). Completions it makes come with the
    /// next [`CompletionRing::get_next_completion`]. One system call.
    pub fn run_kernel_work(&mut self) -> io::Result<()> {
        self.flush_backlog();
        self.stats.enters += 1;
        // Asking for one completion with a zero timeout sets GETEVENTS, which
        // runs the deferred work, and returns at once either way.
        let zero = types::Timespec::new();
        let args = types::SubmitArgs::new().timespec(&zero);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(()),
            Err(e) if busy(&e) || e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Submits queued operations without waiting for any.
    pub fn submit(&mut self) -> io::Result<()> {
        self.flush_backlog();
        self.stats.enters += 1;
        match self.ring.submit() {
            Ok(_) => Ok(()),
            Err(e) if busy(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The data of a `Recv` or `Read` completion from the latest dequeue; `None` for other
    /// completions and for ones kept past a later dequeue (quirk e).
    pub fn received(&self, c: &Completion) -> Option<&[u8]> {
        let (bid, len) = c.buffer?;
        (c.epoch_matches(self.epoch)).then(|| self.buffers.data(bid, len))
    }

    /// Fills `out` with up to its capacity of completions, waiting up to `timeout`
    /// (`None`: until at least one) for the first. Submits everything queued first,
    /// lends the previous batch's receive buffers back and re-arms receives that ran
    /// out of buffers. Returns the number of completions.
    pub fn get_next_completion(
        &mut self,
        out: &mut Completions,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.get_next_completion_gathered(out, timeout, Gather::NONE)
    }

    /// [`CompletionRing::get_next_completion`], but a wait that has to sleep
    /// returns only once `gather` has its batch — `at_least` completions, or
    /// its `within` passed with one (quirk s) — or at `timeout`. Completions
    /// already in hand return at once, as many as there are. On a kernel
    /// without batch waits ([`RingSetup::gathers`] false) it is
    /// `get_next_completion`.
    pub fn get_next_completion_gathered(
        &mut self,
        out: &mut Completions,
        timeout: Option<Duration>,
        gather: Gather,
    ) -> io::Result<usize> {
        let gather = if self.setup.gathers {
            gather
        } else {
            Gather::NONE
        };
        out.items.clear();
        self.epoch += 1;
        self.recycle_and_rearm();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut entered = false;
        let mut flush_fruitless = false;
        loop {
            while out.items.len() < out.capacity {
                match self.synthetic.pop_front() {
                    Some(mut c) => {
                        c.epoch = self.epoch;
                        out.items.push(c);
                    }
                    None => break,
                }
            }
            self.flush_backlog();
            let before = out.items.len();
            self.reap(out)?;
            if flush_fruitless && out.items.len() == before {
                flush_fruitless = false;
            } else if out.items.len() < out.capacity && self.ring.submission().cq_overflow() {
                // Quirk f: bring the parked CQEs back and reap again.
                flush_fruitless = true;
                self.stats.cq_overflow_flushes += 1;
                self.stats.enters += 1;
                match self.ring.submit_and_wait(0) {
                    Ok(_) => {}
                    Err(e) if busy(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                continue;
            }
            if !out.items.is_empty() {
                if !self.ring.submission().is_empty() {
                    self.submit()?;
                }
                break;
            }
            // Nothing yet: nothing is lent either, so recvs stopped by ENOBUFS can
            // go again now (quirk d).
            self.recycle_and_rearm();
            let wait = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() && entered {
                        break;
                    }
                    Some(left)
                }
            };
            self.flush_backlog();
            entered = true;
            self.stats.enters += 1;
            let ts = types::Timespec::from(wait.unwrap_or_default());
            let (want, min_wait_usec) = gather.for_wait(wait);
            let until = types::SubmitArgs::new()
                .timespec(&ts)
                .min_wait_usec(min_wait_usec);
            let forever = types::SubmitArgs::new().min_wait_usec(min_wait_usec);
            let args = if wait.is_none() { &forever } else { &until };
            match self.ring.submitter().submit_with_args(want, args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                Err(e) if busy(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out.items.len())
    }

    fn recycle_and_rearm(&mut self) {
        if !self.lent.is_empty() {
            for bid in self.lent.drain(..) {
                self.buffers.push(bid);
            }
            self.buffers.publish();
        }
        for id in std::mem::take(&mut self.rearm) {
            if self.live_op(id).is_some() {
                self.op_mut(id).state = OpState::Submitted;
                self.arm(id);
            }
        }
    }

    /// Moves CQEs into `out` until it is full or the CQ is empty.
    fn reap(&mut self, out: &mut Completions) -> io::Result<()> {
        let lost = self.ring.completion().overflow();
        if lost != 0 {
            return Err(io::Error::other(format!(
                "io_uring dropped {lost} completions the kernel could not park (quirk f)"
            )));
        }
        loop {
            let room = out.capacity - out.items.len();
            if room == 0 {
                break;
            }
            self.scratch.clear();
            // One view of the CQ per pass: its head is published once, on drop.
            self.scratch.extend(
                self.ring
                    .completion()
                    .take(room)
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            if self.scratch.is_empty() {
                break;
            }
            for i in 0..self.scratch.len() {
                let (id, result, flags) = self.scratch[i];
                if let Some(c) = self.complete(id, result, flags) {
                    out.items.push(c);
                }
            }
        }
        Ok(())
    }

    /// Turns one CQE into a caller's completion, or handles it inside (re-arm,
    /// send continuation).
    fn complete(&mut self, id: u64, result: i32, flags: u32) -> Option<Completion> {
        if id == INTERNAL || self.live_op(id).is_none() {
            return None;
        }
        let more = cqueue::more(flags);
        let op = self.op(id);
        let (kind, cancelled, token) = (op.kind, op.cancelled, op.token);
        let mut buffer = None;
        let mut returned = None;
        let mut result = result;
        let mut goes_on = false;
        match kind {
            OpKind::Accept | OpKind::Recv | OpKind::Read => {
                if let Some(bid) = cqueue::buffer_select(flags) {
                    self.lent.push(bid);
                    buffer = Some((bid, result.max(0) as u32));
                }
                let ended_by_kernel =
                    !more && (result > 0 || (kind == OpKind::Accept && result == 0));
                if result == -libc::ENOBUFS && kind != OpKind::Accept {
                    if cancelled {
                        result = -libc::ECANCELED;
                    } else {
                        self.stats.enobufs_rearms += 1;
                        self.schedule_rearm(id);
                        return None;
                    }
                } else if more {
                    goes_on = true;
                } else if ended_by_kernel && !cancelled {
                    self.stats.multishot_rearms += 1;
                    self.schedule_rearm(id);
                    goes_on = true;
                }
            }
            OpKind::Send => {
                let total = self.op(id).bufs[0].len();
                if result > 0 {
                    let op = self.op_mut(id);
                    op.sent += result as usize;
                    if op.sent < total && !cancelled {
                        self.stats.partial_sends += 1;
                        self.push_send(id);
                        return None;
                    }
                }
                let sent = self.op(id).sent;
                if result >= 0 || sent > 0 {
                    result = sent as i32;
                }
            }
            OpKind::RecvInto => {
                if result > 0 {
                    let b = &mut self.op_mut(id).bufs[0];
                    let filled = b.len() + result as usize;
                    assert!(filled <= b.capacity(), "recv_into: the kernel over-ran");
                    // SAFETY: the kernel wrote `result` bytes into the spare
                    // capacity the SQE named (`recv_into`), just checked to fit.
                    unsafe { b.set_len(filled) };
                }
            }
            OpKind::Timeout => {
                if result == -libc::ETIME {
                    result = 0;
                }
            }
            OpKind::SendZc => match self.send_zc_cqe(id, result, flags) {
                Some(last) => result = last,
                None => return None,
            },
            OpKind::SendFile => match self.send_file_step(id, result) {
                Some(last) => result = last,
                None => return None,
            },
            OpKind::Close => {
                let empty = [-libc::EINVAL, -libc::ENXIO].contains(&result);
                if empty && matches!(self.op(id).target, Target::Fixed(_)) {
                    // The kernel says ENXIO (no table) or EINVAL (past it) where
                    // every other operation says EBADF: one answer (quirk l).
                    result = -libc::EBADF;
                }
            }
            OpKind::Writev | OpKind::Connect | OpKind::Cancel | OpKind::Nop => {}
        }
        if !goes_on {
            let op = self.remove(id);
            if matches!(
                kind,
                OpKind::Send | OpKind::SendZc | OpKind::Writev | OpKind::RecvInto
            ) {
                returned = Some(op.bufs);
            }
        }
        Some(Completion {
            token,
            op: OpId(id),
            kind,
            result,
            more: goes_on,
            buffer,
            returned,
            epoch: self.epoch,
        })
    }

    fn schedule_rearm(&mut self, id: u64) {
        self.op_mut(id).state = OpState::AwaitingRearm;
        self.rearm.push(id);
    }

    /// Queues the (multishot) request for an accept, recv or read op.
    fn arm(&mut self, id: u64) {
        let o = self.op(id);
        let group = self.buffers.group();
        let e = match o.kind {
            OpKind::Accept => on_target!(o.target, |f| opcode::AcceptMulti::new(f)
                .flags(libc::SOCK_CLOEXEC)
                .build()),
            OpKind::Recv => on_target!(o.target, |f| opcode::RecvMulti::new(f, group).build()),
            // Length 0: each read fills at most one whole provided buffer.
            OpKind::Read => {
                let e = on_target!(o.target, |f| opcode::ReadMulti::new(f, 0, group)
                    .offset(u64::MAX)
                    .build());
                // io-uring 0.7.15's ReadMulti overwrites the SQE flags with
                // BUFFER_SELECT, dropping FIXED_FILE: the index would be read as a
                // plain descriptor number (index 0 = stdin). Put it back.
                match o.target {
                    Target::Fixed(_) => e.flags(squeue::Flags::FIXED_FILE),
                    Target::Fd(_) => e,
                }
            }
            other => unreachable!("arm on {other:?}"),
        };
        self.push(e.user_data(id));
    }

    fn push_send(&mut self, id: u64) {
        let o = self.op(id);
        let rest = &o.bufs[0][o.sent..];
        let (ptr, len) = (rest.as_ptr(), rest.len() as u32);
        let e = on_target!(o.target, |f| opcode::Send::new(f, ptr, len)
            .flags(libc::MSG_NOSIGNAL)
            .build())
        .user_data(id);
        self.push(e);
    }

    fn push(&mut self, e: squeue::Entry) {
        if self.backlog.is_empty() {
            // SAFETY: every pointer in our SQEs points into memory the op's slot owns
            // until its final CQE (quirk b), or into the buffer ring (until drop).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
        }
        self.backlog.push_back(e);
    }

    fn flush_backlog(&mut self) {
        while let Some(e) = self.backlog.front() {
            // SAFETY: as in `push`.
            if unsafe { self.ring.submission().push(e) }.is_err() {
                self.stats.enters += 1;
                match self.ring.submit() {
                    Ok(_) => {}
                    // Quirk f: the kernel wants its CQ drained first; the next
                    // dequeue pass reaps and comes back here.
                    Err(_) => return,
                }
                // SAFETY: as in `push`.
                if unsafe { self.ring.submission().push(e) }.is_err() {
                    return;
                }
            }
            self.backlog.pop_front();
        }
        // A crowd's burst of requests is not a reason to keep its room.
        if self.backlog.capacity() > table_shrink::SHRINK_MIN {
            self.backlog = VecDeque::new();
        }
    }

    fn synthesize(&mut self, id: u64, result: i32) {
        let op = self.remove(id);
        self.synthetic.push_back(Completion {
            token: op.token,
            op: OpId(id),
            kind: op.kind,
            result,
            more: false,
            buffer: None,
            returned: matches!(
                op.kind,
                OpKind::Send | OpKind::SendZc | OpKind::Writev | OpKind::RecvInto
            )
            .then_some(op.bufs),
            epoch: 0,
        });
    }

    fn insert(&mut self, op: Op) -> u64 {
        self.live += 1;
        self.fixed.hold(op.target);
        if let Some(sf) = &op.send_file {
            self.fixed.hold(sf.file());
        }
        let slot = match table_shrink::pop_free(&mut self.free, self.slot_count, |i| {
            self.slots[i / SLOT_CHUNK][i % SLOT_CHUNK].is_none()
        }) {
            Some(s) => s,
            None => {
                if self.slot_count == self.slots.len() * SLOT_CHUNK {
                    let mut chunk = Vec::with_capacity(SLOT_CHUNK);
                    chunk.resize_with(SLOT_CHUNK, || None);
                    self.slots.push(chunk);
                }
                // A slot made again after a cut keeps counting its
                // generations (they are never cut).
                if self.slot_count == self.generations.len() {
                    self.generations.reserve_exact(SLOT_CHUNK);
                    self.generations.push(0);
                }
                self.slot_count += 1;
                self.slot_count - 1
            }
        };
        *self.slot_mut(slot) = Some(op);
        (self.generations[slot] as u64) << 32 | slot as u64
    }

    /// The operation slots are as many as the highest in use, and at least
    /// `table_shrink::SHRINK_MIN` (`table_shrink`):
    /// once a crowd's receives have ended, whole chunks above the survivors
    /// go. Their generations stay, so an id of a cut slot never matches the
    /// slot made again.
    fn cut_vacant_slots(&mut self) {
        while self.slot_count > table_shrink::SHRINK_MIN
            && self.slot_mut(self.slot_count - 1).is_none()
        {
            self.slot_count -= 1;
        }
        // One chunk is kept above the highest slot in use: a top slot taken
        // and released by every send would otherwise make and drop a chunk
        // each time (20% of a server's replies/s at 2,000 cold connections).
        self.slots
            .truncate(self.slot_count.div_ceil(SLOT_CHUNK) + 1);
        table_shrink::trim_free_list(&mut self.free, self.slot_count);
    }

    fn live_op(&self, id: u64) -> Option<&Op> {
        let slot = (id & u32::MAX as u64) as usize;
        if self.generations.get(slot).copied() != Some((id >> 32) as u32) {
            return None;
        }
        self.slots[slot / SLOT_CHUNK][slot % SLOT_CHUNK].as_ref()
    }

    fn slot_mut(&mut self, slot: usize) -> &mut Option<Op> {
        &mut self.slots[slot / SLOT_CHUNK][slot % SLOT_CHUNK]
    }

    fn op(&self, id: u64) -> &Op {
        self.live_op(id).expect("live op")
    }

    fn op_mut(&mut self, id: u64) -> &mut Op {
        let slot = (id & u32::MAX as u64) as usize;
        self.slot_mut(slot).as_mut().expect("live op")
    }

    fn remove(&mut self, id: u64) -> Op {
        let slot = (id & u32::MAX as u64) as usize;
        let mut op = self.slot_mut(slot).take().expect("live op");
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        self.free.push(slot as u32);
        self.live -= 1;
        if slot + 1 == self.slot_count {
            self.cut_vacant_slots();
        }
        if let (OpKind::Close, Target::Fixed(f)) = (op.kind, op.target) {
            // Whatever the result, the kernel's entry is empty now (quirk l).
            self.fixed.vacate(f.0);
        }
        self.fixed.release(op.target);
        if let Some(sf) = op.send_file.take() {
            self.fixed.release(sf.file());
            self.retire_pipe(*sf);
        }
        op
    }
}

impl Op {
    fn new(token: u64, kind: OpKind, target: Target) -> Self {
        Op {
            token,
            kind,
            target,
            state: OpState::Submitted,
            cancelled: false,
            bufs: Vec::new(),
            iovecs: Vec::new(),
            sent: 0,
            timespec: None,
            send_file: None,
            zc: ZeroCopy::default(),
        }
    }
}

fn busy(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EAGAIN))
}

impl Drop for CompletionRing {
    fn drop(&mut self) {
        // Quirk b: no buffer may be freed while the kernel can still write to it.
        let in_kernel = |r: &Self| {
            r.slots
                .iter()
                .flatten()
                .flatten()
                .any(|o| o.state == OpState::Submitted)
        };
        if in_kernel(self) {
            self.backlog.clear();
            let cancel_all = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(INTERNAL);
            // SAFETY: the cancel request points at no memory.
            let _ = unsafe { self.ring.submission().push(&cancel_all) };
            let give_up = Instant::now() + Duration::from_secs(2);
            while in_kernel(self) && Instant::now() < give_up {
                let ts = types::Timespec::from(Duration::from_millis(10));
                let args = types::SubmitArgs::new().timespec(&ts);
                let _ = self.ring.submitter().submit_with_args(1, &args);
                loop {
                    let next = self.ring.completion().next();
                    let Some(cqe) = next else { break };
                    let (id, flags) = (cqe.user_data(), cqe.flags());
                    if id == INTERNAL || self.live_op(id).is_none() {
                        continue;
                    }
                    if self.op(id).kind == OpKind::SendZc {
                        // Quirk n: the pages are the kernel's until the last
                        // notification, whatever the send's own CQE said.
                        self.op_mut(id).zc.drop_cqe(flags);
                        if !self.op(id).zc.busy() {
                            self.remove(id);
                        }
                    } else if !cqueue::more(flags) {
                        self.remove(id);
                    }
                }
            }
        }
        if in_kernel(self) {
            // Leak rather than free memory the kernel may still write into.
            std::mem::forget(std::mem::take(&mut self.slots));
        } else {
            // SAFETY: dropped once, here, and never used again; nothing in the
            // kernel refers to the buffers any more.
            unsafe { ManuallyDrop::drop(&mut self.buffers) };
        }
    }
}

/// `addr` as the bytes of a `sockaddr_in` or `sockaddr_in6`, for a request that
/// points the kernel at them.
fn sockaddr_bytes(addr: SocketAddr) -> Vec<u8> {
    fn bytes_of<T>(v: &T) -> Vec<u8> {
        // SAFETY: `v` is a live, initialised plain-data sockaddr struct of
        // `size_of::<T>()` bytes (padding zeroed by `mem::zeroed` below).
        unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        }
        .to_vec()
    }
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            bytes_of(&sin)
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            bytes_of(&sin6)
        }
    }
}

#[cfg(test)]
mod slot_tests;
