//! The lease-set figures (`--only leases`): one process holds many keys in
//! a lease set with default options (TTL 15 s, renew every 5 s), on NATS
//! (one real `nats-server`) and on SQLite (a database file in the bench
//! directory), and is left alone for a window. Measured:
//!
//! - CPU of this process (and of the server) over the window, from
//!   `/proc/<pid>/stat` (utime + stime);
//! - NATS: requests the client sent per key per renew interval (the
//!   client's own message counter); SQLite: bytes this process wrote to
//!   storage (`write_bytes` of `/proc/self/io`) and how far the keys'
//!   renewal versions moved;
//! - resident memory per key: RSS after every key is held minus RSS before
//!   the set was made, over the keys (allocator slack included);
//! - `held` calls per second, from one thread and from as many threads as
//!   there are CPUs, each asking round-robin over all keys;
//! - how long the process took to win every key from a standing start.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use election_nats::{NatsElection, NatsOptions};
use nats_testkit::Server;

use super::step;
use crate::Result;

/// What the lease-set figures use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    /// Keys held by the one process.
    pub(crate) keys: usize,
    /// The steady-state window.
    pub(crate) window: Duration,
    /// How long each `held` throughput run lasts.
    pub(crate) held_run: Duration,
}

/// utime + stime of process `pid` ("self" for this one), in seconds.
pub(crate) fn cpu_seconds(pid: &str) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command (which may contain spaces) in parentheses.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("unreadable /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    let ticks: u64 = fields.get(11).ok_or("no utime")?.parse()?;
    let sticks: u64 = fields.get(12).ok_or("no stime")?.parse()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?.ok_or("no CLK_TCK")? as f64;
    Ok((ticks + sticks) as f64 / hz)
}

/// Resident set size of this process, in bytes.
fn rss_bytes() -> Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("unreadable statm")?
        .parse()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)?.ok_or("no page size")?;
    Ok(pages * u64::try_from(page)?)
}

/// `held` calls per second over `keys`, from `threads` threads at once.
fn held_rate<K: election_core::KeyedClaims>(
    set: &election_core::LeaseSet<K>,
    keys: &[String],
    threads: usize,
    run: Duration,
) -> f64 {
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let start = Instant::now();
                    let mut calls = 0u64;
                    let mut i = t * 7919;
                    let mut held = 0u64;
                    while start.elapsed() < run {
                        for _ in 0..1024 {
                            i = (i + 1) % keys.len();
                            held += u64::from(set.held(std::hint::black_box(&keys[i])));
                        }
                        calls += 1024;
                    }
                    assert_eq!(held, calls, "every key is held during the run");
                    calls
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    total as f64 / run.as_secs_f64()
}

/// What one lease set did: how fast it won its keys, what it cost in the
/// steady-state window, and how fast `held` answers.
pub(crate) struct Steady {
    pub(crate) won_all: Duration,
    rss_delta: u64,
    pub(crate) wall: f64,
    pub(crate) cpu: f64,
    one: f64,
    all: f64,
    threads: usize,
}

