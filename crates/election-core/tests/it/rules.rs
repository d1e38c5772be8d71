//! The core's side of the four rules, checked against the fault-injecting
//! memory backend's record of every step.

use std::time::Duration;

use election_core::{Candidate, End, Error, LeadOptions, Lease, LossReason};
use election_testkit::memory::{Event, MemoryBackend, Step};

fn candidate(b: &MemoryBackend, id: &str) -> Candidate<election_testkit::memory::MemoryClaim> {
    Candidate::new(b.claim("jobs", id).expect("claim"))
}

fn closes(b: &MemoryBackend) -> Vec<End> {
    b.history()
        .into_iter()
        .filter_map(|e| match e {
            Event::Close { end, .. } => Some(end),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn close_follows_every_end() {
    let b = MemoryBackend::new();
    let a = candidate(&b, "a");
    let other = candidate(&b, "other");
    // Resigned.
    a.campaign()
        .await
        .expect("win")
        .resign()
        .await
        .expect("resign");
    // Dropped.
    drop(a.campaign().await.expect("win"));
    // Lost.
    let t = a.campaign().await.expect("win");
    assert!(b.revoke("jobs"));
    assert!(matches!(t.resign().await, Err(Error::Lost(_))));
    // Never won.
    let t = a.campaign().await.expect("win");
    assert!(other.try_campaign().await.expect("try").is_none());
    assert!(
        other
            .campaign_timeout(Duration::from_millis(5))
            .await
            .expect("bounded")
            .is_none()
    );
    // Failed: a release that fails.
    b.fail(Step::Release, 1);
    assert!(matches!(t.resign().await, Err(Error::Unavailable { .. })));
    // Failed: a try that fails.
    b.fail(Step::TryClaim, 1);
    assert!(matches!(
        a.try_campaign().await,
        Err(Error::Unavailable { .. })
    ));
    // Cancelled at every await point, including right after try_claim won.
    for budget in 1..6 {
        let _ = election_testkit::conformance::cancel_after(a.campaign(), budget).await;
    }
    assert!(
        b.holder("jobs").is_none(),
        "a cancelled campaign left the claim held"
    );
    let ends = closes(&b);
    for end in [
        End::Resigned,
        End::Dropped,
        End::Lost,
        End::NeverWon,
        End::Failed,
        End::Cancelled,
    ] {
        assert!(ends.contains(&end), "no close with {end:?}: {ends:?}");
    }
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn release_never_follows_a_loss() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    b.revoke("jobs");
    // Resign twice, concurrently: neither may release.
    let (r1, r2) = tokio::join!(t.resign(), t.resign());
    assert!(matches!(r1, Err(Error::Lost(_))) && matches!(r2, Err(Error::Lost(_))));
    assert!(
        !b.history()
            .iter()
            .any(|e| matches!(e, Event::Release { .. }))
    );
    b.check_rules(true).expect("rules");
}

/// Rule 3 for a transfer: after a loss neither a transfer nor a resign
/// beside it releases (nor reserves) anything.
#[tokio::test]
async fn a_transfer_never_follows_a_loss() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    b.revoke("jobs");
    let to = election_core::Identity::new("b").expect("identity");
    let (r1, r2) = tokio::join!(t.transfer(&to, Duration::from_secs(60)), t.resign());
    assert!(matches!(r1, Err(Error::Lost(_))) && matches!(r2, Err(Error::Lost(_))));
    assert!(
        !b.history()
            .iter()
            .any(|e| matches!(e, Event::Release { .. }))
    );
    // Nothing reserved: anyone may win.
    candidate(&b, "c").campaign().await.expect("c wins at once");
    b.check_rules(true).expect("rules");
}

/// A cancelled transfer leaves the term ending; dropping it gives the
/// claim up with no reservation (End::Dropped), so anyone may win.
#[tokio::test]
async fn a_cancelled_transfer_then_a_drop_frees_the_name_for_anyone() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let to = election_core::Identity::new("b").expect("identity");
    assert!(
        election_testkit::conformance::cancel_after(t.transfer(&to, Duration::from_secs(60)), 1)
            .await
            .is_none()
    );
    assert!(t.is_lost(), "the term reads ended once the transfer began");
    drop(t);
    candidate(&b, "c").campaign().await.expect("c wins at once");
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn a_second_resign_waits_for_the_first_and_shares_its_outcome() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let (r1, r2) = tokio::join!(t.resign(), t.resign());
    r1.expect("first");
    r2.expect("second");
    let releases = b
        .history()
        .iter()
        .filter(|e| matches!(e, Event::Release { .. }))
        .count();
    assert_eq!(releases, 1);
}

#[tokio::test(start_paused = true)]
async fn a_claim_lost_before_its_term_begins_is_never_handed_out() {
    let b = MemoryBackend::new();
    // Claims expire the instant they are won: zombies.
    b.set_lease(Some(Duration::ZERO));
    let a = candidate(&b, "a");
    assert!(
        a.try_campaign().await.expect("try").is_none(),
        "a zombie term was handed out"
    );
    assert!(
        a.campaign_timeout(Duration::from_millis(50))
            .await
            .expect("bounded")
            .is_none()
    );
    let zombies = b
        .history()
        .iter()
        .filter(|e| matches!(e, Event::Won { .. }))
        .count();
    assert!(zombies >= 2, "the campaign started new attempts");
    assert!(
        closes(&b)
            .iter()
            .all(|e| *e == End::Lost || *e == End::NeverWon)
    );
    b.set_lease(None);
    let t = a.campaign().await.expect("a real term");
    assert!(!t.is_lost());
    b.check_rules(false).expect("rules");
}

#[tokio::test(start_paused = true)]
async fn a_term_whose_validity_ran_out_counts_as_lost() {
    let b = MemoryBackend::new();
    b.set_lease(Some(Duration::from_secs(10)));
    let t = candidate(&b, "a").campaign().await.expect("win");
    assert_eq!(
        t.valid_until(),
        Some(tokio::time::Instant::now() + Duration::from_secs(10))
    );
    assert!(!t.is_lost());
    // Nothing renews: lost() resolves at the deadline, on the core's clock.
    let lost = t.lost().await;
    assert!(matches!(lost.reason, LossReason::Expired));
    assert!(tokio::time::Instant::now() >= t.valid_until().expect("deadline"));
    assert!(t.is_lost());
    assert!(matches!(t.resign().await, Err(Error::Lost(_))));
    assert!(
        !b.history()
            .iter()
            .any(|e| matches!(e, Event::Release { .. }))
    );
}

#[tokio::test]
async fn lead_cancels_the_work_the_moment_the_term_is_lost() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let spawned_dropped = std::sync::Arc::new(tokio::sync::Notify::new());
    let notify = spawned_dropped.clone();
    let b2 = b.clone();
    let result = t.lead(LeadOptions::default(), |leadership| async move {
        struct OnDrop(std::sync::Arc<tokio::sync::Notify>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.notify_one();
            }
        }
        leadership.spawn(async move {
            let _guard = OnDrop(notify);
            std::future::pending::<()>().await;
        });
        tx.send(()).expect("signal");
        std::future::pending::<u32>().await
    });
    let revoke = async move {
        rx.await.expect("work started");
        assert!(b2.revoke("jobs"));
    };
    let (result, ()) = tokio::join!(result, revoke);
    assert!(matches!(result, Err(Error::Lost(_))), "{result:?}");
    spawned_dropped.notified().await;
    assert!(
        !b.history()
            .iter()
            .any(|e| matches!(e, Event::Release { .. }))
    );
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn lead_releases_only_after_spawned_work_drained() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (l1, b1) = (log.clone(), b.clone());
    let out = t
        .lead(LeadOptions::default(), |leadership| async move {
            let l2 = l1.clone();
            let b2 = b1.clone();
            leadership.spawn(async move {
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                // Still leading while the spawned work runs.
                assert!(b2.holder("jobs").is_some());
                l2.lock().expect("log").push("spawned done");
            });
            l1.lock().expect("log").push("work done");
            7
        })
        .await
        .expect("lead");
    assert_eq!(out, 7);
    assert_eq!(*log.lock().expect("log"), ["work done", "spawned done"]);
    assert!(b.holder("jobs").is_none(), "released after draining");
    b.check_rules(true).expect("rules");
}

