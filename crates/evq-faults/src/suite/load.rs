//! `evq load` against an origin that misbehaves: crashes mid-run (the rest of
//! the connections are refused), stalls (reads and never answers), answers
//! garbage (not HTTP, or a chunked body that breaks off), or resets after the
//! request (the next send gets `EPIPE`: SIGPIPE must not kill the generator).
//!
//! What a load generator owes its user: it ends on time with exit 0, counts
//! every connection it started — a reply or an error of the right kind, none
//! lost — and its memory stays within a bound (bodies are counted, not kept).

use super::row::{Check, ExitSummary, FaultRow};
use super::trial::start_origin;
use super::{SuiteConfig, Target};
use crate::usage::{self, Usage};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The anonymous memory `evq load` may hold at its peak in these runs, KiB: its
/// buffers for a few dozen connections and its histograms fit well inside.
pub const LOAD_RSS_BOUND_KIB: u64 = 64 * 1024;

/// What `evq load` printed and how it ended.
pub(crate) struct LoadRun {
    pub(crate) exit: ExitSummary,
    pub(crate) report: Option<serde_json::Value>,
    pub(crate) peak: Usage,
    pub(crate) stderr: String,
}

impl LoadRun {
    /// A number from the JSON report (`"errors"`, `"client-timo"` → `errors.client-timo`).
    pub(crate) fn get(&self, path: &[&str]) -> u64 {
        let mut v = match &self.report {
            Some(v) => v,
            None => return 0,
        };
        for p in path {
            match v.get(p) {
                Some(x) => v = x,
                None => return 0,
            }
        }
        v.as_u64().unwrap_or(0)
    }
}

