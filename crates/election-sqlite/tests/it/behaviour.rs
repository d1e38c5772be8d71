//! Time, contention and damage, in one process against real database files.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use election_core::{Claim, End, Error as CoreError, Lease, LossReason};
use election_sqlite::{Clock, Error, SqliteAttempt, SqliteClaim, SqliteElection, SqliteOptions};
use sqlx::Connection;
use tokio::time::Instant;

const PATIENCE: Duration = Duration::from_secs(30);

fn fast() -> SqliteOptions {
    SqliteOptions::new(Duration::from_millis(600), Duration::from_millis(150)).expect("options")
}

/// A clock whose monotonic part is real or moved by hand, and whose wall
/// part can jump.
#[derive(Debug)]
struct TestClock {
    base: Instant,
    manual_ms: Option<AtomicU64>,
    wall_offset_ms: AtomicI64,
}

impl TestClock {
    fn real() -> Arc<Self> {
        Arc::new(TestClock {
            base: Instant::now(),
            manual_ms: None,
            wall_offset_ms: AtomicI64::new(0),
        })
    }
    fn manual() -> Arc<Self> {
        Arc::new(TestClock {
            base: Instant::now(),
            manual_ms: Some(AtomicU64::new(0)),
            wall_offset_ms: AtomicI64::new(0),
        })
    }
    fn advance(&self, ms: u64) {
        self.manual_ms
            .as_ref()
            .expect("manual")
            .fetch_add(ms, Ordering::SeqCst);
    }
    fn jump_wall(&self, ms: i64) {
        self.wall_offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        match &self.manual_ms {
            Some(ms) => self.base + Duration::from_millis(ms.load(Ordering::SeqCst)),
            None => Instant::now(),
        }
    }
    fn wall_unix_ms(&self) -> i64 {
        election_sqlite::SystemClock.wall_unix_ms() + self.wall_offset_ms.load(Ordering::SeqCst)
    }
}

/// Another connection to the test database.
async fn connect(dir: &tempfile::TempDir) -> sqlx::SqliteConnection {
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect")
}

async fn open(dir: &tempfile::TempDir) -> SqliteElection {
    common::open_with(dir, fast()).await
}

/// Contender `b`'s claim of `jobs` on a manual clock, and its attempt.
async fn contender_on_a_manual_clock(
    e: &SqliteElection,
) -> (Arc<TestClock>, SqliteClaim, SqliteAttempt) {
    let clock = TestClock::manual();
    let claim = e
        .clone()
        .with_clock(clock.clone())
        .claim("jobs", "b")
        .expect("claim");
    let attempt = claim.open().await.expect("open");
    (clock, claim, attempt)
}

/// A lease row left by a holder that no longer renews.
async fn ghost_row(e: &SqliteElection, name: &str, epoch: i64, version: i64, ttl_ms: i64) {
    sqlx::query(
        "INSERT INTO election_leases (name, holder, nonce, epoch, version, ttl_ms) VALUES (?1, 'ghost', 1, ?2, ?3, ?4)",
    )
    .bind(name)
    .bind(epoch)
    .bind(version)
    .bind(ttl_ms)
    .execute(e.pool())
    .await
    .expect("insert");
}

#[tokio::test]
async fn a_contender_takes_over_only_after_a_full_ttl_without_renewal_on_its_own_clock() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    ghost_row(&e, "jobs", 41, 7, 1000).await;
    let (clock, claim, mut attempt) = contender_on_a_manual_clock(&e).await;
    assert!(
        claim.try_claim(&mut attempt).await.expect("try").is_none(),
        "first sight starts the count"
    );
    clock.advance(999);
    assert!(
        claim.try_claim(&mut attempt).await.expect("try").is_none(),
        "999 ms is less than the TTL"
    );
    // A renewal (the version moves) restarts the count.
    sqlx::query("UPDATE election_leases SET version = version + 1")
        .execute(e.pool())
        .await
        .expect("renew");
    clock.advance(1);
    assert!(
        claim.try_claim(&mut attempt).await.expect("try").is_none(),
        "a renewal was seen"
    );
    clock.advance(999);
    assert!(claim.try_claim(&mut attempt).await.expect("try").is_none());
    clock.advance(1);
    let won = claim
        .try_claim(&mut attempt)
        .await
        .expect("try")
        .expect("a full TTL without renewal");
    assert_eq!(
        won.epoch.get(),
        42,
        "the winning statement increments the epoch"
    );
    claim.close(attempt, election_core::End::Failed);
}

