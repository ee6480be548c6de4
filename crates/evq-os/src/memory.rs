//! Giving freed memory back to the system.
//!
//! A server that held 10,000 slow clients for a minute has freed their buffers
//! when they leave, but the C allocator keeps what it freed: glibc's `free`
//! returns memory to the kernel only from the top of a heap (and only above
//! `M_TRIM_THRESHOLD`), so buffers freed in the middle of an arena stay
//! resident for the life of the process. A user watching RSS sees the peak of
//! the worst minute forever, which is indistinguishable from a leak (issue 19:
//! "memory returns to its baseline afterwards").
//!
//! `malloc_trim(0)` walks every arena and hands whole free pages back with
//! `MADV_DONTNEED`. It costs a walk of the free lists, so it is not for the hot
//! path: [`Releaser`] counts the bytes a program frees in bulk and calls it
//! only when a megabyte or more has been freed since the last call, or when
//! the program is left with nothing in use — i.e. after a burst has gone, not
//! during steady churn.
//!
//! Not everything a crowd leaves behind is freed where a releaser counts it:
//! the event queue's own tables shrink inside `evq`, a completion ring's
//! operation slots as their last completions are reaped. So a loop also
//! tells its releaser, once a round, how many connections it holds
//! ([`Releaser::open_now`]): when a crowd of [`CROWD`] or more has mostly
//! gone (fewer than an eighth of the most held since the last trim), it
//! trims, whoever freed what, and again at each eightfold drop until the
//! last has gone, and once more [`SETTLE`] later (the last connections'
//! cancelled requests end in the rounds after their close). A crowd leaving
//! costs a few trims, a steady server none.

/// Bytes freed between two trims, at least (the trim walks the free lists,
/// so it runs after a burst, not per connection).
pub const RELEASE_BATCH: usize = 1 << 20;

/// Connections a loop must have held for their leaving to trim the allocator
/// ([`Releaser::open_now`]).
pub const CROWD: usize = 256;

/// Hands the allocator's free pages back to the system now. Returns whether
/// memory was actually released (always `false` where the C library has no
/// `malloc_trim`).
pub fn release_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim(3) takes a pad in bytes and only rearranges the
        // allocator's own free memory (under the arenas' locks); it never
        // touches memory in use, so it is sound from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Counts bytes freed in bulk and trims the allocator when enough has gone.
#[derive(Debug, Default)]
pub struct Releaser {
    freed: usize,
    trims: u64,
    /// The most connections held since the last trim.
    peak: usize,
    /// A crowd came and has not wholly gone yet.
    crowd: bool,
    /// When the crowd's last connection went (a last trim follows
    /// [`SETTLE`] later, for what its last requests free as they end).
    gone_at: Option<std::time::Instant>,
}

/// After a crowd's last connection has gone, the releaser trims once more
/// this long after (its cancelled requests end, and their memory is freed,
/// in the rounds after the close).
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

impl Releaser {
    /// A releaser with nothing counted.
    pub fn new() -> Self {
        Self::default()
    }

    /// `bytes` were just freed. `in_use` is how many of the program's units
    /// (connections) are still open: at zero, whatever was freed is given
    /// back at once; otherwise after [`RELEASE_BATCH`] bytes.
    pub fn freed(&mut self, bytes: usize, in_use: usize) {
        self.freed = self.freed.saturating_add(bytes);
        if self.freed >= RELEASE_BATCH || (in_use == 0 && self.freed > 0) {
            self.trim(in_use);
        }
    }

    /// The loop holds `open` connections now (once a round): trims when a
    /// crowd has mostly gone, and again at each eightfold drop until none
    /// is left (see the module).
    pub fn open_now(&mut self, open: usize) {
        self.peak = self.peak.max(open);
        self.crowd |= self.peak >= CROWD;
        if self.crowd && open.saturating_mul(8) < self.peak {
            // Until the last of it has gone: its last connections may hold
            // the top of a table that the trim after them gives back.
            self.crowd = open > 0;
            if open == 0 {
                self.gone_at = Some(std::time::Instant::now());
            }
            self.trim(open);
        } else if let Some(at) = self.gone_at {
            if open > 0 {
                self.gone_at = None;
            } else if at.elapsed() >= SETTLE {
                self.gone_at = None;
                self.trim(0);
            }
        }
    }

    fn trim(&mut self, open: usize) {
        self.freed = 0;
        self.peak = open;
        self.trims += 1;
        release_free_memory();
    }

    /// How many times it trimmed.
    pub fn trims(&self) -> u64 {
        self.trims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crowd_that_has_mostly_gone_trims_once_per_eightfold_drop() {
        let mut r = Releaser::new();
        for open in 0..10_000 {
            r.open_now(open);
        }
        assert_eq!(r.trims(), 0, "a growing crowd never trims");
        for open in (0..10_000).rev() {
            r.open_now(open);
        }
        // At 1,249, 155, 19, 2 and 0 left.
        assert_eq!(r.trims(), 5);
        std::thread::sleep(SETTLE);
        r.open_now(0);
        assert_eq!(r.trims(), 6, "once more when the crowd's end has settled");
        r.open_now(0);
        assert_eq!(r.trims(), 6);
        for _ in 0..1000 {
            r.open_now(100);
            r.open_now(0);
        }
        assert_eq!(r.trims(), 6, "churn below a crowd never trims");
    }

    #[test]
    fn trims_after_a_batch_or_when_nothing_is_left_in_use() {
        let mut r = Releaser::new();
        r.freed(RELEASE_BATCH / 2, 10);
        assert_eq!(r.trims(), 0, "half a batch with connections open waits");
        r.freed(RELEASE_BATCH / 2, 10);
        assert_eq!(r.trims(), 1, "a whole batch trims");
        r.freed(100, 10);
        assert_eq!(r.trims(), 1);
        r.freed(100, 0);
        assert_eq!(r.trims(), 2, "the last connection gone trims what is left");
        r.freed(0, 0);
        assert_eq!(r.trims(), 2, "nothing freed, nothing to trim");
    }

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_heap_memory_leaves_the_resident_set() {
        // Alone in a process: RSS is per process and the other tests allocate.
        if crate::isolation::in_own_process(
            "memory::tests::freed_heap_memory_leaves_the_resident_set",
        ) {
            return;
        }
        {
            let anon = || -> u64 {
                let s = std::fs::read_to_string("/proc/self/status").unwrap();
                s.lines()
                    .find_map(|l| l.strip_prefix("RssAnon:"))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
                    .unwrap()
            };
            // 4,000 buffers of 8 KiB (below the mmap threshold: heap memory),
            // interleaved with small survivors so the heap's top stays in use
            // and plain free() cannot shrink it.
            let mut bufs = Vec::new();
            let mut keep = Vec::new();
            for i in 0..4000 {
                bufs.push(vec![i as u8 | 1; 8192]);
                keep.push(Box::new(i));
            }
            let before = anon();
            drop(bufs);
            let after_free = anon();
            release_free_memory();
            let after_trim = anon();
            eprintln!("RssAnon {before} → {after_free} (free) → {after_trim} KiB (trim)");
            std::hint::black_box(&keep);
            assert!(
                after_trim + 16 * 1024 < before,
                "32 MiB freed, RssAnon {before} → {after_free} (free) → {after_trim} KiB (trim)"
            );
        }
    }
}
