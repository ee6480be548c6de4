//! The status listener (`--status-listen`): the server's counters and a health
//! answer on an address of their own, which overload control never touches.
//!
//! Why a listener of its own: overload control refuses clients before it can
//! read what they ask for — `pulse` stops listening, `gate` resets the listen
//! queue, seed 001 and `codel` reset at `accept` — so a health check sent to
//! the served address would be refused exactly when the server is busiest, and
//! a load balancer would take a server that is serving at capacity for a dead
//! one. Here a plain thread of its own accepts one client at a time and
//! answers `GET` or `HEAD` of the stats path (the counters as JSON) or of
//! `/health` (`ok`); anything else gets a 404 or a 400. A client has
//! [`CLIENT_TIMEOUT`] to send its request, so a slow one delays the next by at
//! most that. Nothing here runs on the workers' threads: their queues and
//! their overload control see nothing of it.

use crate::date::DateCache;
use crate::request::write_simple_head;
use crate::worker::Shared;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Time a status client has to send its request, and to take the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest status request head read.
const MAX_HEAD: usize = 8192;
/// The path that answers `ok` while the server runs.
pub const HEALTH_PATH: &str = "/health";
/// The stats path when `--stats-path` gives none.
pub const DEFAULT_STATS_PATH: &str = "/.evq/stats";

/// A running status listener.
pub(crate) struct StatusListener {
    addr: SocketAddr,
    listener: Arc<TcpListener>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StatusListener {
    /// Binds `addr` and starts answering on a thread of its own.
    ///
    /// # Errors
    /// `bind`'s, or the thread's creation.
    pub(crate) fn start(
        addr: SocketAddr,
        stats_path: String,
        shared: Arc<Shared>,
    ) -> io::Result<StatusListener> {
        let listener = Arc::new(TcpListener::bind(addr)?);
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (listener.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("evq-status".into())
            .spawn(move || answer_until_stopped(&l, &s, &stats_path, &shared))?;
        Ok(StatusListener {
            addr,
            listener,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it answers on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StatusListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // SAFETY: shutdown(2) on the listening socket this struct holds open
        // (through the Arc) until after the join below: a thread blocked in
        // accept(2) on it returns EINVAL, and sees the stop flag.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer_until_stopped(l: &TcpListener, stop: &AtomicBool, stats_path: &str, shared: &Shared) {
    let mut date = DateCache::new();
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                date.refresh();
                // A client that goes away mid-answer is its own loss.
                let _ = answer(s, stats_path, shared, &date);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors or memory: wait a little rather than spin.
            Err(_) if !stop.load(Ordering::SeqCst) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => {}
        }
    }
}

/// Reads one request head and answers it, closing the connection after.
fn answer(mut s: TcpStream, stats_path: &str, shared: &Shared, date: &DateCache) -> io::Result<()> {
    s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let (status, body, head_only) = loop {
        if len == head.len() {
            break (431, Vec::new(), false);
        }
        let n = s.read(&mut head[len..])?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&head[..len]) {
            Ok(httparse::Status::Partial) => continue,
            Err(_) => break (400, Vec::new(), false),
            Ok(httparse::Status::Complete(_)) => {
                let head_only = req.method == Some("HEAD");
                if req.method != Some("GET") && !head_only {
                    break (405, Vec::new(), false);
                }
                break match req.path {
                    Some(p) if p == stats_path => {
                        let mut json = shared.report().to_json().into_bytes();
                        json.push(b'\n');
                        (200, json, head_only)
                    }
                    Some(HEALTH_PATH) => (200, b"ok\n".to_vec(), head_only),
                    _ => (404, Vec::new(), head_only),
                };
            }
        }
    };
    let content_type = if body.first() == Some(&b'{') {
        "application/json"
    } else {
        "text/plain"
    };
    let mut out = Vec::with_capacity(256 + body.len());
    write_simple_head(
        &mut out,
        status,
        date.text(),
        content_type,
        body.len() as u64,
        false,
    );
    if !head_only {
        out.extend_from_slice(&body);
    }
    s.write_all(&out)
}
