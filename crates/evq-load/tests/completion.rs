//! `run_load` with `--io completion` against servers the test starts on loopback:
//! counts exact against a server that counts the requests it read, replies split
//! across receives and several in one, servers that close or reset, timeouts, the
//! same report as the readiness loop. Nothing asserts speed.

mod support;

use evq_load::{run_load, ErrorKind, IoModel, LoadConfig, LoadReport, LoopMode};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use support::{closed_port, never_accepting, start, start_on, Behaviour, Server};

fn open(port: u16, rate: f64, conns: u64) -> LoadConfig {
    let mut cfg = LoadConfig::open("127.0.0.1", port, rate, conns);
    cfg.io = IoModel::Completion;
    cfg.timeout = Some(Duration::from_secs(10));
    cfg.max_time = Some(Duration::from_secs(30));
    cfg
}

/// The server read exactly what the report says was sent and answered.
fn assert_exact(r: &LoadReport, srv: &Server, requests: u64) {
    assert_eq!(r.requests, requests, "{}", r.summary());
    assert_eq!(r.replies, requests, "{}", r.summary());
    assert_eq!(r.status.s2xx, requests, "{}", r.summary());
    assert_eq!(r.errors.total(), 0, "{}", r.summary());
    assert_eq!(r.unanswered, 0);
    assert_eq!(
        srv.requests.load(Ordering::SeqCst) as u64,
        requests,
        "requests the server read"
    );
}

#[test]
fn counts_are_exact_in_open_loop_with_keep_alive() {
    let srv = start(Behaviour::Length(1024));
    let mut cfg = open(srv.port, 200.0, 30);
    cfg.num_calls = 7;
    let r = run_load(&cfg).expect("run");
    assert_exact(&r, &srv, 210);
    assert_eq!(r.connections, 30);
    assert_eq!(r.connections_completed, 30);
    assert_eq!(r.latency_ms.count, 210);
    assert_eq!(r.connect_ms.count, 30, "one connect time per connection");
    assert!(r.backend.contains("io_uring"), "{}", r.backend);
    assert!(r.io_uring_enters.is_some_and(|n| n > 0));
    // Every reply is head plus 1024 bytes of body.
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n".len() as u64;
    assert_eq!(r.bytes_received, 210 * (head + 1024));
}

#[test]
fn closed_loop_with_threads_and_a_connection_cap_is_exact() {
    let srv = start(Behaviour::Length(64));
    let mut cfg = LoadConfig::closed("127.0.0.1", srv.port, 4, Duration::from_secs(20));
    cfg.io = IoModel::Completion;
    cfg.mode = LoopMode::Closed {
        connections: 4,
        duration: None,
        num_conns: Some(40),
    };
    cfg.num_calls = 5;
    cfg.threads = 2;
    cfg.max_time = Some(Duration::from_secs(30));
    let r = run_load(&cfg).expect("run");
    assert_exact(&r, &srv, 200);
    assert_eq!(r.connections, 40);
    assert_eq!(r.threads, 2);
}

#[test]
fn closed_loop_runs_for_its_duration() {
    let srv = start(Behaviour::Length(64));
    let mut cfg = LoadConfig::closed("127.0.0.1", srv.port, 4, Duration::from_millis(1500));
    cfg.io = IoModel::Completion;
    cfg.threads = 2;
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(15));
    assert_eq!(r.mode, "closed");
    assert!(r.replies > 0, "{}", r.summary());
    assert_eq!(r.errors.total(), 0, "{}", r.summary());
    assert_eq!(r.connections, 4);
    assert!(r.duration_s <= 1.5 + 1e-9);
    // Abandoned at the end, not failed: every request is a reply or in flight.
    assert!(r.requests - r.replies <= 4, "{}", r.summary());
}

#[test]
fn replies_split_across_receives_are_framed_once() {
    // Each reply comes in three writes 3 ms apart; the 40,000-byte body is
    // also larger than one 16 KiB receive buffer.
    for n in [100, 40_000] {
        let srv = start(Behaviour::Split(n));
        let mut cfg = open(srv.port, 100.0, 4);
        cfg.num_calls = 3;
        let r = run_load(&cfg).expect("run");
        assert_exact(&r, &srv, 12);
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").len() as u64;
        assert_eq!(r.bytes_received, 12 * (head + n as u64), "n={n}");
    }
}

