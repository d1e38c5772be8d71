//! [`PostgresFence`]: high-water marks in the database, checked inside the
//! application's own transaction.

use std::sync::Arc;
use std::time::Duration;

use election_sql::{FenceRows, FinishOnDrop, SqlFence};
use fencing::{Advance, ResourceName, Token};
use sqlx::{AssertSqlSafe, PgConnection, PgPool, SqlSafeStr as _};

use crate::election::PostgresElection;
use crate::error::Error;
use crate::store::schema::{self, Sql};

fn unavailable(resource: &ResourceName, e: impl Into<Error>) -> fencing::Error {
    fencing::Error::unavailable(resource.as_str(), e.into())
}

/// The error of a statement that ran `fence_enter`: its refusal
/// ([`schema::STALE_SQLSTATE`], the stored mark as `DETAIL`) as
/// [`fencing::Error::Stale`] through [`Advance::decide`] (which counts
/// it); a mark that refused without being higher as
/// [`fencing::Error::Corrupt`]; anything else as unavailable.
fn refused(resource: &ResourceName, token: Token, e: sqlx::Error) -> fencing::Error {
    let Some(db) = e.as_database_error() else {
        return unavailable(resource, e);
    };
    let code = db.code();
    let code = code.as_deref();
    if code != Some(schema::STALE_SQLSTATE) && code != Some(schema::CORRUPT_SQLSTATE) {
        return unavailable(resource, e);
    }
    let detail = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .and_then(|pg| pg.detail())
        .unwrap_or_default();
    let stored = detail.parse::<i64>().ok();
    match (code, stored) {
        (Some(schema::STALE_SQLSTATE), Some(stored)) => {
            match election_sql::token_from_mark(resource, stored)
                .and_then(|stored| Advance::decide(resource, Some(stored), token))
            {
                Err(err) => err,
                Ok(_) => fencing::Error::corrupt(
                    resource.as_str(),
                    format!("token {token} was refused below a mark of {stored}"),
                ),
            }
        }
        _ => fencing::Error::corrupt(resource.as_str(), db.message().to_owned()),
    }
}

/// A fence whose high-water marks live in the `fences` table of the
/// election schema, next to the data they protect.
///
/// Marks go from [`Epoch::UNGUARDED`](election_core::Epoch::UNGUARDED) up
/// to [`Epoch::MAX`](election_core::Epoch::MAX) (`i64::MAX`, what a
/// `bigint` holds): every token a term can have fits, in every fence
/// store of this workspace.
///
/// The strongest use is a fenced transaction: the check and advance of the
/// mark and the application's write in one transaction, committed
/// together: the write commits atomically with the check, or not at all.
/// [`begin_fenced`](SqlFence::begin_fenced) begins such a transaction
/// with the check in the `BEGIN`'s round trip (ADR 0044);
/// [`advance_in`](SqlFence::advance_in) checks inside a transaction
/// the application began. A deposed leader's transaction is refused with
/// [`fencing::Error::Stale`] and rolls back with its write.
/// Concurrent advances of one resource serialise on its mark row: the
/// second waits for the first's transaction to end, then sees its mark.
///
/// A writer that stops inside such a transaction (a frozen or deposed
/// leader) keeps the mark row locked until the server ends its session,
/// so the next leader's write waits for it: delayed, never wrong. Set
/// `idle_in_transaction_session_timeout` (for example `1s` more than your
/// longest fenced transaction) for the role that writes, so such a
/// session is ended instead of holding the lock.
///
/// ```no_run
/// use election_postgres::{PostgresElection, PostgresOptions};
/// use fencing::{ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
/// let fence = election.fence();
/// let term = election.candidate("ledger-writer", "a")?.campaign().await?;
/// let ledger = ResourceName::new("ledger")?;
///
/// let mut tx = fence.begin_fenced(&ledger, Token::issue(&term)?).await?;
/// sqlx::query("INSERT INTO ledger (entry) VALUES ('paid')").execute(&mut *tx).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
///
/// [`new`](SqlFence::new) takes the pool and the schema as one pair:
/// `PostgresFence::new((pool, "election"))`.
pub type PostgresFence = SqlFence<PostgresMarks>;

/// The high-water marks of a [`PostgresFence`]: the `fences` table of the
/// election schema, with its statements ([`FenceRows`]).
#[derive(Clone, Debug)]
pub struct PostgresMarks {
    pool: PgPool,
    sql: Arc<Sql>,
    /// How long a wait for one of the pool's connections may take.
    request_timeout: Duration,
}

