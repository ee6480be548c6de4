//! `CompletionServerHandle`: the completion server in this process, as the
//! lab runs it — threads named as the readiness server's, replies counted
//! exactly, a graceful stop on request (idle connections closed, new clients
//! refused), and the settings it lacks refused before anything starts.

mod common;

use common::Client;
use evq_http::{CompletionServerHandle, OverloadPolicy, ServeConfig};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Starts `cfg` on completions; `None` (a skip) where the kernel lacks them.
fn start(cfg: &ServeConfig) -> Option<CompletionServerHandle> {
    evq_testkit::completions_or_skip(
        CompletionServerHandle::start(cfg),
        "the completion server starts",
    )
}

fn config(threads: usize) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads,
        reply_size: 100,
        ..ServeConfig::default()
    }
}

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn serves_counts_exactly_and_stops_on_request() {
    let Some(server) = start(&config(2)) else {
        return;
    };
    // A thread names itself once it runs: look for a while.
    let until = Instant::now() + Duration::from_secs(5);
    for want in ["evq-serve-0", "evq-serve-1"] {
        while !thread_names().iter().any(|n| n == want) {
            assert!(Instant::now() < until, "{want} in {:?}", thread_names());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Four keep-alive clients, 25 requests each.
    let mut clients: Vec<Client> = (0..4).map(|_| Client::connect(server.addr())).collect();
    for _ in 0..25 {
        for c in &mut clients {
            c.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        }
        for c in &mut clients {
            let r = c.response(false).expect("a reply");
            assert_eq!((r.status, r.body.len()), (200, 100));
        }
    }
    // One client stays idle through the stop: it is closed, not kept.
    let started = Instant::now();
    server.request_stop();
    let mut rest = Vec::new();
    let n = clients[0].stream.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "nothing more for an idle client");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let addr = server.addr();
    let report = server.wait().expect("the threads end cleanly");
    assert_eq!(report.requests, 100, "{report}");
    assert_eq!(report.accepted, 4, "{report}");
    // Stopped: nobody listens there any more.
    assert!(
        TcpStream::connect(addr).is_err(),
        "the listeners are closed"
    );
}

#[test]
fn settings_it_lacks_are_refused_before_it_starts() {
    let mut cfg = config(1);
    cfg.overload.policy = OverloadPolicy::Gate;
    let Err(e) = CompletionServerHandle::start(&cfg) else {
        panic!("gate is refused on completions");
    };
    assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("--overload gate"), "{e}");
    cfg.overload.policy = OverloadPolicy::Pulse;
    cfg.overload.deadline = Some(Duration::from_secs(1));
    let Err(e) = CompletionServerHandle::start(&cfg) else {
        panic!("--deadline is refused on completions");
    };
    assert!(e.to_string().contains("--deadline"), "{e}");
    // Dropped without a stop, a running server stops: its threads are
    // joined, its listener closed.
    let Some(server) = start(&config(1)) else {
        return;
    };
    let addr = server.addr();
    drop(server);
    assert!(TcpStream::connect(addr).is_err(), "the listener is closed");
}
