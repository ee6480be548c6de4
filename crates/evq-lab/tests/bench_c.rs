//! The bench.c chain does its work on every contender: exactly reps × (w + a)
//! reads, for evq on every backend and for every peer library installed here.

use evq::BackendKind;
use evq_lab::experiments::bench_c::{build_peer, run_evq, run_peer};

const PEERS: &[(&str, &str, &str)] = &[
    ("libev", include_str!("../peers/bench_libev.c"), "-lev"),
    (
        "libevent",
        include_str!("../peers/bench_libevent.c"),
        "pkg-config:libevent",
    ),
    (
        "libuv",
        include_str!("../peers/bench_libuv.c"),
        "pkg-config:libuv",
    ),
];

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
            Err(why) => eprintln!("note: {name} skipped: {why}"),
        }
    }
    eprintln!("{built} peer libraries ran");
    let _ = std::fs::remove_dir_all(dir);
}
