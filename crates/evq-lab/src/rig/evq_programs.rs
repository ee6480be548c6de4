//! `evq serve` and `evq dead` as child processes, started from the `evq` program
//! that [`Tools`] found. The command lines are written here and nowhere else.

use super::child::{free_port, ServerProcess};
use super::peer_servers::Docroot;
use crate::tools::Tools;
use evq::BackendKind;
use std::io;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};

/// Where cold (idle) connections come from: a second loopback address, so they
/// neither share the load client's ephemeral ports nor are mistaken for its
/// connections when the lab counts what a server holds.
pub const COLD_SOURCE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// `evq serve` as a child process (one thread, files from a docroot), so that its
/// memory and CPU are its own, as the peer servers' are.
pub struct EvqServeChild;

impl EvqServeChild {
    /// Starts `evq serve --backend B --threads 1 --root DOCROOT` on a free
    /// loopback port, cold-friendly timeouts, and waits until it accepts.
    ///
    /// # Errors
    /// No `evq` program, or the server does not come up.
    pub fn start(tools: &Tools, backend: BackendKind, root: &Docroot) -> io::Result<ServerProcess> {
        Self::start_io(tools, Some(backend), root)
    }

    /// The same server on io_uring completions (`--io completion`).
    ///
    /// # Errors
    /// No `evq` program, or the server does not come up (a kernel without the
    /// completion API among the reasons).
    pub fn start_completion(tools: &Tools, root: &Docroot) -> io::Result<ServerProcess> {
        Self::start_io(tools, None, root)
    }

    /// `backend` for readiness, `None` for completions.
    fn start_io(
        tools: &Tools,
        backend: Option<BackendKind>,
        root: &Docroot,
    ) -> io::Result<ServerProcess> {
        let port = free_port()?;
        let mut cmd = Command::new(tools.evq()?);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
        match backend {
            Some(b) => cmd.args(["--backend", b.name()]),
            None => cmd.args(["--io", "completion"]),
        };
        cmd.args(["--threads", "1"])
            .arg("--root")
            .arg(root.path())
            .args(["--idle-timeout", "600", "--header-timeout", "600"])
            .args(["--grace", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        ServerProcess::start("evq serve", cmd, port, &String::new)
    }
}

/// `evq dead`: a child holding idle connections to a server from
/// [`COLD_SOURCE`]; killed on drop.
pub struct DeadConnections(Option<Child>);

impl DeadConnections {
    /// Opens `n` idle connections to `127.0.0.1:port`, held for `seconds` at most
    /// (nothing to start when `n` is 0).
    ///
    /// # Errors
    /// No `evq` program, or the spawn fails.
    pub fn start(tools: &Tools, port: u16, n: usize, seconds: u64) -> io::Result<DeadConnections> {
        if n == 0 {
            return Ok(DeadConnections(None));
        }
        let child = Command::new(tools.evq()?)
            .args(["dead", "--server", "127.0.0.1", "--port", &port.to_string()])
            .args(["--connections", &n.to_string()])
            .args(["--duration", &seconds.to_string()])
            .args(["--source", &COLD_SOURCE.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(DeadConnections(Some(child)))
    }
}

impl Drop for DeadConnections {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
