//! `PostgresFence` on a real server: a stale token's write rolls back with
//! the caller's transaction, concurrent advances serialise on the mark row,
//! tokens up to `Epoch::MAX`, and the `Fence` trait. The tests of a fenced
//! write run twice: with `advance_in` in a transaction the test began, and
//! with `begin_fenced` (ADR 0044).

use crate::common;

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

/// How a fenced write checks its token.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// `pool.begin()`, then `advance_in` in the transaction.
    AdvanceIn,
    /// `begin_fenced`: the check in the round trip of the `BEGIN`.
    BeginFenced,
}

/// A transaction fenced by `token` on the ledger's mark, by `path`.
async fn begin(
    path: Path,
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, fencing::Error> {
    let r = ResourceName::new("ledger").expect("name");
    match path {
        Path::AdvanceIn => {
            let mut tx = e.pool().begin().await.expect("begin");
            fence.advance_in(&mut tx, &r, token).await?;
            Ok(tx)
        }
        Path::BeginFenced => fence.begin_fenced(&r, token).await,
    }
}

/// One insert of `entry` fenced by `token` in the insert's own
/// transaction: `Ok` if it committed. With `advance_in` the insert comes
/// first and the check last.
async fn fenced_insert(
    path: Path,
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
    entry: &str,
) -> Result<(), fencing::Error> {
    let r = ResourceName::new("ledger").expect("name");
    let insert = sqlx::query("INSERT INTO public.ledger VALUES ($1)").bind(entry);
    let tx = match path {
        Path::AdvanceIn => {
            let mut tx = e.pool().begin().await.expect("begin");
            insert.execute(&mut *tx).await.expect("insert");
            fence.advance_in(&mut tx, &r, token).await?;
            tx
        }
        Path::BeginFenced => {
            let mut tx = fence.begin_fenced(&r, token).await?;
            insert.execute(&mut *tx).await.expect("insert");
            tx
        }
    };
    tx.commit().await.expect("commit");
    Ok(())
}

/// Opens a transaction that advances the ledger's fence to `token` and
/// inserts `entry`, and leaves it open (holding the mark row).
async fn open_fenced_insert(
    path: Path,
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
    entry: &str,
) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = begin(path, e, fence, token)
        .await
        .unwrap_or_else(|err| panic!("advance to {token:?}: {err}"));
    sqlx::query("INSERT INTO public.ledger VALUES ($1)")
        .bind(entry)
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx
}

/// Two tests of one body: `<name>_advance_in` and `<name>_begin_fenced`.
macro_rules! both_paths {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn advance_in() {
                super::$name(super::Path::AdvanceIn).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn begin_fenced() {
                super::$name(super::Path::BeginFenced).await
            }
        }
    };
}

fn entries(server: &postgres_testkit::Server) -> String {
    server
        .sql("SELECT coalesce(string_agg(entry, ',' ORDER BY entry), '') FROM public.ledger")
        .expect("read")
}

both_paths!(a_stale_tokens_write_is_rolled_back);
async fn a_stale_tokens_write_is_rolled_back(path: Path) {
    let (server, e, fence) = setup().await;
    fenced_insert(path, &e, &fence, t(5), "five")
        .await
        .expect("first");
    fenced_insert(path, &e, &fence, t(5), "five-again")
        .await
        .expect("same token");
    let stale = fenced_insert(path, &e, &fence, t(4), "four").await;
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
    fenced_insert(path, &e, &fence, Token::from_epoch(Epoch::MAX), "max")
        .await
        .expect("max");
    let r = ResourceName::new("ledger").expect("name");
    assert_eq!(
        fence.high_water_mark(&r).await.expect("mark"),
        Some(Token::from_epoch(Epoch::MAX))
    );
}

both_paths!(concurrent_advances_serialise_on_the_mark_row);
async fn concurrent_advances_serialise_on_the_mark_row(path: Path) {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(3)).await.expect("seed the row");
    let low = waits_for_seven(path, &server, &e, &fence, t(6), "six").await;
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

both_paths!(a_terms_epoch_fences_a_deposed_leader);
async fn a_terms_epoch_fences_a_deposed_leader(path: Path) {
    let (server, e, fence) = setup().await;
    let a = e
        .candidate("ledger", "a")
        .expect("a")
        .campaign()
        .await
        .expect("a");
    let old = Token::issue(&a).expect("token");
    fenced_insert(path, &e, &fence, old, "a")
        .await
        .expect("a writes");
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
    fenced_insert(path, &e, &fence, Token::issue(&b).expect("token"), "b")
        .await
        .expect("b writes");
    assert!(
        fenced_insert(path, &e, &fence, old, "a-late")
            .await
            .is_err()
    );
    assert_eq!(entries(&server), "a,b");
}

