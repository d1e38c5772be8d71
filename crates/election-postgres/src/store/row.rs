//! The lease rows and epoch records: every read and write of `leases` and
//! `epochs`, each write one statement (one transaction) however many keys
//! it covers. The contender's decision when to take a row over is
//! [`election_sql::lease_row`]'s.

use std::collections::{HashMap, HashSet};

use election_core::{ConfigError, Epoch};
use election_sql::Heartbeat;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Executor, PgConnection, Row as _, SqlSafeStr};

use crate::error::Error;
use crate::store::schema::Sql;

pub(crate) use election_sql::lease_row::{Asked, Found, Recorded, Row, may_claim_as};

/// An epoch as stored (`bigint`), decoded
/// ([`decode_epoch`](election_sql::lease_row::decode_epoch)): one outside
/// [`Epoch::FIRST`]..=[`Epoch::MAX`] is a corrupt row of `name`.
pub(crate) fn epoch_of(name: &str, epoch: i64) -> Result<Epoch, Error> {
    election_sql::lease_row::decode_epoch(epoch)
        .filter(|e| e.is_term())
        .ok_or_else(|| Error::CorruptRow {
            name: name.to_owned(),
            detail: format!("epoch {epoch}"),
        })
}

/// What a contender read of one name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) lease: Option<Row>,
    pub(crate) recorded: Option<Recorded>,
    /// The heartbeat the row's term names and its version, in the same read
    /// (ADR 0110; [`read_many`] only): a heartbeat written with the row's own
    /// nonce.
    pub(crate) heartbeat: Option<Heartbeat>,
    /// The row shows the reading attempt's own nonce with a holder: a
    /// release passed the term to it (ADR 0120; [`take_released`] only).
    pub(crate) ours: bool,
}

impl Seen {
    /// The lowest epoch the next term of this name may have: one above
    /// every epoch the row and the record show, at least
    /// [`Epoch::FIRST`]; `None` when that would be above [`Epoch::MAX`].
    pub(crate) fn floor(&self) -> Option<i64> {
        let highest = self
            .lease
            .as_ref()
            .map(|r| r.epoch)
            .into_iter()
            .chain(self.recorded.map(|r| r.epoch))
            .max()
            .unwrap_or(0);
        highest
            .checked_add(1)
            .map(|f| f.max(Epoch::FIRST.get_i64()))
    }

    /// Whether a look that takes a released or never-held name
    /// ([`take_released`]) would take the name as seen here: released or
    /// never held, its next epoch not above [`Epoch::MAX`]. Such a look
    /// that won nothing lost a race: another statement changed the row
    /// after the look's snapshot.
    pub(crate) fn was_takeable(&self) -> bool {
        matches!(self.found(), Found::Vacant | Found::Fresh) && self.floor().is_some()
    }

    /// What this says for the contender's decision.
    pub(crate) fn found(&self) -> Found {
        Found::of(self.lease.as_ref(), self.recorded)
    }
}

fn check(name: &str, seen: Seen) -> Result<Seen, Error> {
    let corrupt = |detail: String| Error::CorruptRow {
        name: name.to_owned(),
        detail,
    };
    if let Some(r) = &seen.lease
        && (r.epoch < 0
            || (r.epoch < Epoch::FIRST.get_i64() && r.holder.is_some())
            || r.ttl_ms <= 0)
    {
        return Err(corrupt(format!(
            "epoch {} ttl_ms {} holder {:?}",
            r.epoch, r.ttl_ms, r.holder
        )));
    }
    if let Some(r) = seen.recorded
        && (r.epoch < 0 || r.ttl_ms <= 0)
    {
        return Err(corrupt(format!(
            "recorded epoch {} with ttl_ms {}",
            r.epoch, r.ttl_ms
        )));
    }
    Ok(seen)
}

type RawSeen = election_sql::lease_row::LeaseColumns<String>;

