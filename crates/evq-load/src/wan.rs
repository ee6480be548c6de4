//! WAN emulation: client network namespaces joined to the host by veth pairs, each
//! with a delay [`Relay`] on the host side in front of the real server, so load comes
//! from "remote" hosts with a chosen round-trip time and bandwidth.
//!
//! Only namespaces this code made are touched: names are `evqlab-<pid>-<i>`, and
//! [`NetnsLab`]'s `Drop` deletes exactly those (and their veth pairs), on success, on
//! error part-way through creation, and on unwinding. Needs root and `ip` (iproute2).

use crate::relay::{LinkSpec, Relay, RelayConfig, RelayReport};
use serde::Serialize;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// One client namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Namespace {
    /// Its name (`evqlab-<pid>-<i>`).
    pub name: String,
    /// The host end of its veth pair.
    pub host_if: String,
    /// The host's address on that link (where its relay listens).
    pub host_addr: Ipv4Addr,
    /// The namespace's address (its default route goes to `host_addr`).
    pub ns_addr: Ipv4Addr,
}

/// A set of client namespaces, removed again when dropped.
#[derive(Debug)]
pub struct NetnsLab {
    spaces: Vec<Namespace>,
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl NetnsLab {
    /// Creates `count` namespaces (at most 250), each with a veth pair on its own /24
    /// (`10.<64 + pid % 128>.<i>.0/24`, host `.1`, namespace `.2`).
    ///
    /// # Errors
    /// The first `ip` failure (not root, no netns support, a name in use); whatever
    /// was made before it is removed.
    pub fn create(count: usize) -> io::Result<NetnsLab> {
        if count == 0 || count > 250 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "namespaces must be 1..=250",
            ));
        }
        let pid = std::process::id();
        let octet2 = 64 + (pid % 128) as u8;
        let mut lab = NetnsLab { spaces: Vec::new() };
        for i in 0..count {
            let ns = Namespace {
                name: format!("evqlab-{pid}-{i}"),
                host_if: format!("evql{:x}h{i}", pid & 0xffff),
                host_addr: Ipv4Addr::new(10, octet2, i as u8, 1),
                ns_addr: Ipv4Addr::new(10, octet2, i as u8, 2),
            };
            let peer = format!("evql{:x}n{i}", pid & 0xffff);
            ip(&["netns", "add", &ns.name])?;
            // Registered before the link exists, so Drop removes a half-made one too.
            lab.spaces.push(ns.clone());
            ip(&[
                "link",
                "add",
                &ns.host_if,
                "type",
                "veth",
                "peer",
                "name",
                &peer,
            ])?;
            ip(&["link", "set", &peer, "netns", &ns.name])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/24", ns.host_addr),
                "dev",
                &ns.host_if,
            ])?;
            ip(&["link", "set", &ns.host_if, "up"])?;
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &ns.name, "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            inside(&["addr", "add", &format!("{}/24", ns.ns_addr), "dev", &peer])?;
            inside(&["link", "set", &peer, "up"])?;
            inside(&["link", "set", "lo", "up"])?;
            inside(&["route", "add", "default", "via", &ns.host_addr.to_string()])?;
        }
        Ok(lab)
    }

    /// The namespaces.
    pub fn namespaces(&self) -> &[Namespace] {
        &self.spaces
    }

    /// A command that runs `program args` inside namespace `i` (`ip netns exec`).
    pub fn command(&self, i: usize, program: &str, args: &[String]) -> Option<Command> {
        let ns = self.spaces.get(i)?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.name, program]).args(args);
        Some(c)
    }
}

impl Drop for NetnsLab {
    fn drop(&mut self) {
        for ns in self.spaces.drain(..).rev() {
            // Deleting the host end removes its peer; a missing link is fine.
            let _ = ip(&["link", "del", &ns.host_if]);
            let _ = ip(&["netns", "del", &ns.name]);
        }
    }
}

