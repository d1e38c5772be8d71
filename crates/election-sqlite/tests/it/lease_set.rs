//! Lease sets over a real SQLite database file: many keys shared by two
//! sets of one process, guard and its commit-point check, and guarded
//! writes through the fence.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use election_core::{Epoch, Error, unguarded};
use election_sqlite::{LeaseSet, SqliteElection, SqliteKeyedClaims, SqliteOptions};
use fencing::{ResourceName, Token};

const PATIENCE: Duration = Duration::from_secs(60);

/// Leases that renew once a second: 50 keys in two sets stay well inside
/// what one database file on a 2-core machine commits.
fn steady() -> SqliteOptions {
    SqliteOptions::new(Duration::from_secs(3), Duration::from_secs(1)).expect("options")
}

/// Leases whose renewal loop does not run during a test: only the
/// commit-point check can find a change.
fn slow() -> SqliteOptions {
    SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options")
}

/// Waits, polling, until `f` holds; panics after `PATIENCE`.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    tokio::time::timeout(PATIENCE, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

/// The holder and epoch the lease row of `key` records.
async fn row(e: &SqliteElection, key: &str) -> (Option<String>, i64) {
    sqlx::query_as("SELECT holder, epoch FROM election_leases WHERE name = ?1")
        .bind(key)
        .fetch_one(e.pool())
        .await
        .expect("select")
}

/// A term of `key` won and resigned by another node first, so the next
/// term's epoch is 3 (the first term's, 2, would hide a token stuck at
/// `Epoch::FIRST`).
async fn earlier_term(e: &SqliteElection, key: &str) {
    let term = e
        .candidate(key, "node-old")
        .expect("candidate")
        .campaign()
        .await
        .expect("old wins");
    term.resign().await.expect("resign");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sets_share_fifty_keys_and_closing_one_hands_its_keys_to_the_other() {
    let dir = tempfile::tempdir().expect("dir");
    // Two openings of one file, as two services of one process would.
    let e = common::open_with(&dir, steady()).await;
    let a = Arc::new(
        common::open_with(&dir, steady())
            .await
            .lease_set("node-a")
            .await
            .expect("a"),
    );
    let b = Arc::new(
        common::open_with(&dir, steady())
            .await
            .lease_set("node-b")
            .await
            .expect("b"),
    );
    let keys: Vec<String> = (0..50).map(|i| format!("shard-{i:02}")).collect();
    // Three renewal intervals with both sets contending for every key.
    let held_before = election_testkit::conformance::lease_sets_share_keys(
        a,
        b.clone(),
        &keys,
        Duration::from_secs(3),
    )
    .await;
    let first = &keys[..keys.len() / 2];

    // The database agrees: b holds every key, a's keys in a later term.
    for (k, before) in first.iter().zip(&held_before) {
        let (holder, epoch) = row(&e, k).await;
        assert_eq!(holder.as_deref(), Some("node-b"), "{k}");
        assert_eq!(b.epoch(k).map(|e| e.get_i64()), Some(epoch));
        assert!(epoch > before.expect("held").get_i64(), "{k}: a later term");
    }
    b.close().await;
    for k in &keys {
        assert_eq!(row(&e, k).await.0, None, "{k} released on close");
    }
}

#[tokio::test]
async fn guard_runs_the_write_in_the_holders_term_and_names_the_holder_elsewhere() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, steady()).await;
    earlier_term(&e, "k").await;
    let a = e.lease_set("node-a").await.expect("a");
    let b = e.lease_set("node-b").await.expect("b");
    assert!(a.ask("k").await.expect("ask"));
    assert!(!b.ask("k").await.expect("ask"));

    let epoch = election_testkit::conformance::guard_names_the_holder(&a, &b, "k").await;
    assert_eq!(epoch.get(), 3, "the term after the earlier one");
    assert_eq!(row(&e, "k").await, (Some("node-a".into()), 3));
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_guard_whose_row_was_taken_before_the_commit_point_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, slow()).await;
    let a = e.lease_set("node-a").await.expect("a");
    assert!(a.ask("k").await.expect("ask"));
    assert!(
        a.guard("k", async |_t| ()).await.is_ok(),
        "held: guard runs"
    );

    // Another node takes the row over behind a's back (as after a
    // partition); a's renewal loop will not look for ten seconds.
    let taken = sqlx::query(
        "UPDATE election_leases SET holder = 'intruder', nonce = 0, epoch = epoch + 1, version = version + 1 WHERE name = 'k'",
    )
    .execute(e.pool())
    .await
    .expect("update");
    assert_eq!(taken.rows_affected(), 1);
    assert!(a.held("k"), "a has not noticed yet: only the check can");

    let mut ran = false;
    let refused = a.guard("k", async |_t| ran = true).await;
    assert!(
        matches!(refused, Err(Error::Lost(_) | Error::NotHeld { .. })),
        "expected Lost or NotHeld, got {refused:?}"
    );
    assert!(!ran, "the write must not run");
    until("a to see the loss", || !a.held("k")).await;
    assert_eq!(
        row(&e, "k").await,
        (Some("intruder".into()), 3),
        "the check did not undo the intruder's claim"
    );
    a.close().await;
    assert_eq!(row(&e, "k").await.0.as_deref(), Some("intruder"));
}

