//! `cargo +nightly fuzz run model`: see fuzz/README.md; the body is
//! `evq_fuzz::model::run` (crates/evq-fuzz), which the stable replay test shares.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evq_fuzz::model::run(data));
