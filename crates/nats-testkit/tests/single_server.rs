//! One real nats-server: a KV key on file storage survives kill and restart;
//! pause, resume and stop behave.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use nats_testkit::Server;

const BUCKET_MAX_AGE: Duration = Duration::from_secs(2);

#[tokio::test]
async fn kv_key_survives_kill_and_restart() {
    let mut server = Server::start().expect("start nats-server");
    let client = async_nats::connect(server.url()).await.expect("connect");
    let kv = jetstream::new(client)
        .create_key_value(kv::Config {
            bucket: "lease".into(),
            max_age: BUCKET_MAX_AGE,
            limit_markers: Some(Duration::from_secs(1)),
            ..Default::default()
        })
        .await
        .expect("create bucket");
    let created = Instant::now();
    let revision = kv
        .create("leader", "node-a".into())
        .await
        .expect("create key");

    let old_pid = server.pid();
    server.kill().expect("kill");
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    server.restart().expect("restart");
    assert!(server.is_running());
    assert_ne!(server.pid(), old_pid);

    // A fresh client: the old one would wait out its reconnect back-off.
    let client = async_nats::connect(server.url()).await.expect("reconnect");
    let kv = jetstream::new(client)
        .get_key_value("lease")
        .await
        .expect("bucket after restart");
    let entry = kv.entry("leader").await.expect("read key");
    let entry = entry.unwrap_or_else(|| {
        panic!(
            "key gone after restart, {:?} after it was created (bucket max_age {BUCKET_MAX_AGE:?})",
            created.elapsed()
        )
    });
    assert_eq!(entry.revision, revision);
    assert_eq!(&entry.value[..], b"node-a");

    // After the restart the key still ages out, and watchers hear of it
    // through a limit marker.
    let mut watch = kv.watch("leader").await.expect("watch");
    let marker = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(entry) = watch.next().await {
            let entry = entry.expect("watch entry");
            if entry.operation != kv::Operation::Put {
                return entry;
            }
        }
        panic!("watch ended");
    })
    .await
    .expect("no limit marker within 15 s");
    assert_eq!(marker.operation, kv::Operation::Purge);
    let next = kv
        .create("leader", "node-b".into())
        .await
        .expect("create after expiry");
    assert!(next > marker.revision);
}

#[tokio::test]
async fn pause_resume_and_stop() {
    let mut server = Server::start().expect("start nats-server");
    let client = async_nats::connect(server.url()).await.expect("connect");
    let mut sub = client.subscribe("ping").await.expect("subscribe");
    client.flush().await.expect("flush");

    server.pause().expect("pause");
    assert!(server.is_running());
    client.publish("ping", "1".into()).await.expect("publish");
    let frozen = tokio::time::timeout(Duration::from_millis(500), sub.next()).await;
    assert!(frozen.is_err(), "a paused server delivered: {frozen:?}");

    server.resume().expect("resume");
    let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("no delivery within 10 s of resume")
        .expect("subscription ended");
    assert_eq!(&msg.payload[..], b"1");

    server.stop().expect("stop");
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    server.restart().expect("restart after stop");
    let client = async_nats::connect(server.url())
        .await
        .expect("connect again");
    client.flush().await.expect("flush after restart");
}
