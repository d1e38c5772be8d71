//! A lease set through a short server pause (issue 23, item 11): a pause
//! the TTL was chosen to survive keeps every key in its term, leaves one
//! live session key, and a real session loss is still reported.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_nats::{NatsElection, NatsOptions};
use futures::StreamExt;
use nats_testkit::Server;

const PATIENCE: Duration = Duration::from_secs(60);
const KEYS: usize = 20;

/// TTL 6 s (validity 5.4 s), a renewal every 2 s, requests cut off after
/// 0.5 s.
fn options() -> NatsOptions {
    NatsOptions::new(Duration::from_secs(6))
        .and_then(|o| o.renew_interval(Duration::from_secs(2)))
        .and_then(|o| o.request_timeout(Duration::from_millis(500)))
        .expect("options")
}

fn keys() -> Vec<String> {
    (0..KEYS).map(|i| format!("store-{i:02}")).collect()
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

/// The test's own view of the sessions bucket.
async fn sessions(server: &Server) -> kv::Store {
    let client = async_nats::connect(server.url()).await.expect("connect");
    async_nats::jetstream::new(client)
        .get_key_value("elections-sessions")
        .await
        .expect("sessions bucket")
}

/// The next session write (a session started or renewed) the watch sees.
async fn next_put(watch: &mut kv::Watch, seen: &mut BTreeSet<String>) {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let entry = watch.next().await.expect("watch").expect("entry");
            if entry.operation == kv::Operation::Put {
                seen.insert(entry.key);
                return;
            }
        }
    })
    .await
    .expect("a session write");
}

/// The session keys among `seen` that are live now.
async fn live(store: &kv::Store, seen: &BTreeSet<String>) -> Vec<String> {
    let mut live = Vec::new();
    for key in seen {
        let entry = store.entry(key).await.expect("read a session key");
        if entry.is_some_and(|e| e.operation == kv::Operation::Put) {
            live.push(key.clone());
        }
    }
    live
}

async fn stop(server: &mut Server) {
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
}

/// The server stops for half the validity, right after a session renewal
/// landed: the renewal due meanwhile times out on the client and lands when
/// the server continues. Every key must stay held in its term throughout
/// (no loss reported), and one session key be live afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_pause_of_half_the_validity_keeps_every_key() {
    let mut server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), options())
        .await
        .expect("connect");
    let set = Arc::new(election.lease_set("node-a").await.expect("set"));
    let keys = keys();
    for k in &keys {
        assert!(set.ask(k).await.expect("ask"), "wins {k}");
    }
    let epochs: Vec<_> = keys.iter().map(|k| set.epoch(k).expect("epoch")).collect();
    let store = sessions(&server).await;
    let mut seen = BTreeSet::new();
    let mut watch = store.watch_with_history(">").await.expect("watch");
    next_put(&mut watch, &mut seen).await; // the session, as it is
    next_put(&mut watch, &mut seen).await; // a renewal just landed

    // Any key reading not held from here on is a loss.
    let stop_watching = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (set, keys, stop) = (set.clone(), keys.clone(), stop_watching.clone());
        tokio::spawn(async move {
            let mut dropped = BTreeSet::new();
            while !stop.load(Ordering::Acquire) {
                dropped.extend(keys.iter().filter(|k| !set.held(k)).cloned());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            dropped
        })
    };
    stop(&mut server).await;
    // The fault itself: the server stays stopped for half the validity.
    tokio::time::sleep(options().validity() / 2).await;
    server.resume().expect("resume");
    // Three session writes after the pause: the renewal sent during the
    // pause, and those after it (or a new session's).
    for _ in 0..3 {
        next_put(&mut watch, &mut seen).await;
    }
    let live = live(&store, &seen).await;
    until("every key held", || keys.iter().all(|k| set.held(k))).await;
    stop_watching.store(true, Ordering::Release);
    let dropped = watcher.await.expect("watcher");
    let now: Vec<_> = keys.iter().map(|k| set.epoch(k).expect("epoch")).collect();
    let moved: Vec<_> = keys
        .iter()
        .zip(epochs.iter().zip(&now))
        .filter(|(_, (a, b))| a != b)
        .map(|(k, (a, b))| format!("{k}: {a} -> {b}"))
        .collect();
    assert!(
        dropped.is_empty() && moved.is_empty() && live.len() == 1,
        "after a pause of half the validity: {} of {KEYS} keys read not held (e.g. {:?}); \
         {} keys won again in new terms (e.g. {:?}); live session keys: {live:?} of {seen:?}",
        dropped.len(),
        dropped.first(),
        moved.len(),
        moved.first(),
    );
    set.close().await;
}

/// The companion: the session key deleted behind the set's back is a real
/// session loss: every key is lost and won again in a new term, and only
/// the new session is live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_key_still_loses_every_key() {
    let server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), options())
        .await
        .expect("connect");
    let set = election.lease_set("node-a").await.expect("set");
    let keys = keys();
    for k in &keys {
        assert!(set.ask(k).await.expect("ask"), "wins {k}");
    }
    let epochs: Vec<_> = keys.iter().map(|k| set.epoch(k).expect("epoch")).collect();
    let store = sessions(&server).await;
    let mut seen = BTreeSet::new();
    let mut watch = store.watch_with_history(">").await.expect("watch");
    next_put(&mut watch, &mut seen).await;
    let old = seen.first().expect("the session").clone();
    store.delete(&old).await.expect("delete the session key");
    until("every key won again in a new term", || {
        keys.iter()
            .zip(&epochs)
            .all(|(k, old)| set.epoch(k).is_some_and(|e| e > *old))
    })
    .await;
    next_put(&mut watch, &mut seen).await;
    let live = live(&store, &seen).await;
    assert!(!live.contains(&old), "the deleted session is not live");
    set.close().await;
}
