//! A growable `fd_set`: the kernel's `select(2)` accepts any `nfds` up to the
//! process's descriptor limit as long as the bitmaps are that long, so evq sizes
//! them instead of stopping at `FD_SETSIZE` (1024).

use super::Watch;
use std::os::fd::RawFd;

type Word = libc::c_ulong;
pub(crate) const WORD_BITS: usize = Word::BITS as usize;

/// Bit `fd % WORD_BITS` of word `fd / WORD_BITS`: the kernel's own `fd_set` layout.
#[derive(Clone, Default)]
pub(crate) struct FdBitmap {
    words: Vec<Word>,
}

impl FdBitmap {
    /// Makes room for descriptors below `nfds`.
    pub(crate) fn grow_to(&mut self, nfds: usize) {
        let need = nfds.div_ceil(WORD_BITS);
        if self.words.len() < need {
            self.words.resize(need, 0);
        }
    }
    pub(crate) fn set(&mut self, fd: RawFd) {
        let fd = fd as usize;
        self.grow_to(fd + 1);
        self.words[fd / WORD_BITS] |= 1 << (fd % WORD_BITS);
    }
    pub(crate) fn clear(&mut self, fd: RawFd) {
        let fd = fd as usize;
        if let Some(w) = self.words.get_mut(fd / WORD_BITS) {
            *w &= !(1 << (fd % WORD_BITS));
        }
    }
    #[inline]
    pub(crate) fn test(&self, fd: usize) -> bool {
        self.words
            .get(fd / WORD_BITS)
            .is_some_and(|w| w & (1 << (fd % WORD_BITS)) != 0)
    }
    /// Zeroes the words covering descriptors below `nfds`.
    pub(crate) fn zero(&mut self, nfds: usize) {
        let n = nfds.div_ceil(WORD_BITS).min(self.words.len());
        self.words[..n].fill(0);
    }
    /// Copies the first words of `other` (memcpy, SEEDS 000's shadow copy).
    pub(crate) fn copy_from(&mut self, other: &FdBitmap, nfds: usize) {
        let n = nfds.div_ceil(WORD_BITS);
        self.grow_to(nfds);
        self.words[..n].copy_from_slice(&other.words[..n]);
    }
    #[inline]
    pub(crate) fn word(&self, i: usize) -> Word {
        self.words.get(i).copied().unwrap_or(0)
    }
    /// Pointer for `select(2)`; the bitmap must have been grown to `nfds`.
    pub(crate) fn as_fd_set(&mut self) -> *mut libc::fd_set {
        self.words.as_mut_ptr().cast()
    }
}

/// Runs `select(2)` over the three bitmaps (each grown to `nfds`), retrying nothing:
/// `EINTR` and `EBADF` go back to the caller.
pub(crate) fn select(
    nfds: usize,
    read: &mut FdBitmap,
    write: &mut FdBitmap,
    except: &mut FdBitmap,
    timeout: Option<std::time::Duration>,
) -> std::io::Result<usize> {
    for b in [&mut *read, &mut *write, &mut *except] {
        b.grow_to(nfds.max(1));
    }
    let mut tv = timeout.map(|d| {
        // Round up to the next microsecond so a short wait never spins.
        let micros = d
            .as_nanos()
            .div_ceil(1000)
            .min(i32::MAX as u128 * 1_000_000);
        libc::timeval {
            tv_sec: (micros / 1_000_000) as libc::time_t,
            tv_usec: (micros % 1_000_000) as libc::suseconds_t,
        }
    });
    let tvp = tv
        .as_mut()
        .map_or(std::ptr::null_mut(), |t| t as *mut libc::timeval);
    let n = super::syscall::syscall!(select(
        nfds as libc::c_int,
        read.as_fd_set(),
        write.as_fd_set(),
        except.as_fd_set(),
        tvp
    ))?;
    Ok(n as usize)
}

/// The watches of a select backend, indexed by fd, with the arming state of
/// oneshot entries and the `nfds` argument kept current.
#[derive(Default)]
pub(crate) struct WatchList {
    by_fd: Vec<Option<(Watch, bool)>>,
    nfds: usize,
}

impl WatchList {
    pub(crate) fn nfds(&self) -> usize {
        self.nfds
    }
    #[inline]
    pub(crate) fn get(&self, fd: usize) -> Option<(Watch, bool)> {
        self.by_fd.get(fd).copied().flatten()
    }
    pub(crate) fn insert(&mut self, w: &Watch) -> std::io::Result<()> {
        if !super::syscall::is_open(w.fd) {
            return Err(std::io::Error::from_raw_os_error(libc::EBADF));
        }
        let fd = w.fd as usize;
        if fd >= self.by_fd.len() {
            self.by_fd.resize(fd + 1, None);
        }
        self.by_fd[fd] = Some((*w, true));
        self.nfds = self.nfds.max(fd + 1);
        Ok(())
    }
    pub(crate) fn remove(&mut self, fd: RawFd) -> Option<Watch> {
        let old = self.by_fd.get_mut(fd as usize)?.take().map(|(w, _)| w);
        while self.nfds > 0 && self.by_fd[self.nfds - 1].is_none() {
            self.nfds -= 1;
        }
        old
    }
    pub(crate) fn disarm(&mut self, fd: usize) {
        if let Some(Some((_, armed))) = self.by_fd.get_mut(fd) {
            *armed = false;
        }
    }
    /// After `EBADF`: drops every watch whose descriptor is no longer open and hands
    /// it to `gone` (closing implies revoking, SEEDS 000).
    pub(crate) fn sweep_closed(&mut self, mut gone: impl FnMut(Watch)) {
        for fd in 0..self.nfds {
            if let Some((w, _)) = self.by_fd[fd] {
                if !super::syscall::is_open(w.fd) {
                    self.remove(w.fd);
                    gone(w);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_past_fd_setsize() {
        let mut b = FdBitmap::default();
        b.set(5000);
        assert!(b.test(5000));
        assert!(!b.test(4999));
        b.clear(5000);
        assert!(!b.test(5000));
    }
}
