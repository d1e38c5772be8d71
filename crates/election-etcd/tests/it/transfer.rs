//! Issue 45 (ADR 0112): a transfer on etcd, beyond the conformance cases
//! (which run on the shared member): the whole story on a 3-member
//! cluster, a waiting successor woken by the handover (not its poll), and
//! a waiting candidate that wins when the handover's lease ends the
//! window (its wait watches the handover key, not its poll).

use std::time::Duration;

use election_core::{Election, Identity};
use tokio::time::Instant;

use crate::common::{open, prefix, shared, within};

/// A long poll interval: a candidate that wins sooner was woken by a
/// watch.
const POLL: Duration = Duration::from_secs(30);

/// On `endpoints`: a request reaches the holder; the holder hands over to
/// the successor it named; a waiting candidate and a fresh one do not win
/// meanwhile; readers show the handover and nobody leading; the successor
/// wins above the old epoch; when it resigns, the waiting one wins.
async fn the_name_goes_to_the_successor(endpoints: &str) {
    let prefix = prefix("transfer-story");
    let election = open(endpoints, &prefix).await;
    let a = election.candidate("jobs", "a").expect("candidate");
    let term = within("a wins", a.campaign()).await.expect("a wins");
    let old = term.epoch();
    let c = election
        .candidate("jobs", "c")
        .expect("candidate")
        .with_poll_interval(POLL)
        .expect("poll");
    let waiting = tokio::spawn(async move { c.campaign().await });
    let (b, ops) = (Identity::new("b").unwrap(), Identity::new("ops").unwrap());
    let asked = Election::request_transfer(&election, "jobs", &b, &ops)
        .await
        .expect("request")
        .expect("a term held the name");
    assert_eq!(asked.epoch, old);
    let heard = within("a hears the request", term.transfer_requested()).await;
    assert_eq!((heard.to.as_str(), heard.by.as_str()), ("b", "ops"));
    term.transfer(&heard.to, Duration::from_secs(60))
        .await
        .expect("a hands over");
    let d = election.candidate("jobs", "d").expect("candidate");
    assert!(
        d.try_campaign().await.expect("d's try").is_none(),
        "d won a name reserved for b"
    );
    assert_eq!(election.leader("jobs").await.expect("leader"), None);
    let shown = Election::handover(&election, "jobs")
        .await
        .expect("read")
        .expect("the handover shown");
    assert_eq!(
        (shown.from.as_str(), shown.to.as_str(), shown.epoch),
        ("a", "b", old)
    );
    assert_eq!(
        Election::request_transfer(&election, "jobs", &b, &ops)
            .await
            .expect("request"),
        None,
        "a request stored while nobody leads"
    );
    let began = Instant::now();
    let next = within(
        "b wins",
        election
            .candidate("jobs", "b")
            .expect("candidate")
            .campaign(),
    )
    .await
    .expect("b wins");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "b waited {:?}",
        began.elapsed()
    );
    assert!(next.epoch() > old);
    assert!(!waiting.is_finished(), "c won a name reserved for b");
    assert_eq!(
        Election::handover(&election, "jobs").await.expect("read"),
        None
    );
    next.resign().await.expect("b resigns");
    let third = within("c after b", waiting)
        .await
        .expect("join")
        .expect("c wins");
    assert!(third.epoch() > next.epoch());
    third.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_goes_to_the_successor_on_one_member() {
    the_name_goes_to_the_successor(&shared()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_goes_to_the_successor_on_a_cluster() {
    let cluster = etcd_testkit::Cluster::start(3).expect("an etcd cluster");
    the_name_goes_to_the_successor(&cluster.endpoints().join(",")).await;
}

/// The successor waits (its poll interval 30 s) before the handover: the
/// handover's delete of the election key wakes it, and it wins at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_successor_is_woken_by_the_handover() {
    let election = open(&shared(), &prefix("transfer-woken")).await;
    let term = within(
        "a wins",
        election.candidate("jobs", "a").unwrap().campaign(),
    )
    .await
    .expect("a wins");
    let b = election
        .candidate("jobs", "b")
        .unwrap()
        .with_poll_interval(POLL)
        .expect("poll");
    let waiting = tokio::spawn(async move { (b.campaign().await, Instant::now()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    term.transfer(&Identity::new("b").unwrap(), Duration::from_secs(60))
        .await
        .expect("a hands over");
    let handed = Instant::now();
    let (next, at) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("b wins within 10 s (its poll interval is 30 s)")
        .expect("join");
    let next = next.expect("b wins");
    let after = at.saturating_duration_since(handed);
    assert!(
        after < Duration::from_secs(1),
        "b won {after:?} after the handover"
    );
    assert!(next.epoch() > term.epoch());
    next.resign().await.expect("resign");
}

/// The successor waits behind another candidate in line (both with a 30 s
/// poll interval): the queue wakes only its head, yet the handover to the
/// successor wakes it (its watch of the handover key), and it wins long
/// before its poll; the head wins after the successor resigns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_behind_the_head_is_woken_by_the_handover() {
    let election = open(&shared(), &prefix("transfer-behind")).await;
    let term = within(
        "a wins",
        election.candidate("jobs", "a").unwrap().campaign(),
    )
    .await
    .expect("a wins");
    let waiter = |id: &str| {
        election
            .candidate("jobs", id)
            .unwrap()
            .with_poll_interval(POLL)
            .expect("poll")
    };
    let (c, b) = (waiter("c"), waiter("b"));
    let head = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let behind = tokio::spawn(async move { (b.campaign().await, Instant::now()) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    term.transfer(&Identity::new("b").unwrap(), Duration::from_secs(60))
        .await
        .expect("a hands over");
    let (next, _) = tokio::time::timeout(Duration::from_secs(10), behind)
        .await
        .expect("b wins within 10 s (its poll interval is 30 s)")
        .expect("join");
    let next = next.expect("b wins");
    assert!(!head.is_finished(), "c won a name handed to b");
    next.resign().await.expect("resign");
    let last = within("c after b", head)
        .await
        .expect("join")
        .expect("c wins");
    last.resign().await.expect("resign");
}

/// A window of 3 s to a successor that never comes; the waiting candidate
/// (poll interval 30 s) wins when etcd deletes the handover (its lease),
/// not before the window and not at its poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_candidate_wins_when_the_window_ends() {
    let election = open(&shared(), &prefix("transfer-window")).await;
    let term = within(
        "a wins",
        election.candidate("jobs", "a").unwrap().campaign(),
    )
    .await
    .expect("a wins");
    let c = election
        .candidate("jobs", "c")
        .unwrap()
        .with_poll_interval(POLL)
        .expect("poll");
    let waiting = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let window = Duration::from_secs(3);
    let began = Instant::now();
    term.transfer(&Identity::new("ghost").unwrap(), window)
        .await
        .expect("a hands over");
    let next = within("c wins", waiting)
        .await
        .expect("join")
        .expect("c wins");
    let waited = began.elapsed();
    assert!(
        waited >= window,
        "c won {waited:?} into a {window:?} window"
    );
    assert!(
        waited < window + Duration::from_secs(4),
        "c waited {waited:?}"
    );
    next.resign().await.expect("resign");
}
