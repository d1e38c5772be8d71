//! [`Backend`]: any of the four backends, by static dispatch.

use std::time::Duration;

use election_core::{
    Claim, ConfigError, ElectionName, End, Epoch, Error as CoreError, Identity, Leader, LeaseSet,
    PerKeyClaims, TermReporter, WatchGuard, Won, WriteToken,
};
use election_file::{FileClaim, FileElection};
use election_nats::{NatsClaim, NatsElection, NatsKeyedClaims};
use election_postgres::{PostgresClaim, PostgresElection, PostgresKeyedClaims};
use election_sqlite::{SqliteClaim, SqliteElection, SqliteKeyedClaims};
use futures::Stream;

use crate::Error;

/// An open backend: one of the four façades. It implements
/// [`election_core::Election`], so a tool is written once for all four;
/// match on it for what only one backend has (e.g.
/// [`FileElection::repair_epoch`], [`NatsElection::holder`]).
#[derive(Clone, Debug)]
pub enum Backend {
    /// The file backend.
    File(FileElection),
    /// The SQLite backend.
    Sqlite(SqliteElection),
    /// The NATS backend.
    Nats(NatsElection),
    /// The PostgreSQL backend.
    Postgres(PostgresElection),
}

/// The claim of a candidate on any [`Backend`].
#[derive(Debug)]
pub enum AnyClaim {
    /// On the file backend.
    File(FileClaim),
    /// On the SQLite backend.
    Sqlite(SqliteClaim),
    /// On the NATS backend.
    Nats(NatsClaim),
    /// On the PostgreSQL backend.
    Postgres(PostgresClaim),
}

/// An attempt of an [`AnyClaim`]: always of the same backend as its claim.
// One per campaign attempt, moved rarely: not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum AnyAttempt {
    /// On the file backend.
    File(<FileClaim as Claim>::Attempt),
    /// On the SQLite backend.
    Sqlite(<SqliteClaim as Claim>::Attempt),
    /// On the NATS backend.
    Nats(<NatsClaim as Claim>::Attempt),
    /// On the PostgreSQL backend.
    Postgres(<PostgresClaim as Claim>::Attempt),
}

impl std::fmt::Debug for AnyAttempt {
    /// The backend only: an attempt's state is the backend's own.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self {
            AnyAttempt::File(_) => "File",
            AnyAttempt::Sqlite(_) => "Sqlite",
            AnyAttempt::Nats(_) => "Nats",
            AnyAttempt::Postgres(_) => "Postgres",
        };
        f.debug_tuple(backend).finish_non_exhaustive()
    }
}

/// A lease set on any [`Backend`].
#[derive(Debug)]
pub enum AnyLeaseSet {
    /// On the file backend.
    File(LeaseSet<PerKeyClaims<FileClaim>>),
    /// On the SQLite backend.
    Sqlite(LeaseSet<SqliteKeyedClaims>),
    /// On the NATS backend.
    Nats(LeaseSet<NatsKeyedClaims>),
    /// On the PostgreSQL backend.
    Postgres(LeaseSet<PostgresKeyedClaims>),
}

/// Runs `$body` with `$c` bound to the claim (and `$a` to the attempt) of
/// whichever backend `$claim` is on.
macro_rules! both {
    ($claim:expr, $attempt:expr, |$c:ident, $a:ident| $body:expr) => {
        match ($claim, $attempt) {
            (AnyClaim::File($c), AnyAttempt::File($a)) => $body,
            (AnyClaim::Sqlite($c), AnyAttempt::Sqlite($a)) => $body,
            (AnyClaim::Nats($c), AnyAttempt::Nats($a)) => $body,
            (AnyClaim::Postgres($c), AnyAttempt::Postgres($a)) => $body,
            (claim, _) => Err(mismatch(claim.name())),
        }
    };
}

macro_rules! each {
    ($value:expr, $ty:ident, |$v:ident| $body:expr) => {
        match $value {
            $ty::File($v) => $body,
            $ty::Sqlite($v) => $body,
            $ty::Nats($v) => $body,
            $ty::Postgres($v) => $body,
        }
    };
}

/// An attempt handed to a claim of another backend: cannot happen (an
/// attempt comes from its claim's `open`), and is refused, not a panic.
fn mismatch(name: &ElectionName) -> CoreError {
    CoreError::Config(ConfigError::BadSetting {
        setting: "attempt",
        reason: format!("election {name}: an attempt of another backend's claim"),
    })
}

