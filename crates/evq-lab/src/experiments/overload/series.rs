//! The servers an overload sweep runs against, started and placed for a rig:
//! `evq serve` and `evq proxy` in this process (on readiness events and on
//! completions), nginx as a process of its own. Each gives its address, what a client asks it for, and at the end
//! its own counts (nginx keeps none the lab can read: zeros).

use super::measure::{
    policy, BUDGET_PERIOD, BUDGET_RUNTIME, NGINX, NGINX_DEFAULT, NGINX_LIMIT_CONN, NGINX_TUNED,
    NGINX_WORK_BYTES, NGINX_WORK_FILE, PROXY, PROXY_COMPLETION, QUOTA_RIG, REPLY_SIZE, SERVE,
    SERVE_COMPLETION, SMALL_BACKLOG, WORK, WORK_RIG,
};
use crate::rig::{Docroot, PeerServer, PeerServerKind, Tuning};
use evq::BackendKind;
use evq_http::{
    CompletionServerHandle, IoModel, OverloadConfig, OverloadPolicy, ProxyConfig, ProxyHandle,
    ServeConfig, ServerHandle,
};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// What a series runs on.
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a> {
    /// [`WORK_RIG`] or [`QUOTA_RIG`].
    pub rig: &'a str,
    /// The server: [`SERVE`], [`SERVE_COMPLETION`], [`PROXY`],
    /// [`PROXY_COMPLETION`] or [`NGINX`].
    pub server: &'a str,
    /// The backend (nginx: epoll, its own).
    pub kind: BackendKind,
    /// Worker threads.
    pub threads: usize,
}

impl Shape<'_> {
    /// The policy whose peak goodput is this series' capacity: no control
    /// (nginx: as the lab configures it).
    pub fn baseline(&self) -> &'static str {
        if self.server == NGINX {
            NGINX_DEFAULT
        } else {
            "none"
        }
    }
}

/// The server's own counts at the end of a point.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerSide {
    /// Connections accepted.
    pub accepts: u64,
    /// Connections admitted.
    pub admitted: u64,
    /// Refusals by seed 001, codel, deadline and gate's queue resets.
    pub refused: u64,
    /// Connections reset in the listen queue.
    pub flushed: u64,
    /// Admitted after waiting over the late bound.
    pub served_late: u64,
    /// Responses sent.
    pub responses: u64,
}

enum Inner {
    Serve(ServerHandle),
    ServeCompletion(CompletionServerHandle),
    Proxy(ProxyHandle, ServerHandle),
    Nginx(PeerServer, Docroot),
}

/// A started server.
pub struct Running {
    inner: Inner,
    addr: SocketAddr,
    /// Why the rig could not place it as it wants, if it could not.
    pub refused: Option<String>,
}

impl Running {
    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What a client asks for: (target, extra header lines).
    pub fn request(&self) -> (String, Vec<String>) {
        match self.inner {
            Inner::Nginx(..) => (
                format!("/{NGINX_WORK_FILE}"),
                vec!["Accept-Encoding: gzip".into()],
            ),
            _ => ("/".into(), Vec::new()),
        }
    }

    /// Stops the server and returns its counts.
    ///
    /// # Errors
    /// The error that ended a worker or the relay.
    pub fn finish(self) -> io::Result<ServerSide> {
        match self.inner {
            Inner::Serve(server) => {
                server.request_stop();
                let s = server.wait()?;
                Ok(ServerSide {
                    accepts: s.accepts,
                    admitted: s.admitted,
                    refused: s.refused.total(),
                    flushed: s.refused.flushed,
                    served_late: s.served_late,
                    responses: s.responses.values().sum(),
                })
            }
            Inner::ServeCompletion(server) => {
                let s = server.stop()?;
                // It refuses only by not listening (the kernel resets those
                // clients): every connection it accepted, it serves.
                Ok(ServerSide {
                    accepts: s.accepted,
                    admitted: s.accepted,
                    responses: s.requests,
                    ..ServerSide::default()
                })
            }
            Inner::Proxy(proxy, origin) => {
                proxy.request_stop();
                let p = proxy.wait()?;
                origin.stop();
                let o = &p.overload;
                Ok(ServerSide {
                    accepts: p.accepts,
                    admitted: o.admitted,
                    refused: o.refused.total(),
                    flushed: o.refused.flushed,
                    served_late: o.served_late,
                    responses: p.relayed + p.bad_gateway + p.gateway_timeout + p.bad_requests,
                })
            }
            Inner::Nginx(nginx, root) => {
                drop(nginx);
                drop(root);
                Ok(ServerSide::default())
            }
        }
    }
}

