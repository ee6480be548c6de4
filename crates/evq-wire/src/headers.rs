//! What a head's fields say about its body and its connection, and the framing
//! that follows from them (RFC 9112 §6.3, in its order).

use crate::{Framing, FramingError, Strictness};

/// What a message head says about its body and its connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BodyHeaders {
    /// `Transfer-Encoding` ends in `chunked`.
    pub chunked: bool,
    /// `Content-Length`, if present.
    pub length: Option<u64>,
    /// Any `Transfer-Encoding` at all.
    pub has_transfer_encoding: bool,
    /// `Connection: close` seen.
    pub close: bool,
    /// `Connection: keep-alive` seen.
    pub keep_alive: bool,
    /// Times `chunked` is named across the `Transfer-Encoding` field lines.
    /// More than once (`chunked, chunked`, or a line each) is refused by
    /// [`BodyHeaders::finish`]: RFC 9112 §6.1 forbids applying it twice, and
    /// peers differ on whether to unwrap it once or twice.
    pub chunked_named: u32,
}

impl BodyHeaders {
    /// Reads the framing and connection fields of a parsed head.
    ///
    /// # Errors
    /// As [`BodyHeaders::field`] and [`BodyHeaders::finish`].
    pub fn read(
        headers: &[httparse::Header<'_>],
        strictness: Strictness,
    ) -> Result<BodyHeaders, FramingError> {
        let mut bh = BodyHeaders::default();
        for h in headers {
            bh.field(h.name.as_bytes(), h.value)?;
        }
        bh.finish(strictness)?;
        Ok(bh)
    }

    /// Takes one field into account, for a reader that walks a head's fields
    /// itself (the server, which reads others in the same pass). True if the
    /// field is one of the three this reads (`Content-Length`,
    /// `Transfer-Encoding`, `Connection`). Every `Connection` field line adds its
    /// options to the others' (RFC 9110 §5.3: lines of one field combine), so
    /// `close` anywhere wins over `keep-alive`. Call [`BodyHeaders::finish`]
    /// after the last field.
    ///
    /// # Errors
    /// A `Content-Length` that is not a plain decimal number, or one that
    /// differs from an earlier one, in either order (`0` then `5` as much as `5`
    /// then `0`: RFC 9112 §6.3 item 5, a request-smuggling shape).
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> Result<bool, FramingError> {
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(value).ok_or(FramingError::BadContentLength)?;
            if self.length.is_some_and(|l| l != n) {
                return Err(FramingError::ConflictingContentLength);
            }
            self.length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Chunked must be the final coding to frame the message; a later
            // field line's codings come after an earlier one's.
            let is_chunked = |c: &[u8]| c.trim_ascii().eq_ignore_ascii_case(b"chunked");
            let named = value
                .split(|&b| b == b',')
                .filter(|c| is_chunked(c))
                .count();
            self.chunked_named = self.chunked_named.saturating_add(named as u32);
            self.has_transfer_encoding = true;
            let last = value.rsplit(|&b| b == b',').next().unwrap_or(b"");
            self.chunked = is_chunked(last);
        } else if name.eq_ignore_ascii_case(b"connection") {
            self.close |= has_token(value, "close");
            self.keep_alive |= has_token(value, "keep-alive");
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Checks the fields taken together, after the last [`BodyHeaders::field`].
    ///
    /// # Errors
    /// When `strictness` is [`Strictness::Strict`], `Transfer-Encoding`
    /// together with `Content-Length` (RFC 9112 §6.3 item 3: a smuggling shape,
    /// refused rather than framed one way while a peer frames it the other),
    /// and `chunked` named more than once (§6.1; a peer unwrapping it twice
    /// would take the body's first chunk for the framing of the rest).
    pub fn finish(&self, strictness: Strictness) -> Result<(), FramingError> {
        if strictness == Strictness::Strict && self.has_transfer_encoding && self.length.is_some() {
            return Err(FramingError::LengthWithTransferEncoding);
        }
        if strictness == Strictness::Strict && self.chunked_named > 1 {
            return Err(FramingError::ChunkedTwice);
        }
        Ok(())
    }

    /// Whether the connection may carry another message after this one, by the
    /// message's version (`http11`) and `Connection` field alone.
    pub fn persistent(&self, http11: bool) -> bool {
        !self.close && (http11 || self.keep_alive)
    }

    /// How a request body is framed: chunked, a `Content-Length`, or none.
    ///
    /// # Errors
    /// A `Transfer-Encoding` that does not end in `chunked`: the length of such a
    /// request cannot be known (RFC 9112 §6.3: answer 400 and close).
    pub fn request_framing(&self, strictness: Strictness) -> Result<Framing, FramingError> {
        if self.chunked {
            Ok(Framing::chunked(strictness))
        } else if self.has_transfer_encoding {
            Err(FramingError::TransferEncodingNotChunked)
        } else {
            Ok(match self.length {
                Some(n) if n > 0 => Framing::Length(n),
                _ => Framing::Done,
            })
        }
    }

    /// How the body of a response with this `status` is framed, in RFC 9112
    /// §6.3's order: none for a response to HEAD and for 1xx, 204 and 304; the
    /// chunked coding when it is the final one; until close for any other
    /// `Transfer-Encoding`; then `Content-Length`; else until close.
    pub fn response_framing(
        &self,
        status: u16,
        head_request: bool,
        strictness: Strictness,
    ) -> Framing {
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::Done
        } else if self.chunked {
            Framing::chunked(strictness)
        } else if self.has_transfer_encoding {
            Framing::UntilClose
        } else {
            match self.length {
                Some(0) => Framing::Done,
                Some(n) => Framing::Length(n),
                None => Framing::UntilClose,
            }
        }
    }
}

/// A `Content-Length` value: 1 to 18 decimal digits (optional surrounding
/// whitespace), so the sum cannot overflow; `None` for anything else, signs and
/// lists included.
pub fn parse_content_length(value: &[u8]) -> Option<u64> {
    let v = value.trim_ascii();
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &c| a * 10 + u64::from(c - b'0')))
}

