//! The scenario every backend runs: several `lease-set-node` processes
//! share 1,000 keys; every key ends up with exactly one holder; holders are
//! killed one by one and their keys move to the others within a bound; no
//! key ever has two holders at once.

use std::process::Stdio;
use std::time::Duration;

use candidate_testkit::lease_set::{Event, Timeline, key_name};
use candidate_testkit::mono_ns;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_lease-set-node");

/// How many keys the processes share.
pub(crate) const KEYS: usize = 1000;

/// How long starting up (every process ready, every key held once) may
/// take.
const STARTUP: Duration = Duration::from_secs(60);

/// What a takeover bound allows beyond the protocol's own time
/// ([`Kind::takeover_bound`](backend_kit::Kind::takeover_bound): TTL,
/// renew interval, grace, polls): a loaded machine. In CI, beside the
/// build checks, requests to a PostgreSQL server went past their 500 ms
/// timeout and were retried, and one key was taken over 9.9 s after the
/// kill (2026-12-02), past a slack of 5 s; on the file backend each key
/// taken over writes a durable epoch record (two fsyncs), hundreds at once
/// on a disk the other tests share, and a loaded run once took 5.5 s for
/// 564 keys. How quickly keys move is the bench's to measure; these tests
/// check that they move, to one holder.
const SLACK: Duration = Duration::from_secs(20);

/// The timings every process gets (a backend without a setting ignores it,
/// with a note).
const TIMING: backend_kit::Timing = backend_kit::Timing {
    ttl: Duration::from_millis(3000),
    renew: Duration::from_millis(1000),
    grace: Duration::from_millis(1000),
    poll: Duration::from_millis(200),
};

/// A started backend of `kind` (its files on the build's own disk,
/// `CARGO_TARGET_TMPDIR`: real files, real fsync), prepared; the flags
/// every process gets; the takeover bound.
async fn store(kind: backend_kit::Kind) -> (backend_kit::Store, Vec<String>, Duration) {
    let store = tokio::task::block_in_place(|| kind.start(env!("CARGO_TARGET_TMPDIR").as_ref()))
        .unwrap_or_else(|e| panic!("start the {kind} backend: {e}"));
    store.prepare().await.expect("prepare");
    let bound = kind.takeover_bound(&TIMING) + SLACK;
    (store, TIMING.flags(), bound)
}

/// The failover of two processes, on every backend (replicated
/// deployments included: what replication changes):
/// `failover_tests!(name, Kind)` makes the module `name` of tests on
/// `backend_kit::Kind::Kind`.
macro_rules! failover_tests {
    ($name:ident, $kind:ident) => {
        mod $name {
            const KIND: backend_kit::Kind = backend_kit::Kind::$kind;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn two_processes_share_a_thousand_keys_and_a_killed_ones_keys_move() {
                crate::lease_set::share(KIND, 2).await;
            }
        }
    };
}

/// The scenarios that run on each backend's single-node deployment.
macro_rules! single_node_tests {
    ($name:ident, $kind:ident) => {
        mod $name {
            const KIND: backend_kit::Kind = backend_kit::Kind::$kind;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn three_processes_share_a_thousand_keys_and_two_are_killed_in_turn() {
                crate::lease_set::share(KIND, 3).await;
            }

            /// Three balanced processes share the keys fairly; a killed
            /// one's keys (and only those) go to the survivors, fairly,
            /// within the bound; a newcomer gets its share from them.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn balanced_processes_share_fairly_and_take_over_a_killed_ones_keys() {
                let (store, args, bound) = crate::lease_set::store(KIND).await;
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                crate::lease_set::balance_and_fail_over(&store.url(), &args, bound).await;
            }
        }
    };
}

/// The pause past the TTL, where claims expire (single-node).
macro_rules! expiring_tests {
    ($name:ident, $kind:ident) => {
        mod $name {
            use backend_kit::Faults as _;

            const KIND: backend_kit::Kind = backend_kit::Kind::$kind;

            /// A frozen holder's `held` answers false once its claims could
            /// have run out, and its keys move during the freeze.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_frozen_holder_never_answers_held_for_keys_taken_over() {
                let (store, args, bound) = crate::lease_set::store(KIND).await;
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                crate::lease_set::pause_past_the_ttl(&store.url(), &args, bound, async || {
                    store.frozen_client_blocks_nobody().await
                })
                .await;
            }
        }
    };
}

/// `count` processes share the keys; killed in turn, their keys move.
async fn share(kind: backend_kit::Kind, count: usize) {
    let (store, args, bound) = store(kind).await;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    share_and_fail_over(&store.url(), &args, count, bound).await;
}

