//! The channels records travel through: pipes, Unix socket pairs, TCP loopback
//! connections and eventfds, each a write end (a producer's) and a read end (a
//! consumer's, the one registered in a queue).

use crate::record::{Record, RECORD_LEN};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// What a channel is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelKind {
    /// `pipe2(2)`.
    Pipe,
    /// `socketpair(AF_UNIX, SOCK_STREAM)`.
    Unix,
    /// A TCP connection over 127.0.0.1.
    Tcp,
    /// One `eventfd(2)`, written through a `dup` of it: a counter, not a stream,
    /// and a file that outlives the consumer's descriptor while the producer holds
    /// its copy (epoll's quirk a).
    Eventfd,
}

impl ChannelKind {
    /// Every kind, in the order a consumer cycles through them.
    pub const ALL: [ChannelKind; 4] = [
        ChannelKind::Pipe,
        ChannelKind::Unix,
        ChannelKind::Tcp,
        ChannelKind::Eventfd,
    ];

    /// Whether it carries records (a byte stream) rather than a count.
    pub fn is_stream(self) -> bool {
        self != ChannelKind::Eventfd
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn nonblocking(fd: RawFd) -> io::Result<()> {
    let flags = cvt(unsafe_fcntl(fd, libc::F_GETFL, 0))?;
    cvt(unsafe_fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK)).map(drop)
}

fn unsafe_fcntl(fd: RawFd, cmd: libc::c_int, arg: libc::c_int) -> libc::c_int {
    // SAFETY: fcntl(2) with integer arguments on a descriptor the caller holds.
    unsafe { libc::fcntl(fd, cmd, arg) }
}

/// Opens a channel: `(read end, write end)`, both non-blocking. `listener` is the
/// calling consumer's own (a TCP pair is a connect and an accept on it).
pub fn open(kind: ChannelKind, listener: &TcpListener) -> io::Result<(OwnedFd, OwnedFd)> {
    match kind {
        ChannelKind::Pipe => {
            let mut fds = [0; 2];
            // SAFETY: pipe2(2) writes two descriptors into a live array.
            cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
            // SAFETY: both are new descriptors that nobody else owns.
            Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
        }
        ChannelKind::Unix => {
            let (r, w) = UnixStream::pair()?;
            r.set_nonblocking(true)?;
            w.set_nonblocking(true)?;
            Ok((r.into(), w.into()))
        }
        ChannelKind::Tcp => {
            let w = TcpStream::connect(listener.local_addr()?)?;
            let (r, _) = listener.accept()?;
            w.set_nodelay(true)?;
            r.set_nonblocking(true)?;
            w.set_nonblocking(true)?;
            Ok((r.into(), w.into()))
        }
        ChannelKind::Eventfd => {
            // SAFETY: eventfd(2) takes no pointers.
            let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
            // SAFETY: a new descriptor nobody else owns.
            let r = unsafe { OwnedFd::from_raw_fd(fd) };
            let w = r.try_clone()?;
            nonblocking(w.as_raw_fd())?;
            Ok((r, w))
        }
    }
}

/// A producer's end of one channel instance.
pub struct WriteEnd {
    fd: OwnedFd,
    kind: ChannelKind,
    uid: u32,
    /// Bytes of records not yet written; may start in the middle of a record (a
    /// stream socket can take part of one).
    pending: Vec<u8>,
    /// Bytes the kernel took (streams) or the counter added (eventfd).
    written: u64,
    next_seq: u32,
}

impl WriteEnd {
    /// The write end of channel instance `uid`.
    pub fn new(fd: OwnedFd, kind: ChannelKind, uid: u32) -> WriteEnd {
        WriteEnd {
            fd,
            kind,
            uid,
            pending: Vec::new(),
            written: 0,
            next_seq: 0,
        }
    }

    /// The channel's kind.
    pub fn kind(&self) -> ChannelKind {
        self.kind
    }

    /// Records whose last byte reached the kernel: what a consumer must read.
    pub fn produced(&self) -> u64 {
        if self.kind.is_stream() {
            self.written / RECORD_LEN as u64
        } else {
            self.written
        }
    }

    /// Appends `n` records stamped `now_ns` (none while a backlog of 64 is
    /// waiting) and writes as much as the kernel takes. Returns whether it took
    /// everything (false: the channel is full).
    pub fn write(&mut self, n: u32, now_ns: u64) -> io::Result<bool> {
        if !self.kind.is_stream() {
            let add = n as u64;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd we hold.
            let w = unsafe { libc::write(self.fd.as_raw_fd(), (&add as *const u64).cast(), 8) };
            if w == 8 {
                self.written += add;
                return Ok(true);
            }
            return match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                e => Err(e),
            };
        }
        if self.pending.len() < 64 * RECORD_LEN {
            for _ in 0..n {
                let r = Record {
                    uid: self.uid,
                    seq: self.next_seq,
                    written_ns: now_ns,
                };
                self.next_seq += 1;
                self.pending.extend_from_slice(&r.encode());
            }
        }
        self.flush()
    }

