//! `evq lab`'s flags, and running the lab library with them.

use evq_lab::{LabOptions, RunSize};
use std::io;
use std::path::PathBuf;

/// Flags of `evq lab`.
#[derive(clap::Args, Debug, Clone)]
pub struct LabArgs {
    /// Smaller sweeps: the whole lab in a few minutes.
    #[arg(long)]
    pub quick: bool,
    /// Run only these scenarios (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Tiny sweeps that only prove every scenario runs end to end and the report
    /// is well formed (what CI runs); the numbers mean nothing.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Where the report goes.
    #[arg(long, default_value = "lab-report")]
    pub out: PathBuf,
    /// The `evq` program the lab starts `evq serve`, `evq dead` and `evq load`
    /// from (default: this program, which is evq).
    #[arg(long, value_name = "PATH")]
    pub evq_bin: Option<PathBuf>,
    /// Do not install missing peer packages (nginx, h2o, lighttpd, httperf, wrk,
    /// libev, libevent, libuv…) before measuring; their rows are then missing and
    /// the report says how to fill them. By default the lab installs them with
    /// apt-get when it runs as root on a Debian-like system.
    #[arg(long)]
    pub no_install_peers: bool,
    /// Judge and render again the raw records (raw.json) of an earlier run in DIR,
    /// measuring nothing; the report in DIR is rewritten.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["quick", "smoke", "only", "evq_bin", "no_install_peers"]
    )]
    pub rejudge: Option<PathBuf>,
}

/// Runs (or re-judges) the lab and prints the claim-by-claim summary.
pub fn run(args: &LabArgs) -> io::Result<()> {
    let (results, dir) = match &args.rejudge {
        Some(dir) => (evq_lab::rejudge(dir)?, dir.clone()),
        None => {
            let size = if args.smoke {
                RunSize::Smoke
            } else if args.quick {
                RunSize::Quick
            } else {
                RunSize::Full
            };
            let opts = LabOptions {
                size,
                only: args.only.clone(),
                out: args.out.clone(),
                evq_bin: args.evq_bin.clone(),
                command_line: std::env::args().collect::<Vec<_>>().join(" "),
                install_peers: !args.no_install_peers,
            };
            (evq_lab::run(&opts)?, args.out.clone())
        }
    };
    print!("{}", evq_lab::summary(&results));
    println!();
    println!(
        "report: {}  (results.json and the raw records, {}, beside it)",
        dir.join("index.html").display(),
        evq_lab::RAW_FILE
    );
    Ok(())
}
