//! The SQLite backend's rows, all on a real database file in the bench
//! directory, opened with [`SqliteElection::open`] (WAL journal,
//! `synchronous = FULL`, the options' busy timeout):
//!
//! - in process, each interleaved round by round with its floor (which of
//!   the two goes first alternates): an uncontested campaign (and the
//!   campaign followed by a resign), one lease renewal transaction, and a
//!   fenced write against the same write unfenced;
//! - across processes, with `election-candidate --backend sqlite://`: a clean handover
//!   and a crash failover.
//!
//! The floor of the election rows is a bare `BEGIN IMMEDIATE; UPDATE one
//! row; COMMIT` through the election's own pool ([`SqliteElection::pool`]),
//! so on the same file with the same connection settings: the one durable
//! commit that a claim, a renewal and a release each cannot avoid.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_sqlite::{SqliteElection, SqliteFence, SqliteOptions};
use election_url::BackendUrl;
use fencing::{ResourceName, Token};
use sqlx::SqlitePool;

use super::fencing::OpSamples;
use super::handover::{Chain, Exit, LeaseSets, LeaseTimings, Process, lock_floor};
use super::report::Row;
use super::rounds::{Campaigns, interleaved, ms, paired, rate, runtime, timed};
use super::stats::Summary;
use super::{SETTLE, Setup, step, summary};
use crate::Result;

/// The lease timings of the handover chain: contenders are woken by the
/// same-host lock (ADR 0026); the poll interval is the TTL, only a
/// backstop, so no poll setting is involved in the measured handover.
pub(crate) const HANDOVER: LeaseTimings = LeaseTimings {
    ttl_ms: 2000,
    renew_ms: 500,
    poll_ms: 2000,
};

/// The lease timings of the failover chain: the kernel frees a killed
/// holder's same-host lock and its waiter takes over at once (ADR 0026);
/// the poll interval is the TTL, only a backstop. A takeover that missed
/// the shortcut would take about a TTL, which the row would show.
pub(crate) const FAILOVER: LeaseTimings = LeaseTimings {
    ttl_ms: 1000,
    renew_ms: 300,
    poll_ms: 1000,
};

/// The in-process rows' options: a renewal interval longer than the run,
/// so a term's own renewal loop never competes with the timed
/// transactions. The busy timeout is the default 1 s. (No in-process row
/// depends on the TTL.)
fn in_process_options() -> Result<SqliteOptions> {
    Ok(SqliteOptions::new(
        Duration::from_secs(600),
        Duration::from_secs(240),
    )?)
}

/// The statement of the floor, on a one-row table.
const FLOOR_UPDATE: &str = "UPDATE bench_floor SET v = v + 1 WHERE id = 1";

/// The statement the renewal loop of `election-sqlite` runs (its
/// `row::renew`), in a `BEGIN IMMEDIATE` transaction. A test checks that
/// the crate still runs this text.
const RENEW: &str = "UPDATE election_leases SET version = version + 1, renewed_unix_ms = ?4
         WHERE name = ?1 AND nonce = ?2 AND epoch = ?3 AND holder IS NOT NULL";

/// The write of the fenced-write rows.
const WRITE: &str = "INSERT INTO bench_data (v) VALUES (?1)";

/// The wall clock in Unix milliseconds, as the renewal writes it.
fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Opens the election database at `db` and creates the floor's table.
async fn open(db: &Path, options: SqliteOptions) -> Result<SqliteElection> {
    let election = SqliteElection::open(db, options).await?;
    let pool = election.pool();
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_floor (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
    )
    .execute(pool)
    .await?;
    sqlx::query("INSERT OR IGNORE INTO bench_floor (id, v) VALUES (1, 0)")
        .execute(pool)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_data (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
    )
    .execute(pool)
    .await?;
    Ok(election)
}

/// The floor: `BEGIN IMMEDIATE; UPDATE bench_floor ...; COMMIT` through
/// `pool`, as the library's own transactions go.
async fn bare_transaction(pool: &SqlitePool) -> Result<()> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let done = sqlx::query(FLOOR_UPDATE).execute(&mut *tx).await?;
    tx.commit().await?;
    if done.rows_affected() != 1 {
        return Err("the floor's UPDATE matched no row".into());
    }
    Ok(())
}

