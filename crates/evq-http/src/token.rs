//! The tokens the server's and the proxy's event loops register with: what an
//! event is about, which slot of the loop's slab it names, and that slot's
//! generation, so an event or timer for a connection closed and replaced in the
//! same slot carries the old generation and is dropped.
//!
//! Layout: kind in the top 3 bits, generation in the next 29, slot index in the
//! low 32.

/// What an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A client connection (the server's connections, the proxy's clients).
    Client,
    /// A proxy's connection to the origin.
    Origin,
    /// A client connection's timer.
    Timer,
    /// The listening socket, or its pause timer.
    Listener,
    /// The stop pipe that SIGINT/SIGTERM write to.
    Signal,
}

/// Every kind, at its number in a token.
const KINDS: [Kind; 5] = [
    Kind::Client,
    Kind::Origin,
    Kind::Timer,
    Kind::Listener,
    Kind::Signal,
];

const KIND_SHIFT: u32 = 61;
const GEN_BITS: u32 = 29;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// The token for slot `index` of `kind` at `generation`.
pub(crate) fn token(kind: Kind, index: usize, generation: u32) -> u64 {
    ((kind as u64) << KIND_SHIFT) | (u64::from(generation & GEN_MASK) << 32) | index as u64
}

/// What a token says: kind, slot index and generation; `None` for a token no
/// loop here made.
pub(crate) fn decode(t: u64) -> Option<(Kind, usize, u32)> {
    let kind = *KINDS.get((t >> KIND_SHIFT) as usize)?;
    Some((kind, t as u32 as usize, (t >> 32) as u32 & GEN_MASK))
}

/// The generation a slot takes when its connection closes.
pub(crate) fn next_generation(generation: u32) -> u32 {
    generation.wrapping_add(1) & GEN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_generations_wrap() {
        for kind in [
            Kind::Client,
            Kind::Origin,
            Kind::Timer,
            Kind::Listener,
            Kind::Signal,
        ] {
            for (index, generation) in [(0, 0), (7, 3), (u32::MAX as usize, GEN_MASK)] {
                let t = token(kind, index, generation);
                assert_eq!(decode(t), Some((kind, index, generation)));
            }
        }
        assert_eq!(next_generation(GEN_MASK), 0);
        assert_eq!(decode(u64::MAX), None);
        // A generation past the mask cannot leak into the kind.
        assert_eq!(
            decode(token(Kind::Client, 1, u32::MAX)).map(|d| d.0),
            Some(Kind::Client)
        );
    }
}
