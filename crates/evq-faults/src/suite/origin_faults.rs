//! The proxy's origin misbehaving: crashing (SIGKILL, the kernel closes its
//! sockets) and restarting on the same port, stalling (reading the request and
//! never answering), and answering garbage — before a head, in the middle of a
//! chunked body, a reset, a close, or a second response nobody asked for.
//!
//! What the proxy owes its clients: a prompt 502 (or 504 after
//! `--origin-timeout`) where no reply can come, a cut connection (never a
//! silent hang, never the garbage passed on as a good reply) where a reply
//! was already under way, its other clients untouched — the live clients check
//! every body against their own request id, so a smuggled response reaching
//! one of them shows as a wrong body — and service again as soon as the origin
//! is back.

use super::inject::{Repeat, Tally};
use super::row::{Check, FaultRow, Throughput};
use super::trial::{fetch, start_origin, Trial};
use super::{SuiteConfig, Target};
use crate::http::{self, ReadError, ResponseReader};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `evq proxy --origin-timeout`, seconds, for the stall row.
const ORIGIN_TIMEOUT_S: u64 = 2;

/// The origin crashes while the live clients run; after a window it restarts
/// on the same port. The row's "under fault" throughput is the window after
/// the restart: the clients must get their throughput back.
pub(crate) fn crash_restart(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let injected = "the origin is killed (SIGKILL) while the live clients run, stays down for a window, and a new origin process starts on the same port; throughput compared before the crash and after the restart".to_string();
    let mut trial = match Trial::proxy(cfg, target, "origin-crash-restart", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "origin-crash-restart", e),
    };
    if let Err(e) = trial.baseline(&[]) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let addr = trial.addr();
    trial.live_on();
    let before = trial.window();
    let origin = trial.origin.take().expect("a proxy trial has an origin");
    let origin_addr = origin.addr();
    let crash = origin.crash();
    // A request while the origin is down: a prompt 502.
    let probe_started = Instant::now();
    let probe = fetch(addr, "/live", Duration::from_secs(10));
    let probe_ms = probe_started.elapsed().as_secs_f64() * 1000.0;
    let down = trial.window();
    let restarted = match start_origin(cfg, origin_addr) {
        Ok(o) => o,
        Err(e) => {
            trial.row.error = Some(format!("the origin did not restart on {origin_addr}: {e}"));
            return trial.died();
        }
    };
    trial.origin = Some(restarted);
    let back_started = Instant::now();
    let mut back = None;
    while back_started.elapsed() < Duration::from_secs(10) {
        if trial.fresh_request().is_ok() {
            back = Some(back_started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut t = Throughput {
        fault_free: vec![before],
        under_fault: Vec::new(),
        offered_rate: None,
    };
    for _ in 0..trial.cfg.rounds() {
        t.under_fault.push(trial.window());
    }
    trial.row.throughput = Some(t);
    if !trial.alive() {
        return trial.died();
    }
    trial.check(Check::new(
        "the origin really crashed",
        crash.signal == Some(libc::SIGKILL),
        crash.describe(),
    ));
    trial.check(Check::new(
        "a request while the origin is down gets a 502 within 2 s",
        matches!(&probe, Ok(r) if r.status == 502) && probe_ms <= 2000.0,
        match &probe {
            Ok(r) => format!("status {} in {probe_ms:.0} ms", r.status),
            Err(e) => format!("{e} after {probe_ms:.0} ms"),
        },
    ));
    let d = down.count;
    trial.check(Check::new(
        "while the origin is down the live clients get 502s, not hangs or wrong bodies",
        d.wrong_body == 0 && d.timed_out == 0 && d.status_other == 0 && d.status_5xx > 0,
        d.describe(),
    ));
    trial.check(Check::new(
        "the proxy serves again within 1 s of the origin's restart",
        back.is_some_and(|b| b <= Duration::from_secs(1)),
        back.map_or("not within 10 s".into(), |b| {
            format!("{:.0} ms", b.as_secs_f64() * 1000.0)
        }),
    ));
    let stop = trial.cfg.stop_bound();
    trial.finish(Duration::from_secs(10), stop)
}

/// Hostile clients ask for `/stall`: the origin reads the request and never
/// answers. Each must get a 504 after `--origin-timeout`.
pub(crate) fn stall(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let threads = cfg.size.pick(4, 16);
    let injected = format!(
        "{threads} clients at a time ask for a path the origin reads and never answers (--origin-timeout {ORIGIN_TIMEOUT_S})"
    );
    let timeout = ORIGIN_TIMEOUT_S.to_string();
    let trial = match Trial::proxy(
        cfg,
        target,
        "origin-stall",
        injected,
        &["--origin-timeout", &timeout],
    ) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "origin-stall", e),
    };
    let addr = trial.addr();
    let fault = Repeat::new(threads, Duration::from_millis(100), move |t| {
        let Some(mut s) = super::clients::connect(addr, t) else {
            return;
        };
        let asked = Instant::now();
        if s.write_all(&http::get("/stall", &[], false)).is_err() {
            t.add("request not sent");
            return;
        }
        match ResponseReader::new().read(&mut s, "GET") {
            Ok(r) if r.status == 504 => {
                let waited = asked.elapsed().as_secs_f64();
                if waited <= ORIGIN_TIMEOUT_S as f64 + 2.0 {
                    t.add("504 on time");
                } else {
                    t.add("504 late");
                    t.note(format!("504 after {waited:.1} s"));
                }
            }
            Ok(r) => t.add(&format!("status {}", r.status)),
            Err(e) => {
                t.add(if e.timed_out() {
                    "no answer within 10 s"
                } else {
                    "other end"
                });
                t.note(e.to_string());
            }
        }
    });
    super::clients::repeated(trial, &[], fault, Duration::from_secs(10), |t, trial| {
        trial.check(Check::new(
            &format!(
                "every stalled request gets a 504 within --origin-timeout + 2 s ({} s)",
                ORIGIN_TIMEOUT_S + 2
            ),
            t.get("504 on time") > 0 && t.get("504 on time") + t.get("connect failed") == t.total(),
            t.describe(),
        ));
    })
}

