//! Overload control against real sockets: every policy on every backend this
//! kernel has, with one thread and two, serves a light load without refusing
//! anyone; a flood gets complete replies or refusals, never half a reply; bad
//! numbers are refused at start. The proxy's intake is the server's: the same
//! checks through `evq proxy`. (The mechanisms each policy refuses with are
//! tested against real listen queues in `src/overload.rs`.)

mod common;

use common::flood::{flood, judge_flood, read_all};
use common::*;
use evq_http::{AcceptMode, IoModel, OverloadConfig, OverloadPolicy, ProxyConfig, ProxyHandle};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

const REQ: &str = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
const POLICIES: [OverloadPolicy; 5] = [
    OverloadPolicy::None,
    OverloadPolicy::Seed001,
    OverloadPolicy::Gate,
    OverloadPolicy::Codel,
    OverloadPolicy::Pulse,
];

fn overload_config(policy: OverloadPolicy) -> OverloadConfig {
    OverloadConfig {
        policy,
        deadline: Some(Duration::from_secs(5)),
        ..OverloadConfig::default()
    }
}

#[test]
fn every_policy_serves_a_light_load_and_refuses_nothing() {
    for kind in backends() {
        for threads in [1, 2] {
            for policy in POLICIES {
                let what = format!("{kind} × {threads} threads, {}", policy.name());
                let mut cfg = config(Some(kind));
                cfg.threads = threads;
                if threads > 1 {
                    cfg.accept = AcceptMode::Reuseport;
                }
                // A target no starved worker on a loaded test machine reaches
                // with one connection at a time (codel would otherwise count a
                // worker that was not scheduled for 10 ms as a standing queue).
                cfg.overload = OverloadConfig {
                    queue_target: Duration::from_secs(1),
                    ..overload_config(policy)
                };
                let server = start(&cfg);
                // One at a time: never more than one connection waits.
                for _ in 0..20 {
                    let r = get(server.addr(), REQ).unwrap_or_else(|| panic!("{what}: no reply"));
                    assert_eq!(r.status, 200, "{what}");
                }
                let report = server.stop();
                assert_eq!(report.refused.total(), 0, "{what}: {report}");
                assert_eq!(report.admitted, 20, "{what}: {report}");
                let measured: u64 = report.queue_delay_ms.iter().map(|(_, n)| n).sum();
                let expect = if policy == OverloadPolicy::None {
                    0
                } else {
                    20
                };
                assert_eq!(measured, expect, "{what}: queue delays measured");
            }
        }
    }
}

