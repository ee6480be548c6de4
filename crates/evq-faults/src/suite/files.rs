//! A served file changed under `evq serve --root` while it is being sent:
//! truncated, replaced (a new file renamed over it) or removed.
//!
//! What a server can promise: a transfer already under way has sent its head,
//! so it can only end early (truncated) or finish from the file it opened
//! (replaced, removed: the open descriptor keeps the old file); a request that
//! comes after the change must get the file as it now is — the server's
//! open-file cache trusts an entry for 1 s, so "after" means once that second
//! has passed — and in between a reply must be whole (old or new) or an error,
//! never a 200 whose body is shorter than its `Content-Length` (CHANGELOG
//! promises a 500 there; issue 19 item 4 says that holds only up to 16 KiB).

use super::inject::Tally;
use super::row::{Check, FaultRow};
use super::trial::Trial;
use super::{SuiteConfig, Target};
use crate::http;
use crate::origin::pattern;
use crate::peer::{self, HOSTILE_SOURCE};
use crate::subject::Limits;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of the file sent from the cache by `sendfile` (over 16 KiB).
const BIG: usize = 4 << 20;
/// Bytes of the file sent with its head in one `send` (up to 16 KiB).
const SMALL: usize = 8 << 10;
/// What a truncated file keeps.
const TRUNCATED_TO: usize = 100;
/// The open-file cache's validity, plus a margin.
/// The transfers under way when the file changes: 16 KiB per 4 ms through a
/// 128 KiB receive buffer is ~1 s for 4 MiB, still going 300 ms in. (A 4 KiB
/// buffer, under loopback's MSS, left the transfers to zero-window probes:
/// 113 s a row.)
const TRANSFER_PACE: Pace = Pace::slow(Duration::from_millis(4), 128 * 1024);
const CACHE_VALID: Duration = Duration::from_millis(1500);

/// How a file changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    Truncate,
    Replace,
    Remove,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Truncate => "file-truncated",
            Change::Replace => "file-replaced",
            Change::Remove => "file-removed",
        }
    }

    fn apply(self, path: &Path) -> io::Result<()> {
        match self {
            Change::Truncate => std::fs::OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(TRUNCATED_TO as u64),
            Change::Replace => {
                let len = std::fs::metadata(path)?.len() as usize;
                let tmp = path.with_extension("new");
                std::fs::write(&tmp, (0..len).map(new_pattern).collect::<Vec<u8>>())?;
                std::fs::rename(tmp, path)
            }
            Change::Remove => std::fs::remove_file(path),
        }
    }
}

/// The replacement file's bytes: the pattern shifted, so old and new differ at
/// every offset.
fn new_pattern(i: usize) -> u8 {
    pattern(i + 7)
}

/// What a reply held, against the file before and after the change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Got {
    /// 200 with the old file, whole.
    OldWhole,
    /// 200 with the file as it now is, whole.
    NewWhole,
    /// A 200 head, then fewer body bytes than it announced, then the end of the
    /// connection; the bytes received were the file's.
    CutShort,
    /// A status other than 200 (the number).
    Status(u16),
    /// Bytes that are neither file, or no end within the read timeout.
    Bad(&'static str),
}

/// How a reader takes a reply: at once, or a read of up to 16 KiB per pause
/// with a receive buffer fixed at a size.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    pause: Duration,
    receive_buffer: usize,
}

impl Pace {
    /// Reads as fast as the reply comes.
    pub(super) const FULL_SPEED: Pace = Pace {
        pause: Duration::ZERO,
        receive_buffer: 0,
    };

    /// A read per `pause` through a receive buffer of `receive_buffer` bytes.
    ///
    /// Keep the buffer above loopback's MSS (64 KiB) for a reader meant to
    /// finish: under it, the receiver's silly-window avoidance withholds window
    /// updates and the sender falls back to zero-window probes — 4 KiB took
    /// ~100 s for 8 MiB here, whatever the pause. A tiny buffer is for readers
    /// meant to hold the server back.
    pub(super) const fn slow(pause: Duration, receive_buffer: usize) -> Pace {
        Pace {
            pause,
            receive_buffer,
        }
    }
}

