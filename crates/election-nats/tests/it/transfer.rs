//! Issue 45 (ADR 0112): a transfer on NATS, beyond the conformance cases.
//! The handover's record reserves the name for its whole window also when
//! the window is longer than the bucket's max age (the lease TTL): its
//! per-key TTL keeps it. A waiting successor is woken by the handover's
//! write, not by its poll; a waiting candidate whose reservation the
//! server removed claims without the failover grace (the old holder ended
//! its term by the handover, so there is nobody to wait out).

use std::time::Duration;

use election_core::{Election, Identity};
use election_nats::{NatsElection, NatsOptions};
use nats_testkit::{Cluster, Server};
use tokio::time::Instant;

/// TTL 3 s (renewal every 1 s, failover grace 1 s).
fn options(replicas: usize) -> NatsOptions {
    NatsOptions::new(Duration::from_secs(3))
        .and_then(|o| o.replicas(replicas))
        .expect("options")
        .single_replica_ok(true)
}

/// A window of 8 s over a bucket whose max age is 3 s: 4.5 s after the
/// handover (the max age and a TTL marker past) a fresh candidate still
/// finds the name reserved and the handover shown; the successor then
/// wins at once. A record left to the bucket's max age would be gone, and
/// the fresh candidate would win.
async fn a_handover_outlives_the_lease_ttl(urls: &str, replicas: usize) {
    let election = NatsElection::connect(urls, options(replicas))
        .await
        .expect("connect");
    let term = election
        .candidate("long", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let old = term.epoch();
    let b = Identity::new("b").expect("identity");
    term.transfer(&b, Duration::from_secs(8))
        .await
        .expect("a hands over");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let tried = election
        .candidate("long", "d")
        .expect("candidate")
        .try_campaign()
        .await
        .expect("d's try");
    assert!(
        tried.is_none(),
        "d won a name reserved for b, 4.5 s into an 8 s window (the bucket's max age is 3 s)"
    );
    let shown = Election::handover(&election, "long")
        .await
        .expect("read")
        .expect("the handover still shown");
    assert_eq!((shown.to.as_str(), shown.epoch), ("b", old));
    let began = Instant::now();
    let next = election
        .candidate("long", "b")
        .expect("candidate")
        .campaign()
        .await
        .expect("b wins");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "b waited {:?}",
        began.elapsed()
    );
    assert!(next.epoch() > old);
    next.resign().await.expect("resign");
}

/// The successor waits (its poll interval 30 s) before the handover: the
/// handover's write wakes it, and it wins well within a second.
async fn a_waiting_successor_is_woken_by_the_handover(urls: &str, replicas: usize) {
    let election = NatsElection::connect(urls, options(replicas))
        .await
        .expect("connect");
    let term = election
        .candidate("woken", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let b = election
        .candidate("woken", "b")
        .expect("candidate")
        .with_poll_interval(Duration::from_secs(30))
        .expect("poll");
    let waiting = tokio::spawn(async move {
        let term = b.campaign().await;
        (term, Instant::now())
    });
    // b tries once, queues and watches the key.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let successor = Identity::new("b").expect("identity");
    term.transfer(&successor, Duration::from_secs(60))
        .await
        .expect("a hands over");
    let handed = Instant::now();
    let (next, won_at) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("b wins within 10 s (its poll interval is 30 s)")
        .expect("join");
    let next = next.expect("b wins");
    let after = won_at.saturating_duration_since(handed);
    assert!(
        after < Duration::from_secs(1),
        "b won {after:?} after the handover"
    );
    assert!(next.epoch() > term.epoch());
    next.resign().await.expect("resign");
}

/// A window of 2 s to a successor that never comes, with a TTL of 6 s
/// (failover grace 2 s): the waiting candidate wins when the window ends,
/// without the grace after it.
async fn the_end_of_a_window_is_a_clean_vacancy(urls: &str, replicas: usize) {
    let options = NatsOptions::new(Duration::from_secs(6))
        .and_then(|o| o.replicas(replicas))
        .expect("options")
        .single_replica_ok(true);
    let grace = options.grace();
    let election = NatsElection::connect(urls, options).await.expect("connect");
    let term = election
        .candidate("clean", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let c = election.candidate("clean", "c").expect("candidate");
    let waiting = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let window = Duration::from_secs(2);
    let began = Instant::now();
    term.transfer(&Identity::new("ghost").expect("identity"), window)
        .await
        .expect("a hands over");
    let next = waiting.await.expect("join").expect("c wins");
    let waited = began.elapsed();
    assert!(
        waited >= window,
        "c won {waited:?} into a {window:?} window"
    );
    assert!(
        waited < window + grace / 2,
        "c won {waited:?} after the handover: the failover grace ({grace:?}) was waited out"
    );
    next.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_a_handover_outlives_the_lease_ttl() {
    let server = Server::start().expect("nats-server");
    a_handover_outlives_the_lease_ttl(&server.url(), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_handover_outlives_the_lease_ttl() {
    let cluster = Cluster::start(3).expect("a 3-node cluster");
    a_handover_outlives_the_lease_ttl(&cluster.urls().join(","), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_a_waiting_successor_is_woken_by_the_handover() {
    let server = Server::start().expect("nats-server");
    a_waiting_successor_is_woken_by_the_handover(&server.url(), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_waiting_successor_is_woken_by_the_handover() {
    let cluster = Cluster::start(3).expect("a 3-node cluster");
    a_waiting_successor_is_woken_by_the_handover(&cluster.urls().join(","), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_the_end_of_a_window_is_a_clean_vacancy() {
    let server = Server::start().expect("nats-server");
    the_end_of_a_window_is_a_clean_vacancy(&server.url(), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_the_end_of_a_window_is_a_clean_vacancy() {
    let cluster = Cluster::start(3).expect("a 3-node cluster");
    the_end_of_a_window_is_a_clean_vacancy(&cluster.urls().join(","), 3).await;
}
