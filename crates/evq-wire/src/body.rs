//! Where an HTTP/1.1 message body ends (RFC 9112 §6): nowhere (no body), after a
//! fixed `Content-Length`, at the end of the `chunked` coding, or when the sender
//! closes the connection.
//!
//! A reader feeds [`Framing::advance`] whatever arrived; it says how many of those
//! bytes belong to the body and how many of them are payload (chunk framing left
//! out), without copying or decoding anything. The proxy relays the bytes it is
//! told belong to the body; the load generator only counts the payload.
//!
//! The chunked decoder is a state machine over single bytes (chunk data is
//! skipped in one step), so a body split anywhere across reads frames the same as
//! one read whole; it keeps no line in memory, which is why trailer lines are
//! bounded by counting rather than by a buffer.

use crate::FramingError;

/// Longest trailer line accepted in a chunked body, in bytes.
pub const MAX_TRAILER_LINE: usize = 4096;
/// Most hex digits of a chunk size: 15 keep the size below 2^60, so it cannot
/// overflow and a body length stays a `u64`.
const MAX_SIZE_DIGITS: u8 = 15;

/// How a reader treats the choices RFC 9112 leaves to a recipient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// An intermediary's or a server's reading: lines of the chunked framing end
    /// in CRLF only, and a message with both `Transfer-Encoding` and
    /// `Content-Length` is refused. A peer behind a proxy may read a bare LF or
    /// the two lengths the other way, and then the two disagree about where the
    /// next message starts (request smuggling, RFC 9112 §11.2).
    Strict,
    /// A user agent's reading, as most clients read: a bare LF ends a line
    /// (RFC 9112 §2.2 allows it), and `Transfer-Encoding` overrides
    /// `Content-Length` (§6.3 item 3).
    Lenient,
}

/// A body's framing and how far through it the reader is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body, or it has all gone by.
    Done,
    /// This many bytes are left.
    Length(u64),
    /// `Transfer-Encoding: chunked`, at this point of the grammar.
    Chunked(Chunked),
    /// The body runs until the sender closes the connection.
    UntilClose,
}

/// Position in the chunked grammar, and how strictly its lines are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunked {
    at: Chunk,
    strictness: Strictness,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex chunk size; `digits` seen so far.
    Size { size: u64, digits: u8 },
    /// Skipping a chunk extension up to the line end.
    Extension { size: u64 },
    /// Saw CR after the size line; expecting LF.
    SizeLf { size: u64 },
    /// Inside chunk data; this many bytes left.
    Data(u64),
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (an empty one ends the body).
    TrailerStart,
    /// Inside a trailer line of `len` bytes so far.
    TrailerLine { len: u16 },
    /// Saw CR in the trailer section; expecting LF, which ends the body if the
    /// line was `empty`.
    TrailerLf { empty: bool },
}

/// What one [`Framing::advance`] took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input that belong to the body (framing included); the rest
    /// belongs to whatever follows it.
    pub used: usize,
    /// Of those, bytes of payload (chunk sizes, line ends and trailers left out).
    pub payload: usize,
}

impl Framing {
    /// A chunked body from its start.
    pub const fn chunked(strictness: Strictness) -> Framing {
        Framing::Chunked(Chunked {
            at: Chunk::Size { size: 0, digits: 0 },
            strictness,
        })
    }

    /// True when the whole body has gone by.
    pub fn is_done(&self) -> bool {
        *self == Framing::Done
    }

    /// Consumes as much of `input` as belongs to this body; the framing becomes
    /// `Done` when the body ends. Bytes after the end (a pipelined next message)
    /// are not consumed.
    ///
    /// # Errors
    /// A chunked body that breaks the grammar: the body and the connection are
    /// lost (see [`FramingError`]).
    #[inline]
    pub fn advance(&mut self, input: &[u8]) -> Result<Progress, FramingError> {
        match self {
            Framing::Done => Ok(Progress::default()),
            Framing::UntilClose => Ok(Progress {
                used: input.len(),
                payload: input.len(),
            }),
            Framing::Length(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                if *left == 0 {
                    *self = Framing::Done;
                }
                Ok(Progress {
                    used: n as usize,
                    payload: n as usize,
                })
            }
            Framing::Chunked(chunked) => {
                let (progress, ended) = chunked.advance(input)?;
                if ended {
                    *self = Framing::Done;
                }
                Ok(progress)
            }
        }
    }
}

