//! Conformance of `evq::completion` over real sockets: every operation's success and
//! error paths, provided-buffer exhaustion (`ENOBUFS`) recovered with every byte
//! delivered exactly once, CQ overflow recovered, cancels (also racing live data),
//! peer resets mid-recv, and a dropped ring releasing its requests. No timing is
//! asserted: waits are bounded by a generous patience and only matter on failure.

use evq::completion::{CompletionOptions, CompletionRing, Completions, OpKind, Setup};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

mod util;

use util::completion::{ring, run_until, tcp_pair, until_final, PATIENCE};

#[test]
fn options_out_of_range_are_refused_with_the_field_named() {
    for (options, field) in [
        (CompletionOptions::new().buffers(3), "buffers"),
        (CompletionOptions::new().buffers(65_536), "buffers"),
        (CompletionOptions::new().buffer_size(0), "buffer_size"),
        (CompletionOptions::new().sq_entries(0), "sq_entries"),
        (
            CompletionOptions::new().sq_entries(64).cq_entries(8),
            "cq_entries",
        ),
        (
            CompletionOptions::new()
                .single_issuer(Setup::Off)
                .defer_taskrun(Setup::Required),
            "defer_taskrun",
        ),
    ] {
        let err = CompletionRing::with_options(options)
            .err()
            .expect("refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(field), "{err} should name {field}");
    }
}

#[test]
fn setup_flags_required_are_granted_or_named() {
    let options = CompletionOptions::new()
        .single_issuer(Setup::Required)
        .defer_taskrun(Setup::Required);
    match CompletionRing::with_options(options) {
        Ok(r) => assert!(r.setup().single_issuer && r.setup().defer_taskrun),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("SINGLE_ISSUER")
                    || msg.contains("DEFER_TASKRUN")
                    || msg.contains("Linux"),
                "{msg}"
            );
            evq_testkit::skip("IORING_SETUP_DEFER_TASKRUN", msg);
        }
    }
    // Off is honoured.
    let Some(r) = ring(
        CompletionOptions::new()
            .single_issuer(Setup::Off)
            .defer_taskrun(Setup::Off),
    ) else {
        return;
    };
    assert!(!r.setup().single_issuer && !r.setup().defer_taskrun);
}

#[test]
fn nop_and_timeout_complete_with_their_tokens() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    r.nop(1);
    r.timeout(Duration::from_millis(1), 2);
    let mut got = HashMap::new();
    run_until(&mut r, 8, |_, s| {
        assert!(!s.more);
        got.insert(s.token, s);
        got.len() == 2
    });
    assert_eq!(got[&1].kind, OpKind::Nop);
    assert_eq!(got[&1].result, Ok(0));
    assert_eq!(got[&2].kind, OpKind::Timeout);
    assert_eq!(got[&2].result, Ok(0), "an expired timeout is a success");
    assert_eq!(r.in_flight(), 0);
    // A zero-timeout dequeue with nothing in flight returns empty, not blocking.
    let mut batch = Completions::with_capacity(4);
    assert_eq!(
        r.get_next_completion(&mut batch, Some(Duration::ZERO))
            .unwrap(),
        0
    );
}

#[test]
fn cancel_a_timeout_and_cancel_something_finished() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let long = r.timeout(Duration::from_secs(3600), 10);
    r.cancel(long, 11);
    let mut got = HashMap::new();
    run_until(&mut r, 8, |_, s| {
        got.insert(s.token, s);
        got.len() == 2
    });
    assert_eq!(got[&10].result, Err(libc::ECANCELED));
    assert_eq!(got[&11].result, Ok(0));
    // The same OpId again: its operation is over, so ENOENT, never another op.
    let fresh = r.timeout(Duration::from_secs(3600), 12);
    r.cancel(long, 13);
    let s = until_final(&mut r, 13);
    assert_eq!(s.last().unwrap().result, Err(libc::ENOENT));
    r.cancel(fresh, 14);
    let all = until_final(&mut r, 14);
    let mut rest = all.clone();
    if !rest.iter().any(|s| s.token == 12) {
        rest = until_final(&mut r, 12);
    }
    assert!(rest
        .iter()
        .chain(all.iter())
        .any(|s| s.token == 12 && s.result == Err(libc::ECANCELED)));
}

