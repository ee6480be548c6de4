//! Writes the seed inputs of `evq_fuzz::seeds` and the HTTP request corpus of
//! evq-http's tests into `fuzz/corpus/<target>/`, to start a campaign from.
//!
//! `cargo run -p evq-fuzz --bin evq-fuzz-seeds [REPO_ROOT]`

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let corpus = root.join("fuzz/corpus");
    let mut written = 0;
    for (target, name, bytes) in evq_fuzz::seeds::all() {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        written += 1;
    }
    let requests = corpus.join("request");
    std::fs::create_dir_all(&requests)?;
    for entry in std::fs::read_dir(root.join("crates/evq-http/tests/corpus"))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        std::fs::copy(&path, requests.join(format!("seed-{name}")))?;
        written += 1;
    }
    println!("{written} seeds under {}", corpus.display());
    Ok(())
}
