//! A listening socket as the server's workers and the proxy watch it: accepted
//! in batches, with every `accept` error handled ([`evq_os::Acceptor`], the
//! spare-descriptor trick included), and paused instead of spinning when
//! descriptors or memory run out.
//!
//! Pausing stops watching the listener (a level-triggered listener with
//! connections waiting would otherwise report them again at once, for ever)
//! and sets a timer. Accepting resumes when the timer fires, or sooner, at the
//! end of a round in which the loop closed a descriptor: the one freed is what
//! was missing. A listener that failed outright (shut down, closed) pauses the
//! same way; resuming it is harmless.

use crate::token::{token, Kind};
use evq::{EventQueue, Interest, Mode, Options, Readiness, TimerId};
use evq_os::{Accept, Acceptor};
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Accepts per readiness event of a level-triggered listener, so one busy
/// listener cannot starve the connections (it reports again if more wait).
const ACCEPTS_PER_EVENT: usize = 64;
/// How long accepting pauses when no descriptor is freed meanwhile.
const PAUSE: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Watching,
    /// Not watched until `timer` fires (or a descriptor is freed, when
    /// `for_descriptors`).
    Paused {
        timer: TimerId,
        for_descriptors: bool,
    },
    Closed,
}

/// What [`Listener::next`] gives.
#[derive(Debug)]
pub(crate) enum Next {
    /// A new connection (non-blocking, close-on-exec), now the caller's.
    Conn(RawFd),
    /// A connection refused for want of descriptors or memory (shed with the
    /// spare, or accepting paused).
    Refused,
    /// Out of descriptors, the connection still waiting: close an idle
    /// connection and ask again, or [`Listener::shed`] it.
    NoDescriptor,
    /// This readiness event's batch is over.
    End,
}

/// One event loop's view of a listening socket.
pub(crate) struct Listener {
    fd: RawFd,
    /// The socket, when this loop owns it (one `SO_REUSEPORT` socket per thread,
    /// the proxy's); `None` when the server's threads share one.
    owned: Option<OwnedFd>,
    opts: Options,
    acceptor: Acceptor,
    state: State,
    /// Accepts left in the current batch.
    left: usize,
    /// A oneshot registration to re-arm when the batch ends.
    rearm: bool,
    /// A descriptor was freed while paused for want of them.
    freed: bool,
    /// Times the listener itself failed (`accept` said it cannot accept).
    failures: u64,
}

impl Listener {
    /// Watches `fd` for connections in `queue` with `opts` (whose token should
    /// be `token(Kind::Listener, ..)`: the pause timer carries it too).
    ///
    /// # Errors
    /// `declare_interest`'s error.
    pub(crate) fn watch(
        fd: RawFd,
        owned: Option<OwnedFd>,
        opts: Options,
        queue: &mut EventQueue,
    ) -> std::io::Result<Listener> {
        queue.declare_interest(fd, Interest::READ, opts)?;
        Ok(Listener {
            fd,
            owned,
            opts,
            acceptor: Acceptor::new(),
            state: State::Watching,
            left: 0,
            rearm: false,
            freed: false,
            failures: 0,
        })
    }

