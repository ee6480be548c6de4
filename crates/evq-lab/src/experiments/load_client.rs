//! Experiment 8, the load client (SEEDS 002 and 000 drove their servers with
//! httperf): `evq load` beside httperf with the same command line (open loop) and
//! beside wrk at the same connections and threads (closed loop), all against the
//! same nginx.
//!
//! Every client runs as a child process of the lab and is measured alike: its
//! reply rate from its own report, its CPU from `wait4`'s rusage (user + system of
//! the child and its threads, start-up and exit included) divided by the replies
//! it counted. The clients alternate (A/B/A/B) and each is repeated; the claims
//! judge ratios of medians.

use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, ExperimentRecord};
use crate::rig::{run_child, Docroot, PeerServer, PeerServerKind};
use crate::stats::{spread, Spread};
use crate::tools::Tools;
use crate::Scenario;
use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a client's own report said, parsed.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct ToolSummary {
    /// Complete replies (wrk: completed requests).
    replies: u64,
    /// The tool's own test duration, seconds.
    duration_s: f64,
    /// Replies per second as the scenario compares them: replies / duration for
    /// httperf and evq load, `Requests/sec` as wrk prints it.
    replies_per_s: f64,
    /// Connection-level errors the tool counted.
    errors: u64,
    /// Replies with status 400 or above (wrk's "Non-2xx or 3xx responses").
    bad_status: u64,
    /// The CPU time the tool reported for itself, if it does (httperf, evq load).
    self_cpu_s: Option<f64>,
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The number after `key` among a line's words (`key` itself a whole word, or
/// `key=` glued to the number as in httperf's `2xx=200`).
fn after<T: std::str::FromStr>(line: &str, key: &str) -> Option<T> {
    let w = words(line);
    if let Some(i) = w.iter().position(|x| *x == key) {
        return w.get(i + 1)?.trim_end_matches([',', 's']).parse().ok();
    }
    let glued = format!("{key}=");
    w.iter()
        .find_map(|x| x.strip_prefix(glued.as_str()))
        .and_then(|v| v.parse().ok())
}

/// httperf's summary: `Total: connections N requests N replies N test-duration
/// D s`, `Reply status: ... 4xx=N 5xx=N`, `CPU time [s]: user U system S ...`,
/// `Errors: total N ...`. The rate is replies over the test duration (httperf's
/// own `Reply rate` line averages 5-s samples and has none in runs under 5 s).
fn parse_httperf(text: &str) -> Option<ToolSummary> {
    let total = text.lines().find(|l| l.starts_with("Total: connections"))?;
    let replies: u64 = after(total, "replies")?;
    let duration_s: f64 = after(total, "test-duration")?;
    let errors = text
        .lines()
        .find(|l| l.starts_with("Errors: total"))
        .and_then(|l| after(l, "total"))?;
    let status = text.lines().find(|l| l.starts_with("Reply status:"));
    let bad_status = status.map_or(0, |l| {
        after::<u64>(l, "4xx").unwrap_or(0) + after::<u64>(l, "5xx").unwrap_or(0)
    });
    let self_cpu_s = text
        .lines()
        .find(|l| l.starts_with("CPU time [s]:"))
        .and_then(|l| Some(after::<f64>(l, "user")? + after::<f64>(l, "system")?));
    Some(ToolSummary {
        replies,
        duration_s,
        replies_per_s: if duration_s > 0.0 {
            replies as f64 / duration_s
        } else {
            0.0
        },
        errors,
        bad_status,
        self_cpu_s,
    })
}

/// A wrk time: a number with `us`, `ms`, `s`, `m` or `h` (its `format_time`).
fn wrk_seconds(s: &str) -> Option<f64> {
    let s = s.trim_end_matches(',');
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(n * scale)
}

