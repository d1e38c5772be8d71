//! The keyed engine against a fault-injecting wrapper of the keyed memory
//! backend: a loss the backend reports before the engine has recorded the
//! win (an answer and a foreign record racing) still counts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election_core::{
    Claimed, ElectionName, Epoch, Error, HeldKey, HoldReporter, Identity, KeyedClaims, LeaseSet,
    LossReason, RenewalPolicy,
};
use election_testkit::memory::{MemoryBackend, MemoryKeys};

/// Keyed memory claims whose first won key is revoked (the loss reported
/// through the engine's reporter) before the claim step returns its win.
struct LosesOnWin {
    keys: MemoryKeys,
    backend: MemoryBackend,
    done: AtomicBool,
}

impl KeyedClaims for LosesOnWin {
    fn identity(&self) -> &Identity {
        self.keys.identity()
    }
    fn renewal(&self) -> Option<RenewalPolicy> {
        self.keys.renewal()
    }
    fn start(&self, reporter: HoldReporter) {
        self.keys.start(reporter)
    }
    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, Error>> {
        let answers = self.keys.claim(keys).await;
        for (key, answer) in keys.iter().zip(&answers) {
            if matches!(answer, Ok(Claimed::Won(_))) && !self.done.swap(true, Ordering::AcqRel) {
                assert!(self.backend.revoke(key.as_str()));
            }
        }
        answers
    }
    async fn renew(&self, held: &[HeldKey]) -> Result<Vec<(ElectionName, LossReason)>, Error> {
        self.keys.renew(held).await
    }
    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), Error> {
        self.keys.confirm(key, epoch).await
    }
    async fn release(&self, held: &[HeldKey]) {
        self.keys.release(held).await
    }
    async fn wait(&self) {
        self.keys.wait().await
    }
    async fn close(&self) {
        self.keys.close().await
    }
}

#[tokio::test]
async fn a_loss_reported_before_the_win_was_recorded_still_counts() {
    for lease in [None, Some(Duration::from_secs(30))] {
        let backend = MemoryBackend::new();
        backend.set_lease(lease);
        let a = LeaseSet::new(LosesOnWin {
            keys: backend.keys("a").unwrap(),
            backend: backend.clone(),
            done: AtomicBool::new(false),
        });
        let _ = a.ask("k").await;
        assert_ne!(
            a.epoch("k"),
            Some(Epoch::FIRST),
            "held in a term whose loss was reported before its win was recorded"
        );
        // The engine tries again and wins a later term.
        tokio::time::timeout(Duration::from_secs(30), async {
            while a.epoch("k").is_none() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("won again");
        assert!(a.epoch("k") > Some(Epoch::FIRST));
        let holder = backend.holder("k").expect("held");
        assert_eq!(
            (holder.identity.as_str(), Some(holder.epoch)),
            ("a", a.epoch("k"))
        );
        a.close().await;
        backend.check_rules(true).expect("the rules hold");
    }
}

/// A guard racing a loss and the set's immediate re-win always answers:
/// the nudged claim skips a key the set holds again, so the guard must not
/// wait for an answer about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_racing_a_loss_and_a_re_win_always_answers() {
    let backend = MemoryBackend::new();
    let a = std::sync::Arc::new(LeaseSet::new(backend.keys("a").unwrap()));
    assert!(a.ask("k").await.unwrap());
    for round in 0..2000 {
        let b = backend.clone();
        let revoker = tokio::spawn(async move { b.revoke("k") });
        let guard = a.guard("k", async |t| t.epoch());
        let answered = tokio::time::timeout(Duration::from_secs(20), guard).await;
        assert!(answered.is_ok(), "round {round}: the guard never answered");
        revoker.await.unwrap();
    }
    a.close().await;
    backend.check_rules(true).expect("the rules hold");
}
