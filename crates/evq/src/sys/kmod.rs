//! The `kmod` and `kmod-ring` backends: evq's own kernel module, `evq.ko`, whose
//! `/dev/evq` is the paper's `declare_interest` / `get_next_event` built into the
//! kernel (SEEDS 000), with /dev/epoll's result area mapped into the process
//! (SEEDS 002) and DragonFly's wake-one with rotation (SEEDS 003).
//! `kernel/README.md` has the module's design; `kernel/include/uapi/evq.h` the ABI
//! mirrored below.
//!
//! # Quirks of /dev/evq, and what this file does about them
//!
//! a) **Only where the module is loaded.** The probe opens `/dev/evq` and asks it
//!    for its counters (`EVQ_STATS`): no device means the module is not loaded (the
//!    host this project is developed on cannot load modules at all; `scripts/vm-test`
//!    boots a kernel that can), `ENOTTY` means a device that does not speak this
//!    ABI. Either is the probe's error, so `evq backends` says why it is absent.
//! b) **Two flavours of one device.** `kmod` dequeues with the `EVQ_GET_NEXT_EVENT`
//!    ioctl into a buffer: masks are polled at dequeue and an event whose cause was
//!    consumed is suppressed — epoll's contract. `kmod-ring` maps the queue's result
//!    ring: the kernel's wake-up callback posts events into it and `wait` takes them
//!    with no system call at all, entering the kernel only to sleep on an empty ring.
//!    A posted mask is the wake-up's (what happened, as an io_uring CQE) and only
//!    for registrations whose interest the wake-up speaks for entirely (a READ|WRITE
//!    registration is polled by the kernel instead), so an event whose cause the
//!    application consumed before taking it is still reported:
//!    `current_state_masks` is false for `kmod-ring`.
//! c) **The kernel holds a reference to every registered file** (a module has no
//!    hook in `__fput`), and checks at dequeue, at declare and by an idle sweep
//!    that the number still names that file; a stale registration is dropped
//!    there, never reported. So a descriptor closed without a revoke stays open in
//!    the kernel until the queue notices; [`forget`](Backend::forget) therefore
//!    revokes by number — which touches only this queue's record for the number,
//!    never a file — so the socket really closes at once. Revoke by number works on
//!    a closed number (the module then answers `EBADF` only to say it cannot read
//!    the state), so `remove` treats `EBADF` as done.
//! d) **A declare says when it replaced a reused number's old registration** (the
//!    ioctl returns 1): that is `ModifyError::Vanished`, so the queue starts a new
//!    generation, as it does on epoll's `ENOENT`. Ring slots the old registration
//!    posted are cancelled by the kernel; any already taken carry the old key and
//!    are filtered by generation.
//! e) **Wake-one needs nothing from user space**: `EVQ_WAKE_ONE` hooks are
//!    exclusive and rotate in the kernel (the woken hook moves to the tail of the
//!    file's wait queue), and it combines with every mode, oneshot included.
//! f) **Regular files are refused with `EPERM`**, as epoll refuses them; the
//!    error reaches the caller unchanged.
//! g) **Timeouts are nanoseconds** (`-1` forever, `0` just look), so nothing is
//!    rounded and a short timeout never spins.
//! h) **Taking a ring slot is an atomic exchange of its mask with 0.** The kernel
//!    merges later wake-ups into a live slot with compare-exchange, so either the
//!    merge lands before our exchange or the kernel sees 0 and posts a new slot:
//!    nothing is lost. A zero mask is a slot the kernel cancelled (revoke, modify).
//!    `head` is published with release after the slots are read, `tail` read with
//!    acquire; at most one ring's worth is looked at per call.
//! i) **A full ring loses nothing**: the kernel keeps further events in its ready
//!    list, FIFO behind the first that did not fit, and says so in the ring's
//!    `backlog` flag; `wait` then asks the kernel to move them in before it takes.
//!    The kernel also routes through that list the wake-ups whose key does not
//!    speak for the whole interest, whose mask it must poll. Ring size:
//!    `EVQ_KMOD_RING_ENTRIES` (a power of two; 1024 by default). `overflows()`
//!    is the kernel's count of wake-ups that found the ring full.
//! j) **Level mode is state, and state needs the kernel.** A level registration
//!    must be reported on every call while ready, but only a call into the kernel
//!    can re-poll it. So while any level registration exists, every `wait` on
//!    `kmod-ring` makes one `EVQ_GET_NEXT_EVENT` (which re-polls the level
//!    registrations posted since the last one; a live slot absorbs the repeat, so
//!    nothing is delivered twice) before taking from the ring; without any, a
//!    non-empty ring is taken with no system call. The queue's own notifier is
//!    declared in event mode here (every write to its eventfd wakes), so it does
//!    not count.

