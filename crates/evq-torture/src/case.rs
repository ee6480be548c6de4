//! One case: a backend, a number of consumer threads, and whether its kernel queue
//! is forced to overflow — run in this process, with its own producers, notifier
//! storm and connector, then drained and judged.

use crate::consumer::{Consumer, ConsumerConfig};
use crate::ledger::{Failure, Ledger};
use crate::shared::{Shared, Slot, Wakeups};
use evq::BackendKind;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What one case runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Case {
    /// The backend's name (`evq backends`).
    pub backend: String,
    /// Consumer threads, each with its own queue.
    pub threads: usize,
    /// Force the kernel's event queue to overflow: a tiny `RLIMIT_SIGPENDING` for
    /// the RT-signal backends, a 4-entry completion ring for io_uring. Set up by
    /// the process that runs the case ([`crate::run_isolated`]).
    pub overflow: bool,
    /// Channels per consumer.
    pub channels: usize,
    /// Stop once this many events were delivered…
    pub target_events: u64,
    /// …or after this long.
    pub max_seconds: f64,
    /// Chance per consumer round of one churn operation.
    pub churn: f64,
    /// Connections the connector makes to the shared (wake-one) listeners.
    pub connections: u32,
    /// The seed of every random choice the case's threads make.
    pub seed: u64,
}

/// The ledger of one case: the record `--json` prints. See [`crate::ledger`] for
/// what each promise means.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseReport {
    /// The backend's name.
    pub backend: String,
    /// Consumer threads.
    pub threads: usize,
    /// Whether the kernel's queue was forced to overflow.
    pub overflow: bool,
    /// The case's seed.
    pub seed: u64,
    /// Events delivered, all kinds.
    pub events: u64,
    /// Records (and eventfd counts) read.
    pub records: u64,
    /// Records left unread on watched channels at the end.
    pub lost: u64,
    /// Tokens twice in one batch, records read twice.
    pub duplicated: u64,
    /// Events for retired tokens, spent oneshots or cancelled timers.
    pub stale: u64,
    /// Events whose descriptor is not their token's; records of another channel.
    pub misdelivered: u64,
    /// Records read later than the delay bound after written while watched.
    pub late: u64,
    /// The longest such delay.
    pub max_delay_ms: f64,
    /// Kernel queue overflows the backends recovered from.
    pub overflows_recovered: u64,
    /// Wall time of the case.
    pub seconds: f64,
    /// Timers that fired.
    pub timers_fired: u64,
    /// Timers cancelled before they fired.
    pub timers_cancelled: u64,
    /// Timers that fired without an event, or never fired.
    pub timers_lost: u64,
    /// NOTIFY events seen.
    pub notifies: u64,
    /// Queues whose last notification was never seen.
    pub wakeups_lost: u64,
    /// Connections made to the shared listeners.
    pub connections: u64,
    /// Connections never accepted.
    pub connections_lost: u64,
    /// Connections accepted more than once.
    pub connections_duplicated: u64,
    /// Listener events per connection, over every queue (1.0 is one wake-up each).
    pub wakeups_per_connection: f64,
    /// Events whose read found nothing (allowed: a reported descriptor can become
    /// unready before it is read).
    pub spurious: u64,
    /// Records a consumer threw away by closing a channel on purpose.
    pub discarded_on_close: u64,
    /// Stale kernel events the queues filtered out themselves (`QueueStats`).
    pub stale_filtered: u64,
    /// Kernel interest sets rebuilt after stale events (epoll).
    pub rebuilds: u64,
    /// Churn operations done (modify, revoke, reuse, recreate).
    pub churn_ops: u64,
    /// Quiet checkpoints passed (summed over consumers).
    pub checkpoints: u64,
    /// Events whose mask said READ while the descriptor had nothing: masks are the
    /// state at dequeue on every backend and only the consumer reads, so such an
    /// event belongs to another file (stale).
    pub wrong_state: u64,
    /// I/O and setup errors (none expected).
    pub errors: Vec<String>,
    /// The first broken promises, with their traces.
    pub failures: Vec<Failure>,
}

