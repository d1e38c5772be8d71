//! `leader()`, `observe()` woken by notifications, the commit-point check
//! and `close()` on a real server.

use crate::common;

use std::time::Duration;

use election_core::Error;
use futures::StreamExt;

const HOUR: Duration = Duration::from_secs(3600);

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reports_each_change_by_notification() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    assert!(e.leader("jobs").await.expect("read").is_none());
    // Polling once an hour: every change below arrives by notification.
    let changes = e.observe("jobs", HOUR).await.expect("observe");
    let mut changes = std::pin::pin!(changes);
    macro_rules! next {
        () => {
            within("a change", changes.next())
                .await
                .expect("stream goes on")
                .expect("read")
        };
    }
    assert_eq!(next!(), None, "nobody leads yet");
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let seen = next!();
    let seen = seen.expect("a leads");
    assert_eq!((seen.identity.as_str(), seen.epoch), ("a", a.epoch()));
    assert!(seen.since.is_some());
    a.resign().await.expect("resign");
    assert_eq!(next!(), None, "vacant after the resign");
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b");
    let seen = next!().expect("b leads");
    assert_eq!((seen.identity.as_str(), seen.epoch), ("b", b.epoch()));
    b.resign().await.expect("resign");
    assert!(e.observe("jobs", Duration::ZERO).await.is_err());
    assert!(e.observe("bad/name", HOUR).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_proves_the_claim_at_the_commit_point() {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    a.confirm().await.expect("held");
    assert!(common::intrude(&server, "jobs"));
    let refused = a.confirm().await;
    assert!(
        matches!(refused, Err(Error::NotHeld { .. }) | Err(Error::Lost(_))),
        "{refused:?}"
    );
    within("the term is lost", a.lost()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_an_own_pool_but_not_the_applications() {
    let server = common::server();
    let own = common::open(&server, common::fast()).await;
    own.close().await;
    assert!(matches!(
        own.leader("jobs").await,
        Err(Error::Unavailable { .. })
    ));
    let pool = sqlx::PgPool::connect(&server.url())
        .await
        .expect("app pool");
    let theirs = election_postgres::PostgresElection::with_pool(pool.clone(), common::fast())
        .await
        .expect("with_pool");
    theirs.close().await;
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&pool)
        .await
        .expect("still open");
    assert_eq!(one, 1);
}

/// `with_pool`'s warning, shown: the renewal waits for a connection of the
/// application's pool like any query, so an application that keeps the
/// pool exhausted for longer than the TTL loses the term. The loss is
/// reported (never a term silently kept past its lease), and the next
/// candidate wins a higher epoch once the pool is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_pool_exhausted_past_the_ttl_loses_the_term() {
    let server = common::server();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&server.url())
        .await
        .expect("app pool");
    let election = election_postgres::PostgresElection::with_pool(pool.clone(), common::fast())
        .await
        .expect("with_pool");
    let candidate = election.candidate("jobs", "app").expect("candidate");
    let term = within("campaign", candidate.campaign()).await.expect("won");
    let first = term.epoch();
    // The application takes every connection of its pool and keeps them.
    let mut taken = Vec::new();
    for _ in 0..2 {
        taken.push(within("acquire", pool.acquire()).await.expect("acquire"));
    }
    let lost = within("the loss", term.lost()).await;
    assert!(
        !lost.reason.is_end(),
        "the term ended by its holder, not by the exhausted pool: {lost:?}"
    );
    assert!(term.is_lost());
    drop(taken);
    let next = within("the next term", candidate.campaign())
        .await
        .expect("won again once the pool is free");
    assert!(next.epoch() > first, "{} after {first}", next.epoch());
    next.resign().await.expect("resign");
    election.close().await;
}
