//! [`SqliteElection`], the façade: elections in one SQLite database
//! (opening, candidates and claims, the leader, lease sets). The claim of
//! one candidate is in `claim.rs`, the keyed claims in `keyed.rs`, the
//! store underneath in `store/`.

use std::path::Path;
use std::sync::Arc;

use election_core::{Candidate, Claim, ElectionName, Identity, Leader, LeaseSet};
use sqlx::SqlitePool;

use crate::Clock;
use crate::claim::SqliteClaim;
use crate::error::Error;
use crate::keyed::SqliteKeyedClaims;
use crate::options::SqliteOptions;
use crate::store::context::SqliteStore;

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
    pub(crate) inner: Arc<SqliteStore>,
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
        Ok(Self::of(SqliteStore::open(path.as_ref(), options).await?))
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
        Ok(SqliteStore::open_read_only(path.as_ref(), options)
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
        Ok(Self::of(SqliteStore::with_pool(pool, options).await?))
    }

    /// Uses `clock` instead of the system's clocks (for tests; [`Clock`]
    /// shows one with a wall clock a day ahead). Leases count on its
    /// monotonic `now`; its wall clock is only written for display.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use election_sqlite::{SqliteElection, SqliteOptions, SystemClock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default())
    ///     .await?
    ///     .with_clock(Arc::new(SystemClock));
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self::of(self.inner.with_clock(clock))
    }

    fn of(context: SqliteStore) -> Self {
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

    /// Why this election's database file has no same-host locks, if it has
    /// none (ADR 0026): a filesystem that may be shared between hosts, one
    /// whose type cannot be read, or a lock directory that cannot be made.
    /// Then a waiter polls for the lease, a dead holder is taken over only
    /// after a full TTL, and on a shared filesystem SQLite's own locking
    /// may not hold: a tool says so as a warning. `None` with the locks,
    /// and for a pool with no file.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// assert_eq!(election.without_host_locks(), None); // a local disk
    /// # Ok(()) }
    /// ```
    pub fn without_host_locks(&self) -> Option<&str> {
        self.inner.no_host_locks.as_deref()
    }

    /// Which store keeps this election's state: the device and inode of
    /// the database file, the same through every path that reaches it (a
    /// bind mount of its directory, a symlink). A database with no file
    /// (in memory) is its own store, told apart from every other by the
    /// process and the pool.
    ///
    /// Cancel safety: cancel safe (a read). Failure model: the database
    /// cannot be read, or its file has a second name
    /// ([`Error::SecondName`]).
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// // The same file through a symlink of its directory: the same store.
    /// std::os::unix::fs::symlink(tmp.path(), tmp.path().with_extension("link"))?;
    /// let linked = SqliteElection::open(
    ///     tmp.path().with_extension("link").join("app.db"),
    ///     SqliteOptions::default(),
    /// ).await?;
    /// assert_eq!(election.store_id().await?, linked.store_id().await?);
    /// # std::fs::remove_file(tmp.path().with_extension("link"))?;
    /// # Ok(()) }
    /// ```
    pub async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        if let Some(db) = &self.inner.db_file {
            return Ok(db.store_id());
        }
        let mut conn = self.inner.pool.acquire().await?;
        Ok(match crate::store::context::DbFile::of(&mut conn).await? {
            Some(db) => db.store_id(),
            None => election_core::StoreId::new(
                "sqlite",
                format_args!(
                    "memory,pid={},pool={:p}",
                    std::process::id(),
                    std::sync::Arc::as_ptr(&self.inner)
                ),
            ),
        })
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
        let (name, identity) = (ElectionName::new(name)?, Identity::new(identity)?);
        Ok(SqliteClaim::new(self.inner.clone(), name, identity))
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
    /// engine drives every key through [`SqliteKeyedClaims`]' batch steps: each
    /// renewal interval costs one write
    /// transaction however many keys are held; [`guard`](LeaseSet::guard)'s
    /// commit-point check is one conditional renewal of the key's row (see
    /// [`SqliteClaim`]'s `confirm`). For another poll interval, build the
    /// set from [`SqliteKeyedClaims::with_poll_interval`] and [`LeaseSet::new`].
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
    /// use election_sqlite::{SqliteElection, SqliteOptions};
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
    ///     election.fence().advance_in(&mut tx, &shard, Token::from(&token)).await?;
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
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<SqliteKeyedClaims>, Error> {
        let identity = election_sql::lease_set_identity(identity)?;
        Ok(LeaseSet::new(SqliteKeyedClaims::new(self, identity)))
    }
}

