//! Faults and soak for `evq serve`, `evq proxy` and `evq load` (issue 19): the
//! programs are started as children, the way a user runs them, and driven from
//! outside over loopback — hostile clients, a scripted origin that crashes,
//! stalls and answers garbage, files changed under the server, descriptor
//! exhaustion, SIGTERM — while live clients are measured beside the fault.
//! Each fault ends in a row of the fault table ([`suite::row::FaultRow`]); the
//! soak ([`soak`]) runs a long mixed load and reports slopes.
//!
//! `evq faults` and `evq soak` are the commands; the lab's `reliability`
//! scenario puts both in the report.

#![deny(missing_docs)]

pub mod http;
pub mod live;
pub mod origin;
pub mod peer;
pub mod soak;
pub mod subject;
pub mod suite;
pub mod usage;

pub use suite::row::FaultRow;
pub use suite::{faults, select, table, Fault, Size, SuiteConfig, Target};
