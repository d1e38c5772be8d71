//! [`SqliteElection`]: elections in one SQLite database, and the
//! [`SqliteClaim`] of one candidate.

use std::path::Path;
use std::sync::Arc;

use election_core::{
    Candidate, Claim, ElectionName, End, Identity, Leader, LeaseSet, TermReporter, WatchGuard, Won,
};
use sqlx::SqlitePool;
use tokio::sync::oneshot;

use crate::Clock;
use crate::context::Context;
use crate::error::Error;
use crate::host_lock;
use crate::lease_set::SqliteLeases;
use crate::options::SqliteOptions;
use crate::row::{self, ClaimWrite, Found, Hold, Observed};

/// Elections among the processes (and tasks) that share one SQLite
/// database, often the application's own.
///
/// One row per election in `election_leases` (created and migrated by this
/// crate, beside the application's tables). The winner's identity, a random
/// nonce for its attempt, the epoch (written by the transaction that wins),
/// a renewal version (bumped by every claim, renewal and release), the
/// holder's TTL and two wall-clock timestamps for display. Beside it, one
/// row per election in `election_epochs`: the highest epoch handed out and
/// its term's TTL, written in the same transaction, never deleted (see the
/// [crate docs](crate) for what an operator must never touch).
///
/// - The holder renews every `renew_interval` and counts its lease valid
///   until `ttl - margin` after the monotonic instant *before* its last
///   successful renewal was sent; it reports the loss then (rule 2).
/// - A contender takes over a held lease only after it has itself seen the
///   renewal version unchanged for a full TTL (the longer of its own and
///   the holder's) on its own monotonic clock. No wall-clock timestamp is
///   compared, so a wall-clock jump cannot make two leaders. A lease row
///   deleted by hand counts as held for a full TTL from when the contender
///   first sees it gone.
/// - The one exception, on one host (ADR 0026): a contender that holds the
///   election's same-host lock while the row names a holder that recorded
///   holding that very lock (same nonce, boot id, device and inode) takes
///   over at once: the holder frees the lock only after its attempt is
///   closed (its term ended) and the kernel only when its process is gone.
///   A stopped or hung holder keeps it: a full TTL then, as above.
/// - A dropped term releases its row in the background (conditional on its
///   nonce); if that cannot run, the lease ages out after its TTL.
///
/// ```
/// use election_sqlite::{SqliteElection, SqliteOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
/// let term = election.candidate("billing", "worker-1")?.campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SqliteElection {
    inner: Arc<Context>,
}

