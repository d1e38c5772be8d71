//! The tables this crate creates in the database, and their migrations.
//!
//! Tables (never the application's own, never `PRAGMA user_version`):
//! - `election_meta(key, value)`: the schema version.
//! - `election_leases`: one row per election name. Its column `lock_id`
//!   (the same-host lock its term's winner holds, ADR 0026) is added in
//!   place to databases of any version, as are `value` and
//!   `value_epoch` (ADR 0068): the value a term published and the epoch it
//!   published it in. A reader shows the value only with the row's epoch,
//!   so a value never outlives its term, and the claims of versions that
//!   never write these columns need not clear them.
//! - `election_epochs` (since version 2): per election name, the highest
//!   epoch ever handed out and the TTL of the term that got it. Written in
//!   the transaction that wins each term; this crate never deletes a row
//!   of it, and triggers (added in place to any version) refuse to delete,
//!   lower or rename one, or to replace one with a lower one (`REPLACE`).
//!   **Never drop those triggers or this table** (nor
//!   replace the database file): epochs would then repeat, a fence would
//!   accept a deposed leader's writes, and with the lease row also gone a
//!   contender would be elected beside the live holder.
//! - `election_fences`: one high-water mark per fenced resource. Since
//!   version 3 (ADR 0047) triggers refuse to delete, lower or rename a
//!   mark, and to insert one below the stored mark (`REPLACE`, which
//!   deletes the old row without firing a delete trigger), as the epoch
//!   records are guarded: with a mark gone, a fence would accept a deposed
//!   leader's lower token. **Never drop those triggers or this table.**
//!
//! - `election_heartbeats` (ADR 0110): one row per lease set, its *heartbeat*
//!   (`id`, `version`, `beat_unix_ms` for people and for the deletion of
//!   heartbeats left behind), bumped by every transaction that extends the
//!   set's terms; `election_leases.heartbeat` and `heartbeat_nonce` name the heartbeat of
//!   the term a row shows (only with the row's own nonce). Added in place
//!   to databases of any version, without a version bump, as `lock_id`:
//!   older versions never read them, and a row they win gets a nonce of
//!   its own, so a heartbeat they leave behind names nothing.
//! - `election_leases.transfer_to`, `transfer_by`, `transfer_at` and
//!   `transfer_epoch` (ADR 0112): a request that the term be handed to a
//!   successor, stored beside the term with its epoch, and read by the
//!   holder's renewals only with the row's epoch (a request never
//!   outlives its term; no claim clears them). Added in place to
//!   databases of any version, without a version bump, as `value`.
//!
//! Version 1 databases are migrated in place: `election_epochs` is created
//! and seeded from every existing lease row's epoch, so epochs keep
//! growing after the upgrade. Version 1 and 2 databases get the fence
//! guards of version 3 in the same transaction as the new version number.

use sqlx::{Connection, SqliteConnection};

use crate::error::Error;

/// The newest schema version this crate writes and reads.
pub const SCHEMA_VERSION: i64 = 3;

const V1: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS election_leases (
        name TEXT PRIMARY KEY NOT NULL,
        holder TEXT,
        nonce INTEGER,
        epoch INTEGER NOT NULL CHECK (epoch >= 0),
        version INTEGER NOT NULL,
        ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0),
        acquired_unix_ms INTEGER,
        renewed_unix_ms INTEGER
    )",
    "CREATE TABLE IF NOT EXISTS election_fences (
        resource TEXT PRIMARY KEY NOT NULL,
        token INTEGER NOT NULL CHECK (token > 0)
    )",
];

/// Version 2: the epoch state, seeded from the lease rows (the larger
/// epoch wins if a row already exists).
const V2: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS election_epochs (
        name TEXT PRIMARY KEY NOT NULL,
        epoch INTEGER NOT NULL CHECK (epoch >= 0),
        ttl_ms INTEGER NOT NULL CHECK (ttl_ms > 0)
    )",
    "INSERT INTO election_epochs (name, epoch, ttl_ms)
        SELECT l.name, l.epoch, l.ttl_ms FROM election_leases l
        WHERE NOT EXISTS (SELECT 1 FROM election_epochs r WHERE r.name = l.name AND r.epoch >= l.epoch)
        ON CONFLICT (name) DO UPDATE SET epoch = excluded.epoch, ttl_ms = excluded.ttl_ms
        WHERE excluded.epoch > election_epochs.epoch",
];

