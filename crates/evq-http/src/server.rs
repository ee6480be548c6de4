//! Starting and stopping a server: binding the listeners for the chosen
//! [`AcceptMode`], building one worker (and one [`EventQueue`]) per thread, and
//! [`ServerHandle`] to stop it and read its counters. The event loop itself is
//! in `worker.rs`.

use crate::buffers::BufferPool;
use crate::config::{AcceptMode, DeliveryMode, ServeConfig};
use crate::date::DateCache;
use crate::listener::Listener;
use crate::overload::{Admission, OverloadPolicy};
use crate::request::{Content, FileRoot, Scratch, Site};
use crate::slot_table::SlotTable;
use crate::stats::{ServeReport, WorkerCounters};
use crate::status::{StatusListener, DEFAULT_STATS_PATH};
use crate::token::{token, Kind};
use crate::worker::{self, Shared, Worker};
use evq::{BackendKind, EventQueue, Interest, LoadLimiter, Mode, Notifier, Options};
use evq_os::{ListenOptions, StopPipe};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// A server running in this process (for tests and the lab): worker threads
/// serving until [`ServerHandle::stop`].
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    notifiers: Vec<Notifier>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    _listener: Option<OwnedFd>,
    /// `--status-listen`: stopped (dropped) after the workers.
    status: Option<StatusListener>,
}

