//! The PostgreSQL group (`--only postgres`): every row on one real server
//! started by `postgres-testkit` (Debian's PostgreSQL, `fsync = on`, TCP on
//! 127.0.0.1), each beside a floor measured in the same run on the same
//! server:
//!
//! - in process, each interleaved round by round with its floor (which of
//!   the two goes first alternates): an uncontested campaign (and the
//!   campaign followed by a resign) and one lease renewal (the commit-point
//!   check [`Term::confirm`](election_core::Term::confirm), which runs the
//!   renewal statement for the one key), beside a bare `UPDATE` of one row in
//!   its own transaction on the election's pool; and a fenced write, two
//!   ways ([`PostgresFence::begin_fenced`], the check in the round trip of
//!   the `BEGIN`, and [`PostgresFence::advance_in`] in a plain transaction,
//!   each with an `INSERT`), beside the same transaction without the fence,
//!   the three interleaved (`--only postgres-fence` runs these rows alone);
//! - across processes (`election-bench helper postgres`, a candidate of
//!   this crate's own that speaks the candidate line protocol): a clean
//!   handover beside two bare `UPDATE` transactions back to back (the release
//!   and the claim it cannot avoid), and a crash failover (SIGKILL) beside
//!   the configured TTL, which it costs by design (a dropped connection does
//!   not prove a holder gone); and the same clean handover between two
//!   elections within this process, beside the same floor;
//! - one process holding [`LEASE_KEYS`](super::LEASE_KEYS) keys in one
//!   lease set at the default TTL: CPU share of this process and of the
//!   server's processes, statements and WAL bytes per renewal interval
//!   (from `pg_stat_statements`, loaded at the server's restart, else from
//!   `pg_stat_database.xact_commit`), and WAL written (`pg_current_wal_lsn`).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use candidate_testkit::protocol::{Command, Event};
use election_postgres::{PostgresElection, PostgresFence, PostgresOptions};
use fencing::{ResourceName, Token};
use postgres_testkit::Server;
use sqlx::PgPool;

use super::handover::{Chain, Exit, LeaseTimings, Process};
use super::idle::after_idle;
use super::ofd::mono_ns;
use super::report::{Row, met_2x};
use super::rounds::{Campaigns, interleaved, ms, paired, rate, timed};
use super::stats::{Summary, ns};
use super::{Counts, SETTLE, Setup, step, summary};
use crate::Result;

/// The lease timings of the handover chain: a waiting contender is woken by
/// the release's `NOTIFY`; the poll interval is the TTL, only a backstop,
/// so no poll setting is involved in a clean handover.
pub(crate) const HANDOVER: LeaseTimings = LeaseTimings {
    ttl_ms: 2000,
    renew_ms: 500,
    poll_ms: 2000,
};

/// The lease timings of the failover chain: a killed holder's row is taken
/// over only after the contender has seen it unrenewed for a full TTL on its
/// own clock, checked at every poll: expect TTL plus up to a poll interval.
pub(crate) const FAILOVER: LeaseTimings = LeaseTimings {
    ttl_ms: 1000,
    renew_ms: 300,
    poll_ms: 100,
};

/// How long a new waiter is given to block in its campaign (and to start
/// listening) before the leader resigns: longer than [`SETTLE`], since the
/// helper connects and `LISTEN`s on a connection of its own.
const PG_SETTLE: Duration = Duration::from_millis(100);

/// The statement of the floor, on a one-row table of the bench's own.
const FLOOR_UPDATE: &str = "UPDATE bench_floor SET v = v + 1 WHERE id = 1";

/// The write of the fenced-write rows.
const WRITE: &str = "INSERT INTO bench_data (v) VALUES ($1)";

/// The floor's name in the table.
const FLOOR: &str =
    "bare `UPDATE bench_floor …` in its own transaction (same server and pool, interleaved)";

/// How long the resigning process waits before it closes its connections
/// in the handover row that keeps its exit off B's claim.
const LINGER_MS: u64 = 200;

/// The handover rows' floor in a loop.
const TWO_FLOORS: &str = "two bare `UPDATE` transactions back to back (same server)";

/// The handover rows' floor after their idleness ([`settled_floor`]).
fn settled_floor_label() -> String {
    format!(
        "the same two, each pair after {} ms of idleness (as a handover starts; ADR 0090)",
        PG_SETTLE.as_millis()
    )
}

/// The in-process rows' options: a renewal interval longer than the run,
/// so a term's own renewal loop never competes with the timed statements.
fn in_process_options() -> Result<PostgresOptions> {
    Ok(PostgresOptions::new(
        Duration::from_secs(600),
        Duration::from_secs(240),
    )?)
}