/// Reads the lease rows and epoch records of `names` in one statement
/// (names with neither are absent from the result).
pub(crate) async fn read_many(
    conn: &mut PgConnection,
    sql: &Sql,
    names: &[&str],
) -> Result<HashMap<String, Seen>, Error> {
    let rows = sqlx::query(AssertSqlSafe(sql.read_many.clone()))
        .bind(names)
        .fetch_all(&mut *conn)
        .await?;
    let mut out = HashMap::with_capacity(rows.len());
    for row in &rows {
        let (name, mut seen) = seen_of(raw_seen(row)?)?;
        // The ninth column: the holder's last renewal, for display; the
        // tenth: the value of the row's current term (ADR 0068).
        let renewed: Option<i64> = row.try_get(8)?;
        let value: Option<String> = row.try_get(9)?;
        if let Some(lease) = &mut seen.lease {
            lease.renewed_unix_ms = renewed;
            lease.value = value;
        }
        // The eleventh and twelfth: the heartbeat the term names, and its
        // version (ADR 0110).
        let (heartbeat, version): (Option<i64>, Option<i64>) = (row.try_get(10)?, row.try_get(11)?);
        seen.heartbeat = heartbeat
            .zip(version)
            .map(|(id, version)| Heartbeat { id, version });
        out.insert(name, seen);
    }
    Ok(out)
}

/// The first eight columns of a read (name, the lease row's columns, the
/// record's), as stored.
fn raw_seen(row: &PgRow) -> Result<RawSeen, sqlx::Error> {
    Ok((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
    ))
}

/// One name's row and record as a read returns them, checked.
fn seen_of(raw: RawSeen) -> Result<(String, Seen), Error> {
    let (name, holder, epoch, version, ttl_ms, acquired, rec_epoch, rec_ttl) = raw;
    let lease = match (epoch, version, ttl_ms) {
        (Some(epoch), Some(version), Some(ttl_ms)) => Some(Row {
            holder,
            epoch,
            version,
            ttl_ms,
            acquired_unix_ms: acquired,
            renewed_unix_ms: None,
            value: None,
        }),
        _ => None,
    };
    let recorded = rec_epoch
        .zip(rec_ttl)
        .map(|(epoch, ttl_ms)| Recorded { epoch, ttl_ms });
    let seen = check(
        &name,
        Seen {
            lease,
            recorded,
            heartbeat: None,
            ours: false,
        },
    )?;
    Ok((name, seen))
}

/// A look at `name` that also wins it when its row is released, handed
/// over to `identity` (ADR 0112), or the name was never held (no row and
/// no epoch record), in one statement (one transaction; ADR 0045, ADR
/// 0065): the lease row and record as they were before the statement, and
/// the epoch won, if any. The win is conditional on the row still being
/// released or handed to `identity` when the statement locks it (or on no
/// row of the name existing when it inserts one), draws its
/// epoch from the sequence in that statement, above every epoch the row
/// and record show (rule 1), records it and notifies the channel at
/// commit. A row that is held, a missing row with an epoch record, or a
/// row whose next epoch would be above [`Epoch::MAX`] is only read.
///
/// Failure model: as [`claim_many`]: a statement that failed after it was
/// sent may or may not have committed a win.
pub(crate) async fn take_released(
    conn: &mut PgConnection,
    sql: &Sql,
    name: &str,
    nonce: i64,
    identity: &str,
    ttl_ms: i64,
    wall_ms: i64,
) -> Result<(Seen, Option<i64>), Error> {
    let row = sqlx::query(AssertSqlSafe(sql.take_released.clone()))
        .bind(name)
        .bind(identity)
        .bind(nonce)
        .bind(ttl_ms)
        .bind(wall_ms)
        .bind(&*sql.channel)
        .fetch_one(&mut *conn)
        .await?;
    let (_, mut seen) = seen_of(raw_seen(&row)?)?;
    let won: Option<i64> = row.try_get(8)?;
    seen.ours = won.is_none() && row.try_get::<Option<bool>, _>(9)?.unwrap_or(false);
    Ok((seen, won))
}

pub(crate) use election_sql::HeldRow;

/// Renews every lease of `holds` in one statement, each only while its row
/// still shows its nonce and epoch with a holder: bumps the renewal
/// version. Returns the names renewed.
pub(crate) async fn renew_many(
    conn: &mut PgConnection,
    sql: &Sql,
    holds: &[HeldRow<'_>],
    wall_ms: i64,
) -> Result<HashSet<String>, Error> {
    let names: Vec<&str> = holds.iter().map(|h| h.name).collect();
    let nonces: Vec<i64> = holds.iter().map(|h| h.nonce).collect();
    let epochs: Vec<i64> = holds.iter().map(|h| h.epoch).collect();
    let renewed: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql.renew_many.clone()))
        .bind(names)
        .bind(nonces)
        .bind(epochs)
        .bind(wall_ms)
        .fetch_all(&mut *conn)
        .await?;
    Ok(renewed.into_iter().collect())
}

