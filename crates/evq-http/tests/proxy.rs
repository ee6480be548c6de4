//! The proxy between real clients and origins on loopback: a scripted origin for
//! framing and failures, and the evq server as an origin on every backend.

mod common;

use common::*;
use evq_http::{ProxyConfig, ProxyHandle};
use evq_wire::{BodyHeaders, Strictness};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// An origin that answers by path: /cl, /chunked, /close, /garbage, /hang,
/// /reset, /echo (reads a Content-Length or chunked body, reports its size).
fn scripted_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || serve_origin_conn(s));
        }
    });
    addr
}

fn serve_origin_conn(mut s: TcpStream) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let (path, head_len, mut framing) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
                let bh = BodyHeaders::read(req.headers, Strictness::Strict).unwrap();
                let f = bh.request_framing(Strictness::Strict).unwrap();
                break (req.path.unwrap().to_string(), n, f);
            }
            match s.read(&mut tmp) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        buf.drain(..head_len);
        let mut body_bytes = 0;
        loop {
            if framing.is_done() {
                break;
            }
            let n = framing.advance(&buf).unwrap().used;
            body_bytes += n;
            buf.drain(..n);
            if framing.is_done() {
                break;
            }
            match s.read(&mut tmp) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let reply: Vec<u8> = match path.as_str() {
            "/cl" => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            "/chunked" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n".to_vec(),
            "/big" => {
                let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".to_vec();
                r.extend(std::iter::repeat_n(b'z', 1_000_000));
                r
            }
            "/echo" => {
                let body = format!("{body_bytes}");
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
            }
            "/close" => {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\nuntil-close");
                return;
            }
            "/garbage" => b"NOT HTTP AT ALL\r\n\r\n".to_vec(),
            "/hang" => {
                std::thread::sleep(Duration::from_secs(5));
                return;
            }
            "/reset" => {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&s);
                let l = libc::linger { l_onoff: 1, l_linger: 0 };
                // SAFETY: `l` is a live linger of the size passed; `fd` is open.
                unsafe {
                    libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, (&l as *const libc::linger).cast(), std::mem::size_of::<libc::linger>() as u32)
                };
                return;
            }
            _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
        };
        if s.write_all(&reply).is_err() {
            return;
        }
    }
}

fn proxy_to(origin: SocketAddr, kind: Option<evq::BackendKind>) -> ProxyHandle {
    proxy_mode(origin, kind, None)
}

fn proxy_mode(
    origin: SocketAddr,
    kind: Option<evq::BackendKind>,
    mode: Option<evq_http::DeliveryMode>,
) -> ProxyHandle {
    ProxyHandle::start(&ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        origin,
        backend: kind,
        origin_timeout: Duration::from_millis(500),
        mode,
        ..ProxyConfig::default()
    })
    .expect("proxy starts")
}

#[test]
fn relays_content_length_and_chunked_with_keepalive_pool() {
    relay_framings(None);
    relay_framings(Some(evq_http::DeliveryMode::Oneshot));
}

