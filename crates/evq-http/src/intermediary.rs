//! What the proxy does to a message as an HTTP intermediary (RFC 9110 §7.6,
//! RFC 9112), in each direction, as it writes the head it forwards:
//!
//! - **Hop-by-hop fields stay on their hop** (RFC 9110 §7.6.1): `Connection`,
//!   every field `Connection` names, `Keep-Alive`, `Proxy-Connection`, `TE` and
//!   `Upgrade` are dropped (the proxy speaks for its own connections, and
//!   upgrades nothing). `Transfer-Encoding` is hop-by-hop too, but the proxy
//!   relays the body byte for byte as it was framed, so the field that frames
//!   it goes with it.
//! - **Credentials meant for the proxy stay with it**: `Proxy-Authorization`
//!   is for the proxy that asked for it (RFC 9110 §11.7.2), and this one asks
//!   for none, so it is never passed to the origin; `Proxy-Authenticate` from
//!   an origin is not passed to clients (§11.7.1).
//! - **`Via`** (RFC 9110 §7.6.3, a MUST) names the protocol each message came
//!   in with and this proxy: `Via: 1.1 evq`, added after any the message had.
//! - **The absolute form** of a request target (`GET http://host/p HTTP/1.1`,
//!   RFC 9112 §3.2.2, which every server MUST accept) is forwarded in origin
//!   form (`GET /p`) with `Host` taken from its authority, replacing any `Host`
//!   the client sent (§3.2.2: the target's authority wins).
//! - **Persistence is the proxy's to say**: the response head says
//!   `Connection: close` when the client's connection will close after it
//!   (the client asked, the proxy is stopping, the body runs until close), and
//!   `Connection: keep-alive` to an HTTP/1.0 client that asked to keep it.
//!
//! Interim (1xx) responses are the relay's business (`relay.rs`): none reach
//! an HTTP/1.0 client (RFC 9110 §15.2), and `100 Continue` reaches only a
//! client that sent `Expect: 100-continue`.

use evq_wire::has_token;

/// Hop-by-hop fields, dropped in both directions (with those `Connection`
/// names), and the proxy's own authentication fields.
const NOT_FORWARDED: [&[u8]; 7] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"upgrade",
    b"proxy-authorization",
    b"proxy-authenticate",
];

/// The token this proxy gives itself in `Via`.
const VIA_NAME: &str = "evq";

/// Whether a field must not be forwarded: a hop-by-hop or proxy-auth field,
/// or one named by a `Connection` field of the same head.
fn dropped(name: &[u8], headers: &[httparse::Header<'_>]) -> bool {
    NOT_FORWARDED.iter().any(|n| name.eq_ignore_ascii_case(n))
        || headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("connection")
                && std::str::from_utf8(name).is_ok_and(|n| has_token(h.value, n))
        })
}

/// A request target in absolute form split into its authority and the
/// origin-form path (`/` when it has none). `Err(400)` for an absolute form
/// that names no host, carries userinfo (RFC 9110 §4.2.4: to be treated as an
/// error), or has a scheme other than http(s).
fn split_absolute(target: &str) -> Result<Option<(&str, String)>, u16> {
    let Some(colon) = target.find("://") else {
        return Ok(None);
    };
    let scheme = &target[..colon];
    if target.starts_with('/') || scheme.contains(['/', '?', '#']) {
        return Ok(None);
    }
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return Err(400);
    }
    let rest = &target[colon + 3..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return Err(400);
    }
    let path = if tail.starts_with('/') {
        tail.to_string()
    } else {
        format!("/{tail}")
    };
    Ok(Some((authority, path)))
}

/// Writes the head of `req` as the proxy forwards it to the origin: origin
/// form, hop-by-hop and proxy-credential fields dropped, `Via` added.
///
/// # Errors
/// The status to answer the client with instead (400 for an absolute-form
/// target the proxy cannot forward).
pub(crate) fn forward_request(
    req: &httparse::Request<'_, '_>,
    out: &mut Vec<u8>,
) -> Result<(), u16> {
    let method = req.method.unwrap_or("GET");
    let target = req.path.unwrap_or("/");
    let minor = req.version.unwrap_or(1);
    let absolute = split_absolute(target)?;
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    match &absolute {
        Some((_, path)) => out.extend_from_slice(path.as_bytes()),
        None => out.extend_from_slice(target.as_bytes()),
    }
    out.extend_from_slice(format!(" HTTP/1.{minor}\r\n").as_bytes());
    if let Some((authority, _)) = &absolute {
        field(out, b"Host", authority.as_bytes());
    }
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if dropped(name, req.headers) || (absolute.is_some() && name.eq_ignore_ascii_case(b"host"))
        {
            continue;
        }
        field(out, name, h.value);
    }
    field(out, b"Via", format!("1.{minor} {VIA_NAME}").as_bytes());
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// How the client's connection goes on after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// It closes after this response.
    Close,
    /// It stays open; an HTTP/1.0 client must be told so.
    KeepAlive {
        /// The client spoke HTTP/1.0.
        http10: bool,
    },
}

