//! The two sweeps of pipe-scaling.

use super::{PipeSweep, Plan, Records, DEVPOLL, PIPE_EPOLL};
use crate::experiment::Ctx;
use crate::pipebench::{self, Baseline, Config, FdKind, PipebenchRecord};
use crate::stats::spread;
use std::io;

/// Runs the main sweep, then the pipe sweep.
pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let config = Config {
        fds: plan.fds.clone(),
        iters: plan.iters,
        reps: plan.reps,
        ..Config::default()
    };
    // pipebench reports each contender's run: the raw C floor's three, evq's
    // backends and, where the kernel has it, the completion loop.
    let contenders =
        3 + evq::BackendKind::candidates().len() + usize::from(pipebench::completion_available());
    ctx.expect(plan.fds.len() * plan.reps * contenders);
    let main = pipebench::measure(&config, |line| ctx.step(line))?;
    let pipes = pipe_sweep(ctx, &plan, &main)?;
    Ok(Records { plan, main, pipes })
}

/// What the main sweep cannot show when it uses eventfds (to reach 10,000
/// descriptors under the limit): the RT-signal backends, which need files that
/// raise SIGIO, and the /dev/poll personality, whose devpollperf loop is written
/// for pipes. Both run here on pipes, at the main sweep's sizes capped where two
/// descriptors per probe still fit.
fn pipe_sweep(ctx: &Ctx, plan: &Plan, main: &[PipebenchRecord]) -> io::Result<PipeSweep> {
    let limit = crate::resources::raise_nofile()? as usize;
    let cap = (limit.saturating_sub(64) / 2 / 1000 * 1000).max(1);
    let mut sizes: Vec<usize> = plan.fds.iter().map(|&n| n.min(cap)).collect();
    sizes.dedup();
    let main_on_pipes = main.iter().all(|r| r.fd_kind == FdKind::Pipe);
    let signal_names: Vec<String> = if main_on_pipes {
        Vec::new()
    } else {
        [evq::BackendKind::RtSig, evq::BackendKind::RtSigBulk]
            .into_iter()
            .filter(|k| k.available().is_ok())
            .map(|k| k.to_string())
            .collect()
    };
    let with_signals = if signal_names.is_empty() {
        0
    } else {
        // raw-none, raw-poll, raw-epoll, the RT-signal backends and epoll.
        3 + signal_names.len() + 1
    };
    ctx.expect(sizes.len() * plan.reps * (with_signals + 1));
    let mut records = Vec::new();
    if !signal_names.is_empty() {
        let mut backends = signal_names.clone();
        backends.push("epoll".into());
        let config = Config {
            backends,
            fds: sizes.clone(),
            iters: plan.iters,
            reps: plan.reps,
            baseline: Baseline::Raw,
            fd_kind: FdKind::Pipe,
            seed: 0x5eed_2000,
            ..Config::default()
        };
        for mut r in pipebench::measure(&config, |line| ctx.step(&format!("pipes: {line}")))? {
            match r.backend.as_str() {
                "raw-epoll" | "rtsig" | "rtsig-bulk" => {}
                "epoll" => r.backend = PIPE_EPOLL.into(),
                _ => continue,
            }
            records.push(r);
        }
    } else {
        records.extend(main.iter().filter(|r| r.backend == "raw-epoll").cloned());
    }
    records.extend(devpoll_sweep(ctx, &sizes, plan)?);
    Ok(PipeSweep {
        sizes,
        records,
        signal_names,
    })
}

/// The /dev/poll personality (evq-compat's devpollperf) at each size.
fn devpoll_sweep(ctx: &Ctx, sizes: &[usize], plan: &Plan) -> io::Result<Vec<PipebenchRecord>> {
    let reps = plan.reps;
    let dp_iters = plan.iters.min(20_000);
    // On one CPU, as pipebench's contenders were.
    let _pin = crate::placement::pin_this_thread_as_client();
    let mut records = Vec::new();
    for &n in sizes {
        let mut samples = Vec::with_capacity(reps);
        for rep in 0..reps {
            ctx.step(&format!(
                "pipes: fds {n:>6}  rep {}/{reps}  {DEVPOLL}",
                rep + 1
            ));
            samples.push(evq_compat::devpollperf(n, dp_iters)?);
        }
        let Some(s) = spread(samples) else { continue };
        records.push(PipebenchRecord {
            backend: DEVPOLL.into(),
            fds: n,
            iters: dp_iters,
            reps,
            fd_kind: FdKind::Pipe,
            ns_per_event: s.median,
            min: s.min,
            max: s.max,
            user_ns_per_event: f64::NAN,
            sys_ns_per_event: f64::NAN,
            scan_ns_per_event: None,
            enters_per_event: None,
        });
    }
    Ok(records)
}