impl Claim for AnyClaim {
    type Attempt = AnyAttempt;

    fn name(&self) -> &ElectionName {
        each!(self, AnyClaim, |c| c.name())
    }

    fn identity(&self) -> &Identity {
        each!(self, AnyClaim, |c| c.identity())
    }

    fn backend(&self) -> &'static str {
        each!(self, AnyClaim, |c| c.backend())
    }

    async fn open(&self) -> Result<AnyAttempt, CoreError> {
        Ok(match self {
            AnyClaim::File(c) => AnyAttempt::File(Claim::open(c).await?),
            AnyClaim::Sqlite(c) => AnyAttempt::Sqlite(Claim::open(c).await?),
            AnyClaim::Nats(c) => AnyAttempt::Nats(Claim::open(c).await?),
            AnyClaim::Postgres(c) => AnyAttempt::Postgres(Claim::open(c).await?),
        })
    }

    async fn try_claim(&self, attempt: &mut AnyAttempt) -> Result<Option<Won>, CoreError> {
        both!(self, attempt, |c, a| Claim::try_claim(c, a).await)
    }

    async fn wait(
        &self,
        attempt: &mut AnyAttempt,
        poll_interval: Duration,
    ) -> Result<(), CoreError> {
        both!(self, attempt, |c, a| Claim::wait(c, a, poll_interval).await)
    }

    fn watch(
        &self,
        attempt: &mut AnyAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, CoreError> {
        both!(self, attempt, |c, a| Claim::watch(c, a, won, reporter))
    }

    async fn confirm(&self, attempt: &mut AnyAttempt) -> Result<(), CoreError> {
        both!(self, attempt, |c, a| Claim::confirm(c, a).await)
    }

    async fn proclaim(
        &self,
        attempt: &mut AnyAttempt,
        value: &election_core::LeaderValue,
    ) -> Result<(), CoreError> {
        both!(self, attempt, |c, a| Claim::proclaim(c, a, value).await)
    }

    async fn release(&self, attempt: &mut AnyAttempt) -> Result<(), CoreError> {
        both!(self, attempt, |c, a| Claim::release(c, a).await)
    }

    fn close(&self, attempt: AnyAttempt, end: End) {
        match (self, attempt) {
            (AnyClaim::File(c), AnyAttempt::File(a)) => Claim::close(c, a, end),
            (AnyClaim::Sqlite(c), AnyAttempt::Sqlite(a)) => Claim::close(c, a, end),
            (AnyClaim::Nats(c), AnyAttempt::Nats(a)) => Claim::close(c, a, end),
            (AnyClaim::Postgres(c), AnyAttempt::Postgres(a)) => Claim::close(c, a, end),
            // Cannot happen (see `mismatch`); the attempt is dropped.
            _ => {}
        }
    }

    async fn leader(&self) -> Result<Option<Leader>, CoreError> {
        each!(self, AnyClaim, |c| Claim::leader(c).await)
    }
}

impl AnyLeaseSet {
    /// This process's identity in every key's election.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// assert_eq!(set.identity().as_str(), "node-a");
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn identity(&self) -> &Identity {
        each!(self, AnyLeaseSet, |s| s.identity())
    }

    /// [`LeaseSet::held`]: whether this process holds `key` now (no round
    /// trip; asks about the key if it was not asked before).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// set.ask("shard-7").await?;
    /// if set.held("shard-7") {
    ///     println!("this process writes shard-7");
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn held(&self, key: &str) -> bool {
        each!(self, AnyLeaseSet, |s| s.held(key))
    }

