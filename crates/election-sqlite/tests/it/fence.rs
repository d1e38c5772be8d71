//! The SQLite fence: the check commits with the guarded write or not at all.

use crate::common;

use election_core::Epoch;
use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
use fencing::{Fence, ResourceName, Token};
use proptest::prelude::*;
use sqlx::Connection;

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).expect("non-zero"))
}

async fn setup() -> (tempfile::TempDir, SqliteElection) {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, SqliteOptions::default()).await;
    common::create_data_table(&e).await;
    (dir, e)
}

/// One guarded write in the caller's transaction; true if it committed.
async fn guarded_insert(e: &SqliteElection, token: Token, v: i64) -> bool {
    match common::fenced_insert(e, "data", token, v).await {
        Ok(()) => true,
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => {
            assert_eq!(presented, token);
            assert!(high_water_mark > token);
            false // dropped: rolled back with the insert
        }
        Err(other) => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_stale_token_rolls_back_the_write_made_in_the_same_transaction() {
    let (_dir, e) = setup().await;
    assert!(guarded_insert(&e, t(2), 20).await);
    assert!(
        guarded_insert(&e, t(2), 21).await,
        "equal tokens are accepted"
    );
    assert!(
        !guarded_insert(&e, t(1), 10).await,
        "an older token is refused"
    );
    assert!(guarded_insert(&e, t(3), 30).await);
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid")
        .fetch_all(e.pool())
        .await
        .expect("select");
    assert_eq!(rows, [20, 21, 30]);
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    assert_eq!(
        fence
            .high_water_mark(&ResourceName::new("data").expect("name"))
            .await
            .expect("mark"),
        Some(t(3))
    );
}

#[tokio::test]
async fn the_fence_trait_on_sqlite() {
    let (_dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("jobs").expect("name");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), None);
    let a = fence.advance(&r, t(5)).await.expect("advance");
    assert!(a.raised());
    let ran = fence
        .fenced(&r, t(5), || async { 1 })
        .await
        .expect("fenced");
    assert_eq!(ran, 1);
    let mut ran_stale = false;
    let stale = fence.fenced(&r, t(4), || async { ran_stale = true }).await;
    assert!(matches!(stale, Err(fencing::Error::Stale { .. })));
    assert!(!ran_stale, "a stale write must never run");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// For any order in which writers present tokens, the tokens of the
    /// committed writes never decrease, and every refused one is below the
    /// mark of its time.
    #[test]
    fn committed_tokens_never_decrease(tokens in proptest::collection::vec(1u64..8, 1..30)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let (_dir, e) = setup().await;
            let mut highest = 0;
            for (i, &n) in tokens.iter().enumerate() {
                let committed = guarded_insert(&e, t(n), i64::try_from(i).unwrap()).await;
                prop_assert_eq!(committed, n >= highest, "token {} after {}", n, highest);
                highest = highest.max(n);
            }
            let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid").fetch_all(e.pool()).await.expect("select");
            let committed: Vec<u64> = rows.iter().map(|&i| tokens[usize::try_from(i).unwrap()]).collect();
            prop_assert!(committed.windows(2).all(|w| w[0] <= w[1]), "{:?}", committed);
            Ok(())
        })?;
    }
}

/// An external store, written by `fenced` writes: the tokens in the order
/// their writes landed.
type Landed = std::sync::Arc<std::sync::Mutex<Vec<u64>>>;

/// Issue 11, item 1: a fenced write to an external store lands, then its
/// future is dropped (the process could as well die) before `fenced`
/// returns. The mark must already be durable: a lower token is refused
/// afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_dropped_after_it_landed_keeps_lower_tokens_out() {
    let (_dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("external").expect("name");
    let landed = Landed::default();

    let (ran_tx, ran_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn({
        let (fence, r, landed) = (fence.clone(), r.clone(), landed.clone());
        async move {
            fence
                .fenced(&r, t(5), || async move {
                    landed.lock().expect("lock").push(5);
                    let _ = ran_tx.send(());
                    // The write's acknowledgement never comes back.
                    std::future::pending::<()>().await;
                })
                .await
        }
    });
    ran_rx.await.expect("the write ran");
    task.abort();
    assert!(task.await.expect_err("aborted").is_cancelled());

    let late = fence
        .fenced(&r, t(3), || async { landed.lock().expect("lock").push(3) })
        .await;
    assert!(
        matches!(late, Err(fencing::Error::Stale { .. })),
        "a lower token after token 5's write landed: {late:?}"
    );
    assert_eq!(*landed.lock().expect("lock"), [5]);
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(5)));
}

