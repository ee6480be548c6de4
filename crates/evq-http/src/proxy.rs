//! The proxy of SEEDS 000's experiment: clients → proxy → origin, on one evq queue.
//!
//! Each client connection handles one exchange at a time (pipelined requests wait
//! in its buffer). An exchange borrows an origin connection from a keep-alive pool
//! (or connects a new one), relays the request head and body, then relays the
//! response byte-for-byte while [`evq_wire::Framing`] tracks where it ends, so the origin
//! connection can go back to the pool. Failures become status codes: origin
//! refused, reset or garbage before any response byte → 502; no answer within the
//! origin timeout → 504. A pooled connection that the origin closed while idle is
//! retried once on a fresh connection when the request had no body.

use crate::config::ProxyConfig;
use crate::relay::Relay;
use crate::stats::ProxyReport;
use evq::{BackendKind, Notifier};
use evq_os::{ListenOptions, StopPipe};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A proxy running in this process.
pub struct ProxyHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    notifier: Notifier,
    thread: Option<JoinHandle<io::Result<ProxyReport>>>,
}

impl ProxyHandle {
    /// Binds and starts relaying.
    ///
    /// # Errors
    /// Bind/listen errors or an unavailable backend.
    pub fn start(cfg: &ProxyConfig) -> io::Result<ProxyHandle> {
        evq_os::ignore_sigpipe();
        let kind = match cfg.backend {
            Some(k) => {
                k.available()?;
                k
            }
            None => BackendKind::from_env_or_best()?,
        };
        let opts = ListenOptions {
            backlog: 1024,
            ..ListenOptions::default()
        };
        let listener = evq_os::listen(cfg.listen, opts)?;
        let addr = evq_os::socket::local_addr(listener.as_raw_fd())?;
        let stop = Arc::new(AtomicBool::new(false));
        let signal = if cfg.handle_signals {
            Some(StopPipe::new()?)
        } else {
            None
        };
        let relay = Relay::new(cfg, kind, listener, stop.clone(), signal)?;
        let notifier = relay.notifier();
        let thread = std::thread::Builder::new()
            .name("evq-proxy".into())
            .spawn(move || relay.run())?;
        Ok(ProxyHandle {
            addr,
            stop,
            notifier,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the proxy (open connections are closed) and returns its counters.
    pub fn stop(mut self) -> ProxyReport {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.notifier.notify();
        self.join().unwrap_or_default()
    }

    /// Waits until the proxy stops (SIGINT/SIGTERM with `handle_signals`).
    ///
    /// # Errors
    /// The error that ended the proxy's loop.
    pub fn wait(mut self) -> io::Result<ProxyReport> {
        self.join()
    }

    fn join(&mut self) -> io::Result<ProxyReport> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("proxy thread panicked"))),
            None => Ok(ProxyReport::default()),
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = self.notifier.notify();
            let _ = self.join();
        }
    }
}

/// Runs a proxy until SIGINT/SIGTERM (with `cfg.handle_signals`).
///
/// # Errors
/// As [`ProxyHandle::start`], or the error that ended the loop.
pub fn proxy(cfg: &ProxyConfig) -> io::Result<ProxyReport> {
    ProxyHandle::start(cfg)?.wait()
}
