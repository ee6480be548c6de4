//! What the lab reads from `/proc` (through the `procfs` crate): a process's CPU
//! time and anonymous memory, its children, the sockets it holds, the machine's
//! CPU time and load. One reader per figure, so every scenario counts alike.
//!
//! Readers return a zero (or an empty set) when the process is gone: the lab reads
//! servers it started and stops, and a server that died is reported by the
//! scenario that notices it, not here.

use procfs::process::{FDTarget, Process};
use procfs::{Current, CurrentSI};
use std::collections::HashSet;
use std::net::IpAddr;
use std::time::Duration;

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

fn ticks(t: u64) -> Duration {
    Duration::from_millis(t * 1000 / procfs::ticks_per_second().max(1))
}

/// User + system CPU time used so far by a process (`/proc/PID/stat`).
pub fn process_cpu(pid: u32) -> Duration {
    process(pid)
        .and_then(|p| p.stat().ok())
        .map_or(Duration::ZERO, |s| ticks(s.utime + s.stime))
}

/// Anonymous resident memory (heap, stacks: what user space allocated) of a
/// process, in bytes, counted page by page (`/proc/PID/smaps_rollup`; the
/// `RssAnon` of `/proc/PID/status` is a per-CPU approximation that can be off by
/// hundreds of KiB). File-backed pages (the binary, libraries), which the kernel
/// may drop and fault back at any time, are left out.
pub fn anon_rss(pid: u32) -> u64 {
    process(pid)
        .and_then(|p| p.smaps_rollup().ok())
        .and_then(|r| {
            r.memory_map_rollup
                .0
                .first()
                .and_then(|m| m.extension.map.get("Anonymous").copied())
        })
        .unwrap_or(0)
}

/// Resident memory of a process (`VmRSS`), in bytes.
pub fn vm_rss(pid: u32) -> u64 {
    process(pid)
        .and_then(|p| p.status().ok())
        .and_then(|s| s.vmrss)
        .map_or(0, |kb| kb * 1024)
}

/// The processes whose parent is `parent` (nginx's workers, for one).
pub fn children(parent: u32) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| u32::try_from(s.ppid).ok() == Some(parent))
        .filter_map(|s| u32::try_from(s.pid).ok())
        .collect()
}

/// The id of the one thread of this process named `name`
/// (`/proc/self/task/*/stat`), waiting up to `wait` for it to appear (a new
/// thread names itself once it runs). `None` if none, or more than one, has it.
pub fn thread_named(name: &str, wait: Duration) -> Option<libc::pid_t> {
    let until = std::time::Instant::now() + wait;
    loop {
        let named: Vec<libc::pid_t> = Process::myself()
            .and_then(|me| me.tasks())
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter(|t| t.stat().is_ok_and(|s| s.comm == name))
                    .map(|t| t.tid)
                    .collect()
            })
            .unwrap_or_default();
        match named[..] {
            [one] => return Some(one),
            [_, _, ..] => return None,
            [] if std::time::Instant::now() >= until => return None,
            [] => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// CPU time the whole machine has spent so far (`/proc/stat`): (in processes:
/// user, nice, system; in interrupts: irq, softirq).
pub fn machine_cpu() -> (Duration, Duration) {
    match procfs::KernelStats::current() {
        Ok(k) => {
            let t = k.total;
            (
                ticks(t.user + t.nice + t.system),
                ticks(t.irq.unwrap_or(0) + t.softirq.unwrap_or(0)),
            )
        }
        Err(_) => (Duration::ZERO, Duration::ZERO),
    }
}

/// The 1, 5 and 15-minute load averages as `/proc/loadavg` prints them ("unknown"
/// if it cannot be read): the machine is shared, and other work there takes CPU
/// from clients and servers alike.
pub fn loadavg() -> String {
    procfs::LoadAverage::current().map_or_else(
        |_| "unknown".into(),
        |l| format!("{:.2} {:.2} {:.2}", l.one, l.five, l.fifteen),
    )
}

/// The whole of `/proc/loadavg`'s line: the three averages, runnable/existing
/// scheduling entities, and the last pid.
pub fn loadavg_line() -> String {
    procfs::LoadAverage::current().map_or_else(
        |_| "unknown".into(),
        |l| {
            format!(
                "{:.2} {:.2} {:.2} {}/{} {}",
                l.one, l.five, l.fifteen, l.cur, l.max, l.latest_pid
            )
        },
    )
}

/// Inodes of the ESTABLISHED IPv4 connections whose local port is `port` and
/// whose peer is `from`: from `ss`, which filters in the kernel (fast when the
/// machine holds tens of thousands of sockets), else from `/proc/net/tcp`.
pub fn established_from(port: u16, from: IpAddr) -> HashSet<u64> {
    let filter = format!("( sport = :{port} and dst {from} )");
    if let Ok(out) = std::process::Command::new("ss")
        .args(["-tnHe", "state", "established", &filter])
        .stderr(std::process::Stdio::null())
        .output()
    {
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|t| t.strip_prefix("ino:")?.parse().ok())
                .collect();
        }
    }
    established(port)
        .filter(|e| e.remote_address.ip() == from)
        .map(|e| e.inode)
        .collect()
}

/// ESTABLISHED IPv4 connections whose local port is `port` (the server side of
/// each), from `/proc/net/tcp`.
pub fn established_to(port: u16) -> usize {
    established(port).count()
}

fn established(port: u16) -> impl Iterator<Item = procfs::net::TcpNetEntry> {
    procfs::net::tcp()
        .unwrap_or_default()
        .into_iter()
        .filter(move |e| {
            e.local_address.port() == port && e.state == procfs::net::TcpState::Established
        })
}

/// How many of `inodes` these processes hold a socket descriptor for (a
/// connection still in the accept queue has no descriptor and does not count).
pub fn sockets_held(pids: &[u32], inodes: &HashSet<u64>) -> u64 {
    let mut n = 0;
    for fd in pids
        .iter()
        .filter_map(|&pid| process(pid))
        .filter_map(|p| p.fd().ok())
        .flat_map(|fds| fds.flatten())
    {
        if let FDTarget::Socket(inode) = fd.target {
            n += u64::from(inodes.contains(&inode));
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        // Burn a little CPU so the tick counter moves on any machine.
        let t = std::time::Instant::now();
        while process_cpu(me).is_zero() && t.elapsed() < Duration::from_secs(5) {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        assert!(!process_cpu(me).is_zero());
        assert!(anon_rss(me) > 0 && vm_rss(me) > 0);
        assert!(loadavg().split_whitespace().count() == 3, "{}", loadavg());
        assert!(machine_cpu().0 > Duration::ZERO);
        assert_eq!(process_cpu(u32::MAX), Duration::ZERO, "no such process");
    }

    #[test]
    fn a_held_connection_is_counted_by_inode() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_server_side, _) = listener.accept().unwrap();
        let from = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let inodes = established_from(port, from);
        assert_eq!(inodes.len(), 1, "{inodes:?}");
        assert_eq!(established_to(port), 1);
        assert_eq!(sockets_held(&[std::process::id()], &inodes), 1);
        assert!(established_from(port, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))).is_empty());
    }

    #[test]
    fn a_named_thread_is_found() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("evq-lab-probe".into())
            .spawn(move || rx.recv())
            .unwrap();
        assert!(thread_named("evq-lab-probe", Duration::from_secs(5)).is_some());
        assert_eq!(thread_named("no-such-thread", Duration::ZERO), None);
        drop(tx);
        let _ = t.join();
    }
}
