//! Experiment 3, cold connections (SEEDS 000 Figure 8; SEEDS 002's dead
//! connections): server throughput as idle connections pile up, per backend.
//!
//! `evq serve` runs in this process on one thread; the cold connections come from
//! an `evq dead` child process bound to 127.0.0.2 (so they neither share the load
//! client's ephemeral ports nor this process's descriptor limit); the hot load is a
//! closed loop from `evq load` in this process. Figure 9 and Table 2 (latency
//! against offered rate, and event notification's CPU share, at a fixed cold load)
//! are measured by the private `cold_detail` module and reported in the same record.

use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, ExperimentRecord, Verdict};
use crate::rig::DeadConnections;
use crate::Scenario;
use evq::BackendKind;
use evq_http::{ServeConfig, ServerHandle};
use evq_load::{run_load, LoadConfig};
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};

#[derive(Serialize, Clone, Debug)]
struct Point {
    backend: String,
    cold: usize,
    cold_held: u64,
    reply_size: usize,
    replies_per_s: f64,
    p99_ms: f64,
    server_events_per_call: f64,
    errors: u64,
}

fn measure(
    tools: &crate::tools::Tools,
    kind: BackendKind,
    cold: usize,
    reply_size: usize,
    load_for: Duration,
) -> io::Result<Point> {
    let cfg = ServeConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        backend: Some(kind),
        threads: 1,
        reply_size,
        idle_timeout: Duration::from_secs(600),
        header_timeout: Duration::from_secs(600),
        ..ServeConfig::default()
    };
    let server = ServerHandle::start(&cfg)?;
    let port = server.addr().port();
    let _cold = DeadConnections::start(tools, port, cold, load_for.as_secs() + 60)?;
    let ramp = Instant::now();
    while (server.report().open_conns as usize) < cold {
        if ramp.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "only {} of {cold} cold connections came up",
                    server.report().open_conns
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = server.report().open_conns;
    let mut load = LoadConfig::closed("127.0.0.1", port, 32, load_for);
    load.threads = 1;
    let report = run_load(&load)?;
    let stats = server.report();
    let _ = server.stop();
    Ok(Point {
        backend: kind.name().into(),
        cold,
        cold_held: held,
        reply_size,
        replies_per_s: report.reply_rate_avg,
        p99_ms: report.latency_ms.p99,
        server_events_per_call: stats.events_per_call,
        errors: report.errors.total(),
    })
}

