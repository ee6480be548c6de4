//! HTTP/1.x requests out and response framing in.
//!
//! [`ResponseReader`] is a push parser: the connection feeds it whatever `recv`
//! returned and it says where each response ends, so pipelined responses in one read
//! and responses split over many reads are the same case. The head goes through
//! `httparse`; the body is framed by (in RFC 9112 §6.3 order) "no body" statuses and
//! HEAD, `Transfer-Encoding: chunked`, `Content-Length`, else end-of-file. Body bytes
//! are counted, never stored.

use std::fmt;
use std::mem::MaybeUninit;

/// Largest response head accepted; past it the reply is garbage.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;
/// Most header fields parsed.
const MAX_HEADERS: usize = 64;

/// Builds the bytes of one request.
pub(crate) fn build_request(
    method: &str,
    uri: &str,
    host: &str,
    headers: &[String],
    http10: bool,
) -> Vec<u8> {
    let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let mut s = format!("{method} {uri} {version}\r\nHost: {host}\r\nUser-Agent: evq-load\r\n");
    if http10 {
        s.push_str("Connection: keep-alive\r\n");
    }
    for h in headers {
        s.push_str(h.trim_end_matches(['\r', '\n']));
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// Why a response could not be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FramingError(pub String);

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
    /// Body bytes (after de-chunking).
    pub body_len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size line; `size` so far, whether extensions started.
    Size {
        size: u64,
        digits: u32,
        ext: bool,
        cr: bool,
    },
    /// Inside chunk data.
    Data(u64),
    /// Expecting the CRLF after chunk data (`true` once the CR is seen).
    DataEnd(bool),
    /// Reading trailer lines; `len` of the current line, `cr` seen.
    Trailer { len: usize, cr: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, Copy)]
struct Head {
    status: u16,
    keep_alive: bool,
}

/// Incremental response framer for one connection.
#[derive(Debug, Default)]
pub struct ResponseReader {
    head_buf: Vec<u8>,
    state: Option<(Head, Body)>,
    body_len: u64,
    started: bool,
}

/// What one [`ResponseReader::feed`] call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the input used; the rest belongs to the next response.
    pub used: usize,
    /// The response that ended within those bytes, if one did.
    pub reply: Option<Reply>,
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
    /// A head `httparse` rejects, an oversized head, a bad `Content-Length`, or
    /// broken chunked framing.
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
                let window = &data[..data.len().min(MAX_HEAD)];
                let parsed = heads.parse(window)?;
                if parsed.is_none() {
                    self.head_buf.extend_from_slice(window);
                }
                (parsed, window.len())
            } else {
                let before = self.head_buf.len();
                let room = MAX_HEAD.saturating_sub(before).max(1);
                let take = data.len().min(room);
                self.head_buf.extend_from_slice(&data[..take]);
                let parsed = heads
                    .parse(&self.head_buf)?
                    .map(|(len, head, body)| (len.saturating_sub(before), head, body));
                (parsed, take)
            };
            match parsed {
                Some((len, head, body)) => {
                    used = len;
                    self.head_buf.clear();
                    if (100..200).contains(&head.status) && head.status != 101 {
                        // Interim response: the real one follows.
                        return Ok(Fed { used, reply: None });
                    }
                    self.state = Some((head, body));
                    self.body_len = 0;
                }
                None => {
                    if self.head_buf.len() >= MAX_HEAD {
                        return Err(FramingError(format!(
                            "response head longer than {MAX_HEAD} bytes"
                        )));
                    }
                    return Ok(Fed {
                        used: taken,
                        reply: None,
                    });
                }
            }
        }
        let rest = &data[used..];
        let Some((head, body)) = self.state.as_mut() else {
            return Ok(Fed { used, reply: None });
        };
        let head = *head;
        let (n, done) = match body {
            Body::Length(left) => {
                let n = (*left).min(rest.len() as u64);
                *left -= n;
                self.body_len += n;
                (n as usize, *left == 0)
            }
            Body::UntilClose => {
                self.body_len += rest.len() as u64;
                (rest.len(), false)
            }
            Body::Chunked(chunk) => chunked(chunk, rest, &mut self.body_len)?,
        };
        used += n;
        if done {
            let reply = Reply {
                status: head.status,
                keep_alive: head.keep_alive,
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
            Some((head, Body::UntilClose)) => {
                let reply = Reply {
                    status: head.status,
                    keep_alive: false,
                    body_len: self.body_len,
                };
                self.reset();
                Ok(Some(reply))
            }
            Some(_) => Err(FramingError(
                "connection closed inside a response body".into(),
            )),
            None if self.head_buf.is_empty() && !self.started => Ok(None),
            None => Err(FramingError(
                "connection closed inside a response head".into(),
            )),
        }
    }

    fn reset(&mut self) {
        self.head_buf.clear();
        self.state = None;
        self.body_len = 0;
        self.started = false;
    }
}

/// Frames response heads: `httparse` for the syntax, RFC 9112 §6.3 for where the
/// body ends.
///
/// A server answers a run of identical requests with identical heads (nginx's
/// change only when the `Date` second turns), and parsing one cost the generator
/// more instructions than everything else it does per reply together (callgrind:
/// ~2,800 of ~3,800). So the parser keeps the last complete head it framed, byte
/// for byte, with its framing: a head that starts with exactly those bytes frames
/// the same, because a head's framing depends on nothing but its bytes and
/// whether the request was HEAD, which is fixed per parser. Any other head is
/// parsed in full. Only complete heads are remembered; partial and bad ones never.
#[derive(Debug, Default)]
pub struct HeadParser {
    head_request: bool,
    last: Vec<u8>,
    last_framing: Option<(Head, Body)>,
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

