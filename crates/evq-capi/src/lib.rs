//! # libevq — evq for C
//!
//! The C face of [`evq`], declared in `include/evq.h`:
//!
//! - the paper's own calls (Banga, Mogul, Druschel 1999; SEEDS 000),
//!   [`declare_interest`] and [`get_next_event`], on a queue per thread, with the
//!   paper's event semantics where the backend allows ([`paper`]);
//! - a handle API — [`evq_open`], [`evq_declare`], [`evq_wait`], [`evq_notify`], … —
//!   for several queues, a chosen backend, tokens and modes ([`handle`]).
//!
//! Every function catches panics, sets `errno` on failure, and the handle calls
//! return stable negative codes ([`abi`]). The built library is `libevqc.so` /
//! `libevqc.a` (the core crate already owns the name `evq`); `make install`
//! installs them as `libevq.so.0` (soname) and `libevq.a` with `evq.h` and `evq.pc`.

#![deny(missing_docs)]
#![warn(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod backend;
mod error;
pub mod handle;
mod identity;
pub mod paper;

pub use abi::*;
pub use handle::{
    evq_backend_name, evq_close, evq_close_fd, evq_declare, evq_forget_fd, evq_last_error,
    evq_notifier, evq_notifier_free, evq_notifier_notify, evq_notify, evq_open, evq_strerror,
    evq_wait, EvqHandle, EvqNotifier,
};
pub use paper::{declare_interest, get_next_event};
