//! Bulk pickup's verdicts, notes and figure: pure functions of the records.

use super::pickup::{Point, Records};
use crate::experiment::Judged;
use crate::plot::{distinct, Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `signals_pickup`.
const CAPTION_SIGNALS_PICKUP: &str = "Cost per event as the batch grows, lower is better: rtsig-bulk gets cheaper with bigger batches, rtsig (one signal per call) cannot; epoll is the reference (Graphs 1–2).";

pub(super) const GAINS_LITTLE: &str = "picking up 500 signals per call instead of one gains little: the server's bottleneck is processing requests, not picking up events (Graphs 1–2)";
pub(super) const BULK_HALF: &str = "bulk dequeue (signalfd read, the modern sigtimedwait4) costs at most half as much per event as one-at-a-time sigtimedwait (evq's target for issue 3)";
pub(super) const ORDER: &str = "/dev/epoll is 10–15% faster than RT signals with one-sig-per-fd, which are 10–15% faster than plain RT signals (SEEDS 002, whole-server throughput)";

/// Judges the sweep.
pub(super) fn judge(r: &Records) -> Judged {
    let (fds, rounds, reps) = (r.plan.fds, r.plan.rounds, r.plan.reps);
    let floor = r.floor();
    let ns = |b: &str, batch: usize| {
        r.points
            .iter()
            .find(|p| p.backend == b && p.batch == batch)
            .map(|p| p.ns_per_event)
    };
    let mut checks = Vec::new();
    let one = ns("rtsig", 1);
    let bulk = ns("rtsig-bulk", 500);
    checks.push(ClaimCheck::judged(
        GAINS_LITTLE,
        format!(
            "bursts of {fds} ready pipes, pickup + read only: rtsig one at a time, batch 1: {:.0} ns/event; rtsig-bulk, batch 500: {:.0} ns/event (gain {:.0}%)",
            one.unwrap_or(f64::NAN),
            bulk.unwrap_or(f64::NAN),
            one.zip(bulk).map_or(f64::NAN, |(o, b)| 100.0 * (1.0 - b / o))
        ),
        one.zip(bulk).map(|(o, b)| b >= 0.75 * o),
        "holds if bulk pickup saves less than 25% per event even with no request processing at all (the seed's server also parsed and answered requests, which only dilutes the gain); differs if the modern bulk read saves more",
    ));
    let one500 = ns("rtsig", 500);
    let pickup = |x: f64| (x - floor).max(1.0);
    let ratio_raw = bulk.zip(one500).map(|(b, o)| b / o);
    let ratio_pickup = bulk.zip(one500).map(|(b, o)| pickup(b) / pickup(o));
    checks.push(ClaimCheck::judged(
        BULK_HALF,
        format!(
            "batch 500: rtsig-bulk / rtsig = {:.2} including the pipe read; {:.2} for the dequeue alone (read-only floor of {floor:.0} ns/event, measured in the same run, subtracted from both)",
            ratio_raw.unwrap_or(f64::NAN),
            ratio_pickup.unwrap_or(f64::NAN)
        ),
        ratio_pickup.map(|r| r <= 0.5),
        "holds if the dequeue cost per event (each contender minus the same read-only floor, as pipebench subtracts its no-poll floor) of bulk is at most half that of one-at-a-time",
    ));
    let epoll = ns("epoll", 500);
    checks.push(ClaimCheck::judged(
        ORDER,
        format!(
            "batch 500, pickup only: epoll {:.0}, rtsig-bulk {:.0}, rtsig {:.0} ns/event",
            epoll.unwrap_or(f64::NAN),
            bulk.unwrap_or(f64::NAN),
            one500.unwrap_or(f64::NAN)
        ),
        epoll.zip(bulk).zip(one500).map(|((e, b), o)| e < b && b < o),
        "holds if the order epoll < rtsig-bulk < rtsig holds per event (the seed measured whole servers; here the event pickup alone)",
    ));
    let names = distinct(r.points.iter().map(|p| p.backend.as_str()));
    let figure = Figure::new(
        "signals-pickup",
        CAPTION_SIGNALS_PICKUP,
        Chart {
            title: format!("Pickup cost per event vs batch size (bursts of {fds} ready pipes)"),
            x_label: "events per get_next_event call (batch capacity)".into(),
            y_label: "ns per event (pickup + read)".into(),
            log_x: true,
            log_y: false,
            series: Series::named(
                &names,
                &r.points,
                |p: &Point| p.backend.as_str(),
                |p| Some((p.batch as f64, p.ns_per_event)),
            ),
        }
        .evq_where(|_| true),
    );
    Judged {
        checks,
        notes: vec![format!(
            "Each round makes all {fds} pipes readable, then times only the draining (get_next_event + one read per event); {rounds} rounds per run, median of {reps} runs, contenders rotated between runs. Event (edge) mode everywhere: signals are edge-like by nature."
        )],
        commands: Vec::new(),
        figures: vec![figure],
    }
}
