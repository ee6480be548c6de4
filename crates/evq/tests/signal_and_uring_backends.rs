//! Behaviour specific to the `rtsig`, `rtsig-bulk` and `uring` backends (issue 3),
//! checked beside `epoll` as the reference: level/event/oneshot semantics over
//! edge-like mechanisms, stale events after close and reuse, several queues in one
//! process, a queue moved between threads, notify, and no starvation.

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options, Readiness};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use util::pair;

mod util;

const KINDS: &[BackendKind] = &[
    BackendKind::Epoll,
    BackendKind::RtSig,
    BackendKind::RtSigBulk,
    BackendKind::Uring,
];

const LONG: Option<Duration> = Some(Duration::from_secs(5));
const SHORT: Option<Duration> = Some(Duration::from_millis(50));

fn kinds() -> impl Iterator<Item = BackendKind> {
    KINDS.iter().copied().filter(|k| match k.available() {
        Ok(()) => true,
        Err(e) => {
            evq_testkit::skip_backend(k.name(), e);
            false
        }
    })
}

/// A queue of `kind` watching the second end of a fresh [`pair`] for `interest`:
/// (queue, peer, watched end, the state `declare_interest` returned).
fn watching(
    kind: BackendKind,
    interest: Interest,
    opts: Options,
) -> (EventQueue, UnixStream, UnixStream, Readiness) {
    let mut q = EventQueue::with_backend(kind).unwrap();
    let (a, b) = pair();
    let state = q.declare_interest(b.as_raw_fd(), interest, opts).unwrap();
    (q, a, b, state)
}

/// All events within `timeout`, as token → readiness (asserting one per token per call).
fn collect(q: &mut EventQueue, timeout: Option<Duration>) -> HashMap<u64, Readiness> {
    let mut events = Events::with_capacity(256);
    let n = q
        .get_next_event(&mut events, timeout)
        .expect("get_next_event");
    let mut out = HashMap::new();
    for e in events.iter() {
        assert!(
            out.insert(e.token(), e.readiness()).is_none(),
            "{}: two events for token {} in one batch",
            q.backend(),
            e.token()
        );
    }
    assert_eq!(n, out.len());
    out
}

#[test]
fn level_repeats_until_drained_then_stops() {
    for kind in kinds() {
        let (mut q, mut a, mut b, state) = watching(kind, Interest::READ, Options::new(1));
        assert!(!state.contains(Readiness::READ), "{kind}");
        assert!(collect(&mut q, Some(Duration::ZERO)).is_empty(), "{kind}");
        a.write_all(b"x").unwrap();
        for round in 0..3 {
            let got = collect(&mut q, LONG);
            assert!(
                got.get(&1).is_some_and(|r| r.contains(Readiness::READ)),
                "{kind}: round {round}: {got:?}"
            );
        }
        let mut buf = [0u8; 8];
        assert_eq!(b.read(&mut buf).unwrap(), 1);
        // Gone quiet: no event now (a backend may need one empty look to notice).
        let got = collect(&mut q, SHORT);
        assert!(got.is_empty(), "{kind}: after drain: {got:?}");
    }
}

#[test]
fn ready_before_registration_is_reported() {
    for kind in kinds() {
        for mode in [Mode::Level, Mode::Event, Mode::Oneshot] {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (mut a, b) = pair();
            a.write_all(b"x").unwrap();
            let state = q
                .declare_interest(b.as_raw_fd(), Interest::READ, Options::new(2).mode(mode))
                .unwrap();
            assert!(state.contains(Readiness::READ));
            let got = collect(&mut q, LONG);
            assert!(got.contains_key(&2), "{kind} {mode:?}: {got:?}");
        }
    }
}

#[test]
fn event_mode_reports_arrivals_once() {
    for kind in kinds() {
        let (mut q, mut a, _b, _) =
            watching(kind, Interest::READ, Options::new(3).mode(Mode::Event));
        a.write_all(b"x").unwrap();
        a.write_all(b"y").unwrap();
        let got = collect(&mut q, LONG);
        assert!(got.contains_key(&3), "{kind}");
        // Not drained, but nothing new happened: no repeat.
        let got = collect(&mut q, SHORT);
        assert!(got.is_empty(), "{kind}: repeated: {got:?}");
        a.write_all(b"z").unwrap();
        let got = collect(&mut q, LONG);
        assert!(got.contains_key(&3), "{kind}: second arrival");
    }
}