impl SqliteElection {
    /// Opens (creating if missing) the database at `path` with the settings
    /// a lease needs: WAL journal, `synchronous = FULL` (a committed epoch
    /// survives power loss, so it is never handed out twice), the options'
    /// busy timeout. Creates or migrates the election tables.
    ///
    /// Cancel safety: cancel safe; nothing is held if dropped.
    ///
    /// Failure model: a path that is a directory or whose parent is missing
    /// is [`Error::NotAFile`]; an unwritable file [`Error::ReadOnly`]; a
    /// busy database [`Error::Busy`] after the busy timeout; a file with a
    /// second name (a second hard link, a mount of the file on its own)
    /// [`Error::SecondName`], before SQLite opens it (ADR 0046).
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions, Error};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let opened = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// println!("busy timeout {:?}", opened.options().busy_timeout());
    ///
    /// // A directory where the database file belongs:
    /// let refused = SqliteElection::open(tmp.path(), SqliteOptions::default()).await;
    /// assert!(matches!(refused, Err(Error::NotAFile { .. })));
    ///
    /// // A second hard link: SQLite would keep a WAL per name.
    /// std::fs::hard_link(tmp.path().join("app.db"), tmp.path().join("link.db"))?;
    /// let refused = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await;
    /// assert!(matches!(refused, Err(Error::SecondName { hard_links: 2, .. })));
    /// # Ok(()) }
    /// ```
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::open(path.as_ref(), options).await?))
    }

    /// Opens the database at `path` only to read who leads (for tools like
    /// `elect leader` and `elect observe`): creates nothing, neither the
    /// file nor the election tables, and never writes. `Ok(None)` if the
    /// file has no election tables (no election has run in it).
    ///
    /// A candidate from the result never wins: its writes fail with
    /// [`Error::ReadOnly`]. Use [`open`](SqliteElection::open) to campaign.
    ///
    /// Cancel safety: cancel safe; nothing is held if dropped.
    ///
    /// Failure model: a missing file, a directory or a missing parent
    /// directory is [`Error::NotAFile`]; a file that is not an election
    /// database [`Error::Unusable`]; a schema from a newer version
    /// [`Error::SchemaTooNew`]; a busy database [`Error::Busy`]; a file
    /// with a second name [`Error::SecondName`] (its other name's WAL
    /// would not be read).
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions, Error};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let missing = tmp.path().join("typo.db");
    /// let refused = SqliteElection::open_read_only(&missing, SqliteOptions::default()).await;
    /// assert!(matches!(refused, Err(Error::NotAFile { .. })));
    /// assert!(!missing.exists()); // nothing was created
    ///
    /// # let path = tmp.path().join("app.db");
    /// # SqliteElection::open(&path, SqliteOptions::default()).await?;
    /// if let Some(election) = SqliteElection::open_read_only(&path, SqliteOptions::default()).await? {
    ///     println!("leader: {:?}", election.leader("jobs").await?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn open_read_only(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Option<Self>, Error> {
        Ok(Context::open_read_only(path.as_ref(), options)
            .await?
            .map(Self::of))
    }

    /// Uses the application's own pool (its connections should use WAL and
    /// `synchronous = FULL` as [`open`](SqliteElection::open) sets them, and a
    /// busy timeout). Creates or migrates the election tables.
    ///
    /// Cancel safety and failure model as [`open`](SqliteElection::open);
    /// a file with a second name is [`Error::SecondName`] before the
    /// election tables are touched (the pool itself was opened through
    /// that name: open the database by its one name instead).
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", tmp.path().join("app.db").display())).await?;
    /// sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)").execute(&pool).await?;
    /// let election = SqliteElection::with_pool(pool, SqliteOptions::default()).await?;
    /// let term = election.candidate("orders-writer", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_pool(pool: SqlitePool, options: SqliteOptions) -> Result<Self, Error> {
        Ok(Self::of(Context::with_pool(pool, options).await?))
    }

    /// Uses `clock` instead of the system's clocks (for tests).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::SystemTime;
    ///
    /// use election_sqlite::{Clock, SqliteElection, SqliteOptions, SystemClock};
    ///
    /// /// The system's clocks, with a wall clock a day ahead.
    /// #[derive(Debug)]
    /// struct WallClockAhead;
    ///
    /// impl Clock for WallClockAhead {
    ///     fn now(&self) -> tokio::time::Instant {
    ///         SystemClock.now()
    ///     }
    ///     fn wall_unix_ms(&self) -> i64 {
    ///         SystemClock.wall_unix_ms() + 24 * 3600 * 1000
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default())
    ///     .await?
    ///     .with_clock(Arc::new(WallClockAhead));
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// // The wall clock is only written for display: the lease counts on `now`.
    /// let since = election.leader("jobs").await?.and_then(|l| l.since);
    /// assert!(since > Some(SystemTime::now()));
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self::of(self.inner.with_clock(clock))
    }

    fn of(context: Context) -> Self {
        SqliteElection {
            inner: Arc::new(context),
        }
    }

    /// The pool, for the application's own queries and for
    /// [`SqliteFence`](crate::SqliteFence).
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    ///     .execute(election.pool())
    ///     .await?;
    /// let (orders,): (i64,) = sqlx::query_as("SELECT count(*) FROM orders")
    ///     .fetch_one(election.pool())
    ///     .await?;
    /// assert_eq!(orders, 0);
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// The same-host lock file of election `name` (see the [crate
    /// docs](crate) and ADR 0026), or `None` where this database uses none
    /// (a pool with no file, a filesystem that may be shared between
    /// hosts). A holder's attempt keeps an OFD write lock on it for its
    /// whole term; a program that hands the term's work to child processes
    /// (as `elect run` does) should let them inherit that locked
    /// descriptor, so that a same-host successor can take over at once
    /// only after every process doing the work is gone.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// match election.host_lock_path("jobs") {
    ///     // In `app.db-election-locks/` beside the database.
    ///     Some(path) => println!("same-host lock of jobs: {}", path.display()),
    ///     None => println!("no same-host lock: waiters poll"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn host_lock_path(&self, name: &str) -> Option<std::path::PathBuf> {
        self.inner.host_locks.as_ref().map(|l| l.path(name))
    }

    /// The lease timings.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let options = SqliteOptions::new(Duration::from_secs(6), Duration::from_secs(2))?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), options).await?;
    /// assert_eq!(election.options().ttl(), Duration::from_secs(6));
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> SqliteOptions {
        self.inner.options
    }

    /// The claim of candidate `identity` in election `name`.
    ///
    /// ```
    /// use election_core::{Candidate, Claim};
    /// use election_sqlite::{Error, SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let claim = election.claim("jobs", "host-a/1")?;
    /// assert_eq!(claim.leader().await?, None); // nobody leads yet
    /// let candidate = Candidate::new(claim); // what `candidate` does
    /// let term = candidate.campaign().await?;
    /// term.resign().await?;
    ///
    /// assert!(matches!(election.claim("", "host-a/1"), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<SqliteClaim, Error> {
        Ok(SqliteClaim {
            inner: self.inner.clone(),
            name: ElectionName::new(name)?,
            identity: Identity::new(identity)?,
        })
    }

    /// A [`Candidate`] for [`claim`](SqliteElection::claim).
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let candidate = election.candidate("jobs", "host-a/1")?;
    /// match candidate.try_campaign().await? {
    ///     Some(term) => {
    ///         println!("leading in term {}", term.epoch());
    ///         term.resign().await?;
    ///     }
    ///     None => println!("someone else leads"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<SqliteClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// A [`LeaseSet`] of this process (`identity`) over this database: many
    /// keys, one lease row each, with this election's
    /// [options](SqliteElection::options) and the core's
    /// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL)
    /// (how often the keys held elsewhere are looked at). The core's keyed
    /// engine drives every key through [`SqliteLeases`]' batch steps: each
    /// renewal interval costs one write
    /// transaction however many keys are held; [`guard`](LeaseSet::guard)'s
    /// commit-point check is one conditional renewal of the key's row (see
    /// [`SqliteClaim`]'s `confirm`). For another poll interval, build the
    /// set from [`SqliteLeases::with_poll_interval`] and [`LeaseSet::new`].
    ///
    /// What [`close`](LeaseSet::close) does here: one transaction releases
    /// every held row, each conditional on its term's nonce (never a
    /// successor's claim); a candidate elsewhere (another process or set)
    /// wins it at its next poll. If that transaction fails (a busy
    /// database), the rows age out after the TTL. Dropping the set does the
    /// same in the background. If the process dies, its rows age out:
    /// another candidate takes a key over once it has seen no renewal for a
    /// full TTL.
    ///
    /// Must be called inside a tokio runtime (the set's loop is spawned on
    /// it); outside one this returns [`Error::Config`], as it does for an
    /// invalid identity.
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
    /// sqlx::query("CREATE TABLE rows (shard TEXT, v INTEGER)").execute(election.pool()).await?;
    /// let set = election.lease_set("node-a").await?;
    /// assert!(set.ask("shard-7").await?); // won: this process writes shard-7
    /// assert!(set.held("shard-7")); // no round trip
    ///
    /// // Checked at the commit point, then fenced in the write's own transaction.
    /// set.guard("shard-7", async |token| {
    ///     let mut conn = election.pool().acquire().await?;
    ///     let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    ///     let shard = ResourceName::for_key(token.key());
    ///     SqliteFence::advance_in(&mut tx, &shard, Token::from(&token)).await?;
    ///     sqlx::query("INSERT INTO rows VALUES (?1, 1)").bind(token.key().as_str()).execute(&mut *tx).await?;
    ///     tx.commit().await?;
    ///     Ok::<_, Box<dyn std::error::Error>>(())
    /// })
    /// .await??;
    ///
    /// set.close().await; // releases the row: another node can take shard-7 at once
    /// assert!(!set.held("shard-7"));
    /// # Ok(()) }
    /// ```
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<SqliteLeases>, Error> {
        let identity = election_sql::lease_set_identity(identity)?;
        Ok(LeaseSet::new(SqliteLeases::new(self, identity)))
    }
}

