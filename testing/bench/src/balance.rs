//! The balanced lease-set figures (`--only balance`, issue 25): on each
//! backend (file, SQLite, PostgreSQL, NATS), `lease-set-node --balance`
//! processes (real processes, the release build) offering the same keys:
//!
//! - time until the shares are fair again (every live member holds
//!   ⌊K/P⌋ or ⌈K/P⌉ keys, and every key is held exactly once, as the
//!   members' own sweeps report it) after a member joins (3 → 4), leaves
//!   cleanly (`close`: membership stopped, set closed; 4 → 3) and is
//!   killed (SIGKILL; 4 → 3), with 1,000 keys; the change is stamped on the
//!   same `CLOCK_MONOTONIC` as the members' `held`/`free` lines, fairness
//!   at the line that completed it;
//! - keys moved per change (keys whose holder differs before the change
//!   and once fair) against the minimum: for a join the newcomer's fair
//!   share, for a leave or crash the keys the leaver held;
//! - on the backends whose leases expire, the same crash at the default
//!   lease (TTL 15 s, renew 5 s, the core's default poll) and the
//!   recipe's membership interval (1 s): 4 members, one
//!   SIGKILLed per round, against issue 42's bound of TTL + one renew
//!   interval + one poll (the 3 s rows state theirs too);
//! - 10,000 keys in a balanced set of 4 members, left alone: each member's
//!   CPU (utime + stime from `/proc/<pid>/stat`) over the window, against
//!   the goal of under 1 % of a core per member.
//!
//! Settings (stated in each note): the convergence rows use TTL 3 s
//! (renew 1 s), membership `every` 250 ms, poll 100 ms (file, SQLite,
//! PostgreSQL; NATS is woken by its watch); the CPU row the backends'
//! default TTL (15 s, renew 5 s) and `every` 500 ms (lease-set-node's
//! default). Each member sweeps `held` over every key (10 ms for the
//! convergence rows, the time resolution; 1 s for the CPU row).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use backend_kit::Kind;
use candidate_testkit::lease_set::Event;
use candidate_testkit::mono_ns;

use super::step;
use crate::Result;

/// What the balance figures use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    /// Keys of the convergence rows (1,000).
    pub(crate) keys: usize,
    /// Rounds of join, leave, join, crash per backend.
    pub(crate) rounds: usize,
    /// Keys of the CPU row (10,000).
    pub(crate) cpu_keys: usize,
    /// The CPU row's steady window.
    pub(crate) window: Duration,
}

/// Members of the balanced set at most.
const MEMBERS: usize = 4;
/// The convergence rows' lease.
const TTL: Duration = Duration::from_secs(3);
/// The convergence rows' renew interval.
const RENEW: Duration = Duration::from_secs(1);
/// The convergence rows' membership interval.
const EVERY: Duration = Duration::from_millis(250);
/// The convergence rows' poll interval.
const POLL: Duration = Duration::from_millis(100);
/// The convergence rows' sweep: the time resolution of the figures.
const SWEEP: Duration = Duration::from_millis(10);
/// The crash row at the backends' default lease (issue 42, goal 4): TTL
/// 15 s, renew 5 s, the core's default poll interval.
const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// Its renew interval.
const DEFAULT_RENEW: Duration = Duration::from_secs(5);
/// Its membership interval: the recipe's (docs/recipes.md, "A sharded
/// service"), so that the recipe quotes figures of its own options.
const RECIPE_EVERY: Duration = Duration::from_secs(1);
/// The CPU row's sweep over 10,000 keys.
const CPU_SWEEP: Duration = Duration::from_secs(1);
/// The CPU row's membership interval (lease-set-node's default).
const CPU_EVERY: Duration = Duration::from_millis(500);
/// How long shares may take to become fair before the figure says so.
const PATIENCE: Duration = Duration::from_secs(120);

/// One `lease-set-node` process.
struct Node {
    child: Child,
    stdin: Option<ChildStdin>,
    live: bool,
    held: HashSet<String>,
}

/// The members over one backend and what they said.
struct Nodes<'a> {
    bin: &'a Path,
    args: Vec<String>,
    log: &'a Path,
    keys: usize,
    nodes: Vec<Node>,
    tx: mpsc::Sender<(usize, Option<Event>)>,
    rx: mpsc::Receiver<(usize, Option<Event>)>,
}

