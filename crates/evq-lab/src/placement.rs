//! Where the lab runs servers and clients: on different CPUs, when there are two.
//!
//! A server and its load client on a 2-core machine otherwise share whichever core
//! the scheduler picks from moment to moment; migrations and the odd stretch on
//! one core spread the results. With two or more CPUs allowed, peer-comparison
//! servers (`evq serve` as a child, nginx, h2o, lighttpd, with all their workers)
//! run on the first allowed CPU and the client (this process's load threads, or
//! httperf/wrk/`evq load` children) on the second. Cold-connection holders float.
//! `EVQ_LAB_PIN=0` turns it off.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The CPUs given to servers and to clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// CPU for servers.
    pub server: usize,
    /// CPU for load clients.
    pub client: usize,
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// The placement to use, or `None` with fewer than two CPUs allowed (or
/// `EVQ_LAB_PIN=0`).
///
/// Decided once, from the CPUs the process was given at its first call: a thread
/// pinned by [`ThreadPin`] sees only its one CPU and would otherwise conclude that
/// there is nothing to place.
pub fn placement() -> Option<Placement> {
    static PLACEMENT: std::sync::OnceLock<Option<Placement>> = std::sync::OnceLock::new();
    *PLACEMENT.get_or_init(|| {
        if std::env::var("EVQ_LAB_PIN").as_deref() == Ok("0") {
            return None;
        }
        match allowed_cpus_at_start()[..] {
            [server, client, ..] => Some(Placement { server, client }),
            _ => None,
        }
    })
}

/// Makes `cmd` a server's process: on the server CPU, if there is a placement.
pub fn pin_server(cmd: &mut Command) {
    if let Some(p) = placement() {
        pin_command(cmd, p.server);
    }
}

/// Makes `cmd` a load client's process: on the client CPU, if there is a placement.
pub fn pin_client(cmd: &mut Command) {
    if let Some(p) = placement() {
        pin_command(cmd, p.client);
    }
}

/// Pins the calling thread (and the threads it starts meanwhile) to the client
/// CPU, if there is a placement, until the guard drops.
pub fn pin_this_thread_as_client() -> ThreadPin {
    ThreadPin::to(placement().map(|p| p.client))
}

/// One line for a report's notes.
pub fn describe() -> String {
    match placement() {
        Some(p) => format!(
            "Servers pinned to CPU {}, the load client to CPU {} (sched_setaffinity; cold-connection holders unpinned).",
            p.server, p.client
        ),
        None => "Servers and clients unpinned (fewer than two CPUs allowed, or EVQ_LAB_PIN=0).".into(),
    }
}

/// The CPUs a server of `threads` worker threads gets beside a pinned client:
/// every allowed CPU but the client's, as many as there are threads (so on a
/// 2-CPU machine all its threads share the one), or `None` unplaced.
pub fn server_cpus(threads: usize) -> Option<Vec<usize>> {
    let p = placement()?;
    let mut cpus: Vec<usize> = allowed_cpus_at_start()
        .into_iter()
        .filter(|&c| c != p.client)
        .take(threads.max(1))
        .collect();
    if cpus.is_empty() {
        cpus.push(p.server);
    }
    Some(cpus)
}

fn allowed_cpus_at_start() -> Vec<usize> {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(allowed_cpus).clone()
}

/// Pins thread `tid` (of this process) to `cpu`.
///
/// # Errors
/// `sched_setaffinity`'s.
pub fn pin_thread(tid: libc::pid_t, cpu: usize) -> io::Result<()> {
    let set = set_of(cpu);
    // SAFETY: `set` is a live cpu_set_t of the size passed; a bad tid is an
    // error, not undefined behaviour.
    if unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_of(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: callers pass CPUs from sched_getaffinity, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    set
}

/// Makes `cmd`'s process (and so all its threads and children) run on `cpu`.
pub fn pin_command(cmd: &mut Command, cpu: usize) {
    let set = set_of(cpu);
    // SAFETY: the closure only calls sched_setaffinity, which is async-signal-safe,
    // on a set copied into it before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Pins the calling thread (and threads it spawns meanwhile) to a CPU; the old
/// mask comes back on drop.
pub struct ThreadPin {
    old: Option<libc::cpu_set_t>,
}

impl ThreadPin {
    /// Pins the calling thread to `cpu`, if given.
    pub fn to(cpu: Option<usize>) -> ThreadPin {
        let Some(cpu) = cpu else {
            return ThreadPin { old: None };
        };
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `old` is a live cpu_set_t of `size` bytes.
        if unsafe { libc::sched_getaffinity(0, size, &mut old) } != 0 {
            return ThreadPin { old: None };
        }
        let set = set_of(cpu);
        // SAFETY: `set` is a live cpu_set_t of `size` bytes.
        if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
            return ThreadPin { old: None };
        }
        ThreadPin { old: Some(old) }
    }
}

impl Drop for ThreadPin {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            // SAFETY: `old` is a live cpu_set_t of the size passed.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_pin_pins_and_restores() {
        let before = allowed_cpus();
        let Some(&cpu) = before.last() else { return };
        {
            let _pin = ThreadPin::to(Some(cpu));
            assert_eq!(allowed_cpus(), vec![cpu]);
        }
        assert_eq!(allowed_cpus(), before);
    }

    #[test]
    fn placement_is_the_same_from_a_pinned_thread() {
        let before = placement();
        let _pin = pin_this_thread_as_client();
        assert_eq!(placement(), before);
    }

    #[test]
    fn pinned_child_runs_where_it_was_put() {
        let Some(&cpu) = allowed_cpus().last() else {
            return;
        };
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        pin_command(&mut cmd, cpu);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().last(),
            Some(cpu.to_string().as_str())
        );
    }
}
