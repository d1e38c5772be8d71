//! The lease row and the epoch state: every read and write of
//! `election_leases` and `election_epochs`, each write one transaction:
//! a claim one `BEGIN IMMEDIATE` transaction, a renewal or a release one
//! autocommit statement (ADR 0035).

use election_core::{ConfigError, Epoch};
use election_sql::Heartbeat;
use sqlx::{SqliteConnection, SqlitePool};

use crate::error::Error;

pub(crate) use election_sql::lease_row::{Asked, Found, Observed, Recorded, Row, may_claim_as};

/// An epoch as stored (an SQLite `INTEGER`), decoded
/// ([`decode_epoch`](election_sql::lease_row::decode_epoch)): one outside
/// [`Epoch::UNGUARDED`]..=[`Epoch::MAX`] is a corrupt row of `name`.
pub(crate) fn epoch_of(name: &str, epoch: i64) -> Result<Epoch, Error> {
    election_sql::lease_row::decode_epoch(epoch).ok_or_else(|| Error::CorruptRow {
        name: name.to_owned(),
        detail: format!("epoch {epoch}"),
    })
}

/// The epoch after the larger of the lease row's (`lease_epoch`) and the
/// recorded one: never below [`Epoch::FIRST`], and
/// [`ConfigError::EpochExhausted`] past [`Epoch::MAX`] (nothing is written
/// then).
pub(crate) fn next_epoch(
    lease_epoch: Option<i64>,
    recorded: Option<Recorded>,
) -> Result<i64, Error> {
    let highest = lease_epoch
        .into_iter()
        .chain(recorded.map(|r| r.epoch))
        .max()
        .and_then(|e| u64::try_from(e).ok())
        .and_then(Epoch::new);
    let next = Epoch::after(highest)?;
    i64::try_from(next.get()).map_err(|_| Error::Config(ConfigError::EpochExhausted))
}

/// The fields a winning claim writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClaimWrite<'a> {
    pub(crate) name: &'a str,
    pub(crate) identity: &'a str,
    pub(crate) nonce: i64,
    pub(crate) ttl_ms: i64,
    pub(crate) wall_ms: i64,
    /// The same-host lock this attempt holds now, if any (ADR 0026):
    /// `<boot id>/<st_dev>/<st_ino>` of its locked file.
    pub(crate) lock: Option<&'a str>,
}

/// A statement of this module, with its bound values so far.
type Statement<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

