//! Shared helpers of the completion suites: a ring or a skip, completions kept
//! as plain data, dequeuing until a condition, and a TCP pair.

use evq::completion::{Completion, CompletionOptions, CompletionRing, Completions, OpKind};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long a completion test waits for progress before it fails (a loaded
/// 2-core box; tests only wait this long when failing).
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A completion ring, or `None` (printed; a failure under `EVQ_REQUIRE_ALL=1`)
/// where the kernel lacks what the completion API needs.
pub fn ring(options: CompletionOptions) -> Option<CompletionRing> {
    evq_testkit::completions_or_skip(CompletionRing::with_options(options), "CompletionRing")
}

/// One completion as plain data, so it can be kept past the next dequeue.
#[derive(Debug, Clone)]
pub struct Seen {
    pub token: u64,
    pub kind: OpKind,
    pub result: Result<u32, i32>,
    pub more: bool,
    pub data: Vec<u8>,
    /// The caller's buffers handed back (send, writev, recv_into).
    pub returned: Option<Vec<Vec<u8>>>,
}

pub fn seen(ring: &CompletionRing, c: &mut Completion) -> Seen {
    Seen {
        token: c.token(),
        kind: c.kind(),
        result: c.result().map_err(|e| e.raw_os_error().unwrap_or(0)),
        more: c.more(),
        data: ring.received(c).map(<[u8]>::to_vec).unwrap_or_default(),
        returned: c.take_buffers(),
    }
}

/// Dequeues (batches of `capacity`), handing each completion to `each`, until `each`
/// answers true (the rest of that batch is still handed over); panics after PATIENCE.
pub fn run_until(
    ring: &mut CompletionRing,
    capacity: usize,
    mut each: impl FnMut(&mut CompletionRing, Seen) -> bool,
) {
    let give_up = Instant::now() + PATIENCE;
    let mut batch = Completions::with_capacity(capacity);
    let mut done = false;
    while !done {
        assert!(Instant::now() < give_up, "no progress within {PATIENCE:?}");
        ring.get_next_completion(&mut batch, Some(Duration::from_millis(200)))
            .expect("get_next_completion");
        let got: Vec<Seen> = batch.iter_mut().map(|c| seen(ring, c)).collect();
        for s in got {
            done |= each(ring, s);
        }
    }
}

/// Collects completions until one with `token` and `more == false` arrives.
pub fn until_final(ring: &mut CompletionRing, token: u64) -> Vec<Seen> {
    let mut all = Vec::new();
    run_until(ring, 64, |_, s| {
        let last = s.token == token && !s.more;
        all.push(s);
        last
    });
    all
}

/// A connected loopback TCP pair: (server side, client side).
pub fn tcp_pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (server, client)
}
