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

/// What a contender has seen of a lease held by someone else.
#[derive(Debug)]
pub(crate) struct Observed {
    holder: String,
    version: i64,
    since: tokio::time::Instant,
}

/// Whether a contender may take over the lease `holder` holds at renewal
/// `version` (the holder's TTL `holder_ttl_ms`): only once it has seen that
/// same holder at that same version for a full TTL (the longer of `ttl`
/// and the holder's) on its monotonic clock. Anything else it sees starts
/// a new observation at `now`.
pub(crate) fn may_take_over(
    observed: &mut Option<Observed>,
    holder: &str,
    version: i64,
    holder_ttl_ms: i64,
    ttl: std::time::Duration,
    now: tokio::time::Instant,
) -> bool {
    match observed {
        Some(o) if o.version == version && o.holder == holder => {
            let holders_ttl =
                std::time::Duration::from_millis(u64::try_from(holder_ttl_ms).unwrap_or(0));
            now.saturating_duration_since(o.since) >= ttl.max(holders_ttl)
        }
        _ => {
            *observed = Some(Observed {
                holder: holder.to_owned(),
                version,
                since: now,
            });
            false
        }
    }
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

/// How many keys one batch statement covers (three bound values each, well
/// under SQLite's limit on bound parameters).
const CHUNK: usize = 300;

/// `(?, ?, ?), (?, ?, ?), ...`: `rows` tuples of `width` placeholders.
fn tuples(rows: usize, width: usize) -> String {
    let one = format!("({})", vec!["?"; width].join(", "));
    vec![one; rows].join(", ")
}

/// Reads the rows of `names` (missing names are absent from the result),
/// without taking the write lock.
pub(crate) async fn read_many(
    pool: &SqlitePool,
    names: &[&str],
) -> Result<std::collections::HashMap<String, Row>, Error> {
    let mut rows = std::collections::HashMap::with_capacity(names.len());
    for chunk in names.chunks(CHUNK) {
        let sql = format!(
            "SELECT name, holder, epoch, version, ttl_ms, acquired_unix_ms
             FROM election_leases WHERE name IN ({})",
            vec!["?"; chunk.len()].join(", ")
        );
        let mut query = sqlx::query_as::<_, (String, Option<String>, i64, i64, i64, Option<i64>)>(
            sqlx::AssertSqlSafe(sql),
        );
        for name in chunk {
            query = query.bind(*name);
        }
        for (name, holder, epoch, version, ttl_ms, acquired) in query.fetch_all(pool).await? {
            let found = check(&name, row((holder, epoch, version, ttl_ms, acquired)))?;
            rows.insert(name, found);
        }
    }
    Ok(rows)
}

/// One held lease of a batch: the key, and the attempt's nonce and epoch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hold<'a> {
    pub(crate) name: &'a str,
    pub(crate) nonce: i64,
    pub(crate) epoch: i64,
}

/// Renews every lease of `holds` in one `BEGIN IMMEDIATE` transaction, each
/// conditional on its nonce and epoch as [`renew`] is; returns the names
/// renewed (the others no longer show their term).
pub(crate) async fn renew_many(
    pool: &SqlitePool,
    holds: &[Hold<'_>],
    wall_ms: i64,
) -> Result<std::collections::HashSet<String>, Error> {
    let mut renewed = std::collections::HashSet::with_capacity(holds.len());
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    for chunk in holds.chunks(CHUNK) {
        let sql = format!(
            "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?
             WHERE holder IS NOT NULL AND (name, nonce, epoch) IN (VALUES {})
             RETURNING name",
            tuples(chunk.len(), 3)
        );
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).bind(wall_ms);
        for h in chunk {
            query = query.bind(h.name).bind(h.nonce).bind(h.epoch);
        }
        renewed.extend(query.fetch_all(&mut *tx).await?);
    }
    tx.commit().await?;
    Ok(renewed)
}

