//! Replays every fuzz input on stable, without cargo-fuzz: each file of
//! `fuzz/corpus/<target>/` (the minimized campaign corpora) and
//! `fuzz/regressions/<target>/` (inputs that once crashed), and every seed of
//! `evq_fuzz::seeds`, through the function the fuzz target wraps.
//!
//! Descriptor targets replay on every backend this kernel has, not only the one
//! an input's first byte names. The `capi` target runs in child processes — it
//! calls `evq_close_fd` on held descriptors, and between that close and the refill
//! the number is free for any thread — once per environment the C library reads
//! (`EVQ_BACKEND`, `EVQ_PAPER_MODE`).

use evq::BackendKind;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (name, bytes) of every replayed input of `target`.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["fuzz/corpus", "fuzz/regressions"] {
        let dir = repo().join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path).expect("corpus file");
            out.push((path.display().to_string(), bytes));
        }
    }
    for (t, name, bytes) in evq_fuzz::seeds::all() {
        if t == target {
            out.push((format!("seed {name}"), bytes));
        }
    }
    out.sort();
    out
}

/// Runs `f` on each input, naming the input that fails.
fn replay(target: &str, min: usize, mut f: impl FnMut(&[u8])) {
    let inputs = inputs(target);
    assert!(
        inputs.len() >= min,
        "{target}: {} inputs, expected at least {min}",
        inputs.len()
    );
    for (name, bytes) in &inputs {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(bytes)));
        if let Err(panic) = result {
            eprintln!("FAILED: {target} input {name}");
            std::panic::resume_unwind(panic);
        }
    }
    eprintln!("{target}: {} inputs replayed", inputs.len());
}

/// The backends to replay descriptor targets on; a missing one is a skip (a
/// failure under `EVQ_REQUIRE_ALL=1`).
fn backends() -> Vec<BackendKind> {
    for &kind in BackendKind::ALL {
        if let Err(e) = kind.available() {
            evq_testkit::skip_backend(kind.name(), e);
        }
    }
    evq_fuzz::available_backends().to_vec()
}

#[test]
fn request_corpus() {
    replay("request", 1, evq_fuzz::request::run);
}

#[test]
fn compat_kqueue_corpus_on_every_backend() {
    let kinds = backends();
    replay("compat_kqueue", 10, |data| {
        for &kind in &kinds {
            evq_fuzz::compat_kqueue::run_on(kind, data.get(1..).unwrap_or_default());
        }
    });
}

#[test]
fn compat_devpoll_corpus_on_every_backend() {
    let kinds = backends();
    replay("compat_devpoll", 5, |data| {
        for &kind in &kinds {
            evq_fuzz::compat_devpoll::run_on(kind, data.get(1..).unwrap_or_default());
        }
    });
}

#[test]
fn model_corpus_on_every_backend() {
    let kinds = backends();
    replay("model", 7, |data| {
        let ops = evq_fuzz::model::decode(data.get(1..).unwrap_or_default());
        for &kind in &kinds {
            evq_fuzz::model::run_ops(kind, &ops);
        }
    });
}

#[test]
fn load_framing_corpus() {
    replay("load_framing", 9, evq_fuzz::load_framing::run);
}

/// Set in the child processes of `capi_corpus_in_child_processes`.
const CHILD: &str = "EVQ_FUZZ_REPLAY_CHILD";

#[test]
fn capi_corpus_in_child_processes() {
    let variants: [&[(&str, &str)]; 5] = [
        &[],
        &[("EVQ_PAPER_MODE", "level")],
        &[("EVQ_BACKEND", "poll")],
        &[("EVQ_BACKEND", "poll"), ("EVQ_PAPER_MODE", "level")],
        &[("EVQ_BACKEND", "rtsig-bulk")],
    ];
    for env in variants {
        if let Some((_, backend)) = env.iter().find(|(k, _)| *k == "EVQ_BACKEND") {
            let kind: BackendKind = backend.parse().expect("a backend name");
            if let Err(e) = kind.available() {
                evq_testkit::skip_backend(kind.name(), e);
                continue;
            }
        }
        let out = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "capi_replay_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env_remove("EVQ_BACKEND")
            .env_remove("EVQ_PAPER_MODE")
            .envs(env.iter().copied())
            .output()
            .expect("spawn the replay child");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("capi: "),
            "capi replay with {env:?} failed: {}\n{text}",
            out.status
        );
    }
}

/// Not a test of its own: the body `capi_corpus_in_child_processes` runs in a
/// child process (where nothing else can take a number `evq_close_fd` frees).
#[test]
fn capi_replay_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    replay("capi", 10, evq_fuzz::capi::run);
}
