//! Responses in: a head parsed and framed ([`parse_response_head`]), the memo
//! that frames a repeated head without parsing it again ([`HeadParser`]), and the
//! push reader that says where each response on a connection ends
//! ([`ResponseReader`]).

use crate::{BodyHeaders, Framing, FramingError, Strictness};
use std::mem::MaybeUninit;

/// Most header fields of a response head.
pub const MAX_RESPONSE_HEADERS: usize = 96;
/// Largest response head a [`ResponseReader`] accepts; past it the reply is garbage.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// A complete response head, framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// Bytes of the head, up to and including its empty line.
    pub len: usize,
    /// The status code.
    pub status: u16,
    /// The response is HTTP/1.1 (else 1.0).
    pub http11: bool,
    /// The connection may carry another exchange after this response: by version
    /// and `Connection`, and never after a body that runs until close.
    pub keep_alive: bool,
    /// Where the body ends.
    pub framing: Framing,
}

impl ResponseHead {
    /// How many body bytes follow the head, when the head alone says: its
    /// `Content-Length`, or 0 for a response that has no body (to HEAD; 1xx,
    /// 204, 304). `None` when the body is chunked or runs until close, so a
    /// client that counts a reply by length cannot.
    pub fn body_len(&self) -> Option<u64> {
        match self.framing {
            Framing::Done => Some(0),
            Framing::Length(n) => Some(n),
            Framing::Chunked(_) | Framing::UntilClose => None,
        }
    }
}

/// Parses and frames the response head at the start of `buf`; `Ok(None)` until
/// the head is complete. `head_request` says the request was HEAD (its response
/// has no body, whatever it declares).
///
/// # Errors
/// A head `httparse` refuses (more than [`MAX_RESPONSE_HEADERS`] fields among
/// them) or fields [`BodyHeaders::read`] refuses.
pub fn parse_response_head(
    buf: &[u8],
    head_request: bool,
    strictness: Strictness,
) -> Result<Option<ResponseHead>, FramingError> {
    // Header slots left uninitialised: httparse writes before it reads, and
    // initialising them cost more than parsing a typical head's eight.
    let mut headers =
        [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_RESPONSE_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(FramingError::BadHead(e)),
    };
    let status = resp.code.unwrap_or(0);
    let http11 = resp.version == Some(1);
    let bh = BodyHeaders::read(resp.headers, strictness)?;
    let framing = bh.response_framing(status, head_request, strictness);
    Ok(Some(ResponseHead {
        len,
        status,
        http11,
        keep_alive: bh.persistent(http11) && framing != Framing::UntilClose,
        framing,
    }))
}

/// Frames response heads as a client reads them ([`Strictness::Lenient`]),
/// remembering the last one.
///
/// A server answers a run of identical requests with identical heads (nginx's
/// change only when the `Date` second turns), and parsing one cost the load
/// generator more instructions than everything else it does per reply together
/// (callgrind: ~2,800 of ~3,800). So the parser keeps the last complete head it
/// framed, byte for byte, with its framing: a head that starts with exactly those
/// bytes frames the same, because a head's framing depends on nothing but its
/// bytes and whether the request was HEAD, which is fixed per parser. Any other
/// head is parsed in full. Only complete heads are remembered; partial and bad
/// ones never.
#[derive(Debug, Default)]
pub struct HeadParser {
    head_request: bool,
    last: Vec<u8>,
    last_head: Option<ResponseHead>,
    memo_hits: u64,
}

impl HeadParser {
    /// A parser for responses to requests of one method; `head_request` says the
    /// method is HEAD (the responses then have no body, whatever they declare).
    pub fn new(head_request: bool) -> HeadParser {
        HeadParser {
            head_request,
            ..HeadParser::default()
        }
    }

    /// How many heads matched the remembered one and were not parsed again.
    pub fn memo_hits(&self) -> u64 {
        self.memo_hits
    }

    /// The complete head at the start of `buf`, or `None` if it has not ended yet.
    ///
    /// # Errors
    /// As [`parse_response_head`].
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<ResponseHead>, FramingError> {
        if let Some(head) = self.last_head {
            if buf.starts_with(&self.last) {
                self.memo_hits += 1;
                return Ok(Some(head));
            }
        }
        let parsed = parse_response_head(buf, self.head_request, Strictness::Lenient)?;
        if let Some(head) = parsed {
            self.last.clear();
            self.last.extend_from_slice(&buf[..head.len]);
            self.last_head = Some(head);
        }
        Ok(parsed)
    }
}

