//! # evq-http — the evq HTTP server and proxy, as a library
//!
//! The event-driven server the sources measured with, on any evq backend:
//!
//! - [`serve`] / [`ServerHandle`]: HTTP/1.1 (keep-alive, pipelining) and 1.0, a
//!   fixed reply of programmable size (ephttpd's mode, SEEDS 002) or static files
//!   sent with `sendfile(2)`; one event queue per thread with three ways to share
//!   the listener ([`AcceptMode`]); phhttpd's read-right-after-accept and seed
//!   001's load shedding; header/idle timeouts as evq timers; graceful shutdown.
//! - [`proxy`] / [`ProxyHandle`]: SEEDS 000's experiment shape, clients → proxy →
//!   origin, with a keep-alive pool to the origin and 502/504 on origin failure.
//! - [`ServeArgs`] / [`ProxyArgs`]: clap flags, so a binary mounts
//!   `evq serve` / `evq proxy` in two lines.
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

mod config;
pub mod date;
mod files;
mod listener;
mod proxy;
mod relay;
pub mod request;
mod server;
mod stats;
mod sys;
mod token;
mod worker;

pub use config::{
    AcceptMode, DeliveryMode, ProxyArgs, ProxyConfig, ServeArgs, ServeConfig, ShedConfig,
};
pub use proxy::{proxy, ProxyHandle};
pub use server::{serve, ServerHandle};
pub use stats::{ProxyReport, ServeReport};
pub use sys::resident_bytes;

/// `evq serve`: runs the server these flags describe until SIGINT/SIGTERM, then
/// prints its counters (text, or JSON with `--json`) to stdout.
///
/// # Errors
/// Bad flags, bind errors, or the error that ended a worker.
pub fn run_serve(args: &ServeArgs) -> std::io::Result<()> {
    let cfg = args.to_config()?;
    // Connections are descriptors: take all the hard limit allows.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let server = ServerHandle::start(&cfg)?;
    eprintln!(
        "evq serve: listening on {} ({} thread(s), {} backend)",
        server.addr(),
        cfg.threads,
        server.report().backend
    );
    let report = server.wait()?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
    }
    Ok(())
}

/// `evq proxy`: runs the proxy these flags describe until SIGINT/SIGTERM, then
/// prints its counters.
///
/// # Errors
/// Bad flags, bind errors, or the error that ended the loop.
pub fn run_proxy(args: &ProxyArgs) -> std::io::Result<()> {
    let cfg = args.to_config()?;
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let handle = ProxyHandle::start(&cfg)?;
    eprintln!(
        "evq proxy: listening on {}, origin {}",
        handle.addr(),
        cfg.origin
    );
    let report = handle.wait()?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).unwrap_or_else(|_| "{}".into())
        );
    } else {
        println!("{report}");
    }
    Ok(())
}
