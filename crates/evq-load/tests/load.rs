//! `run_load` against servers the test starts on loopback. Bounds are generous and
//! nothing asserts speed: these must pass on a loaded two-core box.

mod support;

use evq_load::{run_load, ErrorKind, LoadConfig, LoopMode};
use std::time::{Duration, Instant};
use support::{closed_port, never_accepting, start, Behaviour};

fn open(port: u16, rate: f64, conns: u64) -> LoadConfig {
    let mut cfg = LoadConfig::open("127.0.0.1", port, rate, conns);
    cfg.timeout = Some(Duration::from_secs(10));
    cfg.max_time = Some(Duration::from_secs(30));
    cfg
}

#[test]
fn content_length_keep_alive_many_calls() {
    let srv = start(Behaviour::Length(1024));
    let mut cfg = open(srv.port, 100.0, 20);
    cfg.num_calls = 5;
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.connections, 20);
    assert_eq!(r.requests, 100);
    assert_eq!(r.replies, 100, "{}", r.summary());
    assert_eq!(r.status.s2xx, 100);
    assert_eq!(r.errors.total(), 0);
    assert_eq!(r.connections_completed, 20);
    assert!(r.latency_ms.count == 100 && r.latency_ms.max > 0.0);
}

#[test]
fn chunked_with_pipelined_bursts_and_two_threads() {
    let srv = start(Behaviour::Chunked(100));
    let mut cfg = open(srv.port, 50.0, 10);
    cfg.num_calls = 6;
    cfg.burst_length = 3;
    cfg.threads = 2;
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.replies, 60, "{}", r.summary());
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn close_delimited_http10_replies() {
    let srv = start(Behaviour::CloseDelimited(300));
    let mut cfg = open(srv.port, 100.0, 10);
    cfg.http10 = true;
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.replies, 10, "{}", r.summary());
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn open_loop_follows_the_schedule() {
    let srv = start(Behaviour::Length(10));
    let cfg = open(srv.port, 200.0, 200);
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    let took = t.elapsed().as_secs_f64();
    assert_eq!(r.connections, 200);
    // 200 starts at 200/s span ~1 s; never much faster than the schedule.
    assert!(took >= 0.9, "finished in {took} s");
    assert!(took < 25.0, "took {took} s");
    assert_eq!(r.replies + r.errors.total(), 200, "{}", r.summary());
}

fn fault(b: Behaviour, kind: ErrorKind, timeout_s: f64) {
    let srv = start(b);
    let mut cfg = open(srv.port, 50.0, 10);
    cfg.timeout = Some(Duration::from_secs_f64(timeout_s));
    cfg.max_time = Some(Duration::from_secs(20));
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(r.replies, 0, "{}", r.summary());
    assert_eq!(r.errors.get(kind), 10, "{:?}: {}", kind, r.summary());
    assert_eq!(r.errors.total(), 10, "{}", r.summary());
    assert!(!r.cut_off);
}

