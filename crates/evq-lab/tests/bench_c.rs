//! The bench.c chain does its work on every contender: exactly reps × (w + a)
//! reads, for evq on every backend, for every peer library installed here and
//! for the Rust crates mio and polling.

use evq::BackendKind;
use evq_lab::bench_rust_peers::{RustPeer, MIO_VERSION, POLLING_VERSION};
use evq_lab::experiments::bench_c::{build_peer, chain_json, run_evq, run_peer, FLOOR, PEERS};

#[test]
fn every_contender_completes_the_chain() {
    let (n, a, w, reps) = (10, 2, 10, 3);
    for kind in BackendKind::candidates() {
        let (times, reads) = run_evq(kind, n, a, w, reps).unwrap();
        assert_eq!(reads, (reps * (w + a)) as u64, "{kind}");
        assert!(times.iter().all(|t| *t > 0.0), "{kind}: {times:?}");
    }
    let dir = std::env::temp_dir().join(format!("evq-bench-c-test-{}", std::process::id()));
    let mut built = 0;
    for (name, src, libs) in PEERS {
        match build_peer(&dir, name, src, libs) {
            Ok(bin) => {
                let (backend, times, reads) = run_peer(&bin, n, a, w, reps).unwrap();
                assert_eq!(reads, (reps * (w + a)) as u64, "{name} on {backend}");
                assert_eq!(times.len(), reps, "{name}");
                built += 1;
            }
            Err(why) => evq_testkit::skip(name, why),
        }
    }
    eprintln!("{built} peer libraries ran");
    // The bare loop needs a C compiler only, which the peers' builds need too.
    match build_peer(&dir, FLOOR.0, FLOOR.1, "") {
        Ok(bin) => {
            let (backend, times, reads) = run_peer(&bin, n, a, w, reps).unwrap();
            assert_eq!(backend, "epoll");
            assert_eq!(reads, (reps * (w + a)) as u64, "{} on {backend}", FLOOR.0);
            assert_eq!(times.len(), reps);
        }
        Err(why) => evq_testkit::skip(FLOOR.0, why),
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rust_peers_complete_the_chain() {
    // The second shape has every pipe active, so bytes pile up on one pipe and
    // mio's edge-triggered drain reads several per event; the third chains one
    // pipe to itself.
    for (n, a, w, reps) in [(10, 2, 10, 3), (4, 4, 50, 3), (1, 1, 20, 2)] {
        for peer in RustPeer::ALL {
            let (times, reads) = peer.run(n, a, w, reps).unwrap();
            assert_eq!(
                reads,
                (reps * (w + a)) as u64,
                "{} n={n} a={a} w={w}",
                peer.name()
            );
            assert_eq!(times.len(), reps, "{}", peer.name());
            assert!(times.iter().all(|t| *t > 0.0), "{}: {times:?}", peer.name());
        }
    }
}

#[test]
fn rust_peer_versions_come_from_the_lock() {
    // Cargo.toml asks for mio 1 and polling 3; the build script read what Cargo.lock resolved.
    assert!(MIO_VERSION.starts_with("1."), "mio {MIO_VERSION}");
    assert!(
        POLLING_VERSION.starts_with("3."),
        "polling {POLLING_VERSION}"
    );
}

/// `evq bench-chain`'s line (`chain_json`): what a C peer prints — the
/// backend, every run's time and the reads — for evq on a backend and for
/// each Rust peer; an unknown contender or bad sizes are a clear error.
#[test]
fn the_chain_as_a_child_prints_what_a_c_peer_prints() {
    let (n, a, w, reps) = (10, 2, 10, 3);
    for contender in ["evq-epoll", "evq-poll", "mio", "polling"] {
        let line = chain_json(contender, n, a, w, reps).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let expected = if contender == "evq-poll" {
            "poll"
        } else {
            "epoll"
        };
        assert_eq!(v["backend"], expected, "{line}");
        assert_eq!(v["reads"], (reps * (w + a)) as u64, "{line}");
        assert_eq!(
            v["us_per_run"].as_array().map(Vec::len),
            Some(reps),
            "{line}"
        );
    }
    let e = chain_json("libev", n, a, w, reps).unwrap_err();
    assert!(e.to_string().contains("unknown contender"), "{e}");
    assert!(chain_json("evq-nonsense", n, a, w, reps).is_err());
    assert!(chain_json("evq-epoll", 10, 20, w, reps).is_err(), "a > n");
}