/// Token 7's fenced insert of "seven" advances first and stays open; a
/// fenced insert of `entry` with the lower `token` is seen waiting on the
/// mark row; then 7 commits. Returns how the waiting insert ended.
async fn waits_for_seven(
    path: Path,
    server: &postgres_testkit::Server,
    e: &PostgresElection,
    fence: &PostgresFence,
    token: Token,
    entry: &'static str,
) -> Result<(), fencing::Error> {
    let high = open_fenced_insert(path, e, fence, t(7), "seven").await;
    let (e2, fence2) = (e.clone(), fence.clone());
    let low = tokio::spawn(async move { fenced_insert(path, &e2, &fence2, token, entry).await });
    until_a_lock_waits(server, &low).await;
    high.commit().await.expect("commit 7");
    tokio::time::timeout(Duration::from_secs(30), low)
        .await
        .expect("the waiting insert ends")
        .expect("task")
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

both_paths!(a_raise_waits_for_open_writes_under_the_current_mark);
/// ADR 0041: a write under the current mark (the check that writes nothing)
/// still holds the mark row until its transaction ends, so the next term's
/// raise waits for it, and the old term's later writes are refused.
async fn a_raise_waits_for_open_writes_under_the_current_mark(path: Path) {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(5)).await.expect("seed the row");
    let old = match path {
        Path::AdvanceIn => {
            let mut old = e.pool().begin().await.expect("begin");
            let advance = fence.advance_in(&mut old, &r, t(5)).await.expect("check 5");
            assert!(!advance.raised() && advance.previous == Some(t(5)));
            sqlx::query("INSERT INTO public.ledger VALUES ('five')")
                .execute(&mut *old)
                .await
                .expect("insert");
            old
        }
        Path::BeginFenced => open_fenced_insert(path, &e, &fence, t(5), "five").await,
    };
    let (e2, fence2) = (e.clone(), fence.clone());
    let raise = tokio::spawn(async move { fenced_insert(path, &e2, &fence2, t(6), "six").await });
    until_a_lock_waits(&server, &raise).await;
    old.commit().await.expect("commit 5");
    tokio::time::timeout(Duration::from_secs(30), raise)
        .await
        .expect("the raise ends")
        .expect("task")
        .expect("raise to 6");
    let late = fenced_insert(path, &e, &fence, t(5), "five-late").await;
    assert!(
        matches!(late, Err(fencing::Error::Stale { .. })),
        "{late:?}"
    );
    assert_eq!(entries(&server), "five,six");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(6)));
}

both_paths!(a_check_under_the_current_mark_waits_for_an_uncommitted_raise);
/// ADR 0041: a write under the committed mark waits for an uncommitted
/// raise of it, then sees the raised mark and is refused with its write.
async fn a_check_under_the_current_mark_waits_for_an_uncommitted_raise(path: Path) {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(5)).await.expect("seed the row");
    let low = waits_for_seven(path, &server, &e, &fence, t(5), "five").await;
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

/// A fence on a pool of exactly one connection, so every use after the
/// first runs on the connection the first one left behind.
async fn one_connection_fence(server: &postgres_testkit::Server) -> (sqlx::PgPool, PostgresFence) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&server.url())
        .await
        .expect("pool");
    let fence = PostgresFence::new((pool.clone(), "election"))
        .await
        .expect("fence");
    (pool, fence)
}

/// ADR 0044: `begin_fenced` under a higher mark is `Stale` with both
/// tokens, writes nothing, and leaves its pool's connection outside any
/// transaction: the next transaction and a plain statement on the same
/// connection commit (an aborted or open transaction left behind would
/// make them fail or never commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_begin_fenced_leaves_the_connection_clean() {
    let (server, _e, _fence) = setup().await;
    let (pool, fence) = one_connection_fence(&server).await;
    let r = ResourceName::new("ledger").expect("name");
    fence.advance(&r, t(7)).await.expect("seed the row");
    for round in 0..2 {
        match fence.begin_fenced(&r, t(6)).await {
            Err(fencing::Error::Stale {
                presented,
                high_water_mark,
                resource,
            }) => assert_eq!(
                (presented, high_water_mark, resource),
                (t(6), t(7), r.clone())
            ),
            other => panic!("round {round}: expected stale, got {other:?}"),
        }
    }
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(7)));
    // The same (only) connection: a transaction, then a plain statement.
    let mut tx = pool.begin().await.expect("begin after a refusal");
    sqlx::query("INSERT INTO public.ledger VALUES ('tx')")
        .execute(&mut *tx)
        .await
        .expect("insert in a transaction");
    tx.commit().await.expect("commit");
    sqlx::query("INSERT INTO public.ledger VALUES ('plain')")
        .execute(&pool)
        .await
        .expect("plain insert");
    assert_eq!(entries(&server), "plain,tx", "both committed");
    assert_eq!(
        server
            .sql("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'")
            .expect("sessions"),
        "0"
    );
    // And a current token still gets in on it.
    let mut tx = fence.begin_fenced(&r, t(7)).await.expect("current");
    sqlx::query("INSERT INTO public.ledger VALUES ('seven')")
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(entries(&server), "plain,seven,tx");
}