use super::syscall::syscall;
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::interest_table::NOTIFY_KEY;
use crate::{Interest, Mode, Readiness};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

// ---- the ABI, mirrored from kernel/include/uapi/evq.h (checked by `abi_matches_the_header`)

const EVQ_READ: u32 = 0x01;
const EVQ_WRITE: u32 = 0x02;
const EVQ_EXCEPT: u32 = 0x04;
const EVQ_MODE_LEVEL: u32 = 0;
const EVQ_MODE_EVENT: u32 = 1;
const EVQ_MODE_ONESHOT: u32 = 2;
const EVQ_WAKE_ONE: u32 = 0x1;
const EVQ_WAIT_RING: u32 = 0x1;
const EVQ_MAX_EVENTS: usize = 0x7fff_ffff / 16;
const EVQ_RING_MAX_ENTRIES: u32 = 1 << 20;

#[repr(C)]
#[derive(Default)]
struct EvqInterest {
    fd: i32,
    interest: u32,
    mode: u32,
    flags: u32,
    token: u64,
    state: u32,
    reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct EvqEvent {
    token: u64,
    fd: i32,
    mask: u32,
}

#[repr(C)]
struct EvqWait {
    events: u64,
    array_max: u32,
    flags: u32,
    timeout_ns: i64,
}

#[repr(C)]
#[derive(Default)]
struct EvqRingSetup {
    entries: u32,
    flags: u32,
    mmap_bytes: u64,
    events_offset: u32,
    reserved: u32,
}

/// Fields of `struct evq_ring_header`: `head` at 0, `tail` at 64, the
/// `overflowed` counter at 160, the `backlog` flag at 168.
const RING_HEAD_OFFSET: usize = 0;
const RING_TAIL_OFFSET: usize = 64;
const RING_OVERFLOWED_OFFSET: usize = 160;
const RING_BACKLOG_OFFSET: usize = 168;

const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (0xE7 << 8) | nr
}
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;
const EVQ_DECLARE_INTEREST: u64 = ioc(IOC_READ | IOC_WRITE, 1, std::mem::size_of::<EvqInterest>());
const EVQ_GET_NEXT_EVENT: u64 = ioc(IOC_WRITE, 2, std::mem::size_of::<EvqWait>());
const EVQ_SETUP_RING: u64 = ioc(IOC_READ | IOC_WRITE, 3, std::mem::size_of::<EvqRingSetup>());
const EVQ_STATS: u64 = ioc(IOC_READ, 4, 64);

const _: () = {
    assert!(std::mem::size_of::<EvqInterest>() == 32);
    assert!(std::mem::size_of::<EvqEvent>() == 16);
    assert!(std::mem::size_of::<EvqWait>() == 24);
    assert!(std::mem::size_of::<EvqRingSetup>() == 24);
};

const DEVICE: &str = "/dev/evq";
const DEFAULT_RING_ENTRIES: u32 = 1024;