/// Reads one reply to `GET path` at `pace`, classifying it.
pub(super) fn slow_get(
    addr: SocketAddr,
    path: &str,
    len: usize,
    change: Option<Change>,
    pace: Pace,
) -> io::Result<Got> {
    let mut s = peer::connect(HOSTILE_SOURCE, addr, Duration::from_secs(10))?;
    let pause = pace.pause;
    if pace.receive_buffer > 0 {
        peer::receive_buffer(&s, pace.receive_buffer);
    }
    s.write_all(&http::get(path, &[], true))?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let (status, length, head_len) = loop {
        let n = match s.read(&mut chunk) {
            Ok(0) => return Ok(Got::Bad("closed before a head")),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(Got::Bad("no head within 10 s"))
            }
            Err(_) => return Ok(Got::Bad("reset before a head")),
        };
        buf.extend_from_slice(&chunk[..n]);
        // Lenient, as a client reads; a parse error reads on (the head may
        // yet complete) and ends as "closed before a head" or a timeout.
        if let Ok(Some(head)) =
            evq_wire::parse_response_head(&buf, false, evq_wire::Strictness::Lenient)
        {
            let length = head.body_len().and_then(|n| usize::try_from(n).ok());
            break (head.status, length, head.len);
        }
    };
    if status != 200 {
        return Ok(Got::Status(status));
    }
    let Some(length) = length else {
        return Ok(Got::Bad("a 200 without Content-Length"));
    };
    let mut body = buf.split_off(head_len);
    let ended = loop {
        if body.len() >= length {
            break false;
        }
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        match s.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(Got::Bad("stalled: no byte and no end within 10 s"))
            }
            Err(_) => break true,
        }
    };
    let old = |b: &[u8]| b.iter().enumerate().all(|(i, &x)| x == pattern(i));
    let new = |b: &[u8]| match change {
        Some(Change::Replace) => b.iter().enumerate().all(|(i, &x)| x == new_pattern(i)),
        // Truncation keeps the first bytes; removal (or no change) leaves no
        // new content.
        Some(Change::Truncate) => old(b),
        Some(Change::Remove) | None => false,
    };
    Ok(if ended {
        if old(&body) || new(&body) {
            Got::CutShort
        } else {
            Got::Bad("a cut-short body with bytes that are not the file's")
        }
    } else if body.len() > length {
        Got::Bad("more bytes than Content-Length")
    } else if length == len && old(&body) {
        Got::OldWhole
    } else if new(&body) && (change != Some(Change::Truncate) || length == TRUNCATED_TO) {
        Got::NewWhole
    } else {
        Got::Bad("a whole body that is neither the old file nor the new")
    })
}

pub(super) fn describe(gots: &[Got]) -> String {
    let t = Tally::default();
    for g in gots {
        t.add(&match g {
            Got::OldWhole => "old file, whole".to_string(),
            Got::NewWhole => "file as it now is, whole".to_string(),
            Got::CutShort => "200 cut short".to_string(),
            Got::Status(s) => format!("status {s}"),
            Got::Bad(why) => why.to_string(),
        });
    }
    t.describe()
}

/// What a request made after the change may get, while the cache may still
/// trust its entry.
fn acceptable_meanwhile(g: Got, change: Change) -> bool {
    match change {
        Change::Truncate => matches!(g, Got::NewWhole | Got::Status(500)),
        Change::Replace => matches!(g, Got::OldWhole | Got::NewWhole),
        Change::Remove => matches!(g, Got::OldWhole | Got::Status(404)),
    }
}

/// What it must get once the cache's validity has passed.
fn now_state(g: Got, change: Change) -> bool {
    match change {
        Change::Truncate | Change::Replace => g == Got::NewWhole,
        Change::Remove => g == Got::Status(404),
    }
}