/// Whether a comma-separated field value (`Connection: keep-alive, Upgrade`)
/// holds `token`, compared without case.
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(fields: &[(&str, &str)], s: Strictness) -> Result<BodyHeaders, FramingError> {
        let headers: Vec<httparse::Header<'_>> = fields
            .iter()
            .map(|(name, value)| httparse::Header {
                name,
                value: value.as_bytes(),
            })
            .collect();
        BodyHeaders::read(&headers, s)
    }

    #[test]
    fn lengths_and_smuggling_shapes() {
        let strict = Strictness::Strict;
        let bh = read(&[("Content-Length", " 12 ")], strict).unwrap();
        assert_eq!(bh.length, Some(12));
        let same = read(&[("content-length", "5"), ("Content-Length", "5")], strict);
        assert_eq!(same.unwrap().length, Some(5));
        for bad in ["", "+5", "-1", "5,5", "0x10", "1234567890123456789"] {
            assert_eq!(
                read(&[("Content-Length", bad)], strict),
                Err(FramingError::BadContentLength),
                "{bad:?}"
            );
        }
        for (a, b) in [("5", "6"), ("0", "5"), ("5", "0")] {
            assert_eq!(
                read(&[("Content-Length", a), ("Content-Length", b)], strict),
                Err(FramingError::ConflictingContentLength),
                "{a} then {b}"
            );
        }
        let both = [("Transfer-Encoding", "chunked"), ("Content-Length", "5")];
        assert_eq!(
            read(&both, strict),
            Err(FramingError::LengthWithTransferEncoding)
        );
        // Chunked twice, on one line or two, even with a coding between.
        for twice in [
            &[("Transfer-Encoding", "chunked, chunked")][..],
            &[
                ("Transfer-Encoding", "chunked"),
                ("Transfer-Encoding", "Chunked"),
            ],
            &[
                ("Transfer-Encoding", "chunked, gzip"),
                ("Transfer-Encoding", "chunked"),
            ],
        ] {
            assert_eq!(
                read(twice, strict),
                Err(FramingError::ChunkedTwice),
                "{twice:?}"
            );
            assert!(read(twice, Strictness::Lenient).unwrap().chunked);
        }
        let once = [
            ("Transfer-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
        ];
        assert_eq!(read(&once, strict).unwrap().chunked_named, 1);
        // A client lets Transfer-Encoding override the length.
        let bh = read(&both, Strictness::Lenient).unwrap();
        assert_eq!(
            bh.response_framing(200, false, Strictness::Lenient),
            Framing::chunked(Strictness::Lenient)
        );
    }

    #[test]
    fn transfer_codings_and_connection_tokens() {
        let s = Strictness::Strict;
        let bh = read(&[("Transfer-Encoding", "gzip, Chunked ")], s).unwrap();
        assert!(bh.chunked && bh.has_transfer_encoding);
        let bh = read(&[("Transfer-Encoding", "chunked, gzip")], s).unwrap();
        assert!(!bh.chunked && bh.has_transfer_encoding);
        assert_eq!(
            bh.request_framing(s),
            Err(FramingError::TransferEncodingNotChunked)
        );
        assert_eq!(bh.response_framing(200, false, s), Framing::UntilClose);
        let bh = read(&[("Connection", "Keep-Alive, Upgrade")], s).unwrap();
        assert!(bh.keep_alive && !bh.close);
        assert!(bh.persistent(false) && bh.persistent(true));
        let bh = read(&[("Connection", "keep-alive"), ("Connection", "close")], s).unwrap();
        assert!(!bh.persistent(false) && !bh.persistent(true));
        assert!(!BodyHeaders::default().persistent(false));
        assert!(has_token(b" a ,close", "Close"));
        assert!(!has_token(b"closed", "close"));
    }

    #[test]
    fn response_framing_follows_rfc_9112_order() {
        let s = Strictness::Strict;
        let len = |n| BodyHeaders {
            length: Some(n),
            ..BodyHeaders::default()
        };
        assert_eq!(len(5).response_framing(200, false, s), Framing::Length(5));
        assert_eq!(len(0).response_framing(200, false, s), Framing::Done);
        for status in [100, 101, 204, 304] {
            assert_eq!(len(5).response_framing(status, false, s), Framing::Done);
        }
        assert_eq!(len(5).response_framing(200, true, s), Framing::Done);
        let none = BodyHeaders::default();
        assert_eq!(none.response_framing(200, false, s), Framing::UntilClose);
        assert_eq!(none.request_framing(s), Ok(Framing::Done));
        assert_eq!(len(7).request_framing(s), Ok(Framing::Length(7)));
    }
}