/// Runs the sweep and judges the claims.
pub fn run(scenario: &Scenario) -> io::Result<ExperimentRecord> {
    let (colds, load_for, reply_sizes): (Vec<usize>, _, Vec<usize>) = if scenario.smoke {
        (vec![0, 50], Duration::from_millis(500), vec![1024])
    } else if scenario.quick {
        (vec![0, 2000], Duration::from_secs(1), vec![1024])
    } else {
        (
            vec![0, 1000, 2500, 5000, 9000],
            Duration::from_secs(4),
            vec![128, 1024],
        )
    };
    crate::resources::raise_nofile()?;
    let kinds = BackendKind::candidates();
    let mut points = Vec::new();
    for &reply in &reply_sizes {
        for &cold in &colds {
            for &kind in &kinds {
                scenario.progress(&format!(
                    "{kind}: {cold} cold connections, {reply} B replies"
                ));
                points.push(measure(&scenario.tools, kind, cold, reply, load_for)?);
            }
        }
    }
    let (lo, hi, reply) = (
        colds[0],
        *colds.last().unwrap_or(&0),
        reply_sizes[reply_sizes.len() - 1],
    );
    let keep = |b: &str| {
        let at = |c| {
            points
                .iter()
                .find(|p| p.backend == b && p.cold == c && p.reply_size == reply)
                .map(|p| p.replies_per_s)
        };
        at(hi).zip(at(lo)).map(|(h, l)| h / l)
    };
    let fmt = |b: &str| keep(b).map_or("-".to_string(), |k| format!("{:.0}%", 100.0 * k));
    let mut checks = Vec::new();
    let (epoll, select) = (keep("epoll"), keep("select"));
    checks.push(ClaimCheck {
        claim: "throughput with the explicit event API stays flat as cold connections grow (0–2,000), while select's falls (Figure 8)".into(),
        measured: format!(
            "replies/s at {hi} cold connections as a share of at {lo}: epoll {}, select {}, select-improved {}, poll {}",
            fmt("epoll"), fmt("select"), fmt("select-improved"), fmt("poll")
        ),
        verdict: match epoll.zip(select) {
            Some((e, s)) if e >= 0.9 && s < 0.8 => Verdict::Holds,
            Some(_) => Verdict::Differs,
            None => Verdict::NotMeasured,
        },
        reasoning: "holds if epoll keeps at least 90% of its throughput and classic select keeps less than 80%".into(),
    });
    let (rt, poll) = (keep("rtsig-bulk").or(keep("rtsig")), keep("poll"));
    checks.push(ClaimCheck {
        claim: "epoll and RT signals stay flat over dead connections; poll (and /dev/poll) degrade (SEEDS 002)".into(),
        measured: format!(
            "share kept at {hi} cold: uring {}, rtsig-bulk {}, rtsig {}, poll {}",
            fmt("uring"), fmt("rtsig-bulk"), fmt("rtsig"), fmt("poll")
        ),
        verdict: match rt.zip(poll) {
            Some((r, p)) if r >= 0.9 && p < 0.8 => Verdict::Holds,
            Some(_) => Verdict::Differs,
            None => Verdict::NotMeasured,
        },
        reasoning: "holds if the RT-signal backend keeps at least 90% and poll less than 80%".into(),
    });
    let detail = super::cold_detail::run_detail(scenario)
        .unwrap_or_else(|e| super::cold_detail::ColdDetail::failed(&e));
    checks.extend(detail.checks);
    let peers = super::cold_peers::run_peers(scenario)
        .unwrap_or_else(|e| super::cold_peers::PeerPart::failed(&e));
    checks.extend(peers.checks);
    let mut record = ExperimentRecord::new(
        "cold-connections",
        "000 Banga, Mogul, Druschel (USENIX 1999): Figures 8 and 9, Table 2; 002 dead connections",
        checks,
    );
    let series: Vec<Series> = kinds
        .iter()
        .map(|k| Series {
            name: k.name().into(),
            points: points
                .iter()
                .filter(|p| p.backend == k.name() && p.reply_size == reply)
                .map(|p| (p.cold as f64, p.replies_per_s))
                .collect(),
        })
        .collect();
    record.plots.push(render(
        &Chart {
            title: format!(
                "evq serve throughput vs cold connections ({reply} B replies, 1 thread)"
            ),
            x_label: "cold (idle) connections".into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series,
        },
        &scenario.out_dir,
        "cold-connections",
    ));
    record.notes.push(format!(
        "Hot load: closed loop, 32 connections, {:.1} s per point, from this process; cold: `evq dead` child from 127.0.0.2 holding the connections open (the server's open-connection count is checked before the load starts). Server: `evq serve`, one thread, fixed reply. Client and server share the 2 cores, so absolute rates are the machine's, and the shares are what to compare.",
        load_for.as_secs_f64()
    ));
    record.commands.push(format!(
        "evq serve --backend B --threads 1 --reply-size {reply} --listen 127.0.0.1:P"
    ));
    record.commands.push(format!(
        "evq dead --port P --connections N --source 127.0.0.2   (N in {colds:?})"
    ));
    record.commands.push(format!(
        "evq load --port P --connections 32 --duration {}",
        load_for.as_secs_f64()
    ));
    record.plots.extend(detail.plots);
    record.notes.extend(detail.notes);
    record.commands.extend(detail.commands);
    record.plots.extend(peers.plots);
    record.notes.extend(peers.notes);
    record.commands.extend(peers.commands);
    record.data = serde_json::json!({
        "throughput": serde_json::to_value(&points).map_err(io::Error::other)?,
        "detail": detail.data,
        "peers": peers.data,
    });
    Ok(record)
}
