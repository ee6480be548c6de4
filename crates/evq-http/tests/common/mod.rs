//! Helpers shared by the integration tests: a tiny blocking HTTP client that reads
//! exactly one response at a time (so pipelining can be checked), and servers on
//! loopback with short timeouts.

#![allow(dead_code)]

pub mod flood;

use evq::BackendKind;
use evq_http::{ServeConfig, ServerHandle};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// Backends this kernel has.
pub fn backends() -> Vec<BackendKind> {
    BackendKind::candidates()
}

pub fn config(kind: Option<BackendKind>) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        backend: kind,
        ..ServeConfig::default()
    }
}

pub fn start(cfg: &ServeConfig) -> ServerHandle {
    ServerHandle::start(cfg).expect("server starts")
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client on a stream connected already (its read timeout set).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 65536];
        loop {
            // EINTR is not an answer: retry (a thread that ever touched io_uring,
            // for instance, gets task work that interrupts its blocking calls).
            match self.stream.read(&mut tmp) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return true;
                }
            }
        }
    }

    /// Reads one response; `head_only` for answers to HEAD. None on EOF/reset.
    pub fn response(&mut self, head_only: bool) -> Option<Response> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = resp.code.unwrap_or(0);
                    let hs: Vec<(String, String)> = resp
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect();
                    let get = |k: &str| {
                        hs.iter()
                            .find(|(n, _)| n.eq_ignore_ascii_case(k))
                            .map(|(_, v)| v.clone())
                    };
                    let chunked = get("transfer-encoding").is_some_and(|v| v.contains("chunked"));
                    let len: Option<usize> = get("content-length").and_then(|v| v.parse().ok());
                    self.buf.drain(..n);
                    let body = if head_only || status == 304 || status == 204 {
                        Vec::new()
                    } else if chunked {
                        self.chunked_body()?
                    } else if let Some(len) = len {
                        while self.buf.len() < len {
                            if !self.fill() {
                                return None;
                            }
                        }
                        self.buf.drain(..len).collect()
                    } else {
                        while self.fill() {}
                        std::mem::take(&mut self.buf)
                    };
                    return Some(Response {
                        status,
                        headers: hs,
                        body,
                    });
                }
                Ok(httparse::Status::Partial) => {
                    if !self.fill() {
                        return None;
                    }
                }
                Err(e) => panic!(
                    "bad response from server: {e}: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }

    fn chunked_body(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break p;
                }
                if !self.fill() {
                    return None;
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
            self.buf.drain(..line_end + 2);
            if size == 0 {
                while !self.buf.starts_with(b"\r\n") {
                    let p = loop {
                        if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                            break p;
                        }
                        if !self.fill() {
                            return None;
                        }
                    };
                    if p == 0 {
                        break;
                    }
                    self.buf.drain(..p + 2);
                }
                while self.buf.len() < 2 {
                    if !self.fill() {
                        return None;
                    }
                }
                self.buf.drain(..2);
                return Some(body);
            }
            while self.buf.len() < size + 2 {
                if !self.fill() {
                    return None;
                }
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }

    /// True if the server closes (EOF or reset) within the read timeout.
    pub fn closed(&mut self) -> bool {
        let mut tmp = [0u8; 4096];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }
}

/// One request on a fresh connection.
pub fn get(addr: SocketAddr, raw: &str) -> Option<Response> {
    let mut c = Client::connect(addr);
    c.send(raw.as_bytes());
    c.response(raw.starts_with("HEAD"))
}

/// Polls `f` until true or ~10 s pass.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A document root with files, a subdirectory without index, and symlinks
/// inside and out of the root; removed, with the file outside it, when dropped
/// (also when the test fails), so test runs leave nothing in the temporary
/// directory.
pub fn docroot(name: &str) -> Docroot {
    let dir = std::env::temp_dir().join(format!("evq-http-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub/empty")).unwrap();
    std::fs::write(dir.join("index.html"), "<h1>home</h1>\n").unwrap();
    std::fs::write(dir.join("sub/a.txt"), "hello\n").unwrap();
    std::fs::write(dir.join("big.bin"), vec![7u8; 3 << 20]).unwrap();
    std::fs::write(dir.join("style.css"), "p{}").unwrap();
    let outside = dir.with_extension("outside");
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("escape")).unwrap();
    std::os::unix::fs::symlink("sub/a.txt", dir.join("inside-link")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("etc")).unwrap();
    Docroot(dir)
}

/// [`docroot`]'s directory, removed when dropped.
pub struct Docroot(PathBuf);

impl std::ops::Deref for Docroot {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Docroot {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Docroot {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Docroot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("outside"));
    }
}

/// Sends a request head too large for any server (32 MiB of one field, more
/// than the kernel's socket buffers hold), all of it, before reading — as
/// most clients do — and returns the status the server answered with; `Err`
/// with what the client met instead (a reset, once, before it could read the
/// answer: the server had closed with input unread).
pub fn status_for_endless_head(addr: SocketAddr) -> Result<u16, String> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
    head.resize(head.len() + (32 << 20), b'a');
    s.write_all(&head).map_err(|e| format!("sending: {e}"))?;
    let mut got = Vec::new();
    let end = loop {
        let mut tmp = [0u8; 4096];
        match s.read(&mut tmp) {
            Ok(0) => break None,
            Ok(n) => got.extend_from_slice(&tmp[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    let text = String::from_utf8_lossy(&got);
    match text.strip_prefix("HTTP/1.1 ").and_then(|t| t.get(..3)) {
        Some(code) => Ok(code.parse().unwrap()),
        None => Err(format!("{end:?} after {text:?}")),
    }
}