#[tokio::test]
async fn the_contender_waits_for_the_holders_longer_ttl() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    ghost_row(&e, "jobs", 1, 1, 5000).await;
    let (clock, claim, mut attempt) = contender_on_a_manual_clock(&e).await;
    assert!(claim.try_claim(&mut attempt).await.expect("try").is_none());
    clock.advance(4999);
    assert!(
        claim.try_claim(&mut attempt).await.expect("try").is_none(),
        "own TTL is 600 ms, the holder's 5 s"
    );
    clock.advance(1);
    assert!(claim.try_claim(&mut attempt).await.expect("try").is_some());
}

#[tokio::test]
async fn wall_clock_jumps_during_a_term_never_make_two_leaders() {
    let dir = tempfile::tempdir().expect("dir");
    // A lease of 3 s (renewed every 0.5 s), not the suite's 0.6 s: the
    // jumps (an hour) dwarf either, and a loaded CI machine held a 0.6 s
    // lease's renewals up past its deadline (a loss by load, not by clock).
    let options =
        SqliteOptions::new(Duration::from_secs(3), Duration::from_millis(500)).expect("options");
    let e = common::open_with(&dir, options).await;
    let (holder_clock, contender_clock) = (TestClock::real(), TestClock::real());
    let holder = e
        .clone()
        .with_clock(holder_clock.clone())
        .candidate("jobs", "a")
        .expect("a");
    let contender = e
        .clone()
        .with_clock(contender_clock.clone())
        .candidate("jobs", "b")
        .expect("b");
    let term = holder.campaign().await.expect("a wins");
    let hour = 3_600_000;
    let renewed = |e: SqliteElection| async move {
        let ms: i64 =
            sqlx::query_scalar("SELECT renewed_unix_ms FROM election_leases WHERE name = 'jobs'")
                .fetch_one(e.pool())
                .await
                .expect("select");
        ms
    };
    let before = renewed(e.clone()).await;
    // Forward for the holder, backward for the contender, then the other way.
    for (h, c) in [(hour, -hour), (-2 * hour, 2 * hour), (hour, -hour)] {
        holder_clock.jump_wall(h);
        contender_clock.jump_wall(c);
        let waited = contender
            .campaign_timeout(Duration::from_millis(1500))
            .await
            .expect("campaign");
        assert!(
            waited.is_none(),
            "the contender won while the holder renewed"
        );
        assert!(
            !term.is_lost(),
            "the holder lost its term to a wall-clock jump: {:?}",
            term.loss()
        );
    }
    // The jumps reached the row: the injected clock is the one used.
    holder_clock.jump_wall(hour);
    tokio::time::timeout(PATIENCE, async {
        while renewed(e.clone()).await < before + hour / 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the holder's renewals carry its jumped wall clock");
    term.resign().await.expect("resign");
    let next = contender.campaign().await.expect("b wins after the resign");
    assert!(next.epoch() > term.epoch());
}

#[tokio::test]
async fn a_busy_database_delays_a_campaign_but_does_not_break_it() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    let mut blocker = connect(&dir).await;
    let tx = blocker.begin_with("BEGIN IMMEDIATE").await.expect("lock");
    let candidate = e
        .candidate("jobs", "a")
        .expect("a")
        .with_poll_interval(Duration::from_millis(20))
        .expect("poll");
    let started = Instant::now();
    let campaign = tokio::spawn(async move { candidate.campaign().await });
    // HeldRow the write lock for longer than the busy timeout (75 ms here).
    let hold = e.options().busy_timeout() * 4;
    tokio::time::sleep(hold).await;
    assert!(!campaign.is_finished(), "won while the database was locked");
    tx.rollback().await.expect("unlock");
    let term = tokio::time::timeout(PATIENCE, campaign)
        .await
        .expect("in time")
        .expect("join")
        .expect("wins");
    assert!(started.elapsed() >= hold);
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn a_renewal_that_keeps_failing_ends_the_term_before_the_lease_runs_out() {
    let dir = tempfile::tempdir().expect("dir");
    // A TTL long enough that its margin (300 ms) dwarfs scheduling noise.
    let options =
        SqliteOptions::new(Duration::from_secs(3), Duration::from_secs(1)).expect("options");
    let e = common::open_with(&dir, options).await;
    let term = common::elected(&e, "a").await;
    let won_until = term.valid_until().expect("a lease has a validity");
    let mut blocker = connect(&dir).await;
    let tx = blocker.begin_with("BEGIN IMMEDIATE").await.expect("lock");
    let lost = tokio::time::timeout(PATIENCE, term.lost())
        .await
        .expect("lost in time");
    let lost_at = Instant::now();
    assert!(
        matches!(lost.reason, LossReason::Expired | LossReason::Failed(_)),
        "{lost:?}"
    );
    // Reported at the holder's own deadline (ttl - margin after its last
    // renewal was sent): before the lease could run out (deadline +
    // margin), when a contender could take over.
    let deadline = term.valid_until().expect("validity");
    assert!(deadline >= won_until);
    assert!(
        lost_at >= deadline,
        "lost before the deadline: counted as soon as it passed"
    );
    assert!(
        lost_at < deadline + e.options().margin(),
        "reported after the lease ran out"
    );
    tx.rollback().await.expect("unlock");
    assert!(matches!(term.resign().await, Err(CoreError::Lost(_))));
}

#[tokio::test]
async fn a_deleted_database_file_ends_the_term() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    let term = common::elected(&e, "a").await;
    for f in ["app.db", "app.db-wal", "app.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let lost = tokio::time::timeout(PATIENCE, term.lost())
        .await
        .expect("lost in time");
    assert!(
        matches!(lost.reason, LossReason::Revoked { .. }),
        "{lost:?}"
    );
}

#[tokio::test]
async fn a_read_only_database_is_a_typed_error() {
    let dir = tempfile::tempdir().expect("dir");
    drop(open(&dir).await);
    let ro = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}?mode=ro",
        dir.path().join("app.db").display()
    ))
    .await
    .expect("connect read-only");
    match SqliteElection::with_pool(ro, fast()).await {
        Err(Error::ReadOnly(_)) => {}
        other => panic!("expected ReadOnly, got {other:?}"),
    }
}

