//! `evq-http serve --io completion` as a user runs it: keep-alive, pipelining,
//! `Connection: close`, HTTP/1.0, a malformed request, many connections at once,
//! refused flags, and SIGINT → exit with a report that counts every request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(20);

struct Server {
    child: Child,
    addr: SocketAddr,
}

/// Starts the server on an ephemeral port; `None` (a skip) where the kernel lacks
/// the completion API.
fn start(extra: &[&str]) -> Option<Server> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evq-http"))
        .args(["serve", "--io", "completion", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(addr) = line
        .split_whitespace()
        .find_map(|w| w.parse::<SocketAddr>().ok())
    else {
        let _ = child.wait();
        evq_testkit::skip("io_uring completions", line.trim());
        return None;
    };
    Some(Server { child, addr })
}

impl Server {
    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s
    }

    /// SIGINT, then the report line on stdout.
    fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid, which we have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(status.success(), "exit {status}: {out}");
        out
    }
}

/// Reads one response: (status, body length), checking the body's bytes arrive.
fn read_response(r: &mut BufReader<TcpStream>) -> (u16, usize) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .expect("status")
        .parse()
        .unwrap();
    let mut length = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).unwrap();
    (status, length)
}

fn requests_in(report: &str) -> u64 {
    let after = report
        .split("requests ")
        .nth(1)
        .expect("requests in report");
    after.split(';').next().unwrap().trim().parse().unwrap()
}

#[test]
fn keep_alive_pipelining_close_and_errors() {
    let Some(server) = start(&["--reply-size", "1024"]) else {
        return;
    };
    let mut sent = 0;
    // Keep-alive: 200 requests one after another on one connection.
    let mut conn = BufReader::new(server.connect());
    for _ in 0..200 {
        conn.get_mut()
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut conn), (200, 1024));
        sent += 1;
    }
    // Pipelining: 32 requests in one write, 32 responses in order.
    let burst = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(32);
    conn.get_mut().write_all(&burst).unwrap();
    for _ in 0..32 {
        assert_eq!(read_response(&mut conn), (200, 1024));
        sent += 1;
    }
    // Connection: close ends the connection after the reply.
    conn.get_mut()
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut conn), (200, 1024));
    sent += 1;
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    // HTTP/1.0 without keep-alive: one reply, then EOF.
    let mut c = BufReader::new(server.connect());
    c.get_mut().write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut c), (200, 1024));
    sent += 1;
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    // Malformed: 400 and close.
    let mut c = BufReader::new(server.connect());
    c.get_mut().write_all(b"NONSENSE\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut c).0, 400);
    sent += 1;
    c.read_to_end(&mut rest).unwrap();
    // Many connections at once, each with a request in flight.
    let mut many: Vec<BufReader<TcpStream>> =
        (0..64).map(|_| BufReader::new(server.connect())).collect();
    for c in &mut many {
        c.get_mut()
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
    }
    for c in &mut many {
        assert_eq!(read_response(c), (200, 1024));
        sent += 1;
    }
    // A client that vanishes mid-request costs nothing but its connection.
    let mut gone = server.connect();
    gone.write_all(b"GET / HT").unwrap();
    drop(gone);
    drop(many);
    let report = server.stop();
    assert_eq!(requests_in(&report), sent, "{report}");
}

#[test]
fn two_threads_share_the_port() {
    let Some(server) = start(&["--threads", "2"]) else {
        return;
    };
    let mut conns: Vec<BufReader<TcpStream>> =
        (0..16).map(|_| BufReader::new(server.connect())).collect();
    for round in 0..10 {
        for c in &mut conns {
            c.get_mut()
                .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
        }
        for c in &mut conns {
            assert_eq!(read_response(c).0, 200, "round {round}");
        }
    }
    let report = server.stop();
    assert_eq!(requests_in(&report), 160, "{report}");
}

#[test]
fn settings_it_lacks_are_refused_clearly() {
    for flags in [
        &["--root", "/tmp"][..],
        &["--shed"],
        &["--stats-path", "/s"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_evq-http"))
            .args(["serve", "--io", "completion", "--listen", "127.0.0.1:0"])
            .args(flags)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--io completion does not support"),
            "{flags:?}: {err}"
        );
    }
}
