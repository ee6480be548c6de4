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
}

/// A running test server.
pub struct Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
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
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let held = Arc::new(Mutex::new(Vec::new()));
    let (acc, hd) = (accepted.clone(), held.clone());
    thread::spawn(move || {
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
            thread::spawn(move || serve(s, b));
        }
    });
    Server {
        port,
        accepted,
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

/// Reads one request head; false at end-of-file or error.
fn read_request(s: &mut TcpStream, pending: &mut Vec<u8>) -> bool {
    loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..i + 4);
            return true;
        }
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

fn serve(mut s: TcpStream, b: Behaviour) {
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
        Behaviour::Silent => while read_request(&mut s, &mut pending) {},
        Behaviour::Delayed(ms) => {
            while read_request(&mut s, &mut pending) {
                thread::sleep(Duration::from_millis(ms));
                if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
                    .is_err()
                {
                    break;
                }
            }
        }
        Behaviour::Unavailable => {
            while read_request(&mut s, &mut pending) {
                let r = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n";
                if s.write_all(r).is_err() {
                    break;
                }
            }
        }
        Behaviour::Reset => {
            if read_request(&mut s, &mut pending) {
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
            if read_request(&mut s, &mut pending) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
            }
        }
        Behaviour::Garbage => {
            if read_request(&mut s, &mut pending) {
                let _ = s.write_all(b"\x00\x01\x02 this is not http \r\n\r\n");
                thread::sleep(Duration::from_millis(200));
            }
        }
        Behaviour::CloseDelimited(n) => {
            if read_request(&mut s, &mut pending) {
                let mut r = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec();
                r.extend(std::iter::repeat_n(b'x', n));
                let _ = s.write_all(&r);
            }
        }
        Behaviour::Length(n) => {
            while read_request(&mut s, &mut pending) {
                let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
                r.extend(std::iter::repeat_n(b'x', n));
                if s.write_all(&r).is_err() {
                    break;
                }
            }
        }
        Behaviour::Chunked(n) => {
            while read_request(&mut s, &mut pending) {
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
