//! Property test: random sequences of campaign, resign, drop, cancel and
//! backend-side loss across several candidates never yield two live terms
//! at once; epochs strictly increase; release never follows a loss; close
//! follows every end.

use election_core::{Candidate, Epoch, Error, Term};
use election_testkit::conformance::cancel_after;
use election_testkit::memory::{MemoryBackend, MemoryClaim, Step};
use proptest::prelude::*;

const CANDIDATES: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    TryCampaign(usize),
    Resign(usize),
    Drop(usize),
    /// A campaign dropped after this many pending polls.
    Cancel(usize, usize),
    /// The backend takes the claim away.
    Revoke,
    /// The next call of a step fails.
    Fail(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CANDIDATES;
    prop_oneof![
        4 => c.clone().prop_map(Op::TryCampaign),
        2 => c.clone().prop_map(Op::Resign),
        2 => c.clone().prop_map(Op::Drop),
        2 => (c, 1usize..6).prop_map(|(i, n)| Op::Cancel(i, n)),
        1 => Just(Op::Revoke),
        1 => (0u8..4).prop_map(Op::Fail),
    ]
}

fn step(n: u8) -> Step {
    match n {
        0 => Step::Open,
        1 => Step::TryClaim,
        2 => Step::Watch,
        _ => Step::Release,
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let backend = MemoryBackend::new();
    let candidates: Vec<Candidate<MemoryClaim>> = (0..CANDIDATES)
        .map(|i| Candidate::new(backend.claim("model", &format!("c{i}")).expect("claim")))
        .collect();
    let mut terms: Vec<Option<Term<MemoryClaim>>> = (0..CANDIDATES).map(|_| None).collect();
    let mut last_epoch: Option<Epoch> = None;
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::TryCampaign(c) => {
                if terms[c].is_none() {
                    match candidates[c].try_campaign().await {
                        Ok(Some(t)) => {
                            prop_assert!(
                                last_epoch.is_none_or(|l| t.epoch() > l),
                                "op {i}: epoch {} after {last_epoch:?}",
                                t.epoch()
                            );
                            last_epoch = Some(t.epoch());
                            terms[c] = Some(t);
                        }
                        Ok(None) | Err(Error::Unavailable { .. }) => {}
                        Err(e) => prop_assert!(false, "op {i}: unexpected {e:?}"),
                    }
                }
            }
            Op::Resign(c) => {
                if let Some(t) = terms[c].take() {
                    let lost_before = t.is_lost();
                    match t.resign().await {
                        Ok(()) => {
                            prop_assert!(!lost_before, "op {i}: resign of a lost term succeeded")
                        }
                        Err(Error::Lost(_)) => prop_assert!(lost_before),
                        Err(Error::Unavailable { .. }) => {}
                        Err(e) => prop_assert!(false, "op {i}: unexpected {e:?}"),
                    }
                }
            }
            Op::Drop(c) => drop(terms[c].take()),
            Op::Cancel(c, budget) => {
                if terms[c].is_none()
                    && let Some(Ok(t)) = cancel_after(candidates[c].campaign(), budget).await
                {
                    prop_assert!(last_epoch.is_none_or(|l| t.epoch() > l));
                    last_epoch = Some(t.epoch());
                    terms[c] = Some(t);
                }
            }
            Op::Revoke => {
                backend.revoke("model");
            }
            Op::Fail(s) => backend.fail(step(s), 1),
        }
        let live: Vec<_> = terms.iter().flatten().filter(|t| !t.is_lost()).collect();
        prop_assert!(
            live.len() <= 1,
            "op {i} ({op:?}): {} live terms: {live:?}",
            live.len()
        );
        if let Some(t) = live.first() {
            let holder = backend.holder("model");
            prop_assert_eq!(
                holder.map(|h| h.epoch),
                Some(t.epoch()),
                "op {}: the live term is not the backend's holder",
                i
            );
        }
        backend.check_rules(false).map_err(TestCaseError::fail)?;
    }
    drop(terms);
    backend.check_rules(true).map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_two_live_terms(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("runtime");
        rt.block_on(run(ops))?;
    }
}
