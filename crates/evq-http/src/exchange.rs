//! One proxied exchange's protocol state, apart from any I/O: the request head
//! read and rewritten for the origin, the request body's framing, and the
//! response head and body relayed back. Both proxies run on it — the readiness
//! relay (`relay.rs`, `read`/`write` when the backend says ready) and the
//! completion relay (`completion_proxy.rs`, the kernel receiving and sending) —
//! so they forward the same bytes and refuse the same requests; only how bytes
//! move differs.
//!
//! Everything here works on byte slices the caller holds and says how much of
//! them it used; the caller drops those bytes from its buffer.

use crate::intermediary::{forward_request, forward_response, Persistence};
use evq_wire::{
    has_token, parse_response_head, BodyHeaders, Framing, Strictness, MAX_RESPONSE_HEADERS,
};

/// The state of the exchange a client connection is in (or last was in).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exchange {
    /// What is left of the request body (to go to the origin).
    pub(crate) req_body: Framing,
    /// The final response head has been forwarded.
    pub(crate) resp_head: bool,
    /// What is left of the response body (to go to the client).
    pub(crate) resp_body: Framing,
    /// Some of the response went to the client: an error can no longer be
    /// answered with a status, only with a close.
    pub(crate) forwarded: bool,
    /// The origin's connection may carry another request when this one ends.
    pub(crate) origin_reusable: bool,
    /// The request was `HEAD`: the response has no body whatever it says.
    pub(crate) head_only: bool,
    /// The client's connection stays open after this exchange.
    pub(crate) keep_alive: bool,
    /// The request may be sent again if the origin drops it unanswered: its
    /// method is idempotent (RFC 9110 §9.2.2) and it has no body (a body goes
    /// to the origin as it arrives and is not kept).
    pub(crate) retryable: bool,
    /// The request came as HTTP/1.0: no interim response may reach it.
    pub(crate) http10: bool,
    /// The request said `Expect: 100-continue`: a `100 Continue` may reach it.
    pub(crate) expects_continue: bool,
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange {
            req_body: Framing::Done,
            resp_head: false,
            resp_body: Framing::Done,
            forwarded: false,
            origin_reusable: false,
            head_only: false,
            keep_alive: true,
            retryable: false,
            http10: false,
            expects_continue: false,
        }
    }
}

/// What reading a request head found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Begin {
    /// The head is not complete, and the buffer has room for the rest.
    Incomplete,
    /// Not a request: malformed, too many fields, or a head longer than the
    /// buffer. Answer with this status and close.
    Malformed(u16),
    /// A request, refused (framing an intermediary must not guess, or a
    /// target or field `forward_request` will not pass on). Answer with this
    /// status and close.
    Refused(u16),
    /// A request: its head, rewritten for the origin, is in `sent_head`, and
    /// this many bytes of the input were its head.
    Started(usize),
}

/// Where relaying a response stands after the bytes given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The response goes on: more bytes from the origin are needed.
    More,
    /// The response is complete (the client's output holds all of it).
    Done,
    /// The origin's response head is garbage (or longer than the buffer):
    /// a 502 if nothing went to the client yet.
    BadHead,
    /// The origin's body broke its own framing: the client's connection must
    /// close (its response cannot be finished).
    BadBody,
}

