//! What producers write into byte-stream channels: fixed-size records that say
//! which channel instance they belong to, their place in it, and when they were
//! written — so a consumer can tell a gap, a repeat, a record of another channel,
//! and how long a record waited.

/// Bytes per record.
pub const RECORD_LEN: usize = 16;

/// One record: `uid` names the channel instance (never reused within a case),
/// `seq` counts from 0 within it, `written_ns` is nanoseconds since the case began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub uid: u32,
    pub seq: u32,
    pub written_ns: u64,
}

impl Record {
    /// The record's bytes (little-endian fields).
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..4].copy_from_slice(&self.uid.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.written_ns.to_le_bytes());
        b
    }

    /// A record from exactly `RECORD_LEN` bytes.
    pub fn decode(b: &[u8]) -> Record {
        let word = |r: std::ops::Range<usize>| b[r].try_into().expect("record field");
        Record {
            uid: u32::from_le_bytes(word(0..4)),
            seq: u32::from_le_bytes(word(4..8)),
            written_ns: u64::from_le_bytes(b[8..16].try_into().expect("record field")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let r = Record {
            uid: 0xdead_beef,
            seq: 7,
            written_ns: u64::MAX - 1,
        };
        assert_eq!(Record::decode(&r.encode()), r);
    }
}
