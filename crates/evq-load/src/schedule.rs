//! When a load thread starts its next connection: httperf's open-loop schedule
//! (fixed spacing or a Poisson process) or wrk's closed loop (keep `target` open).
//!
//! With T threads, thread k of an open loop takes connections k, k+T, k+2T, … of the
//! global fixed schedule `i / rate`, so the union is exactly the single-thread
//! schedule; a Poisson schedule is T independent Poisson processes of rate `rate/T`,
//! whose superposition is again Poisson at `rate`. Start times are computed from the
//! connection index, not accumulated, so rounding never drifts the schedule.

use crate::config::{Distribution, LoadConfig, LoopMode};
use std::time::{Duration, Instant};

/// Pause before retrying after a closed-loop connection failed, so a dead server
/// does not turn the closed loop into a busy loop of refused connects.
const CLOSED_LOOP_BACKOFF: Duration = Duration::from_millis(10);

/// What the plan says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Start a connection whose intended start time is this.
    Launch(Instant),
    /// Nothing is due before this.
    WaitUntil(Instant),
    /// Nothing more to start until a connection ends (or ever).
    Idle,
}

pub(crate) enum Plan {
    Open {
        start: Instant,
        next_s: f64,
        index: u64,
        stride: u64,
        left: u64,
        rate: f64,
        dist: Distribution,
        rng: u64,
    },
    Closed {
        target: usize,
        conns_left: Option<u64>,
        until: Option<Instant>,
        backoff_until: Instant,
    },
}

/// Thread `k`'s share of `total` split over `parts`.
fn share(total: u64, parts: u64, k: u64) -> u64 {
    total / parts + u64::from(k < total % parts)
}

/// xorshift64* then an exponential variate with the given rate.
fn exp_sample(state: &mut u64, rate: f64) -> f64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
    let u = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    -(1.0 - u).ln() / rate
}

impl Plan {
    /// Thread `k`'s part of the run described by `cfg`, starting at `start`.
    pub(crate) fn new(cfg: &LoadConfig, k: usize, start: Instant) -> Plan {
        let t = cfg.threads.max(1) as u64;
        let k64 = k as u64;
        match &cfg.mode {
            LoopMode::Open {
                rate,
                dist,
                num_conns,
            } => {
                let mut rng = cfg.seed ^ 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(k64 + 1);
                if rng == 0 {
                    rng = 1;
                }
                let next_s = match dist {
                    Distribution::Fixed => k64 as f64 / rate,
                    Distribution::Poisson => exp_sample(&mut rng, rate / t as f64),
                };
                Plan::Open {
                    start,
                    next_s,
                    index: k64,
                    stride: t,
                    left: share(*num_conns, t, k64),
                    rate: *rate,
                    dist: *dist,
                    rng,
                }
            }
            LoopMode::Closed {
                connections,
                duration,
                num_conns,
            } => Plan::Closed {
                target: share(*connections as u64, t, k64) as usize,
                conns_left: num_conns.map(|n| share(n, t, k64)),
                until: duration.and_then(|d| start.checked_add(d)),
                backoff_until: start,
            },
        }
    }

    /// What to do at `now` with `active` connections open. A `Launch` is taken as
    /// done: the plan moves on.
    pub(crate) fn poll(&mut self, now: Instant, active: usize) -> Step {
        match self {
            Plan::Open {
                start,
                next_s,
                index,
                stride,
                left,
                rate,
                dist,
                rng,
            } => {
                if *left == 0 {
                    return Step::Idle;
                }
                let due = start
                    .checked_add(Duration::from_secs_f64(*next_s))
                    .unwrap_or(now);
                if due > now {
                    return Step::WaitUntil(due);
                }
                *left -= 1;
                *index += *stride;
                *next_s = match dist {
                    Distribution::Fixed => *index as f64 / *rate,
                    Distribution::Poisson => *next_s + exp_sample(rng, *rate / *stride as f64),
                };
                Step::Launch(due)
            }
            Plan::Closed {
                target,
                conns_left,
                until,
                backoff_until,
            } => {
                if active >= *target || *conns_left == Some(0) || until.is_some_and(|u| now >= u) {
                    return Step::Idle;
                }
                if now < *backoff_until {
                    return Step::WaitUntil(*backoff_until);
                }
                if let Some(l) = conns_left {
                    *l -= 1;
                }
                Step::Launch(now)
            }
        }
    }

