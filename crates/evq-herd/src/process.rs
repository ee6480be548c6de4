//! What the server designs share across `fork(2)`: counters and locks in
//! `MAP_SHARED` memory, an `fcntl` lock file, and forking and reaping children so
//! that no process outlives a run.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Per-slot counters, one slot per worker (and one for an acceptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Connections this slot served (read the request, wrote the reply).
    Handled = 0,
    /// Returns from the call the slot sleeps in waiting for work, with work.
    Wakeups = 1,
    /// `accept` said `EAGAIN`: another worker took the connection first.
    Collisions = 2,
    /// The slot finished its set-up and is about to wait for work.
    Ready = 3,
    /// Voluntary context switches (times the worker slept and was woken) between
    /// set-up and exit: the wake-ups the kernel absorbs without returning to user
    /// space (an epoll or select waiter woken for an event another took) included.
    Sleeps = 4,
}

const PER_SLOT: usize = 5;

/// An array of `AtomicU64` in anonymous shared memory: written by forked children
/// and threads alike, read by the parent. Slot 0's first word is the stop flag.
pub(crate) struct SharedCounters {
    base: *mut AtomicU64,
    words: usize,
}

// SAFETY: the memory is only accessed through atomics, and it stays mapped for the
// owner's lifetime (children get copies of the mapping, not of the owner).
unsafe impl Send for SharedCounters {}
// SAFETY: as above; every access is an atomic operation.
unsafe impl Sync for SharedCounters {}

impl SharedCounters {
    pub(crate) fn new(slots: usize) -> io::Result<SharedCounters> {
        let words = 1 + slots * PER_SLOT;
        let base = map_shared(words * std::mem::size_of::<AtomicU64>())?;
        Ok(SharedCounters {
            base: base.cast(),
            words,
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words, "counter index out of range");
        // SAFETY: `i` is in bounds of the mapping, which is zero-filled (a valid
        // AtomicU64) and lives as long as `self`.
        unsafe { &*self.base.add(i) }
    }

    pub(crate) fn add(&self, slot: usize, c: Counter, n: u64) {
        self.word(1 + slot * PER_SLOT + c as usize)
            .fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, slot: usize, c: Counter) -> u64 {
        self.word(1 + slot * PER_SLOT + c as usize)
            .load(Ordering::Relaxed)
    }

    pub(crate) fn stop(&self) {
        self.word(0).store(1, Ordering::Release);
    }

    pub(crate) fn stopping(&self) -> bool {
        self.word(0).load(Ordering::Acquire) != 0
    }
}

impl Drop for SharedCounters {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region `map_shared` mapped.
        unsafe {
            libc::munmap(
                self.base.cast(),
                self.words * std::mem::size_of::<AtomicU64>(),
            );
        }
    }
}

fn map_shared(len: usize) -> io::Result<*mut libc::c_void> {
    // SAFETY: an anonymous shared mapping; no file, no existing memory touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p)
    }
}

/// Counts a worker thread's voluntary context switches from creation to drop into
/// its slot's [`Counter::Sleeps`].
pub(crate) struct SleepMeter<'a> {
    counters: &'a SharedCounters,
    slot: usize,
    start: u64,
}

impl<'a> SleepMeter<'a> {
    pub(crate) fn start(counters: &'a SharedCounters, slot: usize) -> SleepMeter<'a> {
        SleepMeter {
            counters,
            slot,
            start: voluntary_switches(),
        }
    }
}

impl Drop for SleepMeter<'_> {
    fn drop(&mut self) {
        let n = voluntary_switches().saturating_sub(self.start);
        self.counters.add(self.slot, Counter::Sleeps, n);
    }
}

/// `getrusage(RUSAGE_THREAD).ru_nvcsw` of the calling thread.
fn voluntary_switches() -> u64 {
    evq_os::CpuUsage::of_thread().voluntary_switches
}

/// A `PTHREAD_PROCESS_SHARED` mutex in shared memory (Stevens serv04).
pub(crate) struct SharedMutex {
    m: *mut libc::pthread_mutex_t,
}