/// Quirk p: with `DEFER_TASKRUN` the kernel takes up a ready connection only
/// when the thread asks it for events, and a dequeue that finds completions
/// already queued does not ask; `run_kernel_work` does, without waiting.
#[test]
fn run_kernel_work_takes_up_what_a_busy_dequeue_leaves_waiting() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    r.accept_multishot(listener.as_raw_fd(), 7);
    let mut batch = Completions::with_capacity(16);
    // Nothing to deliver: the dequeue enters, and the accept is armed.
    assert_eq!(
        r.get_next_completion(&mut batch, Some(Duration::ZERO))
            .unwrap(),
        0
    );
    let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    // A completion queued without asking for events (a nop, submitted).
    let tokens = |r: &mut CompletionRing, batch: &mut Completions, nop: u64| {
        r.nop(nop);
        r.submit().unwrap();
        r.get_next_completion(batch, Some(Duration::ZERO)).unwrap();
        let mut t: Vec<u64> = batch.iter().map(|c| c.token()).collect();
        for c in batch.iter() {
            if let Some(fd) = c.accepted_fd() {
                // SAFETY: the accepted descriptor is ours from its completion on.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        t.sort_unstable();
        t
    };
    if r.setup().defer_taskrun {
        assert_eq!(
            tokens(&mut r, &mut batch, 1),
            [1],
            "the connection waits in the listen queue, not taken up"
        );
    }
    // The accept's completion comes queued beside a nop's once the kernel
    // was asked (the handshake's last step may still be in softirq on a
    // loaded machine: ask again until it is done, never entering otherwise).
    let until = Instant::now() + PATIENCE;
    for nop in 100.. {
        r.run_kernel_work().unwrap();
        let got = tokens(&mut r, &mut batch, nop);
        if got.contains(&7) {
            assert_eq!(got, [7, nop]);
            break;
        }
        assert_eq!(got, [nop]);
        assert!(Instant::now() < until, "the accept never completed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Quirk q: a multishot accept cancelled but not yet ended (its cancel's work
/// deferred) takes the wake-up of a connection that arrives meanwhile, and an
/// accept armed beside it sleeps with the connection queued; the next
/// connection wakes it, and it takes both.
#[test]
fn an_accept_armed_beside_a_cancelled_one_sleeps_until_the_next_connection() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let lfd = listener.as_raw_fd();
    let dying = r.accept_multishot(lfd, 1);
    let mut batch = Completions::with_capacity(16);
    // Nothing to deliver: the dequeue enters, and the accept waits.
    assert_eq!(
        r.get_next_completion(&mut batch, Some(Duration::ZERO))
            .unwrap(),
        0
    );
    r.cancel(dying, 9);
    r.accept_multishot(lfd, 2);
    // Both go in without asking for events: the cancel's work waits.
    r.submit().unwrap();
    let _first = TcpStream::connect(addr).unwrap();
    // Queued on the listener (the handshake's last step runs in softirq).
    let until = Instant::now() + PATIENCE;
    let mut pfd = libc::pollfd {
        fd: lfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd that lives across the call.
    while unsafe { libc::poll(&mut pfd, 1, 10) } != 1 {
        assert!(Instant::now() < until, "the connection never queued");
    }
    let mut accepted = Vec::new();
    let keep = |batch: &Completions, accepted: &mut Vec<OwnedFd>| {
        let mut tokens = Vec::new();
        for c in batch.iter() {
            if let Some(fd) = c.accepted_fd() {
                // SAFETY: the accepted descriptor is ours from its completion on.
                accepted.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
            tokens.push((c.token(), c.more()));
        }
        tokens
    };
    // Now the cancel runs: the dying accept ends, and nothing is accepted.
    let mut ended = Vec::new();
    while !ended.contains(&(1, false)) {
        assert!(Instant::now() < until, "the cancel never ended the accept");
        r.get_next_completion(&mut batch, Some(Duration::from_millis(50)))
            .unwrap();
        ended.extend(keep(&batch, &mut accepted));
    }
    if r.setup().defer_taskrun {
        assert!(
            accepted.is_empty() && !ended.iter().any(|&(t, _)| t == 2),
            "the new accept took the connection: {ended:?}"
        );
        // Still queued, the new accept asleep: asking again changes nothing.
        r.get_next_completion(&mut batch, Some(Duration::from_millis(100)))
            .unwrap();
        assert!(keep(&batch, &mut accepted).is_empty());
        // SAFETY: as above.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1, "still queued");
    }
    // The next connection wakes it: it takes everything queued.
    let _second = TcpStream::connect(addr).unwrap();
    while accepted.len() < 2 {
        assert!(Instant::now() < until, "accepted {}", accepted.len());
        r.get_next_completion(&mut batch, Some(Duration::from_millis(50)))
            .unwrap();
        for (t, more) in keep(&batch, &mut accepted) {
            assert_eq!((t, more), (2, true));
        }
    }
}

#[test]
fn multishot_accept_delivers_every_connection_and_reports_errors() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    r.accept_multishot(listener.as_raw_fd(), 7);
    let clients: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(listener.local_addr().unwrap()).unwrap())
        .collect();
    let mut accepted = Vec::new();
    run_until(&mut r, 2, |_, s| {
        assert_eq!((s.token, s.kind), (7, OpKind::Accept));
        assert!(s.more, "multishot accept goes on");
        let fd = s.result.expect("accepted") as i32;
        // SAFETY: the accepted descriptor is ours from its completion on.
        accepted.push(unsafe { OwnedFd::from_raw_fd(fd) });
        accepted.len() == clients.len()
    });
    // Each accepted socket is one of the clients: their addresses match.
    for fd in accepted {
        let s = TcpStream::from(fd);
        let peer = s.peer_addr().unwrap();
        assert!(clients.iter().any(|c| c.local_addr().unwrap() == peer));
    }
    // Error path: accept on a socket that is not listening ends with EINVAL.
    let not_listening = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    r.accept_multishot(not_listening.as_raw_fd(), 8);
    let s = until_final(&mut r, 8);
    let last = s.last().unwrap();
    assert!(
        matches!(
            last.result,
            Err(libc::EOPNOTSUPP) | Err(libc::EINVAL) | Err(libc::ENOTSOCK)
        ),
        "{last:?}"
    );
}

#[test]
fn multishot_recv_delivers_data_then_eof_and_errors_on_a_non_socket() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, mut client) = tcp_pair(&listener);
    r.recv_multishot(server.as_raw_fd(), 3);
    client.write_all(b"hello ").unwrap();
    let mut data = Vec::new();
    run_until(&mut r, 4, |_, s| {
        assert_eq!(s.token, 3);
        data.extend_from_slice(&s.data);
        assert_eq!(s.result, Ok(s.data.len() as u32));
        data.len() == 6
    });
    client.write_all(b"world").unwrap();
    drop(client);
    let rest = until_final(&mut r, 3);
    for s in &rest {
        data.extend_from_slice(&s.data);
    }
    assert_eq!(data, b"hello world");
    assert_eq!(rest.last().unwrap().result, Ok(0), "EOF ends the receive");
    assert_eq!(r.in_flight(), 0);
    // Error path: recv on a pipe.
    let (rd, _wr) = std::io::pipe().unwrap();
    r.recv_multishot(rd.as_raw_fd(), 4);
    let s = until_final(&mut r, 4);
    assert_eq!(s.last().unwrap().result, Err(libc::ENOTSOCK));
}

#[test]
fn received_data_is_not_readable_after_the_next_dequeue() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let (ours, mut peer) = UnixStream::pair().unwrap();
    r.recv_multishot(ours.as_raw_fd(), 1);
    peer.write_all(b"abc").unwrap();
    let mut batch = Completions::with_capacity(4);
    let give_up = Instant::now() + PATIENCE;
    while batch.is_empty() {
        assert!(Instant::now() < give_up);
        r.get_next_completion(&mut batch, Some(Duration::from_millis(200)))
            .unwrap();
    }
    let c = batch.iter().next().unwrap();
    assert_eq!(r.received(c), Some(&b"abc"[..]));
    let mut later = Completions::with_capacity(4);
    r.get_next_completion(&mut later, Some(Duration::ZERO))
        .unwrap();
    assert_eq!(
        r.received(batch.iter().next().unwrap()),
        None,
        "buffer was lent back"
    );
}

