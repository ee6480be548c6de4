//! Which cases a run has, and how big they are.

use crate::case::Case;
use evq::BackendKind;

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Every backend × {1, 2, 4} threads, plus the forced overflows, in under a
    /// minute: the form `cargo test` runs.
    Quick,
    /// At least 10^6 events per backend and thread count, 10^5 under forced
    /// overflow (each case stops at its event target or after five minutes: rtsig
    /// on one thread, one sigwaitinfo per event, took 120 s for 0.7–1.0 × 10^6
    /// events on a loaded 2-core box).
    Default,
}

/// The cases of a run: every available backend (or those named) × {1, 2, 4}
/// consumer threads, then the forced-overflow cases of the backends whose kernel
/// queue can overflow (rtsig, rtsig-bulk, uring, kmod-ring).
pub fn cases(size: Size, only: &[BackendKind], threads: &[usize], seed: u64) -> Vec<Case> {
    let backends: Vec<BackendKind> = if only.is_empty() {
        BackendKind::candidates()
    } else {
        only.to_vec()
    };
    let (events, overflow_events, seconds, channels, connections) = match size {
        Size::Quick => (u64::MAX, u64::MAX, 1.5, 32, 150),
        Size::Default => (1_000_000, 100_000, 300.0, 64, 2_000),
    };
    let mut out = Vec::new();
    let mut n = 0u64;
    let mut next_seed = || {
        n += 1;
        seed.wrapping_add(n.wrapping_mul(0x2545_f491_4f6c_dd1d))
    };
    for &b in &backends {
        for &t in threads {
            out.push(Case {
                backend: b.name().to_string(),
                threads: t,
                overflow: false,
                channels,
                target_events: events,
                max_seconds: seconds,
                churn: 0.05,
                connections,
                seed: next_seed(),
            });
        }
    }
    for &b in &backends {
        if matches!(
            b,
            BackendKind::RtSig
                | BackendKind::RtSigBulk
                | BackendKind::Uring
                | BackendKind::KmodRing
        ) {
            out.push(Case {
                backend: b.name().to_string(),
                threads: 2,
                overflow: true,
                channels: channels * 2,
                target_events: overflow_events,
                max_seconds: seconds,
                churn: 0.02,
                connections: connections / 2,
                seed: next_seed(),
            });
        }
    }
    out
}
