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
use futures::StreamExt;
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

/// What the window cases start from: `a` holds `name` on a bucket of TTL
/// 6 s (failover grace 2 s) and `c` has campaigned behind it for half a
/// second. Returns the election, a's term, c's campaign and the grace.
async fn a_holds_and_c_waits(
    urls: &str,
    replicas: usize,
    name: &str,
) -> (NatsElection, Held, tokio::task::JoinHandle<Won>, Duration) {
    let options = NatsOptions::new(Duration::from_secs(6))
        .and_then(|o| o.replicas(replicas))
        .expect("options")
        .single_replica_ok(true);
    let grace = options.grace();
    let election = NatsElection::connect(urls, options).await.expect("connect");
    let term = election
        .candidate(name, "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let c = election.candidate(name, "c").expect("candidate");
    let waiting = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    (election, term, waiting, grace)
}

/// A term on NATS.
type Held = election_core::Term<election_nats::NatsClaim>;

/// A campaign's outcome on NATS.
type Won = Result<Held, election_core::Error>;

/// A window of 2 s to a successor that never comes, with a TTL of 6 s
/// (failover grace 2 s): the waiting candidate wins when the window ends,
/// without the grace after it.
async fn the_end_of_a_window_is_a_clean_vacancy(urls: &str, replicas: usize) {
    let (_election, term, waiting, grace) = a_holds_and_c_waits(urls, replicas, "clean").await;
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

/// An operator's purge of the key 0.5 s into a handover's 20 s window (a
/// client's purge, not the server's removal at the window's end): the
/// waiting candidate must not take it for the handover's removal and
/// claim at once. It waits the failover grace, as after any purge: a
/// purge rolls up entries a watch may not have delivered yet (a term that
/// followed the handover), so it says nothing of who ended what.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_by_hand_after_a_handover_is_waited_out() {
    let server = Server::start().expect("nats-server");
    let (election, term, waiting, grace) = a_holds_and_c_waits(&server.url(), 1, "purged").await;
    term.transfer(
        &Identity::new("ghost").expect("identity"),
        Duration::from_secs(20),
    )
    .await
    .expect("a hands over");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let js = async_nats::jetstream::new(election.client().clone());
    let kv = js.get_key_value("elections").await.expect("bucket");
    kv.purge("purged").await.expect("the operator's purge");
    let purged = Instant::now();
    let next = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("c wins in time")
        .expect("join")
        .expect("c wins");
    let waited = purged.elapsed();
    assert!(
        waited >= grace,
        "c won {waited:?} after a purge by hand: taken for the handover's removal, without the failover grace ({grace:?})"
    );
    next.resign().await.expect("resign");
}

/// Torture seed 3111633520608784901 (nats, 30 candidates): the successor's
/// process last learned the bucket's incarnation before the bucket was
/// deleted and recreated. Its claim over the handover lands, but carries
/// the old base, so the incarnation check refuses it as its epoch. The
/// successor must rewrite its own record with the new base, keeping the
/// name: a purge of its write instead (and a claim again) opened the name
/// to a waiting third candidate inside the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_with_a_stale_incarnation_keeps_the_name() {
    let server = Server::start().expect("nats-server");
    let options = NatsOptions::new(Duration::from_secs(3))
        .expect("options")
        .single_replica_ok(true);
    // The successor's process: its connection learns the bucket now.
    let successor = NatsElection::connect(&server.url(), options.clone())
        .await
        .expect("connect");
    let b = successor.candidate("stale", "b").expect("candidate");
    // An operator deletes the bucket; another process recreates it.
    let js = async_nats::jetstream::new(successor.client().clone());
    js.delete_key_value("elections").await.expect("delete");
    let holder = NatsElection::connect(&server.url(), options)
        .await
        .expect("connect");
    let term = holder
        .candidate("stale", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let kv = js.get_key_value("elections").await.expect("bucket");
    let mut watch = kv.watch("stale").await.expect("watch");
    term.transfer(
        &Identity::new("b").expect("identity"),
        Duration::from_secs(20),
    )
    .await
    .expect("a hands over");
    let next = tokio::time::timeout(Duration::from_secs(30), b.campaign())
        .await
        .expect("b wins in time")
        .expect("b wins");
    assert!(next.epoch() > term.epoch());
    // Every entry from the handover to b's term: never a vacancy.
    let latest = kv
        .entry("stale")
        .await
        .expect("read")
        .expect("b's record")
        .revision;
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the watch delivers up to b's record")
    {
        let entry = entry.expect("entry");
        assert_eq!(
            entry.operation,
            async_nats::jetstream::kv::Operation::Put,
            "the name was vacant at revision {} inside the successor's window",
            entry.revision
        );
        if entry.revision >= latest {
            break;
        }
    }
    next.resign().await.expect("resign");
}

/// The stream's consumers: the watches the server keeps for the bucket.
async fn consumers(election: &NatsElection) -> usize {
    let js = async_nats::jetstream::new(election.client().clone());
    let mut stream = js.get_stream("KV_elections").await.expect("stream");
    stream.info().await.expect("info").state.consumer_count
}

/// Issue 42: ten terms held through one connection follow their transfer
/// requests through one consumer of the bucket (a consumer per held term
/// was 10,000 consumers for 10,000 names), and each term hears its own
/// requests only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terms_of_one_connection_share_one_request_watch() {
    let server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), options(1))
        .await
        .expect("connect");
    let mut terms = Vec::new();
    for i in 0..10 {
        let term = election
            .candidate(&format!("shared-{i}"), "a")
            .expect("candidate")
            .campaign()
            .await
            .expect("a wins");
        terms.push(term);
    }
    let (to, by) = (
        Identity::new("b").expect("identity"),
        Identity::new("ops").expect("identity"),
    );
    for (i, term) in terms.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        Election::request_transfer(&election, &format!("shared-{i}"), &to, &by)
            .await
            .expect("request")
            .expect("a term held the name");
        let heard = tokio::time::timeout(Duration::from_secs(30), term.transfer_requested())
            .await
            .expect("the holder hears its request");
        assert_eq!(heard.epoch, term.epoch());
    }
    for (i, term) in terms.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        assert_eq!(
            term.transfer_request(),
            None,
            "shared-{i} heard another's request"
        );
    }
    let watches = consumers(&election).await;
    assert!(
        watches <= 1,
        "{watches} consumers of the bucket for the requests of 10 terms of one connection"
    );
    for term in terms {
        term.resign().await.expect("resign");
    }
}

