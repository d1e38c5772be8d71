//! A key that is busy on a 3-node cluster: while another write naming the
//! key is being proposed, the stream's leader refuses a compare-and-set of
//! it with the constant "wrong last sequence" (10164) without checking the
//! revision. CI saw it once: a term won over a handover's age-out marker
//! was resigned at once, the delete was refused twice while the marker's
//! proposal was in flight, and `resign` reported `NotHeld` over the
//! term's own live record. The term's writes send such a refusal again
//! after a pause; only a refusal that outlasts the pauses counts.

use std::time::Duration;

use election_core::Error;
use election_nats::{NatsElection, NatsOptions};
use nats_testkit::Cluster;

/// Keeps `key` busy for `busy`: writes to another key, each expecting
/// `key`'s last revision to be `revision` (the server's
/// `Nats-Expected-Last-Subject-Sequence-Subject`), sent back to back
/// without waiting for their answers. While one is proposed, the leader
/// refuses every other write that names `key` in its expectation; none
/// of them changes `key`. Returns how many were sent.
async fn keep_busy(client: async_nats::Client, key: &str, revision: u64, busy: Duration) -> u64 {
    let js = async_nats::jetstream::new(client);
    let until = tokio::time::Instant::now() + busy;
    let mut sent = 0;
    while tokio::time::Instant::now() < until {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            revision.to_string().as_str(),
        );
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence-Subject",
            format!("$KV.elections.{key}").as_str(),
        );
        // The answer is not awaited: the next one follows at once.
        let _ack = js
            .publish_with_headers("$KV.elections.blocker", headers, "b".into())
            .await
            .expect("publish");
        sent += 1;
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    sent
}

/// Keeps the key `busy` busy for 60 ms (at its revision now), from 5 ms
/// before this returns: the writes are being sent.
async fn busy_now(
    election: &NatsElection,
    kv: &async_nats::jetstream::kv::Store,
) -> tokio::task::JoinHandle<u64> {
    let r = kv
        .entry("busy")
        .await
        .expect("read")
        .expect("an entry")
        .revision;
    let busy = tokio::spawn(keep_busy(
        election.client().clone(),
        "busy",
        r,
        Duration::from_millis(60),
    ));
    tokio::time::sleep(Duration::from_millis(5)).await;
    busy
}

/// Ten rounds, each with the key kept busy for 60 ms from just before a
/// commit-point check: every check proves the term (before the fix, a
/// check refused twice while the key was busy lost the term: "the
/// commit-point check found the claim taken"). Then a resign while the
/// key is busy releases it (before the fix: `NotHeld`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_key_is_written_once_the_other_write_is_applied() {
    let cluster = Cluster::start(3).expect("a 3-node cluster");
    let options = NatsOptions::new(Duration::from_secs(15))
        .and_then(|o| o.replicas(3))
        .expect("options");
    let election = NatsElection::connect(&cluster.urls().join(","), options)
        .await
        .expect("connect");
    let term = election
        .candidate("busy", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("a wins");
    let js = async_nats::jetstream::new(election.client().clone());
    let kv = js.get_key_value("elections").await.expect("bucket");
    let mut blocked = 0;
    for round in 0..10 {
        let busy = busy_now(&election, &kv).await;
        let checked = term.confirm().await;
        blocked += busy.await.expect("join");
        assert!(
            checked.is_ok(),
            "round {round}: the check while the key was busy: {checked:?}"
        );
    }
    assert!(blocked > 0);
    let busy = busy_now(&election, &kv).await;
    let resigned = term.resign().await;
    busy.await.expect("join");
    assert!(
        !matches!(resigned, Err(Error::NotHeld { .. })),
        "the resign while the key was busy found it moved on"
    );
    resigned.expect("resign");
    let after = kv.entry("busy").await.expect("read").expect("a marker");
    assert_eq!(
        after.operation,
        async_nats::jetstream::kv::Operation::Delete
    );
}