/// `begin_fenced` raises a missing or lower mark in the returned
/// transaction: the raise commits with the write, and rolls back with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_fenced_raises_a_lower_or_missing_mark_with_the_write() {
    let (server, e, fence) = setup().await;
    let r = ResourceName::new("ledger").expect("name");
    let insert =
        |entry: &'static str| sqlx::query("INSERT INTO public.ledger VALUES ($1)").bind(entry);
    // Missing: raised to 3, committed with the write.
    let mut tx = fence.begin_fenced(&r, t(3)).await.expect("missing");
    insert("three").execute(&mut *tx).await.expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(3)));
    // Lower: a raise to 5 that rolls back leaves the mark and no write.
    let mut tx = fence.begin_fenced(&r, t(5)).await.expect("lower");
    insert("five").execute(&mut *tx).await.expect("insert");
    tx.rollback().await.expect("rollback");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(3)));
    // A dropped transaction rolls back too.
    let mut tx = fence.begin_fenced(&r, t(5)).await.expect("lower");
    insert("five").execute(&mut *tx).await.expect("insert");
    drop(tx);
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(3)));
    // Then committed: the mark and the write together.
    let mut tx = fence.begin_fenced(&r, t(5)).await.expect("lower");
    insert("five").execute(&mut *tx).await.expect("insert");
    tx.commit().await.expect("commit");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(5)));
    assert_eq!(entries(&server), "five,three");
    // advance_in agrees on the same function: 5 is held, 4 refused.
    let mut tx = fence.begin_fenced(&r, t(5)).await.expect("equal");
    let advance = fence.advance_in(&mut tx, &r, t(5)).await.expect("held");
    assert!(!advance.raised() && advance.previous == Some(t(5)));
    tx.commit().await.expect("commit");
    let mut tx = e.pool().begin().await.expect("begin");
    let stale = fence.advance_in(&mut tx, &r, t(4)).await;
    assert!(
        matches!(stale, Err(fencing::Error::Stale { .. })),
        "{stale:?}"
    );
}

/// Resource names go into `begin_fenced`'s query as string literals:
/// names shaped like SQL injections (quotes, semicolons, comments, dollar
/// quotes; a backslash is not a valid name) are one resource each, the
/// same one `advance_in` (bound as a parameter) and the mark read see, and
/// nothing else runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_fenced_takes_quotes_in_resource_names_literally() {
    let (server, e, fence) = setup().await;
    let names = [
        "a'b",
        "x', 9); DROP TABLE public.ledger; --",
        "''",
        "$$; DROP TABLE public.ledger; $$",
        "e'\\'",
        "ünï ' cödé",
    ];
    for (i, name) in names.iter().enumerate() {
        let Ok(r) = ResourceName::new(name) else {
            assert!(name.contains('\\'), "{name:?} is a valid name");
            continue;
        };
        let token = t(10 + i as u64);
        let tx = fence
            .begin_fenced(&r, token)
            .await
            .unwrap_or_else(|err| panic!("{name:?}: {err}"));
        tx.commit().await.expect("commit");
        assert_eq!(
            fence.high_water_mark(&r).await.expect("mark"),
            Some(token),
            "{name:?}"
        );
        let mut tx = e.pool().begin().await.expect("begin");
        let advance = fence.advance_in(&mut tx, &r, token).await.expect("held");
        assert_eq!(advance.previous, Some(token), "{name:?}");
        tx.commit().await.expect("commit");
        let stale = fence.begin_fenced(&r, t(2)).await;
        assert!(
            matches!(stale, Err(fencing::Error::Stale { .. })),
            "{name:?}: {stale:?}"
        );
    }
    assert_eq!(
        server
            .sql("SELECT count(*) FROM election.fences")
            .expect("marks"),
        (names.len() - 1).to_string()
    );
    assert_eq!(entries(&server), "", "the ledger is still there");
}

