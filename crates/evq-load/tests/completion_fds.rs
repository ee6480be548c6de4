//! `--io completion` closes every descriptor it opened, whether connections end
//! cleanly, are refused, or are abandoned or cut off with operations still on the
//! ring (completion.rs quirk c). Alone in its binary, so no other test's sockets
//! move the count.

mod support;

use evq_load::{run_load, IoModel, LoadConfig};
use std::time::Duration;
use support::{closed_port, start, Behaviour};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("procfs").count()
}

#[test]
fn every_descriptor_is_closed_after_the_run() {
    let ok = start(Behaviour::Length(100));
    let silent = start(Behaviour::Silent);
    let refused = closed_port();
    // Let the servers' threads settle before the first count.
    std::thread::sleep(Duration::from_millis(100));
    let before = open_fds();
    let mut cfg = LoadConfig::open("127.0.0.1", ok.port, 1000.0, 300);
    cfg.io = IoModel::Completion;
    cfg.num_calls = 2;
    cfg.threads = 2;
    let r = run_load(&cfg).expect("clean run");
    assert_eq!(r.replies, 600, "{}", r.summary());
    cfg.port = refused;
    let r = run_load(&cfg).expect("refused run");
    assert_eq!(r.errors.total(), 300, "{}", r.summary());
    // Closed loop abandoned at the end of its duration, then a run cut off by
    // the hard cap: recvs and sends still on the ring.
    let mut cfg = LoadConfig::closed("127.0.0.1", ok.port, 20, Duration::from_millis(300));
    cfg.io = IoModel::Completion;
    run_load(&cfg).expect("closed run");
    let mut cfg = LoadConfig::open("127.0.0.1", silent.port, 1000.0, 20);
    cfg.io = IoModel::Completion;
    cfg.max_time = Some(Duration::from_millis(300));
    let r = run_load(&cfg).expect("cut-off run");
    assert!(r.cut_off);
    assert_eq!(open_fds(), before, "descriptors left open");
}
