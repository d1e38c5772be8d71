//! `PostgresFence` on a real server: a stale token's write rolls back with
//! the caller's transaction, concurrent advances serialise on the mark row,
//! tokens up to `Epoch::MAX`, and the `Fence` trait.

mod common;

use std::time::Duration;

use election_core::Epoch;
use election_postgres::{PostgresElection, PostgresFence};
use fencing::{Fence, ResourceName, Token};

fn t(n: u64) -> Token {
    Token::from_epoch(Epoch::new(n).expect("epoch"))
}

async fn setup() -> (postgres_testkit::Server, PostgresElection, PostgresFence) {
    let server = common::server();
    let e = common::open(&server, common::fast()).await;
    server
        .sql("CREATE TABLE public.ledger (entry text NOT NULL)")
        .expect("app table");
    let fence = e.fence();
    (server, e, fence)
}

/// One insert of `entry` fenced by `token` in the insert's own
/// transaction: `Ok` if it committed.
async fn fenced_insert(
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
    entry: &str,
) -> Result<(), fencing::Error> {
    let r = ResourceName::new("ledger").expect("name");
    let mut tx = e.pool().begin().await.expect("begin");
    sqlx::query("INSERT INTO public.ledger VALUES ($1)")
        .bind(entry)
        .execute(&mut *tx)
        .await
        .expect("insert");
    fence.advance_in(&mut tx, &r, token).await?;
    tx.commit().await.expect("commit");
    Ok(())
}

/// Opens a transaction that advances the ledger's fence to `token` and
/// inserts `entry`, and leaves it open (holding the mark row).
async fn open_fenced_insert(
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
    entry: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let r = ResourceName::new("ledger").expect("name");
    let mut tx = e.pool().begin().await.expect("begin");
    fence
        .advance_in(&mut tx, &r, token)
        .await
        .unwrap_or_else(|err| panic!("advance to {token:?}: {err}"));
    sqlx::query("INSERT INTO public.ledger VALUES ($1)")
        .bind(entry)
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx
}

