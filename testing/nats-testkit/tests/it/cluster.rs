//! A real 3-node cluster: an R3 KV bucket stays readable and writable
//! through the other nodes while the JetStream meta leader's node is down.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use nats_testkit::Cluster;

/// Retries `op` (each try bounded to 5 s) until it succeeds or 30 s pass.
async fn eventually<T, E: Debug, F>(what: &str, mut op: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = match tokio::time::timeout(Duration::from_secs(5), op()).await {
            Ok(Ok(value)) => return value,
            Ok(Err(e)) => format!("{e:?}"),
            Err(_) => "timed out after 5 s".to_owned(),
        };
        assert!(
            Instant::now() < deadline,
            "{what}: still failing after 30 s: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads `key` until it holds `want` (direct gets may be served by a replica
/// that is behind).
async fn read_until(store: &kv::Store, key: &str, want: &str) -> u64 {
    eventually(&format!("read {key} = {want}"), || async {
        match store.entry(key).await.map_err(|e| e.to_string())? {
            Some(entry) if entry.value == want.as_bytes() => Ok(entry.revision),
            other => Err(format!("got {other:?}")),
        }
    })
    .await
}

#[tokio::test]
async fn r3_bucket_survives_losing_the_meta_leader() {
    let mut cluster = Cluster::start(3).expect("start cluster");
    assert_eq!(cluster.urls().len(), 3);
    let names: Vec<&str> = cluster.nodes().iter().map(|n| n.name()).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);

    let leader = cluster.meta_leader().expect("meta leader");
    let leader_i = cluster.index_of(&leader).expect("leader is a node");
    let other = cluster.node((leader_i + 1) % 3);
    assert!(cluster.node_by_name(other.name()).is_some());

    let client = async_nats::connect(other.url()).await.expect("connect");
    let js = jetstream::new(client);
    let kv = js
        .create_key_value(kv::Config {
            bucket: "r3".into(),
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .expect("create R3 bucket");
    // A new R3 stream elects its own leader after it is created: until
    // then a put finds no responder (async-nats: StreamNotFound).
    let first = eventually("the first put", || kv.put("k", "one".into())).await;

    cluster.kill(leader_i).expect("kill meta leader");
    let new_leader = cluster.wait_for_meta_leader().expect("new meta leader");
    assert_ne!(new_leader, leader);

    let second = eventually("put with a node down", || kv.put("k", "two".into())).await;
    assert!(second > first);
    assert_eq!(read_until(&kv, "k", "two").await, second);

    cluster.restart(leader_i).expect("restart old leader");
    assert!(cluster.node_mut(leader_i).is_running());

    // The restarted node catches up and serves the bucket again.
    let client = async_nats::connect(cluster.node(leader_i).url())
        .await
        .expect("connect to restarted node");
    let js = jetstream::new(client);
    eventually("all 3 replicas current", || async {
        let mut stream = js.get_stream("KV_r3").await.map_err(|e| e.to_string())?;
        let info = stream.info().await.map_err(|e| e.to_string())?;
        let cluster = info.cluster.clone().ok_or("no cluster info")?;
        let current = cluster.replicas.iter().filter(|r| r.current && !r.offline);
        match (cluster.leader.is_some(), current.count()) {
            (true, 2) => Ok(()),
            state => Err(format!("leader, current followers: {state:?}")),
        }
    })
    .await;
    let kv = js
        .get_key_value("r3")
        .await
        .expect("bucket via restarted node");
    assert_eq!(read_until(&kv, "k", "two").await, second);
    let third = kv
        .put("k", "three".into())
        .await
        .expect("put via restarted node");
    assert!(third > second);
}

/// `Cluster::start` returns only once the meta leader can place a stream on
/// every node: an R3 bucket created at once, with no retry, must succeed.
/// (Routes and an agreed meta leader came first, and a bucket created then
/// was refused now and again with "no suitable peers for placement, peer
/// offline" (JetStream error 10005) until the meta leader had every peer's
/// statistics.) Several fresh clusters, each asked through another node.
#[tokio::test]
async fn an_r3_bucket_can_be_created_as_soon_as_start_returns() {
    for round in 0..4 {
        let cluster = Cluster::start(3).expect("start cluster");
        let client = async_nats::connect(cluster.node(round % 3).url())
            .await
            .expect("connect");
        jetstream::new(client)
            .create_key_value(kv::Config {
                bucket: "at-once".into(),
                num_replicas: 3,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("round {round}: create R3 bucket at once: {e:?}"));
    }
}
