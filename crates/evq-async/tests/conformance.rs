//! evq-async's conformance suite: cancellation, many tasks on one descriptor,
//! descriptor reuse, 10,000 concurrent tasks, timers, cross-thread registration,
//! foreign executors — on this process's backend, and (`on_every_backend`) once
//! more on every other backend evq has here, each in a child process with
//! `EVQ_BACKEND` set (the reactor is one per process).
//!
//! Every check is safe beside the others on parallel test threads: none asserts a
//! process-wide count, and the reuse check holds the number it reuses.

mod util;

use evq_async::{Async, Executor, Timer};
use futures_lite::{future, AsyncReadExt, AsyncWriteExt, StreamExt};
use std::fs::File;
use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

/// A waker that counts its wake-ups.
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<Counter>, Waker) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

/// Runs `f` under `block_on`, failing (instead of hanging) after PATIENCE.
fn run<T>(f: impl Future<Output = T>) -> T {
    evq_async::block_on(async {
        evq_async::timeout(util::PATIENCE, f)
            .await
            .expect("the check hung: a lost wake-up?")
    })
}

fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into the live array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: pipe2 returned two fresh descriptors that nobody else owns.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

#[test]
fn pipes_and_socket_pairs_carry_data_both_ways() {
    run(async {
        let (r, w) = pipe();
        let (mut r, mut w) = (Async::new(r).unwrap(), Async::new(w).unwrap());
        // More than a pipe buffer (64 KiB): the writer must wait for the reader.
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let writer = async {
            w.write_all(&data).await.unwrap();
            drop(w);
        };
        let reader = async {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = future::zip(writer, reader).await;
        assert!(got == data, "pipe data differs");

        let (a, b) = Async::<UnixStream>::pair().unwrap();
        (&a).write_all(b"ping").await.unwrap();
        let mut buf = [0; 4];
        (&b).read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    });
}

#[test]
fn a_read_cancelled_mid_wait_loses_no_wake_up() {
    run(async {
        let (a, b) = Async::<UnixStream>::pair().unwrap();
        for round in 0..20u8 {
            // A read that waits, dropped by a timeout while it waits...
            let mut buf = [0; 1];
            let cancelled = evq_async::timeout(Duration::from_millis(2), (&b).read(&mut buf)).await;
            assert!(cancelled.is_err(), "nothing was written yet");
            // ...then the data comes, and a new read must see it.
            (&a).write_all(&[round]).await.unwrap();
            (&b).read_exact(&mut buf).await.unwrap();
            assert_eq!(buf[0], round);
        }
    });
}

#[test]
fn a_cancelled_waiter_leaves_no_stale_waker() {
    run(async {
        let (a, b) = Async::<UnixStream>::pair().unwrap();
        // A read that meets WouldBlock clears the readiness (a handle may start out
        // assuming it ready), so the next readable() waits.
        let mut buf = [0; 1];
        let nothing = evq_async::timeout(Duration::from_millis(1), (&b).read(&mut buf)).await;
        assert!(nothing.is_err());
        let (gone, gone_waker) = counting_waker();
        {
            let mut readable = b.readable();
            let mut cx = Context::from_waker(&gone_waker);
            assert!(std::pin::Pin::new(&mut readable).poll(&mut cx).is_pending());
        } // dropped mid-wait
        (&a).write_all(b"x").await.unwrap();
        // The reactor dispatches the event to whoever waits now...
        b.readable().await.unwrap();
        (&b).read_exact(&mut buf).await.unwrap();
        // ...and never to the dropped future's waker.
        assert_eq!(gone.0.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_dropped_handle_leaves_no_registration() {
    run(async {
        let (a, _peer) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        let handle = Async::new(a).unwrap();
        let a = handle.into_inner(); // revoked, descriptor still open
        assert_eq!(a.as_raw_fd(), fd);
        // Registering the same number again is allowed only because the first
        // registration is gone (a live one refuses a second handle).
        let again = Async::new(a).unwrap();
        let dup = Async::new(again.get_ref().try_clone().unwrap());
        assert!(dup.is_ok(), "a dup'd descriptor is another number");
        let err = Async::new(again.get_ref().as_fd()).expect_err("a second handle on one number");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // Dropping the handle revokes before it closes; the peer sees the close.
        drop(again);
        drop(dup);
        let mut peer = _peer;
        let mut buf = [0; 1];
        assert_eq!(peer.read(&mut buf).unwrap(), 0);
    });
}

#[test]
fn a_reader_a_writer_and_waiters_share_one_descriptor() {
    let ex = Executor::with_threads(2);
    ex.block_on(async {
        let (mine, theirs) = Async::<UnixStream>::pair().unwrap();
        let mine = Arc::new(mine);
        // The peer echoes everything back.
        let echo = ex.spawn(async move {
            let (mut r, mut w) = (&theirs, &theirs);
            futures_lite::io::copy(&mut r, &mut w).await.unwrap();
        });
        const N: usize = 1 << 20;
        let data: Arc<Vec<u8>> = Arc::new((0..N).map(|i| (i * 7) as u8).collect());
        // Eight tasks wait for readability on the same descriptor meanwhile.
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let m = mine.clone();
                ex.spawn(async move { m.readable().await.unwrap() })
            })
            .collect();
        let writer = {
            let (m, d) = (mine.clone(), data.clone());
            ex.spawn(async move { (&*m).write_all(&d).await.unwrap() })
        };
        let reader = {
            let m = mine.clone();
            ex.spawn(async move {
                let mut got = vec![0; N];
                (&*m).read_exact(&mut got).await.unwrap();
                got
            })
        };
        writer.await;
        let got = reader.await;
        assert!(got == *data, "echoed data differs");
        for w in waiters {
            w.await;
        }
        drop(mine); // the echo task sees end-of-file and ends
        echo.await;
    });
}

#[test]
fn a_reused_descriptor_number_gets_only_its_own_events() {
    // Hold the number to reuse: a placeholder on it, replaced by dup2 (never
    // closed and reopened, so no other test's descriptor can land on it).
    let placeholder: OwnedFd = File::open("/dev/null").unwrap().into();
    let n = placeholder.as_raw_fd();
    let on_n = |s: UnixStream| -> UnixStream {
        // SAFETY: dup2(2) atomically makes `n` (which this test holds) name the
        // socket's file; the original number is then closed by dropping `s`.
        assert_eq!(unsafe { libc::dup2(s.as_raw_fd(), n) }, n);
        drop(s);
        // SAFETY: `n` now names a socket this test owns (the placeholder is
        // forgotten below so that it is not closed twice).
        unsafe { UnixStream::from_raw_fd(n) }
    };
    std::mem::forget(placeholder);
    run(async {
        for round in 0..50u32 {
            let (a, mut peer) = UnixStream::pair().unwrap();
            let handle = Async::new(on_n(a)).unwrap();
            // Leave events in flight for this registration: data, and a hang-up on
            // odd rounds.
            peer.write_all(&round.to_le_bytes()).unwrap();
            if round % 2 == 1 {
                drop(peer);
            }
            let mut buf = [0; 4];
            (&handle).read_exact(&mut buf).await.unwrap();
            assert_eq!(u32::from_le_bytes(buf), round);
            // Revoke but keep `n` open: the next round's dup2 replaces the file.
            std::mem::forget(handle.into_inner());
        }
        // The last file on `n`: a fresh socket whose reads must block until its
        // own peer writes (no stale readiness from the 50 files before it).
        let (a, mut peer) = UnixStream::pair().unwrap();
        let handle = Async::new(on_n(a)).unwrap();
        let mut buf = [0; 1];
        let early = evq_async::timeout(Duration::from_millis(20), (&handle).read(&mut buf)).await;
        assert!(
            early.is_err(),
            "a read on the reused number returned {early:?}"
        );
        peer.write_all(b"!").unwrap();
        (&handle).read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"!");
        drop(handle); // closes `n` for good
    });
}

#[test]
fn timers_fire_never_early_and_all_fire() {
    // (The strict order is checked alone in its own process: tests/timer_order.rs.)
    let ex = Executor::with_threads(1);
    let start = Instant::now();
    ex.block_on(async {
        let tasks: Vec<_> = (0..200u64)
            .map(|i| {
                let deadline = start + Duration::from_millis((i * 37) % 50);
                ex.spawn(async move {
                    assert_eq!(Timer::at(deadline).await, deadline);
                    assert!(Instant::now() >= deadline, "fired early");
                })
            })
            .collect();
        for t in tasks {
            evq_async::timeout(util::PATIENCE, t)
                .await
                .expect("a timer never fired");
        }
    });
}

#[test]
fn cancelled_and_reset_timers_do_not_fire() {
    run(async {
        let (count, waker) = counting_waker();
        {
            let mut t = Timer::after(Duration::from_millis(5));
            assert!(std::pin::Pin::new(&mut t)
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
        } // dropped: cancelled
        let mut moved = Timer::after(Duration::from_millis(5));
        assert!(std::pin::Pin::new(&mut moved)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        let later = Instant::now() + Duration::from_millis(40);
        moved.set_at(later);
        evq_async::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            0,
            "a cancelled or moved timer woke"
        );
        assert_eq!(moved.await, later);
        assert!(Instant::now() >= later);
    });
}

#[test]
fn timeout_and_interval() {
    run(async {
        assert_eq!(
            evq_async::timeout(Duration::from_secs(5), async { 3 }).await,
            Ok(3)
        );
        let t0 = Instant::now();
        let r = evq_async::timeout(Duration::from_millis(10), future::pending::<()>()).await;
        assert!(r.is_err() && t0.elapsed() >= Duration::from_millis(10));
        let e: io::Error = r.unwrap_err().into();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);

        let period = Duration::from_millis(5);
        let start = Instant::now();
        let mut ticks = evq_async::interval(period);
        let first = ticks.next().await.unwrap();
        assert!(first >= start + period && Instant::now() >= first);
        for k in 1..5u32 {
            // The schedule is kept: tick k is due exactly k periods after the first.
            let at = ticks.next().await.unwrap();
            assert_eq!(at, first + period * k);
            assert!(Instant::now() >= at);
        }
        let mut once = Timer::after(Duration::from_millis(1));
        assert!(once.next().await.is_some());
        assert!(
            once.next().await.is_none(),
            "a one-shot timer's stream ends"
        );
    });
}

#[test]
fn registration_from_another_thread_while_one_waits() {
    // One thread sits in the queue (a long sleep); another registers descriptors
    // and uses them meanwhile — the pending-list path.
    let sleeper =
        std::thread::spawn(|| evq_async::block_on(evq_async::sleep(Duration::from_millis(300))));
    std::thread::sleep(Duration::from_millis(20));
    run(async {
        for _ in 0..20 {
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
            let addr = listener.get_ref().local_addr().unwrap();
            let (client, accepted) =
                future::zip(Async::<TcpStream>::connect(addr), listener.accept()).await;
            let (mut client, mut server) = (client.unwrap(), accepted.unwrap().0);
            client.write_all(b"hi").await.unwrap();
            let mut buf = [0; 2];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"hi");
        }
    });
    sleeper.join().unwrap();
}

#[test]
fn ping_pong_between_threads_loses_no_wake_up() {
    // Two threads, each in its own block_on, bounce one byte 2,000 times: every
    // read waits, and the event that ends the wait is dispatched by whichever
    // thread holds the queue — the race between WouldBlock and storing the waker,
    // taken 4,000 times.
    let (a, b) = Async::<UnixStream>::pair().unwrap();
    let ponger = std::thread::spawn(move || {
        run(async {
            let mut buf = [0; 1];
            for i in 0..2000u32 {
                (&b).read_exact(&mut buf).await.unwrap();
                assert_eq!(buf[0], i as u8);
                (&b).write_all(&buf).await.unwrap();
            }
        })
    });
    run(async {
        let mut buf = [0; 1];
        for i in 0..2000u32 {
            (&a).write_all(&[i as u8]).await.unwrap();
            (&a).read_exact(&mut buf).await.unwrap();
            assert_eq!(buf[0], i as u8);
        }
    });
    ponger.join().unwrap();
}

async fn echo_round_trips(connections: usize) {
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let addr = listener.get_ref().local_addr().unwrap();
    let server = async {
        let mut conns = Vec::new();
        for _ in 0..connections {
            conns.push(listener.accept().await.unwrap().0);
        }
        for mut c in conns {
            let mut buf = [0; 8];
            c.read_exact(&mut buf).await.unwrap();
            c.write_all(&buf).await.unwrap();
        }
    };
    let clients = async {
        let mut total = 0u64;
        let mut conns = Vec::new();
        for _ in 0..connections {
            conns.push(Async::<TcpStream>::connect(addr).await.unwrap());
        }
        for (i, c) in conns.iter_mut().enumerate() {
            c.write_all(&(i as u64).to_le_bytes()).await.unwrap();
        }
        for c in &mut conns {
            let mut buf = [0; 8];
            c.read_exact(&mut buf).await.unwrap();
            total += u64::from_le_bytes(buf);
        }
        total
    };
    let ((), total) = future::zip(server, clients).await;
    assert_eq!(total, (0..connections as u64).sum::<u64>());
}

#[test]
fn under_futures_executor_and_async_executor() {
    // No loop of ours runs here: the fallback thread drives the reactor.
    futures::executor::block_on(evq_async::timeout(util::PATIENCE, echo_round_trips(50)))
        .expect("futures::executor::block_on hung");
    let pool = futures::executor::ThreadPool::builder()
        .pool_size(2)
        .create()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    pool.spawn_ok(async move {
        tx.send(evq_async::timeout(util::PATIENCE, echo_round_trips(50)).await)
            .unwrap();
    });
    rx.recv().unwrap().expect("ThreadPool hung");
    let ex = Arc::new(async_executor::Executor::new());
    let (stop, stopped) = futures::channel::oneshot::channel::<()>();
    let stopped = futures::FutureExt::shared(stopped);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (ex, stopped) = (ex.clone(), stopped.clone());
            std::thread::spawn(move || futures_lite::future::block_on(ex.run(stopped)))
        })
        .collect();
    let task = ex.spawn(evq_async::timeout(util::PATIENCE, echo_round_trips(50)));
    futures_lite::future::block_on(task).expect("async-executor hung");
    drop(stop);
    for t in threads {
        let _ = t.join().unwrap();
    }
}

