//! Hostile clients, aimed at `evq serve` or `evq proxy` while the live clients
//! are measured: resets mid-request and mid-response, clients that vanish,
//! clients that send a request and close, tricklers, 100-deep pipelines and
//! 1 MiB heads. All come from 127.0.0.2.
//!
//! SIGPIPE: a reset or closed peer makes the server's next `send` fail with
//! `EPIPE`; were the signal not ignored (or `MSG_NOSIGNAL` not used) the
//! process would die of it. Every row here checks the program outlives that.

use super::inject::{Injector, Repeat, Tally};
use super::row::{Check, FaultRow};
use super::trial::{Trial, BIG_BYTES};
use super::{SuiteConfig, Target};
use crate::http::{self, ReadError, ResponseReader};
use crate::peer::{self, HOSTILE_SOURCE};
use crate::subject::Limits;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn start<'a>(
    cfg: &'a SuiteConfig,
    target: Target,
    fault: &str,
    injected: String,
    flags: &[&str],
) -> io::Result<Trial<'a>> {
    match target {
        Target::Serve | Target::ServeCompletion => {
            Trial::serve(cfg, target, fault, injected, flags, Limits::default())
        }
        Target::Proxy | Target::ProxyCompletion | Target::Load => {
            Trial::proxy(cfg, target, fault, injected, flags)
        }
    }
}

/// The path of a big reply: a file under `evq serve`, the origin's `/big`
/// through the proxy.
fn big_path(target: Target) -> String {
    match target {
        Target::Serve | Target::ServeCompletion => "/big".into(),
        Target::Proxy | Target::ProxyCompletion | Target::Load => format!("/big?n={BIG_BYTES}"),
    }
}

/// A hostile client's connection from [`HOSTILE_SOURCE`]; a failure is
/// tallied ("connect failed", with the error as a note) and gives `None`.
pub(super) fn connect(addr: SocketAddr, t: &Tally) -> Option<std::net::TcpStream> {
    match peer::connect(HOSTILE_SOURCE, addr, CONNECT_TIMEOUT) {
        Ok(s) => Some(s),
        Err(e) => {
            t.add("connect failed");
            t.note(format!("connect: {e}"));
            None
        }
    }
}

/// Runs a repeated hostile act over the standard procedure.
pub(super) fn repeated(
    mut trial: Trial<'_>,
    warm: &[&str],
    mut fault: Repeat,
    fd_wait: Duration,
    checks: impl FnOnce(&Tally, &mut Trial<'_>),
) -> FaultRow {
    if let Err(e) = trial.baseline(warm) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let rounds = trial.cfg.rounds();
    match trial.alternate(rounds, &mut fault) {
        Ok(t) => trial.row.throughput = Some(t),
        Err(e) => trial.row.error = Some(e.to_string()),
    }
    fault.off();
    if !trial.alive() {
        return trial.died();
    }
    let tally = fault.tally.clone();
    checks(&tally, &mut trial);
    let injected = tally.total();
    trial.check(Check::new(
        "the fault was injected",
        injected > 0 && tally.get("connect failed") == 0,
        format!("{injected} hostile clients ({})", tally.describe()),
    ));
    let stop = trial.cfg.stop_bound();
    trial.finish(fd_wait, stop)
}

/// Connects, sends half a request head, resets.
pub(crate) fn reset_mid_request(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(200.0, 400.0);
    let injected =
        format!("{rate:.0}/s clients send half a request head, then reset (SO_LINGER 0)");
    let trial = match start(cfg, target, "reset-mid-request", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "reset-mid-request", e),
    };
    let addr = trial.addr();
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        let _ = s.write_all(b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ");
        peer::reset(s);
        t.add("reset mid-request");
    });
    repeated(trial, &[], fault, Duration::from_secs(10), |_, _| {})
}

/// Connects (4 KiB receive buffer), asks for the big reply, reads its head and
/// a little of the body, resets.
pub(crate) fn reset_mid_response(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(50.0, 100.0);
    let injected = format!(
        "{rate:.0}/s clients ask for {} MiB, read the head and a few KiB, then reset",
        BIG_BYTES >> 20
    );
    let trial = match start(cfg, target, "reset-mid-response", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "reset-mid-response", e),
    };
    let addr = trial.addr();
    let path = big_path(target);
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        peer::small_receive_buffer(&s);
        if s.write_all(&http::get(&path, &[], false)).is_err() {
            t.add("request not sent");
            return;
        }
        let mut buf = [0u8; 4096];
        match s.read(&mut buf) {
            Ok(n) if n >= 12 && buf.starts_with(b"HTTP/1.1 200") => t.add("reset after the head"),
            Ok(n) => {
                t.add("other answer");
                t.note(format!("{:?}", String::from_utf8_lossy(&buf[..n.min(40)])));
            }
            Err(e) => {
                t.add("no answer");
                t.note(format!("read: {e}"));
            }
        }
        peer::reset(s);
    });
    let big = big_path(target);
    repeated(
        trial,
        &[&big],
        fault,
        Duration::from_secs(10),
        |t, trial| {
            trial.check(Check::new(
                "every reset came mid-response (after a 200 head)",
                t.get("other answer") + t.get("no answer") == 0,
                t.describe(),
            ));
        },
    )
}