/// Every backend: the failover of two processes.
mod everywhere {
    backend_kit::for_each_kind!(failover_tests);
}

/// Each backend's single-node deployment.
mod single_node {
    backend_kit::for_each_kind_where!(single_node, single_node_tests);
}

/// Where claims expire.
mod expiring {
    backend_kit::for_each_kind_where!(expiring_single_node, expiring_tests);
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Killed at this stamp; its output is still being read.
    Killed(u64),
    /// Told to close.
    Closing,
    /// Its output ended.
    Gone,
}

struct Node {
    child: Child,
    stdin: Option<ChildStdin>,
    state: State,
}

/// `lease-set-node` processes over one backend, their events, and the
/// [`Timeline`] built from them. Every process is killed when this is
/// dropped (also when a test fails).
pub(crate) struct Nodes {
    args: Vec<String>,
    nodes: Vec<Node>,
    timeline: Timeline,
    /// `free` lines of running processes: holds that lapsed without a kill.
    lapses: usize,
    tx: mpsc::UnboundedSender<(usize, Option<String>)>,
    rx: mpsc::UnboundedReceiver<(usize, Option<String>)>,
}

impl Nodes {
    /// Processes that will run with `--backend backend` and `args`.
    pub(crate) fn new(backend: &str, args: &[&str]) -> Nodes {
        let mut all = vec![
            "--backend".to_owned(),
            backend.to_owned(),
            "--keys".to_owned(),
            KEYS.to_string(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let (tx, rx) = mpsc::unbounded_channel();
        Nodes {
            args: all,
            nodes: Vec::new(),
            timeline: Timeline::new(),
            lapses: 0,
            tx,
            rx,
        }
    }

    /// Starts one more process; returns its index.
    pub(crate) fn start(&mut self) -> usize {
        let name = format!("node-{}", self.nodes.len());
        let index = self.timeline.add_node(&name);
        // Membership's diagnostics (who left whom out of its view as
        // suspected), so a failure shows why keys moved.
        let mut child = Command::new(BIN)
            .args(&self.args)
            .args(["--identity", &name])
            .env("RUST_LOG", "election_core::keyed::membership=debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let prefix = name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{prefix} stderr: {line}");
            }
        });
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send((index, Some(line))).is_err() {
                    return;
                }
            }
            let _ = tx.send((index, None));
        });
        self.nodes.push(Node {
            child,
            stdin,
            state: State::Running,
        });
        index
    }

    /// The timeline so far.
    pub(crate) fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].state == State::Running)
            .collect()
    }

    /// Keys held per process, for failure messages.
    fn summary(&self) -> String {
        let mut s = String::new();
        for n in 0..self.nodes.len() {
            s.push_str(&format!(
                "{}: {:?}, {} keys; ",
                self.timeline.name(n),
                self.nodes[n].state,
                self.timeline.held_by(n).len()
            ));
        }
        let unheld = (0..KEYS)
            .filter(|&k| self.timeline.holders(&key_name(k)).is_empty())
            .count();
        s + &format!("{unheld} keys without a holder")
    }

    /// Reads and records one line; false if none came before `deadline`.
    async fn step(&mut self, deadline: Instant) -> bool {
        let Ok(message) = tokio::time::timeout_at(deadline, self.rx.recv()).await else {
            return false;
        };
        let (node, line) = message.expect("the sender lives in self");
        let name = self.timeline.name(node).to_owned();
        match line {
            Some(line) => {
                let event = Event::parse(&line).unwrap_or_else(|e| panic!("{name}: {e}"));
                match &event {
                    Event::Note(text) => eprintln!("{name}: note {text}"),
                    Event::Free { .. } => self.lapses += 1,
                    _ => {}
                }
                if let Err(e) = self.timeline.record(node, &event) {
                    panic!("{e}");
                }
            }
            None => {
                let n = &mut self.nodes[node];
                match n.state {
                    State::Killed(at) => self.timeline.end(node, at),
                    State::Closing => {}
                    State::Running | State::Gone => {
                        let status = n.child.wait().await;
                        panic!("{name} exited on its own: {status:?}");
                    }
                }
                n.state = State::Gone;
            }
        }
        true
    }

    /// Records events until `done` holds; fails the test after `patience`.
    pub(crate) async fn until(
        &mut self,
        what: &str,
        patience: Duration,
        done: impl Fn(&Self) -> bool,
    ) {
        let deadline = Instant::now() + patience;
        while !done(self) {
            if !self.step(deadline).await {
                panic!("not {what} after {patience:?}: {}", self.summary());
            }
        }
    }

    /// True when every key has exactly one holder, and it is running.
    pub(crate) fn every_key_held_once(&self) -> bool {
        (0..KEYS).all(|k| match self.timeline.holders(&key_name(k))[..] {
            [holder] => self.nodes[holder].state == State::Running,
            _ => false,
        })
    }

    /// Kills process `node` with `SIGKILL`, reads the rest of its output
    /// and ends its holds at the moment of the kill; returns that moment.
    pub(crate) async fn kill(&mut self, node: usize) -> u64 {
        self.nodes[node].child.start_kill().expect("SIGKILL");
        let at = mono_ns();
        self.nodes[node].state = State::Killed(at);
        self.until("reaped", Duration::from_secs(30), |s| {
            s.nodes[node].state == State::Gone
        })
        .await;
        let _ = self.nodes[node].child.wait().await;
        at
    }

    /// Sends `signal` to process `node`; returns the moment it was sent.
    pub(crate) fn signal(&self, node: usize, signal: nix::sys::signal::Signal) -> u64 {
        let pid = self.nodes[node].child.id().expect("running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid"));
        nix::sys::signal::kill(pid, signal).expect("signal");
        mono_ns()
    }

    /// Closes every running process (`close` on stdin) and waits until each
    /// has said `closed` and exited 0.
    pub(crate) async fn close_all(&mut self) {
        let running = self.alive();
        for &n in &running {
            let stdin = self.nodes[n].stdin.as_mut().expect("stdin");
            stdin.write_all(b"close\n").await.expect("write close");
            stdin.flush().await.expect("flush");
            self.nodes[n].state = State::Closing;
        }
        self.until("closed", Duration::from_secs(30), |s| {
            running.iter().all(|&n| s.nodes[n].state == State::Gone)
        })
        .await;
        for &n in &running {
            let status = self.nodes[n].child.wait().await.expect("wait");
            assert!(
                status.success(),
                "{} exited with {status}",
                self.timeline.name(n)
            );
        }
    }

    /// Fails the test if two processes ever held a key at once, or epochs
    /// did not grow.
    pub(crate) fn assert_no_violation(&self) {
        let found = self.timeline.check();
        assert!(
            found.is_empty(),
            "{} violations, the first: {}",
            found.len(),
            found
                .iter()
                .take(5)
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// One scenario at a time, across test processes too (nextest runs each
/// test in a process of its own): each runs up to three processes with a
/// thousand keys and measures takeover times, which a second one running
/// beside it on a small machine would distort. Held until dropped.
async fn one_at_a_time() -> nix::fcntl::Flock<std::fs::File> {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lease-set-node.lock");
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .unwrap_or_else(|(_, e)| panic!("lock {}: {e}", path.display()))
    })
    .await
    .expect("lock task")
}

