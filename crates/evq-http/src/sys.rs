//! The syscall boundary of the server and proxy: every `unsafe` block of the crate
//! lives here, each with the guarantee it relies on.

use std::ffi::CStr;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

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

/// Reads into `buf`; `Ok(0)` is end-of-file.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
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

/// Writes from `buf` without raising `SIGPIPE` on sockets (`MSG_NOSIGNAL`).
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, readable slice of `buf.len()` bytes.
    cvt_size(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) })
}

/// Like `send`, with `MSG_MORE` when `more`: the head of a response whose body
/// follows by `sendfile` leaves in the same segments as the body's start
/// (nginx's `tcp_nopush`, without a cork/uncork pair of syscalls).
pub(crate) fn send_more(fd: RawFd, buf: &[u8], more: bool) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    // SAFETY: `buf` is a live, readable slice of `buf.len()` bytes.
    cvt_size(unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), flags) })
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

/// CPU time the calling thread has used so far, in nanoseconds
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: user plus system time, none of the
/// time it spent blocked). 0 if the clock cannot be read.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; the clock id is a constant the
    // kernel validates.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Closes a descriptor this crate owns by number.
pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and forgets it after this call; an error from
    // close(2) leaves the number released on Linux, so there is nothing to retry.
    unsafe { libc::close(fd) };
}

/// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`.
pub(crate) fn accept(listener: RawFd) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed by accept4(2) (peer address unused).
    cvt(unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` and its exact size is passed as the option length.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `SO_LINGER {1, 0}`: the next `close` sends RST instead of FIN (seed 001's reset).
pub(crate) fn set_linger_reset(fd: RawFd) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &l)
}

/// `TCP_NODELAY`: responses leave at once instead of waiting for Nagle.
pub(crate) fn set_nodelay(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one)
}

/// A non-blocking listening socket; `reuseport` sets `SO_REUSEPORT` so several
/// sockets (one per thread) can bind the same address.
pub(crate) fn listen(addr: SocketAddr, reuseport: bool, backlog: i32) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new fd we own.
    let fd = cvt(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one)?;
    if reuseport {
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one)?;
    }
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for the socket's family.
    cvt(unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) })?;
    // SAFETY: listen(2) takes no pointers.
    cvt(unsafe { libc::listen(fd, backlog) })?;
    Ok(owned)
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The local address of a listening socket.
pub(crate) fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: the TcpListener is a temporary view; ManuallyDrop keeps it from
    // closing `fd`, which the caller still owns.
    let l = std::mem::ManuallyDrop::new(unsafe { TcpListener::from_raw_fd(fd) });
    l.local_addr()
}

/// A non-blocking `connect(2)`; `Ok` even while the connection is in progress.
pub(crate) fn connect_nonblocking(addr: SocketAddr) -> io::Result<RawFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new fd we own.
    let fd = cvt(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for the socket's family.
    let r = unsafe { libc::connect(fd, (&storage as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            close(fd);
            return Err(e);
        }
    }
    let _ = set_nodelay(fd);
    Ok(fd)
}

/// `SO_ERROR`: the pending error of a socket (e.g. a refused non-blocking connect).
pub(crate) fn socket_error(fd: RawFd) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are live and `len` is the size of `err`.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    if err != 0 {
        Err(io::Error::from_raw_os_error(err))
    } else {
        Ok(())
    }
}

/// True once a non-blocking `connect` has completed (`getpeername(2)` succeeds);
/// false while it is in progress or after it failed (see `socket_error`).
pub(crate) fn is_connected(fd: RawFd) -> bool {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` and `len` are live and `len` is the size of `storage`.
    unsafe {
        libc::getpeername(
            fd,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        ) == 0
    }
}

/// `fcntl(F_DUPFD_CLOEXEC)`: a second descriptor for the same open file.
pub(crate) fn dup(fd: RawFd) -> io::Result<RawFd> {
    // SAFETY: fcntl(2) with F_DUPFD_CLOEXEC takes an integer argument only.
    cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })
}

/// Opens `/dev/null` as the spare descriptor of the `EMFILE` trick.
pub(crate) fn open_spare() -> io::Result<RawFd> {
    // SAFETY: the path is a NUL-terminated literal.
    cvt(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })
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

/// Ignores `SIGPIPE` process-wide: a vanished client must not kill the server.
pub(crate) fn ignore_sigpipe() {
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

static SHUTDOWN_REQUESTED: AtomicBool = AtomicBool::new(false);
/// Write ends of the workers' shutdown pipes (-1: free slot). A pipe, not an
/// eventfd: every backend can watch a pipe, while the RT-signal backends cannot
/// arm `O_ASYNC` on an eventfd (`EPERM`). One pipe per worker, because an
/// RT-signal registration has one owner per file.
static SHUTDOWN_PIPES: [AtomicI32; MAX_SHUTDOWN_PIPES] =
    [const { AtomicI32::new(-1) }; MAX_SHUTDOWN_PIPES];
const MAX_SHUTDOWN_PIPES: usize = 1024;

extern "C" fn on_shutdown_signal(_sig: libc::c_int) {
    SHUTDOWN_REQUESTED.store(true, Ordering::SeqCst);
    for slot in &SHUTDOWN_PIPES {
        let fd = slot.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; one byte from a static to a
            // pipe that stays open for the life of the process.
            unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
        }
    }
}

/// Installs SIGINT/SIGTERM handlers (once) that set a flag and write a byte to
/// every shutdown pipe, and returns the read end of a new pipe for one worker to
/// watch. The pipe is never closed: the handler may write to it at any time, and
/// a closed number could name another file by then.
pub(crate) fn install_shutdown_signals() -> io::Result<RawFd> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into a live [i32; 2].
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    let stored = SHUTDOWN_PIPES.iter().any(|s| {
        s.compare_exchange(-1, fds[1], Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if !stored {
        close(fds[0]);
        close(fds[1]);
        return Err(io::Error::other("too many shutdown pipes (one per worker)"));
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain old data; all-zero then filled in is valid.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_shutdown_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa` is a valid sigaction whose handler only touches atomics and
        // calls write(2); the old action is not needed.
        cvt(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) })?;
    }
    Ok(fds[0])
}

/// True once SIGINT or SIGTERM arrived (after `install_shutdown_signals`).
pub(crate) fn shutdown_requested() -> bool {
    SHUTDOWN_REQUESTED.load(Ordering::SeqCst)
}

/// Raises `RLIMIT_NOFILE`'s soft limit to `want` (capped at the hard limit) and
/// returns the new soft limit.
pub fn raise_nofile_limit(want: u64) -> io::Result<u64> {
    // SAFETY: rlimit is plain old data.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `lim` is a live rlimit the kernel fills.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    let target = want.min(lim.rlim_max);
    if target > lim.rlim_cur {
        lim.rlim_cur = target;
        // SAFETY: `lim` is a valid rlimit with cur <= max.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
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

/// The raw number of an owned fd.
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// `now + d`, saturating at a year ahead instead of panicking on overflow (a
/// configured timeout of "forever").
pub(crate) fn later(now: std::time::Instant, d: std::time::Duration) -> std::time::Instant {
    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);
    now.checked_add(d.min(YEAR)).unwrap_or(now)
}
