//! [`SqlClaim`]: the claim of one candidate in a SQL backend, and its
//! [`SqlAttempt`], written once over [`ClaimRows`] (ADR 0081), in the
//! manner of sqlx's `Pool<DB>`: each backend names it for its own store
//! (`pub type SqliteClaim = SqlClaim<SqliteStore>`) and implements
//! [`ClaimRows`] with its own statements and what truly differs (SQLite's
//! same-host lock and checks of the database file, PostgreSQL's
//! notifications and readying). What is the same for both is here: the
//! attempt's bookkeeping, the renewal task (`watch`, over
//! [`watch_term`]), the commit-point check and the published value (one
//! conditional write each, [`write_term`]), the release's answer and when
//! a closed attempt is released in the background.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use election_core::{
    Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
};

use crate::keyed::{HeldRow, IntoCore, LeaseRows};
use crate::lease_row::Observed;
use crate::renewal::{watch_term, write_term};

/// The claim steps of one candidate that differ between SQL backends, over
/// the backend's store (its pool, options and clock): how a claim is tried
/// and waited for, what a won term readies, the published value's
/// statement, the release's statement and the leader's read. The rest of
/// [`Claim`] is [`SqlClaim`]'s, the same for every backend.
///
/// A backend implements it on its store type; users name the claim by the
/// backend's alias (`SqliteClaim`, `PostgresClaim`) and never call these
/// steps themselves.
pub trait ClaimRows: LeaseRows + Debug + Sized + 'static {
    /// The backend's name, as [`Claim::backend`] gives it ("sqlite",
    /// "postgres").
    const BACKEND: &'static str;

    /// What an attempt keeps of this backend's own between its steps (a
    /// same-host lock, a subscription to wake-ups).
    type Waiting: Debug + Send + 'static;

    /// The backend's part of a new attempt.
    ///
    /// ```
    /// use election_sql::ClaimRows;
    ///
    /// fn part<S: ClaimRows>(store: &S) -> S::Waiting {
    ///     store.waiting()
    /// }
    /// ```
    fn waiting(&self) -> Self::Waiting;

    /// [`Claim::try_claim`] for `claim`'s name and identity: `Ok(Some)`
    /// with the epoch won in the same statement or transaction (rule 1),
    /// `Ok(None)` when the name is held or not yet free to take. Sets
    /// `attempt.may_hold` before anything that may commit a claim, and
    /// `attempt.epoch` to the epoch won.
    ///
    /// ```
    /// use election_core::Won;
    /// use election_sql::{AttemptState, ClaimRows, SqlClaim};
    ///
    /// async fn try_once<S: ClaimRows>(
    ///     claim: &SqlClaim<S>,
    ///     attempt: &mut AttemptState<S::Waiting>,
    /// ) -> Result<Option<Won>, election_core::Error> {
    ///     S::try_claim(claim, attempt).await
    /// }
    /// ```
    fn try_claim(
        claim: &SqlClaim<Self>,
        attempt: &mut AttemptState<Self::Waiting>,
    ) -> impl Future<Output = Result<Option<Won>, election_core::Error>> + Send;

    /// [`Claim::wait`]: until the name may be free, at most `poll`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::{AttemptState, ClaimRows, SqlClaim};
    ///
    /// async fn until_free<S: ClaimRows>(
    ///     claim: &SqlClaim<S>,
    ///     attempt: &mut AttemptState<S::Waiting>,
    /// ) -> Result<(), election_core::Error> {
    ///     S::wait(claim, attempt, Duration::from_secs(1)).await
    /// }
    /// ```
    fn wait(
        claim: &SqlClaim<Self>,
        attempt: &mut AttemptState<Self::Waiting>,
        poll: Duration,
    ) -> impl Future<Output = Result<(), election_core::Error>> + Send;

    /// What a won term readies before its renewal starts (nothing by
    /// default).
    ///
    /// ```
    /// use election_sql::{AttemptState, ClaimRows};
    ///
    /// fn ready<S: ClaimRows>(store: &S, attempt: &mut AttemptState<S::Waiting>) {
    ///     store.on_watch(attempt)
    /// }
    /// ```
    fn on_watch(&self, _attempt: &mut AttemptState<Self::Waiting>) {}

    /// Writes `value` into the row only while it shows `hold`'s term;
    /// whether it did.
    ///
    /// ```
    /// use election_sql::{ClaimRows, HeldRow};
    ///
    /// async fn publish<S: ClaimRows>(store: &S, hold: HeldRow<'_>) -> Result<bool, S::Error> {
    ///     store.proclaim(hold, "10.0.0.7:8080").await
    /// }
    /// ```
    fn proclaim(
        &self,
        hold: HeldRow<'_>,
        value: &str,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Releases the row `name` only while it shows the attempt `nonce`;
    /// whether it did.
    ///
    /// ```
    /// use election_sql::ClaimRows;
    ///
    /// async fn give_back<S: ClaimRows>(store: &S, nonce: i64) -> Result<bool, S::Error> {
    ///     store.release("jobs", nonce).await
    /// }
    /// ```
    fn release(
        &self,
        name: &str,
        nonce: i64,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Hands the term `hold` over (ADR 0112): in one conditional write
    /// (on the term's nonce and epoch, as a release is), rewrites its row
    /// as held by the pseudo-holder `holder`
    /// ([`handed_to`](crate::lease_row::handed_to)) with no nonce, the
    /// TTL `window_ms` and the term's epoch (none drawn), and wakes the
    /// waiters as a release does (the successor among them); whether it
    /// did.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::{ClaimRows, HeldRow};
    /// use election_sql::lease_row::handed_to;
    ///
    /// async fn hand<S: ClaimRows>(store: &S, hold: HeldRow<'_>) -> Result<bool, Box<dyn std::error::Error>> {
    ///     let holder = handed_to(&Identity::new("web-1")?, &Identity::new("web-2")?);
    ///     Ok(store.release_to(hold, &holder, 15_000).await?)
    /// }
    /// ```
    fn release_to(
        &self,
        hold: HeldRow<'_>,
        holder: &str,
        window_ms: i64,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Releases, in the background, the row of a closed `attempt` that may
    /// have won it (conditional on its nonce); if that cannot run, the
    /// lease ages out after its TTL.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_core::ElectionName;
    /// use election_sql::{AttemptState, ClaimRows};
    ///
    /// // What `SqlClaim`'s close does with an attempt given up after a claim
    /// // may have committed:
    /// fn give_up<S: ClaimRows>(store: &Arc<S>, name: &ElectionName, attempt: AttemptState<S::Waiting>) {
    ///     if attempt.may_hold {
    ///         store.release_later(name, attempt);
    ///     }
    /// }
    /// ```
    fn release_later(self: &Arc<Self>, name: &ElectionName, attempt: AttemptState<Self::Waiting>);

    /// The holder and epoch of `name` as its row records them.
    ///
    /// ```
    /// use election_core::{ElectionName, Leader};
    /// use election_sql::ClaimRows;
    ///
    /// async fn holder<S: ClaimRows>(store: &S, name: &ElectionName) -> Result<Option<Leader>, election_core::Error> {
    ///     store.leader(name).await
    /// }
    /// ```
    fn leader(
        &self,
        name: &ElectionName,
    ) -> impl Future<Output = Result<Option<Leader>, election_core::Error>> + Send;
}

/// A SQL backend's façade (`SqliteElection`, `PostgresElection`): the
/// store its claims and keyed claims work through, so that the generic
/// constructors take the façade (`SqliteKeyedClaims::new(&election, ..)`).
pub trait ElectionStore<S> {
    /// The façade's store.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_sql::{ClaimRows, ElectionStore};
    ///
    /// // The generic constructors reach a façade's store through it:
    /// fn store_of<S: ClaimRows>(election: &impl ElectionStore<S>) -> Arc<S> {
    ///     election.store().clone()
    /// }
    /// ```
    fn store(&self) -> &Arc<S>;
}

/// The state of one attempt that a backend's [`ClaimRows`] steps read and
/// write: the same for every SQL backend, with the backend's own part in
/// `waiting`.
#[derive(Debug)]
pub struct AttemptState<W> {
    /// The attempt's random nonce, written with a won claim: every later
    /// write of the term is conditional on it.
    pub nonce: i64,
    /// The holder's term this attempt has seen, and since when (the
    /// takeover's count of a full TTL, [`crate::lease_row::may_claim`]).
    pub observed: Option<Observed>,
    /// Set once a claim may have been committed (before the commit): a
    /// closed attempt is then released in the background.
    pub may_hold: bool,
    /// The epoch this attempt won, for the commit-point check.
    pub epoch: Option<i64>,
    /// The backend's own part ([`ClaimRows::Waiting`]).
    pub waiting: W,
}

/// One attempt of a [`SqlClaim`] (the core's [`Claim::Attempt`]).
#[derive(Debug)]
pub struct SqlAttempt<S: ClaimRows>(AttemptState<S::Waiting>);

/// The claim of one candidate in a SQL backend's election: one lease row
/// per name. Each backend names it for its store (`SqliteClaim`,
/// `PostgresClaim`), whose docs say what its steps do.
#[derive(Debug)]
pub struct SqlClaim<S: ClaimRows> {
    store: Arc<S>,
    name: ElectionName,
    identity: Identity,
}

impl<S: ClaimRows> SqlClaim<S> {
    /// The claim of `identity` in election `name` over `store` (no I/O):
    /// what the backends' façades build (`SqliteElection::claim`,
    /// `PostgresElection::claim`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_core::{ElectionName, Identity};
    /// use election_sql::{ClaimRows, SqlClaim};
    ///
    /// fn claim_of<S: ClaimRows>(store: Arc<S>) -> Result<SqlClaim<S>, Box<dyn std::error::Error>> {
    ///     Ok(SqlClaim::new(store, ElectionName::new("jobs")?, Identity::new("node-a")?))
    /// }
    /// ```
    pub fn new(store: Arc<S>, name: ElectionName, identity: Identity) -> Self {
        SqlClaim {
            store,
            name,
            identity,
        }
    }

    /// The store this claim works through.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_sql::{ClaimRows, SqlClaim};
    ///
    /// fn same_database<S: ClaimRows>(a: &SqlClaim<S>, b: &SqlClaim<S>) -> bool {
    ///     Arc::ptr_eq(a.store(), b.store())
    /// }
    /// ```
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// The backend's error `e`, as the core's error about this claim's name.
    ///
    /// ```
    /// use election_sql::{ClaimRows, SqlClaim};
    ///
    /// // A backend's step maps its own error to the core's, about this name:
    /// fn as_core<S: ClaimRows>(claim: &SqlClaim<S>, e: S::Error) -> election_core::Error {
    ///     claim.core(e)
    /// }
    /// ```
    pub fn core(&self, e: S::Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    /// [`election_core::Error::NotHeld`] about this claim's name.
    ///
    /// ```
    /// use election_sql::{ClaimRows, SqlClaim};
    ///
    /// fn refuse<S: ClaimRows>(claim: &SqlClaim<S>) -> election_core::Error {
    ///     let e = claim.not_held();
    ///     assert!(matches!(e, election_core::Error::NotHeld { .. }));
    ///     e
    /// }
    /// ```
    pub fn not_held(&self) -> election_core::Error {
        election_core::Error::NotHeld {
            name: self.name.clone(),
        }
    }
}

impl<S: ClaimRows> Claim for SqlClaim<S> {
    type Attempt = SqlAttempt<S>;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        S::BACKEND
    }

    async fn open(&self) -> Result<SqlAttempt<S>, election_core::Error> {
        Ok(SqlAttempt(AttemptState {
            nonce: election_core::attempt_nonce().cast_signed(),
            observed: None,
            may_hold: false,
            epoch: None,
            waiting: self.store.waiting(),
        }))
    }

    async fn try_claim(
        &self,
        attempt: &mut SqlAttempt<S>,
    ) -> Result<Option<Won>, election_core::Error> {
        S::try_claim(self, &mut attempt.0).await
    }

    async fn wait(
        &self,
        attempt: &mut SqlAttempt<S>,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        S::wait(self, &mut attempt.0, poll_interval).await
    }

    /// Starts the renewal task ([`watch_term`]) after what the backend
    /// readies ([`ClaimRows::on_watch`]).
    fn watch(
        &self,
        attempt: &mut SqlAttempt<S>,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        self.store.on_watch(&mut attempt.0);
        watch_term(
            self.store.clone(),
            &self.name,
            attempt.0.nonce,
            won,
            reporter,
        )
    }

    /// The commit-point check: one conditional renewal ([`write_term`] over
    /// [`LeaseRows::confirm`]).
    async fn confirm(&self, attempt: &mut SqlAttempt<S>) -> Result<(), election_core::Error> {
        let (nonce, epoch) = (attempt.0.nonce, attempt.0.epoch);
        write_term(&self.name, nonce, epoch, |hold| self.store.confirm(hold)).await
    }

    /// Publishes `value` (ADR 0068): one conditional write
    /// ([`write_term`] over [`ClaimRows::proclaim`]).
    async fn proclaim(
        &self,
        attempt: &mut SqlAttempt<S>,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        let (nonce, epoch, value) = (attempt.0.nonce, attempt.0.epoch, value.as_str());
        write_term(&self.name, nonce, epoch, |hold| {
            self.store.proclaim(hold, value)
        })
        .await
    }

    /// Releases the row, conditional on this attempt's nonce
    /// ([`ClaimRows::release`]); `NotHeld` if it showed another term or
    /// none.
    async fn release(&self, attempt: &mut SqlAttempt<S>) -> Result<(), election_core::Error> {
        let released = self
            .store
            .release(self.name.as_str(), attempt.0.nonce)
            .await
            .map_err(|e| self.core(e))?;
        attempt.0.may_hold = false;
        if released {
            Ok(())
        } else {
            Err(self.not_held())
        }
    }

    fn transfers(&self) -> bool {
        true
    }

    /// Hands the row to `successor` (ADR 0112): rewrites it, conditional on
    /// this attempt's nonce and won epoch, as held by the handover
    /// ([`handed_to`](crate::lease_row::handed_to), [`ClaimRows::release_to`])
    /// for `window`; `NotHeld` if it showed another term or none (or this
    /// attempt never won). The handover's row has no nonce: a close after a
    /// failed (unknown) handover releases the term if the handover did not
    /// commit, and leaves the reservation, bounded by its window, if it
    /// did.
    async fn release_to(
        &self,
        attempt: &mut SqlAttempt<S>,
        successor: &Identity,
        window: Duration,
    ) -> Result<(), election_core::Error> {
        let hold = HeldRow::won(self.name.as_str(), attempt.0.nonce, attempt.0.epoch)
            .ok_or_else(|| self.not_held())?;
        let holder = crate::lease_row::handed_to(&self.identity, successor);
        let window_ms = crate::lease_row::window_ms(window);
        let handed = self
            .store
            .release_to(hold, &holder, window_ms)
            .await
            .map_err(|e| self.core(e))?;
        attempt.0.may_hold = false;
        if handed { Ok(()) } else { Err(self.not_held()) }
    }

    /// After a drop, a cancelled or a failed step that may have committed a
    /// claim: releases it in the background ([`ClaimRows::release_later`]).
    fn close(&self, attempt: SqlAttempt<S>, end: End) {
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if attempt.0.may_hold && gives_up {
            self.store.release_later(&self.name, attempt.0);
        }
    }

    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        self.store.leader(&self.name).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;

    use election_core::{Epoch, Error};

    use super::*;
    use crate::keyed::Classed;
    use crate::times::LeaseTimes;

    #[derive(Debug, thiserror::Error)]
    #[error("down")]
    struct Down;

    impl IntoCore for Down {
        fn classify(self) -> Classed<Self> {
            Classed::Unavailable(self)
        }
    }

    /// A lease table in memory (name -> nonce, epoch) whose claim takes a
    /// free row, and the releases a closed attempt asked for.
    #[derive(Debug, Default)]
    struct Rows {
        rows: Mutex<HashMap<String, (i64, i64)>>,
        released_later: Mutex<Vec<(String, i64)>>,
    }

    impl LeaseRows for Rows {
        type Error = Down;
        fn times(&self) -> LeaseTimes {
            LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5))
        }
        async fn renew_one(&self, hold: HeldRow<'_>, _budget: Duration) -> Result<bool, Down> {
            self.confirm(hold).await
        }
        async fn renew_many(&self, _holds: &[HeldRow<'_>]) -> Result<HashSet<String>, Down> {
            Ok(HashSet::new())
        }
        async fn confirm(&self, hold: HeldRow<'_>) -> Result<bool, Down> {
            let rows = self.rows.lock().unwrap();
            Ok(rows.get(hold.name) == Some(&(hold.nonce, hold.epoch)))
        }
        async fn release_many(&self, _holds: &[HeldRow<'_>]) -> Result<(), Down> {
            Ok(())
        }
    }

    impl ClaimRows for Rows {
        const BACKEND: &'static str = "memory";
        type Waiting = ();
        fn waiting(&self) {}
        async fn try_claim(
            claim: &SqlClaim<Self>,
            attempt: &mut AttemptState<()>,
        ) -> Result<Option<Won>, election_core::Error> {
            let mut rows = claim.store().rows.lock().unwrap();
            let name = claim.name().as_str().to_owned();
            if rows.contains_key(&name) {
                return Ok(None);
            }
            attempt.may_hold = true;
            rows.insert(name, (attempt.nonce, 1));
            attempt.epoch = Some(1);
            Ok(Some(Won {
                epoch: Epoch::FIRST,
                valid_until: None,
            }))
        }
        async fn wait(
            _claim: &SqlClaim<Self>,
            _attempt: &mut AttemptState<()>,
            _poll: Duration,
        ) -> Result<(), election_core::Error> {
            Ok(())
        }
        async fn proclaim(&self, hold: HeldRow<'_>, _value: &str) -> Result<bool, Down> {
            self.confirm(hold).await
        }
        async fn release(&self, name: &str, nonce: i64) -> Result<bool, Down> {
            let mut rows = self.rows.lock().unwrap();
            let mine = rows.get(name).is_some_and(|(n, _)| *n == nonce);
            if mine {
                rows.remove(name);
            }
            Ok(mine)
        }
        async fn release_to(
            &self,
            hold: HeldRow<'_>,
            _holder: &str,
            _window_ms: i64,
        ) -> Result<bool, Down> {
            self.release(hold.name, hold.nonce).await
        }
        fn release_later(self: &Arc<Self>, name: &ElectionName, attempt: AttemptState<()>) {
            let mut later = self.released_later.lock().unwrap();
            later.push((name.as_str().to_owned(), attempt.nonce));
        }
        async fn leader(&self, _name: &ElectionName) -> Result<Option<Leader>, Error> {
            Ok(None)
        }
    }

    fn claim(rows: &Arc<Rows>, name: &str) -> SqlClaim<Rows> {
        let name = ElectionName::new(name).expect("name");
        SqlClaim::new(rows.clone(), name, Identity::new("a").expect("identity"))
    }

    fn not_held<T>(r: Result<T, Error>) -> bool {
        matches!(r, Err(Error::NotHeld { .. }))
    }

    /// The shared steps answer from the attempt's won term: a commit-point
    /// check or a value before a win is `NotHeld` (nothing written), after
    /// it `Ok`, and once the row shows another term `NotHeld` again.
    #[tokio::test]
    async fn confirm_and_proclaim_hold_only_for_the_won_term() {
        let rows = Arc::new(Rows::default());
        let c = claim(&rows, "jobs");
        let mut attempt = c.open().await.expect("open");
        let value = LeaderValue::new("v").expect("value");
        assert!(not_held(c.confirm(&mut attempt).await), "never won");
        assert!(not_held(c.proclaim(&mut attempt, &value).await));
        assert!(c.try_claim(&mut attempt).await.expect("claim").is_some());
        c.confirm(&mut attempt).await.expect("won: held");
        c.proclaim(&mut attempt, &value).await.expect("won: held");
        rows.rows.lock().unwrap().insert("jobs".into(), (-1, 2));
        assert!(not_held(c.confirm(&mut attempt).await), "another term");
        assert_eq!(c.backend(), "memory");
    }

    /// A release answers whether the row showed this attempt; after it the
    /// attempt holds nothing, so a close releases nothing more.
    #[tokio::test]
    async fn release_then_close_releases_once() {
        let rows = Arc::new(Rows::default());
        let c = claim(&rows, "jobs");
        let mut attempt = c.open().await.expect("open");
        assert!(c.try_claim(&mut attempt).await.expect("claim").is_some());
        c.release(&mut attempt).await.expect("released");
        assert!(not_held(c.release(&mut attempt).await), "released already");
        c.close(attempt, End::Dropped);
        assert!(rows.released_later.lock().unwrap().is_empty());
    }

    /// A closed attempt that may hold a claim is released in the background
    /// only when it gives up (dropped, cancelled, failed), never after it
    /// resigned, lost or never won.
    #[tokio::test]
    async fn close_releases_in_the_background_only_what_a_given_up_attempt_may_hold() {
        for (end, released) in [
            (End::Dropped, true),
            (End::Cancelled, true),
            (End::Failed, true),
            (End::Resigned, false),
            (End::Lost, false),
            (End::NeverWon, false),
        ] {
            let rows = Arc::new(Rows::default());
            let c = claim(&rows, "jobs");
            let mut attempt = c.open().await.expect("open");
            assert!(c.try_claim(&mut attempt).await.expect("claim").is_some());
            let nonce = attempt.0.nonce;
            c.close(attempt, end);
            let later = rows.released_later.lock().unwrap().clone();
            let expected = if released {
                vec![("jobs".to_owned(), nonce)]
            } else {
                vec![]
            };
            assert_eq!(later, expected, "{end:?}");
        }
        // Never a claim that may commit: nothing to release.
        let rows = Arc::new(Rows::default());
        let c = claim(&rows, "jobs");
        rows.rows.lock().unwrap().insert("jobs".into(), (-1, 1));
        let mut attempt = c.open().await.expect("open");
        assert!(c.try_claim(&mut attempt).await.expect("claim").is_none());
        c.close(attempt, End::Dropped);
        assert!(rows.released_later.lock().unwrap().is_empty());
    }
}
