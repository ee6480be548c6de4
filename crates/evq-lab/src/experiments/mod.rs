//! The lab's scenarios, one file each.

pub mod bench_c;
pub mod burst;
pub mod cold_connections;
pub mod herd;
pub mod load_client;
pub mod pipe_scaling;
pub mod proxy;
pub mod signals;
pub(crate) mod signals_overload;
