//! hyper 1.x on evq-async, against real clients: curl (keep-alive, several
//! requests on one connection, a POST with a body) and a short bounded wrk run
//! (zero errors), plus hyper's header-read timeout on evq's timers and hyper's own
//! client on evq-async.
//!
//! The server is `examples/hyper_server.rs` itself, included as a module and run
//! on a thread of this process.

#![cfg(feature = "hyper")]

#[path = "../examples/hyper_server.rs"]
mod hyper_server;
mod util;

use evq_async::{Async, Executor};
use hyper_server::{serve, Config};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the example server on a free port with its own executor thread.
fn start_server(header_timeout_ms: u64) -> SocketAddr {
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind");
    let addr = listener.get_ref().local_addr().unwrap();
    let config = Config {
        addr,
        body_size: 1024,
        threads: Some(0),
        header_timeout_ms,
    };
    std::thread::Builder::new()
        .name(format!("hyper-server-{}", addr.port()))
        .spawn(move || {
            let ex = Executor::with_threads(0);
            let _ = ex.block_on(serve(ex.clone(), listener, config));
        })
        .unwrap();
    addr
}

fn run(cmd: &mut Command) -> (String, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

#[test]
fn curl_keep_alive_several_requests_on_one_connection() {
    if !util::require_tool("curl", "curl") {
        return;
    }
    let addr = start_server(30_000);
    let url = format!("http://{addr}/");
    // Three URLs in one curl run share one connection when keep-alive works; the
    // write-out line gives, per request, status, body size and new connections.
    let (stdout, _) = run(Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "%{http_code} %{size_download} %{num_connects}\\n",
        ])
        .args([
            "-o",
            "/dev/null",
            &url,
            "-o",
            "/dev/null",
            &url,
            "-o",
            "/dev/null",
            &url,
        ]));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["200 1024 1", "200 1024 0", "200 1024 0"],
        "curl said: {stdout}"
    );
}

#[test]
fn curl_post_with_a_body_is_echoed() {
    if !util::require_tool("curl", "curl") {
        return;
    }
    let addr = start_server(30_000);
    // 300 KB: many reads on the server, a response larger than a socket buffer.
    let body: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let dir = std::env::temp_dir().join(format!("evq-async-post-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body");
    std::fs::write(&file, &body).unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--data-binary"])
        .arg(format!("@{}", file.display()))
        .arg(format!("http://{addr}/echo"))
        .output()
        .expect("spawn curl");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), body.len());
    assert!(out.stdout == body, "echoed body differs");
}

#[test]
fn wrk_short_run_has_no_errors() {
    if !util::require_tool("wrk", "wrk") {
        return;
    }
    let addr = start_server(30_000);
    let (stdout, _) = run(Command::new("timeout")
        .args(["30", "wrk", "-t1", "-c16", "-d1s", "--timeout", "5s"])
        .arg(format!("http://{addr}/")));
    let requests: u64 = stdout
        .lines()
        .find_map(|l| {
            l.split_once(" requests in ")
                .map(|(n, _)| n.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no request count in wrk's output:\n{stdout}"));
    assert!(requests > 0, "{stdout}");
    assert!(
        !stdout.contains("Socket errors"),
        "wrk saw socket errors:\n{stdout}"
    );
    assert!(
        !stdout.contains("Non-2xx"),
        "wrk saw non-2xx responses:\n{stdout}"
    );
    // Every response carried the whole body: transfer ≥ requests × 1 KiB.
    eprintln!("{stdout}");
}

#[test]
fn header_read_timeout_closes_a_slow_client() {
    let addr = start_server(300);
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap(); // never finishes
    slow.set_read_timeout(Some(util::PATIENCE)).unwrap();
    let start = Instant::now();
    let mut buf = Vec::new();
    // hyper answers 408 or just closes; either way the read ends (EOF), not times out.
    let r = slow.read_to_end(&mut buf);
    assert!(
        r.is_ok(),
        "the server did not close the slow connection: {r:?}"
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(250),
        "closed before the timeout: {took:?}"
    );
    // A well-behaved client on another connection is unaffected.
    let mut ok = TcpStream::connect(addr).unwrap();
    ok.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = Vec::new();
    ok.read_to_end(&mut resp).unwrap();
    assert!(resp.starts_with(b"HTTP/1.1 200 OK"));
}

#[test]
fn hyper_client_on_evq_async() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let addr = start_server(30_000);
    let ex = Executor::with_threads(0);
    ex.block_on(async {
        let stream = Async::<TcpStream>::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
        let conn = ex.spawn(conn);
        for i in 0..5 {
            let req = hyper::Request::get(format!("http://{addr}/{i}"))
                .body(Full::new(Bytes::new()))
                .unwrap();
            let resp = sender.send_request(req).await.unwrap();
            assert_eq!(resp.status(), 200);
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body.len(), 1024);
        }
        let req = hyper::Request::post(format!("http://{addr}/echo"))
            .body(Full::new(Bytes::from_static(b"over evq")))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"over evq");
        drop(sender);
        conn.await.unwrap();
    });
}

#[test]
fn hyper_executor_runs_what_hyper_hands_it() {
    // hyper's HTTP/1 paths never call an executor (HTTP/2 and pooled clients do);
    // this holds the adapter to its contract directly: a spawned, detached task.
    use hyper::rt::Executor as _;
    let ex = Executor::with_threads(1);
    let (tx, rx) = std::sync::mpsc::channel();
    evq_async::HyperExecutor(ex.clone()).execute(async move {
        evq_async::sleep(Duration::from_millis(1)).await;
        tx.send(7).unwrap();
    });
    assert_eq!(rx.recv_timeout(util::PATIENCE), Ok(7));
}

/// The file once more on every other backend, each in a child process.
#[test]
fn on_every_backend() {
    util::rerun_on_other_backends(&["--skip", "on_every_backend", "--test-threads", "2"]);
}