impl LeaseTimings {
    fn postgres_options(&self) -> Result<PostgresOptions> {
        Ok(PostgresOptions::new(
            Duration::from_millis(self.ttl_ms),
            Duration::from_millis(self.renew_ms),
        )?)
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

/// Connects an election at `url` with `options` and creates the bench's
/// own tables (outside the election's schema, as an application's).
async fn open(url: &str, options: PostgresOptions) -> Result<PostgresElection> {
    let election = PostgresElection::connect(url, options).await?;
    let pool = election.pool();
    for sql in [
        "CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, v bigint NOT NULL)",
        "INSERT INTO bench_floor (id, v) VALUES (1, 0) ON CONFLICT DO NOTHING",
        "CREATE TABLE IF NOT EXISTS bench_data (id bigserial PRIMARY KEY, v bigint NOT NULL)",
    ] {
        sqlx::query(sql).execute(pool).await?;
    }
    Ok(election)
}

/// The floor: one `UPDATE` of one row, its own (autocommit) transaction.
async fn bare_transaction(pool: &PgPool) -> Result<()> {
    let done = sqlx::query(FLOOR_UPDATE).execute(pool).await?;
    if done.rows_affected() != 1 {
        return Err("the floor's UPDATE matched no row".into());
    }
    Ok(())
}

/// Samples of the in-process rows.
#[derive(Debug, Default)]
pub(crate) struct InProcess {
    /// The floor interleaved with the campaigns.
    pub(crate) campaign_floor: Vec<u64>,
    /// `candidate.campaign()` alone.
    pub(crate) campaign: Vec<u64>,
    /// `candidate.campaign()` then `term.resign()`.
    pub(crate) campaign_resign: Vec<u64>,
    /// The floor interleaved with the renewals.
    pub(crate) renewal_floor: Vec<u64>,
    /// `term.confirm()`: one conditional renewal.
    pub(crate) renewal: Vec<u64>,
    /// Two floor transactions back to back (the handover's floor).
    pub(crate) two_floors: Vec<u64>,
    /// The fenced and unfenced writes.
    pub(crate) writes: Writes,
}

/// Samples of the fenced-write rows, the three kinds interleaved.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    /// `begin_fenced` (`SELECT fence_enter(..); BEGIN`); `INSERT; COMMIT`.
    pub(crate) begin_fenced: Vec<u64>,
    /// `BEGIN; advance_in; INSERT; COMMIT`.
    pub(crate) advance_in: Vec<u64>,
    /// `BEGIN; INSERT; COMMIT`.
    pub(crate) unfenced: Vec<u64>,
    /// Writes per second of each, in batches of `n`: `begin_fenced`,
    /// `advance_in`, unfenced.
    pub(crate) rates: (f64, f64, f64),
}

/// How a write is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fencing {
    /// Not fenced.
    None,
    /// [`PostgresFence::begin_fenced`].
    BeginFenced,
    /// [`PostgresFence::advance_in`] after a plain `BEGIN`.
    AdvanceIn,
}

/// The guarded write: one `INSERT` in a transaction, fenced by `token`
/// as `how` says.
async fn write(
    pool: &PgPool,
    fence: (&PostgresFence, &ResourceName, Token),
    how: Fencing,
    v: usize,
) -> Result<()> {
    let (fence, resource, token) = fence;
    let mut tx = match how {
        Fencing::BeginFenced => fence.begin_fenced(resource, token).await?,
        Fencing::None | Fencing::AdvanceIn => pool.begin().await?,
    };
    if how == Fencing::AdvanceIn {
        fence.advance_in(&mut tx, resource, token).await?;
    }
    sqlx::query(WRITE)
        .bind(i64::try_from(v)?)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// `warmup + n` rounds of the three writes on `election`'s pool with a real
/// term's token (the same every time, as one term's writes carry), the
/// order rotating from round to round, then a batch of `n` of each for the
/// rates.
async fn writes(election: &PostgresElection, n: usize, warmup: usize) -> Result<Writes> {
    let pool = election.pool();
    let term = election.candidate("writer", "bench/a")?.campaign().await?;
    let token = Token::issue(&term)?;
    let resource = ResourceName::new("bench_data")?;
    let fence = election.fence();
    let fence = (&fence, &resource, token);
    let mut out = Writes::default();
    let kinds = [Fencing::None, Fencing::BeginFenced, Fencing::AdvanceIn];
    for round in 0..warmup + n {
        for k in 0..kinds.len() {
            let how = kinds[(round + k) % kinds.len()];
            let t = timed(write(pool, fence, how, round)).await?;
            if round >= warmup {
                match how {
                    Fencing::None => out.unfenced.push(t),
                    Fencing::BeginFenced => out.begin_fenced.push(t),
                    Fencing::AdvanceIn => out.advance_in.push(t),
                }
            }
        }
    }
    out.rates = (
        rate(n, async |i| {
            write(pool, fence, Fencing::BeginFenced, i).await
        })
        .await?,
        rate(n, async |i| write(pool, fence, Fencing::AdvanceIn, i).await).await?,
        rate(n, async |i| write(pool, fence, Fencing::None, i).await).await?,
    );
    term.resign().await?;
    Ok(out)
}

/// The fenced-write rows alone (`--only postgres-fence`): on the server at
/// `url`, with the in-process rows' options.
pub(crate) fn fenced_writes(url: &str, n: usize, warmup: usize) -> Result<Writes> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(url, options).await?;
        let out = writes(&election, n, warmup).await;
        election.close().await;
        out
    })
}

/// The in-process rows on the server at `url`: campaigns (each checked to
/// win a higher epoch than the last), renewals of a real term, two floors
/// back to back, fenced and unfenced writes.
pub(crate) fn in_process(url: &str, n: usize, warmup: usize) -> Result<InProcess> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(url, options).await?;
        let pool = election.pool();
        let mut out = InProcess::default();

        let mut campaigns = Campaigns::new(&election, "campaign", "bench/a")?;
        let (floor, measured) = interleaved(
            n,
            warmup,
            async |_| timed(bare_transaction(pool)).await,
            async |_| campaigns.round().await,
        )
        .await?;
        out.campaign_floor = floor;
        out.campaign = measured.iter().map(|m| m.0).collect();
        out.campaign_resign = measured.iter().map(|m| m.1).collect();

        let term = election.candidate("renewal", "bench/a")?.campaign().await?;
        let (floor, renewal) = paired(
            n,
            warmup,
            async |_| bare_transaction(pool).await,
            async |_| Ok(term.confirm().await?),
        )
        .await?;
        if term.is_lost() {
            return Err("the term was lost during the renewals".into());
        }
        term.resign().await?;
        out.renewal_floor = floor;
        out.renewal = renewal;

        for round in 0..warmup + n {
            let t = timed(async {
                bare_transaction(pool).await?;
                bare_transaction(pool).await
            })
            .await?;
            if round >= warmup {
                out.two_floors.push(t);
            }
        }

        out.writes = writes(&election, n, warmup).await?;
        election.close().await;
        Ok(out)
    })
}