impl Chunked {
    /// Runs the grammar over `input`; true once the body (trailers included) ended.
    fn advance(&mut self, input: &[u8]) -> Result<(Progress, bool), FramingError> {
        let lenient = self.strictness == Strictness::Lenient;
        let mut payload = 0;
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.at = match self.at {
                Chunk::Size { size, digits } => match (b as char).to_digit(16) {
                    Some(_) if digits >= MAX_SIZE_DIGITS => {
                        return Err(FramingError::ChunkSizeTooLarge)
                    }
                    Some(d) => Chunk::Size {
                        size: size << 4 | u64::from(d),
                        digits: digits + 1,
                    },
                    None if digits == 0 => return Err(FramingError::BadChunkSize),
                    None => match b {
                        b';' | b' ' | b'\t' => Chunk::Extension { size },
                        b'\r' => Chunk::SizeLf { size },
                        b'\n' if lenient => size_line_end(size),
                        b'\n' => return Err(FramingError::BadLineEnd),
                        _ => return Err(FramingError::BadChunkSize),
                    },
                },
                Chunk::Extension { size } => match b {
                    b'\r' => Chunk::SizeLf { size },
                    b'\n' if lenient => size_line_end(size),
                    b'\n' => return Err(FramingError::BadLineEnd),
                    _ => Chunk::Extension { size },
                },
                Chunk::SizeLf { size } if b == b'\n' => size_line_end(size),
                Chunk::Data(left) => {
                    let n = left.min((input.len() - i) as u64);
                    i += n as usize;
                    payload += n as usize;
                    self.at = if left == n {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left - n)
                    };
                    continue;
                }
                Chunk::DataCr => match b {
                    b'\r' => Chunk::DataLf,
                    b'\n' if lenient => Chunk::Size { size: 0, digits: 0 },
                    _ => return Err(FramingError::BadLineEnd),
                },
                Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: 0 },
                Chunk::TrailerStart => match b {
                    b'\r' => Chunk::TrailerLf { empty: true },
                    b'\n' if lenient => {
                        return Ok((
                            Progress {
                                used: i + 1,
                                payload,
                            },
                            true,
                        ))
                    }
                    b'\n' => return Err(FramingError::BadLineEnd),
                    _ => Chunk::TrailerLine { len: 1 },
                },
                Chunk::TrailerLine { len } => match b {
                    b'\r' => Chunk::TrailerLf { empty: false },
                    b'\n' if lenient => Chunk::TrailerStart,
                    b'\n' => return Err(FramingError::BadLineEnd),
                    _ if usize::from(len) >= MAX_TRAILER_LINE => {
                        return Err(FramingError::TrailerTooLong)
                    }
                    _ => Chunk::TrailerLine { len: len + 1 },
                },
                Chunk::TrailerLf { empty: true } if b == b'\n' => {
                    return Ok((
                        Progress {
                            used: i + 1,
                            payload,
                        },
                        true,
                    ));
                }
                Chunk::TrailerLf { empty: false } if b == b'\n' => Chunk::TrailerStart,
                Chunk::SizeLf { .. } | Chunk::DataLf | Chunk::TrailerLf { .. } => {
                    return Err(FramingError::BadLineEnd)
                }
            };
            i += 1;
        }
        Ok((Progress { used: i, payload }, false))
    }
}

