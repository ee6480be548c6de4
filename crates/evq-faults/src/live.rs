//! Live clients: the users who keep coming while a fault is injected. Each is a
//! thread with one keep-alive connection from 127.0.0.1 checking every reply:
//! status, and the body byte for byte — a fixed body from `evq serve`, or,
//! through the proxy, the scripted origin's echo of the request's own id, so a
//! reply meant for someone else counts as wrong, not as served.
//!
//! Two ways to send. Closed loop ([`LiveSpec::pace`] `None`): a request as soon
//! as the previous reply is in, so the rate is all the server can give — what
//! the warm-up measures as capacity. Paced: a request every `pace` per
//! connection (a late reply sends the next at once; more than a few intervals
//! behind, the schedule restarts rather than bursting). The fault rows pace
//! their live clients at half the capacity measured: users offer a load, they
//! do not saturate the server, and on a machine whose CPUs the server shares
//! with the clients and the injector a closed loop measures every process's
//! appetite, not the server's resistance (fault-free windows of one row
//! differed by up to 35% here, closed loop).
//!
//! A client whose connection fails counts the failure, waits 20 ms (so a dead
//! server is not spun on) and connects again.

use crate::http::{self, ReadError, ResponseReader};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The header carrying a request's id, which the scripted origin echoes.
pub const ID_HEADER: &str = "X-Req-Id";

/// The body the scripted origin answers `/live` with, for request `id`.
pub fn echo_body(id: u64) -> String {
    format!("live {id}\n")
}

/// What a good reply holds.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Exactly these bytes.
    Body(Arc<Vec<u8>>),
    /// The origin's echo of the request id ([`echo_body`]).
    Echo,
}

/// The live clients to run.
#[derive(Clone, Debug)]
pub struct LiveSpec {
    /// Where they connect.
    pub target: SocketAddr,
    /// Connections (one thread each).
    pub conns: usize,
    /// What they ask for.
    pub path: String,
    /// What a good reply holds.
    pub expect: Expect,
    /// How long a reply may take before it counts as failed.
    pub timeout: Duration,
    /// A request every this long per connection; `None`: closed loop.
    pub pace: Option<Duration>,
}

/// Behind schedule by more than this many intervals, a paced client restarts
/// its schedule instead of sending the missed requests in a burst.
const MAX_BEHIND: u32 = 4;

/// Counts of replies, summed over the live clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LiveCount {
    /// 2xx with the expected body.
    pub ok: u64,
    /// 2xx with another body: misdelivered or corrupted.
    pub wrong_body: u64,
    /// 5xx answers.
    pub status_5xx: u64,
    /// Other non-2xx answers.
    pub status_other: u64,
    /// Requests with no complete reply (reset, early close, garbage, timeout).
    pub failed: u64,
    /// Of `failed`, the ones that timed out.
    pub timed_out: u64,
    /// Connections made.
    pub connects: u64,
    /// Good replies that said `Connection: close`.
    pub told_to_close: u64,
}

impl LiveCount {
    /// Every request the clients sent got a good reply.
    pub fn all_good(&self) -> bool {
        self.wrong_body == 0 && self.status_5xx == 0 && self.status_other == 0 && self.failed == 0
    }

    /// Requests that ended, one way or another.
    pub fn ended(&self) -> u64 {
        self.ok + self.wrong_body + self.status_5xx + self.status_other + self.failed
    }

    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &LiveCount) -> LiveCount {
        LiveCount {
            ok: self.ok - earlier.ok,
            wrong_body: self.wrong_body - earlier.wrong_body,
            status_5xx: self.status_5xx - earlier.status_5xx,
            status_other: self.status_other - earlier.status_other,
            failed: self.failed - earlier.failed,
            timed_out: self.timed_out - earlier.timed_out,
            connects: self.connects - earlier.connects,
            told_to_close: self.told_to_close - earlier.told_to_close,
        }
    }

    /// `self + other`, field by field.
    pub fn plus(&self, o: &LiveCount) -> LiveCount {
        LiveCount {
            ok: self.ok + o.ok,
            wrong_body: self.wrong_body + o.wrong_body,
            status_5xx: self.status_5xx + o.status_5xx,
            status_other: self.status_other + o.status_other,
            failed: self.failed + o.failed,
            timed_out: self.timed_out + o.timed_out,
            connects: self.connects + o.connects,
            told_to_close: self.told_to_close + o.told_to_close,
        }
    }

    /// "1234 ok" or "1200 ok, 3 failed (1 timed out), 2 wrong bodies, 1 5xx".
    pub fn describe(&self) -> String {
        let mut s = format!("{} ok", self.ok);
        if self.failed > 0 {
            s += &format!(", {} failed ({} timed out)", self.failed, self.timed_out);
        }
        if self.wrong_body > 0 {
            s += &format!(", {} wrong bodies", self.wrong_body);
        }
        if self.status_5xx > 0 {
            s += &format!(", {} 5xx", self.status_5xx);
        }
        if self.status_other > 0 {
            s += &format!(", {} other statuses", self.status_other);
        }
        s
    }
}

#[derive(Default)]
struct Counters {
    ok: AtomicU64,
    wrong_body: AtomicU64,
    status_5xx: AtomicU64,
    status_other: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    connects: AtomicU64,
    told_to_close: AtomicU64,
    max_latency_us: AtomicU64,
    next_id: AtomicU64,
    /// The first few failures, as evidence.
    notes: Mutex<Vec<String>>,
}

