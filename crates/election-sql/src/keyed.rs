//! The bookkeeping of keyed claims over lease rows, the same for every SQL
//! backend: each held key's term ([`KeyedState::hold`]), each contended
//! key's observation ([`KeyedState::may_claim`]), and the renew, confirm and
//! release steps of the core's [`KeyedClaims`](election_core::KeyedClaims)
//! run over a backend's [`LeaseRows`]. The backend keeps its statements,
//! its claim statement and its wake-ups.

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use election_core::{
    Claimed, ConfigError, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, HeldKey, Identity,
    LossReason, Won,
};
use tokio::time::Instant;

use crate::heartbeat::{Heartbeat, HeartbeatBook};
use crate::lease_row::{Asked, Found, Observed, may_claim};
use crate::times::LeaseTimes;

/// A lease row this process holds, as its conditional writes name it: the
/// key, and the nonce and epoch of the attempt that won it, as stored. A
/// renewal, confirmation or release applies only while the row still shows
/// this term.
///
/// ```
/// use election_sql::HeldRow;
///
/// let hold = HeldRow { name: "shard-1", nonce: 42, epoch: 7 };
/// assert_eq!(hold.epoch, 7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldRow<'a> {
    /// The key (election name).
    pub name: &'a str,
    /// The nonce of the attempt that won the term.
    pub nonce: i64,
    /// The term's epoch, as stored.
    pub epoch: i64,
}

impl<'a> HeldRow<'a> {
    /// The row `name` as the attempt with `nonce` won it in `epoch`, or
    /// `None` if that attempt never won (no epoch): it holds nothing, so a
    /// check or a write on its behalf is answered "not held".
    ///
    /// ```
    /// use election_sql::HeldRow;
    ///
    /// assert_eq!(HeldRow::won("jobs", 42, None), None);
    /// let hold = HeldRow::won("jobs", 42, Some(7)).unwrap();
    /// assert_eq!((hold.name, hold.nonce, hold.epoch), ("jobs", 42, 7));
    /// ```
    pub fn won(name: &'a str, nonce: i64, epoch: Option<i64>) -> Option<Self> {
        epoch.map(|epoch| HeldRow { name, nonce, epoch })
    }
}

/// A backend's error as the core groups it, by what the caller should do
/// ([`IntoCore::classify`]).
#[derive(Debug)]
pub enum Classed<E> {
    /// A configuration error as such: the core's `Config` with it.
    Config(ConfigError),
    /// A database that cannot serve at all as configured (read-only, a
    /// schema too new, a file replaced): the core's `Config`, which no
    /// retry fixes.
    Location(E),
    /// A row that breaks the protocol's invariants: the core's `Corrupt`.
    Corrupt(E),
    /// A write whose outcome is not known: the core's `OutcomeUnknown`.
    OutcomeUnknown(E),
    /// Anything else: the core's `Unavailable` (retry later).
    Unavailable(E),
}

/// A backend's error, as the core's error about one name: the backend
/// classifies its variants ([`classify`](Self::classify)), the mapping is
/// the same for every SQL backend ([`into_core`](Self::into_core)).
pub trait IntoCore: std::error::Error + Send + Sync + Sized + 'static {
    /// Which group of the core's error this is.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// // A backend maps each of its variants to a group:
    /// assert!(matches!(Down.classify(), Classed::Unavailable(Down)));
    /// # Ok(()) }
    /// ```
    fn classify(self) -> Classed<Self>;

    /// `self`, about `name`.
    ///
    /// ```
    /// use election_core::{ConfigError, ElectionName};
    /// use election_sql::{Classed, IntoCore};
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("the server is down")]
    /// struct Down;
    /// impl IntoCore for Down {
    ///     fn classify(self) -> Classed<Self> {
    ///         Classed::Unavailable(self)
    ///     }
    /// }
    /// # fn main() -> Result<(), ConfigError> {
    /// let core = Down.into_core(&ElectionName::new("jobs")?);
    /// assert!(matches!(core, election_core::Error::Unavailable { .. }));
    /// # Ok(()) }
    /// ```
    fn into_core(self, name: &ElectionName) -> election_core::Error {
        use election_core::Error as E;
        match self.classify() {
            Classed::Config(c) => E::Config(c),
            Classed::Location(e) => E::Config(ConfigError::Location {
                reason: e.to_string(),
                source: Some(Arc::new(e)),
            }),
            Classed::Corrupt(e) => E::corrupt(name, e),
            Classed::OutcomeUnknown(e) => E::outcome_unknown(name, e),
            Classed::Unavailable(e) => E::unavailable(name, e),
        }
    }
}