pub(crate) fn file_changed(cfg: &SuiteConfig, target: Target, change: Change) -> FaultRow {
    let readers = cfg.size.pick(4, 16);
    let injected = format!(
        "{readers} slow readers are fetching a {} MiB file (sendfile) when it is {}; then requests for it and for an {} KiB file changed the same way (one send)",
        BIG >> 20,
        match change {
            Change::Truncate => "truncated to 100 bytes",
            Change::Replace => "replaced (a new file renamed over it)",
            Change::Remove => "removed",
        },
        SMALL >> 10
    );
    let trial = Trial::serve(cfg, target, change.name(), injected, &[], Limits::default());
    let mut trial = match trial {
        Ok(t) => t,
        Err(e) => return super::not_run(target, change.name(), e),
    };
    let (big_path, small_path) = match (
        trial.docroot().write("victim", BIG),
        trial.docroot().write("victim-small", SMALL),
    ) {
        (Ok(b), Ok(s)) => (b, s),
        (Err(e), _) | (_, Err(e)) => {
            trial.row.error = Some(e.to_string());
            return trial.died();
        }
    };
    if let Err(e) = trial.baseline(&["/victim", "/victim-small"]) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let addr = trial.addr();
    let mut throughput = super::row::Throughput::default();
    trial.live_on();
    throughput.fault_free.push(trial.window());

    // The slow readers start; once their transfers are under way, the change.
    let inflight: Vec<_> = (0..readers)
        .map(|_| {
            std::thread::spawn(move || slow_get(addr, "/victim", BIG, Some(change), TRANSFER_PACE))
        })
        .collect();
    let fault_started = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    // The small file's cache entry fresh too, so the request after the change
    // meets a trusted entry for both sizes.
    let _ = slow_get(addr, "/victim-small", SMALL, Some(change), Pace::FULL_SPEED);
    let changed = change
        .apply(&big_path)
        .and_then(|()| change.apply(&small_path));
    let changed_at = Instant::now();
    let meanwhile_big = slow_get(addr, "/victim", BIG, Some(change), Pace::FULL_SPEED);
    let meanwhile_small = slow_get(addr, "/victim-small", SMALL, Some(change), Pace::FULL_SPEED);
    // The live clients' window covers the transfers and the requests after.
    let w = trial.window();
    throughput.under_fault.push(w);
    let inflight: Vec<io::Result<Got>> = inflight
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(io::Error::other("reader panicked")))
        })
        .collect();
    if let Some(wait) = (changed_at + CACHE_VALID).checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    let later_big = slow_get(addr, "/victim", BIG, Some(change), Pace::FULL_SPEED);
    let later_small = slow_get(addr, "/victim-small", SMALL, Some(change), Pace::FULL_SPEED);
    throughput.fault_free.push(trial.window());
    trial.row.throughput = Some(throughput);
    if !trial.alive() {
        return trial.died();
    }
    if let Err(e) = changed {
        trial.row.error = Some(format!("the change failed: {e}"));
    }
    let errors: Vec<String> = inflight
        .iter()
        .chain([&meanwhile_big, &meanwhile_small, &later_big, &later_small])
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    if !errors.is_empty() {
        trial.row.error = Some(format!("requests failed to start: {}", errors.join("; ")));
    }
    let got = |r: &io::Result<Got>| r.as_ref().copied().unwrap_or(Got::Bad("no request"));
    let inflight: Vec<Got> = inflight.iter().map(got).collect();
    let inflight_ok = inflight.iter().all(|g| match change {
        Change::Truncate => matches!(g, Got::OldWhole | Got::CutShort),
        Change::Replace | Change::Remove => *g == Got::OldWhole,
    });
    trial.check(Check::new(
        match change {
            Change::Truncate => "transfers under way end — whole, or cut short with the connection closed — none hangs, none carries bytes not in the file",
            _ => "transfers under way finish with the old file, whole (the server holds it open)",
        },
        inflight_ok,
        format!(
            "{} (change {:.0} ms after they started)",
            describe(&inflight),
            (changed_at - fault_started).as_secs_f64() * 1000.0
        ),
    ));
    let (mb, ms) = (got(&meanwhile_big), got(&meanwhile_small));
    let meanwhile = Check::new(
        match change {
            Change::Truncate => "a request after the truncation gets the file as it now is, or 500 — never a 200 with the old length and a short body",
            Change::Replace => "a request after the replacement gets one file whole, old or new — never a mix",
            Change::Remove => "a request after the removal gets the old file whole or 404",
        },
        acceptable_meanwhile(mb, change) && acceptable_meanwhile(ms, change),
        format!("over 16 KiB: {}; up to 16 KiB: {}", describe(&[mb]), describe(&[ms])),
    );
    trial.check(if change == Change::Truncate {
        meanwhile.item("4")
    } else {
        meanwhile
    });
    let (lb, ls) = (got(&later_big), got(&later_small));
    trial.check(Check::new(
        "once the open-file cache's 1 s has passed, the file is served as it now is",
        now_state(lb, change) && now_state(ls, change),
        format!(
            "over 16 KiB: {}; up to 16 KiB: {}",
            describe(&[lb]),
            describe(&[ls])
        ),
    ));
    let stop = trial.cfg.stop_bound();
    trial.finish(Duration::from_secs(10), stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_and_new_differ_at_every_offset() {
        assert!((0..100_000).all(|i| pattern(i) != new_pattern(i)));
    }

    #[test]
    fn truncation_meanwhile_allows_only_the_new_state_or_500() {
        assert!(acceptable_meanwhile(Got::NewWhole, Change::Truncate));
        assert!(acceptable_meanwhile(Got::Status(500), Change::Truncate));
        assert!(!acceptable_meanwhile(Got::CutShort, Change::Truncate));
        assert!(!acceptable_meanwhile(Got::OldWhole, Change::Truncate));
        assert!(acceptable_meanwhile(Got::OldWhole, Change::Remove));
        assert!(!acceptable_meanwhile(Got::CutShort, Change::Replace));
    }
}
