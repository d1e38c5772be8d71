//! [`SqlFence`]: a fence whose high-water marks live in a SQL backend's
//! database, the `fencing` crate's [`Fence`] written once over
//! [`FenceRows`] (ADR 0081): the backend keeps its statements, its lock
//! and its transactions; the order of a fenced write (the mark committed
//! and locked, the write, the lock released) is here.

use std::fmt::{Debug, Display};
use std::future::Future;

use fencing::{Advance, Fence, ResourceName, Token, WriteFn};

use crate::fence_mark::write_locked;

/// The statements of a SQL backend's fence: the check inside the caller's
/// transaction, a transaction that begins with it, the committed advance,
/// the mark committed and then held under the backend's lock, and the
/// read of a mark. Each backend implements it on its marks type; users
/// name the fence by the backend's alias (`SqliteFence`, `PostgresFence`).
pub trait FenceRows: Clone + Debug + Send + Sync + Sized + 'static {
    /// What a fence is made from ([`SqlFence::new`]): SQLite's pool,
    /// PostgreSQL's pool and schema.
    type Open<'a>: Send;
    /// The backend's error when a fence cannot be made.
    type OpenError;
    /// The driver's connection, which [`SqlFence::advance_in`] checks in.
    type Connection: ?Sized + Send;
    /// The driver's transaction, which [`SqlFence::begin_fenced`] begins.
    type Transaction: Send;
    /// The error of releasing the lock a fenced write ran under.
    type UnlockError: Display;

    /// Makes the marks from `open` (creating or migrating their table).
    ///
    /// ```
    /// use election_sql::FenceRows;
    ///
    /// async fn marks<F: FenceRows>(open: F::Open<'_>) -> Result<F, F::OpenError> {
    ///     F::open(open).await
    /// }
    /// ```
    fn open(open: Self::Open<'_>) -> impl Future<Output = Result<Self, Self::OpenError>> + Send;

    /// Checks `token` against `resource`'s mark and raises it, inside the
    /// caller's open transaction on `conn`.
    ///
    /// ```
    /// use election_sql::FenceRows;
    /// use fencing::{Advance, ResourceName, Token};
    ///
    /// async fn check_in<F: FenceRows>(
    ///     marks: &F,
    ///     conn: &mut F::Connection,
    ///     resource: &ResourceName,
    ///     token: Token,
    /// ) -> Result<Advance, fencing::Error> {
    ///     marks.advance_in(conn, resource, token).await
    /// }
    /// ```
    fn advance_in(
        &self,
        conn: &mut Self::Connection,
        resource: &ResourceName,
        token: Token,
    ) -> impl Future<Output = Result<Advance, fencing::Error>> + Send;

    /// Begins a transaction whose first act is [`advance_in`](Self::advance_in).
    ///
    /// ```
    /// use election_sql::FenceRows;
    /// use fencing::{ResourceName, Token};
    ///
    /// async fn begin<F: FenceRows>(marks: &F, resource: &ResourceName, token: Token) -> Result<F::Transaction, fencing::Error> {
    ///     marks.begin_fenced(resource, token).await
    /// }
    /// ```
    fn begin_fenced(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> impl Future<Output = Result<Self::Transaction, fencing::Error>> + Send;

    /// [`Fence::advance`]: the check and raise, committed.
    ///
    /// ```
    /// use election_sql::FenceRows;
    /// use fencing::{Advance, ResourceName, Token};
    ///
    /// async fn raise<F: FenceRows>(marks: &F, resource: &ResourceName, token: Token) -> Result<Advance, fencing::Error> {
    ///     marks.advance(resource, token).await
    /// }
    /// ```
    fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> impl Future<Output = Result<Advance, fencing::Error>> + Send;

    /// The first steps of [`Fence::fenced`]: `token`'s mark committed, then
    /// a transaction that holds the backend's lock on it, with the mark
    /// read again under that lock and found to be `token`
    /// ([`check_committed_mark`](crate::check_committed_mark)).
    ///
    /// ```
    /// use election_sql::FenceRows;
    /// use fencing::{ResourceName, Token};
    ///
    /// // The mark committed and locked; the write runs while `locked` lives:
    /// async fn locked<F: FenceRows>(marks: &F, resource: &ResourceName, token: Token) -> Result<F::Transaction, fencing::Error> {
    ///     marks.lock_at(resource, token).await
    /// }
    /// ```
    fn lock_at(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> impl Future<Output = Result<Self::Transaction, fencing::Error>> + Send;

    /// Ends `locked` (which wrote nothing that matters): rolls it back,
    /// which releases the lock.
    ///
    /// ```
    /// use election_sql::FenceRows;
    ///
    /// async fn end<F: FenceRows>(locked: F::Transaction) -> Result<(), F::UnlockError> {
    ///     F::unlock(locked).await
    /// }
    /// ```
    fn unlock(
        locked: Self::Transaction,
    ) -> impl Future<Output = Result<(), Self::UnlockError>> + Send;

    /// [`Fence::high_water_mark`].
    ///
    /// ```
    /// use election_sql::FenceRows;
    /// use fencing::{ResourceName, Token};
    ///
    /// async fn mark<F: FenceRows>(marks: &F, resource: &ResourceName) -> Result<Option<Token>, fencing::Error> {
    ///     marks.high_water_mark(resource).await
    /// }
    /// ```
    fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> impl Future<Output = Result<Option<Token>, fencing::Error>> + Send;
}

/// A fence whose high-water marks live in a SQL backend's database, next
/// to the data they protect. Each backend names it for its marks
/// (`SqliteFence`, `PostgresFence`), whose docs say what its steps do.
#[derive(Clone, Debug)]
pub struct SqlFence<F: FenceRows>(F);

impl<F: FenceRows> SqlFence<F> {
    /// A fence from `open` (SQLite: the pool; PostgreSQL: the pool and the
    /// schema); creates or migrates the marks' table. Failure model: the
    /// backend's error.
    ///
    /// ```
    /// use election_sql::{FenceRows, SqlFence};
    ///
    /// // `SqliteFence::new(pool)` and `PostgresFence::new((pool, schema))` are this:
    /// async fn fence<F: FenceRows>(open: F::Open<'_>) -> Result<SqlFence<F>, F::OpenError> {
    ///     SqlFence::new(open).await
    /// }
    /// ```
    pub async fn new(open: F::Open<'_>) -> Result<Self, F::OpenError> {
        Ok(SqlFence(F::open(open).await?))
    }

    /// The fence over `marks` (what the façades' `fence()` builds).
    ///
    /// ```
    /// use election_sql::{FenceRows, SqlFence};
    ///
    /// fn fence_over<F: FenceRows>(marks: F) -> SqlFence<F> {
    ///     SqlFence::from_marks(marks)
    /// }
    /// ```
    pub fn from_marks(marks: F) -> Self {
        SqlFence(marks)
    }

    /// Checks `token` against `resource`'s high-water mark and raises the
    /// mark, inside the caller's open transaction on `conn`. Make the
    /// guarded write in the same transaction and commit it; if this returns
    /// an error, roll back (dropping the transaction does).
    /// [`fencing::Error::Stale`] with both tokens for an older token.
    ///
    /// ```
    /// use election_sql::{FenceRows, SqlFence};
    /// use fencing::{Advance, ResourceName, Token};
    ///
    /// // In the caller's own transaction on `conn`, before its guarded write:
    /// async fn guard<F: FenceRows>(
    ///     fence: &SqlFence<F>,
    ///     conn: &mut F::Connection,
    ///     resource: &ResourceName,
    ///     token: Token,
    /// ) -> Result<Advance, fencing::Error> {
    ///     fence.advance_in(conn, resource, token).await
    /// }
    /// ```
    pub async fn advance_in(
        &self,
        conn: &mut F::Connection,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        self.0.advance_in(conn, resource, token).await
    }

    /// Begins a transaction on this fence's pool whose first act checks
    /// `token` against `resource`'s high-water mark and raises it, as
    /// [`advance_in`](Self::advance_in) would. Make the guarded write in the
    /// returned transaction and commit it: it commits atomically with the
    /// check, or not at all. A deposed leader's token is refused
    /// ([`fencing::Error::Stale`]) and the transaction rolled back.
    ///
    /// ```
    /// use election_sql::{FenceRows, SqlFence};
    /// use fencing::{ResourceName, Token};
    ///
    /// // The guarded write goes into the returned transaction, then commit it:
    /// async fn begin<F: FenceRows>(fence: &SqlFence<F>, resource: &ResourceName, token: Token) -> Result<F::Transaction, fencing::Error> {
    ///     fence.begin_fenced(resource, token).await
    /// }
    /// ```
    pub async fn begin_fenced(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<F::Transaction, fencing::Error> {
        self.0.begin_fenced(resource, token).await
    }
}

impl<F: FenceRows> Fence for SqlFence<F> {
    /// The check and raise in a transaction of its own, committed before
    /// this returns `Ok` ([`FenceRows::advance`]). If the commit fails:
    /// [`fencing::Error::Unavailable`], the mark may or may not be raised.
    async fn advance(
        &self,
        resource: &ResourceName,
        token: Token,
    ) -> Result<Advance, fencing::Error> {
        self.0.advance(resource, token).await
    }

    /// Runs `write` once `token`'s mark is committed, while holding the
    /// backend's lock on it ([`FenceRows::lock_at`]); then ends that
    /// transaction, which wrote nothing, releasing the lock. For writes
    /// *to this database*, use [`advance_in`](SqlFence::advance_in) in your
    /// own transaction instead.
    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, fencing::Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        let locked = self.0.lock_at(resource, token).await?;
        Ok(write_locked(resource, write(), || F::unlock(locked)).await)
    }

    async fn high_water_mark(
        &self,
        resource: &ResourceName,
    ) -> Result<Option<Token>, fencing::Error> {
        self.0.high_water_mark(resource).await
    }
}
