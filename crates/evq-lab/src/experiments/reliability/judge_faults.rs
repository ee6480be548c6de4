//! The fault table's and the soak's verdicts: one claim per fault row (its five
//! columns and its own checks), three for the soak. Pure functions of the
//! records.

use super::Records;
use crate::experiment::{Judged, Outcome};
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;
use evq_faults::soak::{SoakReport, FD_SLOPE_MAX_PER_MIN, RSS_SLOPE_MAX_KIB_PER_MIN};
use evq_faults::FaultRow;

/// One claim per row of `evq faults`, in its order; each starts with the
/// row's id (a test keeps the two lists in step).
pub(super) const FAULT_CLAIMS: [&str; 55] = [
    "serve/reset-mid-request: clients that reset mid-request leave evq serve up, its live clients at ≥ 95% of their throughput, descriptors and memory at their baseline and the CPU idle afterwards",
    "serve/reset-mid-response: clients that reset mid-response (8 MiB file) leave evq serve up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve/vanish: clients that vanish without FIN or RST are reclaimed by evq serve's timeouts; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve/request-then-close: clients that send a request and close at once leave evq serve up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve/trickle: clients trickling a head one byte a second from 127.0.0.2 (10,000 in the full run) are all accepted and held, live clients keep ≥ 95%, descriptors and memory back, CPU idle",
    "serve/pipeline-100: 100 pipelined requests are all answered in order; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve/huge-headers: a 1 MiB request head is refused (431 or the connection ended), never answered 2xx or left hanging; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve/sigterm: SIGTERM under load: the listener closes at once, busy keep-alive connections are told to close, replies in flight finish whole, exit 0 within the grace period",
    "proxy/reset-mid-request: clients that reset mid-request leave evq proxy up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy/reset-mid-response: clients that reset mid-response (8 MiB from the origin) leave evq proxy up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy/vanish: clients that vanish without FIN or RST are reclaimed by evq proxy's timeouts; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy/request-then-close: clients that send a request and close at once leave evq proxy up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy/trickle: tricklers from 127.0.0.2 are all accepted and held by evq proxy, live clients keep ≥ 95%, descriptors and memory back, CPU idle",
    "proxy/pipeline-100: 100 pipelined requests through evq proxy are all answered in order with their own replies; live clients at ≥ 95%, descriptors and memory back",
    "proxy/huge-headers: evq proxy answers a 1 MiB head with 431 (issue 19 item 5), never 2xx or a hang; live clients at ≥ 95%, descriptors and memory back",
    "proxy/sigterm: SIGTERM under load: evq proxy closes its listener at once, tells busy connections to close, finishes replies in flight, exits 0 within its bound",
    "serve/descriptor-exhaustion: with RLIMIT_NOFILE at N and 5N clients, evq serve does not spin, keeps its live clients answered, serves a newcomer (idle keep-alive reclaimed, issue 19 item 3) and recovers at once when descriptors free up",
    "proxy/descriptor-exhaustion: with RLIMIT_NOFILE at N and 5N clients, evq proxy does not spin, keeps its live clients answered (origin connects make room too), serves a newcomer (idle clients reclaimed before pooled origin connections) and recovers at once when descriptors free up",
    "serve/file-truncated: a file truncated while being sent gives a whole reply, a cut connection or a 500 — never a 200 shorter than its Content-Length afterwards (issue 19 item 4); the new state served once the cache expires",
    "serve/file-replaced: a file replaced while being sent gives whole old or whole new replies, and the new file once the cache expires",
    "serve/file-removed: a file removed while being sent finishes from the open file; 404 once the cache expires",
    "proxy/origin-crash-restart: the origin killed mid-run gives prompt 502s (no hangs), and evq proxy serves again within 1 s of a restart at ≥ 95% of its throughput before the crash",
    "proxy/origin-stall: an origin that never answers gives 504 within --origin-timeout + 2 s; other clients keep ≥ 95%, descriptors and memory back",
    "proxy/origin-garbage: garbage from the origin (bad chunk, not HTTP, unrequested response, reset, close) becomes a 502 or a cut connection, never a hang or a smuggled reply; other clients keep ≥ 95%",
    "proxy/origin-answers-early: a body the origin answered before it came (a 401 sent at once) is never read as the client's next request — the answer says Connection: close, no second response follows, the connection closes; other clients keep ≥ 95%",
    "load/origin-crash: evq load with its origin killed halfway ends on time with exit 0, every connection counted as a reply or an error of the right kind, memory within its bound",
    "load/origin-stall: evq load against an origin that never answers counts client timeouts, ends on time with exit 0, memory within its bound",
    "load/origin-garbage: evq load against a chunked body that breaks off counts the error, ends with exit 0, memory within its bound",
    "load/origin-garbage-head: evq load against bytes that are not HTTP counts bad replies, ends with exit 0, memory within its bound",
    "load/origin-reset: evq load against resets counts them (no SIGPIPE death), ends with exit 0, memory within its bound",
    "serve-completion/reset-mid-request: evq serve --io completion (io_uring completions, issue 17) under clients that reset mid-request: up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/reset-mid-response: evq serve --io completion under clients that reset mid-response (8 MiB file): up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/vanish: clients that vanish without FIN or RST are reclaimed by evq serve --io completion's timeouts (its sweep); live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/request-then-close: clients that send a request and close at once leave evq serve --io completion up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/trickle: tricklers from 127.0.0.2 are all accepted and held by evq serve --io completion, live clients keep ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/pipeline-100: 100 pipelined requests are all answered in order by evq serve --io completion; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/huge-headers: evq serve --io completion refuses a 1 MiB request head (431 or the connection ended), never 2xx or a hang; live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "serve-completion/sigterm: SIGTERM under load: evq serve --io completion closes its listener at once, tells busy keep-alive connections to close, finishes replies in flight whole, exits 0 within the grace period",
    "serve-completion/descriptor-exhaustion: with RLIMIT_NOFILE at N and 5N clients, evq serve --io completion does not spin (its multishot accept waits for a descriptor), keeps its live clients answered, serves a newcomer (idle keep-alive reclaimed) and recovers at once when descriptors free up",
    "serve-completion/file-truncated: a file truncated while evq serve --io completion sends it gives a whole reply, a cut connection or a 500 — never a 200 shorter than its Content-Length; the new state served once the cache expires",
    "serve-completion/file-replaced: a file replaced while evq serve --io completion sends it gives whole old or whole new replies, and the new file once the cache expires",
    "serve-completion/file-removed: a file removed while evq serve --io completion sends it finishes from the open file; 404 once the cache expires",
    "proxy-completion/reset-mid-request: evq proxy --io completion (io_uring completions, issue 17) under clients that reset mid-request: up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy-completion/reset-mid-response: evq proxy --io completion under clients that reset mid-response (8 MiB from the origin): up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy-completion/vanish: clients that vanish without FIN or RST are reclaimed by evq proxy --io completion's timeouts (its sweep); live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy-completion/request-then-close: clients that send a request and close at once leave evq proxy --io completion up, live clients at ≥ 95%, descriptors and memory back, CPU idle",
    "proxy-completion/trickle: tricklers from 127.0.0.2 are all accepted and held by evq proxy --io completion, live clients keep ≥ 95%, descriptors and memory back, CPU idle",
    "proxy-completion/pipeline-100: 100 pipelined requests through evq proxy --io completion are all answered in order with their own replies; live clients at ≥ 95%, descriptors and memory back",
    "proxy-completion/huge-headers: evq proxy --io completion answers a 1 MiB head with 431, never 2xx or a hang; live clients at ≥ 95%, descriptors and memory back",
    "proxy-completion/sigterm: SIGTERM under load: evq proxy --io completion closes its listener at once, tells busy connections to close, finishes replies in flight, exits 0 within its bound",
    "proxy-completion/descriptor-exhaustion: with RLIMIT_NOFILE at N and 5N clients, evq proxy --io completion does not spin (its multishot accept waits), keeps its live clients answered (spare descriptors held for origin connects), serves a newcomer and recovers at once when descriptors free up",
    "proxy-completion/origin-crash-restart: the origin killed mid-run gives prompt 502s (no hangs), and evq proxy --io completion serves again within 1 s of a restart at ≥ 95% of its throughput before the crash",
    "proxy-completion/origin-stall: an origin that never answers gives 504 within --origin-timeout + 2 s through evq proxy --io completion; other clients keep ≥ 95%, descriptors and memory back",
    "proxy-completion/origin-garbage: garbage from the origin becomes a 502 or a cut connection through evq proxy --io completion, never a hang or a smuggled reply; other clients keep ≥ 95%",
    "proxy-completion/origin-answers-early: a body the origin answered before it came is never read as the client's next request by evq proxy --io completion — Connection: close, no second response, the connection closed; other clients keep ≥ 95%",
];

