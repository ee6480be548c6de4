//! Hundreds of socket pairs written in random order: every event seen exactly
//! once, on every backend and every mode it supports.

mod util;

use evq::EventQueue;
use std::collections::HashMap;
use util::*;

const PAIRS: usize = 400;

fn shuffled(n: usize, mut seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn every_write_is_seen_exactly_once() {
    for_each_backend(every_backend, |kind| {
        for mode in supported_modes(kind) {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let pairs = pairs(PAIRS);
            declare_readers(std::slice::from_mut(&mut q), &pairs, mode);
            // Write in random order, interleaved with dequeues of small batches.
            let order = shuffled(PAIRS, 0x9e37_79b9_7f4a_7c15 ^ mode as u64);
            let mut seen: HashMap<u64, usize> = HashMap::new();
            let handle = |events: Vec<evq::Event>, seen: &mut HashMap<u64, usize>| {
                for e in events {
                    assert!(e.is_readable(), "{mode:?}: {e:?}");
                    let (ours, _) = &pairs[e.token() as usize];
                    assert_eq!(e.fd(), fd(ours), "{mode:?}: token and fd disagree");
                    assert_eq!(drain(ours), 1, "{mode:?}: event without its byte: {e:?}");
                    *seen.entry(e.token()).or_default() += 1;
                }
            };
            for chunk in order.chunks(37) {
                for &i in chunk {
                    send(&pairs[i].1, 1);
                }
                let got = wait(&mut q, 16, Some(std::time::Duration::ZERO));
                handle(got, &mut seen);
            }
            while seen.len() < PAIRS {
                let got = wait_some(&mut q, 16);
                handle(got, &mut seen);
            }
            assert!(
                peek(&mut q).is_empty(),
                "{mode:?}: extra events after all were read"
            );
            let dupes: Vec<_> = seen.iter().filter(|(_, &n)| n != 1).collect();
            assert!(dupes.is_empty(), "{mode:?}: seen more than once: {dupes:?}");
        }
    });
}
