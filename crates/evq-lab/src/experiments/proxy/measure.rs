//! The proxy on each backend at each cold count, in front of one origin.

use super::{Plan, Point, COMPLETION};
use crate::experiment::Ctx;
use crate::experiment::Sweep;
use crate::rig::DeadConnections;
use evq::BackendKind;
use evq_http::{IoModel, ProxyConfig, ProxyHandle, ServerHandle};
use evq_load::{run_load, LoadConfig};
use std::io;
use std::time::{Duration, Instant};

pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Sweep<Plan, Point>> {
    crate::resources::raise_nofile()?;
    let origin = ServerHandle::start(&crate::rig::in_process::one_thread(
        BackendKind::Epoll,
        1024,
    ))?;
    let load_for = Duration::from_secs_f64(plan.load_s);
    ctx.expect(plan.colds.len() * plan.backends.len());
    let mut points = Vec::new();
    for &cold in &plan.colds {
        for name in &plan.backends {
            ctx.step(&format!("proxy on {name}: {cold} cold connections"));
            points.push(point(ctx, name, origin.addr(), cold, load_for)?);
        }
    }
    let _ = origin.stop();
    Ok(Sweep { plan, points })
}

/// The proxy named `name` (a backend, or [`COMPLETION`]) at one cold count.
fn point(
    ctx: &Ctx,
    name: &str,
    origin: std::net::SocketAddr,
    cold: usize,
    load_for: Duration,
) -> io::Result<Point> {
    let (backend, io) = if name == COMPLETION {
        (None, IoModel::Completion)
    } else {
        (Some(name.parse::<BackendKind>()?), IoModel::Readiness)
    };
    let cfg = ProxyConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        origin,
        backend,
        io,
        idle_timeout: Duration::from_secs(600),
        ..ProxyConfig::default()
    };
    let proxy = ProxyHandle::start(&cfg)?;
    let port = proxy.addr().port();
    let _cold = DeadConnections::start(ctx.tools, port, cold, load_for.as_secs() + 60)?;
    // The proxy's counters do not say what it holds; the kernel's table does.
    let ramp = Instant::now();
    while crate::procinfo::established_to(port) < cold {
        if ramp.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{name}: only {} of {cold} cold connections came up",
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
        backend: name.into(),
        cold,
        replies_per_s: report.reply_rate_avg,
        p99_ms: report.latency_ms.p99,
        errors: report.errors.total(),
        relayed: stats.relayed,
    })
}
