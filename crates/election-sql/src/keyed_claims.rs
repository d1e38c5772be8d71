//! [`SqlKeyedClaims`]: the keys of a lease set in a SQL backend, the
//! core's [`KeyedClaims`] written once over [`KeyedRows`] (ADR 0081): the
//! renew, confirm and release steps are [`KeyedState`]'s over the
//! backend's [`LeaseRows`]; the claim step, the wait and what a close
//! frees are the backend's own (SQLite's same-host locks, PostgreSQL's
//! notifications).

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use election_core::{
    ConfigError, ElectionName, Epoch, HeldKey, Identity, KeyedClaims, LossReason, RenewalPolicy,
};

use crate::claim::{ClaimRows, ElectionStore};
use crate::keyed::{Answer, KeyedState};
use crate::renewal::renewal_policy;

/// The steps of keyed claims that differ between SQL backends, over the
/// backend's store: the claim of many keys (one read and one claim
/// statement or transaction however many keys), the wait between polls,
/// and what a release and a close free besides the rows. The rest of
/// [`KeyedClaims`] is [`SqlKeyedClaims`]'s.
pub trait KeyedRows: ClaimRows<Error: From<ConfigError>> {
    /// What a set keeps of this backend's own between its steps (the keys'
    /// same-host locks, the wake-ups and the keys they concern).
    type KeyedWaiting: Debug + Send + Sync + 'static;

    /// The backend's part of a new set.
    ///
    /// ```
    /// use election_sql::KeyedRows;
    ///
    /// fn part<S: KeyedRows>(store: &S) -> S::KeyedWaiting {
    ///     store.keyed_waiting()
    /// }
    /// ```
    fn keyed_waiting(&self) -> Self::KeyedWaiting;

    /// [`KeyedClaims::claim`]: an answer for each of `keys`, in order.
    ///
    /// ```
    /// use election_core::ElectionName;
    /// use election_sql::{Answer, KeyedRows, SqlKeyedClaims};
    ///
    /// async fn claim<S: KeyedRows>(set: &SqlKeyedClaims<S>, keys: &[ElectionName]) -> Vec<Answer> {
    ///     S::claim_keys(set, keys).await
    /// }
    /// ```
    fn claim_keys(
        set: &SqlKeyedClaims<Self>,
        keys: &[ElectionName],
    ) -> impl Future<Output = Vec<Answer>> + Send;

    /// [`KeyedClaims::wait`]: until a key asked may be free, at most the
    /// set's poll interval.
    ///
    /// ```
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// async fn wait<S: KeyedRows>(set: &SqlKeyedClaims<S>) {
    ///     S::wait_keys(set).await
    /// }
    /// ```
    fn wait_keys(set: &SqlKeyedClaims<Self>) -> impl Future<Output = ()> + Send;

