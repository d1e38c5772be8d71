//! Many elections on one server (issue 42, goal 3): `processes` candidate
//! processes (`election-candidate --many`) each win and hold `names`
//! elections of their own on one PostgreSQL server and then on one
//! `nats-server`, at the backend's default TTL and renewal interval, and
//! are left alone for a window of [`WINDOW_TTLS`] TTLs. Measured over the
//! window: the server's CPU (user + sys from `/proc/<pid>/stat`, every
//! process of it), the renewals the server took (PostgreSQL: the lease
//! table's `n_tup_upd`; NATS: the bucket stream's last sequence), the
//! candidates' CPU per held name, and every term lost; polled every
//! second, each process's oldest renewal age (`held`). A term lost in the
//! window fails the group.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use candidate_testkit::Proc;
use candidate_testkit::protocol::Event;
use election_url::BackendUrl;

use super::report::{NO_FLOOR, Row};
use crate::{Result, Setup, step, summary};

/// The size of the group: how many processes, each holding how many
/// names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    /// Candidate processes.
    pub(crate) processes: usize,
    /// Names each process campaigns for (and, uncontested, holds).
    pub(crate) names: usize,
}

/// The window is this many TTLs long (at least two: every name's lease
/// would have run out twice over without renewals).
pub(crate) const WINDOW_TTLS: u32 = 2;
/// How often each process is asked for its held terms during the window.
const POLL: Duration = Duration::from_secs(1);
/// How long a process may take to win its names (all start at once).
const START_PATIENCE: Duration = Duration::from_secs(120);
/// The PostgreSQL server's `max_connections` here: every process has a
/// pool of up to 8 connections and a listener, more than the testkit's
/// default allows for 100 processes.
const PG_MAX_CONNECTIONS: u32 = 1000;

/// What one backend's run found.
#[derive(Debug)]
struct Figures {
    /// From the first process's start to the last one's `won`.
    won_all: Duration,
    /// The window's length.
    wall: f64,
    /// Server CPU seconds in the window.
    server_cpu: f64,
    /// Renewals the server took in the window.
    renewals: u64,
    /// Server CPU per renewal, in ns, one sample per renew interval of
    /// the window.
    cpu_per_renewal: Vec<u64>,
    /// Each process's CPU per held name per second of the window, in ns.
    client_cpu: Vec<u64>,
    /// Each process's oldest renewal age, at every poll, in ns.
    ages: Vec<u64>,
    /// Terms lost in the window (a `lost` line, or fewer held than won).
    lost: usize,
    /// The `lost` lines read, labelled, for the error.
    lost_lines: Vec<String>,
    /// Client connections the server held at the window's end.
    connections: usize,
}

/// A snapshot of the server: CPU seconds by process, and its renewal
/// counter.
type Snapshot = (HashMap<u32, f64>, u64);

/// CPU seconds between two snapshots, over the processes in both.
fn cpu_between(before: &HashMap<u32, f64>, after: &HashMap<u32, f64>) -> f64 {
    after
        .iter()
        .filter_map(|(pid, cpu)| before.get(pid).map(|b| cpu - b))
        .sum()
}

/// Nanoseconds of `seconds`, rounded.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "CPU seconds per operation: small and not negative"
)]
fn ns_of(seconds: f64) -> u64 {
    (seconds * 1e9).round().max(0.0) as u64
}

