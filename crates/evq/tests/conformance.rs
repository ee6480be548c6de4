//! The conformance suite: every semantic of the core API, checked once per backend
//! this kernel supports (skipping only by declared capability).

mod util;

use evq::{BackendKind, EventQueue, Events, Interest, Mode, Options, Readiness, NOTIFY_TOKEN};
use evq_testkit::{gettid, wait_until_blocked_in_wait};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use util::*;

#[test]
fn declare_interest_returns_current_state() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        let state = q
            .declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        assert!(
            !state.contains(Readiness::READ),
            "nothing written yet: {state:?}"
        );
        assert!(
            state.contains(Readiness::WRITE),
            "a fresh socket is writable: {state:?}"
        );
        send(&peer, 3);
        let state = q
            .declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        assert!(state.contains(Readiness::READ), "data is there: {state:?}");
    });
}

/// SEEDS 000: data that arrives between accept() and declare_interest() must not be
/// lost: either the returned state says readable or an event follows.
#[test]
fn accept_then_register_race_is_closed() {
    for_each_backend(every_backend, |kind| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        conn.set_nonblocking(true).unwrap();
        client.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut q = EventQueue::with_backend(kind).unwrap();
        let state = q
            .declare_interest(conn.as_raw_fd(), Interest::READ, Options::new(9))
            .unwrap();
        let seen_by_event = wait(&mut q, 8, Some(Duration::from_secs(2)))
            .iter()
            .any(|e| e.token() == 9 && e.readiness().contains(Readiness::READ));
        assert!(
            state.contains(Readiness::READ) || seen_by_event,
            "request lost in the race"
        );
        assert!(
            state.contains(Readiness::READ),
            "data was queued before registration: {state:?}"
        );
    });
}

#[test]
fn level_mode_reports_until_drained() {
    for_each_backend(
        |c| c.level,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (ours, peer) = pair();
            q.declare_interest(fd(&ours), Interest::READ, Options::new(5))
                .unwrap();
            assert!(peek(&mut q).is_empty(), "idle socket reported");
            send(&peer, 10);
            for round in 0..3 {
                let got = wait_some(&mut q, 8);
                assert_eq!(got.len(), 1, "round {round}: {got:?}");
                assert_eq!((got[0].token(), got[0].fd()), (5, fd(&ours)));
                assert!(got[0].readiness().contains(Readiness::READ));
            }
            assert_eq!(drain(&ours), 10);
            assert!(peek(&mut q).is_empty(), "reported after drain");
        },
    );
}

#[test]
fn event_mode_reports_once_per_happening() {
    for_each_backend(
        |c| c.event,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (ours, peer) = pair();
            let opts = Options::new(3).mode(Mode::Event);
            q.declare_interest(fd(&ours), Interest::READ | Interest::WRITE, opts)
                .unwrap();
            // Writable at registration: reported (at most) once, not on every call.
            let first = peek(&mut q);
            assert!(first.len() <= 1, "{first:?}");
            for _ in 0..3 {
                assert!(
                    peek(&mut q).is_empty(),
                    "always-writable socket re-reported"
                );
            }
            send(&peer, 1);
            let got = wait_some(&mut q, 8);
            assert_eq!(got.len(), 1);
            let r = got[0].readiness();
            assert!(
                r.contains(Readiness::READ) && r.contains(Readiness::WRITE),
                "mask is current state: {r:?}"
            );
            assert!(peek(&mut q).is_empty(), "coalesced event delivered twice");
            // More data while still readable is a new happening: reported again.
            send(&peer, 1);
            assert_eq!(wait_some(&mut q, 8).len(), 1);
            assert_eq!(drain(&ours), 2);
            assert!(peek(&mut q).is_empty());
        },
    );
}

