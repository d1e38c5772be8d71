//! The base of the store layer: the connection context (pool, clock,
//! database-file identity, options) and the one step every holder's check
//! uses, one conditional renewal of a term's row. The façade
//! ([`SqliteElection`](crate::SqliteElection)), the renewal task and the
//! lease set's steps are built on it; it imports none of them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::Error;
use crate::options::SqliteOptions;
use crate::store::host_lock::HostLocks;
use crate::store::names;
use crate::store::row::{self, HeldRow, ReleaseSync};
use crate::store::schema;
use crate::{Clock, SystemClock};

/// The database file a holder checks is still in place and still has one
/// name: its path and inode, as the pool opened it.
#[derive(Clone, Debug)]
pub(crate) struct DbFile {
    pub(crate) path: PathBuf,
    dev: u64,
    ino: u64,
}

impl DbFile {
    /// The file at `path` as it is now, checked to have one name
    /// ([`names::one_name`]).
    pub(crate) fn at(path: PathBuf) -> Result<DbFile, Error> {
        let seen = names::one_name(&path)?;
        Ok(DbFile {
            path,
            dev: seen.dev,
            ino: seen.ino,
        })
    }

    /// The file `conn`'s main database is (`None` for one with no file),
    /// checked to have one name.
    pub(crate) async fn of(conn: &mut sqlx::SqliteConnection) -> Result<Option<DbFile>, Error> {
        let file: Option<String> =
            sqlx::query_scalar("SELECT file FROM pragma_database_list WHERE name = 'main'")
                .fetch_optional(&mut *conn)
                .await?;
        match file.filter(|f| !f.is_empty()) {
            Some(f) => Ok(Some(DbFile::at(PathBuf::from(f))?)),
            None => Ok(None),
        }
    }

    /// The store id of this file: its device and inode.
    pub(crate) fn store_id(&self) -> election_core::StoreId {
        election_core::StoreId::new(
            "sqlite",
            format_args!("dev={:x},ino={}", self.dev, self.ino),
        )
    }

    /// `Ok` while `path` still names the file the pool has open, and by
    /// one name only; else why not: [`Error::FileReplaced`] (deleted or
    /// replaced) or [`Error::SecondName`] (a hard link or a mount of its
    /// own appeared).
    pub(crate) fn check(&self) -> Result<(), Error> {
        match names::look(&self.path) {
            Ok(seen) if seen.dev == self.dev && seen.ino == self.ino => {
                names::refuse_second_names(&self.path, &seen)
            }
            _ => Err(Error::FileReplaced {
                path: self.path.clone(),
            }),
        }
    }
}

