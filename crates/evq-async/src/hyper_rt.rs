//! hyper 1.x on evq-async: `hyper::rt::Read`/`Write` for [`Async<TcpStream>`] and
//! [`Async<UnixStream>`], and hyper's [`Executor`](hyper::rt::Executor) and
//! [`Timer`](hyper::rt::Timer) (feature `hyper`, on by default).
//!
//! hyper reads into uninitialised memory; the read goes straight from `read(2)`
//! into it, so nothing is zeroed per read. Writes are vectored (`writev(2)`), so
//! hyper sends a response head and body in one system call.
//!
//! ```no_run
//! use evq_async::{Async, Executor, HyperTimer};
//! use http_body_util::Full;
//! use hyper::{body::Bytes, server::conn::http1, service::service_fn, Response};
//! use std::net::TcpListener;
//!
//! async fn serve(ex: &Executor) -> std::io::Result<()> {
//!     let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 8080))?;
//!     loop {
//!         let (stream, _) = listener.accept().await?;
//!         ex.spawn(async move {
//!             let service = service_fn(|_req| async {
//!                 Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("hi"))))
//!             });
//!             let _ = http1::Builder::new()
//!                 .timer(HyperTimer)
//!                 .serve_connection(stream, service)
//!                 .await;
//!         })
//!         .detach();
//!     }
//! }
//!
//! let ex = Executor::new();
//! ex.block_on(serve(&ex))?;
//! # Ok::<(), std::io::Error>(())
//! ```

use crate::{Async, Executor, Timer};
use hyper::rt::{ReadBufCursor, Sleep};
use std::future::Future;
use std::io::{self, IoSlice, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// `read(2)` into hyper's cursor, which may be uninitialised.
fn poll_read_into<T>(
    handle: &Async<T>,
    cx: &mut Context<'_>,
    mut buf: ReadBufCursor<'_>,
) -> Poll<io::Result<()>> {
    let fd = handle.fd();
    let n = {
        // SAFETY: the slice is only written by read(2) below, which never de-
        // initialises memory; `advance` is told exactly how much it initialised.
        let dst = unsafe { buf.as_mut() };
        let len = dst.len();
        match handle.poll_raw_transfer(true, cx, len, || {
            // SAFETY: read(2) writes at most `dst.len()` bytes into `dst`, a live
            // mutable slice, and returns how many (or -1 with errno).
            let n = unsafe { libc::read(fd, dst.as_mut_ptr().cast(), dst.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    };
    // SAFETY: read(2) initialised the first `n` bytes of the cursor's slice.
    unsafe { buf.advance(n) };
    Poll::Ready(Ok(()))
}

/// `send(2)` with `MSG_NOSIGNAL` (what std's `TcpStream::write` does): a peer that
/// went away is an `EPIPE` error, not a `SIGPIPE`.
fn write_fd(fd: std::os::fd::RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: send(2) reads at most `buf.len()` bytes from a live slice.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

macro_rules! hyper_io {
    ($ty:ty) => {
        impl hyper::rt::Read for Async<$ty> {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                poll_read_into(&self, cx, buf)
            }
        }

        impl hyper::rt::Write for Async<$ty> {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let fd = self.fd();
                self.poll_raw_transfer(false, cx, buf.len(), || write_fd(fd, buf))
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.poll_raw_transfer(false, cx, len, || {
                    Write::write_vectored(&mut self.get_ref(), bufs)
                })
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                // Sockets have no user-space buffer to flush.
                Poll::Ready(Ok(()))
            }

            fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(match self.get_ref().shutdown(Shutdown::Write) {
                    // The peer already went: the write side is as shut as it gets.
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
                    other => other,
                })
            }
        }
    };
}

hyper_io!(TcpStream);
hyper_io!(UnixStream);

/// hyper's executor (for HTTP/2 and client connection tasks): spawns detached
/// tasks on an [`Executor`].
#[derive(Clone, Debug)]
pub struct HyperExecutor(pub Executor);

impl<F> hyper::rt::Executor<F> for HyperExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn(future).detach();
    }
}

/// hyper's timer (header-read timeouts, keep-alive timers) on evq's timer heap.
#[derive(Clone, Copy, Debug, Default)]
pub struct HyperTimer;

/// A [`Timer`] as hyper's `Sleep`.
struct HyperSleep(Timer);

impl Future for HyperSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}

impl Sleep for HyperSleep {}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(HyperSleep(Timer::after(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(HyperSleep(Timer::at(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(mut s) => s.0.set_at(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
