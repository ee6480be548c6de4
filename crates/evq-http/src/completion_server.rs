//! `evq serve --io completion`: the fixed-reply server on [`evq::completion`] — the
//! kernel accepts, receives and sends; the loop only parses and answers.
//!
//! One [`CompletionRing`] per thread and one `SO_REUSEPORT` listener per thread
//! (the kernel spreads connections). Each connection has one multishot recv
//! (provided buffers: an idle connection holds no receive buffer, only its small
//! state) and at most one send in flight; replies produced while a send is in
//! flight are appended and sent in one go when it completes, so pipelined requests
//! cost one send per burst. Requests go through the same [`handle_request`] as the
//! readiness server, so both answer byte for byte alike.
//!
//! # Quirks
//!
//! a) **A multishot recv holds the socket**: closing the descriptor does not end
//!    it. A connection is closed by cancelling its recv first; `close` goes to the
//!    ring only after the recv's final completion and any send in flight.
//! b) **Descriptor numbers come back** while completions for the old connection may
//!    still be queued: tokens carry `(generation << 32) | fd`, and a completion
//!    whose generation is not the slot's is dropped.
//! c) **Not yet here** (refused with a clear error): files (`--root`), load shedding
//!    (`--shed`), the stats path, and the header/idle timeouts (a silent client
//!    holds its connection until it closes or the server stops).

use crate::date::DateCache;
use crate::request::{handle_request, Body, Content, Outcome, Scratch, Site};
use crate::ServeConfig;
use evq::completion::{CompletionRing, Completions, OpId, OpKind};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// How `evq serve` does its I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum IoModel {
    /// Readiness events from an evq backend, then `read`/`write` system calls.
    #[default]
    Readiness,
    /// io_uring completions (`evq::completion`): the kernel does the I/O.
    Completion,
}

/// What a completion server did, summed over its threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompletionServeReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Requests answered.
    pub requests: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// Receives re-armed after the buffer ring ran dry.
    pub enobufs_rearms: u64,
}

impl std::fmt::Display for CompletionServeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "io: completion; accepted {}; requests {}; io_uring_enter calls {} ({:.3} per request); ENOBUFS re-arms {}",
            self.accepted,
            self.requests,
            self.enters,
            self.enters as f64 / self.requests.max(1) as f64,
            self.enobufs_rearms
        )
    }
}

const ACCEPT: u64 = u64::MAX;
/// Token of our own cancels, whose completions need nothing done.
const CANCEL: u64 = u64::MAX - 1;

struct Conn {
    input: Vec<u8>,
    out: Vec<u8>,
    recv: OpId,
    recv_live: bool,
    sending: bool,
    close_after_send: bool,
    closing: bool,
}

/// Binds the listeners (one per thread, `SO_REUSEPORT`) and returns them with the
/// address they got.
fn listeners(cfg: &ServeConfig) -> io::Result<(Vec<TcpListener>, SocketAddr)> {
    let mut addr = cfg.listen;
    let mut out = Vec::new();
    for _ in 0..cfg.threads.max(1) {
        let domain = socket2::Domain::for_address(addr);
        let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.bind(&addr.into())?;
        s.listen(cfg.backlog)?;
        let l: TcpListener = s.into();
        addr = l.local_addr()?;
        out.push(l);
    }
    Ok((out, addr))
}

fn refuse(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("--io completion does not support {what} yet"),
    )
}

/// Runs the completion server until SIGINT/SIGTERM; `on_listening` gets the bound
/// address first. Returns the summed counters.
///
/// # Errors
/// A setting the completion server does not have (`--root`, `--shed`, a stats
/// path), a kernel without the completion API, bind errors, or a ring error.
pub fn serve_completion(
    cfg: &ServeConfig,
    on_listening: impl FnOnce(SocketAddr),
) -> io::Result<CompletionServeReport> {
    if cfg.root.is_some() {
        return Err(refuse("--root (files)"));
    }
    if cfg.shed.is_some() {
        return Err(refuse("--shed"));
    }
    if cfg.stats_path.is_some() {
        return Err(refuse("--stats-path"));
    }
    if cfg.status_listen.is_some() {
        return Err(refuse("--status-listen"));
    }
    evq_os::signals::stop_on_signals()?;
    evq_os::signals::ignore_sigpipe();
    let (listeners, addr) = listeners(cfg)?;
    let body: Arc<[u8]> = fixed_body(cfg.reply_size);
    let site = Arc::new(Site {
        content: Arc::new(Content::Fixed(body.clone())),
        limits: cfg.limits,
        closing: false,
        stats_path: None,
        work: std::time::Duration::ZERO,
    });
    // Build one ring here first, so a kernel without the API fails before we say
    // we are listening.
    drop(CompletionRing::new()?);
    on_listening(addr);
    let threads: Vec<_> = listeners
        .into_iter()
        .map(|l| {
            let site = site.clone();
            let body = body.clone();
            std::thread::spawn(move || run_thread(l, &site, &body))
        })
        .collect();
    let mut total = CompletionServeReport::default();
    for t in threads {
        let r = t
            .join()
            .map_err(|_| io::Error::other("a completion worker panicked"))??;
        total.accepted += r.accepted;
        total.requests += r.requests;
        total.enters += r.enters;
        total.enobufs_rearms += r.enobufs_rearms;
    }
    Ok(total)
}