/// Implements [`IntoCore`] for a SQL backend's error enum `$error`, the
/// same way for every SQL backend: `Config(ConfigError)` is the core's
/// `Config` as such; the variants `location` lists (a database that cannot
/// serve as configured) are [`Classed::Location`]; `CorruptRow { .. }` is
/// [`Classed::Corrupt`]; `OutcomeUnknown { .. }` is
/// [`Classed::OutcomeUnknown`]; every other variant is
/// [`Classed::Unavailable`] (retry later). The enum must have those three
/// variants.
///
/// ```
/// use election_core::{ConfigError, ElectionName};
/// use election_sql::IntoCore;
///
/// #[derive(Debug, thiserror::Error)]
/// enum Error {
///     #[error(transparent)]
///     Config(#[from] ConfigError),
///     #[error("read-only")]
///     ReadOnly,
///     #[error("corrupt row of {name}")]
///     CorruptRow { name: String },
///     #[error("outcome unknown")]
///     OutcomeUnknown { after: std::time::Duration },
///     #[error("busy")]
///     Busy,
/// }
/// election_sql::impl_into_core!(Error { location: Error::ReadOnly });
///
/// # fn main() -> Result<(), ConfigError> {
/// let name = ElectionName::new("jobs")?;
/// use election_core::Error as Core;
/// assert!(matches!(Error::ReadOnly.into_core(&name), Core::Config(ConfigError::Location { .. })));
/// assert!(matches!(Error::CorruptRow { name: "jobs".into() }.into_core(&name), Core::Corrupt { .. }));
/// let unknown = Error::OutcomeUnknown { after: std::time::Duration::from_secs(1) };
/// assert!(matches!(unknown.into_core(&name), Core::OutcomeUnknown { .. }));
/// assert!(matches!(Error::Busy.into_core(&name), Core::Unavailable { .. }));
/// # Ok(()) }
/// ```
#[macro_export]
macro_rules! impl_into_core {
    ($error:ident { location: $location:pat $(,)? }) => {
        /// The core's group of each error (ADR 0052: the mapping is shared).
        impl $crate::IntoCore for $error {
            fn classify(self) -> $crate::Classed<Self> {
                match self {
                    $error::Config(c) => $crate::Classed::Config(c),
                    e @ ($location) => $crate::Classed::Location(e),
                    e @ $error::CorruptRow { .. } => $crate::Classed::Corrupt(e),
                    e @ $error::OutcomeUnknown { .. } => $crate::Classed::OutcomeUnknown(e),
                    e => $crate::Classed::Unavailable(e),
                }
            }
        }
    };
}

/// The lease-row statements of a SQL backend that the shared steps run
/// (ADR 0052): each backend implements them over its own statements and
/// driver.
pub trait LeaseRows: Send + Sync {
    /// The backend's error.
    type Error: IntoCore + Display + Send;

    /// The TTL and renewal interval of these leases.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// assert_eq!(rows.times().validity(), Duration::from_millis(13_500));
    /// # Ok(()) }
    /// ```
    fn times(&self) -> LeaseTimes;

    /// The loss detail of a term whose row shows another term or none.
    const REFUSED: &'static str = "the lease row shows another term or none";

    /// `Err(detail)` when the store these rows were read from is no longer
    /// the one at its place (e.g. a database file deleted or replaced):
    /// every term over it is lost at once, nothing is renewed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// assert!(rows.in_place().is_ok()); // by default: always in place
    /// # Ok(()) }
    /// ```
    fn in_place(&self) -> Result<(), String> {
        Ok(())
    }

