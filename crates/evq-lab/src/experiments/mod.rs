//! The lab's scenarios, one file each.

pub mod herd;
pub mod pipe_scaling;
pub mod signals;
