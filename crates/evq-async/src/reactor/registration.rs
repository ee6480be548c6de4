//! Descriptors in and out of the queue: registered once (event mode) or re-armed
//! per wait (oneshot mode), revoked before close.

use super::{lock, with_wakers, Completion, Driver, Op, Reactor};
use crate::source::Source;
use evq::{Interest, Mode, Options};
use std::io;
use std::sync::Arc;
use std::task::Waker;

impl Reactor {
    /// Registers `fd` for its whole life. With the queue free this is done here and
    /// a refusal is returned; with the queue held by a waiting thread it is handed
    /// to that thread, and a refusal (rare: the kernel refusing a descriptor the
    /// type system let through) is reported by the handle's first operation.
    pub(crate) fn register(&self, fd: std::os::fd::RawFd, drains: bool) -> io::Result<Arc<Source>> {
        let source = {
            let mut sources = lock(&self.sources);
            if sources.owner(fd) != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "descriptor {fd} already has an Async handle; a second one would take \
                         over its registration (share the first: `&Async<T>`, `Arc<Async<T>>`)"
                    ),
                ));
            }
            let entry = sources.slab.vacant_entry();
            let source = Arc::new(Source::new(fd, entry.key(), self.oneshot, drains));
            entry.insert(source.clone());
            if sources.owners.len() <= fd as usize {
                sources.owners.resize(fd as usize + 1, 0);
            }
            sources.owners[fd as usize] = source.key + 1;
            source
        };
        if let Some(mut driver) = self.try_lock() {
            let result = with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                let r = self.register_now(&mut driver, &source, wakers);
                self.release(driver, wakers);
                r
            });
            if let Err(e) = result {
                lock(&self.sources).remove(&source);
                return Err(e);
            }
        } else {
            // Until the holder registers it, let the first operation try its luck:
            // the tick protocol keeps a wrong guess harmless (one `WouldBlock`).
            source.set_optimistic();
            self.push_op(Op::Register(source.clone()));
        }
        Ok(source)
    }

    pub(super) fn register_now(
        &self,
        driver: &mut Driver,
        source: &Arc<Source>,
        wakers: &mut Vec<Waker>,
    ) -> io::Result<()> {
        let mode = if self.oneshot {
            Mode::Oneshot
        } else {
            Mode::Event
        };
        let state = driver.queue.declare_interest(
            source.fd,
            Interest::READ | Interest::WRITE,
            Options::new(source.key as u64).mode(mode),
        )?;
        if self.oneshot {
            source.set_armed_both();
        }
        // The state read after the registration is in place: anything later is an
        // event, anything earlier is here.
        source.set_readiness(state, false, wakers);
        Ok(())
    }

    /// Oneshot mode: a task waits on a direction the kernel is not watching.
    pub(crate) fn rearm(&self, source: &Arc<Source>) {
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.rearm_now(&mut driver, source, wakers);
                self.release(driver, wakers);
            });
        } else {
            self.push_op(Op::Rearm(source.clone()));
        }
    }

    pub(super) fn rearm_now(
        &self,
        driver: &mut Driver,
        source: &Arc<Source>,
        wakers: &mut Vec<Waker>,
    ) {
        if !self.is_registered(source) {
            return;
        }
        let (read, write) = source.take_rearm();
        let mut interest = Interest::empty();
        if read {
            interest |= Interest::READ;
        }
        if write {
            interest |= Interest::WRITE;
        }
        if interest.is_empty() {
            return;
        }
        let opts = Options::new(source.key as u64).mode(Mode::Oneshot);
        match driver.queue.declare_interest(source.fd, interest, opts) {
            Ok(state) => source.set_readiness(state, false, wakers),
            Err(e) => source.set_error(&e, wakers),
        }
    }

    /// Is `source` registered in the queue now (not failed, not revoked)? Ops are
    /// applied in order, so a `Register` op has been applied before any later op.
    pub(super) fn is_registered(&self, source: &Arc<Source>) -> bool {
        !source.has_failed()
            && lock(&self.sources)
                .slab
                .get(source.key)
                .is_some_and(|s| Arc::ptr_eq(s, source))
    }

    /// Revokes `source`'s registration; returns when it is revoked, so the caller
    /// may close the descriptor (the number stays held until then: a revoke never
    /// lands on a reused number).
    pub(crate) fn deregister(&self, source: &Arc<Source>) {
        if let Some(mut driver) = self.try_lock() {
            with_wakers(|wakers| {
                self.apply_ops(&mut driver, wakers);
                self.deregister_now(&mut driver, source);
                self.release(driver, wakers);
            });
        } else {
            let done = Completion::new();
            self.push_op(Op::Deregister(source.clone(), done.clone()));
            done.wait();
        }
    }

    pub(super) fn deregister_now(&self, driver: &mut Driver, source: &Arc<Source>) {
        if self.is_registered(source) {
            // Errors (the application closed the descriptor itself) change nothing:
            // the queue forgets the registration either way.
            let _ = driver
                .queue
                .declare_interest(source.fd, Interest::empty(), Options::new(0));
        }
        lock(&self.sources).remove(source);
    }
}
