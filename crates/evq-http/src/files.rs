//! Static files beneath a document root: turning a request path into a safe
//! relative path, opening it so that nothing leads out of the root, the content
//! type table, and a small per-thread cache of open files.
//!
//! Containment is the kernel's job where it can be: `openat2(2)` with
//! `RESOLVE_BENEATH` refuses any `..` or symlink that would leave the root. Where
//! openat2 is missing, the path is canonicalized (every symlink followed) and its
//! prefix checked.

use crate::sys;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

/// A document root: an `O_PATH` descriptor (for `openat2` beneath it), its
/// canonical path (for the canonicalize-and-check fallback), and how long a file
/// opened beneath it is trusted before its path is looked up again.
#[derive(Debug)]
pub struct FileRoot {
    fd: OwnedFd,
    path: PathBuf,
    cache_valid: std::time::Duration,
}

impl FileRoot {
    /// Opens `dir` as a document root.
    ///
    /// # Errors
    /// If `dir` cannot be canonicalized or opened as a directory.
    pub fn open(dir: &std::path::Path) -> io::Result<FileRoot> {
        let path = std::fs::canonicalize(dir)?;
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root path"))?;
        let fd = sys::open_root(&c)?;
        Ok(FileRoot {
            fd,
            path,
            cache_valid: FILE_CACHE_VALID,
        })
    }

    /// The same root, its open files trusted for `valid` before their paths are
    /// looked up again (default 1 s, nginx's `open_file_cache_valid`; zero looks
    /// every request's path up).
    pub fn cache_valid(mut self, valid: std::time::Duration) -> FileRoot {
        self.cache_valid = valid;
        self
    }
}

/// `Content-Type` by file extension (the common static types; the rest are
/// `application/octet-stream`).
pub fn content_type(name: &[u8]) -> &'static str {
    let ext = match name.iter().rposition(|&b| b == b'.') {
        Some(i) => &name[i + 1..],
        None => return "application/octet-stream",
    };
    const TABLE: &[(&str, &str)] = &[
        ("html", "text/html; charset=utf-8"),
        ("htm", "text/html; charset=utf-8"),
        ("txt", "text/plain; charset=utf-8"),
        ("css", "text/css"),
        ("js", "text/javascript"),
        ("json", "application/json"),
        ("xml", "application/xml"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("gif", "image/gif"),
        ("svg", "image/svg+xml"),
        ("ico", "image/x-icon"),
        ("webp", "image/webp"),
        ("pdf", "application/pdf"),
        ("wasm", "application/wasm"),
        ("gz", "application/gzip"),
    ];
    TABLE
        .iter()
        .find(|(e, _)| ext.eq_ignore_ascii_case(e.as_bytes()))
        .map_or("application/octet-stream", |(_, t)| t)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Turns a request path into a relative, NUL-terminated path in `out`, or the
/// status to refuse it with: 400 for bad escapes or NUL, 403 for `..` (plain or
/// percent-encoded) and for encoded `/` or `\`. Empty segments and `.` are dropped.
pub fn resolve_path(target: &[u8], out: &mut Vec<u8>) -> Result<(), u16> {
    out.clear();
    let path = match target.iter().position(|&b| b == b'?' || b == b'#') {
        Some(i) => &target[..i],
        None => target,
    };
    if path.first() != Some(&b'/') {
        return Err(400);
    }
    let mut i = 1;
    let mut seg_start = 0;
    loop {
        let end = i >= path.len() || path[i] == b'/';
        if end {
            let seg = &out[seg_start..];
            if seg == b".." {
                return Err(403);
            }
            if seg.is_empty() || seg == b"." {
                out.truncate(seg_start);
            } else {
                out.push(b'/');
                seg_start = out.len();
            }
            if i >= path.len() {
                break;
            }
            i += 1;
            continue;
        }
        let b = path[i];
        let c = if b == b'%' {
            let (h, l) = match (path.get(i + 1), path.get(i + 2)) {
                (Some(&h), Some(&l)) => (h, l),
                _ => return Err(400),
            };
            let c = match (hex(h), hex(l)) {
                (Some(h), Some(l)) => h << 4 | l,
                _ => return Err(400),
            };
            if c == b'/' || c == b'\\' {
                return Err(403);
            }
            i += 3;
            c
        } else {
            i += 1;
            b
        };
        if c == 0 {
            return Err(400);
        }
        out.push(c);
    }
    if out.last() == Some(&b'/') {
        out.pop();
    }
    if out.is_empty() {
        out.push(b'.');
    }
    out.push(0);
    Ok(())
}

fn open_under(root: &FileRoot, rel: &[u8]) -> Result<RawFd, u16> {
    let c = CStr::from_bytes_with_nul(rel).map_err(|_| 400u16)?;
    let errno = |e: io::Error| match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG) => 404u16,
        Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::EACCES) | Some(libc::EPERM) => 403,
        Some(libc::EMFILE) | Some(libc::ENFILE) => 503,
        _ => 500,
    };
    match sys::open_beneath(root.fd.as_raw_fd(), c) {
        Ok(Some(fd)) => Ok(fd),
        Err(e) => Err(errno(e)),
        Ok(None) => {
            // No openat2: canonicalize (follows every symlink) and check the prefix.
            let rel: &std::ffi::OsStr =
                std::os::unix::ffi::OsStrExt::from_bytes(&rel[..rel.len() - 1]);
            let full = root.path.join(rel);
            let canon = std::fs::canonicalize(full).map_err(errno)?;
            if !canon.starts_with(&root.path) {
                return Err(403);
            }
            let c =
                std::ffi::CString::new(canon.as_os_str().as_encoded_bytes()).map_err(|_| 400u16)?;
            sys::open_read(&c).map_err(errno)
        }
    }
}

