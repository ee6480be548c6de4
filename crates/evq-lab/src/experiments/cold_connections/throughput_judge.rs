//! Figure 8's verdicts and figure: pure functions of the throughput records.

use super::throughput::{Point, Records};
use crate::experiment::Judged;
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `cold_connections`.
const CAPTION_COLD_CONNECTIONS: &str = "Replies/s of evq serve on each backend as idle connections are added, higher is better: the event API (epoll, uring, RT signals) should keep its rate while select and poll fall (Figure 8).";

pub(super) const FLAT: &str = "throughput with the explicit event API stays flat as cold connections grow (0–2,000), while select's falls (Figure 8)";
pub(super) const RT_FLAT: &str = "epoll and RT signals stay flat over dead connections; poll (and /dev/poll) degrade (SEEDS 002)";

/// The share of its throughput at no cold connections that a backend keeps at
/// the most, at the largest reply size.
fn kept(r: &Records, backend: &str) -> Option<f64> {
    let (lo, hi) = (r.plan.colds[0], *r.plan.colds.last().unwrap_or(&0));
    let reply = *r.plan.reply_sizes.last()?;
    let at = |c| {
        r.points
            .iter()
            .find(|p| p.backend == backend && p.cold == c && p.reply_size == reply)
            .map(|p| p.replies_per_s)
    };
    at(hi).zip(at(lo)).map(|(h, l)| h / l)
}

fn pct(r: &Records, backend: &str) -> String {
    kept(r, backend).map_or("-".to_string(), |k| format!("{:.0}%", 100.0 * k))
}

/// Judges the sweep.
pub(super) fn judge(r: &Records) -> Judged {
    let p = &r.plan;
    let (lo, hi) = (p.colds[0], *p.colds.last().unwrap_or(&0));
    let reply = p.reply_sizes.last().copied().unwrap_or(0);
    let flat = ClaimCheck::judged(
        FLAT,
        format!(
            "replies/s at {hi} cold connections as a share of at {lo}: epoll {}, select {}, select-improved {}, poll {}",
            pct(r, "epoll"), pct(r, "select"), pct(r, "select-improved"), pct(r, "poll")
        ),
        kept(r, "epoll").zip(kept(r, "select")).map(|(e, s)| e >= 0.9 && s < 0.8),
        "holds if epoll keeps at least 90% of its throughput and classic select keeps less than 80%",
    );
    let rt = kept(r, "rtsig-bulk").or(kept(r, "rtsig"));
    let rt_flat = ClaimCheck::judged(
        RT_FLAT,
        format!(
            "share kept at {hi} cold: uring {}, rtsig-bulk {}, rtsig {}, poll {}",
            pct(r, "uring"),
            pct(r, "rtsig-bulk"),
            pct(r, "rtsig"),
            pct(r, "poll")
        ),
        rt.zip(kept(r, "poll")).map(|(r, p)| r >= 0.9 && p < 0.8),
        "holds if the RT-signal backend keeps at least 90% and poll less than 80%",
    );
    let names: Vec<&str> = p.backends.iter().map(String::as_str).collect();
    let series = Series::named(
        &names,
        &r.points,
        |q: &Point| q.backend.as_str(),
        |q| (q.reply_size == reply).then_some((q.cold as f64, q.replies_per_s)),
    );
    let figure = Figure::new(
        "cold-connections",
        CAPTION_COLD_CONNECTIONS,
        Chart {
            title: format!(
                "evq serve throughput vs cold connections ({reply} B replies, 1 thread)"
            ),
            x_label: "cold (idle) connections".into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series,
        }
        .evq_where(|_| true),
    );
    Judged {
        checks: vec![flat, rt_flat],
        notes: vec![format!(
            "Hot load: closed loop, 32 connections, {:.1} s per point, from this process; cold: `evq dead` child from 127.0.0.2 holding the connections open (the server's open-connection count is checked before the load starts). Server: `evq serve`, one thread, fixed reply. Client and server share the 2 cores, so absolute rates are the machine's, and the shares are what to compare.",
            p.load_s
        )],
        commands: vec![
            format!("evq serve --backend B --threads 1 --reply-size {reply} --listen 127.0.0.1:P"),
            format!("evq dead --port P --connections N --source 127.0.0.2   (N in {:?})", p.colds),
            format!("evq load --port P --connections 32 --duration {}", p.load_s),
        ],
        figures: vec![figure],
    }
}
