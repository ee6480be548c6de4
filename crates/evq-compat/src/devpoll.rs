//! The Solaris `/dev/poll` personality (SEEDS 004; Solaris `poll(7d)`), built on one
//! [`evq::EventQueue`], plus `devpollperf`, the benchmark Sun measured it with.
//!
//! # Quirks of /dev/poll on Linux, and what this file does about them
//!
//! a) **`write(2)` of pollfd records ORs.** poll(7d), "write": writing an entry for a
//!    descriptor already in the set adds the new `events` bits to the old ones
//!    rather than replacing them; to narrow an entry, remove it with `POLLREMOVE`
//!    and write it again. [`DevPoll::write`] does exactly that, and re-declares
//!    evq's registration with the union.
//! b) **`POLLREMOVE`** has no value on Linux's `poll(2)`; this file uses `0x1000`,
//!    the value Linux's `<asm-generic/poll.h>` reserved for it (and which the
//!    Provos–Lever /dev/poll and /dev/epoll patches used). Solaris's own value is
//!    `0x0800`; code that uses the name is unaffected. Removing an fd that is not in
//!    the set is not an error (poll(7d): it is ignored).
//! c) **Negative fds are ignored** on write, as `poll(2)` ignores them.
//! d) **Invalid descriptors.** Writing a descriptor that is not open is accepted,
//!    and `DP_POLL` reports it with `POLLNVAL` until it is removed or rewritten
//!    (poll(7d), DP_POLL: `POLLNVAL` "the fd is not open").
//! e) **Regular files** are refused by epoll (`EPERM`); `poll(2)` says they are
//!    always readable and writable, so such entries are reported ready on every
//!    `DP_POLL` with the asked-for `POLLIN`/`POLLOUT` bits.
//! f) **Closing a polled fd.** poll(7d) asks applications to `POLLREMOVE` an fd
//!    before closing it. If they do not, the kernel (epoll) forgets the file and the
//!    entry reports nothing; writing the reused number again replaces the entry.
//! g) **`DP_POLL` is level-triggered** and returns a dense array of at most
//!    `dp_nfds` ready entries, `events` as registered and `revents` as `poll(2)`
//!    would set them (`POLLHUP`/`POLLERR` always). When `POLLHUP`/`POLLERR` may be
//!    involved the exact bits are asked of `poll(2)`, because evq merges hang-up
//!    kinds. An empty output array returns 0 at once.
//! h) **Only `POLLIN`/`POLLRDNORM`, `POLLOUT`/`POLLWRNORM` and `POLLPRI`/`POLLRDBAND`
//!    select interest.** An entry asking for none of them (say only `POLLHUP`) is
//!    kept (`DP_ISPOLLED` sees it) but is not watched.

use evq::{EventQueue, Events, Interest, Options, Readiness};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Remove this descriptor from the set (quirk b).
pub const POLLREMOVE: i16 = 0x1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// Registered with evq.
    Queue,
    /// Not open when written: reported `POLLNVAL` (quirk d).
    Invalid,
    /// A regular file, always ready (quirk e).
    Always,
    /// No interest bit asked (quirk h).
    Nothing,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    events: i16,
    watched: Watched,
}

/// A `/dev/poll` instance: a kernel-kept set of pollfd entries.
///
/// ```
/// use evq_compat::devpoll::DevPoll;
/// use std::io::Write;
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// let (mut a, b) = UnixStream::pair()?;
/// let mut dp = DevPoll::open()?;
/// dp.write(&[libc::pollfd { fd: b.as_raw_fd(), events: libc::POLLIN, revents: 0 }])?;
/// a.write_all(b"x")?;
/// let mut out = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 8];
/// assert_eq!(dp.ioctl_dp_poll(&mut out, 5000)?, 1);
/// assert_eq!(out[0].fd, b.as_raw_fd());
/// assert!(out[0].revents & libc::POLLIN != 0);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct DevPoll {
    queue: EventQueue,
    entries: HashMap<RawFd, Entry>,
    /// Entries reported on every call without the kernel (quirks d, e), kept apart
    /// so that `DP_POLL` never scans the whole set.
    synthetic: BTreeSet<RawFd>,
    batch: Events,
}

