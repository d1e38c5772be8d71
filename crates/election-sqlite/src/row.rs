//! The lease row: every read and write of `election_leases`, each write one
//! `BEGIN IMMEDIATE` transaction.

use sqlx::SqlitePool;

use crate::Error;

/// A lease row as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) holder: Option<String>,
    pub(crate) epoch: i64,
    pub(crate) version: i64,
    pub(crate) ttl_ms: i64,
    /// The wall-clock time (Unix ms) of the claim that won the current
    /// term, as the winner's clock read it; display only.
    pub(crate) acquired_unix_ms: Option<i64>,
}

/// What a claim found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nobody holds it (no row, or a released one).
    Vacant,
    /// Someone holds it at this renewal version.
    Held {
        holder: String,
        version: i64,
        ttl_ms: i64,
    },
}

/// The fields a winning claim writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClaimWrite<'a> {
    pub(crate) name: &'a str,
    pub(crate) identity: &'a str,
    pub(crate) nonce: i64,
    pub(crate) ttl_ms: i64,
    pub(crate) wall_ms: i64,
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

type RawRow = (Option<String>, i64, i64, i64, Option<i64>);

const SELECT: &str = "SELECT holder, epoch, version, ttl_ms, acquired_unix_ms
                      FROM election_leases WHERE name = ?1";

fn row((holder, epoch, version, ttl_ms, acquired_unix_ms): RawRow) -> Row {
    Row {
        holder,
        epoch,
        version,
        ttl_ms,
        acquired_unix_ms,
    }
}

/// Reads the row of `name`.
pub(crate) async fn read(pool: &SqlitePool, name: &str) -> Result<Option<Row>, Error> {
    let raw: Option<RawRow> = sqlx::query_as(SELECT)
        .bind(name)
        .fetch_optional(pool)
        .await?;
    raw.map(row).map(|r| check(name, r)).transpose()
}

/// In one `BEGIN IMMEDIATE` transaction: reads the row and, if `decide`
/// says so, wins it, incrementing the epoch in the same statement (rule
/// 1). `decide` sees what was found and answers whether to take it.
/// Returns the epoch won, or `None`.
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
    let raw: Option<RawRow> = sqlx::query_as(SELECT)
        .bind(w.name)
        .fetch_optional(&mut *tx)
        .await?;
    let found_row = raw.map(row).map(|r| check(w.name, r)).transpose()?;
    let found = match &found_row {
        Some(Row {
            holder: Some(h),
            version,
            ttl_ms,
            ..
        }) => Found::Held {
            holder: h.clone(),
            version: *version,
            ttl_ms: *ttl_ms,
        },
        _ => Found::Vacant,
    };
    if !decide(&found) {
        tx.rollback().await?;
        return Ok(None);
    }
    let epoch = match found_row {
        None => {
            sqlx::query(
                "INSERT INTO election_leases
                   (name, holder, nonce, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms)
                 VALUES (?1, ?2, ?3, 1, 1, ?4, ?5, ?5)",
            )
            .bind(w.name)
            .bind(w.identity)
            .bind(w.nonce)
            .bind(w.ttl_ms)
            .bind(w.wall_ms)
            .execute(&mut *tx)
            .await?;
            1
        }
        Some(r) => {
            let next = r.epoch.checked_add(1).ok_or_else(|| Error::CorruptRow {
                name: w.name.to_owned(),
                detail: "the epoch counter is exhausted".into(),
            })?;
            let updated = sqlx::query(
                "UPDATE election_leases
                 SET holder = ?2, nonce = ?3, epoch = epoch + 1, version = version + 1,
                     ttl_ms = ?4, acquired_unix_ms = ?5, renewed_unix_ms = ?5
                 WHERE name = ?1 AND version = ?6 AND epoch = ?7",
            )
            .bind(w.name)
            .bind(w.identity)
            .bind(w.nonce)
            .bind(w.ttl_ms)
            .bind(w.wall_ms)
            .bind(r.version)
            .bind(r.epoch)
            .execute(&mut *tx)
            .await?;
            if updated.rows_affected() != 1 {
                // Cannot happen inside one IMMEDIATE transaction; refuse
                // rather than guess.
                tx.rollback().await?;
                return Ok(None);
            }
            next
        }
    };
    before_commit();
    tx.commit().await?;
    Ok(Some(epoch))
}

/// Renews the lease of the term (`nonce`, `epoch`): bumps the renewal
/// version. `Ok(false)` if the row no longer shows this term.
pub(crate) async fn renew(
    pool: &SqlitePool,
    name: &str,
    nonce: i64,
    epoch: i64,
    wall_ms: i64,
) -> Result<bool, Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let done = sqlx::query(
        "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?4
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL",
    )
    .bind(name)
    .bind(nonce)
    .bind(epoch)
    .bind(wall_ms)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// Releases the lease of the attempt `nonce`, and only that one: a
/// successor's claim is never undone. `Ok(false)` if it no longer held it.
pub(crate) async fn release(pool: &SqlitePool, name: &str, nonce: i64) -> Result<bool, Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let done = sqlx::query(
        "UPDATE election_leases SET holder = NULL, nonce = NULL, version = version + 1
         WHERE name = ?1 AND nonce = ?2 AND holder IS NOT NULL",
    )
    .bind(name)
    .bind(nonce)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}
