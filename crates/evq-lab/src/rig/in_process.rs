//! `evq serve` inside the lab's process (one worker thread, fixed reply), for the
//! scenarios that read its counters directly.

use evq::BackendKind;
use evq_http::{ServeConfig, ServerHandle};
use std::io;
use std::time::{Duration, Instant};

/// One worker thread on `backend`, a fixed reply of `reply_size` bytes, on a free
/// loopback port; the rest as `evq serve`'s defaults.
pub fn one_thread(backend: BackendKind, reply_size: usize) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().expect("literal address"),
        backend: Some(backend),
        threads: 1,
        reply_size,
        ..ServeConfig::default()
    }
}

/// [`one_thread`] with timeouts long enough that cold connections, which send
/// nothing, stay open for the whole run.
pub fn holding_cold(backend: BackendKind, reply_size: usize) -> ServeConfig {
    ServeConfig {
        idle_timeout: Duration::from_secs(600),
        header_timeout: Duration::from_secs(600),
        ..one_thread(backend, reply_size)
    }
}

/// Waits until the server holds at least `n` connections (at most `limit`);
/// returns the count it reached.
pub fn wait_open(server: &ServerHandle, n: usize, limit: Duration) -> u64 {
    let since = Instant::now();
    loop {
        let open = server.report().open_conns;
        if open as usize >= n || since.elapsed() > limit {
            return open;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`wait_open`], as an error when the count stays short: "only H of N cold
/// connections came up".
///
/// # Errors
/// `TimedOut` after `limit`.
pub fn require_open(
    server: &ServerHandle,
    n: usize,
    limit: Duration,
    what: &str,
) -> io::Result<u64> {
    let held = wait_open(server, n, limit);
    if (held as usize) < n {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}only {held} of {n} cold connections came up"),
        ));
    }
    Ok(held)
}