/// Samples of the uncontested campaign and of its interleaved floor.
#[derive(Debug, Default)]
pub(crate) struct CampaignSamples {
    /// The bare transaction.
    pub(crate) floor: Vec<u64>,
    /// `candidate.campaign()` alone.
    pub(crate) campaign: Vec<u64>,
    /// `candidate.campaign()` then `term.resign()`.
    pub(crate) campaign_resign: Vec<u64>,
}

/// Campaigns and resigns `warmup + n` times in an election nobody else
/// contests, interleaved with the bare transaction.
pub(crate) fn campaign(db: &Path, n: usize, warmup: usize) -> Result<CampaignSamples> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(db, options).await?;
        let pool = election.pool();
        let mut campaigns = Campaigns::new(&election, "campaign", "a")?;
        let (floor, measured) = interleaved(
            n,
            warmup,
            async |_| timed(bare_transaction(pool)).await,
            async |_| campaigns.round().await,
        )
        .await?;
        pool.close().await;
        Ok(CampaignSamples {
            floor,
            campaign: measured.iter().map(|m| m.0).collect(),
            campaign_resign: measured.iter().map(|m| m.1).collect(),
        })
    })
}

/// Samples of one measurement and of its interleaved floor.
#[derive(Debug)]
pub(crate) struct Paired {
    /// The floor.
    pub(crate) floor: Vec<u64>,
    /// The measurement.
    pub(crate) measured: Vec<u64>,
}

/// The renewal transaction of a real term (won by a campaign; its nonce
/// and epoch read from the lease row), `warmup + n` times, interleaved with
/// the bare transaction. Each renewal must match the term's row.
pub(crate) fn renewal(db: &Path, n: usize, warmup: usize) -> Result<Paired> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(db, options).await?;
        let pool = election.pool();
        let name = "renewal";
        let term = election.candidate(name, "a")?.campaign().await?;
        let (nonce, epoch): (Option<i64>, i64) =
            sqlx::query_as("SELECT nonce, epoch FROM election_leases WHERE name = ?1")
                .bind(name)
                .fetch_one(pool)
                .await?;
        let nonce = nonce.ok_or("the won lease row has no nonce")?;
        if u64::try_from(epoch).ok() != Some(term.epoch().get()) {
            return Err(format!("the row shows epoch {epoch}, the term {}", term.epoch()).into());
        }
        let (floor, measured) = paired(
            n,
            warmup,
            async |_| bare_transaction(pool).await,
            async |_| {
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let done = sqlx::query(RENEW)
                    .bind(name)
                    .bind(nonce)
                    .bind(epoch)
                    .bind(wall_ms())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                if done.rows_affected() != 1 {
                    return Err("the renewal matched no row: the term was lost".into());
                }
                Ok(())
            },
        )
        .await?;
        if term.is_lost() {
            return Err("the term was lost during the renewals".into());
        }
        term.resign().await?;
        pool.close().await;
        Ok(Paired { floor, measured })
    })
}

/// Samples of the fenced write and of the same write unfenced.
#[derive(Debug)]
pub(crate) struct FencedSamples {
    /// `BEGIN IMMEDIATE; advance_in; INSERT; COMMIT`.
    pub(crate) fenced: OpSamples,
    /// `BEGIN IMMEDIATE; INSERT; COMMIT`.
    pub(crate) unfenced: OpSamples,
}

/// The guarded write: one `INSERT` in a `BEGIN IMMEDIATE` transaction,
/// after `SqliteFence::advance_in` with `token` if there is one.
async fn write(
    pool: &SqlitePool,
    fence: Option<(&SqliteFence, &ResourceName, Token)>,
    v: usize,
) -> Result<()> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    if let Some((fence, resource, token)) = fence {
        fence.advance_in(&mut tx, resource, token).await?;
    }
    sqlx::query(WRITE)
        .bind(i64::try_from(v)?)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// `warmup + n` fenced writes with a real term's token (the same token
