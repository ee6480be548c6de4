//! [`Async<T>`]: any descriptor as an async I/O object on evq's reactor.

use crate::reactor::Reactor;
use crate::source::{Direction, Rearm, Source};
use futures_io::{AsyncRead, AsyncWrite};
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

/// An I/O object (a socket, a pipe, any pollable descriptor) registered with evq's
/// reactor.
///
/// The descriptor is put in non-blocking mode and registered **once**, in evq's
/// [`Mode::Event`](evq::Mode::Event) (the paper's event semantics), for the handle's
/// whole life: reads and writes that meet `WouldBlock` wait for the next event,
/// and nothing is re-armed per operation. On a backend without event mode the
/// registration is oneshot and re-armed when a task waits (see
/// [`reactor_stats`](crate::reactor_stats)).
///
/// Dropping the handle revokes the registration *before* the descriptor is closed,
/// so the number is never revoked after it has been reused. If another thread is
/// blocked in the reactor's queue at that moment, the drop hands it the revoke
/// (waking it through the notifier) and waits until it is done — microseconds.
///
/// Handles made by this crate's constructors (`accept`, `connect`, `pair`) know
/// their object is a std stream socket whose reads and writes are one system call
/// each, so a short transfer ends the wait for readiness without the `EAGAIN`
/// call that would confirm it. A handle made by [`Async::new`] makes no such
/// assumption about `T` (a type may buffer in user space), and confirms.
///
/// Several tasks may share a handle (`&Async<T>`, `Arc<Async<T>>`): any number may
/// wait in [`readable`](Async::readable)/[`writable`](Async::writable), and one
/// reader and one writer may use the I/O traits at once (like tokio and async-io,
/// the I/O-trait path keeps one waker per direction: the last task to poll it).
///
/// ```
/// use evq_async::Async;
/// use futures_lite::{AsyncReadExt, AsyncWriteExt};
/// use std::os::unix::net::UnixStream;
///
/// evq_async::block_on(async {
///     let (a, b) = UnixStream::pair()?;
///     let (mut a, mut b) = (Async::new(a)?, Async::new(b)?);
///     a.write_all(b"ping").await?;
///     let mut buf = [0; 4];
///     b.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Async<T> {
    source: Arc<Source>,
    reactor: &'static Reactor,
    io: Option<T>,
}

// The I/O object is never pinned through the handle.
impl<T> Unpin for Async<T> {}

impl<T: AsRawFd> Async<T> {
    /// Puts `io`'s descriptor in non-blocking mode and registers it.
    ///
    /// # Errors
    /// - the reactor's queue could not be created (an unknown or unavailable
    ///   `EVQ_BACKEND`, `EMFILE`);
    /// - `fcntl(2)`'s error;
    /// - `AlreadyExists` if another live handle has this descriptor number;
    /// - the backend's refusal (e.g. `EPERM` from epoll for a regular file). When
    ///   another thread is blocked on the queue at that moment, the registration is
    ///   completed by that thread and a refusal is reported by the handle's first
    ///   operation instead.
    pub fn new(io: T) -> io::Result<Async<T>> {
        set_nonblocking(io.as_raw_fd())?;
        Async::new_nonblocking(io)
    }

    /// Registers `io`, whose descriptor the caller has already made non-blocking
    /// (saving a system call, e.g. after `accept4(SOCK_NONBLOCK)`).
    ///
    /// # Errors
    /// As [`Async::new`], without the `fcntl(2)` step. A descriptor left blocking
    /// would block the thread in its first read: that is the caller's promise.
    pub fn new_nonblocking(io: T) -> io::Result<Async<T>> {
        Async::register(io, false)
    }

    /// Registers a std stream socket made by this crate's constructors, whose
    /// transfers are one system call each (see `Source::drains`).
    pub(crate) fn new_stream(io: T) -> io::Result<Async<T>> {
        Async::register(io, true)
    }

    fn register(io: T, drains: bool) -> io::Result<Async<T>> {
        let reactor = Reactor::get()?;
        let source = reactor.register(io.as_raw_fd(), drains)?;
        Ok(Async {
            source,
            reactor,
            io: Some(io),
        })
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(2) F_GETFL/F_SETFL on a descriptor the caller owns; no pointers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl<T> Async<T> {
    /// The I/O object.
    pub fn get_ref(&self) -> &T {
        self.io
            .as_ref()
            .expect("an Async handle holds its I/O object until dropped")
    }

    /// The I/O object, mutably.
    ///
    /// # Safety
    /// The descriptor must not be closed or replaced (e.g. by `dup2` or by swapping
    /// the object for another): the registration belongs to this number and this
    /// open file until the handle is dropped.
    pub unsafe fn get_mut(&mut self) -> &mut T {
        self.io
            .as_mut()
            .expect("an Async handle holds its I/O object until dropped")
    }

    /// Revokes the registration and returns the I/O object (still non-blocking).
    pub fn into_inner(mut self) -> T {
        self.reactor.deregister(&self.source);
        self.io
            .take()
            .expect("an Async handle holds its I/O object until dropped")
    }

    /// Waits until the descriptor is readable (or hung up, or in error).
    ///
    /// May resolve spuriously (another task may read the data first, or the state
    /// came from a guess before the registration was complete): follow it with a
    /// non-blocking operation and wait again on `WouldBlock` — or use
    /// [`Async::read_with`], which does exactly that.
    ///
    /// # Errors
    /// A deferred registration the backend refused (see [`Async::new`]).
    pub fn readable(&self) -> Readable<'_, T> {
        Readable(Waiting {
            handle: self,
            dir: Direction::Read,
            slot: None,
        })
    }

    /// Waits until the descriptor is writable (or in error); see
    /// [`Async::readable`].
    ///
    /// # Errors
    /// A deferred registration the backend refused (see [`Async::new`]).
    pub fn writable(&self) -> Writable<'_, T> {
        Writable(Waiting {
            handle: self,
            dir: Direction::Write,
            slot: None,
        })
    }

