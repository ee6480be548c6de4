//! The scripted origin: an HTTP server that misbehaves on request, for the
//! proxy's origin faults (and as a hostile server for `evq load`). It runs in a
//! process of its own (`evq faults --origin ADDR`), so that "the origin
//! crashes" is a real crash — SIGKILL, and the kernel closes its sockets as it
//! does for any dead process — and "restarts" is a new process on the same port.
//!
//! One thread per connection, blocking I/O: the origin is a script, not a
//! server under test. What it does depends on the request path:
//!
//! | path | answer |
//! |---|---|
//! | `/live` | 200, body [`echo_body`] of the request's `X-Req-Id` (keep-alive) |
//! | `/big?n=N` | 200, N bytes of [`pattern`] (default 1 MiB) |
//! | `/slow-big?n=N` | the same, 16 KiB every 20 ms |
//! | `/stall` | nothing, ever (reads until the peer closes) |
//! | `/garbage-chunked` | a chunked 200 whose second chunk-size line is garbage, then silence |
//! | `/smuggle` | a complete 200 followed at once by a second, unrequested response |
//! | `/garbage-head` | bytes that are not HTTP, then close |
//! | `/close` | close after reading the request, no answer |
//! | `/reset` | reset (`SO_LINGER` 0) after reading the request |
//! | `/post-once` | prints `received ID` on stdout, then closes without answering |
//! | `/early` | 401 at once, before the request's body (keep-alive, as if the connection could go on); then reads to the end |
//! | `/smuggled` | 200 `smuggled` (a request only a body answered early could carry) |
//!
//! Anything else: 404.

use crate::live::{echo_body, ID_HEADER};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

/// The byte at offset `i` of every `/big` body: a sequence with period 251 (a
/// prime), so a body cut, shifted or mixed with another shows.
pub fn pattern(i: usize) -> u8 {
    (i % PATTERN_PERIOD) as u8
}

/// The period of [`pattern`].
const PATTERN_PERIOD: usize = 251;

/// Bytes of a `/big` body when the request names no size.
pub const BIG_DEFAULT: usize = 1 << 20;

static STDOUT: Mutex<()> = Mutex::new(());

fn ledger(line: &str) {
    let _guard = STDOUT.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Runs the origin on `listen` until killed (it prints "listening on ADDR" on
/// stderr first).
///
/// # Errors
/// The bind fails.
pub fn run(listen: SocketAddr) -> io::Result<()> {
    // std binds with SO_REUSEADDR on Unix: a restarted origin gets its port back
    // while the crashed one's connections sit in TIME_WAIT.
    let listener = TcpListener::bind(listen)?;
    eprintln!("evq faults origin: listening on {}", listener.local_addr()?);
    // A peer that vanished must not kill the script either.
    evq_os::signals::ignore_sigpipe();
    for conn in listener.incoming() {
        match conn {
            Ok(s) => {
                std::thread::spawn(move || {
                    let _ = serve(s);
                });
            }
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => {}
        }
    }
    Ok(())
}

struct Request {
    method: String,
    path: String,
    id: u64,
    close: bool,
}

/// Reads one request (head and `Content-Length` body); `None` at a clean end.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    let mut chunk = [0u8; 8192];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let mut id = 0;
                let mut len = 0usize;
                let mut close = req.version == Some(0);
                for h in req.headers.iter() {
                    let v = String::from_utf8_lossy(h.value);
                    if h.name.eq_ignore_ascii_case(ID_HEADER) {
                        id = v.trim().parse().unwrap_or(0);
                    } else if h.name.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    } else if h.name.eq_ignore_ascii_case("connection") {
                        close = v.to_ascii_lowercase().contains("close");
                    }
                }
                let r = Request {
                    method: req.method.unwrap_or("").to_string(),
                    path: req.path.unwrap_or("").to_string(),
                    id,
                    close,
                };
                // `/early` is answered before its body: the body is left
                // unread, wherever it is.
                if r.path == "/early" {
                    len = 0;
                }
                while buf.len() < n + len {
                    let k = s.read(&mut chunk)?;
                    if k == 0 {
                        return Ok(None);
                    }
                    buf.extend_from_slice(&chunk[..k]);
                }
                buf.drain(..n + len);
                return Ok(Some(r));
            }
            Ok(httparse::Status::Partial) => {
                let k = s.read(&mut chunk)?;
                if k == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&chunk[..k]);
            }
            Err(_) => {
                let _ = s.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                return Ok(None);
            }
        }
    }
}

fn size_param(path: &str) -> usize {
    path.split_once("?n=")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(BIG_DEFAULT)
}

fn send_pattern(s: &mut TcpStream, n: usize, pace: Option<Duration>) -> io::Result<()> {
    let step = if pace.is_some() { 16 * 1024 } else { 64 * 1024 };
    // The pattern repeats every 251 bytes: one block a period longer than a
    // step holds every step at every offset, computed once (recomputing each
    // byte cost the co-located origin enough CPU to show in the proxy's row).
    let block: Vec<u8> = (0..step + PATTERN_PERIOD).map(pattern).collect();
    let mut at = 0;
    while at < n {
        let k = step.min(n - at);
        let from = at % PATTERN_PERIOD;
        s.write_all(&block[from..from + k])?;
        at += k;
        if let Some(p) = pace {
            std::thread::sleep(p);
        }
    }
    Ok(())
}

/// Waits until the peer closes (or resets).
fn drain(s: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

fn serve(mut s: TcpStream) -> io::Result<()> {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut s, &mut buf)? {
        let path = req.path.split('?').next().unwrap_or("");
        let conn = if req.close { "close" } else { "keep-alive" };
        match path {
            "/live" => {
                let body = echo_body(req.id);
                write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n{body}",
                    body.len()
                )?;
            }
            "/big" | "/slow-big" => {
                let n = size_param(&req.path);
                write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: {conn}\r\n\r\n"
                )?;
                let pace = (path == "/slow-big").then_some(Duration::from_millis(20));
                send_pattern(&mut s, n, pace)?;
            }
            "/stall" => {
                drain(&mut s);
                return Ok(());
            }
            "/garbage-chunked" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZZ-this-is-no-chunk-size\r\nmore garbage\r\n")?;
                drain(&mut s);
                return Ok(());
            }
            "/smuggle" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nfirst\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled\n")?;
            }
            "/garbage-head" => {
                s.write_all(b"THIS IS NOT HTTP\r\n\x00\x01\x02\r\n\r\n")?;
                return Ok(());
            }
            "/close" => {
                let _ = s.shutdown(Shutdown::Both);
                return Ok(());
            }
            "/reset" => {
                socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO))?;
                return Ok(());
            }
            "/early" => {
                s.write_all(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope\n")?;
                // The request never ended here: the connection cannot carry
                // another, and the proxy must close it.
                drain(&mut s);
                return Ok(());
            }
            "/smuggled" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled\n")?;
            }
            "/post-once" => {
                ledger(&format!("received {} {}", req.method, req.id));
                let _ = s.shutdown(Shutdown::Both);
                return Ok(());
            }
            _ => {
                s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            }
        }
        if req.close {
            return Ok(());
        }
    }
    Ok(())
}
