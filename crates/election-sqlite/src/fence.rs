//! [`SqliteFence`]: high-water marks in the database, checked inside the
//! application's own transaction.

use election_sql::{FenceRows, FinishOnDrop, SqlFence};
use fencing::{Advance, ResourceName, Token};
use sqlx::{SqliteConnection, SqlitePool};

use crate::error::Error;
use crate::store::context::DbFile;
use crate::store::schema;

fn unavailable(resource: &ResourceName, e: impl Into<Error>) -> fencing::Error {
    fencing::Error::unavailable(resource.as_str(), e.into())
}

/// A fence whose high-water marks live in the `election_fences` table of a
/// SQLite database, next to the data they protect.
///
/// Marks go from [`Epoch::UNGUARDED`](election_core::Epoch::UNGUARDED) up
/// to [`Epoch::MAX`](election_core::Epoch::MAX) (`i64::MAX`): every token
/// a term can have fits.
///
/// For a write to another store, [`Fence::fenced`](fencing::Fence::fenced) commits the raised mark
/// before it runs the write (and holds SQLite's write lock while the write
/// runs), so a write that landed is never followed by a lower token's,
/// whatever happens to the call afterwards.
///
/// The strongest use is a fenced transaction, the same shape as
/// PostgreSQL's: [`begin_fenced`](SqlFence::begin_fenced) begins one whose first act
/// is the check, or [`advance_in`](SqlFence::advance_in) checks and advances the
/// mark inside a transaction the application opened; the application
/// makes its write in it and commits: the write commits atomically with
/// the check, or not at all. Get the fence with
/// [`SqliteElection::fence`](crate::SqliteElection::fence). A deposed leader's transaction is refused with
/// [`fencing::Error::Stale`] and rolls back with its write.
///
/// ```
/// use election_sqlite::{SqliteElection, SqliteOptions};
/// use fencing::{ResourceName, Token};
/// use sqlx::Connection;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
/// sqlx::query("CREATE TABLE ledger (entry TEXT)").execute(election.pool()).await?;
/// let term = election.candidate("ledger-writer", "a")?.campaign().await?;
/// let token = Token::issue(&term)?;
/// let orders = ResourceName::new("ledger")?;
///
/// let mut conn = election.pool().acquire().await?;
/// let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
/// election.fence().advance_in(&mut tx, &orders, token).await?;
/// sqlx::query("INSERT INTO ledger VALUES ('paid')").execute(&mut *tx).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
///
/// A fence refuses to work through a database file with a second name (a
/// second hard link, a mount of the file on its own), whose marks would
/// live in a WAL of that name's own (ADR 0046), and through a file deleted
/// or replaced since it was opened: [`new`](SqlFence::new) with
/// [`Error::SecondName`], [`Fence::advance`](fencing::Fence::advance), [`Fence::fenced`](fencing::Fence::fenced) and
/// [`Fence::high_water_mark`](fencing::Fence::high_water_mark) with [`fencing::Error::Config`] (the write
/// not run). [`advance_in`](SqlFence::advance_in) works on the caller's connection
/// and does not look.
pub type SqliteFence = SqlFence<SqliteMarks>;

/// The high-water marks of a [`SqliteFence`]: the `election_fences` table
/// of one SQLite database, with its statements ([`FenceRows`]).
#[derive(Clone, Debug)]
pub struct SqliteMarks {
    pool: SqlitePool,
    /// The pool's database file, `None` for one with no file.
    db_file: Option<DbFile>,
}

impl SqliteMarks {
    /// A fence on `pool`'s database; creates or migrates the tables.
    ///
    /// Cancel safety: cancel safe. Failure model: database errors as
    /// [`Error`]; a database file with a second name is
    /// [`Error::SecondName`], before the tables are touched.
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let fence = SqliteFence::new(election.pool().clone()).await?;
    /// let orders = fencing::ResourceName::new("orders")?;
    /// println!("orders fenced at {:?}", fencing::Fence::high_water_mark(&fence, &orders).await?);
    /// # Ok(()) }
    /// ```
    async fn new(pool: SqlitePool) -> Result<Self, Error> {
        crate::store::names::check_pool(&pool)?;
        let mut conn = pool.acquire().await?;
        let db_file = DbFile::of(&mut conn).await?;
        schema::migrate(&mut conn).await?;
        drop(conn);
        Ok(SqliteMarks { pool, db_file })
    }

