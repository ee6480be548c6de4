//! `evq bench-chain` (hidden): the lab's bench.c chain for one contender in
//! this process, printing the JSON line the C peers print, so that the lab
//! runs evq, mio and polling as children exactly as it runs libev, libevent
//! and libuv.

use std::io;

/// The chain's contender and sizes, as the C peers take them.
#[derive(clap::Args)]
pub struct BenchChainArgs {
    /// `evq-<backend>`, `mio` or `polling`.
    contender: String,
    /// Socketpairs.
    n: usize,
    /// Active pipes.
    a: usize,
    /// Chained writes per run.
    w: usize,
    /// Runs (the first is the warm-up the lab drops).
    reps: usize,
}

/// Runs the chain and prints its line.
pub fn run(b: &BenchChainArgs) -> io::Result<()> {
    let line = evq_lab::experiments::bench_c::chain_json(&b.contender, b.n, b.a, b.w, b.reps)?;
    println!("{line}");
    Ok(())
}
