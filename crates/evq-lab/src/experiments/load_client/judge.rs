//! The load client's verdicts: pure functions of the runs.

use super::parse::ToolSummary;
use super::{Client, Records, Run};
use crate::stats::{spread, Spread};
use crate::verdict::ClaimCheck;

/// Each claim with the rule that judges it.
pub(super) const CLAIMS: [(&str, &str); 5] = [
    (
        "with the same httperf command line, evq load gets at least 1.2× httperf's reply rate from the same nginx",
        "holds if the median reply rate of evq load's runs is at least 1.2× the median of httperf's, same command line, same server, runs alternated",
    ),
    (
        "evq load uses at most half of httperf's CPU per request",
        "holds if the median CPU per reply of evq load (wait4 rusage of the child, user + system, over its replies) is at most 0.5× httperf's, measured the same way",
    ),
    (
        "in closed loop, evq load gets at least wrk's requests/s at the same connections and threads",
        "holds if the median replies/s of evq load's closed loop is at least (≥ 1.0×) the median of wrk's requests/s, same connections, threads and duration, runs alternated",
    ),
    (
        "on io_uring completions, evq load uses at most 0.9× the CPU per reply of its readiness loop (issue 17)",
        "holds if the median CPU per reply of `evq load --io completion` (wait4 rusage, user + system, over its replies) is at most 0.9× that of `evq load` on readiness, same httperf command line, same server, runs alternated",
    ),
    (
        "on io_uring completions, evq load's closed loop gets at least wrk's requests/s at the same connections and threads (issue 17)",
        "holds if the median replies/s of `evq load --io completion`'s closed loop is at least (≥ 1.0×) the median of wrk's requests/s, same connections, threads and duration, runs alternated",
    ),
];

/// Per-client figures over its counted runs.
#[derive(Clone, Debug)]
pub(super) struct ClientSummary {
    pub(super) client: &'static str,
    pub(super) runs: usize,
    pub(super) failed_runs: usize,
    pub(super) replies_per_s: Option<Spread>,
    pub(super) cpu_us_per_reply: Option<Spread>,
    pub(super) errors: u64,
    pub(super) bad_status: u64,
    pub(super) server_core_share: Option<Spread>,
    pub(super) client_core_share: Option<Spread>,
    /// Why this client was not run, if it was not.
    pub(super) not_run: Option<String>,
}

pub(super) fn summarize(client: Client, runs: &[Run], not_run: Option<String>) -> ClientSummary {
    let mine: Vec<&Run> = runs.iter().filter(|r| r.client == client.name()).collect();
    let ok: Vec<&Run> = mine
        .iter()
        .copied()
        .filter(|r| r.failure.is_none())
        .collect();
    let sum = |f: fn(&ToolSummary) -> u64| {
        ok.iter()
            .filter_map(|r| r.summary.as_ref())
            .map(f)
            .sum::<u64>()
    };
    ClientSummary {
        client: client.name(),
        runs: ok.len(),
        failed_runs: mine.len() - ok.len(),
        replies_per_s: spread(
            ok.iter()
                .filter_map(|r| r.summary.as_ref().map(|s| s.replies_per_s))
                .collect(),
        ),
        cpu_us_per_reply: spread(ok.iter().filter_map(|r| r.cpu_us_per_reply).collect()),
        errors: sum(|s| s.errors),
        bad_status: sum(|s| s.bad_status),
        server_core_share: spread(ok.iter().map(|r| r.server_core_share).collect()),
        client_core_share: spread(
            ok.iter()
                .filter(|r| r.wall_s > 0.0)
                .map(|r| (r.cpu_user_s + r.cpu_sys_s) / r.wall_s)
                .collect(),
        ),
        not_run,
    }
}

/// Ratios `a / b` of the runs of the same repeat, where both counted.
fn pair_ratios(runs: &[Run], a: Client, b: Client, f: fn(&Run) -> Option<f64>) -> Option<Spread> {
    let of = |c: Client, rep: usize| {
        runs.iter()
            .find(|r| r.client == c.name() && r.repeat == rep && r.failure.is_none())
            .and_then(f)
    };
    let reps = runs.iter().map(|r| r.repeat).max().unwrap_or(0);
    spread(
        (1..=reps)
            .filter_map(|rep| Some(of(a, rep)? / of(b, rep)?))
            .collect(),
    )
}