impl CaseReport {
    /// Everything lost, of every kind: records, timers, notifications and
    /// connections.
    pub fn all_lost(&self) -> u64 {
        self.lost + self.timers_lost + self.wakeups_lost + self.connections_lost
    }

    /// Everything delivered twice, of every kind: records and connections.
    pub fn all_duplicated(&self) -> u64 {
        self.duplicated + self.connections_duplicated
    }

    /// True when every promise held and nothing went wrong.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.stale == 0
            && self.misdelivered == 0
            && self.late == 0
            && self.wrong_state == 0
            && self.timers_lost == 0
            && self.wakeups_lost == 0
            && self.connections_lost == 0
            && self.connections_duplicated == 0
            && self.errors.is_empty()
            && self.failures.is_empty()
    }
}

const PRODUCERS: usize = 2;
const LISTENERS: usize = 2;
/// How often the producers stop for a quiet checkpoint.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(300);

/// One quiet checkpoint: the producers flush and stop, every consumer checks that
/// nothing armed is left unread once its waits go quiet (`Consumer::
/// checkpoint_step`), then the producers go on.
fn checkpoint(shared: &Shared) -> Result<(), String> {
    shared.pause_producers.store(true, Ordering::Release);
    let result = (|| {
        let until = Instant::now() + Duration::from_secs(15);
        while shared.producers_paused.load(Ordering::Acquire) < PRODUCERS {
            if Instant::now() > until {
                return Err("producers did not pause for a checkpoint within 15 s".to_string());
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let n = shared.checkpoint.fetch_add(1, Ordering::AcqRel) + 1;
        wake_all(shared);
        let until = Instant::now() + Duration::from_secs(15);
        while let Some(slow) = shared
            .checkpoint_acks
            .iter()
            .position(|a| a.load(Ordering::Acquire) < n)
        {
            if Instant::now() > until {
                return Err(format!(
                    "consumer {slow} did not finish checkpoint {n} within 15 s"
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    })();
    shared.pause_producers.store(false, Ordering::Release);
    result
}

/// Runs `case` in this process and judges it.
pub fn run_case(case: &Case) -> CaseReport {
    let started = Instant::now();
    let mut errors = Vec::new();
    let backend: BackendKind = match case.backend.parse() {
        Ok(k) => k,
        Err(e) => return CaseReport::not_run(case, e.to_string()),
    };
    if let Err(e) = backend.available() {
        return CaseReport::not_run(case, format!("{backend} unavailable: {e}"));
    }
    let caps = backend.capabilities();
    let listeners: Vec<TcpListener> = (0..LISTENERS)
        .filter_map(|_| {
            let l = TcpListener::bind("127.0.0.1:0").ok()?;
            l.set_nonblocking(true).ok()?;
            Some(l)
        })
        .collect();
    let shared = Shared {
        start: Instant::now(),
        slots: (0..case.threads * case.channels)
            .map(|_| Slot::default())
            .collect(),
        wakeups: (0..case.threads).map(|_| Wakeups::default()).collect(),
        listeners,
        accepted: (0..case.connections).map(|_| AtomicU32::new(0)).collect(),
        connections_made: AtomicU64::new(0),
        next_uid: AtomicU32::new(0),
        delivered: AtomicU64::new(0),
        stop_producers: AtomicBool::new(false),
        pause_producers: AtomicBool::new(false),
        producers_paused: AtomicUsize::new(0),
        checkpoint: AtomicU64::new(0),
        checkpoint_acks: (0..case.threads).map(|_| AtomicU64::new(0)).collect(),
        stop_churn: AtomicBool::new(false),
        finish: AtomicBool::new(false),
        drained: (0..case.threads).map(|_| AtomicBool::new(false)).collect(),
    };
    let mut ledger = Ledger::default();
    let mut failures = Vec::new();
    std::thread::scope(|s| {
        let shared = &shared;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let consumers: Vec<_> = (0..case.threads)
            .map(|id| {
                let cfg = ConsumerConfig {
                    id,
                    backend,
                    first_slot: id * case.channels,
                    channels: case.channels,
                    seed: case.seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(id as u64 + 1)),
                    churn: case.churn,
                    // A file signals one owner: only one RT-signal queue can listen.
                    listeners: caps.shared_descriptors || id == 0,
                };
                let ready_tx = ready_tx.clone();
                s.spawn(move || match Consumer::new(cfg, shared) {
                    Ok(c) => {
                        let _ = ready_tx.send(Ok(()));
                        Some(c.run())
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("consumer {id}: {e}")));
                        None
                    }
                })
            })
            .collect();
        drop(ready_tx);
        for r in ready_rx.iter().take(case.threads) {
            if let Err(e) = r {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            shared.stop_producers.store(true, Ordering::Release);
            shared.stop_churn.store(true, Ordering::Release);
            shared.finish.store(true, Ordering::Release);
            kick_all(shared);
        }
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let slots: Vec<usize> = (p..shared.slots.len()).step_by(PRODUCERS).collect();
                let seed = case.seed.wrapping_add(1000 + p as u64);
                s.spawn(move || crate::producer::run(shared, slots, seed))
            })
            .collect();
        let storm = s.spawn(move || notifier_storm(shared, case.seed));
        let connector = s.spawn(move || connect_all(shared, case.connections));

        // The measured phase, with a quiet checkpoint every CHECKPOINT_EVERY.
        let deadline = started + Duration::from_secs_f64(case.max_seconds);
        let mut next_checkpoint = Instant::now() + CHECKPOINT_EVERY;
        while Instant::now() < deadline
            && shared.delivered.load(Ordering::Relaxed) < case.target_events
            && errors.is_empty()
        {
            std::thread::sleep(Duration::from_millis(10));
            if Instant::now() >= next_checkpoint {
                if let Err(e) = checkpoint(shared) {
                    errors.push(e);
                }
                next_checkpoint = Instant::now() + CHECKPOINT_EVERY;
            }
        }
        shared.stop_producers.store(true, Ordering::Release);
        for p in producers {
            errors.extend(
                p.join()
                    .unwrap_or_else(|_| vec!["producer panicked".into()]),
            );
        }
        if let Ok(Err(e)) = connector.join() {
            errors.push(format!("connector: {e}"));
        }
        // The drain phase: no churn, everything armed, everything read.
        shared.stop_churn.store(true, Ordering::Release);
        let _ = storm.join();
        wake_all(shared);
        let made = shared.connections_made.load(Ordering::Acquire) as usize;
        let settled = || {
            shared.drained.iter().all(|d| d.load(Ordering::Acquire))
                && shared.accepted[..made]
                    .iter()
                    .all(|n| n.load(Ordering::Acquire) > 0)
        };
        let drain_deadline = Instant::now() + Duration::from_secs(10);
        while !settled() && Instant::now() < drain_deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // The last word on wake-ups: one notification each, which must be seen.
        for w in &shared.wakeups {
            w.notify();
        }
        let seen_deadline = Instant::now() + Duration::from_secs(5);
        while shared
            .wakeups
            .iter()
            .any(|w| w.acked.load(Ordering::Acquire) < w.sent.load(Ordering::Acquire))
            && Instant::now() < seen_deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        shared.finish.store(true, Ordering::Release);
        kick_all(shared);
        for c in consumers {
            match c.join() {
                Ok(Some(outcome)) => {
                    ledger.add(&outcome.ledger);
                    failures.extend(outcome.failures);
                }
                Ok(None) => {}
                Err(_) => errors.push("a consumer panicked".into()),
            }
        }
    });
    let made = shared.connections_made.load(Ordering::Acquire) as usize;
    let counts: Vec<u32> = shared.accepted[..made]
        .iter()
        .map(|n| n.load(Ordering::Acquire))
        .collect();
    let wakeups_lost = shared
        .wakeups
        .iter()
        .filter(|w| w.acked.load(Ordering::Acquire) < w.sent.load(Ordering::Acquire))
        .count() as u64;
    failures.truncate(8);
    CaseReport {
        backend: case.backend.clone(),
        threads: case.threads,
        overflow: case.overflow,
        seed: case.seed,
        events: ledger.events,
        records: ledger.records,
        lost: ledger.lost,
        duplicated: ledger.duplicated,
        stale: ledger.stale,
        misdelivered: ledger.misdelivered,
        late: ledger.late,
        max_delay_ms: ledger.max_delay_ns as f64 / 1e6,
        overflows_recovered: ledger.overflows,
        seconds: started.elapsed().as_secs_f64(),
        timers_fired: ledger.timers_fired,
        timers_cancelled: ledger.timers_cancelled,
        timers_lost: ledger.timers_lost,
        notifies: ledger.notifies,
        wakeups_lost,
        connections: made as u64,
        connections_lost: counts.iter().filter(|&&n| n == 0).count() as u64,
        connections_duplicated: counts.iter().filter(|&&n| n > 1).count() as u64,
        wakeups_per_connection: if made > 0 {
            ledger.listener_events as f64 / made as f64
        } else {
            0.0
        },
        spurious: ledger.spurious,
        discarded_on_close: ledger.discarded_on_close,
        stale_filtered: ledger.stale_filtered,
        rebuilds: ledger.rebuilds,
        churn_ops: ledger.modifies
            + ledger.revokes
            + ledger.reuses
            + ledger.forgets
            + ledger.recreates,
        checkpoints: ledger.checkpoints,
        wrong_state: ledger.wrong_state,
        errors,
        failures,
    }
}

impl CaseReport {
    /// The report of a case that could not run (or whose process died): all
    /// counts zero and `why` as its error, so it never passes.
    pub fn not_run(case: &Case, why: String) -> CaseReport {
        CaseReport {
            backend: case.backend.clone(),
            threads: case.threads,
            overflow: case.overflow,
            seed: case.seed,
            events: 0,
            records: 0,
            lost: 0,
            duplicated: 0,
            stale: 0,
            misdelivered: 0,
            late: 0,
            max_delay_ms: 0.0,
            overflows_recovered: 0,
            seconds: 0.0,
            timers_fired: 0,
            timers_cancelled: 0,
            timers_lost: 0,
            notifies: 0,
            wakeups_lost: 0,
            connections: 0,
            connections_lost: 0,
            connections_duplicated: 0,
            wakeups_per_connection: 0.0,
            spurious: 0,
            discarded_on_close: 0,
            stale_filtered: 0,
            rebuilds: 0,
            churn_ops: 0,
            checkpoints: 0,
            wrong_state: 0,
            errors: vec![why],
            failures: Vec::new(),
        }
    }
}

/// Wakes every queue to notice a stop; nothing to acknowledge.
fn kick_all(shared: &Shared) {
    for w in &shared.wakeups {
        w.kick();
    }
}

/// Wakes every consumer's queue (phase changes must not wait for a timeout);
/// each notification counts and must be seen.
fn wake_all(shared: &Shared) {
    for w in &shared.wakeups {
        w.notify();
    }
}

/// Notifications in bursts, at random consumers, until the churn stops.
fn notifier_storm(shared: &Shared, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(7));
    while !shared.stop_churn.load(Ordering::Acquire) {
        let w = &shared.wakeups[rng.usize(0..shared.wakeups.len())];
        let burst = if rng.u8(0..10) == 0 { 200 } else { 3 };
        for _ in 0..rng.u32(1..=burst) {
            w.notify();
        }
        std::thread::sleep(Duration::from_micros(rng.u64(50..2_000)));
    }
}

/// Makes `total` connections to the shared listeners, each saying its id, while
/// the producers run; never more than 64 ahead of the accepts.
fn connect_all(shared: &Shared, total: u32) -> std::io::Result<()> {
    if shared.listeners.is_empty() {
        return Ok(());
    }
    let accepted = || {
        shared
            .accepted
            .iter()
            .filter(|n| n.load(Ordering::Relaxed) > 0)
            .count() as u64
    };
    for id in 0..total {
        if shared.stop_producers.load(Ordering::Acquire) {
            break;
        }
        while shared.connections_made.load(Ordering::Acquire) > accepted() + 64 {
            if shared.stop_producers.load(Ordering::Acquire) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let l = &shared.listeners[id as usize % shared.listeners.len()];
        let mut c = TcpStream::connect(l.local_addr()?)?;
        c.write_all(&id.to_le_bytes())?;
        shared.connections_made.fetch_add(1, Ordering::AcqRel);
        std::thread::sleep(Duration::from_micros(300));
    }
    Ok(())
}