    /// One conditional renewal of the term `hold`, given at most `budget`:
    /// `Ok(false)` if its row shows another term or none.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let term = HeldRow { name: "shard-1", nonce: 42, epoch: first };
    /// assert!(rows.renew_one(term, Duration::from_secs(1)).await.is_ok_and(|renewed| renewed));
    /// # Ok(()) }
    /// ```
    fn renew_one(
        &self,
        hold: HeldRow<'_>,
        budget: Duration,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// [`renew_one`](Self::renew_one) of a single election's term (its
    /// renewal task's, not a lease set's), which also reads the transfer
    /// request stored beside the term (ADR 0112), if any: `Ok(None)` if
    /// the row shows another term or none, `Ok(Some(asked))` once renewed.
    /// By default (a backend without requests): `renew_one`, and no
    /// request.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let term = HeldRow { name: "shard-1", nonce: 42, epoch: first };
    /// let renewed = rows.renew_asked(term, Duration::from_secs(1)).await.map_err(|e| e.into_core(&key))?;
    /// assert_eq!(renewed, Some(None)); // renewed; nobody asked
    /// # Ok(()) }
    /// ```
    fn renew_asked(
        &self,
        hold: HeldRow<'_>,
        budget: Duration,
    ) -> impl Future<Output = Result<Option<Option<Asked>>, Self::Error>> + Send {
        async move { Ok(self.renew_one(hold, budget).await?.then_some(None)) }
    }

    /// Renews every lease of `holds` in one write, each only while its row
    /// still shows its nonce and epoch: the names renewed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let holds = [HeldRow { name: "shard-1", nonce: 42, epoch: first }, HeldRow { name: "shard-2", nonce: 7, epoch: 3 }];
    /// let renewed = rows.renew_many(&holds).await.map_err(|e| e.into_core(&key))?;
    /// assert!(renewed.contains("shard-1") && !renewed.contains("shard-2"));
    /// # Ok(()) }
    /// ```
    fn renew_many(
        &self,
        holds: &[HeldRow<'_>],
    ) -> impl Future<Output = Result<HashSet<String>, Self::Error>> + Send;

    /// The commit-point check of one term: one conditional renewal of its
    /// row. `Ok(false)`: the row shows another term or none.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let stale = HeldRow { name: "shard-1", nonce: 41, epoch: first };
    /// assert!(!rows.confirm(stale).await.map_err(|e| e.into_core(&key))?); // another term
    /// # Ok(()) }
    /// ```
    fn confirm(&self, hold: HeldRow<'_>) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Releases every lease of `holds` in one write, each only while its row
    /// still shows its nonce.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// rows.release_many(&[HeldRow { name: "shard-1", nonce: 42, epoch: first }]).await.map_err(|e| e.into_core(&key))?;
    /// assert!(rows.0.lock().unwrap().is_empty());
    /// # Ok(()) }
    /// ```
    fn release_many(
        &self,
        holds: &[HeldRow<'_>],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// [`renew_many`](Self::renew_many) for a lease set whose heartbeat is
    /// `heartbeat` (ADR 0110): in the same transaction it bumps the heartbeat (a
    /// missing one is written from a random version) and lists every heartbeat
    /// as the transaction saw it. By default (a backend without heartbeats):
    /// `renew_many`, and no heartbeats.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let holds = [HeldRow { name: "shard-1", nonce: 42, epoch: first }];
    /// let (renewed, heartbeats) = rows.renew_with_heartbeat(&holds, state.heartbeat()).await.map_err(|e| e.into_core(&key))?;
    /// assert!(renewed.contains("shard-1") && heartbeats.is_empty()); // these rows keep no heartbeats
    /// # Ok(()) }
    /// ```
    fn renew_with_heartbeat(
        &self,
        holds: &[HeldRow<'_>],
        heartbeat: i64,
    ) -> impl Future<Output = Result<(HashSet<String>, Vec<Heartbeat>), Self::Error>> + Send {
        let _ = heartbeat;
        async move { Ok((self.renew_many(holds).await?, Vec::new())) }
    }

    /// Deletes the heartbeat `heartbeat` of a lease set that closed (ADR 0110), and
    /// heartbeats no set has bumped for a day (sets that crashed). By default:
    /// nothing. A row still naming a deleted heartbeat is taken over by the
    /// per-row rule.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// rows.stop_heartbeat(state.heartbeat()).await.map_err(|e| e.into_core(&key))?;
    /// # Ok(()) }
    /// ```
    fn stop_heartbeat(
        &self,
        heartbeat: i64,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = heartbeat;
        async { Ok(()) }
    }

    /// The monotonic instant now, on the clock these rows' lease decisions
    /// read (a test's clock where one was given). By default: tokio's.
    ///
    /// ```
    /// # use election_sql::LeaseRows;
    /// # use election_sql::doc_support::Rows;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let rows = Rows::default();
    /// assert!(rows.now() <= tokio::time::Instant::now());
    /// # }
    /// ```
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// What a claim of a contended key rests on ([`KeyedState::may_claim_basis`]).
///
/// ```
/// use election_sql::Basis;
///
/// let basis = Basis::Heartbeat { version: 4 };
/// assert_ne!(basis, Basis::AsRead);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The row as read: free, never held, or seen unchanged for a full TTL
    /// ([`may_claim`]). The claim is conditional on the row as read.
    AsRead,
    /// The holder's heartbeat seen at `version` for a full TTL (ADR 0110). The
    /// claim is conditional on the row as read *and* on the heartbeat still at
    /// `version`.
    Heartbeat {
        /// The version the heartbeat must still show.
        version: i64,
    },
}

/// One key's answer to a claim.
pub type Answer = Result<Claimed, election_core::Error>;

/// `error`, about key `name` (a batch's failure concerns every key of it).
///
/// ```
/// use election_core::{ElectionName, Error};
/// use election_sql::for_key;
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let (a, b) = (ElectionName::new("a")?, ElectionName::new("b")?);
/// let batch = Error::NotHeld { name: a };
/// assert!(matches!(for_key(&batch, &b), Error::NotHeld { .. }));
/// # Ok(()) }
/// ```
pub fn for_key(error: &election_core::Error, name: &ElectionName) -> election_core::Error {
    use election_core::Error as E;
    match error.clone() {
        E::Unavailable { source, .. } => E::Unavailable {
            name: name.clone(),
            source,
        },
        E::OutcomeUnknown { source, .. } => E::OutcomeUnknown {
            name: name.clone(),
            source,
        },
        E::Corrupt { source, .. } => E::Corrupt {
            name: name.clone(),
            source,
        },
        other => other,
    }
}

/// `error` as the answer of every key of `keys` (about each of them).
///
/// ```
/// use election_core::{ConfigError, ElectionName};
/// use election_sql::failed_all;
/// # use election_sql::doc_support::Down; // the server is down
///
/// # fn main() -> Result<(), ConfigError> {
/// let keys = [ElectionName::new("a")?, ElectionName::new("b")?];
/// assert!(failed_all(Down, &keys).iter().all(Result::is_err));
/// # Ok(()) }
/// ```
pub fn failed_all<E: IntoCore>(error: E, keys: &[ElectionName]) -> Vec<Answer> {
    let Some(first) = keys.first() else {
        return Vec::new();
    };
    let error = error.into_core(first);
    keys.iter().map(|key| Err(for_key(&error, key))).collect()
}

/// `error` as the answer of the keys at `at` (indices in `keys`) in
/// `answers`: a claim statement that failed for all it covered.
///
/// ```
/// # use std::time::Duration;
/// # use election_core::{ElectionName, Epoch, Identity};
/// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
/// # use election_sql::doc_support::{Down, Rows, win};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let rows = Rows::default();
/// # let state = KeyedState::new(Identity::new("node-a")?);
/// # let key = ElectionName::new("shard-1")?;
/// # let first = Epoch::FIRST.get() as i64;
/// use election_sql::fail_each;
/// let keys = [ElectionName::new("a")?, ElectionName::new("b")?];
/// let held_by_none = || Ok(election_core::Claimed::HeldBy(None));
/// let mut answers = vec![held_by_none(), held_by_none()];
/// fail_each(Down, &keys, &[1], &mut answers); // the claim statement covered "b" only
/// assert!(answers[0].is_ok() && answers[1].is_err());
/// # Ok(()) }
/// ```
pub fn fail_each<E: IntoCore>(
    error: E,
    keys: &[ElectionName],
    at: &[usize],
    answers: &mut [Answer],
) {
    let Some(&first) = at.first() else {
        return;
    };
    let error = error.into_core(&keys[first]);
    for &i in at {
        answers[i] = Err(for_key(&error, &keys[i]));
    }
}

/// Checks a lease set's poll interval: between 1 ms and 1 h.
///
/// # Errors
///
/// [`ConfigError::BadSetting`] for `poll_interval` outside that range.
///
/// ```
/// use std::time::Duration;
/// use election_sql::check_poll_interval;
///
/// assert!(check_poll_interval(Duration::from_millis(500)).is_ok());
/// assert!(check_poll_interval(Duration::ZERO).is_err());
/// ```
pub fn check_poll_interval(poll_interval: Duration) -> Result<Duration, ConfigError> {
    if poll_interval < Duration::from_millis(1) || poll_interval > Duration::from_secs(3600) {
        return Err(ConfigError::BadSetting {
            setting: "poll_interval",
            reason: format!("{poll_interval:?} is not between 1ms and 1h"),
        });
    }
    Ok(poll_interval)
}

/// The identity of a lease set about to start: checked, and refused
/// outside a tokio runtime (the set's loop is spawned on it).
///
/// # Errors
///
/// [`ConfigError`] for an invalid identity or no runtime.
///
/// ```
/// use election_sql::lease_set_identity;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // Inside a tokio runtime:
/// assert!(lease_set_identity("node-a").is_ok());
/// assert!(lease_set_identity("").is_err()); // not an identity
/// # }
/// ```
pub fn lease_set_identity(identity: &str) -> Result<Identity, ConfigError> {
    let identity = Identity::new(identity)?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(ConfigError::BadSetting {
            setting: "runtime",
            reason: "a lease set must be started inside a tokio runtime".into(),
        });
    }
    Ok(identity)
}

/// What a lease set of a SQL backend keeps between the core's calls: its
/// identity and poll interval, the `(nonce, epoch)` of each held key's
/// term, and what it has seen of each key held elsewhere (for the full TTL
/// without renewal a takeover needs, [`may_claim`]).
#[derive(Debug)]
pub struct KeyedState {
    identity: Identity,
    poll_interval: Duration,
    terms: Mutex<HashMap<ElectionName, (i64, i64)>>,
    observed: Mutex<HashMap<ElectionName, Observed>>,
    /// This set's heartbeat (ADR 0110): random, positive.
    heartbeat: i64,
    /// What this set has seen of every heartbeat.
    heartbeats: Mutex<HeartbeatBook>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new set's heartbeat: random, positive (never 0).
fn new_heartbeat() -> i64 {
    let nonce = election_core::attempt_nonce() & (i64::MAX as u64);
    nonce.max(1).cast_signed()
}

impl KeyedState {
    /// An empty state of `identity`, polling every
    /// [`DEFAULT_POLL_INTERVAL`].
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::KeyedState;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let state = KeyedState::new(Identity::new("node-a")?);
    /// assert_eq!(state.identity().as_str(), "node-a");
    /// # Ok(()) }
    /// ```
    pub fn new(identity: Identity) -> Self {
        KeyedState {
            identity,
            poll_interval: DEFAULT_POLL_INTERVAL,
            terms: Mutex::new(HashMap::new()),
            observed: Mutex::new(HashMap::new()),
            heartbeat: new_heartbeat(),
            heartbeats: Mutex::new(HeartbeatBook::default()),
        }
    }

    /// This set's heartbeat (ADR 0110): the id its renewals write into the
    /// rows they renew, and bump.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sql::KeyedState;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let a = KeyedState::new(Identity::new("node-a")?);
    /// let b = KeyedState::new(Identity::new("node-a")?);
    /// assert!(a.heartbeat() > 0 && a.heartbeat() != b.heartbeat()); // one per set
    /// # Ok(()) }
    /// ```
    pub fn heartbeat(&self) -> i64 {
        self.heartbeat
    }

    /// Takes in a listing of every heartbeat read before `now` ([`HeartbeatBook::see`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{ElectionName, Identity};
    /// use election_sql::{Basis, KeyedState, Heartbeat};
    /// use election_sql::lease_row::Found;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let state = KeyedState::new(Identity::new("node-a")?);
    /// let key = ElectionName::new("shard-1")?;
    /// let (t0, ttl) = (tokio::time::Instant::now(), Duration::from_secs(3));
    /// let heartbeat = Heartbeat { id: 17, version: 4 };
    /// state.see_heartbeats([heartbeat], t0);
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 3_000 };
    /// // The row is seen for the first time a TTL later: its heartbeat was seen all along.
    /// assert_eq!(state.may_claim_basis(&key, &found, Some(heartbeat), ttl, t0 + ttl), Some(Basis::Heartbeat { version: 4 }));
    /// # Ok(()) }
    /// ```
    pub fn see_heartbeats(&self, listed: impl IntoIterator<Item = Heartbeat>, now: Instant) {
        lock(&self.heartbeats).see(listed, now);
    }

    /// Whether `name`, found as `found` with its term's `heartbeat` (as read
    /// with the row), may be claimed now, and on what: the per-row rule
    /// first ([`may_claim`](Self::may_claim)), else the heartbeat's
    /// ([`HeartbeatBook::may_take`]). `None`: not yet.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{ElectionName, Identity};
    /// use election_sql::{Basis, KeyedState, Heartbeat};
    /// use election_sql::lease_row::Found;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let state = KeyedState::new(Identity::new("node-a")?);
    /// let key = ElectionName::new("shard-1")?;
    /// let (t0, ttl) = (tokio::time::Instant::now(), Duration::from_secs(3));
    /// assert_eq!(state.may_claim_basis(&key, &Found::Vacant, None, ttl, t0), Some(Basis::AsRead));
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 3_000 };
    /// assert_eq!(state.may_claim_basis(&key, &found, None, ttl, t0), None); // first sight, no heartbeat seen
    /// # Ok(()) }
    /// ```
    pub fn may_claim_basis(
        &self,
        name: &ElectionName,
        found: &Found,
        heartbeat: Option<Heartbeat>,
        ttl: Duration,
        now: Instant,
    ) -> Option<Basis> {
        if self.may_claim(name, found, ttl, now) {
            return Some(Basis::AsRead);
        }
        lock(&self.heartbeats)
            .may_take(found, heartbeat, ttl, now)
            .map(|version| Basis::Heartbeat { version })
    }

    /// The set's identity.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// assert_eq!(state.identity().as_str(), "node-a");
    /// # Ok(()) }
    /// ```
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// How often the keys not held are looked at.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// assert_eq!(state.poll_interval(), election_core::DEFAULT_POLL_INTERVAL);
    /// # Ok(()) }
    /// ```
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// Sets the poll interval ([`check_poll_interval`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::BadSetting`] outside 1 ms ..= 1 h.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// let mut state = state;
    /// state.set_poll_interval(Duration::from_millis(250))?;
    /// assert!(state.set_poll_interval(Duration::from_secs(7200)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn set_poll_interval(&mut self, poll_interval: Duration) -> Result<(), ConfigError> {
        self.poll_interval = check_poll_interval(poll_interval)?;
        Ok(())
    }

    /// The term this set holds `key` in, if its epoch is `epoch`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// win(&state, &key);
    /// assert_eq!(state.hold(&key, Epoch::FIRST), Some(HeldRow { name: "shard-1", nonce: 42, epoch: first }));
    /// assert_eq!(state.hold(&key, Epoch::new(Epoch::FIRST.get() + 1).unwrap()), None); // not that term
    /// # Ok(()) }
    /// ```
    pub fn hold<'k>(&self, key: &'k ElectionName, epoch: Epoch) -> Option<HeldRow<'k>> {
        let (nonce, stored) = lock(&self.terms).get(key).copied()?;
        (u64::try_from(stored).ok() == Some(epoch.get())).then_some(HeldRow {
            name: key.as_str(),
            nonce,
            epoch: stored,
        })
    }

    /// The terms this set holds, a copy: `(nonce, epoch)` per key.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// win(&state, &key);
    /// assert_eq!(state.terms().get(&key), Some(&(42, first)));
    /// # Ok(()) }
    /// ```
    pub fn terms(&self) -> HashMap<ElectionName, (i64, i64)> {
        lock(&self.terms).clone()
    }

    /// Forgets the term of `name` if it is still `(nonce, epoch)` (a newer
    /// one is kept).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// win(&state, &key);
    /// state.forget(&key, 41, first); // another attempt's term: kept
    /// assert!(state.hold(&key, Epoch::FIRST).is_some());
    /// state.forget(&key, 42, first);
    /// assert!(state.hold(&key, Epoch::FIRST).is_none());
    /// # Ok(()) }
    /// ```
    pub fn forget(&self, name: &ElectionName, nonce: i64, epoch: i64) {
        let mut terms = lock(&self.terms);
        if terms.get(name).copied() == Some((nonce, epoch)) {
            terms.remove(name);
        }
    }

    /// Whether `name` may be claimed now, given what was `found` of it
    /// ([`may_claim`] over this set's observation of it).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// use election_sql::lease_row::Found;
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 15_000 };
    /// let (ttl, t0) = (Duration::from_secs(15), tokio::time::Instant::now());
    /// assert!(!state.may_claim(&key, &found, ttl, t0)); // first sight
    /// assert!(state.may_claim(&key, &found, ttl, t0 + ttl)); // unchanged for a full TTL
    /// # Ok(()) }
    /// ```
    pub fn may_claim(
        &self,
        name: &ElectionName,
        found: &Found,
        ttl: Duration,
        now: Instant,
    ) -> bool {
        let mut observed = lock(&self.observed);
        let mut before = observed.remove(name);
        let may = may_claim(&mut before, found, ttl, now);
        if let Some(o) = before {
            observed.insert(name.clone(), o);
        }
        may
    }