#[tokio::test]
async fn a_corrupt_lease_row_is_refused_not_reused() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    ghost_row(&e, "jobs", 0, 1, 1000).await; // epoch 0 with a holder
    let c = e.candidate("jobs", "a").expect("a");
    match c.try_campaign().await {
        Err(CoreError::Corrupt { .. }) => {}
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(c.leader().await, Err(CoreError::Corrupt { .. })));
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    sqlx::query("UPDATE election_meta SET value = 99 WHERE key = 'schema_version'")
        .execute(e.pool())
        .await
        .expect("update");
    match SqliteElection::with_pool(e.pool().clone(), fast()).await {
        Err(Error::SchemaTooNew { found: 99, .. }) => {}
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[tokio::test]
async fn works_beside_the_applications_tables_on_its_own_pool() {
    let dir = tempfile::tempdir().expect("dir");
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("app.db").display()
    ))
    .await
    .expect("connect");
    sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
        .execute(&pool)
        .await
        .expect("create");
    sqlx::query("INSERT INTO orders (item) VALUES ('tea')")
        .execute(&pool)
        .await
        .expect("insert");
    let e = SqliteElection::with_pool(pool.clone(), fast())
        .await
        .expect("election");
    let term = common::elected(&e, "a").await;
    let items: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(items, 1);
    term.resign().await.expect("resign");
}

