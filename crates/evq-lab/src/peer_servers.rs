//! The web servers evq is measured beside — nginx, h2o and lighttpd from Debian's
//! packages — started on a loopback port with a configuration written for the
//! lab, serving the same files as `evq serve --root`, and stopped on drop.
//!
//! # What each configuration has to undo
//!
//! Every server ships with defaults that would decide a cold-connection run before
//! the event mechanism does:
//!
//! - **nginx**: `worker_connections 512` and the 1024-descriptor soft limit;
//!   `keepalive_timeout 75s` and `keepalive_requests 1000` (1.19.10+) close hot
//!   connections mid-run. Raised to the process's descriptor budget, 600 s and
//!   10^9; `client_header_timeout 60s` would close a cold connection that sends
//!   nothing, so 600 s. `access_log off` (each server logs nothing: logging is not
//!   the subject). `sendfile on`, `tcp_nopush on` and `open_file_cache` (revalidated
//!   every second, as `evq serve --root` does) as a tuned site has them: without
//!   the cache nginx opens, stats and closes the file on every request.
//! - **h2o**: `max-connections: 1024`, and `http1-request-timeout: 10` closes an
//!   idle keep-alive connection after 10 s — the cold connections would vanish.
//!   h2o refuses to run as root without `user:`, so it runs as `nobody` and the
//!   document root is world-readable.
//! - **lighttpd**: `server.max-keep-alive-idle = 5` and `max-read-idle = 60` close
//!   cold connections; `max-keep-alive-requests = 1000` closes hot ones;
//!   `server.max-fds` defaults to 4096 and `max-connections` to a third of it.
//!
//! All three run with as many workers as asked (the lab uses one, to compare one
//! event loop with one event loop) and in the foreground, so the child process is
//! the server (nginx's workers are its children; [`PeerServer::processes`] finds
//! them for memory and CPU accounting).

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server the lab compares `evq serve` with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PeerServerKind {
    /// nginx (Debian's `nginx-light`).
    Nginx,
    /// h2o.
    H2o,
    /// lighttpd.
    Lighttpd,
}

impl PeerServerKind {
    /// Every peer server, in report order.
    pub const ALL: [PeerServerKind; 3] = [
        PeerServerKind::Nginx,
        PeerServerKind::H2o,
        PeerServerKind::Lighttpd,
    ];

    /// Short name (also the binary's name).
    pub fn name(self) -> &'static str {
        match self {
            PeerServerKind::Nginx => "nginx",
            PeerServerKind::H2o => "h2o",
            PeerServerKind::Lighttpd => "lighttpd",
        }
    }

    fn binary(self) -> Option<PathBuf> {
        ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
            .iter()
            .map(|d| Path::new(d).join(self.name()))
            .find(|p| p.is_file())
    }

    /// Whether the server is installed; `Err` says how to install it.
    pub fn available(self) -> Result<(), String> {
        match self.binary() {
            Some(_) => Ok(()),
            None => Err(format!(
                "{} is not installed (scripts/install-peers.sh installs it)",
                self.name()
            )),
        }
    }
}

impl std::fmt::Display for PeerServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A directory of files every server (and `evq serve --root`) serves alike.
pub struct Docroot {
    dir: PathBuf,
}

