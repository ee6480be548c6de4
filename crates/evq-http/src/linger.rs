//! Lingering close: how the server and the proxy close a connection after an
//! error reply while the client may still be sending.
//!
//! Closing a TCP socket that has unread input makes Linux answer with a reset
//! instead of a FIN (RFC 2525 §2.17), and more input arriving after the close
//! is answered with a reset too. A reset that reaches the client before it has
//! read the reply throws the reply away with the connection: a client still
//! sending a 32 MiB head meets `ECONNRESET` instead of the 431 it was sent.
//! Most clients send their whole request before reading, so after an error this
//! is the common case, not the odd one.
//!
//! So, as Apache and nginx do (`lingering_close`): send the reply, shut the
//! write side (the FIN follows the reply), then read and drop whatever the
//! client still sends until it closes its side or [`LINGER`] has passed, and
//! only then close. The time bound keeps a client that never stops sending from
//! holding the slot; the bytes are dropped as they come, so lingering costs no
//! memory.

use std::io;
use std::net::Shutdown;
use std::os::fd::RawFd;
use std::time::Duration;

/// How long a connection lingers, at most, after its error reply went out.
/// nginx's `lingering_time` is 30 s; 5 s lets a client on a fast link finish
/// sending tens of megabytes, and bounds how long a closing client holds a
/// descriptor.
pub(crate) const LINGER: Duration = Duration::from_secs(5);

/// What draining a lingering connection found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// The client closed its side (or the connection failed): close ours.
    Done,
    /// The client may still send: wait for readability (or the deadline).
    Waiting,
}

/// Starts a lingering close: everything queued is sent, then a FIN.
pub(crate) fn begin(fd: RawFd) {
    evq_os::io::shutdown(fd, Shutdown::Write);
}

/// Reads and drops what the client has sent, until it would block.
pub(crate) fn drain(fd: RawFd) -> Drained {
    let mut sink = [0u8; 16 << 10];
    loop {
        match evq_os::io::recv(fd, &mut sink) {
            Ok(0) => return Drained::Done,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Drained::Waiting,
            Err(_) => return Drained::Done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn drain_drops_input_until_the_peer_closes() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        peer.write_all(&[7u8; 40_000]).unwrap();
        assert_eq!(drain(ours.as_raw_fd()), Drained::Waiting);
        begin(ours.as_raw_fd());
        // Our side is shut: the peer reads end of stream.
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        drop(peer);
        assert_eq!(drain(ours.as_raw_fd()), Drained::Done);
    }
}
