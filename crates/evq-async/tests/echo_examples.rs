//! The echo server and client examples, run against each other (and the server
//! against a plain blocking std client), on this backend and every other one.

#[path = "../examples/echo_client.rs"]
mod echo_client;
#[path = "../examples/echo_server.rs"]
mod echo_server;
mod util;

use evq_async::{Async, Executor};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

fn start_server(threads: usize) -> SocketAddr {
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let addr = listener.get_ref().local_addr().unwrap();
    std::thread::spawn(move || {
        let ex = Executor::with_threads(threads);
        let _ = ex.block_on(echo_server::serve(ex.clone(), listener));
    });
    addr
}

#[test]
fn the_client_example_against_the_server_example() {
    let addr = start_server(1);
    let config = echo_client::ClientConfig {
        addr,
        connections: 50,
        messages: 200,
        size: 1000,
    };
    let ex = Executor::with_threads(1);
    let report = ex
        .block_on(evq_async::timeout(
            util::PATIENCE,
            echo_client::run(&ex, &config),
        ))
        .expect("the echo run hung")
        .expect("the echo run failed");
    assert_eq!(report.round_trips, 50 * 200);
}

#[test]
fn the_server_example_against_a_blocking_client() {
    let addr = start_server(0);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(util::PATIENCE)).unwrap();
    // 1 MB, in one write: the server must cope with partial reads and writes.
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let writer = {
        let mut w = s.try_clone().unwrap();
        let data = data.clone();
        std::thread::spawn(move || w.write_all(&data).unwrap())
    };
    let mut back = vec![0; data.len()];
    s.read_exact(&mut back).unwrap();
    writer.join().unwrap();
    assert!(back == data, "echo differs");
}

#[test]
fn on_every_backend() {
    util::rerun_on_other_backends(&["--skip", "on_every_backend", "--test-threads", "2"]);
}