#[tokio::test]
async fn guarded_writes_pass_the_fence_and_a_deposed_holders_token_does_not() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, steady()).await;
    common::create_data_table(&e).await;
    let a = e.lease_set("node-a").await.expect("a");
    let b = e.lease_set("node-b").await.expect("b");
    assert!(a.ask("k").await.expect("ask"));
    assert!(!b.ask("k").await.expect("ask"));

    // A fenced insert of `v` in the key's own resource, in `set`'s term
    // of k; the token it used outlives the guard, as a delayed write's
    // would.
    let guarded_insert = async |set: &LeaseSet<SqliteKeyedClaims>, v| -> Token {
        set.guard("k", async |t| {
            assert_eq!(ResourceName::for_key(t.key()).as_str(), "k");
            let token = Token::from(&t);
            common::fenced_insert(&e, t.key().as_str(), token, v)
                .await
                .map(|()| token)
        })
        .await
        .expect("guard")
        .unwrap_or_else(|e| panic!("the write of {v} is refused: {e:?}"))
    };
    // a writes first.
    let late = guarded_insert(&a, 1).await;

    a.close().await;
    until("b to take k", || b.held("k")).await;
    let b_token = guarded_insert(&b, 2).await;
    assert!(b_token > late, "b's term is later");
    assert_eq!(Some(b_token.epoch()), b.epoch("k"));

    // a's delayed write arrives now: refused, and rolled back with its insert.
    match common::fenced_insert(&e, "k", late, 3).await {
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => {
            assert_eq!(presented, late);
            assert_eq!(high_water_mark, b_token);
        }
        other => panic!("expected Stale, got {other:?}"),
    }
    // So is an unguarded write: its token is epoch 1.
    let unguarded_write = unguarded("k", "test: no coordinator", async |t| {
        assert_eq!(t.epoch(), Epoch::UNGUARDED);
        common::fenced_insert(&e, "k", Token::from(&t), 4).await
    })
    .await
    .expect("valid key");
    assert!(
        matches!(unguarded_write, Err(fencing::Error::Stale { .. })),
        "{unguarded_write:?}"
    );
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid")
        .fetch_all(e.pool())
        .await
        .expect("select");
    assert_eq!(rows, [1, 2], "only the guarded writes committed");
    b.close().await;
}

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[test]
fn lease_set_refuses_a_bad_identity_and_a_missing_runtime() {
    let dir = tempfile::tempdir().expect("dir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let e = rt.block_on(common::open_with(&dir, steady()));
    let bad = rt.block_on(async { e.lease_set("line\nbreak").await.map(|_| ()) });
    assert!(
        matches!(bad, Err(election_sqlite::Error::Config(_))),
        "{bad:?}"
    );
    // Outside a runtime (polled once, by hand: it decides before any await).
    let outside = poll_once(e.lease_set("node-a"))
        .expect("answers at once")
        .map(|_| ());
    assert!(
        matches!(outside, Err(election_sqlite::Error::Config(_))),
        "{outside:?}"
    );
}

/// A wall clock that reads one millisecond later at every call: rows
/// written in one transaction share a reading, rows written by separate
/// transactions do not.
#[derive(Debug, Default)]
struct CountingClock(std::sync::atomic::AtomicI64);

impl election_sqlite::Clock for CountingClock {
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    fn wall_unix_ms(&self) -> i64 {
        1_000_000 + self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn one_transaction_claims_and_one_renews_every_held_key() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, steady())
        .await
        .with_clock(Arc::new(CountingClock::default()));
    let set = e.lease_set("node-a").await.expect("set");
    let keys: Vec<String> = (0..200).map(|i| format!("store-{i:03}")).collect();
    // Asked together: the set's loop takes them in one go.
    let asks = futures::future::join_all(keys.iter().map(|k| set.ask(k))).await;
    assert!(asks.into_iter().all(|held| held.expect("ask")));

    // (renewal version, acquired, renewed) of every key, in one snapshot.
    let rows = async || -> Vec<(i64, i64, i64)> {
        sqlx::query_as(
            "SELECT version, acquired_unix_ms, renewed_unix_ms FROM election_leases ORDER BY name",
        )
        .fetch_all(e.pool())
        .await
        .expect("select")
    };
    let claimed = rows().await;
    assert_eq!(claimed.len(), keys.len());
    let acquired: std::collections::BTreeSet<i64> = claimed.iter().map(|r| r.1).collect();
    // `join_all` hands the asks over in runs of 32, and the loop claims
    // what has arrived: a few transactions, where claims one key at a time
    // would take 200.
    assert!(
        acquired.len() <= 10,
        "{} claim transactions: {acquired:?}",
        acquired.len()
    );

    // Two renewal rounds later (1 s apart), every row was renewed by the
    // same transactions: one version and one renewal stamp for all.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = rows().await;
        if now.iter().all(|r| r.0 >= 3) {
            let versions: std::collections::BTreeSet<i64> = now.iter().map(|r| r.0).collect();
            let renewed: std::collections::BTreeSet<i64> = now.iter().map(|r| r.2).collect();
            assert_eq!(versions.len(), 1, "versions {versions:?}");
            assert_eq!(renewed.len(), 1, "renewal stamps {renewed:?}");
            assert!(
                renewed.first() > acquired.last(),
                "renewed after the claims"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not renewed twice: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(keys.iter().all(|k| set.held(k)));
    set.close().await;
    let released: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM election_leases WHERE holder IS NULL")
            .fetch_one(e.pool())
            .await
            .expect("count");
    assert_eq!(released, 200, "close released every row");
}

#[tokio::test]
async fn a_deleted_database_file_loses_every_key_and_refuses_guards() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, steady()).await;
    let set = e.lease_set("node-a").await.expect("set");
    for k in ["a", "b", "c"] {
        assert!(set.ask(k).await.expect("ask"), "{k} won");
    }
    for f in ["app.db", "app.db-wal", "app.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    // The commit point sees it at once.
    let mut ran = false;
    let refused = set.guard("a", async |_t| ran = true).await;
    assert!(matches!(refused, Err(Error::NotHeld { .. })), "{refused:?}");
    assert!(!ran, "the write must not run");
    // The renewal loop, at its next round, for every key.
    until("every key to be lost", || set.held_keys().is_empty()).await;
    set.close().await;
}