    /// Polls for readability, keeping one waker (the I/O-trait slot) rather than
    /// joining the line of `readable()` futures.
    ///
    /// # Errors
    /// A deferred registration the backend refused (see [`Async::new`]).
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready(Direction::Read, cx).map_ok(drop)
    }

    /// Polls for writability; see [`Async::poll_readable`].
    ///
    /// # Errors
    /// A deferred registration the backend refused (see [`Async::new`]).
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_ready(Direction::Write, cx).map_ok(drop)
    }

    fn poll_ready(&self, dir: Direction, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.parts().poll_ready(dir, cx)
    }

    /// The heart of every operation: try `op`; on `WouldBlock` wait for the next
    /// event and try again (see `source.rs` for why no wake-up is lost).
    fn poll_io<R>(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.parts().poll_io(dir, cx, op)
    }

    /// Polls a non-blocking read-side operation (`read`, `recv`, `accept`, …):
    /// `WouldBlock` means "wait for the next readable event and try again".
    ///
    /// # Errors
    /// `op`'s error other than `WouldBlock`, or a deferred registration's refusal.
    pub fn poll_read_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let io = self.get_ref();
        self.poll_io(Direction::Read, cx, || op(io))
    }

    /// Polls a non-blocking write-side operation; see [`Async::poll_read_with`].
    ///
    /// # Errors
    /// `op`'s error other than `WouldBlock`, or a deferred registration's refusal.
    pub fn poll_write_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let io = self.get_ref();
        self.poll_io(Direction::Write, cx, || op(io))
    }

    /// Runs a non-blocking read-side operation until it does not meet
    /// `WouldBlock`.
    ///
    /// ```
    /// use evq_async::Async;
    /// use std::io::Read;
    /// use std::os::unix::net::UnixStream;
    ///
    /// evq_async::block_on(async {
    ///     let (a, b) = UnixStream::pair()?;
    ///     let b = Async::new(b)?;
    ///     std::io::Write::write_all(&mut &a, b"hi")?;
    ///     let mut buf = [0; 8];
    ///     let n = b.read_with(|s| (&*s).read(&mut buf)).await?;
    ///     assert_eq!(&buf[..n], b"hi");
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    /// `op`'s error other than `WouldBlock`, or a deferred registration's refusal.
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_read_with(cx, &mut op)).await
    }

    /// Runs a non-blocking write-side operation until it does not meet
    /// `WouldBlock`; see [`Async::read_with`].
    ///
    /// # Errors
    /// `op`'s error other than `WouldBlock`, or a deferred registration's refusal.
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_write_with(cx, &mut op)).await
    }

    fn poll_transfer_mut(
        &mut self,
        dir: Direction,
        cx: &mut Context<'_>,
        len: usize,
        mut op: impl FnMut(&mut T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let (this, io) = self.parts_mut();
        this.poll_transfer(dir, cx, len, this.source.drains, || op(io))
    }

    fn poll_transfer_ref(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        len: usize,
        mut op: impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let io = self.get_ref();
        self.parts()
            .poll_transfer(dir, cx, len, self.source.drains, || op(io))
    }

    fn poll_io_mut<R>(
        &mut self,
        dir: Direction,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&mut T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let (this, io) = self.parts_mut();
        this.poll_io(dir, cx, || op(io))
    }

    /// The parts of the handle `poll_io` needs.
    fn parts(&self) -> AsyncRef<'_> {
        AsyncRef {
            source: &self.source,
            reactor: self.reactor,
        }
    }

    /// The parts `poll_io` needs, and the I/O object borrowed mutably beside them.
    fn parts_mut(&mut self) -> (AsyncRef<'_>, &mut T) {
        let Async {
            source,
            reactor,
            io,
        } = self;
        let io = io
            .as_mut()
            .expect("an Async handle holds its I/O object until dropped");
        (AsyncRef { source, reactor }, io)
    }
}

/// The parts of a handle `poll_io` needs, so that the I/O object can be borrowed
/// mutably beside them.
struct AsyncRef<'a> {
    source: &'a Arc<Source>,
    reactor: &'a Reactor,
}

