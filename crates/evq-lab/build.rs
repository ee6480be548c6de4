//! Builds the raw-syscall baseline loop that `evq pipebench` measures beside evq.
fn main() {
    println!("cargo:rerun-if-changed=csrc/raw_loop.c");
    cc::Build::new()
        .file("csrc/raw_loop.c")
        .opt_level(2)
        .warnings(true)
        .compile("evq_raw_loop");
}
