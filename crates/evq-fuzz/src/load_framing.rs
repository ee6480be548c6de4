//! The `load_framing` target: `evq load`'s response framing — evq-wire's
//! [`ResponseReader`] with its head memo ([`HeadParser`]) — over an arbitrary byte
//! stream cut into arbitrary pieces, differential three ways.
//!
//! Input: one byte of flags (bit 0: the requests were HEAD), a 32-bit seed for
//! the piece sizes, a byte bounding them, then the stream.
//!
//! Asserted:
//!
//! - **memo = fresh parse**: a reader whose one `HeadParser` remembers the last
//!   head and a reader given a fresh `HeadParser` for every call return the same
//!   `Result<Fed>` for every piece and the same `eof()`;
//! - **pieces = whole**: the replies and the error (if any) are the same when the
//!   stream arrives in those pieces and when it arrives in one piece;
//! - no panic; `used` never exceeds the piece; a reply's `keep_alive` is false
//!   after a body that runs until close.

use crate::input::Input;
use evq_wire::{FramingError, HeadParser, Reply, ResponseReader};

/// Most bytes of stream one input carries.
const MAX_STREAM: usize = 256 * 1024;

/// What feeding a stream gave: the replies in order, then how it ended.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    replies: Vec<Reply>,
    end: Result<Option<Reply>, FramingError>,
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let (Some(flags), Some(seed), Some(bound)) = (input.u8(), input.u32(), input.u8()) else {
        return;
    };
    let stream = input.rest();
    let stream = &stream[..stream.len().min(MAX_STREAM)];
    let head_request = flags & 1 == 1;
    let pieces = cut(stream.len(), seed, bound);

    let memo = feed(stream, &pieces, head_request, true);
    let whole = feed(stream, &[stream.len()], head_request, false);
    assert_eq!(memo, whole, "pieces {pieces:?} against one piece");
}

/// Piece lengths covering `len` bytes: sizes in 1..=bound+1 from an xorshift
/// stream (a bound of 255 means "up to 64 KiB").
fn cut(len: usize, seed: u32, bound: u8) -> Vec<usize> {
    let max = if bound == 255 {
        65536
    } else {
        bound as usize + 1
    };
    let mut x = seed as u64 | 1 << 40;
    let mut pieces = Vec::new();
    let mut left = len;
    while left > 0 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = (1 + x as usize % max).min(left);
        pieces.push(n);
        left -= n;
    }
    pieces
}

/// Feeds `stream` in `pieces` to a reader with a remembering `HeadParser`, and
/// (with `differential`) the same pieces to a reader with a fresh one for every
/// call, asserting they agree at every step.
fn feed(stream: &[u8], pieces: &[usize], head_request: bool, differential: bool) -> Outcome {
    let mut shared = HeadParser::new(head_request);
    let mut a = ResponseReader::new();
    let mut b = ResponseReader::new();
    let mut replies = Vec::new();
    let mut at = 0;
    for &len in pieces {
        let mut piece = &stream[at..at + len];
        at += len;
        while !piece.is_empty() {
            let ra = a.feed(piece, &mut shared);
            if differential {
                let rb = b.feed(piece, &mut HeadParser::new(head_request));
                assert_eq!(ra, rb, "memo against a fresh parse, {at} bytes in");
            }
            match ra {
                Err(e) => {
                    return Outcome {
                        replies,
                        end: Err(e),
                    }
                }
                Ok(fed) => {
                    assert!(
                        fed.used <= piece.len(),
                        "used {} of {}",
                        fed.used,
                        piece.len()
                    );
                    if let Some(reply) = fed.reply {
                        replies.push(reply);
                    } else if fed.used == 0 {
                        break;
                    }
                    piece = &piece[fed.used..];
                }
            }
        }
    }
    let end = a.eof();
    if differential {
        assert_eq!(end, b.eof(), "eof: memo against a fresh parse");
    }
    if let Ok(Some(last)) = &end {
        assert!(
            !last.keep_alive,
            "a body until close cannot keep the connection"
        );
    }
    Outcome { replies, end }
}