/// The case that decides which backends may offer event mode: the application is
/// told "readable", drains to `EAGAIN`, and the peer refills before the next wait.
/// The state at both waits is "readable", so only a backend that hears of arrivals
/// can report it; one that sees only state would lose it (or, to avoid that, report
/// every still-ready descriptor on every wait — level mode). Backends without
/// `event` refuse the mode instead (`unsupported_combinations_fail_clearly`).
#[test]
fn event_mode_reports_data_drained_and_refilled_between_waits() {
    for_each_backend(
        |c| c.event,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (ours, peer) = pair();
            q.declare_interest(fd(&ours), Interest::READ, Options::new(4).mode(Mode::Event))
                .unwrap();
            for round in 0..5 {
                send(&peer, 2);
                let got = wait_some(&mut q, 8);
                assert_eq!(got.len(), 1, "round {round}: {got:?}");
                assert_eq!(drain(&ours), 2, "round {round}");
                // Refilled after EAGAIN, before the next wait.
                send(&peer, 1);
                let got = wait_some(&mut q, 8);
                assert_eq!(got.len(), 1, "round {round}: refill lost: {got:?}");
                assert!(got[0].readiness().contains(Readiness::READ));
                assert_eq!(drain(&ours), 1, "round {round}");
                assert!(peek(&mut q).is_empty(), "round {round}: re-reported");
            }
        },
    );
}

/// The paper's suppression: an event whose cause was consumed before dequeue is
/// not reported with a state that no longer answers the interest.
#[test]
fn event_mode_suppresses_stale_reports() {
    for_each_backend(
        |c| c.event && c.current_state_masks,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (ours, peer) = pair();
            q.declare_interest(fd(&ours), Interest::READ, Options::new(3).mode(Mode::Event))
                .unwrap();
            send(&peer, 4);
            assert_eq!(drain(&ours), 4);
            for e in peek(&mut q) {
                assert!(
                    e.readiness().contains(Readiness::READ),
                    "reported unreadable fd as read event: {e:?}"
                );
            }
        },
    );
}

#[test]
fn oneshot_disarms_until_declared_again() {
    for_each_backend(
        |c| c.oneshot,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let (ours, peer) = pair();
            let opts = Options::new(8).mode(Mode::Oneshot);
            q.declare_interest(fd(&ours), Interest::READ, opts).unwrap();
            send(&peer, 1);
            assert_eq!(wait_some(&mut q, 8).len(), 1);
            assert!(peek(&mut q).is_empty(), "oneshot fired twice");
            send(&peer, 1);
            assert!(peek(&mut q).is_empty(), "disarmed oneshot fired");
            q.declare_interest(fd(&ours), Interest::READ, opts).unwrap();
            let got = wait_some(&mut q, 8);
            assert_eq!((got.len(), got[0].token()), (1, 8));
        },
    );
}

#[test]
fn empty_interest_revokes() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        assert_eq!(q.registered(), 1);
        send(&peer, 1);
        let state = q
            .declare_interest(fd(&ours), Interest::empty(), Options::new(1))
            .unwrap();
        assert!(
            state.contains(Readiness::READ),
            "revoke still reports state"
        );
        assert_eq!(q.registered(), 0);
        assert!(wait(&mut q, 8, Some(Duration::from_millis(30))).is_empty());
    });
}

#[test]
fn modify_changes_interest_and_token() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, _peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        assert!(peek(&mut q).is_empty());
        q.declare_interest(fd(&ours), Interest::WRITE, Options::new(2))
            .unwrap();
        let got = wait_some(&mut q, 8);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].token(), 2);
        assert!(got[0].readiness().contains(Readiness::WRITE));
        assert!(!got[0].readiness().contains(Readiness::READ));
    });
}

#[test]
fn returns_at_once_without_filling_the_batch() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        send(&peer, 1);
        let t = Instant::now();
        let got = wait(&mut q, 64, Some(Duration::from_secs(30)));
        assert_eq!(got.len(), 1);
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "waited to fill the batch"
        );
    });
}

#[test]
fn timeout_expires_with_zero_events() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, _peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        let t = Instant::now();
        assert!(wait(&mut q, 8, Some(Duration::from_millis(60))).is_empty());
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(60),
            "returned early: {took:?}"
        );
        assert!(took < PATIENCE, "overslept: {took:?}");
        let mut empty = Events::with_capacity(0);
        let err = q.get_next_event(&mut empty, None).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    });
}