    /// The length and framing of the complete head at the start of `buf`, or
    /// `None` if the head has not ended yet.
    fn parse(&mut self, buf: &[u8]) -> Result<Option<(usize, Head, Body)>, FramingError> {
        if let Some((head, body)) = self.last_framing {
            if buf.starts_with(&self.last) {
                self.memo_hits += 1;
                return Ok(Some((self.last.len(), head, body)));
            }
        }
        let parsed = parse_head(buf, self.head_request)?;
        if let Some((len, head, body)) = parsed {
            self.last.clear();
            self.last.extend_from_slice(&buf[..len]);
            self.last_framing = Some((head, body));
        }
        Ok(parsed)
    }
}

/// Parses a complete response head at the start of `buf`: its length and framing,
/// or `None` if the head has not ended yet.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<(usize, Head, Body)>, FramingError> {
    // Header slots left uninitialised: httparse writes before it reads, and
    // initialising 64 of them cost more than parsing a typical head's eight.
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(len)) => {
            let status = resp.code.unwrap_or(0);
            let (head, body) = frame(&resp, status, head_request)?;
            Ok(Some((len, head, body)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(FramingError(format!("bad response head: {e}"))),
    }
}

fn header_has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

fn frame(
    resp: &httparse::Response<'_, '_>,
    status: u16,
    head_request: bool,
) -> Result<(Head, Body), FramingError> {
    let http10 = resp.version == Some(0);
    let mut close = http10;
    let mut length: Option<u64> = None;
    let mut chunked_te = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            if header_has_token(h.value, "close") {
                close = true;
            } else if header_has_token(h.value, "keep-alive") {
                close = false;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| FramingError("bad Content-Length".into()))?;
            if length.is_some_and(|l| l != v) {
                return Err(FramingError("conflicting Content-Length headers".into()));
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked must be the final coding to frame the message.
            chunked_te = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            if !chunked_te {
                close = true;
            }
        }
    }
    let no_body = head_request || (100..200).contains(&status) || status == 204 || status == 304;
    let body = if no_body {
        Body::Length(0)
    } else if chunked_te {
        Body::Chunked(Chunk::Size {
            size: 0,
            digits: 0,
            ext: false,
            cr: false,
        })
    } else if let Some(l) = length {
        Body::Length(l)
    } else {
        close = true;
        Body::UntilClose
    };
    Ok((
        Head {
            status,
            keep_alive: !close,
        },
        body,
    ))
}

/// Runs the chunked-body state machine over `data`; returns bytes used and whether
/// the body (including trailers) ended.
fn chunked(
    state: &mut Chunk,
    data: &[u8],
    body_len: &mut u64,
) -> Result<(usize, bool), FramingError> {
    let bad = |what: &str| Err(FramingError(format!("bad chunked encoding: {what}")));
    let mut i = 0;
    while i < data.len() {
        match state {
            Chunk::Size {
                size,
                digits,
                ext,
                cr,
            } => {
                let b = data[i];
                i += 1;
                if *cr {
                    if b != b'\n' {
                        return bad("CR without LF after chunk size");
                    }
                    if *digits == 0 {
                        return bad("missing chunk size");
                    }
                    *state = if *size == 0 {
                        Chunk::Trailer { len: 0, cr: false }
                    } else {
                        Chunk::Data(*size)
                    };
                } else if b == b'\r' {
                    *cr = true;
                } else if b == b'\n' {
                    // Bare LF: tolerated, as most clients do.
                    if *digits == 0 {
                        return bad("missing chunk size");
                    }
                    *state = if *size == 0 {
                        Chunk::Trailer { len: 0, cr: false }
                    } else {
                        Chunk::Data(*size)
                    };
                } else if *ext {
                    // Chunk extensions are skipped up to the line end.
                } else if let Some(d) = (b as char).to_digit(16) {
                    if *digits >= 15 {
                        return bad("chunk size too large");
                    }
                    *size = *size * 16 + u64::from(d);
                    *digits += 1;
                } else if b == b';' || b == b' ' || b == b'\t' {
                    *ext = true;
                } else {
                    return bad("non-hex chunk size");
                }
            }
            Chunk::Data(left) => {
                let n = (*left).min((data.len() - i) as u64);
                *left -= n;
                *body_len += n;
                i += n as usize;
                if *left == 0 {
                    *state = Chunk::DataEnd(false);
                }
            }
            Chunk::DataEnd(cr) => {
                let b = data[i];
                i += 1;
                match (b, *cr) {
                    (b'\r', false) => *cr = true,
                    (b'\n', _) => {
                        *state = Chunk::Size {
                            size: 0,
                            digits: 0,
                            ext: false,
                            cr: false,
                        };
                    }
                    _ => return bad("chunk data not followed by CRLF"),
                }
            }
            Chunk::Trailer { len, cr } => {
                let b = data[i];
                i += 1;
                if b == b'\n' {
                    if *len == 0 {
                        return Ok((i, true));
                    }
                    *len = 0;
                    *cr = false;
                } else if b == b'\r' {
                    *cr = true;
                } else {
                    if *cr {
                        return bad("CR without LF in trailer");
                    }
                    *len += 1;
                    if *len > MAX_LINE {
                        return bad("trailer line too long");
                    }
                }
            }
        }
    }
    Ok((i, false))
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
        assert!(r.eof().is_err());
        let mut r = ResponseReader::new();
        assert!(r
            .feed(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                heads
            )
            .is_err());
        let mut r = ResponseReader::new();
        assert_eq!(r.eof(), Ok(None));
    }
}