    /// [`LeaseSet::events`]: won, lost and released per key, with the epoch.
    ///
    /// ```
    /// # async fn example(set: election_url::AnyLeaseSet) {
    /// let mut events = set.events();
    /// while let Some(event) = events.next().await {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn events(&self) -> election_core::KeyEvents {
        each!(self, AnyLeaseSet, |s| s.events())
    }

    /// [`LeaseSet::release`]: gives one key back after its running guards.
    ///
    /// Cancel safety and failure model: as [`LeaseSet::release`].
    ///
    /// ```
    /// # async fn example(set: election_url::AnyLeaseSet) -> Result<(), election_core::Error> {
    /// set.release("shard-7").await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, key: &str) -> Result<(), CoreError> {
        each!(self, AnyLeaseSet, |s| s.release(key).await)
    }

    /// [`LeaseSet::epoch`]: the epoch of the held term of `key`, `None`
    /// while not held.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// if set.ask("shard-7").await? {
    ///     let epoch = set.epoch("shard-7");
    ///     println!("shard-7 held in term {epoch:?}");
    ///     assert!(epoch.is_some());
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self, key: &str) -> Option<Epoch> {
        each!(self, AnyLeaseSet, |s| s.epoch(key))
    }

    /// [`LeaseSet::holder`]: who holds `key`, as last seen.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// set.ask("shard-7").await?;
    /// match set.holder("shard-7") {
    ///     Some(leader) => println!("{} holds shard-7 in term {}", leader.identity, leader.epoch),
    ///     None => println!("shard-7 is vacant, as last seen"),
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn holder(&self, key: &str) -> Option<Leader> {
        each!(self, AnyLeaseSet, |s| s.holder(key))
    }

    /// [`LeaseSet::held_keys`]: the keys held now.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// set.ask("shard-1").await?;
    /// set.ask("shard-2").await?;
    /// let mut held: Vec<String> = set.held_keys().iter().map(|k| k.to_string()).collect();
    /// held.sort();
    /// assert_eq!(held, ["shard-1", "shard-2"]);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn held_keys(&self) -> Vec<ElectionName> {
        each!(self, AnyLeaseSet, |s| s.held_keys())
    }

    /// [`LeaseSet::ask`]: asks about `key` and waits for the first answer.
    ///
    /// Cancel safety and failure model: as [`LeaseSet::ask`].
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// if set.ask("shard-7").await? {
    ///     println!("won shard-7");
    /// } else {
    ///     println!("another process holds shard-7; this set keeps asking");
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn ask(&self, key: &str) -> Result<bool, CoreError> {
        each!(self, AnyLeaseSet, |s| s.ask(key).await)
    }

    /// [`LeaseSet::guard`]: runs `write` with a token for `key` after the
    /// commit-point check.
    ///
    /// Cancel safety and failure model: as [`LeaseSet::guard`].
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// set.ask("shard-7").await?;
    /// // Checked at the commit point; the token fences the write.
    /// let written = set
    ///     .guard("shard-7", async |token| format!("{} written in term {}", token.key(), token.epoch()))
    ///     .await?;
    /// println!("{written}");
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn guard<R>(
        &self,
        key: &str,
        write: impl AsyncFnOnce(WriteToken<'_>) -> R,
    ) -> Result<R, CoreError> {
        each!(self, AnyLeaseSet, |s| s.guard(key, write).await)
    }

    /// [`LeaseSet::close`]: gives every key up and stops the set.
    ///
    /// Cancel safety and failure model: as [`LeaseSet::close`].
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// let set = backend.lease_set_polling("node-a", None).await?;
    /// set.ask("shard-7").await?;
    /// set.close().await; // gives shard-7 up: another process can take it
    /// assert!(set.held_keys().is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        each!(self, AnyLeaseSet, |s| s.close().await)
    }
}