const SOAK_FLAT: &str = "over the soak, evq serve's and evq proxy's anonymous memory and descriptor count stay flat (after the first tenth: ≤ 100 KiB/min and ≤ 1 descriptor/min)";
const SOAK_ANSWERED: &str = "over the soak, every valid request (keep-alive, new connection, slow) to evq serve and evq proxy is answered, none with a 5xx";
const SOAK_LOAD: &str =
    "evq load in the soak stays within its memory bound (64 MiB), gets no 5xx, and exits 0";

/// The soak's claims, in report order.
pub(super) const SOAK_CLAIMS: [&str; 3] = [SOAK_FLAT, SOAK_ANSWERED, SOAK_LOAD];

const SOAK_COMPLETION_FLAT: &str = "over the soak on io_uring completions, evq serve --io completion's and evq proxy --io completion's anonymous memory and descriptor count stay flat (after the first tenth: ≤ 100 KiB/min and ≤ 1 descriptor/min)";
const SOAK_COMPLETION_ANSWERED: &str = "over the soak on io_uring completions, every valid request (keep-alive, new connection, slow) to evq serve --io completion and evq proxy --io completion is answered, none with a 5xx";
const SOAK_COMPLETION_LOAD: &str = "evq load --io completion in the soak on completions stays within its memory bound (64 MiB), gets no 5xx, and exits 0";