/// What [`run_wan`] sets up and runs.
#[derive(Clone, Debug, PartialEq)]
pub struct WanConfig {
    /// Client namespaces to create.
    pub namespaces: usize,
    /// The real server (as seen from the host).
    pub server: String,
    /// The real server's port.
    pub port: u16,
    /// Port each namespace's relay listens on (at its host address).
    pub relay_port: u16,
    /// Client → server impairment.
    pub to_server: LinkSpec,
    /// Server → client impairment.
    pub to_client: LinkSpec,
    /// Hard cap: commands still running then are killed; without a command, how
    /// long to keep the namespaces up.
    pub duration: Duration,
    /// Command to run in every namespace; `{host}` and `{port}` become that
    /// namespace's relay address, `{ns}` its name, `{i}` its index.
    pub command: Vec<String>,
}

/// What a WAN run did.
#[derive(Clone, Debug, Serialize)]
pub struct WanReport {
    /// The namespaces used (removed again by now).
    pub namespaces: Vec<Namespace>,
    /// Relay counters per namespace.
    pub relays: Vec<RelayReport>,
    /// Exit codes of the commands (`None`: killed at the cap or by a signal).
    pub exit_codes: Vec<Option<i32>>,
    /// Seconds the run took.
    pub duration_s: f64,
}

/// Runs `evq wan`: namespaces up, one relay each, the command in each namespace
/// (or just a wait), then everything torn down. Children are killed at the cap.
///
/// # Errors
/// Bad arguments, namespace creation, relay binding, or spawning the command.
pub fn run_wan(cfg: &WanConfig) -> io::Result<WanReport> {
    let upstream = crate::config::resolve(&cfg.server, cfg.port)?;
    let start = Instant::now();
    let lab = NetnsLab::create(cfg.namespaces)?;
    let stop = AtomicBool::new(false);
    let mut relays = Vec::new();
    for ns in lab.namespaces() {
        relays.push(Relay::bind(&RelayConfig {
            listen: SocketAddr::new(ns.host_addr.into(), cfg.relay_port),
            upstream,
            to_server: cfg.to_server,
            to_client: cfg.to_client,
        })?);
    }
    let (exit_codes, relay_reports) = std::thread::scope(|s| -> io::Result<_> {
        let handles: Vec<_> = relays
            .into_iter()
            .map(|r| s.spawn(|| r.run(&stop)))
            .collect();
        let result = run_children(&lab, cfg);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut reports = Vec::new();
        for h in handles {
            reports.push(
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("relay thread panicked")))?,
            );
        }
        Ok((result?, reports))
    })?;
    let namespaces = lab.namespaces().to_vec();
    drop(lab);
    Ok(WanReport {
        namespaces,
        relays: relay_reports,
        exit_codes,
        duration_s: start.elapsed().as_secs_f64(),
    })
}

fn run_children(lab: &NetnsLab, cfg: &WanConfig) -> io::Result<Vec<Option<i32>>> {
    let deadline = Instant::now() + cfg.duration;
    if cfg.command.is_empty() {
        for ns in lab.namespaces() {
            eprintln!(
                "namespace {} ({}): relay at {}:{} -> {}:{}",
                ns.name, ns.ns_addr, ns.host_addr, cfg.relay_port, cfg.server, cfg.port
            );
        }
        while Instant::now() < deadline && !evq_os::stop_requested() {
            std::thread::sleep(Duration::from_millis(100));
        }
        return Ok(Vec::new());
    }
    let mut children: Vec<Child> = Vec::new();
    for (i, ns) in lab.namespaces().iter().enumerate() {
        let argv: Vec<String> = cfg.command[1..]
            .iter()
            .map(|a| {
                a.replace("{host}", &ns.host_addr.to_string())
                    .replace("{port}", &cfg.relay_port.to_string())
                    .replace("{ns}", &ns.name)
                    .replace("{i}", &i.to_string())
            })
            .collect();
        let Some(mut cmd) = lab.command(i, &cfg.command[0], &argv) else {
            continue;
        };
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
    }
    let mut codes: Vec<Option<Option<i32>>> = vec![None; children.len()];
    while codes.iter().any(|c| c.is_none()) {
        let out_of_time = Instant::now() >= deadline || evq_os::stop_requested();
        for (i, c) in children.iter_mut().enumerate() {
            if codes[i].is_some() {
                continue;
            }
            if out_of_time {
                let _ = c.kill();
            }
            if let Ok(Some(st)) = c.try_wait() {
                codes[i] = Some(st.code());
            } else if out_of_time {
                codes[i] = Some(c.wait().ok().and_then(|st| st.code()));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(codes.into_iter().map(|c| c.flatten()).collect())
}
