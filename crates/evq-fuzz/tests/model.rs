//! The reference model as a property test: random register / modify / revoke /
//! write / read / close-and-reopen / replace / wait sequences on every backend,
//! checked step by step by `evq_fuzz::model::run_ops` — the same model the `model`
//! fuzz target runs (moved here from `crates/evq/tests/model.rs`, so there is one).

use evq::BackendKind;
use evq_fuzz::model::{run_ops, Op, SLOTS};
use proptest::prelude::*;

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

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn backends_agree_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        for &kind in BackendKind::ALL {
            if let Err(e) = kind.available() {
                evq_testkit::skip_backend(kind.name(), e);
                continue;
            }
            let result = std::panic::catch_unwind(|| run_ops(kind, &ops));
            if let Err(panic) = result {
                eprintln!("FAILED on backend {kind}");
                std::panic::resume_unwind(panic);
            }
        }
    }
}
