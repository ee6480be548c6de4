//! What the threads of one case share: the channel slots (a producer's write end,
//! replaced when a consumer closes and reopens the channel), the notifiers of the
//! consumers' queues, the wake-one listeners, and the flags that end the phases.

use crate::channel::WriteEnd;
use evq::Notifier;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// One channel's producer side. The consumer that owns the channel swaps the write
/// end when it closes and reopens the channel; the producer writes under the lock,
/// so `produced` always belongs to the instance that is there.
#[derive(Default)]
pub struct Slot {
    pub writer: Mutex<Option<WriteEnd>>,
}

/// The wake-up side of one consumer: its queue's notifier (swapped when the queue
/// is dropped and recreated) and the notifications sent and seen.
#[derive(Default)]
pub struct Wakeups {
    /// Sent and notified under this lock, so a notification never goes to a queue
    /// that has just been replaced.
    pub notifier: Mutex<Option<Notifier>>,
    pub sent: AtomicU64,
    /// The highest `sent` a NOTIFY event was seen after.
    pub acked: AtomicU64,
}

impl Wakeups {
    /// Wakes the queue without counting a notification it must see: the kick that
    /// makes consumers notice the end (or an early stop). A consumer may see the
    /// end on its own wait's timeout and leave before the kick arrives, and that
    /// is no lost wake-up — counting it as one made 4-thread cases report
    /// `wakeups_lost` now and then, on poll here and on kmod in the VM.
    pub fn kick(&self) {
        let guard = self.notifier.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = guard.as_ref() {
            let _ = n.notify();
        }
    }

    /// Sends one notification (if the queue exists) and counts it.
    pub fn notify(&self) {
        let guard = self.notifier.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = guard.as_ref() {
            self.sent.fetch_add(1, Ordering::AcqRel);
            // An eventfd write: cannot fail in practice (EAGAIN already counts).
            let _ = n.notify();
        }
    }
}

/// The state of one case shared by all its threads.
pub struct Shared {
    pub start: Instant,
    pub slots: Vec<Slot>,
    pub wakeups: Vec<Wakeups>,
    /// Listeners every queue that can share descriptors registers (wake-one where
    /// the backend has it).
    pub listeners: Vec<TcpListener>,
    /// Per connection id made by the connector: how many times it was accepted.
    pub accepted: Vec<AtomicU32>,
    pub connections_made: AtomicU64,
    pub next_uid: AtomicU32,
    /// Events handed to consumers, all kinds.
    pub delivered: AtomicU64,
    pub stop_producers: AtomicBool,
    /// A quiet checkpoint wants the producers still: they flush and wait.
    pub pause_producers: AtomicBool,
    /// Producers flushed and waiting.
    pub producers_paused: AtomicUsize,
    /// The current checkpoint (0: none yet). Consumers settle, check that nothing
    /// armed is left unread, and store it in `checkpoint_acks`.
    pub checkpoint: AtomicU64,
    pub checkpoint_acks: Vec<AtomicU64>,
    pub stop_churn: AtomicBool,
    pub finish: AtomicBool,
    /// Per consumer: in its drain phase it found everything read and settled.
    pub drained: Vec<AtomicBool>,
}

impl Shared {
    /// Nanoseconds since the case began.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// A channel instance uid never used before in this case.
    pub fn new_uid(&self) -> u32 {
        self.next_uid.fetch_add(1, Ordering::Relaxed)
    }
}
