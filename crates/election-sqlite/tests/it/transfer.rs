//! Transfer (ADR 0112) on SQLite: the handover's row, a waiter woken by
//! the end of a window it is not the successor of, a request read by the
//! holder's renewals and dropped with its term, and the columns added in
//! place to an older database.

use std::time::Duration;

use election_core::{Election, Identity};
use election_sqlite::{SqliteElection, SqliteOptions};

/// TTL 600 ms, renewed every 150 ms.
fn fast() -> SqliteOptions {
    SqliteOptions::new(Duration::from_millis(600), Duration::from_millis(150)).expect("options")
}

async fn open(dir: &tempfile::TempDir) -> SqliteElection {
    SqliteElection::open(dir.path().join("app.db"), fast())
        .await
        .expect("open")
}

fn id(s: &str) -> Identity {
    Identity::new(s).expect("identity")
}

/// While the name is reserved for the successor nobody leads, nothing is
/// revoked and there is no term to ask; another candidate finds it held
/// (its TTL is far shorter than the window, and it waited longer than its
/// TTL); the successor takes it at once, in the next epoch, and the
/// handover is no longer shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_name_is_nobodys_until_its_successor_claims_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(&dir).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let old = a.epoch();
    a.transfer(&id("b"), Duration::from_secs(60))
        .await
        .expect("a hands over");
    assert_eq!(e.leader("jobs").await.expect("leader"), None);
    assert_eq!(
        Election::revocation(&e, "jobs").await.expect("revocation"),
        None
    );
    assert_eq!(
        e.revoke_fencing("jobs", &id("ops"), &[])
            .await
            .expect("revoke"),
        None
    );
    assert_eq!(
        e.request_transfer("jobs", &id("c"), &id("ops"))
            .await
            .expect("request"),
        None,
        "a request with no term holding the name"
    );
    let shown = e
        .handover("jobs")
        .await
        .expect("read")
        .expect("the handover");
    assert_eq!(
        (
            shown.from.as_str(),
            shown.to.as_str(),
            shown.epoch,
            shown.window
        ),
        ("a", "b", old, Duration::from_secs(60))
    );
    let c = e.candidate("jobs", "c").expect("c");
    for _ in 0..3 {
        assert!(
            c.try_campaign().await.expect("c tries").is_none(),
            "c won b's name"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let began = std::time::Instant::now();
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b leads");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "b waited {:?}",
        began.elapsed()
    );
    assert_eq!(
        b.epoch().get(),
        old.get() + 1,
        "the next epoch, none drawn by the handover"
    );
    assert_eq!(e.handover("jobs").await.expect("read"), None);
    let shown = e.leader("jobs").await.expect("leader").expect("b leads");
    assert_eq!(shown.identity.as_str(), "b");
    b.resign().await.expect("resign");
}

/// A candidate waiting with an hour's poll interval, not the successor,
/// wins when the window ends (no sooner), not at its next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wins_when_a_window_it_is_not_reserved_ends() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(&dir).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let c = e
        .candidate("jobs", "c")
        .expect("c")
        .with_poll_interval(Duration::from_secs(3600))
        .expect("poll");
    let waiting = tokio::spawn(async move { c.campaign().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let window = Duration::from_secs(1);
    let began = std::time::Instant::now();
    a.transfer(&id("ghost"), window)
        .await
        .expect("a hands over");
    let next = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("c wins when the window ends, not at its poll")
        .expect("join")
        .expect("c wins");
    assert!(
        began.elapsed() >= window,
        "c won {:?} into the window",
        began.elapsed()
    );
    assert!(next.epoch() > a.epoch());
    next.resign().await.expect("resign");
}

/// A request is read by the holder's renewal (within a renew interval or
/// two) with its term's epoch; the successor's term never hears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_the_holder_and_dies_with_its_term() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(&dir).await;
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    let began = std::time::Instant::now();
    let asked = e
        .request_transfer("jobs", &id("b"), &id("deploy"))
        .await
        .expect("request")
        .expect("a holds it");
    assert_eq!(asked.epoch, a.epoch());
    let heard = tokio::time::timeout(Duration::from_secs(5), a.transfer_requested())
        .await
        .expect("a hears the request");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "heard after {:?}",
        began.elapsed()
    );
    assert_eq!(
        (heard.to.as_str(), heard.by.as_str(), heard.epoch),
        ("b", "deploy", a.epoch())
    );
    assert!(heard.at.is_some());
    a.transfer(&heard.to, Duration::from_secs(30))
        .await
        .expect("a hands over");
    let b = e
        .candidate("jobs", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b leads");
    // A few of b's renewals: the request of a's epoch is not b's.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(b.transfer_request(), None);
    b.confirm().await.expect("b still leads");
    b.resign().await.expect("resign");
}

/// A database whose lease table has no transfer columns (as every version
/// before ADR 0112 left it) gets them at the next open, and a request
/// then reaches the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_transfer_columns_gets_them_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(&dir).await;
    for column in [
        "transfer_to",
        "transfer_by",
        "transfer_at",
        "transfer_epoch",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE election_leases DROP COLUMN {column}"
        )))
        .execute(e.pool())
        .await
        .expect(column);
    }
    drop(e);
    let e = open(&dir).await;
    let columns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pragma_table_info('election_leases') WHERE name LIKE 'transfer_%'",
    )
    .fetch_one(e.pool())
    .await
    .expect("columns");
    assert_eq!(columns, 4, "the open added the transfer columns");
    let a = e
        .candidate("jobs", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a leads");
    e.request_transfer("jobs", &id("b"), &id("b"))
        .await
        .expect("request")
        .expect("a holds it");
    tokio::time::timeout(Duration::from_secs(5), a.transfer_requested())
        .await
        .expect("a hears the request");
    a.resign().await.expect("resign");
}