impl<'a> ClaimWrite<'a> {
    /// Binds `?1` to `?7` of a winning write: name, holder, nonce, `epoch`,
    /// TTL, wall clock, lock id.
    fn bind(self, query: Statement<'a>, epoch: i64) -> Statement<'a> {
        query
            .bind(self.name)
            .bind(self.identity)
            .bind(self.nonce)
            .bind(epoch)
            .bind(self.ttl_ms)
            .bind(self.wall_ms)
            .bind(self.lock.map(|l| lock_id(self.nonce, l)))
    }
}

/// The `lock_id` a term's winner writes: its attempt's nonce and the lock
/// it holds (ADR 0026).
pub(crate) fn lock_id(nonce: i64, lock: &str) -> String {
    format!("{nonce}/{lock}")
}

/// Runs the one write `statement` as a transaction of its own (SQLite's
/// autocommit): `Ok(true)` if it changed exactly one row. A write
/// statement outside a transaction takes the write lock before it reads
/// (waiting on the busy timeout, as `BEGIN IMMEDIATE` does) and commits
/// before it answers: the same atomic step as `BEGIN IMMEDIATE`, the
/// statement and `COMMIT`, in one round trip to the connection's worker
/// thread instead of three (a release is on the path of every clean
/// handover).
async fn changes_one_row(pool: &SqlitePool, statement: Statement<'_>) -> Result<bool, Error> {
    let done = statement.execute(pool).await?;
    Ok(done.rows_affected() == 1)
}

fn check(name: &str, row: Row) -> Result<Row, Error> {
    let corrupt = |detail: String| Error::CorruptRow {
        name: name.to_owned(),
        detail,
    };
    if row.epoch < 0 || (row.epoch == 0 && row.holder.is_some()) {
        return Err(corrupt(format!(
            "epoch {} with holder {:?}",
            row.epoch, row.holder
        )));
    }
    if row.ttl_ms <= 0 {
        return Err(corrupt(format!("ttl_ms {}", row.ttl_ms)));
    }
    Ok(row)
}

type RawRow = (Option<String>, i64, i64, i64, Option<i64>, Option<i64>);

/// A read of the leader as stored: [`RawRow`] and the value.
type LeaderRow = (
    Option<String>,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

/// A read of the leader: the row and the value of its current term
/// (ADR 0068).
const SELECT: &str = "SELECT holder, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms,
                             CASE WHEN value_epoch = epoch THEN value END
                      FROM election_leases WHERE name = ?1";

/// [`SELECT`] for a database without the value columns (opened read-only,
/// never opened by a version that adds them).
const SELECT_WITHOUT_VALUES: &str = "SELECT holder, epoch, version, ttl_ms, acquired_unix_ms,
                                            renewed_unix_ms, NULL
                                     FROM election_leases WHERE name = ?1";

fn row((holder, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms): RawRow) -> Row {
    Row {
        holder,
        epoch,
        version,
        ttl_ms,
        acquired_unix_ms,
        renewed_unix_ms,
        value: None,
    }
}

/// Reads the row of `name`.
/// `values`: whether the table has the value columns.
pub(crate) async fn read(
    pool: &SqlitePool,
    name: &str,
    values: bool,
) -> Result<Option<Row>, Error> {
    let select = if values {
        SELECT
    } else {
        SELECT_WITHOUT_VALUES
    };
    // On a connection given back to the pool before this returns (not
    // from a task spawned by its drop): a claim right after the read (as
    // `elect run`'s, after its probe) finds it idle instead of opening a
    // second connection (ADR 0072).
    let mut conn = pool.acquire().await?;
    let raw: Option<LeaderRow> = sqlx::query_as(select)
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    conn.return_to_pool().await;
    raw.map(
        |(holder, epoch, version, ttl_ms, acquired, renewed, value)| Row {
            value,
            ..row((holder, epoch, version, ttl_ms, acquired, renewed))
        },
    )
    .map(|r| check(name, r))
    .transpose()
}

/// Reads the epoch state of `name`.
async fn read_recorded(conn: &mut SqliteConnection, name: &str) -> Result<Option<Recorded>, Error> {
    let raw: Option<(i64, i64)> =
        sqlx::query_as("SELECT epoch, ttl_ms FROM election_epochs WHERE name = ?1")
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
    recorded(name, raw)
}

/// Checks the epoch state `raw` (`(epoch, ttl_ms)`) read for `name`.
fn recorded(name: &str, raw: Option<(i64, i64)>) -> Result<Option<Recorded>, Error> {
    match raw {
        Some((epoch, ttl_ms)) if epoch < 0 || ttl_ms <= 0 => Err(Error::CorruptRow {
            name: name.to_owned(),
            detail: format!("recorded epoch {epoch} with ttl_ms {ttl_ms}"),
        }),
        Some((epoch, ttl_ms)) => Ok(Some(Recorded { epoch, ttl_ms })),
        None => Ok(None),
    }
}

/// Inside the caller's transaction: wins `w.name` in term `epoch`, only
/// if its lease row is still as `seen` (`(version, epoch)`; `None`: there
/// was no row), and records `epoch` in the epoch state in the same
/// transaction. `Ok(false)`: the row changed, or the epoch state was not
/// raised; the caller then rolls the transaction back (whatever either
/// statement wrote goes with it).
///
/// Both writes go in one round trip to the connection's worker thread: the
/// epoch write runs only if the lease write changed its row
/// (`changes() = 1`), so exactly two changed rows means both were written.
async fn win(
    conn: &mut SqliteConnection,
    w: ClaimWrite<'_>,
    seen: Option<(i64, i64)>,
    epoch: i64,
) -> Result<bool, Error> {
    // The epoch state, written only after the lease write changed its row
    // (?1 the name, ?4 the epoch, ?5 the TTL, as `ClaimWrite::bind` binds
    // them).
    macro_rules! and_record {
        ($lease_write:literal) => {
            concat!(
                $lease_write,
                ";
                 INSERT INTO election_epochs (name, epoch, ttl_ms)
                 SELECT ?1, ?4, ?5 WHERE changes() = 1
                 ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch, ttl_ms = excluded.ttl_ms
                 WHERE excluded.epoch > election_epochs.epoch"
            )
        };
    }
    let written = match seen {
        None => w.bind(
            sqlx::query(and_record!(
                "INSERT INTO election_leases
                   (name, holder, nonce, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms, lock_id)
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?6, ?7)
                 ON CONFLICT (name) DO NOTHING"
            )),
            epoch,
        ),
        Some((seen_version, seen_epoch)) => w
            .bind(
                sqlx::query(and_record!(
                    "UPDATE election_leases
                     SET holder = ?2, nonce = ?3, epoch = ?4, version = version + 1,
                         ttl_ms = ?5, acquired_unix_ms = ?6, renewed_unix_ms = ?6, lock_id = ?7,
                         heartbeat = NULL, heartbeat_nonce = NULL
                     WHERE name = ?1 AND version = ?8 AND epoch = ?9"
                )),
                epoch,
            )
            .bind(seen_version)
            .bind(seen_epoch),
    }
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(written == 2)
}

/// In one `BEGIN IMMEDIATE` transaction: reads the lease row and the epoch
/// state and, if `decide` says so, wins the name with the next epoch
/// ([`next_epoch`]), writing the lease row and the epoch state in the same
/// transaction (rule 1). `decide` sees what was found and answers whether
/// to take it. Returns the epoch won, or `None`.
///
/// Failure model: [`ConfigError::EpochExhausted`] (as [`Error::Config`])
/// if the next epoch would be above [`Epoch::MAX`]; nothing is written.
///
/// `before_commit` runs after the winning write and before the commit, so
/// the caller can note that a claim may be committed (the commit's outcome
/// is unknown if it fails or is cancelled).
pub(crate) async fn claim(
    pool: &SqlitePool,
    w: ClaimWrite<'_>,
    decide: impl FnOnce(&Found) -> bool,
    before_commit: impl FnOnce(),
) -> Result<Option<i64>, Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    // The lease row and the epoch state in one statement (one round trip
    // to the connection's worker thread instead of two).
    type Both = election_sql::lease_row::LeaseColumns<bool>;
    let (has_lease, holder, epoch, version, ttl_ms, acquired, rec_epoch, rec_ttl): Both =
        sqlx::query_as(
            "SELECT l.name IS NOT NULL, l.holder, l.epoch, l.version, l.ttl_ms,
                    l.acquired_unix_ms, e.epoch, e.ttl_ms
             FROM (SELECT ?1 AS name) AS n
             LEFT JOIN election_leases AS l ON l.name = n.name
             LEFT JOIN election_epochs AS e ON e.name = n.name",
        )
        .bind(w.name)
        .fetch_one(&mut *tx)
        .await?;
    let lease = if has_lease {
        let (Some(epoch), Some(version), Some(ttl_ms)) = (epoch, version, ttl_ms) else {
            return Err(Error::CorruptRow {
                name: w.name.to_owned(),
                detail: "a NULL epoch, version or ttl_ms".to_owned(),
            });
        };
        Some(check(
            w.name,
            row((holder, epoch, version, ttl_ms, acquired, None)),
        )?)
    } else {
        None
    };
    let recorded = recorded(w.name, rec_epoch.zip(rec_ttl))?;
    if rec_epoch.is_some() != rec_ttl.is_some() {
        return Err(Error::CorruptRow {
            name: w.name.to_owned(),
            detail: "a NULL recorded epoch or ttl_ms".to_owned(),
        });
    }
    let found = Found::of(lease.as_ref(), recorded);
    if !decide(&found) && !holder_gone(&mut tx, w, &found).await? {
        tx.rollback().await?;
        return Ok(None);
    }
    let epoch = next_epoch(lease.as_ref().map(|r| r.epoch), recorded)?;
    let seen = lease.map(|r| (r.version, r.epoch));
    if !win(&mut tx, w, seen, epoch).await? {
        // Cannot happen inside one IMMEDIATE transaction; refuse rather
        // than guess.
        tx.rollback().await?;
        return Ok(None);
    }
    before_commit();
    tx.commit().await?;
    Ok(Some(epoch))
}

