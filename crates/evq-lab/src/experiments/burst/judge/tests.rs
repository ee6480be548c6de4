//! Each burst rule on the recorded quick run, moved to hold, to differ and to
//! have nothing to judge.

use super::*;
use crate::experiment::testing::{recorded, verdict};
use crate::experiments::burst::Burst;
use crate::verdict::Verdict::{self, Differs, Holds, NotMeasured};
use crate::Experiment;

fn records() -> Sweep<Plan, Point> {
    recorded("burst")
}

fn judged(r: &Sweep<Plan, Point>, claim: &str) -> Verdict {
    verdict(&Burst.judge(r), claim)
}

fn rate(r: &mut Sweep<Plan, Point>, backend: &str, replies_per_s: f64) {
    for p in r.points.iter_mut().filter(|p| p.backend == backend) {
        p.reply_rate_avg = replies_per_s;
    }
}

#[test]
fn one_at_a_time_signals_fall_below_epoll() {
    let mut r = records();
    rate(&mut r, "epoll", 10_000.0);
    rate(&mut r, "rtsig", 8_999.0);
    assert_eq!(judged(&r, QUEUE_FILLS), Holds);
    rate(&mut r, "rtsig", 9_000.0);
    assert_eq!(judged(&r, QUEUE_FILLS), Differs, "90% is not under 90%");
    r.points.retain(|p| p.backend != "rtsig");
    assert_eq!(judged(&r, QUEUE_FILLS), NotMeasured);
}

#[test]
fn every_mechanism_serves_the_burst() {
    let mut r = records();
    for p in &mut r.points {
        p.errors = 0;
    }
    assert_eq!(judged(&r, ALL_SERVE), Holds);
    r.points[0].errors = 1;
    assert_eq!(judged(&r, ALL_SERVE), Differs);
    r.points.clear();
    assert_eq!(judged(&r, ALL_SERVE), NotMeasured);
}