    /// The listening socket.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd
    }

    /// Times the listener itself failed (closed, shut down, not listening)
    /// and accepting paused.
    pub(crate) fn failures(&self) -> u64 {
        self.failures
    }

    /// The token of a listener's registration and of its pause timer.
    pub(crate) fn token() -> u64 {
        token(Kind::Listener, 0, 0)
    }

    /// Starts the batch of one readiness event. A level-triggered listener takes
    /// a bounded batch; the others must be drained to `EAGAIN` now, or their
    /// waiting connections would wait for ever.
    pub(crate) fn begin(&mut self) {
        let mode = self.opts.delivery_mode();
        self.left = if mode == Mode::Level {
            ACCEPTS_PER_EVENT
        } else {
            usize::MAX
        };
        self.rearm = mode == Mode::Oneshot;
    }

    /// The next connection of the batch, until [`Next::End`].
    pub(crate) fn next(&mut self, queue: &mut EventQueue) -> Next {
        while self.left > 0 && self.state == State::Watching {
            self.left -= 1;
            match self.acceptor.try_accept(self.fd) {
                Accept::Conn(fd) => return Next::Conn(fd.into_raw_fd()),
                Accept::Skipped => {}
                Accept::NoDescriptor(_) => return Next::NoDescriptor,
                Accept::Shed => return Next::Refused,
                Accept::Empty => self.left = 0,
                Accept::Exhausted(_) => {
                    self.pause(queue, true);
                    return Next::Refused;
                }
                Accept::Failed(_) => {
                    self.failures += 1;
                    self.pause(queue, false);
                }
            }
        }
        self.end_batch(queue);
        Next::End
    }

    /// Out of descriptors with nothing to close: the spare-descriptor trick
    /// refuses the waiting connection (or, without a spare, accepting pauses).
    pub(crate) fn shed(&mut self, queue: &mut EventQueue) -> Next {
        let err = std::io::Error::from_raw_os_error(libc::EMFILE);
        if let Accept::Exhausted(_) = self.acceptor.shed(self.fd, err) {
            self.pause(queue, true);
        }
        Next::Refused
    }

    /// Whether a readiness event must be drained to `EAGAIN` (edge and
    /// oneshot registrations report it once); a level-triggered listener
    /// reports again while connections wait.
    pub(crate) fn drains(&self) -> bool {
        self.opts.delivery_mode() != Mode::Level
    }

    /// Ends a batch before [`Next::End`] (the caller took what it wanted): a
    /// oneshot registration is armed again.
    pub(crate) fn end_batch(&mut self, queue: &mut EventQueue) {
        self.left = 0;
        if std::mem::take(&mut self.rearm)
            && self.state == State::Watching
            && queue
                .declare_interest(self.fd, Interest::READ, self.opts)
                .is_err()
        {
            self.pause(queue, false);
        }
    }

    /// Stops watching for a moment.
    fn pause(&mut self, queue: &mut EventQueue, for_descriptors: bool) {
        if self.state != State::Watching {
            return;
        }
        let _ = queue.declare_interest(self.fd, Interest::empty(), Options::new(0));
        let timer = queue.add_timer_after(PAUSE, self.opts.token());
        self.state = State::Paused {
            timer,
            for_descriptors,
        };
    }

    /// Watches the listener again after a pause (its timer fired, or a
    /// descriptor was freed). True if connections are waiting now: the caller
    /// accepts them at once (an edge-triggered listener would not report them).
    pub(crate) fn resume(&mut self, queue: &mut EventQueue) -> bool {
        let State::Paused { timer, .. } = self.state else {
            return false;
        };
        queue.cancel_timer(timer);
        self.state = State::Watching;
        self.freed = false;
        self.acceptor.reserve();
        match queue.declare_interest(self.fd, Interest::READ, self.opts) {
            // A hang-up or error counts too: `accept` says what it is.
            Ok(now) => now.intersects(Readiness::READ | Readiness::HUP | Readiness::ERROR),
            Err(_) => {
                self.pause(queue, false);
                false
            }
        }
    }

    /// The loop closed a descriptor: a pause for want of them may end at the end
    /// of this round ([`Listener::end_round`]).
    pub(crate) fn descriptor_freed(&mut self) {
        if let State::Paused {
            for_descriptors: true,
            ..
        } = self.state
        {
            self.freed = true;
        }
    }

    /// At the end of a round of events: resumes accepting if descriptors were
    /// freed during a pause for want of them. True as [`Listener::resume`].
    pub(crate) fn end_round(&mut self, queue: &mut EventQueue) -> bool {
        self.freed && self.resume(queue)
    }

    /// For a graceful stop: no new clients from now on. Closes the socket if
    /// this loop owns it ([`Listener::close`]); a socket shared with other
    /// threads (owned by the server's handle) is shut down instead: on Linux
    /// `shutdown(SHUT_RD)` takes a listening socket out of the listening state,
    /// so new clients are refused at once rather than completing a handshake no
    /// one will answer. Its number stays held by the owner, so no thread's
    /// `accept` or `close` can meet a reused number. (Every thread stops on the
    /// same flag, so shutting it for all is what each of them wants.)
    pub(crate) fn stop_listening(&mut self, queue: &mut EventQueue) {
        if self.owned.is_none() && self.state != State::Closed {
            evq_os::io::shutdown(self.fd, std::net::Shutdown::Read);
        }
        self.close(queue);
    }

    /// Stops watching for good, and closes the socket if this loop owns it.
    pub(crate) fn close(&mut self, queue: &mut EventQueue) {
        if self.state == State::Closed {
            return;
        }
        if let State::Paused { timer, .. } = self.state {
            queue.cancel_timer(timer);
        }
        if self.state == State::Watching {
            let _ = queue.declare_interest(self.fd, Interest::empty(), Options::new(0));
        }
        self.state = State::Closed;
        self.owned = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evq::Events;
    use evq_os::ListenOptions;
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    fn listening() -> (OwnedFd, std::net::SocketAddr) {
        let l = evq_os::listen("127.0.0.1:0".parse().unwrap(), ListenOptions::default()).unwrap();
        let addr = evq_os::socket::local_addr(l.as_raw_fd()).unwrap();
        (l, addr)
    }

    /// Waits (up to 5 s) for an event with the listener's token; true if it is
    /// the pause timer's.
    fn listener_event(queue: &mut EventQueue) -> bool {
        let mut events = Events::with_capacity(8);
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            queue
                .get_next_event(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            if let Some(ev) = events.iter().find(|e| e.token() == Listener::token()) {
                return ev.is_timer();
            }
        }
        panic!("no listener event in 5 s");
    }

    #[test]
    fn a_failed_listener_pauses_instead_of_spinning_and_resumes_by_timer() {
        let (l, _) = listening();
        let mut queue = EventQueue::new().unwrap();
        let opts = Options::new(Listener::token()).mode(Mode::Level);
        let mut listener = Listener::watch(l.as_raw_fd(), Some(l), opts, &mut queue).unwrap();
        // A listener shut down is readable for ever and accept says EINVAL: the
        // spin an unhandled error would cause.
        // SAFETY: shutdown(2) on the listener this test owns.
        assert_eq!(unsafe { libc::shutdown(listener.fd, libc::SHUT_RDWR) }, 0);
        assert!(!listener_event(&mut queue), "readable first");
        listener.begin();
        assert!(matches!(listener.next(&mut queue), Next::End));
        assert!(matches!(
            listener.state,
            State::Paused {
                for_descriptors: false,
                ..
            }
        ));
        // Not watched now: the next event for it is the pause timer.
        assert!(listener_event(&mut queue), "the pause timer, not readiness");
        assert!(listener.resume(&mut queue), "readable again once watched");
        assert_eq!(listener.state, State::Watching);
        listener.close(&mut queue);
        assert_eq!(listener.state, State::Closed);
        assert!(!listener.resume(&mut queue));
    }

    /// In a child process (the test binary again, this test only): the limit on
    /// descriptors is process-wide, and other tests run beside this one.
    #[test]
    fn out_of_descriptors_pauses_until_one_is_freed() {
        if evq_os::isolation::in_own_process(
            "listener::tests::out_of_descriptors_pauses_until_one_is_freed",
        ) {
            return;
        }
        exhaustion_child();
    }

    fn exhaustion_child() {
        let (l, addr) = listening();
        let clients: Vec<_> = (0..2)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let mut queue = EventQueue::new().unwrap();
        let mut fillers = evq_os::isolation::exhaust_descriptors(64);
        // No descriptor for the spare either: accepting must pause.
        let opts = Options::new(Listener::token()).mode(Mode::Level);
        let mut listener = Listener::watch(l.as_raw_fd(), Some(l), opts, &mut queue).unwrap();
        assert!(!listener.acceptor.has_spare());
        assert!(!listener_event(&mut queue));
        listener.begin();
        // Out of descriptors, the connection still waiting: the caller may
        // close an idle one and ask again; with nothing to close it sheds it,
        // and with no spare either, accepting pauses.
        assert!(matches!(listener.next(&mut queue), Next::NoDescriptor));
        assert!(matches!(listener.shed(&mut queue), Next::Refused));
        assert!(matches!(listener.next(&mut queue), Next::End));
        assert!(matches!(
            listener.state,
            State::Paused {
                for_descriptors: true,
                ..
            }
        ));
        // A round that freed nothing does not resume.
        assert!(!listener.end_round(&mut queue));
        // The loop closes two descriptors: one for the spare, one for a connection.
        fillers.truncate(fillers.len() - 2);
        listener.descriptor_freed();
        assert!(
            listener.end_round(&mut queue),
            "resumed, connections waiting"
        );
        assert!(listener.acceptor.has_spare());
        listener.begin();
        assert!(matches!(listener.next(&mut queue), Next::Conn(_)));
        drop(clients);
    }
}