impl SqliteLeases {
    /// The keys of process `identity` in `election`'s database, with its
    /// [options](SqliteElection::options) and the core's
    /// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL).
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sqlite::{LeaseSet, SqliteElection, SqliteLeases, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// // What `election.lease_set("node-a").await` builds:
    /// let set = LeaseSet::new(SqliteLeases::new(&election, Identity::new("node-a")?));
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn new(election: &SqliteElection, identity: Identity) -> Self {
        SqliteLeases::over(election.inner.clone(), identity)
    }
}

/// The claim of one candidate in a [`SqliteElection`].
///
/// How a term ends: resign releases the row (conditional on this attempt's
/// nonce); a drop (or a cancelled or failed step that may have committed a
/// claim) starts the same release in the background on the current tokio
/// runtime; if it cannot run, the lease ages out after its TTL. A contender
/// on the same host wakes when the term's attempt is closed (the same-host
/// lock, see the [crate docs](crate)); elsewhere, or without the lock, it
/// learns of a release at its next poll (the candidate's poll interval).
#[derive(Debug)]
pub struct SqliteClaim {
    inner: Arc<Context>,
    name: ElectionName,
    identity: Identity,
}

/// One attempt of a [`SqliteClaim`].
#[derive(Debug)]
pub struct SqliteAttempt {
    nonce: i64,
    observed: Option<Observed>,
    /// Set once a claim may have been committed (before the commit).
    may_hold: bool,
    /// The epoch this attempt won, for the commit-point check.
    epoch: Option<i64>,
    /// The same-host lock (ADR 0026), once taken: held until the attempt
    /// is closed, after its term ended.
    host_lock: Option<std::fs::File>,
    /// A thread waiting in the kernel for the same-host lock.
    lock_wait: Option<oneshot::Receiver<std::io::Result<std::fs::File>>>,
    /// Set when waiting for the lock failed: poll from then on.
    lock_failed: bool,
    /// The holder's term this attempt last gave the lock up to after
    /// losing the row with the lock in hand, and how many times (bounded,
    /// so a holder that never takes the lock cannot make it spin).
    handed_over: Option<(i64, u32)>,
}

/// How many times a waiter gives the same-host lock up to one holder's
/// term whose row it lost with the lock in hand, before it keeps the lock
/// and polls. The holder's own waiting thread normally takes the lock at
/// the first one; more only if this waiter's next wait beat it to the lock.
const MAX_HAND_OVERS: u32 = 16;

impl SqliteAttempt {
    /// Takes the same-host lock of `name` if it is free (or the waiting
    /// thread got it), before a claim that could commit. Failures only
    /// cost the wake-up: they are logged and the claim goes on.
    fn take_host_lock(&mut self, ctx: &Context, name: &str) {
        let Some(locks) = ctx.host_locks.as_ref() else {
            return;
        };
        if self.host_lock.is_some() || self.lock_failed {
            return;
        }
        if let Some(rx) = self.lock_wait.as_mut() {
            match rx.try_recv() {
                Ok(Ok(file)) => {
                    self.host_lock = Some(file);
                    self.lock_wait = None;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%name, error = %e, "same-host lock failed; polling");
                    self.lock_wait = None;
                    self.lock_failed = true;
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    self.lock_wait = None;
                    self.lock_failed = true;
                }
            }
            return;
        }
        match host_lock::try_take(&locks.path(name)) {
            Ok(file) => self.host_lock = file,
            Err(e) => {
                tracing::debug!(%name, error = %e, "same-host lock failed; polling");
                self.lock_failed = true;
            }
        }
    }

