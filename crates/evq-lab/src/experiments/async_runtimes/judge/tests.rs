//! Each async rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiment::Outcome;
use crate::experiments::async_runtimes::AsyncRuntimes;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("async")
}

fn runs(r: &mut Records) -> &mut Vec<RunRecord> {
    match &mut r.runs {
        Outcome::Measured(v) => v,
        Outcome::Failed(why) => panic!("the recorded run failed: {why}"),
    }
}

fn callgrind(r: &mut Records) -> &mut Vec<CallgrindRecord> {
    match &mut r.callgrind {
        Outcome::Measured(v) => v,
        Outcome::Failed(why) => panic!("the recorded run failed: {why}"),
    }
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&AsyncRuntimes.judge(r), claim)
}

/// Sets evq-async's figure on `workload` to `factor` × tokio-ct's in every round.
fn scale_ours(r: &mut Records, workload: &str, rps: f64, p99: f64) {
    let v = runs(r);
    let base: Vec<(u32, f64, u64)> = v
        .iter()
        .filter(|x| x.workload == workload && x.runtime == BASELINE)
        .map(|x| (x.round, x.req_per_s, x.p99_us))
        .collect();
    for (round, b_rps, b_p99) in base {
        let ours = v
            .iter_mut()
            .find(|x| x.workload == workload && x.runtime == OURS && x.round == round)
            .expect("evq-async measured in every round");
        ours.req_per_s = b_rps * rps;
        ours.p99_us = (b_p99 as f64 * p99) as u64;
    }
}

#[test]
fn the_recorded_run_judges_every_claim() {
    let r = records();
    for claim in CLAIMS {
        assert_ne!(judged(&r, claim), NotMeasured, "{claim}");
    }
}

#[test]
fn hyper_holds_at_parity_and_differs_when_slower_or_later() {
    let mut r = records();
    scale_ours(&mut r, "hyper", 1.0, 1.0);
    assert_eq!(judged(&r, HYPER), Holds);
    let mut slower = r.clone();
    scale_ours(&mut slower, "hyper", 0.95, 1.0);
    assert_eq!(judged(&slower, HYPER), Differs);
    let mut later = r.clone();
    scale_ours(&mut later, "hyper", 1.1, 1.2);
    assert_eq!(judged(&later, HYPER), Differs);
    let mut errors = r.clone();
    runs(&mut errors)
        .iter_mut()
        .find(|x| x.workload == "hyper" && x.runtime == OURS)
        .unwrap()
        .errors = 1;
    assert_eq!(judged(&errors, HYPER), Differs);
}

#[test]
fn hyper_is_not_measured_without_a_tokio_pair() {
    let mut r = records();
    runs(&mut r).retain(|x| !(x.workload == "hyper" && x.runtime == BASELINE));
    assert_eq!(judged(&r, HYPER), NotMeasured);
    let mut failed = records();
    failed.runs = Outcome::Failed("wrk is not installed".into());
    assert_eq!(judged(&failed, HYPER), NotMeasured);
    assert_eq!(judged(&failed, ECHO), NotMeasured);
}

#[test]
fn echo_needs_both_connection_counts_at_parity() {
    let mut r = records();
    scale_ours(&mut r, "echo1", 1.0, 1.0);
    scale_ours(&mut r, "echo1000", 1.0, 1.0);
    assert_eq!(judged(&r, ECHO), Holds);
    let mut slower = r.clone();
    scale_ours(&mut slower, "echo1000", 0.9, 1.0);
    assert_eq!(judged(&slower, ECHO), Differs);
    let mut one_only = r.clone();
    runs(&mut one_only).retain(|x| x.workload != "echo1000");
    assert_eq!(judged(&one_only, ECHO), Differs);
    let mut none = r.clone();
    runs(&mut none).retain(|x| !x.workload.starts_with("echo"));
    assert_eq!(judged(&none, ECHO), NotMeasured);
}

#[test]
fn instructions_hold_only_when_no_workload_costs_more() {
    let mut r = records();
    for x in callgrind(&mut r).iter_mut() {
        x.instructions_per_request = if x.runtime == OURS { 900.0 } else { 1000.0 };
    }
    assert_eq!(judged(&r, INSTRUCTIONS), Holds);
    let mut more = r.clone();
    callgrind(&mut more)
        .iter_mut()
        .find(|x| x.runtime == OURS)
        .unwrap()
        .instructions_per_request = 1001.0;
    assert_eq!(judged(&more, INSTRUCTIONS), Differs);
    let mut alone = r.clone();
    callgrind(&mut alone).retain(|x| x.runtime == OURS);
    assert_eq!(judged(&alone, INSTRUCTIONS), NotMeasured);
}

#[test]
fn every_workload_has_a_figure_with_every_runtime() {
    let r = records();
    let judged = AsyncRuntimes.judge(&r);
    assert_eq!(judged.figures.len(), r.plan.workloads.len());
    for f in &judged.figures {
        assert_eq!(f.chart.series.len(), r.plan.runtimes.len(), "{}", f.stem);
        assert!(f.chart.series.iter().any(|s| s.evq && s.name == OURS));
        assert!(f.chart.series.iter().all(|s| !s.points.is_empty()));
    }
}
