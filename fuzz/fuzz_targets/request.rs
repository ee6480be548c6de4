//! `cargo +nightly fuzz run request`: see fuzz/README.md; the body is
//! `evq_fuzz::request::run` (crates/evq-fuzz), which the stable replay test shares.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evq_fuzz::request::run(data));
