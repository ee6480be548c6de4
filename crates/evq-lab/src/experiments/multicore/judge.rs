//! The multicore claims, notes and figures: pure functions of the runs.

use super::{Records, ScalingRun};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;

/// Scaling of evq serve itself.
pub const LINEAR: &str = "evq serve scales to at least 0.85× linear at the most worker threads measured with the load client on CPUs of its own (issue 17)";
/// Scaling of the completion server.
pub const LINEAR_COMPLETION: &str = "evq serve --io completion scales to at least 0.85× linear at the most worker threads measured with the load client on CPUs of its own (issue 17)";
/// Against the peers.
pub const AHEAD: &str = "evq serve serves at least as many requests per second as nginx and h2o at every thread count (within 3%) (issue 17)";
/// The completion server's race.
pub const COMPLETION_FIRST: &str = "evq serve --io completion serves at least 1.15× the requests per second of evq serve on epoll and 1.3× h2o's at 1 and 2 worker threads, 1 KiB keep-alive, server and client pinned apart (issue 17)";
/// System calls per request.
pub const SYSCALLS: &str = "evq serve --io completion makes at most 0.3 system calls per request (1 KiB fixed reply, keep-alive) at 1 and 2 worker threads, against about 3 on epoll (issue 17)";
/// Share of linear the claim asks for.
pub const LINEAR_SHARE: f64 = 0.85;
/// How far behind a peer still counts as level.
pub const LEVEL: f64 = 0.97;
/// The completion server over evq serve on epoll, asked.
pub const OVER_EPOLL: f64 = 1.15;
/// The completion server over h2o, asked.
pub const OVER_H2O: f64 = 1.3;
/// System calls per request, at most.
pub const MAX_SYSCALLS: f64 = 0.3;
/// The servers of a scaling run, ours first.
pub const SERVERS: [&str; 4] = ["evq", "evq-completion", "nginx", "h2o"];