/// [`renew_many`] for a lease set whose heartbeat is `heartbeat` (ADR 0110), in one
/// statement: bumps the heartbeat and lists every other heartbeat (as the
/// statement's snapshot shows them). Returns the names renewed and the
/// heartbeats.
pub(crate) async fn renew_with_heartbeat(
    conn: &mut PgConnection,
    sql: &Sql,
    holds: &[HeldRow<'_>],
    heartbeat: i64,
    wall_ms: i64,
) -> Result<(HashSet<String>, Vec<Heartbeat>), Error> {
    let names: Vec<&str> = holds.iter().map(|h| h.name).collect();
    let nonces: Vec<i64> = holds.iter().map(|h| h.nonce).collect();
    let epochs: Vec<i64> = holds.iter().map(|h| h.epoch).collect();
    let rows: Vec<(Option<String>, Option<i64>, Option<i64>)> =
        sqlx::query_as(AssertSqlSafe(sql.renew_with_heartbeat.clone()))
            .bind(names)
            .bind(nonces)
            .bind(epochs)
            .bind(wall_ms)
            .bind(heartbeat)
            .fetch_all(&mut *conn)
            .await?;
    let mut renewed = HashSet::with_capacity(holds.len());
    let mut heartbeats = Vec::new();
    for (name, id, version) in rows {
        match (name, id.zip(version)) {
            (Some(name), _) => {
                renewed.insert(name);
            }
            (None, Some((id, version))) => heartbeats.push(Heartbeat { id, version }),
            (None, None) => {}
        }
    }
    Ok((renewed, heartbeats))
}

/// Deletes the heartbeat `id` of a lease set that closed, and every heartbeat not
/// bumped since `stale_before_ms` (ADR 0110).
pub(crate) async fn stop_heartbeat(
    conn: &mut PgConnection,
    sql: &Sql,
    id: i64,
    stale_before_ms: i64,
) -> Result<(), Error> {
    sqlx::query(AssertSqlSafe(sql.stop_heartbeat.clone()))
        .bind(id)
        .bind(stale_before_ms)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Releases every lease of `holds` in one statement, each only while its
/// row still shows its nonce (a successor's claim is never undone), and
/// notifies the channel of each. Returns the names released. A single
/// lease goes through `release_one` (ADR 0120): passed to the head of its
/// line when it can be, in that statement; a pass counts as released.
pub(crate) async fn release_many(
    conn: &mut PgConnection,
    sql: &Sql,
    holds: &[(&str, i64)],
) -> Result<HashSet<String>, Error> {
    if let [(name, nonce)] = holds {
        let released: Option<String> = sqlx::query_scalar(AssertSqlSafe(sql.release_one.clone()))
            .bind(*name)
            .bind(*nonce)
            .bind(&*sql.channel)
            .bind(false)
            .fetch_one(&mut *conn)
            .await?;
        return Ok(released.into_iter().collect());
    }
    let names: Vec<&str> = holds.iter().map(|h| h.0).collect();
    let nonces: Vec<i64> = holds.iter().map(|h| h.1).collect();
    let released: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql.release_many.clone()))
        .bind(names)
        .bind(nonces)
        .bind(&*sql.channel)
        .fetch_all(&mut *conn)
        .await?;
    Ok(released.into_iter().collect())
}

/// Renews the term `hold` (as [`renew_many`] one row) and reads the
/// transfer request stored beside it in its epoch (ADR 0112), in one
/// statement: `None` if the row no longer shows the term.
pub(crate) async fn renew_asked(
    conn: &mut PgConnection,
    sql: &Sql,
    hold: HeldRow<'_>,
    wall_ms: i64,
) -> Result<Option<Option<Asked>>, Error> {
    type Raw = (Option<String>, Option<String>, Option<i64>);
    let renewed: Option<Raw> = sqlx::query_as(AssertSqlSafe(sql.renew_asked.clone()))
        .bind(hold.name)
        .bind(hold.nonce)
        .bind(hold.epoch)
        .bind(wall_ms)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(renewed.map(|(to, by, at)| Asked::of(to, by, at)))
}

