//! The contenders: the same hyper service and the same echo loop on evq-async,
//! tokio (current-thread and multi-thread) and smol (async-io + async-executor).
//!
//! Every contender gets the same hyper configuration (http1, no timer, so no
//! header-read timeout anywhere), `TCP_NODELAY` on accepted sockets, and reads
//! into uninitialised memory the same way (`read(2)` straight into hyper's
//! cursor), so the comparison is of reactors and executors, not of buffer handling.

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use std::convert::Infallible;
use std::io::{self, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// One contender's name, as the command line and the JSON records spell it.
pub const RUNTIMES: &[&str] = &["evq-async", "tokio-ct", "tokio-mt", "smol"];

/// What the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// HTTP/1.1 keep-alive, a fixed body.
    Hyper { body: usize },
    /// Echo every byte back.
    Echo,
}

fn hello(
    body: Bytes,
) -> impl Fn(Request<Incoming>) -> std::future::Ready<Result<Response<Full<Bytes>>, Infallible>> + Clone
{
    move |_req| std::future::ready(Ok(Response::new(Full::new(body.clone()))))
}

/// One hyper connection, served the same way by every contender (http1, no
/// timer), answering every request with `body` bytes.
fn hyper_connection<I>(io: I, body: usize) -> impl std::future::Future<Output = ()>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
{
    let service = service_fn(hello(Bytes::from(vec![b'x'; body])));
    async move {
        let _ = http1::Builder::new().serve_connection(io, service).await;
    }
}

/// The echo loop of the contenders whose sockets speak `futures-io` (evq-async
/// and smol): every byte read is written back, until EOF or an error.
async fn echo<S>(mut stream: S)
where
    S: futures_lite::AsyncRead + futures_lite::AsyncWrite + Unpin,
{
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
}

fn announce(addr: SocketAddr) {
    println!("listening on {addr}");
    let _ = io::stdout().flush();
}

/// Serves `workload` on `runtime` until killed.
pub fn serve(runtime: &str, workload: Workload, addr: SocketAddr) -> io::Result<()> {
    match runtime {
        "evq-async" => evq::serve(workload, addr),
        "tokio-ct" => tokio_rt::serve(false, workload, addr),
        "tokio-mt" => tokio_rt::serve(true, workload, addr),
        "smol" => smol_rt::serve(workload, addr),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown runtime {other:?}; known: {}", RUNTIMES.join(", ")),
        )),
    }
}

mod evq {
    use super::*;
    use evq_async::{Async, Executor};

    pub fn serve(workload: Workload, addr: SocketAddr) -> io::Result<()> {
        let ex = Executor::new();
        let listener = Async::<TcpListener>::bind(addr)?;
        announce(listener.get_ref().local_addr()?);
        eprintln!("evq-async: {:?}", evq_async::reactor_stats()?);
        ex.block_on(async {
            loop {
                let (stream, _) = listener.accept().await?;
                stream.get_ref().set_nodelay(true)?;
                match workload {
                    Workload::Hyper { body } => ex.spawn(hyper_connection(stream, body)).detach(),
                    Workload::Echo => ex.spawn(echo(stream)).detach(),
                }
            }
        })
    }
}

mod tokio_rt {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub fn serve(multi_thread: bool, workload: Workload, addr: SocketAddr) -> io::Result<()> {
        let rt = if multi_thread {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        };
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            announce(listener.local_addr()?);
            loop {
                let (stream, _) = listener.accept().await?;
                stream.set_nodelay(true)?;
                match workload {
                    Workload::Hyper { body } => {
                        tokio::spawn(hyper_connection(TokioIo::new(stream), body));
                    }
                    Workload::Echo => {
                        tokio::spawn(async move {
                            let mut stream = stream;
                            let mut buf = vec![0u8; 4096];
                            loop {
                                match stream.read(&mut buf).await {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => {
                                        if stream.write_all(&buf[..n]).await.is_err() {
                                            break;
                                        }
                                    }
                                }
                            }
                        });
                    }
                }
            }
        })
    }
}

mod smol_rt {
    use super::*;
    use hyper::rt::ReadBufCursor;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::pin::Pin;
    use std::rc::Rc;
    use std::task::{ready, Context, Poll};

    /// hyper's I/O traits over async-io, reading into hyper's uninitialised
    /// cursor with `read(2)` exactly as evq-async does.
    struct SmolIo(async_io::Async<TcpStream>);

    impl SmolIo {
        /// Tries a write-side `op`; on `WouldBlock` waits for writability and
        /// tries again.
        fn poll_writing(
            &self,
            cx: &mut Context<'_>,
            mut op: impl FnMut(&TcpStream) -> io::Result<usize>,
        ) -> Poll<io::Result<usize>> {
            loop {
                match op(self.0.get_ref()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    r => return Poll::Ready(r),
                }
                ready!(self.0.poll_writable(cx))?;
            }
        }
    }

    impl hyper::rt::Read for SmolIo {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            mut buf: ReadBufCursor<'_>,
        ) -> Poll<io::Result<()>> {
            let fd = self.0.as_raw_fd();
            loop {
                // SAFETY: only read(2) writes into the slice; `advance` gets its count.
                let dst = unsafe { buf.as_mut() };
                // SAFETY: read(2) writes at most `dst.len()` bytes into a live slice.
                let n = unsafe { libc::read(fd, dst.as_mut_ptr().cast(), dst.len()) };
                if n >= 0 {
                    // SAFETY: read(2) initialised `n` bytes.
                    unsafe { buf.advance(n as usize) };
                    return Poll::Ready(Ok(()));
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Poll::Ready(Err(e));
                }
                ready!(self.0.poll_readable(cx))?;
            }
        }
    }

    impl hyper::rt::Write for SmolIo {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_writing(cx, |mut s| Write::write(&mut s, buf))
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            self.poll_writing(cx, |mut s| Write::write_vectored(&mut s, bufs))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(self.0.get_ref().shutdown(std::net::Shutdown::Write))
        }
    }

    pub fn serve(workload: Workload, addr: SocketAddr) -> io::Result<()> {
        // smol's single-threaded configuration: a LocalExecutor run inside
        // async-io's block_on, which drives the reactor when idle.
        let ex = Rc::new(async_executor::LocalExecutor::new());
        let listener = async_io::Async::<TcpListener>::bind(addr)?;
        announce(listener.get_ref().local_addr()?);
        async_io::block_on(ex.run(async {
            loop {
                let (stream, _) = listener.accept().await?;
                stream.get_ref().set_nodelay(true)?;
                match workload {
                    Workload::Hyper { body } => {
                        ex.spawn(hyper_connection(SmolIo(stream), body)).detach()
                    }
                    Workload::Echo => ex.spawn(echo(stream)).detach(),
                }
            }
        }))
    }
}