/// The group on one backend: starts the processes (each trying `at_once`
/// of its names at a time), waits until every name is held, lets one renew interval pass, then measures the window with
/// `snapshot` (the server's CPU and renewal counter) and `connections`.
fn run(
    s: &Setup<'_>,
    label: &str,
    url: &BackendUrl,
    (ttl, renew): (Duration, Duration),
    (counts, at_once): (Counts, usize),
    mut snapshot: impl FnMut() -> Result<Snapshot>,
    connections: impl FnOnce() -> Result<usize>,
) -> Result<Figures> {
    let mut procs = Vec::with_capacity(counts.processes);
    let t0 = Instant::now();
    step(
        &format!(
            "many: {label}: {} processes × {} names, until all are held",
            counts.processes, counts.names
        ),
        || {
            for p in 0..counts.processes {
                let mut cmd = Command::new(s.candidate_bin);
                cmd.args(["--backend", &url.with_secrets().to_string()])
                    .args(["--name", &format!("p{p}-"), "--identity", &format!("p{p}")])
                    .args(["--many", &counts.names.to_string()])
                    .args(["--at-once", &at_once.to_string()]);
                procs.push(start(format!("many p{p}"), cmd, s.log)?);
            }
            for p in &mut procs {
                let won = p.read_expect("won")?;
                if won != [counts.names.to_string()] {
                    return Err(
                        format!("{}: won {won:?} of {} names", p.label(), counts.names).into(),
                    );
                }
            }
            Ok(())
        },
    )?;
    let won_all = t0.elapsed();
    // Steady state: every name has renewed once before the window opens.
    std::thread::sleep(renew);
    let window = ttl * WINDOW_TTLS;
    let figures = step(
        &format!("many: {label}: a {} s window", window.as_secs()),
        || {
            let cpu = |procs: &[Proc]| -> Result<Vec<f64>> {
                procs
                    .iter()
                    .map(|p| super::leases::cpu_seconds(&p.pid().to_string()))
                    .collect()
            };
            let mut lost_lines = Vec::new();
            let mut ages = Vec::new();
            let mut short = 0;
            let client_before = cpu(&procs)?;
            let first = snapshot()?;
            let start = Instant::now();
            let mut slices = vec![first.clone()];
            let mut next_poll = start + POLL;
            let mut next_slice = start + renew;
            let end = start + window;
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                std::thread::sleep(next_poll.min(next_slice).min(end) - now);
                let now = Instant::now();
                if now >= next_slice && now < end {
                    slices.push(snapshot()?);
                    next_slice += renew;
                }
                if now >= next_poll && now < end {
                    short = poll(&mut procs, counts.names, &mut ages, &mut lost_lines)?;
                    next_poll += POLL;
                }
            }
            let last = snapshot()?;
            let wall = start.elapsed().as_secs_f64();
            let client_after = cpu(&procs)?;
            short = short.max(poll(&mut procs, counts.names, &mut ages, &mut lost_lines)?);
            slices.push(last.clone());
            let client_cpu = client_before
                .iter()
                .zip(&client_after)
                .map(|(b, a)| ns_of((a - b) / counts.names as f64 / wall))
                .collect();
            let cpu_per_renewal = slices
                .windows(2)
                .filter(|w| w[1].1 > w[0].1)
                .map(|w| ns_of(cpu_between(&w[0].0, &w[1].0) / (w[1].1 - w[0].1) as f64))
                .collect();
            Ok(Figures {
                won_all,
                wall,
                server_cpu: cpu_between(&first.0, &last.0),
                renewals: last.1.saturating_sub(first.1),
                cpu_per_renewal,
                client_cpu,
                ages,
                lost: lost_lines.len().max(short),
                lost_lines,
                connections: 0,
            })
        },
    )?;
    let figures = Figures {
        connections: connections()?,
        ..figures
    };
    step(&format!("many: {label}: resign every name"), || {
        for p in &mut procs {
            p.write_line("resign")?;
        }
        for p in &mut procs {
            loop {
                match p.read_event()? {
                    Event::Resigned(_) => break,
                    Event::Lost(_) => {}
                    other => {
                        return Err(format!("{}: {other} while resigning", p.label()).into());
                    }
                }
            }
            p.wait_success()?;
        }
        Ok(())
    })?;
    Ok(figures)
}

/// Starts `cmd` as `label`, its stderr appended to `log`.
fn start(label: String, cmd: Command, log: &Path) -> Result<Proc> {
    super::handover::start_with_patience(label, cmd, log, START_PATIENCE)
}

/// Asks every process `held`: pushes each one's oldest renewal age to
/// `ages` and every `lost` line read on the way to `lost`. Returns how many
/// names fewer than `names` each are held, summed.
fn poll(
    procs: &mut [Proc],
    names: usize,
    ages: &mut Vec<u64>,
    lost: &mut Vec<String>,
) -> Result<usize> {
    for p in procs.iter_mut() {
        p.write_line("held")?;
    }
    let mut short = 0;
    for p in procs.iter_mut() {
        loop {
            match p.read_event()? {
                Event::Held { count, oldest_ns } => {
                    ages.push(oldest_ns);
                    short += names.saturating_sub(count);
                    break;
                }
                Event::Lost(reason) => lost.push(format!("{}: lost {reason}", p.label())),
                other => return Err(format!("{}: {other}, not `held`", p.label()).into()),
            }
        }
    }
    Ok(short)
}

