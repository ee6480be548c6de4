//! Overload (issue 15; SEEDS 001 Graphs 3–4 extended): `evq serve` offered
//! 0.5× to 5× its capacity under each overload policy — none, seed 001's
//! EWMA-and-reset, `gate`, `codel` and `pulse` — on epoll (one thread and
//! two) and rtsig-bulk; `evq proxy` under the same policies; `evq serve
//! --io completion` and `evq proxy --io completion` under none and pulse; nginx as
//! configured and as tuned against overload. Goodput (replies within the
//! client timeout), p99 of the replies served, and whether unserved clients
//! learned it fast or timed out.

mod judge;
mod measure;
mod report;
mod series;

use crate::experiment::{Ctx, Experiment, Judged, RunSize};
use std::io;

pub use measure::{Plan, Point, Records};

/// The scenario.
pub struct Overload;

impl Experiment for Overload {
    type Plan = Plan;
    type Records = Records;

    const NAME: &'static str = "overload";
    const SEED: &'static str =
        "001 Lever, Tweedie (ALS 2000) Graphs 3–4, extended: overload control";

    fn claims(&self) -> Vec<String> {
        vec![
            judge::goodput_claim(1),
            judge::goodput_claim(2),
            judge::P99.into(),
            judge::FAST.into(),
            judge::BELOW.into(),
            judge::BEATS_SEED.into(),
            judge::PROXY_GOODPUT.into(),
            judge::COMPLETION_PROXY.into(),
            judge::COMPLETION_SERVE.into(),
            judge::BEATS_NGINX.into(),
            judge::FASTER_THAN_NGINX.into(),
        ]
    }

    fn plan(&self, size: RunSize) -> Plan {
        measure::plan(size)
    }

    fn measure(&self, plan: Plan, ctx: &Ctx) -> io::Result<Records> {
        measure::measure(plan, ctx)
    }

    fn judge(&self, r: &Records) -> Judged {
        let p = &r.points;
        Judged {
            checks: vec![
                judge::check_goodput(p, 1),
                judge::check_goodput(p, 2),
                judge::check_p99(p),
                judge::check_fast(p),
                judge::check_below(p),
                judge::check_beats_seed(p),
                judge::check_proxy_goodput(p),
                judge::check_completion_proxy(r),
                judge::check_completion_serve(r),
                judge::check_beats_nginx(p),
                judge::check_faster_than_nginx(p),
            ],
            notes: report::notes(r),
            commands: report::commands(r),
            figures: report::figures(r),
        }
    }
}

#[cfg(test)]
mod tests;