fn entries(server: &postgres_testkit::Server) -> String {
    server
        .sql("SELECT coalesce(string_agg(entry, ',' ORDER BY entry), '') FROM public.ledger")
        .expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_tokens_write_is_rolled_back() {
    let (server, e, fence) = setup().await;
    fenced_insert(&e, &fence, t(5), "five")
        .await
        .expect("first");
    fenced_insert(&e, &fence, t(5), "five-again")
        .await
        .expect("same token");
    let stale = fenced_insert(&e, &fence, t(4), "four").await;
    match stale {
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => assert_eq!((presented, high_water_mark), (t(4), t(5))),
        other => panic!("expected stale, got {other:?}"),
    }
    assert_eq!(entries(&server), "five,five-again");
    // Tokens up to Epoch::MAX fit.
    fenced_insert(&e, &fence, Token::from_epoch(Epoch::MAX), "max")
        .await
        .expect("max");
    let r = ResourceName::new("ledger").expect("name");
    assert_eq!(
        fence.high_water_mark(&r).await.expect("mark"),
        Some(Token::from_epoch(Epoch::MAX))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_advances_serialise_on_the_mark_row() {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(3)).await.expect("seed the row");
    // The higher token's transaction advances first and stays open.
    let high = open_fenced_insert(&e, &fence, t(7), "seven").await;
    // The lower one waits on the mark row...
    let (e2, fence2) = (e.clone(), fence.clone());
    let low = tokio::spawn(async move { fenced_insert(&e2, &fence2, t(6), "six").await });
    // ... until the higher commits: it is seen waiting for the row lock.
    until_a_lock_waits(&server, &low).await;
    high.commit().await.expect("commit 7");
    let low = tokio::time::timeout(Duration::from_secs(30), low)
        .await
        .expect("the waiting advance ends")
        .expect("task");
    assert!(matches!(low, Err(fencing::Error::Stale { .. })), "{low:?}");
    assert_eq!(entries(&server), "seven");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_trait_runs_writes_only_for_current_tokens() {
    let (_server, _e, fence) = setup().await;
    let r = ResourceName::new("jobs").expect("name");
    assert_eq!(fence.high_water_mark(&r).await.expect("none"), None);
    assert!(fence.advance(&r, t(2)).await.expect("raise").raised());
    assert!(!fence.advance(&r, t(2)).await.expect("same").raised());
    let mut ran = Vec::new();
    fence
        .fenced(&r, t(3), || async { ran.push(3) })
        .await
        .expect("current");
    let late = fence.fenced(&r, t(2), || async { ran.push(2) }).await;
    assert!(matches!(late, Err(fencing::Error::Stale { .. })));
    assert_eq!(ran, [3]);
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(3)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terms_epoch_fences_a_deposed_leader() {
    let (server, e, fence) = setup().await;
    let a = e
        .candidate("ledger", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let old = Token::issue(&a).expect("token");
    fenced_insert(&e, &fence, old, "a").await.expect("a writes");
    assert!(common::intrude(&server, "ledger"));
    tokio::time::timeout(Duration::from_secs(30), a.lost())
        .await
        .expect("a loses");
    a.resign().await.ok();
    let b = e
        .candidate("ledger", "b")
        .expect("b")
        .campaign()
        .await
        .expect("b");
    fenced_insert(&e, &fence, Token::issue(&b).expect("token"), "b")
        .await
        .expect("b writes");
    assert!(fenced_insert(&e, &fence, old, "a-late").await.is_err());
    assert_eq!(entries(&server), "a,b");
}

/// Waits (bounded) until some session waits for a lock, checking that
/// `task` has not finished meanwhile.
async fn until_a_lock_waits<T>(
    server: &postgres_testkit::Server,
    task: &tokio::task::JoinHandle<T>,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while server
        .sql("SELECT count(*) FROM pg_locks WHERE NOT granted")
        .expect("locks")
        == "0"
    {
        assert!(
            !task.is_finished(),
            "the second transaction did not wait for the mark row"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second transaction never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!task.is_finished());
}

/// ADR 0041: a write under the current mark (the check that writes nothing)
/// still holds the mark row until its transaction ends, so the next term's
/// raise waits for it, and the old term's later writes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_waits_for_open_writes_under_the_current_mark() {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(5)).await.expect("seed the row");
    let mut old = e.pool().begin().await.expect("begin");
    let advance = fence.advance_in(&mut old, &r, t(5)).await.expect("check 5");
    assert!(!advance.raised() && advance.previous == Some(t(5)));
    sqlx::query("INSERT INTO public.ledger VALUES ('five')")
        .execute(&mut *old)
        .await
        .expect("insert");
    let (e2, fence2) = (e.clone(), fence.clone());
    let raise = tokio::spawn(async move { fenced_insert(&e2, &fence2, t(6), "six").await });
    until_a_lock_waits(&server, &raise).await;
    old.commit().await.expect("commit 5");
    tokio::time::timeout(Duration::from_secs(30), raise)
        .await
        .expect("the raise ends")
        .expect("task")
        .expect("raise to 6");
    let late = fenced_insert(&e, &fence, t(5), "five-late").await;
    assert!(
        matches!(late, Err(fencing::Error::Stale { .. })),
        "{late:?}"
    );
    assert_eq!(entries(&server), "five,six");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(6)));
}

/// ADR 0041: a write under the committed mark waits for an uncommitted
/// raise of it, then sees the raised mark and is refused with its write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_under_the_current_mark_waits_for_an_uncommitted_raise() {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(5)).await.expect("seed the row");
    let high = open_fenced_insert(&e, &fence, t(7), "seven").await;
    let (e2, fence2) = (e.clone(), fence.clone());
    let low = tokio::spawn(async move { fenced_insert(&e2, &fence2, t(5), "five").await });
    until_a_lock_waits(&server, &low).await;
    high.commit().await.expect("commit 7");
    let low = tokio::time::timeout(Duration::from_secs(30), low)
        .await
        .expect("the waiting check ends")
        .expect("task");
    match low {
        Err(fencing::Error::Stale {
            presented,
            high_water_mark,
            ..
        }) => assert_eq!((presented, high_water_mark), (t(5), t(7))),
        other => panic!("expected stale, got {other:?}"),
    }
    assert_eq!(entries(&server), "seven");
}
