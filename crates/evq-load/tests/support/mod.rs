//! Tiny loopback servers the tests start themselves: a correct HTTP responder in a
//! few framings, and servers that misbehave in one specific way each.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How a test server answers.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Keep-alive HTTP/1.1 with Content-Length and a body of this many bytes.
    Length(usize),
    /// Keep-alive HTTP/1.1, chunked, body in chunks of 7 bytes, this many bytes.
    Chunked(usize),
    /// HTTP/1.0 response without length, delimited by closing the connection.
    CloseDelimited(usize),
    /// Reads the request, then resets the connection (SO_LINGER 0).
    Reset,
    /// Sends a head promising 1000 bytes, 10 of them, then closes.
    CloseMidResponse,
    /// Answers with bytes that are not HTTP.
    Garbage,
    /// Reads requests and never answers.
    Silent,
    /// Accepts and holds the connection, reading and discarding whatever comes.
    Hold,
    /// Answers every request `503 Service Unavailable` with `Retry-After: 1`.
    Unavailable,
    /// Waits this many milliseconds after each request, then answers as `Length(10)`.
    Delayed(u64),
    /// Keep-alive `Length(n)` replies, each written in three pieces a few
    /// milliseconds apart (the head cut mid-line, the body cut in two), so a
    /// reply reaches the client across several receives.
    Split(usize),
    /// Keep-alive `Length(n)` replies to every request a read brought, written
    /// together in one `write`: pipelined replies arrive in one buffer.
    Coalesced(usize),
    /// Answers `Length(10)` replies; the k-th says `Connection: close` and the
    /// server closes after it.
    CloseAfter(usize),
}

/// A running test server.
pub struct Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
    /// Request heads read so far (every behaviour that reads requests).
    pub requests: Arc<AtomicUsize>,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl Server {
    /// Closes up to `n` held connections (Behaviour::Hold); returns how many.
    pub fn close_held(&self, n: usize) -> usize {
        let mut held = self.held.lock().expect("lock");
        let k = n.min(held.len());
        for s in held.drain(..k) {
            let _ = s.shutdown(Shutdown::Both);
        }
        k
    }
}

/// Starts a server with one thread per connection.
pub fn start(b: Behaviour) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    start_on(listener, Duration::ZERO, b)
}

/// Serves `listener` (one thread per connection), accepting nothing for `delay`
/// first.
pub fn start_on(listener: TcpListener, delay: Duration, b: Behaviour) -> Server {
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(Mutex::new(Vec::new()));
    let (acc, hd, req) = (accepted.clone(), held.clone(), requests.clone());
    thread::spawn(move || {
        thread::sleep(delay);
        for s in listener.incoming() {
            let Ok(s) = s else {
                // Out of descriptors (the fd-limit test): wait instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            acc.fetch_add(1, Ordering::SeqCst);
            if let Behaviour::Hold = b {
                if let Ok(c) = s.try_clone() {
                    hd.lock().expect("lock").push(c);
                }
            }
            let req = req.clone();
            thread::spawn(move || serve(s, b, &req));
        }
    });
    Server {
        port,
        accepted,
        requests,
        held,
    }
}

/// A listening socket with a backlog of one that never accepts: the first
/// connection waits in its queue, later SYNs are dropped (the queue is full).
pub fn never_accepting() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    // SAFETY: listen(2) on a socket this function owns; calling it again on a
    // listening socket only changes the backlog.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// A port on which nothing listens.
pub fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Takes one complete request head out of `pending`, if there is one.
fn take_request(pending: &mut Vec<u8>, count: &AtomicUsize) -> bool {
    match pending.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => {
            pending.drain(..i + 4);
            count.fetch_add(1, Ordering::SeqCst);
            true
        }
        None => false,
    }
}

/// Reads one request head; false at end-of-file or error.
fn read_request(s: &mut TcpStream, pending: &mut Vec<u8>, count: &AtomicUsize) -> bool {
    loop {
        if take_request(pending, count) {
            return true;
        }
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

fn serve(mut s: TcpStream, b: Behaviour, count: &AtomicUsize) {
    let _ = s.set_nodelay(true);
    let mut pending = Vec::new();
    match b {
        Behaviour::Hold => {
            let mut buf = [0u8; 1024];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
        }
        Behaviour::Silent => while read_request(&mut s, &mut pending, count) {},
        Behaviour::Delayed(ms) => {
            while read_request(&mut s, &mut pending, count) {
                thread::sleep(Duration::from_millis(ms));
                if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
                    .is_err()
                {
                    break;
                }
            }
        }
        Behaviour::Unavailable => {
            while read_request(&mut s, &mut pending, count) {
                let r = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n";
                if s.write_all(r).is_err() {
                    break;
                }
            }
        }
        Behaviour::Reset => {
            if read_request(&mut s, &mut pending, count) {
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: setsockopt reads a valid linger struct of the given size on
                // a descriptor the stream owns.
                unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&linger as *const libc::linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    );
                }
            }
        }
        Behaviour::CloseMidResponse => {
            if read_request(&mut s, &mut pending, count) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
            }
        }
        Behaviour::Garbage => {
            if read_request(&mut s, &mut pending, count) {
                let _ = s.write_all(b"\x00\x01\x02 this is not http \r\n\r\n");
                thread::sleep(Duration::from_millis(200));
            }
        }
        Behaviour::CloseDelimited(n) => {
            if read_request(&mut s, &mut pending, count) {
                let mut r = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec();
                r.extend(std::iter::repeat_n(b'x', n));
                let _ = s.write_all(&r);
            }
        }
        Behaviour::Length(n) => {
            while read_request(&mut s, &mut pending, count) {
                let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
                r.extend(std::iter::repeat_n(b'x', n));
                if s.write_all(&r).is_err() {
                    break;
                }
            }
        }
        Behaviour::Split(n) => {
            let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
            r.extend(std::iter::repeat_n(b'x', n));
            let cuts = [0, 9, r.len() - n / 2, r.len()];
            while read_request(&mut s, &mut pending, count) {
                for w in cuts.windows(2) {
                    if s.write_all(&r[w[0]..w[1]]).is_err() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(3));
                }
            }
        }
        Behaviour::Coalesced(n) => {
            let mut one = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
            one.extend(std::iter::repeat_n(b'x', n));
            while read_request(&mut s, &mut pending, count) {
                let mut out = one.clone();
                while take_request(&mut pending, count) {
                    out.extend_from_slice(&one);
                }
                if s.write_all(&out).is_err() {
                    break;
                }
            }
        }
        Behaviour::CloseAfter(k) => {
            let mut served = 0;
            while read_request(&mut s, &mut pending, count) {
                served += 1;
                let last = served == k;
                let r = if last {
                    &b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\n0123456789"
                        [..]
                } else {
                    &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"[..]
                };
                if s.write_all(r).is_err() || last {
                    break;
                }
            }
        }
        Behaviour::Chunked(n) => {
            while read_request(&mut s, &mut pending, count) {
                let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                let mut left = n;
                while left > 0 {
                    let k = left.min(7);
                    r.extend(format!("{k:x}\r\n").bytes());
                    r.extend(std::iter::repeat_n(b'y', k));
                    r.extend(b"\r\n");
                    left -= k;
                }
                r.extend(b"0\r\n\r\n");
                if s.write_all(&r).is_err() {
                    break;
                }
            }
        }
    }
}