/// What a revocation committed: the row it ended and its epoch.
pub(crate) struct RevokedRow {
    /// The lease row as it was: the deposed holder's term.
    pub(crate) deposed: Row,
    /// The revocation's epoch.
    pub(crate) epoch: i64,
}

/// Revokes the term the lease row of `name` shows (ADR 0111), in one
/// `BEGIN IMMEDIATE` transaction: reads the row and the epoch state, and
/// if a term holds the row, writes it as held by the revocation `holder`
/// ([`revoked_by`](election_sql::lease_row::revoked_by)) with a fresh
/// `nonce` nobody's attempt has, the next epoch ([`next_epoch`]: rule 1's
/// machinery, recorded in `election_epochs` in the same transaction), the
/// longest TTL of the row, the record and `ttl_ms`, no same-host lock and
/// no heartbeat; then raises the high-water mark of every resource of
/// `fences` in `election_fences` to that epoch, in the same transaction.
/// `Ok(None)`: no term holds the row (nothing written).
pub(crate) async fn revoke(
    pool: &SqlitePool,
    name: &str,
    holder: &str,
    ttl_ms: i64,
    wall_ms: i64,
    fences: &[&str],
) -> Result<Option<RevokedRow>, Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    type Both = election_sql::lease_row::LeaseColumns<bool>;
    let (has_lease, held_by, epoch, version, row_ttl, acquired, rec_epoch, rec_ttl): Both =
        sqlx::query_as(
            "SELECT l.name IS NOT NULL, l.holder, l.epoch, l.version, l.ttl_ms,
                    l.acquired_unix_ms, e.epoch, e.ttl_ms
             FROM (SELECT ?1 AS name) AS n
             LEFT JOIN election_leases AS l ON l.name = n.name
             LEFT JOIN election_epochs AS e ON e.name = n.name",
        )
        .bind(name)
        .fetch_one(&mut *tx)
        .await?;
    let recorded = recorded(name, rec_epoch.zip(rec_ttl))?;
    let (true, Some(epoch), Some(version), Some(row_ttl)) = (has_lease, epoch, version, row_ttl)
    else {
        tx.rollback().await?;
        return Ok(None);
    };
    let deposed = check(
        name,
        row((held_by, epoch, version, row_ttl, acquired, None)),
    )?;
    let held = deposed
        .holder
        .as_deref()
        .is_some_and(election_sql::lease_row::is_term_holder);
    if !held {
        tx.rollback().await?;
        return Ok(None);
    }
    let next = next_epoch(Some(deposed.epoch), recorded)?;
    let ttl_ms = ttl_ms
        .max(deposed.ttl_ms)
        .max(recorded.map_or(0, |r| r.ttl_ms));
    let w = ClaimWrite {
        name,
        identity: holder,
        nonce: election_core::attempt_nonce().cast_signed(),
        ttl_ms,
        wall_ms,
        lock: None,
    };
    if !win(&mut tx, w, Some((deposed.version, deposed.epoch)), next).await? {
        tx.rollback().await?;
        return Ok(None);
    }
    for resource in fences {
        sqlx::query(
            "INSERT INTO election_fences (resource, token) VALUES (?1, ?2)
             ON CONFLICT (resource) DO UPDATE SET token = excluded.token
             WHERE excluded.token > election_fences.token",
        )
        .bind(resource)
        .bind(next)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Some(RevokedRow {
        deposed,
        epoch: next,
    }))
}

/// The same-host takeover (ADR 0026): true if `found` shows a holder whose
/// `lock_id` names the very lock this attempt holds now (`w.lock`), with
/// the row's current nonce. That holder held the lock from before its win
/// until its attempt was closed (its term ended) or its process died, so
/// holding it now proves that holder's term is over.
async fn holder_gone(
    conn: &mut SqliteConnection,
    w: ClaimWrite<'_>,
    found: &Found,
) -> Result<bool, Error> {
    let (Some(lock), Found::Held { .. }) = (w.lock, found) else {
        return Ok(false);
    };
    let raw: Option<(Option<i64>, Option<String>)> =
        sqlx::query_as("SELECT nonce, lock_id FROM election_leases WHERE name = ?1")
            .bind(w.name)
            .fetch_optional(&mut *conn)
            .await?;
    let gone = matches!(raw, Some((Some(nonce), Some(id))) if id == lock_id(nonce, lock));
    if gone {
        tracing::info!(
            name = w.name,
            ?found,
            "the holder's same-host lock is free: its term ended or its process died; taking over without waiting out the TTL"
        );
    }
    Ok(gone)
}

/// Renews the lease of the term `hold` (its nonce and epoch): bumps the
/// renewal version. `Ok(false)` if the row no longer shows this term.
pub(crate) async fn renew(
    pool: &SqlitePool,
    hold: HeldRow<'_>,
    wall_ms: i64,
) -> Result<bool, Error> {
    let renew = sqlx::query(
        "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?4
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL",
    )
    .bind(hold.name)
    .bind(hold.nonce)
    .bind(hold.epoch)
    .bind(wall_ms);
    changes_one_row(pool, renew).await
}

