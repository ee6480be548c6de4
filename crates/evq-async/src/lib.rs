//! # evq-async — async Rust on evq's explicit event queue
//!
//! An async runtime layer over [`evq`], the Banga–Mogul–Druschel API
//! (`declare_interest` / `get_next_event`) on every kernel mechanism: it works
//! under any executor, as async-io does over `polling`.
//!
//! - [`Async<T>`] for any descriptor: [`readable`](Async::readable) /
//!   [`writable`](Async::writable) futures, `futures-io`'s `AsyncRead` /
//!   `AsyncWrite`, [`Async<TcpListener>::accept`](Async::accept),
//!   [`Async<TcpStream>::connect`](Async::connect), Unix-domain sockets, pipes;
//! - timers on evq's timer heap: [`Timer`], [`sleep`], [`timeout`], [`interval`];
//! - [`block_on`], and a small multi-threaded [`Executor`];
//! - hyper 1.x I/O, [`HyperExecutor`] and [`HyperTimer`] (feature `hyper`);
//! - [`reactor_stats`]: what the reactor is doing, on which backend.
//!
//! The backend is evq's default, or the one `EVQ_BACKEND` names (`epoll`,
//! `uring`, `poll`, `rtsig`, `rtsig-bulk`, `select`, `select-improved`).
//!
//! ```
//! use evq_async::Async;
//! use futures_lite::{AsyncReadExt, AsyncWriteExt};
//! use std::net::{TcpListener, TcpStream};
//!
//! evq_async::block_on(async {
//!     let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
//!     let addr = listener.get_ref().local_addr()?;
//!     let mut client = Async::<TcpStream>::connect(addr).await?;
//!     let (mut server, _) = listener.accept().await?;
//!     client.write_all(b"hello").await?;
//!     let mut buf = [0; 5];
//!     server.read_exact(&mut buf).await?;
//!     assert_eq!(&buf, b"hello");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Design
//!
//! ## The paper's event semantics, registered once
//!
//! Every descriptor is registered with `Interest::READ | Interest::WRITE` in
//! [`Mode::Event`](evq::Mode::Event) when its handle is made, and revoked when it is
//! dropped — nothing in between. A read that meets `WouldBlock` does not re-arm
//! anything: it clears the handle's *ready* flag and waits for the next event,
//! which the kernel queues for every arrival after that moment. The flag carries a
//! tick so that an event landing between the failed read and the waker being
//! stored is not lost: the argument is written out in `src/source.rs`, whose unit
//! tests take each interleaving, and a 4,000-wait ping-pong between two threads in
//! `tests/conformance.rs` races them on every backend. A backend without event
//! mode (`select`, `select-improved` and `poll` see only state, so evq refuses the
//! paper's event mode there) is handled explicitly, never silently: registrations
//! there are [`Mode::Oneshot`](evq::Mode::Oneshot), re-armed when a task waits on
//! a direction the kernel is not watching; [`ReactorStats::mode`] says which is in
//! use.
//!
//! ## One queue, many threads
//!
//! `EventQueue` needs `&mut self` for `declare_interest` *and* for
//! `get_next_event`, and it is not `Sync`: its interest table (with the
//! generations that make stale events impossible), and on some backends user-space
//! state (poll arrays, RT-signal candidates, the uring ring), belong to whoever
//! holds it. async-io's reactor can call `Poller::add` from any thread while another
//! thread sleeps in `epoll_wait` because `polling` leans on the kernel's own locking;
//! evq deliberately keeps the interest in user space, so that path is closed.
//!
//! Instead the queue sits behind a mutex whose holder is the one thread allowed to
//! wait on it. A thread that needs a registration change takes the mutex if it is
//! free (the common case for a single-threaded program, and for the worker of a
//! one-thread [`Executor`], which is the queue's holder anyway) and applies it at
//! once. If the mutex is held — another thread is blocked in `get_next_event` — it
//! appends the change to a pending list and wakes the holder through the queue's
//! [`Notifier`](evq::Notifier); the holder applies the list before every wait, and a
//! holder that lets go re-checks the list, so no change is stranded. A registration
//! made this way reports the descriptor's state (from `declare_interest`) when it
//! is applied; until then the handle assumes both directions ready, which costs at
//! most one `WouldBlock`. A revoke made this way is waited for, because the
//! descriptor may only be closed — and its number reused — after the queue has
//! forgotten it. The alternative, "only the driver registers, everyone else
//! waits", would put a cross-thread round trip on every `accept`.
//!
//! ## Who waits on the queue
//!
//! An idle thread of ours ([`block_on`], an executor worker) waits on the queue
//! itself if nobody else does, so the thread that dispatches an event is the one
//! that runs the woken task next; other idle threads park in line and one is handed
//! the queue when the holder leaves to run tasks (a thread handed it goes back to
//! it rather than to its loop, so the line is never left asleep with nobody in the
//! kernel). A task woken from another
//! thread wakes a parked worker with a futex and a waiting one through the
//! notifier. When no loop of ours runs (a program on `futures::executor` or
//! `async-executor`), one background thread, `evq-async-fallback`, waits on the
//! queue instead, and yields to a loop of ours as soon as one starts. While loops
//! of ours run, it still checks now and then (1 ms, backing off to 100 ms) that
//! one of them has waited on the queue since, and looks at the queue itself if
//! none has — a loop whose thread is held by a synchronous wait would otherwise
//! leave foreign tasks without their events.

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

mod block_on;
mod executor;
#[cfg(feature = "hyper")]
mod hyper_rt;
mod io;
mod net;
mod reactor;
mod source;
mod timer;

pub use block_on::block_on;
pub use executor::{Executor, Task};
#[cfg(feature = "hyper")]
pub use hyper_rt::{HyperExecutor, HyperTimer};
pub use io::{Async, Readable, Writable};
pub use reactor::ReactorStats;
pub use timer::{interval, sleep, timeout, TimedOut, Timeout, Timer};

/// A snapshot of the reactor: backend, registration mode, live registrations,
/// waiters, timers and counters.
///
/// ```
/// let stats = evq_async::reactor_stats()?;
/// println!("evq-async on {} ({:?} mode)", stats.backend, stats.mode);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The reactor's queue could not be created (an unknown or unavailable
/// `EVQ_BACKEND`, `EMFILE`).
pub fn reactor_stats() -> std::io::Result<ReactorStats> {
    Ok(reactor::Reactor::get()?.stats())
}
