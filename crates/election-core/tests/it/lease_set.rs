//! The lease set over the in-memory backend: held, guard, close, and the
//! invariant that `held` never answers true for a key another candidate
//! holds (injected time: tokio's paused clock).

use std::time::Duration;

use election_core::{Error, Identity, LeaseSet, PerKeyClaims};
use election_testkit::memory::MemoryBackend;
use proptest::prelude::*;

fn set(
    backend: &MemoryBackend,
    me: &str,
) -> LeaseSet<PerKeyClaims<election_testkit::memory::MemoryClaim>> {
    let backend = backend.clone();
    let identity = Identity::new(me).unwrap();
    let me = me.to_owned();
    LeaseSet::new(
        PerKeyClaims::new(identity, move |key| backend.claim(key.as_str(), &me))
            .with_poll_interval(Duration::from_millis(10))
            .unwrap(),
    )
}

/// Waits (on events, bounded generously) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test]
async fn first_ask_registers_then_the_loop_wins() {
    let backend = MemoryBackend::new();
    let a = set(&backend, "a");
    assert!(!a.held("k1"), "the first ask answers false");
    until("a to win k1", || a.held("k1")).await;
    assert_eq!(backend.holder("k1").unwrap().identity.as_str(), "a");
    assert_eq!(a.epoch("k1"), Some(backend.holder("k1").unwrap().epoch));
    assert!(!a.held(""), "an invalid key is never held");
    assert!(matches!(a.ask("").await, Err(Error::Config(_))));
}

#[tokio::test]
async fn a_key_moves_to_the_asker_when_its_holder_closes() {
    let backend = MemoryBackend::new();
    let a = set(&backend, "a");
    let b = set(&backend, "b");
    assert!(a.ask("k").await.unwrap());
    assert!(!b.ask("k").await.unwrap());
    assert_eq!(b.holder("k").unwrap().identity.as_str(), "a");
    match b.guard("k", async |_t| ()).await {
        Err(Error::HeldElsewhere { holder, .. }) => {
            assert_eq!(holder.unwrap().identity.as_str(), "a")
        }
        other => panic!("expected HeldElsewhere, got {other:?}"),
    }
    a.close().await;
    assert!(!a.held("k"), "held turns false at once on close");
    assert!(matches!(
        a.guard("k", async |_t| ()).await,
        Err(Error::NotHeld { .. })
    ));
    until("b to take k over", || b.held("k")).await;
    let epoch = b.guard("k", async |t| t.epoch()).await.unwrap();
    assert_eq!(epoch.get(), 3, "the second term of k");
    b.close().await;
    backend.check_rules(true).unwrap();
}

#[tokio::test]
async fn guard_racing_a_loss_at_the_commit_point_is_refused() {
    let backend = MemoryBackend::new();
    let a = set(&backend, "a");
    assert!(a.ask("k").await.unwrap());
    // The backend hands the key to b; a's watch has not heard yet.
    backend.steal("k", "b").unwrap();
    assert!(a.held("k"), "held may lag (the watch has not reported)");
    let mut wrote = false;
    let r = a.guard("k", async |_t| wrote = true).await;
    assert!(matches!(r, Err(Error::Lost(_))), "got {r:?}");
    assert!(!wrote, "the write must not run");
    until("the loss to reach held", || !a.held("k")).await;
    a.close().await;
}

#[tokio::test]
async fn guard_reports_an_unavailable_backend_not_a_holder() {
    let backend = MemoryBackend::new();
    backend.fail(election_testkit::memory::Step::TryClaim, 1);
    let a = set(&backend, "a");
    let r = a.guard("k", async |_t| ()).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "got {r:?}");
    // The loop keeps trying and wins once the backend is back.
    until("a to win k", || a.held("k")).await;
    a.guard("k", async |_t| ()).await.unwrap();
    a.close().await;
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Ask(usize),
    /// The backend's lease on a key ran out and another candidate took it.
    ExpireAndSteal(usize),
    Revoke(usize),
    Guard(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..4_000).prop_map(Op::Advance),
        (0usize..4).prop_map(Op::Ask),
        (0usize..4).prop_map(Op::ExpireAndSteal),
        (0usize..4).prop_map(Op::Revoke),
        (0usize..4).prop_map(Op::Guard),
    ]
}

