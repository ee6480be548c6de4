//! `evq backends`: what this build and this kernel offer.

use evq::BackendKind;
use serde::Serialize;
use std::io;

/// Flags of `evq backends`.
#[derive(clap::Args)]
pub struct BackendsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct BackendRecord {
    name: &'static str,
    available: bool,
    unavailable_because: Option<String>,
    default: bool,
    level: bool,
    event: bool,
    oneshot: bool,
    wake_one: bool,
    fifo: bool,
    shared_descriptors: bool,
    cost_grows_with_interest: bool,
}

pub fn run(args: &BackendsArgs) -> io::Result<()> {
    let default = BackendKind::from_env_or_best().ok();
    let records: Vec<BackendRecord> = BackendKind::ALL
        .iter()
        .map(|&k| {
            let caps = k.capabilities();
            let probe = k.available();
            BackendRecord {
                name: k.name(),
                available: probe.is_ok(),
                unavailable_because: probe.err().map(|e| e.to_string()),
                default: Some(k) == default,
                level: caps.level,
                event: caps.event,
                oneshot: caps.oneshot,
                wake_one: caps.wake_one,
                fifo: caps.fifo,
                shared_descriptors: caps.shared_descriptors,
                cost_grows_with_interest: caps.cost_grows_with_interest,
            }
        })
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&records).map_err(io::Error::other)?
        );
        return Ok(());
    }
    let yes = |b: bool| if b { "yes" } else { "-" };
    println!(
        "{:<16} {:<10} {:<6} {:<6} {:<8} {:<9} {:<5} cost per wait",
        "backend", "available", "level", "event", "oneshot", "wake-one", "fifo"
    );
    for r in &records {
        let name = if r.default {
            format!("{}*", r.name)
        } else {
            r.name.to_string()
        };
        println!(
            "{:<16} {:<10} {:<6} {:<6} {:<8} {:<9} {:<5} {}",
            name,
            if r.available { "yes" } else { "no" },
            yes(r.level),
            yes(r.event),
            yes(r.oneshot),
            yes(r.wake_one),
            yes(r.fifo),
            if r.cost_grows_with_interest {
                "O(registered)"
            } else {
                "O(ready)"
            },
        );
        if let Some(why) = &r.unavailable_because {
            println!("    unavailable: {why}");
        }
    }
    println!("* default here (EVQ_BACKEND overrides)");
    Ok(())
}
