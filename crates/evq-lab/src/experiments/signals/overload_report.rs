//! Overload's figures, method notes and commands: pure functions of the records.

use super::overload::{Point, Probe, Records, CLIENT_KEEPS_UP, PROBE_CONNECTIONS, REPLY_SIZE};
use super::overload_judge::{keeps_up, series};
use crate::plot::{Chart, Figure, Series};

/// What to look at in the figure `signals_overload_throughput`.
const CAPTION_SIGNALS_OVERLOAD_THROUGHPUT: &str = "Replies/s as the offered rate passes capacity: without shedding the line falls; with shedding it should level off near capacity (Graph 3).";
/// What to look at in the figure `signals_overload_errors`.
const CAPTION_SIGNALS_OVERLOAD_ERRORS: &str = "Failed connections as the offered rate passes capacity: with shedding they should be fewer, and mostly quick resets (Graph 4).";

fn label(p: &Point) -> String {
    format!("{} {}", p.backend, if p.shed { "shed" } else { "no shed" })
}

/// Replies/s and error % against the offered rate, one line per (backend,
/// shedding).
pub(super) fn figures(r: &Records, points: &[Point]) -> Vec<Figure> {
    let lines = |y: fn(&Point) -> f64| -> Vec<Series> {
        r.backends
            .iter()
            .flat_map(|b| [(b, false), (b, true)])
            .map(|(b, shed)| {
                let s = series(points, b, shed);
                Series {
                    evq: false,
                    name: s.first().map_or_else(|| b.to_string(), |p| label(p)),
                    points: s.iter().map(|p| (p.offered_per_s, y(p))).collect(),
                }
            })
            .collect()
    };
    let timeout = r.plan.timeout_s;
    vec![
        Figure::new(
            "signals-overload-throughput",
            CAPTION_SIGNALS_OVERLOAD_THROUGHPUT,
            Chart {
                title: format!(
                    "evq serve under overload: replies/s vs offered rate (1 thread, {REPLY_SIZE} B)"
                ),
                x_label: "offered rate (connections/s, one request each)".into(),
                y_label: "replies/s".into(),
                log_x: false,
                log_y: false,
                series: lines(|p| p.replies_per_s),
            }
            .evq_where(|_| true),
        ),
        Figure::new(
            "signals-overload-errors",
            CAPTION_SIGNALS_OVERLOAD_ERRORS,
            Chart {
                title: format!(
                    "evq serve under overload: errors vs offered rate (timeout {timeout} s)"
                ),
                x_label: "offered rate (connections/s, one request each)".into(),
                y_label: "failed connections (%)".into(),
                log_x: false,
                log_y: false,
                series: lines(|p| p.error_pct),
            }
            .evq_where(|_| true),
        ),
    ]
}