/// The garbage the origin answers with, in turn.
const GARBAGE: [&str; 5] = [
    "/garbage-chunked",
    "/garbage-head",
    "/smuggle",
    "/reset",
    "/close",
];

/// What one hostile client saw for one garbage path.
fn garbage_outcome(
    path: &str,
    got: Result<http::Response, ReadError>,
    leftover: &[u8],
) -> (bool, String) {
    let what = match &got {
        Ok(r) => format!("{path}: status {}, {} body bytes", r.status, r.body.len()),
        Err(e) => format!("{path}: {e}"),
    };
    let ok = match path {
        // Mid-stream: the head and first chunk were relayed, so the proxy can
        // only cut the connection (the client's framing sees it short or bad)
        // or, had it buffered, answer 502. A hang is the failure.
        "/garbage-chunked" => match &got {
            Ok(r) => r.status == 502,
            Err(e) => !e.timed_out(),
        },
        // The first response is good; the second must not reach the client.
        "/smuggle" => {
            matches!(&got, Ok(r) if r.status == 200 && r.body == b"first\n") && leftover.is_empty()
        }
        // No response at all came from the origin: 502.
        _ => matches!(&got, Ok(r) if r.status == 502),
    };
    (ok, what)
}

/// Hostile clients ask for paths the origin answers with garbage.
pub(crate) fn garbage(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(20.0, 50.0);
    let injected = format!(
        "{rate:.0}/s clients ask for paths the origin answers with garbage: a bad chunk size mid-body, a head that is not HTTP, a second unrequested response, a reset, a close"
    );
    let trial = match Trial::proxy(cfg, target, "origin-garbage", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "origin-garbage", e),
    };
    let addr = trial.addr();
    let turn = std::sync::atomic::AtomicUsize::new(0);
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t: &Tally| {
        let path = GARBAGE[turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % GARBAGE.len()];
        let Some(mut s) = super::clients::connect(addr, t) else {
            return;
        };
        if s.write_all(&http::get(path, &[], false)).is_err() {
            t.add("request not sent");
            return;
        }
        let mut reader = ResponseReader::new();
        let got = reader.read(&mut s, "GET");
        // Anything more within 200 ms is a response nobody asked for.
        let mut extra = reader.leftover().to_vec();
        if got.is_ok() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let mut b = [0u8; 512];
            if let Ok(n) = s.read(&mut b) {
                extra.extend_from_slice(&b[..n]);
            }
        }
        let (ok, what) = garbage_outcome(path, got, &extra);
        handled_or_not(t, ok, what);
    });
    all_handled(
        trial,
        fault,
        "every garbage answer became a 502 or a cut connection (never a hang, never passed on as good)",
    )
}

/// Tallies one hostile client's outcome: "handled", or "mishandled" with
/// `what` as a note.
fn handled_or_not(t: &Tally, ok: bool, what: String) {
    if ok {
        t.add("handled");
    } else {
        t.add("mishandled");
        t.note(what);
    }
}

/// Runs `fault` over the standard procedure; its check, `what`, holds if some
/// hostile clients were handled and none mishandled.
fn all_handled(trial: Trial<'_>, fault: Repeat, what: &str) -> FaultRow {
    super::clients::repeated(trial, &[], fault, Duration::from_secs(10), |t, trial| {
        trial.check(Check::new(
            what,
            t.get("mishandled") == 0 && t.get("handled") > 0,
            t.describe(),
        ));
    })
}

/// Bytes of the body a hostile client announces for `/early`.
const EARLY_BODY: usize = 64 * 1024;

