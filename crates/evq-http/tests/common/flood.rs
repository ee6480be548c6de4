//! A flood of new connections, each sending one request and reading to the
//! end, and the judging of what they got: shared by the overload tests of the
//! readiness server, the proxy and the completion server.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const REQ: &str = "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

/// Reads everything a connection gets: `Some(bytes)` on a clean close,
/// `None` on a reset.
pub fn read_all(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(all),
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return if all.is_empty() { None } else { Some(all) },
        }
    }
}

/// What each of a flood's connections got: `Err` if `connect` failed,
/// else what [`read_all`] read.
pub type FloodOutcome = Result<Option<Vec<u8>>, std::io::ErrorKind>;

/// Three clients each open 300 connections a millisecond apart — about 3,000
/// a second for a third of a second — send a request on each and read to the
/// end. (`pulse` waits for the queue to have stood for one 100 ms interval.)
pub fn flood(addr: std::net::SocketAddr) -> Vec<FloodOutcome> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(move || {
                    let streams: Vec<_> = (0..300)
                        .map(|_| {
                            std::thread::sleep(Duration::from_millis(1));
                            let mut c = TcpStream::connect(addr).map_err(|e| e.kind())?;
                            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                            // A reset that comes before the request is sent
                            // is told by the write; the read after it would
                            // say a clean end of file, which is not a reply.
                            c.write_all(REQ.as_bytes()).map_err(|e| e.kind())?;
                            Ok(c)
                        })
                        .collect();
                    streams
                        .into_iter()
                        .map(|c| c.map(|mut c| read_all(&mut c)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

/// Checks a flood's outcomes: every reply that arrived is whole (a 200 with
/// the 1 KiB body), and some clients were refused at connect. Returns
/// (replies, refused at connect).
pub fn judge_flood(outcomes: &[FloodOutcome], what: &str) -> (u64, u64) {
    let refused_at_connect = outcomes
        .iter()
        .filter(|o| matches!(o, Err(std::io::ErrorKind::ConnectionRefused)))
        .count() as u64;
    let served: Vec<&Vec<u8>> = outcomes.iter().flatten().flatten().collect();
    for got in &served {
        let text = String::from_utf8_lossy(got);
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n"),
            "{what}: {text:.80}"
        );
        let head_end = text.find("\r\n\r\n").expect("whole head") + 4;
        assert_eq!(got.len() - head_end, 1024, "{what}: body cut short");
    }
    (served.len() as u64, refused_at_connect)
}