/// The scenario: `count` processes over `backend` (started together) share
/// [`KEYS`] keys until each key has exactly one holder; then, until one
/// process is left, the running process holding the most keys is killed
/// and every key it held must be held by a survivor within `bound` of the
/// kill. No key ever has two holders at once.
async fn share_and_fail_over(backend: &str, args: &[&str], count: usize, bound: Duration) {
    let _turn = one_at_a_time().await;
    let started = Instant::now();
    let mut nodes = Nodes::new(backend, args);
    for _ in 0..count {
        nodes.start();
    }
    nodes
        .until("ready", STARTUP, |s| {
            (0..count).all(|n| s.timeline().is_ready(n))
        })
        .await;
    nodes
        .until("every key held once", STARTUP, Nodes::every_key_held_once)
        .await;
    let split: Vec<usize> = (0..count)
        .map(|n| nodes.timeline().held_by(n).len())
        .collect();
    nodes.assert_no_violation();
    let mut report = format!(
        "{backend}: {count} processes, keys held {split:?} after {:?}",
        started.elapsed()
    );
    while nodes.alive().len() > 1 {
        let alive = nodes.alive();
        let victim = *alive
            .iter()
            .max_by_key(|&&n| nodes.timeline().held_by(n).len())
            .expect("a running process");
        let keys = nodes.timeline().held_by(victim);
        assert!(!keys.is_empty(), "no running process holds a key");
        let killed = nodes.kill(victim).await;
        nodes
            .until(
                "every key moved to the survivors",
                bound + Duration::from_secs(30),
                Nodes::every_key_held_once,
            )
            .await;
        nodes.assert_no_violation();
        let (mut fastest, mut slowest) = (Duration::MAX, Duration::ZERO);
        for key in &keys {
            let hold = nodes
                .timeline()
                .first_hold_since(key, killed)
                .unwrap_or_else(|| panic!("{key}: nobody took it over"));
            assert_ne!(hold.node, victim);
            let took = Duration::from_nanos((hold.from - killed) as u64);
            assert!(
                took <= bound,
                "{key} was taken over {took:?} after the kill, later than {bound:?}: {hold}"
            );
            fastest = fastest.min(took);
            slowest = slowest.max(took);
        }
        report.push_str(&format!(
            "; killed {} holding {} keys, moved after {fastest:?} to {slowest:?}",
            nodes.timeline().name(victim),
            keys.len()
        ));
    }
    nodes.close_all().await;
    nodes.assert_no_violation();
    // More holds than the first ones plus the moved ones: keys changed
    // hands without a kill (a late renewal, say).
    eprintln!(
        "{report}; {} holds in all, {} lapsed without a kill; total {:?}",
        nodes.timeline().intervals().len(),
        nodes.lapses,
        started.elapsed()
    );
}

