//! The `evq-http` binary as a user runs it: descriptor exhaustion handled without
//! spinning (the reserve-descriptor trick), SIGTERM → graceful exit with the
//! counters printed as JSON.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

/// A child process that is killed and reaped when dropped: a test that fails
/// while the binary runs must not leave it running (it did).
struct Running(Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Starts the binary with `args` under a hard limit of 32 descriptors (it
/// cannot raise it), its JSON report on stdout, and waits until `addr` answers.
fn spawn_with_32_descriptors(addr: SocketAddr, args: &str) -> Running {
    let script = format!(
        "ulimit -Sn 32 && ulimit -Hn 32 && exec {} {args} --json",
        env!("CARGO_BIN_EXE_evq-http")
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Running(child);
    assert!(eventually(|| TcpStream::connect(addr).is_ok()));
    child
}

/// Holds more connections than `child` has descriptors for a second and
/// asserts it does not busy-loop meanwhile, then lets them go and waits until a
/// request is served again.
fn exhaust_descriptors_without_spinning(child: &Running, addr: SocketAddr) {
    let held: Vec<TcpStream> = (0..60)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(child.id());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let spent = cpu_ticks(child.id()) - before;
    // Not a busy loop: well under the second of CPU a spinning accept would burn
    // (ticks are 10 ms; allow a generous 40%).
    assert!(
        spent < 40 * t0.elapsed().as_millis() as u64 / 1000,
        "{spent} ticks burned while descriptors were exhausted"
    );
    drop(held);
    // Served again once descriptors are free.
    assert!(eventually(|| get(
        addr,
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    )
    .is_some_and(|r| r.status == 200)));
}

/// SIGTERM: a graceful exit within 10 s, and the counters it printed as JSON.
fn sigterm_report(mut child: Running, what: &str) -> serde_json::Value {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{what}: {status:?}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    serde_json::from_str(out.trim()).unwrap()
}

#[test]
fn descriptor_exhaustion_then_sigterm() {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = spawn_with_32_descriptors(addr, &format!("serve --listen {addr} --stats-path /s"));
    exhaust_descriptors_without_spinning(&child, addr);
    let stats = get(addr, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert!(v["accept_fd_exhausted"].as_u64().unwrap() >= 1, "{v}");
    let report = sigterm_report(child, "serve");
    assert!(
        report["responses"]["200"].as_u64().unwrap() >= 2,
        "{report}"
    );
}

#[test]
fn proxy_descriptor_exhaustion_does_not_spin() {
    let origin = start(&config(None));
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = format!("proxy --listen {addr} --origin {}", origin.addr());
    let child = spawn_with_32_descriptors(addr, &args);
    exhaust_descriptors_without_spinning(&child, addr);
    let report = sigterm_report(child, "proxy");
    assert!(report["relayed"].as_u64().unwrap() >= 1, "{report}");
    origin.stop();
}

/// Under a limit of 32 descriptors, 60 clients one after another, each kept
/// open and idle after its reply: once idle connections hold every
/// descriptor, each new client gets the descriptor of the oldest idle one
/// and is served at its first try (issue 19: each new client was reset until
/// the 60 s idle timeout freed a descriptor; later it was shed once, then let
/// in on its retry).
#[test]
fn idle_keep_alive_connections_make_room_when_descriptors_run_out() {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = spawn_with_32_descriptors(addr, &format!("serve --listen {addr}"));
    let mut held = served_at_first_try(addr, 60);
    // The first clients' connections were reclaimed; the last one is open.
    assert!(held[0].closed());
    drop(held);
    let report = sigterm_report(child, "serve");
    assert!(
        report["accept_fd_exhausted"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert!(
        report["idle_reclaimed"].as_u64().unwrap() >= 60 - 32,
        "{report}"
    );
    assert_eq!(report["responses"]["200"].as_u64(), Some(60), "{report}");
}

/// `n` clients one after another, each kept open and idle after its reply;
/// every one served at its first try.
fn served_at_first_try(addr: SocketAddr, n: usize) -> Vec<Client> {
    (0..n)
        .map(|i| {
            let mut c = Client::connect(addr);
            c.send(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
            let status = c.response(true).map(|r| r.status);
            assert_eq!(status, Some(200), "client {i}");
            c
        })
        .collect()
}

/// The proxy's side: under 32 descriptors, 60 clients kept idle one after
/// another are each served at their first try (the oldest idle clients and
/// pooled origin connections make room, for the client and for its origin
/// connection), and none is shed.
#[test]
fn proxy_idle_connections_make_room_when_descriptors_run_out() {
    let origin = start(&config(None));
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = format!("proxy --listen {addr} --origin {}", origin.addr());
    let child = spawn_with_32_descriptors(addr, &args);
    let mut held = served_at_first_try(addr, 60);
    assert!(held[0].closed());
    drop(held);
    let report = sigterm_report(child, "proxy");
    assert_eq!(report["refused"].as_u64(), Some(0), "{report}");
    assert!(
        report["idle_reclaimed"].as_u64().unwrap() >= 60 - 32,
        "{report}"
    );
    assert_eq!(report["relayed"].as_u64(), Some(60), "{report}");
    origin.stop();
}

/// Every backend from the command line, one and two threads: it starts (the
/// shutdown wake-up is a pipe per worker, which even the RT-signal backends can
/// watch — an eventfd made them fail with EPERM), serves, and SIGTERM ends it.
#[test]
fn every_backend_starts_serves_and_stops_on_sigterm() {
    for kind in backends() {
        for threads in ["1", "2"] {
            let port = free_port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let child = Command::new(env!("CARGO_BIN_EXE_evq-http"))
                .args(["serve", "--listen", &addr.to_string(), "--json"])
                .args(["--backend", kind.name(), "--threads", threads])
                .args(["--accept", "reuseport"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut child = Running(child);
            let up = eventually(|| TcpStream::connect(addr).is_ok());
            if !up {
                let _ = child.kill();
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("{kind} x{threads}: did not start: {err}");
            }
            let r = get(addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(r.map(|r| r.status), Some(200), "{kind} x{threads}");
            let report = sigterm_report(child, &format!("{kind} x{threads}"));
            assert_eq!(report["backend"], kind.name(), "{report}");
        }
    }
}

/// Runs the binary with `args` and returns how it ended and its stderr; the
/// command must end by itself within 10 s.
fn run_to_end(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evq-http"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

/// Every number flag of `evq serve` and `evq proxy` has a range: a value
/// outside it (zero where zero meant "silently ignored", sizes that panicked,
/// aborted or took gigabytes) stops the command at once with a message that
/// names the flag and its range.
#[test]
fn every_bad_flag_fails_fast_naming_the_flag_and_its_range() {
    let serve = ["serve", "--listen", "127.0.0.1:0"];
    let proxy = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--origin",
        "127.0.0.1:9",
    ];
    let cases: &[(&[&str], &str, &str)] = &[
        (&serve, "--threads=0", "1..=1024"),
        (&serve, "--threads=2000", "1..=1024"),
        (&serve, "--reply-size=18446744073709551615", "0..=268435456"),
        (&serve, "--reply-size=10000000000", "0..=268435456"),
        (&serve, "--reply-size=2000000000", "0..=268435456"),
        (&serve, "--max-conns=0", "1..=1073741824"),
        (&serve, "--max-head=0", "64..=1048576"),
        (&serve, "--max-uri=0", "1..=1048576"),
        (&serve, "--max-events=0", "1..=65536"),
        (&serve, "--shed-max-events=0", "1..=65536"),
        (&serve, "--header-timeout=0", "0.001..=86400"),
        (&serve, "--idle-timeout=-1", "0.001..=86400"),
        (&serve, "--idle-timeout=1e9", "0.001..=86400"),
        (&serve, "--grace=nan", "0..=3600"),
        (&serve, "--file-cache-valid=inf", "0..=3600"),
        (&serve, "--shed-gain=0", "0.001..=1"),
        (&serve, "--shed-threshold=-2", "0..=65536"),
        (&serve, "--stats-path=stats", "start with /"),
        (&proxy, "--origin-timeout=0", "0.001..=86400"),
        (&proxy, "--idle-timeout=0", "0.001..=86400"),
        (&proxy, "--pool-size=70000", "0..=65536"),
        (&proxy, "--max-head=10", "64..=1048576"),
        (&proxy, "--grace=-1", "0..=3600"),
    ];
    for (base, bad, range) in cases {
        let args: Vec<&str> = base.iter().copied().chain([*bad]).collect();
        let t0 = Instant::now();
        let (status, err) = run_to_end(&args);
        let flag = bad.split('=').next().unwrap();
        assert!(!status.success(), "{args:?} started: {err}");
        assert_eq!(status.code(), Some(2), "{args:?}: {status:?} {err}");
        assert!(err.contains(flag), "{args:?}: {err:?} does not name {flag}");
        assert!(
            err.contains(range),
            "{args:?}: {err:?} does not say {range}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{args:?}: slow to fail"
        );
    }
}

/// Waits up to `secs` for `child` to exit by itself; its status.
fn exits_within(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running {secs} s later");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client whose receive buffer is small, so a large response stays in flight
/// while the test looks at it.
fn slow_reader(addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(64 << 10).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// SIGTERM with a response in flight and a request queued behind it on the
/// same keep-alive connection, and a grace period of a minute: the listener
/// closes at once (new clients are refused, where they once completed the
/// handshake and hung until the grace period ended), the response in flight
/// is finished, the queued request is answered with `Connection: close` and
/// the connection closed, and the process exits 0 as soon as nothing is in
/// flight — not when the grace period ends.
#[test]
fn sigterm_refuses_new_clients_and_closes_busy_ones_after_their_reply() {
    let root = docroot("sigterm");
    let size = 32usize << 20;
    std::fs::write(root.join("big32.bin"), vec![5u8; size]).unwrap();
    for threads in ["1", "2"] {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_evq-http"))
            .args(["serve", "--listen", &addr.to_string(), "--json"])
            .args(["--threads", threads, "--grace", "60"])
            .arg("--root")
            .arg(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Running(child);
        assert!(eventually(|| TcpStream::connect(addr).is_ok()));
        let mut s = slow_reader(addr);
        // Both requests in one write: the server reads them together, answers
        // the first, and keeps the second while the first is in flight.
        s.write_all(
            b"GET /big32.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /sub/a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        )
        .unwrap();
        let mut first = vec![0u8; 64 << 10];
        s.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200 OK"), "x{threads}");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert!(
            eventually(|| TcpStream::connect(addr)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)),
            "x{threads}: new clients still connect after SIGTERM"
        );
        // The rest of the response in flight, then the queued one, told to close.
        let head_end = first.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let mut left = size - (first.len() - head_end);
        let mut buf = vec![0u8; 1 << 16];
        while left > 0 {
            let n = s.read(&mut buf[..left.min(1 << 16)]).unwrap();
            assert!(n > 0, "x{threads}: cut short with {left} bytes to go");
            left -= n;
        }
        let mut c = Client::from_stream(s);
        let r = c.response(false).expect("the queued request is answered");
        assert_eq!(
            (r.status, &r.body[..]),
            (200, &b"hello\n"[..]),
            "x{threads}"
        );
        assert_eq!(r.header("connection"), Some("close"), "x{threads}");
        assert!(c.closed(), "x{threads}: left open after Connection: close");
        let status = exits_within(&mut child, 20, &format!("x{threads}"));
        assert!(status.success(), "x{threads}: {status:?}");
    }
}
