//! `evq-load load` / `dead` / `wan`: the same commands as `evq load`, `evq dead`
//! and `evq wan`, from this crate alone (built with feature `cli`).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "evq-load",
    about = "HTTP load (httperf/wrk model) and dead connections over evq"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open-loop (httperf) or closed-loop (wrk) HTTP load.
    Load(evq_load::LoadArgs),
    /// Hold idle, partial or trickling connections (deadconn).
    Dead(evq_load::DeadArgs),
    /// Client network namespaces behind delay relays; runs a command in each.
    Wan(evq_load::WanArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Load(a) => evq_load::load_command(a),
        Command::Dead(a) => evq_load::dead_command(a),
        Command::Wan(a) => evq_load::wan_command(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evq-load: {e}");
            ExitCode::FAILURE
        }
    }
}
