//! Epochs across a deleted and recreated bucket, a bucket reconfigured
//! under a holder, and the failover grace after an expiry nobody saw,
//! against a real nats-server.

use std::time::Duration;

use election_core::{Epoch, LossReason};
use election_nats::{NatsElection, NatsFence, NatsOptions};
use fencing::{Fence, ResourceName, Token};
use futures::StreamExt;
use nats_testkit::{Cluster, Server};
use tokio::time::Instant;

/// TTL 3 s: renewals every second, a failover grace of one second.
fn options() -> NatsOptions {
    NatsOptions::new(Duration::from_secs(3))
        .expect("options")
        .single_replica_ok(true)
}

/// The bound on anything that should happen within a few TTLs.
const PATIENCE: Duration = Duration::from_secs(60);

async fn connect(server: &Server) -> NatsElection {
    NatsElection::connect(&server.url(), options())
        .await
        .expect("connect")
}

/// Item 8: deleting and recreating the bucket under running candidates
/// restarts its revisions at 1; every epoch won afterwards must still be
/// above every epoch won before, and a fence must refuse the old terms.
#[tokio::test]
async fn epochs_keep_growing_across_a_recreated_bucket() {
    let server = Server::start().expect("nats-server");
    recreated_bucket(&server.url(), 1).await;
}

/// As [`epochs_keep_growing_across_a_recreated_bucket`], with an R3 bucket
/// on a 3-node cluster (the creation time comes from the meta leader).
#[tokio::test]
async fn epochs_keep_growing_across_a_recreated_r3_bucket() {
    let cluster = Cluster::start(3).expect("a 3-node cluster");
    recreated_bucket(&cluster.urls().join(","), 3).await;
}

async fn recreated_bucket(urls: &str, replicas: usize) {
    let options = options().replicas(replicas).expect("replicas");
    let connect = || NatsElection::connect(urls, options.clone());
    let election = connect().await.expect("connect");
    let fence = NatsFence::open(election.client().clone(), "fences", replicas)
        .await
        .expect("fence");
    let resource = ResourceName::new("ledger").expect("resource");

    // Old terms: a few, each fencing the resource.
    let mut old = Vec::new();
    for i in 0..3 {
        let candidate = election
            .candidate("jobs", &format!("old-{i}"))
            .expect("candidate");
        let term = candidate.campaign().await.expect("campaign");
        fence
            .advance(&resource, Token::from_epoch(term.epoch()))
            .await
            .expect("a new term's token is accepted");
        old.push(term.epoch());
        term.resign().await.expect("resign");
    }
    // A holder and a waiting candidate, running while the bucket goes.
    let holder_candidate = election.candidate("jobs", "holder").expect("candidate");
    let holder = holder_candidate.campaign().await.expect("campaign");
    old.push(holder.epoch());
    let waiter_candidate = election.candidate("jobs", "waiter").expect("candidate");
    let waiter = tokio::spawn(async move {
        let term = waiter_candidate.campaign().await.expect("campaign");
        let epoch = term.epoch();
        (waiter_candidate, term, epoch)
    });
    let highest_old = *old.iter().max().expect("old epochs");

    // One store however the servers are listed (in reverse order, or
    // `localhost` for `127.0.0.1`): what `elect run` keys its cgroups by
    // (issue 40).
    let store = election.store_id().expect("store id");
    let mut reversed: Vec<&str> = urls.split(',').collect();
    reversed.reverse();
    let respelled = reversed.join(",").replace("127.0.0.1", "localhost");
    let other = NatsElection::connect(&respelled, options.clone())
        .await
        .expect("connect with the servers respelled");
    assert_eq!(other.store_id().expect("store id"), store, "{respelled}");

    // An operator deletes the bucket; a new process recreates it.
    let js = async_nats::jetstream::new(election.client().clone());
    js.delete_key_value("elections").await.expect("delete");
    let recreated = connect().await.expect("connect");
    // Another incarnation, another store (docs/safety.md: not covered).
    assert_ne!(recreated.store_id().expect("store id"), store);

    // The holder learns its loss; the waiter wins in the new bucket.
    let lost = tokio::time::timeout(PATIENCE, holder.lost())
        .await
        .expect("the holder learns its loss");
    assert!(matches!(
        lost.reason,
        LossReason::Revoked { .. } | LossReason::Expired
    ));
    let (_waiter_candidate, waiter_term, new_epoch) = tokio::time::timeout(PATIENCE, waiter)
        .await
        .expect("the waiter wins in the recreated bucket")
        .expect("task");
    assert!(
        new_epoch > highest_old,
        "the recreated bucket's first term got epoch {new_epoch}, not above the old epochs {old:?}"
    );
    assert!(new_epoch.is_term());
    fence
        .advance(&resource, Token::from_epoch(new_epoch))
        .await
        .expect("the new term's token is accepted");
    for epoch in &old {
        let refused = fence.advance(&resource, Token::from_epoch(*epoch)).await;
        assert!(
            matches!(refused, Err(fencing::Error::Stale { .. })),
            "an old term's token {epoch} is refused after the new term's: {refused:?}"
        );
    }
    waiter_term.resign().await.expect("resign");

    // The old holder campaigns again: above everything too.
    let again = tokio::time::timeout(PATIENCE, holder_candidate.campaign())
        .await
        .expect("in time")
        .expect("campaign");
    assert!(
        again.epoch() > new_epoch,
        "{} after {new_epoch}",
        again.epoch()
    );
    again.resign().await.expect("resign");
}

