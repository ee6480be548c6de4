//! `cargo +nightly fuzz run compat_kqueue`: see fuzz/README.md; the body is
//! `evq_fuzz::compat_kqueue::run` (crates/evq-fuzz), which the stable replay test shares.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| evq_fuzz::compat_kqueue::run(data));