#[tokio::test]
async fn leader_says_since_when_the_term_leads_and_renewals_keep_it() {
    use std::time::{SystemTime, UNIX_EPOCH};
    let dir = tempfile::tempdir().expect("dir");
    let e = open(&dir).await;
    let a = e.candidate("jobs", "a").expect("a");
    let observer = e.candidate("jobs", "observer").expect("observer");
    let before_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let before = UNIX_EPOCH + Duration::from_millis(u64::try_from(before_ms).expect("ms"));
    let term = a.campaign().await.expect("a wins");
    let after = SystemTime::now();
    let seen = observer.leader().await.expect("leader").expect("a leads");
    assert_eq!((seen.identity.as_str(), seen.epoch), ("a", term.epoch()));
    let since = seen.since.expect("the row has acquired_unix_ms");
    assert!(
        before <= since && since <= after,
        "since {since:?} is not within the campaign [{before:?}, {after:?}]"
    );
    // Renewals (the version moves, renewed_unix_ms with it) keep it.
    let version = |e: SqliteElection| async move {
        let v: i64 = sqlx::query_scalar("SELECT version FROM election_leases WHERE name = 'jobs'")
            .fetch_one(e.pool())
            .await
            .expect("select");
        v
    };
    let first = version(e.clone()).await;
    tokio::time::timeout(PATIENCE, async {
        while version(e.clone()).await < first + 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("two renewals");
    assert!(!term.is_lost());
    let now = observer.leader().await.expect("leader").expect("a leads");
    assert_eq!(
        (&now.identity, now.epoch, now.since),
        (&seen.identity, seen.epoch, seen.since),
        "renewals do not move since"
    );
    // They move `renewed` (issue 26 item 6: shown with the holder).
    assert!(
        now.renewed > seen.renewed && seen.renewed >= seen.since,
        "{seen:?} then {now:?}"
    );
    assert_eq!(now.ttl, seen.ttl);
    term.resign().await.expect("resign");
}

/// Two spellings of one database (a symlinked directory, a `..`) share one
/// same-host lock directory (ADR 0026): otherwise their candidates would
/// neither wake each other nor take over from each other's dead holders.
#[tokio::test]
async fn two_spellings_of_one_database_share_its_lock_files() {
    let dir = tempfile::tempdir().expect("dir");
    let real = dir.path().join("data");
    std::fs::create_dir_all(real.join("sub")).expect("dirs");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let direct = SqliteElection::open(real.join("app.db"), fast())
        .await
        .expect("open");
    let via_link = SqliteElection::open(link.join("app.db"), fast())
        .await
        .expect("open via the link");
    let via_dots = SqliteElection::open(real.join("sub/../app.db"), fast())
        .await
        .expect("open via ..");
    let alias = dir.path().join("alias.db");
    std::os::unix::fs::symlink(real.join("app.db"), &alias).expect("symlink");
    let via_alias = SqliteElection::open(&alias, fast())
        .await
        .expect("open via a link to the file");
    let want = direct.host_lock_path("jobs").expect("a local filesystem");
    assert_eq!(via_link.host_lock_path("jobs"), Some(want.clone()));
    assert_eq!(via_alias.host_lock_path("jobs"), Some(want.clone()));
    assert_eq!(via_dots.host_lock_path("jobs"), Some(want.clone()));
    assert!(
        want.starts_with(std::fs::canonicalize(&real).expect("canonical")),
        "{want:?}"
    );
}

/// A waiter woken by the same-host lock (ADR 0026) can lose the row to a
/// candidate that won the released row without the lock (it found the lock
/// held by that very waiter). The waiter then holds the lock and the
/// holder does not: the holder's resign must still wake it, without
/// waiting for its (hourly) poll. Steps taken one by one, so the
/// interleaving is the same on every run.
#[tokio::test]
async fn a_waiter_that_lost_the_row_with_the_lock_in_hand_is_woken_by_the_next_resign() {
    let dir = tempfile::tempdir().expect("dir");
    let options =
        SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(5)).expect("options");
    let e = common::open_with(&dir, options).await;
    let hour = Duration::from_secs(3600);
    let (a, b, c) = (
        e.claim("jobs", "a").expect("claim"),
        e.claim("jobs", "b").expect("claim"),
        e.claim("jobs", "c").expect("claim"),
    );
    let mut held_a = a.open().await.expect("open");
    assert!(a.try_claim(&mut held_a).await.expect("claim").is_some());
    let mut waiting_b = b.open().await.expect("open");
    assert!(b.try_claim(&mut waiting_b).await.expect("claim").is_none());
    // b waits in the kernel for a's lock: polled once (its thread starts),
    // then a resigns and closes; b is woken with the lock.
    let _ = tokio::time::timeout(Duration::ZERO, b.wait(&mut waiting_b, hour)).await;
    a.release(&mut held_a).await.expect("release");
    a.close(held_a, End::Resigned);
    tokio::time::timeout(PATIENCE, b.wait(&mut waiting_b, hour))
        .await
        .expect("b woken by a's close")
        .expect("wait");
    // c arrives before b claims: the lock is b's, the row released, so c
    // wins it without the lock; b's claim then finds c holding the row.
    let mut held_c = c.open().await.expect("open");
    assert!(c.try_claim(&mut held_c).await.expect("claim").is_some());
    assert!(b.try_claim(&mut waiting_b).await.expect("claim").is_none());
    // b waits again (polled once), c resigns and closes: b must wake and
    // win without its hourly poll.
    let _ = tokio::time::timeout(Duration::ZERO, b.wait(&mut waiting_b, hour)).await;
    c.release(&mut held_c).await.expect("release");
    c.close(held_c, End::Resigned);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, b.wait(&mut waiting_b, hour))
            .await
            .expect("b was not woken by c's resign: it waits for its hourly poll")
            .expect("wait");
        if b.try_claim(&mut waiting_b).await.expect("claim").is_some() {
            break;
        }
    }
    b.release(&mut waiting_b).await.expect("release");
    b.close(waiting_b, End::Resigned);
}