impl SqliteElection {
    /// Who leads election `name` now (the holder of its lease row), or
    /// `None`: the same read as [`Claim::leader`] on any candidate's claim,
    /// without one. A row whose lease ran out but was not taken over yet
    /// still names its holder (a contender waits a full TTL first), with
    /// its last renewal: [`Leader::presumed_dead_at`] tells, for display.
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

impl SqliteElection {
    /// Revokes the current term of election `name` on behalf of `by`
    /// ([`Election::revoke`](election_core::Election::revoke), ADR 0111):
    /// one `BEGIN IMMEDIATE` transaction writes the lease row as held by
    /// the revocation in the next epoch (recorded in `election_epochs`),
    /// with a nonce no attempt has, so the holder's next renewal (on its
    /// nonce and epoch) fails and its term is lost; contenders wait a full
    /// TTL (the longest of the row's, the record's and this handle's)
    /// before they take it, as after a holder that stopped renewing. The
    /// high-water marks of `fences` (this database's `election_fences`,
    /// [`SqliteFence`](crate::SqliteFence)) are raised to the revocation's
    /// epoch in the same transaction. `Ok(None)`: no term holds the name.
    ///
    /// Cancel safety: cancelled before it returns, the transaction may
    /// have committed or not. Failure model: as a claim's
    /// (`Unavailable`, `Corrupt`, [`election_core::ConfigError::EpochExhausted`]).
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// let revoked = election
    ///     .revoke_fencing("jobs", &Identity::new("ops")?, &["orders"])
    ///     .await?
    ///     .expect("a term held it");
    /// assert_eq!(revoked.deposed.epoch, term.epoch());
    /// assert!(revoked.revocation.epoch > term.epoch());
    /// assert_eq!(election.leader("jobs").await?, None);
    /// # Ok(()) }
    /// ```
    pub async fn revoke_fencing(
        &self,
        name: &str,
        by: &Identity,
        fences: &[&str],
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let core = |e: Error| e.into_core(&name_);
        let inner = &self.inner;
        inner.check_in_place().map_err(core)?;
        let wall_ms = inner.clock.wall_unix_ms();
        let done = crate::store::row::revoke(
            &inner.pool,
            name,
            &election_sql::lease_row::revoked_by(by),
            inner.options.times.ttl_ms(),
            wall_ms,
            fences,
        )
        .await
        .map_err(core)?;
        let Some(done) = done else { return Ok(None) };
        election_sql::lease_row::revoked(&done.deposed, done.epoch, by, wall_ms)
            .map_err(|e| core(Error::from(e)))?
            .map(|r| Some(r.counted(&name_, "sqlite")))
            .ok_or_else(|| {
                core(Error::CorruptRow {
                    name: name.to_owned(),
                    detail: format!("a revoked row of epoch {}", done.epoch),
                })
            })
    }

    /// The revocation the lease row of `name` shows, until the next term
    /// ([`Election::revocation`](election_core::Election::revocation)).
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// assert_eq!(election.revocation("jobs").await?, None);
    /// # Ok(()) }
    /// ```
    pub async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let row = crate::store::row::read(&self.inner.pool, name, self.inner.values)
            .await
            .map_err(|e| e.into_core(&name_))?;
        Ok(row.and_then(|r| r.revocation()))
    }
}

impl SqliteElection {
    /// Asks the holder of `name`'s current term, on behalf of `by`, to
    /// hand it to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer),
    /// ADR 0112): one autocommit `UPDATE` stores the request beside the
    /// term in the lease row (`transfer_to`, `transfer_by`, `transfer_at`
    /// and the term's epoch as `transfer_epoch`), only while a term holds
    /// it; the holder's next renewal reads it (within one renew interval)
    /// and its term reports it
    /// ([`Term::transfer_requested`](election_core::Term::transfer_requested)).
    /// Nothing the holder's writes are conditional on changes. `Ok(None)`:
    /// no term holds the name (released, revoked, handed over).
    ///
    /// Cancel safety: cancelled before it returns, the request may have
    /// been stored or not; asking again is safe. Failure model:
    /// `Unavailable` (busy past the busy timeout, I/O), `Config` for a
    /// read-only database or one replaced since it was opened.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// let term = election.candidate("jobs", "web-1")?.campaign().await?;
    /// let (to, by) = (Identity::new("web-2")?, Identity::new("deploy")?);
    /// let asked = election.request_transfer("jobs", &to, &by).await?.expect("a term holds it");
    /// assert_eq!(asked.epoch, term.epoch());
    /// let heard = term.transfer_requested().await; // at the holder's next renewal
    /// term.transfer(&heard.to, std::time::Duration::from_secs(15)).await?;
    /// assert_eq!(election.handover("jobs").await?.map(|h| h.to), Some(to));
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
    /// async fn say_preferred(election: &election_sqlite::SqliteElection) -> Result<(), election_core::Error> {
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
        let inner = &self.inner;
        inner.check_in_place().map_err(core)?;
        let wall_ms = inner.clock.wall_unix_ms();
        let epoch = crate::store::row::request_transfer(&inner.pool, name, to, by, wall_ms)
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
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
    /// assert_eq!(election.handover("jobs").await?, None);
    /// # Ok(()) }
    /// ```
    pub async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let row = crate::store::row::read(&self.inner.pool, name, self.inner.values)
            .await
            .map_err(|e| e.into_core(&name_))?;
        let now = self.inner.clock.wall_unix_ms();
        Ok(row.and_then(|r| r.handover_at(now)))
    }
}

impl election_core::Election for SqliteElection {
    type Claim = SqliteClaim;
    type LeaseSet = LeaseSet<SqliteKeyedClaims>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<SqliteClaim, Error> {
        SqliteElection::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        SqliteElection::leader(self, name).await
    }

    async fn lease_set(&self, identity: &str) -> Result<LeaseSet<SqliteKeyedClaims>, Error> {
        SqliteElection::lease_set(self, identity).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        SqliteElection::store_id(self).await
    }

    async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        self.revoke_fencing(name, by, &[]).await
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        SqliteElection::revocation(self, name).await
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        SqliteElection::request_transfer(self, name, to, by).await
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        SqliteElection::prefer(self, name, candidate, priority).await
    }

    async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        SqliteElection::handover(self, name).await
    }
}

impl election_sql::ElectionStore<SqliteStore> for SqliteElection {
    fn store(&self) -> &Arc<SqliteStore> {
        &self.inner
    }
}