/// Concurrent `fenced` writers with mixed tokens: the external store sees
/// their writes in non-decreasing token order, and a refused write never
/// runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fenced_writes_land_in_token_order() {
    let (_dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("external").expect("name");
    let landed = Landed::default();
    let tokens = [4u64, 2, 7, 3, 7, 5, 9, 2, 8, 6, 9, 10, 4, 11];
    let writers: Vec<_> = tokens
        .iter()
        .map(|&n| {
            let (fence, r, landed) = (fence.clone(), r.clone(), landed.clone());
            tokio::spawn(async move {
                fence
                    .fenced(&r, t(n), || async move {
                        tokio::task::yield_now().await;
                        landed.lock().expect("lock").push(n);
                    })
                    .await
            })
        })
        .collect();
    let mut accepted = 0;
    for w in writers {
        match w.await.expect("join") {
            Ok(()) => accepted += 1,
            Err(fencing::Error::Stale { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    let landed = landed.lock().expect("lock").clone();
    assert_eq!(landed.len(), accepted, "a refused write never runs");
    assert!(landed.windows(2).all(|w| w[0] <= w[1]), "{landed:?}");
    assert!(landed.contains(&11));
}

/// The token range's edge: `Epoch::MAX` (`i64::MAX`) is a token like any
/// other, in every way into the fence.
#[tokio::test]
async fn the_fence_accepts_every_epoch_up_to_max() {
    let (_dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("edge").expect("name");
    let max = Token::from_epoch(Epoch::MAX);
    let below = t(Epoch::MAX.get() - 1);
    assert!(fence.advance(&r, below).await.expect("MAX - 1").raised());
    assert_eq!(fence.fenced(&r, max, || async { 1 }).await.expect("MAX"), 1);
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(max));
    assert_eq!(
        fence.fenced(&r, max, || async { 2 }).await.expect("again"),
        2
    );
    assert!(matches!(
        fence.advance(&r, below).await,
        Err(fencing::Error::Stale { .. })
    ));
    // In the application's own transaction, too.
    let own = ResourceName::new("own").expect("name");
    let mut conn = e.pool().acquire().await.expect("acquire");
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.expect("begin");
    fence
        .advance_in(&mut tx, &own, max)
        .await
        .expect("MAX in a transaction");
    tx.commit().await.expect("commit");
    assert_eq!(fence.high_water_mark(&own).await.expect("mark"), Some(max));
}

/// A connection whose commits are not durable (`synchronous = NORMAL`)
/// cannot promise the mark survives a power failure after the write
/// landed: `fenced` refuses it before anything is written.
#[tokio::test]
async fn a_fenced_write_on_a_connection_without_durable_commits_is_refused() {
    let (dir, _e) = setup().await;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
    let pool = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("connect");
    let fence = SqliteFence::new(pool).await.expect("fence");
    let r = ResourceName::new("external").expect("name");
    let mut ran = false;
    let refused = fence.fenced(&r, t(4), || async { ran = true }).await;
    assert!(
        matches!(
            refused,
            Err(fencing::Error::Config(
                election_core::ConfigError::BadSetting {
                    setting: "synchronous",
                    ..
                }
            ))
        ),
        "{refused:?}"
    );
    assert!(!ran, "the write must not run");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), None);
    assert!(matches!(
        fence.advance(&r, t(4)).await,
        Err(fencing::Error::Config(_))
    ));
}

/// Issue 11, item 1, the failed `COMMIT`: a trigger makes every commit
/// that raises the mark of `trapped` fail (a deferred foreign key, checked
/// at `COMMIT`). `fenced` must then report an error only for a write that
/// did not run: never "failed" for a write that landed.
#[tokio::test]
async fn a_failed_commit_of_the_mark_never_hides_a_write_that_ran() {
    let (_dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    for stmt in [
        "PRAGMA foreign_keys = ON",
        "CREATE TABLE trap_parent (id INTEGER PRIMARY KEY)",
        "CREATE TABLE trap (parent INTEGER REFERENCES trap_parent (id) DEFERRABLE INITIALLY DEFERRED)",
        "CREATE TRIGGER trap_insert AFTER INSERT ON election_fences WHEN NEW.resource = 'trapped'
         BEGIN INSERT INTO trap VALUES (42); END",
        "CREATE TRIGGER trap_update AFTER UPDATE ON election_fences WHEN NEW.resource = 'trapped'
         BEGIN INSERT INTO trap VALUES (42); END",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(e.pool())
            .await
            .expect("trap");
    }
    let r = ResourceName::new("trapped").expect("name");
    let mut ran = false;
    let outcome = fence.fenced(&r, t(5), || async { ran = true }).await;
    assert!(
        outcome.is_ok() || !ran,
        "told {outcome:?} although the write ran"
    );
    assert!(
        matches!(outcome, Err(fencing::Error::Unavailable { .. })),
        "the commit fails: {outcome:?}"
    );
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), None);
}

/// Issue 23, item 5: the marks guard themselves as the epoch records do
/// (ADR 0047). An operator's `DELETE FROM election_fences` (or a lowering
/// `UPDATE`, or a renamed mark) is refused by the database, so a token-3
/// write is never committed after a token-7 write (before ADR 0047 the
/// rows went, and the token-3 write committed after the token-7 write).
#[tokio::test]
async fn deleting_or_lowering_the_marks_is_refused_and_a_lower_token_stays_out() {
    let (_dir, e) = setup().await;
    assert!(guarded_insert(&e, t(7), 70).await);
    let mut not_refused = Vec::new();
    for sql in [
        "DELETE FROM election_fences",
        "DELETE FROM election_fences WHERE resource = 'data'",
        "UPDATE election_fences SET token = 3",
        "UPDATE election_fences SET resource = 'other'",
        "REPLACE INTO election_fences (resource, token) VALUES ('data', 3)",
    ] {
        let refused = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(e.pool())
            .await;
        if refused.is_ok() {
            not_refused.push(sql);
        }
    }
    let lower = common::fenced_insert(&e, "data", t(3), 30).await;
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid")
        .fetch_all(e.pool())
        .await
        .expect("select");
    assert_eq!(
        rows,
        [70],
        "a token-3 write committed after a token-7 write (the write: {lower:?}; not refused: {not_refused:?})"
    );
    assert!(not_refused.is_empty(), "not refused: {not_refused:?}");
    assert!(
        matches!(lower, Err(fencing::Error::Stale { .. })),
        "{lower:?}"
    );
    // Raising stays allowed, and is how a fence records a newer token.
    sqlx::query("UPDATE election_fences SET token = token + 1")
        .execute(e.pool())
        .await
        .expect("raising is allowed");
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("data").expect("name");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(8)));
}

