//! The suite's own HTTP/1.1 client side, written apart from evq's framing code
//! (evq-wire) so that it can judge it: requests as bytes, and a response reader
//! that frames by `Content-Length`, chunked coding or close, and says exactly how
//! a response ended when it did not end well.

use std::io::{self, Read};

/// Largest response head the reader accepts.
const MAX_HEAD: usize = 64 * 1024;

/// A `GET` for `path` to a loopback server, keep-alive unless `close`, with
/// extra header lines (`"Name: value"`).
pub fn get(path: &str, extra: &[String], close: bool) -> Vec<u8> {
    request("GET", path, extra, close, b"")
}

/// A request with `body` (sent with its `Content-Length` when not empty).
pub fn request(method: &str, path: &str, extra: &[String], close: bool, body: &[u8]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for h in extra {
        r.push_str(h);
        r.push_str("\r\n");
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    if !body.is_empty() {
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut bytes = r.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// A complete response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The server said `Connection: close` (or answered HTTP/1.0 without
    /// keep-alive): it will close after this response.
    pub close: bool,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

/// Why no complete response was read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection ended (EOF) after `received` bytes of this response (0:
    /// before any).
    Closed {
        /// Bytes of this response received before the end.
        received: usize,
    },
    /// The connection was reset or another socket error came.
    Io(io::Error),
    /// Bytes that are not an HTTP/1.1 response (the reason).
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed { received: 0 } => write!(f, "closed before a response"),
            ReadError::Closed { received } => {
                write!(f, "closed after {received} bytes of a response")
            }
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Malformed(why) => write!(f, "not HTTP: {why}"),
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl ReadError {
    /// A read timeout (`EAGAIN`/`EWOULDBLOCK` on a socket with `SO_RCVTIMEO`).
    pub fn timed_out(&self) -> bool {
        matches!(self, ReadError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// Reads responses from one connection, keeping bytes that belong to the next
/// (pipelining).
#[derive(Debug, Default)]
pub struct ResponseReader {
    buf: Vec<u8>,
}

enum Body {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

impl ResponseReader {
    /// A reader with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes received beyond the responses read so far.
    pub fn leftover(&self) -> &[u8] {
        &self.buf
    }

    fn fill(&mut self, src: &mut impl Read) -> Result<(), ReadError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match src.read(&mut chunk) {
                Ok(0) => {
                    return Err(ReadError::Closed {
                        received: self.buf.len(),
                    })
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// Reads one whole response to a request made with `method`.
    ///
    /// # Errors
    /// As [`ReadError`] says.
    pub fn read(&mut self, src: &mut impl Read, method: &str) -> Result<Response, ReadError> {
        // The head.
        let (status, close, body, head_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = resp.code.unwrap_or(0);
                    let version = resp.version.unwrap_or(1);
                    let mut length = None;
                    let mut chunked = false;
                    let mut conn_close = version == 0;
                    for h in resp.headers.iter() {
                        let v = String::from_utf8_lossy(h.value);
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let n: usize = v.trim().parse().map_err(|_| {
                                ReadError::Malformed(format!("Content-Length {v:?}"))
                            })?;
                            if length.is_some_and(|l| l != n) {
                                return Err(ReadError::Malformed("two Content-Lengths".into()));
                            }
                            length = Some(n);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = v.to_ascii_lowercase().contains("chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            let v = v.to_ascii_lowercase();
                            if v.contains("close") {
                                conn_close = true;
                            } else if v.contains("keep-alive") {
                                conn_close = false;
                            }
                        }
                    }
                    let body = if method == "HEAD" || status < 200 || status == 204 || status == 304
                    {
                        Body::None
                    } else if chunked {
                        Body::Chunked
                    } else if let Some(n) = length {
                        Body::Length(n)
                    } else {
                        conn_close = true;
                        Body::UntilClose
                    };
                    break (status, conn_close, body, n);
                }
                Ok(httparse::Status::Partial) => {
                    if self.buf.len() > MAX_HEAD {
                        return Err(ReadError::Malformed(format!("head over {MAX_HEAD} bytes")));
                    }
                    self.fill(src)?;
                }
                Err(e) => {
                    let start =
                        String::from_utf8_lossy(&self.buf[..self.buf.len().min(40)]).into_owned();
                    return Err(ReadError::Malformed(format!("{e} in {start:?}")));
                }
            }
        };
        // A 1xx is not the response: read the next one.
        if (100..200).contains(&status) {
            self.buf.drain(..head_len);
            return self.read(src, method);
        }
        let mut pos = head_len;
        let out = match body {
            Body::None => Vec::new(),
            Body::Length(n) => {
                while self.buf.len() < pos + n {
                    self.fill(src)?;
                }
                let b = self.buf[pos..pos + n].to_vec();
                pos += n;
                b
            }
            Body::UntilClose => loop {
                match self.fill(src) {
                    Ok(()) => {}
                    Err(ReadError::Closed { .. }) => {
                        let b = self.buf[pos..].to_vec();
                        pos = self.buf.len();
                        break b;
                    }
                    Err(e) => return Err(e),
                }
            },
            Body::Chunked => {
                let mut body = Vec::new();
                loop {
                    let line_end = loop {
                        if let Some(i) = find_crlf(&self.buf[pos..]) {
                            break pos + i;
                        }
                        if self.buf.len() - pos > 1024 {
                            return Err(ReadError::Malformed("chunk-size line over 1 KiB".into()));
                        }
                        self.fill(src)?;
                    };
                    let line = String::from_utf8_lossy(&self.buf[pos..line_end]).into_owned();
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .map_err(|_| ReadError::Malformed(format!("chunk size {line:?}")))?;
                    pos = line_end + 2;
                    if size == 0 {
                        // Trailers, then the empty line.
                        loop {
                            let end = loop {
                                if let Some(i) = find_crlf(&self.buf[pos..]) {
                                    break pos + i;
                                }
                                self.fill(src)?;
                            };
                            let empty = end == pos;
                            pos = end + 2;
                            if empty {
                                break;
                            }
                        }
                        break body;
                    }
                    while self.buf.len() < pos + size + 2 {
                        self.fill(src)?;
                    }
                    body.extend_from_slice(&self.buf[pos..pos + size]);
                    if &self.buf[pos + size..pos + size + 2] != b"\r\n" {
                        return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
                    }
                    pos += size + 2;
                }
            }
        };
        self.buf.drain(..pos);
        Ok(Response {
            status,
            close,
            body: out,
        })
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Vec<Result<Response, String>> {
        let mut src = bytes;
        let mut r = ResponseReader::new();
        let mut out = Vec::new();
        loop {
            match r.read(&mut src, "GET") {
                Ok(resp) => out.push(Ok(resp)),
                Err(ReadError::Closed { received: 0 }) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[test]
    fn lengths_chunks_and_pipelined_responses() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nxy\r\n1;ext\r\nz\r\n0\r\nT: 1\r\n\r\n";
        let got = read_all(wire);
        assert_eq!(got.len(), 2, "{got:?}");
        let a = got[0].as_ref().unwrap();
        assert_eq!(
            (a.status, a.close, a.body.as_slice()),
            (200, false, &b"abc"[..])
        );
        let b = got[1].as_ref().unwrap();
        assert_eq!(
            (b.status, b.close, b.body.as_slice()),
            (404, true, &b"xyz"[..])
        );
    }

    #[test]
    fn a_short_body_and_garbage_are_told_apart() {
        let short = read_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        assert_eq!(
            short,
            // 39 bytes of head and 3 of body: the count is of the response.
            vec![Err("closed after 42 bytes of a response".into())]
        );
        let bad =
            read_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n");
        assert!(
            bad[0].as_ref().unwrap_err().contains("chunk size"),
            "{bad:?}"
        );
        let head = read_all(b"GARBAGE\r\n\r\n");
        assert!(
            head[0].as_ref().unwrap_err().starts_with("not HTTP"),
            "{head:?}"
        );
    }

    #[test]
    fn requests_carry_length_and_close() {
        let r = request("POST", "/p", &["X-Req-Id: 7".into()], true, b"hi");
        assert_eq!(
            r,
            b"POST /p HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Req-Id: 7\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"
        );
    }
}
