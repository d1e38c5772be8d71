//! A lease row deleted by hand while its holder holds it (issue 11, item
//! 7), the epoch state that survives it, and the epoch range's edge.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use election_core::{Claim, ConfigError, Epoch, Error as CoreError};
use election_sqlite::{Clock, SqliteElection, SqliteOptions};
use tokio::time::Instant;

const PATIENCE: Duration = Duration::from_secs(60);

/// Leases whose renewal loop does not run during a test: only a check
/// (confirm, guard) can find a change.
fn slow() -> SqliteOptions {
    SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options")
}

/// Short leases, for a contender that really waits out a TTL.
fn short() -> SqliteOptions {
    SqliteOptions::new(Duration::from_millis(1500), Duration::from_millis(500)).expect("options")
}

/// A monotonic clock moved by hand.
#[derive(Debug)]
struct HandClock {
    base: Instant,
    ms: AtomicU64,
}

impl HandClock {
    fn new() -> Arc<Self> {
        Arc::new(HandClock {
            base: Instant::now(),
            ms: AtomicU64::new(0),
        })
    }
    fn advance(&self, by: Duration) {
        self.ms
            .fetch_add(u64::try_from(by.as_millis()).unwrap(), Ordering::SeqCst);
    }
}

impl Clock for HandClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.ms.load(Ordering::SeqCst))
    }
    fn wall_unix_ms(&self) -> i64 {
        election_sqlite::SystemClock.wall_unix_ms()
    }
}

/// Deletes the lease row of `name` by hand, as an operator might.
async fn delete_row(e: &SqliteElection, name: &str) {
    let gone = sqlx::query("DELETE FROM election_leases WHERE name = ?1")
        .bind(name)
        .execute(e.pool())
        .await
        .expect("delete");
    assert_eq!(gone.rows_affected(), 1, "the row was there");
}

/// One claim attempt of `claim` (its attempt keeps what it observed).
async fn try_claim(
    claim: &election_sqlite::SqliteClaim,
    attempt: &mut election_sqlite::SqliteAttempt,
) -> Option<Epoch> {
    claim
        .try_claim(attempt)
        .await
        .expect("try_claim")
        .map(|w| w.epoch)
}

