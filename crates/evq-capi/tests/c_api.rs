//! Runs `tests/c/api_test.c` — every C call's success and error paths, the
//! statemask race, fd reuse, per-thread queues, fork, notifiers — once per backend,
//! once linked statically, and with `EVQ_PAPER_MODE=level` where the paper's event
//! semantics are refused (select, poll) or where level must be asked for (epoll).

mod common;

use common::{c_tests_dir, compile, describe, run_with, Link};
use std::path::PathBuf;
use std::sync::OnceLock;

fn api_test(link: Link) -> PathBuf {
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    static STATIC: OnceLock<PathBuf> = OnceLock::new();
    let (cell, name) = match link {
        Link::Shared => (&SHARED, "api_test"),
        Link::Static => (&STATIC, "api_test_static"),
    };
    cell.get_or_init(|| compile(&c_tests_dir().join("api_test.c"), name, link))
        .clone()
}

fn passes(link: Link, backend: Option<&str>) {
    passes_in(link, backend, None);
}

/// Runs the C tests and returns their summary line, which names the paper API's
/// mode as the program found it: `event`, `level` or `refused`.
fn passes_in(link: Link, backend: Option<&str>, paper_mode: Option<&str>) -> String {
    let output = run_with(&api_test(link), &[], backend, paper_mode);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", describe(&output));
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.ends_with(" 0 failed") && !summary.contains(": 0 checks passed"),
        "{}",
        describe(&output)
    );
    println!("{summary}");
    summary.to_string()
}

#[test]
fn on_the_default_backend() {
    passes(Link::Shared, None);
}

#[test]
fn on_epoll() {
    passes(Link::Shared, Some("epoll"));
}

/// select and poll see only state: the paper's event semantics are refused with
/// EOPNOTSUPP (the program checks it), and level semantics are there when asked for.
fn on_a_state_only_backend(backend: &str) {
    let refused = passes_in(Link::Shared, Some(backend), None);
    assert!(refused.contains("paper API refused"), "{refused}");
    let level = passes_in(Link::Shared, Some(backend), Some("level"));
    assert!(level.contains("paper API level"), "{level}");
}

#[test]
fn on_poll() {
    on_a_state_only_backend("poll");
}

#[test]
fn on_select() {
    on_a_state_only_backend("select");
}

#[test]
fn on_select_improved() {
    on_a_state_only_backend("select-improved");
}

#[test]
fn level_mode_when_asked_for_on_epoll() {
    let event = passes_in(Link::Shared, Some("epoll"), None);
    assert!(event.contains("paper API event"), "{event}");
    let level = passes_in(Link::Shared, Some("epoll"), Some("level"));
    assert!(level.contains("paper API level"), "{level}");
}

#[test]
fn unknown_paper_mode_is_einval() {
    let output = run_with(&api_test(Link::Shared), &[], Some("epoll"), Some("edge"));
    // main()'s first get_next_event creates the queue, which reads EVQ_PAPER_MODE.
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Invalid argument"), "{}", describe(&output));
}

#[test]
fn on_uring() {
    passes(Link::Shared, Some("uring"));
}

#[test]
fn on_rtsig() {
    passes(Link::Shared, Some("rtsig"));
}

#[test]
fn on_rtsig_bulk() {
    passes(Link::Shared, Some("rtsig-bulk"));
}

#[test]
fn linked_statically() {
    passes(Link::Static, None);
}

#[test]
fn unknown_evq_backend_is_einval_not_a_crash() {
    let output = run_with(&api_test(Link::Shared), &[], Some("kqueue"), None);
    // main()'s first get_next_event fails with EINVAL and the program says so.
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Invalid argument"), "{}", describe(&output));
}
