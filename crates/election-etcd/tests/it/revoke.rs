//! ADR 0111 on etcd, beyond the conformance case: the revocation's lease
//! lasts the deposed holder's TTL when it is longer than the revoker's
//! (rule 2: nobody wins before the deposed lease could have run out), and
//! the waiting head of the line wins when etcd deletes the revocation key
//! (woken by its watch, not its poll), above the revocation's epoch; and
//! the conformance case on a three-member cluster.

use std::time::Duration;

use election_core::Identity;
use election_etcd::{EtcdElection, EtcdOptions};
use tokio::time::Instant;

use crate::common::{fast, open, prefix, shared, within};

/// A long poll interval: a candidate that wins sooner was woken by a
/// watch.
const POLL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_outlasts_the_deposed_ttl_and_wakes_the_waiter() {
    let endpoint = shared();
    let prefix = prefix("revoke-ttl");
    // The holder's TTL (5 s) is above the revoker's and the waiter's (2 s).
    let long = EtcdOptions::new(Duration::from_secs(5))
        .and_then(|o| o.renew_interval(Duration::from_secs(1)))
        .and_then(|o| o.request_timeout(Duration::from_millis(500)))
        .and_then(|o| o.prefix(&prefix))
        .expect("options");
    let holder = EtcdElection::connect(&endpoint, long)
        .await
        .expect("connect");
    let election = open(&endpoint, &prefix).await;
    assert_eq!(election.options().ttl(), fast(&prefix).ttl());
    let by = Identity::new("ops").expect("identity");
    assert!(
        election
            .revoke("jobs", &by)
            .await
            .expect("revoke")
            .is_none(),
        "a revoke of a name nobody holds"
    );
    let term = within("a wins", holder.candidate("jobs", "a").unwrap().campaign())
        .await
        .expect("a wins");
    let waiter = election
        .candidate("jobs", "b")
        .unwrap()
        .with_poll_interval(POLL)
        .expect("poll");
    let waiting = tokio::spawn(async move { waiter.campaign().await });
    // b in line (its waiter key put) before the revoke.
    let waiters = format!("{prefix}/w/jobs/");
    within("b in line", async {
        while etcd_testkit::gateway::count(&endpoint, waiters.as_bytes()).unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let began = Instant::now();
    let revoked = election
        .revoke("jobs", &by)
        .await
        .expect("revoke")
        .expect("a held the name");
    assert_eq!(revoked.deposed.epoch, term.epoch());
    assert_eq!(revoked.deposed.ttl, Some(Duration::from_secs(5)));
    assert!(revoked.revocation.epoch > term.epoch());
    within("a loses", term.lost()).await;
    assert_eq!(election.leader("jobs").await.expect("leader"), None);
    let shown = election
        .revocation("jobs")
        .await
        .expect("read")
        .expect("shown");
    assert_eq!((shown.by, shown.epoch), (by, revoked.revocation.epoch));
    let next = within("b wins", waiting)
        .await
        .expect("join")
        .expect("b wins");
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(4900),
        "b won {waited:?} after the revoke, before the deposed 5 s lease could have run out"
    );
    assert!(
        waited < Duration::from_secs(9),
        "b waited {waited:?}: not woken by the revocation key's delete"
    );
    assert!(next.epoch() > revoked.revocation.epoch);
    assert_eq!(election.revocation("jobs").await.expect("read"), None);
    next.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_under_a_handover_has_no_term_to_revoke() {
    let prefix = prefix("revoke-handover");
    let election = open(&shared(), &prefix).await;
    let term = within(
        "a wins",
        election.candidate("jobs", "a").unwrap().campaign(),
    )
    .await
    .expect("a wins");
    term.transfer(&Identity::new("b").unwrap(), Duration::from_secs(30))
        .await
        .expect("handed over");
    let by = Identity::new("ops").unwrap();
    assert_eq!(election.revoke("jobs", &by).await.expect("revoke"), None);
    assert_eq!(election.revocation("jobs").await.expect("read"), None);
    // The successor still wins at once: nothing was written.
    let next = within(
        "b wins",
        election.candidate("jobs", "b").unwrap().campaign(),
    )
    .await
    .expect("b wins");
    next.resign().await.expect("resign");
}

/// The conformance case on three members: the revocation's epoch (a
/// revision) is above the holder's and below the next term's there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_is_fenced_and_the_next_term_is_above_it_on_a_cluster() {
    let cluster = etcd_testkit::Cluster::start(3).expect("an etcd cluster");
    let backend = crate::conformance::Etcd::at(cluster.endpoints().join(","));
    election_testkit::conformance::revoke_is_fenced_and_the_next_term_is_above_it(&backend).await;
}