impl PostgresElection {
    /// A fence in this election's schema, on its pool (no I/O: the schema
    /// exists already).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    /// use fencing::{ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let fence = election.fence();
    /// let term = election.candidate("ledger-writer", "host-a/1")?.campaign().await?;
    /// let ledger = ResourceName::new("ledger")?;
    /// let mut tx = election.pool().begin().await?;
    /// fence.advance_in(&mut tx, &ledger, Token::issue(&term)?).await?; // refused if deposed
    /// sqlx::query("INSERT INTO ledger (entry) VALUES ('paid')").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> PostgresFence {
        SqlFence::from_marks(PostgresMarks {
            pool: self.inner.pool.clone(),
            sql: self.inner.sql.clone(),
            request_timeout: self.inner.options.request_timeout(),
        })
    }
}

impl PostgresMarks {
    /// A fence on `pool`'s database, in schema `schema` (created or
    /// migrated as [`PostgresElection::with_pool`] does).
    ///
    /// Cancel safety: cancel safe. Failure model: [`Error::Config`] for a
    /// bad schema name; database errors as [`Error`].
    ///
    /// ```no_run
    /// # use election_postgres::PostgresFence;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = sqlx::PgPool::connect("postgres://app@db/app").await?;
    /// let fence = PostgresFence::new((pool, "election")).await?;
    /// let orders = fencing::ResourceName::new("orders")?;
    /// println!("orders fenced at {:?}", fencing::Fence::high_water_mark(&fence, &orders).await?);
    /// # Ok(()) }
    /// ```
    async fn new(pool: PgPool, schema: &str) -> Result<Self, Error> {
        crate::options::check_schema(schema)?;
        let mut conn =
            crate::store::acquire::acquire(&pool, crate::options::DEFAULT_REQUEST_TIMEOUT).await?;
        schema::migrate(&mut conn, schema).await?;
        drop(conn);
        Ok(PostgresMarks {
            pool,
            sql: Arc::new(Sql::new(schema)),
            request_timeout: crate::options::DEFAULT_REQUEST_TIMEOUT,
        })
    }

