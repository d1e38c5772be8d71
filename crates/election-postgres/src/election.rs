//! [`PostgresElection`], the façade: elections in one PostgreSQL database
//! (connecting, candidates and claims, the leader, observing, lease sets).
//! The claim of one candidate is in `claim.rs`, the keyed claims in
//! `keyed.rs`, the store underneath in `store/`.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Candidate, ConfigError, ElectionName, Identity, Leader, LeaseSet};
use futures::Stream;
use sqlx::PgPool;

use crate::Clock;
use crate::claim::PostgresClaim;
use crate::error::Error;
use crate::keyed::PostgresKeyedClaims;
use crate::options::PostgresOptions;
use crate::store::context::PostgresStore;
use crate::store::notify;

/// Elections among the processes that share one PostgreSQL database,
/// usually the application's own.
///
/// ```no_run
/// use election_postgres::{PostgresElection, PostgresOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = PostgresElection::connect("postgres://app@db.internal/app", PostgresOptions::default()).await?;
/// let term = election.candidate("billing", "worker-1")?.campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PostgresElection {
    pub(crate) inner: Arc<PostgresStore>,
}

impl PostgresElection {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally
    /// `?schema=<name>`, which must agree with a schema set in `options`;
    /// sqlx reads a missing password from `PGPASSWORD` or the `~/.pgpass`
    /// file, so it need never be on a command line), checks that the
    /// session commits durably and creates or migrates the election schema
    /// ([`schema`](crate::store::schema)).
    ///
    /// Connections (ADR 0105): the election statements and the `LISTEN`
    /// of every election of this process opened with the same connect
    /// options (server, database, user, `application_name`, which the URL
    /// may set; `election-postgres` if it does not) run on **one shared
    /// session**, a connection the open makes (or finds open) and checks
    /// in one round trip; the statements a handover needs are readied on
    /// it when something first waits (ADR 0065, 0075). A lease set's claim
    /// batches and background releases use one more connection beside it,
    /// opened when first needed. [`pool`](Self::pool) is a pool of its own
    /// for the application's queries and fences: lazy (no connection until
    /// used), at most 8 connections. A connection the server ended fails
    /// the request sent on it (a read is tried again) and is replaced.
    ///
    /// Cancel safety: cancel safe; nothing is held if dropped (a migration
    /// in flight commits whole or not at all).
    ///
    /// Failure model: a URL that does not parse, a refused password, a
    /// missing database or a missing privilege is [`Error::Unusable`]; a
    /// bad or conflicting `schema` parameter [`Error::Config`];
    /// `synchronous_commit = off` is [`Error::UnsafeSetting`]; a schema
    /// written by a newer version [`Error::SchemaTooNew`]; a server that
    /// cannot be reached [`Error::Unavailable`] at once, with the cause as
    /// its source (connection refused, unknown host: a first connection
    /// that has not come within 20 ms is looked into with a bare connect to
    /// the server's address, so the pool's silent retries never hide a
    /// refusal),
    /// or [`Error::TimedOut`] for a server that answers too slowly (after
    /// 10 s or four request timeouts, whichever is longer). Opening is one
    /// attempt: to wait for a server that is down at start, retry while
    /// [`Error::is_unavailable`] (with a backoff, e.g.
    /// [`election_core::retry_pause`]); once open, a campaign rides out a
    /// server that goes down by itself, counting its tries
    /// ([`Candidate::retries`](election_core::Candidate::retries)).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// let election = PostgresElection::connect("postgres://app@db.internal/app", options).await?;
    /// println!("{:?}", election.leader("billing").await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(PostgresStore::connect(url, options).await?))
    }

    /// Uses the application's own pool (its sessions must not turn
    /// `synchronous_commit` off: checked on one session here; see ADR
    /// 0033). Creates or migrates the election schema; the application's
    /// own tables are never touched.
    ///
    /// **The server's budget** (`max_connections`), per process (ADR
    /// 0105): the election statements (claims, renewals, checks,
    /// releases, reads) and the `LISTEN` of every election of this process
    /// with this pool's connect options run on **one session** of their
    /// own, opened with the pool's connect options, never on a connection
    /// of this pool: **1** connection for any number of waiting candidates,
    /// leaders and observers; **2 at most** with lease sets (the session,
    /// and one side connection for their claim batches and background
    /// releases). Add them to this pool's `max_connections` for each
    /// process. Only [`PostgresFence`](crate::PostgresFence)s (their
    /// transactions are the application's) take connections of this pool.
    /// So an application that keeps this pool busy does not starve the
    /// renewals; a term is still lost (reported:
    /// [`Term::lost`](election_core::Term::lost)) if the session's
    /// renewals cannot reach the server before its validity ends.
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
    /// println!("{:?}", election.leader("billing").await?);
    /// # Ok(()) }
    /// ```
    pub async fn with_pool(pool: PgPool, options: PostgresOptions) -> Result<Self, Error> {
        Ok(Self::of(PostgresStore::with_pool(pool, options).await?))
    }

    /// Uses `clock` instead of the system's clocks (for tests; [`Clock`]
    /// shows one with a wall clock a day ahead). Leases count on its
    /// monotonic `now`; its wall clock is only written for display, and no
    /// server's clock is read.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    ///
    /// use election_postgres::{PostgresElection, PostgresOptions, SystemClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default())
    ///     .await?
    ///     .with_clock(Arc::new(SystemClock));
    /// let term = election.candidate("ledger-writer", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self::of(self.inner.with_clock(clock))
    }

    fn of(context: PostgresStore) -> Self {
        PostgresElection {
            inner: Arc::new(context),
        }
    }

    /// The pool, for the application's own queries and for
    /// [`PostgresFence`](crate::PostgresFence).
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let (orders,): (i64,) = sqlx::query_as("SELECT count(*) FROM orders")
    ///     .fetch_one(election.pool())
    ///     .await?;
    /// println!("{orders} orders");
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The settings.
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// let election = PostgresElection::connect("postgres://app@db.internal/app", options).await?;
    /// assert_eq!(election.options().schema(), "billing_election");
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &PostgresOptions {
        &self.inner.options
    }
}

