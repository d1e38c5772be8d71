//! Per-election TTLs and a server that is down (issue 26, items 1 and 3),
//! against a real nats-server: elections with different TTLs on one
//! server, each in a bucket of its TTL; the default bucket keeps the
//! elections of its TTL; the first election in a fresh bucket
//! begins without a failover grace, a later one still waits it; a
//! campaign waits for a server that is down, and a term whose server
//! stops is lost and won again once it is back.

use std::sync::Arc;
use std::time::Duration;

use election_core::Error as CoreError;
use election_nats::{DEFAULT_BUCKET, NatsElection, NatsOptions, bucket_for_ttl};
use nats_testkit::Server;
use tokio::time::Instant;

/// The bound on anything that should happen within a few TTLs.
const PATIENCE: Duration = Duration::from_secs(60);

fn ttl(secs: u64) -> NatsOptions {
    NatsOptions::new(Duration::from_secs(secs))
        .expect("options")
        .single_replica_ok(true)
}

#[tokio::test]
async fn elections_with_different_ttls_coexist_on_one_server() {
    let server = Server::start().expect("nats-server");
    // The order of the report: a 3 s election first (it makes the default
    // bucket, with max age 3 s), then one with the default TTL (which
    // exited 78 for good before).
    let short = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect("a 3 s election");
    let default = NatsElection::connect(
        &server.url(),
        NatsOptions::default().single_replica_ok(true),
    )
    .await
    .expect("a default-TTL election on the same server");
    assert_eq!(short.options().bucket_name(), DEFAULT_BUCKET);
    assert_eq!(default.options().bucket_name(), "elections-ttl-15s");
    assert!(!default.options().is_bucket_named());
    let a = short.candidate("a", "node-1").expect("candidate");
    let b = default.candidate("b", "node-1").expect("candidate");
    let ta = tokio::time::timeout(PATIENCE, a.campaign())
        .await
        .expect("in time")
        .expect("elected with 3 s");
    let tb = tokio::time::timeout(PATIENCE, b.campaign())
        .await
        .expect("in time")
        .expect("elected with 15 s");
    // Each lease lives as long as its own TTL: the 3 s one renews on.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!ta.is_lost() && !tb.is_lost());
    // A third TTL, and each of the two again from another process: the
    // same bucket, the same election.
    let other = NatsElection::connect(&server.url(), ttl(6))
        .await
        .expect("a 6 s election");
    assert_eq!(
        other.options().bucket_name(),
        bucket_for_ttl(Duration::from_secs(6))
    );
    for (options, name) in [(ttl(3), "a"), (NatsOptions::default(), "b")] {
        let again = NatsElection::connect(&server.url(), options)
            .await
            .expect("again");
        let contender = again.candidate(name, "node-2").expect("candidate");
        assert!(
            contender.try_campaign().await.expect("try").is_none(),
            "{name} is led"
        );
    }
    // An observer finds each by its TTL.
    let seen = NatsElection::connect(&server.url(), NatsOptions::default().observer(true))
        .await
        .expect("observer");
    assert_eq!(
        seen.leader("b").await.expect("leader").map(|l| l.epoch),
        Some(tb.epoch())
    );
    ta.resign().await.expect("resign");
    tb.resign().await.expect("resign");
}

