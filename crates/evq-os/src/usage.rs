//! CPU time as the tools account it: `getrusage(2)` for a process or a thread
//! (user and system time, voluntary context switches), and the calling thread's
//! CPU clock, cheap enough to read around every wait.

use std::time::Duration;

/// What `getrusage(2)` says of a process or a thread so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuUsage {
    /// User time.
    pub user: Duration,
    /// System time.
    pub system: Duration,
    /// Voluntary context switches: times it slept and was woken.
    pub voluntary_switches: u64,
}

impl CpuUsage {
    /// This process (every thread, reaped children not included).
    pub fn of_process() -> CpuUsage {
        rusage(libc::RUSAGE_SELF)
    }

    /// The calling thread.
    pub fn of_thread() -> CpuUsage {
        rusage(libc::RUSAGE_THREAD)
    }

    /// The difference from an earlier reading (saturating at zero).
    pub fn since(self, earlier: CpuUsage) -> CpuUsage {
        CpuUsage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
        }
    }
}

/// All zero when the call fails (it cannot, for these two `who`s).
fn rusage(who: libc::c_int) -> CpuUsage {
    // SAFETY: all-zero is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage(2) fills the live rusage it is given.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return CpuUsage::default();
    }
    let time = |t: libc::timeval| {
        Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
        )
    };
    CpuUsage {
        user: time(ru.ru_utime),
        system: time(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw.max(0) as u64,
    }
}

/// CPU time the calling thread has used so far, in nanoseconds
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: user plus system time, none of the
/// time it spent blocked; a vDSO read, no system call). 0 if the clock cannot be
/// read.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; the clock id is a constant the
    // kernel validates.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until the thread's CPU clock has moved by `d`.
    fn burn(d: Duration) {
        let start = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - start < d.as_nanos() as u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }

    #[test]
    fn thread_time_counts_this_threads_work() {
        let before = CpuUsage::of_thread();
        let ns = thread_cpu_ns();
        burn(Duration::from_millis(30));
        assert!(thread_cpu_ns() - ns >= 30_000_000);
        let used = CpuUsage::of_thread().since(before);
        // getrusage's clock ticks are coarser than the thread clock: allow one.
        assert!(
            used.user + used.system >= Duration::from_millis(20),
            "{used:?}"
        );
        let process = CpuUsage::of_process();
        assert!(
            process.user + process.system >= used.user + used.system - Duration::from_millis(10)
        );
    }

    #[test]
    fn sleeping_is_a_voluntary_switch() {
        let before = CpuUsage::of_thread();
        std::thread::sleep(Duration::from_millis(2));
        assert!(CpuUsage::of_thread().since(before).voluntary_switches >= 1);
    }
}