#[test]
fn pipelined_replies_in_one_buffer_are_each_counted() {
    let srv = start(Behaviour::Coalesced(10));
    let mut cfg = open(srv.port, 100.0, 6);
    cfg.num_calls = 10;
    cfg.burst_length = 4;
    let r = run_load(&cfg).expect("run");
    // Bursts of 4, 4 and 2 on each of 6 connections.
    assert_exact(&r, &srv, 60);
    assert_eq!(r.latency_ms.count, 60);
}

#[test]
fn chunked_pipelined_bursts_over_two_threads() {
    let srv = start(Behaviour::Chunked(100));
    let mut cfg = open(srv.port, 50.0, 10);
    cfg.num_calls = 6;
    cfg.burst_length = 3;
    cfg.threads = 2;
    let r = run_load(&cfg).expect("run");
    assert_exact(&r, &srv, 60);
}

#[test]
fn connection_close_ends_the_connection_cleanly() {
    // The second reply says Connection: close; calls after it are never sent.
    let srv = start(Behaviour::CloseAfter(2));
    let mut cfg = open(srv.port, 100.0, 10);
    cfg.num_calls = 5;
    let r = run_load(&cfg).expect("run");
    assert_exact(&r, &srv, 20);
    assert_eq!(r.connections_completed, 10);
    // Pipelined: the close cuts the burst, its later calls are unanswered.
    let srv = start(Behaviour::CloseAfter(2));
    let mut cfg = open(srv.port, 100.0, 5);
    cfg.num_calls = 4;
    cfg.burst_length = 4;
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.replies, 10, "{}", r.summary());
    assert_eq!(r.unanswered, 10, "{}", r.summary());
    assert_eq!(r.errors.total(), 0, "{}", r.summary());
}

#[test]
fn close_delimited_http10_replies() {
    let srv = start(Behaviour::CloseDelimited(300));
    let mut cfg = open(srv.port, 100.0, 10);
    cfg.http10 = true;
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.replies, 10, "{}", r.summary());
    assert_eq!(r.errors.total(), 0, "{}", r.summary());
}

/// Ten connections against a misbehaving server: each fails once, by `kind`.
fn fault(b: Behaviour, kind: ErrorKind, timeout_s: f64) -> LoadReport {
    let srv = start(b);
    let mut cfg = open(srv.port, 50.0, 10);
    cfg.timeout = Some(Duration::from_secs_f64(timeout_s));
    cfg.max_time = Some(Duration::from_secs(20));
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(r.replies, 0, "{}", r.summary());
    assert_eq!(r.errors.get(kind), 10, "{kind:?}: {}", r.summary());
    assert_eq!(r.errors.total(), 10, "{}", r.summary());
    assert_eq!(r.unanswered, 10, "{}", r.summary());
    assert!(!r.cut_off);
    r
}

#[test]
fn reset_is_connreset_and_a_refusal() {
    let r = fault(Behaviour::Reset, ErrorKind::ConnReset, 10.0);
    assert_eq!(r.outcomes.refused, 10);
}

#[test]
fn close_mid_response_is_premature_close() {
    fault(Behaviour::CloseMidResponse, ErrorKind::PrematureClose, 10.0);
}

#[test]
fn garbage_is_bad_reply() {
    fault(Behaviour::Garbage, ErrorKind::BadReply, 10.0);
}

#[test]
fn silent_server_times_out_after_connecting() {
    let r = fault(Behaviour::Silent, ErrorKind::ClientTimeout, 0.3);
    assert_eq!(r.outcomes.timed_out, 10);
    assert_eq!(r.outcomes.timed_out_connecting, 0, "{}", r.summary());
}

#[test]
fn think_timeout_extends_the_wait_for_a_reply() {
    let slow = start(Behaviour::Delayed(300));
    let mut cfg = open(slow.port, 100.0, 5);
    cfg.timeout = Some(Duration::from_millis(100));
    cfg.think_timeout = Duration::from_secs(10);
    let r = run_load(&cfg).expect("run");
    let o = r.outcomes;
    assert_eq!((o.served, o.served_in_time), (5, 0), "{}", r.summary());
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn nothing_listening_is_connrefused_counted_once() {
    let mut cfg = open(closed_port(), 50.0, 10);
    cfg.max_time = Some(Duration::from_secs(20));
    cfg.fast_refusal = Duration::from_secs(5);
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.errors.get(ErrorKind::ConnRefused), 10, "{}", r.summary());
    assert_eq!(r.errors.total(), 10, "{}", r.summary());
    assert_eq!((r.outcomes.refused, r.outcomes.refused_fast), (10, 10));
}