impl Exchange {
    /// Reads a request head from `input` (`full`: the buffer holding it has no
    /// room for more) and, if it is a request to pass on, starts the exchange:
    /// the head for the origin goes into `sent_head`. `stopping`: a graceful
    /// stop is under way, and the client's connection will close after this.
    pub(crate) fn begin(
        &mut self,
        input: &[u8],
        full: bool,
        stopping: bool,
        sent_head: &mut Vec<u8>,
    ) -> Begin {
        let mut headers = [httparse::EMPTY_HEADER; crate::request::MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if full => return Begin::Malformed(431),
            Ok(httparse::Status::Partial) => return Begin::Incomplete,
            Err(httparse::Error::TooManyHeaders) => return Begin::Malformed(431),
            Err(_) => return Begin::Malformed(400),
        };
        // Strictly, as an intermediary must: the origin behind may frame a
        // lenient reading differently (request smuggling).
        let framed = BodyHeaders::read(req.headers, Strictness::Strict)
            .and_then(|bh| Ok((bh, bh.request_framing(Strictness::Strict)?)));
        let Ok((bh, req_body)) = framed else {
            return Begin::Refused(400);
        };
        // Transfer-Encoding in an HTTP/1.0 request: its framing is faulty
        // (RFC 9112 §6.1), and a 1.0 origin behind would read the chunked
        // body as requests of its own.
        if req.version == Some(0) && bh.has_transfer_encoding {
            return Begin::Refused(400);
        }
        sent_head.clear();
        if let Err(status) = forward_request(&req, sent_head) {
            return Begin::Refused(status);
        }
        *self = Exchange {
            req_body,
            keep_alive: bh.persistent(req.version == Some(1)) && !stopping,
            http10: req.version == Some(0),
            expects_continue: req.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("expect") && has_token(h.value, "100-continue")
            }),
            head_only: req.method == Some("HEAD"),
            retryable: req.method.is_some_and(idempotent) && req_body.is_done(),
            ..Exchange::default()
        };
        Begin::Started(head_len)
    }

    /// Moves request-body bytes from `input` to `out` (the origin's output).
    /// Returns how many were used, or `Err` when the body breaks its framing
    /// (a 400).
    pub(crate) fn pump_body(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ()> {
        if self.req_body.is_done() || input.is_empty() {
            return Ok(0);
        }
        match self.req_body.advance(input) {
            Ok(step) => {
                out.extend_from_slice(&input[..step.used]);
                Ok(step.used)
            }
            Err(_) => Err(()),
        }
    }

    /// The client's input ended (end of file) with `buffered` bytes of it not
    /// yet pumped: whether the request body can no longer be completed, and
    /// nothing of a response has reached the client. Such an exchange ends at
    /// once with a 400 — waiting for the origin would only hold its
    /// connection until the origin timeout, for a body that cannot come (the
    /// origin is waiting for it too). Once a response is under way the origin
    /// chose to answer without the rest, and the response goes on.
    pub(crate) fn body_cut_short(&self, buffered: &[u8]) -> bool {
        if self.req_body.is_done() || self.forwarded {
            return false;
        }
        let mut rest = self.req_body;
        // A body that breaks its framing is cut short too (pumping it would
        // answer 400 the same way).
        rest.advance(buffered).is_err() || !rest.is_done()
    }

    /// The response is complete but the request body is not: the origin
    /// answered without waiting for it. What the client still sends of that
    /// body must not be read as its next request — a body is the client's to
    /// fill, and one holding `GET /admin HTTP/1.1` would reach the origin as
    /// a request of its own (request smuggling) — nor go to the origin,
    /// whose connection may then carry no other request. So the client's
    /// connection closes after the response (its head says so: `keep_alive`
    /// turned false when it was relayed), lingering so that the response is
    /// not lost to a reset while the client still sends, with its buffered
    /// input dropped; and the origin's connection closes.
    pub(crate) fn body_left_behind(&self) -> bool {
        self.resp_head && self.resp_body.is_done() && !self.req_body.is_done()
    }

    /// Relays what it can of the origin's bytes in `input` (`full`: the buffer
    /// holding them has no room for more) to `out`, the client's output:
    /// interim responses the client may see, the final head rewritten, then
    /// the body as its framing says. Returns the bytes used and where the
    /// response stands. `stopping`: the client's connection closes after it.
    pub(crate) fn relay_response(
        &mut self,
        input: &[u8],
        full: bool,
        stopping: bool,
        out: &mut Vec<u8>,
    ) -> (usize, Step) {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            if rest.is_empty() {
                return (used, Step::More);
            }
            if !self.resp_head {
                let head = match parse_response_head(rest, self.head_only, Strictness::Strict) {
                    Ok(Some(h)) if (100..600).contains(&h.status) && h.status != 101 => h,
                    Ok(None) if !full => return (used, Step::More),
                    _ => return (used, Step::BadHead),
                };
                let interim = head.status < 200;
                // No interim response reaches an HTTP/1.0 client (RFC 9110
                // §15.2), and `100 Continue` only one that asked for it.
                let pass =
                    !interim || (!self.http10 && (head.status != 100 || self.expects_continue));
                // A final answer before the whole request body is here (a
                // 401, 405 or 413 sent without reading it) ends the exchange
                // with the rest of the body still to come: the client's
                // connection closes after it (see `body_left_behind`).
                if !interim
                    && (head.framing == Framing::UntilClose || stopping || !self.req_body.is_done())
                {
                    self.keep_alive = false;
                }
                if pass {
                    let persistence = if interim {
                        Persistence::KeepAlive { http10: false }
                    } else if self.keep_alive {
                        Persistence::KeepAlive {
                            http10: self.http10,
                        }
                    } else {
                        Persistence::Close
                    };
                    let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
                    let mut resp = httparse::Response::new(&mut fields);
                    // Parsed once already (parse_response_head): it parses again.
                    let _ = resp.parse(&rest[..head.len]);
                    forward_response(&resp, persistence, out);
                }
                used += head.len;
                if interim {
                    // Wait for the final response.
                    continue;
                }
                self.forwarded = true;
                self.resp_head = true;
                self.resp_body = head.framing;
                // HTTP/1.1, no `Connection: close`, and a body that ends before close.
                self.origin_reusable = head.http11 && head.keep_alive;
            } else {
                match self.resp_body.advance(rest) {
                    Ok(step) => {
                        out.extend_from_slice(&rest[..step.used]);
                        used += step.used;
                    }
                    Err(_) => return (used, Step::BadBody),
                }
            }
            if self.resp_body.is_done() {
                return (used, Step::Done);
            }
        }
    }
}