#[tokio::test]
async fn a_deleted_row_is_held_for_a_full_ttl_and_never_repeats_an_epoch() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, slow()).await;
    // Two terms before, so the holder's epoch is above the first.
    for _ in 0..2 {
        let t = e.candidate("jobs", "old").expect("old").campaign().await;
        t.expect("old wins").resign().await.expect("resign");
    }
    let term = common::elected(&e, "a").await;
    let held = term.epoch();

    // b has seen a hold the row; c arrives only after the deletion.
    let clock = HandClock::new();
    let b_election = common::open_with(&dir, slow())
        .await
        .with_clock(clock.clone());
    let b = b_election.claim("jobs", "b").expect("b");
    let mut b_attempt = b.open().await.expect("open");
    assert_eq!(try_claim(&b, &mut b_attempt).await, None, "a holds it");

    delete_row(&e, "jobs").await;

    let c = b_election.claim("jobs", "c").expect("c");
    let mut c_attempt = c.open().await.expect("open");
    let b_won = try_claim(&b, &mut b_attempt).await;
    let c_won = try_claim(&c, &mut c_attempt).await;
    assert_eq!(
        (b_won, c_won),
        (None, None),
        "nobody may win a row that vanished under a live holder (a still leads in epoch {held})"
    );
    clock.advance(slow().ttl() - Duration::from_millis(1));
    assert_eq!(try_claim(&b, &mut b_attempt).await, None, "within the TTL");
    assert_eq!(try_claim(&c, &mut c_attempt).await, None, "within the TTL");

    // The holder loses at its next check.
    assert!(!term.is_lost(), "its renewal loop has not looked yet");
    match term.confirm().await {
        Err(CoreError::Lost(lost)) => assert_eq!(lost.epoch, held),
        other => panic!("expected Lost, got {other:?}"),
    }
    assert!(term.is_lost());

    // A full TTL after the first sight of the vanished row: a new term,
    // above every earlier epoch.
    clock.advance(Duration::from_millis(1));
    let next = try_claim(&b, &mut b_attempt)
        .await
        .expect("b wins after a full TTL");
    assert!(next > held, "epoch {next} after {held}");
    assert_eq!(
        e.claim("jobs", "x")
            .expect("x")
            .leader()
            .await
            .expect("leader")
            .map(|l| (l.identity.to_string(), l.epoch)),
        Some(("b".to_owned(), next))
    );
    let _ = c;
    drop(term);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_set_waits_a_full_ttl_after_a_deleted_row_and_its_holder_loses() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, short()).await;
    let a = common::open_with(&dir, short())
        .await
        .lease_set("node-a")
        .await
        .expect("a");
    assert!(a.ask("k").await.expect("ask"));
    let held = a.epoch("k").expect("held");

    let deleted_at = Instant::now();
    delete_row(&e, "k").await;
    let b = e.lease_set("node-b").await.expect("b");
    let won_at_once = b.ask("k").await.expect("ask");
    assert!(
        !won_at_once,
        "b won a row that vanished under a live holder (epoch {:?}, a's {held})",
        b.epoch("k")
    );

    // a loses at its next check: the guard refuses and runs nothing.
    let mut ran = false;
    let refused = a.guard("k", async |_t| ran = true).await;
    assert!(
        matches!(refused, Err(CoreError::Lost(_) | CoreError::NotHeld { .. })),
        "expected Lost or NotHeld, got {refused:?}"
    );
    assert!(!ran);
    assert!(!a.held("k"));

    // Both sets want k again (the core re-claims a lost key at once): the
    // first to win it does so a full TTL after the deletion, with a higher
    // epoch, and never both.
    tokio::time::timeout(PATIENCE, async {
        while !a.held("k") && !b.held("k") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a set wins after the TTL");
    assert!(
        deleted_at.elapsed() >= short().ttl(),
        "won {:?} after the deletion, within the TTL",
        deleted_at.elapsed()
    );
    assert!(!(a.held("k") && b.held("k")), "both sets hold k");
    let next = a.epoch("k").or(b.epoch("k")).expect("held");
    assert!(next > held, "epoch {next} after {held}");
    a.close().await;
    b.close().await;
}

/// A version 1 database (before the epoch state): its lease rows seed the
/// epoch state, so epochs keep growing after the upgrade, also after a
/// lease row is deleted.
#[tokio::test]
async fn a_version_1_database_is_migrated_and_its_epochs_keep_growing() {
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("app.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
    for stmt in [
        "CREATE TABLE election_meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)",
        "INSERT INTO election_meta VALUES ('schema_version', 1)",
        "CREATE TABLE election_leases (name TEXT PRIMARY KEY NOT NULL, holder TEXT, nonce INTEGER,
            epoch INTEGER NOT NULL CHECK (epoch >= 0), version INTEGER NOT NULL,
            ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0), acquired_unix_ms INTEGER, renewed_unix_ms INTEGER)",
        "CREATE TABLE election_fences (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL CHECK (token > 0))",
        "INSERT INTO election_leases (name, holder, nonce, epoch, version, ttl_ms) VALUES ('jobs', NULL, NULL, 7, 12, 1000)",
        "INSERT INTO election_leases (name, holder, nonce, epoch, version, ttl_ms) VALUES ('old', NULL, NULL, 1, 3, 1000)",
    ] {
        sqlx::query(stmt).execute(&pool).await.expect("v1 schema");
    }
    let e = SqliteElection::with_pool(pool, slow())
        .await
        .expect("migrates");
    let version: i64 =
        sqlx::query_scalar("SELECT value FROM election_meta WHERE key = 'schema_version'")
            .fetch_one(e.pool())
            .await
            .expect("version");
    assert_eq!(version, election_sqlite::schema::SCHEMA_VERSION);
    assert_eq!(version, 3);

    // The deleted row's epoch survives in the epoch state.
    delete_row(&e, "jobs").await;
    let clock = HandClock::new();
    let e = e.with_clock(clock.clone());
    let claim = e.claim("jobs", "a").expect("a");
    let mut attempt = claim.open().await.expect("open");
    assert_eq!(
        try_claim(&claim, &mut attempt).await,
        None,
        "vanished: held for a TTL"
    );
    clock.advance(slow().ttl());
    assert_eq!(
        try_claim(&claim, &mut attempt).await.map(Epoch::get),
        Some(8)
    );
    // A version 1 first term (epoch 1, now Epoch::UNGUARDED) is followed
    // by Epoch::FIRST.
    let term = e.candidate("old", "a").expect("a").campaign().await;
    assert_eq!(term.expect("wins").epoch(), Epoch::FIRST);
    // Opening again changes nothing.
    let again = common::open_with(&dir, slow()).await;
    let recorded: i64 = sqlx::query_scalar("SELECT epoch FROM election_epochs WHERE name = 'jobs'")
        .fetch_one(again.pool())
        .await
        .expect("recorded");
    assert_eq!(recorded, 8);
}

