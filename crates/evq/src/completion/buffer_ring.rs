//! The provided-buffer ring behind multishot receives: one block of memory cut into
//! equal buffers, lent to the kernel through a ring it reads (`IORING_REGISTER_PBUF_RING`,
//! Linux 5.19). A receive takes a buffer only when data arrives, so an idle
//! connection holds none — the memory is per *active* receive, not per connection.
//!
//! The ring is an array of `io_uring_buf {addr, len, bid, resv}` whose first entry's
//! `resv` field is the tail we publish; the kernel keeps the head to itself. Entries
//! must be page-aligned memory that stays put until the group is unregistered, so it
//! comes from `mmap`, not from a `Vec` that could be reallocated.

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// A registered buffer group: the ring of entries and the buffers they point into.
pub(super) struct BufferRing {
    /// `mmap`ed, page-aligned array of `count` entries.
    entries: *mut BufRingEntry,
    entries_len: usize,
    /// The buffers themselves, `count * size` bytes.
    memory: Box<[u8]>,
    count: u16,
    size: u32,
    /// Our copy of the tail; published with a release store after entries are filled.
    tail: u16,
    group: u16,
}

impl BufferRing {
    /// Maps and registers `count` buffers of `size` bytes as group `group`, all lent to
    /// the kernel at once. `count` must be a power of two up to 32,768 (the kernel's rule).
    pub(super) fn register(ring: &IoUring, group: u16, count: u16, size: u32) -> io::Result<Self> {
        debug_assert!(count.is_power_of_two());
        let entries_len = count as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: anonymous private mapping with no address hint; the result is checked
        // against MAP_FAILED before use and unmapped in Drop with the same length.
        let entries = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                entries_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if entries == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let memory = vec![0u8; count as usize * size as usize].into_boxed_slice();
        let mut this = BufferRing {
            entries: entries.cast(),
            entries_len,
            memory,
            count,
            size,
            tail: 0,
            group,
        };
        // SAFETY: `entries` is page-aligned (mmap) and holds `count` entries; it lives
        // until Drop, which runs only after the owner unregistered the group or closed
        // the ring (CompletionRing's Drop order).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, group, 0)
        }
        .map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::EINVAL) {
                " (provided-buffer rings need Linux 5.19)"
            } else {
                ""
            };
            io::Error::new(e.kind(), format!("IORING_REGISTER_PBUF_RING: {e}{why}"))
        })?;
        for bid in 0..count {
            this.push(bid);
        }
        this.publish();
        Ok(this)
    }

    /// The buffer group id to name in `RecvMulti`.
    pub(super) fn group(&self) -> u16 {
        self.group
    }

    /// Bytes per buffer.
    pub(super) fn buffer_size(&self) -> u32 {
        self.size
    }

    /// Number of buffers in the group.
    pub(super) fn count(&self) -> u16 {
        self.count
    }

    /// The first `len` bytes of buffer `bid`, as the kernel filled them.
    pub(super) fn data(&self, bid: u16, len: u32) -> &[u8] {
        let start = bid as usize * self.size as usize;
        &self.memory[start..start + len.min(self.size) as usize]
    }

    /// Lends buffer `bid` back to the kernel (visible after `publish`).
    pub(super) fn push(&mut self, bid: u16) {
        debug_assert!(bid < self.count);
        let index = (self.tail & (self.count - 1)) as usize;
        let addr = self.memory.as_ptr() as u64 + bid as u64 * self.size as u64;
        // SAFETY: index < count, inside the mapping; the kernel reads only entries
        // between its head and the published tail, and this one is past the tail.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(addr);
        entry.set_len(self.size);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Publishes pushed buffers to the kernel with one release store of the tail.
    pub(super) fn publish(&mut self) {
        // SAFETY: the tail lives in entry 0's `resv` field inside our mapping; the
        // kernel reads it with an acquire load, pairing with this release store.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufferRing {
    fn drop(&mut self) {
        // SAFETY: same pointer and length that mmap returned in `register`.
        unsafe { libc::munmap(self.entries.cast(), self.entries_len) };
    }
}
