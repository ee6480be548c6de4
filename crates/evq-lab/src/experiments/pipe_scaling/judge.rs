//! Pipe-scaling's verdicts, notes and figures: pure functions of the records.

use super::{PipeSweep, Records, DEVPOLL, PIPE_EPOLL};
use crate::experiment::Judged;
use crate::pipebench::{find, PipebenchRecord, COMPLETION};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// What to look at in the figure `pipe_scaling`.
const CAPTION_PIPE_SCALING: &str = "Lower is cheaper. poll's and select's cost per event climbs with the descriptors watched; epoll, uring and the completion loop (io_uring multishot reads, results in the ring) stay nearly flat, as the raw C epoll loop does. evq's backends are solid, the raw C loops (raw-none, raw-poll, raw-epoll) dashed.";
/// What to look at in the figure `pipe_scaling_pipes`.
const CAPTION_PIPE_SCALING_PIPES: &str = "On pipes: the RT-signal backends and the /dev/poll personality should each stay nearly flat as descriptors grow (a cost per event, not per descriptor). evq is solid, the raw C epoll loop dashed.";
/// What to look at in the figure `pipe_scaling_cpu`.
const CAPTION_PIPE_SCALING_CPU: &str = "Where the time goes (log scale): the raw C poll loop's user time (scanning results) and system time both grow with descriptors; evq's epoll (solid) stays flat in both.";

/// The seed's ratio poll/devpoll at 10,000 descriptors (147,926 ms / 2,573 ms).
const SEED_RATIO_AT_10K: f64 = 147_926.0 / 2_573.0;

const POLL_GROWS: &str = "poll's cost per event grows with the descriptors polled (1,391 → 34,254 ms, 1 → 4,000 fds); /dev/poll stays nearly flat (1,523 → 2,179 ms)";
const GAP: &str = "at 10,000 fds poll is over 50× slower than /dev/poll (147,926 vs 2,573 ms), the gap growing with n";
const USER_SCAN: &str = "poll's user time alone (scanning for results) exceeds /dev/poll's whole run (10,000 fds: 17.7 s user vs 2.6 s total)";
const IMPROVED_SELECT: &str = "improved select (shadow fd_sets, word-wise scan) costs less than classic select (SEEDS 000 §2)";
const EVQ_FLOOR: &str = "evq's epoll backend costs at most 1.05× the same loop written with raw epoll syscalls in C (evq's target)";
const EPOLL_FLAT: &str =
    "epoll's cost of waiting does not grow with idle descriptors (/dev/epoll's claim, SEEDS 002)";
const DEVPOLL_FLAT: &str = "/dev/poll's cost per event stays nearly flat as descriptors grow (1,523 → 2,179 ms, 1 → 4,000 fds: ×1.43)";
const RTSIG_FLAT: &str = "RT-signal delivery, like /dev/poll, costs per event, not per descriptor (seed 001's premise, on seed 004's test)";
const RESULT_RING: &str = "a shared result ring beats a system call per event: results dequeued from shared memory cost less per event than epoll's wait and read (SEEDS 002's /dev/epoll, in io_uring's completion form)";

/// Every claim, in report order.
pub(super) const CLAIMS: [&str; 9] = [
    POLL_GROWS,
    GAP,
    USER_SCAN,
    IMPROVED_SELECT,
    EVQ_FLOOR,
    EPOLL_FLAT,
    DEVPOLL_FLAT,
    RTSIG_FLAT,
    RESULT_RING,
];

fn ns(records: &[PipebenchRecord], backend: &str, fds: usize) -> Option<f64> {
    find(records, backend, fds).map(|r| r.ns_per_event)
}

/// The smallest and largest sizes of the main sweep.
fn ends(r: &Records) -> (usize, usize) {
    let fds = &r.plan.fds;
    (
        fds.first().copied().unwrap_or(1),
        fds.last().copied().unwrap_or(1),
    )
}

/// Judges the two sweeps.
pub(super) fn judge(r: &Records) -> Judged {
    let mut checks = vec![
        poll_grows(r),
        gap(r),
        user_scan(r),
        improved_select(r),
        evq_floor(r),
    ];
    checks.extend(epoll_flat(r));
    checks.extend(devpoll_flat(&r.pipes));
    checks.extend(rtsig_flat(&r.pipes));
    checks.push(result_ring(r));
    Judged {
        checks,
        notes: notes(r),
        commands: vec![format!(
            "evq pipebench --fds {} --iters {} --reps {} --json",
            join(&r.plan.fds),
            r.plan.iters,
            r.plan.reps
        )],
        figures: figures(r),
    }
}

