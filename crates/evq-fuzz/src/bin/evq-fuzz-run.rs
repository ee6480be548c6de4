//! Runs fuzz inputs through a target's function on stable, as the fuzz target
//! would (the first byte picks the backend), or with `--every-backend` as the
//! replay test does; prints one line per input and exits 1 if any failed. For
//! reproducing a crash without nightly, or checking which inputs a change breaks.
//!
//! `cargo run -p evq-fuzz --bin evq-fuzz-run -- [--every-backend] TARGET FILE...`

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let every = args.first().is_some_and(|a| a == "--every-backend");
    if every {
        args.remove(0);
    }
    let Some(target) = args.first().cloned() else {
        eprintln!("usage: evq-fuzz-run [--every-backend] TARGET FILE...");
        return ExitCode::from(2);
    };
    let run: fn(&[u8]) = match (target.as_str(), every) {
        ("request", _) => evq_fuzz::request::run,
        ("load_framing", _) => evq_fuzz::load_framing::run,
        ("capi", _) => evq_fuzz::capi::run,
        ("model", false) => evq_fuzz::model::run,
        ("compat_kqueue", false) => evq_fuzz::compat_kqueue::run,
        ("compat_devpoll", false) => evq_fuzz::compat_devpoll::run,
        ("model", true) => |data| {
            let ops = evq_fuzz::model::decode(data.get(1..).unwrap_or_default());
            for &kind in evq_fuzz::available_backends() {
                evq_fuzz::model::run_ops(kind, &ops);
            }
        },
        ("compat_kqueue", true) => |data| {
            for &kind in evq_fuzz::available_backends() {
                evq_fuzz::compat_kqueue::run_on(kind, data.get(1..).unwrap_or_default());
            }
        },
        ("compat_devpoll", true) => |data| {
            for &kind in evq_fuzz::available_backends() {
                evq_fuzz::compat_devpoll::run_on(kind, data.get(1..).unwrap_or_default());
            }
        },
        _ => {
            eprintln!("evq-fuzz-run: unknown target {target:?}");
            return ExitCode::from(2);
        }
    };
    let mut failed = 0;
    for file in &args[1..] {
        let data = match std::fs::read(file) {
            Ok(data) => data,
            Err(e) => {
                eprintln!("evq-fuzz-run: {file}: {e}");
                return ExitCode::from(2);
            }
        };
        let ok = std::panic::catch_unwind(|| run(&data)).is_ok();
        println!("{}: {file}", if ok { "ok" } else { "FAILED" });
        failed += usize::from(!ok);
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
