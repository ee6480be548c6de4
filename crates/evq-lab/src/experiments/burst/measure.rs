//! The burst on every backend, repetitions rotated.

use super::{Plan, Point};
use crate::experiment::Ctx;
use crate::experiment::Sweep;
use evq::BackendKind;
use evq_http::ServerHandle;
use evq_load::{run_load, LoadConfig};
use std::io;
use std::time::Duration;

pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Sweep<Plan, Point>> {
    crate::resources::raise_nofile()?;
    let (num_conns, rate, reps) = (plan.num_conns, plan.rate, plan.reps);
    ctx.expect(reps * plan.backends.len());
    let mut points = Vec::new();
    for rep in 0..reps {
        for step in 0..plan.backends.len() {
            let kind: BackendKind = plan.backends[(step + rep) % plan.backends.len()].parse()?;
            ctx.step(&format!(
                "rep {}/{reps} {kind}: {num_conns} connections × 2 calls at {rate}/s",
                rep + 1
            ));
            points.push(burst(kind, rep, num_conns, rate)?);
        }
    }
    Ok(Sweep { plan, points })
}

fn burst(kind: BackendKind, rep: usize, num_conns: u64, rate: f64) -> io::Result<Point> {
    let server = ServerHandle::start(&crate::rig::in_process::one_thread(kind, 1024))?;
    let mut load = LoadConfig::open("127.0.0.1", server.addr().port(), rate, num_conns);
    load.num_calls = 2;
    load.hog = true;
    load.timeout = Some(Duration::from_secs(5));
    load.threads = 1;
    let report = run_load(&load)?;
    let stats = server.stop();
    Ok(Point {
        backend: kind.name().into(),
        rep,
        num_conns,
        rate,
        replies: report.replies,
        reply_rate_avg: report.reply_rate_avg,
        errors: report.errors.total(),
        p50_ms: report.latency_ms.p50,
        p99_ms: report.latency_ms.p99,
        duration_s: report.duration_s,
        server_events_per_call: stats.events_per_call,
    })
}