/// The pause scenario: two processes over `backend` share [`KEYS`] keys;
/// the one holding more is frozen (`SIGSTOP`) until the other holds every
/// one of its keys (within `bound`), then resumed (`SIGCONT`). The resumed
/// process must answer "not held" for those keys from its very first look
/// (its holds ran out on the monotonic clock while it was frozen): no key
/// ever has two holders at once, counting every "held" answer.
///
/// `frozen_cleanly` runs right after each `SIGSTOP` and answers whether the
/// frozen process left the backend usable by the other one. A SQLite
/// process stopped inside a write transaction keeps the database's write
/// lock, so nobody can renew or claim anything until it runs again (safe,
/// but no takeover can happen): such a freeze is undone and tried again.
async fn pause_past_the_ttl(
    backend: &str,
    args: &[&str],
    bound: Duration,
    frozen_cleanly: impl AsyncFn() -> bool,
) {
    use nix::sys::signal::Signal;
    const TRIES: usize = 20;
    let _turn = one_at_a_time().await;
    let mut nodes = Nodes::new(backend, args);
    nodes.start();
    nodes.start();
    nodes
        .until("ready", STARTUP, |s| {
            (0..2).all(|n| s.timeline().is_ready(n))
        })
        .await;
    let mut tries = 0;
    let (victim, keys, paused) = loop {
        nodes
            .until("every key held once", STARTUP, Nodes::every_key_held_once)
            .await;
        let victim = (0..2)
            .max_by_key(|&n| nodes.timeline().held_by(n).len())
            .expect("two processes");
        let keys = nodes.timeline().held_by(victim);
        assert!(!keys.is_empty());
        let paused = nodes.signal(victim, Signal::SIGSTOP);
        tries += 1;
        if frozen_cleanly().await {
            break (victim, keys, paused);
        }
        nodes.signal(victim, Signal::SIGCONT);
        eprintln!(
            "{backend}: {} was frozen holding the backend (try {tries} of {TRIES}); resumed it",
            nodes.timeline().name(victim)
        );
        assert!(tries < TRIES, "every freeze held the backend");
    };
    let other = 1 - victim;
    nodes
        .until(
            "the other process to hold the frozen one's keys",
            bound + Duration::from_secs(30),
            |s| {
                keys.iter()
                    .all(|k| s.timeline().holders(k).contains(&other))
            },
        )
        .await;
    let resumed = nodes.signal(victim, Signal::SIGCONT);
    eprintln!(
        "{backend}: froze {} at {paused}, resumed it at {resumed}",
        nodes.timeline().name(victim)
    );
    nodes
        .until(
            "the resumed process to see its keys gone",
            Duration::from_secs(30),
            |s| s.timeline().held_by(victim).is_empty(),
        )
        .await;
    // Every key the frozen process held was last answered "held" before
    // the pause, and taken over during it.
    for key in &keys {
        let hold = nodes
            .timeline()
            .first_hold_since(key, paused)
            .unwrap_or_else(|| panic!("{key}: nobody took it over"));
        assert_eq!(hold.node, other, "{key}: {hold}");
        assert!(
            hold.from < resumed,
            "{key} taken over only after the resume: {hold}"
        );
        let took = Duration::from_nanos(hold.from - paused);
        assert!(
            took <= bound,
            "{key} taken over {took:?} after the pause, later than {bound:?}"
        );
    }
    nodes.assert_no_violation();
    nodes.close_all().await;
    nodes.assert_no_violation();
    eprintln!(
        "{backend}: froze {} holding {} keys for {:?}",
        nodes.timeline().name(victim),
        keys.len(),
        Duration::from_nanos(resumed - paused)
    );
}

