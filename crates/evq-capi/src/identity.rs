//! Which file each registered descriptor number named when it was declared.
//!
//! C programs close descriptors with `close(2)`, as the paper allows ("closing a
//! descriptor implicitly removes its interest"), so the queue is never told. When
//! the old file lives on elsewhere (`dup`, `fork`, `SCM_RIGHTS`), epoll keeps its
//! entry, keyed by the old registration; if the program then declares interest in
//! the reused number, evq would *modify* that registration in place, keep its key,
//! and the old file's events would arrive under the new file's number. Comparing
//! `(st_dev, st_ino)` at each declaration catches the reuse: the number is then
//! forgotten first, the new registration gets a new generation, and the old entry's
//! events are dropped as stale. The cost is one `fstat(2)` per declaration, which
//! also answers `EBADF` for a closed descriptor before any backend sees it.

use std::io;
use std::os::fd::RawFd;

/// A file's identity: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

/// `fstat(2)` identity of `fd`; `EBADF` if it is not open.
pub(crate) fn identify(fd: RawFd) -> io::Result<FileId> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable `stat`; fstat(2) writes only into it.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// fd number → the file it named at its last successful declaration.
#[derive(Default)]
pub(crate) struct FileIdentities {
    slots: Vec<Option<FileId>>,
}

impl FileIdentities {
    /// True if `fd` was declared for a different file than `id`.
    pub(crate) fn changed(&self, fd: RawFd, id: FileId) -> bool {
        matches!(self.slots.get(fd as usize), Some(Some(old)) if *old != id)
    }

    /// True if `fd` was declared for `id` and not cleared since.
    pub(crate) fn matches(&self, fd: RawFd, id: FileId) -> bool {
        matches!(self.slots.get(fd as usize), Some(Some(old)) if *old == id)
    }

    pub(crate) fn record(&mut self, fd: RawFd, id: FileId) {
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(id);
    }

    pub(crate) fn clear(&mut self, fd: RawFd) {
        if let Some(slot) = self.slots.get_mut(fd as usize) {
            *slot = None;
        }
    }
}

/// `declare_interest` for a C caller: refuses closed descriptors, and starts a
/// new registration when the number names another file than last time.
pub(crate) fn declare(
    queue: &mut evq::EventQueue,
    ids: &mut FileIdentities,
    fd: RawFd,
    interest: evq::Interest,
    options: evq::Options,
) -> io::Result<evq::Readiness> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let id = match identify(fd) {
        Ok(id) => id,
        Err(e) => {
            // Closed: whatever was registered under this number is gone with it.
            queue.forget(fd);
            ids.clear(fd);
            return Err(e);
        }
    };
    if ids.changed(fd, id) {
        queue.forget(fd);
        ids.clear(fd);
    }
    let state = queue.declare_interest(fd, interest, options)?;
    if interest.is_empty() {
        ids.clear(fd);
    } else {
        ids.record(fd, id);
    }
    Ok(state)
}

/// For an event on `fd`: true if `fd` still names the file that was declared.
/// Otherwise the number was closed (and maybe reused) since: closing removes the
/// interest (SEEDS 000), so the registration is forgotten and the event is not
/// the caller's.
pub(crate) fn still_declared(
    queue: &mut evq::EventQueue,
    ids: &mut FileIdentities,
    fd: RawFd,
) -> bool {
    let same = match identify(fd) {
        Ok(id) => ids.matches(fd, id),
        Err(_) => false,
    };
    if !same {
        queue.forget(fd);
        ids.clear(fd);
    }
    same
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn different_files_differ() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let ia = identify(a.as_raw_fd()).unwrap();
        let ib = identify(b.as_raw_fd()).unwrap();
        assert_ne!(ia, ib);
        let mut ids = FileIdentities::default();
        assert!(!ids.changed(5, ia));
        ids.record(5, ia);
        assert!(!ids.changed(5, ia));
        assert!(ids.changed(5, ib));
        ids.clear(5);
        assert!(!ids.changed(5, ib));
        assert_eq!(identify(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
