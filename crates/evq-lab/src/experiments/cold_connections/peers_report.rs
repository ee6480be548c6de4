//! The peer comparison's figures, method notes and commands: pure functions of
//! the records.

use super::peers::{warm_up, Point, CLIENT_THREADS, DISTURBED, HOT_CONNECTIONS};
use super::peers_judge::{rps, View};
use crate::plot::{Chart, Figure, Series};
use crate::stats::{spread, Spread};
use std::time::Duration;

const BY_COLD: &str = "evq serve, on readiness and on io_uring completions (solid), against nginx, h2o and lighttpd (dashed), same files, one worker each, higher is better: a line that falls as cold connections grow pays for idle connections.";
const BY_SIZE: &str = "Replies/s by file size with no cold connections, higher is better: evq serve (solid) against the peer servers (dashed).";

/// Replies/s against cold connections, and (with several sizes) against size.
pub(super) fn figures(v: &View) -> Vec<Figure> {
    let plan = &v.r.plan;
    // A replies/s chart with a line per server over `xs`, evq's solid.
    let chart = |stem: &str,
                 caption: &str,
                 title: String,
                 x_label: &str,
                 xs: &[usize],
                 at: &dyn Fn(&str, usize) -> Option<f64>| {
        let series = v
            .names
            .iter()
            .map(|&n| Series {
                name: n.to_string(),
                evq: n.starts_with("evq"),
                points: xs
                    .iter()
                    .filter_map(|&x| at(n, x).map(|r| (x as f64, r)))
                    .collect(),
            })
            .collect();
        let chart = Chart {
            title,
            x_label: x_label.into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series,
        };
        Figure::new(stem, caption, chart)
    };
    let mut figures = vec![chart(
        "cold-connections-peers",
        BY_COLD,
        format!(
            "replies/s vs cold connections, {} B files, one worker each (median)",
            v.big
        ),
        "cold (idle) connections",
        &plan.colds,
        &|n, c| v.med(n, c, v.big, rps),
    )];
    if plan.sizes.len() > 1 {
        figures.push(chart(
            "cold-connections-peers-sizes",
            BY_SIZE,
            format!(
                "replies/s per file size at {} cold connections (median)",
                v.lo
            ),
            "file size (bytes)",
            &plan.sizes,
            &|n, s| v.med(n, v.lo, s, rps),
        ));
    }
    figures
}

/// The method notes, in report order.
pub(super) fn notes(v: &View) -> Vec<String> {
    let mut notes = v.r.missing_why.clone();
    notes.push(client_check(v));
    notes.push(same_content(v));
    notes.push(method(v));
    notes.push(format!(
        "Machine load while the peer comparison ran (1/5/15-min load average): {} at the start, {} at the end; client and servers share the machine's cores with whatever else runs, so compare servers within this run, not with other runs. The comparison took {:.0} s.",
        v.r.loadavg_start, v.r.loadavg_end, v.r.seconds
    ));
    notes.push(if v.names.contains(&"lighttpd") {
        format!(
            "lighttpd beside evq: evq/lighttpd replies/s at {} cold {}; lighttpd's change at the largest cold count it held: {}; bytes per idle connection {}.",
            v.lo,
            v.ratios_text("lighttpd"),
            v.drop_of("lighttpd")
                .map_or("-".into(), |(d, c)| format!("{:+.1}% at {c}", -100.0 * d)),
            v.bytes_per_conn("lighttpd", v.hi)
                .map_or("-".into(), |b| format!("{b:.0} B")),
        )
    } else {
        "lighttpd is not installed here (scripts/install-peers.sh installs it).".into()
    });
    notes.push(v.r.placement.clone());
    notes
}

/// The spread of one measure over a server's measured points.
fn share(v: &View, n: &str, f: fn(&Point) -> f64) -> Option<Spread> {
    spread(measured(v).filter(|p| p.server == n).map(f).collect())
}

fn measured<'a>(v: &View<'a>) -> impl Iterator<Item = &'a Point> {
    v.r.points.iter().filter(|p| p.skipped.is_none())
}