impl ServerHandle {
    /// Binds, builds one queue per thread and starts serving.
    ///
    /// # Errors
    /// A setting out of range ([`ServeConfig::validate`]), bind/listen errors, an
    /// unavailable backend, a backend without wake-one for `--accept exclusive`
    /// with several threads, an unreadable `--root`, no memory for the fixed
    /// reply.
    pub fn start(cfg: &ServeConfig) -> io::Result<ServerHandle> {
        cfg.validate()?;
        evq_os::ignore_sigpipe();
        let kind = match cfg.backend {
            Some(k) => {
                k.available()?;
                k
            }
            None => BackendKind::from_env_or_best()?,
        };
        let threads = cfg.threads;
        let wake_one = cfg.accept == AcceptMode::Exclusive && threads > 1;
        if wake_one && !kind.capabilities().wake_one {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the {kind} backend cannot wake one thread per connection; use --accept reuseport or shared, or --threads 1"),
            ));
        }
        if cfg.accept == AcceptMode::Shared
            && threads > 1
            && !kind.capabilities().shared_descriptors
        {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the {kind} backend cannot share one listening socket between threads (a file has one signal owner); use --accept reuseport, or --threads 1"),
            ));
        }
        cfg.overload.validate()?;
        let mut overload = cfg.overload;
        if cfg.shed.is_some() {
            overload.policy = OverloadPolicy::Seed001;
        }
        if overload.policy.needs_own_socket() && threads > 1 && cfg.accept != AcceptMode::Reuseport
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--overload {} stops or resets a listening socket, so each thread needs its own: use --accept reuseport with several threads", overload.policy.name()),
            ));
        }
        let seed001 =
            (overload.policy == OverloadPolicy::Seed001).then(|| cfg.shed.unwrap_or_default());
        let content = Arc::new(match &cfg.root {
            Some(dir) => Content::Files(FileRoot::open(dir)?.cache_valid(cfg.file_cache_valid)),
            None => Content::Fixed(fixed_body(cfg.reply_size)?),
        });
        // Bind the first socket to learn the port (the config may say 0), then the
        // others (reuseport) to the same address.
        let opts = ListenOptions {
            reuseport: cfg.accept == AcceptMode::Reuseport,
            backlog: cfg.backlog,
            nonblocking: true,
        };
        let first = evq_os::listen(cfg.listen, opts)?;
        let addr = evq_os::socket::local_addr(first.as_raw_fd())?;
        let mut listeners: Vec<OwnedFd> = vec![first];
        if cfg.accept == AcceptMode::Reuseport {
            for _ in 1..threads {
                listeners.push(evq_os::listen(addr, opts)?);
            }
        }
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            counters: (0..threads).map(|_| WorkerCounters::default()).collect(),
            backend: kind,
        });
        let caps = kind.capabilities();
        let conn_mode = if let Some(m) = cfg.mode {
            let ok = match m {
                DeliveryMode::Level => caps.level,
                DeliveryMode::Event => caps.event,
                DeliveryMode::Oneshot => caps.oneshot,
            };
            if !ok {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the {kind} backend cannot register connections in {m:?} mode"),
                ));
            }
            m.to_mode()
        } else if caps.event {
            Mode::Event
        } else if caps.level {
            Mode::Level
        } else if caps.oneshot {
            Mode::Oneshot
        } else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the {kind} backend offers no delivery mode the server can use"),
            ));
        };
        let listener_mode = if caps.level {
            Mode::Level
        } else if caps.event {
            Mode::Event
        } else {
            Mode::Oneshot
        };
        let mut workers = Vec::with_capacity(threads);
        let mut owned_listener = None;
        let mut per_thread = listeners.into_iter();
        let shared_fd = if cfg.accept == AcceptMode::Reuseport {
            None
        } else {
            let fd = per_thread
                .next()
                .ok_or_else(|| io::Error::other("no listener"))?;
            let raw = fd.as_raw_fd();
            owned_listener = Some(fd);
            Some(raw)
        };
        for id in 0..threads {
            let (listener, owned) = match shared_fd {
                Some(fd) => (fd, None),
                None => match per_thread.next() {
                    Some(fd) => (fd.as_raw_fd(), Some(fd)),
                    None => return Err(io::Error::other("missing reuseport listener")),
                },
            };
            let mut queue = EventQueue::with_backend(kind)?;
            let listener_opts = Options::new(Listener::token())
                .mode(listener_mode)
                .wake_one(wake_one);
            let listener = Listener::watch(listener, owned, listener_opts, &mut queue)?;
            // Each worker watches its own stop pipe (see evq_os::signals).
            let signal = if cfg.handle_signals {
                let pipe = StopPipe::new()?;
                let opts = Options::new(token(Kind::Signal, 0, 0)).mode(listener_mode);
                queue.declare_interest(pipe.fd(), Interest::READ, opts)?;
                Some(pipe)
            } else {
                None
            };
            workers.push(Worker {
                id,
                queue,
                shared: shared.clone(),
                listener,
                signal,
                conn_mode,
                conns: SlotTable::new(),
                open: 0,
                in_pool: BufferPool::new(usize::MAX),
                out_pool: BufferPool::new(worker::OUT_POOLED_CAPACITY),
                site: Site {
                    content: content.clone(),
                    limits: cfg.limits,
                    closing: false,
                    stats_path: cfg.stats_path.clone(),
                    work: cfg.work,
                },
                sendfile: cfg.sendfile,
                fixed: match &*content {
                    Content::Fixed(b) => Some(b.clone()),
                    Content::Files(_) => None,
                },
                scratch: Scratch::default(),
                date: DateCache::new(),
                limiter: seed001.map(|s| LoadLimiter::new(s.gain, s.threshold)),
                admission: Admission::new(overload, addr, cfg.backlog),
                round_accepts: 0,
                max_events: seed001.map_or(cfg.max_events, |s| s.max_events),
                header_timeout: cfg.header_timeout,
                idle_timeout: cfg.idle_timeout,
                max_conns: cfg.max_conns,
                grace: cfg.grace,
                shutdown_deadline: None,
                now: Instant::now(),
                epoch: Instant::now(),
                activity: 0,
            });
        }
        let status = match cfg.status_listen {
            Some(a) => Some(StatusListener::start(
                a,
                cfg.stats_path
                    .clone()
                    .unwrap_or_else(|| DEFAULT_STATS_PATH.to_string()),
                shared.clone(),
            )?),
            None => None,
        };
        let notifiers = workers.iter().map(|w| w.queue.notifier()).collect();
        let mut handles = Vec::with_capacity(threads);
        for w in workers {
            let name = format!("evq-serve-{}", w.id);
            handles.push(
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || w.run())?,
            );
        }
        Ok(ServerHandle {
            addr,
            shared,
            notifiers,
            threads: handles,
            _listener: owned_listener,
            status,
        })
    }

    /// The status listener's address (`--status-listen`), if there is one.
    pub fn status_addr(&self) -> Option<SocketAddr> {
        self.status.as_ref().map(StatusListener::addr)
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters so far.
    pub fn report(&self) -> ServeReport {
        self.shared.report()
    }

    /// Starts a graceful shutdown without waiting for it.
    pub fn request_stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for n in &self.notifiers {
            let _ = n.notify();
        }
    }

    /// Stops accepting, lets in-flight requests finish (up to the grace time),
    /// and returns the final counters.
    pub fn stop(mut self) -> ServeReport {
        self.request_stop();
        // A worker's error is already over; the counters tell what it did.
        let _ = self.join();
        self.shared.report()
    }

    /// Waits until the workers exit (after SIGINT/SIGTERM when `handle_signals`,
    /// or another thread's `request_stop`), returning the final counters or the
    /// first worker error.
    ///
    /// # Errors
    /// The error that ended a worker.
    pub fn wait(mut self) -> io::Result<ServeReport> {
        let r = self.join();
        r.map(|()| self.shared.report())
    }

    fn join(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for t in self.threads.drain(..) {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("server worker panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        // The status listener answers until the workers are gone.
        self.status = None;
        result
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.request_stop();
            let _ = self.join();
        }
    }
}

/// Runs a server until SIGINT/SIGTERM (with `cfg.handle_signals`) and returns its
/// counters.
///
/// # Errors
/// As [`ServerHandle::start`], or the error that ended a worker.
pub fn serve(cfg: &ServeConfig) -> io::Result<ServeReport> {
    ServerHandle::start(cfg)?.wait()
}

/// The fixed reply: a recognisable, printable pattern rather than zeros. Its
/// size is in range ([`crate::bounds::REPLY_SIZE`]); memory that cannot be had
/// is an error, not an abort.
fn fixed_body(n: usize) -> io::Result<Arc<[u8]>> {
    let mut body = Vec::new();
    body.try_reserve_exact(n).map_err(|_| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("no memory for a fixed reply of {n} bytes"),
        )
    })?;
    body.extend((0..n).map(|i| {
        if i % 64 == 63 {
            b'\n'
        } else {
            b'a' + (i % 26) as u8
        }
    }));
    Ok(body.into())
}
