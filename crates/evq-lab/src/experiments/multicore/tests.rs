//! The multicore rules on the committed runs and on made-up ones.

use super::judge::{self, AHEAD, COMPLETION_FIRST, LINEAR, LINEAR_COMPLETION, SYSCALLS};
use super::judge_clients::{self, CLOSED_LOOP, CPU};
use super::{ClientPoint, Multicore, Plan, Records, ScalingPoint, ScalingRun, SyscallPoint};
use crate::experiment::testing::verdict;
use crate::experiment::{Ctx, Experiment};
use crate::tools::Tools;
use crate::verdict::Verdict::{Differs, Holds, NotMeasured};

/// The scenario's measurement: the committed runs, or `from`'s.
fn measure(from: Option<&std::path::Path>) -> std::io::Result<Records> {
    let tools = Tools::with_evq("evq".into());
    let out = std::env::temp_dir();
    let ctx = Ctx::new(&out, &tools, &());
    let from = from.map(|d| d.display().to_string());
    Multicore.measure(Plan { from }, &ctx)
}

fn committed() -> Records {
    measure(None).expect("the committed runs parse")
}

fn v(r: &Records, claim: &str) -> crate::verdict::Verdict {
    verdict(&Multicore.judge(r), claim)
}

/// One round: evq, nginx and h2o at each (threads, evq, nginx, h2o) rate.
fn run(rates: &[(u32, f64, f64, f64)]) -> ScalingRun {
    let mut points = Vec::new();
    for &(threads, e, n, h) in rates {
        for (server, rate) in [("evq", e), ("nginx", n), ("h2o", h)] {
            points.push(ScalingPoint {
                round: 1,
                server: server.into(),
                threads,
                requests_per_s: rate,
                error: None,
                evq_reply: "file".into(),
            });
        }
    }
    ScalingRun {
        file: "made-up".into(),
        client_cpus: 10,
        points,
    }
}

#[test]
fn the_committed_runs_are_judged_claim_by_claim() {
    let r = committed();
    assert_eq!(r.runs.len(), 5);
    assert_eq!(r.runs[0].client_cpus, 10, "the judged run first");
    assert!(!judge::fixed_reply(&r.runs[3]) && judge::fixed_reply(&r.runs[4]));
    let j = Multicore.judge(&r);
    assert_eq!(j.checks.len(), Multicore.claims().len());
    assert_eq!(j.figures.len(), 3);
    assert_eq!(
        j.figures[0].chart.series.len(),
        17,
        "4 servers × 3 runs, 3 in the third lease's, evq's 2 with the fixed reply"
    );
    assert_eq!(j.figures[2].chart.series.len(), 3, "3 load clients");
    // 6 threads, wrk on 10 CPUs: (635,039 + 662,601) / 2 over
    // 6 × (128,417 + 109,242) / 2.
    let share = judge::linear_share(&r.runs[0], "evq", 6).unwrap();
    assert!((share - 0.910).abs() < 0.001, "{share}");
    assert_eq!(v(&r, LINEAR), Holds);
    // The completion server: (673,457 + 660,329) / 2 over 6 × (141,359 + 132,772) / 2.
    let share = judge::linear_share(&r.runs[0], "evq-completion", 6).unwrap();
    assert!((share - 0.811).abs() < 0.001, "{share}");
    assert_eq!(v(&r, LINEAR_COMPLETION), Differs);
    // Eight threads with wrk on 8 CPUs: evq 733k against h2o 774k.
    assert_eq!(v(&r, AHEAD), Differs);
    // Two threads with wrk on 8 CPUs: 1.15× epoll but 1.09× h2o.
    assert_eq!(v(&r, COMPLETION_FIRST), Differs);
    // 11,257 calls for 440,078 requests at 1 thread, 18,206 for 705,130 at 2.
    assert_eq!(v(&r, SYSCALLS), Holds);
    // evq load 1.15–1.31× wrk; completion CPU 0.94–1.10× epoll's.
    assert_eq!(v(&r, CLOSED_LOOP), Holds);
    assert_eq!(v(&r, CPU), Differs);
    let cpu = judge_clients::cpu_us(&r, "evq-load-completion", 1).unwrap()
        / judge_clients::cpu_us(&r, "evq-load", 1).unwrap();
    assert!((cpu - 0.94).abs() < 0.01, "{cpu}");
}