    /// `Err(Config)` if the database file got a second name or was
    /// replaced since the fence was made (ADR 0046).
    fn check_names(&self, resource: &ResourceName) -> Result<(), fencing::Error> {
        let Some(db) = &self.db_file else {
            return Ok(());
        };
        db.check().map_err(|e| {
            tracing::error!(resource = %resource, error = %e, "refusing a fenced write or read");
            fencing::Error::Config(election_core::ConfigError::Location {
                reason: e.to_string(),
                source: Some(std::sync::Arc::new(e)),
            })
        })
    }
}

impl crate::SqliteElection {
    /// A fence on this election's database and pool (no I/O: the tables
    /// exist already): the same as [`SqliteFence::new`](SqlFence::new) on
    /// [`pool`](crate::SqliteElection::pool), with the names the election
    /// checked at open.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    /// use fencing::{Fence, ResourceName};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let fence = election.fence();
    /// assert_eq!(fence.high_water_mark(&ResourceName::new("ledger")?).await?, None);
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> SqliteFence {
        SqlFence::from_marks(SqliteMarks {
            pool: self.pool().clone(),
            db_file: self.inner.db_file.clone(),
        })
    }
}

/// [`advance_in`](SqlFence::advance_in), for callers without a fence at hand.
async fn advance_in(
    conn: &mut SqliteConnection,
    resource: &ResourceName,
    token: Token,
) -> Result<Advance, fencing::Error> {
    let value = token.get_i64();
    let stored = read_mark(conn, resource).await?;
    // A token below the mark read in this transaction is refused
    // without a write: the mark can only have grown since (the
    // guards of ADR 0047 refuse an insert below it, which the upsert
    // would otherwise attempt).
    if stored.is_some_and(|mark| mark > token) {
        return Advance::decide(resource, stored, token);
    }
    let raised = sqlx::query(
        "INSERT INTO election_fences (resource, token) VALUES (?1, ?2)
         ON CONFLICT (resource) DO UPDATE SET token = excluded.token
         WHERE excluded.token >= election_fences.token",
    )
    .bind(resource.as_str())
    .bind(value)
    .execute(&mut *conn)
    .await
    .map_err(|e| unavailable(resource, e))?;
    if raised.rows_affected() == 1 {
        return Advance::decide(resource, stored, token);
    }
    // Refused: read the mark that refused it (the upsert held the lock).
    let mark = read_mark(conn, resource).await?;
    Advance::decide(resource, mark, token)
}

/// The mark of `resource` as `conn` sees it.
async fn read_mark(
    conn: &mut SqliteConnection,
    resource: &ResourceName,
) -> Result<Option<Token>, fencing::Error> {
    let mark: Option<i64> =
        sqlx::query_scalar("SELECT token FROM election_fences WHERE resource = ?1")
            .bind(resource.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| unavailable(resource, e))?;
    election_sql::stored_token(resource, mark)
}

/// SQLite's `synchronous` levels: FULL and EXTRA sync every commit.
const SYNCHRONOUS_FULL: i64 = 2;

/// Refuses a connection whose commits are not durable (`synchronous`
/// below FULL): a mark lost in a power failure after its write landed
/// would let a lower token in.
async fn require_durable(
    conn: &mut SqliteConnection,
    resource: &ResourceName,
) -> Result<(), fencing::Error> {
    let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| unavailable(resource, e))?;
    if level < SYNCHRONOUS_FULL {
        tracing::error!(resource = %resource, synchronous = level, "refusing a fenced write: the connection's commits are not durable (set synchronous = FULL)");
        return Err(fencing::Error::Config(
            election_core::ConfigError::BadSetting {
                setting: "synchronous",
                reason: format!(
                    "PRAGMA synchronous is {level}: a committed high-water mark could be lost in a power failure after its write landed; use FULL (2) or EXTRA (3)"
                ),
            },
        ));
    }
    Ok(())
}

