//! The multicore rules on the committed runs and on made-up ones.

use super::judge::{self, AHEAD, LINEAR};
use super::{Multicore, Plan, Records, ScalingPoint, ScalingRun};
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
    assert_eq!(r.runs.len(), 2);
    assert_eq!(r.runs[0].client_cpus, 10, "the judged run first");
    let j = Multicore.judge(&r);
    assert_eq!(j.checks.len(), Multicore.claims().len());
    assert_eq!(j.figures.len(), 2);
    assert_eq!(j.figures[0].chart.series.len(), 6, "3 servers × 2 runs");
    // 6 threads: (793,781 + 878,776) / 2 over 6 × (162,736 + 163,749) / 2.
    let share = judge::linear_share(&r.runs[0], "evq", 6).unwrap();
    assert!((share - 0.854).abs() < 0.001, "{share}");
    assert_eq!(v(&r, LINEAR), Holds);
    // Two threads with wrk on 8 CPUs: evq 266k against h2o 288k.
    assert_eq!(v(&r, AHEAD), Differs);
}

#[test]
fn linear_and_ahead_rules() {
    let mut r = Records {
        machine: "made up".into(),
        runs: vec![run(&[(1, 100.0, 90.0, 95.0), (4, 350.0, 300.0, 345.0)])],
    };
    assert_eq!(v(&r, LINEAR), Holds, "350 / 400 = 0.875");
    assert_eq!(v(&r, AHEAD), Holds, "350 ≥ 0.97 × 345");
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0), (4, 330.0, 300.0, 345.0)]);
    assert_eq!(v(&r, LINEAR), Differs, "330 / 400 = 0.825");
    assert_eq!(v(&r, AHEAD), Differs, "330 < 0.97 × 345");
    // One thread count only: nothing to scale.
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0)]);
    assert_eq!(v(&r, LINEAR), NotMeasured);
    // A peer missing: not measured.
    r.runs[0] = run(&[(1, 100.0, 90.0, 95.0), (4, 350.0, 300.0, 345.0)]);
    r.runs[0].points.retain(|p| p.server != "h2o");
    assert_eq!(v(&r, AHEAD), NotMeasured);
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
    // A missing file is an error that names it.
    std::fs::remove_file(dir.join("scaling.jsonl")).unwrap();
    let e = measure(Some(&dir)).unwrap_err();
    assert!(e.to_string().contains("scaling.jsonl"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
