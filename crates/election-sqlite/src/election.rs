//! [`SqliteElection`]: elections in one SQLite database, and the
//! [`SqliteClaim`] of one candidate.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use election_core::{
    Candidate, Claim, ConfigError, ElectionName, End, Epoch, Identity, Leader, LeaseSet,
    LossReporter, Watch, Won,
};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::clock::{Clock, SystemClock};
use crate::row::{self, ClaimWrite, Found, Observed};
use crate::{Error, SqliteLeases, SqliteOptions, renewal, schema};

/// The database file a leader checks is still in place: its path and inode.
#[derive(Clone, Debug)]
pub(crate) struct DbFile {
    pub(crate) path: PathBuf,
    dev: u64,
    ino: u64,
}

impl DbFile {
    /// True while `path` still names the file the pool has open.
    pub(crate) fn in_place(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino)
    }
}

impl Inner {
    /// `Err` (and a loud log line) if the database file this pool has open
    /// is no longer the file at its path: a claim made through it would be
    /// made in a database nobody else sees.
    pub(crate) fn check_in_place(&self) -> Result<(), Error> {
        match &self.db_file {
            Some(db) if !db.in_place() => {
                tracing::error!(path = %db.path.display(), "the database file was deleted or replaced after it was opened: no claim is made through it; reopen it (epochs in a replaced file can repeat)");
                Err(Error::FileReplaced {
                    path: db.path.clone(),
                })
            }
            _ => Ok(()),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: SqlitePool,
    pub(crate) options: SqliteOptions,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) db_file: Option<DbFile>,
}

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
    pub(crate) inner: Arc<Inner>,
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
    /// busy database [`Error::Busy`] after the busy timeout.
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions, Error};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let err = SqliteElection::open(tmp.path(), SqliteOptions::default()).await.unwrap_err();
    /// assert!(matches!(err, Error::NotAFile { .. }));
    /// # }
    /// ```
    pub async fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, Error> {
        let path = path.as_ref();
        let not_a_file = |source| Error::NotAFile {
            path: path.to_owned(),
            source,
        };
        if path.as_os_str().is_empty() || path.is_dir() {
            return Err(not_a_file(None));
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && !parent.is_dir()
        {
            return Err(not_a_file(None));
        }
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(options.busy_timeout());
        // Several processes opening a new database at once race to switch
        // it to WAL and to create the tables; the loser sees "busy" at once
        // (the switch does not wait on the busy timeout). Try again for a
        // few busy timeouts before giving up.
        let give_up = std::time::Instant::now() + options.busy_timeout() * 5;
        loop {
            let opened = async {
                let pool = SqlitePoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(options.busy_timeout() * 4)
                    .connect_with(connect.clone())
                    .await
                    .map_err(|e| match Error::from(e) {
                        Error::NotAFile { source, .. } => not_a_file(source),
                        other => other,
                    })?;
                Self::with_pool(pool, options).await
            }
            .await;
            match opened {
                Err(e) if e.is_busy() && std::time::Instant::now() < give_up => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                other => return other,
            }
        }
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
    /// [`Error::SchemaTooNew`]; a busy database [`Error::Busy`].
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions, Error};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let missing = tmp.path().join("typo.db");
    /// let err = SqliteElection::open_read_only(&missing, SqliteOptions::default()).await.unwrap_err();
    /// assert!(matches!(err, Error::NotAFile { .. }));
    /// assert!(!missing.exists());
    /// # }
    /// ```
    pub async fn open_read_only(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Option<Self>, Error> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(Error::NotAFile {
                path: path.to_owned(),
                source: None,
            });
        }
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(options.busy_timeout());
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.busy_timeout() * 4)
            .connect_with(connect)
            .await
            .map_err(|e| match Error::from(e) {
                Error::NotAFile { source, .. } => Error::NotAFile {
                    path: path.to_owned(),
                    source,
                },
                other => other,
            })?;
        let version: Option<i64> = match sqlx::query_scalar(
            "SELECT value FROM election_meta WHERE key = 'schema_version'",
        )
        .fetch_optional(&pool)
        .await
        {
            Ok(v) => v,
            // No election_meta table: no election has run here. Any other
            // failure (not a database, damaged) is the error it is.
            Err(e) => {
                let tables: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM sqlite_schema WHERE name = 'election_meta'",
                )
                .fetch_one(&pool)
                .await?;
                if tables == 0 {
                    return Ok(None);
                }
                return Err(e.into());
            }
        };
        match version {
            None => return Ok(None),
            Some(v) if v > schema::SCHEMA_VERSION => {
                return Err(Error::SchemaTooNew {
                    found: v,
                    supported: schema::SCHEMA_VERSION,
                });
            }
            Some(_) => {}
        }
        Ok(Some(SqliteElection {
            inner: Arc::new(Inner {
                pool,
                options,
                clock: Arc::new(SystemClock),
                db_file: None,
            }),
        }))
    }

    /// Uses the application's own pool (its connections should use WAL and
    /// `synchronous = FULL` as [`open`](SqliteElection::open) sets them, and a
    /// busy timeout). Creates or migrates the election tables.
    ///
    /// Cancel safety and failure model as [`open`](SqliteElection::open).
    ///
    /// ```
    /// # use election_sqlite::{SqliteElection, SqliteOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", tmp.path().join("app.db").display())).await?;
    /// sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)").execute(&pool).await?;
    /// let election = SqliteElection::with_pool(pool, SqliteOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn with_pool(pool: SqlitePool, options: SqliteOptions) -> Result<Self, Error> {
        let mut conn = pool.acquire().await?;
        schema::migrate(&mut conn).await?;
        let file: Option<String> =
            sqlx::query_scalar("SELECT file FROM pragma_database_list WHERE name = 'main'")
                .fetch_optional(&mut *conn)
                .await?;
        drop(conn);
        let db_file = file.filter(|f| !f.is_empty()).and_then(|f| {
            let m = std::fs::metadata(&f).ok()?;
            Some(DbFile {
                path: PathBuf::from(f),
                dev: m.dev(),
                ino: m.ino(),
            })
        });
        Ok(SqliteElection {
            inner: Arc::new(Inner {
                pool,
                options,
                clock: Arc::new(SystemClock),
                db_file,
            }),
        })
    }

    /// Uses `clock` instead of the system's clocks (for tests).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        let inner = &self.inner;
        SqliteElection {
            inner: Arc::new(Inner {
                pool: inner.pool.clone(),
                options: inner.options,
                clock,
                db_file: inner.db_file.clone(),
            }),
        }
    }

    /// The pool, for the application's own queries and for
    /// [`SqliteFence`](crate::SqliteFence).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// The lease timings.
    pub fn options(&self) -> SqliteOptions {
        self.inner.options
    }

    /// The claim of candidate `identity` in election `name`.
    pub fn claim(&self, name: &str, identity: &str) -> Result<SqliteClaim, Error> {
        Ok(SqliteClaim {
            inner: self.inner.clone(),
            name: ElectionName::new(name)?,
            identity: Identity::new(identity)?,
        })
    }

    /// A [`Candidate`] for [`claim`](SqliteElection::claim).
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<SqliteClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// A [`LeaseSet`] of this process (`identity`) over this database: many
    /// keys, one lease row each, with this election's
    /// [options](SqliteElection::options) and the core's
    /// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL)
    /// (how often the keys held elsewhere are looked at). One loop serves
    /// every key ([`SqliteLeases`]): each renewal interval costs one write
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
    /// let set = election.lease_set("node-a")?;
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
    pub fn lease_set(&self, identity: &str) -> Result<LeaseSet<SqliteLeases>, Error> {
        let identity = Identity::new(identity)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::BadSetting {
                setting: "runtime",
                reason: "a lease set must be started inside a tokio runtime".into(),
            }
            .into());
        }
        Ok(LeaseSet::new(SqliteLeases::new(self, identity)))
    }
}