/// Slots in a thread's open-file cache (direct-mapped by path hash).
const FILE_CACHE_SLOTS: usize = 64;
/// How long a cached open file is trusted before the path is resolved again, by
/// default (nginx's `open_file_cache_valid`, 1 s).
const FILE_CACHE_VALID: std::time::Duration = std::time::Duration::from_secs(1);

/// An open regular file kept for its request path. A request for a small file
/// borrows the descriptor (its body is copied while the request is handled); one
/// for a larger file gets a `dup` (cheaper than resolving the path beneath the
/// root again), so evicting an entry never disturbs a response still being sent
/// from it.
///
/// A response promises the file's length in its head, so the size kept here is
/// trusted only where a change is caught before the head goes out. A small
/// file's body is read whole while the request is handled: a file that shrank
/// fails that read, and the caller [`FileCache::forget`]s the entry and opens
/// the path again. A larger file is sent later by `sendfile`, so its size is
/// read again (`fstat` of the `dup`) when the request is handled. Either way
/// the head says what the file holds now.
#[derive(Debug)]
struct CachedFile {
    key: Vec<u8>,
    fd: RawFd,
    info: sys::FileInfo,
    content_type: &'static str,
    opened: std::time::Instant,
}

/// A file [`FileCache::open`] found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenFile {
    /// The descriptor: the caller's to close if `owned`, else the cache's, valid
    /// until the cache's next call.
    pub fd: RawFd,
    /// Whether the caller owns (and must close) `fd`.
    pub owned: bool,
    /// Its metadata.
    pub info: sys::FileInfo,
    /// Its content type.
    pub content_type: &'static str,
    /// The cache slot that holds (or held) it.
    slot: usize,
}

/// A thread's open-file cache.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    slots: Vec<CachedFile>,
}

impl Drop for FileCache {
    fn drop(&mut self) {
        for f in &self.slots {
            if f.fd >= 0 {
                evq_os::io::close(f.fd);
            }
        }
    }
}

fn path_hash(p: &[u8]) -> usize {
    // FNV-1a: short keys, no allocation, good enough spread for 64 slots.
    p.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) as usize
}