fn run_thread(
    listener: TcpListener,
    site: &Site,
    body: &[u8],
) -> io::Result<CompletionServeReport> {
    let mut ring = CompletionRing::new()?;
    let mut report = CompletionServeReport::default();
    ring.accept_multishot(listener.as_raw_fd(), ACCEPT);
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut generations: Vec<u32> = Vec::new();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut scratch = Scratch::default();
    let mut date = DateCache::new();
    let mut batch = Completions::with_capacity(256);
    while !evq_os::signals::stop_requested() {
        ring.get_next_completion(&mut batch, Some(Duration::from_millis(200)))?;
        date.refresh();
        for c in batch.iter_mut() {
            if c.token() == ACCEPT {
                match c.accepted_fd() {
                    Some(fd) => {
                        report.accepted += 1;
                        let slot = fd as usize;
                        if conns.len() <= slot {
                            conns.resize_with(slot + 1, || None);
                            generations.resize(slot + 1, 0);
                        }
                        generations[slot] = generations[slot].wrapping_add(1);
                        let token = (generations[slot] as u64) << 32 | fd as u64;
                        let recv = ring.recv_multishot(fd, token);
                        conns[slot] = Some(Conn {
                            input: Vec::new(),
                            out: pool.pop().unwrap_or_default(),
                            recv,
                            recv_live: true,
                            sending: false,
                            close_after_send: false,
                            closing: false,
                        });
                    }
                    // EMFILE and friends: the connection waits in the backlog;
                    // accept again (the multishot request has ended).
                    None if !c.more() => {
                        ring.accept_multishot(listener.as_raw_fd(), ACCEPT);
                    }
                    None => {}
                }
                continue;
            }
            if c.token() == CANCEL {
                continue;
            }
            let fd = (c.token() & u32::MAX as u64) as i32;
            let slot = fd as usize;
            if generations.get(slot).copied() != Some((c.token() >> 32) as u32) {
                continue; // quirk b
            }
            let token = c.token();
            let Some(conn) = conns[slot].as_mut() else {
                continue;
            };
            match c.kind() {
                OpKind::Recv => {
                    let data = ring.received(c).unwrap_or(&[]);
                    if c.result().is_ok_and(|n| n > 0) && !conn.closing {
                        conn.input.extend_from_slice(data);
                        report.requests += answer(conn, site, body, &date, &mut scratch);
                    }
                    if !c.more() {
                        // EOF, reset or our cancel: send what is answered, then close.
                        conn.recv_live = false;
                        conn.close_after_send = true;
                    }
                }
                OpKind::Send => {
                    conn.sending = false;
                    if let Some(mut bufs) = c.take_buffers() {
                        if let Some(mut b) = bufs.pop() {
                            b.clear();
                            pool.push(b);
                        }
                    }
                    if c.result().is_err() {
                        begin_close(&mut ring, conn);
                    }
                }
                OpKind::Close => {
                    if let Some(mut conn) = conns[slot].take() {
                        conn.out.clear();
                        pool.push(std::mem::take(&mut conn.out));
                    }
                    continue;
                }
                _ => {}
            }
            flush(&mut ring, conn, fd, token, &mut pool);
        }
    }
    let stats = ring.stats();
    report.enters = stats.enters;
    report.enobufs_rearms = stats.enobufs_rearms;
    // Connections still open close with the ring's descriptors.
    for (fd, conn) in conns.iter().enumerate() {
        if conn.is_some() {
            // SAFETY: an open connection's descriptor is ours (accepted, not yet
            // closed); the ring cancels its requests when it drops below.
            drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
    }
    Ok(report)
}

/// Parses every complete request in `conn.input` and appends the replies to
/// `conn.out`. Returns how many were answered.
fn answer(
    conn: &mut Conn,
    site: &Site,
    body: &[u8],
    date: &DateCache,
    scratch: &mut Scratch,
) -> u64 {
    let mut consumed = 0;
    let mut answered = 0;
    while consumed < conn.input.len() && !conn.close_after_send {
        match handle_request(
            &conn.input[consumed..],
            site,
            date.text(),
            scratch,
            &mut conn.out,
        ) {
            Outcome::Incomplete => break,
            Outcome::Done(reply) | Outcome::Stats { reply, .. } => {
                consumed += reply.consumed;
                answered += 1;
                match reply.body {
                    Body::None => {}
                    Body::Fixed { offset } => conn.out.extend_from_slice(&body[offset..]),
                    Body::File { fd, .. } => {
                        // Cannot happen without --root; never leak it if it does.
                        // SAFETY: handle_request gave us this open file to close.
                        drop(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
                if !reply.keep_alive {
                    conn.close_after_send = true;
                }
            }
        }
    }
    conn.input.drain(..consumed);
    answered
}

/// Starts a send of what is waiting, or finishes a close once nothing is in flight.
fn flush(ring: &mut CompletionRing, conn: &mut Conn, fd: i32, token: u64, pool: &mut Vec<Vec<u8>>) {
    if !conn.sending && !conn.out.is_empty() && !conn.closing {
        let next = pool.pop().unwrap_or_default();
        let out = std::mem::replace(&mut conn.out, next);
        ring.send(fd, out, token);
        conn.sending = true;
        return;
    }
    if conn.close_after_send && !conn.sending {
        begin_close(ring, conn);
    }
    if conn.closing && !conn.recv_live && !conn.sending {
        ring.close(fd, token);
        conn.sending = true; // nothing more may start on this connection
    }
}

/// Quirk a: a close starts by cancelling the recv.
fn begin_close(ring: &mut CompletionRing, conn: &mut Conn) {
    if conn.closing {
        return;
    }
    conn.closing = true;
    if conn.recv_live {
        ring.cancel(conn.recv, CANCEL);
    }
}

fn fixed_body(n: usize) -> Arc<[u8]> {
    // The readiness server's pattern, so both serve the same bytes.
    (0..n)
        .map(|i| {
            if i % 64 == 63 {
                b'\n'
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect()
}