impl Backend {
    /// The scheme of the backend: `file`, `sqlite`, `nats` or `postgres`.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::Sqlite(tmp.path().join("app.db"));
    /// let backend = url.open(&Settings::default()).await?;
    /// println!("opened a {} backend", backend.kind());
    /// assert_eq!(backend.kind(), url.scheme());
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::File(_) => "file",
            Backend::Sqlite(_) => "sqlite",
            Backend::Nats(_) => "nats",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// A lease set of `identity`, with `poll` (if given) as the interval
    /// at which keys held elsewhere are tried again: each key's campaign
    /// poll interval on the file backend, the set's poll interval on
    /// SQLite and PostgreSQL; NATS watches its keys and has no such interval (`poll` is
    /// refused there with [`Error::Config`]).
    ///
    /// Must be called inside a tokio runtime. Cancel safety: cancel safe.
    /// Failure model: [`Error::Config`] for an invalid identity or poll
    /// interval, the backend's error when it cannot set the set up.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let url = BackendUrl::Sqlite(tmp.path().join("app.db"));
    /// let backend = url.open(&Settings::default()).await?;
    /// // Keys held elsewhere are tried again every 200 ms:
    /// let set = backend.lease_set_polling("node-a", Some(Duration::from_millis(200))).await?;
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn lease_set_polling(
        &self,
        identity: &str,
        poll: Option<Duration>,
    ) -> Result<AnyLeaseSet, Error> {
        match self {
            Backend::File(e) => {
                let Some(poll) = poll else {
                    return Ok(AnyLeaseSet::File(e.lease_set(identity).await?));
                };
                let id = Identity::new(identity)?;
                let election = e.clone();
                let who = id.clone();
                let claims = PerKeyClaims::new(id, move |key| {
                    election
                        .claim(key.as_str(), who.as_str())
                        .map_err(|e| e.into_core(key))
                })
                .with_backend("file")
                .with_poll_interval(poll)?;
                Ok(AnyLeaseSet::File(LeaseSet::new(claims)))
            }
            Backend::Sqlite(e) => {
                let Some(poll) = poll else {
                    return Ok(AnyLeaseSet::Sqlite(e.lease_set(identity).await?));
                };
                let leases =
                    SqliteKeyedClaims::new(e, Identity::new(identity)?).with_poll_interval(poll)?;
                Ok(AnyLeaseSet::Sqlite(LeaseSet::new(leases)))
            }
            Backend::Postgres(e) => {
                let Some(poll) = poll else {
                    return Ok(AnyLeaseSet::Postgres(e.lease_set(identity).await?));
                };
                let leases = PostgresKeyedClaims::new(e, Identity::new(identity)?)
                    .with_poll_interval(poll)?;
                Ok(AnyLeaseSet::Postgres(LeaseSet::new(leases)))
            }
            Backend::Nats(e) => {
                if poll.is_some() {
                    return Err(ConfigError::BadSetting {
                        setting: "poll",
                        reason: "a NATS lease set watches its keys: it has no poll interval".into(),
                    }
                    .into());
                }
                Ok(AnyLeaseSet::Nats(e.lease_set(identity).await?))
            }
        }
    }
}

/// The lease timing of an open backend whose claim expires (all but the
/// file backend, whose lock is held until it is freed): what a tool needs
/// to bound its own waits by the lease's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseTiming {
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
    /// How often the holder renews.
    pub renew: Duration,
    /// The part of the TTL the holder gives up for safety: it counts its
    /// lease valid for `ttl - margin`.
    pub margin: Duration,
    /// The failover grace a new term waits before it begins (NATS; zero
    /// elsewhere).
    pub grace: Duration,
}

impl LeaseTiming {
    /// How long after the end of the holder's known validity another
    /// candidate can lead at the earliest: the margin, plus the failover
    /// grace. A holder's work that stops within it never runs beside the
    /// next leader's.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::Sqlite(tmp.path().join("app.db")).open(&Settings::default()).await?;
    /// let timing = backend.lease_timing().expect("a lease");
    /// assert_eq!(timing.overlap_bound(), timing.margin); // no grace on SQLite
    /// # Ok(()) }
    /// ```
    pub fn overlap_bound(&self) -> Duration {
        self.margin + self.grace
    }
}

/// A warning about how a backend was opened: it works, but a risk was
/// not accepted by name (a NATS bucket with a single replica).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// What the risk is and how to end it, for a person.
    pub text: String,
    /// The numbers the text names, by name, for a structured log.
    pub values: Vec<(&'static str, u64)>,
}

/// What only some backends have, asked of any: a tool is written once
/// against these (ADR 0100).
impl Backend {
    /// The file a command's process tree may inherit, locked, so that the
    /// claim of election `name` stays recognizably held on this host until
    /// the whole tree is gone, not only the process that won it: the file
    /// backend's lock file, SQLite's same-host lock (ADR 0026). `None` on
    /// the others.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert_eq!(backend.inheritable_lock("jobs"), Some(tmp.path().join("jobs.lock")));
    /// # Ok(()) }
    /// ```
    pub fn inheritable_lock(&self, name: &str) -> Option<std::path::PathBuf> {
        match self {
            Backend::File(e) => Some(e.dir().join(format!("{name}.lock"))),
            Backend::Sqlite(e) => e.host_lock_path(name),
            Backend::Nats(_) | Backend::Postgres(_) => None,
        }
    }

