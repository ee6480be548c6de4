//! Replays the regression corpus of nasty requests (`tests/corpus/*.http`): each
//! file's name starts with the status the static-file server must answer first
//! (or `timeout`: no answer, closed by the header timeout). Every file also goes
//! through `handle_request` directly in both content modes, and through a live
//! fixed-reply server, which must survive all of it.

mod common;

use common::*;
use evq_http::date::format_http_date;
use evq_http::request::{handle_request, Content, FileRoot, Limits, Outcome, Scratch, Site};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "http"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    assert!(files.len() >= 30, "corpus went missing");
    files
}

/// Feeds `input` to `handle_request` the way the server does: request after
/// request until incomplete or closed. Returns the first status.
fn replay(input: &[u8], site: &Site) -> Option<u16> {
    let date = format_http_date(0);
    let mut scratch = Scratch::default();
    let mut out = Vec::new();
    let mut rest = input;
    let mut first = None;
    loop {
        out.clear();
        match handle_request(rest, site, &date, &mut scratch, &mut out) {
            Outcome::Incomplete => return first,
            Outcome::Done(r) | Outcome::Stats { reply: r, .. } => {
                assert!(r.consumed <= rest.len() && r.consumed > 0);
                if let evq_http::request::Body::File { fd, .. } = r.body {
                    // SAFETY: the fd was opened for us by handle_request and is ours.
                    unsafe { libc::close(fd) };
                }
                first.get_or_insert(r.status);
                rest = &rest[r.consumed..];
                if !r.keep_alive || rest.is_empty() {
                    return first;
                }
            }
        }
    }
}

#[test]
fn corpus_through_handle_request() {
    let root = docroot("corpus-direct");
    let files = Site {
        content: Arc::new(Content::Files(FileRoot::open(&root).unwrap())),
        limits: Limits::default(),
        closing: false,
        stats_path: None,
        work: std::time::Duration::ZERO,
    };
    let fixed = Site {
        content: Arc::new(Content::Fixed(vec![b'x'; 100].into())),
        limits: Limits::default(),
        closing: false,
        stats_path: None,
        work: std::time::Duration::ZERO,
    };
    for (name, input) in corpus() {
        let expected = name.split('-').next().unwrap();
        let got = replay(&input, &files);
        match expected.parse::<u16>() {
            Ok(status) => assert_eq!(got, Some(status), "{name}"),
            Err(_) => assert_eq!(got, None, "{name}"),
        }
        replay(&input, &fixed);
        // Every prefix too: a request cut anywhere must not upset the parser.
        for cut in 0..input.len().min(300) {
            replay(&input[..cut], &files);
        }
    }
}

#[test]
fn corpus_against_live_servers() {
    let root = docroot("corpus-live");
    let mut files_cfg = config(None);
    files_cfg.root = Some(root.to_path_buf());
    files_cfg.header_timeout = Duration::from_millis(300);
    let files = start(&files_cfg);
    let mut fixed_cfg = config(None);
    fixed_cfg.header_timeout = Duration::from_millis(300);
    let fixed = start(&fixed_cfg);
    for (name, input) in corpus() {
        let expected = name.split('-').next().unwrap();
        let mut c = Client::connect(files.addr());
        let _ = c.stream.write_all(&input);
        match expected.parse::<u16>() {
            Ok(status) => {
                let r = c
                    .response(false)
                    .unwrap_or_else(|| panic!("{name}: no answer"));
                assert_eq!(r.status, status, "{name}");
            }
            Err(_) => assert!(c.closed(), "{name}: not closed by the header timeout"),
        }
        let mut c = Client::connect(fixed.addr());
        let _ = c.stream.write_all(&input);
        let _ = c.response(false);
        // Both servers are unharmed.
        assert_eq!(
            get(files.addr(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                .unwrap()
                .status,
            200
        );
        assert_eq!(
            get(fixed.addr(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                .unwrap()
                .status,
            200
        );
    }
    assert!(eventually(
        || files.report().open_conns == 0 && fixed.report().open_conns == 0
    ));
    files.stop();
    fixed.stop();
}

/// A dependency-free stand-in for the fuzzer in CI: byte-level mutations of the
/// corpus (flip, insert, delete, splice, duplicate) through `handle_request`.
#[test]
fn mutated_corpus_never_panics() {
    let root = docroot("corpus-mutate");
    let sites = [
        Site {
            content: Arc::new(Content::Files(FileRoot::open(&root).unwrap())),
            limits: Limits {
                max_head: 2048,
                max_uri: 512,
            },
            closing: false,
            stats_path: Some("/s".into()),
            work: std::time::Duration::ZERO,
        },
        Site {
            content: Arc::new(Content::Fixed(vec![b'x'; 40_000].into())),
            limits: Limits::default(),
            closing: false,
            stats_path: None,
            work: std::time::Duration::ZERO,
        },
    ];
    let corpus = corpus();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const INTERESTING: &[&[u8]] = &[
        b"\r\n",
        b"\n",
        b"%",
        b"%2e",
        b"%2f",
        b"..",
        b"/",
        b"\0",
        b":",
        b" ",
        b"HTTP/1.1",
        b"HEAD",
        b"Content-Length: 5\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"If-Modified-Since: ",
        b"Connection: close\r\n",
        b"\xff",
    ];
    for _ in 0..20_000 {
        let (_, base) = &corpus[(next() as usize) % corpus.len()];
        let mut input = base.clone();
        for _ in 0..1 + next() % 4 {
            let pos = if input.is_empty() {
                0
            } else {
                (next() as usize) % (input.len() + 1)
            };
            match next() % 5 {
                0 if pos < input.len() => input[pos] ^= 1 << (next() % 8),
                1 => {
                    let piece = INTERESTING[(next() as usize) % INTERESTING.len()];
                    input.splice(pos..pos, piece.iter().copied());
                }
                2 if pos < input.len() => {
                    let end = (pos + 1 + (next() as usize) % 16).min(input.len());
                    input.drain(pos..end);
                }
                3 => input.truncate(pos),
                _ => {
                    let copy = input[pos..].to_vec();
                    input.extend_from_slice(&copy);
                }
            }
        }
        for site in &sites {
            replay(&input, site);
        }
    }
}