fn interest_of(events: i16) -> Interest {
    let mut i = Interest::empty();
    if events & (libc::POLLIN | libc::POLLRDNORM) != 0 {
        i |= Interest::READ;
    }
    if events & (libc::POLLOUT | libc::POLLWRNORM) != 0 {
        i |= Interest::WRITE;
    }
    if events & (libc::POLLPRI | libc::POLLRDBAND) != 0 {
        i |= Interest::EXCEPT;
    }
    i
}

impl DevPoll {
    /// `open("/dev/poll", O_RDWR)`: an empty set on evq's default backend.
    ///
    /// # Errors
    /// Those of [`EventQueue::new`].
    pub fn open() -> io::Result<DevPoll> {
        Ok(DevPoll {
            queue: EventQueue::new()?,
            entries: HashMap::new(),
            synthetic: BTreeSet::new(),
            batch: Events::with_capacity(64),
        })
    }

    /// `write(dpfd, fds, n * sizeof(pollfd))`: adds entries, ORs `events` into
    /// existing ones (quirk a), removes those with [`POLLREMOVE`]. Returns the bytes
    /// "written", as write(2) does.
    ///
    /// # Errors
    /// The kernel's error for an entry it refuses for a reason other than quirks d
    /// and e (e.g. `ENOMEM`); entries before it stay applied, as with a partial
    /// write.
    pub fn write(&mut self, fds: &[libc::pollfd]) -> io::Result<usize> {
        for p in fds {
            if p.fd < 0 {
                continue;
            }
            if p.events & POLLREMOVE != 0 {
                self.synthetic.remove(&p.fd);
                if let Some(old) = self.entries.remove(&p.fd) {
                    if old.watched == Watched::Queue {
                        if let Err(e) = self.queue.declare_interest(
                            p.fd,
                            Interest::empty(),
                            Options::new(p.fd as u64),
                        ) {
                            // Closed behind our back (quirk f): nothing is left to remove.
                            if e.raw_os_error() != Some(libc::EBADF) {
                                self.queue.forget(p.fd);
                            }
                        }
                    }
                }
                continue;
            }
            let old = self.entries.get(&p.fd).copied();
            let events = old.map_or(0, |o| o.events) | p.events;
            let interest = interest_of(events);
            let watched = if interest.is_empty() {
                Watched::Nothing
            } else {
                match self
                    .queue
                    .declare_interest(p.fd, interest, Options::new(p.fd as u64))
                {
                    Ok(_) => Watched::Queue,
                    Err(e) if e.raw_os_error() == Some(libc::EBADF) => Watched::Invalid,
                    Err(e) if e.raw_os_error() == Some(libc::EPERM) => Watched::Always,
                    Err(e) => return Err(e),
                }
            };
            if watched != Watched::Queue && old.is_some_and(|o| o.watched == Watched::Queue) {
                self.queue.forget(p.fd);
            }
            if matches!(watched, Watched::Invalid | Watched::Always) {
                self.synthetic.insert(p.fd);
            } else {
                self.synthetic.remove(&p.fd);
            }
            self.entries.insert(p.fd, Entry { events, watched });
        }
        Ok(std::mem::size_of_val(fds))
    }

    /// `ioctl(dpfd, DP_ISPOLLED, &pfd)`: the entry for `fd` (its `events`; `revents`
    /// 0), or `None` if `fd` is not in the set.
    pub fn dp_ispolled(&self, fd: RawFd) -> Option<libc::pollfd> {
        self.entries.get(&fd).map(|e| libc::pollfd {
            fd,
            events: e.events,
            revents: 0,
        })
    }

    /// Number of entries in the set.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the set is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `ioctl(dpfd, DP_POLL, &dvpoll{out, out.len(), timeout_ms})`: fills `out`
    /// densely with ready entries and returns how many; waits up to `timeout_ms`
    /// (-1 = forever, 0 = just look) for the first.
    ///
    /// # Errors
    /// The queue's error while waiting.
    pub fn ioctl_dp_poll(
        &mut self,
        out: &mut [libc::pollfd],
        timeout_ms: i32,
    ) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let mut n = 0;
        // Entries evq cannot watch (quirks d, e), reported every time.
        for &fd in &self.synthetic {
            if n == out.len() {
                break;
            }
            let Some(e) = self.entries.get(&fd) else {
                continue;
            };
            let revents = match e.watched {
                Watched::Invalid => libc::POLLNVAL,
                Watched::Always => {
                    e.events & (libc::POLLIN | libc::POLLRDNORM | libc::POLLOUT | libc::POLLWRNORM)
                }
                Watched::Queue | Watched::Nothing => 0,
            };
            report(out, &mut n, fd, e.events, revents);
        }
        if n == out.len() {
            return Ok(n);
        }
        let timeout = if n > 0 || timeout_ms == 0 {
            Some(Duration::ZERO)
        } else if timeout_ms < 0 {
            None
        } else {
            Some(Duration::from_millis(timeout_ms as u64))
        };
        let want = (out.len() - n).min(4096);
        if self.batch.capacity() != want {
            self.batch = Events::with_capacity(want);
        }
        self.queue.get_next_event(&mut self.batch, timeout)?;
        for event in &self.batch {
            let fd = event.fd();
            let Some(entry) = self.entries.get(&fd) else {
                continue;
            };
            let revents = revents_of(fd, entry.events, event.readiness());
            report(out, &mut n, fd, entry.events, revents);
        }
        Ok(n)
    }
}