#[test]
fn notify_wakes_a_blocked_wait() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let notifier = q.notifier();
        let t = Instant::now();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            notifier.notify().unwrap();
        });
        let got = wait(&mut q, 8, None);
        waker.join().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].is_notify() && got[0].token() == NOTIFY_TOKEN);
        assert!(t.elapsed() >= Duration::from_millis(40));
        assert!(peek(&mut q).is_empty(), "notify re-reported");
        // Several notifications before a wait coalesce into one event.
        for _ in 0..3 {
            q.notifier().notify().unwrap();
        }
        assert_eq!(wait_some(&mut q, 8).len(), 1);
        assert!(peek(&mut q).is_empty(), "coalesced notify re-reported");
    });
}

/// With 1,000 ready descriptors and a batch of 1, every one is delivered within
/// 1,000 calls (the paper's overflow fallback starved; ours must not).
#[test]
fn no_starvation_with_batch_of_one() {
    for_each_backend(
        |c| c.level,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let pairs: Vec<_> = (0..1000).map(|_| pair()).collect();
            for (i, (ours, peer)) in pairs.iter().enumerate() {
                q.declare_interest(fd(ours), Interest::READ, Options::new(i as u64))
                    .unwrap();
                send(peer, 1);
            }
            let mut seen = HashSet::new();
            for _ in 0..1000 {
                let got = wait_some(&mut q, 1);
                assert_eq!(got.len(), 1);
                seen.insert(got[0].token());
            }
            assert_eq!(
                seen.len(),
                1000,
                "starved {} descriptors",
                1000 - seen.len()
            );
        },
    );
}

#[test]
fn one_pending_event_per_descriptor() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        let mode = if kind.capabilities().event {
            Mode::Event
        } else {
            Mode::Level
        };
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1).mode(mode))
            .unwrap();
        for _ in 0..10 {
            send(&peer, 1);
        }
        let got = wait_some(&mut q, 64);
        assert_eq!(got.len(), 1, "ten arrivals, one event: {got:?}");
    });
}

#[test]
fn fifo_among_ready_descriptors() {
    for_each_backend(
        |c| c.fifo && c.event,
        |kind| {
            let mut q = EventQueue::with_backend(kind).unwrap();
            let pairs: Vec<_> = (0..20).map(|_| pair()).collect();
            for (i, (ours, _)) in pairs.iter().enumerate() {
                q.declare_interest(
                    fd(ours),
                    Interest::READ,
                    Options::new(i as u64).mode(Mode::Event),
                )
                .unwrap();
            }
            assert!(peek(&mut q).is_empty());
            // Arrival order: reversed, then shuffled by a fixed stride.
            let order: Vec<usize> = (0..20).map(|i| (i * 7 + 3) % 20).collect();
            for &i in &order {
                send(&pairs[i].1, 1);
            }
            let mut delivered = Vec::new();
            while delivered.len() < 20 {
                delivered.extend(wait_some(&mut q, 3).iter().map(|e| e.token() as usize));
            }
            assert_eq!(delivered, order);
        },
    );
}

/// An event for a closed-and-reused fd number never reaches the new registration.
#[test]
fn closed_and_reused_number_gets_no_stale_event() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        let number = fd(&ours);
        q.declare_interest(number, Interest::READ, Options::new(1))
            .unwrap();
        send(&peer, 1);
        // Revoke through the queue, then reuse the number at once (dup2 closes and
        // reuses atomically, so no parallel test can take the number in between).
        q.declare_interest(number, Interest::empty(), Options::new(1))
            .unwrap();
        let (fresh, _fresh_peer) = pair();
        // SAFETY: both descriptors are open; `ours` gives up ownership of `number`.
        let moved = unsafe { libc::dup2(fd(&fresh), ours.into_raw_fd()) };
        assert_eq!(moved, number, "{}", std::io::Error::last_os_error());
        // SAFETY: `number` now names the fresh socket, owned by nobody else.
        let _moved = unsafe { OwnedFd::from_raw_fd(moved) };
        drop(peer);
        q.declare_interest(number, Interest::READ, Options::new(2))
            .unwrap();
        let got = wait(&mut q, 8, Some(Duration::from_millis(30)));
        assert!(got.is_empty(), "stale or spurious event: {got:?}");
    });
}