impl PostgresElection {
    /// The claim of candidate `identity` in election `name` (no I/O).
    ///
    /// Failure model: [`Error::Config`] for an invalid name or identity.
    ///
    /// ```no_run
    /// use election_core::{Candidate, Claim};
    /// use election_postgres::{Error, PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let claim = election.claim("ledger-writer", "host-a/1")?;
    /// if let Some(leader) = claim.leader().await? {
    ///     println!("{} leads; waiting", leader.identity);
    /// }
    /// let term = Candidate::new(claim).campaign().await?; // what `candidate` does
    /// term.resign().await?;
    ///
    /// assert!(matches!(election.claim("ledger-writer", ""), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<PostgresClaim, Error> {
        let (name, identity) = (ElectionName::new(name)?, Identity::new(identity)?);
        Ok(PostgresClaim::new(self.inner.clone(), name, identity))
    }

    /// A [`Candidate`] for [`claim`](PostgresElection::claim).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "postgres://app@db.internal/app";
    /// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
    /// let candidate = election.candidate("ledger-writer", "host-a/1")?;
    /// match candidate.campaign_timeout(Duration::from_secs(30)).await? {
    ///     Some(term) => {
    ///         println!("leading in term {}", term.epoch());
    ///         term.resign().await?;
    ///     }
    ///     None => println!("another candidate still leads after 30 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<PostgresClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// Who leads election `name` now (the holder its lease row names), or
    /// `None`. A holder that died still shows until a contender takes its
    /// lease over (one TTL after its last renewal).
    ///
    /// Cancel safety: cancel safe (one read). Failure model:
    /// [`election_core::Error::Config`] for an invalid name,
    /// `Unavailable` when the server cannot answer within the request
    /// timeout, `Corrupt` for a damaged row.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// if let Some(leader) = election.leader("billing").await? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name = ElectionName::new(name)?;
        self.inner.read_leader(&name).await
    }

    /// Which store keeps this election's state: the server's system
    /// identifier (`pg_control_system()`, fixed when the cluster was
    /// initialised and kept by its physical replicas), the database's OID
    /// and the schema. The same however the server is reached
    /// (`localhost`, `127.0.0.1`, a proxy, a socket).
    ///
    /// Cancel safety: cancel safe (a read). Failure model: the server
    /// cannot be reached or refuses the read (`Unavailable`, `Database`).
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let a = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// let b = PostgresElection::connect("postgres://app@127.0.0.1/app", PostgresOptions::default()).await?;
    /// assert_eq!(a.store_id().await?, b.store_id().await?);
    /// # Ok(()) }
    /// ```
    pub async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        // On the session (ADR 0105): no pool connection for one read.
        let (system, db): (String, String) = self
            .inner
            .read_on_session(async |conn| {
                Ok(sqlx::query_as(
                    "SELECT (SELECT system_identifier FROM pg_control_system())::text, \
                     (SELECT oid FROM pg_database WHERE datname = current_database())::text",
                )
                .fetch_one(conn)
                .await?)
            })
            .await?;
        Ok(election_core::StoreId::new(
            "postgres",
            format_args!("system={system},db={db},schema={}", self.options().schema()),
        ))
    }

    /// The channels this process's session with the server listens on
    /// (`pg_listening_channels()`, read through the session itself, ADR
    /// 0105): for tests of when a process listens.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let e = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// // Nothing waits yet: the process listens on nothing.
    /// assert!(e.listening_channels().await?.is_empty());
    /// # Ok(()) }
    /// ```
    #[doc(hidden)]
    pub async fn listening_channels(&self) -> Result<Vec<String>, Error> {
        self.inner
            .read_on_session(async |conn| {
                Ok(
                    sqlx::query_scalar("SELECT pg_listening_channels() ORDER BY 1")
                        .fetch_all(conn)
                        .await?,
                )
            })
            .await
    }
}

