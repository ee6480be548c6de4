//! The `evq` binary as a user runs it: real output, parsed.

use std::process::Command;

fn evq(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_evq"))
        .args(args)
        .output()
        .expect("run evq")
}

#[test]
fn backends_lists_every_backend_with_capabilities() {
    let out = evq(&["backends", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for want in ["select", "select-improved", "poll", "epoll"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let epoll = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "epoll")
        .unwrap();
    assert_eq!(epoll["available"], true);
    assert_eq!(epoll["event"], true);
}

#[test]
fn pipebench_json_has_a_record_per_contender_and_size() {
    let out = evq(&[
        "pipebench",
        "--fds",
        "1,50",
        "--iters",
        "300",
        "--reps",
        "2",
        "--backend",
        "epoll",
        "--backend",
        "poll",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(
        records.len(),
        2 * 5,
        "raw-none, raw-poll, raw-epoll, epoll, poll at 2 sizes"
    );
    for r in records {
        for field in ["backend", "fds", "iters", "ns_per_event", "min", "max"] {
            assert!(!r[field].is_null(), "missing {field} in {r}");
        }
        let (min, med, max) = (
            r["min"].as_f64().unwrap(),
            r["ns_per_event"].as_f64().unwrap(),
            r["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= med && med <= max, "{r}");
    }
}

#[test]
fn pipebench_table_and_bad_flags() {
    let out = evq(&[
        "pipebench",
        "--fds",
        "4",
        "--iters",
        "200",
        "--reps",
        "1",
        "--baseline",
        "none",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("epoll") && !text.contains("raw-"), "{text}");

    let out = evq(&["pipebench", "--backend", "kqueue-on-linux"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown evq backend"));

    let out = evq(&["pipebench", "--fds", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));

    let out = evq(&["pipebench", "--fds", "50000"]);
    assert!(
        !out.status.success(),
        "more descriptors than the limit must be refused"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit"));
}

#[test]
fn evq_backend_variable_forces_a_backend_and_rejects_unknown_names() {
    let out = Command::new(env!("CARGO_BIN_EXE_evq"))
        .args(["backends"])
        .env("EVQ_BACKEND", "poll")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("poll*")), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_evq"))
        .args(["backends", "--json"])
        .env("EVQ_BACKEND", "nope")
        .output()
        .unwrap();
    assert!(out.status.success(), "listing still works");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|r| r["default"] == false),
        "unknown name silently replaced"
    );
}
