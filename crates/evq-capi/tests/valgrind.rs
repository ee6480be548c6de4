//! Valgrind memcheck on the C programs: no invalid access, no leak (the thread's
//! queue is freed at thread exit, the handles by evq_close / evq_notifier_free).
//! Skipped, with a note, only where `valgrind` is not installed (a failure under
//! `EVQ_REQUIRE_ALL=1`).

mod common;

use common::{c_tests_dir, compile, describe, examples_dir, Link};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn have_valgrind() -> bool {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        evq_testkit::skip("valgrind", "not on PATH (Debian package valgrind)");
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
        // hello and devpollperf read what every event reports: on the state-only
        // backends they ask for level semantics (event semantics are refused there).
        Some(b) => cmd.env("EVQ_BACKEND", b).env("EVQ_PAPER_MODE", "level"),
        None => cmd.env_remove("EVQ_BACKEND").env_remove("EVQ_PAPER_MODE"),
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

#[test]
fn fig3_echo_serving_a_connection_is_memcheck_clean() {
    if !have_valgrind() {
        return;
    }
    let fig3 = compile(
        &examples_dir().join("fig3_echo.c"),
        "vg_fig3_echo",
        Link::Shared,
    );
    // -t 3: the server exits by itself 3 s after starting, at a 1 s timeout.
    let mut child = Command::new("valgrind")
        .args([
            "--quiet",
            "--error-exitcode=1",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,possible",
        ])
        .arg(&fig3)
        .args(["-p", "0", "-t", "3"])
        .env_remove("EVQ_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("valgrind");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let port: u16 = first
        .strip_prefix("listening on 127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    conn.write_all(b"under valgrind\n").unwrap();
    let mut back = [0; 15];
    conn.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"under valgrind\n");
    drop(conn);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}\nstdout after the first line: {rest:?}",
        describe(&output)
    );
    assert!(
        rest.last()
            .is_some_and(|l| l.contains("accepted=1 echoed=15")),
        "{rest:?}"
    );
}
