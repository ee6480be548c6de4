//! Conformance of `CompletionRing::recv_into`, the paced receive: one recv into
//! the caller's buffer, appended after what it holds, handed back with the
//! completion — and nothing taken from the socket beyond what was asked, which
//! is its reason to exist beside the multishot recv (quirk r). Success, end of
//! file, a reset peer, a non-socket, a buffer with no room, a cancel, and a
//! large stream received piece by piece with every byte once and in order.

use evq::completion::{CompletionOptions, OpKind};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

mod util;

use util::completion::{ring, tcp_pair, until_final, Seen};

/// The one buffer a `recv_into` completion hands back.
fn buffer(s: &Seen) -> &[u8] {
    let bufs = s
        .returned
        .as_ref()
        .expect("recv_into hands its buffer back");
    assert_eq!(bufs.len(), 1, "{s:?}");
    &bufs[0]
}

#[test]
fn recv_into_appends_what_came_and_takes_no_more_than_asked() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, mut client) = tcp_pair(&listener);
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(b"kept:");
    r.recv_into(server.as_raw_fd(), buf, 1);
    client.write_all(b"hello").unwrap();
    let s = until_final(&mut r, 1).pop().unwrap();
    assert_eq!((s.kind, s.result, s.more), (OpKind::RecvInto, Ok(5), false));
    assert_eq!(buffer(&s), b"kept:hello", "appended after what it held");
    assert_eq!(r.in_flight(), 0, "one completion ends it");

    // 100 bytes waiting, room for 16: the rest stays in the socket.
    client.write_all(&[7u8; 100]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    r.recv_into(server.as_raw_fd(), Vec::with_capacity(16), 2);
    let s = until_final(&mut r, 2).pop().unwrap();
    let n = s.result.unwrap() as usize;
    assert!((1..=16).contains(&n), "{s:?}");
    assert_eq!(buffer(&s), &[7u8; 100][..n]);
    let mut rest = vec![0u8; 100 - n];
    (&server).read_exact(&mut rest).unwrap();
    assert!(
        rest.iter().all(|&b| b == 7),
        "the rest was left in the socket"
    );

    // End of file: 0, the buffer as it was.
    drop(client);
    r.recv_into(server.as_raw_fd(), with_room(b"same", 8), 3);
    let s = until_final(&mut r, 3).pop().unwrap();
    assert_eq!(s.result, Ok(0));
    assert_eq!(buffer(&s), b"same");
}

#[test]
fn recv_into_errors_hand_the_buffer_back_unchanged() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    // No room: EINVAL at once, not a zero read that looks like end of file.
    let (ours, mut peer) = UnixStream::pair().unwrap();
    peer.write_all(b"waiting").unwrap();
    let mut full = b"full".to_vec();
    full.shrink_to_fit();
    assert_eq!(full.len(), full.capacity());
    r.recv_into(ours.as_raw_fd(), full, 1);
    let s = until_final(&mut r, 1).pop().unwrap();
    assert_eq!(s.result, Err(libc::EINVAL));
    assert_eq!(buffer(&s), b"full");

    // Not a socket.
    let (rd, _wr) = std::io::pipe().unwrap();
    r.recv_into(rd.as_raw_fd(), Vec::with_capacity(8), 2);
    let s = until_final(&mut r, 2).pop().unwrap();
    assert_eq!(s.result, Err(libc::ENOTSOCK));
    assert!(buffer(&s).is_empty());

    // A peer that resets.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, client) = tcp_pair(&listener);
    r.recv_into(server.as_raw_fd(), with_room(b"x", 32), 3);
    r.submit().unwrap();
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client);
    let s = until_final(&mut r, 3).pop().unwrap();
    assert_eq!(s.result, Err(libc::ECONNRESET), "{s:?}");
    assert_eq!(buffer(&s), b"x");

    // Cancelled while waiting: ECANCELED, the buffer back, the cancel found it.
    let (ours, _peer) = UnixStream::pair().unwrap();
    let op = r.recv_into(ours.as_raw_fd(), with_room(b"idle", 32), 4);
    r.submit().unwrap();
    r.cancel(op, 5);
    let all = until_final(&mut r, 4);
    let s = all.iter().find(|s| s.token == 4).unwrap();
    assert_eq!(s.result, Err(libc::ECANCELED));
    assert_eq!(buffer(s), b"idle");
    let cancel = match all.iter().find(|s| s.token == 5) {
        Some(c) => c.clone(),
        None => until_final(&mut r, 5).pop().unwrap(),
    };
    assert_eq!(cancel.result, Ok(0));
    drop(peer);
}

#[test]
fn a_stream_received_piece_by_piece_arrives_whole_and_in_order() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, mut client) = tcp_pair(&listener);
    const TOTAL: usize = 4 << 20;
    let writer = std::thread::spawn(move || {
        let payload: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        client.write_all(&payload).unwrap();
    });
    let mut got: Vec<u8> = Vec::with_capacity(TOTAL);
    loop {
        // Each recv asks for 16 KiB more, appended to all received so far.
        got.reserve_exact(16 << 10);
        let room = got.capacity() - got.len();
        let before = got.len();
        r.recv_into(server.as_raw_fd(), std::mem::take(&mut got), 9);
        let mut s = until_final(&mut r, 9).pop().unwrap();
        got = s.returned.take().unwrap().pop().unwrap();
        let n = s.result.unwrap() as usize;
        assert!(n <= room);
        assert_eq!(got.len(), before + n);
        if n == 0 {
            break;
        }
    }
    writer.join().unwrap();
    assert_eq!(got.len(), TOTAL);
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
        "every byte once, in order"
    );
}

/// A buffer holding `bytes`, with room for `room` more.
fn with_room(bytes: &[u8], room: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(bytes.len() + room);
    b.extend_from_slice(bytes);
    b
}