    /// The lease timing, for a backend whose claims expire; `None` for the
    /// file backend's lock.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::Sqlite(tmp.path().join("app.db")).open(&Settings::default()).await?;
    /// let timing = backend.lease_timing().expect("a lease");
    /// assert!(timing.renew < timing.ttl);
    /// # Ok(()) }
    /// ```
    pub fn lease_timing(&self) -> Option<LeaseTiming> {
        match self {
            Backend::File(_) => None,
            Backend::Sqlite(e) => {
                let o = e.options();
                Some(LeaseTiming {
                    ttl: o.ttl(),
                    renew: o.renew_interval(),
                    margin: o.margin(),
                    grace: Duration::ZERO,
                })
            }
            Backend::Postgres(e) => {
                let o = e.options();
                Some(LeaseTiming {
                    ttl: o.ttl(),
                    renew: o.renew_interval(),
                    margin: o.margin(),
                    grace: Duration::ZERO,
                })
            }
            Backend::Nats(e) => {
                let o = e.options();
                Some(LeaseTiming {
                    ttl: o.ttl(),
                    renew: o.renew_every(),
                    margin: o.margin(),
                    grace: o.grace(),
                })
            }
        }
    }

    /// Warnings about how the backend was opened, for a candidate to show
    /// at start: on NATS, a bucket with a single replica not accepted by
    /// name (`?single_replica_ok=1`).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// for w in backend.warnings() {
    ///     eprintln!("warning: {}", w.text);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn warnings(&self) -> Vec<Warning> {
        match self {
            Backend::Nats(e) if e.replicas() < 2 && !e.options().is_single_replica_ok() => {
                vec![Warning {
                    text: "the NATS bucket has a single replica: a host crash or power loss can \
                           lose its last writes, and a later term can then reuse an epoch. Use \
                           ?replicas=3 on a cluster, or a server with `jetstream { \
                           sync_interval: always }`, and say ?single_replica_ok=1 to silence \
                           this"
                        .to_owned(),
                    values: vec![("replicas", e.replicas() as u64)],
                }]
            }
            _ => Vec::new(),
        }
    }

    /// Closes the backend's connections, waiting at most `bound`, after
    /// the last term ended (resigned or lost, its release done or
    /// abandoned), never before. SQLite: the last connection to close
    /// checkpoints the WAL into the database and removes it, so the next
    /// process to open the database does not replay it. PostgreSQL: the
    /// close waits its close grace after the release (ADR 0086), so the
    /// server's processes of these connections end after the successor's
    /// take, not during it. The file and NATS backends have nothing to
    /// close.
    ///
    /// Cancel safety: cancel safe (a pool stays closed). Failure model:
    /// none; a close that takes longer than `bound` is left to the exit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::Sqlite(tmp.path().join("app.db")).open(&Settings::default()).await?;
    /// backend.close_within(Duration::from_secs(1)).await;
    /// # Ok(()) }
    /// ```
    pub async fn close_within(&self, bound: Duration) {
        match self {
            Backend::Sqlite(e) => {
                let _ = tokio::time::timeout(bound, e.pool().close()).await;
            }
            Backend::Postgres(e) => {
                let _ = tokio::time::timeout(bound, e.close()).await;
            }
            Backend::File(_) | Backend::Nats(_) => {}
        }
    }
}

impl election_core::Election for Backend {
    type Claim = AnyClaim;
    type LeaseSet = AnyLeaseSet;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<AnyClaim, Error> {
        Ok(match self {
            Backend::File(e) => AnyClaim::File(e.claim(name, identity)?),
            Backend::Sqlite(e) => AnyClaim::Sqlite(e.claim(name, identity)?),
            Backend::Nats(e) => AnyClaim::Nats(e.claim(name, identity)?),
            Backend::Postgres(e) => AnyClaim::Postgres(e.claim(name, identity)?),
        })
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, CoreError> {
        each!(self, Backend, |e| election_core::Election::leader(e, name)
            .await)
    }

    async fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> Result<impl Stream<Item = Result<Option<Leader>, CoreError>> + Send + '_, CoreError> {
        use futures::StreamExt;
        Ok(match self {
            Backend::File(e) => election_core::Election::observe(e, name, every)
                .await?
                .boxed(),
            Backend::Sqlite(e) => election_core::Election::observe(e, name, every)
                .await?
                .boxed(),
            Backend::Nats(e) => election_core::Election::observe(e, name, every)
                .await?
                .boxed(),
            Backend::Postgres(e) => election_core::Election::observe(e, name, every)
                .await?
                .boxed(),
        })
    }

    async fn lease_set(&self, identity: &str) -> Result<AnyLeaseSet, Error> {
        self.lease_set_polling(identity, None).await
    }