/// Releases every lease of `holds` in one `BEGIN IMMEDIATE` transaction,
/// each conditional on its nonce as [`release`] is.
pub(crate) async fn release_many(pool: &SqlitePool, holds: &[Hold<'_>]) -> Result<(), Error> {
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

/// One claim of a batch: the key, the new attempt's nonce, and the row as
/// the claimant last read it (`None`: there was no row).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Take<'a> {
    pub(crate) name: &'a str,
    pub(crate) nonce: i64,
    /// `(version, epoch)` of the row as read.
    pub(crate) seen: Option<(i64, i64)>,
}

/// Claims every lease of `takes` in one `BEGIN IMMEDIATE` transaction. Each
/// claim wins only if the row is still exactly as its claimant read it
/// (the same renewal version and epoch; no row if there was none), and
/// increments the epoch in the same statement that wins (rule 1). Returns
/// the epoch won per name; a name that changed since it was read is absent.
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
) -> Result<Vec<(String, i64)>, Error> {
    let mut won = Vec::with_capacity(takes.len());
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    for t in takes {
        let epoch: Option<i64> = match t.seen {
            None => {
                sqlx::query_scalar(
                    "INSERT INTO election_leases
                       (name, holder, nonce, epoch, version, ttl_ms, acquired_unix_ms, renewed_unix_ms)
                     VALUES (?1, ?2, ?3, 1, 1, ?4, ?5, ?5)
                     ON CONFLICT (name) DO NOTHING
                     RETURNING epoch",
                )
                .bind(t.name)
                .bind(identity)
                .bind(t.nonce)
                .bind(ttl_ms)
                .bind(wall_ms)
                .fetch_optional(&mut *tx)
                .await?
            }
            Some((version, epoch)) => {
                sqlx::query_scalar(
                    "UPDATE election_leases
                     SET holder = ?2, nonce = ?3, epoch = epoch + 1, version = version + 1,
                         ttl_ms = ?4, acquired_unix_ms = ?5, renewed_unix_ms = ?5
                     WHERE name = ?1 AND version = ?6 AND epoch = ?7 AND epoch < ?8
                     RETURNING epoch",
                )
                .bind(t.name)
                .bind(identity)
                .bind(t.nonce)
                .bind(ttl_ms)
                .bind(wall_ms)
                .bind(version)
                .bind(epoch)
                .bind(i64::MAX)
                .fetch_optional(&mut *tx)
                .await?
            }
        };
        if let Some(epoch) = epoch {
            won.push((t.name.to_owned(), epoch));
        }
    }
    if won.is_empty() {
        tx.rollback().await?;
        return Ok(won);
    }
    before_commit();
    tx.commit().await?;
    Ok(won)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn takeover_needs_the_same_holder_and_version_for_a_full_ttl() {
        let ttl = Duration::from_secs(3);
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut seen = None;
        assert!(
            !may_take_over(&mut seen, "a", 7, 3000, ttl, at(0)),
            "first sight"
        );
        assert!(!may_take_over(&mut seen, "a", 7, 3000, ttl, at(2999)));
        assert!(may_take_over(&mut seen, "a", 7, 3000, ttl, at(3000)));
        // A renewal (new version) or another holder starts the count again.
        assert!(!may_take_over(&mut seen, "a", 8, 3000, ttl, at(3001)));
        assert!(!may_take_over(&mut seen, "a", 8, 3000, ttl, at(6000)));
        assert!(may_take_over(&mut seen, "a", 8, 3000, ttl, at(6001)));
        assert!(!may_take_over(&mut seen, "b", 8, 3000, ttl, at(6002)));
        // The longer of the two TTLs counts.
        let mut seen = None;
        assert!(!may_take_over(&mut seen, "a", 1, 10_000, ttl, at(0)));
        assert!(!may_take_over(&mut seen, "a", 1, 10_000, ttl, at(9999)));
        assert!(may_take_over(&mut seen, "a", 1, 10_000, ttl, at(10_000)));
    }
}