/// [`renew`], which also reads the transfer request stored beside the
/// term (ADR 0112: only one stored in the row's epoch), in the same
/// autocommit statement. `Ok(None)` if the row no longer shows this term.
pub(crate) async fn renew_asked(
    pool: &SqlitePool,
    hold: HeldRow<'_>,
    wall_ms: i64,
) -> Result<Option<Option<Asked>>, Error> {
    type Raw = (Option<String>, Option<String>, Option<i64>);
    let renewed: Option<Raw> = sqlx::query_as(
        "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?4
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL
         RETURNING CASE WHEN transfer_epoch = epoch THEN transfer_to END,
                   CASE WHEN transfer_epoch = epoch THEN transfer_by END,
                   CASE WHEN transfer_epoch = epoch THEN transfer_at END",
    )
    .bind(hold.name)
    .bind(hold.nonce)
    .bind(hold.epoch)
    .bind(wall_ms)
    .fetch_optional(pool)
    .await?;
    Ok(renewed.map(|(to, by, at)| Asked::of(to, by, at)))
}

/// Hands the term `hold` over (ADR 0112), in one autocommit statement
/// conditional on its nonce and epoch (as [`release`] and [`renew`] are):
/// the row is then held by the pseudo-holder `holder`
/// ([`handed_to`](election_sql::lease_row::handed_to)) with no nonce, no
/// same-host lock and no heartbeat, the TTL `window_ms`, the term's epoch
/// (none is drawn: the successor's claim takes the next one), the renewal
/// version bumped and `acquired_unix_ms` the handing holder's wall clock.
/// Contenders wait it out for the window; the successor takes it at once.
/// `Ok(false)`: the row no longer shows this term (nothing written).
pub(crate) async fn release_to(
    pool: &SqlitePool,
    hold: HeldRow<'_>,
    holder: &str,
    window_ms: i64,
    wall_ms: i64,
) -> Result<bool, Error> {
    let hand = sqlx::query(
        "UPDATE election_leases
         SET holder = ?4, nonce = NULL, version = version + 1, ttl_ms = ?5,
             acquired_unix_ms = ?6, renewed_unix_ms = NULL, lock_id = NULL,
             heartbeat = NULL, heartbeat_nonce = NULL
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL",
    )
    .bind(hold.name)
    .bind(hold.nonce)
    .bind(hold.epoch)
    .bind(holder)
    .bind(window_ms)
    .bind(wall_ms);
    changes_one_row(pool, hand).await
}

/// Stores a request by `by` that the term the row of `name` shows be
/// handed to `to` (ADR 0112), with that term's epoch and `wall_ms`, in one
/// autocommit statement that applies only while a term holds the row (not
/// released, revoked or handed over): the epoch of the term asked, or
/// `None` (nothing written). Moves neither the renewal version nor
/// anything the holder's writes are conditional on.
pub(crate) async fn request_transfer(
    pool: &SqlitePool,
    name: &str,
    to: &str,
    by: &str,
    wall_ms: i64,
) -> Result<Option<i64>, Error> {
    Ok(sqlx::query_scalar(
        "UPDATE election_leases
         SET transfer_to = ?2, transfer_by = ?3, transfer_at = ?4, transfer_epoch = epoch
         WHERE name = ?1 AND holder IS NOT NULL AND substr(holder, 1, 1) <> char(1)
         RETURNING epoch",
    )
    .bind(name)
    .bind(to)
    .bind(by)
    .bind(wall_ms)
    .fetch_optional(pool)
    .await?)
}

/// Publishes `value` for the term `hold` (ADR 0068): the row's value and
/// the epoch it belongs to, only if the row still shows the attempt's nonce
/// and epoch with a holder (one autocommit statement). `Ok(false)`: it
/// does not; nothing was written.
pub(crate) async fn proclaim(
    pool: &SqlitePool,
    hold: HeldRow<'_>,
    value: &str,
) -> Result<bool, Error> {
    let proclaim = sqlx::query(
        "UPDATE election_leases SET value = ?4, value_epoch = ?3
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL",
    )
    .bind(hold.name)
    .bind(hold.nonce)
    .bind(hold.epoch)
    .bind(value);
    changes_one_row(pool, proclaim).await
}

/// How a release commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseSync {
    /// With the connection's own `synchronous` setting (an application's
    /// pool: its setting is its own).
    AsConnected,
    /// With `synchronous = NORMAL` for that one commit, then `FULL` again
    /// (a pool this crate opened with `FULL`, ADR 0072): the release is
    /// not waited on to reach the disk. A release lost in a power loss
    /// leaves the row held, and the lease then ages out as a crashed
    /// holder's does; a later `FULL` commit (the next claim) makes it
    /// durable with itself, since the WAL is synced in order. No epoch is
    /// written by a release, so none can be handed out twice.
    Relaxed,
}

/// Releases the lease of the attempt `nonce`, and only that one: a
/// successor's claim is never undone. `Ok(false)` if it no longer held it.
/// `sync`: see [`ReleaseSync`].
pub(crate) async fn release(
    pool: &SqlitePool,
    name: &str,
    nonce: i64,
    sync: ReleaseSync,
) -> Result<bool, Error> {
    let release = sqlx::query(
        "UPDATE election_leases SET holder = NULL, nonce = NULL, version = version + 1
         WHERE name = ?1 AND nonce = ?2 AND holder IS NOT NULL",
    )
    .bind(name)
    .bind(nonce);
    if sync == ReleaseSync::AsConnected {
        return changes_one_row(pool, release).await;
    }
    let mut conn = Relaxed::acquire(pool).await?;
    let done = release.execute(conn.relaxed().await?).await?;
    conn.restore().await?;
    Ok(done.rows_affected() == 1)
}

