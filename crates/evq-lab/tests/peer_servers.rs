//! Each installed peer server starts from the lab's configuration, serves the
//! docroot's files byte for byte over one keep-alive connection, reports its
//! processes, memory and CPU, and is gone after drop.

use evq_lab::rig::{Docroot, PeerServer, PeerServerKind};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads one response with a Content-Length body; returns (status, body length).
fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u16, usize) {
    let mut tmp = [0u8; 8192];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = r.parse(buf) {
            let status = r.code.unwrap();
            let len: usize = r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .expect("content-length");
            while buf.len() < n + len {
                let k = s.read(&mut tmp).expect("body");
                assert!(k > 0, "closed mid-body");
                buf.extend_from_slice(&tmp[..k]);
            }
            assert!(buf[n..n + len].iter().all(|&b| b == b'x'));
            buf.drain(..n + len);
            return (status, len);
        }
        let k = s.read(&mut tmp).expect("head");
        assert!(k > 0, "closed before a response");
        buf.extend_from_slice(&tmp[..k]);
    }
}

/// Field 22 of /proc/PID/stat: when the process started (tells a reused pid apart).
fn start_time(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(19).map(String::from))
        })
        .unwrap_or_default()
}

#[test]
fn every_installed_peer_serves_the_docroot() {
    let root = Docroot::with_sizes(&[128, 1024]).unwrap();
    let mut ran = 0;
    for kind in PeerServerKind::ALL {
        if let Err(why) = kind.available() {
            evq_testkit::skip(kind.name(), why);
            continue;
        }
        let server = PeerServer::start(kind, &root, 1).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        for size in [128, 1024, 128] {
            let req = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", Docroot::uri(size));
            s.write_all(req.as_bytes()).unwrap();
            assert_eq!(response(&mut s, &mut buf), (200, size), "{kind}");
        }
        s.write_all(b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut tmp = [0u8; 4096];
        let n = s.read(&mut tmp).unwrap();
        assert!(tmp[..n].starts_with(b"HTTP/1.1 404"), "{kind}");
        let pids: Vec<(u32, String)> = server
            .processes()
            .into_iter()
            .map(|pid| (pid, start_time(pid)))
            .collect();
        assert!(!pids.is_empty(), "{kind}");
        assert!(server.rss_bytes() > 0, "{kind}");
        let addr = server.addr();
        drop(server);
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
            "{kind} still listening after drop"
        );
        // SIGKILL'd workers take a moment to die; a pid reused by another process
        // (another start time) is not ours.
        for (pid, started) in pids {
            let gone = || {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                stat.is_empty() || stat.contains(") Z ") || start_time(pid) != started
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !gone() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(gone(), "{kind}: process {pid} outlived the server");
        }
        ran += 1;
    }
    eprintln!("{ran} peer servers checked");
}
