//! Ring construction for the completion API: sizes, the per-thread setup flags and
//! what to do when the kernel refuses them.

use io_uring::IoUring;
use std::io;

/// Whether to ask the kernel for an optional ring setup flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// Do not ask for it.
    Off,
    /// Ask; if the kernel refuses (`EINVAL`, too old), go on without it.
    IfAvailable,
    /// Ask; if the kernel refuses, [`CompletionRing::with_options`](super::CompletionRing::with_options)
    /// fails with an error naming the flag and the kernel version that has it.
    Required,
}

/// Sizes and setup flags for a [`CompletionRing`](super::CompletionRing).
#[derive(Clone, Debug)]
pub struct CompletionOptions {
    pub(super) sq_entries: u32,
    pub(super) cq_entries: u32,
    pub(super) buffers: u32,
    pub(super) buffer_size: u32,
    pub(super) single_issuer: Setup,
    pub(super) defer_taskrun: Setup,
}

impl Default for CompletionOptions {
    fn default() -> Self {
        CompletionOptions {
            sq_entries: 256,
            cq_entries: 4096,
            buffers: 1024,
            buffer_size: 4096,
            single_issuer: Setup::IfAvailable,
            defer_taskrun: Setup::IfAvailable,
        }
    }
}

impl CompletionOptions {
    /// Defaults: 256 SQ entries, 4,096 CQ entries, 1,024 receive buffers of 4 KiB,
    /// `SINGLE_ISSUER` and `DEFER_TASKRUN` if the kernel has them.
    pub fn new() -> Self {
        Self::default()
    }

    /// Submission queue entries (1 to 32,768; the kernel rounds up to a power of two).
    pub fn sq_entries(mut self, n: u32) -> Self {
        self.sq_entries = n;
        self
    }

    /// Completion queue entries (at least `sq_entries`, up to 65,536). A small CQ
    /// overflows sooner; overflowed completions are kept by the kernel and recovered.
    pub fn cq_entries(mut self, n: u32) -> Self {
        self.cq_entries = n;
        self
    }

    /// Number of provided receive buffers: a power of two from 1 to 32,768.
    pub fn buffers(mut self, n: u32) -> Self {
        self.buffers = n;
        self
    }

    /// Bytes per receive buffer (1 to 1 MiB): the most one recv completion carries.
    pub fn buffer_size(mut self, n: u32) -> Self {
        self.buffer_size = n;
        self
    }

    /// `IORING_SETUP_SINGLE_ISSUER` (Linux 6.0): only the creating thread submits.
    pub fn single_issuer(mut self, s: Setup) -> Self {
        self.single_issuer = s;
        self
    }

    /// `IORING_SETUP_DEFER_TASKRUN` (Linux 6.1; needs single issuer): completions run
    /// only when the owner waits, instead of interrupting it.
    pub fn defer_taskrun(mut self, s: Setup) -> Self {
        self.defer_taskrun = s;
        self
    }

    /// Range-checks every field with a message that names it.
    pub(super) fn validate(&self) -> io::Result<()> {
        let bad = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        if !(1..=32_768).contains(&self.sq_entries) {
            return bad(format!("sq_entries {} not in 1..=32768", self.sq_entries));
        }
        if !(self.sq_entries..=65_536).contains(&self.cq_entries) {
            return bad(format!(
                "cq_entries {} not in sq_entries ({})..=65536",
                self.cq_entries, self.sq_entries
            ));
        }
        if !(1..=32_768).contains(&self.buffers) || !self.buffers.is_power_of_two() {
            return bad(format!(
                "buffers {} is not a power of two in 1..=32768",
                self.buffers
            ));
        }
        if !(1..=1 << 20).contains(&self.buffer_size) {
            return bad(format!(
                "buffer_size {} not in 1..=1048576",
                self.buffer_size
            ));
        }
        if self.defer_taskrun == Setup::Required && self.single_issuer == Setup::Off {
            return bad("defer_taskrun Required needs single_issuer (the kernel's rule)".into());
        }
        Ok(())
    }
}

/// The setup flags a ring actually got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSetup {
    /// `IORING_SETUP_SINGLE_ISSUER` is on.
    pub single_issuer: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` is on.
    pub defer_taskrun: bool,
    /// The kernel gathers batches for a wait (`IORING_FEAT_MIN_TIMEOUT`,
    /// Linux 6.12): [`Gather`](super::Gather) takes effect.
    pub gathers: bool,
}

/// Builds the ring, dropping optional flags the kernel refuses, most demanding first.
pub(super) fn build(o: &CompletionOptions) -> io::Result<(IoUring, RingSetup)> {
    let want_single = o.single_issuer != Setup::Off;
    let want_defer = o.defer_taskrun != Setup::Off && want_single;
    let mut tries = vec![(want_single, want_defer)];
    if want_defer && o.defer_taskrun == Setup::IfAvailable {
        tries.push((want_single, false));
    }
    if want_single && o.single_issuer == Setup::IfAvailable && o.defer_taskrun != Setup::Required {
        tries.push((false, false));
    }
    let mut last = None;
    for (single, defer) in tries {
        let mut b = IoUring::builder();
        b.setup_cqsize(o.cq_entries).setup_clamp();
        if single {
            b.setup_single_issuer();
        }
        if defer {
            b.setup_defer_taskrun();
        }
        match b.build(o.sq_entries) {
            Ok(ring) => {
                let p = ring.params();
                if !p.is_feature_nodrop() || !p.is_feature_ext_arg() {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "io_uring lacks IORING_FEAT_NODROP / EXT_ARG: the completion API needs Linux 6.0",
                    ));
                }
                let setup = RingSetup {
                    single_issuer: single,
                    defer_taskrun: defer,
                    gathers: p.is_feature_min_timeout(),
                };
                return Ok((ring, setup));
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some((single, defer, e)),
            Err(e) => return Err(e),
        }
    }
    let (single, defer, e) = last.expect("at least one try");
    let flag = if defer {
        "IORING_SETUP_DEFER_TASKRUN (Linux 6.1)"
    } else if single {
        "IORING_SETUP_SINGLE_ISSUER (Linux 6.0)"
    } else {
        "io_uring_setup"
    };
    Err(io::Error::new(
        e.kind(),
        format!("the kernel refused {flag}: {e}"),
    ))
}
