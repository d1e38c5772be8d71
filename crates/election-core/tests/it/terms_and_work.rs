//! Issue 11, "terms and work": a term's lease reads lost once the term
//! ends (resign, drop, a cancelled resign); dropping `lead` holds the claim
//! until the term's tasks have stopped; `LeaseSet::close` waits for running
//! guards before it gives keys up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use election_core::{
    Candidate, Error, Identity, LeadOptions, Lease, LeaseSet, LossReason, PerKeyClaims,
};
use election_testkit::conformance::{PATIENCE, cancel_after};
use election_testkit::memory::{Event, MemoryBackend};

fn candidate(b: &MemoryBackend, id: &str) -> Candidate<election_testkit::memory::MemoryClaim> {
    Candidate::new(b.claim("jobs", id).expect("claim"))
        .with_poll_interval(Duration::from_millis(5))
        .expect("poll interval")
}

/// Sets its flag when dropped, also when an assertion fails: a blocking
/// task waiting for it must not outlive a failed test.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PATIENCE:?}"))
}

// ---- Item 4: an ended term's lease reads lost ----

#[tokio::test]
async fn a_resigned_terms_lease_reads_lost_also_after_the_next_term_began() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let lease = t.lease();
    t.resign().await.expect("resign");
    assert!(lease.is_lost(), "a resigned term's lease reads live");
    assert!(t.is_lost(), "a resigned term reads live");
    let next = candidate(&b, "b").campaign().await.expect("b wins");
    assert!(lease.is_lost(), "the old lease reads live in the next term");
    let loss = lease.loss().expect("a reason");
    assert!(matches!(loss.reason, LossReason::Resigned), "{loss:?}");
    assert!(loss.reason.is_end());
    assert_eq!(loss.epoch, t.epoch());
    let lost = within("lost() after resign", lease.lost()).await;
    assert!(matches!(lost.reason, LossReason::Resigned));
    within("ended() after resign", t.ended()).await;
    // A resign after the end still succeeds (idempotent), and the new
    // term is untouched.
    t.resign().await.expect("second resign");
    assert!(!next.is_lost());
    next.resign().await.expect("resign b");
}

#[tokio::test]
async fn a_dropped_terms_lease_reads_lost() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let lease = t.lease();
    drop(t);
    assert!(lease.is_lost(), "a dropped term's lease reads live");
    let loss = lease.loss().expect("a reason");
    assert!(matches!(loss.reason, LossReason::Dropped), "{loss:?}");
    assert_eq!(
        within("lost() after drop", lease.lost()).await.epoch,
        loss.epoch
    );
}

#[tokio::test]
async fn a_lease_reads_lost_before_the_release_is_sent() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let lease = t.lease();
    // The memory backend's release yields once before it frees the claim:
    // cancel the resign right there, with the release in flight.
    assert!(cancel_after(t.resign(), 1).await.is_none());
    assert!(
        b.holder("jobs").is_some(),
        "the release had not run yet (the test's premise)"
    );
    assert!(
        lease.is_lost(),
        "the lease reads live while the release is in flight"
    );
    assert!(matches!(
        lease.loss().expect("reason").reason,
        LossReason::Resigned
    ));
    // A commit-point check after the end refuses: not held.
    assert!(matches!(t.confirm().await, Err(Error::NotHeld { .. })));
    // The resign can still be finished.
    t.resign().await.expect("resign again");
    assert!(b.holder("jobs").is_none());
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn a_loss_before_the_end_keeps_its_reason() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let lease = t.lease();
    b.revoke("jobs");
    assert!(matches!(t.resign().await, Err(Error::Lost(_))));
    let loss = lease.loss().expect("lost");
    assert!(
        matches!(loss.reason, LossReason::Revoked { .. }),
        "{loss:?}"
    );
    assert!(!loss.reason.is_end());
}

// ---- Item 5: dropping `lead` holds the claim until its tasks stopped ----