impl Drop for Nodes<'_> {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            let _ = n.child.kill();
            let _ = n.child.wait();
        }
    }
}

impl<'a> Nodes<'a> {
    fn new(bin: &'a Path, log: &'a Path, keys: usize, args: Vec<String>) -> Self {
        let (tx, rx) = mpsc::channel();
        Nodes {
            bin,
            args,
            log,
            keys,
            nodes: Vec::new(),
            tx,
            rx,
        }
    }

    fn start(&mut self) -> Result<usize> {
        let index = self.nodes.len();
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log)?;
        let mut child = Command::new(self.bin)
            .args(&self.args)
            .args(["--identity", &format!("bench-node-{index}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("start {}: {e}", self.bin.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(event) = Event::parse(&line)
                    && tx.send((index, Some(event))).is_err()
                {
                    return;
                }
            }
            let _ = tx.send((index, None));
        });
        self.nodes.push(Node {
            child,
            stdin,
            live: true,
            held: HashSet::new(),
        });
        Ok(index)
    }

    fn live(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].live)
            .collect()
    }

    /// Applies one line; returns its stamp if it changed what is held.
    fn apply(&mut self, node: usize, event: Option<Event>) -> Option<u64> {
        match event {
            Some(Event::Held { key, at, .. }) if self.nodes[node].live => {
                self.nodes[node].held.insert(key);
                Some(at)
            }
            Some(Event::Free { key, at, .. }) => {
                self.nodes[node].held.remove(&key);
                Some(at)
            }
            Some(Event::Error(e)) => {
                eprintln!("bench: lease-set-node {node}: {e}");
                None
            }
            _ => None,
        }
    }

    /// Whether every live member holds ⌊K/P⌋ or ⌈K/P⌉ keys and the keys
    /// held add up to K (none twice: a key in two sets counts twice).
    fn fair(&self) -> bool {
        let live = self.live();
        if live.is_empty() {
            return false;
        }
        let (low, high) = (self.keys / live.len(), self.keys.div_ceil(live.len()));
        let total: usize = self.nodes.iter().map(|n| n.held.len()).sum();
        total == self.keys
            && live
                .iter()
                .all(|&n| (low..=high).contains(&self.nodes[n].held.len()))
    }

    /// Reads lines until the shares are fair; returns the stamp of the
    /// line that made them so, or `None` after `PATIENCE`.
    fn until_fair(&mut self) -> Option<u64> {
        let deadline = Instant::now() + PATIENCE;
        let mut last = mono_ns();
        loop {
            if self.fair() {
                return Some(last);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.rx.recv_timeout(left) {
                Ok((node, event)) => {
                    if let Some(at) = self.apply(node, event) {
                        last = at;
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads what arrived for `d` (shares settle; stray lines applied).
    fn settle(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok((node, event)) => {
                    self.apply(node, event);
                }
                Err(_) => return,
            }
        }
    }

    /// key -> holder, of the keys held once.
    fn holders(&self) -> HashMap<String, usize> {
        let mut holders = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for k in &n.held {
                holders.insert(k.clone(), i);
            }
        }
        holders
    }

    /// Asks member `n` to leave cleanly (`close`: its membership stops,
    /// its set closes and gives every key back). It holds nothing from
    /// the moment `close` starts (`held` reads false), so its keys leave
    /// the view at once; the shares are fair once the others hold them.
    fn close(&mut self, n: usize) {
        if let Some(mut stdin) = self.nodes[n].stdin.take() {
            let _ = stdin.write_all(b"close\n");
        }
        self.nodes[n].live = false;
        self.nodes[n].held.clear();
    }

    /// SIGKILLs member `n`: what it held is dropped from the view at once
    /// (it says nothing more).
    fn kill(&mut self, n: usize) {
        let _ = self.nodes[n].child.kill();
        let _ = self.nodes[n].child.wait();
        self.nodes[n].live = false;
        self.nodes[n].held.clear();
    }

    fn pid(&self, n: usize) -> u32 {
        self.nodes[n].child.id()
    }
}

/// One change's figures.
struct Change {
    seconds: Option<f64>,
    moved: usize,
    minimum: usize,
}

/// Runs `change` on `nodes` (fair before it) and measures it; `minimum`
/// is computed from the view right before the change.
fn measure(
    nodes: &mut Nodes<'_>,
    minimum: impl FnOnce(&Nodes<'_>) -> usize,
    change: impl FnOnce(&mut Nodes<'_>) -> Result<()>,
) -> Result<Change> {
    let before = nodes.holders();
    let minimum = minimum(nodes);
    let t0 = mono_ns();
    change(nodes)?;
    let fair = nodes.until_fair();
    let after = nodes.holders();
    let moved = before
        .iter()
        .filter(|(k, h)| after.get(*k) != Some(h))
        .count();
    let seconds = fair.map(|t| t.saturating_sub(t0) as f64 / 1e9);
    // Let stragglers (late `free` lines) arrive before the next change.
    nodes.settle(EVERY * 4);
    Ok(Change {
        seconds,
        moved,
        minimum,
    })
}

/// The node arguments shared by every member over `url`.
fn node_args(
    url: &str,
    keys: usize,
    group: &str,
    every: Duration,
    sweep: Duration,
    lease: Option<Lease>,
) -> Vec<String> {
    let ms = |d: Duration| d.as_millis().to_string();
    let mut args = vec![
        "--backend".to_owned(),
        url.to_owned(),
        "--keys".to_owned(),
        keys.to_string(),
        "--balance".to_owned(),
        group.to_owned(),
        "--every-ms".to_owned(),
        ms(every),
        "--sweep-ms".to_owned(),
        ms(sweep),
    ];
    if let Some(lease) = lease {
        args.extend([
            "--ttl-ms".to_owned(),
            ms(lease.ttl),
            "--renew-ms".to_owned(),
            ms(lease.renew),
            "--poll-ms".to_owned(),
            ms(lease.poll),
        ]);
    }
    args
}

/// The lease of a row on a backend whose leases expire.
#[derive(Clone, Copy, Debug)]
struct Lease {
    ttl: Duration,
    renew: Duration,
    poll: Duration,
}

impl Lease {
    /// The convergence rows' lease.
    const SHORT: Lease = Lease {
        ttl: TTL,
        renew: RENEW,
        poll: POLL,
    };
    /// The backends' default lease.
    const DEFAULT: Lease = Lease {
        ttl: DEFAULT_TTL,
        renew: DEFAULT_RENEW,
        poll: election_core::DEFAULT_POLL_INTERVAL,
    };

    /// Issue 42's bound on a crash failover: TTL + one renew interval +
    /// one poll.
    fn bound(self) -> Duration {
        self.ttl + self.renew + self.poll
    }

    /// `TTL 3 s, renew 1 s, poll 100 ms, ` for a note.
    fn shown(self) -> String {
        format!(
            "TTL {} s, renew {} s, poll {} ms, ",
            self.ttl.as_secs(),
            self.renew.as_secs(),
            self.poll.as_millis()
        )
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// `0.42 s (max 0.61 s)` of the changes that became fair, and how many
/// did not within the patience.
fn times(changes: &[Change]) -> String {
    let fair: Vec<f64> = changes.iter().filter_map(|c| c.seconds).collect();
    let missed = changes.len() - fair.len();
    let max = fair.iter().copied().fold(f64::NAN, f64::max);
    let mut s = match median(fair) {
        Some(m) if changes.len() > 1 => format!("median {m:.2} s (max {max:.2} s)"),
        Some(m) => format!("{m:.2} s"),
        None => "never".to_owned(),
    };
    if missed > 0 {
        s.push_str(&format!(
            ", {missed} not fair within {} s",
            PATIENCE.as_secs()
        ));
    }
    s
}

fn moved(changes: &[Change]) -> String {
    let m: usize = changes.iter().map(|c| c.moved).sum();
    let min: usize = changes.iter().map(|c| c.minimum).sum();
    let n = changes.len().max(1);
    format!("{} keys moved per change, minimum {}", m / n, min / n)
}

/// The convergence figures on one backend: `rounds` of join, leave,
/// join, crash, from 3 members; one note.
fn convergence(
    what: &str,
    url: &str,
    lease: bool,
    bin: &Path,
    log: &Path,
    c: Counts,
    notes: &mut Vec<String>,
) -> Result<()> {
    let lease = lease.then_some(Lease::SHORT);
    let args = node_args(url, c.keys, "bench-balance", EVERY, SWEEP, lease);
    let mut nodes = Nodes::new(bin, log, c.keys, args);
    let start = mono_ns();
    for _ in 0..MEMBERS - 1 {
        nodes.start()?;
    }
    let first = nodes.until_fair().ok_or_else(|| {
        format!(
            "{what}: 3 members never held fair shares of {} keys",
            c.keys
        )
    })?;
    let first = first.saturating_sub(start) as f64 / 1e9;
    nodes.settle(EVERY * 4);
    let (mut joins, mut leaves, mut crashes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..c.rounds {
        for (i, change) in ["join", "leave", "join", "crash"].iter().enumerate() {
            let list = match i {
                0 => &mut joins,
                1 => &mut leaves,
                2 => &mut joins,
                _ => &mut crashes,
            };
            let figure = match *change {
                "join" => measure(
                    &mut nodes,
                    |n| c.keys / (n.live().len() + 1),
                    |n| n.start().map(|_| ()),
                )?,
                _ => {
                    let live = nodes.live();
                    // The member that joined first among the live ones.
                    let leaver = live[0];
                    let crash = *change == "crash";
                    measure(
                        &mut nodes,
                        |n| n.nodes[leaver].held.len(),
                        |n| {
                            if crash {
                                n.kill(leaver);
                            } else {
                                n.close(leaver);
                            }
                            Ok(())
                        },
                    )?
                }
            };
            list.push(figure);
        }
    }
    notes.push(format!(
        "Balanced lease set, {what}, {} keys, real `lease-set-node --balance` processes \
         ({}every {} ms, sweep {} ms; {} round(s) of join 3→4, clean leave 4→3, join 3→4, \
         SIGKILL 4→3): fair shares (⌊K/P⌋ or ⌈K/P⌉ each, every key held once) {first:.2} s \
         after 3 members started; after a join {} ({}), after a clean leave {} ({}), after a \
         crash {} ({}){}",
        c.keys,
        lease.map(Lease::shown).unwrap_or_default(),
        EVERY.as_millis(),
        SWEEP.as_millis(),
        c.rounds,
        times(&joins),
        moved(&joins),
        times(&leaves),
        moved(&leaves),
        times(&crashes),
        moved(&crashes),
        bound(lease),
    ));
    Ok(())
}

/// `; issue 42's bound on a crash: TTL + renew + poll = 4.10 s` for a
/// note, where leases expire.
fn bound(lease: Option<Lease>) -> String {
    lease.map_or_else(String::new, |l| {
        format!(
            "; issue 42's bound on a crash: TTL + renew + poll = {:.2} s",
            l.bound().as_secs_f64()
        )
    })
}

/// The crash figure at the backend's default lease (issue 42, goal 4):
/// 4 members with fair shares of `keys`, then `rounds` times: one
/// SIGKILLed and a new one started; one note.
fn default_crash(
    what: &str,
    url: &str,
    bin: &Path,
    log: &Path,
    c: Counts,
    notes: &mut Vec<String>,
) -> Result<()> {
    let lease = Lease::DEFAULT;
    let args = node_args(url, c.keys, "bench-crash", RECIPE_EVERY, SWEEP, Some(lease));
    let mut nodes = Nodes::new(bin, log, c.keys, args);
    for _ in 0..MEMBERS {
        nodes.start()?;
    }
    nodes.until_fair().ok_or_else(|| {
        format!(
            "{what}: 4 members never held fair shares of {} keys",
            c.keys
        )
    })?;
    nodes.settle(RECIPE_EVERY * 4);
    let mut crashes = Vec::new();
    for round in 0..c.rounds {
        if round > 0 {
            nodes.start()?;
            nodes.until_fair();
            nodes.settle(RECIPE_EVERY * 4);
        }
        let leaver = nodes.live()[0];
        crashes.push(measure(
            &mut nodes,
            |n| n.nodes[leaver].held.len(),
            |n| {
                n.kill(leaver);
                Ok(())
            },
        )?);
    }
    notes.push(format!(
        "Balanced lease set, {what}, crash at the default lease, {} keys, real `lease-set-node \
         --balance` processes ({}every {} ms, sweep {} ms; {} round(s) of SIGKILL 4→3): fair \
         shares again after a crash {} ({}){}",
        c.keys,
        lease.shown(),
        RECIPE_EVERY.as_millis(),
        SWEEP.as_millis(),
        c.rounds,
        times(&crashes),
        moved(&crashes),
        bound(Some(lease)),
    ));
    Ok(())
}

/// The CPU figure on one backend: 4 members, `cpu_keys` keys, default
/// TTL, left alone for the window; one note.
fn cpu(
    what: &str,
    url: &str,
    bin: &Path,
    log: &Path,
    c: Counts,
    notes: &mut Vec<String>,
) -> Result<()> {
    let args = node_args(url, c.cpu_keys, "bench-cpu", CPU_EVERY, CPU_SWEEP, None);
    let mut nodes = Nodes::new(bin, log, c.cpu_keys, args);
    let start = Instant::now();
    for _ in 0..MEMBERS {
        nodes.start()?;
    }
    if nodes.until_fair().is_none() {
        notes.push(format!(
            "Balanced lease set, {what}, {} keys, {MEMBERS} members: never fair within {} s; \
             CPU not measured",
            c.cpu_keys,
            PATIENCE.as_secs()
        ));
        return Ok(());
    }
    let fair_after = start.elapsed();
    nodes.settle(Duration::from_secs(2));
    let pids: Vec<String> = (0..MEMBERS).map(|n| nodes.pid(n).to_string()).collect();
    let before: Vec<f64> = pids
        .iter()
        .map(|p| super::leases::cpu_seconds(p))
        .collect::<Result<_>>()?;
    let t = Instant::now();
    nodes.settle(c.window);
    let window = t.elapsed().as_secs_f64();
    let after: Vec<f64> = pids
        .iter()
        .map(|p| super::leases::cpu_seconds(p))
        .collect::<Result<_>>()?;
    let still_fair = nodes.fair();
    let pct: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) / window * 100.0)
        .collect();
    let max = pct.iter().copied().fold(0.0, f64::max);
    notes.push(format!(
        "Balanced lease set, {what}, {} keys over {MEMBERS} `lease-set-node --balance` \
         members (default TTL, every {} ms, sweep {} s; fair after {:.1} s{}): CPU per member \
         over a {:.0} s window {} % of a core (max {max:.2} %; goal under 1 %: {})",
        c.cpu_keys,
        CPU_EVERY.as_millis(),
        CPU_SWEEP.as_secs(),
        fair_after.as_secs_f64(),
        if still_fair {
            ""
        } else {
            "; NOT fair at the window's end"
        },
        window,
        pct.iter()
            .map(|p| format!("{p:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        if max < 1.0 { "met" } else { "NOT met" }
    ));
    Ok(())
}

/// Every backend's balance notes: for each kind of backend but a
/// replicated deployment of one already measured, the convergence figures
/// and then the CPU figure, each on a store of its own (`Kind::start` in
/// the bench directory: a directory, a database file, a server).
pub(crate) fn notes(
    dir: &Path,
    bin: &Path,
    log: &Path,
    c: Counts,
    notes: &mut Vec<String>,
) -> Result<()> {
    for kind in Kind::ALL.into_iter().filter(|k| !k.is_replicated()) {
        let label = kind.label();
        let store = step(&format!("start a {label} store"), || Ok(kind.start(dir)?))?;
        step(
            &format!("balanced lease set: {label}, join/leave/crash"),
            || convergence(label, &store.url(), kind.expires(), bin, log, c, notes),
        )?;
        drop(store);
        if kind.expires() {
            let store = step(&format!("start a {label} store"), || Ok(kind.start(dir)?))?;
            step(
                &format!("balanced lease set: {label}, crash at the default lease"),
                || default_crash(label, &store.url(), bin, log, c, notes),
            )?;
        }
        let store = step(&format!("start a {label} store"), || Ok(kind.start(dir)?))?;
        step(&format!("balanced lease set: {label}, CPU"), || {
            cpu(label, &store.url(), bin, log, c, notes)
        })?;
    }
    Ok(())
}