#[test]
fn ten_thousand_concurrent_tasks() {
    let limit = util::raise_nofile();
    // 5,000 socket pairs: 10,000 descriptors, 10,000 tasks all waiting at once.
    let pairs = 5_000usize;
    let needed = 2 * pairs as u64 + 200;
    if limit < needed {
        evq_testkit::skip(
            "RLIMIT_NOFILE",
            format!("the hard limit allows {limit} descriptors, this check needs {needed}"),
        );
        return;
    }
    let ex = Executor::with_threads(1);
    let started = Arc::new(AtomicUsize::new(0));
    let sum = ex.block_on(async {
        let mut tasks = Vec::with_capacity(2 * pairs);
        for i in 0..pairs {
            let (a, b) = Async::<UnixStream>::pair().unwrap();
            let s1 = started.clone();
            // The answering side starts first and waits for its question.
            tasks.push(ex.spawn(async move {
                s1.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0; 4];
                (&b).read_exact(&mut buf).await.unwrap();
                let v = u32::from_le_bytes(buf) + 1;
                (&b).write_all(&v.to_le_bytes()).await.unwrap();
                0u64
            }));
            let s2 = started.clone();
            tasks.push(ex.spawn(async move {
                s2.fetch_add(1, Ordering::SeqCst);
                // Every asking side waits too, until all 10,000 tasks are in.
                while s2.load(Ordering::SeqCst) < 2 * pairs {
                    evq_async::sleep(Duration::from_millis(10)).await;
                }
                (&a).write_all(&(i as u32).to_le_bytes()).await.unwrap();
                let mut buf = [0; 4];
                (&a).read_exact(&mut buf).await.unwrap();
                u32::from_le_bytes(buf) as u64
            }));
        }
        let mut sum = 0u64;
        for t in tasks {
            sum += evq_async::timeout(Duration::from_secs(120), t)
                .await
                .expect("a task of 10,000 hung");
        }
        sum
    });
    assert_eq!(sum, (1..=pairs as u64).sum::<u64>());
}

