//! The delay relay on loopback, and (when root with iproute2) namespaces behind it.
//! Only lower bounds on time: a loaded box can be slower, never faster than a delay.

mod support;

use evq_load::{run_load, LinkSpec, LoadConfig, NetnsLab, Relay, RelayConfig};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::{start, Behaviour};

fn relay_to(port: u16, up: LinkSpec, down: LinkSpec, listen: SocketAddr) -> Relay {
    Relay::bind(&RelayConfig {
        listen,
        upstream: SocketAddr::from(([127, 0, 0, 1], port)),
        to_server: up,
        to_client: down,
    })
    .expect("relay binds")
}

#[test]
fn relay_adds_its_delay_both_ways_and_forwards_everything() {
    let srv = start(Behaviour::Length(2000));
    let link = LinkSpec {
        delay: Duration::from_millis(60),
        ..LinkSpec::default()
    };
    let relay = relay_to(srv.port, link, link, SocketAddr::from(([127, 0, 0, 1], 0)));
    let rport = relay.local_addr().expect("addr").port();
    let stop = AtomicBool::new(false);
    let (load, relay_report) = std::thread::scope(|s| {
        let h = s.spawn(|| relay.run(&stop));
        let mut cfg = LoadConfig::open("127.0.0.1", rport, 20.0, 10);
        cfg.num_calls = 3;
        cfg.timeout = Some(Duration::from_secs(10));
        cfg.max_time = Some(Duration::from_secs(30));
        let r = run_load(&cfg);
        stop.store(true, Ordering::SeqCst);
        (r, h.join().expect("relay thread"))
    });
    let load = load.expect("load");
    let relay_report = relay_report.expect("relay");
    assert_eq!(load.replies, 30, "{}", load.summary());
    assert_eq!(load.errors.total(), 0, "{}", load.summary());
    // Every request crosses the relay twice: at least 120 ms.
    assert!(load.latency_ms.min >= 115.0, "{}", load.summary());
    assert_eq!(relay_report.accepted, 10);
    assert!(relay_report.bytes_to_client >= 30 * 2000);
}

#[test]
fn relay_bandwidth_cap_slows_a_large_reply() {
    let srv = start(Behaviour::Length(100_000));
    let up = LinkSpec::default();
    let down = LinkSpec {
        bandwidth: Some(200_000),
        ..LinkSpec::default()
    };
    let relay = relay_to(srv.port, up, down, SocketAddr::from(([127, 0, 0, 1], 0)));
    let rport = relay.local_addr().expect("addr").port();
    let stop = AtomicBool::new(false);
    let load = std::thread::scope(|s| {
        let h = s.spawn(|| relay.run(&stop));
        let mut cfg = LoadConfig::open("127.0.0.1", rport, 10.0, 1);
        cfg.timeout = Some(Duration::from_secs(10));
        let r = run_load(&cfg);
        stop.store(true, Ordering::SeqCst);
        let _ = h.join();
        r
    })
    .expect("load");
    assert_eq!(load.replies, 1, "{}", load.summary());
    // 100 kB at 200 kB/s: at least half a second.
    assert!(load.latency_ms.min >= 450.0, "{}", load.summary());
}

fn can_make_namespaces() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn namespace_client_reaches_the_server_through_its_relay() {
    if !can_make_namespaces() {
        evq_testkit::skip("netns", "needs root and iproute2 (ip)");
        return;
    }
    let lab = match NetnsLab::create(1) {
        Ok(l) => l,
        Err(e) => {
            evq_testkit::skip(
                "netns",
                format!("cannot create network namespaces here: {e}"),
            );
            return;
        }
    };
    let ns = lab.namespaces()[0].clone();
    let srv = start(Behaviour::Length(100));
    let link = LinkSpec {
        delay: Duration::from_millis(25),
        ..LinkSpec::default()
    };
    let relay = relay_to(
        srv.port,
        link,
        link,
        SocketAddr::new(ns.host_addr.into(), 0),
    );
    let rport = relay.local_addr().expect("addr").port();
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| relay.run(&stop));
        let args: Vec<String> = [
            "load",
            "--server",
            &ns.host_addr.to_string(),
            "--port",
            &rport.to_string(),
            "--rate",
            "20",
            "--num-conns",
            "5",
            "--timeout",
            "5",
            "--max-time",
            "20",
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = lab
            .command(0, env!("CARGO_BIN_EXE_evq-load"), &args)
            .expect("namespace 0")
            .output();
        stop.store(true, Ordering::SeqCst);
        let _ = h.join();
        out
    })
    .expect("runs in the namespace");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(v["replies"], 5, "{v}");
    assert!(
        v["latency_ms"]["min"].as_f64().unwrap_or(0.0) >= 45.0,
        "{v}"
    );
    let name = ns.name.clone();
    drop(lab);
    let list = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&name),
        "namespace left behind"
    );
}