fn join(v: &[usize]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Claim 1: poll grows with n, /dev/poll (epoll) stays flat.
fn poll_grows(r: &Records) -> ClaimCheck {
    let (lo, hi) = ends(r);
    let growth = |b: &str| Some(ns(&r.main, b, hi)? / ns(&r.main, b, lo)?);
    let (poll_g, epoll_g) = (growth("raw-poll"), growth("epoll"));
    ClaimCheck::judged(
        POLL_GROWS,
        format!(
            "{lo} → {hi} fds: raw poll ×{:.1}, evq epoll ×{:.2}",
            poll_g.unwrap_or(f64::NAN),
            epoll_g.unwrap_or(f64::NAN)
        ),
        poll_g.zip(epoll_g).map(|(p, e)| p >= 5.0 && e <= 2.0),
        "holds if poll's cost grows at least 5× over the sweep while epoll's grows at most 2×",
    )
}

/// Claim 2: the ratio at the largest size, scaled to the seed's 57× at 10,000.
fn gap(r: &Records) -> ClaimCheck {
    let (_, hi) = ends(r);
    let ratio = |p: &str, e: &str| {
        ns(&r.main, p, hi)
            .zip(ns(&r.main, e, hi))
            .map(|(p, e)| p / e)
    };
    let (ratio_raw, ratio_evq) = (ratio("raw-poll", "raw-epoll"), ratio("poll", "epoll"));
    let expected = SEED_RATIO_AT_10K * hi as f64 / 10_000.0;
    ClaimCheck::judged(
        GAP,
        format!(
            "at {hi} fds: raw poll / raw epoll = {:.1}×, evq poll / evq epoll = {:.1}× (the seed's gap scaled linearly to {hi} fds: {expected:.1}×)",
            ratio_raw.unwrap_or(f64::NAN),
            ratio_evq.unwrap_or(f64::NAN)
        ),
        ratio_raw.map(|r| r >= 0.5 * expected),
        "holds if the raw poll/epoll ratio at the largest size reaches at least half the seed's ratio scaled linearly to that size",
    )
}

/// Claim 3 (Figure 2): poll's user time alone exceeds devpoll's whole run.
fn user_scan(r: &Records) -> ClaimCheck {
    let (_, hi) = ends(r);
    let poll_user = find(&r.main, "raw-poll", hi).and_then(|r| r.scan_ns_per_event);
    let epoll_total = ns(&r.main, "raw-epoll", hi);
    ClaimCheck::judged(
        USER_SCAN,
        format!(
            "at {hi} fds: raw poll's user-space result scan {:.0} ns/event vs raw epoll's whole loop {:.0} ns/event",
            poll_user.unwrap_or(f64::NAN),
            epoll_total.unwrap_or(f64::NAN)
        ),
        poll_user.zip(epoll_total).map(|(u, t)| u > t),
        "holds if the time poll's caller spends scanning the result array (timed with clock_gettime around the scan; getrusage's tick sampling cannot resolve it in short runs) exceeds epoll's whole cost per event at the largest size",
    )
}

/// SEEDS 000's user-space select improvements.
fn improved_select(r: &Records) -> ClaimCheck {
    let (_, hi) = ends(r);
    let improved = ns(&r.main, "select-improved", hi)
        .zip(ns(&r.main, "select", hi))
        .map(|(i, c)| i / c);
    ClaimCheck::judged(
        IMPROVED_SELECT,
        format!("at {hi} fds: select-improved / select = {:.3}", improved.unwrap_or(f64::NAN)),
        improved.map(|r| r < 1.0),
        "holds if the improved variant is cheaper per event at the largest size; the kernel half of the improvement cannot be done from user space, so the gain is bounded by the user-space share",
    )
}

/// evq's own target: within 5% of the raw C epoll loop.
fn evq_floor(r: &Records) -> ClaimCheck {
    let ratios: Vec<(usize, f64)> = r
        .plan
        .fds
        .iter()
        .filter_map(|&n| Some((n, ns(&r.main, "epoll", n)? / ns(&r.main, "raw-epoll", n)?)))
        .collect();
    let worst = ratios.iter().map(|r| r.1).fold(0.0, f64::max);
    ClaimCheck::judged(
        EVQ_FLOOR,
        ratios
            .iter()
            .map(|(n, r)| format!("{n} fds: {r:.3}"))
            .collect::<Vec<_>>()
            .join(", "),
        (!ratios.is_empty()).then_some(worst <= 1.05),
        "holds if every size's ratio of medians is at most 1.05; run-to-run noise on this shared machine is several percent (see min–max in the raw data)",
    )
}

/// Flatness after subtracting the floor (issue 2's figure), when the sweep has
/// both 100 descriptors and more.
fn epoll_flat(r: &Records) -> Option<ClaimCheck> {
    let (_, hi) = ends(r);
    let at = |b: &str, n: usize| ns(&r.main, b, n);
    let (e100, e_hi) = (at("epoll", 100)?, at("epoll", hi)?);
    let (n100, n_hi) = (at("raw-none", 100)?, at("raw-none", hi)?);
    if hi <= 100 {
        return None;
    }
    let g = (e_hi - n_hi) / (e100 - n100);
    Some(ClaimCheck::judged(
        EPOLL_FLAT,
        format!("wait cost at {hi} fds / at 100 fds, no-poll floor subtracted: {g:.2}"),
        Some(g <= 1.5),
        "holds if the ratio is at most 1.5",
    ))
}

/// The /dev/poll personality (evq-compat) against the raw epoll loop on pipes.
fn devpoll_flat(pipes: &PipeSweep) -> Option<ClaimCheck> {
    let (first, last) = (*pipes.sizes.first()?, *pipes.sizes.last()?);
    let dp_ratios: Vec<String> = pipes
        .sizes
        .iter()
        .filter_map(|&n| {
            let dp = ns(&pipes.records, DEVPOLL, n)?;
            let raw = ns(&pipes.records, "raw-epoll", n)?;
            Some(format!("{n} fds {:.2}", dp / raw))
        })
        .collect();
    let g = ns(&pipes.records, DEVPOLL, last)
        .zip(ns(&pipes.records, DEVPOLL, first))
        .map(|(b, a)| b / a)
        .filter(|g| g.is_finite());
    Some(ClaimCheck::judged(
        DEVPOLL_FLAT,
        format!(
            "evq's /dev/poll personality (write of pollfds, DP_POLL), pipes, {first} → {last} fds: ×{:.2}; its cost / the raw C epoll loop's: {}",
            g.unwrap_or(f64::NAN),
            dp_ratios.join(", ")
        ),
        g.map(|g| g <= 2.0),
        "holds if the personality's cost grows at most 2× over the sweep (the seed's /dev/poll grew 1.43×); the personality adds its own bookkeeping over evq's epoll backend, shown as the ratio to the raw loop",
    ))
}

/// RT signals on the pipe sweep, when it carried them.
fn rtsig_flat(pipes: &PipeSweep) -> Option<ClaimCheck> {
    if pipes.signal_names.is_empty() {
        return None;
    }
    let hi = *pipes.sizes.last().unwrap_or(&1);
    let lo = *pipes.sizes.first().unwrap_or(&1);
    let at = |b: &str, n| ns(&pipes.records, b, n);
    let growth = |b: &str| Some(at(b, hi)? / at(b, lo)?);
    let bulk_vs_one = at("rtsig-bulk", hi)
        .zip(at("rtsig", hi))
        .map(|(b, o)| b / o);
    Some(ClaimCheck::judged(
        RTSIG_FLAT,
        format!(
            "pipes, {lo} → {hi} fds: rtsig ×{:.2}, rtsig-bulk ×{:.2}, epoll ×{:.2}; at {hi} fds rtsig-bulk / rtsig = {:.2}",
            growth("rtsig").unwrap_or(f64::NAN),
            growth("rtsig-bulk").unwrap_or(f64::NAN),
            growth(PIPE_EPOLL).unwrap_or(f64::NAN),
            bulk_vs_one.unwrap_or(f64::NAN),
        ),
        growth("rtsig").zip(growth("rtsig-bulk")).map(|(a, b)| a <= 2.0 && b <= 2.0),
        "holds if both RT-signal backends grow at most 2× over the sweep; with one event per iteration the bulk dequeue has nothing to batch, so rtsig-bulk ≈ rtsig here (the signals experiment measures batching)",
    ))
}

/// SEEDS 002 on completions: the completion loop (multishot reads, results in
/// the ring) against evq's epoll, with the readiness-over-uring row beside.
fn result_ring(r: &Records) -> ClaimCheck {
    let at = |b: &str, n| ns(&r.main, b, n);
    let sizes: Vec<usize> = r
        .plan
        .fds
        .iter()
        .copied()
        .filter(|&n| at(COMPLETION, n).is_some())
        .collect();
    let text: Vec<String> = sizes
        .iter()
        .map(|&n| {
            let enters = find(&r.main, COMPLETION, n).and_then(|p| p.enters_per_event);
            format!(
                "{n} fds: completion {:.0} ns ({} io_uring_enter per event), epoll {:.0} ns, uring polls {:.0} ns; completion / epoll {:.2}",
                at(COMPLETION, n).unwrap_or(f64::NAN),
                enters.map_or("-".into(), |e| format!("{e:.2}")),
                at("epoll", n).unwrap_or(f64::NAN),
                at("uring", n).unwrap_or(f64::NAN),
                at(COMPLETION, n).zip(at("epoll", n)).map_or(f64::NAN, |(c, e)| c / e),
            )
        })
        .collect();
    let holds: Option<bool> = if sizes.is_empty() {
        None
    } else {
        sizes
            .iter()
            .map(|&n| Some(at(COMPLETION, n)? < at("epoll", n)?))
            .collect::<Option<Vec<bool>>>()
            .map(|v| v.iter().all(|&b| b))
    };
    ClaimCheck::judged(
        RESULT_RING,
        if sizes.is_empty() {
            "the completion loop did not run (this kernel lacks io_uring's multishot read, Linux 6.7)".into()
        } else {
            text.join("; ")
        },
        holds,
        "holds if the completion loop (each probe's multishot read armed once; an iteration writes the token and dequeues the completion that holds the byte the kernel read) costs less per event than evq's epoll loop (write, wait, read) at every size; the uring row (io_uring as a readiness source, a poll per descriptor) is shown beside it, not judged",
    )
}

fn notes(r: &Records) -> Vec<String> {
    let kind = r.main.first().map(|r| r.fd_kind);
    let reps = r.plan.reps;
    let pipes = &r.pipes;
    vec![
        format!(
            "Descriptors: {kind:?}. A pipe costs two descriptors; sweeps that reach 10,000 would need the whole 20,000-descriptor limit, so they use eventfds (one descriptor each, same readiness semantics)."
        ),
        format!(
            "Each point is the median of {reps} repetitions; contenders are rotated between repetitions. O(n) contenders (select, poll) run fewer iterations at large n (iters × 100 / n, at least 1,000)."
        ),
        format!(
            "Pipe sweep ({} fds; a pipe costs two descriptors, so it stops where the 20,000-descriptor limit does): {}the /dev/poll personality (evq-compat's devpollperf, SEEDS 004's loop: write one byte to a random pipe, DP_POLL, read) beside the raw C epoll loop, {reps} repetitions each, the personality run after each repetition of the others.",
            join(&pipes.sizes).replace(',', ", "),
            if pipes.signal_names.is_empty() {
                "the RT-signal backends are in the main sweep (it already uses pipes); ".to_string()
            } else {
                format!(
                    "{} (which need files that can raise SIGIO: eventfds cannot) and evq epoll as `{PIPE_EPOLL}`; ",
                    pipes.signal_names.join(", ")
                )
            }
        ),
    ]
}

fn figures(r: &Records) -> Vec<Figure> {
    fn backend(p: &PipebenchRecord) -> &str {
        &p.backend
    }
    let point =
        |f: fn(&PipebenchRecord) -> f64| move |p: &PipebenchRecord| Some((p.fds as f64, f(p)));
    let mut figures = vec![Figure::new(
        "pipe-scaling",
        CAPTION_PIPE_SCALING,
        Chart {
            title: "Cost per event vs descriptors (devpollperf, Figure 1)".into(),
            x_label: "descriptors".into(),
            y_label: "ns per event (median)".into(),
            log_x: true,
            log_y: true,
            series: Series::grouped(&r.main, backend, point(|p| p.ns_per_event)),
        }
        .evq_where(|n| !n.starts_with("raw-")),
    )];
    if !r.pipes.records.is_empty() {
        figures.push(Figure::new(
            "pipe-scaling-pipes",
            CAPTION_PIPE_SCALING_PIPES,
            Chart {
                title: "Pipes: RT signals and the /dev/poll personality (Figure 1)".into(),
                x_label: "descriptors (pipes)".into(),
                y_label: "ns per event (median)".into(),
                log_x: true,
                // Less than a decade apart: a linear axis keeps its labels.
                log_y: false,
                series: Series::grouped(&r.pipes.records, backend, point(|p| p.ns_per_event)),
            }
            .evq_where(|n| !n.starts_with("raw-")),
        ));
    }
    let split = ["raw-poll", "epoll"];
    let split_names: Vec<&str> = crate::plot::distinct(r.main.iter().map(backend))
        .into_iter()
        .filter(|n| split.contains(n))
        .collect();
    let mut series = Vec::new();
    for (what, f) in [
        (
            "user",
            (|p: &PipebenchRecord| p.user_ns_per_event.max(1.0)) as fn(&PipebenchRecord) -> f64,
        ),
        ("sys", |p: &PipebenchRecord| p.sys_ns_per_event.max(1.0)),
    ] {
        for mut s in Series::named(&split_names, &r.main, backend, point(f)) {
            s.name = format!("{} {what}", s.name);
            series.push(s);
        }
    }
    figures.push(Figure::new(
        "pipe-scaling-cpu",
        CAPTION_PIPE_SCALING_CPU,
        Chart {
            title: "User vs system time per event (Figure 2)".into(),
            x_label: "descriptors".into(),
            y_label: "CPU ns per event".into(),
            log_x: true,
            log_y: true,
            series,
        }
        .evq_where(|n| !n.starts_with("raw-")),
    ));
    figures
}

#[cfg(test)]
mod tests;