/// Version 3 (ADR 0047): triggers that refuse to delete, lower or rename a
/// high-water mark of `election_fences`, or to insert one below the stored
/// mark (a `REPLACE` deletes the old row without firing the delete
/// trigger, unless `recursive_triggers` is on). A fence's own upsert never
/// meets them: [`SqliteFence::advance_in`](crate::SqliteFence::advance_in)
/// only writes a token not below the mark it read in the same
/// transaction.
const V3: &[&str] = &[
    "CREATE TRIGGER IF NOT EXISTS election_fences_never_deleted
        BEFORE DELETE ON election_fences
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: DELETE of election_fences refused: high-water marks are never deleted or lowered (a fence would accept a deposed leader''s lower token)');
        END",
    "CREATE TRIGGER IF NOT EXISTS election_fences_never_lowered
        BEFORE UPDATE ON election_fences
        WHEN NEW.token < OLD.token OR NEW.resource IS NOT OLD.resource
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: UPDATE of election_fences refused: high-water marks are never deleted or lowered (a fence would accept a deposed leader''s lower token)');
        END",
    "CREATE TRIGGER IF NOT EXISTS election_fences_never_replaced_lower
        BEFORE INSERT ON election_fences
        WHEN NEW.token < (SELECT f.token FROM election_fences f WHERE f.resource = NEW.resource)
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: INSERT into election_fences below the stored mark refused: high-water marks are never deleted or lowered (a fence would accept a deposed leader''s lower token)');
        END",
];

/// Triggers that refuse to delete, lower or rename a row of
/// `election_epochs`, or to insert one below the stored record (a lowering
/// `REPLACE`; issue 23) (added in place to databases of any version, without
/// a version bump: older versions never delete or lower one). With a
/// name's lease row *and* its epoch record gone, nothing would say the
/// name was held, and a contender that never saw the row would be elected
/// at once beside the live holder.
const EPOCH_GUARD: &[&str] = &[
    "CREATE TRIGGER IF NOT EXISTS election_epochs_never_deleted
        BEFORE DELETE ON election_epochs
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: DELETE of election_epochs refused: epoch records are never deleted or lowered (a candidate could be elected beside a live holder)');
        END",
    "CREATE TRIGGER IF NOT EXISTS election_epochs_never_lowered
        BEFORE UPDATE ON election_epochs
        WHEN NEW.epoch < OLD.epoch OR NEW.name IS NOT OLD.name
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: UPDATE of election_epochs refused: epoch records are never deleted or lowered (a candidate could be elected beside a live holder)');
        END",
    // A `REPLACE` deletes the row it conflicts with without firing the
    // delete trigger (unless `recursive_triggers` is on). A claim only ever
    // inserts an epoch above the record it read in its transaction, so
    // this never fires for one.
    "CREATE TRIGGER IF NOT EXISTS election_epochs_never_replaced_lower
        BEFORE INSERT ON election_epochs
        WHEN NEW.epoch < (SELECT r.epoch FROM election_epochs r WHERE r.name = NEW.name)
        BEGIN
            SELECT RAISE(ABORT, 'election-sqlite: INSERT into election_epochs below the stored record refused: epoch records are never deleted or lowered (a candidate could be elected beside a live holder)');
        END",
];

