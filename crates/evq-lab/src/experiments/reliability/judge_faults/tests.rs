//! Each rule of the fault table's and the soak's verdicts, on rows and soak
//! reports moved to hold, to differ and to have nothing to judge.

use super::*;
use crate::experiment::testing::verdict;
use crate::experiments::reliability::{Plan, Reliability};
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;
use evq_faults::live::{LiveCount, Window};
use evq_faults::soak::{LoadSoak, ProgramSoak, Sample, Valid};
use evq_faults::suite::row::{Check, ExitSummary, Resources, Throughput};
use evq_faults::usage::Usage;

fn window(rate: f64) -> Window {
    Window {
        seconds: 2.0,
        rate,
        max_latency_ms: 3.0,
        count: LiveCount::default(),
    }
}

/// A row that passes every column, for fault `id` (`serve/trickle`).
fn good_row(id: &str) -> FaultRow {
    let (target, fault) = id.split_once('/').unwrap();
    FaultRow {
        target: target.into(),
        fault: fault.into(),
        injected: "test".into(),
        up: true,
        up_detail: String::new(),
        throughput: Some(Throughput {
            fault_free: vec![window(1000.0), window(1040.0)],
            under_fault: vec![window(1010.0)],
            offered_rate: None,
        }),
        resources: Some(Resources {
            baseline: Usage {
                fds: 8,
                anon_rss_kib: 900,
            },
            peak: Usage {
                fds: 700,
                anon_rss_kib: 6000,
            },
            after: Usage {
                fds: 8,
                anon_rss_kib: 1200,
            },
        }),
        idle_cpu: Some(0.002),
        exit: None,
        checks: vec![Check::new("answered in order", true, "100 of 100")],
        error: None,
        seconds: 5.0,
    }
}

fn good_rows() -> Vec<FaultRow> {
    FAULT_CLAIMS.iter().map(|c| good_row(claim_id(c))).collect()
}

fn good_soak() -> SoakReport {
    let program = |name: &str| ProgramSoak {
        program: name.into(),
        samples: (0..10)
            .map(|i| Sample {
                t: i as f64 * 6.0,
                fds: 12 + (i % 2),
                anon_rss_kib: 2000,
            })
            .collect(),
        rss_slope_kib_per_min: 3.0,
        fd_slope_per_min: 0.1,
        peak_rss_kib: 2100,
        valid: vec![(
            "keep-alive".into(),
            Valid {
                sent: 500,
                ok: 500,
                ..Valid::default()
            },
        )],
        hostile: vec![("reset sent".into(), 40)],
        up: true,
        exit: "exit 0".into(),
    };
    SoakReport {
        seconds: 60.0,
        mix: "test".into(),
        programs: vec![program("serve"), program("proxy")],
        load: Some(LoadSoak {
            connections: 300,
            replies_2xx: 3000,
            replies_5xx: 0,
            errors: vec![],
            peak_rss_kib: 4000,
            rss_slope_kib_per_min: 1.0,
            exit: "exit 0".into(),
            clean: true,
        }),
        error: None,
    }
}

/// Records with `soak` for both soaks (the readiness one and the one on
/// completions).
fn records(faults: Outcome<Vec<FaultRow>>, soak: Outcome<SoakReport>) -> Records {
    Records {
        plan: Plan {
            torture: vec![],
            faults: FAULT_CLAIMS
                .iter()
                .map(|c| claim_id(c).to_string())
                .collect(),
            faults_short: true,
            soak_seconds: 60.0,
            soak_completion_seconds: 60.0,
        },
        torture: Outcome::Failed("not part of this test".into()),
        faults,
        soak_completion: soak.clone(),
        soak,
    }
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&Reliability.judge(r), claim)
}

fn fault_verdict(rows: Vec<FaultRow>, claim: &str) -> Verdict {
    judged(
        &records(Outcome::Measured(rows), Outcome::Measured(good_soak())),
        claim,
    )
}

#[test]
fn the_claims_follow_the_suites_faults_in_order() {
    let ids: Vec<String> = evq_faults::faults().iter().map(|f| f.id()).collect();
    let claimed: Vec<&str> = FAULT_CLAIMS.iter().map(|c| claim_id(c)).collect();
    assert_eq!(claimed, ids);
}