    /// The mark of `resource` as `conn` sees it.
    async fn read_mark(
        &self,
        conn: &mut PgConnection,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        let mark: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.fence_read.clone()))
            .bind(resource.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| unavailable(resource, e))?;
        election_sql::stored_token(resource, mark)
    }

    /// A transaction of this fence's own.
    async fn transaction(
        &self,
        resource: &ResourceName,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, fencing::Error> {
        let conn = crate::store::acquire::acquire(&self.pool, self.request_timeout)
            .await
            .map_err(|e| unavailable(resource, e))?;
        sqlx::Transaction::begin(conn, None)
            .await
            .map_err(|e| unavailable(resource, e))
    }

    /// A transaction of this fence's own that commits durably whatever the
    /// session's `synchronous_commit`.
    async fn begin(
        &self,
        resource: &ResourceName,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, fencing::Error> {
        let mut tx = self.transaction(resource).await?;
        sqlx::query("SET LOCAL synchronous_commit = on")
            .execute(&mut *tx)
            .await
            .map_err(|e| unavailable(resource, e))?;
        Ok(tx)
    }
}

impl FenceRows for PostgresMarks {
    type Open<'a> = (PgPool, &'a str);
    type OpenError = Error;
    type Connection = PgConnection;
    type Transaction = sqlx::Transaction<'static, sqlx::Postgres>;
    type UnlockError = sqlx::Error;

    /// A fence on the pool's database in the schema (see [`PostgresFence`]).
    async fn open((pool, schema): Self::Open<'_>) -> Result<Self, Error> {
        PostgresMarks::new(pool, schema).await
    }

    /// Checks `token` against `resource`'s high-water mark and raises the
    /// mark, inside the caller's open transaction on `conn`. Make the
    /// guarded write in the same transaction and commit it; if this
    /// returns an error, roll back (dropping the transaction does; an
    /// error also aborts the transaction on the server).
    ///
    /// One statement (ADR 0044): `SELECT <schema>.fence_enter($1, $2)`,
    /// a function of the election schema that does what ADR 0041 describes.
    /// It first runs `SELECT mark .. WHERE mark >= token FOR SHARE`: a mark
    /// equal to `token` (every write of a term after its first) is then
    /// share-locked until the caller's transaction ends, and nothing is
    /// written to the mark row; a higher mark is [`fencing::Error::Stale`].
    /// Only when the mark is lower or missing does it raise it:
    /// `INSERT .. ON CONFLICT .. DO UPDATE .. WHERE mark <= token`, which
    /// locks the row exclusively and compares again.
    /// [`begin_fenced`](SqlFence::begin_fenced) runs the same function
    /// in the round trip of the `BEGIN`.
    ///
    /// Either lock lasts until the caller's transaction ends, and a raise
    /// conflicts with both, so an advance to a higher token waits for
    /// every open transaction that holds the row and then compares against
    /// the committed mark, and a check waits for an uncommitted raise and
    /// then sees its mark: two transactions can never both commit a write
    /// under a lower and a higher token in the wrong order (writes under
    /// one token do not wait for each other). The transaction must commit durably
    /// (`synchronous_commit` not `off`): a mark lost in a crash after its
    /// write was acknowledged would let a lower token in.
    ///
    /// Cancel safety: if dropped, the caller's transaction decides: it
    /// rolls back when dropped uncommitted.
    ///
    /// Failure model: [`fencing::Error::Stale`] with both tokens for an
    /// older token (nothing written; the caller's transaction is aborted
    /// on the server, as after any error); [`fencing::Error::Unavailable`]
    /// for database errors; [`fencing::Error::Corrupt`] for a mark this
    /// crate never writes. The returned [`Advance`]'s `previous` is the
    /// mark the deciding statement saw (`token` itself when it was held).
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # use fencing::ResourceName;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let fence = election.fence();
    /// let r = ResourceName::new("orders")?;
    /// let mut tx = election.pool().begin().await?;
    /// fence.advance_in(&mut tx, &r, "7".parse()?).await?;
    /// tx.commit().await?;
    /// let mut tx = election.pool().begin().await?;
    /// let stale = fence.advance_in(&mut tx, &r, "6".parse()?).await;
    /// assert!(matches!(stale, Err(fencing::Error::Stale { .. })));
    /// # Ok(()) }
    /// ```
    async fn advance_in(
        &self,
        conn: &mut PgConnection,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let previous: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.fence_enter.clone()))
            .bind(resource.as_str())
            .bind(election_sql::mark_of(token))
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| refused(resource, token, e))?;
        let previous = previous
            .map(|p| election_sql::token_from_mark(resource, p))
            .transpose()?;
        // `previous` may be older than the mark the upsert saw (a concurrent
        // advance that committed after the statement's snapshot); both are
        // at most `token`.
        Advance::decide(resource, previous.filter(|p| *p <= token), token)
    }

    /// Begins a transaction on this fence's pool whose first act checks
    /// `token` against `resource`'s high-water mark and raises it, exactly
    /// as [`advance_in`](SqlFence::advance_in) would, **in the same
    /// round trip as the `BEGIN`** (ADR 0044). Make the guarded write in the
    /// returned transaction and commit it: it commits atomically with the
    /// check, or not at all.
    ///
    /// The one message to the server is the simple query
    /// `SELECT <schema>.fence_enter('<resource>', <token>); BEGIN`: the
    /// function runs in the implicit transaction of that message, which
    /// the `BEGIN` turns into the returned transaction, so its locks (the
    /// share lock on an equal mark, or the row lock of a raise) last until
    /// the transaction ends, as with `advance_in`. The resource name goes
    /// into the query as an escaped string literal.
    ///
    /// Unlike `advance_in`, this does not say what the mark was before
    /// (sqlx does not hand back the rows of a `BEGIN` statement); use
    /// `advance_in` when that matters.
    ///
    /// The transaction must commit durably (`synchronous_commit` not
    /// `off`, which [`PostgresElection::connect`] refuses for its own pool).
    ///
    /// Cancel safety: cancel safe. Dropped before it returns, the begin is
    /// finished in a task of its own (`tokio::spawn` on the current
    /// runtime), and a transaction it opened is then dropped and rolled
    /// back before its connection goes back to the pool (a dropped
    /// `sqlx::Pool::begin` of sqlx 0.9 can instead leave its connection
    /// inside the transaction: transact-rs/sqlx#4393). A returned
    /// transaction dropped uncommitted rolls back, as any sqlx transaction.
    ///
    /// Failure model: [`fencing::Error::Stale`] with both tokens for an
    /// older token: nothing was written and no transaction is left open
    /// (the error rolled the message's implicit transaction back, so the
    /// connection goes back to the pool clean); [`fencing::Error::Unavailable`]
    /// for database errors, and when no connection of the pool comes within
    /// the request timeout (the election's, or
    /// [`DEFAULT_REQUEST_TIMEOUT`](crate::DEFAULT_REQUEST_TIMEOUT) for
    /// [`new`](SqlFence::new)), with the cause as its source (the server
    /// refused the connection, an unknown host, or
    /// [`Error::PoolExhausted`]); a server down never makes it wait longer;
    /// [`fencing::Error::Corrupt`] for a mark this crate never writes.
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    /// use fencing::{ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let fence = election.fence();
    /// let term = election.candidate("ledger-writer", "a")?.campaign().await?;
    /// let ledger = ResourceName::new("ledger")?;
    ///
    /// let mut tx = fence.begin_fenced(&ledger, Token::issue(&term)?).await?; // refused if deposed
    /// sqlx::query("INSERT INTO ledger (entry) VALUES ('paid')").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    async fn begin_fenced(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, fencing::Error> {
        // Dropped before its end, the begin is finished in a task of its
        // own: sqlx 0.9 counts the transaction only once the reply is read,
        // so a begin dropped in flight would queue no rollback and leave
        // its pooled connection inside the transaction
        // (transact-rs/sqlx#4393). Run to the end, the transaction nobody
        // awaits any more is dropped, which rolls it back.
        //
        // The wait for a connection is bounded by the request timeout (a
        // server down answers at once with the cause, not after the pool's
        // own acquire timeout); the `BEGIN` itself may wait for another
        // writer's transaction on the mark row, as long as that takes.
        let conn = crate::store::acquire::acquire(&self.pool, self.request_timeout)
            .await
            .map_err(|e| unavailable(resource, e))?;
        let statement = self.sql.fence_begin(resource, election_sql::mark_of(token));
        FinishOnDrop::new(async move {
            sqlx::Transaction::begin(conn, Some(AssertSqlSafe(statement).into_sql_str())).await
        })
        .await
        .map_err(|e| refused(resource, token, e))
    }

    /// One transaction of its own (committing durably) with
    /// [`advance_in`](SqlFence::advance_in), committed before this returns `Ok`.
    /// If the commit fails: [`fencing::Error::Unavailable`], the mark may
    /// or may not be raised.
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let mut tx = self.begin(resource).await?;
        let advance = FenceRows::advance_in(self, &mut tx, resource, token).await?;
        tx.commit().await.map_err(|e| unavailable(resource, e))?;
        Ok(advance)
    }

    /// Runs `write` once `token`'s mark is committed, while holding a
    /// share lock on the mark row, as the [`Fence`](fencing::Fence) contract asks:
    ///
    /// 1. One transaction (committing durably) checks and raises the mark
    ///    ([`advance_in`](SqlFence::advance_in)) and commits.
    /// 2. A second transaction takes a share lock on the mark row
    ///    (`SELECT .. FOR SHARE`: no advance of this resource gets in until
    ///    it ends) and reads it: if a higher token got in between the two,
    ///    [`fencing::Error::Stale`] and `write` never runs.
    /// 3. `write` runs; then the second transaction, which wrote nothing,
    ///    is rolled back, which releases the lock.
    ///
    /// For writes *to this database*, use [`advance_in`](SqlFence::advance_in) in
    /// your own transaction instead (one transaction, one lock).
    async fn lock_at(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, fencing::Error> {
        FenceRows::advance(self, resource, token).await?;
        let mut tx = self.transaction(resource).await?;
        let mark: Option<i64> = sqlx::query_scalar(AssertSqlSafe(self.sql.fence_lock.clone()))
            .bind(resource.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| unavailable(resource, e))?;
        let mark = election_sql::stored_token(resource, mark)?;
        election_sql::check_committed_mark(resource, mark, token, "the fences table")?;
        Ok(tx)
    }

    async fn unlock(locked: sqlx::Transaction<'static, sqlx::Postgres>) -> Result<(), sqlx::Error> {
        locked.rollback().await
    }

    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        let mut conn = crate::store::acquire::acquire(&self.pool, self.request_timeout)
            .await
            .map_err(|e| unavailable(resource, e))?;
        self.read_mark(&mut conn, resource).await
    }
}
