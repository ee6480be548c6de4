//! One HTTP request in, one response head out: the pure part of the server, kept
//! apart from the event loop so the fuzz target and the corpus test drive exactly
//! what the server runs.
//!
//! [`handle_request`] looks at the bytes buffered for a connection and either says
//! "incomplete", or consumes one request and writes its response head (and, for
//! errors and small fixed replies, the body) into an output buffer, telling the
//! caller what body is still to send. It never allocates once its buffers have
//! grown, and never panics: every malformed input becomes a 4xx and a close.

use crate::date::{format_http_date, parse_http_date, HTTP_DATE_LEN};
use crate::files::FileCache;
pub use crate::files::{content_type, resolve_path, FileRoot};
use crate::sys;
use evq_wire::BodyHeaders;
use std::io::Write;
use std::os::fd::RawFd;
use std::sync::Arc;

/// Most headers one request may carry.
pub const MAX_HEADERS: usize = 48;

/// What the server serves.
#[derive(Debug)]
pub enum Content {
    /// The same body for every `GET` (ephttpd's programmable-size reply).
    Fixed(Arc<[u8]>),
    /// Files beneath a directory.
    Files(FileRoot),
}

/// Size limits on what a client may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head (request line + headers), bytes; more is 431.
    pub max_head: usize,
    /// Longest request target, bytes; more is 414.
    pub max_uri: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 8192,
            max_uri: 4096,
        }
    }
}

/// The body still to send after the head in the output buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Body {
    /// Nothing more.
    None,
    /// Bytes `[offset..]` of the fixed reply.
    Fixed {
        /// Where in the fixed reply to start.
        offset: usize,
    },
    /// `len` bytes of an open file (owned by the caller now) from offset 0.
    File {
        /// The open file; the caller closes it.
        fd: RawFd,
        /// How many bytes to send.
        len: u64,
    },
}

/// The outcome of one complete request.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    /// Bytes of input the request took.
    pub consumed: usize,
    /// The response status.
    pub status: u16,
    /// Whether the connection stays open after this response.
    pub keep_alive: bool,
    /// The body still to send.
    pub body: Body,
}

/// What [`handle_request`] made of the buffered input.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// More bytes are needed (and may come: the head is still within limits).
    Incomplete,
    /// One request was consumed and answered.
    Done(Reply),
    /// One request for the stats path was consumed; nothing was written: the
    /// caller answers with its counters (`head_only` for `HEAD`).
    Stats {
        /// What was consumed and whether to keep the connection.
        reply: Reply,
        /// The request was `HEAD`.
        head_only: bool,
    },
}

/// Per-thread scratch space so that handling a request allocates nothing, and
/// the thread's cache of open files.
#[derive(Debug, Default)]
pub struct Scratch {
    path: Vec<u8>,
    files: FileCache,
}

/// Spins until this thread's CPU clock has advanced by `d` (a stand-in for
/// an application's work; time the thread is preempted does not count).
pub(crate) fn spend_cpu(d: std::time::Duration) {
    if d.is_zero() {
        return;
    }
    let need = d.as_nanos() as u64;
    let start = evq_os::thread_cpu_ns();
    while evq_os::thread_cpu_ns().saturating_sub(start) < need {
        std::hint::spin_loop();
    }
}

/// Everything `handle_request` needs besides the input.
#[derive(Debug)]
pub struct Site {
    /// What to serve.
    pub content: Arc<Content>,
    /// Size limits.
    pub limits: Limits,
    /// Set while the server shuts down: every response closes its connection.
    pub closing: bool,
    /// Requests for exactly this target get [`Outcome::Stats`].
    pub stats_path: Option<String>,
    /// CPU time to spend on each answered request ([`Site::work`]).
    pub work: std::time::Duration,
}

impl Site {
    /// Spends the configured CPU time on a request (a stand-in for an
    /// application's work): spins until this thread's CPU clock has advanced
    /// that much, so time the thread is preempted does not count.
    pub fn work(&self) {
        spend_cpu(self.work);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// Writes a response head with `Content-Length: length` (and `Connection: close`
/// unless `keep_alive`), for callers that send their own body.
pub fn write_simple_head(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8; HTTP_DATE_LEN],
    content_type: &str,
    length: u64,
    keep_alive: bool,
) {
    write_head(
        out,
        &Head {
            status,
            date,
            content_type,
            length,
            last_modified: None,
            keep_alive,
            http10: false,
        },
    );
}

/// Writes a complete error response that closes the connection: status line,
/// `Date`, a short text body.
pub fn write_error(out: &mut Vec<u8>, status: u16, date: &[u8; HTTP_DATE_LEN], extra: &str) {
    let text = reason(status);
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {status} {text}\r\nServer: evq\r\nDate: {}\r\n{extra}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}\n",
        std::str::from_utf8(date).unwrap_or(""),
        text.len() + 1
    );
}

fn error(consumed: usize, status: u16, out: &mut Vec<u8>, date: &[u8; HTTP_DATE_LEN]) -> Outcome {
    let extra = if status == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    write_error(out, status, date, extra);
    Outcome::Done(Reply {
        consumed,
        status,
        keep_alive: false,
        body: Body::None,
    })
}