/// Runs `evq load ARGS --json --no-progress`, reading its descriptors and
/// memory every 50 ms; killed after `bound`. `during` runs once, `after` into
/// the run.
pub(crate) fn run_load(
    cfg: &SuiteConfig,
    args: &[String],
    bound: Duration,
    after: Duration,
    mut during: impl FnMut(),
) -> io::Result<LoadRun> {
    let mut cmd = Command::new(&cfg.evq);
    cmd.arg("load")
        .args(args)
        .args(["--json", "--no-progress"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let mut peak = Usage::default();
    let mut did = false;
    let mut killed = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if let Ok(u) = usage::usage(child.id()) {
            peak.fds = peak.fds.max(u.fds);
            peak.anon_rss_kib = peak.anon_rss_kib.max(u.anon_rss_kib);
        }
        if !did && started.elapsed() >= after {
            did = true;
            during();
        }
        if started.elapsed() > bound {
            killed = true;
            // SAFETY: kill(2) on the process group of our unreaped child.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stdout = out_thread.join().unwrap_or_default();
    let stderr = err_thread.join().unwrap_or_default();
    let report = serde_json::from_str(stdout.trim()).ok();
    let code = status.code();
    let signal = status.signal();
    let describe = if killed {
        format!("did not exit; killed by the suite after {seconds:.1} s")
    } else if let Some(c) = code {
        format!("exit {c} in {seconds:.2} s")
    } else {
        format!("killed by signal {}", signal.unwrap_or(0))
    };
    Ok(LoadRun {
        exit: ExitSummary {
            code,
            signal,
            killed,
            seconds,
            describe,
        },
        report,
        peak,
        stderr,
    })
}

struct Plan {
    uri: String,
    conns: u64,
    rate: f64,
    timeout: f64,
    /// The origin is killed this far into the run.
    crash_after: Option<Duration>,
    /// Error kinds at least one of which must be counted.
    expected: &'static [&'static str],
    what: String,
}

fn plan(name: &'static str, size: super::Size) -> Plan {
    let conns = size.pick(40, 400);
    let rate = size.pick(20.0, 50.0);
    let p = |uri: &str, timeout, crash_after, expected, what: &str| Plan {
        uri: uri.into(),
        conns,
        rate,
        timeout,
        crash_after,
        expected,
        what: format!("evq load, {conns} connections at {rate:.0}/s, one call each, {what}"),
    };
    match name {
        "origin-crash" => p(
            "/slow-big?n=262144",
            5.0,
            Some(Duration::from_secs_f64(conns as f64 / rate / 2.0)),
            &["connrefused", "connreset", "premature-close"],
            "256 KiB replies sent slowly; the origin is killed halfway through the run",
        ),
        "origin-stall" => p(
            "/stall",
            1.0,
            None,
            &["client-timo"],
            "against an origin that reads each request and never answers (--timeout 1)",
        ),
        "origin-garbage" => p(
            "/garbage-chunked",
            2.0,
            None,
            &["bad-reply", "premature-close"],
            "against an origin whose chunked body breaks off into garbage",
        ),
        "origin-garbage-head" => p(
            "/garbage-head",
            2.0,
            None,
            &["bad-reply", "premature-close"],
            "against an origin that answers bytes that are not HTTP",
        ),
        _ => p(
            "/reset",
            2.0,
            None,
            &["connreset", "premature-close"],
            "against an origin that resets each connection after reading the request",
        ),
    }
}

/// The load rows' names.
pub(crate) const FAULTS: [&str; 5] = [
    "origin-crash",
    "origin-stall",
    "origin-garbage",
    "origin-garbage-head",
    "origin-reset",
];

/// Runs the load row called `name`.
pub(crate) fn run_named(cfg: &SuiteConfig, name: &'static str) -> FaultRow {
    let started = Instant::now();
    let p = plan(name, cfg.size);
    let mut row = FaultRow {
        target: "load".into(),
        fault: name.into(),
        ..FaultRow::default()
    };
    let origin = match start_origin(cfg, SocketAddr::from(([127, 0, 0, 1], 0))) {
        Ok(o) => o,
        Err(e) => return super::not_run(Target::Load, name, e),
    };
    let args: Vec<String> = vec![
        "--server".into(),
        "127.0.0.1".into(),
        "--port".into(),
        origin.addr().port().to_string(),
        "--uri".into(),
        p.uri.clone(),
        "--rate".into(),
        p.rate.to_string(),
        "--num-conns".into(),
        p.conns.to_string(),
        "--timeout".into(),
        p.timeout.to_string(),
    ];
    row.injected = format!(
        "{}; evq load {}",
        p.what,
        args.join(" ")
            .replace(&origin.addr().port().to_string(), "PORT")
    );
    let expected_s = p.conns as f64 / p.rate + p.timeout;
    let bound = Duration::from_secs_f64(expected_s + 15.0);
    let mut origin = Some(origin);
    let crash_after = p.crash_after.unwrap_or(Duration::MAX);
    let run = run_load(cfg, &args, bound, crash_after, || {
        if let Some(o) = origin.take() {
            o.crash();
        }
    });
    drop(origin);
    let run = match run {
        Ok(r) => r,
        Err(e) => return super::not_run(Target::Load, name, e),
    };
    row.up = run.exit.signal.is_none() && !run.exit.killed;
    if !row.up {
        row.up_detail = format!("{}; stderr: {}", run.exit.describe, run.stderr.trim());
    }
    // A generator that exits has no "after" to compare: its peak is judged
    // against a bound instead (a check below), and the columns stay unmeasured.
    row.resources = None;
    let connections = run.get(&["connections"]);
    let replies = run.get(&["replies"]);
    let errors = run.get(&["errors", "total"]);
    let kinds: Vec<String> = run
        .report
        .as_ref()
        .and_then(|r| r.get("errors"))
        .and_then(|e| e.as_object())
        .map(|m| {
            m.iter()
                .filter(|(k, v)| *k != "total" && v.as_u64().unwrap_or(0) > 0)
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        })
        .unwrap_or_default();
    row.checks.push(Check::new(
        &format!(
            "ends by itself with exit 0 within its length plus 15 s ({:.0} s)",
            bound.as_secs_f64()
        ),
        run.exit.clean(),
        format!("{}; stderr: {}", run.exit.describe, last_line(&run.stderr)),
    ));
    row.checks.push(Check::new(
        "prints its report",
        run.report.is_some(),
        if run.report.is_some() {
            "JSON report read".to_string()
        } else {
            format!("no JSON on stdout; stderr: {}", last_line(&run.stderr))
        },
    ));
    row.checks.push(Check::new(
        "every connection accounted for: started as planned, each ending in a reply or one counted error",
        connections == p.conns && replies + errors == p.conns,
        format!("{connections} of {} started, {replies} replies, {errors} errors ({})", p.conns, kinds.join(", ")),
    ));
    row.checks.push(Check::new(
        &format!(
            "the fault is counted as what it is ({})",
            p.expected.join(" or ")
        ),
        p.expected.iter().any(|k| run.get(&["errors", k]) > 0),
        if kinds.is_empty() {
            "no errors counted".into()
        } else {
            kinds.join(", ")
        },
    ));
    row.checks.push(Check::new(
        &format!(
            "memory within {} MiB at its peak",
            LOAD_RSS_BOUND_KIB / 1024
        ),
        run.peak.anon_rss_kib > 0 && run.peak.anon_rss_kib <= LOAD_RSS_BOUND_KIB,
        format!(
            "peak {} KiB anonymous, {} descriptors",
            run.peak.anon_rss_kib, run.peak.fds
        ),
    ));
    row.exit = Some(run.exit);
    row.seconds = started.elapsed().as_secs_f64();
    row
}

fn last_line(s: &str) -> &str {
    s.trim().lines().last().unwrap_or("")
}

/// `evq load` with its origin killed halfway.
pub(crate) fn crash(cfg: &SuiteConfig, _: Target) -> FaultRow {
    run_named(cfg, "origin-crash")
}
/// `evq load` against a stalling origin.
pub(crate) fn stall(cfg: &SuiteConfig, _: Target) -> FaultRow {
    run_named(cfg, "origin-stall")
}
/// `evq load` against a chunked body that breaks off.
pub(crate) fn garbage(cfg: &SuiteConfig, _: Target) -> FaultRow {
    run_named(cfg, "origin-garbage")
}
/// `evq load` against a head that is not HTTP.
pub(crate) fn garbage_head(cfg: &SuiteConfig, _: Target) -> FaultRow {
    run_named(cfg, "origin-garbage-head")
}
/// `evq load` against resets.
pub(crate) fn reset(cfg: &SuiteConfig, _: Target) -> FaultRow {
    run_named(cfg, "origin-reset")
}
