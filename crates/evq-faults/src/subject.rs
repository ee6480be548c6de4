//! A program under test, run as a child process the way a user runs it: `evq
//! serve`, `evq proxy` or the suite's scripted origin, listening on an
//! ephemeral loopback port that it names on stderr ("listening on ADDR").
//!
//! The child leads its own process group (a signal meant for the suite does not
//! reach it, and stopping it reaches anything it started), may be given a low
//! `RLIMIT_NOFILE` (soft *and* hard: `evq serve` raises its soft limit to the
//! hard one at start, so only a hard limit sticks), and is killed on drop. Its
//! stdout (the exit report) and stderr are collected by threads so a full pipe
//! never blocks it.

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a child has to say where it listens (a debug build on a crowded
/// machine can take seconds to start).
const START_LIMIT: Duration = Duration::from_secs(30);

/// Most bytes of stderr kept (the tail).
const STDERR_KEPT: usize = 64 * 1024;

/// A running child.
pub struct Subject {
    name: String,
    child: Option<Child>,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
    stdout: Option<JoinHandle<String>>,
    lines: Option<mpsc::Receiver<String>>,
}

/// How a child ended.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Exit {
    /// Its exit status, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The suite had to kill it (it outlived the bound it was given).
    pub killed: bool,
    /// From the stop request (or the wait) to its end, seconds.
    pub seconds: f64,
    /// What it printed on stdout (`evq serve`'s exit report).
    pub stdout: String,
    /// The tail of what it printed on stderr.
    pub stderr: String,
}

impl Exit {
    /// Exited by itself with status 0.
    pub fn clean(&self) -> bool {
        self.code == Some(0) && !self.killed
    }

    /// "exit 0 in 0.2 s", "killed by signal 13 (SIGPIPE)", "killed by the suite
    /// after 7.0 s".
    pub fn describe(&self) -> String {
        if self.killed {
            return format!(
                "did not exit; killed by the suite after {:.1} s",
                self.seconds
            );
        }
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c} in {:.2} s", self.seconds),
            (None, Some(s)) => format!("killed by signal {s} ({})", signal_name(s)),
            (None, None) => "ended, status unknown".into(),
        }
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "?",
    }
}

/// What a child is started with besides its arguments.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// `RLIMIT_NOFILE`, soft and hard.
    pub nofile: Option<u64>,
}

