//! Conformance of `CompletionRing::get_next_completion_gathered` (quirk s): a
//! wait that has to sleep returns once its batch is in, or once its `within`
//! has passed with at least one completion, and never after its timeout; a
//! kernel without batch waits (`RingSetup::gathers` false) returns at the
//! first completion, as `get_next_completion` does. Bytes reach the sockets
//! from a thread after the wait has begun, so each case is decided by the
//! wait, not by what was ready before it.

use evq::completion::{CompletionOptions, Completions, Gather};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

mod util;

use util::completion::{ring, seen, tcp_pair};

/// Three connected pairs, each server side with a multishot recv armed
/// (token = its index), and the ring's first enter done.
fn three_receivers(r: &mut evq::completion::CompletionRing) -> Vec<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let pairs: Vec<_> = (0..3).map(|_| tcp_pair(&listener)).collect();
    for (i, (server, _)) in pairs.iter().enumerate() {
        r.recv_multishot(server.as_raw_fd(), i as u64);
    }
    r.submit().unwrap();
    pairs
}

/// Writes a byte to each client in `clients` after `delay`, one by one
/// `spacing` apart, from a thread.
fn write_later(clients: Vec<TcpStream>, delay: Duration, spacing: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        for mut c in &clients {
            c.write_all(b"x").unwrap();
            std::thread::sleep(spacing);
        }
        // Held open (no end of file to complete a recv) until the test has
        // seen its completions.
        std::thread::sleep(Duration::from_secs(10));
        drop(clients);
    });
}

/// One gathered wait into `out`: how many completions, and how long it took.
fn timed_wait(
    r: &mut evq::completion::CompletionRing,
    out: &mut Completions,
    timeout: Duration,
    gather: Gather,
) -> (usize, Duration) {
    let start = Instant::now();
    let n = r
        .get_next_completion_gathered(out, Some(timeout), gather)
        .unwrap();
    (n, start.elapsed())
}

#[test]
fn a_gathered_wait_returns_with_its_batch() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let pairs = three_receivers(&mut r);
    let (servers, clients): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    write_later(
        clients,
        Duration::from_millis(20),
        Duration::from_millis(100),
    );
    let mut out = Completions::with_capacity(16);
    let (n, took) = timed_wait(
        &mut r,
        &mut out,
        Duration::from_secs(20),
        Gather::new(3, Duration::from_secs(10)),
    );
    if r.setup().gathers {
        // The third byte goes ~220 ms in: the wait slept through the first two.
        let seen: Vec<_> = out.iter_mut().map(|c| seen(&r, c)).collect();
        assert_eq!(n, 3, "the whole batch, after {took:?}: {seen:?}");
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(
            took < Duration::from_secs(8),
            "not held to `within`: {took:?}"
        );
    } else {
        assert!(
            n >= 1 && took < Duration::from_secs(8),
            "{n} after {took:?}"
        );
    }
    drop(servers);
}

#[test]
fn a_gathered_wait_gives_up_the_batch_after_within() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let pairs = three_receivers(&mut r);
    let (servers, mut clients): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
    // One byte, 50 ms in; a batch of 8 never comes.
    write_later(
        clients.drain(..1).collect(),
        Duration::from_millis(50),
        Duration::ZERO,
    );
    let mut out = Completions::with_capacity(16);
    let (n, took) = timed_wait(
        &mut r,
        &mut out,
        Duration::from_secs(20),
        Gather::new(8, Duration::from_millis(400)),
    );
    assert_eq!(n, 1, "after {took:?}");
    assert!(
        took < Duration::from_secs(8),
        "held to the timeout: {took:?}"
    );
    if r.setup().gathers {
        assert!(
            took >= Duration::from_millis(350),
            "returned before within: {took:?}"
        );
    }
    drop((servers, clients));
}

#[test]
fn a_gathered_wait_never_outlasts_its_timeout() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let pairs = three_receivers(&mut r);
    let mut out = Completions::with_capacity(16);
    // Nothing comes: the timeout (300 ms) ends it, not `within` (60 s).
    let (n, took) = timed_wait(
        &mut r,
        &mut out,
        Duration::from_millis(300),
        Gather::new(8, Duration::from_secs(60)),
    );
    assert_eq!(n, 0);
    assert!(took >= Duration::from_millis(250), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Completions already in hand come back at once, however many asked.
    let mut clients: Vec<_> = pairs.iter().map(|(_, c)| c.try_clone().unwrap()).collect();
    for c in &mut clients {
        c.write_all(b"y").unwrap();
    }
    let mut got = 0;
    let give_up = Instant::now() + Duration::from_secs(10);
    while got < 3 && Instant::now() < give_up {
        got += r
            .get_next_completion_gathered(
                &mut out,
                Some(Duration::from_secs(5)),
                Gather::new(64, Duration::from_millis(100)),
            )
            .unwrap();
    }
    assert_eq!(got, 3, "every byte's completion came");
    drop(pairs);
}
