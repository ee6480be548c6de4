//! A source's claim checked against what was measured here: the verdict and the
//! words that justify it.

use serde::{Deserialize, Serialize};

/// Whether a source's claim holds on this kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The measured figure agrees with the claim.
    Holds,
    /// It does not; `measured` says how.
    Differs,
    /// The scenario could not measure it here (a peer or a piece is missing);
    /// `measured` says what and how to get it.
    NotMeasured,
}

impl Verdict {
    /// The word the report prints.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Differs => "differs",
            Verdict::NotMeasured => "not measured",
        }
    }

    /// `Some(true)` holds, `Some(false)` differs, `None` (nothing to judge) is
    /// not measured.
    pub fn of(holds: Option<bool>) -> Verdict {
        match holds {
            Some(true) => Verdict::Holds,
            Some(false) => Verdict::Differs,
            None => Verdict::NotMeasured,
        }
    }
}

/// One claim of a source, checked against one figure measured here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The source's claim, in its own terms.
    pub claim: String,
    /// What was measured here, with numbers.
    pub measured: String,
    /// How the measurement compares with the claim.
    pub verdict: Verdict,
    /// Why the verdict follows from the numbers (the rule applied).
    pub reasoning: String,
}

impl ClaimCheck {
    /// A check whose verdict follows from `holds` ([`Verdict::of`]).
    pub fn judged(
        claim: &str,
        measured: String,
        holds: Option<bool>,
        reasoning: &str,
    ) -> ClaimCheck {
        ClaimCheck {
            claim: claim.to_string(),
            measured,
            verdict: Verdict::of(holds),
            reasoning: reasoning.to_string(),
        }
    }
}