/// The rows and notes of one backend's figures (`label`: "PostgreSQL",
/// "NATS"; `server`: what its CPU covers; `counter`: where its renewals
/// were counted); an error if a term was lost, after the rows are pushed.
fn report(
    (label, server, counter): (&str, &str, &str),
    f: &Figures,
    (ttl, renew): (Duration, Duration),
    counts: Counts,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let held = counts.processes * counts.names;
    let setting = format!(
        "{held} names held by {} processes × {}, TTL {} s, renew every {} s, {:.0} s window",
        counts.processes,
        counts.names,
        ttl.as_secs(),
        renew.as_secs(),
        f.wall
    );
    let rate = f.renewals as f64 / f.wall;
    let expected = held as f64 / renew.as_secs_f64();
    rows.push(Row {
        what: format!(
            "many names, {label}: server CPU per renewal ({server}, user + sys; one sample \
             per renew interval; {setting})"
        ),
        measured: summary(&f.cpu_per_renewal, "server CPU per renewal")?,
        floor: NO_FLOOR.into(),
        floor_measured: None,
        ops_per_s: Some((rate, None)),
    });
    rows.push(Row {
        what: format!(
            "many names, {label}: candidate CPU per held name per second (one sample per \
             process; {setting})"
        ),
        measured: summary(&f.client_cpu, "client CPU per name")?,
        floor: NO_FLOOR.into(),
        floor_measured: None,
        ops_per_s: None,
    });
    rows.push(Row {
        what: format!(
            "many names, {label}: each process's oldest renewal age, every {} s \
             (terms lost in the window: {} of {held}, must be 0; {setting})",
            POLL.as_secs(),
            f.lost
        ),
        measured: summary(&f.ages, "oldest renewal age")?,
        floor: format!("the configured renew interval, {} ms", renew.as_millis()),
        floor_measured: Some(summary(
            &[u64::try_from(renew.as_nanos())?],
            "renew interval",
        )?),
        ops_per_s: None,
    });
    let client_total: f64 =
        f.client_cpu.iter().map(|&ns| ns as f64).sum::<f64>() * counts.names as f64 / 1e9;
    notes.push(format!(
        "Many names on one {label} server ({setting}): all won in {:.2} s; over the window \
         the server ({server}) used {:.1}% of one core and took {rate:.0} renewals per second \
         ({counter}; {held} names every {} s is {expected:.0}/s), {:.1} µs of server CPU per \
         renewal; the {} candidate processes together used {:.1}% of one core, {:.2} µs of CPU \
         per held name per second; the server held {} client connections; terms lost: {} \
         (must be 0).",
        f.won_all.as_secs_f64(),
        100.0 * f.server_cpu / f.wall,
        renew.as_secs(),
        1e6 * f.server_cpu / (f.renewals.max(1) as f64),
        counts.processes,
        100.0 * client_total,
        1e6 * client_total / held as f64,
        f.connections,
        f.lost,
    ));
    if f.lost > 0 {
        return Err(format!(
            "many names, {label}: {} of {held} terms lost in the window at the default TTL: {}",
            f.lost,
            f.lost_lines.join("; ")
        )
        .into());
    }
    Ok(())
}

/// The group: PostgreSQL, then NATS, each on a server of its own; rows
/// and notes pushed for both before a lost term fails it.
pub(crate) fn rows(
    s: &Setup<'_>,
    counts: Counts,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let pg = step("many: start a PostgreSQL server", || {
        Ok(postgres_testkit::Server::start_with_max_connections(
            PG_MAX_CONNECTIONS,
        )?)
    })?;
    let options = election_postgres::PostgresOptions::default();
    let pg_timings = (options.ttl(), options.renew_interval());
    let postmaster = pg.pid().ok_or("the PostgreSQL server is not running")?;
    let url: BackendUrl = pg
        .url()
        .parse()
        .map_err(|e| format!("bad PostgreSQL URL: {e}"))?;
    let pg_figures = run(
        s,
        "PostgreSQL",
        &url,
        pg_timings,
        // One after another: a claim takes a connection of the process's
        // pool (8), and 100 at once in each of 100 processes starting
        // together waited more than the request timeout for one.
        (counts, 1),
        || {
            let updates = pg.sql(
                "SELECT COALESCE(sum(n_tup_upd), 0) FROM pg_stat_user_tables \
                 WHERE schemaname = 'election' AND relname = 'leases'",
            )?;
            let updates = updates
                .trim()
                .parse()
                .map_err(|e| format!("n_tup_upd {updates:?}: {e}"))?;
            Ok((super::postgres::server_cpu(postmaster)?, updates))
        },
        || {
            let n = pg.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
                 AND pid <> pg_backend_pid()",
            )?;
            Ok(n.trim()
                .parse()
                .map_err(|e| format!("connections {n:?}: {e}"))?)
        },
    )
    .map_err(|e| super::with_log_tail(e, s.log))?;
    drop(pg);

    let nats = step("many: start one nats-server", || {
        Ok(nats_testkit::Server::start()?)
    })?;
    let options = election_nats::NatsOptions::default();
    let nats_timings = (options.ttl(), options.renew_every());
    let pid = nats.pid().ok_or("the nats-server is not running")?;
    let rt = super::rounds::runtime()?;
    // A fresh server: the default bucket, created with the default TTL.
    let stream = format!("KV_{}", election_nats::DEFAULT_BUCKET);
    let url: BackendUrl = nats
        .url()
        .parse()
        .map_err(|e| format!("bad NATS URL: {e}"))?;
    let nats_figures = run(
        s,
        "NATS",
        &url,
        nats_timings,
        // All at once: a win of a fresh key waits out the failover grace.
        (counts, counts.names),
        || {
            // Every renewal is one KV update: one message on the stream.
            // A connection of its own each time: nothing runs this
            // runtime between snapshots.
            let last = rt.block_on(async {
                let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await?);
                let mut stream = js.get_stream(&stream).await?;
                Ok::<_, crate::Error>(stream.info().await?.state.last_sequence)
            })?;
            let cpu = super::leases::cpu_seconds(&pid.to_string())?;
            Ok((HashMap::from([(pid, cpu)]), last))
        },
        || Ok(nats.connections()?),
    )
    .map_err(|e| super::with_log_tail(e, s.log))?;
    drop(nats);

    let pg_result = report(
        (
            "PostgreSQL",
            "postmaster and every backend",
            "`n_tup_upd` of the lease table in `pg_stat_user_tables`, which backends flush at \
             most once a second",
        ),
        &pg_figures,
        pg_timings,
        counts,
        rows,
        notes,
    );
    let nats_result = report(
        (
            "NATS",
            "`nats-server`",
            "the bucket stream's last sequence, from JetStream stream info",
        ),
        &nats_figures,
        nats_timings,
        counts,
        rows,
        notes,
    );
    pg_result.and(nats_result)
}