/// Hands the term `hold` over (ADR 0112) in one statement, conditional on
/// its nonce and epoch: the row held by the pseudo-holder `holder` for
/// `window_ms`, in the term's epoch, with no nonce; the channel and every
/// unexpired waiter of the name notified at commit. `Ok(false)`: the row
/// no longer shows the term (nothing written, nobody notified).
pub(crate) async fn release_to(
    conn: &mut PgConnection,
    sql: &Sql,
    hold: HeldRow<'_>,
    holder: &str,
    window_ms: i64,
    wall_ms: i64,
) -> Result<bool, Error> {
    let handed: Option<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql.release_to.clone()))
        .bind(hold.name)
        .bind(hold.nonce)
        .bind(hold.epoch)
        .bind(holder)
        .bind(window_ms)
        .bind(wall_ms)
        .bind(&*sql.channel)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(handed.is_some())
}

/// Stores a request by `by` that the term the row of `name` shows be
/// handed to `to` (ADR 0112), with that term's epoch, in one statement
/// that applies only while a term holds the row: the epoch of the term
/// asked, or `None` (nothing written).
pub(crate) async fn request_transfer(
    conn: &mut PgConnection,
    sql: &Sql,
    name: &str,
    (to, by): (&str, &str),
    wall_ms: i64,
) -> Result<Option<i64>, Error> {
    Ok(
        sqlx::query_scalar(AssertSqlSafe(sql.request_transfer.clone()))
            .bind(name)
            .bind(to)
            .bind(by)
            .bind(wall_ms)
            .fetch_optional(&mut *conn)
            .await?,
    )
}

/// Publishes `value` for the term `hold` (ADR 0068) and notifies
/// observers, in one statement, only if the row still shows the attempt's
/// nonce and epoch with a holder: `Ok(false)` if it does not (nothing was
/// written).
pub(crate) async fn proclaim(
    conn: &mut PgConnection,
    sql: &Sql,
    hold: HeldRow<'_>,
    value: &str,
) -> Result<bool, Error> {
    let written: Option<String> = sqlx::query_scalar(AssertSqlSafe(sql.proclaim.clone()))
        .bind(hold.name)
        .bind(hold.nonce)
        .bind(hold.epoch)
        .bind(value)
        .bind(&*sql.channel)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(written.is_some())
}

/// One claim of a batch: the name, the new attempt's nonce, and what the
/// claimant read of it.
#[derive(Clone, Debug)]
pub(crate) struct Take<'a> {
    pub(crate) name: &'a str,
    pub(crate) nonce: i64,
    /// `(version, epoch)` of the lease row as read; `None`: no row.
    pub(crate) seen: Option<(i64, i64)>,
    /// The recorded epoch as read; `None`: none.
    pub(crate) recorded: Option<i64>,
    /// The lowest epoch the term may get ([`Seen::floor`]).
    pub(crate) floor: i64,
    /// A take by the holder's heartbeat (ADR 0110): the version the heartbeat the
    /// row names must still show in the claim's statement.
    pub(crate) by_heartbeat: Option<i64>,
}

impl<'a> Take<'a> {
    /// The claim of `name` by attempt `nonce` over what was `seen`;
    /// [`ConfigError::EpochExhausted`] if its next epoch would be above
    /// [`Epoch::MAX`].
    pub(crate) fn new(name: &'a str, nonce: i64, seen: &Seen) -> Result<Self, Error> {
        let floor = seen
            .floor()
            .ok_or(Error::Config(ConfigError::EpochExhausted))?;
        Ok(Take {
            name,
            nonce,
            seen: seen.lease.as_ref().map(|r| (r.version, r.epoch)),
            recorded: seen.recorded.map(|r| r.epoch),
            floor,
            by_heartbeat: None,
        })
    }
}

/// Claims every lease of `takes` in one statement (one transaction): each
/// wins only if its lease row and epoch record are still exactly as its
/// claimant read them, and gets `greatest(nextval(epoch_seq), floor)` in
/// that statement (rule 1), recorded in `epochs` and notified on the
/// channel at commit. Returns `(name, epoch)` of each key won.
///
/// Failure model: [`ConfigError::EpochExhausted`] once the sequence has
/// handed out [`Epoch::MAX`] (nothing is written); other errors as
/// [`Error`]: the statement may or may not have committed if it failed
/// after it was sent.
pub(crate) async fn claim_many(
    conn: &mut PgConnection,
    sql: &Sql,
    takes: &[Take<'_>],
    identity: &str,
    ttl_ms: i64,
    wall_ms: i64,
) -> Result<Vec<(String, i64)>, Error> {
    let by_heartbeat: Vec<Option<i64>> = takes.iter().map(|t| t.by_heartbeat).collect();
    let names: Vec<&str> = takes.iter().map(|t| t.name).collect();
    let nonces: Vec<i64> = takes.iter().map(|t| t.nonce).collect();
    let versions: Vec<Option<i64>> = takes.iter().map(|t| t.seen.map(|s| s.0)).collect();
    let epochs: Vec<Option<i64>> = takes.iter().map(|t| t.seen.map(|s| s.1)).collect();
    let recorded: Vec<Option<i64>> = takes.iter().map(|t| t.recorded).collect();
    let floors: Vec<i64> = takes.iter().map(|t| t.floor).collect();
    let won: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(sql.claim_many.clone()))
        .bind(names)
        .bind(nonces)
        .bind(versions)
        .bind(epochs)
        .bind(recorded)
        .bind(floors)
        .bind(identity)
        .bind(ttl_ms)
        .bind(wall_ms)
        .bind(&*sql.channel)
        .bind(by_heartbeat)
        .fetch_all(&mut *conn)
        .await?;
    Ok(won)
}