/// The balance scenario: three processes over `backend` in one balanced
/// group (`--balance`, membership reread every 200 ms) share [`KEYS`] keys
/// fairly (⌊K/3⌋ or ⌈K/3⌉ each); one is killed (`SIGKILL`) and the two
/// survivors reach ⌊K/2⌋..⌈K/2⌉ within `bound`, keeping every key they
/// held (only the victim's keys move); a fourth joins and the three reach
/// fair shares again. No key ever has two holders.
async fn balance_and_fail_over(backend: &str, args: &[&str], bound: Duration) {
    let _turn = one_at_a_time().await;
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--balance", "shards", "--every-ms", "200"]);
    let mut nodes = Nodes::new(backend, &all);
    let fair = |s: &Nodes, p: usize| {
        let alive = s.alive();
        alive.len() == p
            && s.every_key_held_once()
            && alive.iter().all(|&n| {
                let held = s.timeline().held_by(n).len();
                held == KEYS / p || held == KEYS.div_ceil(p)
            })
    };
    let started = Instant::now();
    for _ in 0..3 {
        nodes.start();
    }
    nodes
        .until("fair shares over 3", STARTUP, |s| fair(s, 3))
        .await;
    nodes.assert_no_violation();
    let mut report = format!(
        "{backend}: 3 balanced processes fair after {:?}",
        started.elapsed()
    );
    let victim = 0;
    let kept: Vec<(usize, Vec<String>)> = [1, 2]
        .iter()
        .map(|&n| (n, nodes.timeline().held_by(n)))
        .collect();
    let moved = nodes.timeline().held_by(victim).len();
    let killed = nodes.kill(victim).await;
    nodes
        .until(
            "fair shares over 2 after a kill",
            bound + Duration::from_secs(30),
            |s| fair(s, 2),
        )
        .await;
    let took = Duration::from_nanos(mono_ns().saturating_sub(killed));
    // A generous bound, three times a key's takeover: shares are fair
    // only once the victim's membership and every one of its keys have
    // aged out and the survivors' claim rounds have taken them all, and a
    // machine loaded by other tests slows each step (33.7 s against a
    // 9.4 s bound in a CI run on a machine at load 15). The time itself
    // is measured by the bench (`cargo xtask bench`, group balance).
    let generous = bound * 3;
    assert!(
        took <= generous,
        "fair again {took:?} after the kill, later than {generous:?}"
    );
    for (n, keys) in &kept {
        for k in keys {
            assert_eq!(
                nodes.timeline().holders(k),
                vec![*n],
                "{k} moved from a survivor"
            );
        }
    }
    nodes.assert_no_violation();
    report.push_str(&format!(
        "; killed one holding {moved} keys: fair over 2 after {took:?}"
    ));
    let before: Vec<(usize, Vec<String>)> = [1, 2]
        .iter()
        .map(|&n| (n, nodes.timeline().held_by(n)))
        .collect();
    let joined_at = Instant::now();
    let newcomer = nodes.start();
    nodes
        .until("fair shares over 3 after a join", STARTUP, |s| fair(s, 3))
        .await;
    let gained = nodes.timeline().held_by(newcomer).len();
    let lost_by_survivors: usize = before
        .iter()
        .map(|(n, keys)| {
            keys.iter()
                .filter(|k| !nodes.timeline().holders(k).contains(n))
                .count()
        })
        .sum();
    if lost_by_survivors != gained {
        let astray: Vec<String> = before
            .iter()
            .flat_map(|(n, keys)| keys.iter().map(move |k| (*n, k)))
            .filter(|(n, k)| {
                let now = nodes.timeline().holders(k);
                !now.contains(n) && !now.contains(&newcomer)
            })
            .map(|(n, k)| format!("{k}: node-{n} -> {:?}", nodes.timeline().holders(k)))
            .collect();
        panic!(
            "keys moved other than to the newcomer: survivors gave up {lost_by_survivors}, \
             the newcomer took {gained}; moved elsewhere: {astray:?}"
        );
    }
    report.push_str(&format!(
        "; a join: fair over 3 after {:?}, {gained} keys moved (minimum {})",
        joined_at.elapsed(),
        KEYS / 3
    ));
    nodes.close_all().await;
    nodes.assert_no_violation();
    eprintln!("{report}");
}