    /// What the backend frees of `held` after their rows were released
    /// (nothing by default).
    ///
    /// ```
    /// use election_core::HeldKey;
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn freed<S: KeyedRows>(set: &SqlKeyedClaims<S>, held: &[HeldKey]) {
    ///     S::released(set, held)
    /// }
    /// ```
    fn released(_set: &SqlKeyedClaims<Self>, _held: &[HeldKey]) {}

    /// [`KeyedClaims::close`]: what the backend frees when the set closes
    /// (nothing by default).
    ///
    /// ```
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// async fn closed<S: KeyedRows>(set: &SqlKeyedClaims<S>) {
    ///     S::close_keys(set).await
    /// }
    /// ```
    fn close_keys(_set: &SqlKeyedClaims<Self>) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The keys of a lease set over a SQL backend: one lease row per key, the
/// same rows, protocol and timings as the backend's single claims, so sets
/// and single candidates contend for the same keys. Each backend names it
/// for its store (`SqliteKeyedClaims`, `PostgresKeyedClaims`), whose docs
/// say what its steps do.
#[derive(Debug)]
pub struct SqlKeyedClaims<S: KeyedRows> {
    store: Arc<S>,
    /// Each held key's term, each contended key's observation.
    state: KeyedState,
    /// The backend's own part ([`KeyedRows::KeyedWaiting`]).
    waiting: S::KeyedWaiting,
}

impl<S: KeyedRows> SqlKeyedClaims<S> {
    /// The keys of process `identity` in the database of `election` (the
    /// backend's façade), with its options and the core's
    /// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL):
    /// what the façade's `lease_set` builds.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::{ElectionStore, KeyedRows, SqlKeyedClaims};
    ///
    /// // `SqliteKeyedClaims::new(&election, identity)` is this:
    /// fn keys<S: KeyedRows>(election: &impl ElectionStore<S>) -> Result<SqlKeyedClaims<S>, Box<dyn std::error::Error>> {
    ///     Ok(SqlKeyedClaims::new(election, Identity::new("node-a")?))
    /// }
    /// ```
    pub fn new(election: &impl ElectionStore<S>, identity: Identity) -> Self {
        Self::over(election.store().clone(), identity)
    }

    /// The keys of process `identity` over `store`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_core::Identity;
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn keys<S: KeyedRows>(store: Arc<S>) -> Result<SqlKeyedClaims<S>, Box<dyn std::error::Error>> {
    ///     Ok(SqlKeyedClaims::over(store, Identity::new("node-a")?))
    /// }
    /// ```
    pub fn over(store: Arc<S>, identity: Identity) -> Self {
        let waiting = store.keyed_waiting();
        SqlKeyedClaims {
            store,
            state: KeyedState::new(identity),
            waiting,
        }
    }

    /// Sets how often the keys not held are looked at (a vacant or expired
    /// one claimed) when nothing wakes the set earlier: between 1 ms and
    /// 1 h; the backend's `Config` error otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn slower<S: KeyedRows>(set: SqlKeyedClaims<S>) -> Result<SqlKeyedClaims<S>, S::Error> {
    ///     set.with_poll_interval(Duration::from_secs(2))
    /// }
    /// ```
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, S::Error> {
        self.state.set_poll_interval(poll_interval)?;
        Ok(self)
    }

    /// The store these keys work through.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn same_database<S: KeyedRows>(a: &SqlKeyedClaims<S>, b: &SqlKeyedClaims<S>) -> bool {
    ///     Arc::ptr_eq(a.store(), b.store())
    /// }
    /// ```
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The bookkeeping of the keys: each held key's term, each contended
    /// key's observation, the poll interval.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn identity_of<S: KeyedRows>(set: &SqlKeyedClaims<S>) -> &Identity {
    ///     set.state().identity()
    /// }
    /// ```
    pub fn state(&self) -> &KeyedState {
        &self.state
    }

    /// The backend's own part ([`KeyedRows::KeyedWaiting`]).
    ///
    /// ```
    /// use election_sql::{KeyedRows, SqlKeyedClaims};
    ///
    /// fn part<S: KeyedRows>(set: &SqlKeyedClaims<S>) -> &S::KeyedWaiting {
    ///     set.waiting()
    /// }
    /// ```
    pub fn waiting(&self) -> &S::KeyedWaiting {
        &self.waiting
    }
}

impl<S: KeyedRows> KeyedClaims for SqlKeyedClaims<S> {
    fn identity(&self) -> &Identity {
        self.state.identity()
    }

    fn backend(&self) -> &'static str {
        S::BACKEND
    }

    fn renewal(&self) -> Option<RenewalPolicy> {
        renewal_policy(&*self.store)
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Answer> {
        if keys.is_empty() {
            return Vec::new();
        }
        S::claim_keys(self, keys).await
    }

    async fn renew(
        &self,
        held: &[HeldKey],
    ) -> Result<Vec<(ElectionName, LossReason)>, election_core::Error> {
        self.state.renew(&*self.store, held).await
    }

    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), election_core::Error> {
        self.state.confirm(&*self.store, key, epoch).await
    }

    async fn release(&self, held: &[HeldKey]) {
        self.state.release(&*self.store, held).await;
        S::released(self, held);
    }

    async fn wait(&self) {
        S::wait_keys(self).await;
    }

    async fn close(&self) {
        S::close_keys(self).await;
        // The set's heartbeat goes with it (ADR 0110); left behind, it is
        // deleted a day later by another set's close.
        let forget = self.store.stop_heartbeat(self.state.heartbeat());
        match tokio::time::timeout(self.store.times().validity(), forget).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "the lease set's heartbeat was not deleted"),
            Err(_) => tracing::debug!("the deletion of the lease set's heartbeat timed out"),
        }
    }
}
