//! SIGTERM under load: live keep-alive clients busy, slow readers in the middle
//! of a big reply. What a graceful stop owes (issue 19 item 2): the listener
//! closes at once (a new client is refused, not accepted and left hanging),
//! busy keep-alive connections are told `Connection: close` on their next
//! reply, replies in flight finish, and then the process exits 0 — here within
//! the grace period plus 2 s.

use super::files::{describe, slow_get, Got, Pace};
use super::row::{Check, ExitSummary, FaultRow};
use super::trial::{Trial, BIG_BYTES};
use super::{SuiteConfig, Target};
use crate::subject::Limits;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `evq serve --grace`, seconds.
const GRACE_S: u64 = 8;
/// The slow readers' pace (below).
const IN_FLIGHT_PACE: Pace = Pace::slow(Duration::from_millis(4), 128 * 1024);

pub(crate) fn sigterm(cfg: &SuiteConfig, target: Target) -> FaultRow {
    let readers = cfg.size.pick(4, 16);
    let injected = format!(
        "SIGTERM while {} live keep-alive clients are busy and {readers} slow readers are {} into an {} MiB reply",
        cfg.live_conns(),
        "about a tenth of the way",
        BIG_BYTES >> 20
    );
    let grace = GRACE_S.to_string();
    let trial = match target {
        Target::Serve | Target::ServeCompletion => Trial::serve(
            cfg,
            target,
            "sigterm",
            injected,
            &["--grace", &grace],
            Limits::default(),
        ),
        Target::Proxy | Target::ProxyCompletion | Target::Load => {
            Trial::proxy(cfg, target, "sigterm", injected, &[])
        }
    };
    let mut trial = match trial {
        Ok(t) => t,
        Err(e) => return super::not_run(target, "sigterm", e),
    };
    let big = match target {
        Target::Serve | Target::ServeCompletion => "/big".to_string(),
        Target::Proxy | Target::ProxyCompletion | Target::Load => format!("/big?n={BIG_BYTES}"),
    };
    if let Err(e) = trial.baseline(&[&big]) {
        trial.row.error = Some(e.to_string());
        return trial.died();
    }
    let addr = trial.addr();
    trial.live_on();
    let before = trial.window();

    // Slow readers: a 16 KiB read per 4 ms through a 128 KiB receive buffer is
    // about 4 MB/s, so 8 MiB takes ~2 s: under way at SIGTERM (200 ms in), done
    // well inside the 8 s grace even on a loaded machine. (A 4 KiB buffer, under
    // loopback's MSS, took ~100 s: silly-window avoidance left the server to
    // zero-window probes, and the row blamed the server for the cut.)
    let inflight: Vec<_> = (0..readers)
        .map(|_| {
            let big = big.clone();
            std::thread::spawn(move || slow_get(addr, &big, BIG_BYTES, None, IN_FLIGHT_PACE))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let server = trial
        .server
        .take()
        .expect("a running trial holds its program");
    server.signal(libc::SIGTERM);
    let signalled = Instant::now();
    std::thread::sleep(Duration::from_millis(100));

    // The listener should be closed by now.
    let newcomer = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    let newcomer_detail = match &newcomer {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused".to_string(),
        Err(e) => format!("connect failed: {e}"),
        Ok(_) => format!(
            "accepted {:.0} ms after SIGTERM",
            signalled.elapsed().as_secs_f64() * 1000.0
        ),
    };
    drop(newcomer);

    // The busy keep-alive clients: told to close?
    let live_after = trial.live_off().unwrap_or_default().since(&before.count);
    let bound = Duration::from_secs(GRACE_S + 2);
    let exit = server.wait_exit(bound.saturating_sub(signalled.elapsed()));
    let stop_seconds = signalled.elapsed().as_secs_f64();
    let inflight: Vec<Got> = inflight
        .into_iter()
        .map(|h| {
            h.join()
                .ok()
                .and_then(Result::ok)
                .unwrap_or(Got::Bad("the request could not be made"))
        })
        .collect();
    trial.row.exit = Some(ExitSummary {
        seconds: stop_seconds,
        ..ExitSummary::from(&exit)
    });
    trial.row.up = true;
    trial.row.up_detail = "ran until SIGTERM".into();
    trial.check(
        Check::new(
            "replies in flight at SIGTERM finish, whole",
            inflight.iter().all(|g| *g == Got::OldWhole),
            describe(&inflight),
        )
        .item("2"),
    );
    trial.check(
        Check::new(
            "the listener closes at once: a new client 100 ms after SIGTERM is refused",
            newcomer_detail == "refused",
            newcomer_detail,
        )
        .item("2"),
    );
    trial.check(
        Check::new(
            "busy keep-alive connections are told Connection: close",
            live_after.told_to_close >= cfg.live_conns() as u64,
            format!(
                "{} of {} live connections told to close; after SIGTERM the live clients got {}",
                live_after.told_to_close,
                cfg.live_conns(),
                live_after.describe()
            ),
        )
        .item("2"),
    );
    trial.check(Check::new(
        &format!(
            "exits 0 within the grace period plus 2 s ({} s)",
            bound.as_secs()
        ),
        exit.clean() && stop_seconds <= bound.as_secs_f64() + 0.5,
        format!("{} ({:.2} s after SIGTERM)", exit.describe(), stop_seconds),
    ));
    if let Some(o) = trial.origin.take() {
        o.crash();
    }
    trial.row.seconds = trial.elapsed();
    trial.row
}