/// Creates or migrates the election tables, in one `BEGIN IMMEDIATE`
/// transaction (a read-only database is refused); commits nothing when
/// they are up to date. Idempotent; safe to run from many processes at
/// once.
///
/// ```
/// use sqlx::{Connection, SqliteConnection};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let url = format!("sqlite://{}?mode=rwc", tmp.path().join("app.db").display());
/// let mut conn = SqliteConnection::connect(&url).await?;
/// election_sqlite::schema::migrate(&mut conn).await?;
/// election_sqlite::schema::migrate(&mut conn).await?; // up to date: commits nothing
/// let (leases,): (i64,) = sqlx::query_as("SELECT count(*) FROM election_leases")
///     .fetch_one(&mut conn)
///     .await?;
/// assert_eq!(leases, 0);
/// # Ok(()) }
/// ```
pub async fn migrate(conn: &mut SqliteConnection) -> Result<(), Error> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS election_meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)",
    )
    .execute(&mut *tx)
    .await?;
    // The version and whether `lock_id` is there, in one statement (one
    // round trip to the connection's worker thread at every open).
    let (found, has_lock_id, has_value, has_guard, has_marks, has_transfer): (Option<i64>, bool, bool, bool, bool, bool) = sqlx::query_as(
        "SELECT (SELECT value FROM election_meta WHERE key = 'schema_version'),
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'lock_id') > 0,
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'value_epoch') > 0,
                (SELECT count(*) FROM sqlite_master WHERE type = 'trigger'
                    AND name IN ('election_epochs_never_deleted', 'election_epochs_never_lowered',
                                 'election_epochs_never_replaced_lower')) = 3,
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'heartbeat_nonce') > 0
                AND (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_heartbeats') > 0,
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'transfer_epoch') > 0",
    )
    .fetch_one(&mut *tx)
    .await?;
    let mut up_to_date = false;
    match found {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(Error::SchemaTooNew {
                found: v,
                supported: SCHEMA_VERSION,
            });
        }
        Some(v) if v == SCHEMA_VERSION => {
            // A write, so a read-only database is refused here, at open,
            // rather than at the first claim; rolled back below when
            // nothing else changed, so an up-to-date database costs no
            // commit to disk (no WAL frame, no fsync) at open.
            sqlx::query("UPDATE election_meta SET value = value WHERE key = 'schema_version'")
                .execute(&mut *tx)
                .await?;
            up_to_date = true;
        }
        _ => {
            // V1's and V2's statements are idempotent: a version 1 or 2
            // database keeps its tables and rows. The guards of the marks
            // (V3) commit with the version number: a version 3 database
            // always has them.
            for stmt in V1.iter().chain(V2).chain(V3) {
                sqlx::query(*stmt).execute(&mut *tx).await?;
            }
            sqlx::query(
                "INSERT INTO election_meta (key, value) VALUES ('schema_version', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(SCHEMA_VERSION)
            .execute(&mut *tx)
            .await?;
        }
    }
    // `has_lock_id` was read before any table was created here: only an
    // up-to-date database that had the column skips the check.
    let added = if up_to_date && has_lock_id {
        false
    } else {
        add_lock_id(&mut tx).await?
    };
    let valued = if up_to_date && has_value {
        false
    } else {
        add_value_columns(&mut tx).await?
    };
    let added = added || valued;
    let guarded = if up_to_date && has_guard {
        false
    } else {
        for stmt in EPOCH_GUARD {
            sqlx::query(*stmt).execute(&mut *tx).await?;
        }
        true
    };
    let added = added || guarded;
    let marked = if up_to_date && has_marks {
        false
    } else {
        add_marks(&mut tx).await?
    };
    let added = added || marked;
    let asked = if up_to_date && has_transfer {
        false
    } else {
        add_transfer_columns(&mut tx).await?
    };
    let added = added || asked;
    if added || !up_to_date {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(())
}

/// Adds `election_leases.lock_id` (the same-host lock a term's winner
/// held, ADR 0026) if it is missing. In place, without a version bump:
/// older versions never read it, and the nonce it starts with makes a value
/// they leave behind on a row they win name no lock.
/// True if it added it.
async fn add_lock_id(conn: &mut SqliteConnection) -> Result<bool, Error> {
    let (tables, columns): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_leases'),
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'lock_id')",
    )
    .fetch_one(&mut *conn)
    .await?;
    if tables == 1 && columns == 0 {
        sqlx::query("ALTER TABLE election_leases ADD COLUMN lock_id TEXT")
            .execute(&mut *conn)
            .await?;
        return Ok(true);
    }
    Ok(false)
}