struct Head<'a> {
    status: u16,
    date: &'a [u8; HTTP_DATE_LEN],
    content_type: &'a str,
    length: u64,
    last_modified: Option<i64>,
    keep_alive: bool,
    http10: bool,
}

fn write_head(out: &mut Vec<u8>, h: &Head<'_>) {
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\nServer: evq\r\nDate: {}\r\n",
        h.status,
        reason(h.status),
        std::str::from_utf8(h.date).unwrap_or("")
    );
    if h.status != 304 {
        let _ = write!(
            out,
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            h.content_type, h.length
        );
    }
    if let Some(m) = h.last_modified {
        out.extend_from_slice(b"Last-Modified: ");
        out.extend_from_slice(&format_http_date(m));
        out.extend_from_slice(b"\r\n");
    }
    if !h.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if h.http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Smallest fixed reply that is sent from its shared buffer instead of being
/// copied into the connection's output buffer.
pub const COPY_LIMIT: usize = 16 * 1024;

/// Consumes at most one request from `input`, writing its response head (and any
/// body small enough to copy) into `out`.
///
/// Never panics, whatever `input` holds. Errors (400, 403, 404, 405, 413, 414, 431,
/// 501) are answered with a complete response and `keep_alive: false`; the caller
/// sends `out` and closes.
pub fn handle_request(
    input: &[u8],
    site: &Site,
    date: &[u8; HTTP_DATE_LEN],
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> Outcome {
    let limits = site.limits;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(input) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            let line_len = input
                .iter()
                .position(|&b| b == b'\n')
                .unwrap_or(input.len());
            if line_len > limits.max_uri + 32 {
                return error(input.len(), 414, out, date);
            }
            if input.len() >= limits.max_head {
                return error(input.len(), 431, out, date);
            }
            return Outcome::Incomplete;
        }
        Err(httparse::Error::TooManyHeaders) => return error(input.len(), 431, out, date),
        Err(_) => return error(input.len(), 400, out, date),
    };
    if head_len > limits.max_head {
        return error(input.len(), 431, out, date);
    }
    let (method, target, version) = match (req.method, req.path, req.version) {
        (Some(m), Some(p), Some(v)) => (m, p, v),
        _ => return error(input.len(), 400, out, date),
    };
    if target.len() > limits.max_uri {
        return error(input.len(), 414, out, date);
    }
    let is_head = method == "HEAD";
    if method != "GET" && !is_head {
        let known = matches!(
            method,
            "POST" | "PUT" | "DELETE" | "OPTIONS" | "PATCH" | "TRACE" | "CONNECT"
        );
        return error(input.len(), if known { 405 } else { 501 }, out, date);
    }
    let http10 = version == 0;
    let mut has_host = false;
    let mut framing = BodyHeaders::default();
    let mut ims = None;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        // Content-Length (conflicting values in any order are a 400), Transfer-
        // Encoding and Connection (every line's options combined) are read as
        // the proxy and `evq load` read them.
        match framing.field(name, h.value) {
            Ok(true) => {}
            Ok(false) if name.eq_ignore_ascii_case(b"host") => {
                if has_host {
                    return error(input.len(), 400, out, date);
                }
                has_host = true;
            }
            Ok(false) if name.eq_ignore_ascii_case(b"if-modified-since") => {
                ims = parse_http_date(h.value);
            }
            Ok(false) => {}
            Err(_) => return error(input.len(), 400, out, date),
        }
    }
    // A GET with a coded body: not worth decoding; refuse and close (RFC 9112
    // §6.3 allows a server to refuse Transfer-Encoding with Content-Length, and
    // §6.1 says a 1.0 message with it is faulty).
    if framing.has_transfer_encoding {
        return error(input.len(), 400, out, date);
    }
    let mut keep_alive = framing.persistent(!http10);
    let body_len = framing.length.unwrap_or(0);
    if !http10 && !has_host {
        return error(input.len(), 400, out, date);
    }
    // A body on GET/HEAD is legal but meaningless: skip it if it is all here.
    let consumed = match usize::try_from(body_len)
        .ok()
        .and_then(|b| head_len.checked_add(b))
    {
        Some(c) if c <= input.len() => c,
        Some(c) if c <= limits.max_head => return Outcome::Incomplete,
        _ => return error(input.len(), 413, out, date),
    };
    if site.closing {
        keep_alive = false;
    }
    if site.stats_path.as_deref() == Some(target) {
        return Outcome::Stats {
            reply: Reply {
                consumed,
                status: 200,
                keep_alive,
                body: Body::None,
            },
            head_only: is_head,
        };
    }
    match &*site.content {
        Content::Fixed(body) => {
            if target.as_bytes().first() != Some(&b'/') && target != "*" {
                return error(input.len(), 400, out, date);
            }
            write_head(
                out,
                &Head {
                    status: 200,
                    date,
                    content_type: "text/plain",
                    length: body.len() as u64,
                    last_modified: None,
                    keep_alive,
                    http10,
                },
            );
            let body = if is_head {
                Body::None
            } else if body.len() <= COPY_LIMIT {
                out.extend_from_slice(body);
                Body::None
            } else {
                Body::Fixed { offset: 0 }
            };
            Outcome::Done(Reply {
                consumed,
                status: 200,
                keep_alive,
                body,
            })
        }
        Content::Files(root) => {
            if let Err(status) = resolve_path(target.as_bytes(), &mut scratch.path) {
                return error(input.len(), status, out, date);
            }
            // A small file found shorter than its cache entry says (truncated
            // under it) is forgotten and opened again, once: the head always
            // says what the file holds when it is written.
            for fresh in [false, true] {
                let file = match scratch
                    .files
                    .open(root, &mut scratch.path, COPY_LIMIT as u64)
                {
                    Ok(f) => f,
                    Err(status) => return error(input.len(), status, out, date),
                };
                let (fd, info, ctype) = (file.fd, file.info, file.content_type);
                let not_modified = ims.is_some_and(|t| info.mtime <= t);
                let status = if not_modified { 304 } else { 200 };
                let head_start = out.len();
                write_head(
                    out,
                    &Head {
                        status,
                        date,
                        content_type: ctype,
                        length: info.size,
                        last_modified: Some(info.mtime),
                        keep_alive,
                        http10,
                    },
                );
                let body = if is_head || not_modified || info.size == 0 {
                    if file.owned {
                        evq_os::io::close(fd);
                    }
                    Body::None
                } else if !file.owned {
                    // A small file, borrowed from the cache: its bytes follow the
                    // head in the same buffer, so head and body leave in one send.
                    let start = out.len();
                    out.resize(start + info.size as usize, 0);
                    if sys::pread_all(fd, &mut out[start..]).is_err() {
                        out.truncate(head_start);
                        scratch.files.forget(&file);
                        if fresh {
                            // Shrank again between opening and reading, or unreadable.
                            return error(input.len(), 500, out, date);
                        }
                        continue;
                    }
                    Body::None
                } else {
                    Body::File { fd, len: info.size }
                };
                return Outcome::Done(Reply {
                    consumed,
                    status,
                    keep_alive,
                    body,
                });
            }
            error(input.len(), 500, out, date)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(s: &str) -> Result<String, u16> {
        let mut out = Vec::new();
        resolve_path(s.as_bytes(), &mut out)?;
        out.pop();
        Ok(String::from_utf8(out).unwrap_or_default())
    }

    #[test]
    fn paths() {
        assert_eq!(rp("/"), Ok(".".into()));
        assert_eq!(rp("/a/b.html?x=1"), Ok("a/b.html".into()));
        assert_eq!(rp("//a/./b/"), Ok("a/b".into()));
        assert_eq!(rp("/a%20b"), Ok("a b".into()));
        assert_eq!(rp("/../etc/passwd"), Err(403));
        assert_eq!(rp("/a/%2e%2e/%2E%2E/x"), Err(403));
        assert_eq!(rp("/a%2fb"), Err(403));
        assert_eq!(rp("/a%5cb"), Err(403));
        assert_eq!(rp("/a%00"), Err(400));
        assert_eq!(rp("/a%zz"), Err(400));
        assert_eq!(rp("/a%2"), Err(400));
        assert_eq!(rp("a"), Err(400));
        assert_eq!(rp("/..a/b.."), Ok("..a/b..".into()));
    }

    #[test]
    fn types() {
        assert_eq!(content_type(b"index.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"x"), "application/octet-stream");
        assert_eq!(content_type(b"a.png"), "image/png");
    }

    fn fixed_site(n: usize) -> Site {
        Site {
            content: Arc::new(Content::Fixed(vec![b'x'; n].into())),
            limits: Limits::default(),
            closing: false,
            stats_path: None,
            work: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn fixed_pipelined_and_errors() {
        let site = fixed_site(3);
        let date = crate::date::format_http_date(0);
        let mut s = Scratch::default();
        let mut out = Vec::new();
        let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        match handle_request(input, &site, &date, &mut s, &mut out) {
            Outcome::Done(r) => {
                assert_eq!(r.consumed, input.len() / 2);
                assert!(r.keep_alive);
                assert!(out.ends_with(b"\r\n\r\nxxx"));
            }
            o => panic!("{o:?}"),
        }
        for (req, status) in [
            (&b"POST / HTTP/1.1\r\nHost: a\r\n\r\n"[..], 405u16),
            (b"BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501),
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET\x01 / HTTP/1.1\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
                400,
            ),
        ] {
            out.clear();
            match handle_request(req, &site, &date, &mut s, &mut out) {
                Outcome::Done(r) => assert_eq!((r.status, r.keep_alive), (status, false)),
                o => panic!("{o:?}"),
            }
        }
        assert_eq!(
            handle_request(b"GET / HTTP/1.1\r\nHo", &site, &date, &mut s, &mut out),
            Outcome::Incomplete
        );
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(5000));
        match handle_request(long.as_bytes(), &site, &date, &mut s, &mut out) {
            Outcome::Done(r) => assert_eq!(r.status, 414),
            o => panic!("{o:?}"),
        }
    }
}