/// A registration (token 1) whose number was closed and forgotten while a dup keeps
/// its file alive, with a byte waiting on that file: on epoll, a stale event in the
/// kernel's ready list. Returns the dup and the peer, to be kept alive.
fn stale_source(q: &mut EventQueue) -> (UnixStream, UnixStream) {
    let (ours, peer) = pair();
    let number = fd(&ours);
    let dup = ours.try_clone().unwrap();
    q.declare_interest(number, Interest::READ, Options::new(1))
        .unwrap();
    drop(ours);
    q.forget(number);
    send(&peer, 1);
    (dup, peer)
}

/// epoll watches files, not numbers: a dup keeps the old file registered after the
/// number is closed. Its events are stale and must be dropped (and stop coming).
#[test]
fn dup_kept_file_yields_no_stale_events() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (dup, _peer) = stale_source(&mut q);
        let got = wait(&mut q, 8, Some(Duration::from_millis(30)));
        assert!(
            got.is_empty(),
            "event for a forgotten registration: {got:?}"
        );
        // And the queue does not spin on it.
        let before = q.stats().waits;
        assert!(wait(&mut q, 8, Some(Duration::from_millis(100))).is_empty());
        assert!(
            q.stats().waits - before < 20,
            "spun on a stale event: {:?}",
            q.stats()
        );
        drop(dup);
    });
}

/// The untimed and zero-timeout waits take the queue's shortest path; a stale event
/// met there must be dropped without ending the wait early or leaking through a
/// later look.
#[test]
fn stale_event_on_untimed_wait_is_dropped_and_the_wait_goes_on() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (dup, _peer) = stale_source(&mut q);
        let (live, live_peer) = pair();
        q.declare_interest(fd(&live), Interest::READ, Options::new(2))
            .unwrap();
        assert!(
            peek(&mut q).is_empty(),
            "a zero-timeout look saw a stale event"
        );
        let t = Instant::now();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            send(&live_peer, 1);
            live_peer
        });
        let got = wait(&mut q, 8, None);
        let _live_peer = sender.join().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].token(), got[0].fd()), (2, fd(&live)));
        assert!(t.elapsed() >= Duration::from_millis(40), "returned early");
        drain(&live);
        assert!(
            peek(&mut q).is_empty(),
            "stale or drained event re-reported"
        );
        if kind == BackendKind::Epoll {
            // The dup kept the old file in the epoll set: the case really arose.
            assert!(q.stats().stale_dropped >= 1, "{:?}", q.stats());
        }
        drop(dup);
    });
}

#[test]
fn hangup_is_reported() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (mut ours, peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        drop(peer);
        let got = wait_some(&mut q, 8);
        assert!(got[0].is_readable(), "{got:?}");
        assert_eq!(ours.read(&mut [0u8; 8]).unwrap(), 0, "EOF");
    });
}

#[test]
fn timers_fire_in_deadline_order() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let t = Instant::now();
        q.add_timer_after(Duration::from_millis(60), 60);
        q.add_timer_after(Duration::from_millis(20), 20);
        let cancelled = q.add_timer_after(Duration::from_millis(40), 40);
        assert!(q.cancel_timer(cancelled));
        let mut fired = Vec::new();
        while fired.len() < 2 {
            for e in wait_some(&mut q, 8) {
                assert!(e.is_timer() && e.fd() == -1);
                fired.push(e.token());
            }
        }
        assert_eq!(fired, vec![20, 60]);
        assert!(t.elapsed() >= Duration::from_millis(60));
        assert_eq!(q.timers(), 0);
        // A timer shortens a longer wait; the wait's own timeout still ends it.
        q.add_timer_after(Duration::from_millis(10), 1);
        assert_eq!(wait(&mut q, 8, Some(Duration::from_secs(20)))[0].token(), 1);
        let t = Instant::now();
        assert!(wait(&mut q, 8, Some(Duration::from_millis(30))).is_empty());
        assert!(t.elapsed() >= Duration::from_millis(30));
    });
}

extern "C" fn ignore_signal(_: libc::c_int) {}

