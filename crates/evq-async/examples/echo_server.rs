//! A TCP echo server on evq-async: one task per connection.
//!
//! ```console
//! $ cargo run --release -p evq-async --example echo_server -- --addr 127.0.0.1:7000
//! listening on 127.0.0.1:7000
//! $ cargo run --release -p evq-async --example echo_client -- --addr 127.0.0.1:7000
//! ```

use clap::Parser;
use evq_async::{Async, Executor};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

/// Where to listen and on how many threads.
#[derive(Clone, Debug, Parser)]
#[command(about = "A TCP echo server on evq-async")]
pub struct ServerConfig {
    /// Address to listen on (port 0: any free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: SocketAddr,
    /// Background worker threads (default: one per CPU but one).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Echoes every connection `listener` accepts until an accept fails for good.
pub async fn serve(ex: Executor, listener: Async<TcpListener>) -> io::Result<()> {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors: the connection waits in the backlog.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                evq_async::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        ex.spawn(async move {
            // `&Async<TcpStream>` reads and writes: the same socket on both sides.
            let (mut reader, mut writer) = (&stream, &stream);
            let _ = futures_lite::io::copy(&mut reader, &mut writer).await;
        })
        .detach();
    }
}

#[allow(dead_code)] // the tests include this file as a module and have their own main
fn main() -> io::Result<()> {
    let config = ServerConfig::parse();
    let ex = config
        .threads
        .map_or_else(Executor::new, Executor::with_threads);
    let listener = Async::<TcpListener>::bind(config.addr)?;
    println!("listening on {}", listener.get_ref().local_addr()?);
    ex.block_on(serve(ex.clone(), listener))
}
