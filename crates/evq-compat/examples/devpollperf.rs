//! SEEDS 004's devpollperf on the /dev/poll personality: ns per event for several
//! pipe counts. `cargo run --release -p evq-compat --example devpollperf [iters]`

fn main() {
    // Thousands of pipes: take all the descriptors the hard limit allows.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
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