impl FileCache {
    /// Drops the entry a borrowed `file` came from: the file changed under it,
    /// and the next [`FileCache::open`] of its path looks it up again. `file`'s
    /// descriptor is closed with the entry.
    pub(crate) fn forget(&mut self, file: &OpenFile) {
        if let Some(entry) = self.slots.get_mut(file.slot) {
            if !file.owned && entry.fd == file.fd {
                evq_os::io::close(entry.fd);
                entry.fd = -1;
                entry.key.clear();
            }
        }
    }

    /// Opens the regular file `path` (from [`resolve_path`]) names beneath `root` (a
    /// directory means its `index.html`, and `path` is rewritten to it), through the
    /// cache. Files of at most `borrow_up_to` bytes come back borrowed from the
    /// cache (no `dup`, no `close`: two system calls fewer per request), larger
    /// ones as a descriptor the caller owns. Errors are the status to refuse with.
    pub(crate) fn open(
        &mut self,
        root: &FileRoot,
        path: &mut Vec<u8>,
        borrow_up_to: u64,
    ) -> Result<OpenFile, u16> {
        if self.slots.is_empty() {
            self.slots = (0..FILE_CACHE_SLOTS)
                .map(|_| CachedFile {
                    key: Vec::new(),
                    fd: -1,
                    info: sys::FileInfo {
                        size: 0,
                        mtime: 0,
                        is_dir: false,
                        is_regular: false,
                    },
                    content_type: "",
                    opened: std::time::Instant::now(),
                })
                .collect();
        }
        let slot = path_hash(path) % FILE_CACHE_SLOTS;
        let now = std::time::Instant::now();
        let entry = &self.slots[slot];
        if entry.fd >= 0
            && entry.key == path[..]
            && now.duration_since(entry.opened) < root.cache_valid
        {
            if entry.info.size <= borrow_up_to {
                return Ok(OpenFile {
                    fd: entry.fd,
                    owned: false,
                    info: entry.info,
                    content_type: entry.content_type,
                    slot,
                });
            }
            if let Ok(fd) = sys::dup(entry.fd) {
                // Sent later by sendfile: the size promised must be today's.
                return match sys::fstat(fd) {
                    Ok(info) => Ok(OpenFile {
                        fd,
                        owned: true,
                        info,
                        content_type: entry.content_type,
                        slot,
                    }),
                    Err(_) => {
                        evq_os::io::close(fd);
                        Err(500)
                    }
                };
            }
        }
        // Claim the slot for this path now, before an index.html rewrite changes it.
        let entry = &mut self.slots[slot];
        if entry.fd >= 0 {
            evq_os::io::close(entry.fd);
            entry.fd = -1;
        }
        entry.key.clear();
        entry.key.extend_from_slice(path);
        let mut fd = open_under(root, path)?;
        let mut info = match sys::fstat(fd) {
            Ok(i) => i,
            Err(_) => {
                evq_os::io::close(fd);
                return Err(500);
            }
        };
        if info.is_dir {
            evq_os::io::close(fd);
            let rel = &mut *path;
            rel.pop();
            rel.extend_from_slice(b"/index.html\0");
            fd = match open_under(root, rel) {
                Ok(fd) => fd,
                Err(404) => return Err(403),
                Err(status) => return Err(status),
            };
            info = match sys::fstat(fd) {
                Ok(i) => i,
                Err(_) => {
                    evq_os::io::close(fd);
                    return Err(500);
                }
            };
        }
        if !info.is_regular {
            evq_os::io::close(fd);
            return Err(403);
        }
        let name = path.strip_suffix(b"\0").unwrap_or(path);
        let name = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
        let ctype = content_type(name);
        let mut opened = OpenFile {
            fd,
            owned: true,
            info,
            content_type: ctype,
            slot,
        };
        let keep = if info.size <= borrow_up_to {
            opened.owned = false;
            Ok(fd)
        } else {
            sys::dup(fd)
        };
        if let Ok(keep) = keep {
            let entry = &mut self.slots[slot];
            entry.fd = keep;
            entry.info = info;
            entry.content_type = ctype;
            entry.opened = now;
        }
        Ok(opened)
    }
}