/// Mean requests per second of `server` at `threads` over the run's rounds.
pub fn mean(run: &ScalingRun, server: &str, threads: u32) -> Option<f64> {
    let v: Vec<f64> = run
        .points
        .iter()
        .filter(|p| p.server == server && p.threads == threads && p.requests_per_s > 0.0)
        .map(|p| p.requests_per_s)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The thread counts of a run, ascending.
pub fn thread_counts(run: &ScalingRun) -> Vec<u32> {
    let mut t: Vec<u32> = run.points.iter().map(|p| p.threads).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// Requests per second at `threads` over `threads` × the one-thread rate.
pub fn linear_share(run: &ScalingRun, server: &str, threads: u32) -> Option<f64> {
    let one = mean(run, server, 1)?;
    Some(mean(run, server, threads)? / (f64::from(threads) * one))
}

/// Whether evq's servers answered their fixed reply in this run (no file
/// read: a comparison of evq's two I/O models, not with the peers).
pub fn fixed_reply(run: &ScalingRun) -> bool {
    run.points
        .iter()
        .any(|p| p.server.starts_with("evq") && p.evq_reply == "fixed")
}

fn client(run: &ScalingRun) -> String {
    if run.client_cpus > 0 {
        format!("wrk on {} CPUs", run.client_cpus)
    } else {
        "wrk on the CPUs the servers did not have".into()
    }
}

/// `server`'s scaling at the judged run's most threads, as `claim`.
pub fn check_linear(r: &Records, server: &str, claim: &str) -> ClaimCheck {
    let Some(run) = r.runs.first() else {
        return ClaimCheck::judged(claim, "no run".into(), None, "");
    };
    let most = thread_counts(run).last().copied().unwrap_or(1);
    let share = (most > 1)
        .then(|| linear_share(run, server, most))
        .flatten();
    let others: Vec<String> = SERVERS
        .iter()
        .filter(|s| **s != server)
        .map(|s| {
            let share = linear_share(run, s, most).map_or("—".into(), |v| format!("{v:.2}×"));
            format!("{s} {share}")
        })
        .collect();
    let measured = match (share, mean(run, server, 1), mean(run, server, most)) {
        (Some(s), Some(one), Some(m)) => format!(
            "{}: 1 thread {:.0}k req/s, {most} threads {:.0}k req/s = {:.2}× linear ({})",
            client(run),
            one / 1e3,
            m / 1e3,
            s,
            others.join(", "),
        ),
        _ => format!("no {server} points at 1 and at more threads"),
    };
    ClaimCheck::judged(
        claim,
        measured,
        share.map(|s| s >= LINEAR_SHARE),
        "× linear = mean req/s over the rounds at N threads ÷ (N × the mean at 1), in the run whose load client had the most CPUs of its own; holds if ≥ 0.85 at its most threads; not measured without points at 1 and at more",
    )
}

/// The completion server against evq serve on epoll and h2o, at 1 and 2
/// threads of every run that has them.
pub fn check_completion_first(r: &Records) -> ClaimCheck {
    let mut measured = Vec::new();
    let mut holds = None;
    for run in &r.runs {
        if fixed_reply(run) {
            // Context, not judged: h2o serves the file.
            for t in [1, 2] {
                if let (Some(c), Some(e)) = (mean(run, "evq-completion", t), mean(run, "evq", t)) {
                    measured.push(format!(
                        "{} ({}), {t} thread{}, evq's fixed reply (not judged): completion {:.2}× epoll",
                        run.file,
                        client(run),
                        if t == 1 { "" } else { "s" },
                        c / e
                    ));
                }
            }
            continue;
        }
        for t in [1, 2] {
            let (Some(c), Some(e), Some(h)) = (
                mean(run, "evq-completion", t),
                mean(run, "evq", t),
                mean(run, "h2o", t),
            ) else {
                continue;
            };
            measured.push(format!(
                "{} ({}), {t} thread{}: completion {:.0}k = {:.2}× epoll ({:.0}k), {:.2}× h2o ({:.0}k)",
                run.file,
                client(run),
                if t == 1 { "" } else { "s" },
                c / 1e3,
                c / e,
                e / 1e3,
                c / h,
                h / 1e3,
            ));
            holds = Some(holds.unwrap_or(true) && c >= OVER_EPOLL * e && c >= OVER_H2O * h);
        }
    }
    if measured.is_empty() {
        measured.push(
            "no run with the completion server, evq on epoll and h2o at 1 or 2 threads".into(),
        );
    }
    ClaimCheck::judged(
        COMPLETION_FIRST,
        measured.join("; "),
        holds,
        "mean req/s over a run's rounds; holds if the completion server is ≥ 1.15× evq on epoll and ≥ 1.3× h2o at 1 and 2 threads in every run that measured them",
    )
}

/// System calls per request of the completion server (fixed reply) at 1 and 2
/// threads; the file replies and epoll's beside them.
pub fn check_syscalls(r: &Records) -> ClaimCheck {
    let per = |reply: &str, io: &str, t: u32| {
        r.syscalls
            .iter()
            .find(|p| p.reply == reply && p.io == io && p.threads == t && p.requests > 0)
            .map(|p| p.system_calls as f64 / p.requests as f64)
    };
    let mut measured = Vec::new();
    let mut holds = None;
    for t in [1, 2] {
        let Some(c) = per("fixed", "completion", t) else {
            continue;
        };
        let show = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.3}"));
        measured.push(format!(
            "{t} thread{}: completion {c:.3} (epoll {}); a 1 KiB file: completion {} (a pread each), epoll {}",
            if t == 1 { "" } else { "s" },
            show(per("fixed", "readiness", t)),
            show(per("file", "completion", t)),
            show(per("file", "readiness", t)),
        ));
        holds = Some(holds.unwrap_or(true) && c <= MAX_SYSCALLS);
    }
    if measured.is_empty() {
        measured.push("no system-call counts recorded".into());
    }
    ClaimCheck::judged(
        SYSCALLS,
        measured.join("; "),
        holds,
        "system calls `strace -c -f` counted in the server ÷ requests wrk counted, one load run each (strace slows the server: the counts, not the rates); holds if ≤ 0.3 at every thread count measured",
    )
}

/// evq against nginx and h2o at every thread count of every run.
pub fn check_ahead(r: &Records) -> ClaimCheck {
    let mut measured = Vec::new();
    let mut holds = (!r.runs.is_empty()).then_some(true);
    for run in r.runs.iter().filter(|run| !fixed_reply(run)) {
        for t in thread_counts(run) {
            let Some(ours) = mean(run, "evq", t) else {
                holds = None;
                continue;
            };
            let mut line = format!(
                "{}, {t} thread{}: evq {:.0}k",
                client(run),
                if t == 1 { "" } else { "s" },
                ours / 1e3
            );
            // A peer the run did not start at all is not compared there.
            for peer in ["nginx", "h2o"]
                .into_iter()
                .filter(|peer| run.points.iter().any(|p| p.server == *peer))
            {
                match mean(run, peer, t) {
                    Some(theirs) => {
                        line.push_str(&format!(
                            ", {peer} {:.0}k ({:.2}×)",
                            theirs / 1e3,
                            ours / theirs
                        ));
                        holds = holds.map(|h| h && ours >= LEVEL * theirs);
                    }
                    None => holds = None,
                }
            }
            measured.push(line);
        }
    }
    ClaimCheck::judged(
        AHEAD,
        measured.join("; "),
        holds,
        "mean req/s over the rounds; holds if evq's is at least 0.97 × each peer's at every thread count of every run; not measured if a point is missing",
    )
}

/// Method notes.
pub fn notes(r: &Records) -> Vec<String> {
    let mut notes = vec![format!(
        "Measured on {}, not on this machine (two CPUs cannot hold a multi-threaded server and its client apart). Each server with N workers pinned to CPUs 0..N−1, wrk (`-t` = its CPUs, 64 connections per server worker) pinned to the top CPUs; a 1 KiB static file, keep-alive; evq serve `--accept reuseport --overload none` (epoll) and `--io completion --overload none` (one `SO_REUSEPORT` listener and ring per thread; a `pread` per request for the file, as on epoll), nginx `worker_processes N` with `reuseport`, h2o `num-threads N`; rounds interleave the servers.",
        r.machine
    )];
    for run in &r.runs {
        let rounds = run.points.iter().map(|p| p.round).max().unwrap_or(0);
        let errors: Vec<String> = run
            .points
            .iter()
            .filter_map(|p| {
                p.error
                    .as_ref()
                    .map(|e| format!("{} × {}: {e}", p.server, p.threads))
            })
            .collect();
        notes.push(format!(
            "{} ({}, {rounds} rounds, threads {:?}{}){}.",
            run.file,
            client(run),
            thread_counts(run),
            if fixed_reply(run) {
                "; evq's servers answered their fixed 1 KiB reply, no file read"
            } else {
                ""
            },
            if errors.is_empty() {
                String::new()
            } else {
                format!("; failed points: {}", errors.join(", "))
            }
        ));
    }
    notes.push("With as many server threads as wrk has CPUs, wrk may be the limit: read the most threads of a run with that in mind. The one-thread rates of a server swing ±10–15% between rounds on that machine; the shares of linear divide by them.".into());
    notes
}

/// Requests per second and share of linear against threads, a line per
/// (run, server).
pub fn figures(r: &Records) -> Vec<Figure> {
    let lines = |y: &dyn Fn(&ScalingRun, &str, u32) -> Option<f64>| -> Vec<Series> {
        let mut out = Vec::new();
        for run in &r.runs {
            for server in SERVERS {
                let points: Vec<(f64, f64)> = thread_counts(run)
                    .into_iter()
                    .filter_map(|t| y(run, server, t).map(|v| (f64::from(t), v)))
                    .collect();
                // Two runs with the same client are told apart by file.
                let label = if r
                    .runs
                    .iter()
                    .filter(|o| o.client_cpus == run.client_cpus)
                    .count()
                    > 1
                {
                    format!("{}, {}", client(run), run.file)
                } else {
                    client(run)
                };
                if !points.is_empty() {
                    out.push(Series {
                        name: format!("{server} ({label})"),
                        points,
                        evq: server.starts_with("evq"),
                    });
                }
            }
        }
        out
    };
    vec![
        Figure::new(
            "multicore-throughput",
            "Requests per second against worker threads on a 16-CPU machine, 1 KiB keep-alive: evq serve (epoll and completion), nginx and h2o.",
            Chart::linear(
                "multi-core scaling (a lent 16-CPU machine)".into(),
                "worker threads",
                "requests/s",
                lines(&|run, s, t| mean(run, s, t)),
            ),
        ),
        Figure::new(
            "multicore-linear",
            "Share of linear scaling: requests per second at N threads over N × the one-thread rate (1.0 is linear).",
            Chart::linear(
                "share of linear scaling".into(),
                "worker threads",
                "× linear",
                lines(&|run, s, t| linear_share(run, s, t)),
            ),
        ),
    ]
}