#[test]
fn oneshot_disarms_until_modify() {
    for kind in kinds() {
        let (mut q, mut a, b, _) =
            watching(kind, Interest::READ, Options::new(4).mode(Mode::Oneshot));
        let fd = b.as_raw_fd();
        let opts = Options::new(4).mode(Mode::Oneshot);
        a.write_all(b"x").unwrap();
        assert!(collect(&mut q, LONG).contains_key(&4), "{kind}");
        a.write_all(b"y").unwrap();
        assert!(
            collect(&mut q, SHORT).is_empty(),
            "{kind}: fired while disarmed"
        );
        q.declare_interest(fd, Interest::READ, opts).unwrap();
        assert!(collect(&mut q, LONG).contains_key(&4), "{kind}: re-armed");
    }
}

#[test]
fn write_interest_and_hangup() {
    for kind in kinds() {
        let (mut q, a, b, state) = watching(kind, Interest::WRITE, Options::new(5));
        assert!(state.contains(Readiness::WRITE));
        let got = collect(&mut q, LONG);
        assert!(
            got.get(&5).is_some_and(|r| r.contains(Readiness::WRITE)),
            "{kind}"
        );
        q.declare_interest(b.as_raw_fd(), Interest::READ, Options::new(6))
            .unwrap();
        // Level write events may still be in flight from the old interest; they must
        // not carry WRITE to a READ-only registration.
        let got = collect(&mut q, SHORT);
        assert!(
            got.values().all(|r| !r.contains(Readiness::WRITE)),
            "{kind}: {got:?}"
        );
        drop(a);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = collect(&mut q, LONG);
            if got.get(&6).is_some_and(|r| r.contains(Readiness::HUP)) {
                break;
            }
            assert!(Instant::now() < deadline, "{kind}: no HUP");
        }
    }
}