    /// A claim statement covered `name` (won or not): what was seen of it
    /// is forgotten, it is looked at afresh.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// use election_sql::lease_row::Found;
    /// let found = Found::Held { holder: "node-b".into(), epoch: 3, version: 9, ttl_ms: 15_000 };
    /// let (ttl, t0) = (Duration::from_secs(15), tokio::time::Instant::now());
    /// assert!(!state.may_claim(&key, &found, ttl, t0));
    /// state.unobserve(&key); // the wait starts again
    /// assert!(!state.may_claim(&key, &found, ttl, t0 + ttl));
    /// # Ok(()) }
    /// ```
    pub fn unobserve(&self, name: &ElectionName) {
        lock(&self.observed).remove(name);
    }

    /// Records that this set won `name` in term `epoch` (stored as
    /// `stored`) with the attempt `nonce`, valid until `valid_until`: the
    /// answer `Won`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{HeldRow, KeyedState};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// # // `state` wins `key` in the first term with nonce 42.
    /// # let win = |state: &KeyedState, key: &ElectionName| {
    /// #     state.won(key, 42, first, Epoch::FIRST, tokio::time::Instant::now());
    /// # };
    /// let until = tokio::time::Instant::now() + Duration::from_millis(13_500);
    /// let answer = state.won(&key, 42, first, Epoch::FIRST, until);
    /// assert!(matches!(answer, election_core::Claimed::Won(_)));
    /// # Ok(()) }
    /// ```
    pub fn won(
        &self,
        name: &ElectionName,
        nonce: i64,
        stored: i64,
        epoch: Epoch,
        valid_until: Instant,
    ) -> Claimed {
        lock(&self.terms).insert(name.clone(), (nonce, stored));
        tracing::info!(%name, epoch = stored, identity = %self.identity, "elected");
        Claimed::Won(Won {
            epoch,
            valid_until: Some(valid_until),
        })
    }