#[test]
fn eintr_is_retried_with_the_time_left() {
    for_each_backend(every_backend, |kind| {
        // SAFETY: installs a no-op handler for SIGUSR2 without SA_RESTART, so a
        // blocked wait sees EINTR; the struct is zeroed then filled.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore_signal as *const () as usize;
            libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        }
        let mut q = EventQueue::with_backend(kind).unwrap();
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        let kicker = std::thread::spawn(move || {
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(30));
                // SAFETY: the target thread is alive (it joins us after its wait).
                unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
            }
        });
        let t = Instant::now();
        let got = wait(&mut q, 8, Some(Duration::from_millis(200)));
        kicker.join().unwrap();
        assert!(got.is_empty(), "{got:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "EINTR cut the wait short: {:?}",
            t.elapsed()
        );
    });
}

#[test]
fn unsupported_combinations_fail_clearly() {
    for_each_backend(every_backend, |kind| {
        let caps = kind.capabilities();
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, _peer) = pair();
        let event =
            q.declare_interest(fd(&ours), Interest::READ, Options::new(1).mode(Mode::Event));
        assert_eq!(event.is_ok(), caps.event, "{event:?}");
        if let Err(e) = event {
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
            assert!(e.to_string().contains(kind.name()), "{e}");
            // The refusal says why and what to use instead; nothing was registered.
            assert!(e.to_string().contains("Mode::Level"), "{e}");
            assert_eq!(q.registered(), 0);
            assert_eq!(
                kind.check(Interest::READ, Options::new(1).mode(Mode::Event))
                    .unwrap_err()
                    .kind(),
                std::io::ErrorKind::Unsupported
            );
        }
        let wake_one =
            q.declare_interest(fd(&ours), Interest::READ, Options::new(1).wake_one(true));
        assert_eq!(wake_one.is_ok(), caps.wake_one, "{wake_one:?}");
    });
}

/// A modify the backend cannot carry out changes nothing: the old registration
/// keeps delivering under its token. (Found in review: a wake-one registration on
/// epoll is modified as DEL + ADD, and when the kernel refused the ADD the queue put
/// the old registration back in its table while the kernel watched nothing — no
/// event, for ever.) Every refusal each backend has is driven here, starting from
/// a wake-one registration where the backend has wake-one, so epoll's DEL + ADD
/// path is the one tried.
#[test]
fn refused_modify_leaves_the_registration_as_it_was() {
    for_each_backend(every_backend, |kind| {
        let caps = kind.capabilities();
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        let start = Options::new(1).wake_one(caps.wake_one);
        q.declare_interest(fd(&ours), Interest::READ, start)
            .unwrap();
        let attempts = [
            (
                Interest::READ,
                Options::new(2).mode(Mode::Oneshot).wake_one(true),
            ),
            (
                Interest::READ | Interest::EXCEPT,
                Options::new(2).wake_one(true),
            ),
            (Interest::READ, Options::new(2).wake_one(true)),
            (Interest::READ, Options::new(2).mode(Mode::Event)),
        ];
        let mut refused = 0;
        for (interest, options) in attempts {
            if kind.check(interest, options).is_ok() {
                continue;
            }
            refused += 1;
            let err = q
                .declare_interest(fd(&ours), interest, options)
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}");
            assert_eq!(q.registered(), 1);
            send(&peer, 1);
            let got = wait_some(&mut q, 8);
            assert_eq!(got.len(), 1, "{options:?}: {got:?}");
            assert_eq!(got[0].token(), 1, "{options:?}: the old token");
            assert!(got[0].readiness().contains(Readiness::READ));
            assert_eq!(drain(&ours), 1);
        }
        // The kernel module refuses none of them: wake-one is its own kernel code
        // and combines with every mode and interest. It still runs the modify below.
        let refuses_nothing = matches!(kind, BackendKind::Kmod | BackendKind::KmodRing);
        assert!(
            refused > 0 || refuses_nothing,
            "every backend refuses something listed here"
        );
        // And a modify that can be done still is, on the same path: new interest and
        // token, the old ones gone.
        let both = Options::new(3).wake_one(caps.wake_one);
        q.declare_interest(fd(&ours), Interest::READ | Interest::WRITE, both)
            .unwrap();
        let got = wait_some(&mut q, 8);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].token(), 3);
        assert!(got[0].readiness().contains(Readiness::WRITE), "{got:?}");
    });
}

