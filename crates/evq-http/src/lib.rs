//! # evq-http — the evq HTTP server and proxy, as a library
//!
//! The event-driven server the sources measured with, on any evq backend:
//!
//! - [`serve`] / [`ServerHandle`]: HTTP/1.1 (keep-alive, pipelining) and 1.0, a
//!   fixed reply of programmable size (ephttpd's mode, SEEDS 002) or static files
//!   sent with `sendfile(2)`; one event queue per thread with three ways to share
//!   the listener ([`AcceptMode`]); phhttpd's read-right-after-accept and seed
//!   001's load shedding and better overload control ([`OverloadPolicy`]); header/idle timeouts as evq timers; graceful shutdown.
//! - [`proxy`] / [`ProxyHandle`]: SEEDS 000's experiment shape, clients → proxy →
//!   origin, with a keep-alive pool to the origin and 502/504 on origin failure;
//!   on any evq backend, or on io_uring completions ([`ProxyConfig::io`]).
//! - With feature `cli`: `ServeArgs` / `ProxyArgs` (clap flags) and
//!   `run_serve` / `run_proxy`, so a binary mounts `evq serve` / `evq proxy` in
//!   two lines. Without it, a library user's build carries no clap.
//!
//! ```no_run
//! let cfg = evq_http::ServeConfig {
//!     listen: "127.0.0.1:0".parse().unwrap(),
//!     ..Default::default()
//! };
//! let server = evq_http::ServerHandle::start(&cfg)?;
//! println!("listening on {}", server.addr());
//! let report = server.stop();
//! println!("{report}");
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

mod buffers;
#[cfg(feature = "cli")]
mod cli;
mod completion_pulse;
mod completion_relay;
mod completion_server;
mod config;
pub mod date;
mod exchange;
mod files;
mod intake;
mod intermediary;
mod linger;
mod listener;
mod overload;
mod proxy;
mod relay;
pub mod request;
mod server;
mod slot_table;
mod stats;
mod status;
mod sys;
mod token;
mod worker;

#[cfg(feature = "cli")]
pub use cli::{run_proxy, run_serve, OverloadArgs, ProxyArgs, ServeArgs};
pub use completion_server::{
    serve_completion, CompletionServeReport, CompletionServerHandle, IoModel,
};
pub use config::{bounds, AcceptMode, DeliveryMode, ProxyConfig, ServeConfig, ShedConfig};
pub use overload::{OverloadConfig, OverloadPolicy};
pub use proxy::{proxy, ProxyHandle};
pub use server::{serve, ServerHandle};
pub use stats::{OverloadCounts, ProxyReport, Refused, ServeReport, QUEUE_DELAY_BOUNDS_MS};
pub use sys::resident_bytes;
