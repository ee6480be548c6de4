//! # evq — explicit, scalable event delivery for UNIX
//!
//! The API of Banga, Mogul and Druschel ("A scalable and explicit event delivery
//! mechanism for UNIX", USENIX 1999): **declare interest once**, then **dequeue
//! batches of events** whose cost does not grow with idle descriptors — over any of
//! the kernel mechanisms people have used for the job, chosen at run time.
//!
//! - [`EventQueue::declare_interest`] registers, modifies or revokes interest and
//!   returns the descriptor's current state, race-free with later events.
//! - [`EventQueue::get_next_event`] fills a caller-owned [`Events`] batch in FIFO
//!   order, coalescing (one event per descriptor), without starving anyone when the
//!   batch is smaller than the ready set; it returns as soon as anything is ready.
//! - [`Mode::Level`], the paper's [`Mode::Event`], and [`Mode::Oneshot`]; timers
//!   ([`EventQueue::add_timer`]); cross-thread wake-up ([`Notifier`]); wake-one
//!   ([`Options::wake_one`]); a load-shedding policy ([`LoadLimiter`]).
//! - Backends ([`BackendKind`]): `select`, `select-improved`, `poll`, `epoll`,
//!   `rtsig`, `rtsig-bulk` (POSIX real-time signals), `uring` (io_uring);
//!   `EVQ_BACKEND=name` forces one.
//!
//! ```
//! use evq::{EventQueue, Events, Interest, Options};
//! use std::io::{Read, Write};
//! use std::os::fd::AsRawFd;
//! use std::os::unix::net::UnixStream;
//! use std::time::Duration;
//!
//! let mut queue = EventQueue::new()?;
//! let (mut a, mut b) = UnixStream::pair()?;
//! b.set_nonblocking(true)?;
//! let state = queue.declare_interest(b.as_raw_fd(), Interest::READ, Options::new(7))?;
//! assert!(!state.contains(evq::Readiness::READ));
//!
//! a.write_all(b"hello")?;
//! let mut events = Events::with_capacity(64);
//! queue.get_next_event(&mut events, Some(Duration::from_secs(5)))?;
//! let event = events.iter().next().expect("one event");
//! assert_eq!(event.token(), 7);
//! assert!(event.is_readable());
//! let mut buf = [0; 16];
//! assert_eq!(b.read(&mut buf)?, 5);
//! # Ok::<(), std::io::Error>(())
//! ```

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

pub mod completion;
mod event;
mod interest_table;
mod load_limiter;
mod notifier;
mod options;
mod queue;
mod readiness;
mod sys;
mod table_shrink;
mod timer_heap;
mod wake_one_rotation;

pub use event::{Event, Events, NOTIFY_TOKEN};
pub use load_limiter::LoadLimiter;
pub use notifier::Notifier;
pub use options::{Mode, Options};
pub use queue::{EventQueue, QueueStats};
pub use readiness::{Interest, Readiness};
pub use sys::{BackendKind, Capabilities};
pub use timer_heap::TimerId;
pub use wake_one_rotation::WakeOneRotation;