/// `evq serve` for a point on `rig`: `threads` workers (own sockets), the
/// policy, and the client's timeout as both the deadline and the late bound.
///
/// # Errors
/// An unknown policy.
pub fn serve_config(
    rig: &str,
    kind: BackendKind,
    threads: usize,
    name: &str,
    timeout_s: f64,
) -> io::Result<ServeConfig> {
    Ok(ServeConfig {
        backlog: if name == "backlog64" {
            SMALL_BACKLOG
        } else {
            4096
        },
        threads,
        accept: evq_http::AcceptMode::Reuseport,
        overload: overload_config(name, timeout_s)?,
        grace: Duration::from_millis(100),
        work: if rig == WORK_RIG {
            WORK
        } else {
            Duration::ZERO
        },
        ..crate::rig::in_process::one_thread(kind, REPLY_SIZE)
    })
}

fn overload_config(name: &str, timeout_s: f64) -> io::Result<OverloadConfig> {
    let timeout = Duration::from_secs_f64(timeout_s);
    let p = policy(name)?;
    Ok(OverloadConfig {
        policy: p,
        deadline: (p != OverloadPolicy::None).then_some(timeout),
        late_after: timeout,
        ..OverloadConfig::default()
    })
}

/// Starts `shape`'s server under `name` (a policy, or nginx's configuration)
/// and places it for the rig.
///
/// # Errors
/// An unknown name or server, or the server's own start error.
pub fn start(shape: Shape, name: &str, timeout_s: f64) -> io::Result<Running> {
    let Shape {
        rig,
        server,
        kind,
        threads,
    } = shape;
    match server {
        SERVE | SERVE_COMPLETION => {
            let mut cfg = serve_config(rig, kind, threads, name, timeout_s)?;
            let (addr, inner) = if server == SERVE {
                let s = ServerHandle::start(&cfg)?;
                (s.addr(), Inner::Serve(s))
            } else {
                // The completion server's pulse takes no deadline.
                cfg.overload.deadline = None;
                let s = CompletionServerHandle::start(&cfg)?;
                (s.addr(), Inner::ServeCompletion(s))
            };
            // Both name their threads alike.
            let names: Vec<String> = (0..threads).map(|i| format!("evq-serve-{i}")).collect();
            let refused = place(rig, &names);
            Ok(Running {
                addr,
                inner,
                refused,
            })
        }
        PROXY | PROXY_COMPLETION => {
            let completion = server == PROXY_COMPLETION;
            let origin =
                ServerHandle::start(&crate::rig::in_process::one_thread(kind, REPLY_SIZE))?;
            let mut overload = overload_config(name, timeout_s)?;
            if completion {
                // The completion relay's pulse takes no deadline.
                overload.deadline = None;
            }
            let cfg = ProxyConfig {
                listen: "127.0.0.1:0".parse().expect("literal address"),
                origin: origin.addr(),
                backend: (!completion).then_some(kind),
                backlog: if name == "backlog64" {
                    SMALL_BACKLOG
                } else {
                    4096
                },
                overload,
                grace: Duration::from_millis(100),
                work: WORK,
                io: if completion {
                    IoModel::Completion
                } else {
                    IoModel::Readiness
                },
                ..ProxyConfig::default()
            };
            let proxy = ProxyHandle::start(&cfg)?;
            // The origin shares the proxy's CPU: its work is a small share
            // of the proxy's, and the client keeps a CPU of its own.
            let refused = place(rig, &["evq-proxy".into(), "evq-serve-0".into()]);
            Ok(Running {
                addr: proxy.addr(),
                inner: Inner::Proxy(proxy, origin),
                refused,
            })
        }
        NGINX => start_nginx(rig, name),
        other => Err(io::Error::other(format!("unknown server {other}"))),
    }
}