/// The handovers' floor after their idleness (ADR 0090): `warmup + n`
/// pairs of bare transactions back to back, each pair after
/// [`PG_SETTLE`] with nothing sent, as a handover's sample starts after
/// its waiter was given [`PG_SETTLE`] to wait.
pub(crate) fn settled_floor(url: &str, n: usize, warmup: usize) -> Result<Vec<u64>> {
    let options = in_process_options()?;
    runtime()?.block_on(async {
        let election = open(url, options).await?;
        let pool = election.pool();
        let samples = after_idle(n, warmup, PG_SETTLE, async |_| {
            bare_transaction(pool).await?;
            bare_transaction(pool).await
        })
        .await;
        election.close().await;
        samples
    })
}

/// `n` clean handovers (after `warmup`) between two elections in this
/// process, each with its own pool and listener connection (HANDOVER
/// timings; the poll, a backstop, is the TTL): A holds, B's campaign runs
/// in a task and is given [`PG_SETTLE`] to wait, then the sample runs from
/// just before A's `resign()` to B's campaign returning. A and B swap
/// roles every round. Each epoch must exceed the last.
pub(crate) fn in_process_handover(url: &str, n: usize, warmup: usize) -> Result<Vec<u64>> {
    let options = HANDOVER.postgres_options()?;
    let poll = Duration::from_millis(HANDOVER.poll_ms);
    runtime()?.block_on(async {
        let a = PostgresElection::connect(url, options.clone()).await?;
        let b = PostgresElection::connect(url, options).await?;
        let name = "handover-in-process";
        let candidates = [
            std::sync::Arc::new(a.candidate(name, "bench/a")?.with_poll_interval(poll)?),
            std::sync::Arc::new(b.candidate(name, "bench/b")?.with_poll_interval(poll)?),
        ];
        let mut leader = candidates[0].campaign().await?;
        let mut epoch = leader.epoch().get();
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let next = candidates[(round + 1) % 2].clone();
            let waiting = tokio::spawn(async move {
                let term = next.campaign().await;
                (term, Instant::now())
            });
            tokio::time::sleep(PG_SETTLE).await;
            if waiting.is_finished() {
                return Err("the waiting candidate was elected while the leader held".into());
            }
            let t0 = Instant::now();
            leader.resign().await?;
            let (term, t1) = waiting.await?;
            let term = term?;
            if term.epoch().get() <= epoch {
                return Err(format!("epoch {} after {epoch}: not increasing", term.epoch()).into());
            }
            epoch = term.epoch().get();
            if round >= warmup {
                samples.push(ns(t1.saturating_duration_since(t0)));
            }
            leader = term;
        }
        leader.resign().await?;
        a.close().await;
        b.close().await;
        Ok(samples)
    })
}

/// `election-bench helper postgres URL NAME TTL_MS RENEW_MS POLL_MS`: a
/// candidate of `election-postgres` that speaks the candidate line
/// protocol (`campaigning`, `elected <epoch> <mono_ns>`, then on `resign`
/// or EOF `resigning <mono_ns>`, the release, `resigned <mono_ns>`; `exit`
/// exits at once). Its identity is `bench/<pid>`. After `resigned` it
/// waits `LINGER_MS` (default 0) before it closes its connections and
/// exits.
pub(crate) fn helper(args: &[String]) -> Result<()> {
    let (url, name, ttl, renew, poll, linger) = match args {
        [url, name, ttl, renew, poll] => (url, name, ttl, renew, poll, "0"),
        [url, name, ttl, renew, poll, linger] => (url, name, ttl, renew, poll, linger.as_str()),
        _ => {
            return Err(
                "usage: election-bench helper postgres URL NAME TTL_MS RENEW_MS POLL_MS [LINGER_MS]"
                    .into(),
            );
        }
    };
    let linger = Duration::from_millis(linger.parse()?);
    let timings = LeaseTimings {
        ttl_ms: ttl.parse()?,
        renew_ms: renew.parse()?,
        poll_ms: poll.parse()?,
    };
    let rt = runtime()?;
    let election = rt.block_on(PostgresElection::connect(url, timings.postgres_options()?))?;
    let identity = format!("bench/{}", std::process::id());
    let candidate = election
        .candidate(name, &identity)?
        .with_poll_interval(Duration::from_millis(timings.poll_ms))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", Event::Campaigning)?;
    out.flush()?;
    // The campaign runs as a task on the runtime's worker thread, where the
    // listener and the pool's I/O run too, and stamps the moment it
    // returns there.
    let (term, at) = rt.block_on(rt.spawn(async move {
        let term = candidate.campaign().await;
        (term, mono_ns())
    }))?;
    let term = term?;
    writeln!(
        out,
        "{}",
        Event::Elected {
            epoch: term.epoch().get(),
            at
        }
    )?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        match line.trim().parse::<Command>() {
            Ok(Command::Resign) => break,
            Ok(Command::Exit) => std::process::exit(0),
            _ if line.trim().is_empty() => {}
            _ => return Err(format!("election-bench helper: unknown command {line:?}").into()),
        }
    }
    writeln!(out, "{}", Event::Resigning(mono_ns()))?;
    out.flush()?;
    rt.block_on(term.resign())?;
    writeln!(out, "{}", Event::Resigned(mono_ns()))?;
    out.flush()?;
    std::thread::sleep(linger);
    rt.block_on(election.close());
    Ok(())
}

