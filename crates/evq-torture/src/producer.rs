//! Producers: each owns the write ends of a share of the channels and keeps
//! writing numbered records into them until told to stop, then flushes what it
//! began, so every produced record is complete in the kernel.

use crate::shared::Shared;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Writes into `slots` (indices into `shared.slots`) until `stop_producers`, then
/// flushes. Returns the write errors it met other than a full channel or a closed
/// peer (an `EPIPE` or reset after the consumer closed its end is expected).
pub fn run(shared: &Shared, slots: Vec<usize>, seed: u64) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut errors = Vec::new();
    let mut round = 0u64;
    while !shared.stop_producers.load(Ordering::Acquire) {
        if shared.pause_producers.load(Ordering::Acquire) {
            flush_all(shared, &slots, &mut errors);
            shared.producers_paused.fetch_add(1, Ordering::AcqRel);
            while shared.pause_producers.load(Ordering::Acquire)
                && !shared.stop_producers.load(Ordering::Acquire)
            {
                std::thread::sleep(Duration::from_micros(200));
            }
            shared.producers_paused.fetch_sub(1, Ordering::AcqRel);
            continue;
        }
        round += 1;
        for &i in &slots {
            let mut w = shared.slots[i]
                .writer
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(writer) = w.as_mut() {
                let n = rng.u32(1..=4);
                if let Err(e) = writer.write(n, shared.now_ns()) {
                    note(&mut errors, e);
                }
            }
        }
        // Let consumers and the kernel breathe now and then, so pressure comes in
        // waves instead of a permanent flood (both shapes find bugs).
        if round % 64 == 0 {
            std::thread::sleep(Duration::from_micros(rng.u64(0..500)));
        }
    }
    flush_all(shared, &slots, &mut errors);
    errors
}

/// Every record begun must reach the kernel whole, or a consumer would wait for
/// its tail for ever. A consumer may close a channel meanwhile; that is fine.
fn flush_all(shared: &Shared, slots: &[usize], errors: &mut Vec<String>) {
    for _ in 0..10_000 {
        let mut left = false;
        for &i in slots {
            let mut w = shared.slots[i]
                .writer
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(writer) = w.as_mut() {
                match writer.flush() {
                    Ok(done) => left |= !done,
                    Err(e) => note(errors, e),
                }
            }
        }
        if !left {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn note(errors: &mut Vec<String>, e: std::io::Error) {
    let expected = matches!(
        e.raw_os_error(),
        Some(libc::EPIPE) | Some(libc::ECONNRESET) | Some(libc::ENOTCONN)
    );
    if !expected && errors.len() < 16 {
        errors.push(e.to_string());
    }
}
