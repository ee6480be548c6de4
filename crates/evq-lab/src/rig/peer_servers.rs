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

use super::child::{free_port, ServerProcess};
use crate::tools::Tools;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What a comparison changes in nginx's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// The listen backlog (default 4096).
    pub backlog: Option<u32>,
    /// Lines added to the `http` block (`gzip on; …`, `limit_conn …`).
    pub http: String,
}

/// A server the lab compares `evq serve` with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// Whether the server is installed; `Err` says how to install it.
    pub fn available(self) -> Result<(), String> {
        match Tools::find(self.name()) {
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

/// A running peer server; stopped (SIGTERM, then SIGKILL to its process group) on
/// drop, its scratch directory removed.
pub struct PeerServer {
    kind: PeerServerKind,
    server: Option<ServerProcess>,
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
        PeerServer::start_tuned(kind, root, workers, &Tuning::default())
    }

    /// [`PeerServer::start`] with `tuning` changed from the lab's
    /// configuration (nginx only; the others refuse a tuning).
    ///
    /// # Errors
    /// As [`PeerServer::start`]; `InvalidInput` for a tuning of h2o or
    /// lighttpd.
    pub fn start_tuned(
        kind: PeerServerKind,
        root: &Docroot,
        workers: usize,
        tuning: &Tuning,
    ) -> io::Result<PeerServer> {
        if kind != PeerServerKind::Nginx && *tuning != Tuning::default() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("only nginx takes a tuning, not {}", kind.name()),
            ));
        }
        let binary = Tools::find(kind.name()).ok_or_else(|| {
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
                       {http}\n\
                       server {{ listen 127.0.0.1:{port} backlog={backlog}; root {root_dir}; }}\n}}\n",
                    conns = fds.saturating_sub(64),
                    http = tuning.http,
                    backlog = tuning.backlog.unwrap_or(4096),
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
        // Its own process group (ServerProcess): on drop the whole group (nginx's
        // workers, h2o's backtrace helper) goes, whatever the leader did with SIGTERM.
        cmd.stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log"))?);
        let logs = || logs(&dir);
        let server = ServerProcess::start(kind.name(), cmd, port, &logs);
        match server {
            Ok(server) => Ok(PeerServer {
                kind,
                server: Some(server),
                dir,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Which server this is.
    pub fn kind(&self) -> PeerServerKind {
        self.kind
    }

    /// The running process.
    pub fn process(&self) -> &ServerProcess {
        self.server.as_ref().expect("present until drop")
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.process().addr()
    }

    /// The server's process and its children (nginx's workers), by pid.
    pub fn processes(&self) -> Vec<u32> {
        self.process().processes()
    }

    /// Resident memory of the server's processes, in bytes.
    pub fn rss_bytes(&self) -> u64 {
        self.process().rss_bytes()
    }

    /// User + system CPU time used so far by the server's processes.
    pub fn cpu_time(&self) -> Duration {
        self.process().cpu_time()
    }
}

/// What the server wrote (its stderr and error log), for an error message.
fn logs(dir: &Path) -> String {
    ["stderr.log", "error.log"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .collect::<Vec<_>>()
        .join(" | ")
        .trim()
        .chars()
        .take(600)
        .collect()
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        // The process first: it may still write into its directory.
        drop(self.server.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
