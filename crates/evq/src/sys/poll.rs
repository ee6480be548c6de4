//! The `poll(2)` backend: the state-based mechanism the paper replaces, kept so the
//! lab can show its O(n) cost beside epoll.
//!
//! # Quirks of poll, and what this file does about them
//!
//! a) **Every call copies the whole array in and out of the kernel, and the kernel
//!    re-tests every entry**: the cost grows with registered descriptors, idle or
//!    not. That is the point of keeping this backend.
//! b) **The array is static** (SEEDS 004's advice): an entry keeps its index for its
//!    whole registration; removal sets its fd to -1 (poll skips negative fds) and the
//!    array is compacted only when more than half of it is holes.
//! c) **`POLLHUP`, `POLLERR` and `POLLNVAL` are reported even for `events = 0`**, so
//!    a disarmed oneshot entry is parked as fd -1, not as `events = 0`.
//! d) **A closed descriptor shows up as `POLLNVAL` forever.** The paper says closing
//!    removes interest implicitly, so such an entry is dropped and reported `gone`.
//!    A number closed *and reused* before the next poll cannot be told apart from the
//!    original: close through `EventQueue::close` (or revoke first).
//! e) **No arrival order exists**: poll only knows state. Fairness comes from a scan
//!    cursor that starts each scan after the last entry delivered, so a batch smaller
//!    than the ready set rotates through it.
//! f) **`poll` returns how many entries have `revents`**, so the scan stops as soon as
//!    that many were seen.

use super::syscall::{syscall, timeout_ms};
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::{Mode, Readiness};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

const NO_INDEX: u32 = u32::MAX;

pub(crate) struct PollBackend {
    fds: Vec<libc::pollfd>,
    /// Per index: the watch (kept while a oneshot entry is parked at fd -1).
    watches: Vec<Option<Watch>>,
    /// fd number → index in `fds`.
    index_of: Vec<u32>,
    holes: usize,
    cursor: usize,
}

impl PollBackend {
    fn index(&self, fd: RawFd) -> Option<usize> {
        match self.index_of.get(fd as usize) {
            Some(&i) if i != NO_INDEX => Some(i as usize),
            _ => None,
        }
    }

    fn compact_if_sparse(&mut self) {
        if self.fds.len() < 64 || self.holes * 2 <= self.fds.len() {
            return;
        }
        let mut kept_fds = Vec::with_capacity(self.fds.len() - self.holes);
        let mut kept_watches = Vec::with_capacity(self.fds.len() - self.holes);
        for (pfd, w) in self.fds.iter().zip(&self.watches) {
            if let Some(w) = w {
                self.index_of[w.fd as usize] = kept_fds.len() as u32;
                kept_fds.push(*pfd);
                kept_watches.push(Some(*w));
            }
        }
        self.fds = kept_fds;
        self.watches = kept_watches;
        self.holes = 0;
        self.cursor = 0;
    }

    fn set(&mut self, i: usize, w: &Watch) {
        self.fds[i] = libc::pollfd {
            fd: w.fd,
            events: w.interest.to_poll(),
            revents: 0,
        };
        self.watches[i] = Some(*w);
    }

    fn drop_index(&mut self, i: usize) {
        if let Some(w) = self.watches[i].take() {
            self.index_of[w.fd as usize] = NO_INDEX;
        }
        self.fds[i].fd = -1;
        self.fds[i].revents = 0;
        self.holes += 1;
    }
}

impl Backend for PollBackend {
    const CAPABILITIES: Capabilities = Capabilities::STATE_SCAN;

    fn probe() -> io::Result<()> {
        Ok(())
    }

    fn open() -> io::Result<Self> {
        Ok(PollBackend {
            fds: Vec::new(),
            watches: Vec::new(),
            index_of: Vec::new(),
            holes: 0,
            cursor: 0,
        })
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        if let Some(i) = self.index(w.fd) {
            self.set(i, w);
            return Ok(());
        }
        if !super::syscall::is_open(w.fd) {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let fd = w.fd as usize;
        if fd >= self.index_of.len() {
            self.index_of.resize(fd + 1, NO_INDEX);
        }
        self.index_of[fd] = self.fds.len() as u32;
        self.fds.push(libc::pollfd {
            fd: w.fd,
            events: w.interest.to_poll(),
            revents: 0,
        });
        self.watches.push(Some(*w));
        Ok(())
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        Ok(self.add(new)?)
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.forget(old);
        Ok(())
    }

    fn forget(&mut self, old: &Watch) {
        if let Some(i) = self.index(old.fd) {
            self.drop_index(i);
            self.compact_if_sparse();
        }
    }

    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let len = self.fds.len();
        let ready = syscall!(poll(
            self.fds.as_mut_ptr(),
            len as libc::nfds_t,
            timeout_ms(timeout)
        ))?;
        let mut remaining = ready as usize;
        let mut delivered = 0;
        let start = if self.cursor < len { self.cursor } else { 0 };
        let mut i = start;
        let mut any_gone = false;
        for _ in 0..len {
            if remaining == 0 || delivered == max {
                break;
            }
            let revents = self.fds[i].revents;
            if revents != 0 {
                remaining -= 1;
                self.fds[i].revents = 0;
                let w = self.watches[i].expect("polled entry has a watch");
                if revents & libc::POLLNVAL != 0 {
                    on_event(SysEvent {
                        key: w.key,
                        readiness: Readiness::empty(),
                        gone: true,
                    });
                    self.drop_index(i);
                    any_gone = true;
                } else {
                    on_event(SysEvent {
                        key: w.key,
                        readiness: Readiness::from_poll(revents),
                        gone: false,
                    });
                    delivered += 1;
                    self.cursor = i + 1;
                    if w.mode == Mode::Oneshot {
                        self.fds[i].fd = -1;
                    }
                }
            }
            i += 1;
            if i == len {
                i = 0;
            }
        }
        // Entries we did not get to keep stale revents; clear them so the next
        // scan's early stop (quirk f) counts right.
        if remaining > 0 {
            for pfd in &mut self.fds {
                pfd.revents = 0;
            }
        }
        if any_gone {
            self.compact_if_sparse();
        }
        Ok(())
    }
}
