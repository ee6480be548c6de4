//! [`block_on`]: a loop of ours on the calling thread, which drives the reactor
//! itself while its future waits (see `reactor/fallback.rs` for who drives it
//! when no loop of ours runs).

use crate::reactor::{waker_for, ActiveLoop, Reactor, Sleeper};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};

thread_local! {
    /// This thread's sleeper, cached between `block_on` calls (a nested call makes
    /// its own).
    static CACHED: Cell<Option<Arc<Sleeper>>> = const { Cell::new(None) };
}

/// Runs `future` to completion on the calling thread, driving the reactor while it
/// waits.
///
/// When the future is pending the thread waits on evq's queue itself if no other
/// thread does (so an I/O event is dispatched by the thread that runs the woken
/// future), and otherwise parks until woken. Other threads' wake-ups reach it
/// through the queue's [`Notifier`](evq::Notifier) or by unparking. Nested calls are
/// allowed (they block the outer future while they run).
///
/// ```
/// use std::time::Duration;
/// let v = evq_async::block_on(async {
///     evq_async::sleep(Duration::from_millis(1)).await;
///     7
/// });
/// assert_eq!(v, 7);
/// ```
pub fn block_on<T>(future: impl Future<Output = T>) -> T {
    // Counted before the reactor is first made, so that a fallback thread started
    // by this very call finds a loop of ours already running and stays parked.
    let _active = ActiveLoop::enter();
    let reactor = Reactor::get().ok();
    let sleeper = CACHED
        .with(Cell::take)
        .unwrap_or_else(Sleeper::for_current_thread);
    let waker = waker_for(&sleeper);
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let out = loop {
        sleeper.take_notification();
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            break v;
        }
        while !sleeper.take_notification() {
            match reactor {
                Some(r) => r.sleep(&sleeper),
                None => sleeper.park(),
            }
        }
    };
    drop(waker);
    CACHED.with(|c| c.set(Some(sleeper)));
    out
}