#[test]
fn rows_and_soak_that_keep_every_promise_hold() {
    let r = records(
        Outcome::Measured(good_rows()),
        Outcome::Measured(good_soak()),
    );
    for claim in FAULT_CLAIMS.iter().chain(BOTH_SOAKS_CLAIMS.iter()) {
        assert_eq!(judged(&r, claim), Holds, "{claim}");
    }
    let j = Reliability.judge(&r);
    assert!(j
        .notes
        .iter()
        .any(|n| n.contains("evq faults (short form)")));
    let soak_figures: Vec<_> = j
        .figures
        .iter()
        .filter(|f| f.stem.starts_with("reliability-soak"))
        .collect();
    assert_eq!(soak_figures.len(), 4, "two a soak");
    assert!(j
        .commands
        .iter()
        .any(|c| c.starts_with("evq soak --io completion --seconds 60")));
    for f in soak_figures {
        assert_eq!(f.chart.series.len(), 2, "{}", f.stem);
        assert_eq!(f.chart.series[0].points.len(), 10);
    }
}

#[test]
fn any_failed_column_of_a_row_differs_and_only_that_row() {
    type Break = fn(&mut FaultRow);
    let breaks: [(&str, Break); 8] = [
        ("down", |r| r.up = false),
        ("throughput 94%", |r| {
            r.throughput.as_mut().unwrap().under_fault = vec![window(960.0)]
        }),
        ("descriptor kept", |r| {
            r.resources.as_mut().unwrap().after.fds = 9
        }),
        ("memory kept", |r| {
            r.resources.as_mut().unwrap().after.anon_rss_kib =
                900 + evq_faults::suite::row::RSS_SLACK_KIB + 1
        }),
        ("busy loop", |r| r.idle_cpu = Some(0.5)),
        ("exit 1", |r| {
            r.exit = Some(ExitSummary {
                code: Some(1),
                describe: "exit 1".into(),
                ..ExitSummary::default()
            })
        }),
        ("killed", |r| {
            r.exit = Some(ExitSummary {
                killed: true,
                describe: "killed".into(),
                ..ExitSummary::default()
            })
        }),
        ("a check", |r| {
            r.checks
                .push(Check::new("listener closed", false, "3 connected").item("2"))
        }),
    ];
    let target = FAULT_CLAIMS[4];
    for (what, f) in breaks {
        let mut rows = good_rows();
        f(&mut rows[4]);
        assert_eq!(fault_verdict(rows.clone(), target), Differs, "{what}");
        assert_eq!(fault_verdict(rows, FAULT_CLAIMS[5]), Holds, "{what}");
    }
}

#[test]
fn a_column_the_fault_does_not_measure_is_not_held_against_it() {
    let mut rows = good_rows();
    rows[7].throughput = None; // SIGTERM stops every client by design
    rows[7].idle_cpu = None;
    rows[7].exit = Some(ExitSummary {
        code: Some(0),
        describe: "exit 0 after 0.2 s".into(),
        ..ExitSummary::default()
    });
    assert_eq!(fault_verdict(rows, FAULT_CLAIMS[7]), Holds);
}

#[test]
fn a_row_that_did_not_run_or_was_not_planned_is_not_measured() {
    let mut rows = good_rows();
    rows[0].error = Some("evq serve did not start".into());
    rows.remove(1);
    let r = records(Outcome::Measured(rows), Outcome::Measured(good_soak()));
    assert_eq!(judged(&r, FAULT_CLAIMS[0]), NotMeasured);
    assert_eq!(judged(&r, FAULT_CLAIMS[1]), NotMeasured);
    assert_eq!(judged(&r, FAULT_CLAIMS[2]), Holds);
    let r = records(
        Outcome::Failed("no evq program".into()),
        Outcome::Failed("no evq program".into()),
    );
    for claim in FAULT_CLAIMS.iter().chain(SOAK_CLAIMS.iter()) {
        assert_eq!(judged(&r, claim), NotMeasured, "{claim}");
    }
}