impl PostgresElection {
    /// Every change of leadership of election `name`: the current holder
    /// first, then each new term (`Some`) or vacancy (`None`), repeats of
    /// one term left out.
    ///
    /// Woken by the notification every win and release sends (the first
    /// call starts this process's listener), and reads the row at least
    /// every `every` as a backstop. What it may miss: a term that began
    /// and ended between two reads. A holder whose lease ran out with no
    /// renewal (a SIGKILLed process) is reported as a vacancy (`None`) by
    /// the first read after its last renewal plus its TTL has passed on
    /// this process's wall clock ([`Leader::presumed_dead_at`]; display
    /// only, a clock that is off moves it).
    ///
    /// Cancel safety: dropping the stream stops it. Failure model:
    /// `Config` for an invalid name or an `every` outside 1 ms..=1 h; a
    /// failed read is one `Err` item (`Unavailable`, `Corrupt`) and the
    /// stream goes on.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let changes = election.observe("billing", std::time::Duration::from_secs(5)).await?;
    /// let mut changes = std::pin::pin!(changes);
    /// while let Some(change) = changes.next().await {
    ///     match change? {
    ///         Some(leader) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///         None => println!("nobody leads"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> Result<
        impl Stream<Item = Result<Option<Leader>, election_core::Error>> + Send + 'static,
        election_core::Error,
    > {
        let name = ElectionName::new(name)?;
        if every < Duration::from_millis(1) || every > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "every",
                reason: format!("{every:?} is not between 1ms and 1h"),
            }
            .into());
        }
        let ctx = self.inner.clone();
        // Subscribed before the listener starts (ADR 0071).
        let wakes = ctx.notifier.subscribe();
        ctx.notifier.start();
        let state = (ctx, name, wakes, None::<Option<Leader>>, true);
        Ok(futures::stream::unfold(
            state,
            move |(ctx, name, mut wakes, mut last, first)| async move {
                let mut first = first;
                loop {
                    if !first {
                        let n = name.as_str();
                        let _ = tokio::time::timeout(every, notify::woken(&mut wakes, |x| x == n))
                            .await;
                    }
                    first = false;
                    match ctx.read_leader(&name).await {
                        Err(e) => return Some((Err(e), (ctx, name, wakes, last, false))),
                        Ok(now) => {
                            // A holder whose lease ran out (SIGKILLed): a
                            // vacancy, seen by the backstop read at the
                            // latest (display only).
                            let now = election_core::vacant_if_presumed_dead(now);
                            // A new term or a new value (ADR 0068).
                            let same = |a: &Option<Leader>, b: &Option<Leader>| match (a, b) {
                                (None, None) => true,
                                (Some(a), Some(b)) => a.shows_same(b),
                                _ => false,
                            };
                            if last.as_ref().is_none_or(|l| !same(l, &now)) {
                                last = Some(now.clone());
                                return Some((Ok(now), (ctx, name, wakes, last, false)));
                            }
                        }
                    }
                }
            },
        ))
    }

    /// Stops this election's notification listener and, for a pool this
    /// crate opened ([`connect`](Self::connect)), closes the pool. A pool
    /// given to [`with_pool`](Self::with_pool) stays open. Resign terms and
    /// close lease sets first: a term still held afterwards cannot renew
    /// and is lost when its validity runs out (its lease then ages out).
    ///
    /// Within [`CLOSE_GRACE`](crate::CLOSE_GRACE) (10 ms) of this
    /// election's last release (a resign, a lease set's close), this waits
    /// until the grace has passed before it closes anything: the server runs
    /// a process per connection, and those processes ending while the
    /// successor, woken by the release, takes the row cost that take
    /// several milliseconds of the server's CPU (ADR 0086). Otherwise it
    /// closes at once.
    ///
    /// Cancel safety: cancel safe; cancelled during the grace, nothing is
    /// closed yet; after it, the listener is stopped at once and the pool
    /// closes in the background if dropped. Failure model: none.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let term = election.candidate("billing", "a")?.campaign().await?;
    /// term.resign().await?;
    /// election.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        self.inner.last_release.wait().await;
        self.inner.close_session().await;
        if self.inner.owns_pool {
            self.inner.pool.close().await;
        }
    }
}

