//! Each reliability rule on the recorded quick run, moved to hold, to differ and
//! to have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiment::Outcome;
use crate::experiments::reliability::Reliability;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Records {
    recorded("reliability")
}

fn cases(r: &mut Records) -> &mut Vec<CaseReport> {
    match &mut r.torture {
        Outcome::Measured(c) => c,
        Outcome::Failed(why) => panic!("the recorded run failed: {why}"),
    }
}

fn judged(r: &Records, claim: &str) -> Verdict {
    verdict(&Reliability.judge(r), claim)
}

#[test]
fn the_recorded_run_holds_everywhere() {
    let r = records();
    for claim in CLAIMS {
        assert_eq!(judged(&r, claim), Holds, "{claim}");
    }
}

#[test]
fn any_broken_promise_of_any_case_differs() {
    type Break = fn(&mut CaseReport);
    let breaks: [(&str, Break); 8] = [
        ("lost", |c| c.lost = 1),
        ("timer", |c| c.timers_lost = 1),
        ("wake-up", |c| c.wakeups_lost = 1),
        ("duplicated", |c| c.duplicated = 1),
        ("stale", |c| c.stale = 1),
        ("wrong state", |c| c.wrong_state = 1),
        ("misdelivered", |c| c.misdelivered = 1),
        ("error", |c| c.errors.push("consumer 0: EBADF".into())),
    ];
    for (what, f) in breaks {
        let mut r = records();
        f(cases(&mut r).last_mut().unwrap());
        assert_eq!(judged(&r, EXACTLY_ONCE), Differs, "{what}");
    }
}

#[test]
fn exactly_once_needs_events() {
    let mut r = records();
    cases(&mut r).clear();
    assert_eq!(judged(&r, EXACTLY_ONCE), NotMeasured);
    let mut r = records();
    r.torture = Outcome::Failed("no evq program".into());
    for claim in CLAIMS {
        assert_eq!(judged(&r, claim), NotMeasured, "{claim}");
    }
}

fn forced(r: &mut Records) -> &mut CaseReport {
    cases(r)
        .iter_mut()
        .find(|c| c.overflow)
        .expect("a forced-overflow case in the recording")
}

#[test]
fn an_overflow_that_did_not_happen_or_lost_something_differs() {
    let mut r = records();
    forced(&mut r).overflows_recovered = 0;
    assert_eq!(judged(&r, OVERFLOW), Differs, "no overflow happened");
    let mut r = records();
    forced(&mut r).lost = 3;
    assert_eq!(judged(&r, OVERFLOW), Differs, "lost under overflow");
    let mut r = records();
    cases(&mut r).retain(|c| !c.overflow);
    assert_eq!(judged(&r, OVERFLOW), NotMeasured);
}

#[test]
fn a_late_record_anywhere_differs() {
    let mut r = records();
    let c = cases(&mut r).first_mut().unwrap();
    c.late = 1;
    c.max_delay_ms = 2_400.0;
    assert_eq!(judged(&r, NO_STARVATION), Differs);
    // Lateness is its own claim: the exactly-once ledger does not count it.
    assert_eq!(judged(&r, EXACTLY_ONCE), Holds);
    cases(&mut r).clear();
    assert_eq!(judged(&r, NO_STARVATION), NotMeasured);
}

#[test]
fn every_connection_accepted_exactly_once() {
    let mut r = records();
    cases(&mut r)[0].connections_lost = 1;
    assert_eq!(judged(&r, SHARED_LISTENERS), Differs, "one never accepted");
    let mut r = records();
    cases(&mut r)[0].connections_duplicated = 1;
    assert_eq!(judged(&r, SHARED_LISTENERS), Differs, "one accepted twice");
    let mut r = records();
    for c in cases(&mut r) {
        c.connections = 0;
    }
    assert_eq!(judged(&r, SHARED_LISTENERS), NotMeasured);
}

#[test]
fn both_figures_have_a_line_per_backend() {
    let r = records();
    let judged = Reliability.judge(&r);
    assert_eq!(judged.figures.len(), 2);
    let backends = crate::plot::distinct(
        match &r.torture {
            Outcome::Measured(c) => c.iter().filter(|c| !c.overflow),
            Outcome::Failed(_) => unreachable!(),
        }
        .map(|c| c.backend.as_str()),
    )
    .len();
    for f in &judged.figures {
        assert_eq!(f.chart.series.len(), backends, "{}", f.stem);
    }
}
