//! Each load-client rule on the recorded quick run, moved to hold, to differ and
//! to have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiments::load_client::LoadClient;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("load-client")
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&LoadClient.judge(r), claim)
}

/// Every counted run of `client` at this rate and CPU per reply.
fn set(r: &mut Records, client: Client, replies_per_s: f64, cpu_us: f64) {
    let mut found = false;
    for x in r.runs.iter_mut().filter(|x| x.client == client.name()) {
        x.summary.as_mut().expect("parsed").replies_per_s = replies_per_s;
        x.cpu_us_per_reply = Some(cpu_us);
        x.failure = None;
        found = true;
    }
    assert!(found, "no {} run recorded", client.name());
}

#[test]
fn evq_load_outdoes_httperf_on_the_same_command_line() {
    let mut r = records();
    set(&mut r, Client::Httperf, 10_000.0, 20.0);
    set(&mut r, Client::EvqOpen, 12_000.0, 10.0);
    assert_eq!(judged(&r, CLAIMS[0].0), Holds);
    assert_eq!(judged(&r, CLAIMS[1].0), Holds, "half the CPU per reply");
    set(&mut r, Client::EvqOpen, 11_999.0, 10.01);
    assert_eq!(judged(&r, CLAIMS[0].0), Differs);
    assert_eq!(judged(&r, CLAIMS[1].0), Differs);
    r.runs.retain(|x| x.client != Client::Httperf.name());
    r.not_run = vec![("httperf".into(), "httperf is not installed".into())];
    for claim in [CLAIMS[0].0, CLAIMS[1].0] {
        let j = LoadClient.judge(&r);
        let c = crate::experiment::testing::check(&j, claim);
        assert_eq!(c.verdict, NotMeasured);
        assert!(
            c.measured.contains("httperf is not installed"),
            "{}",
            c.measured
        );
    }
}

#[test]
fn evq_load_keeps_up_with_wrk_in_closed_loop() {
    let mut r = records();
    set(&mut r, Client::Wrk, 10_000.0, 5.0);
    set(&mut r, Client::EvqClosed, 10_000.0, 5.0);
    assert_eq!(judged(&r, CLAIMS[2].0), Holds);
    set(&mut r, Client::EvqClosed, 9_999.0, 5.0);
    assert_eq!(judged(&r, CLAIMS[2].0), Differs);
    for x in r.runs.iter_mut().filter(|x| x.client == Client::Wrk.name()) {
        x.failure = Some("killed at the 60 s limit".into());
    }
    assert_eq!(judged(&r, CLAIMS[2].0), NotMeasured, "no wrk run counted");
}

#[test]
fn without_nginx_every_claim_is_not_measured_with_its_rule() {
    let mut r = records();
    r.server_missing = Some("nginx is not installed (scripts/install-peers.sh installs it)".into());
    let j = LoadClient.judge(&r);
    assert_eq!(j.checks.len(), CLAIMS.len());
    for (c, (claim, rule)) in j.checks.iter().zip(CLAIMS) {
        assert_eq!((c.claim.as_str(), c.reasoning.as_str()), (claim, rule));
        assert_eq!(c.verdict, NotMeasured);
        assert!(c.measured.contains("nginx is not installed"));
    }
    assert!(j.figures.is_empty() && j.notes.is_empty());
}

/// The recorded run with `--io completion` runs made from the readiness ones
/// (runs recorded before the completion clients joined have none).
fn with_completion_runs(mut r: Records) -> Records {
    let copies: Vec<Run> = r
        .runs
        .iter()
        .filter_map(|x| {
            let client = if x.client == Client::EvqOpen.name() {
                Client::EvqOpenCompletion
            } else if x.client == Client::EvqClosed.name() {
                Client::EvqClosedCompletion
            } else {
                return None;
            };
            Some(Run {
                client: client.name().into(),
                ..x.clone()
            })
        })
        .collect();
    r.runs.retain(|x| {
        x.client != Client::EvqOpenCompletion.name()
            && x.client != Client::EvqClosedCompletion.name()
    });
    r.runs.extend(copies);
    r
}

#[test]
fn completions_spend_at_most_nine_tenths_of_the_readiness_cpu() {
    let mut r = with_completion_runs(records());
    set(&mut r, Client::EvqOpen, 10_000.0, 10.0);
    set(&mut r, Client::EvqOpenCompletion, 10_000.0, 9.0);
    assert_eq!(judged(&r, CLAIMS[3].0), Holds);
    set(&mut r, Client::EvqOpenCompletion, 10_000.0, 9.01);
    assert_eq!(judged(&r, CLAIMS[3].0), Differs);
    r.runs
        .retain(|x| x.client != Client::EvqOpenCompletion.name());
    assert_eq!(judged(&r, CLAIMS[3].0), NotMeasured, "no completion run");
}

#[test]
fn completions_keep_up_with_wrk_in_closed_loop() {
    let mut r = with_completion_runs(records());
    set(&mut r, Client::Wrk, 10_000.0, 5.0);
    set(&mut r, Client::EvqClosedCompletion, 10_000.0, 5.0);
    assert_eq!(judged(&r, CLAIMS[4].0), Holds);
    set(&mut r, Client::EvqClosedCompletion, 9_999.0, 5.0);
    assert_eq!(judged(&r, CLAIMS[4].0), Differs);
    // The readiness closed loop's verdict is its own.
    set(&mut r, Client::EvqClosed, 10_000.0, 5.0);
    assert_eq!(judged(&r, CLAIMS[2].0), Holds);
}
