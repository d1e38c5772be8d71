//! `Term::confirm` on the SQLite backend: one conditional renewal at the
//! commit point, against a real database file.

use crate::common;

use std::time::Duration;

use election_core::{Error, Lease};
use election_sqlite::{SqliteElection, SqliteOptions};
use sqlx::Connection;

/// The row's nonce, epoch and renewal version.
async fn row(e: &SqliteElection) -> (Option<i64>, i64, i64) {
    sqlx::query_as("SELECT nonce, epoch, version FROM election_leases WHERE name = 'jobs'")
        .fetch_one(e.pool())
        .await
        .expect("select")
}

#[tokio::test]
async fn confirm_is_one_conditional_renewal() {
    let dir = tempfile::tempdir().expect("dir");
    // The renewal task waits 10 s: every version change here is a confirm.
    let options =
        SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options");
    let e = common::open_with(&dir, options).await;
    let term = common::elected(&e, "a").await;
    let (nonce, epoch, version) = row(&e).await;
    term.confirm().await.expect("still held");
    term.confirm().await.expect("still held");
    assert_eq!(
        row(&e).await,
        (nonce, epoch, version + 2),
        "each confirm bumps the renewal version, nothing else"
    );

    sqlx::query(
        "UPDATE election_leases SET holder = 'intruder', nonce = 0, epoch = epoch + 1, version = version + 1",
    )
    .execute(e.pool())
    .await
    .expect("take the row");
    assert!(!term.is_lost(), "the renewal task has not looked yet");
    match term.confirm().await {
        Err(Error::Lost(lost)) => assert_eq!(lost.epoch, term.epoch()),
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(term.is_lost(), "the check found the loss first");
    assert_eq!(
        row(&e).await,
        (Some(0), epoch + 1, version + 3),
        "the check changed nothing of the intruder's"
    );
    assert!(matches!(term.resign().await, Err(Error::Lost(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_never_make_the_holders_own_renewals_fail() {
    let dir = tempfile::tempdir().expect("dir");
    // Renewals every 300 ms, with 1.5 s of slack before a late one loses
    // the term (900 ms TTLs lost it on a loaded machine: ADR 0056, 0077).
    let options = SqliteOptions::new(Duration::from_millis(1800), Duration::from_millis(300))
        .expect("options");
    let e = common::open_with(&dir, options).await;
    let term = common::elected(&e, "a").await;
    let contender = e.candidate("jobs", "b").expect("b");
    let (nonce, epoch, _) = row(&e).await;
    // Confirms interleaved with a dozen renewals (two TTLs).
    let until = tokio::time::Instant::now() + options.ttl() * 2;
    let (mut confirms, mut busy) = (0, 0);
    while tokio::time::Instant::now() < until {
        // A confirm that meets the write lock past the busy timeout (a
        // loaded machine's fsync stall) answers `Unavailable`, as its docs
        // say: in doubt for this write, the term goes on. Any other error
        // fails the test.
        match term.confirm().await {
            Ok(()) => confirms += 1,
            Err(Error::Unavailable { .. }) => busy += 1,
            Err(e) => panic!("still held: {e:?} (after {confirms} confirms)"),
        }
        assert!(
            contender.try_campaign().await.expect("try").is_none(),
            "a contender won while the holder confirmed"
        );
    }
    assert!(confirms > 10, "{confirms} confirms ({busy} unavailable)");
    // Then renewals alone keep the term for another two TTLs.
    let renewed_from = term.valid_until().expect("validity");
    let lost = tokio::time::timeout(options.ttl() * 2, term.lost()).await;
    assert!(lost.is_err(), "the term was lost: {lost:?}");
    assert!(
        term.valid_until().expect("validity") > renewed_from,
        "the renewal task kept renewing"
    );
    let (n, ep, _) = row(&e).await;
    assert_eq!((n, ep), (nonce, epoch), "still this attempt's term");
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn confirm_on_a_locked_database_is_unavailable_and_the_term_goes_on() {
    let dir = tempfile::tempdir().expect("dir");
    let options = SqliteOptions::new(Duration::from_secs(6), Duration::from_secs(2))
        .and_then(|o| o.with_busy_timeout(Duration::from_millis(100)))
        .expect("options");
    let e = common::open_with(&dir, options).await;
    let term = common::elected(&e, "a").await;
    let mut blocker = sqlx::SqliteConnection::connect(&format!(
        "sqlite://{}",
        dir.path().join("app.db").display()
    ))
    .await
    .expect("connect");
    let tx = blocker.begin_with("BEGIN IMMEDIATE").await.expect("lock");
    match term.confirm().await {
        Err(Error::Unavailable { .. } | Error::OutcomeUnknown { .. }) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(!term.is_lost(), "a busy database is no proof of a loss");
    tx.rollback().await.expect("unlock");
    term.confirm().await.expect("answers again once unlocked");
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn confirm_after_resign_or_a_deleted_database_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let options =
        SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options");
    let e = common::open_with(&dir, options).await;
    let c = e.candidate("jobs", "a").expect("a");
    let term = c.campaign().await.expect("a wins");
    term.resign().await.expect("resign");
    assert!(matches!(term.confirm().await, Err(Error::NotHeld { .. })));

    let term = c.campaign().await.expect("a wins again");
    for f in ["app.db", "app.db-wal", "app.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    match term.confirm().await {
        Err(Error::Lost(_)) => {}
        other => panic!("expected Lost, got {other:?}"),
    }
}