    async fn leaders(&self, names: &[ElectionName]) -> Result<Vec<Option<Leader>>, CoreError> {
        each!(self, Backend, |e| election_core::Election::leaders(
            e, names
        )
        .await)
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        Ok(match self {
            Backend::File(e) => e.store_id()?,
            Backend::Sqlite(e) => e.store_id().await?,
            Backend::Nats(e) => e.store_id()?,
            Backend::Postgres(e) => e.store_id().await?,
        })
    }
}

/// A balanced set over any backend ([`election_core::Membership`]).
impl election_core::Balanced for AnyLeaseSet {
    fn member(&self) -> election_core::SetMember {
        each!(self, AnyLeaseSet, |s| s.member())
    }

    fn balance_among(&self, members: &[election_core::SetMember]) {
        each!(self, AnyLeaseSet, |s| s.balance_among(members))
    }
}

/// The holder of an election, as [`Backend::holder`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's identity, epoch and start, as
    /// [`Election::leader`](election_core::Election::leader) shows them.
    pub leader: Leader,
    /// True while the holder waits out a failover grace (NATS): it won
    /// but its term has not begun, and it may never lead. Always false on
    /// the backends without a grace.
    pub pending: bool,
}

/// The changes of an election, told by the store as they happen
/// ([`Backend::watch`]).
#[non_exhaustive]
pub struct Watch<'a> {
    /// The current state first, then each change (repeats of one term left
    /// out); an item's error is the backend's.
    pub changes: futures::stream::BoxStream<'a, Result<Option<Leader>, Error>>,
    /// What tells of the changes, for a message when it ends (`the NATS
    /// watch`, `the PostgreSQL observation`).
    pub what: &'static str,
}

impl std::fmt::Debug for Watch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

/// What an observer asks of any backend: who holds an election, told
/// of changes where the store tells them, the record of the last term
/// where one is kept (ADR 0100).
impl Backend {
    /// Who holds election `name` now, and whether that holder is still
    /// [`pending`](Holder::pending) (NATS: from one read). Errors in the
    /// backend's words: NATS's own error, the core's elsewhere
    /// ([`Error::Election`]).
    ///
    /// Cancel safety: cancel safe (a read).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// match backend.holder("jobs").await? {
    ///     Some(h) if h.pending => println!("{} waits out the grace", h.leader.identity),
    ///     Some(h) => println!("{} leads in term {}", h.leader.identity, h.leader.epoch),
    ///     None => println!("vacant"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn holder(&self, name: &str) -> Result<Option<Holder>, Error> {
        match self {
            Backend::Nats(e) => Ok(e.holder(name).await?.map(|h| Holder {
                leader: h.leader,
                pending: h.pending,
            })),
            _ => Ok(election_core::Election::leader(self, name)
                .await
                .map_err(Error::Election)?
                .map(|leader| Holder {
                    leader,
                    pending: false,
                })),
        }
    }

    /// Whether a holder can be [`pending`](Holder::pending) on this
    /// backend (a failover grace: NATS), so that an observer must look
    /// again after a change; no I/O.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(!backend.may_be_pending());
    /// # Ok(()) }
    /// ```
    pub fn may_be_pending(&self) -> bool {
        matches!(self, Backend::Nats(_))
    }

    /// The changes of election `name` as the store tells them (NATS's
    /// watch; PostgreSQL's notifications, with a read every `every` as a
    /// backstop); `None` for a backend an observer reads every `every`
    /// itself (file, SQLite).
    ///
    /// Cancel safety: dropping the stream stops it. Failure model: the
    /// backend's error when the watch cannot start; a failed watch is an
    /// `Err` item.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.watch("jobs", Duration::from_secs(1)).await?.is_none()); // read it every second
    /// # Ok(()) }
    /// ```
    pub async fn watch(&self, name: &str, every: Duration) -> Result<Option<Watch<'_>>, Error> {
        use futures::StreamExt;
        Ok(match self {
            Backend::Nats(e) => Some(Watch {
                changes: e
                    .observe(name)
                    .await?
                    .map(|c| c.map_err(Error::Nats))
                    .boxed(),
                what: "the NATS watch",
            }),
            Backend::Postgres(e) => Some(Watch {
                changes: e
                    .observe(name, every)
                    .await
                    .map_err(Error::Election)?
                    .map(|c| c.map_err(Error::Election))
                    .boxed(),
                what: "the PostgreSQL observation",
            }),
            Backend::File(_) | Backend::Sqlite(_) => None,
        })
    }

    /// A wake-up at each change of election `name`'s state on this host
    /// (the file backend's inotify watch), for an observer that reads it
    /// then; `None` where there is none (the observer reads every so
    /// often), `Some(Err)` when it cannot be set up (no inotify, or its
    /// limits reached).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// if let Some(Ok(mut changes)) = backend.changes("jobs") {
    ///     # if false {
    ///     changes.changed().await?; // then read who leads
    ///     # }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn changes(&self, name: &str) -> Option<Result<election_file::Changes, Error>> {
        match self {
            Backend::File(e) => Some(e.changes(name).map_err(Error::File)),
            _ => None,
        }
    }

    /// The last term of election `name` as this host's record keeps it
    /// (the file backend's epoch record: a term it names that does not
    /// lead a moment later has ended); `None` on the backends without one.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert_eq!(backend.last_term("jobs")?, None); // no term yet
    /// # Ok(()) }
    /// ```
    pub fn last_term(&self, name: &str) -> Result<Option<Leader>, Error> {
        match self {
            Backend::File(e) => Ok(e.last_term(name)?),
            _ => Ok(None),
        }
    }

    /// The directory the election is kept in on this host, for a message
    /// (the file backend's); `None` for the others.
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert_eq!(backend.local_path(), Some(tmp.path()));
    /// # Ok(()) }
    /// ```
    pub fn local_path(&self) -> Option<&std::path::Path> {
        match self {
            Backend::File(e) => Some(e.dir()),
            Backend::Sqlite(_) | Backend::Nats(_) | Backend::Postgres(_) => None,
        }
    }
}