/// One complete response, as a client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
    /// Body bytes (after de-chunking).
    pub body_len: u64,
}

/// What one [`ResponseReader::feed`] call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the input used; the rest belongs to the next response.
    pub used: usize,
    /// The response that ended within those bytes, if one did.
    pub reply: Option<Reply>,
}

/// Incremental response reader for one client connection: it is fed whatever
/// `recv` returned and says where each response ends, so pipelined responses in
/// one read and responses split over many reads are the same case. Interim (1xx)
/// responses are passed over; body bytes are counted, never stored.
#[derive(Debug, Default)]
pub struct ResponseReader {
    head_buf: Vec<u8>,
    /// Status, keep-alive and body framing of the response being read.
    state: Option<(u16, bool, Framing)>,
    body_len: u64,
    started: bool,
}

impl ResponseReader {
    /// A reader waiting for the start of a response.
    pub fn new() -> ResponseReader {
        ResponseReader::default()
    }

    /// True once any byte of the current response has arrived.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Feeds bytes; call again with the unused rest while `reply` is `Some`.
    /// `heads` frames response heads (and says whether the requests are HEAD); one
    /// may serve every connection of a thread.
    ///
    /// # Errors
    /// A head `httparse` rejects, a head longer than [`MAX_RESPONSE_HEAD`], a bad
    /// `Content-Length`, or broken chunked framing.
    pub fn feed(&mut self, data: &[u8], heads: &mut HeadParser) -> Result<Fed, FramingError> {
        if data.is_empty() {
            return Ok(Fed {
                used: 0,
                reply: None,
            });
        }
        self.started = true;
        let mut used = 0;
        if self.state.is_none() {
            let (parsed, taken) = if self.head_buf.is_empty() {
                // The common case: the whole head came in this read. Parse it where it
                // lies; only a head split over reads is copied aside.
                let window = &data[..data.len().min(MAX_RESPONSE_HEAD)];
                let parsed = heads.parse(window)?.map(|h| (h.len, h));
                if parsed.is_none() {
                    self.head_buf.extend_from_slice(window);
                }
                (parsed, window.len())
            } else {
                let before = self.head_buf.len();
                let room = MAX_RESPONSE_HEAD.saturating_sub(before).max(1);
                let take = data.len().min(room);
                self.head_buf.extend_from_slice(&data[..take]);
                let parsed = heads
                    .parse(&self.head_buf)?
                    .map(|h| (h.len.saturating_sub(before), h));
                (parsed, take)
            };
            match parsed {
                Some((len, head)) => {
                    used = len;
                    self.head_buf.clear();
                    if (100..200).contains(&head.status) && head.status != 101 {
                        // Interim response: the real one follows.
                        return Ok(Fed { used, reply: None });
                    }
                    self.state = Some((head.status, head.keep_alive, head.framing));
                    self.body_len = 0;
                }
                None => {
                    if self.head_buf.len() >= MAX_RESPONSE_HEAD {
                        return Err(FramingError::HeadTooLong);
                    }
                    return Ok(Fed {
                        used: taken,
                        reply: None,
                    });
                }
            }
        }
        let Some((status, keep_alive, framing)) = self.state.as_mut() else {
            return Ok(Fed { used, reply: None });
        };
        let progress = framing.advance(&data[used..])?;
        used += progress.used;
        self.body_len += progress.payload as u64;
        if framing.is_done() {
            let reply = Reply {
                status: *status,
                keep_alive: *keep_alive,
                body_len: self.body_len,
            };
            self.reset();
            return Ok(Fed {
                used,
                reply: Some(reply),
            });
        }
        Ok(Fed { used, reply: None })
    }

    /// The peer closed the connection: completes a response delimited by end-of-file,
    /// `Ok(None)` if nothing of a response had arrived.
    ///
    /// # Errors
    /// End-of-file inside a head, a `Content-Length` body or a chunked body.
    pub fn eof(&mut self) -> Result<Option<Reply>, FramingError> {
        match self.state.take() {
            Some((status, _, Framing::UntilClose)) => {
                let reply = Reply {
                    status,
                    keep_alive: false,
                    body_len: self.body_len,
                };
                self.reset();
                Ok(Some(reply))
            }
            Some(_) => Err(FramingError::ClosedInBody),
            None if self.head_buf.is_empty() && !self.started => Ok(None),
            None => Err(FramingError::ClosedInHead),
        }
    }