/// Is the client the bottleneck?
fn client_check(v: &View) -> String {
    let cpu_text = v
        .names
        .iter()
        .map(|n| {
            let c = share(v, n, |p| p.client_cpu_share);
            let s = share(v, n, |p| p.server_cpu_share);
            match c.zip(s) {
                Some((c, s)) => format!(
                    "{n}: client {:.0}% ({:.0}–{:.0}%), server {:.0}%",
                    100.0 * c.median,
                    100.0 * c.min,
                    100.0 * c.max,
                    100.0 * s.median
                ),
                None => format!("{n}: -"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    // Points where the single client thread was near a full core, per server.
    let saturated: Vec<String> = v
        .names
        .iter()
        .filter_map(|n| {
            let all = measured(v).filter(|p| p.server == *n).count();
            let hot = measured(v)
                .filter(|p| p.server == *n && p.client_cpu_share >= 0.9)
                .count();
            (hot > 0).then(|| format!("{n} {hot} of {all}"))
        })
        .collect();
    format!(
        "Load client check (CPU per wall second of the load, median over points; 100% = one core): {cpu_text}. {} {}",
        if saturated.is_empty() {
            "The client stayed below 90% of a core at every point, so it is not what limited the rates.".to_string()
        } else {
            format!(
                "The single client thread used 90% of a core or more at some points ({}): there the client, not the server, may have set the rate, which understates that server.",
                saturated.join(", ")
            )
        },
        others(v)
    )
}

/// What other processes took while the loads ran.
fn others(v: &View) -> String {
    let busy_max = v
        .names
        .iter()
        .filter_map(|n| share(v, n, |p| p.client_cpu_share + p.server_cpu_share))
        .map(|s| s.median)
        .fold(0.0f64, f64::max);
    let low = spread(measured(v).map(|p| p.others_cpu_low).collect());
    let high = spread(measured(v).map(|p| p.others_cpu_high).collect());
    let irq = spread(measured(v).map(|p| p.softirq_cpu_share).collect());
    match low.zip(high).zip(irq) {
        Some(((lo, hi), q)) => format!(
            "Other processes used between {:.0}% and {:.0}% of a core (medians of a lower and an upper bound; largest upper bound {:.0}%) of the machine's {} while the loads ran{}; the machine's interrupt and softirq time (much of it loopback networking for client and server) was {:.0}% of a core (median), and client and server together used at most {:.0}% (median per server). Bounds, not one figure: this kernel has no IRQ time accounting, so softirq work appears both in /proc/stat's softirq column and in the runtime of the process it interrupted. Per-point figures are in the data (client_cpu_share, server_cpu_share, others_cpu_low, others_cpu_high, softirq_cpu_share).",
            100.0 * lo.median,
            100.0 * hi.median,
            100.0 * hi.max,
            v.r.cores,
            if lo.max >= 0.2 {
                ": where they were busy the servers competed with them, one reason repeats spread"
            } else {
                ""
            },
            100.0 * q.median,
            100.0 * busy_max
        ),
        None => String::new(),
    }
}

fn same_content(v: &View) -> String {
    let bytes_text = v
        .names
        .iter()
        .map(|n| {
            let per: Vec<String> =
                v.r.plan
                    .sizes
                    .iter()
                    .map(|&s| {
                        v.med(n, v.lo, s, |p| p.bytes_per_reply)
                            .map_or(format!("{s} B: -"), |b| format!("{s} B: {b:.0}"))
                    })
                    .collect();
            format!("{n} {}", per.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let non_2xx: u64 = v.r.points.iter().map(|p| p.non_2xx).sum();
    format!(
        "Same content: {non_2xx} non-2xx replies over all points (they count as errors); response bytes (head + body) per reply at {} cold: {bytes_text}. The bodies are the same files; the heads differ from server to server (Server, Date, ETag, Last-Modified and so on).",
        v.lo
    )
}

fn method(v: &View) -> String {
    let (r, plan) = (v.r, &v.r.plan);
    let errors: u64 = r.points.iter().map(|p| p.errors).sum();
    let retried = r.points.iter().filter(|p| p.attempts > 1).count();
    let mut skipped: Vec<String> = r
        .stalled
        .iter()
        .map(|s| format!("{} at {}: {}", s.server, s.cold, s.why))
        .collect();
    skipped.dedup();
    format!(
        "Peer comparison: `evq serve` ({} backend, one thread, a child process like the peers, files from the docroot) and {} (one worker each, configs from peer_servers.rs), every server restarted for every point and given the same files ({} B). Per point: cold connections from an `evq dead` child on 127.0.0.2, checked as held the same way for every server (its processes' socket descriptors that are ESTABLISHED connections from 127.0.0.2), then (after a {:.1} s untimed warm-up with the same load) a closed loop of {HOT_CONNECTIONS} connections, {CLIENT_THREADS} thread, {:.1} s, from this process. {} repeat(s), servers interleaved and rotated each repeat, a server's cold counts measured back to back (in reverse every other repeat). A point during whose load other processes surely used more than {:.0}% of a core (the lower bound, others_cpu_low) was measured again (at most {} attempt(s) in all; 1 means never), keeping the least disturbed: {retried} of {} points were. Errors (load errors + non-2xx replies) over all points: {errors}.{}",
        r.backend,
        if v.names.len() > 1 {
            v.names[1..].join(", ")
        } else {
            "no peer server".into()
        },
        plan.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("/"),
        warm_up(Duration::from_secs_f64(plan.load_s)).as_secs_f64(),
        plan.load_s,
        plan.repeats,
        100.0 * DISTURBED,
        plan.attempts,
        r.points.len(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" Not measured: {}.", skipped.join("; "))
        }
    )
}

/// The commands that reproduce the comparison.
pub(super) fn commands(v: &View) -> Vec<String> {
    let (r, plan) = (v.r, &v.r.plan);
    let mut commands = vec![
        format!(
            "evq serve --backend {} --threads 1 --root DOCROOT --idle-timeout 600 --header-timeout 600 --grace 0 --listen 127.0.0.1:P",
            r.backend
        ),
        "nginx -c DIR/nginx.conf | h2o -c DIR/h2o.conf | lighttpd -D -f DIR/lighttpd.conf   (one worker; configs written by crates/evq-lab/src/rig/peer_servers.rs)".into(),
        format!(
            "evq dead --port P --connections N --source 127.0.0.2   (N in {:?})",
            plan.colds
        ),
        format!(
            "evq load --port P --connections {HOT_CONNECTIONS} --threads {CLIENT_THREADS} --duration {} --uri /SIZE.bin   (SIZE in {:?})",
            plan.load_s, plan.sizes
        ),
    ];
    if !r.missing.is_empty() {
        commands.push(format!(
            "scripts/install-peers.sh   (installs {})",
            r.missing.join(", ")
        ));
    }
    commands
}