/// Writes the head of `resp` as the proxy forwards it to the client:
/// hop-by-hop and proxy-auth fields dropped, `Via` added, and the proxy's own
/// word on persistence.
pub(crate) fn forward_response(
    resp: &httparse::Response<'_, '_>,
    persistence: Persistence,
    out: &mut Vec<u8>,
) {
    let minor = resp.version.unwrap_or(1);
    let code = resp.code.unwrap_or(502);
    let reason = resp.reason.unwrap_or("");
    out.extend_from_slice(format!("HTTP/1.1 {code} {reason}\r\n").as_bytes());
    for h in resp.headers.iter() {
        if !dropped(h.name.as_bytes(), resp.headers) {
            field(out, h.name.as_bytes(), h.value);
        }
    }
    field(out, b"Via", format!("1.{minor} {VIA_NAME}").as_bytes());
    match persistence {
        Persistence::Close => field(out, b"Connection", b"close"),
        Persistence::KeepAlive { http10: true } => field(out, b"Connection", b"keep-alive"),
        Persistence::KeepAlive { http10: false } => {}
    }
    out.extend_from_slice(b"\r\n");
}

fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(raw: &[u8]) -> Result<String, u16> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(raw).unwrap().is_complete());
        let mut out = Vec::new();
        forward_request(&req, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn request_heads_lose_hop_by_hop_fields_and_gain_via() {
        let out = forwarded(
            b"GET /p HTTP/1.1\r\nHost: o\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
              Keep-Alive: timeout=5\r\nProxy-Authorization: Basic c2VjcmV0\r\nTE: trailers\r\n\
              Upgrade: h2c\r\nProxy-Connection: keep-alive\r\nX-End: 2\r\nVia: 1.0 other\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            out,
            "GET /p HTTP/1.1\r\nHost: o\r\nX-End: 2\r\nVia: 1.0 other\r\nVia: 1.1 evq\r\n\r\n"
        );
    }

    #[test]
    fn absolute_form_becomes_origin_form_with_its_host() {
        let out =
            forwarded(b"GET http://example.test:8080/a/b?q=1 HTTP/1.1\r\nHost: wrong\r\n\r\n")
                .unwrap();
        assert_eq!(
            out,
            "GET /a/b?q=1 HTTP/1.1\r\nHost: example.test:8080\r\nVia: 1.1 evq\r\n\r\n"
        );
        let out = forwarded(b"GET HTTP://h?x HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(out, "GET /?x HTTP/1.0\r\nHost: h\r\nVia: 1.0 evq\r\n\r\n");
        for bad in [
            &b"GET http:///p HTTP/1.1\r\n\r\n"[..],
            b"GET http://user:pw@h/p HTTP/1.1\r\n\r\n",
            b"GET ftp://h/p HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(forwarded(bad), Err(400), "{}", String::from_utf8_lossy(bad));
        }
        // A colon-slash-slash later in an origin-form target is not a scheme.
        let out = forwarded(b"GET /r?u=http://x HTTP/1.1\r\nHost: o\r\n\r\n").unwrap();
        assert!(
            out.starts_with("GET /r?u=http://x HTTP/1.1\r\nHost: o\r\n"),
            "{out}"
        );
    }

    #[test]
    fn response_heads_say_the_proxys_persistence() {
        let raw = b"HTTP/1.0 200 OK\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: max=3\r\n\
                    Proxy-Authenticate: Basic\r\nContent-Length: 2\r\n\r\n";
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        assert!(resp.parse(raw).unwrap().is_complete());
        let mut out = Vec::new();
        forward_response(&resp, Persistence::Close, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nVia: 1.0 evq\r\nConnection: close\r\n\r\n"
        );
        let mut out = Vec::new();
        forward_response(&resp, Persistence::KeepAlive { http10: true }, &mut out);
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("Connection: keep-alive\r\n\r\n"));
    }
}