#[test]
fn bad_descriptors_are_refused_and_lose_nothing() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        let err = q
            .declare_interest(-1, Interest::READ, Options::new(2))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        let closed = {
            let (a, _b) = pair();
            fd(&a)
        };
        let err = q
            .declare_interest(closed + 1000, Interest::READ, Options::new(3))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
        assert_eq!(q.registered(), 1);
        send(&peer, 1);
        assert_eq!(
            wait_some(&mut q, 8)[0].token(),
            1,
            "the good registration survived"
        );
    });
}

/// Found by the `compat_devpoll` fuzz target: a number no descriptor can have
/// (`i32::MAX`) grew the interest table to that size (32 GiB) before the backend
/// could say `EBADF`, and the process died. It must be refused like any closed
/// number, and cost nothing.
#[test]
fn absurd_descriptor_numbers_are_refused_without_growing_the_table() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        q.declare_interest(fd(&ours), Interest::READ, Options::new(1))
            .unwrap();
        for absurd in [i32::MAX, i32::MAX - 1, 1 << 30] {
            let err = q
                .declare_interest(absurd, Interest::READ, Options::new(2))
                .unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{absurd}: {err}");
            let err = q
                .declare_interest(absurd, Interest::empty(), Options::new(2))
                .unwrap_err();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::EBADF),
                "revoke {absurd}: {err}"
            );
        }
        assert_eq!(q.registered(), 1);
        send(&peer, 1);
        assert_eq!(wait_some(&mut q, 8)[0].token(), 1);
    });
}

#[test]
fn descriptors_above_fd_setsize_work() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, peer) = pair();
        // SAFETY: F_DUPFD_CLOEXEC returns a new fd >= 1500 that we then own.
        let high = unsafe { libc::fcntl(fd(&ours), libc::F_DUPFD_CLOEXEC, 1500) };
        assert!(high >= 1500, "{}", std::io::Error::last_os_error());
        // SAFETY: `high` is a fresh descriptor owned by nobody else.
        let high = unsafe { OwnedFd::from_raw_fd(high) };
        q.declare_interest(high.as_raw_fd(), Interest::READ, Options::new(77))
            .unwrap();
        send(&peer, 1);
        let got = wait_some(&mut q, 8);
        assert_eq!((got[0].token(), got[0].fd()), (77, high.as_raw_fd()));
    });
}

/// Regular files are always ready (POSIX, for select and poll). A backend either
/// takes them and reports them ready at once, or refuses them with `EPERM` (epoll's
/// own answer) and keeps nothing — as its `regular_files` capability says.
#[test]
fn regular_files_get_a_clear_answer() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let declared = q.declare_interest(file.as_raw_fd(), Interest::READ, Options::new(1));
        if kind.capabilities().regular_files {
            declared.unwrap();
            let got = wait_some(&mut q, 8);
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(got[0].is_readable(), "{got:?}");
        } else {
            let e = declared.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
            assert_eq!(q.registered(), 0);
        }
    });
}

/// Of several queues waiting on one descriptor with wake-one, one is woken.
#[test]
fn wake_one_wakes_a_single_waiter() {
    for_each_backend(
        |c| c.wake_one,
        |kind| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let lfd = listener.as_raw_fd();
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let ready_tx = ready_tx.clone();
                    std::thread::spawn(move || {
                        let mut q = EventQueue::with_backend(kind).unwrap();
                        let declared =
                            q.declare_interest(lfd, Interest::READ, Options::new(1).wake_one(true));
                        ready_tx
                            .send((
                                gettid(),
                                declared.as_ref().map(drop).map_err(|e| e.to_string()),
                            ))
                            .unwrap();
                        declared.map(|_| wait(&mut q, 8, Some(Duration::from_millis(1500))).len())
                    })
                })
                .collect();
            drop(ready_tx);
            let mut tids = Vec::new();
            for _ in 0..3 {
                let (tid, declared) = ready_rx.recv_timeout(PATIENCE).expect("waiter thread died");
                assert!(
                    declared.is_ok(),
                    "wake-one registration refused: {declared:?}"
                );
                tids.push(tid);
            }
            // Every waiter must be asleep in its wait before the connection comes: one
            // still on its way would see the connection whatever wake-one does.
            for tid in tids {
                wait_until_blocked_in_wait(tid);
            }
            let _client = TcpStream::connect(addr).unwrap();
            let woken: usize = waiters
                .into_iter()
                .map(|w| w.join().unwrap().unwrap())
                .sum();
            assert_eq!(woken, 1, "one connection, one woken queue");
            drop(listener);
        },
    );
}

