//! The syscall boundary of the server's file serving: opening files beneath the
//! root, `fstat`, `pread`, `sendfile`. Every `unsafe` block of the crate lives
//! here, each with the guarantee it relies on; sockets, socket I/O, accepting and
//! signals are `evq_os`'s.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Fills `buf` from `fd` at file offset 0 (`pread`, so a shared descriptor's
/// position is untouched). `UnexpectedEof` if the file is shorter.
pub(crate) fn pread_all(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a live, writable slice of `rest.len()` bytes.
        match cvt_size(unsafe {
            libc::pread(
                fd,
                rest.as_mut_ptr().cast(),
                rest.len(),
                done as libc::off_t,
            )
        }) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes of `fd` at `offset` (`pread(2)`); the file's
/// own offset does not move.
pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: i64) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable buffer of the length passed; `fd` is
    // a plain integer the kernel validates.
    cvt_size(unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset) })
}

/// `sendfile(2)` from `file` at `*offset`, advancing it.
pub(crate) fn sendfile(
    out: RawFd,
    file: RawFd,
    offset: &mut i64,
    count: usize,
) -> io::Result<usize> {
    // SAFETY: `offset` points to a live i64 that the kernel updates; both fds are
    // plain integers the kernel validates.
    cvt_size(unsafe { libc::sendfile(out, file, offset as *mut i64, count) })
}

/// `fcntl(F_DUPFD_CLOEXEC)`: a second descriptor for the same open file.
pub(crate) fn dup(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: fcntl(2) with F_DUPFD_CLOEXEC takes an integer argument only.
    cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// Opens a directory as `O_PATH` to resolve files beneath it.
pub(crate) fn open_root(path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `path` is NUL-terminated; a non-negative result is a new fd we own.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Opens `rel` (relative, NUL-terminated) for reading strictly beneath `root`:
/// `openat2(2)` with `RESOLVE_BENEATH` (Linux 5.6) makes the kernel refuse any
/// `..` or symlink that leads out (`EXDEV`). `Ok(None)` means the kernel lacks
/// openat2 and the caller must check with canonicalize instead.
pub(crate) fn open_beneath(root: RawFd, rel: &CStr) -> io::Result<Option<RawFd>> {
    if OPENAT2_MISSING.load(Ordering::Relaxed) {
        return Ok(None);
    }
    // SAFETY: open_how is plain old data; all-zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `rel` is NUL-terminated and `how` is a live open_how whose size is
    // passed; the kernel returns a new fd or -1.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root,
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) {
            OPENAT2_MISSING.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as RawFd))
}

/// Opens an absolute path for reading (the canonicalize fallback of `open_beneath`).
pub(crate) fn open_read(path: &CStr) -> io::Result<RawFd> {
    // SAFETY: `path` is NUL-terminated; a non-negative result is a new fd we own.
    cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK,
        )
    })
}

/// What the server needs to know about an open file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FileInfo {
    pub size: u64,
    pub mtime: i64,
    pub is_dir: bool,
    pub is_regular: bool,
}

/// `fstat(2)`.
pub(crate) fn fstat(fd: RawFd) -> io::Result<FileInfo> {
    // SAFETY: stat is plain old data; all-zero is valid and fstat overwrites it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live stat the kernel fills.
    cvt(unsafe { libc::fstat(fd, &mut st) })?;
    let fmt = st.st_mode & libc::S_IFMT;
    Ok(FileInfo {
        size: st.st_size as u64,
        mtime: st.st_mtime,
        is_dir: fmt == libc::S_IFDIR,
        is_regular: fmt == libc::S_IFREG,
    })
}

/// Resident set size of this process in bytes (from `/proc/self/statm`).
pub fn resident_bytes() -> io::Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc/self/statm"))?;
    // SAFETY: sysconf takes no pointers.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Ok(pages * page.max(4096) as u64)
}

/// `now + d`, saturating at a year ahead instead of panicking on overflow (a
/// configured timeout of "forever").
pub(crate) fn later(now: std::time::Instant, d: std::time::Duration) -> std::time::Instant {
    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);
    now.checked_add(d.min(YEAR)).unwrap_or(now)
}

/// How long a graceful stop keeps an idle keep-alive connection open (never
/// past the grace period itself). A busy client that has just read its reply
/// sends its next request within this: the request is answered with
/// `Connection: close` instead of meeting a closed socket, which a client that
/// had already written it sees as a reset and a lost request. A connection
/// still idle at the end is closed; an idle server exits at once.
pub(crate) const STOP_IDLE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A graceful stop's first step, the server's and the proxy's alike: the
/// listener stops taking clients (new ones are refused), and the stop pipe is
/// no longer watched — level-triggered and readable from now on, it would
/// spin the loop.
pub(crate) fn stop_taking_clients(
    listener: &mut crate::listener::Listener,
    signal: &mut Option<evq_os::StopPipe>,
    queue: &mut evq::EventQueue,
) {
    listener.stop_listening(queue);
    if let Some(pipe) = signal.take() {
        let _ = queue.declare_interest(pipe.fd(), evq::Interest::empty(), evq::Options::new(0));
    }
}