impl SqliteMarks {
    async fn begin(
        &self,
        resource: &ResourceName,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, fencing::Error> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| unavailable(resource, e))
    }

    /// The first step of [`advance`](fencing::Fence::advance) and
    /// [`fenced`](fencing::Fence::fenced): one `BEGIN IMMEDIATE` transaction with
    /// [`advance_in`](SqlFence::advance_in), refusing a raised mark on a connection
    /// whose commits are not durable. Not committed.
    async fn begin_advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<(sqlx::Transaction<'static, sqlx::Sqlite>, Advance), fencing::Error> {
        self.check_names(resource)?;
        let mut tx = self.begin(resource).await?;
        let advance = advance_in(&mut tx, resource, token).await?;
        if advance.raised() {
            require_durable(&mut tx, resource).await?;
        }
        Ok((tx, advance))
    }
}

impl FenceRows for SqliteMarks {
    type Open<'a> = SqlitePool;
    type OpenError = Error;
    type Connection = SqliteConnection;
    type Transaction = sqlx::Transaction<'static, sqlx::Sqlite>;
    type UnlockError = sqlx::Error;

    /// A fence on `pool`'s database; creates or migrates the tables
    /// (see [`SqliteFence`]).
    async fn open(pool: Self::Open<'_>) -> Result<Self, Error> {
        SqliteMarks::new(pool).await
    }