impl PostgresElection {
    /// A [`LeaseSet`] of this process (`identity`) over this database: many
    /// keys, one lease row each, with this election's options and the
    /// core's [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL)
    /// as the backstop of notifications. See [`PostgresKeyedClaims`] for what
    /// each step costs (one statement per renewal interval for all held
    /// keys, one read and at most one claim statement per poll and batch
    /// of up to 512 keys). For
    /// another poll interval, build the set from
    /// [`PostgresKeyedClaims::with_poll_interval`] and [`LeaseSet::new`].
    ///
    /// Must be called inside a tokio runtime (the set's loop is spawned on
    /// it); outside one this returns [`Error::Config`], as it does for an
    /// invalid identity.
    ///
    /// ```no_run
    /// # use election_postgres::{PostgresElection, PostgresOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = PostgresElection::connect("postgres://app@db/app", PostgresOptions::default()).await?;
    /// let set = election.lease_set("node-a").await?;
    /// if set.ask("shard-7").await? {
    ///     set.guard("shard-7", async |_token| { /* write shard 7 */ }).await?;
    /// }
    /// set.close().await; // releases the rows: other nodes take them at once
    /// # Ok(()) }
    /// ```
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<PostgresKeyedClaims>, Error> {
        let identity = election_sql::lease_set_identity(identity)?;
        Ok(LeaseSet::new(PostgresKeyedClaims::new(self, identity)))
    }
}

