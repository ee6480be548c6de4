//! # evq-wire — HTTP/1.1 on the wire, for evq's server, proxy and load generator
//!
//! The pieces of RFC 9112 that more than one of evq's tools needs, written once:
//!
//! - [`Framing`]: where a body ends — nowhere, after a `Content-Length`, at the end
//!   of the `chunked` coding, or at close — fed bytes as they arrive, without
//!   copying them. The proxy relays what it says belongs to a body; `evq load`
//!   counts the payload.
//! - [`BodyHeaders`]: what a head's `Content-Length`, `Transfer-Encoding` and
//!   `Connection` fields say, and the framing that follows (§6.3, in its order).
//! - [`parse_response_head`], [`HeadParser`] (which frames a repeated head from
//!   memory, byte for byte) and [`ResponseReader`] (a push reader that says where
//!   each response on a client connection ends).
//! - [`Strictness`]: the choices the RFC leaves to a recipient, made once — an
//!   intermediary reads strictly (CRLF only; `Transfer-Encoding` with
//!   `Content-Length` refused), a client leniently.
//! - [`FramingError`]: the one error.
//!
//! Heads are parsed by `httparse`. Nothing here allocates per message except the
//! copy of a head split across reads, and nothing panics on any input.
//!
//! ```
//! use evq_wire::{Framing, Strictness};
//! let mut body = Framing::chunked(Strictness::Strict);
//! let step = body.advance(b"5\r\nhello\r\n0\r\n\r\nGET /next HTTP/1.1\r\n")?;
//! assert_eq!((step.used, step.payload), (15, 5));
//! assert!(body.is_done());
//! # Ok::<(), evq_wire::FramingError>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod error;
mod headers;
mod response;

pub use body::{Chunked, Framing, Progress, Strictness, MAX_TRAILER_LINE};
pub use error::FramingError;
pub use headers::{has_token, parse_content_length, BodyHeaders};
pub use response::{
    parse_response_head, Fed, HeadParser, Reply, ResponseHead, ResponseReader, MAX_RESPONSE_HEAD,
    MAX_RESPONSE_HEADERS,
};