/// A pooled connection switched to `synchronous = NORMAL` for one
/// statement. Unless [`restore`](Relaxed::restore) set it back to `FULL`
/// (an error, a cancelled future), the connection is closed instead of
/// going back to the pool: no later claim, renewal or fence commit can
/// run on a connection that does not wait for the disk.
struct Relaxed {
    conn: sqlx::pool::PoolConnection<sqlx::Sqlite>,
}

impl Relaxed {
    async fn acquire(pool: &SqlitePool) -> Result<Relaxed, Error> {
        let mut conn = pool.acquire().await?;
        // Set before anything is sent: dropped at any point until
        // `restore` cleared it, the connection is closed.
        conn.close_on_drop();
        Ok(Relaxed { conn })
    }

    /// The connection, switched to `synchronous = NORMAL`.
    async fn relaxed(&mut self) -> Result<&mut SqliteConnection, Error> {
        sqlx::query("PRAGMA synchronous = NORMAL")
            .execute(&mut *self.conn)
            .await?;
        Ok(&mut self.conn)
    }

    /// Sets `synchronous = FULL` again and gives the connection back to
    /// the pool (at once, not from a task spawned by its drop).
    async fn restore(mut self) -> Result<(), Error> {
        sqlx::query("PRAGMA synchronous = FULL")
            .execute(&mut *self.conn)
            .await?;
        let full: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *self.conn)
            .await?;
        if full == 2 {
            self.conn.return_to_pool().await;
        }
        Ok(())
    }
}

/// How many keys one batch statement covers (three bound values each, well
/// under SQLite's limit on bound parameters).
const CHUNK: usize = 300;

/// `(?, ?, ?), (?, ?, ?), ...`: `rows` tuples of `width` placeholders.
fn tuples(rows: usize, width: usize) -> String {
    let one = format!("({})", vec!["?"; width].join(", "));
    vec![one; rows].join(", ")
}

/// What a contender read of one name: its lease row and its epoch state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    pub(crate) lease: Option<Row>,
    pub(crate) recorded: Option<Recorded>,
    /// The row's nonce and `lock_id` (ADR 0026), if it has them.
    pub(crate) lock: Option<(i64, String)>,
    /// The heartbeat the row's term names and its version, in the same read
    /// (ADR 0110): only a heartbeat written with the row's own nonce.
    pub(crate) heartbeat: Option<Heartbeat>,
}

impl Seen {
    /// The same-host takeover of a lease set (ADR 0026, ADR 0029): true if
    /// the row names a holder whose `lock_id` is the row's own nonce and
    /// exactly `lock`, the lock this set holds now on the key's file. That
    /// holder held the lock from before its win until its term ended or
    /// its process died, so holding it now proves its term is over.
    pub(crate) fn holder_gone(&self, lock: Option<&str>) -> bool {
        let held = self.lease.as_ref().is_some_and(|r| r.holder.is_some());
        match (lock, &self.lock) {
            (Some(lock), Some((nonce, id))) => held && *id == lock_id(*nonce, lock),
            _ => false,
        }
    }
}

/// Reads the lease rows and epoch state of `names` (names with neither
/// are absent from the result) in one read transaction (one snapshot),
/// without taking the write lock.
pub(crate) async fn read_many(
    pool: &SqlitePool,
    names: &[&str],
) -> Result<std::collections::HashMap<String, Seen>, Error> {
    let mut seen: std::collections::HashMap<String, Seen> =
        std::collections::HashMap::with_capacity(names.len());
    let mut tx = pool.begin().await?;
    for chunk in names.chunks(CHUNK) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let sql = format!(
            "SELECT l.name, l.holder, l.epoch, l.version, l.ttl_ms, l.acquired_unix_ms, l.nonce, l.lock_id,
                    m.id, m.version
             FROM election_leases l
             LEFT JOIN election_heartbeats m ON m.id = l.heartbeat AND l.heartbeat_nonce = l.nonce
             WHERE l.name IN ({marks})"
        );
        type Raw = (
            String,
            Option<String>,
            i64,
            i64,
            i64,
            Option<i64>,
            Option<i64>,
            Option<String>,
            Option<i64>,
            Option<i64>,
        );
        let mut query = sqlx::query_as::<_, Raw>(sqlx::AssertSqlSafe(sql));
        for name in chunk {
            query = query.bind(*name);
        }
        for (
            name,
            holder,
            epoch,
            version,
            ttl_ms,
            acquired,
            nonce,
            lock_id,
            heartbeat,
            heartbeat_version,
        ) in query.fetch_all(&mut *tx).await?
        {
            let found = check(&name, row((holder, epoch, version, ttl_ms, acquired, None)))?;
            let entry = seen.entry(name).or_default();
            entry.lease = Some(found);
            entry.lock = nonce.zip(lock_id);
            entry.heartbeat = heartbeat
                .zip(heartbeat_version)
                .map(|(id, version)| Heartbeat { id, version });
        }
        let sql =
            format!("SELECT name, epoch, ttl_ms FROM election_epochs WHERE name IN ({marks})");
        let mut query = sqlx::query_as::<_, (String, i64, i64)>(sqlx::AssertSqlSafe(sql));
        for name in chunk {
            query = query.bind(*name);
        }
        for (name, epoch, ttl_ms) in query.fetch_all(&mut *tx).await? {
            if epoch < 0 || ttl_ms <= 0 {
                return Err(Error::CorruptRow {
                    name,
                    detail: format!("recorded epoch {epoch} with ttl_ms {ttl_ms}"),
                });
            }
            seen.entry(name).or_default().recorded = Some(Recorded { epoch, ttl_ms });
        }
    }
    tx.commit().await?;
    Ok(seen)
}

pub(crate) use election_sql::HeldRow;

