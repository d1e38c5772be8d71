//! The lease-set figures (`--only leases`): one process holds many keys in
//! a NATS lease set (one real `nats-server`, default options: TTL 15 s,
//! renew every 5 s) and is left alone for a window. Measured:
//!
//! - CPU of this process (and of the server) over the window, from
//!   `/proc/<pid>/stat` (utime + stime);
//! - requests the client sent per key per renew interval (the client's
//!   own message counter);
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
fn cpu_seconds(pid: &str) -> Result<f64> {
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
    Ok(pages * page as u64)
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

/// Runs the figures and appends them to `notes`.
pub(crate) fn notes(counts: Counts, notes: &mut Vec<String>) -> Result<()> {
    let server = step("start one nats-server", || Ok(Server::start()?))?;
    let server_pid = server.pid().ok_or("nats-server has no pid")?.to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let keys: Vec<String> = (0..counts.keys).map(|i| format!("store-{i:05}")).collect();
    let options = NatsOptions::default();
    let renew = options.renew_every();
    let ttl = options.ttl();
    let election = rt.block_on(NatsElection::connect(&server.url(), options))?;
    let rss_before = rss_bytes()?;
    let set = rt.block_on(election.lease_set("bench-node/1"))?;
    let started = Instant::now();
    for k in &keys {
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
    let rss_after = rss_bytes()?;
    eprintln!(
        "bench: lease set holds {} keys after {won_all:?}; steady state for {:?}",
        keys.len(),
        counts.window
    );

    let stats = election.client().statistics();
    let out_before = stats.out_messages.load(Ordering::Relaxed);
    let out_bytes_before = stats.out_bytes.load(Ordering::Relaxed);
    let cpu_before = cpu_seconds("self")?;
    let server_cpu_before = cpu_seconds(&server_pid)?;
    let window_start = Instant::now();
    std::thread::sleep(counts.window);
    let wall = window_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds("self")? - cpu_before;
    let server_cpu = cpu_seconds(&server_pid)? - server_cpu_before;
    let out = stats.out_messages.load(Ordering::Relaxed) - out_before;
    let out_bytes = stats.out_bytes.load(Ordering::Relaxed) - out_bytes_before;
    if set.held_keys().len() != keys.len() {
        return Err("the lease set lost keys during the steady-state window".into());
    }

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let one = held_rate(&set, &keys, 1, counts.held_run);
    let all = held_rate(&set, &keys, threads, counts.held_run);
    rt.block_on(set.close());

    let intervals = wall / renew.as_secs_f64();
    let per_key_interval = out as f64 / keys.len() as f64 / intervals;
    let rss_per_key = (rss_after.saturating_sub(rss_before)) as f64 / keys.len() as f64;
    notes.push(format!(
        "Lease set on NATS (1 node, TTL {ttl:?}, renew every {renew:?}), {} keys held by one process: \
         won all in {:.2} s from a standing start; over a {:.0} s steady-state window the process \
         used {:.2}% of one core (CPU {:.3} s; nats-server {:.2}%), and its client sent {out} \
         messages ({out_bytes} B): {per_key_interval:.6} requests per key per renew interval \
         (one session renewal per interval for all keys).",
        keys.len(),
        won_all.as_secs_f64(),
        wall,
        100.0 * cpu / wall,
        cpu,
        100.0 * server_cpu / wall,
    ));
    notes.push(format!(
        "Lease set memory: resident set grew by {:.1} MiB while making the set and winning {} keys: \
         {:.0} B per key (RSS delta over keys, allocator slack included).",
        (rss_after.saturating_sub(rss_before)) as f64 / (1024.0 * 1024.0),
        keys.len(),
        rss_per_key
    ));
    notes.push(format!(
        "Lease set `held`: {:.1} M calls/s from 1 thread, {:.1} M calls/s from {threads} threads \
         at once ({:?} each, round-robin over {} held keys).",
        one / 1e6,
        all / 1e6,
        counts.held_run,
        keys.len()
    ));
    drop(server);
    Ok(())
}