impl AsyncRef<'_> {
    /// Applies what a poll of the source said about its registration: a oneshot
    /// registration that must be armed again is re-armed before the poll's
    /// answer is handed on.
    #[inline]
    fn rearmed<P>(&self, (poll, rearm): (P, Rearm)) -> P {
        if let Rearm::Needed = rearm {
            self.reactor.rearm(self.source);
        }
        poll
    }

    /// Readiness in `dir`, with the tick it was observed at.
    #[inline]
    fn poll_ready(&self, dir: Direction, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.rearmed(self.source.poll_ready(dir, cx))
    }

    /// The loop under every operation: when ready, try `op`; `WouldBlock` clears
    /// the readiness observed and waits again, and so does a success for which
    /// `drained` says the kernel has nothing more (see `source.rs` for why no
    /// wake-up is lost).
    #[inline]
    fn poll_op<R>(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        mut op: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let tick = ready!(self.poll_ready(dir, cx))?;
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.source.clear_ready(dir, tick)
                }
                Ok(r) => {
                    if drained(&r) {
                        self.source.clear_ready(dir, tick);
                    }
                    return Poll::Ready(Ok(r));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// `poll_io` for a transfer of up to `len` bytes that returns how many moved:
    /// on a handle that drains (see `Source::drains`), a short transfer clears the
    /// direction's readiness as a `WouldBlock` would have.
    #[inline]
    fn poll_transfer(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        len: usize,
        drains: bool,
        op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_op(dir, cx, op, |&n| drains && n > 0 && n < len)
    }

    #[inline]
    fn poll_io<R>(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_op(dir, cx, op, |_| false)
    }
}

impl<T> Drop for Async<T> {
    fn drop(&mut self) {
        if let Some(io) = self.io.take() {
            // Revoke first, close after: the number is held until the queue has
            // forgotten it.
            self.reactor.deregister(&self.source);
            drop(io);
        }
    }
}

impl<T: AsRawFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.source.fd
    }
}

impl<T: AsFd> AsFd for Async<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Async").field("io", &self.io).finish()
    }
}

struct Waiting<'a, T> {
    handle: &'a Async<T>,
    dir: Direction,
    slot: Option<usize>,
}

impl<T> Waiting<'_, T> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.handle
            .parts()
            .rearmed(self.handle.source.poll_waiter(self.dir, cx, &mut self.slot))
    }
}

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.handle.source.remove_waiter(self.dir, slot);
        }
    }
}

/// Future of [`Async::readable`]. Dropping it leaves the line (no stale waker).
#[must_use = "futures do nothing unless polled"]
pub struct Readable<'a, T>(Waiting<'a, T>);

/// Future of [`Async::writable`]. Dropping it leaves the line (no stale waker).
#[must_use = "futures do nothing unless polled"]
pub struct Writable<'a, T>(Waiting<'a, T>);

impl<T> Future for Readable<'_, T> {
    type Output = io::Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll(cx)
    }
}

impl<T> Future for Writable<'_, T> {
    type Output = io::Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll(cx)
    }
}

impl<T> std::fmt::Debug for Readable<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Readable")
    }
}

impl<T> std::fmt::Debug for Writable<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Writable")
    }
}

impl<T: Read> AsyncRead for Async<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.get_mut()
            .poll_transfer_mut(Direction::Read, cx, len, |io| io.read(buf))
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum::<usize>();
        self.get_mut()
            .poll_transfer_mut(Direction::Read, cx, len, |io| io.read_vectored(bufs))
    }
}

impl<T> AsyncRead for &Async<T>
where
    for<'a> &'a T: Read,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.poll_transfer_ref(Direction::Read, cx, len, |mut io| io.read(buf))
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.poll_transfer_ref(Direction::Read, cx, len, |mut io| io.read_vectored(bufs))
    }
}

impl<T: Write> AsyncWrite for Async<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.get_mut()
            .poll_transfer_mut(Direction::Write, cx, len, |io| io.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum::<usize>();
        self.get_mut()
            .poll_transfer_mut(Direction::Write, cx, len, |io| io.write_vectored(bufs))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut()
            .poll_io_mut(Direction::Write, cx, |io| io.flush())
    }

    /// Flushes; closing the descriptor is dropping the handle (a socket's write
    /// half can be shut with `get_ref().shutdown(Shutdown::Write)`).
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl<T> AsyncWrite for &Async<T>
where
    for<'a> &'a T: Write,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.poll_transfer_ref(Direction::Write, cx, len, |mut io| io.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.poll_transfer_ref(Direction::Write, cx, len, |mut io| io.write_vectored(bufs))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_with(cx, |mut io| io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Helpers for the other modules of this crate.
impl<T> Async<T> {
    pub(crate) fn fd(&self) -> RawFd {
        self.source.fd
    }

    /// A transfer by a module that makes the system call itself (hyper's
    /// uninitialised buffers): one `read(2)`/`write(2)` on a stream socket, so a
    /// short transfer clears readiness whoever registered the handle.
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn poll_raw_transfer(
        &self,
        read: bool,
        cx: &mut Context<'_>,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let dir = if read {
            Direction::Read
        } else {
            Direction::Write
        };
        self.parts().poll_transfer(dir, cx, len, true, op)
    }
}