/// The connection's one request watch goes with a deleted bucket (its
/// consumer deleted without a word); a term won in the recreated bucket
/// through the same connection still hears a transfer request: the watch
/// falls silent, is made again, and the followed keys are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_a_term_after_the_bucket_was_recreated() {
    let server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), options(1))
        .await
        .expect("connect");
    let a = election.candidate("again", "a").expect("candidate");
    let term = a.campaign().await.expect("a wins");
    let (to, by) = (
        Identity::new("b").expect("identity"),
        Identity::new("ops").expect("identity"),
    );
    Election::request_transfer(&election, "again", &to, &by)
        .await
        .expect("request")
        .expect("a term held the name");
    tokio::time::timeout(Duration::from_secs(30), term.transfer_requested())
        .await
        .expect("the holder hears the request");
    let js = async_nats::jetstream::new(election.client().clone());
    js.delete_key_value("elections").await.expect("delete");
    let _recreated = NatsElection::connect(&server.url(), options(1))
        .await
        .expect("connect");
    tokio::time::timeout(Duration::from_secs(30), term.lost())
        .await
        .expect("the holder learns its loss");
    let again = tokio::time::timeout(Duration::from_secs(30), a.campaign())
        .await
        .expect("in time")
        .expect("a wins again");
    Election::request_transfer(&election, "again", &to, &by)
        .await
        .expect("request")
        .expect("a term held the name");
    let heard = tokio::time::timeout(Duration::from_secs(30), again.transfer_requested())
        .await
        .expect("the new term hears the request in the recreated bucket");
    assert_eq!(heard.epoch, again.epoch());
    again.resign().await.expect("resign");
}
