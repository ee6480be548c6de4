//! Runs each torture case as `evq torture --run-case` (its own process: forced
//! overflow settings stay with their case, a crash is that case's failure), then
//! each fault row and the soak (their programs run as children of their own).

use super::{Plan, Records};
use crate::experiment::{Ctx, Outcome};
use std::io;

pub(super) fn run(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    let torture = Outcome::of((|| {
        let evq = ctx.tools.evq()?;
        ctx.expect(plan.torture.len());
        Ok(plan
            .torture
            .iter()
            .map(|case| {
                ctx.step(&format!(
                    "torture {} × {} thread(s){}",
                    case.backend,
                    case.threads,
                    if case.overflow {
                        ", forced overflow"
                    } else {
                        ""
                    }
                ));
                evq_torture::run_isolated(evq, &["torture"], case)
            })
            .collect())
    })());
    let faults = Outcome::of((|| {
        let cfg = suite_config(ctx, plan.faults_short)?;
        let chosen: Vec<evq_faults::Fault> = evq_faults::faults()
            .into_iter()
            .filter(|f| plan.faults.contains(&f.id()))
            .collect();
        // And the two soaks.
        ctx.expect(chosen.len() + 2);
        Ok(chosen
            .iter()
            .map(|f| {
                ctx.step(&format!("fault {}", f.id()));
                f.run(&cfg)
            })
            .collect())
    })());
    let soak = run_soak(&plan, ctx, evq_faults::soak::SoakIo::Readiness);
    let soak_completion = run_soak(&plan, ctx, evq_faults::soak::SoakIo::Completion);
    Ok(Records {
        plan,
        torture,
        faults,
        soak,
        soak_completion,
    })
}

/// `evq soak` (on readiness or on completions) for the plan's seconds.
fn run_soak(
    plan: &Plan,
    ctx: &Ctx,
    io: evq_faults::soak::SoakIo,
) -> Outcome<evq_faults::soak::SoakReport> {
    use evq_faults::soak::SoakIo;
    Outcome::of((|| {
        let (seconds, what) = match io {
            SoakIo::Readiness => (plan.soak_seconds, "soak"),
            SoakIo::Completion => (plan.soak_completion_seconds, "soak --io completion"),
        };
        if seconds <= 0.0 {
            return Err(io::Error::other(format!("no {what} in this plan")));
        }
        if io == SoakIo::Completion {
            evq::completion::CompletionRing::new().map_err(|e| {
                io::Error::other(format!("this kernel has no io_uring completion API ({e})"))
            })?;
        }
        ctx.step(&format!("{what} {seconds:.0} s"));
        let report = evq_faults::soak::run(&evq_faults::soak::SoakConfig {
            suite: suite_config(ctx, false)?,
            io,
            duration: std::time::Duration::from_secs_f64(seconds),
            sample_every: std::time::Duration::from_secs_f64((seconds / 60.0).clamp(1.0, 5.0)),
        });
        match &report.error {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(report),
        }
    })())
}

fn suite_config(ctx: &Ctx, short: bool) -> io::Result<evq_faults::SuiteConfig> {
    Ok(evq_faults::SuiteConfig {
        evq: ctx.tools.evq()?.to_path_buf(),
        backend: None,
        size: if short {
            evq_faults::Size::Short
        } else {
            evq_faults::Size::Long
        },
    })
}