#[test]
fn reset_is_connreset() {
    fault(Behaviour::Reset, ErrorKind::ConnReset, 10.0);
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
fn silent_server_times_out() {
    fault(Behaviour::Silent, ErrorKind::ClientTimeout, 0.5);
}

#[test]
fn nothing_listening_is_connrefused() {
    let mut cfg = open(closed_port(), 50.0, 10);
    cfg.max_time = Some(Duration::from_secs(20));
    let r = run_load(&cfg).expect("run");
    assert_eq!(r.errors.get(ErrorKind::ConnRefused), 10, "{}", r.summary());
}

#[test]
fn outcomes_count_served_replies_and_whether_in_time() {
    let srv = start(Behaviour::Length(100));
    let r = run_load(&open(srv.port, 100.0, 10)).expect("run");
    let o = r.outcomes;
    assert_eq!((o.served, o.served_in_time), (10, 10), "{}", r.summary());
    assert_eq!((o.refused, o.timed_out), (0, 0));
    assert_eq!(r.served_ms.count, 10);
    // Replies 300 ms late against a 100 ms timeout, allowed by the think
    // timeout: served, but not in time.
    let slow = start(Behaviour::Delayed(300));
    let mut cfg = open(slow.port, 100.0, 5);
    cfg.timeout = Some(Duration::from_millis(100));
    cfg.think_timeout = Duration::from_secs(10);
    let r = run_load(&cfg).expect("run");
    let o = r.outcomes;
    assert_eq!((o.served, o.served_in_time), (5, 0), "{}", r.summary());
}

#[test]
fn refused_connections_are_refusals_fast_or_not_by_the_bound() {
    let mut cfg = open(closed_port(), 50.0, 10);
    cfg.max_time = Some(Duration::from_secs(20));
    // A bound no loopback refusal misses, then one every refusal misses: the
    // count follows the bound, whatever the machine's speed.
    cfg.fast_refusal = Duration::from_secs(5);
    let r = run_load(&cfg).expect("run");
    let o = r.outcomes;
    assert_eq!((o.refused, o.refused_fast), (10, 10), "{}", r.summary());
    assert_eq!(r.refused_ms.count, 10);
    cfg.fast_refusal = Duration::ZERO;
    let r = run_load(&cfg).expect("run");
    assert_eq!((r.outcomes.refused, r.outcomes.refused_fast), (10, 0));
}

#[test]
fn resets_and_503_replies_are_refusals_not_service() {
    let mut total = 0;
    for b in [Behaviour::Reset, Behaviour::Unavailable] {
        let srv = start(b);
        let mut cfg = open(srv.port, 50.0, 10);
        cfg.fast_refusal = Duration::from_secs(5);
        let r = run_load(&cfg).expect("run");
        let o = r.outcomes;
        assert_eq!(
            (o.refused, o.refused_fast),
            (10, 10),
            "{b:?}: {}",
            r.summary()
        );
        assert_eq!(o.served, 0, "{b:?}");
        total += r.status.s5xx;
    }
    assert_eq!(total, 10, "the 503s are still replies");
}

#[test]
fn a_full_listen_queue_times_clients_out_while_connecting() {
    let (_listener, port) = never_accepting();
    let mut cfg = open(port, 50.0, 3);
    cfg.timeout = Some(Duration::from_millis(300));
    cfg.max_time = Some(Duration::from_secs(20));
    let r = run_load(&cfg).expect("run");
    let o = r.outcomes;
    // The first connection waits in the queue for a reply; the queue is then
    // full and the other two SYNs are dropped.
    assert_eq!(o.timed_out, 3, "{}", r.summary());
    assert_eq!(o.timed_out_connecting, 2, "{}", r.summary());
}

#[test]
fn hard_cap_cuts_off_a_run_without_timeout() {
    let srv = start(Behaviour::Silent);
    let mut cfg = LoadConfig::open("127.0.0.1", srv.port, 100.0, 5);
    cfg.max_time = Some(Duration::from_secs(1));
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(r.cut_off);
    assert_eq!(r.errors.get(ErrorKind::Cutoff), 5, "{}", r.summary());
    assert_eq!(r.unanswered, 5);
}

#[test]
fn closed_loop_runs_for_its_duration() {
    let srv = start(Behaviour::Length(64));
    let mut cfg = LoadConfig::closed("127.0.0.1", srv.port, 4, Duration::from_millis(1500));
    cfg.threads = 2;
    let t = Instant::now();
    let r = run_load(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(15));
    assert!(matches!(cfg.mode, LoopMode::Closed { .. }));
    assert_eq!(r.mode, "closed");
    assert!(r.replies > 0, "{}", r.summary());
    assert_eq!(r.errors.total(), 0, "{}", r.summary());
    assert_eq!(r.connections, 4);
    assert!(r.duration_s <= 1.5 + 1e-9);
}

#[test]
fn json_report_has_the_documented_fields() {
    let srv = start(Behaviour::Length(10));
    let r = run_load(&open(srv.port, 100.0, 5)).expect("run");
    let v = serde_json::to_value(&r).expect("json");
    for key in [
        "requests",
        "replies",
        "reply_rate_avg",
        "errors",
        "latency_ms",
        "duration_s",
        "connections",
        "cpu_user_s",
        "cpu_sys_s",
        "served_ms",
        "refused_ms",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for key in [
        "served",
        "served_in_time",
        "refused",
        "refused_fast",
        "fast_refusal_ms",
        "timed_out",
        "timed_out_connecting",
    ] {
        assert!(v["outcomes"].get(key).is_some(), "missing outcomes.{key}");
    }
    for key in ["p50", "p90", "p99", "p999", "max"] {
        assert!(
            v["latency_ms"].get(key).is_some(),
            "missing latency_ms.{key}"
        );
    }
    for key in [
        "client-timo",
        "connrefused",
        "connreset",
        "fd-unavail",
        "addrunavail",
        "other",
    ] {
        assert!(v["errors"].get(key).is_some(), "missing errors.{key}");
    }
}

#[test]
fn hog_ports_source_address_and_poisson_schedule_work() {
    let srv = start(Behaviour::Length(10));
    let mut cfg = open(srv.port, 200.0, 40);
    cfg.hog = true;
    cfg.threads = 2;
    let r = run_load(&cfg).expect("hog run");
    assert_eq!(r.replies, 40, "{}", r.summary());
    let mut cfg = open(srv.port, 200.0, 40);
    cfg.source = Some("127.0.0.2".parse().expect("address"));
    cfg.mode = LoopMode::Open {
        rate: 200.0,
        dist: evq_load::Distribution::Poisson,
        num_conns: 40,
    };
    let r = run_load(&cfg).expect("source run");
    assert_eq!(r.replies, 40, "{}", r.summary());
    assert_eq!(r.errors.total(), 0);
}
