//! SEEDS 004's devpollperf on the /dev/poll personality: ns per event for several
//! pipe counts. `cargo run --release -p evq-compat --example devpollperf [iters]`

fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn main() {
    raise_nofile();
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(104_858);
    for nfds in [1, 100, 1000, 4000] {
        match evq_compat::devpollperf(nfds, iters) {
            Ok(ns) => println!(
                "{nfds:>5} fds: {ns:>7.0} ns/event ({:.0} ms for {iters} events)",
                ns * iters as f64 / 1e6
            ),
            Err(e) => println!("{nfds:>5} fds: {e}"),
        }
    }
}
