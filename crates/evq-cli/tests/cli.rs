//! The `evq` binary as a user runs it: real output, parsed.

mod support;

use support::{evq, evq_command};

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
    let out = evq_command()
        .args(["backends"])
        .env("EVQ_BACKEND", "poll")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("poll*")), "{text}");
    let out = evq_command()
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

/// CI's smoke run of the lab: the report and the JSON exist and are well formed
/// (not the speed: the sweeps are tiny).
#[test]
fn lab_smoke_writes_a_well_formed_report() {
    let out_dir = std::env::temp_dir().join(format!("evq-lab-smoke-{}", std::process::id()));
    let out = evq(&["lab", "--smoke", "--out", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    for key in ["machine", "kernel", "peers", "experiments"] {
        assert!(!json[key].is_null(), "results.json lacks {key}");
    }
    let experiments = json["experiments"].as_array().unwrap();
    let names: Vec<&str> = experiments
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for want in [
        "pipe-scaling",
        "bench-c",
        "cold-connections",
        "signals",
        "burst",
        "herd",
        "proxy",
        "load-client",
        "multicore",
        "async",
        "reliability",
        "kernel",
    ] {
        assert!(names.contains(&want), "{names:?}");
    }
    for e in experiments {
        for key in ["name", "seed", "claim", "measured", "verdict", "data"] {
            assert!(!e[key].is_null(), "{} lacks {key}", e["name"]);
        }
        let verdict = e["verdict"].as_str().unwrap();
        assert!(
            ["holds", "differs", "not_measured"].contains(&verdict),
            "{verdict}"
        );
    }
    let pipe = experiments
        .iter()
        .find(|e| e["name"] == "pipe-scaling")
        .unwrap();
    assert_ne!(
        pipe["verdict"], "not_measured",
        "pipe-scaling must measure: {pipe}"
    );
    assert!(pipe["data"]["main"]
        .as_array()
        .is_some_and(|d| !d.is_empty()));
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"));
    assert!(html.contains("<svg"), "plots are embedded");
    for name in names {
        assert!(
            html.contains(&format!("id=\"{name}\"")),
            "section for {name}"
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pipe-scaling") && text.contains("report:"),
        "{text}"
    );
    // The raw records re-judge to the same results, measuring nothing.
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("raw.json")).unwrap()).unwrap();
    assert_eq!(
        raw["experiments"].as_array().unwrap().len(),
        experiments.len()
    );
    let before = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    let out = evq(&["lab", "--rejudge", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    assert_eq!(
        before, after,
        "re-judging the same raw records changed the results"
    );
    let _ = std::fs::remove_dir_all(out_dir);
}

#[test]
fn lab_rejudge_without_raw_records_says_where_they_come_from() {
    let dir = std::env::temp_dir().join(format!("evq-lab-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = evq(&["lab", "--rejudge", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("raw.json") && err.contains("--out"), "{err}");
    let out = evq(&["lab", "--only", "no-such-scenario"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: pipe-scaling"));
    let _ = std::fs::remove_dir_all(dir);
}
