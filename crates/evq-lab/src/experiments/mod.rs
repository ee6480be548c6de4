//! The lab's scenarios, one directory each, every one in the shape of
//! [`crate::experiment::Experiment`].

pub mod async_runtimes;
pub mod bench_c;
pub mod burst;
pub mod cold_connections;
pub mod herd;
pub mod kernel;
pub mod load_client;
pub mod multicore;
pub mod overload;
pub mod pipe_scaling;
pub mod proxy;
pub mod reliability;
pub mod signals;

use crate::experiment::Scenario;

/// Every scenario, in report order.
pub const ALL: &[&dyn Scenario] = &[
    &pipe_scaling::PipeScaling,
    &bench_c::BenchC,
    &cold_connections::ColdConnections,
    &signals::Signals,
    &overload::Overload,
    &burst::Burst,
    &herd::Herd,
    &proxy::Proxy,
    &load_client::LoadClient,
    &multicore::Multicore,
    &async_runtimes::AsyncRuntimes,
    &reliability::Reliability,
    &kernel::Kernel,
];

/// The scenario named `name`.
pub fn find(name: &str) -> Option<&'static dyn Scenario> {
    ALL.iter().copied().find(|s| s.name() == name)
}
