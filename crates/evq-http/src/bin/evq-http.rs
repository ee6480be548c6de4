//! `evq-http serve` / `evq-http proxy`: the same commands as `evq serve` /
//! `evq proxy`, from this crate alone (built with feature `cli`).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "evq-http", about = "evq's HTTP server and proxy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a fixed reply or static files until SIGINT/SIGTERM.
    Serve(evq_http::ServeArgs),
    /// Relay clients to an origin server until SIGINT/SIGTERM.
    Proxy(evq_http::ProxyArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => evq_http::run_serve(&args),
        Command::Proxy(args) => evq_http::run_proxy(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evq-http: {e}");
            ExitCode::FAILURE
        }
    }
}