/// Epochs run from `Epoch::FIRST` to `Epoch::MAX`: a stored `MAX - 1` is
/// followed by `MAX`, and then the next claim is refused with a typed
/// error, writing nothing.
#[tokio::test]
async fn the_epoch_after_max_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, slow()).await;
    let first = e.candidate("jobs", "a").expect("a").campaign().await;
    let first = first.expect("wins");
    assert_eq!(first.epoch(), Epoch::FIRST);
    first.resign().await.expect("resign");
    for stmt in [
        "UPDATE election_leases SET epoch = 9223372036854775806 WHERE name = 'jobs'",
        "UPDATE election_epochs SET epoch = 9223372036854775806 WHERE name = 'jobs'",
    ] {
        sqlx::query(stmt).execute(e.pool()).await.expect("set");
    }
    let last = e.candidate("jobs", "a").expect("a").campaign().await;
    let last = last.expect("wins");
    assert_eq!(last.epoch(), Epoch::MAX);
    last.resign().await.expect("resign");

    let snapshot = || async {
        sqlx::query_as::<_, (Option<String>, i64, i64, i64)>(
            "SELECT l.holder, l.epoch, l.version, e.epoch FROM election_leases l
             JOIN election_epochs e USING (name) WHERE name = 'jobs'",
        )
        .fetch_one(e.pool())
        .await
        .expect("row")
    };
    let before = snapshot().await;
    let claim = e.claim("jobs", "b").expect("b");
    let mut attempt = claim.open().await.expect("open");
    match claim.try_claim(&mut attempt).await {
        Err(CoreError::Config(ConfigError::EpochExhausted)) => {}
        other => panic!("expected EpochExhausted, got {other:?}"),
    }
    let refused = e.candidate("jobs", "b").expect("b").campaign().await;
    assert!(
        matches!(refused, Err(CoreError::Config(ConfigError::EpochExhausted))),
        "the campaign ends with the typed error: {refused:?}"
    );
    assert_eq!(snapshot().await, before, "nothing written");
    assert_eq!(before.1, i64::MAX);

    // A lease set reports it for the key, too.
    let set = e.lease_set("node-b").await.expect("set");
    let asked = set.ask("jobs").await;
    assert!(
        matches!(asked, Err(CoreError::Config(ConfigError::EpochExhausted))),
        "{asked:?}"
    );
    assert!(!set.held("jobs"));
    set.close().await;
    assert_eq!(snapshot().await, before, "nothing written");
}

