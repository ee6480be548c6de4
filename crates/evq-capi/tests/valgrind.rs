//! Valgrind memcheck on the C programs: no invalid access, no leak (the thread's
//! queue is freed at thread exit, the handles by evq_close / evq_notifier_free).
//! Skipped, with a note, only where `valgrind` is not installed.

mod common;

use common::{c_tests_dir, compile, describe, examples_dir, Link};
use std::path::Path;
use std::process::Command;

fn have_valgrind() -> bool {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("note: valgrind is not on PATH; memcheck tests skipped");
    }
    found
}

fn memcheck(program: &Path, args: &[&str], backend: Option<&str>) {
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--quiet",
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite,possible",
        "--track-fds=no",
    ])
    .arg(program)
    .args(args);
    match backend {
        Some(b) => cmd.env("EVQ_BACKEND", b),
        None => cmd.env_remove("EVQ_BACKEND"),
    };
    let output = cmd.output().expect("valgrind");
    assert!(output.status.success(), "{}", describe(&output));
}

#[test]
fn hello_is_memcheck_clean() {
    if !have_valgrind() {
        return;
    }
    let hello = compile(&examples_dir().join("hello.c"), "vg_hello", Link::Shared);
    memcheck(&hello, &[], None);
    memcheck(&hello, &[], Some("select-improved"));
}

#[test]
fn devpollperf_is_memcheck_clean() {
    if !have_valgrind() {
        return;
    }
    let perf = compile(
        &examples_dir().join("devpollperf.c"),
        "vg_devpollperf",
        Link::Shared,
    );
    memcheck(&perf, &["50", "500"], None);
    memcheck(&perf, &["50", "500"], Some("poll"));
}

#[test]
fn api_test_with_threads_and_handles_is_memcheck_clean() {
    if !have_valgrind() {
        return;
    }
    let api = compile(
        &c_tests_dir().join("api_test.c"),
        "vg_api_test",
        Link::Static,
    );
    memcheck(&api, &[], None);
}