#[test]
fn a_regular_file_is_refused_where_the_backend_cannot_watch_it() {
    let stats = evq_async::reactor_stats().expect("a reactor");
    let file = File::open("/proc/self/exe").unwrap();
    if stats.backend.capabilities().regular_files {
        // select, poll and uring accept it: always ready, as POSIX says.
        run(async {
            let handle = Async::new(file).unwrap();
            handle.readable().await.unwrap();
            let mut buf = [0; 4];
            let n = handle.read_with(|f| (&*f).read(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"\x7fELF");
        });
        return;
    }
    run(async {
        // Refused at once when the queue is free, else by the first operation.
        match Async::new(file) {
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
            Ok(handle) => {
                // The first operation reports the deferred refusal (after at most
                // a few optimistic attempts, which read the file itself).
                let mut reported = None;
                for _ in 0..200 {
                    if let Err(e) = handle.readable().await {
                        reported = Some(e);
                        break;
                    }
                    let _ = handle.read_with(|f| (&*f).read(&mut [0; 1])).await;
                    evq_async::sleep(Duration::from_millis(1)).await;
                }
                let e = reported.expect("the refusal was never reported");
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
            }
        }
    });
}

/// The suite once more on every other backend, each in a child process.
#[test]
fn on_every_backend() {
    util::rerun_on_other_backends(&["--skip", "on_every_backend", "--test-threads", "2"]);
}