#[test]
fn send_delivers_everything_and_hands_the_buffer_back() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, mut client) = tcp_pair(&listener);
    // 8 MiB: far over the socket buffer, so the kernel sends in several parts.
    let payload: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
    let expect = payload.clone();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        got
    });
    r.send(server.as_raw_fd(), payload, 5);
    let mut batch = Completions::with_capacity(4);
    let give_up = Instant::now() + PATIENCE;
    let buffers = loop {
        assert!(Instant::now() < give_up);
        r.get_next_completion(&mut batch, Some(Duration::from_millis(200)))
            .unwrap();
        if let Some(c) = batch.iter_mut().next() {
            assert_eq!((c.token(), c.kind()), (5, OpKind::Send));
            assert_eq!(c.result().unwrap(), 8 << 20);
            break c.take_buffers().unwrap();
        }
    };
    assert_eq!(buffers, vec![expect.clone()]);
    drop(server);
    assert!(reader.join().unwrap() == expect, "every byte, in order");
}

#[test]
fn writev_sends_its_parts_in_order() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let (ours, mut peer) = UnixStream::pair().unwrap();
    r.writev(
        ours.as_raw_fd(),
        vec![b"ab".to_vec(), b"".to_vec(), b"cde".to_vec()],
        9,
    );
    let s = until_final(&mut r, 9);
    assert_eq!(s.last().unwrap().result, Ok(5));
    let mut buf = [0; 5];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"abcde");
    // Error path: writev to the read end of a pipe.
    let (rd, _wr) = std::io::pipe().unwrap();
    r.writev(rd.as_raw_fd(), vec![b"x".to_vec()], 10);
    assert_eq!(
        until_final(&mut r, 10).last().unwrap().result,
        Err(libc::EBADF)
    );
}