/// every time, as a leader's writes of one term carry), interleaved with
/// the same write unfenced; then `n` of each in an untimed-per-op batch
/// for the throughput.
pub(crate) fn fenced_write(db: &Path, n: usize, warmup: usize) -> Result<FencedSamples> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(db, options).await?;
        let pool = election.pool();
        let term = election.candidate("writer", "a")?.campaign().await?;
        let token = Token::issue(&term)?;
        let resource = ResourceName::new("bench_data")?;
        let sqlite_fence = election.fence();
        let fence = Some((&sqlite_fence, &resource, token));
        let (unfenced, fenced) = paired(
            n,
            warmup,
            async |i| write(pool, None, i).await,
            async |i| write(pool, fence, i).await,
        )
        .await?;
        let fenced_rate = rate(n, async |i| write(pool, fence, i).await).await?;
        let unfenced_rate = rate(n, async |i| write(pool, None, i).await).await?;
        term.resign().await?;
        pool.close().await;
        Ok(FencedSamples {
            fenced: OpSamples {
                per_op: fenced,
                ops_per_s: fenced_rate,
            },
            unfenced: OpSamples {
                per_op: unfenced,
                ops_per_s: unfenced_rate,
            },
        })
    })
}

/// The floor alone, `warmup + n` times, on the database at `db` (opened
/// with the chain's options), before a chain runs on it.
pub(crate) fn floor(
    db: &Path,
    options: SqliteOptions,
    n: usize,
    warmup: usize,
) -> Result<Vec<u64>> {
    runtime()?.block_on(async {
        let election = open(db, options).await?;
        let pool = election.pool();
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let t = timed(bare_transaction(pool)).await?;
            if round >= warmup {
                samples.push(t);
            }
        }
        pool.close().await;
        Ok(samples)
    })
}

impl LeaseTimings {
    fn options(&self) -> Result<SqliteOptions> {
        Ok(SqliteOptions::new(
            Duration::from_millis(self.ttl_ms),
            Duration::from_millis(self.renew_ms),
        )?)
    }
}

/// The floor's name in the table.
const FLOOR: &str = "bare `BEGIN IMMEDIATE; UPDATE bench_floor …; COMMIT` (same pool, interleaved)";

