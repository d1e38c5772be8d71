//! The SQLite fence: the check commits with the guarded write or not at all.

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
    let e = SqliteElection::open(dir.path().join("app.db"), SqliteOptions::default())
        .await
        .expect("open");
    sqlx::query("CREATE TABLE data (v INTEGER NOT NULL)")
        .execute(e.pool())
        .await
        .expect("create");
    (dir, e)
}

/// One guarded write in the caller's transaction; true if it committed.
async fn guarded_insert(e: &SqliteElection, token: Token, v: i64) -> bool {
    let r = ResourceName::new("data").expect("name");
    let mut conn = e.pool().acquire().await.expect("acquire");
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.expect("begin");
    // The write first, the check second: the order inside the transaction
    // does not matter, the commit does.
    sqlx::query("INSERT INTO data (v) VALUES (?1)")
        .bind(v)
        .execute(&mut *tx)
        .await
        .expect("insert");
    match SqliteFence::advance_in(&mut tx, &r, token).await {
        Ok(_) => {
            tx.commit().await.expect("commit");
            true
        }
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
                let committed = guarded_insert(&e, t(n), i as i64).await;
                prop_assert_eq!(committed, n >= highest, "token {} after {}", n, highest);
                highest = highest.max(n);
            }
            let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM data ORDER BY rowid").fetch_all(e.pool()).await.expect("select");
            let committed: Vec<u64> = rows.iter().map(|&i| tokens[i as usize]).collect();
            prop_assert!(committed.windows(2).all(|w| w[0] <= w[1]), "{:?}", committed);
            Ok(())
        })?;
    }
}