/// The completion soak's claims, in report order: the soak's, for the loops
/// on io_uring completions.
pub(super) const SOAK_COMPLETION_CLAIMS: [&str; 3] = [
    SOAK_COMPLETION_FLAT,
    SOAK_COMPLETION_ANSWERED,
    SOAK_COMPLETION_LOAD,
];

/// Both soaks' claims, in report order.
pub(super) const BOTH_SOAKS_CLAIMS: [&str; 6] = [
    SOAK_FLAT,
    SOAK_ANSWERED,
    SOAK_LOAD,
    SOAK_COMPLETION_FLAT,
    SOAK_COMPLETION_ANSWERED,
    SOAK_COMPLETION_LOAD,
];

/// The row a claim is about.
fn claim_id(claim: &str) -> &str {
    claim.split(':').next().unwrap_or("")
}

fn row_measured(r: &FaultRow) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &r.throughput {
        if let (Some(k), Some(b), Some(f)) = (t.ratio(), t.fault_free_rate(), t.fault_rate()) {
            let offered = t
                .offered_rate
                .map(|o| format!("offered {o:.0}/s, "))
                .unwrap_or_default();
            parts.push(format!(
                "live clients kept {:.0}% ({offered}{b:.0} → {f:.0} replies/s, fault-free spread {:.0}%)",
                k * 100.0,
                t.noise().unwrap_or(0.0) * 100.0
            ));
        }
    }
    if let Some(res) = &r.resources {
        parts.push(format!(
            "descriptors {} → peak {} → {}, memory {} → peak {} → {} KiB",
            res.baseline.fds,
            res.peak.fds,
            res.after.fds,
            res.baseline.anon_rss_kib,
            res.peak.anon_rss_kib,
            res.after.anon_rss_kib
        ));
    }
    if let Some(c) = r.idle_cpu {
        parts.push(format!("{:.1}% of a CPU idle", c * 100.0));
    }
    if let Some(e) = &r.exit {
        parts.push(format!("SIGTERM/end: {}", e.describe));
    }
    for c in &r.checks {
        parts.push(format!(
            "{} {}: {}",
            if c.passed { "✓" } else { "✗" },
            c.name,
            c.detail
        ));
    }
    let failures = r.failures();
    if !failures.is_empty() {
        parts.push(format!("failed: {}", failures.join("; ")));
    }
    parts.join("; ")
}