#[test]
fn stale_events_after_close_and_reuse_are_dropped() {
    for kind in kinds() {
        let (mut q, mut a, b, _) =
            watching(kind, Interest::READ, Options::new(7).mode(Mode::Event));
        let fd = b.as_raw_fd();
        a.write_all(b"old").unwrap(); // queued in the kernel for the old file
        std::thread::sleep(Duration::from_millis(10));
        // Close behind the queue's back and reuse the number for a quiet socket, in
        // one step: dup2 closes the old file and installs the new one at `fd`, so
        // the number is never free for a parallel test to take (and then have this
        // test close its file).
        q.forget(fd);
        let (c, d) = pair();
        // SAFETY: `b` gives up `fd` (into_raw_fd), which dup2 replaces at once.
        let moved = unsafe { libc::dup2(d.as_raw_fd(), b.into_raw_fd()) };
        assert_eq!(moved, fd, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` now names a duplicate of `d` that nobody else owns.
        let reused = unsafe { OwnedFd::from_raw_fd(moved) };
        q.declare_interest(fd, Interest::READ, Options::new(8).mode(Mode::Event))
            .unwrap();
        let got = collect(&mut q, SHORT);
        assert!(!got.contains_key(&7), "{kind}: stale token delivered");
        assert!(
            !got.contains_key(&8),
            "{kind}: quiet socket reported: {got:?}"
        );
        q.declare_interest(fd, Interest::empty(), Options::new(0))
            .unwrap();
        drop((reused, c, d));
    }
}

#[test]
fn queues_in_one_process_do_not_steal_events() {
    for kind in kinds() {
        let mut queues: Vec<EventQueue> = (0..4)
            .map(|_| EventQueue::with_backend(kind).unwrap())
            .collect();
        let pairs: Vec<_> = (0..4).map(|_| pair()).collect();
        for (i, (q, (_, b))) in queues.iter_mut().zip(&pairs).enumerate() {
            q.declare_interest(b.as_raw_fd(), Interest::READ, Options::new(i as u64))
                .unwrap();
        }
        for (a, _) in &pairs {
            (&*a).write_all(b"x").unwrap();
        }
        for (i, q) in queues.iter_mut().enumerate() {
            let got = collect(q, LONG);
            assert_eq!(got.len(), 1, "{kind}: queue {i}: {got:?}");
            assert!(got.contains_key(&(i as u64)), "{kind}: queue {i}: {got:?}");
        }
    }
}

#[test]
fn notify_wakes_a_blocked_wait() {
    for kind in kinds() {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let n = q.notifier();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            n.notify().unwrap();
            n.notify().unwrap();
        });
        let start = Instant::now();
        let mut events = Events::with_capacity(8);
        assert_eq!(q.get_next_event(&mut events, LONG).unwrap(), 1, "{kind}");
        assert!(events.iter().next().unwrap().is_notify());
        assert!(start.elapsed() < Duration::from_secs(4), "{kind}");
        t.join().unwrap();
        // Coalesced: at most one more (spurious) notify, then quiet.
        let mut extra = 0;
        while q.get_next_event(&mut events, SHORT).unwrap() > 0 {
            extra += 1;
            assert!(extra <= 1, "{kind}: notify not coalesced");
        }
    }
}

#[test]
fn queue_moved_to_another_thread_keeps_working() {
    for kind in kinds() {
        let (mut q, mut a, b, _) =
            watching(kind, Interest::READ, Options::new(9).mode(Mode::Event));
        a.write_all(b"before").unwrap(); // signalled to the creating thread
        let q = std::thread::spawn(move || {
            let got = collect(&mut q, LONG);
            assert!(got.contains_key(&9), "{kind}: lost in the move");
            q
        })
        .join()
        .unwrap();
        let mut q = std::thread::spawn(move || {
            let mut q = q;
            a.write_all(b"after").unwrap();
            let got = collect(&mut q, LONG);
            assert!(got.contains_key(&9), "{kind}: second thread");
            q
        })
        .join()
        .unwrap();
        drop(b);
        let _ = collect(&mut q, Some(Duration::ZERO));
    }
}

#[test]
fn small_batches_rotate_through_a_large_ready_set() {
    for kind in kinds() {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let pairs: Vec<_> = (0..40).map(|_| pair()).collect();
        for (i, (a, b)) in pairs.iter().enumerate() {
            q.declare_interest(b.as_raw_fd(), Interest::READ, Options::new(i as u64))
                .unwrap();
            (&*a).write_all(b"x").unwrap();
        }
        let mut seen = vec![0u32; pairs.len()];
        let mut events = Events::with_capacity(7);
        for _ in 0..12 {
            q.get_next_event(&mut events, LONG).unwrap();
            for e in events.iter() {
                seen[e.token() as usize] += 1;
            }
        }
        // 84 level deliveries over 40 always-ready fds: everyone at least twice.
        assert!(seen.iter().all(|&n| n >= 2), "{kind}: starved: {seen:?}");
    }
}

#[test]
fn rtsig_refuses_files_that_cannot_signal() {
    for kind in [BackendKind::RtSig, BackendKind::RtSigBulk] {
        let mut q = EventQueue::with_backend(kind).unwrap();
        // SAFETY: eventfd takes no pointers; the result is closed below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        let err = q
            .declare_interest(efd, Interest::READ, Options::new(1))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{kind}: {err}");
        assert_eq!(q.registered(), 0);
        // SAFETY: flags of a descriptor we own.
        let flags = unsafe { libc::fcntl(efd, libc::F_GETFL) };
        assert_eq!(flags & libc::O_ASYNC, 0, "{kind}");
        // SAFETY: closing the eventfd opened above.
        unsafe { libc::close(efd) };
    }
}

/// A fresh signal behind a backlog of stale ones is found by a zero-timeout wait
/// with a batch of one. (Found by `evq torture`: a wait dequeued only as many
/// signals as its batch held, so with thousands of stale hints queued — a signal
/// per write, the data long read — a ready descriptor went unreported for hundreds
/// of milliseconds, and a zero-timeout look said nothing was ready.)
#[test]
fn a_fresh_signal_behind_stale_ones_is_found_at_once() {
    for kind in [BackendKind::RtSig, BackendKind::RtSigBulk] {
        if let Err(e) = kind.available() {
            evq_testkit::skip_backend(kind.name(), e);
            continue;
        }
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (mut busy_peer, busy) = pair();
        let (mut quiet_peer, quiet) = pair();
        for (token, s) in [(1, &busy), (2, &quiet)] {
            q.declare_interest(
                s.as_raw_fd(),
                Interest::READ,
                Options::new(token).mode(Mode::Event),
            )
            .unwrap();
        }
        let mut events = Events::with_capacity(1);
        while q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap() > 0 {}
        // 2,000 signals for `busy`, each one stale: its byte is read straight away.
        let mut byte = [0u8; 1];
        for _ in 0..2000 {
            busy_peer.write_all(b"x").unwrap();
            (&busy).read_exact(&mut byte).unwrap();
        }
        quiet_peer.write_all(b"y").unwrap();
        q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap();
        let tokens: Vec<u64> = events.iter().map(|e| e.token()).collect();
        assert_eq!(tokens, vec![2], "{kind}: the fresh signal was not found");
        assert!(q.get_next_event(&mut events, Some(Duration::ZERO)).unwrap() == 0);
    }
}
