//! An echo client on evq-async: `--connections` connections, each sending
//! `--messages` messages and checking every echo, all concurrently on one thread.
//!
//! ```console
//! $ cargo run --release -p evq-async --example echo_client -- --addr 127.0.0.1:7000 --connections 100
//! 100 connections × 1000 messages of 64 bytes: 100000 round trips in 1.52 s (65789/s), all echoed intact
//! ```

use clap::Parser;
use evq_async::{Async, Executor};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// What the client sends.
#[derive(Clone, Debug, Parser)]
#[command(about = "An echo client on evq-async")]
pub struct ClientConfig {
    /// The echo server.
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: SocketAddr,
    /// Concurrent connections.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub connections: u32,
    /// Messages per connection (each waits for its echo).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub messages: u32,
    /// Bytes per message.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub size: u32,
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    /// Round trips completed, every echo checked.
    pub round_trips: u64,
    /// Wall time from the first connect to the last echo.
    pub elapsed: Duration,
}

/// Runs the clients on `ex`; fails on the first connection error or wrong echo.
pub async fn run(ex: &Executor, config: &ClientConfig) -> io::Result<Report> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..config.connections)
        .map(|c| {
            let config = config.clone();
            ex.spawn(async move {
                let mut stream = Async::<TcpStream>::connect(config.addr).await?;
                stream.get_ref().set_nodelay(true)?;
                let mut out = vec![0u8; config.size as usize];
                let mut back = vec![0u8; config.size as usize];
                for m in 0..config.messages {
                    for (i, b) in out.iter_mut().enumerate() {
                        *b = (c as usize + m as usize + i) as u8;
                    }
                    stream.write_all(&out).await?;
                    stream.read_exact(&mut back).await?;
                    if back != out {
                        return Err(io::Error::other(format!(
                            "connection {c}: message {m} came back changed"
                        )));
                    }
                }
                Ok::<u64, io::Error>(config.messages as u64)
            })
        })
        .collect();
    let mut round_trips = 0;
    for t in tasks {
        round_trips += t.await?;
    }
    Ok(Report {
        round_trips,
        elapsed: start.elapsed(),
    })
}

#[allow(dead_code)] // the tests include this file as a module and have their own main
fn main() -> io::Result<()> {
    let config = ClientConfig::parse();
    let ex = Executor::with_threads(0);
    let report = ex.block_on(run(&ex, &config))?;
    let secs = report.elapsed.as_secs_f64();
    println!(
        "{} connections × {} messages of {} bytes: {} round trips in {secs:.2} s ({:.0}/s), all echoed intact",
        config.connections,
        config.messages,
        config.size,
        report.round_trips,
        report.round_trips as f64 / secs
    );
    Ok(())
}
