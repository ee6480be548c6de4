//! The herd's verdicts, notes and figures: pure functions of the records.

use super::{Plan, Run};
use crate::experiment::{Judged, Sweep};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `herd_throughput`.
const CAPTION_HERD_THROUGHPUT: &str = "Requests/s of each server design by client count, higher is better: evq's wake-one with rotation (solid) should match or beat blocking in accept (serv02); the other designs are dashed.";
/// What to look at in the figure `herd_sleeps`.
const CAPTION_HERD_SLEEPS: &str = "Context switches per connection, lower is better: without wake-one (serv02l-k) every waiting worker is woken for each connection; evq's wake-one (solid) wakes one.";

const WAKE_ONE: &str = "a prefork server waiting with EV_WAKEONE matches or beats one blocking in accept (8 clients: 139,347 vs 136,439 ms; 32 and 128: as fast or faster)";
const HERD: &str = "without wake-one, every process waiting on the listening socket is woken for each connection (the thundering herd); EV_WAKEONE wakes one";
const ROTATION: &str = "EV_WAKEONE without rotation lets one process do all the work; moving the woken knote to the end of the list (mkII) spreads it";
const FORK_SLOWEST: &str = "fork per client (serv01) is by far the slowest design (768,679 vs 136,439 ms for serv02: 5.6×)";

/// evq's default wake-one: rotation every `DEFAULT_EVERY` in a fair-share group
/// (`WakeOneRotation::fair_among`), the design the claims about evq read.
const DEFAULT: &str = "serv02l-kone-fair";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 4] = [WAKE_ONE, HERD, ROTATION, FORK_SLOWEST];

/// The designs the plots show, in legend order.
const SHOWN: [&str; 10] = [
    "serv01",
    "serv02",
    "serv02l",
    "serv02l-k",
    "serv02l-kone",
    "serv02l-kone-r1",
    DEFAULT,
    "serv02l-kone-kq",
    "serv07",
    "reuseport",
];

fn get<'a>(r: &'a Sweep<Plan, Run>, design: &str, concurrency: usize) -> Option<&'a Run> {
    r.points
        .iter()
        .find(|x| x.design == design && x.concurrency == concurrency)
}

/// Concurrencies of 8 clients or more.
fn loaded(r: &Sweep<Plan, Run>) -> Vec<usize> {
    r.plan
        .concurrency
        .iter()
        .copied()
        .filter(|&c| c >= 8)
        .collect()
}

/// Judges the family.
pub(super) fn judge(r: &Sweep<Plan, Run>) -> Judged {
    let (workers, requests) = (r.plan.workers, r.plan.requests);
    let mut checks = vec![wake_one(r), herd(r), rotation(r)];
    checks.extend(fork_slowest(r));
    Judged {
        checks,
        notes: vec![
            format!("{workers} workers (processes for serv0x prefork designs, threads for prethread ones) on one loopback listening socket; a closed-loop client makes {requests} short requests per design and concurrency. serv02l-kone is EPOLLEXCLUSIVE alone; -r1/-r16 rotate (re-register) every 1/16 deliveries with evq's WakeOneRotation; -fair, evq's default, rotates every 1 in a fair-share group (a worker 8 connections ahead of the fewest steps out of the line until the others catch up, which keeps shares even while every worker is busy); -kq runs on the kqueue personality with EV_WAKEONE."),
            "The seed's table is total milliseconds for 100,000 requests per client on 2001 hardware; here requests/s, scaled down to fit a 2-core box shared with the client.".into(),
        ],
        commands: vec![format!(
            "evq herd --workers {workers} --concurrency {} --json",
            r.plan
                .concurrency
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )],
        figures: figures(r),
    }
}

/// 1. Wake-one (evq's default) vs blocking in accept.
fn wake_one(r: &Sweep<Plan, Run>) -> ClaimCheck {
    let ratios: Vec<(usize, f64)> = loaded(r)
        .iter()
        .filter_map(|&c| {
            Some((
                c,
                get(r, DEFAULT, c)?.requests_per_s / get(r, "serv02", c)?.requests_per_s,
            ))
        })
        .collect();
    ClaimCheck::judged(
        WAKE_ONE,
        if ratios.is_empty() {
            "no run with 8 or more clients".into()
        } else {
            ratios
                .iter()
                .map(|(c, x)| format!("{c} clients: evq's wake-one / blocking accept = {x:.2}"))
                .collect::<Vec<_>>()
                .join("; ")
        },
        (!ratios.is_empty()).then(|| ratios.iter().all(|(_, x)| *x >= 0.95)),
        "holds if requests/s of serv02l-kone-fair is at least 0.95× serv02's at every concurrency of 8 or more (single runs on a shared 2-core box vary by tens of percent; see raw data)",
    )
}

