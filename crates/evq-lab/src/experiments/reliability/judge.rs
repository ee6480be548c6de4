//! The reliability verdicts, notes and figures: pure functions of the ledgers.

use super::Records;
use crate::experiment::Judged;
use crate::plot::{Chart, Figure, Series};
use crate::verdict::ClaimCheck;
use evq_torture::CaseReport;

const EXACTLY_ONCE: &str = "every event is delivered, once, to the right queue: 0 lost, 0 duplicated, 0 stale, 0 misdelivered on every backend × {1, 2, 4} threads under churn";
const OVERFLOW: &str = "when the kernel's own event queue overflows (RT signal queue, io_uring completion ring) the backend recovers and loses nothing";
const NO_STARVATION: &str = "no ready descriptor starves: every record is read within 2 s of being written while its channel is watched";
const SHARED_LISTENERS: &str = "a listener shared by several queues (wake-one where the backend has it) hands every connection to exactly one of them";

/// The torture's claims.
pub(super) const TORTURE_CLAIMS: [&str; 4] =
    [EXACTLY_ONCE, OVERFLOW, NO_STARVATION, SHARED_LISTENERS];

/// `a` then `b` then `c`, in a const (the claims list is a const of the trait).
const fn concat<const A: usize, const B: usize, const C: usize, const N: usize>(
    a: [&'static str; A],
    b: [&'static str; B],
    c: [&'static str; C],
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < A + B {
        out[i] = b[i - A];
        i += 1;
    }
    while i < N {
        out[i] = c[i - A - B];
        i += 1;
    }
    out
}

/// Every claim, in report order: the torture's, one per fault row, the soak's.
pub(super) const CLAIMS: [&str; 63] = concat(
    TORTURE_CLAIMS,
    super::judge_faults::FAULT_CLAIMS,
    super::judge_faults::BOTH_SOAKS_CLAIMS,
);

/// What to look at in the figures.
const CAPTION_EVENTS: &str = "Events each torture case delivered and checked, per backend and consumer threads (higher means more of the ledger was exercised; every point is a case whose ledger must be clean).";
const CAPTION_DELAY: &str = "The longest any record waited, from write to read, while its channel was watched (ms, lower is better; the bound the ledger holds every backend to is 2,000 ms).";

pub(super) fn judge(r: &Records) -> Judged {
    let seeds: Vec<String> = r.plan.torture.iter().map(|c| c.seed.to_string()).collect();
    let mut judged = r.torture.judge(
        &TORTURE_CLAIMS.map(String::from),
        "evq torture did not run",
        |cases: &Vec<CaseReport>| Judged {
            checks: vec![
                exactly_once(cases),
                overflow(cases),
                no_starvation(cases),
                shared_listeners(cases),
            ],
            figures: figures(cases),
            ..Judged::default()
        },
    );
    judged.notes.push(format!(
        "evq torture: consumers (1, 2, 4 threads, a queue each) read pipes, socket pairs, TCP loopback connections and eventfds only when an event or declare_interest's returned state says so; producers write numbered records; churn from a seed modifies, revokes, closes and reuses numbers four ways, keeps old eventfd files alive and written after their number is reused, sets and cancels timers, drops and recreates queues, varies batches (1–1,024) and timeouts; a notifier storm and a connector to shared listeners run beside them. Every 300 ms the producers pause: once three waits in a row bring nothing, an armed channel with unread data is a lost event. Each case runs in its own process; forced overflow means RLIMIT_SIGPENDING {} for the RT-signal backends and a {}-entry io_uring ring. Seeds: {}.",
        evq_torture::OVERFLOW_SIGPENDING,
        evq_torture::OVERFLOW_URING_ENTRIES,
        seeds.join(", ")
    ));
    judged.commands.push(format!(
        "evq torture --quick --seed {}   # the lab's cases; without --quick: ≥ 10^6 events a case",
        r.plan.torture.first().map_or(0, |c| c.seed)
    ));
    judged
}

fn case_name(c: &CaseReport) -> String {
    format!(
        "{} × {}{}",
        c.backend,
        c.threads,
        if c.overflow { " (overflow)" } else { "" }
    )
}

/// Lost, duplicated, stale, misdelivered — everything but lateness, which has
/// its own claim.
fn broken(c: &CaseReport) -> u64 {
    c.lost
        + c.timers_lost
        + c.wakeups_lost
        + c.duplicated
        + c.stale
        + c.wrong_state
        + c.misdelivered
        + c.errors.len() as u64
}

fn exactly_once(cases: &[CaseReport]) -> ClaimCheck {
    let events: u64 = cases.iter().map(|c| c.events).sum();
    let sum = |f: fn(&CaseReport) -> u64| cases.iter().map(f).sum::<u64>();
    let failing: Vec<String> = cases
        .iter()
        .filter(|c| broken(c) > 0)
        .map(|c| {
            let first = c
                .failures
                .first()
                .map(|f| format!("{}: {}", f.kind, f.detail))
                .or_else(|| c.errors.first().cloned())
                .unwrap_or_default();
            format!("{} ({first})", case_name(c))
        })
        .collect();
    ClaimCheck::judged(
        EXACTLY_ONCE,
        format!(
            "{} cases, {events} events, {} records, {} churn operations, {} quiet checkpoints: lost {}, duplicated {}, stale {}, misdelivered {}{}",
            cases.len(),
            sum(|c| c.records),
            sum(|c| c.churn_ops),
            sum(|c| c.checkpoints),
            sum(|c| c.lost + c.timers_lost + c.wakeups_lost),
            sum(|c| c.duplicated),
            sum(|c| c.stale + c.wrong_state),
            sum(|c| c.misdelivered),
            if failing.is_empty() {
                String::new()
            } else {
                format!("; failing: {}", failing.join("; "))
            }
        ),
        (!cases.is_empty() && events > 0).then_some(failing.is_empty()),
        "holds if every case's ledger is clean (lost counts records left unread on an armed channel at a quiet checkpoint or the end, timers and notifications never seen; stale counts events for retired tokens, spent oneshots, cancelled timers, and masks that say READ over an empty descriptor); not measured without a case that delivered events",
    )
}

fn overflow(cases: &[CaseReport]) -> ClaimCheck {
    let forced: Vec<&CaseReport> = cases.iter().filter(|c| c.overflow).collect();
    let measured = forced
        .iter()
        .map(|c| {
            format!(
                "{}: {} overflows recovered, {} events, {} lost",
                c.backend,
                c.overflows_recovered,
                c.events,
                c.lost + c.timers_lost + c.wakeups_lost
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    ClaimCheck::judged(
        OVERFLOW,
        if measured.is_empty() {
            "no forced-overflow case ran".into()
        } else {
            measured
        },
        (!forced.is_empty())
            .then(|| forced.iter().all(|c| c.overflows_recovered > 0 && broken(c) == 0)),
        "holds if every forced-overflow case really overflowed (the queue counted at least one recovery) and its ledger is clean; not measured without such a case (RT signals and io_uring unavailable)",
    )
}

fn no_starvation(cases: &[CaseReport]) -> ClaimCheck {
    let worst = cases
        .iter()
        .max_by(|a, b| a.max_delay_ms.total_cmp(&b.max_delay_ms));
    let late: u64 = cases.iter().map(|c| c.late).sum();
    ClaimCheck::judged(
        NO_STARVATION,
        match worst {
            Some(w) => format!(
                "longest wait {:.0} ms ({}); records later than 2 s: {late}",
                w.max_delay_ms,
                case_name(w)
            ),
            None => "no case ran".into(),
        },
        worst.map(|_| late == 0),
        "holds if no record waited more than 2 s from write to read while its channel was watched (revoked and spent registrations excluded: their data waits on purpose); the bound is generous for a loaded 2-core machine, the longest wait is the figure to read",
    )
}

fn shared_listeners(cases: &[CaseReport]) -> ClaimCheck {
    let made: u64 = cases.iter().map(|c| c.connections).sum();
    let lost: u64 = cases.iter().map(|c| c.connections_lost).sum();
    let dup: u64 = cases.iter().map(|c| c.connections_duplicated).sum();
    let wake_one: Vec<String> = cases
        .iter()
        .filter(|c| c.backend == "epoll" && c.threads > 1 && c.connections > 0)
        .map(|c| format!("{} threads {:.2}", c.threads, c.wakeups_per_connection))
        .collect();
    ClaimCheck::judged(
        SHARED_LISTENERS,
        format!(
            "{made} connections: {lost} never accepted, {dup} accepted twice; listener events per connection on epoll (wake-one): {}",
            if wake_one.is_empty() { "-".into() } else { wake_one.join(", ") }
        ),
        (made > 0).then_some(lost == 0 && dup == 0),
        "holds if every connection made to the shared listeners was accepted exactly once; wake-ups per connection are shown, not judged (EPOLLEXCLUSIVE wakes one or more)",
    )
}

fn figures(cases: &[CaseReport]) -> Vec<Figure> {
    let plain: Vec<&CaseReport> = cases.iter().filter(|c| !c.overflow).collect();
    let names = crate::plot::distinct(plain.iter().map(|c| c.backend.as_str()));
    let series = |y: fn(&CaseReport) -> f64| {
        Series::named(
            &names,
            &plain,
            |c: &&CaseReport| c.backend.as_str(),
            move |c| Some((c.threads as f64, y(c))),
        )
    };
    vec![
        Figure::new(
            "reliability-events",
            CAPTION_EVENTS,
            Chart::linear(
                "evq torture: events checked per case".into(),
                "consumer threads",
                "events",
                series(|c| c.events as f64),
            )
            .evq_where(|_| true),
        ),
        Figure::new(
            "reliability-delay",
            CAPTION_DELAY,
            Chart::linear(
                "evq torture: longest wait from write to read".into(),
                "consumer threads",
                "ms",
                series(|c| c.max_delay_ms),
            )
            .evq_where(|_| true),
        ),
    ]
}

#[cfg(test)]
mod tests;
