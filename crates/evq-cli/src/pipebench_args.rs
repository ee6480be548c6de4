//! `evq pipebench`'s flags, turned into the lab library's [`pipebench::Config`].

use evq_lab::pipebench::{self, Baseline, FdKind};

/// Flags of `evq pipebench`.
#[derive(clap::Args, Debug, Clone)]
pub struct PipebenchArgs {
    /// Backend to measure (repeatable); default: every available one.
    #[arg(long = "backend")]
    pub backends: Vec<String>,
    /// Numbers of descriptors (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1, 10, 100, 1000, 10000])]
    pub fds: Vec<usize>,
    /// Timed iterations per run for O(ready) contenders; O(registered) ones (select,
    /// poll) run `iters * 100 / fds` (at least 1000, at most `iters`) so a sweep
    /// to 10,000 descriptors stays short.
    #[arg(long, default_value_t = 20_000)]
    pub iters: u64,
    /// Repetitions of each run; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Events per get_next_event call (the batch's capacity).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// `raw` runs the C floor (raw-none, raw-poll, raw-epoll) in the same run.
    #[arg(long, value_enum, default_value_t = BaselineArg::Raw)]
    pub baseline: BaselineArg,
    /// Descriptor kind.
    #[arg(long, value_enum, default_value_t = FdKindArg::Auto)]
    pub fd_kind: FdKindArg,
    /// Seed of the pseudo-random descriptor sequence.
    #[arg(long, default_value_t = 0x5eed_1999)]
    pub seed: u64,
    /// Print JSON records instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--baseline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BaselineArg {
    /// Run raw-none, raw-poll and raw-epoll beside evq.
    Raw,
    /// Skip them.
    None,
}

/// `--fd-kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FdKindArg {
    /// Pipes if the largest size fits under the limit, else eventfds.
    Auto,
    /// `pipe2(2)`: one byte written, one read (devpollperf's choice).
    Pipe,
    /// `eventfd(2)`: one 8-byte counter; one descriptor per probe.
    Eventfd,
}

impl PipebenchArgs {
    /// The library's configuration for these flags.
    pub fn config(&self) -> pipebench::Config {
        pipebench::Config {
            backends: self.backends.clone(),
            fds: self.fds.clone(),
            iters: self.iters,
            reps: self.reps,
            batch: self.batch,
            baseline: match self.baseline {
                BaselineArg::Raw => Baseline::Raw,
                BaselineArg::None => Baseline::None,
            },
            fd_kind: match self.fd_kind {
                FdKindArg::Auto => FdKind::Auto,
                FdKindArg::Pipe => FdKind::Pipe,
                FdKindArg::Eventfd => FdKind::Eventfd,
            },
            seed: self.seed,
        }
    }
}