/// Hostile clients whose request the origin answers before its body; the
/// body, sent after the answer, starts with a request of its own.
pub(crate) fn answers_early(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let rate = cfg.size.pick(20.0, 50.0);
    let injected = format!(
        "{rate:.0}/s clients POST /early with a {} KiB body; the origin answers 401 at once, before the body; the client then sends the body, which starts with `GET /smuggled HTTP/1.1` (request smuggling: read as the client's next request, it would reach the origin and its 200 the client)",
        EARLY_BODY / 1024
    );
    let trial = match Trial::proxy(cfg, target, "origin-answers-early", injected, &[]) {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "origin-answers-early", e),
    };
    let addr = trial.addr();
    let fault = Repeat::new(2, Duration::from_secs_f64(2.0 / rate), move |t: &Tally| {
        let Some(mut s) = super::clients::connect(addr, t) else {
            return;
        };
        let head = format!(
            "POST /early HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {EARLY_BODY}\r\n\r\n"
        );
        if s.write_all(head.as_bytes()).is_err() {
            t.add("request not sent");
            return;
        }
        let mut reader = ResponseReader::new();
        let (ok, what) = early_outcome(&mut s, &mut reader);
        handled_or_not(t, ok, what);
    });
    all_handled(
        trial,
        fault,
        "the early answer came with Connection: close, and the rest of the body was never read as a request: no second response, the connection closed",
    )
}

/// One hostile client's exchange after its head went out: the early answer,
/// then the body that starts like a request, then what came back.
fn early_outcome(s: &mut std::net::TcpStream, reader: &mut ResponseReader) -> (bool, String) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    match reader.read(s, "POST") {
        Ok(r) if r.status == 401 && r.close => {}
        Ok(r) => {
            return (
                false,
                format!(
                    "the early answer: status {}, Connection: close {}",
                    r.status, r.close
                ),
            )
        }
        Err(e) => return (false, format!("the early answer: {e}")),
    }
    let mut body = b"GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec();
    body.resize(EARLY_BODY, b'b');
    // The proxy may have closed already (it need not read a body it will
    // not forward): a failed send is no fault.
    if s.write_all(&body).is_ok() {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut extra = reader.leftover().to_vec();
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => extra.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (
                    false,
                    "the connection stayed open 3 s after the body, though its answer said close"
                        .into(),
                )
            }
            // A reset after the answer: closed, nothing more answered.
            Err(_) => break,
        }
    }
    if extra.is_empty() {
        (true, String::new())
    } else {
        let shown = String::from_utf8_lossy(&extra[..extra.len().min(80)]).into_owned();
        (false, format!("after the early answer came {shown:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn garbage_outcomes_are_judged_per_path() {
        let ok = |status, body: &[u8]| {
            Ok(http::Response {
                status,
                close: false,
                body: body.to_vec(),
            })
        };
        assert!(garbage_outcome("/garbage-head", ok(502, b""), b"").0);
        assert!(!garbage_outcome("/garbage-head", ok(200, b""), b"").0);
        assert!(
            garbage_outcome(
                "/garbage-chunked",
                Err(ReadError::Closed { received: 60 }),
                b""
            )
            .0
        );
        let hang = Err(ReadError::Io(io::Error::from(io::ErrorKind::WouldBlock)));
        assert!(!garbage_outcome("/garbage-chunked", hang, b"").0);
        assert!(garbage_outcome("/smuggle", ok(200, b"first\n"), b"").0);
        assert!(!garbage_outcome("/smuggle", ok(200, b"first\n"), b"HTTP/1.1 200").0);
    }

    /// The hostile client's verdict against a scripted proxy: the answer it
    /// owes (401 with close, then the end) passes; the smuggled shapes — no
    /// close, a second response, a connection kept open — do not.
    #[test]
    fn early_outcomes_are_judged() {
        use std::io::{Read, Write};
        let judge = |reply: &'static [u8], then_close: bool| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let proxy = std::thread::spawn(move || {
                let (mut c, _) = l.accept().unwrap();
                let mut head = [0u8; 256];
                let _ = c.read(&mut head).unwrap();
                c.write_all(reply).unwrap();
                // Take the body, as a lingering close does.
                let mut got = 0;
                let mut b = [0u8; 65536];
                while got < EARLY_BODY {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                if !then_close {
                    std::thread::sleep(Duration::from_secs(4));
                }
            });
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /early HTTP/1.1\r\n\r\n").unwrap();
            let verdict = early_outcome(&mut s, &mut ResponseReader::new());
            drop(s);
            proxy.join().unwrap();
            verdict
        };
        let owed: &[u8] =
            b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope\n";
        assert!(judge(owed, true).0);
        let kept: &[u8] = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope\n";
        assert!(!judge(kept, true).0, "no close");
        let smuggled: &[u8] = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled\n";
        let (ok, what) = judge(smuggled, true);
        assert!(!ok && what.contains("smuggled"), "{what}");
        let (ok, what) = judge(owed, false);
        assert!(!ok && what.contains("stayed open"), "{what}");
    }
}