pub(super) fn fmt_spread(s: &Option<Spread>, unit: &str, digits: usize) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{:.*}{unit} ({:.*}–{:.*}, {} runs)",
            digits, s.median, digits, s.min, digits, s.max, s.n
        ),
        Some(s) => format!("{:.*}{unit} (1 run)", digits, s.median),
        None => "not measured".into(),
    }
}

/// Judges `ours / theirs` of the medians against `want` (at least, or at most).
struct Ratio {
    ratio: Option<f64>,
    pairs: Option<Spread>,
}

fn ratio_of(
    ours: &ClientSummary,
    theirs: &ClientSummary,
    pick: fn(&ClientSummary) -> Option<Spread>,
    runs: &[Run],
    a: Client,
    b: Client,
    f: fn(&Run) -> Option<f64>,
) -> Ratio {
    Ratio {
        ratio: pick(ours)
            .zip(pick(theirs))
            .filter(|(_, t)| t.median > 0.0)
            .map(|(o, t)| o.median / t.median),
        pairs: pair_ratios(runs, a, b, f),
    }
}

pub(super) fn rate_of(r: &Run) -> Option<f64> {
    r.summary.as_ref().map(|s| s.replies_per_s)
}

pub(super) fn cpu_of(r: &Run) -> Option<f64> {
    r.cpu_us_per_reply
}