/// `ioctl(2)` on the queue; its return value (0 or more) or the OS error.
fn ioctl<T>(fd: RawFd, request: u64, arg: *mut T) -> io::Result<libc::c_int> {
    syscall!(ioctl(fd, request as libc::Ioctl, arg))
}

fn open_device() -> io::Result<OwnedFd> {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(DEVICE)
    {
        Ok(f) => Ok(OwnedFd::from(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "/dev/evq is absent: the evq.ko kernel module is not loaded \
             (kernel/README.md; scripts/vm-test boots a kernel with it)",
        )),
        Err(e) => Err(e),
    }
}

fn interest_bits(i: Interest) -> u32 {
    let mut bits = 0;
    if i.contains(Interest::READ) {
        bits |= EVQ_READ;
    }
    if i.contains(Interest::WRITE) {
        bits |= EVQ_WRITE;
    }
    if i.contains(Interest::EXCEPT) {
        bits |= EVQ_EXCEPT;
    }
    bits
}

fn mode_bits(m: Mode) -> u32 {
    match m {
        Mode::Level => EVQ_MODE_LEVEL,
        Mode::Event => EVQ_MODE_EVENT,
        Mode::Oneshot => EVQ_MODE_ONESHOT,
    }
}

/// The module's masks use the paper's bits, which are `Readiness`'s own.
#[inline]
fn readiness(mask: u32) -> Readiness {
    Readiness::from_bits_truncate(mask)
}

fn timeout_ns(timeout: Option<Duration>) -> i64 {
    timeout.map_or(-1, |t| t.as_nanos().min(i64::MAX as u128) as i64)
}

fn errno_is(e: &io::Error, code: i32) -> bool {
    e.raw_os_error() == Some(code)
}

/// The mapped result ring (quirk h).
struct Ring {
    base: NonNull<u8>,
    len: usize,
    slots: NonNull<EvqEvent>,
    mask: u32,
    /// Our copy of the consumer index: only we write `head`.
    head: u32,
}

impl Ring {
    fn map(fd: RawFd, entries: u32) -> io::Result<Ring> {
        let mut setup = EvqRingSetup {
            entries,
            ..EvqRingSetup::default()
        };
        ioctl(fd, EVQ_SETUP_RING, &mut setup)?;
        let len = setup.mmap_bytes as usize;
        // SAFETY: mmap(2) of the queue's ring with the length EVQ_SETUP_RING
        // reported, shared and read-write as the module requires; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        // SAFETY: events_offset lies inside the mapping (the module puts the slots
        // after the header page) and is 16-byte aligned (page aligned).
        let slots = unsafe { base.add(setup.events_offset as usize).cast::<EvqEvent>() };
        Ok(Ring {
            base,
            len,
            slots,
            mask: entries - 1,
            // A fresh ring starts at 0 on both sides.
            head: 0,
        })
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: head and tail are 4-byte aligned u32s inside the mapped header
        // page, which lives as long as `self`; the kernel writes tail and reads
        // head concurrently, hence atomics.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast::<u32>()) }
    }

    /// Whether the process has taken everything the kernel posted.
    fn is_empty(&self) -> bool {
        self.index(RING_TAIL_OFFSET).load(Ordering::Acquire) == self.head
    }

    /// Events wait in the kernel's ready list (quirk i): ask before taking, so
    /// they are moved in behind what the ring holds, in order.
    fn backlog(&self) -> bool {
        self.index(RING_BACKLOG_OFFSET).load(Ordering::Relaxed) != 0
    }

    /// The kernel's count of wake-ups that found the ring full.
    fn overflowed(&self) -> u64 {
        // SAFETY: an 8-byte aligned u64 inside the mapped header; the kernel
        // increments it under its lock, a torn read would only misstate a
        // statistic, and x86-64 loads of aligned u64s are not torn anyway.
        unsafe {
            self.base
                .as_ptr()
                .add(RING_OVERFLOWED_OFFSET)
                .cast::<u64>()
                .read_volatile()
        }
    }

