//! First contact: a TCP echo under `block_on`, a timer, a foreign executor, and
//! the multi-threaded executor with 50 connections.

use evq_async::{Async, Executor};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[test]
fn tcp_echo_block_on() {
    evq_async::block_on(async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let mut client = Async::<TcpStream>::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0; 5];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
    });
}

#[test]
fn timers() {
    let t0 = Instant::now();
    evq_async::block_on(evq_async::sleep(Duration::from_millis(20)));
    assert!(t0.elapsed() >= Duration::from_millis(20));
}

#[test]
fn foreign_executor() {
    futures::executor::block_on(async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let mut client = Async::<TcpStream>::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        evq_async::sleep(Duration::from_millis(5)).await;
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0; 5];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
    });
}

#[test]
fn executor_many() {
    let ex = Executor::with_threads(2);
    let n = ex.block_on(async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let server = ex.spawn(async move {
            for _ in 0..50 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0; 4];
                s.read_exact(&mut buf).await.unwrap();
                s.write_all(&buf).await.unwrap();
            }
        });
        let mut clients = Vec::new();
        for i in 0..50u32 {
            clients.push(ex.spawn(async move {
                let mut c = Async::<TcpStream>::connect(addr).await.unwrap();
                c.write_all(&i.to_le_bytes()).await.unwrap();
                let mut buf = [0; 4];
                c.read_exact(&mut buf).await.unwrap();
                u32::from_le_bytes(buf)
            }));
        }
        let mut sum = 0;
        for c in clients {
            sum += c.await;
        }
        server.await;
        sum
    });
    assert_eq!(n, (0..50).sum::<u32>());
}