/// How many times the readying runs the waiter's look-and-take and the
/// release: PostgreSQL plans a prepared statement anew (a custom plan) at
/// each of its first five runs on a session, and at the sixth compares a
/// generic plan with them and keeps it if it costs no more; the sixth run
/// here builds it, so a handover's look and release are planned by none
/// of their own runs (ADR 0075).
pub(crate) const PLAN_RUNS: usize = 6;

/// Readies `conn` for a handover before one is due: prepares the read,
/// claim, renewal and release statements (sqlx keeps them in the
/// connection's statement cache) and runs the claim once over an empty
/// batch, so that the server backend has parsed and planned them and
/// loaded the catalog entries of the tables, indexes and sequence they
/// touch. A fresh backend otherwise does all of that inside the first
/// claim after a wake-up, on the handover's critical path (ADR 0040).
///
/// Then it runs the waiter's look-and-take and the release [`PLAN_RUNS`]
/// times each, so that the server keeps a generic plan of both and plans
/// neither again at a handover (ADR 0075): inside one transaction that is
/// always rolled back, over a stand-in row that the transaction inserts
/// as held (its name begins with a control character, which no election
/// name or key may hold, and is new at each readying), with a nonce the
/// release's runs do not name. So the look finds it held (it takes
/// nothing, draws no epoch from the sequence and notifies nobody) and the
/// release matches nothing; and nothing the transaction did is ever seen
/// by another session. Skipped when `warm_plans` answers false (the
/// election was dropped while its connections were being readied).
///
/// The empty claim writes nothing, draws no epoch and notifies nobody:
/// every part of the statement reads from the empty batch.
///
/// Failure model: any error of the server (the schema not created yet on
/// a connection opened before the migration, the connection gone); the
/// connection stays usable after a statement error (the transaction is
/// rolled back when dropped), and a caller may ignore the error: an
/// unready connection is only slower.
pub(crate) async fn ready(
    conn: &mut PgConnection,
    sql: &Sql,
    warm_plans: &(dyn Fn() -> bool + Sync),
) -> Result<(), Error> {
    for statement in [
        &sql.read_many,
        &sql.claim_many,
        &sql.take_released,
        &sql.renew_many,
        &sql.release_many,
        &sql.release_one,
    ] {
        (&mut *conn)
            .prepare(AssertSqlSafe(statement.clone()).into_sql_str())
            .await?;
    }
    let none_text: Vec<&str> = Vec::new();
    let none_int: Vec<i64> = Vec::new();
    let none_opt: Vec<Option<i64>> = Vec::new();
    sqlx::query(AssertSqlSafe(sql.claim_many.clone()))
        .bind(&none_text)
        .bind(&none_int)
        .bind(&none_opt)
        .bind(&none_opt)
        .bind(&none_opt)
        .bind(&none_int)
        .bind("")
        .bind(1_i64)
        .bind(0_i64)
        .bind(&*sql.channel)
        .bind(&none_opt)
        .execute(&mut *conn)
        .await?;
    // An election dropped meanwhile (a waiter given up at once) has no
    // handover to plan for: its plans are not warmed, sparing the server
    // twelve runs.
    if !warm_plans() {
        return Ok(());
    }
    // The server's names of sqlx's prepared statements (sqlx names them
    // itself): the runs below go in one simple query of `EXECUTE`s, one
    // round trip instead of one per run, so a connection is busy readying
    // for as short a time as it can be.
    let named: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, statement FROM pg_prepared_statements WHERE statement IN ($1, $2)",
    )
    .bind(&*sql.take_released)
    .bind(&*sql.release_one)
    .fetch_all(&mut *conn)
    .await?;
    let name_of = |statement: &str| {
        named
            .iter()
            .find(|(_, s)| s == statement)
            .map(|(n, _)| n.replace('"', "\"\""))
    };
    let (Some(take), Some(release)) = (name_of(&sql.take_released), name_of(&sql.release_one))
    else {
        return Ok(());
    };
    let channel = sql.channel.replace('\'', "''");
    // The stand-in's name: a control character first, which no election
    // name or key may hold, then a number of this readying's own, so two
    // connections readying at once never wait for each other's row.
    let stand_in = format!("E'\\001ready-{:x}'", election_core::attempt_nonce());
    let mut runs = format!("{};", sql.ready_row(&stand_in));
    for _ in 0..PLAN_RUNS {
        // The stand-in row is held: the look only reads it. Its nonce is
        // 0, not 1: the release matches nothing.
        runs.push_str(&format!(
            " EXECUTE \"{take}\"({stand_in}, '', 0, 1, 0, '{channel}');\
             EXECUTE \"{release}\"({stand_in}, 1, '{channel}', true);"
        ));
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::raw_sql(AssertSqlSafe(runs)).execute(&mut *tx).await?;
    tx.rollback().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seen(row_epoch: Option<i64>, recorded: Option<i64>) -> Seen {
        Seen {
            lease: row_epoch.map(|epoch| Row {
                holder: None,
                epoch,
                version: 1,
                ttl_ms: 1000,
                acquired_unix_ms: None,
                renewed_unix_ms: None,
                value: None,
            }),
            recorded: recorded.map(|epoch| Recorded {
                epoch,
                ttl_ms: 1000,
            }),
            heartbeat: None,
            ours: false,
        }
    }

    #[test]
    fn the_floor_is_above_every_epoch_shown() {
        assert_eq!(seen(None, None).floor(), Some(2));
        assert_eq!(seen(Some(0), None).floor(), Some(2));
        assert_eq!(seen(Some(1), None).floor(), Some(2));
        assert_eq!(seen(Some(3), Some(9)).floor(), Some(10));
        assert_eq!(seen(Some(9), Some(3)).floor(), Some(10));
        assert_eq!(seen(None, Some(i64::MAX - 1)).floor(), Some(i64::MAX));
        assert_eq!(seen(Some(i64::MAX), None).floor(), None);
        assert!(matches!(
            Take::new("n", 1, &seen(Some(i64::MAX), None)),
            Err(Error::Config(ConfigError::EpochExhausted))
        ));
    }

    /// Exactly what `take_released` takes: a released row or a name never
    /// held, with an epoch left above what the row and record show.
    #[test]
    fn takeable_is_released_or_never_held_with_an_epoch_left() {
        assert!(seen(None, None).was_takeable(), "never held");
        assert!(seen(Some(5), Some(5)).was_takeable(), "released");
        assert!(
            !seen(Some(5), Some(i64::MAX)).was_takeable(),
            "epochs exhausted by the record"
        );
        assert!(
            !seen(Some(i64::MAX), None).was_takeable(),
            "epochs exhausted by the row"
        );
        assert!(
            !seen(None, Some(5)).was_takeable(),
            "a row deleted by hand counts as held"
        );
        let mut held = seen(Some(5), Some(5));
        if let Some(row) = held.lease.as_mut() {
            row.holder = Some("a".into());
        }
        assert!(!held.was_takeable(), "held");
    }

    proptest! {
        /// Epoch decoding: exactly the terms' range decodes, and it
        /// round-trips.
        #[test]
        fn epochs_decode_only_in_the_terms_range(v in any::<i64>()) {
            match epoch_of("n", v) {
                Ok(e) => {
                    prop_assert!(v >= 2);
                    prop_assert_eq!(e.get(), u64::try_from(v).unwrap());
                }
                Err(Error::CorruptRow { .. }) => prop_assert!(v < 2),
                Err(other) => prop_assert!(false, "{other:?}"),
            }
        }


        /// The floor is above both epochs shown, never below FIRST.
        #[test]
        fn floors_grow(a in proptest::option::of(0..i64::MAX), b in proptest::option::of(0..i64::MAX)) {
            let f = seen(a, b).floor().expect("below MAX");
            prop_assert!(f >= 2);
            prop_assert!(a.is_none_or(|a| f > a) && b.is_none_or(|b| f > b));
        }
    }
}
