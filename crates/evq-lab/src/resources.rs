//! Process resources the benchmarks need: the descriptor limit (through the
//! `rlimit` crate) and a thread's CPU budget (`SCHED_DEADLINE`, which no crate wraps).
//! CPU time comes from `evq_os::CpuUsage`.

use std::io;
use std::time::Duration;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit.
///
/// # Errors
/// The kernel refuses (`getrlimit`/`setrlimit`).
pub fn raise_nofile() -> io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// Gives thread `tid` of this process a fixed CPU budget: `runtime` of CPU in
/// every `period`, under `SCHED_DEADLINE`. The thread then runs as on a CPU that
/// much slower, whatever else the machine runs (a deadline thread is served
/// before ordinary ones, up to its budget). The setting ends with the thread.
///
/// # Errors
/// The kernel refuses (no `SCHED_DEADLINE`, no permission, or admission control
/// finds no room for the budget).
pub fn limit_thread_cpu(tid: libc::pid_t, runtime: Duration, period: Duration) -> io::Result<()> {
    const SCHED_DEADLINE: u32 = 6;
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: SCHED_DEADLINE,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: runtime.as_nanos() as u64,
        sched_deadline: period.as_nanos() as u64,
        sched_period: period.as_nanos() as u64,
    };
    // SAFETY: sched_setattr reads a live, fully initialised sched_attr whose size
    // field is its own size; the flags argument is 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            &attr as *const libc::sched_attr,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPU time (user and system) thread `tid` of this process has used so far.
///
/// # Errors
/// The thread is gone, or the kernel has no per-thread CPU clock.
pub fn thread_cpu_time(tid: libc::pid_t) -> io::Result<Duration> {
    // The kernel's per-thread CPU clock id: !tid << 3 | CPUCLOCK_PERTHREAD (4) |
    // CPUCLOCK_SCHED (2), as glibc's pthread_getcpuclockid builds it.
    let clock: libc::clockid_t = (!tid << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a live timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}
