//! # evq-fuzz — the bodies of evq's fuzz targets
//!
//! Each fuzz target in `fuzz/fuzz_targets/` is one line around a function here, so
//! the same code runs in two places:
//!
//! - under libFuzzer (`cargo +nightly fuzz run <target>`, the crate in `fuzz/`,
//!   which needs nightly and sanitizers), to search;
//! - under plain `cargo test` on stable (`tests/replay.rs`), which feeds every file
//!   of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through the same
//!   function, so what the campaigns found stays found on a machine without nightly.
//!
//! | target | function | what it drives |
//! |---|---|---|
//! | `request` | [`request::run`] | evq-http's `handle_request` over arbitrary bytes |
//! | `compat_kqueue` | [`compat_kqueue::run`] | evq-compat's kqueue: changelists and `kevent` |
//! | `compat_devpoll` | [`compat_devpoll::run`] | evq-compat's /dev/poll: `write`, `DP_POLL`, `DP_ISPOLLED` |
//! | `capi` | [`capi::run`] | every C function of evq-capi, with hostile arguments |
//! | `model` | [`model::run`] | evq on a real backend against the reference [`model`] |
//! | `load_framing` | [`load_framing::run`] | `evq load`'s response framing (evq-wire), head memo against a fresh parse |
//!
//! Targets that take descriptors only ever pass ones they hold ([`fds`]) or numbers
//! that cannot be open, so a replay on a test thread cannot touch another test's
//! files. Structured inputs are read with [`input::Input`] and written (for seeds)
//! with [`input::Seed`]; `cargo run -p evq-fuzz --bin evq-fuzz-seeds` rewrites the
//! seed files from the operation lists in `src/seeds.rs`.

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

pub mod capi;
pub mod compat_devpoll;
pub mod compat_kqueue;
pub mod fds;
pub mod input;
pub mod load_framing;
pub mod model;
pub mod request;
pub mod seeds;

use evq::BackendKind;
use std::sync::OnceLock;

/// The backends this kernel offers, probed once per process (probing creates
/// kernel objects, so it is not repeated for every input).
pub fn available_backends() -> &'static [BackendKind] {
    static AVAILABLE: OnceLock<Vec<BackendKind>> = OnceLock::new();
    AVAILABLE.get_or_init(|| {
        BackendKind::ALL
            .iter()
            .copied()
            .filter(|k| k.available().is_ok())
            .collect()
    })
}

/// The backend an input's first byte names: an index into [`BackendKind::ALL`], so
/// an input means the same backend on every machine. `None` when this kernel lacks
/// it (the input is then skipped by the fuzzer; replays run it on every backend).
pub fn backend_of(byte: u8) -> Option<BackendKind> {
    let kind = BackendKind::ALL[byte as usize % BackendKind::ALL.len()];
    available_backends().contains(&kind).then_some(kind)
}
