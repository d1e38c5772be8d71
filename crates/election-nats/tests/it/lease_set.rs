//! Lease sets against a real nats-server: many keys, one session renewal,
//! takeover on close, the commit-point check, an unreachable coordinator.

use std::time::Duration;

use election_core::Error as CoreError;
use election_nats::{NatsElection, NatsOptions};
use nats_testkit::Server;

const PATIENCE: Duration = Duration::from_secs(30);

fn options() -> NatsOptions {
    NatsOptions::new(Duration::from_secs(3))
        .and_then(|o| o.renew_interval(Duration::from_secs(1)))
        .and_then(|o| o.failover_grace(Duration::from_millis(500)))
        .and_then(|o| o.request_timeout(Duration::from_millis(500)))
        .expect("options")
}

async fn connect(server: &Server) -> NatsElection {
    NatsElection::connect(&server.url(), options())
        .await
        .expect("connect")
}

/// Polls `f` (every few ms) until it holds, failing after PATIENCE.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    tokio::time::timeout(PATIENCE, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("store-{i:03}")).collect()
}

#[tokio::test]
async fn keys_move_to_the_other_set_when_their_holder_closes() {
    let server = Server::start().expect("nats-server");
    let a = connect(&server).await.lease_set("node-a").await.expect("a");
    let b = connect(&server).await.lease_set("node-b").await.expect("b");
    let keys = keys(200);
    for k in &keys {
        assert!(a.ask(k).await.expect("ask a"), "a wins {k}");
    }
    for k in &keys {
        assert!(!b.ask(k).await.expect("ask b"), "b does not win {k}");
        assert_eq!(
            b.holder(k).expect("holder known").identity.as_str(),
            "node-a"
        );
    }
    match b.guard(&keys[0], async |_t| ()).await {
        Err(CoreError::HeldElsewhere { holder, .. }) => {
            assert_eq!(holder.expect("named").identity.as_str(), "node-a")
        }
        other => panic!("expected HeldElsewhere, got {other:?}"),
    }
    let epochs_a: Vec<_> = keys.iter().map(|k| a.epoch(k).expect("epoch")).collect();
    // The guard's token carries the key's epoch.
    let e = a
        .guard(&keys[5], async |t| (t.key().to_string(), t.epoch()))
        .await
        .expect("guard");
    assert_eq!(e, (keys[5].clone(), epochs_a[5]));

    a.close().await;
    assert!(keys.iter().all(|k| !a.held(k)), "held turns false at once");
    // A clean close frees every key at once: b takes them all.
    until("b to hold every key", || keys.iter().all(|k| b.held(k))).await;
    for (k, old) in keys.iter().zip(&epochs_a) {
        let new = b.epoch(k).expect("b's epoch");
        assert!(new > *old, "{k}: epoch {new} after {old}");
        assert!(!a.held(k));
    }
    b.close().await;
}

/// Another process writes the key behind the holder's back (as a takeover
/// from a wrongly judged session would): the guard's commit-point check
/// refuses the write.
#[tokio::test]
async fn a_guard_whose_key_was_taken_is_refused() {
    let server = Server::start().expect("nats-server");
    let election = connect(&server).await;
    let a = election.lease_set("node-a").await.expect("a");
    assert!(a.ask("store-1").await.expect("ask"));
    let js = async_nats::jetstream::new(election.client().clone());
    let kv = js.get_key_value("elections-keys").await.expect("bucket");
    kv.put(
        "store-1",
        "election-nats/1\nidentity=intruder\nnonce=7\n".into(),
    )
    .await
    .expect("intrude");
    let mut wrote = false;
    let r = a.guard("store-1", async |_t| wrote = true).await;
    assert!(!wrote, "the write must not run");
    assert!(
        matches!(
            r,
            Err(CoreError::Lost(_)) | Err(CoreError::HeldElsewhere { .. })
        ),
        "got {r:?}"
    );
    until("held to turn false", || !a.held("store-1")).await;
    a.close().await;
}

/// A stopped server: the guard says "unavailable", not "held elsewhere",
/// and `held` turns false once the lease could have run out.
#[tokio::test]
async fn an_unreachable_coordinator_is_not_another_holder() {
    let mut server = Server::start().expect("nats-server");
    let a = connect(&server).await.lease_set("node-a").await.expect("a");
    assert!(a.ask("store-1").await.expect("ask"));
    server.pause().expect("pause");
    let pid = server.pid().expect("pid");
    until("the server to be stopped", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('T'))
        })
    })
    .await;
    let r = a.guard("store-1", async |_t| ()).await;
    assert!(
        matches!(
            r,
            Err(CoreError::Unavailable { .. }) | Err(CoreError::OutcomeUnknown { .. })
        ),
        "got {r:?}"
    );
    until("the hold to run out", || !a.held("store-1")).await;
    server.resume().expect("resume");
    // Back: the session was lost (aged out or its renewals failed); a new
    // session wins the key again in a new term.
    until("a to hold the key again", || a.held("store-1")).await;
    a.guard("store-1", async |_t| ())
        .await
        .expect("guard after recovery");
    a.close().await;
}

