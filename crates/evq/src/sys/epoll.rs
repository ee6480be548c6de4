//! The `epoll(7)` backend: interest kept in the kernel, cost proportional to the
//! events returned (SEEDS 002, Libenzi's sys_epoll, which /dev/epoll became).
//!
//! # Quirks of epoll, and what this file does about them
//!
//! a) **epoll watches files, not descriptor numbers.** An entry is keyed by
//!    (file, fd) and is removed only when the *last* reference to the file is closed.
//!    After `dup`, `fork` or `SCM_RIGHTS`, closing "the" fd leaves the entry alive,
//!    and it keeps reporting under the old `data`. Every entry's `data.u64` therefore
//!    carries the registration's generation (libev's trick); the queue drops events
//!    whose generation is stale and asks for a [`rebuild`](Backend::rebuild) — a new
//!    epoll instance filled from the interest table — because there is no other way
//!    to delete an entry whose fd number now names another file.
//! b) **A closed-and-reused number looks registered** to the queue but is unknown to
//!    the kernel: `EPOLL_CTL_MOD` then fails with `ENOENT`, and the queue re-adds.
//!    The mirror case (`ADD` → `EEXIST`) is answered with `MOD`.
//! c) **`EPOLLEXCLUSIVE` is ADD-only** (Linux 4.5): `MOD` of an exclusive entry, or to
//!    an exclusive one, is `EINVAL`, so such a modify is `DEL` + `ADD`. It accepts
//!    only `EPOLLIN|EPOLLOUT|EPOLLERR|EPOLLHUP|EPOLLET` beside it, so `EPOLLRDHUP` is
//!    left out of exclusive watches (a hang-up still shows as `EPOLLIN`/`EPOLLHUP`).
//!    `EPOLLONESHOT` and `EPOLLPRI` with it are `EINVAL`, so wake-one together with
//!    oneshot or `EXCEPT` interest is refused before anything changes
//!    ([`Backend::refusal`]). A modify that is `DEL` + `ADD` is made all-or-nothing:
//!    if the kernel refuses the new entry, the old one is added back (and if even
//!    that fails, the queue is told nothing is watched, [`ModifyError::Lost`]).
//! d) **Level entries are re-queued at the tail** of the ready list after delivery,
//!    so a batch smaller than the ready set rotates through it: no starvation, FIFO
//!    in arrival order among newly ready entries.
//! e) **`EPOLLET` re-polls at dequeue** and drops an entry whose state no longer
//!    matches — exactly the paper's "suppress reports that are no longer meaningful"
//!    — and wakes on every arrival, not only on the not-ready→ready edge.
//! f) **Regular files and directories are refused** with `EPERM` (they are always
//!    ready); the error reaches the caller unchanged.
//! g) **The timeout is in milliseconds**; it is rounded up so that a short timeout
//!    never returns early and spins.
//! h) **`epoll_ctl(ADD)` polls the file at once**, so an fd already ready at
//!    registration is queued immediately, also in edge mode: the first event after
//!    `declare_interest` may repeat the state it returned. That is harmless and
//!    cannot be avoided; reporting the state is what closes the accept race.

