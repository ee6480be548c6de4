//! Descriptor exhaustion: `evq serve` (or `evq proxy`) started with a low
//! `RLIMIT_NOFILE` (soft and hard), then five times that many clients from
//! 127.0.0.2, each sending a keep-alive request and staying connected. (The
//! proxy's descriptors are shared with its origin connections: reclaim closes
//! pooled origin connections first, then idle clients.) The server must not spin while it
//! cannot accept (a level-triggered listener that is readable but cannot be
//! accepted from is the classic busy loop), its live clients — connected
//! before — must keep their throughput, a new client should still be served
//! (issue 19 item 3: reclaim idle keep-alive connections, as nginx does), and
//! once the crowd lets go, the next client must be served at once.

use super::inject::Tally;
use super::row::{Check, FaultRow};
use super::trial::{fetch, Trial};
use super::{SuiteConfig, Target};
use crate::http;
use crate::peer::{self, HOSTILE_SOURCE};
use crate::subject::Limits;
use crate::usage;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A crowd of connections, each with one keep-alive request sent, held open.
struct Crowd {
    conns: Vec<Member>,
}

struct Member {
    fd: OwnedFd,
    sent: usize,
    got: Vec<u8>,
    ended: Option<&'static str>,
}

impl Crowd {
    /// Opens `n` connections to `addr` and sends each `request`; reads what
    /// comes for `settle`, calling `sample` every round (about 50 ms).
    fn gather(
        addr: SocketAddr,
        n: usize,
        request: &[u8],
        settle: Duration,
        t: &Tally,
        sample: &mut dyn FnMut(),
    ) -> Crowd {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            match peer::connect_nonblocking(HOSTILE_SOURCE, addr) {
                Ok(fd) => conns.push(Member {
                    fd,
                    sent: 0,
                    got: Vec::new(),
                    ended: None,
                }),
                Err(e) => {
                    t.add("connect failed at once");
                    t.note(format!("connect: {e}"));
                }
            }
        }
        let until = Instant::now() + settle;
        while Instant::now() < until {
            sample();
            let mut fds: Vec<libc::pollfd> = conns
                .iter()
                .map(|m| libc::pollfd {
                    fd: if m.ended.is_some() {
                        -1
                    } else {
                        m.fd.as_raw_fd()
                    },
                    events: if m.sent < request.len() {
                        libc::POLLOUT
                    } else {
                        libc::POLLIN
                    },
                    revents: 0,
                })
                .collect();
            // SAFETY: poll(2) on a live array of pollfds whose length is passed;
            // negative descriptors are ignored by the kernel.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
            if r <= 0 {
                continue;
            }
            for (m, p) in conns.iter_mut().zip(&fds) {
                if p.revents == 0 || m.ended.is_some() {
                    continue;
                }
                let raw = m.fd.as_raw_fd();
                if m.sent < request.len() {
                    let rest = &request[m.sent..];
                    // SAFETY: send(2) from a live slice on a socket we own.
                    let k = unsafe {
                        libc::send(raw, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL)
                    };
                    if k > 0 {
                        m.sent += k as usize;
                    } else if k < 0
                        && io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN)
                    {
                        m.ended = Some("reset before the request was sent");
                    }
                    continue;
                }
                let mut b = [0u8; 4096];
                // SAFETY: recv(2) into a live stack buffer on a socket we own.
                let k =
                    unsafe { libc::recv(raw, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
                if k > 0 {
                    m.got.extend_from_slice(&b[..k as usize]);
                } else if k == 0 {
                    m.ended = Some("closed by the server");
                } else if io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                    m.ended = Some("reset by the server");
                }
            }
        }
        Crowd { conns }
    }

    /// Each member's fate: served and held, refused, or still waiting.
    fn tally(&self, t: &Tally) {
        for m in &self.conns {
            if m.got.starts_with(b"HTTP/1.1 200") {
                t.add(if m.ended.is_some() {
                    "served, then closed"
                } else {
                    "served, held idle"
                });
            } else if let Some(why) = m.ended {
                t.add(why);
            } else if !m.got.is_empty() {
                t.add("answered other than 200");
            } else {
                t.add("waiting, unanswered");
            }
        }
    }
}

/// What a client asks for: a small file of `evq serve`'s, the scripted
/// origin's `/live` through the proxy.
fn path(target: Target) -> &'static str {
    match target {
        Target::Serve | Target::ServeCompletion => "/small",
        _ => "/live",
    }
}