#[tokio::test]
async fn the_default_bucket_keeps_the_elections_of_its_ttl() {
    let server = Server::start().expect("nats-server");
    // Made by an earlier version (or by the first election): the default
    // bucket with the default TTL.
    let first = NatsElection::connect(
        &server.url(),
        NatsOptions::default().single_replica_ok(true),
    )
    .await
    .expect("the default bucket");
    assert_eq!(first.options().bucket_name(), DEFAULT_BUCKET);
    let holder = first.candidate("jobs", "old").expect("candidate");
    let term = holder.campaign().await.expect("elected");
    // Named explicitly (as an earlier version's `?bucket=elections`): the
    // same bucket, the same election.
    let named = NatsElection::connect(
        &server.url(),
        NatsOptions::default()
            .bucket(DEFAULT_BUCKET)
            .expect("bucket"),
    )
    .await
    .expect("named");
    let contender = named.candidate("jobs", "new").expect("candidate");
    assert!(contender.try_campaign().await.expect("try").is_none());
    // Another TTL gets a bucket of its own.
    let three = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect("3 s is not refused");
    assert_eq!(three.options().bucket_name(), "elections-ttl-3s");
    let t = three
        .candidate("reports", "new")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected");
    t.resign().await.expect("resign");
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn the_first_election_in_a_fresh_bucket_skips_the_grace_a_later_one_waits_it() {
    let server = Server::start().expect("nats-server");
    // TTL 30 s: renewals every 10 s, a grace of 10 s.
    let options = ttl(30).bucket("fresh").expect("bucket");
    let grace = options.grace();
    assert_eq!(grace, Duration::from_secs(10));
    let election = NatsElection::connect(&server.url(), options)
        .await
        .expect("connect");
    // The bucket's first write ever: nobody can have held the key.
    let started = Instant::now();
    let first = election
        .candidate("first", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected");
    let took = started.elapsed();
    assert!(took < grace, "the first election waited {took:?}");
    // A key never written, but in a bucket written before: a holder of it
    // is not excluded by anything this process saw, so the grace stays.
    let started = Instant::now();
    let second = election
        .candidate("second", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected");
    let took = started.elapsed();
    assert!(took >= grace, "the second election waited only {took:?}");
    first.resign().await.expect("resign");
    second.resign().await.expect("resign");
}

#[tokio::test]
async fn a_campaign_waits_for_a_server_that_went_down_and_wins_once_it_is_back() {
    let mut server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect("connect");
    server.stop().expect("stop");
    let candidate = Arc::new(
        election
            .candidate("jobs", "a")
            .expect("candidate")
            .with_poll_interval(Duration::from_millis(50))
            .expect("poll"),
    );
    let campaign = tokio::spawn({
        let candidate = candidate.clone();
        async move { candidate.campaign().await }
    });
    let deadline = Instant::now() + PATIENCE;
    let retries = loop {
        let r = candidate.retries();
        if r.in_a_row >= 2 {
            break r;
        }
        assert!(Instant::now() < deadline, "no retries counted: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        matches!(
            retries.last_error,
            Some(CoreError::Unavailable { .. } | CoreError::OutcomeUnknown { .. })
        ),
        "{retries:?}"
    );
    server.restart().expect("restart");
    let term = tokio::time::timeout(PATIENCE, campaign)
        .await
        .expect("elected once the server is back")
        .expect("task")
        .expect("term");
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn a_server_stopped_mid_term_loses_the_term_then_the_candidate_is_elected_again() {
    let mut server = Server::start().expect("nats-server");
    let election = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect("connect");
    let candidate = election
        .candidate("jobs", "a")
        .expect("candidate")
        .with_poll_interval(Duration::from_millis(50))
        .expect("poll");
    let first = candidate.campaign().await.expect("term");
    server.stop().expect("stop");
    tokio::time::timeout(PATIENCE, first.lost())
        .await
        .expect("the loss is reported");
    server.restart().expect("restart");
    let second = tokio::time::timeout(PATIENCE, candidate.campaign())
        .await
        .expect("elected again")
        .expect("term");
    assert!(second.epoch() > first.epoch());
    second.resign().await.expect("resign");
}

#[tokio::test]
async fn the_same_election_with_another_ttl_is_refused_while_it_is_held() {
    let server = Server::start().expect("nats-server");
    let fifteen = NatsElection::connect(
        &server.url(),
        NatsOptions::default().single_replica_ok(true),
    )
    .await
    .expect("15 s");
    let held = fifteen
        .candidate("jobs", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected");
    // Another TTL lands in another bucket: its claim of the same name is
    // refused while the name is held in the default one.
    let three = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect("3 s");
    assert_eq!(three.options().bucket_name(), "elections-ttl-3s");
    let refused = three
        .candidate("jobs", "b")
        .expect("candidate")
        .try_campaign()
        .await;
    assert!(matches!(refused, Err(CoreError::Config(_))), "{refused:?}");
    // And the other way round: held with 3 s, refused with 15 s.
    let t3 = three
        .candidate("reports", "b")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected");
    let again = NatsElection::connect(
        &server.url(),
        NatsOptions::default().single_replica_ok(true),
    )
    .await
    .expect("15 s again");
    let refused = again
        .candidate("reports", "c")
        .expect("candidate")
        .try_campaign()
        .await;
    assert!(matches!(refused, Err(CoreError::Config(_))), "{refused:?}");
    t3.resign().await.expect("resign");
    held.resign().await.expect("resign");
    // Free in the other bucket: no refusal.
    let t = three
        .candidate("jobs", "b")
        .expect("candidate")
        .campaign()
        .await
        .expect("elected once the name is free");
    t.resign().await.expect("resign");
}

/// Issue 43, item 9: a server without JetStream is a setting to fix, not
/// an outage to wait out: opening fails at once, classified permanent,
/// with a hint that names `-js`.
#[tokio::test]
async fn a_server_without_jetstream_is_a_setting_not_an_outage() {
    use election_core::{Classify, Disposition};
    let server = Server::start_without_jetstream().expect("nats-server");
    let e = NatsElection::connect(&server.url(), ttl(3))
        .await
        .expect_err("no JetStream, no bucket");
    let class = e.class();
    assert_eq!(class.disposition, Disposition::Permanent, "{e}");
    assert!(
        class.hint.as_deref().is_some_and(|h| h.contains("-js")),
        "{:?}",
        class.hint
    );
}