#[test]
fn a_flood_gets_whole_replies_or_refusals_never_half_a_reply() {
    for policy in POLICIES {
        let mut cfg = config(None);
        cfg.overload = OverloadConfig {
            // Targets so small that a burst is over them.
            queue_target: Duration::from_micros(1),
            interval: Duration::from_millis(1),
            ..overload_config(policy)
        };
        let server = start(&cfg);
        let addr = server.addr();
        // Several hundred connections at once from four threads: each sends its
        // request and reads to the end.
        let outcomes: Vec<Option<Vec<u8>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(move || {
                        let streams: Vec<Option<TcpStream>> = (0..100)
                            .map(|_| {
                                let mut c = TcpStream::connect(addr).ok()?;
                                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                                c.write_all(REQ.as_bytes()).ok()?;
                                Some(c)
                            })
                            .collect();
                        streams
                            .into_iter()
                            .map(|c| c.and_then(|mut c| read_all(&mut c)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let report = server.stop();
        let served = outcomes.iter().flatten().count() as u64;
        for got in outcomes.iter().flatten() {
            // Every byte stream that closed cleanly is one whole reply.
            let text = String::from_utf8_lossy(got);
            assert!(
                text.starts_with("HTTP/1.1 200 OK\r\n"),
                "{}: {text:.80}",
                policy.name()
            );
            let head_end = text.find("\r\n\r\n").expect("whole head") + 4;
            assert_eq!(
                got.len() - head_end,
                1024,
                "{}: body cut short",
                policy.name()
            );
        }
        assert_eq!(report.admitted, served, "{}: {report}", policy.name());
        if policy == OverloadPolicy::None {
            assert_eq!(served, 400, "without control everyone is served");
        }
    }
}

#[test]
fn bad_numbers_are_refused_at_start() {
    for (o, flag) in [
        (
            OverloadConfig {
                queue_target: Duration::ZERO,
                ..OverloadConfig::default()
            },
            "--queue-target",
        ),
        (
            OverloadConfig {
                late_after: Duration::ZERO,
                ..OverloadConfig::default()
            },
            "--late-after",
        ),
    ] {
        let mut cfg = config(None);
        cfg.overload = o;
        let e = evq_http::ServerHandle::start(&cfg).err().expect("refused");
        assert!(e.to_string().contains(flag), "{e}");
    }
    // gate and pulse with threads sharing one socket cannot stop or reset it
    // safely.
    for policy in [OverloadPolicy::Gate, OverloadPolicy::Pulse] {
        let mut cfg = config(None);
        cfg.threads = 2;
        cfg.accept = AcceptMode::Exclusive;
        cfg.overload.policy = policy;
        let e = evq_http::ServerHandle::start(&cfg).err().expect("refused");
        assert!(e.to_string().contains("reuseport"), "{e}");
    }
}

#[test]
fn pulse_has_the_kernel_refuse_a_flood_while_it_serves() {
    let mut cfg = config(None);
    // 2 ms of CPU a request: 500 a second, far fewer than the flood.
    cfg.work = Duration::from_millis(2);
    cfg.overload = overload_config(OverloadPolicy::Pulse);
    let server = start(&cfg);
    let outcomes = flood(server.addr());
    let report = server.stop();
    let (served, refused_at_connect) = judge_flood(&outcomes, "serve");
    assert!(report.refused.pulses > 0, "never pulsed: {report}");
    assert!(
        report.refused.not_listening_us > 0,
        "never stopped listening: {report}"
    );
    // While it did not listen the kernel refused clients at connect; those
    // are not the server's work, so it admitted exactly those it served.
    assert!(
        refused_at_connect > 0,
        "nobody refused at connect: {report}"
    );
    assert_eq!(report.admitted, served, "{report}");
    assert!(served > 0, "{report}");
}

/// The proxy in front of an evq server, with overload control of its own.
fn proxy(origin: std::net::SocketAddr, overload: OverloadConfig, work: Duration) -> ProxyHandle {
    ProxyHandle::start(&ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        origin,
        overload,
        work,
        ..ProxyConfig::default()
    })
    .expect("proxy starts")
}

#[test]
fn the_proxy_under_every_policy_relays_a_light_load_and_refuses_nothing() {
    let origin = start(&config(None));
    for policy in POLICIES {
        let what = format!("proxy, {}", policy.name());
        let p = proxy(
            origin.addr(),
            OverloadConfig {
                queue_target: Duration::from_secs(1),
                ..overload_config(policy)
            },
            Duration::ZERO,
        );
        for _ in 0..20 {
            let r = get(p.addr(), REQ).unwrap_or_else(|| panic!("{what}: no reply"));
            assert_eq!(r.status, 200, "{what}");
        }
        let report = p.stop();
        let o = &report.overload;
        assert_eq!(o.refused.total(), 0, "{what}: {report}");
        assert_eq!(o.admitted, 20, "{what}: {report}");
        assert_eq!(report.accepts, 20, "{what}: {report}");
        let measured: u64 = o.queue_delay_ms.iter().map(|(_, n)| n).sum();
        let expect = if policy == OverloadPolicy::None {
            0
        } else {
            20
        };
        assert_eq!(measured, expect, "{what}: queue delays measured");
    }
    origin.stop();
}

#[test]
fn the_proxy_pulses_too_and_relays_only_whole_replies() {
    let origin = start(&config(None));
    // 2 ms of the proxy's own CPU a request: 500 a second.
    let p = proxy(
        origin.addr(),
        overload_config(OverloadPolicy::Pulse),
        Duration::from_millis(2),
    );
    let outcomes = flood(p.addr());
    let report = p.stop();
    origin.stop();
    let (served, refused_at_connect) = judge_flood(&outcomes, "proxy");
    let o = &report.overload;
    assert!(o.refused.pulses > 0, "never pulsed: {report}");
    assert!(
        refused_at_connect > 0,
        "nobody refused at connect: {report}"
    );
    assert_eq!(o.admitted, served, "{report}");
    assert_eq!(report.relayed, served, "{report}");
    assert!(served > 0, "{report}");
}

/// `evq proxy --io completion` in front of `origin` with `policy` (and no
/// deadline: the completion relay's pulse takes none), spending `work` a
/// request.
fn completion_proxy_config(
    origin: std::net::SocketAddr,
    policy: OverloadPolicy,
    work: Duration,
) -> ProxyConfig {
    ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        origin,
        overload: OverloadConfig {
            policy,
            ..OverloadConfig::default()
        },
        work,
        io: IoModel::Completion,
        ..ProxyConfig::default()
    }
}

#[test]
fn the_proxy_on_completions_pulses_too_and_relays_only_whole_replies() {
    let origin = start(&config(None));
    let cfg = completion_proxy_config(
        origin.addr(),
        OverloadPolicy::Pulse,
        Duration::from_millis(2),
    );
    let Some(p) = evq_testkit::completions_or_skip(ProxyHandle::start(&cfg), "proxy starts") else {
        origin.stop();
        return;
    };
    let outcomes = flood(p.addr());
    let report = p.stop();
    origin.stop();
    let (served, refused_at_connect) = judge_flood(&outcomes, "proxy --io completion");
    assert!(report.overload.refused.pulses > 0, "never pulsed: {report}");
    assert!(
        refused_at_connect > 0,
        "nobody refused at connect: {report}"
    );
    assert_eq!(report.relayed, served, "{report}");
    assert!(served > 0, "{report}");
    // Its other policies and a deadline are refused, naming the flag.
    for (overload, flag) in [
        (overload_config(OverloadPolicy::Pulse), "--deadline"),
        (
            OverloadConfig {
                policy: OverloadPolicy::Codel,
                ..OverloadConfig::default()
            },
            "--overload codel",
        ),
    ] {
        let e = ProxyHandle::start(&ProxyConfig {
            overload,
            ..cfg.clone()
        })
        .err()
        .expect("refused");
        assert!(e.to_string().contains(flag), "{flag}: {e}");
    }
}

#[test]
fn the_proxy_refuses_bad_overload_numbers_at_start() {
    let e = ProxyHandle::start(&ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        overload: OverloadConfig {
            queue_target: Duration::ZERO,
            ..OverloadConfig::default()
        },
        ..ProxyConfig::default()
    })
    .err()
    .expect("refused");
    assert!(e.to_string().contains("--queue-target"), "{e}");
}

#[test]
fn out_of_range_flags_get_a_clear_error_at_start() {
    for (flags, says) in [
        (&["--queue-target", "-1"][..], "--queue-target must be"),
        (
            &["--queue-target", "0"][..],
            "--queue-target must be more than 0",
        ),
        (&["--codel-interval", "-5"][..], "--codel-interval must be"),
        (&["--deadline", "0"][..], "--deadline must be more than 0"),
        (&["--late-after", "-1"][..], "--late-after must be"),
        (&["--work-us", "2000000"][..], "--work-us"),
    ] {
        for command in [&["serve"][..], &["proxy", "--origin", "127.0.0.1:9"][..]] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_evq-http"))
                .args(command)
                .args(["--listen", "127.0.0.1:0", "--overload", "codel"])
                .args(flags)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{command:?} {flags:?} accepted");
            assert!(err.contains(says), "{command:?} {flags:?}: {err}");
        }
    }
}