/// 2. The herd: sleeping workers woken per connection at light load.
fn herd(r: &Sweep<Plan, Run>) -> ClaimCheck {
    let c1 = r.plan.concurrency[0];
    let field = |d: &str, f: fn(&Run) -> f64| get(r, d, c1).map(f);
    let herd = field("serv02l-k", |x| x.sleeps_per_conn);
    let one = field(DEFAULT, |x| x.sleeps_per_conn);
    ClaimCheck::judged(
        HERD,
        format!(
            "{c1} client(s): voluntary sleeps per connection, epoll without exclusive {:.2} vs evq's wake-one {:.2} (returns from epoll_wait per connection: {:.2} vs {:.2})",
            herd.unwrap_or(f64::NAN),
            one.unwrap_or(f64::NAN),
            field("serv02l-k", |x| x.wakeups_per_conn).unwrap_or(f64::NAN),
            field(DEFAULT, |x| x.wakeups_per_conn).unwrap_or(f64::NAN),
        ),
        herd.zip(one).map(|(h, o)| h >= 1.5 * o),
        "holds if the non-exclusive design sleeps at least 1.5× as often per connection. Linux's epoll_wait re-checks and sleeps again inside the kernel when another worker took the connection, so returns to user space hide the herd; context switches show it",
    )
}

/// 3. mkII: rotation spreads the work, among idle workers at the lightest load
///    and (evq's default) among busy ones at every concurrency.
fn rotation(r: &Sweep<Plan, Run>) -> ClaimCheck {
    let c1 = r.plan.concurrency[0];
    let alone = get(r, "serv02l-kone", c1).map(|x| x.jain);
    let rotated = get(r, DEFAULT, c1).map(|x| x.jain);
    let shares: Vec<(usize, Option<f64>)> = r
        .plan
        .concurrency
        .iter()
        .filter_map(|&c| Some((c, max_over_min(get(r, DEFAULT, c)?))))
        .collect();
    let worst = shares
        .iter()
        .map(|(_, s)| s.unwrap_or(f64::INFINITY))
        .fold(None, |w: Option<f64>, s| Some(w.map_or(s, |w| w.max(s))));
    ClaimCheck::judged(
        ROTATION,
        format!(
            "{c1} client(s), {} workers: Jain's fairness index, EPOLLEXCLUSIVE alone {:.2} vs evq's default {:.2} (1.0 = even, 0.25 = one worker of four); evq's default max/min share by clients: {}",
            r.plan.workers,
            alone.unwrap_or(f64::NAN),
            rotated.unwrap_or(f64::NAN),
            shares
                .iter()
                .map(|(c, s)| format!(
                    "{c}: {}",
                    s.map_or_else(|| "∞ (a worker served none)".into(), |s| format!("{s:.2}"))
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        alone
            .zip(rotated)
            .zip(worst)
            .map(|((a, x), w)| a < 0.6 && x >= 0.9 && w <= 1.2),
        "holds if Jain's index is below 0.6 without rotation and at least 0.9 with evq's default at the lightest load, and evq's default keeps the largest per-worker share within 1.2× the smallest at every concurrency (busy workers included: a worker that is busy is not asleep in epoll_wait, so rotation alone cannot order it)",
    )
}

/// Largest over smallest per-worker count of a run (`None` if a worker served
/// none), from the record's `share_max_over_min`.
fn max_over_min(x: &Run) -> Option<f64> {
    x.rest.get("share_max_over_min").and_then(|v| v.as_f64())
}

/// 4. Fork per client is the slowest (judged at the first loaded concurrency).
fn fork_slowest(r: &Sweep<Plan, Run>) -> Option<ClaimCheck> {
    let c = *loaded(r).first()?;
    let slowest = r
        .points
        .iter()
        .filter(|x| x.concurrency == c && x.requests_per_s > 0.0)
        .min_by(|a, b| a.requests_per_s.total_cmp(&b.requests_per_s));
    let serv01 = get(r, "serv01", c);
    let serv02 = get(r, "serv02", c);
    Some(ClaimCheck::judged(
        FORK_SLOWEST,
        format!(
            "{c} clients: slowest is {} ; serv02 / serv01 = {:.1}×",
            slowest.map_or("-", |x| x.design.as_str()),
            serv02
                .zip(serv01)
                .map_or(f64::NAN, |(a, b)| a.requests_per_s / b.requests_per_s)
        ),
        slowest
            .map(|x| x.design == "serv01")
            .filter(|_| serv01.is_some()),
        "holds if serv01 has the lowest requests/s of all designs at the first concurrency of 8 or more",
    ))
}

fn figures(r: &Sweep<Plan, Run>) -> Vec<Figure> {
    let shown: Vec<&str> = SHOWN
        .iter()
        .copied()
        .filter(|d| r.plan.designs.iter().any(|x| x == d))
        .collect();
    let series = |f: fn(&Run) -> f64| {
        Series::named(
            &shown,
            &r.points,
            |x: &Run| x.design.as_str(),
            |x| Some((x.concurrency as f64, f(x))),
        )
    };
    let log_x = r.plan.concurrency.len() > 1;
    vec![
        Figure::new(
            "herd-throughput",
            CAPTION_HERD_THROUGHPUT,
            Chart {
                title: format!("Requests/s by design ({} workers)", r.plan.workers),
                x_label: "concurrent clients".into(),
                y_label: "requests/s".into(),
                log_x,
                log_y: false,
                series: series(|x| x.requests_per_s),
            }
            .evq_where(|n| n.contains("kone-")),
        ),
        Figure::new(
            "herd-sleeps",
            CAPTION_HERD_SLEEPS,
            Chart {
                title: "Voluntary sleeps per connection (the herd)".into(),
                x_label: "concurrent clients".into(),
                y_label: "context switches per connection".into(),
                log_x,
                log_y: false,
                series: series(|x| x.sleeps_per_conn),
            }
            .evq_where(|n| n.contains("kone-")),
        ),
    ]
}

#[cfg(test)]
mod tests;