fn point(server: &str, threads: u32, rate: f64) -> ScalingPoint {
    ScalingPoint {
        round: 1,
        server: server.into(),
        threads,
        requests_per_s: rate,
        error: None,
        evq_reply: "file".into(),
    }
}

#[test]
fn the_completion_server_rules() {
    let mut r = Records {
        machine: "made up".into(),
        runs: vec![run(&[(1, 100.0, 90.0, 95.0), (2, 190.0, 170.0, 150.0)])],
        clients: Vec::new(),
        syscalls: Vec::new(),
    };
    // No completion points: its claims are not measured.
    assert_eq!(v(&r, COMPLETION_FIRST), NotMeasured);
    assert_eq!(v(&r, LINEAR_COMPLETION), NotMeasured);
    assert_eq!(v(&r, SYSCALLS), NotMeasured);
    r.runs[0].points.push(point("evq-completion", 1, 124.0));
    r.runs[0].points.push(point("evq-completion", 2, 219.0));
    assert_eq!(
        v(&r, COMPLETION_FIRST),
        Holds,
        "1.24× / 1.31× at 1, 1.15× / 1.46× at 2"
    );
    assert_eq!(v(&r, LINEAR_COMPLETION), Holds, "219 / (2 × 124) = 0.883");
    r.runs[0]
        .points
        .retain(|p| !(p.server == "evq-completion" && p.threads == 2));
    r.runs[0].points.push(point("evq-completion", 2, 218.0));
    assert_eq!(v(&r, COMPLETION_FIRST), Differs, "218 < 1.15 × 190");
    let calls = |reply: &str, io: &str, threads, requests, system_calls| SyscallPoint {
        reply: reply.into(),
        io: io.into(),
        threads,
        requests,
        system_calls,
    };
    r.syscalls = vec![
        calls("fixed", "completion", 1, 1000, 300),
        calls("fixed", "readiness", 1, 1000, 3000),
        calls("file", "completion", 1, 1000, 1030),
    ];
    assert_eq!(v(&r, SYSCALLS), Holds, "0.3 at most");
    r.syscalls.push(calls("fixed", "completion", 2, 1000, 301));
    assert_eq!(v(&r, SYSCALLS), Differs);
}

#[test]
fn the_load_client_rules() {
    let client = |client: &str, threads, replies: u64, cpu_s| ClientPoint {
        round: 1,
        client: client.into(),
        threads,
        connections: 50 * threads,
        replies,
        replies_per_s: replies as f64 / 3.0,
        cpu_s,
    };
    let mut r = Records {
        machine: "made up".into(),
        runs: Vec::new(),
        clients: Vec::new(),
        syscalls: Vec::new(),
    };
    assert_eq!(v(&r, CLOSED_LOOP), NotMeasured);
    assert_eq!(v(&r, CPU), NotMeasured);
    r.clients = vec![
        client("wrk", 1, 300, 3.0),
        client("evq-load", 1, 300, 3.0),
        client("evq-load-completion", 1, 300, 2.6),
    ];
    assert_eq!(v(&r, CLOSED_LOOP), Holds, "level with wrk");
    assert_eq!(v(&r, CPU), Holds, "0.87× the CPU per reply");
    r.clients.push(client("wrk", 2, 600, 6.0));
    r.clients.push(client("evq-load", 2, 590, 6.0));
    assert_eq!(v(&r, CLOSED_LOOP), Differs, "590 < 600 at 2 threads");
    assert_eq!(v(&r, CPU), NotMeasured, "no completion client at 2 threads");
    r.clients.push(client("evq-load-completion", 2, 590, 5.2));
    assert_eq!(v(&r, CPU), Holds);
    r.clients.push(client("evq-load-completion", 2, 590, 5.8));
    assert_eq!(
        v(&r, CPU),
        Differs,
        "pooled: 11.0 s for 1,180 replies, 0.92×"
    );
}

