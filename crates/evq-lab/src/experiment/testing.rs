//! What the judges' tests share: the raw records of a real quick run
//! (`testdata/recorded/NAME.json`, copied from a run's `raw.json`), and a way to
//! read one claim's verdict out of a judgement.

use super::Judged;
use crate::verdict::{ClaimCheck, Verdict};
use serde::de::DeserializeOwned;

/// The recorded raw records of scenario `name`.
pub fn recorded<T: DeserializeOwned>(name: &str) -> T {
    let path = format!(
        "{}/testdata/recorded/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The check of `claim` (panics if the judgement has none, naming the claims it has).
pub fn check<'a>(judged: &'a Judged, claim: &str) -> &'a ClaimCheck {
    judged
        .checks
        .iter()
        .find(|c| c.claim == claim)
        .unwrap_or_else(|| {
            let have: Vec<&str> = judged.checks.iter().map(|c| c.claim.as_str()).collect();
            panic!("no check of {claim:?} among {have:?}")
        })
}

/// The verdict on `claim`.
pub fn verdict(judged: &Judged, claim: &str) -> Verdict {
    check(judged, claim).verdict
}

/// The one item `pick` chooses (panics naming `what` if there is none).
pub fn the<'a, T>(items: &'a mut [T], what: &str, pick: impl Fn(&T) -> bool) -> &'a mut T {
    items
        .iter_mut()
        .find(|x| pick(x))
        .unwrap_or_else(|| panic!("no {what} in the recorded run"))
}