/// A version 2 database (marks without guards, as the release before ADR
/// 0047 left it, with a mark stored) is migrated to version 3 at open:
/// the guards come in the transaction that sets the version, the mark is
/// kept, and deleting it is then refused.
#[tokio::test]
async fn a_version_2_database_gets_guarded_marks() {
    let (dir, e) = setup().await;
    for stmt in [
        "DROP TRIGGER election_fences_never_deleted",
        "DROP TRIGGER election_fences_never_lowered",
        "DROP TRIGGER election_fences_never_replaced_lower",
        "INSERT INTO election_fences VALUES ('data', 5)",
        "UPDATE election_meta SET value = 2 WHERE key = 'schema_version'",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(e.pool())
            .await
            .unwrap_or_else(|err| panic!("{stmt}: {err}"));
    }
    e.pool().close().await;
    let e = common::open_with(&dir, SqliteOptions::default()).await;
    let (version, guards): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT value FROM election_meta WHERE key = 'schema_version'),
                (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'election_fences')",
    )
    .fetch_one(e.pool())
    .await
    .expect("read");
    assert_eq!((version, guards), (3, 3));
    assert_eq!(election_sqlite::schema::SCHEMA_VERSION, 3);
    assert!(
        sqlx::query("DELETE FROM election_fences")
            .execute(e.pool())
            .await
            .is_err()
    );
    assert!(!guarded_insert(&e, t(4), 40).await, "the mark 5 was kept");
    assert!(guarded_insert(&e, t(5), 50).await);
}

