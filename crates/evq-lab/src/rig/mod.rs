//! The rig the scenarios measure with, written once: servers and clients as child
//! processes (`evq serve`, `evq dead`, nginx, h2o, lighttpd, httperf, wrk, `evq
//! load`), `evq serve` in this process, and the checks that a server is up.
//!
//! Every child is started in its own process group and stopped with the group, so
//! no worker or helper outlives the point that started it.

pub mod child;
pub mod evq_programs;
pub mod in_process;
pub mod peer_servers;

pub use child::{run_child, ChildOutcome, ServerProcess};
pub use evq_programs::{DeadConnections, EvqServeChild};
pub use peer_servers::{Docroot, PeerServer, PeerServerKind, Tuning};