impl std::fmt::Debug for DevPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevPoll")
            .field("entries", &self.entries.len())
            .finish()
    }
}

/// Appends `fd`'s result at `out[*n]` if anything happened to it.
fn report(out: &mut [libc::pollfd], n: &mut usize, fd: RawFd, events: i16, revents: i16) {
    if revents != 0 {
        out[*n] = libc::pollfd {
            fd,
            events,
            revents,
        };
        *n += 1;
    }
}

/// `poll(2)`'s revents for an entry asking `events` in state `r` (quirk g).
fn revents_of(fd: RawFd, events: i16, r: Readiness) -> i16 {
    let always = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
    if r.intersects(Readiness::HUP | Readiness::ERROR) {
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one live pollfd, count 1, zero timeout.
        if unsafe { libc::poll(&mut p, 1, 0) } >= 0 {
            return p.revents & (events | always);
        }
    }
    let mut bits = 0;
    if r.contains(Readiness::READ) {
        bits |= libc::POLLIN | libc::POLLRDNORM;
    }
    if r.contains(Readiness::WRITE) {
        bits |= libc::POLLOUT | libc::POLLWRNORM;
    }
    if r.contains(Readiness::EXCEPT) {
        bits |= libc::POLLPRI | libc::POLLRDBAND;
    }
    bits & events
}

/// SEEDS 004's `devpollperf.c` on this personality: open `nfds` pipes, register their
/// read ends, then `iters` times write one byte to a pseudo-random pipe, `DP_POLL`,
/// and read the byte back. Returns nanoseconds per event (per iteration).
///
/// # Errors
/// `InvalidInput` for `nfds == 0` or `iters == 0`; `EMFILE` if the descriptor limit
/// is below `2 * nfds` plus a few; any syscall's error, or `Other` if `DP_POLL`
/// reports the wrong descriptor.
pub fn devpollperf(nfds: usize, iters: u64) -> io::Result<f64> {
    if nfds == 0 || iters == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "devpollperf needs nfds > 0 and iters > 0",
        ));
    }
    let mut pipes = Vec::with_capacity(nfds);
    let result = (|| {
        let mut dp = DevPoll::open()?;
        for _ in 0..nfds {
            let mut fds = [0; 2];
            // SAFETY: pipe2 writes two ints into the live array.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
                return Err(io::Error::last_os_error());
            }
            pipes.push(fds);
            dp.write(&[libc::pollfd {
                fd: fds[0],
                events: libc::POLLIN,
                revents: 0,
            }])?;
        }
        let mut out = vec![
            libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0
            };
            16
        ];
        let mut rng: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut byte = [0u8; 1];
        let start = Instant::now();
        for _ in 0..iters {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let [r, w] = pipes[(rng % nfds as u64) as usize];
            // SAFETY: writes one byte from a live buffer.
            if unsafe { libc::write(w, byte.as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
            let n = dp.ioctl_dp_poll(&mut out, 5000)?;
            if n != 1 || out[0].fd != r {
                return Err(io::Error::other(format!(
                    "DP_POLL returned {n} entries, first fd {}, expected fd {r}",
                    out[0].fd
                )));
            }
            // SAFETY: reads one byte into a live buffer.
            if unsafe { libc::read(r, byte.as_mut_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(start.elapsed().as_nanos() as f64 / iters as f64)
    })();
    for [r, w] in pipes {
        // SAFETY: closes descriptors this function opened and nobody else holds.
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
    result
}