/// A number closed behind the queue's back while a dup keeps the old file alive,
/// then reused and declared again: the old file's events never reach the new
/// registration (found by the C API's tests, where close(2) is the only way).
#[test]
fn reused_number_with_old_file_alive_gets_no_stale_event() {
    for_each_backend(every_backend, |kind| {
        let mut q = EventQueue::with_backend(kind).unwrap();
        let (ours, old_peer) = pair();
        let number = fd(&ours);
        let keep_alive = ours.try_clone().unwrap();
        q.declare_interest(number, Interest::READ, Options::new(1))
            .unwrap();
        let (fresh, _fresh_peer) = pair();
        // dup2 closes the old file at `number` and installs the fresh socket there
        // in one step, so no parallel test can take the number in between.
        // SAFETY: both descriptors are open; `ours` gives up ownership of `number`.
        let moved = unsafe { libc::dup2(fd(&fresh), ours.into_raw_fd()) };
        assert_eq!(moved, number, "{}", std::io::Error::last_os_error());
        // SAFETY: `number` now names the fresh socket, owned by nobody else.
        let moved = unsafe { OwnedFd::from_raw_fd(moved) };
        q.declare_interest(moved.as_raw_fd(), Interest::READ, Options::new(2))
            .unwrap();
        send(&old_peer, 1);
        let got = wait(&mut q, 8, Some(Duration::from_millis(50)));
        assert!(
            got.is_empty(),
            "old file's event delivered to the new registration: {got:?}"
        );
        drop(keep_alive);
    });
}

/// `close` through the queue really releases the file, in every mode, however the
/// registration's kernel request stood: armed but never submitted, submitted and
/// idle, or triggered and not yet reaped. (io_uring's `POLL_REMOVE` refuses a
/// multishot poll whose wake-up is being processed, `-EALREADY`, and the poll then
/// lives on, holding the socket open with no descriptor: found as an HTTP/1.0
/// connection that never closed.)
#[test]
fn close_releases_the_file_whatever_the_request_state() {
    for_each_backend(every_backend, |kind| {
        for mode in supported_modes(kind) {
            // 0: closed before any wait; 1: after a wait armed it; 2: after a wait
            // armed it and data woke it.
            for stage in 0..3 {
                let mut q = EventQueue::with_backend(kind).unwrap();
                let (ours, peer) = pair();
                let ours = ours.into_raw_fd();
                if stage == 0 {
                    send(&peer, 1);
                }
                q.declare_interest(ours, Interest::READ, Options::new(1).mode(mode))
                    .unwrap();
                if stage > 0 {
                    let _ = peek(&mut q);
                }
                if stage == 2 {
                    send(&peer, 1);
                }
                q.close(ours).unwrap();
                let _ = peek(&mut q);
                let _ = peek(&mut q);
                peer.set_nonblocking(false).unwrap();
                peer.set_read_timeout(Some(PATIENCE)).unwrap();
                let mut buf = [0u8; 8];
                // EOF, or a reset when our unread byte was thrown away: either way
                // the file is gone. A timeout means something still holds it.
                // (EINTR: a dropped io_uring queue interrupts its thread, quirk k.)
                let got = loop {
                    match (&peer).read(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        other => break other,
                    }
                };
                assert!(
                    matches!(&got, Ok(0))
                        || matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
                    "{mode:?} stage {stage}: peer did not see the close: {got:?}"
                );
            }
        }
    });
}