#[test]
fn a_full_listen_queue_times_clients_out_while_connecting() {
    let (_listener, port) = never_accepting();
    let mut cfg = open(port, 50.0, 3);
    cfg.timeout = Some(Duration::from_millis(300));
    cfg.max_time = Some(Duration::from_secs(20));
    let r = run_load(&cfg).expect("run");
    let o = r.outcomes;
    // The first connection is in the queue (its request sent, never read); the
    // queue is then full and the other two SYNs are dropped: their sends wait
    // for a handshake that never comes.
    assert_eq!(o.timed_out, 3, "{}", r.summary());
    assert_eq!(o.timed_out_connecting, 2, "{}", r.summary());
}

#[test]
fn a_send_queued_while_connecting_goes_once_the_handshake_completes() {
    // A backlog of one that accepts nothing for 300 ms: the first connection
    // waits in the queue, the second's SYN is dropped and retransmitted about a
    // second later, when the queue has room. Its request, queued on the ring at
    // once, must go out then (quirk a), not fail.
    let (listener, _) = never_accepting();
    let srv = start_on(listener, Duration::from_millis(300), Behaviour::Length(10));
    let mut cfg = open(srv.port, 100.0, 2);
    cfg.timeout = Some(Duration::from_secs(10));
    let r = run_load(&cfg).expect("run");
    assert_exact(&r, &srv, 2);
    assert!(
        r.connect_ms.max >= 500.0,
        "the second handshake took a retransmission: {}",
        r.summary()
    );
}

#[test]
fn hard_cap_cuts_off_a_run_without_timeout() {
    let srv = start(Behaviour::Silent);
    let mut cfg = LoadConfig::open("127.0.0.1", srv.port, 100.0, 5);
    cfg.io = IoModel::Completion;
    cfg.max_time = Some(Duration::from_secs(1));
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(r.cut_off);
    assert_eq!(r.errors.get(ErrorKind::Cutoff), 5, "{}", r.summary());
    assert_eq!(r.unanswered, 5);
}

#[test]
fn hog_ports_and_source_address_work() {
    let srv = start(Behaviour::Length(10));
    let mut cfg = open(srv.port, 200.0, 40);
    cfg.hog = true;
    cfg.threads = 2;
    let r = run_load(&cfg).expect("hog run");
    assert_eq!(r.replies, 40, "{}", r.summary());
    let mut cfg = open(srv.port, 200.0, 40);
    cfg.source = Some("127.0.0.2".parse().expect("address"));
    let r = run_load(&cfg).expect("source run");
    assert_eq!(r.replies, 40, "{}", r.summary());
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn the_report_matches_the_readiness_loops_count_for_count() {
    let srv = start(Behaviour::Chunked(333));
    let mut cfg = open(srv.port, 200.0, 20);
    cfg.num_calls = 4;
    cfg.burst_length = 2;
    cfg.warm_up = Some(Duration::from_millis(20));
    let completion = run_load(&cfg).expect("completion run");
    cfg.io = IoModel::Readiness;
    let readiness = run_load(&cfg).expect("readiness run");
    let (a, b) = (&completion, &readiness);
    assert_eq!(
        (a.connections, a.requests, a.replies, a.status, a.errors),
        (b.connections, b.requests, b.replies, b.status, b.errors)
    );
    assert_eq!(
        (a.bytes_sent, a.bytes_received, a.unanswered),
        (b.bytes_sent, b.bytes_received, b.unanswered)
    );
    assert_eq!(a.outcomes.served, b.outcomes.served);
    assert_eq!(
        a.steady.as_ref().map(|s| s.outcomes.served),
        b.steady.as_ref().map(|s| s.outcomes.served)
    );
    // The same JSON shape, field for field.
    let keys = |r: &LoadReport| {
        let v = serde_json::to_value(r).expect("json");
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(a), keys(b));
    let v = serde_json::to_value(a).expect("json");
    assert_eq!(v["config"]["io"], "completion");
    assert!(v["io_uring_enters"].as_u64().is_some());
    assert!(serde_json::to_value(b).expect("json")["io_uring_enters"].is_null());
}