    /// Renew many over `rows`: one write renews every key of `held` this
    /// set holds the term of. Refused (lost at once): every key whose row
    /// shows another term or none ([`LeaseRows::REFUSED`]), and every key
    /// when the store is no longer in place ([`LeaseRows::in_place`]).
    ///
    /// # Errors
    ///
    /// The write's error, about the first key.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// let refused = state.renew(&rows, &[(key.clone(), Epoch::FIRST)]).await?;
    /// assert!(refused.is_empty()); // renewed
    /// rows.0.lock().unwrap().clear(); // the row deleted by hand
    /// let refused = state.renew(&rows, &[(key.clone(), Epoch::FIRST)]).await?;
    /// assert_eq!(refused.len(), 1); // lost at once
    /// # Ok(()) }
    /// ```
    pub async fn renew<R: LeaseRows>(
        &self,
        rows: &R,
        held: &[HeldKey],
    ) -> Result<Vec<(ElectionName, LossReason)>, election_core::Error> {
        if let Err(detail) = rows.in_place() {
            return Ok(held
                .iter()
                .map(|(name, _)| {
                    let detail = detail.clone();
                    (name.clone(), LossReason::Revoked { detail })
                })
                .collect());
        }
        let Some((first, _)) = held.first() else {
            return Ok(Vec::new());
        };
        let terms: Vec<Option<HeldRow<'_>>> = held
            .iter()
            .map(|(name, epoch)| self.hold(name, *epoch))
            .collect();
        let holds: Vec<HeldRow<'_>> = terms.iter().flatten().copied().collect();
        let (renewed, heartbeats) = rows
            .renew_with_heartbeat(&holds, self.heartbeat)
            .await
            .map_err(|e| e.into_core(first))?;
        // Read before now: a first sight counted from here is late, never
        // early.
        self.see_heartbeats(heartbeats, rows.now());
        let mut refused = Vec::new();
        for ((name, _), term) in held.iter().zip(&terms) {
            if term.is_some_and(|t| renewed.contains(t.name)) {
                continue;
            }
            if let Some(t) = term {
                self.forget(name, t.nonce, t.epoch);
            }
            tracing::info!(%name, identity = %self.identity, "lost: the lease row shows another term");
            refused.push((
                name.clone(),
                LossReason::Revoked {
                    detail: R::REFUSED.to_owned(),
                },
            ));
        }
        Ok(refused)
    }