/// How to read the many-names rows: their section of the report's notes
/// after the table (see [`report::document`](super::report::document)).
pub(crate) const READING: &str = "Many elections on one server (`--only many`):

- 100 `election-candidate --many 100` processes (3 × 10 with `--quick`),
  each holding 100 names of its own (`p<i>-0` .. `p<i>-99`, won by one
  try each, so uncontested) on one PostgreSQL server
  (`postgres-testkit`, `max_connections` raised to 1000), then on one
  `nats-server`, each process with one backend (PostgreSQL: its own pool
  of at most 8 connections; NATS: one connection), at the backend's
  default TTL and renewal interval (15 s and 5 s on both). Once every
  name is held and one renew interval has passed, the processes are left
  alone for a window of two TTLs; every second each is asked `held`, which
  answers with the terms it holds and the time since the least recently
  renewed of them last had a renewal land.
- *server CPU per renewal*: user + sys of the server's processes from
  `/proc/<pid>/stat` (PostgreSQL: the postmaster and every backend alive
  at both ends of a slice; NATS: `nats-server`), per renewal the server
  took, one sample per renew interval of the window; ops/s is the
  renewals per second over the whole window: PostgreSQL's lease table's
  `n_tup_upd` (`pg_stat_user_tables`, which a backend flushes at most once
  a second, so a slice can be off by a second's renewals of a few
  connections), NATS's bucket stream's last sequence from JetStream's
  stream info (every renewal is one KV update, one message). Expect the
  names over the renew interval (10,000 / 5 s = 2,000/s). No floor: the
  bare statement's CPU on the server is not measured.
- *candidate CPU per held name per second*: each process's user + sys over
  the window, over its names and the window's seconds (µs of CPU per name
  per second; 10 µs is 1% of a core per 1,000 names); the `held` polls are
  in it. Below the table: the connections the server held at the window's
  end (PostgreSQL: client backends in `pg_stat_activity`, `psql`'s own
  left out; NATS: `/connz`, the bench's stream-info connection possibly
  among them).
- *oldest renewal age*: each process's answer to every `held`, against the
  configured renew interval: it stays within a renew interval (plus a
  renewal's round trip) while every renewal lands; a missed renewal would
  show as an age near two. Any term lost by the window's end (a `lost`
  line, or fewer held than won) fails the group; the row says how many
  were lost.
- On PostgreSQL a process tries its names one after another (a claim
  takes a connection of its pool of 8: 100 tries at once in each of 100
  processes starting together waited past the request timeout for one);
  on NATS all at once (`--at-once 100`: a win of a fresh key waits out
  the failover grace, 5 s, so one after another they would take 100
  graces), so a process's names renew together there: a window counts
  whole rounds of each process's names, and the renewals per second is
  exact only to a round of one process's names (1% at full size).

";

#[cfg(test)]
mod tests {
    use super::*;

    /// A slice's CPU counts only the processes alive at both ends.
    #[test]
    fn cpu_between_counts_processes_in_both_snapshots() {
        let before = HashMap::from([(1, 1.0), (2, 5.0), (3, 2.0)]);
        let after = HashMap::from([(1, 1.5), (2, 6.0), (4, 9.0)]);
        assert!((cpu_between(&before, &after) - 1.5).abs() < 1e-9);
        assert_eq!(ns_of(0.000_25), 250_000);
        assert_eq!(ns_of(-1.0), 0);
    }
}
