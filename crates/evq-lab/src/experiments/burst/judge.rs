//! The burst's verdicts, notes and figure: pure functions of the records.

use super::{Plan, Point};
use crate::experiment::{Judged, Sweep};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `burst`.
const CAPTION_BURST: &str = "Reply rate of each backend in each repetition of the burst, higher is better: RT signals would fall below epoll if their queue overflowed.";

const QUEUE_FILLS: &str =
    "RT signals suffer in the burst test because the signal queue fills; epoll does not";
const ALL_SERVE: &str = "every mechanism serves the burst (the seed's servers completed the run; only their speed differed)";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 2] = [QUEUE_FILLS, ALL_SERVE];

/// Judges the runs.
pub(super) fn judge(r: &Sweep<Plan, Point>) -> Judged {
    let (num_conns, rate) = (r.plan.num_conns, r.plan.rate);
    let mut notes = vec!["Server: `evq serve`, one thread, 1 KiB fixed reply; client: `evq load` open loop with httperf's options, in the same process, on the same 2 cores. The seed ran httperf on a separate machine.".to_string()];
    if num_conns < 27_000 {
        notes.push(format!(
            "Scaled: {num_conns} connections instead of 27,000 (quick run)."
        ));
    }
    let names: Vec<&str> = r.plan.backends.iter().map(String::as_str).collect();
    let figure = Figure::new(
        "burst",
        CAPTION_BURST,
        Chart::linear(
            format!("Burst: reply rate per backend ({num_conns} conns × 2 calls at {rate}/s)"),
            "repetition",
            "replies/s",
            Series::named(
                &names,
                &r.points,
                |p: &Point| p.backend.as_str(),
                |p| Some((p.rep as f64 + 1.0, p.reply_rate_avg)),
            ),
        )
        .evq_where(|_| true),
    );
    Judged {
        checks: vec![queue_fills(r), all_serve(r)],
        notes,
        commands: vec![format!("evq load --server 127.0.0.1 --port P --num-conns {num_conns} --num-calls 2 --rate {rate} --hog --timeout 5")],
        figures: vec![figure],
    }
}

/// The median over a backend's runs.
fn med(r: &Sweep<Plan, Point>, backend: &str, f: fn(&Point) -> f64) -> Option<f64> {
    crate::stats::median(
        r.points
            .iter()
            .filter(|p| p.backend == backend)
            .map(f)
            .collect(),
    )
}

fn queue_fills(r: &Sweep<Plan, Point>) -> ClaimCheck {
    let rate_of = |b: &str| med(r, b, |p| p.reply_rate_avg);
    let err_of = |b: &str| med(r, b, |p| p.errors as f64);
    let (epoll, rt, rtb) = (rate_of("epoll"), rate_of("rtsig"), rate_of("rtsig-bulk"));
    ClaimCheck::judged(
        QUEUE_FILLS,
        format!(
            "{} connections × 2 calls at {}/s: replies/s epoll {:.0} ({} errors), rtsig {:.0} ({} errors), rtsig-bulk {:.0} ({} errors)",
            r.plan.num_conns,
            r.plan.rate,
            epoll.unwrap_or(f64::NAN),
            err_of("epoll").unwrap_or(f64::NAN),
            rt.unwrap_or(f64::NAN),
            err_of("rtsig").unwrap_or(f64::NAN),
            rtb.unwrap_or(f64::NAN),
            err_of("rtsig-bulk").unwrap_or(f64::NAN),
        ),
        epoll.zip(rt).map(|(e, r)| r < 0.9 * e),
        "holds if one-at-a-time RT signals deliver under 90% of epoll's reply rate. evq recovers from queue overflow (SIGIO → drain → poll), so a full queue costs time, not replies; today's per-user signal queue (RLIMIT_SIGPENDING, tens of thousands) is also far larger than 2001's",
    )
}

fn all_serve(r: &Sweep<Plan, Point>) -> ClaimCheck {
    let worst = r.points.iter().map(|p| p.errors).max();
    ClaimCheck::judged(
        ALL_SERVE,
        format!("most errors in any run: {}", worst.unwrap_or(0)),
        worst.map(|w| w == 0),
        "holds if no run had a client-side error (timeouts, resets, refused connections); not measured without a run",
    )
}

#[cfg(test)]
mod tests;