impl PostgresElection {
    /// Revokes the current term of election `name` on behalf of `by`
    /// ([`Election::revoke`](election_core::Election::revoke), ADR 0111):
    /// one claim statement, conditional on the lease row and epoch record
    /// as read, writes the row as held by the revocation with an epoch
    /// drawn from `epoch_seq` in that statement and a nonce no attempt
    /// has, so the holder's next renewal (on its nonce and epoch) fails
    /// and its term is lost; contenders wait a full TTL (the longest of
    /// the row's, the record's and this handle's) before they take it.
    /// `Ok(None)`: no term holds the name.
    ///
    /// Cancel safety: cancelled after the statement was sent, it may have
    /// committed or not. Failure model: `Unavailable`, `OutcomeUnknown`,
    /// `Corrupt`, as a claim's.
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// if let Some(r) = election.revoke("jobs", &Identity::new("ops")?).await? {
    ///     println!("{} deposed; fence at {}", r.deposed.identity, r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let core = |e: Error| e.into_core(&name_);
        let wall_ms = self.inner.clock.wall_unix_ms();
        let holder = election_sql::lease_row::revoked_by(by);
        let Some((deposed, epoch)) = self
            .inner
            .revoke(name, &holder, wall_ms)
            .await
            .map_err(core)?
        else {
            return Ok(None);
        };
        election_sql::lease_row::revoked(&deposed, epoch, by, wall_ms)
            .map_err(|e| core(Error::from(e)))?
            .map(|r| Some(r.counted(&name_, "postgres")))
            .ok_or_else(|| {
                core(Error::CorruptRow {
                    name: name.to_owned(),
                    detail: format!("a revoked row of epoch {epoch}"),
                })
            })
    }

    /// The revocation the lease row of `name` shows, until the next term
    /// ([`Election::revocation`](election_core::Election::revocation)).
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// if let Some(r) = election.revocation("jobs").await? {
    ///     println!("jobs: {r}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let seen = self
            .inner
            .read_one(name)
            .await
            .map_err(|e| e.into_core(&name_))?;
        Ok(seen.lease.and_then(|r| r.revocation()))
    }
}

