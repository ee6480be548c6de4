//! # evq-lab
//!
//! Re-runs the source papers' experiments on this kernel, beside the peers people
//! use instead, and writes a report (`lab-report/index.html`, PNG plots and
//! `results.json`) that says, claim by claim, what holds today.

#![deny(missing_docs)]

mod bench_chain;
pub mod bench_rust_peers;
pub mod experiment;
pub mod experiments;
mod html;
pub mod lab;
pub mod machine;
pub mod peer_packages;
pub mod pipebench;
pub mod placement;
pub mod plot;
mod probe_fds;
pub mod procinfo;
pub mod record;
pub mod report;
pub mod resources;
pub mod rig;
pub mod stats;
pub mod tools;
pub mod verdict;

pub use experiment::{Experiment, Judged, RunSize, Scenario};
pub use lab::{judge, rejudge, run, summary, LabOptions, RAW_FILE};
