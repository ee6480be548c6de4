//! Builds the raw-syscall baseline loop that `evq pipebench` measures beside evq,
//! and records which versions of the Rust peers (mio, polling) Cargo resolved, so
//! the report can say what it ran (`EVQ_LAB_MIO_VERSION`, `EVQ_LAB_POLLING_VERSION`).
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=csrc/raw_loop.c");
    cc::Build::new()
        .file("csrc/raw_loop.c")
        .opt_level(2)
        .warnings(true)
        .compile("evq_raw_loop");

    let lock = find_lock();
    if let Some(lock) = &lock {
        println!("cargo:rerun-if-changed={}", lock.display());
    }
    let text = lock.and_then(|p| std::fs::read_to_string(p).ok());
    for (krate, var) in [
        ("mio", "EVQ_LAB_MIO_VERSION"),
        ("polling", "EVQ_LAB_POLLING_VERSION"),
    ] {
        let version = text
            .as_deref()
            .and_then(|t| resolved_version(t, krate))
            .unwrap_or_else(|| "unknown (no Cargo.lock at build time)".into());
        println!("cargo:rustc-env={var}={version}");
    }
}

/// The nearest `Cargo.lock` above this crate (the workspace's).
fn find_lock() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    dir.ancestors()
        .map(|d: &Path| d.join("Cargo.lock"))
        .find(|p| p.is_file())
}

/// `[[package]]` blocks of a Cargo.lock as (name, version, dependencies).
fn packages(lock: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|r| r.trim().strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        };
        let deps = block
            .split_once("dependencies = [")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| {
                list.lines()
                    .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_string())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if let (Some(name), Some(version)) = (field("name "), field("version ")) {
            out.push((name, version, deps));
        }
    }
    out
}

/// The version of `krate` that evq-lab depends on. Cargo.lock names a dependency
/// `"mio"` when only one version is locked and `"mio 1.2.3"` (or with a source)
/// when several are.
fn resolved_version(lock: &str, krate: &str) -> Option<String> {
    let pkgs = packages(lock);
    let (_, _, deps) = pkgs.iter().find(|(name, _, _)| name == "evq-lab")?;
    let dep = deps
        .iter()
        .find(|d| d.split_whitespace().next() == Some(krate))?;
    match dep.split_whitespace().nth(1) {
        Some(v) => Some(v.to_string()),
        None => pkgs
            .iter()
            .find(|(name, _, _)| name == krate)
            .map(|(_, v, _)| v.clone()),
    }
}
