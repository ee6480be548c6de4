//! What an application asks about a descriptor ([`Interest`]) and what it is told
//! ([`Readiness`]).
//!
//! The bit values of the first three flags are the paper's own (`EVENT_READ = 0x1`,
//! `EVENT_WRITE = 0x2`, `EVENT_EXCEPT = 0x4`, SEEDS 000), so the C API passes them
//! through unchanged.

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $bit:expr, $label:literal;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            $($(#[$fdoc])* pub const $flag: $name = $name($bit);)*
            const ALL_BITS: u32 = 0 $(| $bit)*;

            /// The empty set.
            pub const fn empty() -> Self {
                $name(0)
            }
            /// The raw bits.
            pub const fn bits(self) -> u32 {
                self.0
            }
            /// Builds a set from raw bits, or `None` if any bit is undefined.
            pub const fn from_bits(bits: u32) -> Option<Self> {
                if bits & !Self::ALL_BITS == 0 {
                    Some($name(bits))
                } else {
                    None
                }
            }
            /// Builds a set from raw bits, dropping undefined ones.
            pub const fn from_bits_truncate(bits: u32) -> Self {
                $name(bits & Self::ALL_BITS)
            }
            /// True if no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            /// True if every flag of `other` is set in `self`.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// True if `self` and `other` share any flag.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            /// `self` without the flags of `other`.
            pub const fn remove(self, other: Self) -> Self {
                $name(self.0 & !other.0)
            }
        }

        impl BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                $name(self.0 | rhs.0)
            }
        }
        impl BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                self.0 |= rhs.0;
            }
        }
        impl BitAnd for $name {
            type Output = Self;
            fn bitand(self, rhs: Self) -> Self {
                $name(self.0 & rhs.0)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut first = true;
                f.write_str(concat!(stringify!($name), "("))?;
                $(if self.contains($name::$flag) && $bit != 0 {
                    if !first { f.write_str("|")?; }
                    f.write_str($label)?;
                    first = false;
                })*
                if first { f.write_str("empty")?; }
                f.write_str(")")
            }
        }
    };
}

flag_set! {
    /// The conditions an application declares interest in (`declare_interest`'s mask).
    ///
    /// An empty interest revokes a registration.
    Interest {
        /// Data (or a connection, or end-of-file) can be read: the paper's `EVENT_READ`.
        READ = 0x1, "READ";
        /// Buffer space is free for writing: `EVENT_WRITE`.
        WRITE = 0x2, "WRITE";
        /// Exceptional condition such as TCP urgent data (`POLLPRI`): `EVENT_EXCEPT`.
        EXCEPT = 0x4, "EXCEPT";
    }
}

flag_set! {
    /// The state of a descriptor, as reported by `declare_interest` and in each event.
    ///
    /// `HUP` and `ERROR` are reported whatever the interest, as `poll(2)` does; `TIMER`
    /// and `NOTIFY` mark events that come from a timer or from a
    /// [`Notifier`](crate::Notifier) rather than from a descriptor.
    Readiness {
        /// Readable (data, a pending connection, or end-of-file).
        READ = 0x1, "READ";
        /// Writable.
        WRITE = 0x2, "WRITE";
        /// Exceptional condition (`POLLPRI`).
        EXCEPT = 0x4, "EXCEPT";
        /// The peer hung up (`POLLHUP`/`POLLRDHUP`); reads will see end-of-file.
        HUP = 0x8, "HUP";
        /// An error is pending on the descriptor (`POLLERR`); read it with `SO_ERROR`.
        ERROR = 0x10, "ERROR";
        /// A timer set with `add_timer` expired.
        TIMER = 0x20, "TIMER";
        /// Another thread called `Notifier::notify`.
        NOTIFY = 0x40, "NOTIFY";
    }
}

impl Readiness {
    /// The part of this state that answers `interest` (plus `HUP`/`ERROR`, always).
    pub fn answering(self, interest: Interest) -> Readiness {
        Readiness(self.0 & (interest.bits() | Readiness::HUP.0 | Readiness::ERROR.0))
    }

    /// Converts `poll(2)` `revents` bits.
    pub fn from_poll(revents: i16) -> Readiness {
        let r = revents;
        let mut out = Readiness::empty();
        if r & (libc::POLLIN | libc::POLLRDNORM) != 0 {
            out |= Readiness::READ;
        }
        if r & (libc::POLLOUT | libc::POLLWRNORM) != 0 {
            out |= Readiness::WRITE;
        }
        if r & libc::POLLPRI != 0 {
            out |= Readiness::EXCEPT;
        }
        if r & (libc::POLLHUP | libc::POLLRDHUP) != 0 {
            out |= Readiness::HUP;
        }
        if r & libc::POLLERR != 0 {
            out |= Readiness::ERROR;
        }
        out
    }
}

impl Interest {
    /// The `poll(2)` `events` bits that ask for this interest.
    pub fn to_poll(self) -> i16 {
        let mut ev = 0;
        if self.contains(Interest::READ) {
            ev |= libc::POLLIN | libc::POLLRDHUP;
        }
        if self.contains(Interest::WRITE) {
            ev |= libc::POLLOUT;
        }
        if self.contains(Interest::EXCEPT) {
            ev |= libc::POLLPRI;
        }
        ev
    }
}

impl From<Interest> for Readiness {
    fn from(i: Interest) -> Readiness {
        Readiness(i.bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_bit_values() {
        assert_eq!(Interest::READ.bits(), 1);
        assert_eq!(Interest::WRITE.bits(), 2);
        assert_eq!(Interest::EXCEPT.bits(), 4);
        assert_eq!(Interest::from_bits(8), None);
        assert_eq!(
            format!("{:?}", Readiness::READ | Readiness::HUP),
            "Readiness(READ|HUP)"
        );
        assert_eq!(format!("{:?}", Interest::empty()), "Interest(empty)");
    }

    #[test]
    fn answering_keeps_hup_and_error() {
        let r = Readiness::READ | Readiness::WRITE | Readiness::HUP;
        assert_eq!(
            r.answering(Interest::WRITE),
            Readiness::WRITE | Readiness::HUP
        );
    }
}
