//! The command line of `evq-herd` and `evq herd` (feature `cli`).

use crate::{run, table, Design, HerdConfig};
use std::io::{self, Write};
use std::time::Duration;

/// The command line of `evq-herd` (and of `evq herd`).
#[derive(Clone, Debug, clap::Args)]
pub struct HerdArgs {
    /// Design to run (repeatable); default: all.
    #[arg(long = "design", value_name = "NAME")]
    pub designs: Vec<String>,
    /// Worker processes or threads per design.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Client concurrencies (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![8, 32, 128])]
    pub concurrency: Vec<usize>,
    /// Small runs: 4,096 requests per design and concurrency (all designs < 60 s).
    #[arg(long)]
    pub quick: bool,
    /// Requests per client (default: 32,768 per run, or 4,096 with --quick, split
    /// among the clients).
    #[arg(long)]
    pub requests_per_client: Option<usize>,
    /// Longest a single run may take, in seconds; clients stop at this deadline.
    #[arg(long, default_value_t = 30)]
    pub run_timeout: u64,
    /// Print the records as a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl HerdConfig {
    /// The configuration the command line asks for.
    ///
    /// # Errors
    /// `InvalidInput` for an unknown design or a value out of range.
    pub fn from_args(args: &HerdArgs) -> io::Result<HerdConfig> {
        let designs = if args.designs.is_empty() {
            Design::ALL.to_vec()
        } else {
            args.designs
                .iter()
                .map(|d| d.parse())
                .collect::<io::Result<Vec<_>>>()?
        };
        let cfg = HerdConfig {
            designs,
            workers: args.workers,
            concurrency: args.concurrency.clone(),
            requests_per_run: if args.quick { 4096 } else { 32768 },
            requests_per_client: args.requests_per_client,
            run_timeout: Duration::from_secs(args.run_timeout),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Runs the command line: the records as a table, or JSON with `--json`.
///
/// # Errors
/// A bad argument, a failed run, or failing to write to stdout.
pub fn cli(args: &HerdArgs) -> io::Result<()> {
    let cfg = HerdConfig::from_args(args)?;
    let records = run(&cfg)?;
    let mut stdout = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &records).map_err(io::Error::other)?;
        writeln!(stdout)?;
    } else {
        stdout.write_all(table(&records).as_bytes())?;
    }
    Ok(())
}