/// Adds `election_leases.value` and `value_epoch` (ADR 0068) if missing.
/// In place, without a version bump (as `lock_id`): older versions never
/// read them, and what they leave behind is never shown, since a reader
/// shows a value only with the epoch it was published in. True if it
/// added them.
async fn add_value_columns(conn: &mut SqliteConnection) -> Result<bool, Error> {
    let (tables, columns): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_leases'),
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'value_epoch')",
    )
    .fetch_one(&mut *conn)
    .await?;
    if tables == 1 && columns == 0 {
        for stmt in [
            "ALTER TABLE election_leases ADD COLUMN value TEXT",
            "ALTER TABLE election_leases ADD COLUMN value_epoch INTEGER",
        ] {
            sqlx::query(stmt).execute(&mut *conn).await?;
        }
        return Ok(true);
    }
    Ok(false)
}

/// Adds `election_heartbeats` and `election_leases.heartbeat`, `heartbeat_nonce` (ADR
/// 0110) where missing. In place, without a version bump (as `lock_id`).
/// True if it added anything.
async fn add_marks(conn: &mut SqliteConnection) -> Result<bool, Error> {
    let (tables, columns, heartbeats): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_leases'),
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'heartbeat_nonce'),
                (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_heartbeats')",
    )
    .fetch_one(&mut *conn)
    .await?;
    let mut added = false;
    if tables == 1 && columns == 0 {
        for stmt in [
            "ALTER TABLE election_leases ADD COLUMN heartbeat INTEGER",
            "ALTER TABLE election_leases ADD COLUMN heartbeat_nonce INTEGER",
        ] {
            sqlx::query(stmt).execute(&mut *conn).await?;
        }
        added = true;
    }
    if heartbeats == 0 {
        sqlx::query(
            "CREATE TABLE election_heartbeats (
                id INTEGER PRIMARY KEY NOT NULL,
                version INTEGER NOT NULL,
                beat_unix_ms INTEGER NOT NULL
            )",
        )
        .execute(&mut *conn)
        .await?;
        added = true;
    }
    Ok(added)
}

/// Adds `election_leases.transfer_to`, `transfer_by`, `transfer_at` and
/// `transfer_epoch` (ADR 0112: a request that the term be handed over, and
/// the epoch of the term asked) if missing. In place, without a version
/// bump (as `value`): older versions never read them, and what they leave
/// behind is never reported, since a renewal reads a request only with
/// the row's epoch. True if it added them.
async fn add_transfer_columns(conn: &mut SqliteConnection) -> Result<bool, Error> {
    let (tables, columns): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'election_leases'),
                (SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'transfer_epoch')",
    )
    .fetch_one(&mut *conn)
    .await?;
    if tables == 1 && columns == 0 {
        for stmt in [
            "ALTER TABLE election_leases ADD COLUMN transfer_to TEXT",
            "ALTER TABLE election_leases ADD COLUMN transfer_by TEXT",
            "ALTER TABLE election_leases ADD COLUMN transfer_at INTEGER",
            "ALTER TABLE election_leases ADD COLUMN transfer_epoch INTEGER",
        ] {
            sqlx::query(stmt).execute(&mut *conn).await?;
        }
        return Ok(true);
    }
    Ok(false)
}

/// Whether `election_leases` has the value columns (ADR 0068): a database
/// opened read-only may be one no version with them has opened yet.
pub(crate) async fn has_values(pool: &sqlx::SqlitePool) -> Result<bool, Error> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pragma_table_info('election_leases') WHERE name = 'value_epoch'",
    )
    .fetch_one(pool)
    .await?;
    Ok(n > 0)
}

/// Whether a database opened read-only holds election tables this crate
/// can read: `Ok(false)` if no election has run in it (no `election_meta`
/// table, or no schema version), [`Error::SchemaTooNew`] for a newer
/// schema. Any other failure (not a database, damaged) is the error it is.
pub(crate) async fn readable(pool: &sqlx::SqlitePool) -> Result<bool, Error> {
    let version: Option<i64> =
        match sqlx::query_scalar("SELECT value FROM election_meta WHERE key = 'schema_version'")
            .fetch_optional(pool)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                let tables: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM sqlite_schema WHERE name = 'election_meta'",
                )
                .fetch_one(pool)
                .await?;
                if tables == 0 {
                    return Ok(false);
                }
                return Err(e.into());
            }
        };
    match version {
        None => Ok(false),
        Some(v) if v > SCHEMA_VERSION => Err(Error::SchemaTooNew {
            found: v,
            supported: SCHEMA_VERSION,
        }),
        Some(_) => Ok(true),
    }
}