/// Everything a claim, a renewal or a lease set's step needs of one
/// database: the pool, the lease timings, the clocks and the identity of
/// the database file. Opaque: a [`SqliteElection`](crate::SqliteElection)
/// holds one, and the shared SQL layer's generic types run over it
/// ([`SqliteClaim`](crate::SqliteClaim) is `SqlClaim<SqliteStore>`, ADR
/// 0081) through the traits it implements with SQLite's statements.
#[derive(Debug)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    pub(crate) options: SqliteOptions,
    pub(crate) clock: Arc<dyn Clock>,
    /// `None` for a pool with no file (or one opened read-only).
    pub(crate) db_file: Option<DbFile>,
    /// The same-host lock files (ADR 0026); `None` where they cannot be
    /// trusted (no file, a filesystem shared between hosts).
    pub(crate) host_locks: Option<HostLocks>,
    /// Why a database file has no same-host locks, if it has none.
    pub(crate) no_host_locks: Option<String>,
    /// Whether `election_leases` has the value columns (ADR 0068): always
    /// after a migration; a database opened read-only may lack them.
    pub(crate) values: bool,
    /// How a release commits: relaxed only on a pool this crate opened
    /// with `synchronous = FULL` (ADR 0072).
    pub(crate) release_sync: ReleaseSync,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path` with WAL,
    /// `synchronous = FULL` and the options' busy timeout, and migrates the
    /// election tables; see [`SqliteElection::open`](crate::SqliteElection::open).
    pub(crate) async fn open(path: &Path, options: SqliteOptions) -> Result<Self, Error> {
        let not_a_file = |source| Error::NotAFile {
            path: path.to_owned(),
            source,
        };
        if path.as_os_str().is_empty() || path.is_dir() {
            return Err(not_a_file(None));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && !parent.is_dir()
        {
            return Err(not_a_file(None));
        }
        // A file that exists is checked for a second name before SQLite
        // opens it (and writes a WAL beside this name): ADR 0046.
        if path.exists() {
            names::one_name(path)?;
        }
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(options.busy_timeout());
        // Several processes opening a new database at once race to switch
        // it to WAL and to create the tables; the loser sees "busy" at once
        // (the switch does not wait on the busy timeout). Try again for a
        // few busy timeouts before giving up.
        let give_up = std::time::Instant::now() + options.busy_timeout() * 5;
        loop {
            let opened = async {
                // No ping before each acquire (sqlx's default): a SQLite
                // connection is a handle in this process, not a socket that
                // goes stale, and the ping is one more hop to the
                // connection's worker thread on every claim and renewal
                // (B's side of a handover included).
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .test_before_acquire(false)
                    .acquire_timeout(options.busy_timeout() * 4)
                    .connect_with(connect.clone())
                    .await
                    .map_err(|e| match Error::from(e) {
                        Error::NotAFile { source, .. } => not_a_file(source),
                        other => other,
                    })?;
                let mut ctx = Self::with_pool(pool, options).await?;
                ctx.release_sync = ReleaseSync::Relaxed;
                Ok::<_, Error>(ctx)
            }
            .await;
            match opened {
                Err(e) if e.is_busy() && std::time::Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
    }

    /// Opens the database at `path` read-only, creating nothing; `Ok(None)`
    /// if it has no election tables. See
    /// [`SqliteElection::open_read_only`](crate::SqliteElection::open_read_only).
    pub(crate) async fn open_read_only(
        path: &Path,
        options: SqliteOptions,
    ) -> Result<Option<Self>, Error> {
        if !path.is_file() {
            return Err(Error::NotAFile {
                path: path.to_owned(),
                source: None,
            });
        }
        names::one_name(path)?;
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(options.busy_timeout());
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(options.busy_timeout() * 4)
            .connect_with(connect)
            .await
            .map_err(|e| match Error::from(e) {
                Error::NotAFile { source, .. } => Error::NotAFile {
                    path: path.to_owned(),
                    source,
                },
                other => other,
            })?;
        if !schema::readable(&pool).await? {
            return Ok(None);
        }
        let values = schema::has_values(&pool).await?;
        Ok(Some(SqliteStore {
            pool,
            options,
            clock: Arc::new(SystemClock),
            db_file: None,
            host_locks: None,
            no_host_locks: None,
            values,
            release_sync: ReleaseSync::AsConnected,
        }))
    }

    /// Uses the application's own pool: migrates the election tables and
    /// notes which file the pool has open (if any).
    pub(crate) async fn with_pool(pool: SqlitePool, options: SqliteOptions) -> Result<Self, Error> {
        // Before anything is written through it: a second name of the
        // file has a WAL of its own (ADR 0046).
        names::check_pool(&pool)?;
        let mut conn = pool.acquire().await?;
        let db_file = DbFile::of(&mut conn).await?;
        schema::migrate(&mut conn).await?;
        // Back to the pool now, not in a task spawned by its drop: the
        // first claim then finds it idle instead of opening a second
        // connection (two files, the shared memory, a worker thread and
        // the pragmas: a measurable share of `elect run`'s start).
        conn.return_to_pool().await;
        let (host_locks, no_host_locks) = match db_file.as_ref() {
            Some(db) => match HostLocks::for_database(&db.path)? {
                Ok(locks) => (Some(locks), None),
                Err(why) => (None, Some(why)),
            },
            None => (None, None),
        };
        Ok(SqliteStore {
            pool,
            options,
            clock: Arc::new(SystemClock),
            db_file,
            host_locks,
            no_host_locks,
            values: true,
            release_sync: ReleaseSync::AsConnected,
        })
    }

    /// The same database with `clock` instead.
    pub(crate) fn with_clock(&self, clock: Arc<dyn Clock>) -> Self {
        SqliteStore {
            pool: self.pool.clone(),
            options: self.options,
            clock,
            db_file: self.db_file.clone(),
            host_locks: self.host_locks.clone(),
            no_host_locks: self.no_host_locks.clone(),
            values: self.values,
            release_sync: self.release_sync,
        }
    }

    /// `Ok` while the database file this pool has open is the file at its
    /// path and has no other name (always for a pool with no file); else
    /// [`Error::FileReplaced`] or [`Error::SecondName`] (see
    /// [`DbFile::check`]).
    pub(crate) fn in_place(&self) -> Result<(), Error> {
        self.db_file.as_ref().map_or(Ok(()), DbFile::check)
    }

    /// `Err` (and a loud log line) if the database file this pool has open
    /// is no longer the file at its path, or has a second name: a claim
    /// made through it would be made in a database (or a WAL) nobody else
    /// sees.
    pub(crate) fn check_in_place(&self) -> Result<(), Error> {
        self.in_place().inspect_err(|e| {
            let path = self.db_file.as_ref().map(|db| db.path.display().to_string());
            tracing::error!(path = path.unwrap_or_default(), error = %e, "no claim is made through this database");
        })
    }

    /// One conditional renewal of the term `hold` (one write transaction,
    /// [`row::renew`]), given at most `bound` to answer.
    /// `Ok(true)`: renewed; `Ok(false)`: the row shows another term (or
    /// none); [`Error::OutcomeUnknown`] if it did not answer within
    /// `bound` (the renewal may still have committed); any other error
    /// means the renewal did not commit.
    ///
    /// Cancel safety: cancel safe; dropped, the row is either unchanged or
    /// renewed by this same term.
    pub(crate) async fn renew_within(
        &self,
        hold: HeldRow<'_>,
        bound: Duration,
    ) -> Result<bool, Error> {
        let renewal = row::renew(&self.pool, hold, self.clock.wall_unix_ms());
        match tokio::time::timeout(bound, renewal).await {
            Ok(renewed) => renewed,
            Err(_) => Err(Error::OutcomeUnknown { after: bound }),
        }
    }

    /// The commit-point check of a term: `Ok(false)` if the database file
    /// was deleted or replaced (a process opening the path gets another
    /// database) or has a second name (ADR 0046), else one conditional renewal bounded by the lease's
    /// validity ([`renew_within`](SqliteStore::renew_within)). The one check
    /// behind `Term::confirm` and a lease set's `guard`.
    ///
    /// Cancel safety: as [`renew_within`](SqliteStore::renew_within).
    pub(crate) async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Error> {
        if self.in_place().is_err() {
            return Ok(false);
        }
        self.renew_within(hold, self.options.validity()).await
    }
}

impl SqliteStore {
    /// Publishes `value` for the term `hold` (ADR 0068): one autocommit
    /// `UPDATE` of the row's value and its epoch, only if the row still
    /// shows this attempt's nonce and won epoch with a holder (as a
    /// renewal is conditional; it moves neither the renewal version nor
    /// the renewal time). `Ok(false)` if it does not, or if the database
    /// file was deleted, replaced or got a second name; bounded by the
    /// lease's validity ([`Error::OutcomeUnknown`] after it: the value
    /// may or may not show).
    ///
    /// Cancel safety: cancel safe; dropped, the value is either written or
    /// not, and nothing else changes.
    pub(crate) async fn proclaim(&self, hold: HeldRow<'_>, value: &str) -> Result<bool, Error> {
        if self.in_place().is_err() {
            return Ok(false);
        }
        let bound = self.options.validity();
        match tokio::time::timeout(bound, row::proclaim(&self.pool, hold, value)).await {
            Ok(written) => written,
            Err(_) => Err(Error::OutcomeUnknown { after: bound }),
        }
    }
}

/// SQLite's statements under the shared lease-set steps (ADR 0052).
impl election_sql::LeaseRows for SqliteStore {
    type Error = Error;

    fn times(&self) -> election_sql::LeaseTimes {
        self.options.times
    }

    /// A database file deleted or replaced, or with a second name (ADR
    /// 0046): every term over it is lost at once.
    fn in_place(&self) -> Result<(), String> {
        SqliteStore::in_place(self).map_err(|e| e.to_string())
    }

    async fn renew_one(&self, hold: HeldRow<'_>, budget: Duration) -> Result<bool, Error> {
        self.renew_within(hold, budget).await
    }

    /// One autocommit `UPDATE .. RETURNING` that renews the term and reads
    /// the transfer request stored beside it (ADR 0112), bounded by
    /// `budget` as a renewal is (`OutcomeUnknown` past it).
    async fn renew_asked(
        &self,
        hold: HeldRow<'_>,
        budget: Duration,
    ) -> Result<Option<Option<election_sql::lease_row::Asked>>, Error> {
        let renewal = row::renew_asked(&self.pool, hold, self.clock.wall_unix_ms());
        match tokio::time::timeout(budget, renewal).await {
            Ok(renewed) => renewed,
            Err(_) => Err(Error::OutcomeUnknown { after: budget }),
        }
    }

    async fn renew_many(&self, holds: &[HeldRow<'_>]) -> Result<HashSet<String>, Error> {
        row::renew_many(&self.pool, holds, self.clock.wall_unix_ms()).await
    }

    async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Error> {
        SqliteStore::confirm(self, hold).await
    }

    async fn release_many(&self, holds: &[HeldRow<'_>]) -> Result<(), Error> {
        row::release_many(&self.pool, holds).await
    }

    async fn renew_with_heartbeat(
        &self,
        holds: &[HeldRow<'_>],
        heartbeat: i64,
    ) -> Result<(HashSet<String>, Vec<election_sql::Heartbeat>), Error> {
        row::renew_with_heartbeat(&self.pool, holds, heartbeat, self.clock.wall_unix_ms()).await
    }

    async fn stop_heartbeat(&self, heartbeat: i64) -> Result<(), Error> {
        let stale = self
            .clock
            .wall_unix_ms()
            .saturating_sub(election_sql::HEARTBEAT_KEPT_MS);
        row::stop_heartbeat(&self.pool, heartbeat, stale).await
    }

    fn now(&self) -> tokio::time::Instant {
        self.clock.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    const HOLD: HeldRow<'static> = HeldRow {
        name: "jobs",
        nonce: 7,
        epoch: 2,
    };

    async fn opened() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("dir");
        let ctx = SqliteStore::open(&dir.path().join("app.db"), SqliteOptions::default())
            .await
            .expect("open");
        (dir, ctx)
    }

    #[tokio::test]
    async fn a_renewal_that_does_not_answer_in_time_has_an_unknown_outcome() {
        let (dir, ctx) = opened().await;
        let path = dir.path().join("app.db");
        let hold = HOLD;
        assert!(
            !ctx.renew_within(hold, Duration::from_secs(5))
                .await
                .expect("answers"),
            "no row: not renewed"
        );
        // Another connection holds the write lock: the renewal waits on the
        // busy timeout, past its bound.
        let mut other = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        let tx = other.begin_with("BEGIN IMMEDIATE").await.expect("lock");
        let bound = Duration::from_millis(50);
        match ctx.renew_within(hold, bound).await {
            Err(Error::OutcomeUnknown { after }) => assert_eq!(after, bound),
            other => panic!("expected an unknown outcome, got {other:?}"),
        }
        tx.rollback().await.expect("unlock");
        assert!(ctx.in_place().is_ok());
        assert!(!ctx.confirm(hold).await.expect("answers"));
    }

    #[tokio::test]
    async fn a_deleted_database_file_is_not_in_place() {
        let (dir, ctx) = opened().await;
        let path = dir.path().join("app.db");
        assert!(ctx.in_place().is_ok());
        assert!(ctx.check_in_place().is_ok());
        std::fs::remove_file(&path).expect("delete");
        assert!(ctx.in_place().is_err());
        assert!(matches!(
            ctx.check_in_place(),
            Err(Error::FileReplaced { .. })
        ));
        let hold = HOLD;
        assert!(
            !ctx.confirm(hold)
                .await
                .expect("refused without a round trip"),
            "a holder in a deleted file is not confirmed"
        );
        let detail = ctx.check_in_place().expect_err("replaced").to_string();
        assert!(detail.contains("app.db"), "{detail}");
    }
}