/// Makes a set with `make`, asks every key, waits until all are held,
/// then runs `window` (measuring around it: CPU of this process, and
/// whatever `around` measures before and after) and the `held` rates.
pub(crate) fn steady<K: election_core::KeyedClaims, T>(
    rt: &tokio::runtime::Runtime,
    make: impl FnOnce() -> Result<election_core::LeaseSet<K>>,
    keys: &[String],
    counts: Counts,
    mut around: impl FnMut() -> Result<T>,
) -> Result<(Steady, T, T)> {
    let rss_before = rss_bytes()?;
    let set = make()?;
    let started = Instant::now();
    for k in keys {
        let _ = set.held(k);
    }
    let deadline = started + Duration::from_secs(120);
    while set.held_keys().len() < keys.len() {
        if Instant::now() > deadline {
            return Err(format!(
                "the lease set won only {} of {} keys in 120 s",
                set.held_keys().len(),
                keys.len()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let won_all = started.elapsed();
    let rss_delta = rss_bytes()?.saturating_sub(rss_before);
    eprintln!(
        "bench: lease set holds {} keys after {won_all:?}; steady state for {:?}",
        keys.len(),
        counts.window
    );
    let before = around()?;
    let cpu_before = cpu_seconds("self")?;
    let window_start = Instant::now();
    std::thread::sleep(counts.window);
    let wall = window_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds("self")? - cpu_before;
    let after = around()?;
    if set.held_keys().len() != keys.len() {
        return Err("the lease set lost keys during the steady-state window".into());
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let one = held_rate(&set, keys, 1, counts.held_run);
    let all = held_rate(&set, keys, threads, counts.held_run);
    rt.block_on(set.close());
    let steady = Steady {
        won_all,
        rss_delta,
        wall,
        cpu,
        one,
        all,
        threads,
    };
    Ok((steady, before, after))
}

impl Steady {
    /// The memory and `held` notes, for the backend `what`.
    pub(crate) fn notes(&self, what: &str, keys: usize, notes: &mut Vec<String>) {
        notes.push(format!(
            "Lease set memory ({what}): resident set grew by {:.1} MiB while making the set and \
             winning {keys} keys: {:.0} B per key (RSS delta over keys, allocator slack included).",
            self.rss_delta as f64 / (1024.0 * 1024.0),
            self.rss_delta as f64 / keys as f64
        ));
        notes.push(format!(
            "Lease set `held` ({what}): {:.1} M calls/s from 1 thread, {:.1} M calls/s from {} \
             threads at once (round-robin over {keys} held keys).",
            self.one / 1e6,
            self.all / 1e6,
            self.threads,
        ));
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn key_names(counts: Counts) -> Vec<String> {
    (0..counts.keys).map(|i| format!("store-{i:05}")).collect()
}

/// Runs the NATS figures and appends them to `notes`.
pub(crate) fn notes(counts: Counts, notes: &mut Vec<String>) -> Result<()> {
    let server = step("start one nats-server", || Ok(Server::start()?))?;
    let server_pid = server.pid().ok_or("nats-server has no pid")?.to_string();
    let rt = runtime()?;
    let keys = key_names(counts);
    let options = NatsOptions::default();
    let renew = options.renew_every();
    let ttl = options.ttl();
    let election = rt.block_on(NatsElection::connect(&server.url(), options))?;
    let stats = election.client().statistics();
    let (s, before, after) = steady(
        &rt,
        || Ok(rt.block_on(election.lease_set("bench-node/1"))?),
        &keys,
        counts,
        || {
            Ok((
                stats.out_messages.load(Ordering::Relaxed),
                stats.out_bytes.load(Ordering::Relaxed),
                cpu_seconds(&server_pid)?,
            ))
        },
    )?;
    let (out, out_bytes) = (after.0 - before.0, after.1 - before.1);
    let server_cpu = after.2 - before.2;
    let intervals = s.wall / renew.as_secs_f64();
    let per_key_interval = out as f64 / keys.len() as f64 / intervals;
    notes.push(format!(
        "Lease set on NATS (1 node, TTL {ttl:?}, renew every {renew:?}), {} keys held by one process: \
         won all in {:.2} s from a standing start; over a {:.0} s steady-state window the process \
         used {:.2}% of one core (CPU {:.3} s; nats-server {:.2}%), and its client sent {out} \
         messages ({out_bytes} B): {per_key_interval:.6} requests per key per renew interval \
         (one session renewal per interval for all keys).",
        keys.len(),
        s.won_all.as_secs_f64(),
        s.wall,
        100.0 * s.cpu / s.wall,
        s.cpu,
        100.0 * server_cpu / s.wall,
    ));
    s.notes("NATS", keys.len(), notes);
    drop(server);
    Ok(())
}

/// Bytes this process has written to storage (`/proc/self/io`).
fn write_bytes() -> Result<u64> {
    let io = std::fs::read_to_string("/proc/self/io")?;
    let line = io
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .ok_or("no write_bytes in /proc/self/io")?;
    Ok(line.trim().parse()?)
}

/// Runs the SQLite figures (a database file in `dir`) and appends them to
/// `notes`.
pub(crate) fn sqlite_notes(
    counts: Counts,
    dir: &std::path::Path,
    notes: &mut Vec<String>,
) -> Result<()> {
    use election_sqlite::{SqliteElection, SqliteOptions};
    let rt = runtime()?;
    let keys = key_names(counts);
    let options = SqliteOptions::default();
    let (ttl, renew) = (options.ttl(), options.renew_interval());
    let election = rt.block_on(SqliteElection::open(dir.join("leases.db"), options))?;
    let version = || -> Result<i64> {
        Ok(rt.block_on(
            sqlx::query_scalar("SELECT MIN(version) FROM election_leases")
                .fetch_one(election.pool()),
        )?)
    };
    let (s, before, after) = steady(
        &rt,
        || Ok(rt.block_on(election.lease_set("bench-node/1"))?),
        &keys,
        counts,
        || Ok((write_bytes()?, version()?)),
    )?;
    let intervals = s.wall / renew.as_secs_f64();
    let written = (after.0 - before.0) as f64 / intervals;
    notes.push(format!(
        "Lease set on SQLite (a file in the bench directory, TTL {ttl:?}, renew every {renew:?}), \
         {} keys held by one process: won all in {:.2} s from a standing start; over a {:.0} s \
         steady-state window the process used {:.2}% of one core (CPU {:.3} s), the renewal \
         version of every key moved by at least {}, and the process wrote {:.0} KiB to storage per renew interval.",
        keys.len(),
        s.won_all.as_secs_f64(),
        s.wall,
        100.0 * s.cpu / s.wall,
        s.cpu,
        after.1 - before.1,
        written / 1024.0,
    ));
    s.notes("SQLite", keys.len(), notes);
    Ok(())
}
