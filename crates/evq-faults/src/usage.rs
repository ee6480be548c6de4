//! What `/proc` says about a process the suite started (through the `procfs`
//! crate): its open descriptors (`/proc/PID/fd`), its anonymous resident memory
//! (`smaps_rollup`), and the CPU time its threads have run (`schedstat` per
//! thread, in nanoseconds; `stat`'s clock ticks where schedstat is missing).
//!
//! Anonymous memory is what the process allocated (heap, stacks); the pages of
//! the binary and its libraries, which the kernel may drop and fault back at any
//! time, are left out, so "memory back to its baseline" compares what the
//! server itself holds.

use procfs::process::Process;
use std::io;
use std::time::{Duration, Instant};

fn process(pid: u32) -> io::Result<Process> {
    let pid = i32::try_from(pid).map_err(io::Error::other)?;
    Process::new(pid).map_err(proc_error)
}

fn proc_error(e: procfs::ProcError) -> io::Error {
    match e {
        procfs::ProcError::NotFound(_) => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
        other => io::Error::other(other.to_string()),
    }
}

/// One reading of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Open descriptors (entries of `/proc/PID/fd`).
    pub fds: usize,
    /// Anonymous resident memory, KiB.
    pub anon_rss_kib: u64,
}

/// Descriptors and memory of `pid` now.
///
/// # Errors
/// The process is gone (`NotFound`) or `/proc` cannot be read.
pub fn usage(pid: u32) -> io::Result<Usage> {
    Ok(Usage {
        fds: fd_count(pid)?,
        anon_rss_kib: anon_rss_kib(pid)?,
    })
}

/// Open descriptors of `pid`.
///
/// # Errors
/// As [`usage`].
pub fn fd_count(pid: u32) -> io::Result<usize> {
    process(pid)?.fd_count().map_err(proc_error)
}

/// Open descriptors of `pid` apart from its TCP sockets connected to port
/// `peer_port` of a loopback peer (`None`: every descriptor). `evq proxy` keeps
/// up to `--pool-size` idle connections to its origin on purpose; how many it
/// holds after a fault depends on how many requests overlapped, so the
/// proxy's descriptors are compared with their baseline without them.
///
/// # Errors
/// As [`usage`].
pub fn fd_count_apart_from(pid: u32, peer_port: Option<u16>) -> io::Result<usize> {
    let Some(port) = peer_port else {
        return fd_count(pid);
    };
    let p = process(pid)?;
    let sockets: std::collections::HashSet<u64> = p
        .fd()
        .map_err(proc_error)?
        .filter_map(|fd| match fd.ok()?.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    let total = p.fd_count().map_err(proc_error)?;
    let pooled = p
        .tcp()
        .map_err(proc_error)?
        .into_iter()
        .chain(p.tcp6().unwrap_or_default())
        .filter(|e| e.remote_address.port() == port && sockets.contains(&e.inode))
        .count();
    Ok(total.saturating_sub(pooled))
}

/// [`usage`] with descriptors counted as [`fd_count_apart_from`] counts them.
///
/// # Errors
/// As [`usage`].
pub fn usage_apart_from(pid: u32, peer_port: Option<u16>) -> io::Result<Usage> {
    Ok(Usage {
        fds: fd_count_apart_from(pid, peer_port)?,
        anon_rss_kib: anon_rss_kib(pid)?,
    })
}

/// Anonymous resident memory of `pid`, KiB (`/proc/PID/smaps_rollup`, counted
/// page by page; `RssAnon` of `status` is a per-CPU estimate that can be off by
/// hundreds of KiB).
///
/// # Errors
/// As [`usage`].
pub fn anon_rss_kib(pid: u32) -> io::Result<u64> {
    let rollup = process(pid)?.smaps_rollup().map_err(proc_error)?;
    rollup
        .memory_map_rollup
        .0
        .first()
        .and_then(|m| m.extension.map.get("Anonymous").copied())
        .map(|bytes| bytes / 1024)
        .ok_or_else(|| io::Error::other("smaps_rollup has no Anonymous line"))
}

/// CPU time all threads of `pid` have run so far.
///
/// # Errors
/// As [`usage`].
pub fn cpu_time(pid: u32) -> io::Result<Duration> {
    let p = process(pid)?;
    // schedstat: nanoseconds on the CPU per thread, summed over the threads alive
    // now (the suite's subjects keep their threads for life).
    let from_schedstat = p.tasks().ok().and_then(|tasks| {
        tasks
            .map(|t| t.ok()?.schedstat().ok().map(|s| s.sum_exec_runtime))
            .sum::<Option<u64>>()
    });
    if let Some(ns) = from_schedstat {
        return Ok(Duration::from_nanos(ns));
    }
    let s = p.stat().map_err(proc_error)?;
    let hz = procfs::ticks_per_second().max(1);
    Ok(Duration::from_nanos(
        (s.utime + s.stime) * 1_000_000_000 / hz,
    ))
}

/// The share of one CPU `pid` used over the next `window` (1.0 is one CPU kept
/// busy the whole time): a process that only waits for events reads near 0, a
/// busy loop near 1 (or its share of a crowded machine, still far above an idle
/// one's).
///
/// # Errors
/// As [`usage`].
pub fn cpu_share(pid: u32, window: Duration) -> io::Result<f64> {
    let start = Instant::now();
    let before = cpu_time(pid)?;
    std::thread::sleep(window);
    let after = cpu_time(pid)?;
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    Ok(after.saturating_sub(before).as_secs_f64() / wall)
}

/// Waits up to `limit` until `pid` holds at most `fds` descriptors (counted
/// apart from connections to `peer_port`, as [`fd_count_apart_from`]); the
/// count last seen.
///
/// # Errors
/// As [`usage`].
pub fn wait_fds_at_most(
    pid: u32,
    peer_port: Option<u16>,
    fds: usize,
    limit: Duration,
) -> io::Result<usize> {
    let until = Instant::now() + limit;
    loop {
        let now = fd_count_apart_from(pid, peer_port)?;
        if now <= fds || Instant::now() >= until {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_plausibly() {
        let me = std::process::id();
        let u = usage(me).unwrap();
        assert!(u.fds >= 3, "{u:?}");
        assert!(u.anon_rss_kib > 0, "{u:?}");
        // A busy thread shows as CPU time.
        let t0 = cpu_time(me).unwrap();
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        assert!(cpu_time(me).unwrap() > t0);
    }

    #[test]
    fn a_gone_process_is_not_found() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(usage(pid).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
