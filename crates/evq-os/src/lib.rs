//! # evq-os — what the OS offers evq's tools that no crate wraps in the form they need
//!
//! The server, proxy, load generator and herd share one way of doing each of
//! these, written once, on `socket2`, `signal-hook` and `libc`:
//!
//! - [`socket`]: listening and connecting sockets as the tools make them
//!   (non-blocking, `SO_REUSEPORT`, a chosen source address such as 127.0.0.2
//!   with `IP_BIND_ADDRESS_NO_PORT`), and the options an event loop sets on a
//!   descriptor it holds by number (`TCP_NODELAY`, reset-on-close, `SO_ERROR`,
//!   `TCP_INFO` and a listener's accept backlog).
//! - [`io`]: `send` (with `MSG_NOSIGNAL`), `recv`, `shutdown`, `close` on a
//!   socket held by number, inlined into the event loops.
//! - [`accept`]: `accept4` with every error sorted into what to do next, and the
//!   spare-descriptor trick for `EMFILE`/`ENFILE` ([`Acceptor`]).
//! - [`signals`]: SIGINT/SIGTERM as a stop flag and as a byte in a pipe an event
//!   loop watches ([`StopPipe`]); `SIGPIPE` ignored.
//! - [`memory`]: handing the allocator's free pages back to the system after a
//!   burst of connections has gone (`malloc_trim`), so RSS returns to its baseline.
//! - [`usage`]: `getrusage` of a process or thread, and the thread CPU clock.
//! - [`isolation`]: running a test that changes process-wide state (limits,
//!   signal handlers) in a child process of its own.
//!
//! Raising `RLIMIT_NOFILE` is the `rlimit` crate's `increase_nofile_limit`, used
//! as it is.
//!
//! Each `unsafe` block cites the system call's guarantee it relies on.

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

pub mod accept;
pub mod io;
pub mod isolation;
pub mod memory;
pub mod signals;
pub mod socket;
pub mod usage;

pub use accept::{Accept, Acceptor};
pub use signals::{ignore_sigpipe, stop_on_signals, stop_requested, StopPipe};
pub use socket::{connect, listen, ListenOptions, LocalBind};
pub use usage::{thread_cpu_ns, CpuUsage};
