//! Runs `tests/c/api_test.c` — every C call's success and error paths, the
//! statemask race, fd reuse, per-thread queues, fork, notifiers — once per backend,
//! and once linked statically.

mod common;

use common::{c_tests_dir, compile, describe, run, Link};
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
    let output = run(&api_test(link), &[], backend);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", describe(&output));
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(
        summary.ends_with(" 0 failed") && !summary.contains(": 0 checks passed"),
        "{}",
        describe(&output)
    );
    println!("{summary}");
}

#[test]
fn on_the_default_backend() {
    passes(Link::Shared, None);
}

#[test]
fn on_epoll() {
    passes(Link::Shared, Some("epoll"));
}

#[test]
fn on_poll_with_the_level_fallback() {
    passes(Link::Shared, Some("poll"));
}

#[test]
fn on_select() {
    passes(Link::Shared, Some("select"));
}

#[test]
fn on_select_improved() {
    passes(Link::Shared, Some("select-improved"));
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
    let output = run(&api_test(Link::Shared), &[], Some("kqueue"));
    // main()'s first get_next_event fails with EINVAL and the program says so.
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Invalid argument"), "{}", describe(&output));
}