#[tokio::test(start_paused = true)]
async fn lead_bounds_the_drain() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let options = LeadOptions::default()
        .with_drain_timeout(Duration::from_secs(2))
        .expect("options");
    let r = t
        .lead(options, |leadership| async move {
            leadership.spawn(std::future::pending());
        })
        .await;
    assert!(matches!(r, Err(Error::DrainTimedOut { .. })), "{r:?}");
    assert!(b.holder("jobs").is_none());
    assert!(
        LeadOptions::default()
            .with_drain_timeout(Duration::from_secs(7200))
            .is_err()
    );
}

#[tokio::test]
async fn a_term_is_a_lease_for_other_tasks() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    let lease = t.lease();
    assert_eq!(lease.epoch(), t.epoch());
    assert_eq!(lease.identity().as_str(), "a");
    assert_eq!(lease.valid_until(), None);
    let waiter = tokio::spawn(async move { lease.lost().await });
    b.revoke("jobs");
    let lost = waiter.await.expect("join");
    assert_eq!(lost.epoch, t.epoch());
}

#[tokio::test]
async fn ended_and_lost_resolve_on_resign_with_the_end_as_reason() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    t.resign().await.expect("resign");
    t.ended().await;
    assert!(t.is_lost(), "a resigned term reads lost (issue 11, item 4)");
    let lost = t.lost().await;
    assert!(matches!(lost.reason, LossReason::Resigned), "{lost:?}");
    assert!(lost.reason.is_end());
}

