//! Turning a fault on and off while the live clients are measured, and counting
//! what each injected client saw.
//!
//! Most hostile clients are repeated acts (connect, send half a head, reset):
//! [`Repeat`] runs one act on a few threads at a stated pace while the fault is
//! on. The pace is part of the fault's description: the suite's own threads
//! share the machine with the server, so an unpaced loop would measure the
//! suite's appetite for CPU, not the server's resistance.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A fault that can be switched on and off between measurement windows.
pub(crate) trait Injector {
    /// Starts injecting (returns once the fault is in place).
    fn on(&mut self) -> io::Result<()>;
    /// Stops injecting and lets go of everything it held.
    fn off(&mut self);
}

/// Counts of outcomes, by name ("431", "closed by server", "reset sent").
#[derive(Debug, Default)]
pub(crate) struct Tally {
    counts: Mutex<BTreeMap<String, u64>>,
    notes: Mutex<Vec<String>>,
}

impl Tally {
    /// One more `what`.
    pub(crate) fn add(&self, what: &str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(what.to_string())
            .or_default() += 1;
    }

    /// Keeps a line of evidence (the first 8).
    pub(crate) fn note(&self, line: String) {
        let mut n = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if n.len() < 8 {
            n.push(line);
        }
    }

    /// How many `what`.
    pub(crate) fn get(&self, what: &str) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(what)
            .copied()
            .unwrap_or(0)
    }

    /// Every count.
    pub(crate) fn all(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The sum of every count.
    pub(crate) fn total(&self) -> u64 {
        self.all().values().sum()
    }

    /// "431: 12, closed: 3" and the notes.
    pub(crate) fn describe(&self) -> String {
        let counts: Vec<String> = self
            .all()
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if notes.is_empty() {
            counts.join(", ")
        } else {
            format!("{}; first notes: {}", counts.join(", "), notes.join(" | "))
        }
    }
}

type Act = dyn Fn(&Tally) + Send + Sync;

/// One act repeated on `threads` threads, each at most once per `pace`.
pub(crate) struct Repeat {
    threads: usize,
    pace: Duration,
    act: Arc<Act>,
    stop: Arc<AtomicBool>,
    running: Vec<JoinHandle<()>>,
    /// What the acts saw, over every time the fault was on.
    pub(crate) tally: Arc<Tally>,
}

impl Repeat {
    /// `act` on `threads` threads, each starting one act per `pace` at most.
    pub(crate) fn new(
        threads: usize,
        pace: Duration,
        act: impl Fn(&Tally) + Send + Sync + 'static,
    ) -> Repeat {
        Repeat {
            threads,
            pace,
            act: Arc::new(act),
            stop: Arc::new(AtomicBool::new(false)),
            running: Vec::new(),
            tally: Arc::new(Tally::default()),
        }
    }
}

impl Injector for Repeat {
    fn on(&mut self) -> io::Result<()> {
        self.stop.store(false, Ordering::Relaxed);
        for _ in 0..self.threads {
            let (act, stop, tally, pace) = (
                self.act.clone(),
                self.stop.clone(),
                self.tally.clone(),
                self.pace,
            );
            self.running.push(std::thread::spawn(move || {
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    act(&tally);
                    next += pace;
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    } else {
                        // Behind (a slow act): start over from now rather than
                        // catching up in a burst.
                        next = now;
                    }
                }
            }));
        }
        Ok(())
    }

    fn off(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.running.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Repeat {
    fn drop(&mut self) {
        self.off();
    }
}
