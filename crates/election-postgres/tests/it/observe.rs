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

/// An application that keeps its pool exhausted past the TTL does not
/// starve the renewals (ADR 0105): they run on the process's session, not
/// on a connection of the application's pool, so the term outlives the
/// exhaustion. (Before ADR 0105 the renewal waited for a connection of
/// this pool and the term was lost: the test then showed `with_pool`'s
/// warning, which is gone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_pool_exhausted_past_the_ttl_does_not_starve_the_renewals() {
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
    // The application takes every connection of its pool and keeps them
    // for two TTLs.
    let mut taken = Vec::new();
    for _ in 0..2 {
        taken.push(within("acquire", pool.acquire()).await.expect("acquire"));
    }
    tokio::time::sleep(Duration::from_millis(2400)).await;
    assert!(
        !term.is_lost(),
        "the term was lost while the application's pool was exhausted"
    );
    drop(taken);
    term.resign().await.expect("resign");
    election.close().await;
}