/// The claim of one candidate in a [`SqliteElection`].
///
/// How a term ends: resign releases the row (conditional on this attempt's
/// nonce); a drop (or a cancelled or failed step that may have committed a
/// claim) starts the same release in the background on the current tokio
/// runtime; if it cannot run, the lease ages out after its TTL. A contender
/// on another process learns of a release at its next poll (the
/// candidate's poll interval).
#[derive(Debug)]
pub struct SqliteClaim {
    inner: Arc<Inner>,
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
        })
    }

    /// One `BEGIN IMMEDIATE` transaction: wins a released or never-held
    /// lease, or one whose holder, epoch and renewal version this attempt
    /// has seen unchanged for a full TTL (a vanished row: seen gone for a
    /// full TTL), with the next epoch written to the lease row and the
    /// epoch state. A database busy past the busy timeout counts as "not
    /// now" (`Ok(None)`); a name whose next epoch would be above
    /// [`Epoch::MAX`] is [`ConfigError::EpochExhausted`] (nothing written);
    /// a database file deleted or replaced since it was opened is
    /// [`Error::FileReplaced`] (as a configuration error).
    async fn try_claim(
        &self,
        attempt: &mut SqliteAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let inner = &self.inner;
        inner.check_in_place().map_err(|e| self.core(e))?;
        let sent = inner.clock.now();
        let ttl = inner.options.ttl();
        let observed = &mut attempt.observed;
        let clock = &inner.clock;
        let decide = |found: &Found| row::may_claim(observed, found, ttl, clock.now());
        let may_hold = &mut attempt.may_hold;
        let won = row::claim(
            &inner.pool,
            ClaimWrite {
                name: self.name.as_str(),
                identity: self.identity.as_str(),
                nonce: attempt.nonce,
                ttl_ms: inner.options.ttl_ms(),
                wall_ms: inner.clock.wall_unix_ms(),
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
        let epoch = u64::try_from(epoch)
            .ok()
            .and_then(Epoch::new)
            .ok_or_else(|| {
                self.core(Error::CorruptRow {
                    name: self.name.to_string(),
                    detail: format!("won epoch {epoch}"),
                })
            })?;
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + inner.options.validity()),
        }))
    }

    /// Starts the renewal task (see [`SqliteElection`]).
    fn watch(
        &self,
        attempt: &mut SqliteAttempt,
        won: Won,
        reporter: LossReporter,
    ) -> Result<Watch, election_core::Error> {
        let valid_until = won
            .valid_until
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })?;
        Ok(Watch::task(tokio::spawn(renewal::renew_until_lost(
            self.inner.clone(),
            self.name.clone(),
            attempt.nonce,
            won.epoch,
            valid_until,
            reporter,
        ))))
    }

    /// The commit-point check: one conditional renewal. In one
    /// `BEGIN IMMEDIATE` transaction it bumps the row's renewal version only
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
    /// process opening the path gets another database); then the core
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
        if let Some(db) = &self.inner.db_file
            && !db.in_place()
        {
            return Err(not_held());
        }
        let bound = self.inner.options.validity();
        let renewal = row::renew(
            &self.inner.pool,
            self.name.as_str(),
            attempt.nonce,
            epoch,
            self.inner.clock.wall_unix_ms(),
        );
        match tokio::time::timeout(bound, renewal).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(not_held()),
            Ok(Err(e)) => Err(self.core(e)),
            Err(_) => Err(self.core(Error::OutcomeUnknown { after: bound })),
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
            return;
        }
        let (pool, name) = (self.inner.pool.clone(), self.name.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if let Err(e) = row::release(&pool, name.as_str(), attempt.nonce).await {
                        tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
                    }
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
    /// [`Clock`](crate::Clock)) in the transaction that won the term.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        let row = row::read(&self.inner.pool, self.name.as_str())
            .await
            .map_err(|e| self.core(e))?;
        let Some(row) = row else { return Ok(None) };
        let (Some(holder), Some(epoch)) = (
            row.holder,
            u64::try_from(row.epoch).ok().and_then(Epoch::new),
        ) else {
            return Ok(None);
        };
        let identity = Identity::new(&holder).map_err(|e| self.core(e.into()))?;
        let since = row
            .acquired_unix_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .and_then(|ms| UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
        Ok(Some(Leader {
            identity,
            epoch,
            since,
        }))
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
        SqliteElection::lease_set(self, identity)
    }
}
