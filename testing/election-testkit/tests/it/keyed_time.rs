//! The keyed engine's rule 2 with injected time (tokio's paused clock):
//! over the keyed memory backend with leases, whatever the order of time
//! passing, failing or timed-out batch renewals, revocations, leases that
//! run out on the backend and guards, `held` never answers true for a key
//! the backend shows another candidate holding, and a guard's write only
//! runs under a confirmed hold.

use std::time::Duration;

use election_core::LeaseSet;
use election_testkit::memory::{MemoryBackend, Step};
use proptest::prelude::*;

const LEASE: Duration = Duration::from_secs(3);
const KEYS: [&str; 3] = ["k0", "k1", "k2"];

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Ask(usize),
    /// The next `n` batch renewals fail.
    FailRenewals(u32),
    /// The backend's lease on a key runs out (if it has) and b gets it.
    Expire(usize),
    Revoke(usize),
    Guard(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..2_500).prop_map(Op::Advance),
        2 => (0usize..3).prop_map(Op::Ask),
        2 => (1u32..6).prop_map(Op::FailRenewals),
        2 => (0usize..3).prop_map(Op::Expire),
        1 => (0usize..3).prop_map(Op::Revoke),
        2 => (0usize..3).prop_map(Op::Guard),
    ]
}

fn check(a: &LeaseSet<election_testkit::memory::MemoryKeys>, backend: &MemoryBackend) {
    for key in KEYS {
        if a.held(key) {
            let holder = backend
                .holder(key)
                .expect("held, so the backend shows a holder");
            assert_eq!(
                (holder.identity.as_str(), Some(holder.epoch)),
                ("a", a.epoch(key)),
                "held({key}) true while the backend shows {holder:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn held_never_true_once_the_backend_could_grant_the_key(ops in proptest::collection::vec(op(), 1..50)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let backend = MemoryBackend::new();
            backend.set_lease(Some(LEASE));
            let a = LeaseSet::new(backend.keys("a").unwrap());
            for op in ops {
                match op {
                    Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
                    Op::Ask(i) => { let _ = a.ask(KEYS[i]).await; }
                    Op::FailRenewals(n) => backend.fail(Step::Renew, n),
                    Op::Expire(i) => { backend.expire(KEYS[i], "b").unwrap(); }
                    Op::Revoke(i) => { backend.revoke(KEYS[i]); }
                    Op::Guard(i) => {
                        if let Ok(epoch) = a.guard(KEYS[i], async |t| t.epoch()).await {
                            let holder = backend.holder(KEYS[i]).expect("a holder");
                            prop_assert_eq!((holder.identity.as_str(), holder.epoch), ("a", epoch));
                        }
                    }
                }
                // Before the loop gets to run (a deadline passed while the
                // clock jumped) and after.
                check(&a, &backend);
                tokio::task::yield_now().await;
                check(&a, &backend);
            }
            a.close().await;
            backend.check_rules(true).map_err(TestCaseError::fail)?;
            Ok(())
        })?;
    }
}
