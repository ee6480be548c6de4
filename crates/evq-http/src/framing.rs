//! Where an HTTP/1.1 message body ends (RFC 9112 §6): a fixed `Content-Length`,
//! `chunked` transfer coding, or end-of-connection. The proxy relays bodies
//! byte-for-byte and only needs to know where each one stops, so the chunked
//! decoder tracks chunk boundaries without copying or decoding data.

/// A body's framing and how far through it the relay is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (or it has all been relayed).
    Done,
    /// This many bytes are left.
    Length(u64),
    /// `Transfer-Encoding: chunked`, at this point of the grammar.
    Chunked(Chunk),
    /// The body runs until the sender closes the connection.
    UntilClose,
}

/// Position in the chunked grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Reading the hex chunk size; `digits` seen so far.
    Size {
        /// Size accumulated so far.
        size: u64,
        /// Hex digits seen.
        digits: u8,
    },
    /// Skipping a chunk extension up to the line end.
    Extension {
        /// The chunk size read.
        size: u64,
    },
    /// Saw CR after the size line; expecting LF.
    SizeLf {
        /// The chunk size read.
        size: u64,
    },
    /// Inside chunk data; this many bytes left.
    Data(u64),
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (an empty one ends the body).
    TrailerStart,
    /// Inside a trailer line.
    TrailerLine,
    /// Saw CR at the start of a trailer line; expecting the final LF.
    FinalLf,
}

/// The body is malformed (bad chunk size, missing CRLF): the connection cannot be
/// trusted for another message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramingError;

impl Framing {
    /// A chunked body from its start.
    pub const fn chunked() -> Framing {
        Framing::Chunked(Chunk::Size { size: 0, digits: 0 })
    }

    /// True when the body has been relayed completely.
    pub fn is_done(&self) -> bool {
        *self == Framing::Done
    }

    /// Consumes as much of `input` as belongs to this body and returns how many
    /// bytes that was; the framing becomes `Done` when the body ends. Bytes after
    /// the end (a pipelined next message) are not consumed.
    ///
    /// # Errors
    /// A chunked body that breaks the grammar.
    pub fn advance(&mut self, input: &[u8]) -> Result<usize, FramingError> {
        match self {
            Framing::Done => Ok(0),
            Framing::UntilClose => Ok(input.len()),
            Framing::Length(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                if *left == 0 {
                    *self = Framing::Done;
                }
                Ok(n as usize)
            }
            Framing::Chunked(state) => {
                let mut i = 0;
                while i < input.len() {
                    let b = input[i];
                    *state = match *state {
                        Chunk::Size { size, digits } => match hex(b) {
                            Some(d) if digits < 15 => Chunk::Size {
                                size: size << 4 | d as u64,
                                digits: digits + 1,
                            },
                            None if digits > 0 && (b == b';' || b == b' ' || b == b'\t') => {
                                Chunk::Extension { size }
                            }
                            None if digits > 0 && b == b'\r' => Chunk::SizeLf { size },
                            _ => return Err(FramingError),
                        },
                        Chunk::Extension { size } => match b {
                            b'\r' => Chunk::SizeLf { size },
                            b'\n' => return Err(FramingError),
                            _ => Chunk::Extension { size },
                        },
                        Chunk::SizeLf { size } => match (b, size) {
                            (b'\n', 0) => Chunk::TrailerStart,
                            (b'\n', n) => Chunk::Data(n),
                            _ => return Err(FramingError),
                        },
                        Chunk::Data(left) => {
                            let n = left.min((input.len() - i) as u64);
                            i += n as usize;
                            *state = if left == n {
                                Chunk::DataCr
                            } else {
                                Chunk::Data(left - n)
                            };
                            continue;
                        }
                        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
                        Chunk::DataLf if b == b'\n' => Chunk::Size { size: 0, digits: 0 },
                        Chunk::DataCr | Chunk::DataLf => return Err(FramingError),
                        Chunk::TrailerStart => match b {
                            b'\r' => Chunk::FinalLf,
                            b'\n' => return Err(FramingError),
                            _ => Chunk::TrailerLine,
                        },
                        Chunk::TrailerLine => match b {
                            b'\n' => Chunk::TrailerStart,
                            _ => Chunk::TrailerLine,
                        },
                        Chunk::FinalLf if b == b'\n' => {
                            *self = Framing::Done;
                            return Ok(i + 1);
                        }
                        Chunk::FinalLf => return Err(FramingError),
                    };
                    i += 1;
                }
                Ok(i)
            }
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// What a message head says about its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyHeaders {
    /// `Transfer-Encoding` ends in `chunked`.
    pub chunked: bool,
    /// `Content-Length`, if present and valid.
    pub length: Option<u64>,
    /// Any `Transfer-Encoding` at all.
    pub has_transfer_encoding: bool,
    /// `Connection: close` seen.
    pub close: bool,
    /// `Connection: keep-alive` seen.
    pub keep_alive: bool,
}

/// Reads the framing headers; `Err` for conflicting or invalid lengths (a
/// request-smuggling shape).
pub fn body_headers(headers: &[httparse::Header<'_>]) -> Result<BodyHeaders, FramingError> {
    let mut bh = BodyHeaders {
        chunked: false,
        length: None,
        has_transfer_encoding: false,
        close: false,
        keep_alive: false,
    };
    for h in headers {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let v = h.value.trim_ascii();
            if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
                return Err(FramingError);
            }
            let n = v.iter().fold(0u64, |a, &c| a * 10 + (c - b'0') as u64);
            if bh.length.is_some_and(|l| l != n) {
                return Err(FramingError);
            }
            bh.length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            bh.has_transfer_encoding = true;
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
            bh.chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            for t in h.value.split(|&b| b == b',') {
                let t = t.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    bh.close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    bh.keep_alive = true;
                }
            }
        }
    }
    if bh.has_transfer_encoding && bh.length.is_some() {
        return Err(FramingError);
    }
    Ok(bh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_ends_exactly() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET /next";
        for split in 0..body.len() {
            let mut f = Framing::chunked();
            let a = f.advance(&body[..split]).unwrap();
            assert_eq!(a, split.min(body.len() - 9));
            let b = f.advance(&body[split..]).unwrap();
            assert_eq!(a + b, body.len() - 9, "split {split}");
            assert!(f.is_done());
        }
        let mut f = Framing::chunked();
        assert!(f.advance(b"zz\r\n").is_err());
        let mut f = Framing::chunked();
        assert!(f.advance(b"3\r\nabcX").is_err());
        let mut f = Framing::Length(3);
        assert_eq!(f.advance(b"abcdef"), Ok(3));
        assert!(f.is_done());
    }
}