#[test]
fn a_completion_soak_that_did_not_run_leaves_only_its_claims_not_measured() {
    let mut r = records(
        Outcome::Measured(good_rows()),
        Outcome::Measured(good_soak()),
    );
    r.soak_completion = Outcome::Failed("this kernel has no io_uring completion API".into());
    for claim in SOAK_CLAIMS {
        assert_eq!(judged(&r, claim), Holds, "{claim}");
    }
    for claim in SOAK_COMPLETION_CLAIMS {
        assert_eq!(judged(&r, claim), NotMeasured, "{claim}");
    }
    // A broken completion soak differs under its own claims only.
    let mut s = good_soak();
    s.programs[1].valid[0].1.unanswered = 1;
    r.soak_completion = Outcome::Measured(s);
    assert_eq!(judged(&r, SOAK_COMPLETION_ANSWERED), Differs);
    assert_eq!(judged(&r, SOAK_ANSWERED), Holds);
    // Records made before the completion soak read back without it.
    let mut raw = serde_json::to_value(&r).unwrap();
    raw.as_object_mut().unwrap().remove("soak_completion");
    raw["plan"]
        .as_object_mut()
        .unwrap()
        .remove("soak_completion_seconds");
    let old: Records = serde_json::from_value(raw).unwrap();
    assert_eq!(old.plan.soak_completion_seconds, 0.0);
    assert!(matches!(old.soak_completion, Outcome::Failed(ref why) if why.contains("before")));
    assert_eq!(judged(&old, SOAK_COMPLETION_FLAT), NotMeasured);
    assert_eq!(judged(&old, SOAK_FLAT), Holds);
}

fn soak_verdict(s: SoakReport, claim: &str) -> Verdict {
    judged(
        &records(Outcome::Measured(good_rows()), Outcome::Measured(s)),
        claim,
    )
}

#[test]
fn a_slope_over_its_bound_or_a_program_down_is_not_flat() {
    let mut s = good_soak();
    s.programs[1].rss_slope_kib_per_min = RSS_SLOPE_MAX_KIB_PER_MIN + 1.0;
    assert_eq!(soak_verdict(s, SOAK_FLAT), Differs, "memory");
    let mut s = good_soak();
    s.programs[0].fd_slope_per_min = FD_SLOPE_MAX_PER_MIN + 0.5;
    assert_eq!(soak_verdict(s, SOAK_FLAT), Differs, "descriptors");
    let mut s = good_soak();
    s.programs[0].up = false;
    assert_eq!(soak_verdict(s, SOAK_FLAT), Differs, "down");
    let mut s = good_soak();
    s.programs[0].fd_slope_per_min = -3.0; // shrinking is flat enough
    assert_eq!(soak_verdict(s, SOAK_FLAT), Holds);
    let mut s = good_soak();
    s.programs.clear();
    assert_eq!(soak_verdict(s, SOAK_FLAT), NotMeasured);
}

#[test]
fn one_valid_request_unanswered_wrong_or_5xx_differs() {
    type Break = fn(&mut Valid);
    let breaks: [(&str, Break); 3] = [
        ("5xx", |v| v.status_5xx = 1),
        ("wrong", |v| v.wrong = 1),
        ("unanswered", |v| v.unanswered = 1),
    ];
    for (what, f) in breaks {
        let mut s = good_soak();
        f(&mut s.programs[1].valid[0].1);
        assert_eq!(soak_verdict(s, SOAK_ANSWERED), Differs, "{what}");
    }
    let mut s = good_soak();
    for p in &mut s.programs {
        p.valid.clear();
    }
    assert_eq!(
        soak_verdict(s, SOAK_ANSWERED),
        Differs,
        "no valid request sent"
    );
}

#[test]
fn evq_load_over_its_bound_failing_or_absent() {
    let mut s = good_soak();
    s.load.as_mut().unwrap().peak_rss_kib = evq_faults::suite::LOAD_RSS_BOUND_KIB + 1;
    assert_eq!(soak_verdict(s, SOAK_LOAD), Differs, "memory");
    let mut s = good_soak();
    s.load.as_mut().unwrap().clean = false;
    assert_eq!(soak_verdict(s, SOAK_LOAD), Differs, "exit");
    let mut s = good_soak();
    s.load.as_mut().unwrap().replies_5xx = 2;
    assert_eq!(soak_verdict(s, SOAK_LOAD), Differs, "5xx");
    let mut s = good_soak();
    s.load = None;
    assert_eq!(soak_verdict(s, SOAK_LOAD), NotMeasured);
}
