//! What the test files of the `evq` binary share: how to run it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// The `evq` binary this test run built, ready for arguments and environment.
pub fn evq_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_evq"))
}

/// Runs `evq` with `args` to its end.
pub fn evq(args: &[&str]) -> Output {
    evq_command().args(args).output().expect("run evq")
}