    /// Confirm one over `rows`: one conditional renewal of `key`'s row.
    ///
    /// # Errors
    ///
    /// [`election_core::Error::NotHeld`] if this set holds no such term or
    /// the row shows another; the backend's error (about `key`) if it
    /// cannot answer.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// state.confirm(&rows, &key, Epoch::FIRST).await?; // the commit point
    /// assert!(state.confirm(&rows, &key, Epoch::new(Epoch::FIRST.get() + 1).unwrap()).await.is_err()); // not held
    /// # Ok(()) }
    /// ```
    pub async fn confirm<R: LeaseRows>(
        &self,
        rows: &R,
        key: &ElectionName,
        epoch: Epoch,
    ) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld { name: key.clone() };
        let Some(term) = self.hold(key, epoch) else {
            return Err(not_held());
        };
        match rows.confirm(term).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.forget(key, term.nonce, term.epoch);
                Err(not_held())
            }
            Err(e) => Err(e.into_core(key)),
        }
    }

    /// Release many over `rows`: forgets the terms of `held` and releases
    /// their rows in one write, given at most the lease's validity; if that
    /// fails the rows age out after the TTL.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{ElectionName, Epoch, Identity};
    /// # use election_sql::{Classed, HeldRow, IntoCore, KeyedState, LeaseRows, LeaseTimes};
    /// # use election_sql::doc_support::{Down, Rows, win};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rows = Rows::default();
    /// # let state = KeyedState::new(Identity::new("node-a")?);
    /// # let key = ElectionName::new("shard-1")?;
    /// # let first = Epoch::FIRST.get() as i64;
    /// win(&state, &rows, &key);
    /// state.release(&rows, &[(key.clone(), Epoch::FIRST)]).await;
    /// assert!(state.terms().is_empty() && rows.0.lock().unwrap().is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn release<R: LeaseRows>(&self, rows: &R, held: &[HeldKey]) {
        let batch: Vec<HeldRow<'_>> = {
            let mut terms = lock(&self.terms);
            held.iter()
                .filter_map(|(name, _)| {
                    let (nonce, epoch) = terms.remove(name)?;
                    Some(HeldRow {
                        name: name.as_str(),
                        nonce,
                        epoch,
                    })
                })
                .collect()
        };
        if batch.is_empty() {
            return;
        }
        let identity = &self.identity;
        match tokio::time::timeout(rows.times().validity(), rows.release_many(&batch)).await {
            Ok(Ok(())) => tracing::info!(%identity, keys = batch.len(), "resigned"),
            Ok(Err(e)) => {
                tracing::warn!(%identity, error = %e, "release failed; the leases age out after the TTL");
            }
            Err(_) => {
                tracing::warn!(%identity, "release timed out; the leases age out after the TTL");
            }
        }
    }
}