// SAFETY: a process-shared pthread mutex is designed to be used from any thread or
// process that maps it.
unsafe impl Send for SharedMutex {}
// SAFETY: as above.
unsafe impl Sync for SharedMutex {}

impl SharedMutex {
    pub(crate) fn new() -> io::Result<SharedMutex> {
        let m: *mut libc::pthread_mutex_t =
            map_shared(std::mem::size_of::<libc::pthread_mutex_t>())?.cast();
        // SAFETY: `attr` is initialised before use and destroyed after; `m` points
        // to fresh shared memory large enough for a pthread_mutex_t.
        let rc = unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            let rc = libc::pthread_mutex_init(m, &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            rc
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(SharedMutex { m })
    }

    pub(crate) fn lock(&self) {
        // SAFETY: `m` was initialised by pthread_mutex_init and is still mapped.
        unsafe { libc::pthread_mutex_lock(self.m) };
    }

    pub(crate) fn unlock(&self) {
        // SAFETY: as in `lock`; called only by the holder.
        unsafe { libc::pthread_mutex_unlock(self.m) };
    }
}

impl Drop for SharedMutex {
    fn drop(&mut self) {
        // SAFETY: destroys and unmaps the mutex created in `new`; every child that
        // used it has been reaped by then.
        unsafe {
            libc::pthread_mutex_destroy(self.m);
            libc::munmap(self.m.cast(), std::mem::size_of::<libc::pthread_mutex_t>());
        }
    }
}

/// An `fcntl(F_SETLKW)` lock on an unlinked temporary file (Stevens serv03). The
/// lock belongs to the process, so it serialises forked children.
pub(crate) struct FcntlLock {
    fd: RawFd,
}

impl FcntlLock {
    pub(crate) fn new() -> io::Result<FcntlLock> {
        let mut template = *b"/tmp/evq-herd-lock.XXXXXX\0";
        // SAFETY: mkostemp rewrites the NUL-terminated template in place.
        let fd = unsafe { libc::mkostemp(template.as_mut_ptr().cast(), libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: unlinks the path mkostemp just created; the fd keeps the file.
        unsafe { libc::unlink(template.as_ptr().cast()) };
        Ok(FcntlLock { fd })
    }

    fn set(&self, kind: libc::c_int) {
        // SAFETY: an all-zero flock is valid; we set the fields F_SETLKW reads.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        loop {
            // SAFETY: F_SETLKW reads the live `fl`.
            let rc = unsafe { libc::fcntl(self.fd, libc::F_SETLKW, &fl) };
            if rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return;
            }
        }
    }

    pub(crate) fn lock(&self) {
        self.set(libc::F_WRLCK);
    }

    pub(crate) fn unlock(&self) {
        self.set(libc::F_UNLCK);
    }
}

impl Drop for FcntlLock {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns.
        unsafe { libc::close(self.fd) };
    }
}

/// Forks a child that runs `body` and exits with its return code (101 on panic),
/// never returning into the caller. The child dies with the forking thread
/// (`PR_SET_PDEATHSIG`), so a crashed harness leaves no servers behind.
pub(crate) fn fork_child(body: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    // SAFETY: getpid takes no arguments.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork(2). The child only runs `body` and then `_exit`s, so it never
    // unwinds into frames (or runs destructors) that belong to the parent.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: prctl with integer arguments; getppid takes none.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: _exit ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// Waits for `pids` to exit for up to `grace`, then kills and reaps the rest.
/// Returns how many had to be killed.
pub(crate) fn reap(pids: &[libc::pid_t], grace: Duration) -> usize {
    let deadline = Instant::now() + grace;
    let mut left: Vec<libc::pid_t> = pids.to_vec();
    while !left.is_empty() && Instant::now() < deadline {
        left.retain(|&pid| {
            let mut status = 0;
            // SAFETY: waitpid writes the status into a live int.
            let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            rc == 0
        });
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for &pid in &left {
        let mut status = 0;
        // SAFETY: signals and reaps our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
    }
    left.len()
}
