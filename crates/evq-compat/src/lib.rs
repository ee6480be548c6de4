//! # evq-compat — other systems' event APIs, on Linux, over evq
//!
//! - [`kqueue`]: FreeBSD's `kqueue`/`kevent` with DragonFly's `EV_WAKEONE`
//!   (SEEDS 003), so the DragonFly herd benchmark's `serv02l-kone` runs here.
//! - [`devpoll`]: Solaris `/dev/poll` (`write` of pollfd records, `POLLREMOVE`,
//!   `DP_POLL`, `DP_ISPOLLED`; SEEDS 004) and [`devpoll::devpollperf`], the
//!   benchmark Sun measured it with.
//!
//! Each is a thin personality: the semantics of the original's man page, the
//! mechanism of evq underneath. Each file opens with the quirks of the mapping.

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

pub mod devpoll;
pub mod kqueue;

pub use devpoll::{devpollperf, DevPoll, POLLREMOVE};
pub use kqueue::{Kevent, Kqueue};