/// Three ways to vanish (TCP_REPAIR: no FIN, no RST), in turn: half a head;
/// after a reply, idle on keep-alive; after asking for the big reply, unread.
pub(crate) fn vanish(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let (header, idle) = cfg.size.pick((2, 3), (5, 10));
    let rate = cfg.size.pick(60.0, 150.0);
    let injected = format!(
        "{rate:.0}/s clients vanish without FIN or RST (TCP_REPAIR): a third mid-head, a third idle after a reply, a third after asking for the big reply"
    );
    if !peer::can_vanish() {
        return super::not_run(
            target,
            "vanish",
            io::Error::other(
                "TCP_REPAIR refused (needs CAP_NET_ADMIN): clients cannot vanish here",
            ),
        );
    }
    let (h, i) = (header.to_string(), idle.to_string());
    let flags: Vec<&str> = match target {
        Target::Serve | Target::ServeCompletion => {
            vec!["--header-timeout", &h, "--idle-timeout", &i]
        }
        Target::Proxy | Target::ProxyCompletion | Target::Load => vec!["--idle-timeout", &i],
    };
    let trial = match start(cfg, target, "vanish", injected, &flags) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "vanish", e),
    };
    let addr = trial.addr();
    let (small, big) = (trial.live_spec.path.clone(), big_path(target));
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        match turn.fetch_add(1, Ordering::Relaxed) % 3 {
            0 => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n");
                t.add("vanished mid-head");
            }
            1 => {
                let _ = s.write_all(&http::get(&small, &[], false));
                match ResponseReader::new().read(&mut s, "GET") {
                    Ok(r) if r.status == 200 => t.add("vanished idle after a reply"),
                    Ok(r) => t.add(&format!("status {}", r.status)),
                    Err(e) => {
                        t.add("no reply");
                        t.note(e.to_string());
                    }
                }
            }
            _ => {
                peer::small_receive_buffer(&s);
                let _ = s.write_all(&http::get(&big, &[], false));
                t.add("vanished before reading a big reply");
            }
        }
        if let Err(e) = peer::vanish(s) {
            t.add("could not vanish");
            t.note(e.to_string());
        }
    });
    let big = big_path(target);
    // Descriptors come back once the header and idle timeouts have run.
    let wait = Duration::from_secs((header + idle) as u64 + 10);
    repeated(trial, &[&big], fault, wait, |t, trial| {
        trial.check(Check::new(
            "every vanishing client vanished after its step",
            t.get("could not vanish") + t.get("no reply") == 0,
            t.describe(),
        ));
    })
}

/// Sends a whole request for the big reply, then closes at once without
/// reading.
pub(crate) fn request_then_close(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(100.0, 200.0);
    let injected =
        format!("{rate:.0}/s clients send a request for the big reply and close at once");
    let trial = match start(cfg, target, "request-then-close", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "request-then-close", e),
    };
    let addr = trial.addr();
    let path = big_path(target);
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        if s.write_all(&http::get(&path, &[], false)).is_ok() {
            t.add("request sent, closed");
        } else {
            t.add("request not sent");
        }
        drop(s);
    });
    let big = big_path(target);
    repeated(trial, &[&big], fault, Duration::from_secs(10), |_, _| {})
}

