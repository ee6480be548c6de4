//! # evq-load — load and dead connections for evq experiments
//!
//! The client side of the sources' rigs, built on evq itself:
//!
//! - [`run_load`]: httperf's open loop (connections started on a schedule, finished
//!   or not; `--rate --num-conns --num-calls --burst-length --timeout --think-timeout
//!   --hog`) and wrk's closed loop (`--connections --duration`), over many threads with
//!   one evq queue each, latency measured from each request's intended start and kept
//!   in an HdrHistogram, reported as httperf's summary ([`LoadReport::summary`]) or
//!   JSON. The threads run on evq's readiness API or, with [`IoModel::Completion`]
//!   (`--io completion`), on io_uring completions (`evq::completion`).
//! - [`run_dead`]: deadconn (SEEDS 002) and the cold client of SEEDS 000 — hold N idle
//!   (or partial, or trickling) connections and reopen whatever the server closes.
//! - [`run_wan`]: client network namespaces ([`NetnsLab`]) behind user-space delay
//!   relays ([`Relay`]: per-direction delay, jitter, bandwidth), since this kernel has
//!   no `tc netem`.
//!
//! With feature `cli`, `LoadArgs`, `DeadArgs` and `WanArgs` are the clap flags and
//! `load_command`, `dead_command` and `wan_command` the commands that the `evq`
//! binary mounts as `evq load`, `evq dead` and `evq wan`. Without it, a library
//! user's build carries no clap.
//!
//! ```no_run
//! use evq_load::{run_load, LoadConfig};
//! let mut cfg = LoadConfig::open("127.0.0.1", 8080, 200.0, 400);
//! cfg.num_calls = 2;
//! let report = run_load(&cfg)?;
//! println!("{}", report.summary());
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(missing_docs)]

#[cfg(feature = "cli")]
mod cli;
mod completion;
mod config;
mod dead;
mod load;
mod relay;
mod request;
mod schedule;
mod slots;
mod stats;
mod tally;
mod wan;

#[cfg(feature = "cli")]
pub use cli::{dead_command, load_command, wan_command, DeadArgs, LoadArgs, WanArgs};
pub use config::{DeadConfig, DeadStyle, Distribution, IoModel, LoadConfig, LoopMode};
pub use dead::{run_dead, DeadReport};
pub use evq_wire::{Fed, FramingError, HeadParser, Reply, ResponseReader};
pub use load::run_load;
pub use relay::{LinkSpec, Relay, RelayConfig, RelayReport, ACCEPT_PAUSE, QUEUE_LIMIT};
pub use stats::{
    ErrorCounts, ErrorKind, LoadReport, Outcomes, Percentiles, RateSamples, StatusClasses, Steady,
};
pub use wan::{run_wan, Namespace, NetnsLab, WanConfig, WanReport};
