//! The intake: how an event loop takes new connections from its listener
//! under overload control ([`crate::overload`]) — in chunks, or in `pulse`'s
//! batches with the listener shut while a batch is served — and how each
//! connection is judged before it costs the loop anything more. Written once
//! for the server's workers and the proxy's relay, which lend their parts
//! through [`Intake`].

use crate::listener::{Listener, Next};
use crate::overload::{self, AcceptPlan, Admission, Refusal, PULSE_LEAD};
use crate::stats::WorkerCounters;
use evq::EventQueue;
use std::os::fd::RawFd;
use std::time::Instant;

/// The parts of an event loop the intake works with.
pub(crate) struct Parts<'a> {
    pub(crate) listener: &'a mut Listener,
    pub(crate) queue: &'a mut EventQueue,
    pub(crate) admission: &'a mut Admission,
    pub(crate) counters: &'a WorkerCounters,
}

/// An event loop that takes connections through the intake.
pub(crate) trait Intake {
    /// Its listener, queue, overload state and counters.
    fn parts(&mut self) -> Parts<'_>;
    /// Seed 001's limiter says "overloaded" (with this connection counted).
    fn shed(&mut self) -> bool;
    /// Room for one more connection (`--max-conns`, reclaiming idle ones if it
    /// must); `false` refuses it.
    fn has_room(&mut self) -> bool;
    /// An admitted connection: register it and serve it.
    fn take(&mut self, fd: RawFd);
    /// `accept` met `EMFILE`/`ENFILE` with the client still waiting: close one
    /// idle connection for it; `false` if there is none.
    fn make_room(&mut self) -> bool;
    /// `accept` met `EMFILE`/`ENFILE` and the client behind was shed with the
    /// spare descriptor (nothing idle to close): make room for the next ones.
    fn out_of_descriptors(&mut self);
}

/// The listener is readable (or a pause ended): take what the policy lets
/// in, a chunk at a time, until the queue is empty or a `pulse` batch is
/// taken.
pub(crate) fn on_accept<T: Intake>(t: &mut T, mut now: Instant) {
    loop {
        let p = t.parts();
        let plan = p
            .admission
            .plan_accept(p.listener.raw_fd(), now, p.counters);
        let most = match plan {
            AcceptPlan::Batch { take } => return accept_pulse(t, take as usize),
            AcceptPlan::All { most } => most as usize,
        };
        p.listener.begin();
        let mut taken = 0;
        while taken < most {
            let p = t.parts();
            match p.listener.next(p.queue) {
                Next::Conn(fd) => {
                    admit(t, fd);
                    taken += 1;
                }
                Next::NoDescriptor => room_or_shed(t),
                Next::Refused => t.out_of_descriptors(),
                Next::End => return,
            }
        }
        // A chunk taken with more perhaps waiting: look at the queue again
        // (a level-triggered listener says so by itself).
        let p = t.parts();
        p.listener.end_batch(p.queue);
        if !p.listener.drains() {
            return;
        }
        now = Instant::now();
    }
}

/// `pulse`: takes at most `take` waiting connections, stops listening — the
/// kernel now refuses new clients itself — serves them, and listens again
/// before the last [`PULSE_LEAD`] of them.
fn accept_pulse<T: Intake>(t: &mut T, take: usize) {
    let mut batch = Vec::with_capacity(take);
    t.parts().listener.begin();
    while batch.len() < take {
        let p = t.parts();
        match p.listener.next(p.queue) {
            Next::Conn(fd) => batch.push(fd),
            Next::NoDescriptor => room_or_shed(t),
            Next::Refused => t.out_of_descriptors(),
            Next::End => break,
        }
    }
    let p = t.parts();
    p.listener.end_batch(p.queue);
    let fd = p.listener.raw_fd();
    let left = overload::listen_queue_len(fd).unwrap_or(0);
    overload::stop_listening(fd);
    p.counters.pulse(left);
    let started = Instant::now();
    let reopen_at = batch.len().saturating_sub(PULSE_LEAD);
    for (k, conn) in batch.iter().enumerate() {
        if k == reopen_at {
            listen_again(t, started);
        }
        admit(t, *conn);
    }
    if batch.is_empty() {
        listen_again(t, started);
    }
}

/// Out of descriptors with a client waiting: an idle connection makes room
/// for it (it is accepted on the next turn), or, with none idle, it is shed.
/// Each turn closes a descriptor or sheds, so the loop ends.
fn room_or_shed<T: Intake>(t: &mut T) {
    t.parts().counters.fd_exhausted();
    if !t.make_room() {
        let p = t.parts();
        p.listener.shed(p.queue);
        t.out_of_descriptors();
    }
}

/// `pulse`: listens again after a batch's pause that began at `stopped`.
fn listen_again<T: Intake>(t: &mut T, stopped: Instant) {
    let now = Instant::now();
    let p = t.parts();
    p.counters
        .listened_again(now.saturating_duration_since(stopped));
    // A failure leaves the socket not listening: the next `accept` fails and
    // pauses the listener as for any failed one.
    let _ = overload::listen_again(
        p.listener.raw_fd(),
        p.admission.listen_addr,
        p.admission.backlog,
    );
    p.admission.pulse_opened(now);
}

/// A new connection: reset under overload (seed 001, codel, the deadline),
/// refused for want of room, else taken and served at once.
fn admit<T: Intake>(t: &mut T, fd: RawFd) {
    t.parts().counters.accept();
    if t.shed() {
        reset(fd);
        t.parts().counters.shed_reset();
        return;
    }
    let p = t.parts();
    let (waited_ms, refusal) = p.admission.judge(fd);
    if let Some(why) = refusal {
        reset(fd);
        match why {
            Refusal::QueueDelay => p.counters.refused_queue_delay(),
            Refusal::Deadline => p.counters.refused_deadline(),
        }
        return;
    }
    if !t.has_room() {
        evq_os::io::close(fd);
        t.parts().counters.rejected();
        return;
    }
    let p = t.parts();
    let late = waited_ms.is_some_and(|w| p.admission.is_late(w));
    p.counters.admitted(waited_ms, late);
    let _ = evq_os::socket::set_nodelay(fd);
    t.take(fd);
}

/// Closes a refused connection with a reset: its client learns at once, and
/// nothing of it lingers in `TIME_WAIT` here.
fn reset(fd: RawFd) {
    let _ = evq_os::socket::set_reset_on_close(fd);
    evq_os::io::close(fd);
}
