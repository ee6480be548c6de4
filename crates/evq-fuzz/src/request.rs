//! The `request` target: evq-http's request handling (`handle_request`) over
//! arbitrary bytes, in both content modes (a fixed reply, and files under a
//! docroot with a subdirectory and a symlink out of it), request after request as
//! the event loop feeds it.
//!
//! Asserted: no panic; each reply consumes at least one byte and no more than
//! there are; a reply is an `HTTP/1.1` status line (or nothing); a file body's
//! descriptor is open (and is closed here, as the server would after sending).

use evq_http::request::{handle_request, Body, Content, FileRoot, Limits, Outcome, Scratch, Site};
use std::sync::{Arc, OnceLock};

fn sites() -> &'static [Site; 2] {
    static SITES: OnceLock<[Site; 2]> = OnceLock::new();
    SITES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("evq-http-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("fuzz docroot");
        std::fs::write(dir.join("index.html"), "<p>x</p>").expect("fuzz docroot");
        std::fs::write(dir.join("sub/a.txt"), "a").expect("fuzz docroot");
        let _ = std::os::unix::fs::symlink("/etc", dir.join("etc"));
        let limits = Limits {
            max_head: 1024,
            max_uri: 256,
        };
        [
            Site {
                content: Arc::new(Content::Fixed(vec![b'x'; 64].into())),
                limits,
                closing: false,
                stats_path: Some("/stats".into()),
                work: std::time::Duration::ZERO,
            },
            Site {
                content: Arc::new(Content::Files(FileRoot::open(&dir).expect("fuzz docroot"))),
                limits,
                closing: false,
                stats_path: None,
                work: std::time::Duration::ZERO,
            },
        ]
    })
}

/// Runs one input through both sites.
pub fn run(data: &[u8]) {
    let date = evq_http::date::format_http_date(0);
    let mut scratch = Scratch::default();
    let mut out = Vec::new();
    for site in sites() {
        let mut rest = data;
        loop {
            out.clear();
            match handle_request(rest, site, &date, &mut scratch, &mut out) {
                Outcome::Incomplete => break,
                Outcome::Done(r) | Outcome::Stats { reply: r, .. } => {
                    assert!(r.consumed > 0 && r.consumed <= rest.len());
                    assert!(out.starts_with(b"HTTP/1.1 ") || out.is_empty());
                    if let Body::File { fd, .. } = r.body {
                        // SAFETY: handle_request opened this descriptor for the
                        // caller, who owns it; F_GETFD only reads the table.
                        assert!(
                            unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0,
                            "file body fd {fd} not open"
                        );
                        // SAFETY: as above; closed once, here.
                        unsafe { libc::close(fd) };
                    }
                    rest = &rest[r.consumed..];
                    if !r.keep_alive || rest.is_empty() {
                        break;
                    }
                }
            }
        }
    }
}
