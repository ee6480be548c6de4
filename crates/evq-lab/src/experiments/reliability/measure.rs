//! Runs each torture case as `evq torture --run-case` (its own process: forced
//! overflow settings stay with their case, a crash is that case's failure).

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
    Ok(Records { plan, torture })
}