    /// Checks `token` against `resource`'s high-water mark and raises the
    /// mark, inside the caller's open transaction on `conn`. Make the
    /// guarded write in the same transaction and commit it; if this returns
    /// an error, roll back (dropping the transaction does).
    ///
    /// The raise is one upsert that only writes a token not below the
    /// mark, so even a racing writer cannot lower it. Open the transaction
    /// with `BEGIN IMMEDIATE`: in a deferred one, a concurrent writer makes
    /// this fail with [`fencing::Error::Unavailable`] (SQLite's busy
    /// snapshot), which is safe but needless.
    ///
    /// Cancel safety: if dropped, the caller's transaction decides: it
    /// rolls back when dropped uncommitted.
    ///
    /// Failure model: [`fencing::Error::Stale`] with both tokens for an
    /// older token; [`fencing::Error::Unavailable`] for database errors.
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions};
    /// # use fencing::ResourceName;
    /// # use sqlx::Connection;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let r = ResourceName::new("orders")?;
    /// let mut conn = election.pool().acquire().await?;
    /// let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    /// let fence = election.fence();
    /// fence.advance_in(&mut tx, &r, "7".parse()?).await?;
    /// tx.commit().await?;
    /// let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    /// let stale = fence.advance_in(&mut tx, &r, "6".parse()?).await;
    /// assert!(matches!(stale, Err(fencing::Error::Stale { .. })));
    /// # Ok(()) }
    /// ```
    async fn advance_in(
        &self,
        conn: &mut SqliteConnection,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        advance_in(conn, resource, token).await
    }

    /// Begins a `BEGIN IMMEDIATE` transaction on this fence's pool whose
    /// first act checks `token` against `resource`'s high-water mark and
    /// raises it, exactly as [`advance_in`](SqlFence::advance_in)
    /// would: the same shape as
    /// `election_postgres::PostgresFence::begin_fenced`. Make the guarded
    /// write in the returned transaction and commit it: it commits
    /// atomically with the check, or not at all.
    ///
    /// The transaction holds SQLite's write lock from its `BEGIN
    /// IMMEDIATE` until it ends: commit or drop it promptly (every other
    /// writer of the database, the election's renewals among them, waits
    /// for it).
    ///
    /// Cancel safety: cancel safe. Dropped before it returns, the begin
    /// and the check are finished in a task of their own and the
    /// transaction is then dropped and rolled back, so no connection is
    /// left holding the write lock. A returned transaction dropped
    /// uncommitted rolls back.
    ///
    /// Failure model: [`fencing::Error::Stale`] with both tokens for an
    /// older token (nothing written, the transaction rolled back);
    /// [`fencing::Error::Config`] for a database file with a second name
    /// or replaced since the fence was made (ADR 0046), and for a raise on
    /// a connection whose commits are not durable (`synchronous` below
    /// FULL); [`fencing::Error::Unavailable`] for database errors
    /// (including a busy database); [`fencing::Error::Corrupt`] for a mark
    /// this crate never writes.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    /// use fencing::{ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// sqlx::query("CREATE TABLE ledger (entry TEXT)").execute(election.pool()).await?;
    /// let term = election.candidate("ledger-writer", "a")?.campaign().await?;
    /// let ledger = ResourceName::new("ledger")?;
    ///
    /// let fence = election.fence();
    /// let mut tx = fence.begin_fenced(&ledger, Token::issue(&term)?).await?; // refused if deposed
    /// sqlx::query("INSERT INTO ledger VALUES ('paid')").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    async fn begin_fenced(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, fencing::Error> {
        self.check_names(resource)?;
        let pool = self.pool.clone();
        let owned = resource.clone();
        FinishOnDrop::new(async move {
            let resource = &owned;
            let mut tx = pool
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(|e| unavailable(resource, e))?;
            let advance = advance_in(&mut tx, resource, token).await?;
            if advance.raised() {
                require_durable(&mut tx, resource).await?;
            }
            Ok(tx)
        })
        .await
    }

    /// One `BEGIN IMMEDIATE` transaction with [`advance_in`](SqlFence::advance_in),
    /// committed before this returns `Ok`. A raised mark is refused with
    /// [`fencing::Error::Config`] (nothing written) on a connection whose
    /// commits are not durable (`synchronous` below FULL), as in
    /// [`fenced`](fencing::Fence::fenced). If the commit fails:
    /// [`fencing::Error::Unavailable`], the mark may or may not be raised.
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let (tx, advance) = self.begin_advance(resource, token).await?;
        tx.commit().await.map_err(|e| unavailable(resource, e))?;
        Ok(advance)
    }

    /// Runs `write` once `token`'s mark is committed, while holding
    /// SQLite's write lock, as the [`Fence`](fencing::Fence) contract asks:
    ///
    /// 1. One `BEGIN IMMEDIATE` transaction checks `token` against the mark
    ///    ([`advance_in`](SqlFence::advance_in)). If the mark is already `token`,
    ///    the write runs in it at once (step 3).
    /// 2. Otherwise it raises the mark and **commits** (durable: the
    ///    connection must use `synchronous = FULL` or `EXTRA`, as
    ///    [`SqliteElection::open`](crate::SqliteElection::open) sets it;
    ///    a lower setting is refused with [`fencing::Error::Config`] before
    ///    anything is written). Then a second `BEGIN IMMEDIATE` transaction
    ///    takes the write lock again and reads the mark: if a higher token
    ///    got in between the two, [`fencing::Error::Stale`] and `write`
    ///    never runs.
    /// 3. `write` runs while that transaction holds the write lock (no
    ///    other writer of this database, so no other `fenced` or
    ///    [`advance`](fencing::Fence::advance) of any resource here, gets in until
    ///    it ends); then the transaction, which wrote nothing, is rolled
    ///    back.
    ///
    /// Failure model and cancel safety: the [`Fence::fenced`](fencing::Fence::fenced) contract (the
    /// lock released is SQLite's write lock). Here
    /// [`fencing::Error::Corrupt`] also means the mark went below a token
    /// this call had committed (someone edited `election_fences` by hand);
    /// `write` did not run.
    ///
    /// For writes *to this database*, use [`advance_in`](SqlFence::advance_in) in
    /// your own transaction instead: a write through another connection
    /// would wait for this lock.
    async fn lock_at(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, fencing::Error> {
        let (mut tx, advance) = self.begin_advance(resource, token).await?;
        if advance.raised() {
            tx.commit().await.map_err(|e| unavailable(resource, e))?;
            tx = self.begin(resource).await?;
            let mark = read_mark(&mut tx, resource).await?;
            election_sql::check_committed_mark(resource, mark, token, "election_fences")?;
        }
        // The transaction wrote nothing that matters (the mark is `token`
        // either way): rolling it back only releases the lock.
        Ok(tx)
    }

    async fn unlock(locked: sqlx::Transaction<'static, sqlx::Sqlite>) -> Result<(), sqlx::Error> {
        locked.rollback().await
    }

    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        self.check_names(resource)?;
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| unavailable(resource, e))?;
        read_mark(&mut conn, resource).await
    }
}
