//! `select(2)` with the user-space half of SEEDS 000's "improved select".
//!
//! # Quirks, and what this file does about them
//!
//! Everything in `select_classic.rs` holds (growable bitmaps past `FD_SETSIZE`,
//! `EBADF` sweeps, no edge mode, no wake-one, a rotating scan cursor). What changes:
//!
//! a) **Shadow fd_sets** are kept up to date by `add`/`modify`/`remove`, and copied
//!    (a `memcpy` of `nfds / 8` bytes) into the sets handed to the kernel, instead of
//!    being rebuilt by walking the interest list.
//! b) **Results are scanned a word at a time**: the three result words are OR'ed,
//!    zero words (64 idle descriptors) are skipped at once, and set bits are found with
//!    `trailing_zeros`.
//! c) **The kernel half of the paper's improvement** (remember which descriptors
//!    changed state and skip re-testing the rest) cannot be done from user space; the
//!    kernel still polls every descriptor below `nfds`. The lab shows what is left.

use super::fd_bitmap::{select, FdBitmap, WatchList, WORD_BITS};
use super::{Backend, Capabilities, ModifyError, SysEvent, Watch};
use crate::{Interest, Mode, Readiness};
use std::io;
use std::time::Duration;

#[derive(Default)]
pub(crate) struct SelectImprovedBackend {
    watches: WatchList,
    shadow_read: FdBitmap,
    shadow_write: FdBitmap,
    shadow_except: FdBitmap,
    read: FdBitmap,
    write: FdBitmap,
    except: FdBitmap,
    cursor: usize,
}

impl SelectImprovedBackend {
    fn set_shadow(&mut self, w: &Watch, armed: bool) {
        let on = |want: Interest| armed && w.interest.contains(want);
        for (bitmap, want) in [
            (&mut self.shadow_read, Interest::READ),
            (&mut self.shadow_write, Interest::WRITE),
            (&mut self.shadow_except, Interest::EXCEPT),
        ] {
            if on(want) {
                bitmap.set(w.fd);
            } else {
                bitmap.clear(w.fd);
            }
        }
    }

    /// Delivers the ready descriptors of word `i` whose bit index is in `bits`.
    fn deliver_word<F: FnMut(SysEvent)>(
        &mut self,
        i: usize,
        mut bits: libc::c_ulong,
        max: usize,
        delivered: &mut usize,
        on_event: &mut F,
    ) {
        while bits != 0 && *delivered < max {
            let bit = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let fd = i * WORD_BITS + bit;
            let mask = 1 << bit;
            let mut r = Readiness::empty();
            if self.read.word(i) & mask != 0 {
                r |= Readiness::READ;
            }
            if self.write.word(i) & mask != 0 {
                r |= Readiness::WRITE;
            }
            if self.except.word(i) & mask != 0 {
                r |= Readiness::EXCEPT;
            }
            let Some((w, _)) = self.watches.get(fd) else {
                continue;
            };
            on_event(SysEvent {
                key: w.key,
                readiness: r,
                gone: false,
            });
            *delivered += 1;
            self.cursor = fd + 1;
            if w.mode == Mode::Oneshot {
                self.watches.disarm(fd);
                self.set_shadow(&w, false);
            }
        }
    }
}

impl Backend for SelectImprovedBackend {
    const CAPABILITIES: Capabilities = Capabilities::STATE_SCAN;

    fn probe() -> io::Result<()> {
        Ok(())
    }

    fn open() -> io::Result<Self> {
        Ok(Self::default())
    }

    fn add(&mut self, w: &Watch) -> io::Result<()> {
        self.watches.insert(w)?;
        self.set_shadow(w, true);
        Ok(())
    }

    fn modify(&mut self, _old: &Watch, new: &Watch) -> Result<(), ModifyError> {
        Ok(self.add(new)?)
    }

    fn remove(&mut self, old: &Watch) -> io::Result<()> {
        self.forget(old);
        Ok(())
    }

    fn forget(&mut self, old: &Watch) {
        if let Some(w) = self.watches.remove(old.fd) {
            self.set_shadow(&w, false);
        }
    }

    fn wait<F: FnMut(SysEvent)>(
        &mut self,
        max: usize,
        timeout: Option<Duration>,
        mut on_event: F,
    ) -> io::Result<()> {
        let nfds = self.watches.nfds();
        for b in [
            &mut self.shadow_read,
            &mut self.shadow_write,
            &mut self.shadow_except,
        ] {
            b.grow_to(nfds);
        }
        self.read.copy_from(&self.shadow_read, nfds);
        self.write.copy_from(&self.shadow_write, nfds);
        self.except.copy_from(&self.shadow_except, nfds);
        match select(
            nfds,
            &mut self.read,
            &mut self.write,
            &mut self.except,
            timeout,
        ) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                let mut gone = Vec::new();
                self.watches.sweep_closed(|w| gone.push(w));
                for w in gone {
                    self.set_shadow(&w, false);
                    on_event(SysEvent {
                        key: w.key,
                        readiness: Readiness::empty(),
                        gone: true,
                    });
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let words = nfds.div_ceil(WORD_BITS);
        let start = if self.cursor < nfds { self.cursor } else { 0 };
        let (first_word, first_bit) = (start / WORD_BITS, start % WORD_BITS);
        let high_part: libc::c_ulong = !0 << first_bit;
        let mut delivered = 0;
        // From the cursor to the end, then from 0 back up to the cursor: the cursor's
        // own word is visited twice, its high bits first, its low bits last.
        let passes = (first_word..words)
            .map(|i| (i, true))
            .chain((0..=first_word).map(|i| (i, false)));
        for (i, first_pass) in passes {
            if delivered == max {
                break;
            }
            let mut bits = self.read.word(i) | self.write.word(i) | self.except.word(i);
            if i == first_word {
                bits &= if first_pass { high_part } else { !high_part };
            }
            if bits != 0 {
                self.deliver_word(i, bits, max, &mut delivered, &mut on_event);
            }
        }
        Ok(())
    }
}
