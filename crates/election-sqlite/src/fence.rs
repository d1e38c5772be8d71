//! [`SqliteFence`]: high-water marks in the database, checked inside the
//! application's own transaction.

use fencing::{Advance, Fence, ResourceName, Token, WriteFn};
use sqlx::{SqliteConnection, SqlitePool};

use crate::{Error, schema};

fn token_i64(resource: &ResourceName, token: Token) -> Result<i64, fencing::Error> {
    i64::try_from(token.epoch().get()).map_err(|_| {
        fencing::Error::corrupt(
            resource.as_str(),
            format!("token {token} does not fit SQLite's INTEGER"),
        )
    })
}

fn token_from(resource: &ResourceName, value: i64) -> Result<Token, fencing::Error> {
    u64::try_from(value)
        .ok()
        .and_then(election_core::Epoch::new)
        .map(Token::from_epoch)
        .ok_or_else(|| fencing::Error::corrupt(resource.as_str(), format!("stored mark {value}")))
}

fn unavailable(resource: &ResourceName, e: impl Into<Error>) -> fencing::Error {
    fencing::Error::unavailable(resource.as_str(), e.into())
}

/// A fence whose high-water marks live in the `election_fences` table of a
/// SQLite database, next to the data they protect.
///
/// The strongest use is [`SqliteFence::advance_in`]: the application opens
/// its own transaction, checks and advances the mark in it, makes its
/// write in it, and commits: the write commits atomically with the check,
/// or not at all. A deposed leader's transaction is refused with
/// [`fencing::Error::Stale`] and rolls back with its write.
///
/// ```
/// use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
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
/// SqliteFence::advance_in(&mut tx, &orders, token).await?;
/// sqlx::query("INSERT INTO ledger VALUES ('paid')").execute(&mut *tx).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SqliteFence {
    pool: SqlitePool,
}

impl SqliteFence {
    /// A fence on `pool`'s database; creates or migrates the tables.
    ///
    /// Cancel safety: cancel safe. Failure model: database errors as
    /// [`Error`].
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let fence = SqliteFence::new(election.pool().clone()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn new(pool: SqlitePool) -> Result<Self, Error> {
        let mut conn = pool.acquire().await?;
        schema::migrate(&mut conn).await?;
        drop(conn);
        Ok(SqliteFence { pool })
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
    /// # use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
    /// # use fencing::{ResourceName, Token};
    /// # use sqlx::Connection;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let r = ResourceName::new("orders")?;
    /// let mut conn = election.pool().acquire().await?;
    /// let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    /// SqliteFence::advance_in(&mut tx, &r, "7".parse()?).await?;
    /// tx.commit().await?;
    /// let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    /// let stale = SqliteFence::advance_in(&mut tx, &r, "6".parse()?).await;
    /// assert!(matches!(stale, Err(fencing::Error::Stale { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn advance_in(
        conn: &mut SqliteConnection,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let value = token_i64(resource, token)?;
        let previous: Option<i64> =
            sqlx::query_scalar("SELECT token FROM election_fences WHERE resource = ?1")
                .bind(resource.as_str())
                .fetch_optional(&mut *conn)
                .await
                .map_err(|e| unavailable(resource, e))?;
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
        let stored = previous.map(|p| token_from(resource, p)).transpose()?;
        if raised.rows_affected() == 1 {
            return Advance::decide(resource, stored, token);
        }
        // Refused: read the mark that refused it (the upsert held the lock).
        let mark: i64 = sqlx::query_scalar("SELECT token FROM election_fences WHERE resource = ?1")
            .bind(resource.as_str())
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| unavailable(resource, e))?;
        Advance::decide(resource, Some(token_from(resource, mark)?), token)
    }
}

impl SqliteFence {
    async fn begin(
        &self,
        resource: &ResourceName,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, fencing::Error> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| unavailable(resource, e))
    }
}

impl Fence for SqliteFence {
    /// One `BEGIN IMMEDIATE` transaction with [`SqliteFence::advance_in`].
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        let mut tx = self.begin(resource).await?;
        let advance = Self::advance_in(&mut tx, resource, token).await?;
        tx.commit().await.map_err(|e| unavailable(resource, e))?;
        Ok(advance)
    }

    /// Holds a `BEGIN IMMEDIATE` transaction (SQLite's write lock) across
    /// `write`, so no other writer of this database gets in between; the
    /// mark commits before `write` runs. For writes *to this database*, use
    /// [`SqliteFence::advance_in`] in your own transaction instead: a write
    /// through another connection would wait for this lock.
    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, fencing::Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        let mut tx = self.begin(resource).await?;
        Self::advance_in(&mut tx, resource, token).await?;
        let outcome = write().await;
        tx.commit().await.map_err(|e| unavailable(resource, e))?;
        Ok(outcome)
    }

    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        let mark: Option<i64> =
            sqlx::query_scalar("SELECT token FROM election_fences WHERE resource = ?1")
                .bind(resource.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| unavailable(resource, e))?;
        mark.map(|m| token_from(resource, m)).transpose()
    }
}
