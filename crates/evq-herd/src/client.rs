//! The closed-loop client: threads that connect, send the request line and read
//! the reply, one request after another.

use crate::net;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The closed-loop client: `concurrency` threads, each making `per_client`
/// requests one after another (connect, send the request line, read the reply to
/// end-of-file), stopping at `limit`. Returns (completed, failed, elapsed,
/// timed out).
pub(crate) fn drive(
    addr: SocketAddr,
    concurrency: usize,
    per_client: usize,
    limit: Duration,
) -> (u64, u64, Duration, bool) {
    let barrier = Arc::new(Barrier::new(concurrency + 1));
    let start_deadline = Arc::new(std::sync::OnceLock::<Instant>::new());
    let threads: Vec<_> = (0..concurrency)
        .filter_map(|_| {
            let (barrier, deadline) = (barrier.clone(), start_deadline.clone());
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    barrier.wait();
                    let deadline = *deadline.get().unwrap_or(&Instant::now());
                    let (mut ok, mut failed, mut late) = (0u64, 0u64, false);
                    for _ in 0..per_client {
                        if Instant::now() >= deadline {
                            late = true;
                            break;
                        }
                        if request(addr, deadline) {
                            ok += 1;
                        } else {
                            failed += 1;
                        }
                    }
                    (ok, failed, late)
                })
                .ok()
        })
        .collect();
    let missing = concurrency - threads.len();
    // Threads that could not be spawned never reach the barrier: stand in for them.
    let stand_ins: Vec<_> = (0..missing)
        .map(|_| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
            })
        })
        .collect();
    let _ = start_deadline.set(Instant::now() + limit);
    let start = Instant::now();
    barrier.wait();
    let (mut ok, mut failed, mut late) = (0, 0, false);
    for t in threads {
        if let Ok((o, f, l)) = t.join() {
            ok += o;
            failed += f;
            late |= l;
        }
    }
    for s in stand_ins {
        let _ = s.join();
    }
    (ok, failed, start.elapsed(), late)
}

fn request(addr: SocketAddr, deadline: Instant) -> bool {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, left) else {
        return false;
    };
    if s.set_read_timeout(Some(left)).is_err() || s.write_all(net::REQUEST).is_err() {
        return false;
    }
    let mut reply = Vec::with_capacity(128);
    s.read_to_end(&mut reply).is_ok() && reply == net::BODY
}