/// The table of the CLI rows' PostgreSQL floor ([`start_floor`]), created
/// by [`create_start_floor`].
const START_FLOOR_TABLE: &str = "cli_floor";

/// Creates the one-row table [`start_floor`] updates, on `server`.
pub(crate) fn create_start_floor(server: &Server) -> Result<()> {
    server.sql(&format!(
        "CREATE TABLE IF NOT EXISTS {START_FLOOR_TABLE} (id int PRIMARY KEY, v bigint NOT NULL); \
         INSERT INTO {START_FLOOR_TABLE} VALUES (1, 0) ON CONFLICT DO NOTHING"
    ))?;
    Ok(())
}

/// `election-bench helper pg-start URL CHILD...`: the floor of `elect
/// run`'s uncontested start on PostgreSQL (the CLI rows): a fresh process
/// that opens one connection (sqlx, as `elect` does, on a current-thread
/// runtime), commits one `UPDATE` of one row, and then becomes CHILD
/// (`exec`). What any tool must do before its command runs, with no
/// election.
pub(crate) fn start_floor(args: &[String]) -> Result<()> {
    use sqlx::Connection as _;
    use std::os::unix::process::CommandExt;
    let [url, child, child_args @ ..] = args else {
        return Err("usage: election-bench helper pg-start URL CHILD [ARGS...]".into());
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let done = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "UPDATE {START_FLOOR_TABLE} SET v = v + 1 WHERE id = 1"
        )))
        .execute(&mut conn)
        .await?;
        if done.rows_affected() != 1 {
            return Err::<(), crate::Error>("the floor's UPDATE matched no row".into());
        }
        // Like a process that exits: the server sees the socket close.
        drop(conn);
        Ok(())
    })?;
    drop(rt);
    let e = std::process::Command::new(child).args(child_args).exec();
    Err(format!("exec {child}: {e}").into())
}

/// A position in the WAL (`pg_current_wal_lsn()`, `X/Y` in hex) in bytes.
pub(crate) fn parse_lsn(lsn: &str) -> Result<u64> {
    let (hi, lo) = lsn
        .trim()
        .split_once('/')
        .ok_or_else(|| format!("not an LSN: {lsn:?}"))?;
    let hi = u64::from_str_radix(hi, 16).map_err(|e| format!("LSN {lsn:?}: {e}"))?;
    let lo = u64::from_str_radix(lo, 16).map_err(|e| format!("LSN {lsn:?}: {e}"))?;
    if hi > u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
        return Err(format!("LSN {lsn:?} out of range").into());
    }
    Ok((hi << 32) | lo)
}

/// What the server says at one moment: the WAL position and the database's
/// committed transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServerCounters {
    /// `pg_current_wal_lsn()` in bytes.
    pub(crate) wal: u64,
    /// `pg_stat_database.xact_commit` of the bench's database.
    pub(crate) commits: u64,
}

/// The query whose output [`parse_counters`] reads.
const COUNTERS: &str = "SELECT pg_current_wal_lsn(), xact_commit FROM pg_stat_database \
     WHERE datname = current_database()";

/// Parses `psql -At` output of [`COUNTERS`]: `LSN|COMMITS`.
pub(crate) fn parse_counters(out: &str) -> Result<ServerCounters> {
    let (lsn, commits) = out
        .trim()
        .split_once('|')
        .ok_or_else(|| format!("unexpected counters {out:?}"))?;
    Ok(ServerCounters {
        wal: parse_lsn(lsn)?,
        commits: commits
            .trim()
            .parse()
            .map_err(|e| format!("xact_commit {commits:?}: {e}"))?,
    })
}

/// One statement's share of the window, from `pg_stat_statements`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatementStats {
    /// Times it ran.
    pub(crate) calls: u64,
    /// WAL bytes it wrote.
    pub(crate) wal_bytes: u64,
    /// Its normalised text, shortened.
    pub(crate) query: String,
}

/// The statements the bench's own measuring runs mention one of these.
const OWN_QUERIES: &str = "query NOT LIKE '%pg_stat%' AND query NOT LIKE '%pg_current_wal%'";

/// Parses `psql -At` rows `CALLS|WAL_BYTES|QUERY`.
pub(crate) fn parse_statements(out: &str) -> Result<Vec<StatementStats>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.splitn(3, '|');
            let (Some(calls), Some(wal), Some(query)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("unexpected pg_stat_statements row {l:?}").into());
            };
            Ok(StatementStats {
                calls: calls.trim().parse()?,
                wal_bytes: wal.trim().parse()?,
                query: query.trim().to_owned(),
            })
        })
        .collect()
}

/// The statements `pg_stat_statements` counted since its last reset, most
/// called first, the bench's own reads left out.
fn read_statements(server: &Server) -> Result<Vec<StatementStats>> {
    parse_statements(&server.sql(&format!(
        "SELECT calls, COALESCE(wal_bytes, 0)::bigint, \
         left(regexp_replace(query, '\\s+', ' ', 'g'), 60) \
         FROM pg_stat_statements WHERE {OWN_QUERIES} ORDER BY calls DESC"
    ))?)
}