#[test]
fn linear_and_ahead_rules() {
    let mut r = Records {
        machine: "made up".into(),
        runs: vec![run(&[(1, 100.0, 90.0, 95.0), (4, 350.0, 300.0, 345.0)])],
        clients: Vec::new(),
        syscalls: Vec::new(),
    };
    assert_eq!(v(&r, LINEAR), Holds, "350 / 400 = 0.875");
    assert_eq!(v(&r, AHEAD), Holds, "350 ≥ 0.97 × 345");
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0), (4, 330.0, 300.0, 345.0)]);
    assert_eq!(v(&r, LINEAR), Differs, "330 / 400 = 0.825");
    assert_eq!(v(&r, AHEAD), Differs, "330 < 0.97 × 345");
    // One thread count only: nothing to scale.
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0)]);
    assert_eq!(v(&r, LINEAR), NotMeasured);
    // A peer missing at a thread count it ran at elsewhere: not measured.
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0), (4, 350.0, 300.0, 345.0)]);
    r.runs[0]
        .points
        .retain(|p| p.server != "h2o" || p.threads == 1);
    assert_eq!(v(&r, AHEAD), NotMeasured);
    // A peer the run never started is not compared there.
    r.runs[0].points.retain(|p| p.server != "h2o");
    assert_eq!(v(&r, AHEAD), Holds, "against nginx alone");
    // A run where evq answered its fixed reply is no comparison with peers
    // (they serve the file): left out, even where evq is behind.
    let mut fixed = run(&[(1, 50.0, 90.0, 95.0)]);
    for p in &mut fixed.points {
        p.evq_reply = "fixed".into();
    }
    r.runs.push(fixed);
    assert_eq!(v(&r, AHEAD), Holds);
    r.runs.clear();
    assert_eq!(v(&r, LINEAR), NotMeasured);
    assert_eq!(v(&r, AHEAD), NotMeasured);
}

#[test]
fn a_results_directory_is_read_instead() {
    let dir = std::env::temp_dir().join(format!("evq-multicore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("scaling.jsonl"),
        "{\"round\":1,\"server\":\"evq\",\"threads\":1,\"requests_per_s\":10.5}\n{\"round\":1,\"server\":\"h2o\",\"threads\":1,\"error\":\"did not listen\"}\n",
    )
    .unwrap();
    let r = measure(Some(&dir)).unwrap();
    assert_eq!(r.runs[0].points.len(), 2);
    assert_eq!(r.runs[0].points[1].error.as_deref(), Some("did not listen"));
    let notes = Multicore.judge(&r).notes.join(" ");
    assert!(notes.contains("did not listen"), "{notes}");
    assert!(
        r.clients.is_empty() && r.syscalls.is_empty(),
        "absent files: none"
    );
    // The load clients and system calls are read where present; a bad line is
    // an error that names its file.
    std::fs::write(
        dir.join("clients.jsonl"),
        "{\"round\":1,\"client\":\"wrk\",\"threads\":1,\"replies\":30,\"replies_per_s\":10.0,\"cpu_s\":0.5}\n",
    )
    .unwrap();
    std::fs::write(dir.join("syscalls.jsonl"), "{\"reply\":\"fixed\"}\n").unwrap();
    let e = measure(Some(&dir)).unwrap_err();
    assert!(e.to_string().contains("syscalls.jsonl"), "{e}");
    std::fs::remove_file(dir.join("syscalls.jsonl")).unwrap();
    let r = measure(Some(&dir)).unwrap();
    assert_eq!(r.clients.len(), 1);
    assert_eq!(r.clients[0].client, "wrk");
    // A missing file is an error that names it.
    std::fs::remove_file(dir.join("scaling.jsonl")).unwrap();
    let e = measure(Some(&dir)).unwrap_err();
    assert!(e.to_string().contains("scaling.jsonl"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