fn relay_framings(mode: Option<evq_http::DeliveryMode>) {
    let proxy = proxy_mode(scripted_origin(), None, mode);
    let mut c = Client::connect(proxy.addr());
    for _ in 0..2 {
        c.send(b"GET /cl HTTP/1.1\r\nHost: o\r\n\r\n");
        let r = c.response(false).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
        c.send(b"GET /chunked HTTP/1.1\r\nHost: o\r\n\r\n");
        let r = c.response(false).unwrap();
        assert_eq!(r.body, b"hello world");
    }
    // Pipelined, and a body bigger than every buffer.
    c.send(b"GET /cl HTTP/1.1\r\nHost: o\r\n\r\nGET /big HTTP/1.1\r\nHost: o\r\n\r\nGET /chunked HTTP/1.1\r\nHost: o\r\n\r\n");
    assert_eq!(c.response(false).unwrap().body, b"hello");
    assert_eq!(c.response(false).unwrap().body.len(), 1_000_000);
    assert_eq!(c.response(false).unwrap().body, b"hello world");
    // Request bodies, both framings.
    c.send(b"POST /echo HTTP/1.1\r\nHost: o\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(c.response(false).unwrap().body, b"11");
    c.send(b"POST /echo HTTP/1.1\r\nHost: o\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(c.response(false).unwrap().body, b"13");
    // A body that runs until close: relayed, then the client connection closes.
    c.send(b"GET /close HTTP/1.1\r\nHost: o\r\n\r\n");
    assert_eq!(c.response(false).unwrap().body, b"until-close");
    let report = proxy.stop();
    assert_eq!(report.relayed, 10, "{report}");
    assert!(report.origin_reuses >= 5, "{report}");
    assert_eq!(report.bad_gateway, 0);
}

#[test]
fn origin_failures_become_502_and_timeouts_504() {
    let proxy = proxy_to(scripted_origin(), None);
    for (path, status) in [("/garbage", 502), ("/reset", 502), ("/hang", 504)] {
        let r = get(
            proxy.addr(),
            &format!("GET {path} HTTP/1.1\r\nHost: o\r\n\r\n"),
        )
        .unwrap_or_else(|| panic!("no answer for {path}"));
        assert_eq!(r.status, status, "{path}");
    }
    // The proxy still works.
    assert_eq!(
        get(proxy.addr(), "GET /cl HTTP/1.1\r\nHost: o\r\n\r\n")
            .unwrap()
            .body,
        b"hello"
    );
    let report = proxy.stop();
    assert_eq!(
        (report.bad_gateway, report.gateway_timeout),
        (2, 1),
        "{report}"
    );

    // Nobody listening at the origin address.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = proxy_to(dead, None);
    let r = get(proxy.addr(), "GET / HTTP/1.1\r\nHost: o\r\n\r\n").unwrap();
    assert_eq!(r.status, 502);
    // Bad client input.
    let r = get(
        proxy.addr(),
        "GET / HTTP/1.1\r\nHost: o\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        get(proxy.addr(), "\x01\x02 nonsense\r\n\r\n")
            .unwrap()
            .status,
        400
    );
    proxy.stop();
}

#[test]
fn every_backend_proxies_to_the_evq_server() {
    use evq_http::DeliveryMode;
    for (kind, mode) in backends()
        .into_iter()
        .flat_map(|k| [(k, DeliveryMode::Level), (k, DeliveryMode::Oneshot)])
    {
        let server = start(&config(Some(kind)));
        let proxy = proxy_mode(server.addr(), Some(kind), Some(mode));
        let mut c = Client::connect(proxy.addr());
        c.send(b"GET / HTTP/1.1\r\nHost: o\r\n\r\nGET / HTTP/1.1\r\nHost: o\r\n\r\n");
        for _ in 0..2 {
            let r = c
                .response(false)
                .unwrap_or_else(|| panic!("no response via {kind} {mode:?}"));
            assert_eq!((r.status, r.body.len()), (200, 1024), "{kind} {mode:?}");
        }
        c.send(b"HEAD / HTTP/1.1\r\nHost: o\r\n\r\n");
        let r = c.response(true).unwrap();
        assert_eq!(r.header("content-length"), Some("1024"));
        let report = proxy.stop();
        assert_eq!(report.relayed, 3, "{kind} {mode:?}: {report}");
        assert_eq!(report.origin_connects, 1, "{kind} {mode:?}: {report}");
        server.stop();
    }
}

#[test]
fn stale_pooled_connection_is_retried() {
    let mut cfg = config(None);
    cfg.idle_timeout = Duration::from_millis(200);
    let server = start(&cfg);
    let proxy = proxy_to(server.addr(), None);
    assert_eq!(
        get(proxy.addr(), "GET / HTTP/1.1\r\nHost: o\r\n\r\n")
            .unwrap()
            .status,
        200
    );
    // The origin closes the pooled connection after its idle timeout.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        get(proxy.addr(), "GET / HTTP/1.1\r\nHost: o\r\n\r\n")
            .unwrap()
            .status,
        200
    );
    let report = proxy.stop();
    assert_eq!(report.bad_gateway, 0, "{report}");
    server.stop();
}

#[test]
fn half_closed_and_vanishing_clients() {
    let proxy = proxy_to(scripted_origin(), None);
    // Request, then shutdown(SHUT_WR): the response still arrives.
    let mut c = Client::connect(proxy.addr());
    c.send(b"GET /cl HTTP/1.1\r\nHost: o\r\n\r\n");
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(c.response(false).unwrap().body, b"hello");
    assert!(c.closed());
    // A client that vanishes mid-response frees its exchange; others go on.
    {
        let mut s = TcpStream::connect(proxy.addr()).unwrap();
        s.write_all(b"GET /big HTTP/1.1\r\nHost: o\r\n\r\n")
            .unwrap();
        let mut some = [0u8; 100];
        s.read_exact(&mut some).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        get(proxy.addr(), "GET /chunked HTTP/1.1\r\nHost: o\r\n\r\n")
            .unwrap()
            .body,
        b"hello world"
    );
    proxy.stop();
}