    /// Takes up to `max` events without a system call; returns how many.
    #[inline]
    fn take<F: FnMut(SysEvent)>(&mut self, max: usize, on_event: &mut F) -> usize {
        // Acquire: pairs with the kernel's release store of tail, after it wrote
        // the slots below it.
        let tail = self.index(RING_TAIL_OFFSET).load(Ordering::Acquire);
        let mut head = self.head;
        let mut n = 0;
        let mut looked = 0u32;
        while head != tail && n < max && looked <= self.mask {
            let i = (head & self.mask) as usize;
            // SAFETY: i < entries, so the slot lies inside the mapping; token and
            // fd are not written while the slot is live (between head and tail),
            // and the mask is only touched atomically by both sides.
            let (token, mask) = unsafe {
                let slot = self.slots.as_ptr().add(i);
                let mask = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*slot).mask))
                    .swap(0, Ordering::AcqRel);
                (std::ptr::addr_of!((*slot).token).read(), mask)
            };
            if mask != 0 {
                on_event(SysEvent {
                    key: token,
                    readiness: readiness(mask),
                    gone: false,
                });
                n += 1;
            }
            head = head.wrapping_add(1);
            looked += 1;
        }
        if head != self.head {
            self.head = head;
            // Release: the slots we passed are read; the kernel may reuse them.
            self.index(RING_HEAD_OFFSET).store(head, Ordering::Release);
        }
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made; nothing refers to it after.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A queue on `/dev/evq`; `RING` picks the flavour (quirk b).
pub(crate) struct KmodBackend<const RING: bool> {
    fd: OwnedFd,
    buffer: Vec<EvqEvent>,
    ring: Option<Ring>,
    /// Level registrations by fd (`kmod-ring`: quirk j), and how many there are.
    level: Vec<bool>,
    levels: usize,
}

// SAFETY: the ring's raw pointers name a mapping this backend owns alone and uses
// only through `&mut self`; the module ties neither the queue nor its ring to a
// thread, so the backend may move to another one.
unsafe impl<const RING: bool> Send for KmodBackend<RING> {}

impl<const RING: bool> KmodBackend<RING> {
    fn declare(&self, w: &Watch, interest: u32) -> io::Result<libc::c_int> {
        // Quirk j: the notifier needs no level re-check on the ring.
        let mode = if RING && w.key == NOTIFY_KEY {
            Mode::Event
        } else {
            w.mode
        };
        let mut arg = EvqInterest {
            fd: w.fd,
            interest,
            mode: mode_bits(mode),
            flags: if w.wake_one { EVQ_WAKE_ONE } else { 0 },
            token: w.key,
            ..EvqInterest::default()
        };
        ioctl(self.fd.as_raw_fd(), EVQ_DECLARE_INTEREST, &mut arg)
    }

    /// Revokes by number (quirk c); `EBADF` means the number is closed, and the
    /// registration is gone all the same.
    fn revoke(&self, w: &Watch) -> io::Result<()> {
        match self.declare(w, 0) {
            Ok(_) => Ok(()),
            Err(e) if errno_is(&e, libc::EBADF) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Keeps the count of level registrations (quirk j) in step with the kernel.
    fn track(&mut self, fd: RawFd, level: bool) {
        if !RING || fd < 0 {
            return;
        }
        let i = fd as usize;
        if i >= self.level.len() {
            if !level {
                return;
            }
            self.level.resize(i + 1, false);
        }
        if self.level[i] != level {
            self.level[i] = level;
            if level {
                self.levels += 1;
            } else {
                self.levels -= 1;
            }
        }
    }

    fn counts_as_level(w: &Watch) -> bool {
        w.mode == Mode::Level && w.key != NOTIFY_KEY
    }

    fn ring_entries() -> io::Result<u32> {
        match std::env::var("EVQ_KMOD_RING_ENTRIES") {
            Err(_) => Ok(DEFAULT_RING_ENTRIES),
            Ok(s) => match s.parse::<u32>() {
                Ok(n) if n.is_power_of_two() && n <= EVQ_RING_MAX_ENTRIES => Ok(n),
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("EVQ_KMOD_RING_ENTRIES={s:?}: want a power of two up to {EVQ_RING_MAX_ENTRIES}"),
                )),
            },
        }
    }