/// A task of the term in a synchronous section (it ignores the abort until
/// it returns) when `lead` is dropped: nobody else may win until it really
/// finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_lead_holds_the_claim_until_its_tasks_have_stopped() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let epoch = t.epoch();
    let lease = t.lease();
    let release = Arc::new(AtomicBool::new(false));
    let _unblock = SetOnDrop(release.clone());
    let finished = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let lead = tokio::spawn({
        let (release, finished) = (release.clone(), finished.clone());
        t.lead(LeadOptions::default(), move |leadership| async move {
            leadership.spawn(async move {
                let _ = started_tx.send(());
                // Blocking work: it cannot see the abort.
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                finished.store(true, Ordering::Release);
            });
            std::future::pending::<()>().await
        })
    });
    within("the task to start", started).await.expect("started");
    lead.abort();
    assert!(lead.await.expect_err("aborted").is_cancelled());

    // The lead is gone; its task still runs.
    assert!(lease.is_lost(), "the dropped lead's lease reads live");
    assert!(matches!(
        lease.loss().expect("reason").reason,
        LossReason::Dropped
    ));
    let other = candidate(&b, "b");
    assert!(
        other.try_campaign().await.expect("try").is_none(),
        "another candidate won while the dropped lead's task still ran"
    );
    assert_eq!(
        b.holder("jobs").map(|h| h.epoch),
        Some(epoch),
        "the claim was given up while the task still ran"
    );
    let waiting = tokio::spawn(async move { other.campaign().await });
    tokio::task::yield_now().await;
    assert!(!finished.load(Ordering::Acquire));

    release.store(true, Ordering::Release);
    let next = within("b after the task stopped", waiting)
        .await
        .expect("join")
        .expect("b wins");
    assert!(
        finished.load(Ordering::Acquire),
        "b won before the task finished"
    );
    assert!(next.epoch() > epoch);
    next.resign().await.expect("resign");
    b.check_rules(true).expect("rules");
}

/// While a dropped lead waits for its tasks, a loss ends the term at once
/// (no release after it; the fence is the protection then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_ends_a_dropped_lead_before_its_tasks_stopped() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let state = t.lease();
    let release = Arc::new(AtomicBool::new(false));
    let _unblock = SetOnDrop(release.clone());
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let lead = tokio::spawn({
        let release = release.clone();
        t.lead(LeadOptions::default(), move |leadership| async move {
            leadership.spawn_blocking(move || {
                let _ = started_tx.send(());
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            std::future::pending::<()>().await
        })
    });
    within("the task to start", started).await.expect("started");
    lead.abort();
    let _ = lead.await;
    assert!(b.holder("jobs").is_some(), "held while the task runs");
    assert!(b.revoke("jobs"));
    // The cleanup closes the attempt (End::Lost) without a release.
    within("the attempt to close", async {
        while !b.history().iter().any(|e| matches!(e, Event::Close { .. })) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(state.is_lost());
    release.store(true, Ordering::Release);
    b.check_rules(true)
        .expect("rules: no release after the loss");
    assert!(
        !b.history()
            .iter()
            .any(|e| matches!(e, Event::Release { .. }))
    );
}

/// A term whose resign was cancelled has ended: `lead` runs nothing.
#[tokio::test]
async fn lead_of_an_ended_term_runs_nothing() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    assert!(cancel_after(t.resign(), 1).await.is_none());
    let mut ran = false;
    let r = t
        .lead(LeadOptions::default(), |_l| async { ran = true })
        .await;
    assert!(matches!(r, Err(Error::NotHeld { .. })), "{r:?}");
    assert!(!ran, "work ran under an ended term");
    assert!(b.holder("jobs").is_none(), "the resign was finished");
    b.check_rules(true).expect("rules");
}

/// Once `lead` has returned, `Leadership::spawn` runs nothing: no work of
/// the term may start after it ended.
#[tokio::test]
async fn spawn_after_the_term_ended_runs_nothing() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let kept = t
        .lead(
            LeadOptions::default(),
            |leadership| async move { leadership },
        )
        .await
        .expect("lead");
    assert!(kept.lease().is_lost());
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    kept.spawn(async move { r.store(true, Ordering::Release) });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!ran.load(Ordering::Acquire), "a task ran after the term");
}

// ---- Item 6: LeaseSet::close waits for running guards ----

fn set_of(
    backend: &MemoryBackend,
    id: &'static str,
) -> LeaseSet<PerKeyClaims<election_testkit::memory::MemoryClaim>> {
    let b = backend.clone();
    LeaseSet::new(
        PerKeyClaims::new(Identity::new(id).expect("identity"), move |key| {
            b.claim(key.as_str(), id)
        })
        .with_poll_interval(Duration::from_millis(5))
        .expect("poll interval"),
    )
}

