//! Child processes: a server that must be accepting before it counts and is
//! stopped with its whole process group, and a client run to completion whose own
//! CPU time is read from `wait4`.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, read and released: a small race with other
/// processes, acceptable on a lab machine).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A server running as a child process on a loopback port; stopped (SIGTERM, then
/// SIGKILL to its process group) on drop.
pub struct ServerProcess {
    name: String,
    child: Option<Child>,
    addr: SocketAddr,
}

impl ServerProcess {
    /// Spawns `cmd` (which must make the server listen on `127.0.0.1:port`) in its
    /// own process group on the lab's server CPU, and waits up to 10 s until it
    /// accepts connections. `logs` says what the server wrote, for the error.
    ///
    /// # Errors
    /// The spawn fails, the server exits at start, or it does not accept in time.
    pub fn start(
        name: &str,
        mut cmd: Command,
        port: u16,
        logs: &dyn Fn() -> String,
    ) -> io::Result<ServerProcess> {
        cmd.process_group(0).stdin(Stdio::null());
        crate::placement::pin_server(&mut cmd);
        let mut server = ServerProcess {
            name: name.to_string(),
            child: Some(cmd.spawn()?),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(child) = &mut server.child {
                if let Some(status) = child.try_wait()? {
                    server.child = None;
                    return Err(io::Error::other(format!(
                        "{name} exited at start ({status}){}",
                        with_logs(logs())
                    )));
                }
            }
            if TcpStream::connect_timeout(&server.addr, Duration::from_millis(200)).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{name} did not accept within 10 s{}", with_logs(logs())),
        ))
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's process and its children (nginx's workers), by pid.
    pub fn processes(&self) -> Vec<u32> {
        let Some(child) = &self.child else {
            return Vec::new();
        };
        let mut pids = vec![child.id()];
        pids.extend(crate::procinfo::children(child.id()));
        pids
    }

    /// User + system CPU time used so far by the server's processes.
    pub fn cpu_time(&self) -> Duration {
        self.processes()
            .into_iter()
            .map(crate::procinfo::process_cpu)
            .sum()
    }

    /// Anonymous resident memory of the server's processes, in bytes.
    pub fn anon_rss(&self) -> u64 {
        self.processes()
            .into_iter()
            .map(crate::procinfo::anon_rss)
            .sum()
    }

    /// Resident memory of the server's processes, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        self.processes()
            .into_iter()
            .map(crate::procinfo::vm_rss)
            .sum()
    }

    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn with_logs(logs: String) -> String {
    if logs.is_empty() {
        String::new()
    } else {
        format!(": {logs}")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_process_group(child);
        }
    }
}

/// Stops a child that leads its own process group: SIGTERM, up to 2 s for a
/// graceful exit (h2o waits for open connections), then SIGKILL to the whole
/// group, so no worker or helper outlives it.
pub fn stop_process_group(mut child: Child) {
    let group = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child's pid; it is not reaped yet.
    unsafe { libc::kill(group, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the process group our child leads.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
}

/// A finished child: its output and what `wait4` said about it.
#[derive(Debug)]
pub struct ChildOutcome {
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
    /// Exit status, or `None` when a signal ended it.
    pub exit: Option<i32>,
    /// Its user CPU time (all its threads), seconds.
    pub cpu_user_s: f64,
    /// Its system CPU time, seconds.
    pub cpu_sys_s: f64,
    /// Spawn to reap, seconds.
    pub wall_s: f64,
    /// The lab killed it at its time limit.
    pub killed: bool,
}

fn read_all(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs `program args` as a load client (on the lab's client CPU), killing it
/// after `limit`, and reaps it with `wait4` to get its own rusage (not the lab's
/// other children's).
///
/// # Errors
/// The spawn or `wait4` fails.
pub fn run_child(program: &Path, args: &[String], limit: Duration) -> io::Result<ChildOutcome> {
    let started = Instant::now();
    let mut cmd = Command::new(program);
    crate::placement::pin_client(&mut cmd);
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let out = read_all(child.stdout.take());
    let err = read_all(child.stderr.take());
    let pid = child.id() as libc::pid_t;
    let mut killed = false;
    let (status, ru) = loop {
        let mut status: libc::c_int = 0;
        // SAFETY: all-zero is a valid rusage; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, which nothing else reaps (std's `Child`
        // only waits when asked), writing into live locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            break (status, ru);
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            let _ = child.kill();
            return Err(e);
        }
        if !killed && started.elapsed() > limit {
            // Not reaped yet (wait4 returned 0), so the pid is still ours.
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall_s = started.elapsed().as_secs_f64();
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(ChildOutcome {
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        exit: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        cpu_user_s: secs(ru.ru_utime),
        cpu_sys_s: secs(ru.ru_stime),
        wall_s,
        killed,
    })
}

/// Waits until the server at `port` answers `GET uri` with 200 (10 s at most):
/// accepting is not serving (the kernel completes handshakes into the listen
/// backlog while nginx's worker may still be setting up).
///
/// # Errors
/// `TimedOut`, with the last reply or error seen.
pub fn wait_answering(port: u16, uri: &str) -> io::Result<()> {
    use std::io::Write;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < Duration::from_secs(10) {
        let attempt = (|| -> io::Result<Vec<u8>> {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(
                format!("GET {uri} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )?;
            let mut reply = Vec::new();
            s.read_to_end(&mut reply)?;
            Ok(reply)
        })();
        match attempt {
            Ok(r) if r.starts_with(b"HTTP/1.1 200") => return Ok(()),
            Ok(r) => last = String::from_utf8_lossy(&r[..r.len().min(40)]).into_owned(),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no 200 for GET {uri} within 10 s (last: {last})"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_rusage_is_its_own() {
        // A child that burns some CPU: wait4 must report it.
        let o = run_child(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done".into(),
            ],
            Duration::from_secs(60),
        )
        .expect("runs");
        assert_eq!(o.exit, Some(0));
        assert_eq!(o.stdout.trim(), "done");
        assert!(o.cpu_user_s + o.cpu_sys_s > 0.0);
        assert!(!o.killed);
        let o = run_child(
            Path::new("/bin/sh"),
            &["-c".into(), "exec sleep 30".into()],
            Duration::from_millis(100),
        )
        .expect("runs");
        assert!(o.killed && o.exit.is_none() && o.wall_s < 10.0);
    }

    #[test]
    fn a_server_that_exits_at_start_is_an_error_with_its_logs() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exit 3"]);
        let e = ServerProcess::start("sh", cmd, free_port().unwrap(), &|| "said no".into())
            .err()
            .expect("fails");
        assert!(e.to_string().contains("exited at start"), "{e}");
        assert!(e.to_string().contains("said no"), "{e}");
    }
}