/// Measures the SQLite group: pushes its rows, and the figures derived
/// from them to `notes`.
pub(crate) fn rows(s: &Setup<'_>, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let c = s.counts;
    let base = s.dir.join("sqlite");
    std::fs::create_dir_all(&base)?;
    let db = base.join("bench.db");

    let camp = step(
        "SQLite uncontested campaign + resign, with its floor",
        || campaign(&db, c.in_process, c.warm),
    )?;
    let floor_summary = summary(&camp.floor, "bare transaction")?;
    for (what, samples) in [
        ("SQLite: uncontested campaign (in-process)", &camp.campaign),
        (
            "SQLite: uncontested campaign + resign (in-process)",
            &camp.campaign_resign,
        ),
    ] {
        rows.push(Row {
            what: what.into(),
            measured: summary(samples, what)?,
            floor: FLOOR.into(),
            floor_measured: Some(floor_summary),
            ops_per_s: None,
        });
    }

    let (handover, handover_floor) = cross(s, Exit::Resign, rows)?;
    notes.push(format!(
        "SQLite clean handover, woken by the same-host lock (ADR 0026): A's release \
         commits, then A frees the lock, the kernel wakes B's waiting thread, and B \
         claims in one transaction; the poll interval is the TTL ({}), only a \
         backstop. So expect the bare OFD handover plus about two commits (2 × {} at \
         the transaction floor's median = {}); measured median {} (min {}, max {}).",
        ms(HANDOVER.poll_ms * 1_000_000),
        ms(handover_floor.median_ns),
        ms(2 * handover_floor.median_ns),
        ms(handover.median_ns),
        ms(handover.min_ns),
        ms(handover.max_ns),
    ));

    let (failover, _) = cross(s, Exit::Kill, rows)?;
    let ttl = FAILOVER.ttl_ms * 1_000_000;
    notes.push(format!(
        "SQLite crash failover of a killed holder: min {}, median {}, p99 {}, max {} \
         (TTL {}, poll {}, only a backstop). The kernel frees the killed holder's \
         same-host lock, B's waiting thread gets it, and B takes over at once because \
         the row's lock_id names that very lock (ADR 0026): no TTL wait. A stopped \
         (SIGSTOP) or hung holder keeps its lock and is still replaced only after a \
         full TTL; that is not measured here.",
        ms(failover.min_ns),
        ms(failover.median_ns),
        ms(failover.p99_ns),
        ms(failover.max_ns),
        ms(ttl),
        ms(FAILOVER.poll_ms * 1_000_000),
    ));

    let url = sqlite_url(&base.join("lease-set-failover.db"))?;
    let sets = LeaseSets {
        bin: s.candidate_bin,
        url: &url,
        keys: SET_KEYS,
        flags: FAILOVER.flags(),
        log: s.log,
    };
    let sets = step("SQLite lease set: SIGKILL of a set's process", || {
        // The kill lands at every phase of A's renewals.
        let spread = Duration::from_millis(FAILOVER.renew_ms);
        sets.failover(c.failovers, c.cross_warm, SETTLE, spread)
    })
    .map_err(|e| super::with_log_tail(e, s.log))?;
    let what = format!(
        "SQLite: lease set, crash failover of a killed process: SIGKILL of A → B holds all \
         {SET_KEYS} keys (processes; TTL {} ms, poll {} ms, only a backstop)",
        FAILOVER.ttl_ms, FAILOVER.poll_ms
    );
    rows.push(Row {
        measured: summary(&sets, &what)?,
        what,
        floor: format!("the configured TTL, {} ms", FAILOVER.ttl_ms),
        floor_measured: Some(summary(&[FAILOVER.ttl_ms * 1_000_000], "TTL")?),
        ops_per_s: None,
    });

    let renew = step("SQLite renewal transaction, with its floor", || {
        renewal(&db, c.in_process, c.warm)
    })?;
    let what = "SQLite: lease renewal, one transaction (in-process)";
    let renewal_summary = summary(&renew.measured, what)?;
    rows.push(Row {
        what: what.into(),
        measured: renewal_summary,
        floor: FLOOR.into(),
        floor_measured: Some(summary(&renew.floor, "bare transaction")?),
        ops_per_s: None,
    });
    let default_renew = election_sqlite::DEFAULT_RENEW_INTERVAL;
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate of a few thousand at most; `as` saturates"
    )]
    let per_minute = (60.0 / default_renew.as_secs_f64()).round() as u64;
    let busy = |each: u64| per_minute * each;
    notes.push(format!(
        "SQLite renewal cost per term: at the default renew interval ({} s) a term \
         renews {per_minute} times a minute, so it keeps a write transaction open for \
         {per_minute} × {:.0} µs = {} a minute at the median ({:.3} % of the minute), \
         {} at the p99 of every renewal.",
        default_renew.as_secs_f64(),
        renewal_summary.median_us(),
        ms(busy(renewal_summary.median_ns)),
        busy(renewal_summary.median_ns) as f64 / 60e9 * 100.0,
        ms(busy(renewal_summary.p99_ns)),
    ));

    let fenced = step("SQLite fenced and unfenced write", || {
        fenced_write(&db, c.in_process, c.warm)
    })?;
    let what = "SQLite: fenced write: `advance_in` + INSERT in one `BEGIN IMMEDIATE` … `COMMIT`";
    rows.push(Row {
        what: what.into(),
        measured: summary(&fenced.fenced.per_op, what)?,
        floor: "the same INSERT transaction without the fence (interleaved)".into(),
        floor_measured: Some(summary(&fenced.unfenced.per_op, "unfenced write")?),
        ops_per_s: Some((fenced.fenced.ops_per_s, Some(fenced.unfenced.ops_per_s))),
    });
    Ok(())
}

