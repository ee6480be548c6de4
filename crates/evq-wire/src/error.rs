//! The one error of the crate: a message that cannot be framed.

use std::fmt;

/// Why a message could not be framed. After any of these the connection cannot be
/// trusted to carry another message: the reader does not know where the next one
/// starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramingError {
    /// `httparse` refused the head.
    BadHead(httparse::Error),
    /// The head did not end within the reader's limit.
    HeadTooLong,
    /// A `Content-Length` that is not 1 to 18 decimal digits.
    BadContentLength,
    /// Two `Content-Length` fields with different values.
    ConflictingContentLength,
    /// Both `Transfer-Encoding` and `Content-Length`, refused where a peer behind us
    /// could frame the message the other way (RFC 9112 §6.3, request smuggling).
    LengthWithTransferEncoding,
    /// `chunked` named more than once in `Transfer-Encoding`, refused where a
    /// peer could unwrap it a different number of times (RFC 9112 §6.1).
    ChunkedTwice,
    /// A request whose `Transfer-Encoding` does not end in `chunked`: its length
    /// cannot be known (RFC 9112 §6.3: 400, then close).
    TransferEncodingNotChunked,
    /// A chunk-size line without hex digits, or with a byte that belongs nowhere.
    BadChunkSize,
    /// A chunk size of more than 15 hex digits.
    ChunkSizeTooLarge,
    /// A line of the chunked framing that does not end where it must: a missing
    /// CRLF after chunk data, a CR not followed by LF, or a bare LF where only
    /// CRLF is accepted ([`crate::Strictness::Strict`]).
    BadLineEnd,
    /// A trailer line longer than [`crate::MAX_TRAILER_LINE`].
    TrailerTooLong,
    /// The connection closed inside a head.
    ClosedInHead,
    /// The connection closed inside a body whose end was known from its framing.
    ClosedInBody,
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FramingError::BadHead(e) => write!(f, "bad head: {e}"),
            FramingError::HeadTooLong => f.write_str("head too long"),
            FramingError::BadContentLength => f.write_str("bad Content-Length"),
            FramingError::ConflictingContentLength => {
                f.write_str("conflicting Content-Length headers")
            }
            FramingError::LengthWithTransferEncoding => {
                f.write_str("both Transfer-Encoding and Content-Length")
            }
            FramingError::ChunkedTwice => f.write_str("chunked applied more than once"),
            FramingError::TransferEncodingNotChunked => {
                f.write_str("Transfer-Encoding does not end in chunked")
            }
            FramingError::BadChunkSize => f.write_str("bad chunked encoding: bad chunk size"),
            FramingError::ChunkSizeTooLarge => {
                f.write_str("bad chunked encoding: chunk size too large")
            }
            FramingError::BadLineEnd => f.write_str("bad chunked encoding: bad line end"),
            FramingError::TrailerTooLong => {
                f.write_str("bad chunked encoding: trailer line too long")
            }
            FramingError::ClosedInHead => f.write_str("connection closed inside a head"),
            FramingError::ClosedInBody => f.write_str("connection closed inside a body"),
        }
    }
}

impl std::error::Error for FramingError {}