const LEASE: Duration = Duration::from_secs(5);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `held` never answers true for a key the backend shows another
    /// candidate holding, whatever the order of time passing, expiries,
    /// revocations and guards; and a guard's write only runs under a
    /// confirmed hold.
    #[test]
    fn held_never_true_for_a_key_someone_else_holds(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let backend = MemoryBackend::new();
            backend.set_lease(Some(LEASE));
            let a = set(&backend, "a");
            let keys = ["k0", "k1", "k2", "k3"];
            // a's latest term per key as the backend shows it, and when it
            // was first seen (no earlier than the win).
            let mut won: [Option<(election_core::Epoch, tokio::time::Instant)>; 4] = [None; 4];
            for op in ops {
                match op {
                    Op::Advance(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
                    Op::Ask(i) => { let _ = a.ask(keys[i]).await; }
                    Op::ExpireAndSteal(i) => {
                        // Rule 2: the backend grants the key to another only
                        // once a's lease could have run out.
                        if let Some((epoch, at)) = won[i] {
                            let now = tokio::time::Instant::now();
                            if now < at + LEASE {
                                tokio::time::advance(at + LEASE - now).await;
                            }
                            let re_won = backend.holder(keys[i]).is_some_and(|h| h.identity.as_str() == "a" && h.epoch != epoch);
                            if !re_won {
                                backend.steal(keys[i], "b").unwrap();
                            }
                        } else if backend.holder(keys[i]).is_none_or(|h| h.identity.as_str() != "a") {
                            backend.steal(keys[i], "b").unwrap();
                        }
                    }
                    Op::Revoke(i) => { backend.revoke(keys[i]); }
                    Op::Guard(i) => {
                        let r = a.guard(keys[i], async |t| t.epoch()).await;
                        if let Ok(epoch) = r {
                            let holder = backend.holder(keys[i]).expect("a holder");
                            prop_assert_eq!(holder.identity.as_str(), "a");
                            prop_assert_eq!(holder.epoch, epoch);
                        }
                    }
                }
                // Checked before the loop gets to run (a paused holder whose
                // deadline passed) and after.
                for key in &keys {
                    if a.held(key) && let Some(holder) = backend.holder(key) {
                        prop_assert_eq!(holder.identity.as_str(), "a", "held({}) true while {} holds it", key, holder.identity);
                    }
                }
                tokio::task::yield_now().await;
                for (i, key) in keys.iter().enumerate() {
                    let holder = backend.holder(key);
                    if a.held(key) && let Some(holder) = holder.clone() {
                        prop_assert_eq!(holder.identity.as_str(), "a", "held({}) true while {} holds it", key, holder.identity);
                    }
                    won[i] = match holder {
                        Some(h) if h.identity.as_str() == "a" => match won[i] {
                            Some((e, at)) if e == h.epoch => Some((e, at)),
                            _ => Some((h.epoch, tokio::time::Instant::now())),
                        },
                        _ => None,
                    };
                }
            }
            a.close().await;
            Ok(())
        })?;
    }
}

/// A key held elsewhere is won on the backend's own wake-up (the memory
/// backend's vacancy notice, the file backend's freed lock), not after a
/// poll interval: with an hour's poll on the paused clock, the key moves
/// while virtual time has hardly advanced.
#[tokio::test(start_paused = true)]
async fn a_key_held_elsewhere_is_won_on_the_backends_wake_up() {
    let backend = MemoryBackend::new();
    let other = election_core::Candidate::new(backend.claim("k", "b").unwrap())
        .campaign()
        .await
        .unwrap();
    let b = backend.clone();
    let a = LeaseSet::new(
        PerKeyClaims::new(Identity::new("a").unwrap(), move |key| {
            b.claim(key.as_str(), "a")
        })
        .with_poll_interval(Duration::from_secs(3600))
        .unwrap(),
    );
    assert!(!a.ask("k").await.unwrap());
    let start = tokio::time::Instant::now();
    other.resign().await.unwrap();
    until("a to win k", || a.held("k")).await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "won only after {:?}",
        start.elapsed()
    );
    a.close().await;
}