/// The `top` most called of `stats` as `N × `text``, per `per` rounds.
fn top_statements(stats: &[StatementStats], top: usize, per: f64) -> String {
    stats
        .iter()
        .take(top)
        .map(|q| {
            format!(
                "{:.1} × `{}`",
                q.calls as f64 / per,
                q.query.replace('`', "'")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Loads `pg_stat_statements` (a restart with it preloaded, then the
/// extension). `Err` if the server lacks it; the figures then fall back to
/// `xact_commit`.
fn enable_statements(server: &mut Server) -> Result<()> {
    server.sql("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")?;
    server.restart()?;
    server.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
    Ok(())
}

/// utime + stime, in seconds, of every child of the postmaster `pid` alive
/// now, by child pid.
pub(crate) fn server_cpu(pid: u32) -> Result<std::collections::HashMap<u32, f64>> {
    let mut out = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(child) = entry?
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if (ppid == Some(pid) || child == pid)
            && let Ok(cpu) = super::leases::cpu_seconds(&child.to_string())
        {
            out.insert(child, cpu);
        }
    }
    Ok(out)
}

/// The lease-set figures on `server`: one process holds `counts.keys` keys
/// at the default options for `counts.window`.
fn lease_set_notes(
    server: &Server,
    statements: bool,
    counts: Counts,
    notes: &mut Vec<String>,
) -> Result<()> {
    let rt = super::leases::runtime()?;
    let options = PostgresOptions::default();
    let (ttl, renew) = (options.ttl(), options.renew_interval());
    let election = rt.block_on(PostgresElection::connect(&server.url(), options))?;
    let keys: Vec<String> = (0..counts.keys).map(|i| format!("store-{i:05}")).collect();
    let postmaster = server.pid().ok_or("the server is not running")?;
    let mut reset = true;
    let lease_counts = super::leases::Counts {
        keys: counts.keys,
        window: counts.window,
        held_run: Duration::from_millis(500),
    };
    let (s, before, after) = super::leases::steady(
        &rt,
        || Ok(rt.block_on(election.lease_set("bench-node/1"))?),
        &keys,
        lease_counts,
        || {
            // Reset at the window's start only: the second call reads it.
            if statements && std::mem::take(&mut reset) {
                server.sql("SELECT pg_stat_statements_reset()")?;
            }
            let counters = parse_counters(&server.sql(COUNTERS)?)?;
            let stmts = if statements {
                read_statements(server)?
            } else {
                Vec::new()
            };
            Ok((counters, stmts, server_cpu(postmaster)?))
        },
    )?;
    rt.block_on(election.close());
    let intervals = s.wall / renew.as_secs_f64();
    let wal = (after.0.wal - before.0.wal) as f64 / intervals;
    let commits = (after.0.commits.saturating_sub(before.0.commits)) as f64 / intervals;
    let server_cpu: f64 = after
        .2
        .iter()
        .filter_map(|(pid, cpu)| before.2.get(pid).map(|b| cpu - b))
        .sum();
    let share = 100.0 * s.cpu / s.wall;
    let statements_text = if statements {
        let calls: u64 = after.1.iter().map(|q| q.calls).sum();
        let wal_bytes: u64 = after.1.iter().map(|q| q.wal_bytes).sum();
        format!(
            "{:.2} statements per renew interval by `pg_stat_statements` ({calls} in the window; \
             per interval: {}), which wrote {:.1} KiB of WAL per interval;",
            calls as f64 / intervals,
            top_statements(&after.1, 4, intervals),
            wal_bytes as f64 / intervals / 1024.0,
        )
    } else {
        "(`pg_stat_statements` could not be loaded: statements not counted);".to_owned()
    };
    notes.push(format!(
        "Lease set on PostgreSQL (one local server, TTL {ttl:?}, renew every {renew:?}), {} keys \
         held by one process: won all in {:.2} s from a standing start; over a {:.0} s \
         steady-state window ({intervals:.1} renew intervals) the process used {share:.2}% of one \
         core (CPU {:.3} s; goal under 1%: {}) and the server's processes {:.2}%; {statements_text} \
         the server committed {commits:.1} transactions per interval (`pg_stat_database.xact_commit`, \
         flushed lazily by the backends, the bench's own reads included) and its WAL moved \
         {:.1} KiB per interval (`pg_current_wal_lsn`, everything the server wrote).",
        keys.len(),
        s.won_all.as_secs_f64(),
        s.wall,
        s.cpu,
        if share < 1.0 { "met" } else { "missed" },
        100.0 * server_cpu / s.wall,
        wal / 1024.0,
    ));
    s.notes("PostgreSQL", keys.len(), notes);
    Ok(())
}

/// The two fenced-write rows, each beside the same unfenced samples.
fn push_write_rows(w: &Writes, rows: &mut Vec<Row>) -> Result<()> {
    let floor = "the same INSERT transaction without the fence (interleaved)";
    let unfenced = summary(&w.unfenced, "unfenced write")?;
    for (what, samples, rate) in [
        (
            "PostgreSQL: fenced write: `begin_fenced` (the check in the BEGIN's round trip) + INSERT",
            &w.begin_fenced,
            w.rates.0,
        ),
        (
            "PostgreSQL: fenced write: `advance_in` + INSERT in one transaction",
            &w.advance_in,
            w.rates.1,
        ),
    ] {
        rows.push(Row {
            what: what.into(),
            measured: summary(samples, what)?,
            floor: floor.into(),
            floor_measured: Some(unfenced),
            ops_per_s: Some((rate, Some(w.rates.2))),
        });
    }
    Ok(())
}

/// Measures the fenced-write rows of the PostgreSQL group alone
/// (`--only postgres-fence`): starts a server and pushes them.
pub(crate) fn fence_rows(c: Counts, rows: &mut Vec<Row>) -> Result<()> {
    let server = step("start a PostgreSQL server", || Ok(Server::start()?))?;
    let w = step("PostgreSQL fenced writes, with their floor", || {
        fenced_writes(&server.url(), c.in_process, c.warm)
    })?;
    push_write_rows(&w, rows)
}

/// Measures the PostgreSQL group: starts a server, pushes its rows, and the
/// figures derived from them to `notes`.
pub(crate) fn rows(s: &Setup<'_>, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let c = s.counts;
    let mut server = step("start a PostgreSQL server", || Ok(Server::start()?))?;
    let statements = match enable_statements(&mut server) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("bench: warning: pg_stat_statements unavailable ({e}); counting commits");
            false
        }
    };
    let url = server.url();

    let m = step("PostgreSQL in-process rows, each with its floor", || {
        in_process(&url, c.in_process, c.warm)
    })?;
    for (what, samples, floor) in [
        (
            "PostgreSQL: uncontested campaign (in-process)",
            &m.campaign,
            &m.campaign_floor,
        ),
        (
            "PostgreSQL: uncontested campaign + resign (in-process)",
            &m.campaign_resign,
            &m.campaign_floor,
        ),
        (
            "PostgreSQL: lease renewal, one statement (`Term::confirm`, in-process)",
            &m.renewal,
            &m.renewal_floor,
        ),
    ] {
        rows.push(Row {
            what: what.into(),
            measured: summary(samples, what)?,
            floor: FLOOR.into(),
            floor_measured: Some(summary(floor, "bare transaction")?),
            ops_per_s: None,
        });
    }
    push_write_rows(&m.writes, rows)?;

    // Clean handover between processes, beside two floors back to back.
    if statements {
        server.sql("SELECT pg_stat_statements_reset()")?;
    }
    let handover = cross(s, &url, Exit::Resign, c.handovers, 0)?;
    let handover_statements = if statements {
        let rounds = (c.handovers + c.cross_warm) as f64;
        let stats = read_statements(&server)?;
        format!(
            " Statements on the server per handover (`pg_stat_statements` over the chain, \
             divided by its {rounds} handovers, so each process's connect, schema check and \
             renewals included): {:.1} in all, most called: {}.",
            stats.iter().map(|q| q.calls).sum::<u64>() as f64 / rounds,
            top_statements(&stats, 6, rounds)
        )
    } else {
        String::new()
    };
    let what = format!(
        "PostgreSQL: clean handover: resign in A → elected in B (processes; woken by NOTIFY, \
         poll = TTL = {} ms, a backstop)",
        HANDOVER.poll_ms
    );
    let two = summary(&m.two_floors, "two bare transactions")?;
    let settled = step("PostgreSQL: floor after the handovers' idleness", || {
        settled_floor(&url, c.handovers, c.cross_warm)
    })?;
    let settled = summary(&settled, "two bare transactions after idleness")?;
    let measured = summary(&handover, &what)?;
    let (in_loop, after_idle) = (measured.over(&two), measured.over(&settled));
    notes.push(format!(
        "PostgreSQL clean handover: A's release commits without waiting for its WAL flush and \
         notifies (ADR 0071), the server delivers the NOTIFY to B's listener, and B, woken, \
         looks and takes the released row (one durably committed statement, ADR 0045). \
         Median {} (min {}, max {}) \
         against {} for two bare transactions back to back in a loop: {:.2}× that floor \
         (target ≤ 2×: {}); against {} for the same two after {} ms of idleness, as each \
         handover starts (ADR 0090): {:.2}× ({}).{}",
        ms(measured.median_ns),
        ms(measured.min_ns),
        ms(measured.max_ns),
        ms(two.median_ns),
        in_loop,
        met_2x(in_loop),
        ms(settled.median_ns),
        PG_SETTLE.as_millis(),
        after_idle,
        met_2x(after_idle),
        handover_statements,
    ));
    let beside_both_floors = |rows: &mut Vec<Row>, what: &str, measured: Summary| {
        for (floor, floor_measured) in [(TWO_FLOORS.into(), two), (settled_floor_label(), settled)]
        {
            rows.push(Row {
                what: what.into(),
                measured,
                floor,
                floor_measured: Some(floor_measured),
                ops_per_s: None,
            });
        }
    };
    beside_both_floors(rows, &what, measured);

    // The same, with the resigning process closing its connections (and
    // exiting) only after B was elected: what the server's backend exits,
    // on the same cores as B, cost B's claim.
    let lingering = cross(s, &url, Exit::Resign, c.handovers, LINGER_MS)?;
    let what = format!(
        "PostgreSQL: clean handover between processes, A closing its connections {LINGER_MS} ms \
         after its release (not while B claims)"
    );
    let lingered = summary(&lingering, &what)?;
    notes.push(format!(
        "PostgreSQL clean handover with A closing its connections {LINGER_MS} ms after its \
         release: median {} (min {}, max {}) against {} when A closes them at once. The \
         difference is what the server's backend exits (A's pool connections; A's listener \
         closed when A won, ADR 0071), \
         on the same two cores as B and its backend, cost B's claim; a server on another \
         host does not share it.",
        ms(lingered.median_ns),
        ms(lingered.min_ns),
        ms(lingered.max_ns),
        ms(measured.median_ns),
    ));
    beside_both_floors(rows, &what, lingered);

    let local = step("election-postgres handover within one process", || {
        in_process_handover(&url, c.handovers, c.cross_warm)
    })?;
    let what = "PostgreSQL: clean handover within one process: `resign()` of A → B's campaign \
                returns (two elections, each with its own pool and listener connection)";
    beside_both_floors(rows, what, summary(&local, what)?);

    // Crash failover, beside the TTL it costs by design.
    let failover = cross(s, &url, Exit::Kill, c.failovers, 0)?;
    let what = format!(
        "PostgreSQL: crash failover: SIGKILL of A → elected in B (processes; TTL {} ms, renew {} \
         ms, poll {} ms)",
        FAILOVER.ttl_ms, FAILOVER.renew_ms, FAILOVER.poll_ms
    );
    let measured = summary(&failover, &what)?;
    notes.push(format!(
        "PostgreSQL crash failover of a killed holder: min {}, median {}, max {} against a TTL of \
         {} (poll {}): by design. A contender takes a row over only after it has seen the row \
         unrenewed for a full TTL on its own monotonic clock, and a dropped connection does not \
         prove its holder gone, so a dead holder costs its TTL plus up to a poll interval \
         (and, since the contender's TTL count starts at the first poll that saw the last \
         renewal, up to a renewal interval less).",
        ms(measured.min_ns),
        ms(measured.median_ns),
        ms(measured.max_ns),
        ms(FAILOVER.ttl_ms * 1_000_000),
        ms(FAILOVER.poll_ms * 1_000_000),
    ));
    rows.push(Row {
        what,
        measured,
        floor: format!("the configured TTL, {} ms", FAILOVER.ttl_ms),
        floor_measured: Some(summary(&[FAILOVER.ttl_ms * 1_000_000], "TTL")?),
        ops_per_s: None,
    });

    step(&format!("PostgreSQL lease set of {} keys", c.keys), || {
        lease_set_notes(&server, statements, c, notes)
    })?;
    drop(server);
    Ok(())
}

/// `n` handovers or failovers (after the warm-up) between helper
/// candidates on `url`; each process that resigned waits `linger_ms`
/// before it closes its connections and exits.
fn cross(s: &Setup<'_>, url: &str, exit: Exit, n: usize, linger_ms: u64) -> Result<Vec<u64>> {
    let (tag, timings, settle) = match exit {
        Exit::Resign => ("handover", HANDOVER, PG_SETTLE),
        Exit::Kill => ("failover", FAILOVER, SETTLE),
    };
    let tag = match linger_ms {
        0 => tag.to_owned(),
        ms => format!("{tag}-linger-{ms}"),
    };
    // `election-bench helper postgres URL NAME TTL_MS RENEW_MS POLL_MS
    // LINGER_MS` (see [`helper`]).
    let name = format!("bench-{tag}");
    let numbers = [timings.ttl_ms, timings.renew_ms, timings.poll_ms, linger_ms];
    let args = ["postgres", url, &name]
        .into_iter()
        .map(String::from)
        .chain(numbers.map(|n| n.to_string()))
        .map(Into::into)
        .collect();
    let mut chain = Chain::new(
        Process::Helper {
            exe: s.exe.to_path_buf(),
            args,
            epochs: true,
        },
        s.log.to_path_buf(),
    );
    step(&format!("election-postgres {tag}"), || {
        // The leave lands at every phase of A's renewals.
        chain.measure(
            exit,
            n,
            s.counts.cross_warm,
            settle,
            Duration::from_millis(timings.renew_ms),
        )
    })
    .map_err(|e| super::with_log_tail(e, s.log))
}

/// How to read the PostgreSQL backend's rows: its section of the report's notes after
/// the table (see [`report::document`](super::report::document)).
pub(crate) const READING: &str = "PostgreSQL backend (`election-postgres`), on one real server that
`postgres-testkit` starts (Debian's PostgreSQL 15, `fsync = on`, TCP on
127.0.0.1, `pg_stat_statements` preloaded by a restart when the server
has it). Every floor is measured on the same server in the same run:

- floor of the in-process rows: a bare `UPDATE bench_floor SET v = v + 1
  WHERE id = 1`, its own (autocommit) transaction, through the election's
  own pool (`election.pool()`): one round trip and one durable commit,
  which a claim, a renewal and a release each cannot avoid. Interleaved
  round by round with each row (which goes first alternates).
- *uncontested campaign*: `Candidate::campaign()` of a `PostgresClaim`
  nobody else contests (TTL 600 s, renew 240 s, so a term's renewal loop
  never runs during it; every campaign must win a higher epoch than the
  last); *+ resign* adds `Term::resign()`, the release statement.
- *lease renewal*: `Term::confirm` on a live term won by a real campaign:
  the commit-point check, which runs the renewal statement (the one the
  renewal loop runs for every held key at once) for the one key: a
  conditional `UPDATE` that bumps the renewal version, so it renews the
  lease.
- *fenced write*: `PostgresFence::begin_fenced` with a live term's token
  (the same token every time, as one term's writes carry: one simple query
  `SELECT fence_enter(..); BEGIN`, one round trip), `INSERT INTO bench_data
  (v) VALUES ($1)`, `COMMIT`; and the same with `BEGIN` and then
  `PostgresFence::advance_in` (one more round trip). The floor of both is
  the same transaction unfenced; the three are interleaved, the order
  rotating every round (target ≤ 1.15×). ops/s is from a separate batch of
  the same size of each.
- *clean handover*: separate `election-bench helper postgres` processes (a
  candidate of the bench's own on `election-postgres` that speaks the
  candidate line protocol; TTL 2000 ms, renew 500 ms, poll 2000 ms: the
  TTL, only a backstop); from A's `resigning` stamp to B's `elected` stamp
  (both `CLOCK_MONOTONIC`). B has waited in its campaign for at least
  100 ms (plus a share of one renew interval that varies evenly from round
  to round), so its listener is up; A's release commits a `NOTIFY`, B's
  listener wakes its campaign, and B reads the row and claims it (one
  read, one committed statement). Floor: two
  bare `UPDATE` transactions back to back on the same server (the release
  and the claim; target ≤ 2×), once in a loop and once with each pair
  after 100 ms of idleness, as each handover starts (ADR 0090). *Within one process*: the same handover
  between two `PostgresElection`s of this process (each its own pool and
  listener connection, same timings), from just before A's `resign()` to
  B's campaign returning: no process wake-up or pipe in the path.
- *crash failover*: from the bench's stamp just before `kill(A, SIGKILL)`
  to B's `elected` stamp (TTL 1000 ms, renew 300 ms, poll 100 ms), against
  the TTL. A dropped connection does not prove its holder gone, so B takes
  the row over only after it has itself seen the row unrenewed for a full
  TTL on its own monotonic clock: expect between TTL − renew interval and
  TTL + poll interval. The pause before the kill (20 ms plus a share of one
  renew interval) makes the kill land at every phase of A's renewals.
- *lease set* (below the table): one process holds 10,000 keys in one
  `PostgresKeyedClaims` set at the default options (TTL 15 s, renew every 5 s)
  and is left alone for a window (60 s, 15 s with `--quick`): CPU of this
  process and of the server's processes from `/proc/<pid>/stat`, the
  statements and the WAL bytes they wrote from `pg_stat_statements` (reset
  at the window's start; the bench's own reads excluded), the database's
  committed transactions from `pg_stat_database.xact_commit` (which
  backends flush lazily) and the WAL the server wrote from
  `pg_current_wal_lsn()`.

";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lsns() {
        assert_eq!(parse_lsn("0/16B3748").unwrap(), 0x16B_3748);
        assert_eq!(parse_lsn("1/0").unwrap(), 1 << 32);
        assert_eq!(parse_lsn(" A/FF\n").unwrap(), (10 << 32) | 0xFF);
        assert!(parse_lsn("16B3748").is_err());
        assert!(parse_lsn("x/1").is_err());
        assert!(parse_lsn("1FFFFFFFF/0").is_err());
    }

    #[test]
    fn parses_counters_and_statements() {
        assert_eq!(
            parse_counters("0/100|42\n").unwrap(),
            ServerCounters {
                wal: 0x100,
                commits: 42
            }
        );
        assert!(parse_counters("0/100").is_err());
        assert!(parse_counters("0/100|x").is_err());
        assert_eq!(
            top_statements(
                &parse_statements("4|0|SELECT `a`\n2|0|UPDATE b").unwrap(),
                1,
                2.0
            ),
            "2.0 × `SELECT 'a'`"
        );
        let rows = parse_statements("3|120|UPDATE election.leases SET a = $1|b\n\n1|0|SELECT 1\n")
            .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            StatementStats {
                calls: 3,
                wal_bytes: 120,
                query: "UPDATE election.leases SET a = $1|b".into()
            }
        );
        assert!(parse_statements("3|x|q").is_err());
        assert!(parse_statements("3|1").is_err());
        assert!(parse_statements("").unwrap().is_empty());
    }

    #[test]
    fn timings_are_valid_options() {
        assert!(HANDOVER.postgres_options().is_ok());
        assert!(FAILOVER.postgres_options().is_ok());
        assert!(in_process_options().is_ok());
    }

    #[test]
    fn helper_rejects_bad_arguments() {
        assert!(helper(&[]).is_err());
        let args: Vec<String> = ["postgres://x@127.0.0.1:1/db", "n", "ttl", "1", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(helper(&args).is_err());
        let linger: Vec<String> = [
            "postgres://x@127.0.0.1:1/db",
            "n",
            "1000",
            "100",
            "100",
            "soon",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(helper(&linger).is_err(), "a linger that is not a number");
        let mut seven = linger.clone();
        seven[5] = "0".into();
        seven.push("extra".into());
        assert!(helper(&seven).is_err(), "seven arguments");
    }

    /// The in-process rows on a real server (postgres-testkit): a handful
    /// of each, every sample present.
    #[test]
    fn in_process_rows_run() {
        let server = Server::start().expect("PostgreSQL for the bench's test");
        let m = in_process(&server.url(), 3, 1).unwrap();
        assert_eq!((m.campaign.len(), m.campaign_resign.len()), (3, 3));
        assert_eq!((m.renewal.len(), m.renewal_floor.len()), (3, 3));
        let w = &m.writes;
        assert_eq!(
            (w.begin_fenced.len(), w.advance_in.len(), w.unfenced.len()),
            (3, 3, 3)
        );
        assert_eq!(m.two_floors.len(), 3);
        let settled = settled_floor(&server.url(), 2, 1).unwrap();
        assert_eq!(settled.len(), 2);
        assert!(
            settled
                .iter()
                .all(|&t| t > 0 && t < u64::try_from(PG_SETTLE.as_nanos()).unwrap() * 50)
        );
        assert!(w.rates.0 > 0.0 && w.rates.1 > 0.0 && w.rates.2 > 0.0);
        assert_eq!(
            fenced_writes(&server.url(), 2, 1).unwrap().advance_in.len(),
            2
        );
        assert_eq!(in_process_handover(&server.url(), 2, 1).unwrap().len(), 2);
    }
}
