//! `evq torture --quick`: every backend this kernel has × {1, 2, 4} consumer
//! threads, and the forced overflows of rtsig, rtsig-bulk, uring and kmod-ring, each case in
//! its own process, asserting the exactly-once ledger (issue 19). About 40 s.

mod support;

use support::evq_command;

#[test]
fn quick_torture_loses_nothing_on_any_backend() {
    let out = evq_command()
        .args(["torture", "--quick", "--json", "--no-shrink"])
        .output()
        .expect("run evq torture");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON from evq torture ({e}):\n{stderr}"));
    let reports = reports.as_array().expect("an array of case reports");
    let backends = evq::BackendKind::candidates();
    // Every available backend × 3 thread counts, plus the overflow cases.
    let overflowing = backends
        .iter()
        .filter(|b| matches!(b.name(), "rtsig" | "rtsig-bulk" | "uring" | "kmod-ring"))
        .count();
    assert_eq!(reports.len(), backends.len() * 3 + overflowing, "{stderr}");
    for r in reports {
        let name = format!(
            "{} × {} (overflow {})",
            r["backend"], r["threads"], r["overflow"]
        );
        for field in [
            "lost",
            "duplicated",
            "stale",
            "misdelivered",
            "late",
            "wrong_state",
            "timers_lost",
            "wakeups_lost",
            "connections_lost",
            "connections_duplicated",
        ] {
            assert_eq!(r[field], 0, "{name}: {field}\n{r:#}\n{stderr}");
        }
        assert!(
            r["errors"].as_array().is_some_and(|e| e.is_empty()),
            "{name}: {r:#}"
        );
        assert!(
            r["failures"].as_array().is_some_and(|f| f.is_empty()),
            "{name}: {r:#}"
        );
        // The case really ran: events flowed, checkpoints were checked, connections
        // were made and accepted.
        assert!(r["events"].as_u64().unwrap() > 1_000, "{name}: {r:#}");
        assert!(r["checkpoints"].as_u64().unwrap() > 0, "{name}: {r:#}");
        assert!(r["connections"].as_u64().unwrap() > 0, "{name}: {r:#}");
        if r["overflow"] == true {
            assert!(
                r["overflows_recovered"].as_u64().unwrap() > 0,
                "{name}: the forced overflow did not happen\n{r:#}"
            );
        }
    }
    assert!(out.status.success(), "{stderr}");
}