    /// After a win without the same-host lock (it was held elsewhere, by a
    /// previous holder between its release and its close, or by a waiter
    /// about to claim): waits for it on a thread of its own, so the lock
    /// comes to this term and is freed when its attempt is closed, waking
    /// the next waiter. The row keeps `lock_id` NULL for this term (it was
    /// won without the lock), so no contender takes it over early.
    fn follow_host_lock(&mut self, ctx: &Context, name: &str) {
        let Some(locks) = ctx.host_locks.as_ref() else {
            return;
        };
        if self.host_lock.is_none() && self.lock_wait.is_none() && !self.lock_failed {
            self.lock_wait = Some(host_lock::wait_for(locks.path(name)));
        }
    }

    /// Whether this waiter, holding the same-host lock after losing the
    /// row, gives the lock up (and waits for it again) so the row's holder,
    /// which won without it, can take it and wake this waiter when its
    /// term ends. Not while a claim may be held; not for a vanished row or
    /// an unread one; at most [`MAX_HAND_OVERS`] times per holder's term.
    fn hands_over(&mut self, name: &str) -> bool {
        if self.host_lock.is_none() || self.may_hold {
            return false;
        }
        let Some(term) = self.observed.as_ref().and_then(Observed::held_epoch) else {
            return false;
        };
        let count = match self.handed_over {
            Some((t, n)) if t == term => n,
            _ => 0,
        };
        if count >= MAX_HAND_OVERS {
            return false;
        }
        tracing::debug!(%name, term, "lost the row with the same-host lock in hand; giving it up to the holder");
        self.handed_over = Some((term, count + 1));
        self.host_lock = None;
        true
    }
}