impl Counters {
    fn note(&self, what: String) {
        let mut n = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if n.len() < 8 {
            n.push(what);
        }
    }
}

/// Live clients running.
pub struct LiveClients {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    threads: Vec<JoinHandle<()>>,
}

impl LiveClients {
    /// Starts `spec.conns` clients.
    pub fn start(spec: &LiveSpec) -> LiveClients {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let threads = (0..spec.conns)
            .map(|_| {
                let (spec, stop, counters) = (spec.clone(), stop.clone(), counters.clone());
                std::thread::spawn(move || client(&spec, &stop, &counters))
            })
            .collect();
        LiveClients {
            stop,
            counters,
            threads,
        }
    }

    /// The counts so far.
    pub fn count(&self) -> LiveCount {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LiveCount {
            ok: get(&c.ok),
            wrong_body: get(&c.wrong_body),
            status_5xx: get(&c.status_5xx),
            status_other: get(&c.status_other),
            failed: get(&c.failed),
            timed_out: get(&c.timed_out),
            connects: get(&c.connects),
            told_to_close: get(&c.told_to_close),
        }
    }

    /// The longest reply since the last call, milliseconds.
    pub fn take_max_latency_ms(&self) -> f64 {
        self.counters.max_latency_us.swap(0, Ordering::Relaxed) as f64 / 1000.0
    }

    /// The first failures seen (at most 8), as evidence.
    pub fn notes(&self) -> Vec<String> {
        self.counters
            .notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Counts over the next `window`: how many replies, and at what rate.
    pub fn window(&self, window: Duration) -> Window {
        let before = self.count();
        let started = Instant::now();
        self.take_max_latency_ms();
        std::thread::sleep(window);
        let count = self.count().since(&before);
        let seconds = started.elapsed().as_secs_f64();
        Window {
            seconds,
            rate: count.ok as f64 / seconds.max(1e-9),
            max_latency_ms: self.take_max_latency_ms(),
            count,
        }
    }

    /// Stops every client (each finishes the exchange it is in, at most its
    /// timeout) and closes their connections; the final counts.
    pub fn stop(mut self) -> LiveCount {
        self.stop.store(true, Ordering::Relaxed);
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
        self.count()
    }
}

/// What the live clients got over one window.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    /// Its length, seconds.
    pub seconds: f64,
    /// Good replies per second.
    pub rate: f64,
    /// The longest reply, milliseconds.
    pub max_latency_ms: f64,
    /// The counts.
    pub count: LiveCount,
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

fn client(spec: &LiveSpec, stop: &AtomicBool, c: &Counters) {
    let mut conn: Option<(TcpStream, ResponseReader)> = None;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(pace) = spec.pace {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else if now - next > pace * MAX_BEHIND {
                next = now;
            }
            next += pace;
        }
        if conn.is_none() {
            match TcpStream::connect_timeout(&spec.target, spec.timeout) {
                Ok(s) => {
                    bump(&c.connects);
                    let _ = s.set_nodelay(true);
                    let _ = s.set_read_timeout(Some(spec.timeout));
                    let _ = s.set_write_timeout(Some(spec.timeout));
                    conn = Some((s, ResponseReader::new()));
                }
                Err(e) => {
                    bump(&c.failed);
                    c.note(format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let Some((stream, reader)) = conn.as_mut() else {
            continue;
        };
        let id = c.next_id.fetch_add(1, Ordering::Relaxed);
        let req = http::get(&spec.path, &[format!("{ID_HEADER}: {id}")], false);
        let sent = Instant::now();
        let result = stream
            .write_all(&req)
            .map_err(ReadError::Io)
            .and_then(|()| reader.read(stream, "GET"));
        let us = sent.elapsed().as_micros() as u64;
        c.max_latency_us.fetch_max(us, Ordering::Relaxed);
        match result {
            Ok(resp) => {
                let good_body = match &spec.expect {
                    Expect::Body(b) => resp.body == **b,
                    Expect::Echo => resp.body == echo_body(id).as_bytes(),
                };
                match resp.status {
                    200..=299 if good_body => {
                        bump(&c.ok);
                        if resp.close {
                            bump(&c.told_to_close);
                        }
                    }
                    200..=299 => {
                        bump(&c.wrong_body);
                        c.note(format!(
                            "request {id}: {} body bytes, not the expected ones: {:?}",
                            resp.body.len(),
                            String::from_utf8_lossy(&resp.body[..resp.body.len().min(60)])
                        ));
                    }
                    500..=599 => {
                        bump(&c.status_5xx);
                        c.note(format!("request {id}: status {}", resp.status));
                    }
                    s => {
                        bump(&c.status_other);
                        c.note(format!("request {id}: status {s}"));
                    }
                }
                if resp.close || !reader.leftover().is_empty() {
                    // Bytes nobody asked for mean the connection is out of step.
                    if !reader.leftover().is_empty() {
                        bump(&c.wrong_body);
                        c.note(format!(
                            "request {id}: {} bytes after the reply",
                            reader.leftover().len()
                        ));
                    }
                    conn = None;
                }
            }
            Err(e) => {
                if stop.load(Ordering::Relaxed) && e.timed_out() {
                    break;
                }
                bump(&c.failed);
                if e.timed_out() {
                    bump(&c.timed_out);
                }
                c.note(format!("request {id}: {e}"));
                conn = None;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
