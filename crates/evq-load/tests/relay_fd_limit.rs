//! The WAN relay out of descriptors with no spare to shed with: accepting
//! pauses instead of spinning on a listener that stays readable. A test binary
//! of its own, because it lowers this process's `RLIMIT_NOFILE` and fills every
//! descriptor slot.

use evq_load::{LinkSpec, Relay, RelayConfig, ACCEPT_PAUSE};
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn out_of_descriptors_without_a_spare_the_relay_pauses_instead_of_spinning() {
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count() as u64);
    let limit = open_now + 32;
    let lim = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads a valid rlimit struct.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
    // Every slot taken.
    let mut hostages = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        hostages.push(f);
    }
    let cfg = RelayConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        // Never contacted: no client gets as far as a pair.
        upstream: SocketAddr::from(([127, 0, 0, 1], 9)),
        to_server: LinkSpec::default(),
        to_client: LinkSpec::default(),
    };
    // Free slots one at a time until the relay binds: with the fewest that
    // let it bind, its spare descriptor (opened last, optional) found none.
    let relay = loop {
        hostages.pop().expect("the relay never bound");
        if let Ok(r) = Relay::bind(&cfg) {
            break r;
        }
    };
    let addr = relay.local_addr().expect("addr");
    // One slot for the client's socket; the relay's accept then meets EMFILE
    // with no spare, and the client waits in the listener's queue.
    hostages.pop().expect("a slot for the client");
    let client = TcpStream::connect(addr).expect("connect");
    let stop = Arc::new(AtomicBool::new(false));
    let stopper = stop.clone();
    let started = Instant::now();
    let h = std::thread::spawn(move || relay.run(&stopper));
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::SeqCst);
    let report = h.join().expect("relay thread").expect("relay");
    let ran = started.elapsed();
    drop((client, hostages));
    // Not a busy loop: each time accepting met the wall it paused, so it met
    // it at most once a pause (a bound a slow machine only stays further
    // under). Without the pause it met it 120,000 to 210,000 times in this
    // test's run. (CPU time tells less on a shared machine: that spin got
    // 0.27 s of CPU a second.)
    assert!(report.accept_pauses >= 1, "{report:?}");
    let most = ran.as_millis() / ACCEPT_PAUSE.as_millis() + 1;
    assert!(
        u128::from(report.accept_pauses) <= most,
        "{report:?}: more than {most} in {ran:?}"
    );
    assert_eq!(report.accepted, 0, "{report:?}");
}
