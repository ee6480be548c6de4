//! hyper 1.x serving HTTP/1.1 on evq-async.
//!
//! ```console
//! $ cargo run --release -p evq-async --example hyper_server -- --addr 127.0.0.1:8080
//! listening on http://127.0.0.1:8080
//! $ curl http://127.0.0.1:8080/               # 1 KiB of 'x'
//! $ curl --data-binary @file http://127.0.0.1:8080/echo
//! $ EVQ_BACKEND=uring cargo run --release -p evq-async --example hyper_server
//! ```
//!
//! `GET` (any path) answers `--body-size` bytes; `POST` echoes the request body;
//! `GET /stats` answers the reactor's statistics. Every connection is one task on
//! an [`evq_async::Executor`]; hyper's header-read timeout runs on evq's timer heap.

use clap::Parser;
use evq_async::{Async, Executor, HyperTimer};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

/// What the server does.
#[derive(Clone, Debug, Parser)]
#[command(about = "hyper 1.x serving HTTP/1.1 on evq-async")]
pub struct Config {
    /// Address to listen on (port 0: any free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Bytes in a GET response body.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(0..=64 << 20))]
    pub body_size: u32,
    /// Background worker threads (default: one per CPU but one; the main thread is
    /// the last worker).
    #[arg(long)]
    pub threads: Option<usize>,
    /// hyper's header-read timeout, in milliseconds (0: none).
    #[arg(long, default_value_t = 30_000)]
    pub header_timeout_ms: u64,
}

/// Serves `listener` until an accept fails for good.
pub async fn serve(
    ex: Executor,
    listener: Async<TcpListener>,
    config: Config,
) -> std::io::Result<()> {
    let body = Bytes::from(vec![b'x'; config.body_size as usize]);
    let mut builder = http1::Builder::new();
    builder.timer(HyperTimer);
    builder.header_read_timeout(
        (config.header_timeout_ms > 0).then(|| Duration::from_millis(config.header_timeout_ms)),
    );
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors: the connection waits in the backlog; try again a
            // little later instead of spinning or giving up.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                eprintln!("accept: {e}; retrying in 10 ms");
                evq_async::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let _ = stream.get_ref().set_nodelay(true);
        let body = body.clone();
        let builder = builder.clone();
        ex.spawn(async move {
            let service = service_fn(move |req| respond(req, body.clone()));
            if let Err(e) = builder.serve_connection(stream, service).await {
                if !e.is_incomplete_message() {
                    eprintln!("connection: {e}");
                }
            }
        })
        .detach();
    }
}

async fn respond(req: Request<Incoming>, body: Bytes) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match (req.method(), req.uri().path()) {
        (&Method::GET, "/stats") => {
            let text = format!("{:?}\n", evq_async::reactor_stats());
            Response::new(Full::new(Bytes::from(text)))
        }
        (&Method::GET, _) | (&Method::HEAD, _) => Response::new(Full::new(body)),
        (&Method::POST, _) => match req.into_body().collect().await {
            Ok(collected) => Response::new(Full::new(collected.to_bytes())),
            Err(e) => Response::builder()
                .status(StatusCode::BAD_REQUEST)
                .body(Full::new(Bytes::from(format!("body: {e}\n"))))
                .expect("a valid response"),
        },
        _ => Response::builder()
            .status(StatusCode::METHOD_NOT_ALLOWED)
            .body(Full::new(Bytes::new()))
            .expect("a valid response"),
    };
    Ok(response)
}

#[allow(dead_code)] // the test suite includes this file as a module and has its own main
fn main() -> std::io::Result<()> {
    let config = Config::parse();
    let ex = match config.threads {
        Some(n) => Executor::with_threads(n),
        None => Executor::new(),
    };
    let listener = Async::<TcpListener>::bind(config.addr)?;
    println!("listening on http://{}", listener.get_ref().local_addr()?);
    println!("evq-async: {:?}", evq_async::reactor_stats()?);
    ex.block_on(serve(ex.clone(), listener, config))
}
