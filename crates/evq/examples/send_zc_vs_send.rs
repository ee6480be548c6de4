//! `send` against `send_zc` on one `CompletionRing`, over a TCP loopback connection
//! drained by a reader thread: throughput per buffer size, side by side in one run.
//!
//! Each size runs `ROUNDS` alternating rounds of each kind (send, send_zc, send,
//! ...) of `millis` each, one operation in flight at a time (the buffer comes back
//! with the completion and is sent again), and reports each kind's median round.
//! Loopback copies the data even for send_zc (the kernel cannot hand pinned pages
//! to a local receiver): the `copied` column counts the notifications that said
//! so (as a share of send_zc operations), and the figures measure zero copy's
//! bookkeeping without its benefit.
//!
//! ```text
//! cargo run --release -p evq --example send_zc_vs_send [millis_per_round]
//! ```

use evq::completion::{CompletionRing, Completions};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const SIZES_KIB: [usize; 5] = [1, 4, 16, 64, 256];
const ROUNDS: usize = 5;

/// Sends `buf` over and over for `run`, one in flight; returns bytes per second
/// and the number of operations.
fn round(
    ring: &mut CompletionRing,
    fd: i32,
    zc: bool,
    buf: &mut Vec<u8>,
    run: Duration,
) -> (f64, u64) {
    let mut batch = Completions::with_capacity(4);
    let start = Instant::now();
    let (mut bytes, mut ops) = (0u64, 0u64);
    while start.elapsed() < run {
        let data = std::mem::take(buf);
        if zc {
            ring.send_zc(fd, data, 0);
        } else {
            ring.send(fd, data, 0);
        }
        loop {
            ring.get_next_completion(&mut batch, None)
                .expect("get_next_completion");
            if let Some(c) = batch.iter_mut().next() {
                bytes += u64::from(c.result().expect("send"));
                ops += 1;
                *buf = c.take_buffers().expect("buffer").pop().expect("one");
                break;
            }
        }
    }
    (bytes as f64 / start.elapsed().as_secs_f64(), ops)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> std::io::Result<()> {
    let millis = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("millis_per_round"))
        .unwrap_or(300);
    let run = Duration::from_millis(millis);
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    server.set_nodelay(true)?;
    let reader = std::thread::spawn(move || {
        let mut client = client;
        let mut sink = vec![0u8; 1 << 20];
        while client.read(&mut sink).map(|n| n > 0).unwrap_or(false) {}
    });
    let mut ring = CompletionRing::new()?;
    let fd = server.as_raw_fd();
    println!(
        "one TCP loopback connection, one op in flight, median of {ROUNDS} rounds of {millis} ms"
    );
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>8}",
        "size", "send MB/s", "zc MB/s", "zc/send", "copied"
    );
    for kib in SIZES_KIB {
        let mut buf = vec![0x5a; kib * 1024];
        let (mut plain, mut zero) = (Vec::new(), Vec::new());
        let copied_before = ring.stats().send_zc_copied;
        let mut zc_ops = 0;
        for _ in 0..ROUNDS {
            plain.push(round(&mut ring, fd, false, &mut buf, run).0);
            let (rate, ops) = round(&mut ring, fd, true, &mut buf, run);
            zero.push(rate);
            zc_ops += ops;
        }
        let (p, z) = (median(plain), median(zero));
        let copied = ring.stats().send_zc_copied - copied_before;
        println!(
            "{:>5} KiB {:>12.0} {:>12.0} {:>8.2} {:>7.0}%",
            kib,
            p / 1e6,
            z / 1e6,
            z / p,
            100.0 * copied as f64 / zc_ops.max(1) as f64
        );
    }
    drop(ring);
    drop(server);
    reader.join().expect("reader");
    Ok(())
}
