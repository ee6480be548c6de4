//! The C examples in `examples/c/`, compiled with the system `cc` and run against
//! real pipes and sockets: hello, devpollperf, and Figure 3's echo server, which
//! must echo and must sleep while its connections are idle.

mod common;

use common::{compile, describe, examples_dir, run, run_with, Link};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn hello_shared() {
    let hello = compile(&examples_dir().join("hello.c"), "hello", Link::Shared);
    let output = run(&hello, &[], None);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("state 0x0"), "{stdout}");
    assert!(stdout.contains("mask 0x1, read \"hello\""), "{stdout}");
}

#[test]
fn hello_static_on_every_backend() {
    let hello = compile(
        &examples_dir().join("hello.c"),
        "hello_static",
        Link::Static,
    );
    // hello reads what each event reports, so level semantics serve it too; on
    // select and poll it must ask for them (event semantics are refused there).
    for backend in ["epoll", "poll", "select", "select-improved"] {
        let output = run_with(&hello, &[], Some(backend), Some("level"));
        assert!(output.status.success(), "{backend}: {}", describe(&output));
    }
    let refused = run_with(&hello, &[], Some("poll"), None);
    assert!(!refused.status.success(), "{}", describe(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("declare_interest: Operation not supported"),
        "{stderr}"
    );
}

#[test]
fn devpollperf_delivers_exactly_the_written_pipe() {
    let perf = compile(
        &examples_dir().join("devpollperf.c"),
        "devpollperf",
        Link::Shared,
    );
    // devpollperf reads every pipe it is told of: level semantics are what it
    // measures poll with (asked for, since the paper API's default is event mode).
    for backend in [None, Some("poll"), Some("select-improved")] {
        let output = run_with(&perf, &["300", "3000", "7"], backend, Some("level"));
        assert!(
            output.status.success(),
            "{backend:?}: {}",
            describe(&output)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.starts_with("devpollperf: 300 pipes, 3000 rounds"),
            "{stdout}"
        );
        println!("{backend:?}: {}", stdout.trim());
    }
}

/// The Figure 3 server, its stdout lines arriving on a channel.
struct Fig3 {
    child: Child,
    lines: mpsc::Receiver<String>,
    port: u16,
}

impl Fig3 {
    fn start() -> Fig3 {
        let program = compile(
            &examples_dir().join("fig3_echo.c"),
            "fig3_echo",
            Link::Shared,
        );
        let mut child = Command::new(program)
            .args(["-p", "0", "-s"])
            .env_remove("EVQ_BACKEND") // the default, epoll: event semantics
            .stdout(Stdio::piped())
            .spawn()
            .expect("fig3_echo");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("fig3_echo did not start");
        let port = first
            .strip_prefix("listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        Fig3 { child, lines, port }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    /// CPU time the server has used (user + system).
    fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf takes no pointers.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / hz)
    }
}

impl Drop for Fig3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `returns=N` from a counters line.
fn returns(line: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("returns="))
        .and_then(|n| n.parse().ok())
}

#[test]
fn fig3_echo_server_echoes_and_sleeps_with_idle_connections() {
    let server = Fig3::start();

    // 32 connections, each declared EVENT_READ|EVENT_WRITE by the server; each
    // echoes one line.
    let mut clients: Vec<TcpStream> = (0..32).map(|_| server.connect()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let msg = format!("hello {i}\n");
        c.write_all(msg.as_bytes()).unwrap();
        let mut back = vec![0; msg.len()];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, msg.as_bytes());
    }

    // One megabyte through one connection: more than the socket buffers and the
    // server's 64 KiB per-connection buffer, so EVENT_WRITE must resume the echo.
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut writer = clients[0].try_clone().unwrap();
    let to_send = big.clone();
    let sender = std::thread::spawn(move || writer.write_all(&to_send));
    let mut echoed = vec![0; big.len()];
    clients[0].read_exact(&mut echoed).unwrap();
    sender.join().unwrap().unwrap();
    assert!(echoed == big, "the megabyte came back changed");

    // Now everything is idle. The server prints its counters at every 1 s timeout;
    // a server that spun on writable connections would never time out. Two
    // consecutive timeouts with no event in between: it slept a whole second.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let mut previous: Option<(u64, Duration)> = None;
    let idle = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = server
            .lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no idle second within 60 s; lines: {seen:#?}"));
        seen.push(line.clone());
        let Some(n) = line.strip_prefix("timeout: ").and_then(returns) else {
            continue;
        };
        let cpu = server.cpu_time();
        match previous {
            Some((m, cpu_then)) if m == n => break (n, cpu - cpu_then),
            _ => previous = Some((n, cpu)),
        }
    };
    let (returns_so_far, idle_cpu) = idle;
    println!(
        "idle second: 0 get_next_event returns with events, {idle_cpu:?} CPU; \
         {returns_so_far} returns with events for 32 connections, 33 echoes and 1 MiB"
    );
    assert!(
        idle_cpu < Duration::from_millis(50),
        "server used {idle_cpu:?} CPU in an idle second"
    );

    // Hang up, then SIGTERM: the server reports and exits cleanly.
    drop(clients);
    // SAFETY: kill(2) takes no pointers; the pid is our own child, still unreaped.
    assert_eq!(
        unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let exit_line = loop {
        let line = server
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("no exit line after SIGTERM");
        if line.starts_with("exit: ") {
            break line;
        }
    };
    assert!(exit_line.contains("accepted=32"), "{exit_line}");
    let echoed_bytes = 32 * "hello NN\n".len() - 10 + (1 << 20);
    assert!(
        exit_line.contains(&format!("echoed={echoed_bytes}")),
        "{exit_line}"
    );
    let mut server = server;
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}");
}
