//! The overload figures, notes and commands: pure functions of the records.

use super::judge::{keeps_up, JUDGED};
use super::measure::{
    Point, Records, BUDGET_PERIOD, BUDGET_RUNTIME, FAST_REFUSAL_MS, NGINX, NGINX_LIMIT_CONN,
    NGINX_WORK_BYTES, PROBE_CONNECTIONS, REPLY_SIZE, SERVE, SMALL_BACKLOG, WORK, WORK_RIG,
};
use crate::plot::{Chart, Figure, Series};

fn label(p: &Point) -> String {
    let who = match p.server.as_str() {
        SERVE => String::new(),
        NGINX => format!("{NGINX} "),
        other => format!("{} ", other.trim_start_matches("evq ")),
    };
    let what = if p.server == NGINX {
        p.policy.clone()
    } else if p.server.ends_with("--io completion") {
        // No backend: io_uring completions.
        format!("{} ×{}", p.policy, p.threads)
    } else {
        format!("{} {}×{}", p.policy, p.backend, p.threads)
    };
    if p.rig == WORK_RIG {
        format!("{who}{what}")
    } else {
        format!("{who}{what} ({} rig)", p.rig)
    }
}

/// One series per (policy, backend, threads), x = offered over capacity.
fn lines(points: &[Point], y: fn(&Point) -> f64) -> Vec<Series> {
    let mut names: Vec<(String, bool)> = Vec::new();
    for p in points {
        if !names.iter().any(|(n, _)| *n == label(p)) {
            names.push((label(p), p.policy == JUDGED && p.server != NGINX));
        }
    }
    names
        .into_iter()
        .map(|(name, evq)| {
            let mut pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| label(p) == name)
                .map(|p| (p.offered_over_capacity, y(p)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                evq,
                name,
                points: pts,
            }
        })
        .collect()
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// Goodput, p99 and how unserved clients learned of it, against offered load.
pub fn figures(r: &Records) -> Vec<Figure> {
    let t = r.plan.timeout_s;
    let x = "offered load (× capacity)";
    vec![
        Figure::new(
            "overload-goodput",
            "Goodput (replies within the client timeout) as offered load passes capacity: a policy that holds stays near 1.0; no control falls.",
            Chart::linear(format!("under overload: goodput (timeout {t} s)"), x, "goodput (× capacity)", lines(&r.points, |p| p.goodput_over_capacity)),
        ),
        Figure::new(
            "overload-p99",
            "p99 latency of the replies that were served: a policy that refuses early keeps it near the unloaded value.",
            Chart::linear("under overload: p99 of served replies".into(), x, "p99 (ms)", lines(&r.points, |p| p.p99_ms)),
        ),
        Figure::new(
            "overload-refused-fast",
            "Share of all clients refused within 10 ms (reset or 503): they learn at once and can go elsewhere.",
            Chart::linear("clients refused fast".into(), x, "refused < 10 ms (% of clients)", lines(&r.points, |p| share(p.refused_fast, p.conns))),
        ),
        Figure::new(
            "overload-timed-out",
            "Share of all clients that timed out: they waited the whole timeout for nothing.",
            Chart::linear(format!("clients timed out ({t} s)"), x, "timed out (% of clients)", lines(&r.points, |p| share(p.timed_out, p.conns))),
        ),
    ]
}

/// Method notes.
pub fn notes(r: &Records) -> Vec<String> {
    let pl = &r.plan;
    let probes = |rig: &str| {
        let mut all: Vec<String> = Vec::new();
        if pl.rigs.first().map(String::as_str) == Some(rig) {
            all.extend(r.probes.iter().map(|(b, t, c)| format!("{b}×{t} {c:.0}/s")));
        }
        all.extend(
            r.rig_probes
                .iter()
                .filter(|(g, ..)| g == rig)
                .map(|(_, b, t, c)| format!("{b}×{t} {c:.0}/s")),
        );
        all.join(", ")
    };
    let mut notes = Vec::new();
    for rig in &pl.rigs {
        let how = if rig == WORK_RIG {
            format!("every request costs {} µs of CPU (`--work-us {}`, an application's work, {REPLY_SIZE} B reply), the server's threads run on CPUs apart from the load client's (on two CPUs, all of them share one) — a server busy all the time it is overloaded; the claims are judged on this rig", WORK.as_micros(), WORK.as_micros())
        } else {
            format!("a {REPLY_SIZE} B static reply, each worker thread on a CPU budget of {} µs per {} µs (SCHED_DEADLINE; the rig of earlier rounds). The kernel enforces the budget at its tick (4 ms at HZ=250), so the server runs in bursts and then stands still for tens of milliseconds while connections queue with the listener open — a container throttled by its CPU quota; `pulse` refuses free only while it is not listening, so there it falls back to resetting the queue as `gate` does", BUDGET_RUNTIME.as_micros(), BUDGET_PERIOD.as_micros())
        };
        notes.push(format!("{rig} rig: {how}. Capacity probe: {:.1} s closed loop of {PROBE_CONNECTIONS} connections: {}.", pl.probe_s, probes(rig)));
    }
    let others: Vec<String> = r
        .rig_probes
        .iter()
        .filter(|(g, ..)| g.contains(' '))
        .map(|(g, b, t, c)| format!("{g} {b}×{t} {c:.0}/s"))
        .collect();
    if !pl.proxy_policies.is_empty() || !pl.nginx.is_empty() {
        notes.push(format!("Beside `evq serve`: `evq proxy` (policies {:?}) in this process in front of an `evq serve` origin without work (and `evq proxy --io completion`, policies none and pulse, where the kernel has the completion API; `evq serve --io completion` likewise, on the server's rig, beside `evq serve`), the proxy spending {} µs of CPU on each request (`--work-us`, a proxy's own work such as TLS), proxy and origin on the server's CPU; and nginx (configurations {:?}: `default` as the lab configures it for every comparison, backlog 4096; `tuned` as a user tunes it against overload, `listen … backlog={SMALL_BACKLOG}` and `limit_conn` of {NGINX_LIMIT_CONN} connections answered with 503), one worker pinned to the server's CPU, whose work is `gzip_comp_level 9` of a {} KiB text for each request (`Accept-Encoding: gzip`), near evq's {} µs. Their capacities: {}.", pl.proxy_policies, WORK.as_micros(), pl.nginx, NGINX_WORK_BYTES / 1024, WORK.as_micros(), if others.is_empty() { "not probed".to_string() } else { others.join(", ") }));
    }
    notes.push(format!(
        "Overload: `evq serve` in this process, one listening socket per thread (`--accept reuseport`), so that one `evq load` thread can offer it {:?} × its capacity. Each point: a fresh server, an open loop of one request per connection for {} s, client timeout {} s (also the servers' `--deadline` and `--late-after` for every policy but none), refusals within {FAST_REFUSAL_MS} ms count as fast. Goodput counts the schedule's last three quarters; the p99 and fast-refusal claims count the requests due in them (the first quarter is the overload's onset). Capacity for the ratios = the peak goodput of the `none` sweep of the same (rig, backend, threads) in this run. Policies are rotated from point to point. One run per point.",
        pl.multiples,
        pl.window_s,
        pl.timeout_s
    ));
    let behind: Vec<String> = r
        .points
        .iter()
        .filter(|p| !keeps_up(p))
        .map(|p| {
            format!(
                "{} at {}× (started {:.0} of {:.0}/s)",
                label(p),
                p.multiple,
                p.client_started_per_s,
                p.offered_per_s
            )
        })
        .collect();
    if !behind.is_empty() {
        notes.push(format!("The client fell behind its schedule (< 90% started) at: {}; claims on those points are not measured.", behind.join("; ")));
    }
    let mut refusals = r.refusals.clone();
    refusals.sort();
    refusals.dedup();
    if !refusals.is_empty() {
        notes.push(format!(
            "The server's threads were not placed everywhere as the rig wants: {}.",
            refusals.join("; ")
        ));
    }
    notes.push(format!("Offered rates are capped at {:.0}/s by the descriptor limit (client and server share this process).", r.rate_cap));
    notes.push("Where the capacity goes at high load, per point in the raw data: server accepts vs admitted (accept cost of refused connections), responses sent vs replies received in time (work for clients that gave up; `server_served_late`), timeouts while connecting (listen-queue drops and SYN retries).".into());
    notes.push("The machine is shared with other work; compare the series with each other (they ran interleaved), not with other machines.".into());
    notes
}

/// The commands that reproduce a point.
pub fn commands(r: &Records) -> Vec<String> {
    vec![
        "evq serve --backend B --threads T --accept reuseport --reply-size 1024 --work-us 400 --overload none|seed001|gate|codel|pulse --deadline D --late-after D --listen 127.0.0.1:P   (work rig; quota rig: no --work-us, the threads on SCHED_DEADLINE 100 µs per 1 ms)".into(),
        "evq serve --io completion --reply-size 1024 --work-us 400 --overload none|pulse --late-after D --listen 127.0.0.1:P   (on io_uring completions; no --deadline: its pulse takes none)".into(),
        "evq proxy --origin 127.0.0.1:O --work-us 400 --overload none|seed001|pulse --deadline D --late-after D --listen 127.0.0.1:P   (in front of evq serve --listen 127.0.0.1:O)".into(),
        "evq proxy --io completion --origin 127.0.0.1:O --work-us 400 --overload none|pulse --listen 127.0.0.1:P   (the same, on io_uring completions; no --deadline: its pulse takes none)".into(),
        "nginx -c nginx.conf   (one worker; gzip on; gzip_comp_level 9; gzip_types *; tuned: listen … backlog=64; limit_conn_zone $server_name zone=all:1m; limit_conn all 64; limit_conn_status 503; the load asks for /work.txt with Accept-Encoding: gzip)".into(),
        format!(
            "evq load --server 127.0.0.1 --port P --rate R --num-conns R×{} --num-calls 1 --timeout {} --fast-refusal {} --warm-up {} --hog   (R = {:?} × the probed capacity)",
            r.plan.window_s,
            r.plan.timeout_s,
            FAST_REFUSAL_MS / 1000.0,
            r.plan.window_s / 4.0,
            r.plan.multiples
        ),
    ]
}