fn start_nginx(rig: &str, name: &str) -> io::Result<Running> {
    if rig != WORK_RIG {
        return Err(io::Error::other("nginx runs on the work rig only"));
    }
    let gzip =
        "gzip on; gzip_comp_level 9; gzip_min_length 0; gzip_types *; gzip_http_version 1.0;";
    let tuning = match name {
        NGINX_DEFAULT => Tuning {
            backlog: None,
            http: gzip.into(),
        },
        NGINX_TUNED => Tuning {
            backlog: Some(SMALL_BACKLOG as u32),
            http: format!(
                "{gzip} limit_conn_zone $server_name zone=all:1m; limit_conn all {NGINX_LIMIT_CONN}; limit_conn_status 503;"
            ),
        },
        other => return Err(io::Error::other(format!("unknown nginx configuration {other}"))),
    };
    let root = Docroot::with_sizes(&[])?;
    std::fs::write(
        root.path().join(NGINX_WORK_FILE),
        work_text(NGINX_WORK_BYTES),
    )?;
    let nginx = PeerServer::start_tuned(PeerServerKind::Nginx, &root, 1, &tuning)?;
    let cpus = crate::placement::server_cpus(1);
    let mut refused = None;
    for pid in nginx.processes() {
        match cpus.as_ref().and_then(|c| c.first()) {
            Some(&cpu) => {
                if let Err(e) = crate::placement::pin_thread(pid as libc::pid_t, cpu) {
                    refused = Some(format!("sched_setaffinity refused for nginx: {e}"));
                }
            }
            None => refused = Some("fewer than two CPUs: server and client not apart".into()),
        }
    }
    Ok(Running {
        addr: nginx.addr(),
        inner: Inner::Nginx(nginx, root),
        refused,
    })
}

/// Text that compresses as prose does: words from a small vocabulary in a
/// pseudo-random order (a fixed seed, so every run compresses the same).
pub fn work_text(bytes: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "event",
        "queue",
        "kernel",
        "select",
        "poll",
        "descriptor",
        "ready",
        "signal",
        "server",
        "client",
        "overload",
        "capacity",
        "latency",
        "wake",
        "interest",
        "batch",
    ];
    let mut out = Vec::with_capacity(bytes + 16);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while out.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
        out.push(if x % 11 == 0 { b'\n' } else { b' ' });
    }
    out.truncate(bytes);
    out
}

/// Places the threads named `names` of this process for `rig`: on the CPU
/// budget (quota), or on CPUs apart from the client's (work). Says why not,
/// where it could not.
fn place(rig: &str, names: &[String]) -> Option<String> {
    let mut refused = None;
    let cpus = crate::placement::server_cpus(names.len());
    for (i, name) in names.iter().enumerate() {
        let Some(tid) = crate::procinfo::thread_named(name, Duration::from_secs(1)) else {
            refused = Some(format!("no single {name} thread found"));
            continue;
        };
        if rig == WORK_RIG {
            match &cpus {
                Some(cpus) if !cpus.is_empty() => {
                    if let Err(e) = crate::placement::pin_thread(tid, cpus[i % cpus.len()]) {
                        refused = Some(format!("sched_setaffinity refused: {e}"));
                    }
                }
                _ => refused = Some("fewer than two CPUs: server and client not apart".into()),
            }
        } else if rig == QUOTA_RIG {
            if let Err(e) = crate::resources::limit_thread_cpu(tid, BUDGET_RUNTIME, BUDGET_PERIOD) {
                refused = Some(format!("SCHED_DEADLINE refused: {e}"));
            }
        }
    }
    refused
}
