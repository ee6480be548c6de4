//! The byte format every structured target reads: a little-endian stream of
//! choices, consumed front to back, ending the operation sequence when it runs dry.
//!
//! [`Input`] reads it; [`Seed`] writes it, so the seeds in `fuzz/corpus/` are made
//! from readable operation lists (see `src/bin/evq-fuzz-seeds.rs`) rather than
//! hand-typed bytes. A short read is never an error: it ends the input, which keeps
//! every byte string a valid input (what libFuzzer's mutations need).

/// A cursor over a fuzz input.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    /// Starts reading `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { rest: data }
    }

    /// True once every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `n` bytes, or `None` (and nothing consumed) if fewer are left.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            self.rest = &[];
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// One byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        self.bytes(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// A little-endian `i16`.
    pub fn i16(&mut self) -> Option<i16> {
        self.u16().map(|v| v as i16)
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self) -> Option<i32> {
        self.u32().map(|v| v as i32)
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self) -> Option<i64> {
        self.u64().map(|v| v as i64)
    }

    /// A flag (the low bit of one byte).
    pub fn bool(&mut self) -> Option<bool> {
        self.u8().map(|b| b & 1 == 1)
    }

    /// One of `choices`, by one byte modulo their number.
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> Option<T> {
        assert!(!choices.is_empty() && choices.len() <= 256);
        self.u8().map(|b| choices[b as usize % choices.len()])
    }

    /// An index below `n` (`1 <= n <= 256`), by one byte.
    pub fn index(&mut self, n: usize) -> Option<usize> {
        assert!((1..=256).contains(&n));
        self.u8().map(|b| b as usize % n)
    }
}

/// Writes inputs in [`Input`]'s format: each method mirrors the reader's.
#[derive(Clone, Debug, Default)]
pub struct Seed {
    bytes: Vec<u8>,
}

impl Seed {
    /// An empty input.
    pub fn new() -> Seed {
        Seed::default()
    }

    /// The bytes written so far.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Seed {
        self.bytes.push(v);
        self
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Seed {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Seed {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Seed {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A little-endian `i16`.
    pub fn i16(&mut self, v: i16) -> &mut Seed {
        self.u16(v as u16)
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Seed {
        self.u32(v as u32)
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Seed {
        self.u64(v as u64)
    }

    /// A flag.
    pub fn bool(&mut self, v: bool) -> &mut Seed {
        self.u8(v as u8)
    }

    /// Raw bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Seed {
        self.bytes.extend_from_slice(v);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_read_back() {
        let mut s = Seed::new();
        s.u8(7).u16(0x1234).i32(-5).u64(u64::MAX).bool(true).i16(-2);
        let bytes = s.finish();
        let mut i = Input::new(&bytes);
        assert_eq!(i.u8(), Some(7));
        assert_eq!(i.u16(), Some(0x1234));
        assert_eq!(i.i32(), Some(-5));
        assert_eq!(i.u64(), Some(u64::MAX));
        assert_eq!(i.bool(), Some(true));
        assert_eq!(i.i16(), Some(-2));
        assert!(i.is_empty());
        assert_eq!(i.u8(), None);
    }

    #[test]
    fn a_short_read_ends_the_input() {
        let mut i = Input::new(&[1, 2, 3]);
        assert_eq!(i.u32(), None);
        assert!(i.is_empty());
        assert_eq!(i.pick(&[1, 2]), None);
    }
}