    /// A connection failed: a closed loop waits a little before replacing it.
    pub(crate) fn backoff(&mut self, now: Instant) {
        if let Plan::Closed { backoff_until, .. } = self {
            *backoff_until = now + CLOSED_LOOP_BACKOFF;
        }
    }

    /// True when no connection will ever be started again.
    pub(crate) fn exhausted(&self) -> bool {
        match self {
            Plan::Open { left, .. } => *left == 0,
            Plan::Closed { conns_left, .. } => *conns_left == Some(0),
        }
    }

    /// When a closed loop's duration ends.
    pub(crate) fn until(&self) -> Option<Instant> {
        match self {
            Plan::Closed { until, .. } => *until,
            Plan::Open { .. } => None,
        }
    }
}

/// A worker that opens connections on a [`Plan`]'s schedule: the readiness
/// loop's and the completion loop's alike.
pub(crate) trait Launcher {
    /// The worker's schedule.
    fn plan(&mut self) -> &mut Plan;
    /// Connections open now.
    fn active(&self) -> usize;
    /// Opens one connection due at `intended`; false if it failed at once.
    fn launch(&mut self, intended: Instant) -> bool;

    /// Starts every connection that is due; returns when the next one is due.
    fn launch_due(&mut self, now: Instant) -> Option<Instant> {
        loop {
            let active = self.active();
            match self.plan().poll(now, active) {
                Step::Launch(intended) => {
                    if !self.launch(intended) {
                        self.plan().backoff(now);
                    }
                }
                Step::WaitUntil(t) => return Some(t),
                Step::Idle => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(cfg: &LoadConfig, k: usize, origin: Instant) -> Vec<f64> {
        let mut plan = Plan::new(cfg, k, origin);
        let far = origin + Duration::from_secs(3600);
        let mut out = Vec::new();
        while let Step::Launch(t) = plan.poll(far, 0) {
            out.push(t.duration_since(origin).as_secs_f64());
        }
        out
    }

    #[test]
    fn threads_split_the_fixed_schedule_exactly() {
        let origin = Instant::now();
        let mut cfg = LoadConfig::open("127.0.0.1", 1, 100.0, 10);
        cfg.threads = 3;
        let mut all: Vec<f64> = (0..3).flat_map(|k| starts(&cfg, k, origin)).collect();
        all.sort_by(f64::total_cmp);
        assert_eq!(all.len(), 10);
        for (i, t) in all.iter().enumerate() {
            assert!((t - i as f64 / 100.0).abs() < 1e-6, "start {i} at {t}");
        }
    }

    #[test]
    fn poisson_mean_spacing_is_one_over_rate() {
        let origin = Instant::now();
        let mut cfg = LoadConfig::open("127.0.0.1", 1, 1000.0, 20_000);
        cfg.mode = LoopMode::Open {
            rate: 1000.0,
            dist: Distribution::Poisson,
            num_conns: 20_000,
        };
        let s = starts(&cfg, 0, origin);
        let last = s.last().copied().unwrap_or(0.0);
        // 20,000 arrivals at 1000/s: about 20 s, well within 5%.
        assert!((last - 20.0).abs() < 1.0, "last start at {last}");
        assert!(s.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn closed_loop_keeps_its_target_and_backs_off() {
        let now = Instant::now();
        let mut cfg = LoadConfig::closed("127.0.0.1", 1, 2, Duration::from_secs(10));
        cfg.threads = 1;
        let mut plan = Plan::new(&cfg, 0, now);
        assert_eq!(plan.poll(now, 0), Step::Launch(now));
        assert_eq!(plan.poll(now, 2), Step::Idle);
        plan.backoff(now);
        assert!(matches!(plan.poll(now, 1), Step::WaitUntil(_)));
        assert_eq!(plan.poll(now + Duration::from_secs(11), 0), Step::Idle);
    }
}
