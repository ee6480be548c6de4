//! `evq`: the command-line front end — backends, benchmarks, and (as they land)
//! the servers, load generators and the lab.

mod backends_cmd;
mod bench_chain_cmd;
mod faults_cmd;
mod lab_args;
mod pipebench_args;
mod torture_cmd;

use evq_lab::pipebench;

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
    Pipebench(pipebench_args::PipebenchArgs),
    /// The event-driven HTTP server of the experiments (fixed reply or static files).
    Serve(evq_http::ServeArgs),
    /// The event-driven HTTP proxy of SEEDS 000 (keep-alive origin pool).
    Proxy(evq_http::ProxyArgs),
    /// Open-loop (httperf-style) or closed-loop (wrk-style) HTTP load generator.
    Load(evq_load::LoadArgs),
    /// Hold N idle ("dead", "cold") connections to a server (seed 002's deadconn).
    Dead(evq_load::DeadArgs),
    /// Run a command from client network namespaces behind a delay relay (WAN emulation).
    Wan(evq_load::WanArgs),
    /// The Stevens server family (SEEDS 003): prefork/prethread designs, herd, wake-one.
    Herd(evq_herd::HerdArgs),
    /// Drive every backend hard under random churn and keep an exactly-once ledger:
    /// lost, duplicated, stale and misdelivered events per backend and thread count.
    Torture(torture_cmd::TortureArgs),
    /// Inject faults into evq serve, evq proxy and evq load (hostile clients, a
    /// crashing or garbage-answering origin, files changed under the server,
    /// descriptor exhaustion, SIGTERM) while live clients are measured; a table
    /// of faults × outcome.
    Faults(faults_cmd::FaultsArgs),
    /// A long mixed run against evq serve and evq proxy (keep-alive, new
    /// connections, slow clients, resets, bad requests, evq load beside them):
    /// memory and descriptor slopes, every valid request's fate.
    Soak(faults_cmd::SoakArgs),
    /// Re-run the source papers' experiments on this kernel and write a report
    /// (lab-report/index.html, PNG plots, results.json).
    Lab(lab_args::LabArgs),
    /// The lab's bench.c chain for one contender in this process, printing
    /// the JSON line the C peers print (the lab runs it as a child, as it
    /// runs them).
    #[command(hide = true)]
    BenchChain(bench_chain_cmd::BenchChainArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Backends(args) => backends_cmd::run(&args),
        Command::Pipebench(args) => pipebench::run(&args.config(), args.json),
        Command::Serve(args) => evq_http::run_serve(&args),
        Command::Proxy(args) => evq_http::run_proxy(&args),
        Command::Load(args) => evq_load::load_command(&args),
        Command::Dead(args) => evq_load::dead_command(&args),
        Command::Wan(args) => evq_load::wan_command(&args),
        Command::Herd(args) => evq_herd::cli(&args),
        Command::Torture(args) => match torture_cmd::run(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Faults(args) => match faults_cmd::run_faults(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Soak(args) => match faults_cmd::run_soak(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Lab(args) => lab_args::run(&args),
        Command::BenchChain(args) => bench_chain_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evq: {e}");
            ExitCode::FAILURE
        }
    }
}