use super::syscall::{syscall, timeout_ms};
use super::{capability_refusal, Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::{Interest, Mode, Readiness};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

pub(crate) struct EpollBackend {
    epfd: OwnedFd,
    buffer: Vec<libc::epoll_event>,
}

fn epoll_create() -> io::Result<OwnedFd> {
    let fd = syscall!(epoll_create1(libc::EPOLL_CLOEXEC))?;
    // SAFETY: `epoll_create1(2)` ensures the fd is valid and new; we own it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn event_bits(w: &Watch) -> u32 {
    let mut bits = 0u32;
    if w.interest.contains(Interest::READ) {
        bits |= libc::EPOLLIN as u32;
        // Quirk c: EPOLLEXCLUSIVE accepts only EPOLLIN/OUT/ERR/HUP/WAKEUP/ET.
        if !w.wake_one {
            bits |= libc::EPOLLRDHUP as u32;
        }
    }
    if w.interest.contains(Interest::WRITE) {
        bits |= libc::EPOLLOUT as u32;
    }
    if w.interest.contains(Interest::EXCEPT) {
        bits |= libc::EPOLLPRI as u32;
    }
    match w.mode {
        Mode::Level => {}
        Mode::Event => bits |= libc::EPOLLET as u32,
        Mode::Oneshot => bits |= libc::EPOLLONESHOT as u32,
    }
    if w.wake_one {
        bits |= libc::EPOLLEXCLUSIVE as u32;
    }
    bits
}

#[inline]
fn readiness(bits: u32) -> Readiness {
    let b = bits as i32;
    let mut r = Readiness::empty();
    if b & libc::EPOLLIN != 0 {
        r |= Readiness::READ;
    }
    if b & libc::EPOLLOUT != 0 {
        r |= Readiness::WRITE;
    }
    if b & libc::EPOLLPRI != 0 {
        r |= Readiness::EXCEPT;
    }
    if b & (libc::EPOLLHUP | libc::EPOLLRDHUP) != 0 {
        r |= Readiness::HUP;
    }
    if b & libc::EPOLLERR != 0 {
        r |= Readiness::ERROR;
    }
    r
}

impl EpollBackend {
    fn ctl(&self, op: libc::c_int, w: &Watch) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: event_bits(w),
            u64: w.key,
        };
        syscall!(epoll_ctl(self.epfd.as_raw_fd(), op, w.fd, &mut ev)).map(drop)
    }

    fn del(&self, fd: std::os::fd::RawFd) -> io::Result<()> {
        // Since Linux 2.6.9 the event pointer may be null for DEL.
        syscall!(epoll_ctl(
            self.epfd.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut()
        ))
        .map(drop)
    }
}

fn errno_is(e: &io::Error, code: i32) -> bool {
    e.raw_os_error() == Some(code)
}

impl Backend for EpollBackend {
    const CAPABILITIES: Capabilities = Capabilities {
        level: true,
        event: true,
        oneshot: true,
        wake_one: true,
        cost_grows_with_interest: false,
        current_state_masks: true,
        fifo: true,
        shared_descriptors: true,
        regular_files: false,
    };
    const SLIM_WAIT: bool = true;
    // Quirk a.
    const REBUILD_ON_STALE: bool = true;

    fn probe() -> io::Result<()> {
        epoll_create().map(drop)
    }

    fn open() -> io::Result<Self> {
        Ok(EpollBackend {
            epfd: epoll_create()?,
            buffer: Vec::new(),
        })
    }

