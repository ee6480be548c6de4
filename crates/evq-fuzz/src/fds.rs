//! The descriptors a target may touch: a small set it creates for each input and
//! holds until the input ends, plus numbers that cannot name an open file in this
//! process.
//!
//! The targets run inside libFuzzer's process and, for replay, on the parallel
//! threads of `cargo test`; a number the target does not hold may be another
//! test's file. So every descriptor a target passes to the code under test is one
//! of [`Descriptors::open`] (held from creation to the end of the input, never
//! closed early: a replaced file is `dup2`ed *onto* the held number), one of
//! [`never_open`] (at or above the hard descriptor limit, or beyond `fs.nr_open`),
//! or negative.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use crate::input::Input;

/// Most bytes one stimulus writes, so an input cannot grow buffers without bound.
const MAX_WRITE: usize = 4096;

/// Numbers that no descriptor of this process can have: the hard `RLIMIT_NOFILE`
/// (the kernel refuses any number at or above it, and only a privileged process can
/// raise it, which no evq test does), one above it, and `i32::MAX`.
pub fn never_open() -> &'static [RawFd; 3] {
    static NEVER: OnceLock<[RawFd; 3]> = OnceLock::new();
    NEVER.get_or_init(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the live `lim`.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(i32::MAX as u64);
        let hard = if rc == 0 { lim.rlim_max } else { u64::MAX };
        let bound = hard.min(nr_open).min(i32::MAX as u64 - 1) as RawFd;
        let never = [bound, bound + 1, RawFd::MAX];
        for fd in never {
            // SAFETY: F_GETFD reads the descriptor table only.
            let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
            assert!(
                !open,
                "descriptor {fd} is open, so it cannot stand for a closed one"
            );
        }
        never
    })
}

/// Negative numbers the targets pass as descriptors.
pub const NEGATIVE: [RawFd; 3] = [-1, -2, RawFd::MIN];

fn check(rc: libc::c_int, what: &str) -> RawFd {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
    rc
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful call that created it, and
    // nothing else holds it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn socketpair() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the live array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    check(rc, "socketpair");
    (owned(fds[0]), owned(fds[1]))
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the live array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    check(rc, "pipe2");
    (owned(fds[0]), owned(fds[1]))
}

/// A listening Unix stream socket on an abstract address the kernel picks
/// (autobind), and that address.
fn listener() -> (OwnedFd, libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: socket takes no pointers.
    let fd = owned(check(
        unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        },
        "socket",
    ));
    // SAFETY: an all-zero sockaddr_un is a valid value of this plain C struct.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let family_only = std::mem::size_of::<libc::sa_family_t>() as libc::socklen_t;
    // SAFETY: bind reads `family_only` bytes of the live `addr`: an empty Unix
    // address, which asks the kernel to pick an abstract name (unix(7), autobind).
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            family_only,
        )
    };
    check(rc, "bind");
    // SAFETY: listen takes no pointers.
    check(unsafe { libc::listen(fd.as_raw_fd(), 4) }, "listen");
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into the live `addr`.
    let rc = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_un).cast(),
            &mut len,
        )
    };
    check(rc, "getsockname");
    (fd, addr, len)
}

fn eventfd() -> OwnedFd {
    // SAFETY: eventfd takes no pointers.
    owned(check(
        unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
        "eventfd",
    ))
}

fn memfd() -> OwnedFd {
    // SAFETY: the name is a NUL-terminated literal.
    owned(check(
        unsafe { libc::memfd_create(c"evq-fuzz".as_ptr(), libc::MFD_CLOEXEC) },
        "memfd_create",
    ))
}

/// What [`Descriptors`] holds, in slot order: the kinds a queue meets.
pub const SLOT_NAMES: [&str; 7] = [
    "socket",
    "socket peer",
    "pipe read end",
    "pipe write end",
    "listening socket",
    "eventfd",
    "regular file (memfd)",
];

/// Most extra descriptors (connected clients, replacement peers) one input makes.
const MAX_EXTRA: usize = 8;

