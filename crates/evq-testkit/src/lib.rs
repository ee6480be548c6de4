//! What evq's test suites share across crates: the rule for a test that cannot run
//! on this machine.
//!
//! A test that needs something a machine may lack — a kernel feature, a peer
//! program, a font, root — calls [`skip`] with what is missing and why, and
//! returns. Run by a developer, that prints a line and the test passes. Under
//! `EVQ_REQUIRE_ALL=1` (CI sets it) it is a failure instead, so a green CI means
//! every test really ran. `EVQ_NOT_HERE` names, comma-separated, the things CI
//! knows are absent on purpose and covers elsewhere (the kernel-module backend,
//! `kmod`, runs in the VM step, not on the host).
//!
//! ```
//! fn needs_a_tool() {
//!     if which("valgrind").is_none() {
//!         evq_testkit::skip("valgrind", "not on PATH");
//!         return;
//!     }
//!     // ... the test proper
//! }
//! # fn which(_: &str) -> Option<()> { Some(()) }
//! # needs_a_tool();
//! ```

#![deny(missing_docs)]

use std::fmt::Display;

/// True when `EVQ_REQUIRE_ALL` is `1`: a test that cannot run must fail.
pub fn require_all() -> bool {
    matches!(
        std::env::var("EVQ_REQUIRE_ALL").as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// True when `what` is listed in `EVQ_NOT_HERE`: absent on purpose on this machine.
pub fn absent_on_purpose(what: &str) -> bool {
    std::env::var("EVQ_NOT_HERE").is_ok_and(|list| listed(&list, what))
}

/// Whether `what` is an item of the comma-separated `list`.
fn listed(list: &str, what: &str) -> bool {
    list.split(',').any(|item| item.trim() == what)
}

/// Says that the rest of a test cannot run because `what` is missing here (`why`
/// gives the details). Prints and returns; the caller then returns or moves on.
///
/// # Panics
/// Under `EVQ_REQUIRE_ALL=1`, unless `what` is listed in `EVQ_NOT_HERE`.
#[track_caller]
pub fn skip(what: &str, why: impl Display) {
    if require_all() && !absent_on_purpose(what) {
        panic!(
            "cannot run here: {what}: {why} (EVQ_REQUIRE_ALL=1 makes this a failure; \
             list {what:?} in EVQ_NOT_HERE if it is covered elsewhere)"
        );
    }
    eprintln!("skip ({what}): {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_on_commas_and_match_whole_items() {
        assert!(listed("kmod", "kmod"));
        assert!(listed("valgrind, kmod", "kmod"));
        assert!(!listed("kmods", "kmod"));
        assert!(!listed("", "kmod"));
        assert!(!listed("km,od", "kmod"));
    }
}