impl SqliteClaim {
    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }
}

impl Claim for SqliteClaim {
    type Attempt = SqliteAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn open(&self) -> Result<SqliteAttempt, election_core::Error> {
        Ok(SqliteAttempt {
            nonce: election_core::attempt_nonce() as i64,
            observed: None,
            may_hold: false,
            epoch: None,
            host_lock: None,
            lock_wait: None,
            lock_failed: false,
            handed_over: None,
        })
    }

    /// One `BEGIN IMMEDIATE` transaction: wins a released or never-held
    /// lease, or one whose holder, epoch and renewal version this attempt
    /// has seen unchanged for a full TTL (a vanished row: seen gone for a
    /// full TTL), with the next epoch written to the lease row and the
    /// epoch state. A database busy past the busy timeout counts as "not
    /// now" (`Ok(None)`); a name whose next epoch would be above
    /// [`Epoch::MAX`](election_core::Epoch::MAX) is [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted) (nothing written);
    /// a database file deleted or replaced since it was opened is
    /// [`Error::FileReplaced`], one with a second name (a hard link, a
    /// mount of its own) [`Error::SecondName`] (both as configuration
    /// errors).
    async fn try_claim(
        &self,
        attempt: &mut SqliteAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let inner = &self.inner;
        inner.check_in_place().map_err(|e| self.core(e))?;
        attempt.take_host_lock(inner, self.name.as_str());
        let sent = inner.clock.now();
        let ttl = inner.options.ttl();
        let observed = &mut attempt.observed;
        let clock = &inner.clock;
        let decide = |found: &Found| row::may_claim(observed, found, ttl, clock.now());
        let lock = attempt
            .host_lock
            .as_ref()
            .zip(inner.host_locks.as_ref())
            .and_then(|(file, locks)| locks.lock_identity(file));
        let may_hold = &mut attempt.may_hold;
        let won = row::claim(
            &inner.pool,
            ClaimWrite {
                name: self.name.as_str(),
                identity: self.identity.as_str(),
                nonce: attempt.nonce,
                ttl_ms: inner.options.times.ttl_ms(),
                wall_ms: inner.clock.wall_unix_ms(),
                lock: lock.as_deref(),
            },
            decide,
            || *may_hold = true,
        )
        .await;
        let won = match won {
            // A busy database delays the campaign; it does not end it. Only
            // while nothing may have been committed: a busy commit is an
            // error the caller must see.
            Err(e) if e.is_busy() && !attempt.may_hold => {
                tracing::debug!(name = %self.name, error = %e, "database busy; trying again later");
                return Ok(None);
            }
            other => other.map_err(|e| self.core(e))?,
        };
        let Some(epoch) = won else { return Ok(None) };
        attempt.observed = None;
        attempt.epoch = Some(epoch);
        attempt.follow_host_lock(inner, self.name.as_str());
        let epoch = row::epoch_of(self.name.as_str(), epoch).map_err(|e| self.core(e))?;
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + inner.options.validity()),
        }))
    }

    /// Waits in the kernel for the same-host lock (ADR 0026), which the
    /// holder frees when its attempt is closed after its term ended
    /// (resigned, or lost and dropped) or the kernel frees when its process
    /// dies; `poll_interval` is the backstop. An attempt that lost the row
    /// with the lock in hand (the holder won it without the lock) gives the
    /// lock up first and waits for it again, so the holder's thread can take
    /// it and free it when that term ends (a bounded number of times per
    /// holder's term). Without the lock (a shared filesystem, a pool with no
    /// file, a failed wait) or while this attempt keeps it, this sleeps
    /// `poll_interval`.
    ///
    /// Cancel safety: cancel safe; the waiting thread stays with the
    /// attempt (and frees the lock at once if the attempt is gone when it
    /// gets it).
    async fn wait(
        &self,
        attempt: &mut SqliteAttempt,
        poll_interval: std::time::Duration,
    ) -> Result<(), election_core::Error> {
        let sleep = tokio::time::sleep(poll_interval);
        let Some(locks) = self.inner.host_locks.as_ref() else {
            sleep.await;
            return Ok(());
        };
        // A waiter that lost the row with the lock in hand: the holder won
        // without it, so keeping it would leave nobody to wake this waiter
        // when that term ends. Give it up and wait for it again.
        attempt.hands_over(self.name.as_str());
        if attempt.host_lock.is_some() || attempt.lock_failed {
            sleep.await;
            return Ok(());
        }
        let rx = attempt
            .lock_wait
            .get_or_insert_with(|| host_lock::wait_for(locks.path(self.name.as_str())));
        tokio::select! {
            got = rx => {
                attempt.lock_wait = None;
                match got {
                    Ok(Ok(file)) => attempt.host_lock = Some(file),
                    Ok(Err(e)) => {
                        tracing::debug!(name = %self.name, error = %e, "same-host lock failed; polling");
                        attempt.lock_failed = true;
                    }
                    Err(_) => attempt.lock_failed = true,
                }
            }
            () = sleep => {}
        }
        Ok(())
    }

    /// Starts the renewal task (see [`SqliteElection`]).
    fn watch(
        &self,
        attempt: &mut SqliteAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        let valid_until = won
            .valid_until
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })?;
        let (rows, term) = (self.inner.clone(), (attempt.nonce, won.epoch));
        let renewal =
            election_sql::renew_term(rows, self.name.clone(), term, valid_until, reporter);
        Ok(WatchGuard::task(tokio::spawn(renewal)))
    }

    /// The commit-point check: one conditional renewal. In one write
    /// transaction (one autocommit `UPDATE`) it bumps the row's renewal version only
    /// if the row still shows this attempt's nonce and won epoch with a
    /// holder, exactly as the renewal task does; it commits before this
    /// returns `Ok(())`.
    ///
    /// What a success proves: no other candidate held the row when the
    /// transaction committed, and because it moved the renewal version,
    /// every contender restarts its count of a full TTL without renewal from
    /// a moment after that commit. So the write that follows has at least
    /// the lease's validity (`ttl - margin`, counted from before the check
    /// was sent) before anyone else can win the row. The term's own
    /// validity is left as the renewal task last set it (conservative).
    ///
    /// Renewal state: the renewal task's own renewals are conditional on the
    /// nonce and epoch only, never on the version, so a confirm (committed,
    /// rolled back or in doubt) never makes the holder's next renewal fail;
    /// a contender sees it as one more renewal.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the row shows
    /// another holder, a release, a later epoch, or if this attempt never
    /// won, and also when the database file was deleted or replaced (a
    /// process opening the path gets another database) or got a second
    /// name (ADR 0046); then the core
    /// marks the term lost. [`election_core::Error::Unavailable`] if the
    /// database cannot answer (busy past the busy timeout, every pooled
    /// connection in use, I/O errors); [`election_core::Error::OutcomeUnknown`]
    /// if it did not answer within the lease's validity (and, grouped as
    /// [`Error::into_core`] does everywhere, `Config` if the database
    /// became read-only). In each the claim is in doubt for this write (do
    /// not write), and the renewal task decides about the term.
    ///
    /// Cancel safety: cancel safe. Dropped before the commit, the
    /// transaction rolls back; dropped during it, the row is either
    /// unchanged or renewed by this same holder. Neither changes the
    /// holder, nonce or epoch.
    async fn confirm(&self, attempt: &mut SqliteAttempt) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let Some(epoch) = attempt.epoch else {
            return Err(not_held());
        };
        let hold = Hold {
            name: self.name.as_str(),
            nonce: attempt.nonce,
            epoch,
        };
        match self.inner.confirm(hold).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_held()),
            Err(e) => Err(self.core(e)),
        }
    }

    /// Releases the row, conditional on this attempt's nonce.
    async fn release(&self, attempt: &mut SqliteAttempt) -> Result<(), election_core::Error> {
        let released = row::release(&self.inner.pool, self.name.as_str(), attempt.nonce)
            .await
            .map_err(|e| self.core(e))?;
        attempt.may_hold = false;
        if released {
            Ok(())
        } else {
            Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            })
        }
    }

    /// After a drop, a cancelled or a failed step that may have committed a
    /// claim: releases it in the background (conditional on the nonce).
    fn close(&self, attempt: SqliteAttempt, end: End) {
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if !(attempt.may_hold && gives_up) {
            // Dropping the attempt frees the same-host lock: the term (if
            // any) has ended and its row was released or lost.
            return;
        }
        let (pool, name) = (self.inner.pool.clone(), self.name.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Err(e) = row::release(&pool, name.as_str(), attempt.nonce).await {
                        tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
                    }
                    // Freed after the release, so a waiter it wakes finds
                    // the row released (with the lock a waiting thread may
                    // have got for this term).
                    drop(attempt.host_lock);
                    drop(attempt.lock_wait);
                });
            }
            Err(_) => {
                tracing::warn!(name = %self.name, "no runtime to release on; the lease ages out after its TTL");
            }
        }
    }

    /// The holder and epoch as the row records them. A holder that died
    /// shows until a contender takes its lease over (one TTL). `since` is
    /// the row's `acquired_unix_ms`: the winner's wall clock (its
    /// [`Clock`]) in the transaction that won the term.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        let row = row::read(&self.inner.pool, self.name.as_str())
            .await
            .map_err(|e| self.core(e))?;
        match row {
            Some(row) => row.leader().map_err(|e| self.core(Error::from(e))),
            None => Ok(None),
        }
    }
}

impl SqliteElection {
    /// Who leads election `name` now (the holder of its lease row), or
    /// `None`: the same read as [`Claim::leader`] on any candidate's claim,
    /// without one. A row whose lease ran out but was not taken over yet
    /// still names its holder (a contender waits a full TTL first).
    ///
    /// Cancel safety: cancel safe (one read). Failure model:
    /// [`election_core::Error::Config`] for an invalid name, `Unavailable`
    /// when the database cannot be read, `Corrupt` for a damaged row.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// assert_eq!(election.leader("jobs").await?, None);
    ///
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// if let Some(leader) = election.leader("jobs").await? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    ///     assert_eq!(leader.epoch, term.epoch());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        claim.leader().await
    }
}

impl election_core::Election for SqliteElection {
    type Claim = SqliteClaim;
    type LeaseSet = LeaseSet<SqliteLeases>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<SqliteClaim, Error> {
        SqliteElection::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        SqliteElection::leader(self, name).await
    }

    async fn lease_set(&self, identity: &str) -> Result<LeaseSet<SqliteLeases>, Error> {
        SqliteElection::lease_set(self, identity).await
    }
}