    fn refusal(w: &Watch) -> Option<&'static str> {
        // Quirk c.
        capability_refusal(&Self::CAPABILITIES, w).or(match w.mode {
            _ if !w.wake_one => None,
            Mode::Oneshot => {
                Some("wake-one together with oneshot mode (EPOLLEXCLUSIVE refuses EPOLLONESHOT)")
            }
            _ if w.interest.contains(Interest::EXCEPT) => {
                Some("wake-one together with EXCEPT interest (EPOLLEXCLUSIVE refuses EPOLLPRI)")
            }
            _ => None,
        })
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        match self.ctl(libc::EPOLL_CTL_ADD, w) {
            Err(e) if errno_is(&e, libc::EEXIST) && !w.wake_one => self.ctl(libc::EPOLL_CTL_MOD, w),
            Err(e) if errno_is(&e, libc::EEXIST) => {
                self.del(w.fd)?;
                self.ctl(libc::EPOLL_CTL_ADD, w)
            }
            other => other,
        }
    }

    fn modify(&mut self, old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        let vanished = |e: io::Error| {
            // Quirk b: the number was closed and reused behind our back; the queue
            // starts a new generation and calls `add`.
            if errno_is(&e, libc::ENOENT) {
                ModifyError::Vanished
            } else {
                ModifyError::Refused(e)
            }
        };
        if !(old.wake_one || new.wake_one) {
            return self.ctl(libc::EPOLL_CTL_MOD, new).map_err(vanished);
        }
        // Quirk c: an exclusive entry cannot be modified, only deleted and added.
        self.del(old.fd).map_err(vanished)?;
        let Err(refused) = self.ctl(libc::EPOLL_CTL_ADD, new) else {
            return Ok(());
        };
        match self.ctl(libc::EPOLL_CTL_ADD, old) {
            Ok(()) => Err(ModifyError::Refused(refused)),
            Err(_) => Err(ModifyError::Lost(refused)),
        }
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        match self.del(old.fd) {
            // Already gone with the file: the interest is removed either way.
            Err(e) if errno_is(&e, libc::ENOENT) || errno_is(&e, libc::EBADF) => Ok(()),
            other => other,
        }
    }

    fn forget(&mut self, _old: &Watch) {
        // The number may name another file now, so it is not touched. If a dup keeps
        // the old file in the set, its events are stale and cause a rebuild (quirk a).
    }

    #[inline]
    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let max = max.clamp(1, libc::c_int::MAX as usize);
        if self.buffer.len() < max {
            self.buffer
                .resize(max, libc::epoll_event { events: 0, u64: 0 });
        }
        let n = syscall!(epoll_wait(
            self.epfd.as_raw_fd(),
            self.buffer.as_mut_ptr(),
            max as libc::c_int,
            timeout_ms(timeout)
        ))?;
        for ev in &self.buffer[..n as usize] {
            // Copy out of the packed struct before use.
            let (bits, key) = (ev.events, ev.u64);
            on_event(SysEvent {
                key,
                readiness: readiness(bits),
                gone: false,
            });
        }
        Ok(())
    }

    fn rebuild<'a>(&mut self, watches: impl Iterator<Item = Watch> + 'a) -> io::Result<()> {
        let fresh = EpollBackend {
            epfd: epoll_create()?,
            buffer: std::mem::take(&mut self.buffer),
        };
        for w in watches {
            // A watch whose fd is closed simply is not re-added; the queue learns of
            // it through `remove`'s tolerance or the next declare_interest.
            let _ = fresh.ctl(libc::EPOLL_CTL_ADD, &w);
        }
        *self = fresh;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn keys(b: &mut EpollBackend) -> Vec<u64> {
        let mut got = Vec::new();
        b.wait(8, Some(Duration::from_millis(50)), |ev| got.push(ev.key))
            .unwrap();
        got
    }

    fn exclusive(fd: std::os::fd::RawFd, key: u64, mode: Mode) -> Watch {
        Watch {
            fd,
            key,
            interest: Interest::READ,
            mode,
            wake_one: true,
        }
    }

    /// The queue refuses wake-one with oneshot up front; if the kernel refuses the
    /// ADD of a DEL + ADD modify all the same, the old entry goes back in.
    #[test]
    fn a_refused_exclusive_add_puts_the_old_entry_back() {
        let mut b = EpollBackend::open().unwrap();
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let old = exclusive(ours.as_raw_fd(), 7, Mode::Level);
        b.add(&old).unwrap();
        let new = exclusive(ours.as_raw_fd(), 8, Mode::Oneshot);
        assert!(EpollBackend::refusal(&new).is_some());
        match b.modify(&old, &new) {
            Err(ModifyError::Refused(e)) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL)),
            other => panic!("{other:?}"),
        }
        peer.write_all(b"x").unwrap();
        assert_eq!(keys(&mut b), vec![7]);
    }

    /// When neither the new entry nor the old one is accepted back, the queue is
    /// told that nothing is watched.
    #[test]
    fn nothing_accepted_back_is_reported_lost() {
        let mut b = EpollBackend::open().unwrap();
        let (mut peer, ours) = UnixStream::pair().unwrap();
        b.add(&exclusive(ours.as_raw_fd(), 7, Mode::Level)).unwrap();
        // An "old" watch the kernel will not take back (oneshot with exclusive).
        let old = exclusive(ours.as_raw_fd(), 7, Mode::Oneshot);
        let new = exclusive(ours.as_raw_fd(), 8, Mode::Oneshot);
        assert!(matches!(b.modify(&old, &new), Err(ModifyError::Lost(_))));
        peer.write_all(b"x").unwrap();
        assert_eq!(keys(&mut b), Vec::<u64>::new());
    }
}