impl Docroot {
    /// Creates a world-readable directory holding `/{size}.bin` (bytes of `x`)
    /// for each size.
    pub fn with_sizes(sizes: &[usize]) -> io::Result<Docroot> {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch_dir("docroot")?;
        for &size in sizes {
            std::fs::write(dir.join(Docroot::file_name(size)), vec![b'x'; size])?;
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        Ok(Docroot { dir })
    }

    /// The file name for a reply size.
    pub fn file_name(size: usize) -> String {
        format!("{size}.bin")
    }

    /// The request path for a reply size.
    pub fn uri(size: usize) -> String {
        format!("/{}", Docroot::file_name(size))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Docroot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch_dir(what: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("evq-lab-{}-{what}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    // The servers drop privileges to `nobody` and must still reach their files.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// A free loopback port (bound, read and released: a small race with other
/// processes, acceptable on a lab machine).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running peer server; stopped (SIGTERM, then SIGKILL) on drop.
pub struct PeerServer {
    kind: PeerServerKind,
    child: Option<Child>,
    addr: SocketAddr,
    dir: PathBuf,
}

impl PeerServer {
    /// Starts `kind` with `workers` worker processes/threads serving `root` on a
    /// free loopback port, and waits until it accepts connections.
    ///
    /// # Errors
    /// The server is not installed, refuses its configuration, or does not
    /// accept within 10 s (its error log is quoted).
    pub fn start(kind: PeerServerKind, root: &Docroot, workers: usize) -> io::Result<PeerServer> {
        let binary = kind.binary().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, kind.available().unwrap_err())
        })?;
        let port = free_port()?;
        let dir = scratch_dir(kind.name())?;
        {
            // h2o writes its pid file after dropping to `nobody`.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
        }
        let fds = crate::resources::raise_nofile()?.min(1 << 20);
        let workers = workers.max(1);
        let root_dir = root.path().display().to_string();
        let d = dir.display().to_string();
        let mut cmd = Command::new(&binary);
        match kind {
            PeerServerKind::Nginx => {
                let conf = format!(
                    "daemon off;\nmaster_process on;\nuser nobody nogroup;\n\
                     worker_processes {workers};\nworker_rlimit_nofile {fds};\n\
                     pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
                     events {{ worker_connections {conns}; use epoll; }}\n\
                     http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  tcp_nodelay on;\n\
                       keepalive_timeout 600s;\n  keepalive_requests 1000000000;\n\
                       open_file_cache max=1024 inactive=60s;\n  open_file_cache_valid 1s;\n\
                       client_header_timeout 600s;\n\
                       client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
                       fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                       default_type application/octet-stream;\n\
                       server {{ listen 127.0.0.1:{port} backlog=4096; root {root_dir}; }}\n}}\n",
                    conns = fds.saturating_sub(64),
                );
                std::fs::write(dir.join("nginx.conf"), conf)?;
                cmd.arg("-c")
                    .arg(dir.join("nginx.conf"))
                    .arg("-p")
                    .arg(&dir)
                    .arg("-e")
                    .arg(dir.join("error.log"));
            }
            PeerServerKind::H2o => {
                let conf = format!(
                    "user: nobody\npid-file: {d}/h2o.pid\nerror-log: {d}/error.log\n\
                     num-threads: {workers}\nmax-connections: {fds}\n\
                     http1-request-timeout: 600\n\
                     listen:\n  host: 127.0.0.1\n  port: {port}\n\
                     hosts:\n  default:\n    paths:\n      /:\n        file.dir: {root_dir}\n",
                );
                std::fs::write(dir.join("h2o.conf"), conf)?;
                cmd.arg("-c").arg(dir.join("h2o.conf"));
            }
            PeerServerKind::Lighttpd => {
                let conf = format!(
                    "server.document-root = \"{root_dir}\"\nserver.bind = \"127.0.0.1\"\n\
                     server.port = {port}\nserver.username = \"nobody\"\nserver.groupname = \"nogroup\"\n\
                     server.pid-file = \"{d}/lighttpd.pid\"\nserver.errorlog = \"{d}/error.log\"\n\
                     server.max-worker = {extra}\nserver.max-fds = {fds}\n\
                     server.max-connections = {conns}\nserver.max-keep-alive-requests = 65535\n\
                     server.max-keep-alive-idle = 600\nserver.max-read-idle = 600\n\
                     server.max-write-idle = 600\nserver.event-handler = \"linux-sysepoll\"\n\
                     server.network-backend = \"sendfile\"\n\
                     mimetype.assign = (\".bin\" => \"application/octet-stream\")\n",
                    // max-worker 0 is one process; n > 0 forks n workers.
                    extra = if workers > 1 { workers } else { 0 },
                    conns = fds.saturating_sub(64) / 2,
                );
                std::fs::write(dir.join("lighttpd.conf"), conf)?;
                cmd.arg("-D").arg("-f").arg(dir.join("lighttpd.conf"));
            }
        }
        // Its own process group: on drop the whole group (nginx's workers, h2o's
        // backtrace helper) goes, whatever the leader did with SIGTERM.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        crate::placement::pin_server(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log"))?)
            .spawn()?;
        let mut server = PeerServer {
            kind,
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(child) = &mut self.child {
                if let Some(status) = child.try_wait()? {
                    self.child = None;
                    return Err(io::Error::other(format!(
                        "{} exited at start ({status}): {}",
                        self.kind,
                        self.logs()
                    )));
                }
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{} did not accept within 10 s: {}", self.kind, self.logs()),
        ))
    }

    fn logs(&self) -> String {
        ["stderr.log", "error.log"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .collect::<Vec<_>>()
            .join(" | ")
            .trim()
            .chars()
            .take(600)
            .collect()
    }

    /// Which server this is.
    pub fn kind(&self) -> PeerServerKind {
        self.kind
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
        let root = child.id();
        let mut pids = vec![root];
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for e in entries.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                // Field 4 (after the parenthesised command) is the parent pid.
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok());
                if ppid == Some(root) {
                    pids.push(pid);
                }
            }
        }
        pids
    }

    /// Resident memory of the server's processes, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        self.processes()
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .filter_map(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .sum()
    }

    /// User + system CPU time used so far by the server's processes.
    pub fn cpu_time(&self) -> Duration {
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let ticks: u64 = self
            .processes()
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .filter_map(|stat| {
                let rest = stat.rsplit_once(')')?.1;
                let f: Vec<&str> = rest.split_whitespace().collect();
                // utime and stime are fields 14 and 15: 12 and 13 after ')'.
                Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
            })
            .sum();
        Duration::from_millis(ticks * 1000 / hz)
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_process_group(child);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Stops a child that leads its own process group: SIGTERM, up to 2 s for a
/// graceful exit (h2o waits for open connections), then SIGKILL to the whole
/// group, so no worker or helper outlives it.
pub(crate) fn stop_process_group(mut child: Child) {
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
