//! The connections of one event loop, by slot. A slot's generation moves on
//! when its connection is released, so a token made for the old connection (an
//! event or a timer still on its way) finds nothing in the new one.

/// Generations wrap within 29 bits: a token carries one beside a 32-bit slot
/// number and up to three flag bits.
const GEN_MASK: u32 = (1 << 29) - 1;

/// Items by slot, with a generation per slot and a free list.
pub(crate) struct Slots<T> {
    items: Vec<Option<T>>,
    gens: Vec<u32>,
    free: Vec<u32>,
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Slots<T> {
        Slots {
            items: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
        }
    }

    /// A free slot (a released one first), empty until [`Slots::put`].
    pub(crate) fn vacant(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.items.push(None);
            self.gens.push(0);
            (self.items.len() - 1) as u32
        })
    }

    /// The slot's current generation.
    pub(crate) fn generation(&self, slot: u32) -> u32 {
        self.gens[slot as usize]
    }

    /// Puts `item` in `slot` (a vacant one, or the one it was taken from).
    pub(crate) fn put(&mut self, slot: u32, item: T) {
        self.items[slot as usize] = Some(item);
    }

    /// Takes the item out of `slot` if the slot is still at `generation`; the
    /// caller puts it back or releases the slot.
    #[inline]
    pub(crate) fn take(&mut self, slot: u32, generation: u32) -> Option<T> {
        match self.gens.get(slot as usize) {
            Some(&g) if g == generation => self.items[slot as usize].take(),
            _ => None,
        }
    }

    /// Takes the item out of `slot`, whatever its generation (for sweeps over
    /// every slot).
    pub(crate) fn take_any(&mut self, slot: u32) -> Option<T> {
        self.items.get_mut(slot as usize)?.take()
    }

    /// Gives `slot` back, empty: its generation moves on.
    pub(crate) fn release(&mut self, slot: u32) {
        let g = &mut self.gens[slot as usize];
        *g = g.wrapping_add(1) & GEN_MASK;
        self.free.push(slot);
    }

    /// How many slots there are (in use or not), for sweeps.
    pub(crate) fn count(&self) -> u32 {
        self.items.len() as u32
    }
}

/// The generation a token carries at `shift`, masked as slots make them.
pub(crate) fn generation_of(token: u64, shift: u32) -> u32 {
    (token >> shift) as u32 & GEN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_slot_is_reused_with_a_new_generation() {
        let mut s = Slots::new();
        let a = s.vacant();
        let g = s.generation(a);
        s.put(a, "first");
        assert_eq!(s.take(a, g + 1), None, "a wrong generation finds nothing");
        assert_eq!(s.take(a, g), Some("first"));
        s.release(a);
        let b = s.vacant();
        assert_eq!(b, a, "released slots are reused first");
        s.put(b, "second");
        assert_eq!(s.take(b, g), None, "the old connection's token is stale");
        assert_eq!(s.take_any(b), Some("second"));
        assert_eq!(s.take(7, 0), None, "no such slot");
        assert_eq!(s.count(), 1);
        assert_eq!(generation_of(u64::from(GEN_MASK) << 32 | 5, 32), GEN_MASK);
    }

    #[test]
    fn generations_wrap_inside_the_mask() {
        let mut s: Slots<()> = Slots::new();
        let a = s.vacant();
        for _ in 0..=GEN_MASK {
            s.release(a);
            assert_eq!(s.vacant(), a);
        }
        assert_eq!(s.generation(a), 0);
    }
}
