//! Each herd rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiments::herd::Herd;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Sweep<Plan, Run> {
    recorded("herd")
}

fn judged(r: &Sweep<Plan, Run>, claim: &str) -> Verdict {
    verdict(&Herd.judge(r), claim)
}

fn run<'a>(r: &'a mut Sweep<Plan, Run>, design: &str, c: usize) -> &'a mut Run {
    r.points
        .iter_mut()
        .find(|x| x.design == design && x.concurrency == c)
        .unwrap_or_else(|| panic!("no {design} at {c}"))
}

#[test]
fn wake_one_matches_blocking_accept_under_load() {
    let mut r = records();
    for c in loaded(&r) {
        run(&mut r, "serv02", c).requests_per_s = 1000.0;
        run(&mut r, DEFAULT, c).requests_per_s = 950.0;
    }
    assert_eq!(judged(&r, WAKE_ONE), Holds);
    run(&mut r, DEFAULT, 32).requests_per_s = 949.0;
    assert_eq!(judged(&r, WAKE_ONE), Differs);
    r.plan.concurrency = vec![1];
    assert_eq!(judged(&r, WAKE_ONE), NotMeasured, "no run with 8 clients");
}

#[test]
fn the_herd_shows_in_context_switches() {
    let mut r = records();
    run(&mut r, DEFAULT, 1).sleeps_per_conn = 2.0;
    run(&mut r, "serv02l-k", 1).sleeps_per_conn = 3.0;
    assert_eq!(judged(&r, HERD), Holds);
    run(&mut r, "serv02l-k", 1).sleeps_per_conn = 2.9;
    assert_eq!(judged(&r, HERD), Differs);
    r.points.retain(|x| x.design != "serv02l-k");
    assert_eq!(judged(&r, HERD), NotMeasured);
}

fn set_share(r: &mut Sweep<Plan, Run>, design: &str, c: usize, share: Option<f64>) {
    run(r, design, c)
        .rest
        .insert("share_max_over_min".into(), serde_json::json!(share));
}

#[test]
fn rotation_spreads_the_work() {
    let mut r = records();
    let all = r.plan.concurrency.clone();
    for &c in &all {
        set_share(&mut r, DEFAULT, c, Some(1.2));
    }
    run(&mut r, "serv02l-kone", 1).jain = 0.59;
    run(&mut r, DEFAULT, 1).jain = 0.9;
    assert_eq!(judged(&r, ROTATION), Holds);
    run(&mut r, "serv02l-kone", 1).jain = 0.6;
    assert_eq!(
        judged(&r, ROTATION),
        Differs,
        "without rotation it was fair already"
    );
    run(&mut r, "serv02l-kone", 1).jain = 0.25;
    run(&mut r, DEFAULT, 1).jain = 0.89;
    assert_eq!(judged(&r, ROTATION), Differs, "rotation did not spread it");
    r.points.retain(|x| x.design != "serv02l-kone");
    assert_eq!(judged(&r, ROTATION), NotMeasured);
}

#[test]
fn rotation_keeps_shares_even_while_workers_are_busy() {
    let mut r = records();
    let all = r.plan.concurrency.clone();
    let busiest = *all.last().unwrap();
    for &c in &all {
        set_share(&mut r, DEFAULT, c, Some(1.0));
    }
    run(&mut r, "serv02l-kone", 1).jain = 0.25;
    run(&mut r, DEFAULT, 1).jain = 1.0;
    assert_eq!(judged(&r, ROTATION), Holds);
    set_share(&mut r, DEFAULT, busiest, Some(1.21));
    assert_eq!(judged(&r, ROTATION), Differs, "uneven at the highest load");
    set_share(&mut r, DEFAULT, busiest, None);
    assert_eq!(
        judged(&r, ROTATION),
        Differs,
        "a worker served nothing at the highest load"
    );
}

#[test]
fn fork_per_client_is_the_slowest() {
    let mut r = records();
    for x in r.points.iter_mut().filter(|x| x.concurrency == 8) {
        x.requests_per_s = 1000.0;
    }
    run(&mut r, "serv01", 8).requests_per_s = 100.0;
    assert_eq!(judged(&r, FORK_SLOWEST), Holds);
    run(&mut r, "serv07", 8).requests_per_s = 99.0;
    assert_eq!(judged(&r, FORK_SLOWEST), Differs);
    r.points.retain(|x| x.design != "serv01");
    assert_eq!(judged(&r, FORK_SLOWEST), NotMeasured);
}