/// 100 requests in one write on one connection; all 100 replies read and
/// checked.
pub(crate) fn pipeline(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(10.0, 20.0);
    let injected =
        format!("{rate:.0}/s clients pipeline 100 requests in one write and read the 100 replies");
    let trial = match start(cfg, target, "pipeline-100", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "pipeline-100", e),
    };
    let addr = trial.addr();
    let spec = trial.live_spec.clone();
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        let mut batch = Vec::new();
        let ids: Vec<u64> = (0..100).map(|_| fastrand::u64(1..u64::MAX / 2)).collect();
        for id in &ids {
            batch.extend_from_slice(&http::get(
                &spec.path,
                &[format!("{}: {id}", crate::live::ID_HEADER)],
                false,
            ));
        }
        if s.write_all(&batch).is_err() {
            t.add("batch not sent");
            return;
        }
        let mut reader = ResponseReader::new();
        let mut good = 0;
        for id in &ids {
            match reader.read(&mut s, "GET") {
                Ok(r) => {
                    let ok = match &spec.expect {
                        crate::live::Expect::Body(b) => r.body == **b,
                        crate::live::Expect::Echo => {
                            r.body == crate::live::echo_body(*id).as_bytes()
                        }
                    };
                    if r.status == 200 && ok {
                        good += 1;
                    } else {
                        t.note(format!(
                            "reply {good}: status {}, {} bytes",
                            r.status,
                            r.body.len()
                        ));
                        break;
                    }
                }
                Err(e) => {
                    t.note(format!("after {good} replies: {e}"));
                    break;
                }
            }
        }
        t.add(if good == 100 {
            "100 of 100 answered in order"
        } else {
            "short"
        });
    });
    repeated(trial, &[], fault, Duration::from_secs(10), |t, trial| {
        trial.check(Check::new(
            "every pipelined request answered, in order, with its own reply",
            t.get("short") + t.get("batch not sent") == 0
                && t.get("100 of 100 answered in order") > 0,
            t.describe(),
        ));
    })
}

/// A request head of 1 MiB (ten thousand 100-byte header lines).
pub(crate) fn huge_headers(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(10.0, 20.0);
    let injected = format!("{rate:.0}/s clients send a 1 MiB request head");
    let trial = match start(cfg, target, "huge-headers", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "huge-headers", e),
    };
    let addr = trial.addr();
    let mut head = b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec();
    let line = format!("X-Filler: {}\r\n", "a".repeat(88));
    while head.len() < 1 << 20 {
        head.extend_from_slice(line.as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    let head = Arc::new(head);
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t| {
        let Some(mut s) = connect(addr, t) else {
            return;
        };
        // The server may answer and close before the head is all sent: the
        // write then fails, and the answer may still be waiting to be read.
        let _ = s.write_all(&head);
        match ResponseReader::new().read(&mut s, "GET") {
            Ok(r) if r.status == 431 => t.add("431"),
            Ok(r) if (200..300).contains(&r.status) => t.add("2xx to a 1 MiB head"),
            Ok(r) => t.add(&format!("status {}", r.status)),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                t.add("reset, no answer read")
            }
            Err(ReadError::Closed { received: 0 }) => t.add("closed, no answer"),
            Err(e) if e.timed_out() => t.add("no answer within 10 s"),
            Err(e) => {
                t.add("other end");
                t.note(e.to_string());
            }
        }
    });
    repeated(
        trial,
        &[],
        fault,
        Duration::from_secs(10),
        move |t, trial| {
            trial.check(Check::new(
            "every 1 MiB head refused (431, or the connection ended), none answered 2xx or left hanging",
            t.get("2xx to a 1 MiB head") + t.get("no answer within 10 s") == 0,
            t.describe(),
        ));
            if matches!(target, Target::Proxy | Target::ProxyCompletion) {
                trial.check(
                    Check::new(
                        "the proxy answers an oversized head with 431, not a reset",
                        t.get("431") > 0 && t.get("431") == t.total(),
                        t.describe(),
                    )
                    .item("5"),
                );
            }
        },
    )
}

/// Clients from 127.0.0.2 that send one byte of a never-ending head a second,
/// connecting again when the server gives up on them.
struct Tricklers {
    addr: SocketAddr,
    count: usize,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    tally: Arc<Tally>,
}

impl Tricklers {
    fn established(&self) -> u64 {
        self.tally.get("established")
    }
}

