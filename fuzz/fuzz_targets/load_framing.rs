//! `cargo +nightly fuzz run load_framing`: see fuzz/README.md; the body is
//! `evq_fuzz::load_framing::run` (crates/evq-fuzz), which the stable replay test shares.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evq_fuzz::load_framing::run(data));