    fn reset(&mut self) {
        self.head_buf.clear();
        self.state = None;
        self.body_len = 0;
        self.started = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(r: &mut ResponseReader, mut data: &[u8]) -> Vec<Reply> {
        let heads = &mut HeadParser::new(false);
        let mut out = Vec::new();
        while !data.is_empty() {
            let fed = r.feed(data, heads).expect("valid framing");
            data = &data[fed.used..];
            if let Some(rep) = fed.reply {
                out.push(rep);
            } else if fed.used == 0 {
                break;
            }
        }
        out
    }

    #[test]
    fn content_length_pipelined_and_split() {
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 NF\r\nContent-Length: 0\r\n\r\n";
        let mut r = ResponseReader::new();
        let reps = feed_all(&mut r, two);
        assert_eq!(reps.len(), 2);
        assert_eq!(reps[0].status, 200);
        assert_eq!(reps[0].body_len, 3);
        assert_eq!(reps[1].status, 404);
        // Byte by byte gives the same.
        let mut r = ResponseReader::new();
        let mut got = Vec::new();
        for b in two.iter() {
            got.extend(feed_all(&mut r, std::slice::from_ref(b)));
        }
        assert_eq!(got, reps);
    }

    #[test]
    fn body_len_is_known_only_from_a_length_or_no_body() {
        let head = |raw: &[u8], head_request| {
            parse_response_head(raw, head_request, Strictness::Lenient)
                .expect("valid head")
                .expect("complete head")
        };
        let sized = head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false);
        assert_eq!((sized.len, sized.body_len()), (39, Some(12)));
        let empty = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(head(empty, false).body_len(), Some(0));
        assert_eq!(head(b"HTTP/1.1 204 No\r\n\r\n", false).body_len(), Some(0));
        // A HEAD's response declares a length but carries no body.
        assert_eq!(
            head(&b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"[..], true).body_len(),
            Some(0)
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(head(chunked, false).body_len(), None);
        assert_eq!(head(b"HTTP/1.1 200 OK\r\n\r\n", false).body_len(), None);
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Le", false, Strictness::Lenient),
            Ok(None)
        );
    }

    #[test]
    fn chunked_with_trailer_and_split() {
        let msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n!\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz";
        for split in 1..msg.len() {
            let mut r = ResponseReader::new();
            let mut got = feed_all(&mut r, &msg[..split]);
            got.extend(feed_all(&mut r, &msg[split..]));
            assert_eq!(got.len(), 2, "split at {split}");
            assert_eq!(got[0].body_len, 6);
            assert!(got[0].keep_alive);
        }
    }

    #[test]
    fn close_delimited_and_http10() {
        let mut r = ResponseReader::new();
        assert!(feed_all(&mut r, b"HTTP/1.0 200 OK\r\n\r\nbody").is_empty());
        let rep = r.eof().expect("eof ends it").expect("a reply");
        assert_eq!(rep.body_len, 4);
        assert!(!rep.keep_alive);
        let mut r = ResponseReader::new();
        let reps = feed_all(
            &mut r,
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(reps[0].keep_alive);
        let reps = feed_all(
            &mut r,
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(!reps[0].keep_alive);
    }

    #[test]
    fn interim_and_no_body() {
        let mut r = ResponseReader::new();
        let reps = feed_all(
            &mut r,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No\r\nContent-Length: 5\r\n\r\n",
        );
        assert_eq!(reps.len(), 1);
        assert_eq!(reps[0].status, 204);
        assert_eq!(reps[0].body_len, 0);
    }

    #[test]
    fn heads_as_a_proxy_reads_them() {
        let strict = |buf: &[u8]| parse_response_head(buf, false, Strictness::Strict);
        let head = strict(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(head.len, 38);
        assert!(head.http11 && head.keep_alive);
        assert_eq!(head.framing, Framing::Length(5));
        assert_eq!(strict(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(strict(both), Err(FramingError::LengthWithTransferEncoding));
        let lenient = parse_response_head(both, false, Strictness::Lenient);
        assert!(lenient.is_ok_and(|h| h.is_some_and(|h| h.keep_alive)));
        let head = strict(b"HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert!(!head.keep_alive);
        assert_eq!(head.framing, Framing::UntilClose);
        assert!(matches!(
            strict(b"NOT HTTP AT ALL\r\n\r\n"),
            Err(FramingError::BadHead(_))
        ));
    }

    /// A small deterministic generator (xorshift64) for the randomised tests.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn random_bytes_and_splits_never_panic() {
        let mut next = xorshift(0x1234_5678_9abc_def1);
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
            b"HTTP/1.0 301 M\r\nConnection: keep-alive, close\r\n\r\nxyz",
        ];
        for round in 0..3000 {
            let mut msg = seeds[round % 3].to_vec();
            // Mutate a few bytes, sometimes into random garbage.
            for _ in 0..(next() % 4) {
                let i = (next() as usize) % msg.len();
                msg[i] = next() as u8;
            }
            if round % 7 == 0 {
                msg = (0..(next() % 200)).map(|_| next() as u8).collect();
            }
            let mut r = ResponseReader::new();
            let mut heads = HeadParser::new(round % 5 == 0);
            let mut data = &msg[..];
            while !data.is_empty() {
                let cut = 1 + (next() as usize) % data.len();
                let mut piece = &data[..cut];
                data = &data[cut..];
                while !piece.is_empty() {
                    match r.feed(piece, &mut heads) {
                        Ok(fed) if fed.used == 0 && fed.reply.is_none() => break,
                        Ok(fed) => piece = &piece[fed.used..],
                        Err(_) => {
                            piece = &[];
                            data = &[];
                        }
                    }
                }
            }
            let _ = r.eof();
        }
    }

    #[test]
    fn remembered_heads_frame_as_parsing_does() {
        // The same stream through one parser (whose memo hits) and through a
        // fresh parser per call (which parses every head) gives the same results.
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let heads: [&[u8]; 4] = [
            b"HTTP/1.1 200 OK\r\nDate: Mon, 23 Nov 2026 13:00:00 GMT\r\nContent-Length: 4\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nDate: Mon, 23 Nov 2026 13:00:01 GMT\r\nContent-Length: 4\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\n",
        ];
        for head_request in [false, true] {
            let mut stream = Vec::new();
            let mut k = 0;
            for _ in 0..400 {
                // Mostly the same head again, as a server gives; now and then another.
                if next() % 4 == 0 {
                    k = (next() % 4) as usize;
                }
                stream.extend_from_slice(heads[k]);
                // Answers to HEAD carry no body, whatever their head declares.
                if head_request {
                } else if k == 2 {
                    stream.extend_from_slice(b"4\r\nbody\r\n0\r\n\r\n");
                } else {
                    stream.extend_from_slice(b"body");
                }
            }
            // Now and then a byte turns to garbage, in a head or a body.
            for _ in 0..20 {
                let i = (next() as usize) % stream.len();
                stream[i] = next() as u8;
            }
            let (mut shared, mut a, mut b) = (
                HeadParser::new(head_request),
                ResponseReader::new(),
                ResponseReader::new(),
            );
            let mut data = &stream[..];
            let mut fed = 0;
            while !data.is_empty() {
                let cut = 1 + (next() as usize) % data.len().min(300);
                let mut piece = &data[..cut];
                data = &data[cut..];
                while !piece.is_empty() {
                    let ra = a.feed(piece, &mut shared);
                    let rb = b.feed(piece, &mut HeadParser::new(head_request));
                    assert_eq!(ra, rb, "after {fed} bytes");
                    match ra {
                        Ok(f) if f.used == 0 && f.reply.is_none() => break,
                        Ok(f) => {
                            fed += f.used;
                            piece = &piece[f.used..];
                        }
                        Err(_) => {
                            // Start again at the next response, as a new connection would.
                            (a, b) = (ResponseReader::new(), ResponseReader::new());
                            piece = &[];
                            let next_reply = data.windows(8).position(|w| w == b"HTTP/1.1");
                            data = &data[next_reply.unwrap_or(data.len())..];
                        }
                    }
                }
            }
            assert!(shared.memo_hits() > 100, "{} hits", shared.memo_hits());
        }
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        let heads = &mut HeadParser::new(false);
        let mut r = ResponseReader::new();
        assert!(r.feed(b"\x00\x01garbage\r\n\r\n", heads).is_err());
        let mut r = ResponseReader::new();
        let _ = r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab", heads);
        assert_eq!(r.eof(), Err(FramingError::ClosedInBody));
        let mut r = ResponseReader::new();
        assert_eq!(
            r.feed(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                heads
            ),
            Err(FramingError::BadChunkSize)
        );
        let mut r = ResponseReader::new();
        assert_eq!(r.eof(), Ok(None));
        let mut r = ResponseReader::new();
        let _ = r.feed(b"HTTP/1.1 200 OK\r\nContent-", heads);
        assert_eq!(r.eof(), Err(FramingError::ClosedInHead));
    }
}
