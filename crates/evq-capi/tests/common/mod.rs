//! Shared by the integration tests: where the built library is, and compiling C
//! against it with the system `cc` (or `$CC`), as a C programmer would.

#![allow(dead_code)] // each test binary uses its own part of this

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `crates/evq-capi`.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `include/`, where `evq.h` is.
pub fn include_dir() -> PathBuf {
    crate_dir().join("include")
}

/// The repository's `examples/c/`.
pub fn examples_dir() -> PathBuf {
    crate_dir().join("../../examples/c")
}

/// `tests/c/`.
pub fn c_tests_dir() -> PathBuf {
    crate_dir().join("tests/c")
}

/// Where cargo put `libevqc.so` and `libevqc.a` for this build: `target/<profile>`
/// or its `deps/` (this test runs from `target/<profile>/deps/`), whichever holds
/// the newer library.
///
/// `cargo build` copies the libraries up into the profile directory, the documented
/// place (and where `make install` takes them from); `cargo test` rebuilds only the
/// copies in `deps/`. Preferring the profile directory whenever it had a copy tested
/// whatever the last `cargo build` left there — a stale library after any change.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let has_both = |dir: &Path| dir.join("libevqc.so").is_file() && dir.join("libevqc.a").is_file();
    let modified = |dir: &Path| {
        std::fs::metadata(dir.join("libevqc.so"))
            .and_then(|m| m.modified())
            .ok()
    };
    let deps = exe
        .parent()
        .filter(|d| d.ends_with("deps") && has_both(d))
        .map(Path::to_path_buf);
    let profile = exe
        .ancestors()
        .skip(1)
        .find(|dir| !dir.ends_with("deps") && has_both(dir))
        .map(Path::to_path_buf);
    match (profile, deps) {
        (Some(p), Some(d)) if modified(&d) > modified(&p) => d,
        (Some(p), _) => p,
        (None, Some(d)) => d,
        (None, None) => panic!("no libevqc.so / libevqc.a above {}", exe.display()),
    }
}

/// A directory laid out like an installed libevq: `libevq.so` → `libevq.so.0` (the
/// soname) → the built `libevqc.so`, and `libevq.a` → `libevqc.a`.
pub fn lib_dir() -> PathBuf {
    let profile = profile_dir();
    let name = profile.file_name().unwrap().to_string_lossy().into_owned();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("libevq-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    for (link, target) in [
        ("libevq.so.0", profile.join("libevqc.so")),
        ("libevq.so", PathBuf::from("libevq.so.0")),
        ("libevq.a", profile.join("libevqc.a")),
    ] {
        // Made under a unique name and renamed over: tests run in parallel.
        let tmp = dir.join(format!(
            ".{link}.{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&target, &tmp).unwrap();
        std::fs::rename(&tmp, dir.join(link)).unwrap();
    }
    dir
}

/// How a test program links libevq.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// `-L dir -levq` with an rpath, loading `libevq.so.0` at run time.
    Shared,
    /// The static archive, plus the system libraries Rust's std needs.
    Static,
}

/// Compiles `source` into `<target tmp>/c-bin/<name>` with warnings as errors.
pub fn compile(source: &Path, name: &str, link: Link) -> PathBuf {
    let lib = lib_dir();
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-bin");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .arg("-I")
        .arg(include_dir())
        .arg(source)
        .arg("-o")
        .arg(&out);
    match link {
        Link::Shared => {
            cmd.arg(format!("-L{}", lib.display()))
                .arg("-levq")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        Link::Static => {
            cmd.arg(lib.join("libevq.a"));
        }
    }
    // `rustc --print native-static-libs` for the staticlib; harmless when shared.
    cmd.args(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl"]);
    let output = cmd.output().unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        output.status.success(),
        "{cc} failed on {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Runs a built program with `EVQ_BACKEND` set (or removed, for `None`).
pub fn run(program: &Path, args: &[&str], backend: Option<&str>) -> Output {
    run_with(program, args, backend, None)
}

/// `run`, with `EVQ_PAPER_MODE` set to `paper_mode` (or removed).
pub fn run_with(
    program: &Path,
    args: &[&str],
    backend: Option<&str>,
    paper_mode: Option<&str>,
) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (name, value) in [("EVQ_BACKEND", backend), ("EVQ_PAPER_MODE", paper_mode)] {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()))
}

/// stdout and stderr of a finished program, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