impl Subject {
    /// Starts `program args` and waits until it prints "listening on ADDR" on
    /// stderr.
    ///
    /// # Errors
    /// The spawn fails, or the child exits or stays silent for 30 s (the error
    /// holds what it printed).
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        limits: Limits,
    ) -> io::Result<Subject> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(n) = limits.nofile {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit(2) is async-signal-safe and touches no memory of
            // the parent; `lim` is a copy owned by the closure. Lowering a hard
            // limit needs no privilege.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = cmd.spawn()?;
        let (line_tx, line_rx) = mpsc::channel();
        let stdout = child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                let mut all = String::new();
                for line in BufReader::new(out).split(b'\n').map_while(Result::ok) {
                    let line = String::from_utf8_lossy(&line).into_owned();
                    all.push_str(&line);
                    all.push('\n');
                    // Nobody listening is fine: the exit keeps the whole text.
                    let _ = line_tx.send(line);
                }
                all
            })
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        if let Some(err) = child.stderr.take() {
            let keep = stderr.clone();
            std::thread::spawn(move || {
                let mut told = false;
                for line in BufReader::new(err).split(b'\n').map_while(Result::ok) {
                    if !told {
                        if let Some(a) = listening_address(&String::from_utf8_lossy(&line)) {
                            told = addr_tx.send(a).is_ok();
                        }
                    }
                    let mut k = keep.lock().unwrap_or_else(|p| p.into_inner());
                    k.extend_from_slice(&line);
                    k.push(b'\n');
                    if k.len() > STDERR_KEPT {
                        let cut = k.len() - STDERR_KEPT;
                        k.drain(..cut);
                    }
                }
            });
        }
        let started = Instant::now();
        let addr = loop {
            match addr_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(a) => break a,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait()?;
                    return Err(io::Error::other(format!(
                        "{name} exited at start ({status}): {}",
                        tail(&stderr)
                    )));
                }
            }
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{name} exited at start ({status}): {}",
                    tail(&stderr)
                )));
            }
            if started.elapsed() > START_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name} did not say where it listens within {START_LIMIT:?}: {}",
                        tail(&stderr)
                    ),
                ));
            }
        };
        Ok(Subject {
            name: name.to_string(),
            child: Some(child),
            addr,
            stderr,
            stdout,
            lines: Some(line_rx),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// What it has printed on stderr so far (the tail).
    pub fn stderr(&self) -> String {
        tail(&self.stderr)
    }

    /// Sends `signal` to it (not waiting).
    pub fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child, not reaped yet (we hold its Child
            // and reap only through it), so the pid is still ours.
            unsafe { libc::kill(c.id() as libc::pid_t, signal) };
        }
    }

    /// Sends SIGTERM and waits up to `bound` for it to exit; kills its process
    /// group after that.
    pub fn terminate(self, bound: Duration) -> Exit {
        self.signal(libc::SIGTERM);
        self.wait_exit(bound)
    }

    /// Waits up to `bound` for it to exit by itself (after a signal sent with
    /// [`Subject::signal`]); kills its process group after that.
    pub fn wait_exit(mut self, bound: Duration) -> Exit {
        let started = Instant::now();
        let mut child = self
            .child
            .take()
            .expect("a subject holds its child until it ends");
        let mut killed = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if started.elapsed() < bound => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) | Err(_) => {
                    killed = true;
                    kill_group(&child);
                    break child.wait().ok();
                }
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let stdout = self
            .stdout
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        Exit {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            killed,
            seconds,
            stdout,
            stderr: tail(&self.stderr),
        }
    }

    /// Kills it at once (SIGKILL to its group) and reaps it: a crash.
    pub fn crash(mut self) -> Exit {
        let started = Instant::now();
        let mut child = self
            .child
            .take()
            .expect("a subject holds its child until it ends");
        kill_group(&child);
        let status = child.wait().ok();
        Exit {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            killed: true,
            seconds: started.elapsed().as_secs_f64(),
            stdout: self
                .stdout
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_default(),
            stderr: tail(&self.stderr),
        }
    }

    /// The lines it prints on stdout, as they come (the scripted origin's
    /// ledger); the first call takes them, later ones get `None`. The exit's
    /// `stdout` still holds every line.
    pub fn take_lines(&mut self) -> Option<mpsc::Receiver<String>> {
        self.lines.take()
    }
}

fn kill_group(child: &Child) {
    // SAFETY: kill(2) on the process group our unreaped child leads
    // (process_group(0) at spawn).
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
}

impl Drop for Subject {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_group(&c);
            let _ = c.wait();
        }
    }
}

fn tail(buf: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

/// The address in a "… listening on ADDR …" line (`evq serve`, `evq proxy` and
/// the scripted origin all print one).
fn listening_address(line: &str) -> Option<SocketAddr> {
    let rest = line.split_once("listening on ")?.1;
    let word = rest.split([' ', ',', '(']).next()?;
    word.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_read_from_each_programs_line() {
        assert_eq!(
            listening_address(
                "evq serve: listening on 127.0.0.1:4321 (1 thread(s), epoll backend)"
            ),
            Some("127.0.0.1:4321".parse().unwrap())
        );
        assert_eq!(
            listening_address("evq proxy: listening on 127.0.0.1:80, origin 127.0.0.1:81"),
            Some("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(listening_address("evq serve: starting"), None);
    }

    #[test]
    fn a_child_that_never_listens_is_an_error_with_its_words() {
        let e = Subject::start(
            "sh",
            Path::new("/bin/sh"),
            &["-c".into(), "echo nothing here >&2; exit 3".into()],
            Limits::default(),
        )
        .err()
        .expect("no address");
        assert!(e.to_string().contains("nothing here"), "{e}");
    }

    #[test]
    fn the_limit_reaches_the_child_and_sigterm_is_reported() {
        let mut s = Subject::start(
            "sh",
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                "echo \"listening on 127.0.0.1:9 $(ulimit -n) $(ulimit -Hn)\" >&2; exec sleep 30"
                    .into(),
            ],
            Limits { nofile: Some(77) },
        )
        .unwrap();
        assert!(s.alive());
        // The line is in the kept stderr once the address was read from it.
        let until = Instant::now() + Duration::from_secs(10);
        while !s.stderr().contains("77 77") && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(s.stderr().contains("77 77"), "{}", s.stderr());
        let exit = s.terminate(Duration::from_secs(10));
        assert_eq!(exit.signal, Some(libc::SIGTERM), "{exit:?}");
        assert!(!exit.clean());
    }
}
