//! Seed 001's load limiting as a policy object: a smoothed count of events returned
//! per `get_next_event` call, compared against a threshold.
//!
//! Lever and Tweedie kept `avg = (1 - g) * avg + g * n` with gain `g = 0.3` (an RTT
//! estimator's shape), picked up at most 23 signals a call, and reset new connections
//! while `avg > 18`. A server that sheds early stays on the flat part of its
//! throughput curve instead of sliding into receive livelock.

/// Smoothed events-per-call against a threshold.
///
/// ```
/// let mut limiter = evq::LoadLimiter::new(0.3, 18.0);
/// for _ in 0..20 { limiter.observe(23); }
/// assert!(limiter.overloaded());
/// for _ in 0..20 { limiter.observe(1); }
/// assert!(!limiter.overloaded());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadLimiter {
    gain: f64,
    threshold: f64,
    average: f64,
}

impl LoadLimiter {
    /// Seed 001's gain.
    pub const DEFAULT_GAIN: f64 = 0.3;
    /// Seed 001's threshold (with batches of at most 23 events).
    pub const DEFAULT_THRESHOLD: f64 = 18.0;

    /// A limiter with the given gain (clamped into `(0, 1]`) and threshold.
    pub fn new(gain: f64, threshold: f64) -> LoadLimiter {
        let gain = if gain.is_finite() {
            gain.clamp(f64::MIN_POSITIVE, 1.0)
        } else {
            1.0
        };
        LoadLimiter {
            gain,
            threshold,
            average: 0.0,
        }
    }

    /// Feeds the number of events one `get_next_event` call returned.
    pub fn observe(&mut self, events: usize) {
        self.average = (1.0 - self.gain) * self.average + self.gain * events as f64;
    }

    /// The smoothed events per call.
    pub fn average(&self) -> f64 {
        self.average
    }

    /// True while the smoothed load is above the threshold: time to shed new work.
    pub fn overloaded(&self) -> bool {
        self.average > self.threshold
    }

    /// True if the load is above the threshold now, or would be once a call
    /// that returned `events` is observed: for a caller still counting the
    /// current call's work (a burst of connections taken in one accept batch
    /// is shed once it would overload, not let in whole before anything is).
    ///
    /// ```
    /// let limiter = evq::LoadLimiter::new(0.3, 18.0);
    /// assert!(!limiter.overloaded_with(50)); // 0.3 * 50 = 15
    /// assert!(limiter.overloaded_with(70)); // 0.3 * 70 = 21
    /// ```
    pub fn overloaded_with(&self, events: usize) -> bool {
        self.overloaded()
            || (1.0 - self.gain) * self.average + self.gain * events as f64 > self.threshold
    }
}

impl Default for LoadLimiter {
    fn default() -> Self {
        LoadLimiter::new(Self::DEFAULT_GAIN, Self::DEFAULT_THRESHOLD)
    }
}