impl PostgresElection {
    /// Asks the holder of `name`'s current term, on behalf of `by`, to
    /// hand it to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer),
    /// ADR 0112): one statement stores the request beside the term in the
    /// lease row (`transfer_to`, `transfer_by`, `transfer_at` and the
    /// term's epoch as `transfer_epoch`), only while a term holds it; the
    /// holder's next renewal reads it (within one renew interval) and its
    /// term reports it
    /// ([`Term::transfer_requested`](election_core::Term::transfer_requested)).
    /// Nothing the holder's writes are conditional on changes. `Ok(None)`:
    /// no term holds the name (released, revoked, handed over).
    ///
    /// Cancel safety: cancelled after the statement was sent, the request
    /// may have been stored or not; asking again is safe. Failure model:
    /// `Unavailable`, `OutcomeUnknown` (past the request timeout).
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// let (to, by) = (Identity::new("web-2")?, Identity::new("deploy")?);
    /// match election.request_transfer("jobs", &to, &by).await? {
    ///     Some(r) => println!("asked: {r}"),
    ///     None => println!("nobody leads jobs"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        self.store_request(name, to.as_str(), by.as_str()).await
    }

    /// Tells the holder of `name`'s term that `candidate` waits with
    /// `priority` ([`Election::prefer`](election_core::Election::prefer),
    /// ADR 0112): stored as [`request_transfer`](Self::request_transfer)
    /// stores a request, `transfer_by` naming the priority
    /// ([`preferred_by`](election_sql::lease_row::preferred_by)); the term
    /// hears it at its next renewal, only if the priority is above its own.
    ///
    /// Cancel safety, failure model: as `request_transfer`'s.
    ///
    /// ```
    /// use election_core::{Election, Identity};
    ///
    /// /// A candidate in the primary zone says it waits, with priority 10.
    /// async fn say_preferred(election: &election_postgres::PostgresElection) -> Result<(), election_core::Error> {
    ///     election.prefer("jobs", &Identity::new("zone-a/1")?, 10).await?;
    ///     Ok(())
    /// }
    /// ```
    pub async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        let by = election_sql::lease_row::preferred_by(priority);
        self.store_request(name, candidate.as_str(), &by).await
    }

    /// What `request_transfer` and `prefer` share: the request's columns
    /// as given, read back as the holder will read them.
    async fn store_request(
        &self,
        name: &str,
        to: &str,
        by: &str,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let core = |e: Error| e.into_core(&name_);
        let wall_ms = self.inner.clock.wall_unix_ms();
        let epoch = self
            .inner
            .request_transfer(name, (to, by), wall_ms)
            .await
            .map_err(core)?;
        let Some(epoch) = epoch else { return Ok(None) };
        let epoch = crate::store::row::epoch_of(name, epoch).map_err(core)?;
        let asked = election_sql::lease_row::Asked {
            to: to.to_owned(),
            by: by.to_owned(),
            at_unix_ms: Some(wall_ms),
        };
        Ok(asked.request(epoch))
    }

    /// The handover of `name` that no term has followed yet
    /// ([`Election::handover`](election_core::Election::handover), ADR
    /// 0112): the lease row held by a handover
    /// ([`handed_to`](election_sql::lease_row::handed_to)), until the
    /// successor's (or a later) claim rewrites it, or this handle's wall
    /// clock is past its window (display only).
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```no_run
    /// use election_postgres::{PostgresElection, PostgresOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = PostgresElection::connect("postgres://app@localhost/app", PostgresOptions::default()).await?;
    /// if let Some(h) = election.handover("jobs").await? {
    ///     println!("jobs: {h}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let seen = self
            .inner
            .read_one(name)
            .await
            .map_err(|e| e.into_core(&name_))?;
        let now = self.inner.clock.wall_unix_ms();
        Ok(seen.lease.and_then(|r| r.handover_at(now)))
    }
}

impl election_core::Election for PostgresElection {
    type Claim = crate::PostgresClaim;
    type LeaseSet = LeaseSet<PostgresKeyedClaims>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<crate::PostgresClaim, Error> {
        PostgresElection::claim(self, name, identity)
    }

    async fn leader(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Leader>, election_core::Error> {
        PostgresElection::leader(self, name).await
    }

    /// Woken by notifications, with `every` as the poll backstop: see
    /// [`PostgresElection::observe`].
    async fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> Result<
        impl futures::Stream<Item = Result<Option<election_core::Leader>, election_core::Error>>
        + Send
        + '_,
        election_core::Error,
    > {
        PostgresElection::observe(self, name, every).await
    }

    async fn lease_set(&self, identity: &str) -> Result<LeaseSet<PostgresKeyedClaims>, Error> {
        PostgresElection::lease_set(self, identity).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        PostgresElection::store_id(self).await
    }

    async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        PostgresElection::revoke(self, name, by).await
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        PostgresElection::revocation(self, name).await
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        PostgresElection::request_transfer(self, name, to, by).await
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        PostgresElection::prefer(self, name, candidate, priority).await
    }

    async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        PostgresElection::handover(self, name).await
    }

    /// One statement for every name (`read_many`).
    async fn leaders(
        &self,
        names: &[ElectionName],
    ) -> Result<Vec<Option<Leader>>, election_core::Error> {
        self.inner.read_leaders(names).await
    }
}

impl election_sql::ElectionStore<PostgresStore> for PostgresElection {
    fn store(&self) -> &Arc<PostgresStore> {
        &self.inner
    }
}