fn why_missing(a: &ClientSummary, b: &ClientSummary) -> String {
    [a, b]
        .iter()
        .filter(|c| c.runs == 0)
        .map(|c| match &c.not_run {
            Some(why) => format!("{}: {why}", c.client),
            None => format!("{}: no run counted ({} failed)", c.client, c.failed_runs),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A saturated server (≥ 90% of a core for its one worker) sets the rate, not
/// the client; says so for `c` if it was.
fn server_bound(c: &ClientSummary) -> Option<String> {
    let share = c.server_core_share?.median;
    (share >= 0.9).then(|| {
        format!(
            "nginx used {:.0}% of a core during {}'s runs: the server, not the client, set that rate",
            100.0 * share,
            c.client
        )
    })
}

/// Every client's summary, in [`Client::ALL`]'s order.
pub(super) fn summaries(r: &Records) -> Vec<ClientSummary> {
    Client::ALL
        .iter()
        .map(|&c| {
            let not_run = r
                .not_run
                .iter()
                .find(|(name, _)| name == c.name())
                .map(|(_, why)| why.clone());
            summarize(c, &r.runs, not_run)
        })
        .collect()
}

/// The three claims, judged (not measured, each with its rule, without nginx).
pub(super) fn checks(r: &Records, summaries: &[ClientSummary]) -> Vec<ClaimCheck> {
    if let Some(why) = &r.server_missing {
        return CLAIMS
            .iter()
            .map(|(claim, rule)| ClaimCheck::judged(claim, format!("not run: {why}"), None, rule))
            .collect();
    }
    let by = |c: Client| &summaries[Client::ALL.iter().position(|&x| x == c).unwrap_or(0)];
    let (httperf, evq_open) = (by(Client::Httperf), by(Client::EvqOpen));
    let (wrk, evq_closed) = (by(Client::Wrk), by(Client::EvqClosed));
    let (uring_open, uring_closed) = (
        by(Client::EvqOpenCompletion),
        by(Client::EvqClosedCompletion),
    );
    vec![
        reply_rate(r, evq_open, httperf),
        cpu_per_reply(r, evq_open, httperf),
        closed_loop(r, evq_closed, wrk, Client::EvqClosed, 2),
        completion_cpu(r, uring_open, evq_open),
        closed_loop(r, uring_closed, wrk, Client::EvqClosedCompletion, 4),
    ]
}

/// 4: CPU per reply, completions against readiness.
fn completion_cpu(r: &Records, uring: &ClientSummary, readiness: &ClientSummary) -> ClaimCheck {
    let cpu = ratio_of(
        uring,
        readiness,
        |c| c.cpu_us_per_reply,
        &r.runs,
        Client::EvqOpenCompletion,
        Client::EvqOpen,
        cpu_of,
    );
    ClaimCheck::judged(
        CLAIMS[3].0,
        match cpu.ratio {
            Some(_) => format!(
                "CPU per reply: evq load --io completion {}, evq load {}: completion / readiness = {}",
                fmt_spread(&uring.cpu_us_per_reply, " µs", 1),
                fmt_spread(&readiness.cpu_us_per_reply, " µs", 1),
                fmt_ratio(&cpu)
            ),
            None => format!("not measured: {}", why_missing(uring, readiness)),
        },
        cpu.ratio.map(|r| r <= 0.9),
        CLAIMS[3].1,
    )
}

fn describe(c: &ClientSummary) -> String {
    format!(
        "{} {}, {} errors{}",
        c.client,
        fmt_spread(&c.replies_per_s, " replies/s", 0),
        c.errors,
        if c.bad_status > 0 {
            format!(", {} replies ≥ 400", c.bad_status)
        } else {
            String::new()
        }
    )
}

fn fmt_ratio(r: &Ratio) -> String {
    match (r.ratio, &r.pairs) {
        (Some(x), Some(p)) if p.n > 1 => {
            format!("{x:.3}× (run pairs {:.2}–{:.2}×)", p.min, p.max)
        }
        (Some(x), _) => format!("{x:.3}×"),
        _ => "—".into(),
    }
}

fn bound_notes(cs: &[&ClientSummary]) -> String {
    let v: Vec<String> = cs.iter().filter_map(|c| server_bound(c)).collect();
    if v.is_empty() {
        String::new()
    } else {
        format!("; {}", v.join("; "))
    }
}

/// 1: reply rate, same command line.
fn reply_rate(r: &Records, evq_open: &ClientSummary, httperf: &ClientSummary) -> ClaimCheck {
    let rate = ratio_of(
        evq_open,
        httperf,
        |c| c.replies_per_s,
        &r.runs,
        Client::EvqOpen,
        Client::Httperf,
        rate_of,
    );
    ClaimCheck::judged(
        CLAIMS[0].0,
        match rate.ratio {
            Some(_) => format!(
                "{}; {}: evq load / httperf = {}{}",
                describe(evq_open),
                describe(httperf),
                fmt_ratio(&rate),
                bound_notes(&[evq_open, httperf])
            ),
            None => format!("not measured: {}", why_missing(evq_open, httperf)),
        },
        rate.ratio.map(|r| r >= 1.2),
        CLAIMS[0].1,
    )
}

/// 2: CPU per reply.
fn cpu_per_reply(r: &Records, evq_open: &ClientSummary, httperf: &ClientSummary) -> ClaimCheck {
    let cpu = ratio_of(
        evq_open,
        httperf,
        |c| c.cpu_us_per_reply,
        &r.runs,
        Client::EvqOpen,
        Client::Httperf,
        cpu_of,
    );
    ClaimCheck::judged(
        CLAIMS[1].0,
        match cpu.ratio {
            Some(_) => format!(
                "CPU per reply: evq load {}, httperf {}: evq load / httperf = {}",
                fmt_spread(&evq_open.cpu_us_per_reply, " µs", 1),
                fmt_spread(&httperf.cpu_us_per_reply, " µs", 1),
                fmt_ratio(&cpu)
            ),
            None => format!("not measured: {}", why_missing(evq_open, httperf)),
        },
        cpu.ratio.map(|r| r <= 0.5),
        CLAIMS[1].1,
    )
}

/// 3 and 5: a closed loop of `evq load` (`client`, claim `claim`) against wrk.
fn closed_loop(
    r: &Records,
    evq_closed: &ClientSummary,
    wrk: &ClientSummary,
    client: Client,
    claim: usize,
) -> ClaimCheck {
    let s = &r.plan;
    let closed = ratio_of(
        evq_closed,
        wrk,
        |c| c.replies_per_s,
        &r.runs,
        client,
        Client::Wrk,
        rate_of,
    );
    ClaimCheck::judged(
        CLAIMS[claim].0,
        match closed.ratio {
            Some(_) => format!(
                "{} connections, {} thread(s), {} s: {}; {}: evq load / wrk = {}{}",
                s.connections,
                s.threads,
                s.seconds,
                describe(evq_closed),
                describe(wrk),
                fmt_ratio(&closed),
                bound_notes(&[evq_closed, wrk])
            ),
            None => format!("not measured: {}", why_missing(evq_closed, wrk)),
        },
        closed.ratio.map(|r| r >= 1.0),
        CLAIMS[claim].1,
    )
}

#[cfg(test)]
mod tests;
