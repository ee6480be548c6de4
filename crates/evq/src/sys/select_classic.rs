//! `select(2)` as classic applications (and the paper's "before" Squid) use it.
//!
//! # Quirks of select, and what this file does about them
//!
//! a) **The fd_sets are rebuilt from the interest list on every call** and the
//!    results are scanned **bit by bit** over `0..nfds`: the costs SEEDS 000 measured
//!    (34% of CPU at 750 cold connections). This file keeps them on purpose; the
//!    improved variant (`select_improved.rs`) removes what user space can.
//! b) **`FD_SETSIZE` (1024) is a glibc macro, not a kernel limit.** The kernel
//!    accepts any `nfds` below the descriptor limit if the bitmaps are that long, so
//!    the bitmaps grow with the highest registered fd ([`FdBitmap`]).
//! c) **A single closed descriptor fails the whole call with `EBADF`.** The paper
//!    says closing removes interest, so on `EBADF` every watch is checked with
//!    `fcntl(F_GETFD)` and the closed ones are dropped and reported `gone`.
//! d) **select knows state, not events, and has no hang-up bit**: end-of-file shows
//!    up as readable. Event (edge) mode and wake-one are refused by capability.
//! e) **Fairness** comes from a scan cursor that starts after the last fd delivered.
//! f) **Linux writes the time left back into the timeval**; a fresh one is built
//!    for every call.

use super::fd_bitmap::{select, FdBitmap, WatchList};
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::{Interest, Mode, Readiness};
use std::io;
use std::time::Duration;

#[derive(Default)]
pub(crate) struct SelectClassicBackend {
    watches: WatchList,
    read: FdBitmap,
    write: FdBitmap,
    except: FdBitmap,
    cursor: usize,
}

impl Backend for SelectClassicBackend {
    const CAPABILITIES: Capabilities = Capabilities::STATE_SCAN;

    fn probe() -> io::Result<()> {
        Ok(())
    }

    fn open() -> io::Result<Self> {
        Ok(Self::default())
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        self.watches.insert(w)
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        Ok(self.watches.insert(new)?)
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.forget(old);
        Ok(())
    }

    fn forget(&mut self, old: &Watch) {
        self.watches.remove(old.fd);
    }

    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let nfds = self.watches.nfds();
        self.read.grow_to(nfds);
        self.write.grow_to(nfds);
        self.except.grow_to(nfds);
        self.read.zero(nfds);
        self.write.zero(nfds);
        self.except.zero(nfds);
        for fd in 0..nfds {
            if let Some((w, true)) = self.watches.get(fd) {
                if w.interest.contains(Interest::READ) {
                    self.read.set(w.fd);
                }
                if w.interest.contains(Interest::WRITE) {
                    self.write.set(w.fd);
                }
                if w.interest.contains(Interest::EXCEPT) {
                    self.except.set(w.fd);
                }
            }
        }
        let found = match select(
            nfds,
            &mut self.read,
            &mut self.write,
            &mut self.except,
            timeout,
        ) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                self.watches.sweep_closed(|w| {
                    on_event(SysEvent {
                        key: w.key,
                        readiness: Readiness::empty(),
                        gone: true,
                    })
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let mut bits_seen = 0;
        let mut delivered = 0;
        let start = if self.cursor < nfds { self.cursor } else { 0 };
        for step in 0..nfds {
            if bits_seen == found || delivered == max {
                break;
            }
            let fd = (start + step) % nfds;
            let mut r = Readiness::empty();
            if self.read.test(fd) {
                r |= Readiness::READ;
                bits_seen += 1;
            }
            if self.write.test(fd) {
                r |= Readiness::WRITE;
                bits_seen += 1;
            }
            if self.except.test(fd) {
                r |= Readiness::EXCEPT;
                bits_seen += 1;
            }
            if r.is_empty() {
                continue;
            }
            let Some((w, _)) = self.watches.get(fd) else {
                continue;
            };
            on_event(SysEvent {
                key: w.key,
                readiness: r,
                gone: false,
            });
            delivered += 1;
            self.cursor = fd + 1;
            if w.mode == Mode::Oneshot {
                self.watches.disarm(fd);
            }
        }
        Ok(())
    }
}
