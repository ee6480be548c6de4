//! `CompletionRing::connect` over real sockets: a connection made through the ring
//! carries data both ways (IPv4 and IPv6, blocking and non-blocking sockets), a
//! refused connection completes with `ECONNREFUSED`, and a cancelled connect to an
//! address that never answers completes with `ECANCELED`.

use evq::completion::{CompletionOptions, CompletionRing, Completions, OpKind};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(20);

mod util;

/// A ring, or `None` where the kernel lacks the completion API (`util`).
fn ring() -> Option<CompletionRing> {
    util::completion::ring(CompletionOptions::new())
}

fn tcp_socket(v6: bool, nonblocking: bool) -> OwnedFd {
    let domain = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if nonblocking {
        ty |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: socket(2) takes no pointers; a non-negative result is ours.
    let fd = unsafe { libc::socket(domain, ty, 0) };
    assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
    // SAFETY: a fresh descriptor nobody else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Dequeues until the completion of `kind` arrives; returns its result.
fn wait_for(ring: &mut CompletionRing, kind: OpKind) -> io::Result<u32> {
    let mut batch = Completions::with_capacity(16);
    let until = Instant::now() + PATIENCE;
    while Instant::now() < until {
        ring.get_next_completion(&mut batch, Some(Duration::from_millis(200)))
            .unwrap();
        if let Some(c) = batch.iter().find(|c| c.kind() == kind) {
            return c.result();
        }
    }
    panic!("no {kind:?} completion within {PATIENCE:?}");
}

#[test]
fn a_connection_made_through_the_ring_carries_data_both_ways() {
    for (v6, nonblocking) in [(false, false), (false, true), (true, false), (true, true)] {
        let Some(mut ring) = ring() else { return };
        let bind: SocketAddr = if v6 { "[::1]:0" } else { "127.0.0.1:0" }.parse().unwrap();
        let listener = match TcpListener::bind(bind) {
            Ok(l) => l,
            // A machine without IPv6 loopback: the IPv4 cases still count.
            Err(_) if v6 => continue,
            Err(e) => panic!("bind: {e}"),
        };
        let sock = tcp_socket(v6, nonblocking);
        ring.connect(sock.as_raw_fd(), listener.local_addr().unwrap(), 7);
        assert_eq!(wait_for(&mut ring, OpKind::Connect).unwrap(), 0);
        let (mut peer, from) = listener.accept().unwrap();
        // The socket is really connected: its local address is the peer's `from`.
        let mut stream = TcpStream::from(sock);
        assert_eq!(stream.local_addr().unwrap(), from, "v6 {v6}");
        stream.set_nonblocking(false).unwrap();
        stream.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        stream.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"pong");
    }
}

#[test]
fn a_refused_connection_completes_with_econnrefused() {
    let Some(mut ring) = ring() else { return };
    // A port that was just ours and is closed now: nobody listens there.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let sock = tcp_socket(false, false);
    ring.connect(sock.as_raw_fd(), addr, 1);
    let err = wait_for(&mut ring, OpKind::Connect).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED), "{err}");
}

#[test]
fn a_connect_that_never_answers_can_be_cancelled() {
    let Some(mut ring) = ring() else { return };
    // A listener whose backlog is full and never accepted: further SYNs are
    // dropped, so a connect waits (SYN retransmits) until cancelled.
    let listener = {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s.listen(0).unwrap();
        TcpListener::from(s)
    };
    let addr = listener.local_addr().unwrap();
    // Fill the backlog with plain connections (kept open).
    let mut fillers = Vec::new();
    let mut waiting = None;
    for token in 0..8u64 {
        let sock = tcp_socket(false, false);
        let id = ring.connect(sock.as_raw_fd(), addr, token);
        let mut batch = Completions::with_capacity(4);
        ring.get_next_completion(&mut batch, Some(Duration::from_millis(300)))
            .unwrap();
        if batch.iter().any(|c| c.token() == token) {
            fillers.push(sock);
        } else {
            waiting = Some((id, sock, token));
            break;
        }
    }
    let (id, _sock, token) = waiting.expect("a connect that waits on a full backlog");
    ring.cancel(id, 100);
    let mut batch = Completions::with_capacity(4);
    let until = Instant::now() + PATIENCE;
    loop {
        assert!(
            Instant::now() < until,
            "the cancelled connect never completed"
        );
        ring.get_next_completion(&mut batch, Some(Duration::from_millis(200)))
            .unwrap();
        if let Some(c) = batch.iter().find(|c| c.token() == token) {
            let err = c.result().unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ECANCELED), "{err}");
            break;
        }
    }
}