/// After a complete size line: data, or the trailer section after the last chunk.
fn size_line_end(size: u64) -> Chunk {
    if size == 0 {
        Chunk::TrailerStart
    } else {
        Chunk::Data(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `body` in two pieces split at every point and returns what the
    /// framing made of it (bytes used, payload), or the error.
    fn split_everywhere(body: &[u8], s: Strictness) -> Result<(usize, usize), FramingError> {
        let mut whole = None;
        for split in 0..=body.len() {
            let mut f = Framing::chunked(s);
            let r = f.advance(&body[..split]).and_then(|a| {
                // Nothing is held back: every byte before the end is taken.
                assert_eq!(a.used, split, "split {split}");
                let b = if f.is_done() {
                    Progress::default()
                } else {
                    f.advance(&body[split..])?
                };
                assert!(f.is_done(), "split {split}: not done");
                Ok((a.used + b.used, a.payload + b.payload))
            });
            match (&whole, r) {
                (None, r) => whole = Some(r),
                (Some(w), r) => assert_eq!(*w, r, "split {split}"),
            }
        }
        whole.expect("at least one split")
    }

    #[test]
    fn chunked_ends_exactly_wherever_it_is_split() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET /next";
        let end = body.len() - b"GET /next".len();
        for s in [Strictness::Strict, Strictness::Lenient] {
            assert_eq!(split_everywhere(&body[..end], s), Ok((end, 9)));
            let mut f = Framing::chunked(s);
            let p = f.advance(body).unwrap();
            assert_eq!((p.used, p.payload), (end, 9));
            assert!(f.is_done());
        }
    }

    #[test]
    fn bare_lf_is_a_line_end_only_when_lenient() {
        let crlf = b"5\r\nhello\r\n3;x\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        let lf: Vec<u8> = crlf.iter().copied().filter(|&b| b != b'\r').collect();
        assert_eq!(
            split_everywhere(&lf, Strictness::Lenient),
            Ok((lf.len(), 8))
        );
        // Each line end of the size lines, after data, of a trailer and of the
        // trailer section, made a bare LF on its own.
        for cr in (0..crlf.len()).filter(|&i| crlf[i] == b'\r') {
            let mut one = crlf.to_vec();
            one.remove(cr);
            let mut f = Framing::chunked(Strictness::Strict);
            assert_eq!(f.advance(&one), Err(FramingError::BadLineEnd), "at {cr}");
            let mut f = Framing::chunked(Strictness::Lenient);
            assert_eq!(f.advance(&one).map(|p| p.used), Ok(one.len()), "at {cr}");
            assert!(f.is_done(), "at {cr}");
        }
    }

    #[test]
    fn broken_chunked_bodies_are_errors() {
        for s in [Strictness::Strict, Strictness::Lenient] {
            let err = |input: &[u8]| Framing::chunked(s).advance(input).unwrap_err();
            assert_eq!(err(b"zz\r\n"), FramingError::BadChunkSize);
            assert_eq!(err(b"\r\n"), FramingError::BadChunkSize);
            assert_eq!(err(b";x\r\n"), FramingError::BadChunkSize);
            assert_eq!(err(b"3x\r\n"), FramingError::BadChunkSize);
            assert_eq!(err(b"3\r\nabcX"), FramingError::BadLineEnd);
            assert_eq!(err(b"3\r\nabc\rX"), FramingError::BadLineEnd);
            assert_eq!(err(b"3\rX"), FramingError::BadLineEnd);
            assert_eq!(err(b"0\r\nX-T: 1\rX"), FramingError::BadLineEnd);
            assert_eq!(err(b"0\r\n\rX"), FramingError::BadLineEnd);
            assert_eq!(
                err(b"1000000000000000\r\n"),
                FramingError::ChunkSizeTooLarge
            );
            let mut long = b"0\r\nX: ".to_vec();
            long.resize(long.len() + MAX_TRAILER_LINE, b'a');
            assert_eq!(err(&long), FramingError::TrailerTooLong);
        }
        // Fifteen digits are the most a size may have.
        let mut f = Framing::chunked(Strictness::Strict);
        assert!(f.advance(b"fffffffffffffff\r\n").is_ok());
        assert_eq!(
            f,
            Framing::Chunked(Chunked {
                at: Chunk::Data(0xfff_ffff_ffff_ffff),
                strictness: Strictness::Strict,
            })
        );
    }

    #[test]
    fn length_until_close_and_done() {
        let mut f = Framing::Length(3);
        assert_eq!(
            f.advance(b"ab"),
            Ok(Progress {
                used: 2,
                payload: 2
            })
        );
        assert_eq!(
            f.advance(b"cdef"),
            Ok(Progress {
                used: 1,
                payload: 1
            })
        );
        assert!(f.is_done());
        assert_eq!(f.advance(b"x"), Ok(Progress::default()));
        let mut f = Framing::UntilClose;
        assert_eq!(
            f.advance(b"abc"),
            Ok(Progress {
                used: 3,
                payload: 3
            })
        );
        assert!(!f.is_done());
    }
}