    #[inline]
    fn wait_ring<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        on_event: &mut F,
    ) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        let levels = self.levels;
        let Some(ring) = self.ring.as_mut() else {
            return Err(io::Error::other("kmod-ring queue without a ring"));
        };
        // Quirk j: without level registrations and backlog, a non-empty ring is
        // all there is, taken with no system call. Otherwise the kernel re-polls
        // the level registrations and moves its ready list in first (without
        // sleeping while the ring holds something).
        let empty = ring.is_empty();
        if empty || levels > 0 || ring.backlog() {
            let mut w = EvqWait {
                events: 0,
                array_max: 0,
                flags: EVQ_WAIT_RING,
                timeout_ns: if empty { timeout_ns(timeout) } else { 0 },
            };
            ioctl(fd, EVQ_GET_NEXT_EVENT, &mut w)?;
        }
        ring.take(max, on_event);
        Ok(())
    }
}

impl<const RING: bool> Backend for KmodBackend<RING> {
    const CAPABILITIES: Capabilities = Capabilities {
        level: true,
        event: true,
        oneshot: true,
        wake_one: true,
        cost_grows_with_interest: false,
        current_state_masks: !RING,
        fifo: true,
        shared_descriptors: true,
        regular_files: false,
    };

    fn probe() -> io::Result<()> {
        let fd = open_device()?;
        let mut stats = [0u64; 8];
        match ioctl(fd.as_raw_fd(), EVQ_STATS, stats.as_mut_ptr()) {
            Ok(_) => Ok(()),
            Err(e) if errno_is(&e, libc::ENOTTY) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "/dev/evq does not answer EVQ_STATS: not evq.ko, or another ABI version",
            )),
            Err(e) => Err(e),
        }
    }

    fn open() -> io::Result<Self> {
        let fd = open_device()?;
        let ring = if RING {
            Some(Ring::map(fd.as_raw_fd(), Self::ring_entries()?)?)
        } else {
            None
        };
        Ok(KmodBackend {
            fd,
            buffer: Vec::new(),
            ring,
            level: Vec::new(),
            levels: 0,
        })
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        match self.declare(w, interest_bits(w.interest)) {
            Ok(_) => {
                self.track(w.fd, Self::counts_as_level(w));
                Ok(())
            }
            Err(e) => {
                if errno_is(&e, libc::ENOMEM) || errno_is(&e, libc::ENOSPC) {
                    // A replaced registration may be gone already: leave nothing half-made.
                    let _ = self.revoke(w);
                    self.track(w.fd, false);
                }
                Err(e)
            }
        }
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        match self.declare(new, interest_bits(new.interest)) {
            Ok(r) => {
                self.track(new.fd, Self::counts_as_level(new));
                if r == 0 {
                    Ok(())
                } else {
                    // Quirk d: the number's old file was replaced; a new generation follows.
                    Err(ModifyError::Vanished)
                }
            }
            // Nothing changed in the kernel before these were detected.
            Err(e) if !(errno_is(&e, libc::ENOMEM) || errno_is(&e, libc::ENOSPC)) => {
                Err(ModifyError::Refused(e))
            }
            Err(e) => {
                let _ = self.revoke(new);
                self.track(new.fd, false);
                Err(ModifyError::Lost(e))
            }
        }
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.track(old.fd, false);
        self.revoke(old)
    }

    fn forget(&mut self, old: &Watch) {
        self.track(old.fd, false);
        // Quirk c: by number, in this queue only; lets the kernel's reference go.
        let _ = self.revoke(old);
    }

    fn overflows(&self) -> u64 {
        self.ring.as_ref().map_or(0, Ring::overflowed)
    }

    #[inline]
    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let max = max.clamp(1, EVQ_MAX_EVENTS);
        if RING {
            return self.wait_ring(max, timeout, &mut on_event);
        }
        if self.buffer.len() < max {
            self.buffer.resize(max, EvqEvent::default());
        }
        let mut w = EvqWait {
            events: self.buffer.as_mut_ptr() as u64,
            array_max: max as u32,
            flags: 0,
            timeout_ns: timeout_ns(timeout),
        };
        let n = ioctl(self.fd.as_raw_fd(), EVQ_GET_NEXT_EVENT, &mut w)? as usize;
        for ev in &self.buffer[..n.min(max)] {
            on_event(SysEvent {
                key: ev.token,
                readiness: readiness(ev.mask),
                gone: false,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants above against the C header, compiled by the system's C
    /// compiler (skipped where there is none: the VM suite checks them too).
    #[test]
    fn abi_matches_the_header() {
        let header = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kernel/include/uapi");
        let dir = std::env::temp_dir().join(format!("evq-abi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("abi.c");
        let exe = dir.join("abi");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include "evq.h"
int main(void) {
    printf("%u %u %u %u %u %u %u %u %u %lu %u\n", EVQ_READ, EVQ_WRITE, EVQ_EXCEPT,
           EVQ_MODE_LEVEL, EVQ_MODE_EVENT, EVQ_MODE_ONESHOT, EVQ_WAKE_ONE, EVQ_WAIT_RING,
           (unsigned)EVQ_MAX_EVENTS, (unsigned long)EVQ_DECLARE_INTEREST, EVQ_RING_MAX_ENTRIES);
    printf("%lu %lu %lu %zu %zu %zu %zu %zu\n", (unsigned long)EVQ_GET_NEXT_EVENT,
           (unsigned long)EVQ_SETUP_RING, (unsigned long)EVQ_STATS,
           sizeof(struct evq_interest), sizeof(struct evq_event), sizeof(struct evq_wait),
           sizeof(struct evq_ring_setup), __builtin_offsetof(struct evq_ring_header, tail));
    return 0;
}
"#,
        )
        .unwrap();
        let compiled = std::process::Command::new("cc")
            .arg(format!("-I{header}"))
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .status();
        match compiled {
            Ok(s) if s.success() => {}
            other => {
                evq_testkit::skip(
                    "cc",
                    format!("no C compiler to check the ABI header: {other:?}"),
                );
                return;
            }
        }
        let out = std::process::Command::new(&exe).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let want = format!(
            "{EVQ_READ} {EVQ_WRITE} {EVQ_EXCEPT} {EVQ_MODE_LEVEL} {EVQ_MODE_EVENT} \
             {EVQ_MODE_ONESHOT} {EVQ_WAKE_ONE} {EVQ_WAIT_RING} {EVQ_MAX_EVENTS} \
             {EVQ_DECLARE_INTEREST} {EVQ_RING_MAX_ENTRIES}\n\
             {EVQ_GET_NEXT_EVENT} {EVQ_SETUP_RING} {EVQ_STATS} {} {} {} {} {RING_TAIL_OFFSET}\n",
            std::mem::size_of::<EvqInterest>(),
            std::mem::size_of::<EvqEvent>(),
            std::mem::size_of::<EvqWait>(),
            std::mem::size_of::<EvqRingSetup>(),
        );
        assert_eq!(text, want);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_paper_bits_are_readiness_bits() {
        assert_eq!(readiness(EVQ_READ), Readiness::READ);
        assert_eq!(readiness(EVQ_WRITE), Readiness::WRITE);
        assert_eq!(readiness(EVQ_EXCEPT), Readiness::EXCEPT);
        assert_eq!(readiness(0x08), Readiness::HUP);
        assert_eq!(readiness(0x10), Readiness::ERROR);
    }
}