#[test]
fn send_to_a_reset_peer_fails_without_a_signal() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let (ours, peer) = UnixStream::pair().unwrap();
    drop(peer);
    r.send(ours.as_raw_fd(), b"lost".to_vec(), 6);
    let last = until_final(&mut r, 6).pop().unwrap();
    assert_eq!(
        last.result,
        Err(libc::EPIPE),
        "MSG_NOSIGNAL: EPIPE, and we are alive"
    );
}

#[test]
fn close_succeeds_and_reports_a_bad_descriptor() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let (ours, mut peer) = UnixStream::pair().unwrap();
    // The ring takes the descriptor: into_raw_fd, so nothing else closes the number.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(ours);
    r.close(fd, 1);
    assert_eq!(until_final(&mut r, 1).last().unwrap().result, Ok(0));
    let mut buf = [0; 1];
    assert_eq!(peer.read(&mut buf).unwrap(), 0, "the peer sees the close");
    r.close(-1, 2);
    assert_eq!(
        until_final(&mut r, 2).last().unwrap().result,
        Err(libc::EBADF)
    );
}

#[test]
fn enobufs_is_recovered_and_every_byte_arrives_exactly_once() {
    // Two 64-byte buffers for eight connections with 16 KiB waiting each: the
    // buffer ring runs dry at once and over and over.
    let Some(mut r) = ring(CompletionOptions::new().buffers(2).buffer_size(64)) else {
        return;
    };
    const CONNS: usize = 8;
    const BYTES: usize = 16 << 10;
    let mut pairs = Vec::new();
    for i in 0..CONNS {
        let (ours, mut peer) = UnixStream::pair().unwrap();
        let pattern: Vec<u8> = (0..BYTES).map(|j| (j * 7 + i) as u8).collect();
        peer.write_all(&pattern).unwrap();
        pairs.push((ours, peer, pattern));
    }
    for (i, (ours, _, _)) in pairs.iter().enumerate() {
        r.recv_multishot(ours.as_raw_fd(), i as u64);
    }
    let mut got = vec![Vec::new(); CONNS];
    run_until(&mut r, 3, |_, s| {
        assert_eq!(s.kind, OpKind::Recv);
        assert!(s.more, "ENOBUFS must not end the receive: {s:?}");
        assert!(s.data.len() <= 64);
        got[s.token as usize].extend_from_slice(&s.data);
        got.iter().all(|g| g.len() >= BYTES)
    });
    for (i, (_, _, pattern)) in pairs.iter().enumerate() {
        assert_eq!(got[i].len(), BYTES, "connection {i}: exact byte count");
        assert!(got[i] == *pattern, "connection {i}: bytes in order");
    }
    assert!(
        r.stats().enobufs_rearms > 0,
        "the ring did run dry: {:?}",
        r.stats()
    );
    // The receives are still armed: more data still arrives.
    pairs[0].1.write_all(b"!").unwrap();
    let mut more = Vec::new();
    run_until(&mut r, 3, |_, s| {
        more.extend_from_slice(&s.data);
        !more.is_empty()
    });
    assert_eq!(more, b"!");
}