/// One new client's request, on a connection of its own.
fn newcomer(addr: SocketAddr, target: Target) -> Result<(), String> {
    match fetch(addr, path(target), Duration::from_secs(3)) {
        Ok(r) if r.status == 200 => Ok(()),
        Ok(r) => Err(format!("status {}", r.status)),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) fn descriptor_exhaustion(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let limit: u64 = cfg.size.pick(64, 256);
    let crowd_size = 5 * limit as usize;
    let injected = format!(
        "RLIMIT_NOFILE {limit} (soft and hard), then {crowd_size} clients from 127.0.0.2 send a keep-alive request each and stay connected"
    );
    let limits = Limits {
        nofile: Some(limit),
    };
    let fault = "descriptor-exhaustion";
    let started = match target {
        Target::Serve | Target::ServeCompletion => {
            Trial::serve(cfg, target, fault, injected, &[], limits)
        }
        _ => Trial::proxy_limited(cfg, target, fault, injected, &[], limits),
    };
    let mut trial = match started {
        Ok(t) => t,
        Err(e) => return super::not_run(target, fault, e),
    };
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    if let Err(e) = trial.baseline(&[]) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let addr = trial.addr();
    let pid = trial.pid();
    let mut throughput = super::row::Throughput::default();
    trial.live_on();
    throughput.fault_free.push(trial.window());

    let t = Tally::default();
    let request = http::get(path(target), &[], false);
    let crowd = Crowd::gather(
        addr,
        crowd_size,
        &request,
        Duration::from_secs(2),
        &t,
        &mut || trial.sample(),
    );
    trial.sample();
    throughput.under_fault.push(trial.window());
    let fds_exhausted = usage::fd_count(pid).unwrap_or(0);

    // A newcomer while the slots are held by idle keep-alive connections.
    let during = newcomer(addr, target);

    // No busy loop: live clients paused, the crowd idle, nobody connecting.
    let live_notes = trial.live_notes();
    let live_during = trial.live_off();
    std::thread::sleep(Duration::from_millis(300));
    let cpu_exhausted = usage::cpu_share(pid, trial.cfg.idle_window()).unwrap_or(f64::NAN);

    crowd.tally(&t);
    let released = Instant::now();
    drop(crowd);
    let mut recovered = None;
    while released.elapsed() < Duration::from_secs(10) {
        if newcomer(addr, target).is_ok() {
            recovered = Some(released.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    trial.live_on();
    throughput.fault_free.push(trial.window());
    trial.row.throughput = Some(throughput);
    if !trial.alive() {
        return trial.died();
    }
    // The server reclaims idle connections when it meets EMFILE, so its count
    // does not stay at the limit (the limit counts its own descriptors too, and
    // a reclaim drops the count at once): the crowd members it closed to make
    // room while holding others are the evidence; the peak is shown. Closed
    // before an answer (the readiness server sheds a newcomer when nothing is
    // idle) or after one (a served keep-alive connection closed for room, the
    // completion server's only way: its accept waits rather than shed), a
    // crowd member the server closed within the window is one it had no room
    // for — its keep-alive connections are otherwise held for a minute.
    let peak = trial.resources.peak.fds;
    let closed = t.get("closed by the server") + t.get("served, then closed");
    trial.check(Check::new(
        "the descriptors really ran out",
        closed > 0 && t.get("served, held idle") > 0,
        format!(
            "peak {peak} descriptors open of {limit} ({fds_exhausted} after the crowd came); crowd: {}",
            t.describe()
        ),
    ));
    trial.check(Check::new(
        "no busy loop while out of descriptors (live clients paused, the crowd idle)",
        cpu_exhausted <= super::row::IDLE_CPU_MAX,
        format!("{:.1}% of a CPU", cpu_exhausted * 100.0),
    ));
    trial.check(
        Check::new(
            "a new client is served while idle keep-alive connections hold every descriptor",
            during.is_ok(),
            match &during {
                Ok(()) => "served".to_string(),
                Err(e) => format!("not served: {e}"),
            },
        )
        .item("3"),
    );
    trial.check(Check::new(
        "the live clients, connected before, were all answered while descriptors ran out",
        live_during.is_some_and(|c| c.all_good()),
        live_during.map_or("no live clients".into(), |c| {
            let mut d = c.describe();
            if !live_notes.is_empty() {
                d += &format!(" — {}", live_notes.join("; "));
            }
            d
        }),
    ));
    trial.check(Check::new(
        "a new client is served as soon as the crowd lets go (within 10 s)",
        recovered.is_some(),
        recovered.map_or("not served within 10 s".into(), |d| {
            format!(
                "served {:.0} ms after the crowd closed",
                d.as_secs_f64() * 1000.0
            )
        }),
    ));
    let stop = trial.cfg.stop_bound();
    trial.finish(Duration::from_secs(10), stop)
}
