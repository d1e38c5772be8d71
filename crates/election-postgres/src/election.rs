//! [`PostgresElection`]: elections in one PostgreSQL database, and the
//! [`PostgresClaim`] of one candidate.

use std::sync::Arc;

use sqlx::PgPool;

use crate::clock::Clock;
use crate::context::Context;
use crate::error::Error;
use crate::options::PostgresOptions;

/// Elections among the processes that share one PostgreSQL database,
/// usually the application's own.
///
/// ```no_run
/// use election_postgres::{PostgresElection, PostgresOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = PostgresElection::connect("postgres://app@db.internal/app", PostgresOptions::default()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PostgresElection {
    pub(crate) inner: Arc<Context>,
}

impl PostgresElection {
    /// Connects to `url` (`postgres://user@host:port/db`; sqlx reads a
    /// missing password from `PGPASSWORD` or the `~/.pgpass` file, so it
    /// need never be on a command line) with a pool of its own (at most 8
    /// connections, plus one for notifications once something waits),
    /// checks that the session commits durably and creates or migrates the
    /// election schema ([`schema`](crate::schema)).
    ///
    /// Cancel safety: cancel safe; nothing is held if dropped (a migration
    /// in flight commits whole or not at all).
    ///
    /// Failure model: a URL that does not parse, a refused password, a
    /// missing database or a missing privilege is [`Error::Unusable`];
    /// `synchronous_commit = off` is [`Error::UnsafeSetting`]; a schema
    /// written by a newer version [`Error::SchemaTooNew`]; an unreachable
    /// server [`Error::Unavailable`] or [`Error::TimedOut`] (after four
    /// request timeouts).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// let election = PostgresElection::connect("postgres://app@db.internal/app", options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::connect(url, options).await?))
    }

    /// Uses the application's own pool (its sessions must not turn
    /// `synchronous_commit` off: checked on one session here; see ADR
    /// 0033). Creates or migrates the election schema; the application's
    /// own tables are never touched. Notifications use a connection of
    /// their own, with the pool's connect options, not one of the pool's.
    ///
    /// Cancel safety and failure model as [`connect`](Self::connect).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = sqlx::PgPool::connect("postgres://app@db.internal/app").await?;
    /// let election = PostgresElection::with_pool(pool, PostgresOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::with_pool(pool, options).await?))
    }

    /// Uses `clock` instead of the system's clocks (for tests).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self::of(self.inner.with_clock(clock))
    }

    fn of(context: Context) -> Self {
        PostgresElection {
            inner: Arc::new(context),
        }
    }

    /// The pool, for the application's own queries and for
    /// [`PostgresFence`](crate::PostgresFence).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The settings.
    pub fn options(&self) -> &PostgresOptions {
        &self.inner.options
    }
}