    /// Writes pending bytes until the kernel refuses; true when none are left.
    pub fn flush(&mut self) -> io::Result<bool> {
        let mut done = 0;
        while done < self.pending.len() {
            let rest = &self.pending[done..];
            // SAFETY: writes from a live slice of the given length.
            let w = unsafe { libc::write(self.fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
            if w < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => break,
                    _ => {
                        // The reader is gone: nothing more can be written.
                        self.written += done as u64;
                        self.pending.clear();
                        return Err(e);
                    }
                }
            }
            done += w as usize;
        }
        self.written += done as u64;
        self.pending.drain(..done);
        Ok(self.pending.is_empty())
    }
}

/// What one read pass over a read end found.
#[derive(Debug, Default)]
pub struct Drained {
    /// Records (streams) or counts (eventfd) taken.
    pub taken: u64,
    /// The last read said `EAGAIN`: nothing is left.
    pub empty: bool,
    /// End of file: the writer is gone.
    pub eof: bool,
}

/// A consumer's end of one channel instance: reassembles records and checks that
/// they are this instance's, in order.
pub struct ReadEnd {
    fd: OwnedFd,
    kind: ChannelKind,
    uid: u32,
    /// Bytes of a record not yet complete.
    partial: Vec<u8>,
    /// Records (or, for an eventfd, counts) taken so far: the next expected seq.
    pub consumed: u64,
}

impl ReadEnd {
    /// The read end of channel instance `uid`.
    pub fn new(fd: OwnedFd, kind: ChannelKind, uid: u32) -> ReadEnd {
        ReadEnd {
            fd,
            kind,
            uid,
            partial: Vec::new(),
            consumed: 0,
        }
    }

    /// The descriptor number registered in the queue.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The channel's kind.
    pub fn kind(&self) -> ChannelKind {
        self.kind
    }

    /// The channel instance's uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Gives up the descriptor without closing it (the caller closes it another way).
    pub fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }

    /// Puts a new channel instance behind the same number (`dup2` has already
    /// replaced the file): the old `OwnedFd` is forgotten, not closed.
    pub fn replace_file(&mut self, kind: ChannelKind, uid: u32) {
        self.kind = kind;
        self.uid = uid;
        self.partial.clear();
        self.consumed = 0;
    }

    /// Reads until `EAGAIN`, or until `limit` records were taken, handing each
    /// complete record to `on_record`.
    pub fn read(
        &mut self,
        limit: Option<u64>,
        mut on_record: impl FnMut(Record),
    ) -> io::Result<Drained> {
        let mut out = Drained::default();
        let mut buf = [0u8; 4096];
        loop {
            if limit.is_some_and(|l| out.taken >= l) {
                return Ok(out);
            }
            let want = match (self.kind.is_stream(), limit) {
                (false, _) => 8,
                // A partial read takes whole records only, so the rest stays queued.
                (true, Some(l)) => {
                    ((l - out.taken) as usize * RECORD_LEN - self.partial.len()).min(buf.len())
                }
                (true, None) => buf.len(),
            };
            // SAFETY: reads into a live buffer of at least `want` bytes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), want) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {
                        out.empty = true;
                        return Ok(out);
                    }
                    _ => return Err(e),
                }
            }
            if n == 0 {
                out.eof = true;
                out.empty = true;
                return Ok(out);
            }
            let n = n as usize;
            if !self.kind.is_stream() {
                let count = u64::from_ne_bytes(buf[..8].try_into().expect("eventfd value"));
                self.consumed += count;
                out.taken += count;
                continue;
            }
            let mut bytes = &buf[..n];
            if !self.partial.is_empty() {
                let need = RECORD_LEN - self.partial.len();
                let take = need.min(bytes.len());
                self.partial.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if self.partial.len() == RECORD_LEN {
                    on_record(Record::decode(&self.partial));
                    self.partial.clear();
                    self.consumed += 1;
                    out.taken += 1;
                }
            }
            let mut chunks = bytes.chunks_exact(RECORD_LEN);
            for chunk in &mut chunks {
                on_record(Record::decode(chunk));
                self.consumed += 1;
                out.taken += 1;
            }
            self.partial.extend_from_slice(chunks.remainder());
        }
    }
}
