//! Timers on evq's timer heap: [`Timer`], [`sleep`], [`timeout`], [`interval`].
//!
//! A timer is armed with `EventQueue::add_timer` when it is first polled (not when
//! it is made, so a timer that is never awaited costs nothing) and cancelled with
//! `cancel_timer` when it is dropped or reset before it fires. evq folds the
//! earliest deadline into `get_next_event`'s timeout, so a timer costs no system
//! call of its own; a deadline already past resolves without touching the queue.

use crate::reactor::Reactor;
use futures_core::Stream;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A future that resolves at a deadline (with the deadline), or a stream that
/// yields at every period (an interval).
///
/// ```
/// use evq_async::Timer;
/// use std::time::{Duration, Instant};
/// evq_async::block_on(async {
///     let start = Instant::now();
///     let fired = Timer::after(Duration::from_millis(5)).await;
///     assert!(fired >= start + Duration::from_millis(5));
/// });
/// ```
///
/// # Panics
/// Polling panics if evq-async cannot create its event queue (an unknown or
/// unavailable `EVQ_BACKEND`); [`reactor_stats`](crate::reactor_stats) reports that
/// error without panicking.
#[derive(Debug)]
pub struct Timer {
    /// None: never fires.
    deadline: Option<Instant>,
    period: Option<Duration>,
    /// The reactor's timer slot while armed.
    slot: Option<usize>,
    /// A one-shot timer has fired (its stream has ended).
    fired: bool,
}

impl Timer {
    /// Fires `after` from now.
    pub fn after(after: Duration) -> Timer {
        Timer::at_opt(Instant::now().checked_add(after))
    }

    /// Fires at `deadline` (at once if it is past).
    pub fn at(deadline: Instant) -> Timer {
        Timer::at_opt(Some(deadline))
    }

    /// Never fires.
    pub fn never() -> Timer {
        Timer::at_opt(None)
    }

    fn at_opt(deadline: Option<Instant>) -> Timer {
        Timer {
            deadline,
            period: None,
            slot: None,
            fired: false,
        }
    }

    /// Fires every `period`, the first time one `period` from now. Used as a
    /// [`Stream`]; a tick that is late is delivered at once, and later ticks keep
    /// the original schedule (late ticks are not skipped).
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn interval(period: Duration) -> Timer {
        Timer::interval_at(Instant::now() + period, period)
    }

    /// Fires at `start`, then every `period`.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn interval_at(start: Instant, period: Duration) -> Timer {
        assert!(!period.is_zero(), "an interval's period must not be zero");
        Timer {
            deadline: Some(start),
            period: Some(period),
            slot: None,
            fired: false,
        }
    }

    /// The next deadline (`None` for a timer that never fires, or a one-shot timer
    /// that has fired).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Moves the deadline to `after` from now (cancels the armed one).
    pub fn set_after(&mut self, after: Duration) {
        self.set_at_opt(Instant::now().checked_add(after));
    }

    /// Moves the deadline to `deadline` (cancels the armed one).
    pub fn set_at(&mut self, deadline: Instant) {
        self.set_at_opt(Some(deadline));
    }

    fn set_at_opt(&mut self, deadline: Option<Instant>) {
        self.disarm();
        self.deadline = deadline;
        self.fired = false;
    }

    fn disarm(&mut self) {
        if let Some(slot) = self.slot.take() {
            if let Ok(reactor) = Reactor::get() {
                reactor.remove_timer(slot);
            }
        }
    }

    fn poll_fire(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let Some(deadline) = self.deadline else {
            return Poll::Pending;
        };
        let reactor = match Reactor::get() {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        match self.slot {
            Some(slot) => {
                if !reactor.poll_timer(slot, cx.waker()) {
                    return Poll::Pending;
                }
                self.slot = None;
            }
            None => {
                if deadline > Instant::now() {
                    self.slot = Some(reactor.insert_timer(deadline, cx.waker().clone()));
                    return Poll::Pending;
                }
            }
        }
        self.deadline = self.period.and_then(|p| deadline.checked_add(p));
        self.fired = self.period.is_none();
        Poll::Ready(deadline)
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.disarm();
    }
}

impl Future for Timer {
    type Output = Instant;
    /// Resolves with the deadline it fired for. A one-shot timer polled again after
    /// it fired stays pending.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
        self.get_mut().poll_fire(cx)
    }
}

impl Stream for Timer {
    type Item = Instant;
    /// Yields each deadline; a one-shot timer yields once, then ends.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        let this = self.get_mut();
        if this.fired {
            return Poll::Ready(None);
        }
        this.poll_fire(cx).map(Some)
    }
}

/// Sleeps for `duration`.
///
/// ```
/// # use std::time::Duration;
/// evq_async::block_on(evq_async::sleep(Duration::from_millis(1)));
/// ```
pub fn sleep(duration: Duration) -> Timer {
    Timer::after(duration)
}

/// A stream that yields every `period`; see [`Timer::interval`].
///
/// # Panics
/// If `period` is zero.
pub fn interval(period: Duration) -> Timer {
    Timer::interval(period)
}

/// Runs `future` for at most `duration`.
///
/// ```
/// use std::time::Duration;
/// let r = evq_async::block_on(evq_async::timeout(
///     Duration::from_millis(5),
///     std::future::pending::<()>(),
/// ));
/// assert!(r.is_err());
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        timer: Timer::after(duration),
    }
}

pin_project_lite::pin_project! {
    /// Future of [`timeout`]: the inner future's output, or [`TimedOut`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        timer: Timer,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, TimedOut>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.timer.poll_fire(cx) {
            Poll::Ready(_) => Poll::Ready(Err(TimedOut(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The error of a [`timeout`] that expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut(());

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("future timed out")
    }
}

impl Error for TimedOut {}

impl From<TimedOut> for io::Error {
    fn from(e: TimedOut) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, e)
    }
}
