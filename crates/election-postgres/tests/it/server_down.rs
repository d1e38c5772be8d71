//! A PostgreSQL server that is down (issue 26, items 1 and 2), on a real
//! server stopped and started again: opening answers at once with the
//! cause; a campaign waits for the server with a backoff, counting its
//! tries; a term whose server stops is lost, and the candidate is elected
//! again once the server is back; a lease set's `guard` and a fence's
//! `begin_fenced` answer `Unavailable` with the cause within the request
//! timeout's reach instead of waiting inside the pool.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use election_core::{Error as CoreError, Identity, LeaseSet};
use election_postgres::{PostgresElection, PostgresKeyedClaims, PostgresOptions};
use fencing::{ResourceName, Token};
use tokio::time::Instant;

/// Generous: how long anything may take on a busy machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// What "answers at once" means here: well below the pool's own acquire
/// timeout (10 s), which a server down used to be waited out for.
const PROMPT: Duration = Duration::from_secs(5);

/// A long TTL, so that a term outlives the outage a test makes; requests
/// bounded by 500 ms.
fn long_ttl() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(30), Duration::from_secs(5))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(500)))
        .expect("options")
}

/// A short TTL, so that a term is lost soon after its server stops.
fn short_ttl() -> PostgresOptions {
    PostgresOptions::new(Duration::from_secs(2), Duration::from_millis(500))
        .and_then(|o| o.with_request_timeout(Duration::from_millis(400)))
        .expect("options")
}

/// An error and its sources, joined.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        parts.push(s.to_string());
        next = s.source();
    }
    parts.join(": ")
}

/// The cause a stopped server gives, and never the pool's internals: a
/// new connection refused, or (the first request on a pooled connection,
/// handed out without a ping since ADR 0065) the server's own word that it
/// ended the session as it stopped (SQLSTATE 57P01).
fn says_refused(text: &str) {
    let text_lower = text.to_lowercase();
    assert!(
        text_lower.contains("refused") || text.contains("[SQLSTATE 57P01]"),
        "the cause is not named: {text}"
    );
    assert!(
        !text.contains("pool timed out"),
        "the pool's internals reach the user: {text}"
    );
}

#[tokio::test]
async fn opening_with_the_server_down_answers_at_once_with_the_cause() {
    let mut server = common::server();
    server.stop().expect("stop");
    let started = Instant::now();
    let opened = PostgresElection::connect(&server.url(), long_ttl()).await;
    let took = started.elapsed();
    let e = opened.expect_err("the server is down");
    assert!(e.is_unavailable(), "{e:?}");
    says_refused(&chain(&e));
    assert!(took < PROMPT, "opening took {took:?}");
}

#[tokio::test]
async fn a_campaign_waits_for_the_server_with_a_backoff_and_wins_once_it_is_up() {
    let mut server = common::server();
    let election = PostgresElection::connect(&server.url(), short_ttl())
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
    // Two failed tries, counted, with the cause and a growing pause.
    let deadline = Instant::now() + PATIENCE;
    let retries = loop {
        let r = candidate.retries();
        if r.in_a_row >= 3 {
            break r;
        }
        assert!(Instant::now() < deadline, "no retries counted: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let last = retries.last_error.clone().expect("the last error");
    assert!(matches!(last, CoreError::Unavailable { .. }), "{last:?}");
    says_refused(&chain(&last));
    assert!(
        retries.next_pause.expect("a pause") >= Duration::from_millis(200),
        "{retries:?}"
    );
    server.restart().expect("restart");
    let term = tokio::time::timeout(PATIENCE, campaign)
        .await
        .expect("elected once the server is up")
        .expect("task")
        .expect("term");
    assert_eq!(candidate.retries().in_a_row, 0);
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn a_server_stopped_mid_term_loses_the_term_then_the_candidate_is_elected_again() {
    let mut server = common::server();
    let election = PostgresElection::connect(&server.url(), short_ttl())
        .await
        .expect("connect");
    let candidate = election
        .candidate("jobs", "a")
        .expect("candidate")
        .with_poll_interval(Duration::from_millis(50))
        .expect("poll");
    let first = candidate.campaign().await.expect("term");
    server.stop().expect("stop");
    let loss = tokio::time::timeout(PATIENCE, first.lost())
        .await
        .expect("the loss is reported");
    assert!(!loss.to_string().is_empty());
    assert!(first.is_lost());
    server.restart().expect("restart");
    let second = tokio::time::timeout(PATIENCE, candidate.campaign())
        .await
        .expect("elected again")
        .expect("term");
    assert!(second.epoch() > first.epoch());
    second.resign().await.expect("resign");
}

#[tokio::test]
async fn guard_and_begin_fenced_during_an_outage_answer_unavailable_with_the_cause() {
    let mut server = common::server();
    let election = PostgresElection::connect(&server.url(), long_ttl())
        .await
        .expect("connect");
    let keys = PostgresKeyedClaims::new(&election, Identity::new("a").expect("identity"))
        .with_poll_interval(Duration::from_millis(50))
        .expect("poll");
    let set = LeaseSet::new(keys);
    assert!(set.ask("shard-1").await.expect("ask"), "won");
    let term = election
        .candidate("ledger-writer", "a")
        .expect("candidate")
        .campaign()
        .await
        .expect("term");
    let token = Token::issue(&term).expect("token");
    let fence = election.fence();
    let ledger = ResourceName::new("ledger").expect("resource");

    server.stop().expect("stop");

    // The key and the term are still valid (TTL 30 s): only the server
    // is missing.
    let started = Instant::now();
    let guarded = set.guard("shard-1", async |_token| ()).await;
    let took = started.elapsed();
    let e = guarded.expect_err("the server is down");
    assert!(matches!(e, CoreError::Unavailable { .. }), "{e:?}");
    says_refused(&chain(&e));
    assert!(took < PROMPT, "guard took {took:?}");

    let started = Instant::now();
    let began = fence.begin_fenced(&ledger, token).await;
    let took = started.elapsed();
    let e = began.expect_err("the server is down");
    assert!(matches!(e, fencing::Error::Unavailable { .. }), "{e:?}");
    says_refused(&chain(&e));
    assert!(took < PROMPT, "begin_fenced took {took:?}");

    server.restart().expect("restart");
    drop(term);
    set.close().await;
}