/// Item 9: the bucket's max age shortened below the TTL the holder counts
/// with (here 2 s under a TTL of 3 s: renewals every second still keep the
/// key alive, but the holder's validity of 2.7 s outlives the server's
/// expiry). The holder must report the loss.
#[tokio::test]
async fn a_max_age_shortened_under_the_holder_loses_the_term() {
    let server = Server::start().expect("nats-server");
    let election = connect(&server).await;
    let candidate = election.candidate("jobs", "holder").expect("candidate");
    let term = candidate.campaign().await.expect("campaign");

    let js = async_nats::jetstream::new(election.client().clone());
    let mut stream = js.get_stream("KV_elections").await.expect("stream");
    let mut config = stream.info().await.expect("info").config.clone();
    config.max_age = Duration::from_secs(2);
    config.duplicate_window = config.duplicate_window.min(config.max_age);
    js.update_stream(&config).await.expect("update the max age");

    let lost = tokio::time::timeout(Duration::from_secs(15), term.lost())
        .await
        .expect("the holder did not report a loss within 15 s of the max age shortening");
    assert!(
        matches!(&lost.reason, LossReason::Revoked { detail } if detail.contains("max age")),
        "{lost:?}"
    );
}

/// Item 11: a holder that died (it wrote the key and never renewed) and
/// expired while no candidate was running. A fresh process arriving after
/// the server's TTL marker must still wait the failover grace: it never
/// saw a clean release, so the dead holder may have been acting until
/// just now.
#[tokio::test]
async fn a_fresh_candidate_after_an_unseen_expiry_waits_the_grace() {
    let server = Server::start().expect("nats-server");
    let election = connect(&server).await;
    let grace = election.options().grace();
    assert!(!grace.is_zero());

    // The dead holder's last write, then its expiry (the TTL marker).
    let js = async_nats::jetstream::new(election.client().clone());
    let kv = js.get_key_value("elections").await.expect("bucket");
    let mut watch = kv.watch("jobs").await.expect("watch");
    let value = "election-nats/1\nidentity=dead-holder\nnonce=7\n";
    kv.put("jobs", value.into()).await.expect("put");
    tokio::time::timeout(PATIENCE, async {
        while let Some(entry) = watch.next().await {
            if entry.expect("entry").operation == async_nats::jetstream::kv::Operation::Purge {
                return;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("the TTL marker in time");

    // A fresh process, after the marker.
    let fresh = connect(&server).await;
    let candidate = fresh.candidate("jobs", "fresh").expect("candidate");
    let start = Instant::now();
    let term = tokio::time::timeout(PATIENCE, candidate.campaign())
        .await
        .expect("in time")
        .expect("campaign");
    let took = start.elapsed();
    assert!(
        took >= grace,
        "the fresh candidate's term began {took:?} after it started, before the failover grace {grace:?}"
    );
    assert!(term.epoch() > Epoch::UNGUARDED);
    term.resign().await.expect("resign");
}

/// The base of epochs (the stream's creation time) must survive a server
/// restart: else every restart would look like a recreated bucket and end
/// every term.
#[tokio::test]
async fn a_server_restart_keeps_the_buckets_creation_time() {
    let mut server = Server::start().expect("nats-server");
    let created = |client: async_nats::Client| async move {
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream("KV_elections").await.expect("stream");
        stream.info().await.expect("info").created
    };
    let election = connect(&server).await;
    let before = created(election.client().clone()).await;
    drop(election);
    server.kill().expect("kill");
    server.restart().expect("restart");
    let election = connect(&server).await;
    let after = created(election.client().clone()).await;
    assert_eq!(
        before, after,
        "the stream's creation time changed on restart"
    );
}

/// The stream's last sequence: the revision of the bucket's latest write.
async fn last_revision(js: &async_nats::jetstream::Context) -> u64 {
    let mut stream = js.get_stream("KV_elections").await.expect("stream");
    stream.info().await.expect("info").state.last_sequence
}

/// Torture seed 72883767153617253 (nats): a candidate that resigned keeps
/// the revision of its release marker, to claim the key again expecting
/// it with no failover grace. A recreated bucket restarts its revisions
/// at 1, so that revision may later be a live holder's entry there: the
/// next campaign must not take the key over from it.
#[tokio::test]
async fn a_release_before_a_recreated_bucket_does_not_take_over_a_holder_in_it() {
    let server = Server::start().expect("nats-server");
    let election = connect(&server).await;
    let js = async_nats::jetstream::new(election.client().clone());
    let kv = js.get_key_value("elections").await.expect("bucket");
    // Old revisions above the ones the new bucket's holder starts with.
    for _ in 0..8 {
        kv.put("filler", "x".into()).await.expect("put");
    }
    let resigner = election.candidate("jobs", "resigner").expect("candidate");
    let term = resigner.campaign().await.expect("campaign");
    term.resign().await.expect("resign");
    let marker = last_revision(&js).await;

    // An operator deletes the bucket; a process recreates it.
    js.delete_key_value("elections").await.expect("delete");
    let _recreated = connect(&server).await;

    // A holder in the new bucket, on the same connection (which so learns
    // the new incarnation), its key brought to the old marker's revision.
    let holder = election.candidate("jobs", "holder").expect("candidate");
    let held = tokio::time::timeout(PATIENCE, holder.campaign())
        .await
        .expect("in time")
        .expect("campaign");
    let kv = js.get_key_value("elections").await.expect("bucket");
    assert!(
        last_revision(&js).await < marker,
        "the old bucket's marker is too low"
    );
    while last_revision(&js).await < marker - 1 {
        kv.put("filler", "x".into()).await.expect("put");
    }
    held.confirm().await.expect("the holder's key rewritten");
    let entry = kv
        .entry("jobs")
        .await
        .expect("read")
        .expect("the holder's key");
    assert_eq!(
        entry.revision, marker,
        "the key is at the old marker's revision"
    );

    // The candidate that resigned before the bucket went tries once.
    let again = resigner.try_campaign().await.expect("try campaign");
    assert!(
        again.is_none(),
        "took the key over from the live holder in term {} with the revision of a release in the old bucket",
        held.epoch()
    );
    assert!(!held.is_lost(), "the holder keeps its term");
    held.resign().await.expect("resign");
}