/// Issue 23, items 1 and 2, for the fence (ADR 0046): marks read and
/// raised through a second name of the database live in that name's own
/// WAL, where a fence through the other name does not see them. A fence
/// refuses to work through a database file with a second name (and, as a
/// holder does, through a replaced one): `SqliteFence::new` at once, its
/// writes and reads while the second name lasts. Before, a fence through
/// a second hard link accepted token 3 after token 7 was committed through
/// the first name.
#[tokio::test]
async fn a_fence_refuses_a_database_with_a_second_name() {
    let (dir, e) = setup().await;
    let fence = SqliteFence::new(e.pool().clone()).await.expect("fence");
    let r = ResourceName::new("data").expect("name");
    fence.advance(&r, t(7)).await.expect("seven");
    let link = dir.path().join("link.db");
    std::fs::hard_link(dir.path().join("app.db"), &link).expect("link");
    let other = sqlx::SqlitePool::connect(&format!("sqlite://{}", link.display()))
        .await
        .expect("connect through the link");
    let second = SqliteFence::new(other).await;
    let lower = match &second {
        Ok(f) => Some(f.advance(&r, t(3)).await),
        Err(_) => None,
    };
    assert!(
        matches!(second, Err(election_sqlite::Error::SecondName { .. })),
        "a fence through the second name: {second:?}; its token-3 advance after token 7: {lower:?}"
    );
    let mut ran = false;
    let refused = fence.fenced(&r, t(7), || async { ran = true }).await;
    assert!(
        matches!(refused, Err(fencing::Error::Config(_))),
        "a fenced write through a database with a second name: {refused:?}"
    );
    assert!(!ran, "the write ran");
    assert!(matches!(
        fence.advance(&r, t(8)).await,
        Err(fencing::Error::Config(_))
    ));
    std::fs::remove_file(&link).expect("unlink");
    fence.advance(&r, t(8)).await.expect("one name again");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(8)));
}

/// `begin_fenced`, the same shape as PostgreSQL's: the check is the
/// transaction's first act, the write commits with it, a lower token is
/// refused with nothing written, and a begin dropped at any await point
/// never leaves a connection holding SQLite's write lock (the next
/// `BEGIN IMMEDIATE` goes through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_fenced_commits_with_the_check_and_a_dropped_begin_leaves_no_lock() {
    let (_dir, e) = setup().await;
    let fence = e.fence();
    let data = ResourceName::new("data").expect("name");
    let mut tx = fence.begin_fenced(&data, t(5)).await.expect("begin 5");
    sqlx::query("INSERT INTO data (v) VALUES (50)")
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx.commit().await.expect("commit");
    match fence.begin_fenced(&data, t(4)).await {
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => assert_eq!((presented, high_water_mark), (t(4), t(5))),
        other => panic!("a lower token began a transaction: {other:?}"),
    }
    // Dropped at every point of its run: begin, check, return.
    for polls in 0..6 {
        // Boxed, so that `drop` drops the future itself.
        let mut begin = Box::pin(fence.begin_fenced(&data, t(6)));
        for _ in 0..polls {
            // Never polled again once done; a finished begin's
            // transaction is dropped here, which rolls it back.
            if futures::poll!(begin.as_mut()).is_ready() {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(begin);
        // The write lock is free again within a generous bound (a begin
        // finished in the background holds it for a moment, then rolls
        // back).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mut conn = e.pool().acquire().await.expect("acquire");
            match conn.begin_with("BEGIN IMMEDIATE").await {
                Ok(tx) => {
                    drop(tx);
                    break;
                }
                Err(err) if std::time::Instant::now() < deadline => {
                    eprintln!("after a begin dropped after {polls} polls: {err}; again");
                }
                Err(err) => panic!(
                    "the write lock was still held 30 s after a begin dropped after {polls} polls: {err}"
                ),
            }
        }
    }
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid")
        .fetch_all(e.pool())
        .await
        .expect("select");
    assert_eq!(rows, [50], "only the committed fenced write is there");
}