/// Methods whose effect is the same however often they are performed (RFC
/// 9110 §9.2.2).
fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_is_read_rewritten_and_framed() {
        let mut ex = Exchange::default();
        let mut head = Vec::new();
        let req = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabcGET";
        let Begin::Started(n) = ex.begin(req, false, false, &mut head) else {
            panic!("not started");
        };
        assert_eq!(&req[n..], b"abcGET");
        assert!(head.starts_with(b"POST /x HTTP/1.1\r\n"));
        assert!(ex.keep_alive && ex.expects_continue && !ex.retryable && !ex.http10);
        let mut out = Vec::new();
        assert_eq!(ex.pump_body(&req[n..], &mut out), Ok(3));
        assert_eq!(out, b"abc");
        assert!(ex.req_body.is_done());
        // Stopping: the client's connection will close.
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(
            ex.begin(get, false, true, &mut head),
            Begin::Started(get.len())
        );
        assert!(!ex.keep_alive && ex.retryable);
    }

    /// The completion relay pumps at most its high water mark of a body at a
    /// time, so a slice may end anywhere — in a chunk-size line, its
    /// extension, the CRLF after the data: a cut is never an error, and the
    /// body comes out whole, ending where its framing says.
    #[test]
    fn a_chunked_body_pumped_in_any_slices_comes_out_whole() {
        let head = b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        let body = b"5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n";
        for step in [1, 2, 3, 7, 64] {
            let mut ex = Exchange::default();
            let mut sent = Vec::new();
            assert!(matches!(
                ex.begin(head, false, false, &mut sent),
                Begin::Started(_)
            ));
            let (mut input, mut out, mut at) = (Vec::new(), Vec::new(), 0);
            while !ex.req_body.is_done() {
                assert!(at < body.len(), "step {step}: not done at the body's end");
                let end = (at + step).min(body.len());
                input.extend_from_slice(&body[at..end]);
                at = end;
                let used = ex
                    .pump_body(&input, &mut out)
                    .expect("a cut is not an error");
                input.drain(..used);
            }
            assert_eq!(out, body, "step {step}");
            assert!(input.is_empty());
        }
    }

    /// At the client's end of file: a body the buffered bytes finish is not
    /// cut short; one they do not finish (or that breaks its framing) is,
    /// until a response has started.
    #[test]
    fn a_body_is_cut_short_only_when_the_buffered_bytes_cannot_finish_it() {
        let started = |req: &[u8]| {
            let (mut ex, mut sent) = (Exchange::default(), Vec::new());
            let Begin::Started(_) = ex.begin(req, false, false, &mut sent) else {
                panic!("not started");
            };
            ex
        };
        let ex = started(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(!ex.body_cut_short(b""), "no body");
        let mut ex = started(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
        assert!(ex.body_cut_short(b""));
        assert!(ex.body_cut_short(b"abcd"));
        assert!(!ex.body_cut_short(b"abcde"));
        assert!(
            !ex.body_cut_short(b"abcdeGET / HTTP/1.1"),
            "a pipelined next"
        );
        ex.forwarded = true;
        assert!(!ex.body_cut_short(b""), "the origin answered already");
        let ex = started(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(ex.body_cut_short(b"5\r\nhello\r\n"));
        assert!(ex.body_cut_short(b"5\r\nhello\r\n0\r\n"), "no final CRLF");
        assert!(ex.body_cut_short(b"zz\r\n"), "broken framing");
        assert!(!ex.body_cut_short(b"5\r\nhello\r\n0\r\n\r\n"));
    }

    #[test]
    fn bad_and_unfinished_heads_say_which_status() {
        let mut ex = Exchange::default();
        let mut head = Vec::new();
        assert_eq!(
            ex.begin(b"GET / HT", false, false, &mut head),
            Begin::Incomplete
        );
        assert_eq!(
            ex.begin(b"GET / HT", true, false, &mut head),
            Begin::Malformed(431)
        );
        assert_eq!(
            ex.begin(b"\x01\x02 / HTTP/1.1\r\n\r\n", false, false, &mut head),
            Begin::Malformed(400)
        );
        let both = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(ex.begin(both, false, false, &mut head), Begin::Refused(400));
        let twice =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(
            ex.begin(twice, false, false, &mut head),
            Begin::Refused(400)
        );
        let coded_10 = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(
            ex.begin(coded_10, false, false, &mut head),
            Begin::Refused(400)
        );
        let plain_10 = b"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            ex.begin(plain_10, false, false, &mut head),
            Begin::Started(_)
        ));
    }

    #[test]
    fn a_response_is_relayed_through_interim_heads_to_its_end() {
        let mut ex = Exchange::default();
        let mut head = Vec::new();
        let req = b"GET / HTTP/1.0\r\n\r\n";
        assert!(matches!(
            ex.begin(req, false, false, &mut head),
            Begin::Started(_)
        ));
        let resp = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
        let mut out = Vec::new();
        let (used, step) = ex.relay_response(resp, false, false, &mut out);
        assert_eq!((used, step), (resp.len(), Step::More));
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(!text.contains("103"), "no interim head reaches 1.0: {text}");
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n") && text.ends_with("hel"));
        let (used, step) = ex.relay_response(b"loHTTP", false, false, &mut out);
        assert_eq!((used, step), (2, Step::Done));
        let (_, step) =
            Exchange::default().relay_response(b"garbage\r\n\r\n", false, false, &mut out);
        assert_eq!(step, Step::BadHead);
    }

    /// A final answer before the body is all here closes the client's
    /// connection after it (the head says so) and leaves the body behind; an
    /// interim answer does neither, and an answer after the whole body keeps
    /// the connection.
    #[test]
    fn an_answer_before_the_whole_body_closes_and_leaves_the_body_behind() {
        let post = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n";
        let answer = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
        let (mut ex, mut sent, mut out) = (Exchange::default(), Vec::new(), Vec::new());
        assert!(matches!(
            ex.begin(post, false, false, &mut sent),
            Begin::Started(_)
        ));
        assert_eq!(ex.pump_body(b"abc", &mut out), Ok(3));
        let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(
            ex.relay_response(cont, false, false, &mut out).1,
            Step::More
        );
        assert!(ex.keep_alive && !ex.body_left_behind(), "an interim answer");
        let mut to_client = Vec::new();
        let (_, step) = ex.relay_response(answer, false, false, &mut to_client);
        assert_eq!(step, Step::Done);
        assert!(!ex.keep_alive && ex.body_left_behind());
        let text = String::from_utf8_lossy(&to_client);
        assert!(text.contains("Connection: close\r\n"), "{text}");
        // The same answer after the whole body: kept alive, nothing behind.
        let (mut ex, mut out) = (Exchange::default(), Vec::new());
        assert!(matches!(
            ex.begin(post, false, false, &mut sent),
            Begin::Started(_)
        ));
        assert_eq!(ex.pump_body(b"0123456789GET", &mut out), Ok(10));
        let (_, step) = ex.relay_response(answer, false, false, &mut out);
        assert_eq!(step, Step::Done);
        assert!(ex.keep_alive && !ex.body_left_behind());
    }
}