/// One cross-process measurement, in two rows: beside the bare OFD lock
/// handover (or failover) between two helper processes on a file in the
/// same directory, and beside the bare transaction on the chain's database
/// (handover) or the configured TTL (failover). Returns the measurement's
/// summary and the second floor's.
fn cross(s: &Setup<'_>, exit: Exit, rows: &mut Vec<Row>) -> Result<(Summary, Summary)> {
    let c = s.counts;
    let (tag, timings, n, spread_ms) = match exit {
        // The release lands at every phase of A's renewals.
        Exit::Resign => ("handover", HANDOVER, c.handovers, HANDOVER.renew_ms),
        // The kill lands at every phase of A's renewals.
        Exit::Kill => ("failover", FAILOVER, c.failovers, FAILOVER.renew_ms),
    };
    let base = s.dir.join("sqlite");
    let db: PathBuf = base.join(format!("{tag}.db"));
    let options = timings.options()?;
    let ofd = step(&format!("floor: bare OFD lock {tag} (SQLite)"), || {
        let lock = base.join(format!("{tag}-floor.lock"));
        lock_floor(s.exe, &lock, s.log, exit, (n, c.cross_warm), SETTLE)
    })?;
    let (what, ofd_what, floor_what, floor_summary) = match exit {
        Exit::Resign => {
            let samples = step(
                "floor: SQLite bare transaction on the handover file",
                || floor(&db, options, c.in_process, c.warm),
            )?;
            (
                format!(
                    "SQLite: clean handover: resign in A → elected in B (processes; woken by \
                     the same-host lock, poll = TTL = {} ms, a backstop)",
                    timings.poll_ms
                ),
                exit.lock_floor(),
                "bare `BEGIN IMMEDIATE; UPDATE bench_floor …; COMMIT` on the same file \
                 (expect ≈ OFD handover + 2 commits)"
                    .to_owned(),
                summary(&samples, "bare transaction")?,
            )
        }
        Exit::Kill => (
            format!(
                "SQLite: crash failover of a killed holder: SIGKILL of A → elected in B \
                 (processes; same-host takeover, TTL {} ms, renew {} ms, poll {} ms)",
                timings.ttl_ms, timings.renew_ms, timings.poll_ms
            ),
            exit.lock_floor(),
            format!("the configured TTL, {} ms", timings.ttl_ms),
            summary(&[timings.ttl_ms * 1_000_000], "TTL")?,
        ),
    };
    let mut chain = Chain::new(
        Process::candidate(s.candidate_bin, &sqlite_url(&db)?, "bench", timings.flags()),
        s.log.to_path_buf(),
    );
    let samples = step(&format!("election-sqlite {tag}"), || {
        chain.measure(
            exit,
            n,
            c.cross_warm,
            SETTLE,
            Duration::from_millis(spread_ms),
        )
    })
    .map_err(|e| super::with_log_tail(e, s.log))?;
    let measured = summary(&samples, &what)?;
    rows.push(Row {
        what: what.clone(),
        measured,
        floor: ofd_what.into(),
        floor_measured: Some(summary(&ofd, ofd_what)?),
        ops_per_s: None,
    });
    rows.push(Row {
        what,
        measured,
        floor: floor_what,
        floor_measured: Some(floor_summary),
        ops_per_s: None,
    });
    Ok((measured, floor_summary))
}

/// The keys of the lease-set failover row.
const SET_KEYS: usize = 10;

/// The backend URL of the database file `db` (percent-encoded as the
/// grammar asks).
pub(crate) fn sqlite_url(db: &Path) -> Result<BackendUrl> {
    Ok(BackendUrl::new(election_sqlite::SqliteUrl::new(db)))
}

/// How to read the SQLite backend's rows: its section of the report's notes after
/// the table (see [`report::document`](super::report::document)).
pub(crate) const READING: &str =
    "SQLite backend (`election-sqlite`), on a database file in the bench
directory opened with `SqliteElection::open` (WAL journal,
`synchronous = FULL`, busy timeout 1 s):

- floor: a bare `BEGIN IMMEDIATE; UPDATE bench_floor SET v = v + 1 WHERE
  id = 1; COMMIT` through the election's own pool (`election.pool()`), so
  with the same file and connection settings: the one durable commit (a
  WAL append and fsync) that a claim, a renewal and a release each make.
  The in-process rows run round by round interleaved with their own floor
  samples (which goes first alternates), so the floor figures differ a
  little from row to row.
- *uncontested campaign*: `Candidate::campaign()` on a `SqliteClaim` nobody
  else contests (one `BEGIN IMMEDIATE` transaction that reads the lease
  row and writes the claim, then the start of the renewal task); *+
  resign* adds `Term::resign()`, a second transaction (the release), so
  expect about two floors. The in-process rows use a renewal interval
  longer than the run, so a term's own renewals never compete with them.