/// A database whose lease table has no value columns (as every version
/// before ADR 0068 left it) reads without a value when opened read-only,
/// gets the columns at the next open, and then a term publishes a value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_value_columns_gets_them_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(&dir).await;
    let term = election_core::Candidate::new(e.claim("jobs", "a").expect("claim"))
        .campaign()
        .await
        .expect("campaign");
    let mut conn = connect(&dir).await;
    for stmt in [
        "ALTER TABLE election_leases DROP COLUMN value",
        "ALTER TABLE election_leases DROP COLUMN value_epoch",
    ] {
        sqlx::query(stmt).execute(&mut conn).await.expect(stmt);
    }
    let read_only = SqliteElection::open_read_only(dir.path().join("app.db"), fast())
        .await
        .expect("open read-only")
        .expect("election tables");
    let seen = election_core::Election::leader(&read_only, "jobs")
        .await
        .expect("leader")
        .expect("a leads");
    assert_eq!((seen.epoch, seen.value), (term.epoch(), None));
    let again = open(&dir).await;
    let columns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pragma_table_info('election_leases') WHERE name IN ('value', 'value_epoch')",
    )
    .fetch_one(&mut conn)
    .await
    .expect("columns");
    assert_eq!(columns, 2, "the open added the value columns");
    term.proclaim("10.0.3.17:8443").await.expect("proclaim");
    let seen = election_core::Election::leader(&again, "jobs")
        .await
        .expect("leader")
        .expect("a leads");
    assert_eq!(
        seen.value.as_ref().map(|v| v.as_str()),
        Some("10.0.3.17:8443")
    );
    term.resign().await.expect("resign");
}
