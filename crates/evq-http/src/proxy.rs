//! The proxy of SEEDS 000's experiment: clients → proxy → origin, on one evq queue.
//!
//! Each client connection handles one exchange at a time (pipelined requests wait
//! in its buffer). An exchange borrows an origin connection from a keep-alive pool
//! (or connects a new one), relays the request head and body, then relays the
//! response byte-for-byte while [`evq_wire::Framing`] tracks where it ends, so the origin
//! connection can go back to the pool. Failures become status codes: origin
//! refused, reset or garbage before any response byte → 502; no answer within the
//! origin timeout → 504. A pooled connection found closed before a request goes
//! out on it is dropped; when it closes unanswered after the request went out,
//! the origin may have performed it, so only an idempotent request without a
//! body (RFC 9110 §9.2.2) is resent, once, on a fresh connection — any other
//! gets a 502. A client that shuts its side (FIN) after a whole request is
//! still answered; one that shuts it in the middle of its request body gets a
//! 400 at once (the body can never finish), and the origin connection holding
//! half a request is closed — it is not left waiting for the origin timeout.

use crate::completion_relay::{self, CompletionRelay};
use crate::completion_server::IoModel;
use crate::config::ProxyConfig;
use crate::relay::Relay;
use crate::stats::ProxyReport;
use evq::{BackendKind, Notifier};
use evq_os::{ListenOptions, StopPipe};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A proxy running in this process.
pub struct ProxyHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wake: Wake,
    thread: Option<JoinHandle<(ProxyReport, io::Result<()>)>>,
}

/// How a stop request reaches the relay's thread.
enum Wake {
    /// The readiness relay's queue.
    Queue(Notifier),
    /// The completion relay polls its stop flag (at least every 200 ms);
    /// nothing to wake.
    Poll,
}

impl Wake {
    fn wake(&self) {
        if let Wake::Queue(n) = self {
            let _ = n.notify();
        }
    }
}

impl ProxyHandle {
    /// Binds and starts relaying.
    ///
    /// # Errors
    /// Bind/listen errors or an unavailable backend; with
    /// [`IoModel::Completion`], a setting that model does not take
    /// (`backend`, `mode`, an overload policy) or a kernel without io_uring.
    pub fn start(cfg: &ProxyConfig) -> io::Result<ProxyHandle> {
        evq_os::ignore_sigpipe();
        cfg.validate()?;
        if cfg.io == IoModel::Completion {
            return Self::start_completion(cfg);
        }
        let kind = match cfg.backend {
            Some(k) => {
                k.available()?;
                k
            }
            None => BackendKind::from_env_or_best()?,
        };
        let (listener, addr) = listen(cfg)?;
        let stop = Arc::new(AtomicBool::new(false));
        let signal = if cfg.handle_signals {
            Some(StopPipe::new()?)
        } else {
            None
        };
        let relay = Relay::new(cfg, kind, listener, stop.clone(), signal)?;
        let wake = Wake::Queue(relay.notifier());
        let thread = std::thread::Builder::new()
            .name("evq-proxy".into())
            .spawn(move || relay.run())?;
        Ok(ProxyHandle {
            addr,
            stop,
            wake,
            thread: Some(thread),
        })
    }

    /// The proxy on io_uring completions (`completion_relay.rs`).
    fn start_completion(cfg: &ProxyConfig) -> io::Result<ProxyHandle> {
        completion_relay::check(cfg)?;
        let (listener, addr) = listen(cfg)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (cfg, flag) = (cfg.clone(), stop.clone());
        // The ring belongs to the thread that uses it: built there.
        let thread = std::thread::Builder::new()
            .name("evq-proxy".into())
            .spawn(move || match CompletionRelay::new(&cfg, listener, flag) {
                Ok(relay) => relay.run(),
                Err(e) => (ProxyReport::default(), Err(e)),
            })?;
        Ok(ProxyHandle {
            addr,
            stop,
            wake: Wake::Poll,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the proxy gracefully (see [`ProxyHandle::request_stop`]), waits
    /// for it, and returns its counters — the counters so far even when an
    /// error ended its loop ([`ProxyHandle::wait`] returns the error).
    pub fn stop(mut self) -> ProxyReport {
        self.request_stop();
        self.join().0
    }

    /// Starts a graceful stop without waiting for it: the listener closes at
    /// once, idle connections close, and exchanges in flight go on for up to
    /// the grace period ([`ProxyConfig::grace`]), their responses saying
    /// `Connection: close`.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.wake();
    }

    /// Waits until the proxy stops (SIGINT/SIGTERM with `handle_signals`).
    ///
    /// # Errors
    /// The error that ended the proxy's loop.
    pub fn wait(mut self) -> io::Result<ProxyReport> {
        let (report, result) = self.join();
        result.map(|()| report)
    }

    fn join(&mut self) -> (ProxyReport, io::Result<()>) {
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                (
                    ProxyReport::default(),
                    Err(io::Error::other("proxy thread panicked")),
                )
            }),
            None => (ProxyReport::default(), Ok(())),
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.store(true, Ordering::SeqCst);
            self.wake.wake();
            let _ = self.join();
        }
    }
}

/// The listening socket `cfg` asks for, and the address it got.
fn listen(cfg: &ProxyConfig) -> io::Result<(OwnedFd, SocketAddr)> {
    let opts = ListenOptions {
        backlog: cfg.backlog,
        ..ListenOptions::default()
    };
    let listener = evq_os::listen(cfg.listen, opts)?;
    let addr = evq_os::socket::local_addr(listener.as_raw_fd())?;
    Ok((listener, addr))
}

/// Runs a proxy until SIGINT/SIGTERM (with `cfg.handle_signals`).
///
/// # Errors
/// As [`ProxyHandle::start`], or the error that ended the loop.
pub fn proxy(cfg: &ProxyConfig) -> io::Result<ProxyReport> {
    ProxyHandle::start(cfg)?.wait()
}