/// The descriptors one input owns; all closed when it is dropped.
#[derive(Debug)]
pub struct Descriptors {
    slots: Vec<OwnedFd>,
    /// Clients connected to the listener and peers of replaced files: held so
    /// their numbers stay ours, and so a replaced socket keeps a live peer.
    extra: Vec<OwnedFd>,
    addr: libc::sockaddr_un,
    addr_len: libc::socklen_t,
    written: usize,
}

impl Descriptors {
    /// A socket pair, a pipe, a listening socket, an eventfd and a regular file, all
    /// non-blocking.
    pub fn new() -> Descriptors {
        // Writes to a socket or pipe whose reader is gone must fail with EPIPE, not
        // kill the process: libFuzzer's `main` does not ignore SIGPIPE as Rust's does.
        // SAFETY: installs SIG_IGN, which needs no handler code.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let (a, b) = socketpair();
        let (r, w) = pipe();
        let (l, addr, addr_len) = listener();
        Descriptors {
            slots: vec![a, b, r, w, l, eventfd(), memfd()],
            extra: Vec::new(),
            addr,
            addr_len,
            written: 0,
        }
    }

    /// Every number this input holds: the slots, then the extras.
    pub fn open(&self) -> Vec<RawFd> {
        self.slots
            .iter()
            .chain(&self.extra)
            .map(|f| f.as_raw_fd())
            .collect()
    }

    /// The number in slot `i` (see [`SLOT_NAMES`]).
    pub fn slot(&self, i: usize) -> RawFd {
        self.slots[i].as_raw_fd()
    }

    /// Whether `fd` is one of the numbers this input holds.
    pub fn holds(&self, fd: RawFd) -> bool {
        self.open().contains(&fd)
    }

    /// Reads one stimulus from `input` — a held number (its index among
    /// [`open`](Self::open), wrapped), then `what` and `amount` as
    /// [`stimulate`](Self::stimulate) takes them — and applies it. Returns the
    /// number and `what`; `None` once the input has run out.
    pub fn stimulate_from(&mut self, input: &mut Input<'_>) -> Option<(RawFd, u8)> {
        let (Some(slot), Some(what), Some(amount)) = (input.u8(), input.u8(), input.u16()) else {
            return None;
        };
        let open = self.open();
        let fd = open[slot as usize % open.len()];
        self.stimulate(fd, what, amount);
        debug_assert!(
            open.iter().all(|f| self.holds(*f)),
            "a stimulus replaces files, never gives up a number"
        );
        Some((fd, what))
    }

    /// Applies one stimulus, chosen by `what`, to the held number `fd`: writes,
    /// reads, shutdowns, connections, and replacing the file behind the number.
    /// Errors (`EAGAIN`, `ENOTSOCK`, `EPIPE`...) are the point and are ignored.
    pub fn stimulate(&mut self, fd: RawFd, what: u8, amount: u16) {
        assert!(
            self.holds(fd),
            "stimulus on a number this input does not hold"
        );
        match what % 8 {
            0 | 1 => self.write(fd, amount as usize % MAX_WRITE + 1),
            2 => {
                // An eventfd counter increment (8 bytes; also a short write elsewhere).
                let v = (amount as u64).max(1).to_ne_bytes();
                // SAFETY: writes 8 bytes from a live array.
                unsafe { libc::write(fd, v.as_ptr().cast(), 8) };
            }
            3 => drain(fd),
            4 => {
                // SAFETY: shutdown takes no pointers.
                unsafe {
                    libc::shutdown(
                        fd,
                        [libc::SHUT_RD, libc::SHUT_WR, libc::SHUT_RDWR][amount as usize % 3],
                    )
                };
            }
            5 => self.connect(),
            6 => {
                // SAFETY: accept4 with null address pointers stores no address.
                let c = unsafe {
                    libc::accept4(
                        fd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    )
                };
                if c >= 0 {
                    self.keep(owned(c));
                }
            }
            _ => self.replace(fd),
        }
    }

