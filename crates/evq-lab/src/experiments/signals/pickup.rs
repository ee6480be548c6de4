//! Bulk pickup (SEEDS 001, Graphs 1–2): bursts of N ready pipes drained with
//! batches of 1, 23 and 500, on RT signals one at a time (`sigtimedwait`,
//! phhttpd's way), in bulk (a `signalfd` read: today's `sigtimedwait4`), and on
//! epoll beside them.

use crate::experiment::{Ctx, RunSize};
use crate::probe_fds::{FdKind, ProbeFds};
use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options};
use serde::{Deserialize, Serialize};
use std::io;
use std::time::{Duration, Instant};

/// Batch capacities tried: one at a time, phhttpd's 23, and 500.
pub const BATCHES: [usize; 3] = [1, 23, 500];

/// Sizes of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Pipes made ready in each burst.
    pub fds: usize,
    /// Bursts per run.
    pub rounds: usize,
    /// Runs per contender (the median is reported).
    pub reps: usize,
}

/// One backend at one batch capacity.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// Backend name.
    pub backend: String,
    /// Batch capacity.
    pub batch: usize,
    /// Median ns per event (pickup + read) over the runs.
    pub ns_per_event: f64,
    /// Median events per `get_next_event` call.
    pub events_per_call: f64,
    /// Every run: (ns per event, events per call).
    pub runs: Vec<(f64, f64)>,
}

/// The sweep's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Records {
    /// The plan that was run.
    pub plan: Plan,
    /// Every backend at every batch.
    pub points: Vec<Point>,
    /// The floor: reading every pipe directly, ns per event, per run.
    pub read_floor_runs: Vec<f64>,
}

impl Records {
    /// The floor's median.
    pub fn floor(&self) -> f64 {
        crate::stats::median(self.read_floor_runs.clone()).unwrap_or(f64::NAN)
    }
}

/// The plan for a run of `size`.
pub fn plan(size: RunSize) -> Plan {
    let (fds, rounds, reps) = size.pick((50, 2, 1), (1000, 40, 5), (2000, 40, 5));
    Plan { fds, rounds, reps }
}

/// Every available backend at every batch, contenders rotated between runs, the
/// read-only floor before each run.
pub fn measure(plan: Plan, ctx: &Ctx) -> io::Result<Records> {
    crate::resources::raise_nofile()?;
    let probes = ProbeFds::open(FdKind::Pipe, plan.fds)?;
    let kinds: Vec<BackendKind> = ["rtsig", "rtsig-bulk", "epoll"]
        .iter()
        .filter_map(|n| n.parse::<BackendKind>().ok())
        .filter(|k| k.available().is_ok())
        .collect();
    let mut points: Vec<Point> = kinds
        .iter()
        .flat_map(|&k| {
            BATCHES.iter().map(move |&batch| Point {
                backend: k.name().into(),
                batch,
                ns_per_event: f64::NAN,
                events_per_call: f64::NAN,
                runs: Vec::new(),
            })
        })
        .collect();
    let (reps, rounds) = (plan.reps, plan.rounds);
    ctx.expect(reps * points.len());
    let mut read_floor_runs = Vec::new();
    for rep in 0..reps {
        read_floor_runs.push(read_floor(&probes, rounds)?);
        let len = points.len();
        for step in 0..len {
            let p = &mut points[(step + rep) % len];
            let kind: BackendKind = p.backend.parse()?;
            ctx.step(&format!("rep {}/{reps} {kind} batch {}", rep + 1, p.batch));
            p.runs.push(burst(kind, &probes, p.batch, rounds)?);
        }
    }
    let median = |v: Vec<f64>| crate::stats::median(v).unwrap_or(f64::NAN);
    for p in &mut points {
        p.ns_per_event = median(p.runs.iter().map(|x| x.0).collect());
        p.events_per_call = median(p.runs.iter().map(|x| x.1).collect());
    }
    Ok(Records {
        plan,
        points,
        read_floor_runs,
    })
}

/// Drains `rounds` bursts of `probes.len()` ready pipes; returns (ns/event, events/call).
fn burst(
    kind: BackendKind,
    probes: &ProbeFds,
    batch: usize,
    rounds: usize,
) -> io::Result<(f64, f64)> {
    let mut queue = EventQueue::with_backend(kind)?;
    for (i, &fd) in probes.read_fds.iter().enumerate() {
        queue.declare_interest(fd, Interest::READ, Options::new(i as u64).mode(Mode::Event))?;
    }
    let mut events = Events::with_capacity(batch);
    let n = probes.read_fds.len();
    let mut sink = [0u8; 8];
    let (mut busy, mut calls) = (Duration::ZERO, 0u64);
    for _ in 0..rounds {
        for &w in &probes.write_fds {
            // SAFETY: writes one byte from a live buffer to a pipe we own.
            if unsafe { libc::write(w, b"x".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        let start = Instant::now();
        let mut seen = 0;
        while seen < n {
            let got = queue.get_next_event(&mut events, Some(Duration::from_secs(10)))?;
            if got == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{kind}: burst stalled at {seen}/{n}"),
                ));
            }
            calls += 1;
            for e in &events {
                // SAFETY: reads at most 8 bytes into a live buffer.
                if unsafe { libc::read(e.fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0 {
                    seen += 1;
                }
            }
        }
        busy += start.elapsed();
    }
    let total = (rounds * n) as f64;
    Ok((busy.as_nanos() as f64 / total, total / calls as f64))
}

/// The floor: the same bursts drained by reading every pipe directly (no event
/// pickup at all), in ns per event.
fn read_floor(probes: &ProbeFds, rounds: usize) -> io::Result<f64> {
    let mut sink = [0u8; 8];
    let mut busy = Duration::ZERO;
    for _ in 0..rounds {
        for &w in &probes.write_fds {
            // SAFETY: writes one byte from a live buffer to a pipe we own.
            if unsafe { libc::write(w, b"x".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        let start = Instant::now();
        for &r in &probes.read_fds {
            // SAFETY: reads at most 8 bytes into a live buffer.
            if unsafe { libc::read(r, sink.as_mut_ptr().cast(), sink.len()) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        busy += start.elapsed();
    }
    Ok(busy.as_nanos() as f64 / (rounds * probes.read_fds.len()) as f64)
}
