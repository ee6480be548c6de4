//! The request `evq load` sends: built once per run and repeated for a burst, so
//! sending costs no formatting per call. Responses are read by
//! [`evq_wire::ResponseReader`].

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