    fn write(&mut self, fd: RawFd, n: usize) {
        if self.written > 1 << 20 {
            return;
        }
        self.written += n;
        let buf = [b'x'; MAX_WRITE];
        // SAFETY: send/write read `n <= MAX_WRITE` bytes of the live buffer;
        // MSG_NOSIGNAL keeps a vanished peer from raising SIGPIPE.
        let rc = unsafe { libc::send(fd, buf.as_ptr().cast(), n, libc::MSG_NOSIGNAL) };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSOCK) {
            // SAFETY: as above; not a socket, so write(2).
            unsafe { libc::write(fd, buf.as_ptr().cast(), n) };
        }
    }

    fn connect(&mut self) {
        if self.extra.len() >= MAX_EXTRA {
            return;
        }
        // SAFETY: socket takes no pointers.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        let fd = owned(check(fd, "socket"));
        // SAFETY: connect reads `addr_len` bytes of the live address.
        unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&self.addr as *const libc::sockaddr_un).cast(),
                self.addr_len,
            )
        };
        self.keep(fd);
    }

    /// Puts a fresh socket behind the held number `fd` (`dup2`), as a program that
    /// closes a descriptor and gets the number back for a new file does, without
    /// the number ever being free for anyone else.
    pub fn replace(&mut self, fd: RawFd) {
        assert!(
            self.holds(fd),
            "replacing a number this input does not hold"
        );
        let (new, peer) = socketpair();
        // SAFETY: dup2 onto a number this input holds (checked above): the old file
        // behind it is closed, the number stays ours. `new` is closed afterwards,
        // its file living on under `fd`.
        check(unsafe { libc::dup2(new.as_raw_fd(), fd) }, "dup2");
        self.keep(peer);
    }

    /// Records that the code under test closed the held number `fd` (as
    /// `evq_close_fd` does): the number is given up, and a slot gets a fresh socket
    /// (which the kernel will usually put at the same number). Only for targets
    /// replayed in a process of their own: between the close and the refill the
    /// number is free for any thread.
    pub fn closed_by_callee(&mut self, fd: RawFd) {
        use std::os::fd::IntoRawFd;
        if let Some(i) = self.slots.iter().position(|f| f.as_raw_fd() == fd) {
            let (new, peer) = socketpair();
            // The number is closed already: forget it without closing it again.
            let _ = std::mem::replace(&mut self.slots[i], new).into_raw_fd();
            self.keep(peer);
        } else if let Some(i) = self.extra.iter().position(|f| f.as_raw_fd() == fd) {
            let _ = self.extra.swap_remove(i).into_raw_fd();
        } else {
            panic!("{fd} is not held");
        }
    }

    fn keep(&mut self, fd: OwnedFd) {
        if self.extra.len() < MAX_EXTRA {
            self.extra.push(fd);
        }
        // Else dropped: a client or peer closes, which is a stimulus too.
    }
}

impl Default for Descriptors {
    fn default() -> Self {
        Descriptors::new()
    }
}

/// Reads everything `fd` has (at most 1 MiB).
pub fn drain(fd: RawFd) {
    let mut buf = [0u8; 16384];
    for _ in 0..64 {
        // SAFETY: reads into a live buffer of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_open_numbers_are_closed_and_distinct_from_ours() {
        let d = Descriptors::new();
        for fd in never_open() {
            assert!(!d.holds(*fd));
        }
        assert_eq!(d.open().len(), SLOT_NAMES.len());
    }

    #[test]
    fn a_replaced_number_stays_held() {
        let mut d = Descriptors::new();
        let fd = d.slot(2);
        d.replace(fd);
        assert!(d.holds(fd));
        // Now a socket: a send works.
        d.stimulate(fd, 0, 3);
        d.stimulate(d.slot(4), 5, 0);
        d.stimulate(d.slot(4), 6, 0);
        assert!(d.open().len() >= SLOT_NAMES.len() + 2);
    }
}