- *clean handover*: separate `election-candidate --backend sqlite://` processes (TTL
  2000 ms, renew 500 ms, poll 2000 ms: the TTL, only a backstop); from
  A's `resigning` stamp to B's `elected` stamp. B waits in the kernel for
  the same-host lock (ADR 0026), which A frees after its release commits;
  B then claims in one transaction. No poll setting is involved, so
  expect the bare OFD handover plus about two commits (A's release and
  B's claim). Two floors: the bare OFD lock handover between two helper
  processes on a file in the same directory, and the bare transaction on
  the same database file. The pause before A resigns (20 ms, plus a share
  of one renew interval that varies evenly from round to round) makes the
  release land at every phase of A's renewals.
- *crash failover of a killed holder*: from the bench's stamp just before
  `kill(A, SIGKILL)` to B's `elected` stamp (TTL 1000 ms, renew 300 ms,
  poll 1000 ms, only a backstop). The kernel frees A's same-host lock, B's
  waiting thread gets it, and B takes over at once because the row's
  `lock_id` names that very lock (ADR 0026): no TTL wait. Floors: the
  bare OFD lock failover (SIGKILL of a helper holding the lock → the
  waiting helper's `F_OFD_SETLKW` returns), and the configured TTL (the
  ratio is the failover in TTLs, as before the same-host lock). A
  stopped or hung holder keeps the lock and is replaced after a full TTL;
  that is not measured. The pause before the kill (20 ms, plus a share of
  one renew interval that varies evenly from round to round) makes the
  kill land at every phase of A's renewals.
- *lease set, crash failover of a killed process*: `election-candidate
  --set k0,…,k9` processes (a `SqliteKeyedClaims` set asking 10 keys; same
  timings as the crash failover); set A holds the 10 keys, set B waits for
  them in the kernel (one thread per key), A is killed; from the bench's
  stamp just before the kill to the moment the bench reads B's `won 10`.
  B looks at its held keys every millisecond and its line carries no
  stamp, so the figure includes up to 1 ms of that sampling and a pipe
  read. Floor: the configured TTL (what a dead set's keys cost before ADR
  0029).
- *lease renewal*: the renewal loop's own statement, `UPDATE
  election_leases SET version = version + 1, renewed_unix_ms = ? WHERE
  name = ? AND nonce = ? AND epoch = ? AND holder IS NOT NULL` in `BEGIN
  IMMEDIATE` … `COMMIT`, run by the bench against the row of a live term
  won by a real campaign (nonce and epoch read from the row; every
  renewal must match it). The cost per term-minute at the default renew
  interval is worked out below the table.
- *fenced write*: `BEGIN IMMEDIATE`, `SqliteFence::advance_in` with a
  live term's token (the same token every time, as one term's writes
  carry), `INSERT INTO bench_data (v) VALUES (?)`, `COMMIT`; the floor is
  the same transaction without `advance_in`, interleaved. ops/s is from a
  separate batch of the same size of each.

";

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn the_renewal_statement_is_the_crates() {
        let row = include_str!("../../../crates/election-sqlite/src/store/row.rs");
        assert!(
            words(row).contains(&words(RENEW)),
            "election-sqlite's renewal statement changed: update RENEW"
        );
    }

    #[test]
    fn chain_timings_are_valid_options() {
        assert!(HANDOVER.options().is_ok());
        assert!(FAILOVER.options().is_ok());
        assert!(in_process_options().is_ok());
    }

    #[test]
    fn in_process_rows_run() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let c = campaign(&db, 3, 1).unwrap();
        assert_eq!((c.floor.len(), c.campaign.len()), (3, 3));
        assert_eq!(c.campaign_resign.len(), 3);
        let r = renewal(&db, 3, 1).unwrap();
        assert_eq!((r.floor.len(), r.measured.len()), (3, 3));
        let f = fenced_write(&db, 3, 1).unwrap();
        assert_eq!((f.fenced.per_op.len(), f.unfenced.per_op.len()), (3, 3));
        let options = FAILOVER.options().unwrap();
        assert_eq!(
            floor(&dir.path().join("u.db"), options, 2, 1)
                .unwrap()
                .len(),
            2
        );
    }
}