/// Renews every lease of `holds` in one `BEGIN IMMEDIATE` transaction, each
/// conditional on its nonce and epoch as [`renew`] is; returns the names
/// renewed (the others no longer show their term).
pub(crate) async fn renew_many(
    pool: &SqlitePool,
    holds: &[HeldRow<'_>],
    wall_ms: i64,
) -> Result<std::collections::HashSet<String>, Error> {
    let mut renewed = std::collections::HashSet::with_capacity(holds.len());
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    renew_in(&mut tx, holds, (wall_ms, None), &mut renewed).await?;
    tx.commit().await?;
    Ok(renewed)
}

/// The renewals of [`renew_many`], in the caller's transaction; a lease
/// set's (`heartbeat` given, ADR 0110) also names its heartbeat in each row
/// renewed, with the row's nonce.
async fn renew_in(
    conn: &mut SqliteConnection,
    holds: &[HeldRow<'_>],
    (wall_ms, heartbeat): (i64, Option<i64>),
    renewed: &mut std::collections::HashSet<String>,
) -> Result<(), Error> {
    for chunk in holds.chunks(CHUNK) {
        let sql = format!(
            "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?,
                    heartbeat = coalesce(?, heartbeat),
                    heartbeat_nonce = CASE WHEN ? IS NULL THEN heartbeat_nonce ELSE nonce END
             WHERE holder IS NOT NULL AND (name, nonce, epoch) IN (VALUES {})
             RETURNING name",
            tuples(chunk.len(), 3)
        );
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
            .bind(wall_ms)
            .bind(heartbeat)
            .bind(heartbeat);
        for h in chunk {
            query = query.bind(h.name).bind(h.nonce).bind(h.epoch);
        }
        renewed.extend(query.fetch_all(&mut *conn).await?);
    }
    Ok(())
}

/// Bumps the heartbeat `id` (ADR 0110), in the caller's transaction: one
/// version up, or written from a random version where it is missing (a
/// first bump, or deleted by hand).
async fn beat(conn: &mut SqliteConnection, id: i64, wall_ms: i64) -> Result<(), Error> {
    sqlx::query(
        "INSERT INTO election_heartbeats (id, version, beat_unix_ms)
         VALUES (?1, (random() & 4611686018427387903) + 1, ?2)
         ON CONFLICT (id) DO UPDATE SET version = version + 1, beat_unix_ms = excluded.beat_unix_ms",
    )
    .bind(id)
    .bind(wall_ms)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// [`renew_many`] for a lease set whose heartbeat is `heartbeat` (ADR 0110):
/// the rows renewed name it, and in the same transaction it is bumped and
/// every heartbeat listed. A claim names none: a row is taken by heartbeat
/// only once a renewal named it, and every renewal since bumped it.
pub(crate) async fn renew_with_heartbeat(
    pool: &SqlitePool,
    holds: &[HeldRow<'_>],
    heartbeat: i64,
    wall_ms: i64,
) -> Result<(std::collections::HashSet<String>, Vec<Heartbeat>), Error> {
    let mut renewed = std::collections::HashSet::with_capacity(holds.len());
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    renew_in(&mut tx, holds, (wall_ms, Some(heartbeat)), &mut renewed).await?;
    beat(&mut tx, heartbeat, wall_ms).await?;
    let heartbeats = sqlx::query_as::<_, (i64, i64)>("SELECT id, version FROM election_heartbeats")
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(id, version)| Heartbeat { id, version })
        .collect();
    tx.commit().await?;
    Ok((renewed, heartbeats))
}

/// Deletes the heartbeat `id` of a lease set that closed, and every heartbeat not
/// bumped since `stale_before_ms` (a set that crashed) (ADR 0110).
pub(crate) async fn stop_heartbeat(
    pool: &SqlitePool,
    id: i64,
    stale_before_ms: i64,
) -> Result<(), Error> {
    sqlx::query("DELETE FROM election_heartbeats WHERE id = ?1 OR beat_unix_ms < ?2")
        .bind(id)
        .bind(stale_before_ms)
        .execute(pool)
        .await?;
    Ok(())
}

/// Releases every lease of `holds` in one `BEGIN IMMEDIATE` transaction,
/// each conditional on its nonce as [`release`] is.
pub(crate) async fn release_many(pool: &SqlitePool, holds: &[HeldRow<'_>]) -> Result<(), Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    for chunk in holds.chunks(CHUNK) {
        let sql = format!(
            "UPDATE election_leases SET holder = NULL, nonce = NULL, version = version + 1
             WHERE holder IS NOT NULL AND (name, nonce) IN (VALUES {})",
            tuples(chunk.len(), 2)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for h in chunk {
            query = query.bind(h.name).bind(h.nonce);
        }
        query.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// One claim of a batch: the key, the new attempt's nonce, and what the
/// claimant last read of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Take<'a> {
    pub(crate) name: &'a str,
    pub(crate) nonce: i64,
    /// `(version, epoch)` of the lease row as read; `None`: no row.
    pub(crate) seen: Option<(i64, i64)>,
    /// The recorded epoch as read; `None`: none.
    pub(crate) recorded: Option<i64>,
    /// The same-host lock the claimant holds on the key's file, if any
    /// (ADR 0026): `<boot id>/<st_dev>/<st_ino>`, written as `lock_id`.
    pub(crate) lock: Option<&'a str>,
    /// A take by the holder's heartbeat (ADR 0110): the heartbeat and the version it
    /// must still show in the claim's transaction.
    pub(crate) by_heartbeat: Option<Heartbeat>,
}

/// What a batch of claims did.
#[derive(Debug, Default)]
pub(crate) struct Claimed {
    /// The epoch won, per name.
    pub(crate) won: Vec<(String, i64)>,
    /// The names whose next epoch would be above [`Epoch::MAX`]: refused,
    /// nothing written for them.
    pub(crate) exhausted: Vec<String>,
}

/// Claims every lease of `takes` in one `BEGIN IMMEDIATE` transaction. Each
/// claim wins only if the lease row and the epoch state are still exactly
/// as its claimant read them, and writes its epoch ([`next_epoch`]) to the
/// lease row and the epoch state in the same transaction (rule 1). A name
/// that changed since it was read is in neither list of the result.
///
/// `before_commit` runs after the winning writes and before the commit:
/// from there on the claims' outcome is unknown if the commit fails.
pub(crate) async fn claim_many(
    pool: &SqlitePool,
    takes: &[Take<'_>],
    identity: &str,
    ttl_ms: i64,
    wall_ms: i64,
    before_commit: impl FnOnce(),
) -> Result<Claimed, Error> {
    let mut claimed = Claimed::default();
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    for t in takes {
        let recorded = read_recorded(&mut tx, t.name).await?;
        if recorded.map(|r| r.epoch) != t.recorded {
            continue;
        }
        if let Some(m) = t.by_heartbeat {
            // Taken by heartbeat: only while the heartbeat still shows the version
            // seen unchanged for a full TTL (the row's own version is
            // checked by the write below).
            let now: Option<i64> =
                sqlx::query_scalar("SELECT version FROM election_heartbeats WHERE id = ?1")
                    .bind(m.id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if now != Some(m.version) {
                continue;
            }
        }
        let epoch = match next_epoch(t.seen.map(|(_, e)| e), recorded) {
            Ok(epoch) => epoch,
            Err(Error::Config(ConfigError::EpochExhausted)) => {
                claimed.exhausted.push(t.name.to_owned());
                continue;
            }
            Err(e) => return Err(e),
        };
        let w = ClaimWrite {
            name: t.name,
            identity,
            nonce: t.nonce,
            ttl_ms,
            wall_ms,
            lock: t.lock,
        };
        if win(&mut tx, w, t.seen, epoch).await? {
            claimed.won.push((t.name.to_owned(), epoch));
        }
    }
    if claimed.won.is_empty() {
        tx.rollback().await?;
        return Ok(claimed);
    }
    before_commit();
    tx.commit().await?;
    Ok(claimed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::context::SqliteStore;

    /// A fresh database with the default options (the directory keeps it).
    async fn context() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::options::SqliteOptions::default();
        let ctx = SqliteStore::open(&dir.path().join("app.db"), options)
            .await
            .unwrap();
        (dir, ctx)
    }

    /// A claim of `jobs` by `a` as the attempt `nonce`, holding `lock`.
    fn write(nonce: i64, lock: Option<&str>) -> ClaimWrite<'_> {
        ClaimWrite {
            name: "jobs",
            identity: "a",
            nonce,
            ttl_ms: 30_000,
            wall_ms: 0,
            lock,
        }
    }

    #[test]
    fn next_epoch_counts_from_first_to_max_from_the_larger_record() {
        let rec = |epoch| {
            Some(Recorded {
                epoch,
                ttl_ms: 1000,
            })
        };
        assert_eq!(next_epoch(None, None).unwrap(), 2);
        assert_eq!(next_epoch(Some(1), None).unwrap(), 2, "after UNGUARDED");
        assert_eq!(next_epoch(Some(0), None).unwrap(), 2);
        assert_eq!(next_epoch(Some(3), rec(9)).unwrap(), 10);
        assert_eq!(next_epoch(Some(9), rec(3)).unwrap(), 10);
        assert_eq!(next_epoch(None, rec(9)).unwrap(), 10);
        assert_eq!(next_epoch(None, rec(i64::MAX - 1)).unwrap(), i64::MAX);
        assert!(matches!(
            next_epoch(Some(i64::MAX), None),
            Err(Error::Config(ConfigError::EpochExhausted))
        ));
        assert!(matches!(
            next_epoch(Some(2), rec(i64::MAX)),
            Err(Error::Config(ConfigError::EpochExhausted))
        ));
    }

    /// The same-host takeover (ADR 0026) happens only when the row's
    /// `lock_id` names the row's current nonce and exactly the lock the
    /// contender holds; anything else waits for the full TTL.
    #[tokio::test]
    async fn only_the_holders_own_lock_lets_a_contender_skip_the_ttl() {
        let (_dir, ctx) = context().await;
        let never = |_: &Found| false;
        let won = claim(&ctx.pool, write(7, Some("boot/1/2")), |_| true, || {})
            .await
            .unwrap();
        let first = won.expect("a fresh name is won");
        for other in [None, Some("boot/1/3"), Some("boot/9/2"), Some("other/1/2")] {
            let got = claim(&ctx.pool, write(8, other), never, || {}).await;
            assert_eq!(got.unwrap(), None, "took over with lock {other:?}");
        }
        // An older version (or a lease set) wins the row: new nonce, the
        // old lock_id left behind. It names no lock any more.
        let by_lock = |sql: &'static str| {
            let pool = ctx.pool.clone();
            async move {
                sqlx::query(sql).execute(&pool).await.unwrap();
                claim(&pool, write(8, Some("boot/1/2")), never, || {}).await
            }
        };
        let got = by_lock("UPDATE election_leases SET nonce = 9, version = version + 1").await;
        assert_eq!(got.unwrap(), None, "a stale lock_id let a contender in");
        let got = by_lock("UPDATE election_leases SET nonce = 7").await;
        assert!(
            got.unwrap().is_some_and(|e| e > first),
            "the holder's own lock"
        );
        // The winner records its own lock with its nonce.
        let id: Option<String> = sqlx::query_scalar("SELECT lock_id FROM election_leases")
            .fetch_one(&ctx.pool)
            .await
            .unwrap();
        assert_eq!(id.as_deref(), Some("8/boot/1/2"));
    }

    /// A claim names no heartbeat; a set's renewal names its own (ADR 0110).
    /// A take by heartbeat wins only while the heartbeat still shows the
    /// version the claimant saw unchanged: a bump between its read and its
    /// claim (the holder renewed) or the heartbeat deleted refuses it.
    #[tokio::test]
    async fn a_take_by_heartbeat_wins_only_while_the_heartbeat_is_unchanged() {
        let (_dir, ctx) = context().await;
        let (a, b) = (101, 202);
        let read = || async {
            let mut rows = read_many(&ctx.pool, &["jobs"]).await.unwrap();
            rows.remove("jobs").unwrap()
        };
        let named = || async {
            sqlx::query_as::<_, (Option<i64>, Option<i64>)>(
                "SELECT heartbeat, heartbeat_nonce FROM election_leases WHERE name = 'jobs'",
            )
            .fetch_one(&ctx.pool)
            .await
            .unwrap()
        };
        let fresh = Take {
            name: "jobs",
            nonce: 7,
            seen: None,
            recorded: None,
            lock: None,
            by_heartbeat: None,
        };
        let won = claim_many(&ctx.pool, &[fresh], "a", 30_000, 0, || {})
            .await
            .unwrap();
        let epoch = won.won[0].1;
        assert_eq!(named().await, (None, None), "a claim names no heartbeat");
        let hold = HeldRow {
            name: "jobs",
            nonce: 7,
            epoch,
        };
        renew_with_heartbeat(&ctx.pool, &[hold], a, 0)
            .await
            .unwrap();
        let seen = read().await;
        let heartbeat = seen.heartbeat.expect("a's renewal named its heartbeat");
        assert_eq!(heartbeat.id, a);
        let row = seen.lease.unwrap();
        let take = |version| Take {
            name: "jobs",
            nonce: 8,
            seen: Some((row.version, row.epoch)),
            recorded: Some(epoch),
            lock: None,
            by_heartbeat: Some(Heartbeat { id: a, version }),
        };
        // a renews (its heartbeat moves on) after b read the row.
        let (renewed, _) = renew_with_heartbeat(&ctx.pool, &[hold], a, 0)
            .await
            .unwrap();
        assert!(renewed.contains("jobs"));
        let stale = take(heartbeat.version);
        let refused = claim_many(&ctx.pool, &[stale], "b", 30_000, 0, || {})
            .await
            .unwrap();
        assert!(refused.won.is_empty(), "taken by a heartbeat that moved on");
        // The row as read again, then the heartbeat deleted by hand.
        let seen = read().await;
        let (row, now) = (seen.lease.unwrap(), seen.heartbeat.unwrap());
        let mut at_now = take(now.version);
        at_now.seen = Some((row.version, row.epoch));
        sqlx::query("DELETE FROM election_heartbeats WHERE id = ?1")
            .bind(a)
            .execute(&ctx.pool)
            .await
            .unwrap();
        let refused = claim_many(&ctx.pool, &[at_now], "b", 30_000, 0, || {})
            .await
            .unwrap();
        assert!(
            refused.won.is_empty(),
            "taken by a heartbeat deleted by hand"
        );
        renew_with_heartbeat(&ctx.pool, &[], a, 0).await.unwrap(); // written anew, at a random version
        let again: i64 =
            sqlx::query_scalar("SELECT version FROM election_heartbeats WHERE id = ?1")
                .bind(a)
                .fetch_one(&ctx.pool)
                .await
                .unwrap();
        at_now.by_heartbeat = Some(Heartbeat {
            id: a,
            version: again,
        });
        let won = claim_many(&ctx.pool, &[at_now], "b", 30_000, 0, || {})
            .await
            .unwrap();
        assert_eq!(
            won.won.len(),
            1,
            "the row as read and the heartbeat as seen: taken"
        );
        assert_eq!(named().await, (None, None), "b's claim names none yet");
        let hold = HeldRow {
            name: "jobs",
            nonce: 8,
            epoch: won.won[0].1,
        };
        renew_with_heartbeat(&ctx.pool, &[hold], b, 0)
            .await
            .unwrap();
        assert_eq!(
            named().await,
            (Some(b), Some(8)),
            "b's renewal names its heartbeat, with the row's nonce"
        );
    }

    /// Every connection of `pool` (as many as it may hold) reports
    /// `synchronous = FULL` (2).
    async fn every_connection_is_full(pool: &SqlitePool) {
        let mut held = Vec::new();
        for _ in 0..pool.options().get_max_connections() {
            let mut conn = pool.acquire().await.unwrap();
            let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(sync, 2, "a pooled connection with synchronous = {sync}");
            held.push(conn);
        }
    }

    /// A relaxed release (ADR 0072) releases as before, and leaves no
    /// connection in the pool with `synchronous = NORMAL`: not after it
    /// finished, and not after it was cut off between its two pragmas
    /// (the connection is closed instead of going back).
    #[tokio::test]
    async fn a_relaxed_release_leaves_every_pooled_connection_full() {
        let (_dir, ctx) = context().await;
        assert_eq!(ctx.release_sync, ReleaseSync::Relaxed);
        claim(&ctx.pool, write(7, None), |_| true, || {})
            .await
            .unwrap()
            .expect("won");
        assert!(
            !release(&ctx.pool, "jobs", 8, ReleaseSync::Relaxed)
                .await
                .unwrap()
        );
        assert!(
            release(&ctx.pool, "jobs", 7, ReleaseSync::Relaxed)
                .await
                .unwrap()
        );
        let holder: Option<String> = sqlx::query_scalar("SELECT holder FROM election_leases")
            .fetch_one(&ctx.pool)
            .await
            .unwrap();
        assert_eq!(holder, None);
        every_connection_is_full(&ctx.pool).await;
        // Cut off after the switch to NORMAL, before it was set back.
        {
            let mut cut = Relaxed::acquire(&ctx.pool).await.unwrap();
            cut.relaxed().await.unwrap();
        }
        // The close runs in a task of its own: let it.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        every_connection_is_full(&ctx.pool).await;
    }
}
