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

/// A server started with a token or a user and password refuses clients
/// without them (authorization violation) and gives JetStream to those
/// with them.
#[tokio::test]
async fn a_server_with_auth_refuses_clients_without_it() {
    use async_nats::{ConnectErrorKind, ConnectOptions};
    let cases = [
        (
            nats_testkit::Auth::Token("t0k\"en\\".into()),
            ConnectOptions::new().token("t0k\"en\\".into()),
        ),
        (
            nats_testkit::Auth::UserPassword {
                user: "app".into(),
                password: "pa ss".into(),
            },
            ConnectOptions::new().user_and_password("app".into(), "pa ss".into()),
        ),
    ];
    for (auth, good) in cases {
        let server = Server::start_with_auth(auth.clone()).expect("start nats-server");
        let refused = ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(server.url())
            .await
            .expect_err("connected without credentials");
        assert_eq!(
            refused.kind(),
            ConnectErrorKind::AuthorizationViolation,
            "{auth:?}: {refused}"
        );
        let client = good.connect(server.url()).await.expect("connect");
        let kv = jetstream::new(client)
            .create_key_value(kv::Config {
                bucket: "auth".into(),
                ..Default::default()
            })
            .await
            .expect("JetStream for an authenticated client");
        kv.put("k", "v".into()).await.expect("put");
    }
}
