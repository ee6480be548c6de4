//! Gives the shared library the soname it is installed under (`libevq.so.0`), so
//! programs linked against an installed libevq record the ABI major version, not
//! the file cargo happens to write (`libevqc.so`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libevq.so.0");
    }
}
