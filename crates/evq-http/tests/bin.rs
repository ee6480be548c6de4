//! The `evq-http` binary as a user runs it: descriptor exhaustion handled without
//! spinning (the reserve-descriptor trick), SIGTERM → graceful exit with the
//! counters printed as JSON.

mod common;

use common::*;
use std::io::Read;
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

/// Starts the binary with `args` under a hard limit of 32 descriptors (it
/// cannot raise it), its JSON report on stdout, and waits until `addr` answers.
fn spawn_with_32_descriptors(addr: SocketAddr, args: &str) -> Child {
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
    assert!(eventually(|| TcpStream::connect(addr).is_ok()));
    child
}

/// Holds more connections than `child` has descriptors for a second and
/// asserts it does not busy-loop meanwhile, then lets them go and waits until a
/// request is served again.
fn exhaust_descriptors_without_spinning(child: &Child, addr: SocketAddr) {
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
fn sigterm_report(mut child: Child, what: &str) -> serde_json::Value {
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

/// Every backend from the command line, one and two threads: it starts (the
/// shutdown wake-up is a pipe per worker, which even the RT-signal backends can
/// watch — an eventfd made them fail with EPERM), serves, and SIGTERM ends it.
#[test]
fn every_backend_starts_serves_and_stops_on_sigterm() {
    for kind in backends() {
        for threads in ["1", "2"] {
            let port = free_port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let mut child = Command::new(env!("CARGO_BIN_EXE_evq-http"))
                .args(["serve", "--listen", &addr.to_string(), "--json"])
                .args(["--backend", kind.name(), "--threads", threads])
                .args(["--accept", "reuseport"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
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