/// On a 3-node cluster with R3 buckets: a holds every key through one
/// node, b waits through another. a's node dies (one that leads neither
/// lease-set stream, so the buckets keep their leaders and their quorum);
/// a's client reconnects to a live node, so a keeps its session and every
/// key (a node's death is not its holder's), b never holds one, and both
/// go on winning new keys through the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_r3_cluster_a_holder_keeps_its_keys_when_its_node_dies() {
    let mut cluster = nats_testkit::Cluster::start(3).expect("cluster");
    let options = options().replicas(3).expect("options");
    let urls = cluster.urls();

    // Create the buckets, then find a node that leads neither stream.
    let setup = NatsElection::connect(&urls[0], options.clone())
        .await
        .expect("connect");
    setup
        .lease_set("setup")
        .await
        .expect("buckets")
        .close()
        .await;
    let js = async_nats::jetstream::new(setup.client().clone());
    let mut leaders = Vec::new();
    for bucket in ["sessions", "keys"] {
        let name = format!("KV_{}-{bucket}", election_nats::DEFAULT_BUCKET);
        let mut stream = js.get_stream(&name).await.expect("stream");
        let info = stream.info().await.expect("stream info");
        let leader = info.cluster.as_ref().and_then(|c| c.leader.clone());
        leaders.push(leader.expect("the R3 stream has a leader"));
    }
    let victim = (0..3)
        .find(|&i| !leaders.iter().any(|l| l == cluster.node(i).name()))
        .expect("two streams lead on at most two of three nodes");
    let other = (victim + 1) % 3;

    let a = NatsElection::connect(&urls[victim], options.clone())
        .await
        .expect("connect a")
        .lease_set("node-a")
        .await
        .expect("a");
    let b = NatsElection::connect(&urls[other], options)
        .await
        .expect("connect b")
        .lease_set("node-b")
        .await
        .expect("b");
    let keys = keys(30);
    for k in &keys {
        assert!(a.ask(k).await.expect("ask a"), "a wins {k}");
    }
    for k in &keys {
        assert!(!b.ask(k).await.expect("ask b"), "b does not win {k}");
    }
    let epochs_a: Vec<_> = keys.iter().map(|k| a.epoch(k).expect("epoch")).collect();
    let exclusive = || {
        for k in &keys {
            assert!(!(a.held(k) && b.held(k)), "{k} held by both");
        }
    };

    drop(setup);
    cluster.kill(victim).expect("kill a's node");
    // Winning a new key takes a live session and a compare-and-set through
    // the cluster: once a has won one, its session lives through another
    // node. (`held` asks about a new key; the sets' loops try to win it.)
    a.held("after-a");
    b.held("after-b");
    tokio::time::timeout(PATIENCE, async {
        while !(a.held("after-a") && b.held("after-b")) {
            exclusive();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("both sets to win a new key after the node's death");
    exclusive();
    for (k, old) in keys.iter().zip(&epochs_a) {
        assert_eq!(a.epoch(k), Some(*old), "{k}: a kept its term");
        assert!(!b.held(k), "{k}: b never held it");
    }
    b.close().await;
    a.close().await;
}

/// Issue 11, item 8, for lease sets: the keys bucket deleted and recreated
/// under a holder (its revisions restart at 1). The holder must lose its
/// keys, and every epoch won afterwards must be above every old one.
#[tokio::test]
async fn a_recreated_keys_bucket_loses_the_keys_and_epochs_keep_growing() {
    let server = Server::start().expect("nats-server");
    let election = connect(&server).await;
    let a = election.lease_set("node-a").await.expect("a");
    let keys = keys(5);
    for k in &keys {
        assert!(a.ask(k).await.expect("ask a"), "a wins {k}");
    }
    let old: Vec<_> = keys.iter().map(|k| a.epoch(k).expect("epoch")).collect();
    let highest_old = *old.iter().max().expect("epochs");

    let js = async_nats::jetstream::new(election.client().clone());
    js.delete_key_value("elections-keys")
        .await
        .expect("delete the keys bucket");
    // A new process recreates it and asks for the same keys.
    let b = connect(&server).await.lease_set("node-b").await.expect("b");
    for k in &keys {
        b.ask(k).await.expect("ask b");
    }
    until("a to lose every key of the old bucket", || {
        keys.iter()
            .all(|k| a.epoch(k).is_none_or(|e| e > highest_old))
    })
    .await;
    until("every key held again", || {
        keys.iter().all(|k| a.held(k) || b.held(k))
    })
    .await;
    for k in &keys {
        let epoch = a.epoch(k).or(b.epoch(k)).expect("an epoch");
        assert!(
            epoch > highest_old,
            "{k}: epoch {epoch} in the recreated bucket, not above the old epochs {old:?}"
        );
        assert!(!(a.held(k) && b.held(k)), "{k} held twice");
    }
    a.close().await;
    b.close().await;
}