impl Injector for Tricklers {
    fn on(&mut self) -> io::Result<()> {
        self.stop.store(false, Ordering::Relaxed);
        let (addr, count, stop, tally) =
            (self.addr, self.count, self.stop.clone(), self.tally.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        self.thread = Some(std::thread::spawn(move || {
            trickle(addr, count, &stop, &tally, ready_tx)
        }));
        // On once every trickler has connected (or 60 s have passed).
        let _ = ready_rx.recv_timeout(Duration::from_secs(60));
        Ok(())
    }

    fn off(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Trickler {
    fd: Option<std::os::fd::OwnedFd>,
    connected: bool,
    /// Connected at least once since the fault went on.
    ever: bool,
    sent: usize,
}

const TRICKLE_HEAD: &[u8] = b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

fn trickle(
    addr: SocketAddr,
    count: usize,
    stop: &AtomicBool,
    t: &Tally,
    ready: std::sync::mpsc::Sender<()>,
) {
    let mut all: Vec<Trickler> = (0..count)
        .map(|_| Trickler {
            fd: None,
            connected: false,
            ever: false,
            sent: 0,
        })
        .collect();
    let mut told = false;
    let mut second = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // Each second, every trickler once, spread over the second in 100
        // slices, as independent slow clients arrive. (With 20, each slice
        // handed the server 500 bytes at once — at 10,000 tricklers a burst
        // that held the live clients' replies for longer than their pacing
        // forgives, the injector's rhythm more than the server's.)
        let slices = 100;
        for slice in 0..slices {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            for tr in all.iter_mut().skip(slice).step_by(slices) {
                step(tr, addr, t);
            }
            let due = second + Duration::from_millis(1000 * (slice as u64 + 1) / slices as u64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        second = Instant::now();
        if !told && all.iter().all(|tr| tr.ever) {
            told = ready.send(()).is_ok();
        }
    }
}

fn step(tr: &mut Trickler, addr: SocketAddr, t: &Tally) {
    let Some(fd) = &tr.fd else {
        match peer::connect_nonblocking(HOSTILE_SOURCE, addr) {
            Ok(fd) => {
                tr.fd = Some(fd);
                tr.connected = false;
                tr.sent = 0;
            }
            Err(e) => {
                t.add("connect failed");
                t.note(format!("connect: {e}"));
            }
        }
        return;
    };
    let raw = fd.as_raw_fd();
    // Anything from the server (a 408, EOF, a reset) means it gave up on us.
    let mut b = [0u8; 512];
    // SAFETY: recv(2) into a live stack buffer on a socket we own.
    let n = unsafe { libc::recv(raw, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
    let gone = match n {
        0 => Some("closed by the server"),
        n if n > 0 => Some(if b.starts_with(b"HTTP/1.1 408") {
            "408 from the server"
        } else {
            "answered by the server"
        }),
        _ => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOTCONN) => None,
            _ => Some("reset by the server"),
        },
    };
    if let Some(why) = gone {
        t.add(why);
        tr.fd = None;
        return;
    }
    let byte = TRICKLE_HEAD.get(tr.sent).copied().unwrap_or(b'a');
    // SAFETY: send(2) of one byte from a live local on a socket we own;
    // MSG_NOSIGNAL keeps a reset peer from raising SIGPIPE here.
    let n = unsafe {
        libc::send(
            raw,
            (&byte as *const u8).cast(),
            1,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n == 1 {
        if !tr.connected {
            tr.connected = true;
            tr.ever = true;
            t.add("established");
        }
        tr.sent += 1;
    } else if !matches!(
        io::Error::last_os_error().raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::ENOTCONN) | Some(libc::EINPROGRESS)
    ) {
        t.add("reset by the server");
        tr.fd = None;
    }
}

/// `count` tricklers (1 byte a second each) held through one fault window.
pub(crate) fn trickle_fault(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let count = cfg.size.pick(300, 10_000);
    let injected = format!(
        "{count} clients from 127.0.0.2 trickle a never-ending request head, one byte a second each, and connect again when cut"
    );
    let mut trial = match start(cfg, target, "trickle", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "trickle", e),
    };
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    if let Err(e) = trial.baseline(&[]) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let mut fault = Tricklers {
        addr: trial.addr(),
        count,
        stop: Arc::new(AtomicBool::new(false)),
        thread: None,
        tally: Arc::new(Tally::default()),
    };
    match trial.alternate(1, &mut fault) {
        Ok(t) => trial.row.throughput = Some(t),
        Err(e) => trial.row.error = Some(e.to_string()),
    }
    fault.off();
    if !trial.alive() {
        return trial.died();
    }
    let t = &fault.tally;
    trial.check(Check::new(
        "every trickler connected and was accepted",
        fault.established() >= count as u64 && t.get("connect failed") == 0,
        format!(
            "{} established of {count} ({})",
            fault.established(),
            t.describe()
        ),
    ));
    trial.check(Check::new(
        "the tricklers were held by the server (its descriptors rose by nine tenths of their number or more)",
        trial.resources.peak.fds >= trial.resources.baseline.fds + count * 9 / 10,
        format!(
            "peak {} descriptors, baseline {}",
            trial.resources.peak.fds, trial.resources.baseline.fds
        ),
    ));
    let stop = trial.cfg.stop_bound();
    trial.finish(Duration::from_secs(20), stop)
}