/// Issue 16: a refusal through `fence_enter` still counts in
/// `election_fence_refusals_total` (Rust decides the refusal with
/// `Advance::decide` from the stored mark the function reports), through
/// `begin_fenced` and `advance_in` alike; accepted tokens do not count.
#[test]
fn refusals_through_the_function_are_counted() {
    let recorder = election_testkit::recorder::TestRecorder::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let (_server, e, fence) = setup().await;
            let r = ResourceName::new("ledger").expect("name");
            for path in [Path::BeginFenced, Path::AdvanceIn] {
                begin(path, &e, &fence, t(5))
                    .await
                    .expect("current")
                    .commit()
                    .await
                    .expect("commit");
                let stale = begin(path, &e, &fence, t(4)).await;
                assert!(
                    matches!(stale, Err(fencing::Error::Stale { .. })),
                    "{path:?}"
                );
            }
            assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(5)));
        })
    });
    assert_eq!(recorder.counter("election_fence_refusals_total", &[]), 2);
}

/// A `begin_fenced` whose future is dropped while its query waits on the
/// server (here for a raise's row lock) must not leave its connection in
/// the pool inside the transaction the query then opens (holding the mark
/// row, and swallowing whatever runs next on that connection): sqlx 0.9's
/// own `begin` counts the transaction only after the reply, so a dropped
/// begin queues no rollback (transact-rs/sqlx#4393).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_begin_fenced_leaves_no_transaction_behind() {
    let (server, e, _fence) = setup().await;
    let (pool, fence) = one_connection_fence(&server).await;
    let r = ResourceName::new("ledger").expect("name");
    // An uncommitted raise to 5 holds the mark row.
    let raise = open_fenced_insert(Path::BeginFenced, &e, &e.fence(), t(5), "five").await;
    // The begin under 5 waits for it, and is dropped while it waits.
    let (fence2, r2) = (fence.clone(), r.clone());
    let waiting = tokio::spawn(async move { fence2.begin_fenced(&r2, t(5)).await.map(drop) });
    until_a_lock_waits(&server, &waiting).await;
    waiting.abort();
    assert!(waiting.await.expect_err("aborted").is_cancelled());
    // The raise commits: the dropped query now gets the mark and its BEGIN.
    raise.commit().await.expect("commit 5");
    // The only connection of the pool: a plain insert on it commits.
    sqlx::query("INSERT INTO public.ledger VALUES ('plain')")
        .execute(&pool)
        .await
        .expect("plain insert");
    assert_eq!(entries(&server), "five,plain", "the plain insert committed");
    // Nothing holds the mark row: a raise gets in at once.
    let mut tx = fence.begin_fenced(&r, t(6)).await.expect("raise to 6");
    sqlx::query("INSERT INTO public.ledger VALUES ('six')")
        .execute(&mut *tx)
        .await
        .expect("insert");
    tx.commit().await.expect("commit 6");
    assert_eq!(
        server
            .sql("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'")
            .expect("sessions"),
        "0"
    );
}

/// Issue 23, item 5: the marks guard themselves as the epoch records do
/// (ADR 0047). An operator's `DELETE`, `TRUNCATE` or lowering `UPDATE` of
/// `fences` is refused by the database, so a token-3 write is never
/// committed after a token-7 write (before ADR 0047 the rows went, and the
/// token-3 write committed after the token-7 write).
async fn deleting_or_lowering_the_marks_is_refused(path: Path) {
    let (server, e, fence) = setup().await;
    fenced_insert(path, &e, &fence, t(7), "seven")
        .await
        .expect("seven");
    let not_refused: Vec<&str> = [
        "DELETE FROM election.fences",
        "TRUNCATE election.fences",
        "UPDATE election.fences SET mark = 3",
        "UPDATE election.fences SET resource = 'other'",
        "INSERT INTO election.fences VALUES ('ledger', 3) \
         ON CONFLICT (resource) DO UPDATE SET mark = excluded.mark",
    ]
    .into_iter()
    .filter(|sql| server.sql(sql).is_ok())
    .collect();
    let lower = fenced_insert(path, &e, &fence, t(3), "three").await;
    assert_eq!(
        entries(&server),
        "seven",
        "a token-3 write committed after a token-7 write (the write: {lower:?}; not refused: {not_refused:?})"
    );
    assert!(not_refused.is_empty(), "not refused: {not_refused:?}");
    assert!(
        matches!(lower, Err(fencing::Error::Stale { .. })),
        "{lower:?}"
    );
    // Raising stays allowed.
    server
        .sql("UPDATE election.fences SET mark = mark + 1")
        .expect("raising is allowed");
    let r = ResourceName::new("ledger").expect("name");
    assert_eq!(fence.high_water_mark(&r).await.expect("mark"), Some(t(8)));
}
both_paths!(deleting_or_lowering_the_marks_is_refused);