/// `--status-listen`: while `pulse` has the kernel refuse clients of the
/// served address, health checks and the counters on the status address are
/// answered every time; other paths and methods get their errors.
#[test]
fn the_status_listener_answers_while_pulse_refuses_the_served_address() {
    let mut cfg = config(None);
    cfg.work = Duration::from_millis(2);
    cfg.overload = overload_config(OverloadPolicy::Pulse);
    cfg.status_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = start(&cfg);
    let status = server.status_addr().expect("a status address");
    let health = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    let (outcomes, checks) = std::thread::scope(|s| {
        let flooding = s.spawn(|| flood(server.addr()));
        let mut checks = Vec::new();
        while !flooding.is_finished() {
            checks.push(get(status, health).map(|r| r.status));
            std::thread::sleep(Duration::from_millis(10));
        }
        (flooding.join().unwrap(), checks)
    });
    let (_, refused_at_connect) = judge_flood(&outcomes, "serve");
    assert!(refused_at_connect > 0, "the flood was never refused");
    assert!(!checks.is_empty());
    assert!(
        checks.iter().all(|c| *c == Some(200)),
        "health checks during the flood: {checks:?}"
    );
    let stats = get(status, "GET /.evq/stats HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(stats.status, 200);
    let json: serde_json::Value = serde_json::from_slice(&stats.body).unwrap();
    assert!(json["admitted"].as_u64().unwrap() > 0, "{json}");
    assert!(json["refused"]["pulses"].as_u64().unwrap() > 0, "{json}");
    let other = get(status, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(other.status, 404);
    let post = get(
        status,
        "POST /health HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
    )
    .unwrap();
    assert_eq!(post.status, 405);
    let report = server.stop();
    assert!(report.refused.pulses > 0, "{report}");
    // The listener went with the server.
    assert!(TcpStream::connect(status).is_err());
}

/// The completion proxy relays a response that came back before it takes up
/// requests that came after its own (its quirk l): with 20 ms of work a
/// request, the first client of a burst of eleven is answered after a take-up
/// or two, not after all eleven.
#[test]
fn the_completion_proxy_finishes_work_in_flight_before_taking_up_more() {
    let origin = start(&config(None));
    let cfg = completion_proxy_config(
        origin.addr(),
        OverloadPolicy::None,
        Duration::from_millis(20),
    );
    let Some(p) = evq_testkit::completions_or_skip(ProxyHandle::start(&cfg), "proxy starts") else {
        origin.stop();
        return;
    };
    let begun = std::time::Instant::now();
    // The first client's request, then ten more while it is taken up.
    let mut first = TcpStream::connect(p.addr()).unwrap();
    first.write_all(REQ.as_bytes()).unwrap();
    let rest: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut c = TcpStream::connect(p.addr()).unwrap();
            c.write_all(REQ.as_bytes()).unwrap();
            c
        })
        .collect();
    let answered = |mut c: TcpStream| {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let got = read_all(&mut c).expect("a whole reply");
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
        begun.elapsed()
    };
    let (first_at, last_at) = std::thread::scope(|s| {
        let rest: Vec<_> = rest
            .into_iter()
            .map(|c| s.spawn(move || answered(c)))
            .collect();
        let first_at = answered(first);
        let last_at = rest.into_iter().map(|h| h.join().unwrap()).max().unwrap();
        (first_at, last_at)
    });
    let report = p.stop();
    origin.stop();
    assert_eq!(report.relayed, 11, "{report}");
    // Eleven take-ups are 220 ms of work, the last answered after all of
    // them; the first waits for its own and one or two more.
    assert!(
        last_at >= Duration::from_millis(200),
        "the last after {last_at:?}"
    );
    assert!(
        first_at * 2 < last_at,
        "the first answered after {first_at:?}, the last after {last_at:?}"
    );
}