/// The method notes, in report order.
pub(super) fn notes(r: &Records, points: &[Point]) -> Vec<String> {
    let mut notes = vec![method(r), budget(r), client(r), limiter(r, points)];
    if !r.capped.is_empty() {
        notes.push(format!(
            "Offered rates capped at {:.0}/s by the descriptor limit ({:.0}, client and server in one process, {} s timeout): {}.",
            r.rate_cap,
            r.fd_limit,
            r.plan.timeout_s,
            r.capped
                .iter()
                .map(|(m, r)| format!("{m}× ({r:.0}/s)"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    notes.push("The seed ran httperf and phhttpd on separate machines over a LAN, 35,000 connections per point; here client and server share loopback and the machine's cores, with shorter runs, so the numbers are this machine's and the shapes are what compare.".into());
    notes
}

/// How the sweep was run.
fn method(r: &Records) -> String {
    let (sizes, probes, capacity) = (&r.plan, &r.probes, r.capacity);
    let (window, timeout) = (r.plan.window_s, r.plan.timeout_s);
    let (gain, threshold, max_events) = r.shed;
    format!(
        "Overload: `evq serve` in this process, one thread, {REPLY_SIZE} B fixed reply, on {} with and without `--shed` (gain {}, threshold {}, at most {} events per call); a fresh server per run. Capacity first: a {:.1} s closed loop of {PROBE_CONNECTIONS} connections, one request each, per backend ({}); the offered rates are {:?} × the largest, {capacity:.0}/s. Each run is an open loop (httperf-like, fixed spacing) of one request per connection for {window} s with a {timeout} s client timeout, `--hog` ports; {}. Replies/s are the client's rate samples over the last three quarters of the schedule (a sample after the last reply counts as 0); error % is failed connections over connections started, by evq-load's kinds (client-timo, connreset, connrefused, ...).",
        r.backends.join(", "),
        gain,
        threshold,
        max_events,
        sizes.probe_s,
        probes
            .iter()
            .map(|p| format!("{} {:.0}/s", p.backend, p.replies_per_s))
            .collect::<Vec<_>>()
            .join(", "),
        sizes.multiples,
        if sizes.reps > 1 {
            format!("each point is the median run by replies/s of {} (all runs are in the raw data), runs rotated between series", sizes.reps)
        } else {
            "one run per point".to_string()
        },
    )
}

/// The server's CPU budget, and why it is there.
fn budget(r: &Records) -> String {
    let (probes, runs) = (&r.probes, &r.runs);
    let (budget_runtime, budget_period) = r.budget_us;
    let budget = format!(
        "{budget_runtime} µs of CPU in every {budget_period} µs ({:.0}% of one core)",
        100.0 * budget_runtime as f64 / budget_period as f64
    );
    let mut refusals = r.refusals.clone();
    refusals.sort();
    refusals.dedup();
    let cpu_of = |f: &dyn Fn(&Probe) -> Option<f64>| {
        probes
            .iter()
            .map(|p| {
                f(p).map_or(format!("{} -", p.backend), |v| {
                    format!("{} {v:.0}", p.backend)
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let client_dearer = probes.iter().all(|p| {
        p.client_cpu_us_per_conn
            .zip(p.server_cpu_us_per_conn)
            .is_some_and(|(c, s)| c > s)
    });
    let why = format!(
        "CPU per connection in the capacity probes, µs: client (the rest of this process) {}; server thread {}. {}",
        cpu_of(&|p| p.client_cpu_us_per_conn),
        cpu_of(&|p| p.server_cpu_us_per_conn),
        if client_dearer {
            "The client costs more than the server, so with a core each one client thread could not offer the server more than it can take."
        } else {
            "The client did not cost more than the server everywhere here; the budget still makes the overload reachable with room to spare for the client."
        }
    );
    let max_share = runs
        .iter()
        .filter_map(|p| p.server_cpu_share)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    if refusals.is_empty() {
        format!(
            "Server CPU budget: the server's thread ran under SCHED_DEADLINE with {budget} in every run; its measured CPU over a load run was at most {} of the run's wall time. {why} The budget plays the seed's slower server machine and, as a deadline thread is served before ordinary ones, also keeps the capacity steady while other work shares the cores. It slows the server's event pickup and its request handling alike.",
            max_share.map_or("-".to_string(), |m| format!("{:.1}%", 100.0 * m))
        )
    } else {
        format!(
            "Server CPU budget ({budget}, SCHED_DEADLINE) not applied in every run: {}. Those runs had the server unhindered. {why} The client-lag rule below decides which points count.",
            refusals.join("; ")
        )
    }
}

/// Whether the client kept its schedule.
fn client(r: &Records) -> String {
    let lagging: Vec<String> = r
        .runs
        .iter()
        .filter(|p| !keeps_up(p))
        .map(|p| {
            format!(
                "{} at {:.0}/s (run {}) started {:.0}/s",
                label(p),
                p.offered_per_s,
                p.rep + 1,
                p.client_started_per_s
            )
        })
        .collect();
    let worst_lag = r
        .runs
        .iter()
        .map(|p| p.start_lag_p99_ms)
        .fold(0.0, f64::max);
    if lagging.is_empty() {
        format!(
            "Client: one `evq load` thread in this process, sharing the cores with the server. It kept its schedule in every run: connections started ≥ {:.0}% of the offered rate everywhere (started rate = connections / (schedule + largest start lag)); worst p99 start lag {worst_lag:.1} ms. By this rule the client was not the bottleneck.",
            100.0 * CLIENT_KEEPS_UP
        )
    } else {
        format!(
            "Client: one `evq load` thread in this process, sharing the cores with the server. It fell behind its schedule (started < {:.0}% of the offered rate) in: {}; such runs measure the client as much as the server, and a point whose median run is one of them is not judged. Worst p99 start lag {worst_lag:.1} ms.",
            100.0 * CLIENT_KEEPS_UP,
            lagging.join("; ")
        )
    }
}

/// What the limiter saw at the highest offered rate.
fn limiter(r: &Records, points: &[Point]) -> String {
    let threshold = r.shed.1;
    let limiter_input: Vec<String> = r
        .backends
        .iter()
        .filter_map(|b| series(points, b, true).last().copied())
        .map(|p| {
            format!(
                "{} at {:.0}/s: {:.1} events per call, {} resets, {} responses sent, {} replies received",
                p.backend,
                p.offered_per_s,
                p.server_events_per_call,
                p.server_shed_resets,
                p.server_responses,
                p.replies
            )
        })
        .collect();
    format!(
        "Limiter input at the highest offered rate, with shedding (threshold {}, mean over the whole run): {}. `evq serve` accepts up to 64 connections per listener event and reads and answers each at once, so one event can stand for many connections; responses sent beyond replies received went to clients that had already given up.",
        threshold,
        limiter_input.join("; ")
    )
}

/// The commands that reproduce the sweep.
pub(super) fn commands(r: &Records) -> Vec<String> {
    let (runtime_us, period_us) = r.budget_us;
    vec![
        "evq serve --backend B --threads 1 --reply-size 1024 [--shed] --listen 127.0.0.1:P".to_string(),
        format!(
            "chrt -d --sched-runtime {} --sched-deadline {p} --sched-period {p} -p 0 TID   (TID: the server's evq-serve-0 thread)",
            runtime_us * 1000,
            p = period_us * 1000
        ),
        format!(
            "evq load --server 127.0.0.1 --port P --connections {PROBE_CONNECTIONS} --num-calls 1 --duration {} --hog   (capacity probe)",
            r.plan.probe_s
        ),
        format!(
            "evq load --server 127.0.0.1 --port P --rate R --num-conns R×{} --num-calls 1 --timeout {} --hog   (R = {:?} × capacity)",
            r.plan.window_s, r.plan.timeout_s, r.plan.multiples
        ),
    ]
}