#[test]
fn cq_overflow_is_recovered_without_losing_a_completion() {
    let Some(mut r) = ring(CompletionOptions::new().sq_entries(8).cq_entries(8)) else {
        return;
    };
    const N: u64 = 500;
    for t in 0..N {
        r.nop(t);
    }
    let mut seen_tokens = vec![0u32; N as usize];
    let mut count = 0;
    run_until(&mut r, 1024, |_, s| {
        seen_tokens[s.token as usize] += 1;
        count += 1;
        count >= N as usize
    });
    assert!(seen_tokens.iter().all(|&n| n == 1), "each exactly once");
    assert_eq!(r.in_flight(), 0);
    assert!(
        r.stats().cq_overflow_flushes > 0,
        "the CQ did overflow: {:?}",
        r.stats()
    );

    // Multishot recvs across an overflowing CQ: still every byte.
    let Some(mut r) = ring(
        CompletionOptions::new()
            .sq_entries(2)
            .cq_entries(2)
            .buffers(4)
            .buffer_size(16),
    ) else {
        return;
    };
    let (ours, mut peer) = UnixStream::pair().unwrap();
    let pattern: Vec<u8> = (0..4096).map(|j| (j % 253) as u8).collect();
    peer.write_all(&pattern).unwrap();
    r.recv_multishot(ours.as_raw_fd(), 1);
    let mut got = Vec::new();
    run_until(&mut r, 1, |_, s| {
        got.extend_from_slice(&s.data);
        got.len() >= pattern.len()
    });
    assert!(got == pattern);
}

#[test]
fn cancel_an_idle_recv_and_a_recv_racing_live_data() {
    let Some(mut r) = ring(CompletionOptions::new().buffers(4).buffer_size(512)) else {
        return;
    };
    let (ours, _peer) = UnixStream::pair().unwrap();
    let op = r.recv_multishot(ours.as_raw_fd(), 1);
    r.submit().unwrap();
    r.cancel(op, 2);
    let mut got = HashMap::new();
    run_until(&mut r, 8, |_, s| {
        if !s.more {
            got.insert(s.token, s);
        }
        got.len() == 2
    });
    assert_eq!(got[&1].result, Err(libc::ECANCELED));
    assert_eq!(got[&2].result, Ok(0));

    // Race: a writer keeps sending while we cancel. Whatever the ring delivered
    // plus what is left in the socket is exactly what was written.
    let (ours, mut peer) = UnixStream::pair().unwrap();
    const TOTAL: usize = 256 << 10;
    let writer = std::thread::spawn(move || {
        let chunk = [0x5au8; 1000];
        let mut left = TOTAL;
        while left > 0 {
            let n = left.min(chunk.len());
            peer.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
        // Dropping the peer here gives our end EOF once everything is read.
    });
    let op = r.recv_multishot(ours.as_raw_fd(), 3);
    let mut delivered = 0usize;
    let mut cancelled = false;
    let mut ended = false;
    run_until(&mut r, 4, |r, s| {
        if s.token == 3 {
            assert!(s.data.iter().all(|&b| b == 0x5a));
            delivered += s.data.len();
            if !s.more {
                ended = true;
            }
        }
        if !cancelled && delivered > 0 {
            r.cancel(op, 4);
            cancelled = true;
        }
        ended
    });
    // The writer may still be blocked on a full socket: read the rest first.
    let mut rest = Vec::new();
    (&ours).read_to_end(&mut rest).unwrap();
    writer.join().unwrap();
    assert_eq!(
        delivered + rest.len(),
        TOTAL,
        "nothing lost or doubled by the cancel"
    );
}

#[test]
fn peer_reset_mid_recv_ends_the_receive_with_econnreset() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server, mut client) = tcp_pair(&listener);
    r.recv_multishot(server.as_raw_fd(), 1);
    client.write_all(b"partial").unwrap();
    let mut data = Vec::new();
    run_until(&mut r, 4, |_, s| {
        data.extend_from_slice(&s.data);
        data.len() == 7
    });
    // SO_LINGER 0 then close: the peer sends RST.
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client);
    let last = until_final(&mut r, 1).pop().unwrap();
    assert_eq!(last.result, Err(libc::ECONNRESET), "{last:?}");
    assert_eq!(data, b"partial");
    // And a send on the reset connection fails cleanly.
    r.send(server.as_raw_fd(), b"x".to_vec(), 2);
    let last = until_final(&mut r, 2).pop().unwrap();
    assert!(
        matches!(last.result, Err(libc::EPIPE) | Err(libc::ECONNRESET)),
        "{last:?}"
    );
}

#[test]
fn dropping_the_ring_releases_its_requests() {
    let Some(mut r) = ring(CompletionOptions::new()) else {
        return;
    };
    let (ours, mut peer) = UnixStream::pair().unwrap();
    r.recv_multishot(ours.as_raw_fd(), 1);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    r.accept_multishot(listener.as_raw_fd(), 2);
    r.timeout(Duration::from_secs(3600), 3);
    r.submit().unwrap();
    drop(r);
    // The recv held a reference to our socket; with it cancelled, closing our end
    // is a real close and the peer sees EOF.
    drop(ours);
    peer.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0; 1];
    assert_eq!(peer.read(&mut buf).unwrap(), 0);
}
