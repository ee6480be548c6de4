//! The reference model as a property test: random register / modify / revoke /
//! write / read / close-and-reopen / replace / wait sequences on every backend,
//! checked step by step by `evq_fuzz::model::run_ops` — the same model the `model`
//! fuzz target runs (moved here from `crates/evq/tests/model.rs`, so there is one).
//!
//! `EVQ_TEST_BACKENDS` (comma-separated names; unset = all) narrows the backends,
//! as it does for evq's suites: `scripts/vm-test` runs this test in its guest on
//! `kmod` and `kmod-ring` only. A selected backend this kernel lacks is a skip
//! (`evq_testkit::skip_backend`), which `EVQ_REQUIRE_ALL=1` turns into a failure
//! unless `EVQ_NOT_HERE` names it.

use evq::BackendKind;
use evq_fuzz::model::{run_ops, Op, SLOTS};
use proptest::prelude::*;
use std::sync::OnceLock;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..SLOTS, 0u8..8, 0u8..3, prop::bool::weighted(0.1)).prop_map(
            |(slot, interest, mode, wake_one)| Op::Declare { slot, interest, mode, wake_one }
        ),
        1 => (0..SLOTS).prop_map(Op::Revoke),
        3 => (0..SLOTS).prop_map(Op::PeerWrite),
        2 => (0..SLOTS).prop_map(Op::Drain),
        1 => (0..SLOTS).prop_map(Op::Reopen),
        1 => (0..SLOTS, any::<bool>()).prop_map(|(slot, forget)| Op::Replace { slot, forget }),
        4 => Just(Op::Wait),
    ]
}

/// Whether `EVQ_TEST_BACKENDS` lets this run cover `kind`.
fn selected(kind: BackendKind) -> bool {
    std::env::var("EVQ_TEST_BACKENDS").map_or(true, |list| {
        list.split(',').any(|n| n.trim() == kind.name())
    })
}

/// The selected backends this kernel has, probed once; the others are skips (see
/// above).
fn backends() -> Vec<BackendKind> {
    static RUN: OnceLock<Vec<BackendKind>> = OnceLock::new();
    RUN.get_or_init(|| {
        let mut run = Vec::new();
        for &kind in BackendKind::ALL {
            if !selected(kind) {
                continue;
            }
            match kind.available() {
                Ok(()) => run.push(kind),
                Err(e) => evq_testkit::skip_backend(kind.name(), e),
            }
        }
        run
    })
    .clone()
}

#[test]
fn some_backend_is_checked() {
    let run = backends();
    eprintln!("model checked on: {run:?}");
    assert!(
        !run.is_empty(),
        "no backend to check the model on (EVQ_TEST_BACKENDS={:?})",
        std::env::var("EVQ_TEST_BACKENDS").ok()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn backends_agree_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        for kind in backends() {
            let result = std::panic::catch_unwind(|| run_ops(kind, &ops));
            if let Err(panic) = result {
                eprintln!("FAILED on backend {kind}");
                std::panic::resume_unwind(panic);
            }
        }
    }
}
