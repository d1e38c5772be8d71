//! Issue 42 (ADR 0106): the waiters' queue. A release wakes the head
//! waiter, not every waiter: counted on the wire, as the writes sent to
//! the election key's subject.

use std::time::Duration;

use election_nats::{NatsElection, NatsOptions};
use futures::StreamExt;
use nats_testkit::Server;

/// Ten waiters, and a release of the name: the writes sent to the key's
/// subject from the release until well after the next term began are the
/// claims the release caused (a plain subscription to the subject sees
/// every write sent, also those the stream refuses). The TTL is long, so
/// no renewal falls in that window, and so is the poll interval, so no
/// poll does either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_with_ten_waiters_makes_at_most_two_claims() {
    let server = Server::start().expect("nats-server");
    let options = NatsOptions::new(Duration::from_secs(15))
        .expect("options")
        .single_replica_ok(true);
    let election = NatsElection::connect(&server.url(), options)
        .await
        .expect("connect");
    let poll = Duration::from_secs(10);
    let leader = election
        .candidate("cost", "c0")
        .expect("candidate")
        .campaign()
        .await
        .expect("c0 wins");
    let spy = async_nats::connect(server.url()).await.expect("connect");
    let subject = format!("$KV.{}.cost", election.options().bucket_name());
    let mut writes = spy.subscribe(subject).await.expect("subscribe");
    spy.flush().await.expect("flush");
    let mut waiters = Vec::new();
    for i in 1..=10 {
        let candidate = election
            .candidate("cost", &format!("c{i}"))
            .expect("candidate")
            .with_poll_interval(poll)
            .expect("poll");
        waiters.push(tokio::spawn(async move { candidate.campaign().await }));
        // One at a time, so that the queue's order is the start order.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Each waiter's first try, before it queued: not the release's.
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(200), writes.next()).await {}

    leader.resign().await.expect("resign");
    let (won, first, rest) = futures::future::select_all(waiters).await;
    let term = won.expect("joined").expect("a waiter wins");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut claims = 0;
    let mut markers = 0;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(100), writes.next()).await {
        let op = m
            .headers
            .as_ref()
            .and_then(|h| h.get("KV-Operation"))
            .map(|v| v.as_str().to_owned());
        match op.as_deref() {
            Some("DEL" | "PURGE") => markers += 1,
            _ => claims += 1,
        }
    }
    eprintln!(
        "the release: {markers} marker(s), {claims} claim(s); c{} won",
        first + 1
    );
    assert_eq!(markers, 1, "the release's own delete marker");
    assert!(
        (1..=2).contains(&claims),
        "a release with ten waiters made {claims} claims"
    );
    assert_eq!(first, 0, "the first waiter in line wins");
    for w in rest {
        w.abort();
    }
    term.resign().await.expect("resign");
}