fn fault_checks(rows: &[FaultRow]) -> Vec<ClaimCheck> {
    FAULT_CLAIMS
        .iter()
        .map(|claim| {
            let id = claim_id(claim);
            match rows.iter().find(|r| format!("{}/{}", r.target, r.fault) == id) {
                None => ClaimCheck::judged(claim, "not in this run's plan".into(), None, "not measured: the row did not run"),
                Some(r) if r.error.is_some() => ClaimCheck::judged(
                    claim,
                    format!("did not run: {}", r.error.clone().unwrap_or_default()),
                    None,
                    "not measured: the trial could not start or finish (the reason is shown)",
                ),
                Some(r) => ClaimCheck::judged(
                    claim,
                    row_measured(r),
                    Some(r.passed()),
                    "holds if the program stayed up (and answered a fresh request), the live clients kept ≥ 95% of their fault-free throughput (measured side by side in the same run), descriptors ended at or under their baseline, memory within 2 MiB of it, ≤ 5% of a CPU with no clients, exit 0 on SIGTERM where stopped so, and every check of the row held; a ✗ tagged with an issue item is that item's known defect",
                ),
            }
        })
        .collect()
}

/// The soak's three verdicts on `s`, under `claims` (flat, answered, load).
fn soak_checks(s: &SoakReport, claims: [&str; 3]) -> Vec<ClaimCheck> {
    let [claim_flat, claim_answered, claim_load] = claims;
    let flat = s
        .programs
        .iter()
        .map(|p| {
            format!(
                "{}: memory {:+.1} KiB/min (peak {} KiB), descriptors {:+.2}/min over {} samples",
                p.program,
                p.rss_slope_kib_per_min,
                p.peak_rss_kib,
                p.fd_slope_per_min,
                p.samples.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let flat_holds = (!s.programs.is_empty()).then(|| {
        s.programs.iter().all(|p| {
            p.up && p.rss_slope_kib_per_min <= RSS_SLOPE_MAX_KIB_PER_MIN
                && p.fd_slope_per_min <= FD_SLOPE_MAX_PER_MIN
        })
    });
    let answered = s
        .programs
        .iter()
        .map(|p| {
            let v = p.valid_total();
            format!(
                "{}: {} valid requests, {} ok, {} 5xx, {} wrong, {} unanswered",
                p.program, v.sent, v.ok, v.status_5xx, v.wrong, v.unanswered
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let answered_holds = (!s.programs.is_empty()).then(|| {
        s.programs.iter().all(|p| {
            let v = p.valid_total();
            v.sent > 0 && v.status_5xx == 0 && v.unanswered == 0 && v.wrong == 0
        })
    });
    let (load_measured, load_holds) = match &s.load {
        Some(l) => (
            format!(
                "{} connections, {} 2xx, {} 5xx, peak {} KiB, memory {:+.1} KiB/min, {}",
                l.connections,
                l.replies_2xx,
                l.replies_5xx,
                l.peak_rss_kib,
                l.rss_slope_kib_per_min,
                l.exit
            ),
            Some(
                l.clean
                    && l.replies_5xx == 0
                    && l.peak_rss_kib <= evq_faults::suite::LOAD_RSS_BOUND_KIB,
            ),
        ),
        None => ("evq load did not run".into(), None),
    };
    vec![
        ClaimCheck::judged(
            claim_flat,
            format!("{:.0} s: {flat}", s.seconds),
            flat_holds,
            "holds if both programs ran to the end and the least-squares slopes after the first tenth of the run stay under the bounds; the 60-second run the lab makes by default can only show a coarse slope, `evq soak` (10 minutes) the figure to read",
        ),
        ClaimCheck::judged(
            claim_answered,
            answered,
            answered_holds,
            "holds if every valid request was answered 2xx with the right body (resets and malformed requests ran beside them and are not counted)",
        ),
        ClaimCheck::judged(
            claim_load,
            load_measured,
            load_holds,
            "holds if evq load exited 0 with its report, saw no 5xx, and its anonymous memory never passed 64 MiB",
        ),
    ]
}

const CAPTION_SOAK_RSS: &str = "Anonymous resident memory of evq serve and evq proxy over the soak (flat means no leak; the first tenth is warm-up and left out of the slope).";
const CAPTION_SOAK_FDS: &str = "Open descriptors of evq serve and evq proxy over the soak (live connections come and go; the slope, not a single reading, is judged).";

/// Memory and descriptors of each program against time: a line per program;
/// `stem` and `title` name the soak (`reliability-soak`, `evq soak`).
fn soak_figures(s: &SoakReport, stem: &str, title: &str) -> Vec<Figure> {
    let series = |y: fn(&evq_faults::soak::Sample) -> f64| -> Vec<Series> {
        s.programs
            .iter()
            .map(|p| Series {
                name: format!("evq {}", p.program),
                points: p.samples.iter().map(|x| (x.t, y(x))).collect(),
                evq: true,
            })
            .collect()
    };
    vec![
        Figure::new(
            &format!("{stem}-rss"),
            CAPTION_SOAK_RSS,
            Chart::linear(
                format!("{title}: anonymous memory"),
                "seconds",
                "KiB",
                series(|x| x.anon_rss_kib as f64),
            ),
        ),
        Figure::new(
            &format!("{stem}-fds"),
            CAPTION_SOAK_FDS,
            Chart::linear(
                format!("{title}: open descriptors"),
                "seconds",
                "descriptors",
                series(|x| x.fds as f64),
            ),
        ),
    ]
}

pub(super) fn judge(r: &Records) -> Judged {
    let claims_f: Vec<String> = FAULT_CLAIMS.iter().map(|c| c.to_string()).collect();
    let mut j = r.faults.judge(
        &claims_f,
        "evq faults did not run",
        |rows: &Vec<FaultRow>| Judged {
            checks: fault_checks(rows),
            ..Judged::default()
        },
    );
    let claims_s: Vec<String> = SOAK_CLAIMS.iter().map(|c| c.to_string()).collect();
    j.extend(
        r.soak
            .judge(&claims_s, "evq soak did not run", |s: &SoakReport| Judged {
                checks: soak_checks(s, SOAK_CLAIMS),
                figures: soak_figures(s, "reliability-soak", "evq soak"),
                ..Judged::default()
            }),
    );
    let claims_c: Vec<String> = SOAK_COMPLETION_CLAIMS
        .iter()
        .map(|c| c.to_string())
        .collect();
    j.extend(r.soak_completion.judge(
        &claims_c,
        "evq soak --io completion did not run",
        |s: &SoakReport| Judged {
            checks: soak_checks(s, SOAK_COMPLETION_CLAIMS),
            figures: soak_figures(s, "reliability-soak-completion", "evq soak --io completion"),
            ..Judged::default()
        },
    ));
    if let Outcome::Measured(rows) = &r.faults {
        j.notes.push(format!(
            "evq faults ({} form): each row starts the program as a child on an ephemeral port, warms it up with 4 live keep-alive clients (a closed loop checking every body), reads its baseline with nobody connected, then alternates fault-free and fault windows while the live clients run; throughput is compared within the same run. Table:\n{}",
            if r.plan.faults_short { "short" } else { "full" },
            evq_faults::table(rows)
        ));
    }
    if let Outcome::Measured(s) = &r.soak {
        j.notes.push(format!("evq soak: {}", s.mix));
    }
    if let Outcome::Measured(s) = &r.soak_completion {
        j.notes.push(format!("evq soak --io completion: {}", s.mix));
    }
    j.commands.push(format!(
        "evq faults{}   # the fault table; --only serve/trickle for one row, --json for the rows",
        if r.plan.faults_short { " --quick" } else { "" }
    ));
    j.commands.push(format!(
        "evq soak --seconds {:.0}   # without --seconds: the 10-minute soak",
        r.plan.soak_seconds
    ));
    if r.plan.soak_completion_seconds > 0.0 {
        j.commands.push(format!(
            "evq soak --io completion --seconds {:.0}   # serve, proxy and load on io_uring completions",
            r.plan.soak_completion_seconds
        ));
    }
    j
}

#[cfg(test)]
mod tests;