/// A guarded write blocked past its commit point while `close` runs: the
/// other set must not win the key before the write finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_waits_for_a_running_guard_before_giving_the_key_up() {
    let backend = MemoryBackend::new();
    let a = Arc::new(set_of(&backend, "node-a"));
    let b = set_of(&backend, "node-b");
    assert!(a.ask("shard").await.expect("ask"), "a wins the key");
    let epoch = a.epoch("shard").expect("held");
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let (in_write_tx, in_write) = tokio::sync::oneshot::channel();
    let write_done = Arc::new(AtomicBool::new(false));
    let guard = tokio::spawn({
        let (a, write_done) = (a.clone(), write_done.clone());
        async move {
            a.guard("shard", async |token| {
                let _ = in_write_tx.send(token.epoch());
                let _ = go.await;
                write_done.store(true, Ordering::Release);
            })
            .await
        }
    });
    assert_eq!(
        within("the write to start", in_write).await.ok(),
        Some(epoch)
    );
    let closing = tokio::spawn({
        let a = a.clone();
        async move { a.close().await }
    });
    // b wants the key meanwhile.
    assert!(
        !b.ask("shard").await.expect("ask"),
        "b won during the write"
    );
    within("a to read closed", async {
        while a.held("shard") {
            tokio::task::yield_now().await;
        }
    })
    .await;
    // Give b's campaign many polls: it must not win while the write runs.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(
            !b.held("shard"),
            "b won the key while a's guarded write still ran"
        );
        assert_eq!(
            backend.holder("shard").map(|h| h.epoch),
            Some(epoch),
            "a gave the key up while its guarded write still ran"
        );
    }
    assert!(!closing.is_finished(), "close returned during the write");
    go_tx.send(()).expect("the write waits");
    within("the guard", guard)
        .await
        .expect("join")
        .expect("guard");
    within("close", closing).await.expect("join");
    assert!(write_done.load(Ordering::Acquire));
    within("b to win after the write", async {
        while !b.held("shard") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(b.epoch("shard").expect("held") > epoch);
    b.close().await;
}

/// A guard that starts after close began is refused and runs nothing.
#[tokio::test]
async fn a_guard_after_close_began_runs_nothing() {
    let backend = MemoryBackend::new();
    let a = set_of(&backend, "node-a");
    assert!(a.ask("shard").await.expect("ask"));
    a.close().await;
    let mut ran = false;
    let r = a.guard("shard", async |_t| ran = true).await;
    assert!(matches!(r, Err(Error::NotHeld { .. })), "{r:?}");
    assert!(!ran);
    assert!(matches!(a.ask("shard").await, Err(Error::NotHeld { .. })));
}

/// Past its bound, close returns, but the key stays held until the write
/// finished (then it is given up in the background).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_past_its_bound_still_keeps_the_key_until_the_write_finished() {
    let backend = MemoryBackend::new();
    let a = Arc::new(
        set_of(&backend, "node-a")
            .with_close_timeout(Duration::from_millis(20))
            .expect("bound"),
    );
    assert!(a.ask("shard").await.expect("ask"));
    let epoch = a.epoch("shard").expect("held");
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let (in_write_tx, in_write) = tokio::sync::oneshot::channel::<()>();
    let guard = tokio::spawn({
        let a = a.clone();
        async move {
            a.guard("shard", async |_token| {
                let _ = in_write_tx.send(());
                let _ = go.await;
            })
            .await
        }
    });
    within("the write to start", in_write)
        .await
        .expect("started");
    within("close past its bound", a.close()).await;
    assert!(!a.held("shard"));
    assert_eq!(
        backend.holder("shard").map(|h| h.epoch),
        Some(epoch),
        "close gave the key up while the write still ran"
    );
    go_tx.send(()).expect("the write waits");
    within("the guard", guard)
        .await
        .expect("join")
        .expect("guard");
    within("the key to be given up after the write", async {
        while backend.holder("shard").is_some() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        LeaseSet::new(PerKeyClaims::new(
            Identity::new("x").expect("id"),
            |_k| -> Result<election_testkit::memory::MemoryClaim, Error> { unreachable!() }
        ))
        .with_close_timeout(Duration::from_secs(7200))
        .is_err(),
        "a bound above 1h is refused"
    );
}