/// What an operator may repair, asked of any backend (ADR 0100).
impl Backend {
    /// Sets the epoch record of election `name` to `epoch`, where the
    /// backend keeps one an operator may have to repair (the file
    /// backend: [`FileElection::repair_epoch`]); `None` on the backends
    /// that keep their epochs in state the library never deletes.
    ///
    /// Blocking file I/O, as [`FileElection::repair_epoch`]. Failure
    /// model: the backend's error (an epoch lower than one that may have
    /// been handed out, a directory that cannot be written).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// let epoch = election_core::Epoch::new(41).expect("not zero");
    /// if let Some(repaired) = backend.repair_epoch("jobs", epoch) {
    ///     println!("the record now holds epoch {}", repaired?.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn repair_epoch(
        &self,
        name: &str,
        epoch: Epoch,
    ) -> Option<Result<election_file::EpochRepair, Error>> {
        match self {
            Backend::File(e) => Some(e.repair_epoch(name, epoch).map_err(Error::File)),
            Backend::Sqlite(_) | Backend::Nats(_) | Backend::Postgres(_) => None,
        }
    }
}

/// A clock injected into any backend, for a test harness (ADR 0053).
impl Backend {
    /// This backend with `clock` in place of the system's clocks, where
    /// the backend takes one (SQLite and PostgreSQL: the wall clock they
    /// write for people to read, and the monotonic clock their lease
    /// decisions read); it shares the open backend's connections. The
    /// file and NATS backends have no injectable wall clock: an
    /// [`Error::Config`] (`ConfigError::BadSetting`, setting `clock`)
    /// says so, and a harness goes on with the backend as it is.
    ///
    /// Failure model: only that refusal; no I/O.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use election_url::{BackendUrl, Error, Settings, SystemClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}", tmp.path().join("app.db").display()).parse()?;
    /// let backend = url.open(&Settings::default()).await?;
    /// let backend = backend.with_clock(Arc::new(SystemClock))?;
    /// assert_eq!(backend.kind(), "sqlite");
    ///
    /// let file = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(matches!(file.with_clock(Arc::new(SystemClock)), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn with_clock(&self, clock: std::sync::Arc<dyn crate::Clock>) -> Result<Backend, Error> {
        match self {
            Backend::Sqlite(e) => Ok(Backend::Sqlite(e.clone().with_clock(clock))),
            Backend::Postgres(e) => Ok(Backend::Postgres(e.clone().with_clock(clock))),
            Backend::File(_) | Backend::Nats(_) => Err(ConfigError::BadSetting {
                setting: "clock",
                reason: format!("the {} backend has no injectable wall clock", self.kind()),
            }
            .into()),
        }
    }
}
