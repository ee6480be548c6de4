//! `run_dead` against a holding server the test starts on loopback.

mod support;

use evq_load::{run_dead, DeadConfig, DeadStyle};
use std::thread;
use std::time::{Duration, Instant};
use support::{closed_port, start, Behaviour};

#[test]
fn holds_n_and_reopens_what_the_server_closes() {
    let srv = start(Behaviour::Hold);
    let cfg = DeadConfig::new("127.0.0.1", srv.port, 40, Duration::from_secs(4));
    // Close 10 held connections from the server side while the run goes on.
    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(1500));
        let closed = srv.close_held(10);
        (srv, closed)
    });
    let t = Instant::now();
    let r = run_dead(&cfg).expect("run");
    assert!(t.elapsed() < Duration::from_secs(15));
    let (srv, closed) = handle.join().expect("join");
    assert_eq!(closed, 10);
    assert_eq!(r.held, 40, "{}", r.summary());
    assert_eq!(r.held_max, 40);
    assert!(r.closed_by_server >= 10, "{}", r.summary());
    assert!(r.opened >= 50, "{}", r.summary());
    assert!(srv.accepted.load(std::sync::atomic::Ordering::SeqCst) >= 50);
}

#[test]
fn partial_and_trickle_send_bytes() {
    let srv = start(Behaviour::Hold);
    let mut cfg = DeadConfig::new("127.0.0.1", srv.port, 5, Duration::from_millis(1200));
    cfg.style = DeadStyle::Partial;
    let r = run_dead(&cfg).expect("run");
    assert_eq!(r.held, 5);
    assert!(r.bytes_sent >= 5 * 20, "{}", r.summary());
    cfg.style = DeadStyle::Trickle(Duration::from_millis(100));
    let r = run_dead(&cfg).expect("run");
    assert_eq!(r.held, 5);
    // One byte at connect, then one per 100 ms: well over one each.
    assert!(r.bytes_sent >= 5 * 3, "{}", r.summary());
}

#[test]
fn unreachable_server_is_counted_not_fatal() {
    let cfg = DeadConfig::new("127.0.0.1", closed_port(), 5, Duration::from_millis(800));
    let r = run_dead(&cfg).expect("run");
    assert_eq!(r.held, 0);
    assert!(
        r.errors.get(evq_load::ErrorKind::ConnRefused) > 0,
        "{}",
        r.summary()
    );
}
