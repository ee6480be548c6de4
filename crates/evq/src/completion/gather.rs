//! How a wait for completions gathers a batch (quirk s of the module's essay).

use std::time::Duration;

/// How long a wait may hold the first completion back to gather more:
/// [`CompletionRing::get_next_completion_gathered`](super::CompletionRing::get_next_completion_gathered)
/// returns once `at_least` completions are in, or once `within` has passed
/// with at least one — never later than its timeout. [`Gather::NONE`] (what
/// [`get_next_completion`](super::CompletionRing::get_next_completion) uses)
/// returns at the first.
///
/// The kernel does the gathering (`min_wait_usec`, `IORING_FEAT_MIN_TIMEOUT`,
/// Linux 6.12): the thread sleeps until the batch is in or the time is up,
/// instead of waking for each completion. On an older kernel
/// ([`RingSetup::gathers`](super::RingSetup::gathers) false) a wait returns at
/// the first completion, as without gathering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather {
    at_least: u32,
    within: Duration,
}

impl Gather {
    /// No gathering: a wait returns at the first completion.
    pub const NONE: Gather = Gather {
        at_least: 1,
        within: Duration::ZERO,
    };

    /// Return once `at_least` completions are in (1 and 0 are no gathering),
    /// or once `within` has passed with at least one. `within` is taken to
    /// the microsecond, at most `u32::MAX` of them.
    pub fn new(at_least: usize, within: Duration) -> Gather {
        let at_least = u32::try_from(at_least).unwrap_or(u32::MAX).max(1);
        if at_least == 1 || within < Duration::from_micros(1) {
            return Gather::NONE;
        }
        Gather { at_least, within }
    }

    /// Completions the wait gathers before it returns early (1: none).
    pub fn at_least(&self) -> usize {
        self.at_least as usize
    }

    /// How long it may hold the first completion back.
    pub fn within(&self) -> Duration {
        self.within
    }

    /// The kernel's `(min_complete, min_wait_usec)` for a wait of at most
    /// `left` (`None`: no limit): the kernel waits `min_wait_usec` whatever
    /// shorter timeout it is given, so gathering is cut to the time left.
    pub(super) fn for_wait(&self, left: Option<Duration>) -> (usize, u32) {
        let within = left.map_or(self.within, |l| self.within.min(l));
        let usec = u32::try_from(within.as_micros()).unwrap_or(u32::MAX);
        if self.at_least == 1 || usec == 0 {
            return (1, 0);
        }
        (self.at_least as usize, usec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathering_is_cut_to_the_time_left_and_none_is_none() {
        let g = Gather::new(32, Duration::from_micros(50));
        assert_eq!(g.for_wait(None), (32, 50));
        assert_eq!(g.for_wait(Some(Duration::from_millis(1))), (32, 50));
        assert_eq!(g.for_wait(Some(Duration::from_micros(20))), (32, 20));
        assert_eq!(g.for_wait(Some(Duration::from_nanos(500))), (1, 0));
        assert_eq!(g.for_wait(Some(Duration::ZERO)), (1, 0));
        assert_eq!(Gather::new(1, Duration::from_secs(1)), Gather::NONE);
        assert_eq!(Gather::new(0, Duration::from_secs(1)), Gather::NONE);
        assert_eq!(Gather::new(8, Duration::ZERO), Gather::NONE);
        assert_eq!(Gather::NONE.for_wait(None), (1, 0));
        let huge = Gather::new(usize::MAX, Duration::from_secs(1 << 40));
        assert_eq!(huge.for_wait(None), (u32::MAX as usize, u32::MAX));
    }
}