/// wrk's summary: `N requests in Ds, B read`, `Requests/sec: R`, `Socket
/// errors: connect a, read b, write c, timeout d`, `Non-2xx or 3xx responses:
/// N`.
fn parse_wrk(text: &str) -> Option<ToolSummary> {
    let done = text.lines().map(str::trim).find(|l| {
        let w = words(l);
        w.len() >= 4 && w[1] == "requests" && w[2] == "in"
    })?;
    let w = words(done);
    let replies: u64 = w[0].parse().ok()?;
    let duration_s = wrk_seconds(w[3])?;
    let replies_per_s = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())?;
    let errors = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map_or(Some(0), |l| {
            l.split(',')
                .map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<Option<u64>>()
        })?;
    let bad_status = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .map_or(Some(0), |v| v.trim().parse().ok())?;
    Some(ToolSummary {
        replies,
        duration_s,
        replies_per_s,
        errors,
        bad_status,
        self_cpu_s: None,
    })
}

/// `evq load --json`'s report.
fn parse_evq(text: &str) -> Option<ToolSummary> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let status = |k: &str| v["status"][k].as_u64().unwrap_or(0);
    Some(ToolSummary {
        replies: v["replies"].as_u64()?,
        duration_s: v["duration_s"].as_f64()?,
        replies_per_s: v["reply_rate_avg"].as_f64()?,
        errors: v["errors"]["total"].as_u64()?,
        bad_status: status("4xx") + status("5xx"),
        self_cpu_s: Some(v["cpu_user_s"].as_f64()? + v["cpu_sys_s"].as_f64()?),
    })
}

/// The clients, in the order each repeat runs them (A/B for each mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Client {
    Httperf,
    EvqOpen,
    Wrk,
    EvqClosed,
}

impl Client {
    const ALL: [Client; 4] = [
        Client::Httperf,
        Client::EvqOpen,
        Client::Wrk,
        Client::EvqClosed,
    ];

    fn name(self) -> &'static str {
        match self {
            Client::Httperf => "httperf",
            Client::EvqOpen => "evq load",
            Client::Wrk => "wrk",
            Client::EvqClosed => "evq load (closed)",
        }
    }

    fn mode(self) -> &'static str {
        match self {
            Client::Httperf | Client::EvqOpen => "open",
            Client::Wrk | Client::EvqClosed => "closed",
        }
    }
}

/// One client run.
#[derive(Clone, Debug, Serialize)]
struct Run {
    client: &'static str,
    mode: &'static str,
    /// 1-based repeat.
    repeat: usize,
    /// The tool's own figures (`None` if its output could not be parsed).
    summary: Option<ToolSummary>,
    /// The child's CPU from wait4, seconds.
    cpu_user_s: f64,
    cpu_sys_s: f64,
    /// (user + system) × 10^6 / replies.
    cpu_us_per_reply: Option<f64>,
    /// Spawn to reap, seconds.
    wall_s: f64,
    /// nginx's CPU (all its processes) over the same interval, seconds.
    server_cpu_s: f64,
    /// `server_cpu_s / wall_s`: 1.0 is one core busy throughout.
    server_core_share: f64,
    exit: Option<i32>,
    /// Why the run does not count, if it does not.
    failure: Option<String>,
}

struct Sizes {
    num_conns: u64,
    num_calls: u32,
    rate: u32,
    connections: usize,
    threads: usize,
    seconds: u64,
    repeats: usize,
    limit: Duration,
}

fn sizes(scenario: &Scenario) -> Sizes {
    if scenario.smoke {
        Sizes {
            num_conns: 5,
            num_calls: 20,
            rate: 100,
            connections: 5,
            threads: 1,
            seconds: 1,
            repeats: 1,
            limit: Duration::from_secs(30),
        }
    } else if scenario.quick {
        Sizes {
            num_conns: 100,
            num_calls: 200,
            rate: 1000,
            connections: 100,
            threads: 1,
            seconds: 2,
            repeats: 3,
            limit: Duration::from_secs(60),
        }
    } else {
        Sizes {
            num_conns: 100,
            num_calls: 2000,
            rate: 1000,
            connections: 100,
            threads: 1,
            seconds: 10,
            repeats: 3,
            limit: Duration::from_secs(300),
        }
    }
}

