//! The etcd backend's own behaviour: epochs are the winning revision, a
//! release wakes a waiter at once, a key deleted by hand ends the term,
//! compaction under a waiter, URLs through the driver.

use std::time::Duration;

use election_core::Candidate;

use crate::common::{self, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_epoch_is_the_winning_revision_and_grows_across_deletes() {
    let endpoint = common::shared();
    let prefix = common::prefix("epochs");
    let election = common::open(&endpoint, &prefix).await;
    let first = election
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let e1 = first.epoch();
    let leader = election.leader("jobs").await.unwrap().expect("a leader");
    assert_eq!((leader.identity.as_str(), leader.epoch), ("a", e1));
    // Deleted by hand: the holder hears of it, and the next term is higher.
    let key = format!("{prefix}/e/jobs");
    etcd_testkit::gateway::delete(&endpoint, key.as_bytes()).unwrap();
    within("the loss", first.lost()).await;
    let second = election
        .candidate("jobs", "b")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    assert!(second.epoch() > e1);
    // The revision moved on with every write in between.
    assert!(etcd_testkit::gateway::revision(&endpoint).unwrap() >= second.epoch().get_i64());
    second.resign().await.unwrap();
    assert_eq!(election.leader("jobs").await.unwrap(), None);
}

/// `a` leads `jobs`, and `b` campaigns behind it, polling once a minute:
/// only the watch can wake it in time.
async fn held_and_waiting(
    election: &election_etcd::EtcdElection,
) -> (
    election_core::Term<election_etcd::EtcdClaim>,
    tokio::task::JoinHandle<
        Result<election_core::Term<election_etcd::EtcdClaim>, election_core::Error>,
    >,
) {
    let held = common::leads(election, "a").await;
    (held, common::waits(election, "b", Duration::from_secs(60)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_long_before_its_poll() {
    let endpoint = common::shared();
    let election = common::open(&endpoint, &common::prefix("wake")).await;
    let (held, waiting) = held_and_waiting(&election).await;
    // In line (its waiter key written) before the release.
    let waiters = format!("{}/w/jobs/", election.options().key_prefix());
    within("the waiter in line", async {
        while etcd_testkit::gateway::count(&endpoint, waiters.as_bytes()).unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let epoch = held.epoch();
    held.resign().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken by the release, not the poll")
        .unwrap()
        .unwrap();
    assert!(next.epoch() > epoch);
    // Its waiter key went in the transaction that won.
    assert_eq!(
        etcd_testkit::gateway::count(&endpoint, waiters.as_bytes()).unwrap(),
        0
    );
    next.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_history_under_a_waiter_only_wakes_it() {
    let endpoint = common::shared();
    let election = common::open(&endpoint, &common::prefix("compact")).await;
    let held = election
        .candidate("jobs", "a")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let waiter = Candidate::new(election.claim("jobs", "b").unwrap())
        .with_poll_interval(Duration::from_secs(60))
        .unwrap();
    let waiting = tokio::spawn(async move { waiter.campaign().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = etcd_testkit::gateway::revision(&endpoint).unwrap();
    etcd_testkit::gateway::compact(&endpoint, now).unwrap();
    // The holder keeps its term; the waiter wins after the release.
    held.confirm().await.unwrap();
    held.resign().await.unwrap();
    let next = within("the waiter", waiting).await.unwrap().unwrap();
    next.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_opens_through_the_driver() {
    use election_driver::{Driver, Settings};
    let endpoint = common::shared();
    let prefix = common::prefix("url");
    let url = election_etcd::EtcdDriver
        .parse(&format!("{endpoint}/{prefix}"))
        .unwrap();
    assert_eq!(url.shown(), format!("etcd://{endpoint}/{prefix}"));
    let settings = Settings {
        ttl: Some(Duration::from_secs(3)),
        ..Settings::default()
    };
    let opened = url.open(&settings).await.unwrap();
    assert_eq!(opened.kind(), "etcd");
    let claim = opened.claim("jobs", "a").unwrap();
    let term = Candidate::new(claim).campaign().await.unwrap();
    let leader = opened.leader("jobs").await.unwrap().expect("a leader");
    assert_eq!(leader.epoch, term.epoch());
    assert!(opened.store_id().await.unwrap().as_str().contains(&prefix));
    term.resign().await.unwrap();
    // Nothing listens on port 1: a typed error that says to retry.
    let down = election_etcd::EtcdDriver.parse("127.0.0.1:1/x").unwrap();
    let e = down.open(&settings).await.unwrap_err();
    assert!(e.to_string().contains("etcd"), "{e}");
    use election_core::Classify;
    assert_eq!(e.class().disposition, election_core::Disposition::Transient);
}

/// `Election::leaders` (one read-only transaction per 64 names: what
/// `elect run` reads of every slot name before it campaigns) answers as
/// `leader` of each name does, in order, across more than one read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_reads_every_name_as_leader_does_in_order() {
    use election_core::{Election, ElectionName};
    let endpoint = common::shared();
    let election = common::open(&endpoint, &common::prefix("leaders")).await;
    let names: Vec<ElectionName> = (0..70)
        .map(|i| ElectionName::new(format!("n{i}")).unwrap())
        .collect();
    let mut terms = Vec::new();
    for (i, who) in [(0, "a"), (63, "b"), (64, "c"), (69, "d")] {
        let term = election
            .candidate(names[i].as_str(), who)
            .unwrap()
            .campaign()
            .await
            .unwrap();
        terms.push(term);
    }
    let seen = Election::leaders(&election, &names).await.unwrap();
    assert_eq!(seen.len(), names.len());
    for (name, read) in names.iter().zip(&seen) {
        let one = election.leader(name.as_str()).await.unwrap();
        assert_eq!(read, &one, "{name}");
    }
    let held: Vec<(usize, &str)> = seen
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.as_ref().map(|l| (i, l.identity.as_str())))
        .collect();
    assert_eq!(held, [(0, "a"), (63, "b"), (64, "c"), (69, "d")]);
    assert!(Election::leaders(&election, &[]).await.unwrap().is_empty());
    for term in terms {
        term.resign().await.unwrap();
    }
}

/// A release revokes the term's lease (one write; ADR 0114): it deletes
/// the key while the key is still on that lease, never a key another term
/// put on its own lease after this one's was deleted by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_deletes_its_own_term_only() {
    use election_core::{Claim, End};
    let endpoint = common::shared();
    let prefix = common::prefix("release");
    let election = common::open(&endpoint, &prefix).await;
    let a = election.claim("jobs", "a").unwrap();
    let mut attempt = a.open().await.unwrap();
    let won = a.try_claim(&mut attempt).await.unwrap().expect("won");
    // Released: the key went with the lease.
    a.release(&mut attempt).await.unwrap();
    assert_eq!(election.leader("jobs").await.unwrap(), None);
    a.close(attempt, End::Resigned);
    // Won again, deleted by hand, won by b: a's release leaves b's term.
    let mut attempt = a.open().await.unwrap();
    let again = a.try_claim(&mut attempt).await.unwrap().expect("won");
    assert!(again.epoch > won.epoch);
    etcd_testkit::gateway::delete(&endpoint, format!("{prefix}/e/jobs").as_bytes()).unwrap();
    let b = election
        .candidate("jobs", "b")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    a.release(&mut attempt).await.unwrap();
    a.close(attempt, End::Resigned);
    let leader = election.leader("jobs").await.unwrap().expect("b leads");
    assert_eq!((leader.identity.as_str(), leader.epoch), ("b", b.epoch()));
    b.confirm().await.unwrap();
    b.resign().await.unwrap();
}

/// A woken waiter claims on the lease its wait kept alive, without a
/// keep-alive first (ADR 0115). If etcd lost that lease meanwhile (revoked
/// by hand here), etcd refuses the claim's put (`lease not found`): a
/// transient failure, so the campaign closes that attempt and the next
/// one, on a new lease, wins at once (not at the waiter's poll, a minute
/// away, nor a renew interval later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_lease_etcd_lost_wins_at_its_next_try() {
    let endpoint = common::shared();
    let prefix = common::prefix("lost-lease");
    // Renewal every 20 s: an attempt that kept reusing the lost lease
    // would not win within the bound below.
    let options = election_etcd::EtcdOptions::new(Duration::from_secs(60))
        .and_then(|o| o.renew_interval(Duration::from_secs(20)))
        .and_then(|o| o.request_timeout(Duration::from_millis(500)))
        .and_then(|o| o.prefix(&prefix))
        .unwrap();
    let election = election_etcd::EtcdElection::connect(&endpoint, options)
        .await
        .unwrap();
    let (held, waiting) = held_and_waiting(&election).await;
    let waiters = format!("{prefix}/w/jobs/");
    let lease = within("the waiter in line", async {
        loop {
            if let Some(lease) =
                etcd_testkit::gateway::lease_under(&endpoint, waiters.as_bytes()).unwrap()
            {
                return lease;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    etcd_testkit::gateway::revoke_lease(&endpoint, lease).unwrap();
    held.resign().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("won at the next try, not a renew interval later")
        .unwrap()
        .unwrap();
    let leader = election.leader("jobs").await.unwrap().expect("b leads");
    assert_eq!(
        (leader.identity.as_str(), leader.epoch),
        ("b", next.epoch())
    );
    assert!(leader.epoch > held.epoch());
    next.resign().await.unwrap();
}
