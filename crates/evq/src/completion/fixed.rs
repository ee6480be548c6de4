//! Registered (fixed) files: a per-ring table of file references
//! (`IORING_REGISTER_FILES2`, sparse, Linux 5.19) that operations name by index
//! (`IOSQE_FIXED_FILE`) instead of by descriptor, saving the kernel's per-operation
//! descriptor lookup and reference count (`fdget`/`fdput`) — which costs an atomic
//! whenever the process has more than one thread.
//!
//! The table holds its own reference: once a descriptor is registered the caller may
//! close it, and the file lives on until it is unregistered (or closed through the
//! ring, or the ring is dropped). Indices are handed out by the ring, and an index
//! is not handed out again while any operation still names it (quirk l).

use super::CompletionRing;
use std::io;
use std::os::fd::RawFd;

/// An index in the ring's registered-file table, from
/// [`CompletionRing::register_file`]. Like a descriptor it is only a number: an
/// index that is empty or past the table makes operations fail with `EBADF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fixed(pub(super) u32);

impl Fixed {
    /// An index chosen by the caller (for instance one kept from an earlier ring);
    /// operations on it fail with `EBADF` unless it is registered in this ring.
    pub fn from_index(index: u32) -> Self {
        Fixed(index)
    }

    /// The index in the table.
    pub fn index(self) -> u32 {
        self.0
    }
}

/// The file an operation works on: a plain descriptor, or a registered index.
///
/// Operations take `impl Into<Target>`, so a [`RawFd`] or a [`Fixed`] can be passed
/// as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A descriptor, looked up by the kernel for each operation.
    Fd(RawFd),
    /// An index in the ring's registered-file table.
    Fixed(Fixed),
}

impl From<RawFd> for Target {
    fn from(fd: RawFd) -> Self {
        Target::Fd(fd)
    }
}

impl From<Fixed> for Target {
    fn from(f: Fixed) -> Self {
        Target::Fixed(f)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Entry {
    Free,
    Registered,
    /// Unregistered or closed, but still named by a live operation.
    Retiring,
}

/// The ring's view of its registered-file table.
#[derive(Default)]
pub(super) struct FixedTable {
    entries: Vec<Entry>,
    /// Live operations naming each index.
    users: Vec<u32>,
    /// Free indices, lowest last (handed out first).
    free: Vec<u32>,
}

impl FixedTable {
    /// An operation naming `t` was inserted.
    pub(super) fn hold(&mut self, t: Target) {
        if let Target::Fixed(Fixed(i)) = t {
            if let Some(n) = self.users.get_mut(i as usize) {
                *n += 1;
            }
        }
    }

    /// An operation naming `t` ended.
    pub(super) fn release(&mut self, t: Target) {
        if let Target::Fixed(Fixed(i)) = t {
            if let Some(n) = self.users.get_mut(i as usize) {
                *n -= 1;
                self.reclaim(i);
            }
        }
    }

    /// The kernel's entry at `i` is gone (unregistered, or closed through the ring).
    pub(super) fn vacate(&mut self, i: u32) {
        if let Some(e) = self.entries.get_mut(i as usize) {
            if *e == Entry::Registered {
                *e = Entry::Retiring;
                self.reclaim(i);
            }
        }
    }

    fn reclaim(&mut self, i: u32) {
        let i_ = i as usize;
        if self.entries[i_] == Entry::Retiring && self.users[i_] == 0 {
            self.entries[i_] = Entry::Free;
            self.free.push(i);
        }
    }
}

impl CompletionRing {
    /// Registers a sparse table of `capacity` fixed files with the kernel
    /// (`IORING_REGISTER_FILES2` with `IORING_RSRC_REGISTER_SPARSE`, Linux 5.19).
    /// Once per ring.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a capacity of 0 or a second table; the kernel's error
    /// otherwise (`EMFILE` past `RLIMIT_NOFILE`, `EINVAL` on kernels without
    /// sparse tables).
    pub fn register_files(&mut self, capacity: u32) -> io::Result<()> {
        if capacity == 0 || !self.fixed.entries.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "register_files: capacity must be at least 1, and a ring has one table",
            ));
        }
        self.ring.submitter().register_files_sparse(capacity)?;
        let n = capacity as usize;
        self.fixed.entries = vec![Entry::Free; n];
        self.fixed.users = vec![0; n];
        self.fixed.free = (0..capacity).rev().collect();
        Ok(())
    }

    /// Puts `fd` in the registered-file table and returns its index. The table
    /// keeps its own reference to the file: the caller may close `fd` afterwards.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a negative `fd` or if
    /// [`register_files`](Self::register_files) was not called,
    /// `Other` if the table is full, the kernel's error (`EBADF`) for a bad `fd`.
    pub fn register_file(&mut self, fd: RawFd) -> io::Result<Fixed> {
        if fd < 0 {
            // The kernel reads -1 as "empty the entry" and -2 as "skip it".
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("register_file: {fd} is not a descriptor"),
            ));
        }
        if self.fixed.entries.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "register_file: no table; call register_files(capacity) first",
            ));
        }
        let Some(&i) = self.fixed.free.last() else {
            return Err(io::Error::other(format!(
                "register_file: the fixed-file table is full ({} entries)",
                self.fixed.entries.len()
            )));
        };
        self.ring.submitter().register_files_update(i, &[fd])?;
        self.fixed.free.pop();
        self.fixed.entries[i as usize] = Entry::Registered;
        Ok(Fixed(i))
    }

    /// Removes `file` from the table (the table's reference is dropped; operations
    /// in flight keep theirs, as after a `close`). Operations queued on it and not
    /// yet submitted, and later re-arms or continuations, fail with `EBADF`. The
    /// index is handed out again only after the last operation naming it ends.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an index this ring did not hand out or already took back.
    pub fn unregister_file(&mut self, file: Fixed) -> io::Result<()> {
        if self.fixed.entries.get(file.0 as usize) != Some(&Entry::Registered) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unregister_file: index {} is not registered", file.0),
            ));
        }
        self.ring.submitter().register_files_update(file.0, &[-1])?;
        self.fixed.vacate(file.0);
        Ok(())
    }

    /// The number of entries in the registered-file table (0 without one).
    pub fn registered_capacity(&self) -> u32 {
        self.fixed.entries.len() as u32
    }
}
