//! `evq`: the command-line front end — backends, benchmarks, and (as they land)
//! the servers, load generators and the lab.

mod backends_cmd;
mod pipebench;
mod probe_fds;
mod resources;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "evq",
    version,
    about = "Scalable event delivery for UNIX: the library's tools and experiments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the backends this build has, whether this kernel supports each, and
    /// what each can do.
    Backends(backends_cmd::BackendsArgs),
    /// The Solaris devpollperf test (SEEDS 004): N descriptors, write one token to a
    /// random one, wait, read it; cost per event for every backend beside a raw
    /// C floor measured in the same run.
    Pipebench(pipebench::PipebenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Backends(args) => backends_cmd::run(&args),
        Command::Pipebench(args) => pipebench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evq: {e}");
            ExitCode::FAILURE
        }
    }
}
