//! The load client's figures, method notes and commands: pure functions of the
//! records.

use super::judge::{cpu_of, rate_of, ClientSummary};
use super::measure::client_args;
use super::{Client, Records, Run};
use crate::plot::{Chart, Figure, Series};
use crate::stats::Spread;

/// What to look at in the figure `load_client_rate`.
const CAPTION_LOAD_CLIENT_RATE: &str = "Each client's reply rate from the same nginx, run by run, higher is better: evq load (solid) against httperf and wrk (dashed).";
/// What to look at in the figure `load_client_cpu`.
const CAPTION_LOAD_CLIENT_CPU: &str = "Each client's CPU per reply, run by run, lower is better: evq load (solid) against httperf and wrk (dashed).";

/// Reply rate and CPU per reply, each run.
pub(super) fn figures(r: &Records) -> Vec<Figure> {
    let per_run = |f: fn(&Run) -> Option<f64>| -> Vec<Series> {
        let names = Client::ALL.map(Client::name);
        let mut series = Series::named(
            &names,
            &r.runs,
            |x: &Run| x.client.as_str(),
            |x| {
                if x.failure.is_some() {
                    return None;
                }
                Some((x.repeat as f64, f(x)?))
            },
        );
        series.retain(|s| !s.points.is_empty());
        series
    };
    vec![
        Figure::new(
            "load-client-rate",
            CAPTION_LOAD_CLIENT_RATE,
            Chart {
                title: format!(
                    "Reply rate per client from one nginx worker ({} B file), each run",
                    r.reply_size
                ),
                x_label: "run (clients alternate within each)".into(),
                y_label: "replies/s".into(),
                log_x: false,
                log_y: false,
                series: per_run(rate_of),
            }
            .evq_where(|n| n.starts_with("evq")),
        ),
        Figure::new(
            "load-client-cpu",
            CAPTION_LOAD_CLIENT_CPU,
            Chart {
                title: "Client CPU per reply (wait4 rusage, user + system), each run".into(),
                x_label: "run (clients alternate within each)".into(),
                y_label: "CPU µs per reply".into(),
                log_x: false,
                log_y: false,
                series: per_run(cpu_of),
            }
            .evq_where(|n| n.starts_with("evq")),
        ),
    ]
}

/// The method notes, in report order.
pub(super) fn notes(r: &Records, summaries: &[ClientSummary]) -> Vec<String> {
    let mut notes = vec![
        format!(
            "Server: nginx, one worker, serving a {}-byte file on loopback (the lab's configuration: access log off, sendfile, keep-alive unlimited); the same server process for every run. Clients run one at a time as child processes of the lab, in the order httperf, evq load, wrk, evq load (closed), repeated {} times; medians and min–max over the runs that completed, and the claims judge ratios of medians (the run-pair ratios are per repeat).",
            r.reply_size, r.plan.repeats
        ),
        r.placement.clone(),
        "CPU per reply, the same method for every client: the child's rusage from wait4 (user + system, all its threads, process start-up and exit included) divided by the replies it reported (wrk: its completed requests). The tools' own CPU figures (httperf's and evq load's getrusage over the test only) are in the data as self_cpu_s. Reply rate: replies / test duration as httperf and evq load report them; wrk's Requests/sec as it prints it.".into(),
        server_share(r, summaries),
    ];
    let busy = |x: Option<Spread>| x.is_some_and(|s| s.median >= 0.9);
    let counted: Vec<&ClientSummary> = summaries.iter().filter(|c| c.runs > 0).collect();
    if !counted.is_empty()
        && !counted
            .iter()
            .any(|c| busy(c.server_core_share) || busy(c.client_core_share))
    {
        notes.push("Neither nginx nor any client had 90% of a core in its median run: on this shared machine both sides also waited for CPU, so the absolute rates are the machine's at the time; the ratios compare clients run alternately in the same period.".into());
    }
    notes.push("httperf (Debian's build) uses select() and limits itself to FD_SETSIZE (1024) descriptors; at 100 connections that does not bind.".into());
    let failed: Vec<String> = r
        .runs
        .iter()
        .filter_map(|x| {
            x.failure
                .as_ref()
                .map(|f| format!("{} run {}: {f}", x.client, x.repeat))
        })
        .collect();
    if !failed.is_empty() {
        notes.push(format!("Runs not counted: {}", failed.join("; ")));
    }
    notes
}

/// nginx's CPU during each client's runs: at 90% of a core the server set the rate.
fn server_share(r: &Records, summaries: &[ClientSummary]) -> String {
    let share = |c: Client| {
        let c = &summaries[Client::ALL.iter().position(|&x| x == c).unwrap_or(0)];
        c.server_core_share.map_or("—".into(), |s| {
            format!(
                "{:.0}% (client {:.0}%)",
                100.0 * s.median,
                100.0 * c.client_core_share.map_or(0.0, |x| x.median)
            )
        })
    };
    format!(
        "nginx's CPU as a share of one core over each run (median), with the client's own share: httperf {}, evq load {}, evq load --io completion {}, wrk {}, evq load (closed) {}, evq load --io completion (closed) {}. At 90% or more the server, not the client, set the rate. The machine has 2 cores shared with other work: load average {} before the runs, {} after.",
        share(Client::Httperf),
        share(Client::EvqOpen),
        share(Client::EvqOpenCompletion),
        share(Client::Wrk),
        share(Client::EvqClosed),
        share(Client::EvqClosedCompletion),
        r.loadavg_before,
        r.loadavg_after,
    )
}

/// Each client's command line.
pub(super) fn commands(r: &Records) -> Vec<String> {
    Client::ALL
        .iter()
        .map(|&c| {
            let prog = match c {
                Client::Httperf => "httperf",
                Client::Wrk => "wrk",
                _ => "evq",
            };
            format!(
                "{prog} {}",
                client_args(c, &r.plan, 0, &r.uri)
                    .join(" ")
                    .replace("--port 0", "--port P")
                    .replace("127.0.0.1:0", "127.0.0.1:P")
            )
        })
        .collect()
}