/// The httperf command line both open-loop clients take (after the program).
fn open_args(s: &Sizes, port: u16, uri: &str) -> Vec<String> {
    [
        "--server",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--uri",
        uri,
        "--num-conns",
        &s.num_conns.to_string(),
        "--num-calls",
        &s.num_calls.to_string(),
        "--rate",
        &s.rate.to_string(),
        "--hog",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

fn client_args(client: Client, s: &Sizes, port: u16, uri: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    match client {
        Client::Httperf => args = open_args(s, port, uri),
        Client::EvqOpen => {
            args.push("load".into());
            args.extend(open_args(s, port, uri));
            args.extend(["--json".into(), "--no-progress".into()]);
        }
        Client::Wrk => {
            for a in [
                "-t".to_string(),
                s.threads.to_string(),
                "-c".into(),
                s.connections.to_string(),
                "-d".into(),
                format!("{}s", s.seconds),
                format!("http://127.0.0.1:{port}{uri}"),
            ] {
                args.push(a);
            }
        }
        Client::EvqClosed => {
            args.push("load".into());
            for a in [
                "--server".to_string(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
                "--uri".into(),
                uri.into(),
                "--connections".into(),
                s.connections.to_string(),
                "--duration".into(),
                s.seconds.to_string(),
                "--threads".into(),
                s.threads.to_string(),
                "--json".into(),
                "--no-progress".into(),
            ] {
                args.push(a);
            }
        }
    }
    args
}

fn measure(
    client: Client,
    program: &Path,
    args: &[String],
    server: &PeerServer,
    repeat: usize,
    limit: Duration,
) -> Run {
    let server_before = server.cpu_time();
    let outcome = run_child(program, args, limit);
    let server_cpu_s = server
        .cpu_time()
        .saturating_sub(server_before)
        .as_secs_f64();
    let mut run = Run {
        client: client.name(),
        mode: client.mode(),
        repeat,
        summary: None,
        cpu_user_s: 0.0,
        cpu_sys_s: 0.0,
        cpu_us_per_reply: None,
        wall_s: 0.0,
        server_cpu_s,
        server_core_share: 0.0,
        exit: None,
        failure: None,
    };
    let o = match outcome {
        Ok(o) => o,
        Err(e) => {
            run.failure = Some(format!("could not run {}: {e}", program.display()));
            return run;
        }
    };
    run.cpu_user_s = o.cpu_user_s;
    run.cpu_sys_s = o.cpu_sys_s;
    run.wall_s = o.wall_s;
    run.server_core_share = if o.wall_s > 0.0 {
        server_cpu_s / o.wall_s
    } else {
        0.0
    };
    run.exit = o.exit;
    run.summary = match client {
        Client::Httperf => parse_httperf(&o.stdout),
        Client::Wrk => parse_wrk(&o.stdout),
        Client::EvqOpen | Client::EvqClosed => parse_evq(&o.stdout),
    };
    let tail = |s: &str| -> String {
        let t = s.trim();
        let start = t.len().saturating_sub(300);
        let start = (start..=t.len())
            .find(|&i| t.is_char_boundary(i))
            .unwrap_or(t.len());
        t[start..].to_string()
    };
    run.failure = if o.killed {
        Some(format!("killed at the {} s limit", limit.as_secs()))
    } else if o.exit != Some(0) {
        Some(format!(
            "exit {:?}: {}",
            o.exit,
            tail(&format!("{}\n{}", o.stdout, o.stderr))
        ))
    } else if run.summary.is_none() {
        Some(format!("output not understood: {}", tail(&o.stdout)))
    } else {
        None
    };
    if let Some(s) = &run.summary {
        if s.replies > 0 {
            run.cpu_us_per_reply = Some((o.cpu_user_s + o.cpu_sys_s) * 1e6 / s.replies as f64);
        }
    }
    run
}

/// Per-client figures over its counted runs.
#[derive(Clone, Debug, Serialize)]
struct ClientSummary {
    client: &'static str,
    mode: &'static str,
    runs: usize,
    failed_runs: usize,
    replies_per_s: Option<Spread>,
    cpu_us_per_reply: Option<Spread>,
    errors: u64,
    bad_status: u64,
    server_core_share: Option<Spread>,
    client_core_share: Option<Spread>,
    /// Why this client was not run, if it was not.
    not_run: Option<String>,
}

fn summarize(client: Client, runs: &[Run], not_run: Option<String>) -> ClientSummary {
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
        mode: client.mode(),
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

fn fmt_spread(s: &Option<Spread>, unit: &str, digits: usize) -> String {
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

fn rate_of(r: &Run) -> Option<f64> {
    r.summary.as_ref().map(|s| s.replies_per_s)
}

fn cpu_of(r: &Run) -> Option<f64> {
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

fn not_measured_record(why: &str) -> ExperimentRecord {
    let checks = CLAIMS
        .iter()
        .map(|(claim, rule)| ClaimCheck::judged(claim, format!("not run: {why}"), None, rule))
        .collect();
    let mut record = ExperimentRecord::new(NAME, SEED, checks);
    record.data = serde_json::json!({ "not_run": why });
    record
}

const NAME: &str = "load-client";
const SEED: &str = "002 Libenzi /dev/epoll and 000 Banga et al.: httperf as the load client";
const CLAIMS: [(&str, &str); 3] = [
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
];

/// Runs the clients against nginx and judges the claims.
pub fn run(scenario: &Scenario) -> io::Result<ExperimentRecord> {
    let s = sizes(scenario);
    if let Err(why) = PeerServerKind::Nginx.available() {
        return Ok(not_measured_record(&why));
    }
    crate::resources::raise_nofile()?;
    let reply_size = 1024;
    let root = Docroot::with_sizes(&[reply_size])?;
    let uri = Docroot::uri(reply_size);
    let server = PeerServer::start(PeerServerKind::Nginx, &root, 1)?;
    let port = server.addr().port();
    let evq = scenario.tools.evq().map(|p| p.to_path_buf());
    let program = |c: Client| -> Result<PathBuf, String> {
        match c {
            Client::Httperf => Tools::find("httperf")
                .ok_or("httperf is not installed (scripts/install-peers.sh installs it)".into()),
            Client::Wrk => Tools::find("wrk")
                .ok_or("wrk is not installed (scripts/install-peers.sh installs it)".into()),
            Client::EvqOpen | Client::EvqClosed => {
                evq.as_ref().map(|p| p.clone()).map_err(|e| e.to_string())
            }
        }
    };
    let loadavg_before = crate::procinfo::loadavg();
    let mut runs = Vec::new();
    for repeat in 1..=s.repeats {
        for client in Client::ALL {
            let Ok(prog) = program(client) else { continue };
            scenario.progress(&format!(
                "{} ({} loop), run {repeat} of {}",
                client.name(),
                client.mode(),
                s.repeats
            ));
            let args = client_args(client, &s, port, &uri);
            runs.push(measure(client, &prog, &args, &server, repeat, s.limit));
        }
    }
    let loadavg_after = crate::procinfo::loadavg();
    drop(server);

    let summaries: Vec<ClientSummary> = Client::ALL
        .iter()
        .map(|&c| summarize(c, &runs, program(c).err()))
        .collect();
    let by = |c: Client| &summaries[Client::ALL.iter().position(|&x| x == c).unwrap_or(0)];
    let (httperf, evq_open, wrk, evq_closed) = (
        by(Client::Httperf),
        by(Client::EvqOpen),
        by(Client::Wrk),
        by(Client::EvqClosed),
    );
    let describe = |c: &ClientSummary| {
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
    };
    let fmt_ratio = |r: &Ratio| match (r.ratio, &r.pairs) {
        (Some(x), Some(p)) if p.n > 1 => {
            format!("{x:.3}× (run pairs {:.2}–{:.2}×)", p.min, p.max)
        }
        (Some(x), _) => format!("{x:.3}×"),
        _ => "—".into(),
    };
    let bound_notes = |cs: &[&ClientSummary]| {
        let v: Vec<String> = cs.iter().filter_map(|c| server_bound(c)).collect();
        if v.is_empty() {
            String::new()
        } else {
            format!("; {}", v.join("; "))
        }
    };

    let mut checks = Vec::new();
    // 1: reply rate, same command line.
    let rate = ratio_of(
        evq_open,
        httperf,
        |c| c.replies_per_s,
        &runs,
        Client::EvqOpen,
        Client::Httperf,
        rate_of,
    );
    checks.push(ClaimCheck::judged(
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
    ));
    // 2: CPU per reply.
    let cpu = ratio_of(
        evq_open,
        httperf,
        |c| c.cpu_us_per_reply,
        &runs,
        Client::EvqOpen,
        Client::Httperf,
        cpu_of,
    );
    checks.push(ClaimCheck::judged(
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
    ));
    // 3: closed loop against wrk.
    let closed = ratio_of(
        evq_closed,
        wrk,
        |c| c.replies_per_s,
        &runs,
        Client::EvqClosed,
        Client::Wrk,
        rate_of,
    );
    checks.push(ClaimCheck::judged(
        CLAIMS[2].0,
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
        CLAIMS[2].1,
    ));

    let mut record = ExperimentRecord::new(NAME, SEED, checks);
    let per_run = |f: fn(&Run) -> Option<f64>| -> Vec<Series> {
        Client::ALL
            .iter()
            .map(|c| Series {
                name: c.name().into(),
                points: runs
                    .iter()
                    .filter(|r| r.client == c.name() && r.failure.is_none())
                    .filter_map(|r| Some((r.repeat as f64, f(r)?)))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    record.plots.push(render(
        &Chart {
            title: format!(
                "Reply rate per client from one nginx worker ({reply_size} B file), each run"
            ),
            x_label: "run (clients alternate within each)".into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series: per_run(rate_of),
        },
        &scenario.out_dir,
        "load-client-rate",
    ));
    record.plots.push(render(
        &Chart {
            title: "Client CPU per reply (wait4 rusage, user + system), each run".into(),
            x_label: "run (clients alternate within each)".into(),
            y_label: "CPU µs per reply".into(),
            log_x: false,
            log_y: false,
            series: per_run(cpu_of),
        },
        &scenario.out_dir,
        "load-client-cpu",
    ));
    record.notes.push(format!(
        "Server: nginx, one worker, serving a {reply_size}-byte file on loopback (the lab's configuration: access log off, sendfile, keep-alive unlimited); the same server process for every run. Clients run one at a time as child processes of the lab, in the order httperf, evq load, wrk, evq load (closed), repeated {} times; medians and min–max over the runs that completed, and the claims judge ratios of medians (the run-pair ratios are per repeat).",
        s.repeats
    ));
    record.notes.push(crate::placement::describe());
    record.notes.push("CPU per reply, the same method for every client: the child's rusage from wait4 (user + system, all its threads, process start-up and exit included) divided by the replies it reported (wrk: its completed requests). The tools' own CPU figures (httperf's and evq load's getrusage over the test only) are in the data as self_cpu_s. Reply rate: replies / test duration as httperf and evq load report them; wrk's Requests/sec as it prints it.".into());
    let share = |c: &ClientSummary| {
        c.server_core_share.map_or("—".into(), |s| {
            format!(
                "{:.0}% (client {:.0}%)",
                100.0 * s.median,
                100.0 * c.client_core_share.map_or(0.0, |x| x.median)
            )
        })
    };
    record.notes.push(format!(
        "nginx's CPU as a share of one core over each run (median), with the client's own share: httperf {}, evq load {}, wrk {}, evq load (closed) {}. At 90% or more the server, not the client, set the rate. The machine has 2 cores shared with other work: load average {} before the runs, {} after.",
        share(httperf),
        share(evq_open),
        share(wrk),
        share(evq_closed),
        loadavg_before.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        loadavg_after.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    ));
    let busy = |x: Option<Spread>| x.is_some_and(|s| s.median >= 0.9);
    let counted: Vec<&ClientSummary> = summaries.iter().filter(|c| c.runs > 0).collect();
    if !counted.is_empty()
        && !counted
            .iter()
            .any(|c| busy(c.server_core_share) || busy(c.client_core_share))
    {
        record.notes.push("Neither nginx nor any client had 90% of a core in its median run: on this shared machine both sides also waited for CPU, so the absolute rates are the machine's at the time; the ratios compare clients run alternately in the same period.".into());
    }
    record.notes.push("httperf (Debian's build) uses select() and limits itself to FD_SETSIZE (1024) descriptors; at 100 connections that does not bind.".into());
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.failure
                .as_ref()
                .map(|f| format!("{} run {}: {f}", r.client, r.repeat))
        })
        .collect();
    if !failed.is_empty() {
        record
            .notes
            .push(format!("Runs not counted: {}", failed.join("; ")));
    }
    let p = "P";
    for c in Client::ALL {
        let prog = match c {
            Client::Httperf => "httperf",
            Client::Wrk => "wrk",
            _ => "evq",
        };
        record.commands.push(format!(
            "{prog} {}",
            client_args(c, &s, 0, &uri)
                .join(" ")
                .replace("--port 0", &format!("--port {p}"))
                .replace("127.0.0.1:0", &format!("127.0.0.1:{p}"))
        ));
    }
    record.data = serde_json::json!({
        "server": { "kind": "nginx", "workers": 1, "reply_size": reply_size, "uri": uri },
        "open_loop": { "num_conns": s.num_conns, "num_calls": s.num_calls, "rate": s.rate, "hog": true },
        "closed_loop": { "connections": s.connections, "threads": s.threads, "seconds": s.seconds },
        "repeats": s.repeats,
        "clients": summaries,
        "ratios": {
            "open_reply_rate_evq_over_httperf": rate.ratio,
            "open_cpu_per_reply_evq_over_httperf": cpu.ratio,
            "closed_reply_rate_evq_over_wrk": closed.ratio,
        },
        "runs": runs,
    });
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! captured {
        ($f:literal) => {
            include_str!(concat!("../../testdata/load-client/", $f))
        };
    }

    #[test]
    fn httperf_full_run() {
        let s = parse_httperf(captured!("httperf-full.txt")).expect("parses");
        assert_eq!(s.replies, 200_000);
        assert!((s.duration_s - 68.710).abs() < 1e-9);
        assert!((s.replies_per_s - 200_000.0 / 68.710).abs() < 1e-6);
        assert_eq!(s.errors, 0);
        assert_eq!(s.bad_status, 0);
        assert!((s.self_cpu_s.unwrap() - (0.15 + 7.09)).abs() < 1e-9);
    }

    #[test]
    fn httperf_errors_and_no_replies() {
        let s = parse_httperf(captured!("httperf-reset.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (5237, 50));
        let s = parse_httperf(captured!("httperf-refused.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (0, 5));
        assert_eq!(s.replies_per_s, 0.0);
        assert_eq!(parse_httperf("httperf: warning: something\n"), None);
    }

    #[test]
    fn wrk_runs() {
        let s = parse_wrk(captured!("wrk-1-100.txt")).expect("parses");
        assert_eq!(s.replies, 22_894);
        assert!((s.duration_s - 2.05).abs() < 1e-9);
        assert!((s.replies_per_s - 11_183.30).abs() < 1e-9);
        assert_eq!((s.errors, s.bad_status, s.self_cpu_s), (0, 0, None));
        let s = parse_wrk(captured!("wrk-2-100-lat.txt")).expect("parses");
        assert_eq!(s.replies, 33_368);
        assert!((s.replies_per_s - 16_015.44).abs() < 1e-9);
        let s = parse_wrk(captured!("wrk-404.txt")).expect("parses");
        assert_eq!((s.replies, s.bad_status, s.errors), (15_723, 15_723, 0));
        let s = parse_wrk(captured!("wrk-reset.txt")).expect("parses");
        assert_eq!((s.replies, s.errors), (29_206, 50));
        assert!((s.duration_s - 3.08).abs() < 1e-9);
        assert_eq!(
            parse_wrk("unable to connect to 127.0.0.1:18099 Connection refused\n"),
            None
        );
    }

    #[test]
    fn wrk_time_units() {
        assert_eq!(wrk_seconds("2.05s,"), Some(2.05));
        assert_eq!(wrk_seconds("1.00m"), Some(60.0));
        assert_eq!(wrk_seconds("500.00ms"), Some(0.5));
        assert_eq!(wrk_seconds("12"), None);
    }

    #[test]
    fn evq_json() {
        let s = parse_evq(captured!("evq-closed.json")).expect("parses");
        assert_eq!((s.replies, s.errors, s.bad_status), (18_122, 0, 0));
        assert_eq!(s.replies_per_s, 18_122.0);
        assert_eq!(s.duration_s, 1.0);
        let s = parse_evq(captured!("evq-open-smoke.json")).expect("parses");
        assert_eq!(s.replies, 100);
        assert!(s.self_cpu_s.is_some());
        assert_eq!(parse_evq("Total: connections 1"), None);
    }
}
