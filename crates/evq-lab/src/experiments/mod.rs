//! The lab's scenarios, one file each.

pub mod pipe_scaling;