#[tokio::test(start_paused = true)]
async fn a_waiting_campaign_rides_out_an_unavailable_backend() {
    let b = MemoryBackend::new();
    let a = candidate(&b, "a");
    b.fail(Step::TryClaim, 1);
    assert!(
        matches!(a.try_campaign().await, Err(Error::Unavailable { .. })),
        "try_campaign reports it"
    );
    b.fail(Step::Open, 2);
    b.fail(Step::TryClaim, 3);
    let t = a
        .campaign()
        .await
        .expect("resumes when the backend is back");
    t.resign().await.expect("resign");
    b.fail(Step::TryClaim, 1000);
    let bounded = a
        .campaign_timeout(Duration::from_secs(2))
        .await
        .expect("bounded");
    assert!(
        bounded.is_none(),
        "a bounded campaign gives up at its deadline"
    );
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn a_cancelled_resign_can_be_retried_and_a_drop_still_frees_the_claim() {
    let b = MemoryBackend::new();
    let t = candidate(&b, "a").campaign().await.expect("win");
    // Cancel the resign at its first await point (inside release).
    assert!(
        election_testkit::conformance::cancel_after(t.resign(), 1)
            .await
            .is_none()
    );
    assert!(b.holder("jobs").is_some(), "the release did not run");
    t.resign().await.expect("a later resign finishes the job");
    assert!(b.holder("jobs").is_none());
    let t = candidate(&b, "a").campaign().await.expect("win again");
    assert!(
        election_testkit::conformance::cancel_after(t.resign(), 1)
            .await
            .is_none()
    );
    drop(t);
    assert!(
        b.holder("jobs").is_none(),
        "dropping the term gave the claim up"
    );
    b.check_rules(true).expect("rules");
}

#[tokio::test]
async fn leader_says_since_when_the_term_leads() {
    let b = MemoryBackend::new();
    let a = candidate(&b, "a");
    let observer = candidate(&b, "observer");
    let before = std::time::SystemTime::now();
    let term = a.campaign().await.expect("a wins");
    let after = std::time::SystemTime::now();
    let seen = observer.leader().await.expect("leader").expect("a leads");
    assert_eq!(seen.epoch, term.epoch());
    let since = seen.since.expect("the memory backend knows when");
    assert!(
        before <= since && since <= after,
        "{since:?} not within the campaign [{before:?}, {after:?}]"
    );
    assert_eq!(
        observer.leader().await.expect("leader"),
        Some(seen),
        "stable for the term"
    );
    term.resign().await.expect("resign");
}
