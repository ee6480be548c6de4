//! Experiment 7, the proxy (SEEDS 000): clients → `evq proxy` → origin, with hot
//! load and cold connections at the proxy, comparing select and the event API.

use crate::plot::{render, Chart, Series};
use crate::record::{ClaimCheck, ExperimentRecord, Verdict};
use crate::rig::DeadConnections;
use crate::Scenario;
use evq::BackendKind;
use evq_http::{ProxyConfig, ProxyHandle, ServeConfig, ServerHandle};
use evq_load::{run_load, LoadConfig};
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};

#[derive(Serialize, Clone, Debug)]
struct Point {
    backend: String,
    cold: usize,
    replies_per_s: f64,
    p99_ms: f64,
    errors: u64,
    relayed: u64,
}

fn measure(
    tools: &crate::tools::Tools,
    kind: BackendKind,
    origin: std::net::SocketAddr,
    cold: usize,
    load_for: Duration,
) -> io::Result<Point> {
    let cfg = ProxyConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        origin,
        backend: Some(kind),
        idle_timeout: Duration::from_secs(600),
        ..ProxyConfig::default()
    };
    let proxy = ProxyHandle::start(&cfg)?;
    let port = proxy.addr().port();
    let _cold = DeadConnections::start(tools, port, cold, load_for.as_secs() + 60)?;
    let ramp = Instant::now();
    while crate::procinfo::established_to(port) < cold {
        if ramp.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{kind}: only {} of {cold} cold connections came up",
                    crate::procinfo::established_to(port)
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut load = LoadConfig::closed("127.0.0.1", port, 32, load_for);
    load.threads = 1;
    let report = run_load(&load)?;
    let stats = proxy.stop();
    Ok(Point {
        backend: kind.name().into(),
        cold,
        replies_per_s: report.reply_rate_avg,
        p99_ms: report.latency_ms.p99,
        errors: report.errors.total(),
        relayed: stats.relayed,
    })
}

/// Runs the proxy experiment and judges the claims.
pub fn run(scenario: &Scenario) -> io::Result<ExperimentRecord> {
    let (colds, load_for) = if scenario.smoke {
        (vec![0, 50], Duration::from_millis(500))
    } else if scenario.quick {
        (vec![0, 2000], Duration::from_secs(1))
    } else {
        (vec![0, 500, 1000, 2000, 4000], Duration::from_secs(4))
    };
    crate::resources::raise_nofile()?;
    let origin_cfg = ServeConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        backend: Some(BackendKind::Epoll),
        threads: 1,
        reply_size: 1024,
        ..ServeConfig::default()
    };
    let origin = ServerHandle::start(&origin_cfg)?;
    let kinds: Vec<BackendKind> = [
        BackendKind::SelectClassic,
        BackendKind::SelectImproved,
        BackendKind::Poll,
        BackendKind::Epoll,
    ]
    .into_iter()
    .filter(|k| k.available().is_ok())
    .collect();
    let mut points = Vec::new();
    for &cold in &colds {
        for &kind in &kinds {
            scenario.progress(&format!("proxy on {kind}: {cold} cold connections"));
            points.push(measure(
                &scenario.tools,
                kind,
                origin.addr(),
                cold,
                load_for,
            )?);
        }
    }
    let _ = origin.stop();
    let hi = *colds.last().unwrap_or(&0);
    let at = |b: &str, c: usize| {
        points
            .iter()
            .find(|p| p.backend == b && p.cold == c)
            .map(|p| p.replies_per_s)
    };
    let gain = at("epoll", hi).zip(at("select", hi)).map(|(e, s)| e / s);
    let gain_improved = at("epoll", hi)
        .zip(at("select-improved", hi))
        .map(|(e, s)| e / s);
    let mut checks = vec![ClaimCheck {
        claim: "with 2,000 cold connections the explicit event API improves the proxy's maximum throughput by 28% over select (1,348 vs 1,291 req/s over improved select at 750)".into(),
        measured: format!(
            "{hi} cold connections at the proxy: epoll / select = {:.2}, epoll / select-improved = {:.2}",
            gain.unwrap_or(f64::NAN),
            gain_improved.unwrap_or(f64::NAN)
        ),
        verdict: match gain {
            Some(g) if g >= 1.28 => Verdict::Holds,
            Some(_) => Verdict::Differs,
            None => Verdict::NotMeasured,
        },
        reasoning: "holds if the epoll-based proxy serves at least 1.28× the replies/s of the classic-select proxy under the same closed-loop load".into(),
    }];
    let flat = at("epoll", hi)
        .zip(at("epoll", colds[0]))
        .map(|(h, l)| h / l);
    checks.push(ClaimCheck {
        claim: "the event-API proxy's throughput does not depend on the number of cold connections (Figure 8)".into(),
        measured: format!("epoll proxy: replies/s at {hi} cold / at {} = {:.2}", colds[0], flat.unwrap_or(f64::NAN)),
        verdict: match flat {
            Some(f) if f >= 0.9 => Verdict::Holds,
            Some(_) => Verdict::Differs,
            None => Verdict::NotMeasured,
        },
        reasoning: "holds if at least 90% of the throughput is kept".into(),
    });
    let mut record = ExperimentRecord::new(
        "proxy",
        "000 Banga, Mogul, Druschel: the event-driven proxy with hot and cold clients",
        checks,
    );
    let series: Vec<Series> = kinds
        .iter()
        .map(|k| Series {
            name: k.name().into(),
            points: points
                .iter()
                .filter(|p| p.backend == k.name())
                .map(|p| (p.cold as f64, p.replies_per_s))
                .collect(),
        })
        .collect();
    record.plots.push(render(
        &Chart {
            title: "Proxy throughput vs cold connections".into(),
            x_label: "cold connections at the proxy".into(),
            y_label: "replies/s".into(),
            log_x: false,
            log_y: false,
            series,
        },
        &scenario.out_dir,
        "proxy",
    ));
    record.notes.push(format!(
        "Origin: `evq serve` (epoll, 1 thread, 1 KiB reply); proxy: `evq proxy` with a keep-alive origin pool, one thread, the backend under test; hot load: closed loop, 32 connections, {:.1} s; cold: `evq dead` from 127.0.0.2. The seed's hot clients were WAN-like S-Clients; here the load is on loopback (WAN emulation with `evq wan` is not wired into this scenario).",
        load_for.as_secs_f64()
    ));
    record.commands.push("evq serve --backend epoll --listen 127.0.0.1:O; evq proxy --backend B --origin 127.0.0.1:O --listen 127.0.0.1:P".into());
    record.commands.push(format!("evq dead --port P --connections N --source 127.0.0.2 (N in {colds:?}); evq load --port P --connections 32 --duration {}", load_for.as_secs_f64()));
    record.data = serde_json::to_value(&points).map_err(io::Error::other)?;
    Ok(record)
}
