//! `evq-herd`: the Stevens server family on loopback; see the library docs.

use clap::Parser;

/// Many workers, one listening socket: thundering herds, wake-one and rotation.
#[derive(Parser, Debug)]
#[command(name = "evq-herd", version)]
struct Cli {
    #[command(flatten)]
    herd: evq_herd::HerdArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = evq_herd::cli(&cli.herd) {
        eprintln!("evq-herd: {e}");
        std::process::exit(1);
    }
}