/// A process whose database file was deleted after it opened it makes no
/// claim through it: a claim there would be in a database nobody else
/// sees.
#[tokio::test]
async fn a_contender_on_a_deleted_file_claims_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, slow()).await;
    for f in ["app.db", "app.db-wal", "app.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let claim = e.claim("jobs", "b").expect("b");
    let mut attempt = claim.open().await.expect("open");
    let refused = claim.try_claim(&mut attempt).await;
    assert!(
        matches!(
            refused,
            Err(CoreError::Config(ConfigError::Location { .. }))
        ),
        "{refused:?}"
    );
    let set = e.lease_set("node-b").await.expect("set");
    let asked = set.ask("k").await;
    assert!(
        matches!(asked, Err(CoreError::Config(ConfigError::Location { .. }))),
        "{asked:?}"
    );
    set.close().await;
}

/// Found by election-postgres's fault tests, and true here too: with a
/// name's lease row *and* its epoch record deleted by hand, nothing said
/// the name was ever held, so a contender that never saw the row was
/// elected at once beside the live holder. Triggers now refuse to delete
/// (or lower) an epoch record: the operator's transaction fails as a whole
/// and nobody is elected beside the holder.
#[tokio::test]
async fn deleting_the_row_and_epoch_record_under_a_holder_never_elects_a_second_leader() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, slow()).await;
    let term = common::elected(&e, "a").await;

    let mut tx = e.pool().begin().await.expect("begin");
    sqlx::query("DELETE FROM election_leases WHERE name = 'jobs'")
        .execute(&mut *tx)
        .await
        .expect("delete the row");
    let deleted = sqlx::query("DELETE FROM election_epochs WHERE name = 'jobs'")
        .execute(&mut *tx)
        .await;
    if deleted.is_ok() {
        tx.commit().await.expect("commit");
    } else {
        tx.rollback().await.expect("rollback");
    }

    let c_election = common::open_with(&dir, slow()).await;
    let c = c_election.claim("jobs", "c").expect("c");
    let mut attempt = c.open().await.expect("open");
    let c_won = try_claim(&c, &mut attempt).await;
    assert_eq!(
        c_won,
        None,
        "c was elected beside a, which still leads in epoch {} (the delete: {deleted:?})",
        term.epoch()
    );
    let err = deleted.expect_err("deleting an epoch record is refused");
    assert!(err.to_string().contains("refused"), "{err}");
    let lowered = sqlx::query("UPDATE election_epochs SET epoch = epoch - 1")
        .execute(e.pool())
        .await
        .expect_err("lowering is refused");
    assert!(lowered.to_string().contains("refused"), "{lowered}");
    term.confirm().await.expect("a still leads");
    drop(term);
}

/// Issue 23 (found while guarding the fence marks, ADR 0047): a `REPLACE`
/// deletes the row it conflicts with without firing delete triggers (unless
/// `recursive_triggers` is on), so it could lower an epoch record past the
/// delete and update guards. With the lease row deleted (which is allowed),
/// the next term then repeated an earlier term's epoch. An insert below the
/// stored record is now refused too.
#[tokio::test]
async fn replacing_an_epoch_record_with_a_lower_one_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let e = common::open_with(&dir, short()).await;
    let mut last = Epoch::FIRST;
    for _ in 0..2 {
        let term = common::elected(&e, "a").await;
        last = term.epoch();
        term.resign().await.expect("resign");
    }
    sqlx::query("DELETE FROM election_leases WHERE name = 'jobs'")
        .execute(e.pool())
        .await
        .expect("deleting a lease row is allowed");
    let replaced =
        sqlx::query("REPLACE INTO election_epochs (name, epoch, ttl_ms) VALUES ('jobs', 1, 1000)")
            .execute(e.pool())
            .await;
    let next = common::elected(&e, "b").await;
    assert!(
        next.epoch() > last,
        "epoch {} after {last}: an earlier term's epoch repeated (the replace: {replaced:?})",
        next.epoch()
    );
    let err = replaced.expect_err("a lowering REPLACE is refused");
    assert!(err.to_string().contains("refused"), "{err}");
    next.resign().await.expect("resign");
}
