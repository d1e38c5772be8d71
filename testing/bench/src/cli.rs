//! The CLI rows (`--only cli`): `elect run` measured the way a shell user
//! sees it, beside `flock(1)` on the same directory in the same run.
//!
//! Each contender is a process group of its own (a shell job): `flock DIR
//! CHILD` or `elect run --backend URL --name cli -- CHILD`, where CHILD is
//! `election-bench helper print`, a native child that prints one line (its
//! `CLOCK_MONOTONIC` stamp) and then waits to be signalled. Three rows per
//! contender kind:
//! - uncontested start: the bench's stamp just before the spawn → the
//!   child's line (the child's own start included: it is in both columns);
//! - clean handover: SIGINT to the leader's process group (Ctrl-C) → the
//!   next leader's child's line;
//! - crash failover: SIGKILL of the leader's process group → the next
//!   leader's child's line.
//!
//! Handover and failover run with two and with three contenders at once
//! (one leader, one or two waiters); after each round a new waiter is
//! started so the count stays the same.
//!
//! Backends: the file backend, SQLite, one `nats-server` and one
//! PostgreSQL server (`postgres-testkit`), the last three with a lease TTL
//! of [`LEASE_TTL`].
//!
//! Floors: `flock DIR` beside every row, except PostgreSQL's uncontested
//! start, whose floor is what any tool on PostgreSQL does before its
//! command runs: `election-bench helper pg-start URL CHILD` connects (sqlx),
//! commits one `UPDATE` of one row and execs the same child (ADR 0065).
//! Each backend is measured in a [`race`] beside `flock(1)` (and
//! `etcdctl lock` when etcd is installed, [`crate::etcd`], and on
//! PostgreSQL its start floor): one round of each contender kind in turn,
//! so a row and its floor are paired round by round, milliseconds apart.
//! This VM's speed drifts within a minute by as much as a change measured
//! here (`flock(1)`'s start took 1.4–4.2 ms across one day's runs).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::etcd::{ETCD_SETTLE, ETCD_TTL};
use super::ofd::mono_ns;
use crate::Result;

/// The election every contender of this run campaigns for: `cli-<pid>`
/// (`etcdctl elect`'s is [`elect_election`]).
/// A name of its own per run: a test server's store (PostgreSQL's from a
/// per-machine template, a bench directory) starts its epochs again at
/// every run, and `elect run` refuses a term below one it saw begin on
/// this host under the same store and name (ADR 0099), as it must when a
/// store is restored from a backup.
fn election() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| format!("cli-{}", std::process::id()))
}

/// `etcdctl elect`'s election in the run (a start or a chain) whose first
/// contender is `run`: `cli-<pid>-elect-<run>`. etcd's lock and election
/// recipes both keep their keys under `NAME/`: with one name, `etcdctl
/// lock` and `etcdctl elect` would queue behind each other in a race. And
/// a chain's processes are killed (SIGKILL) when it ends: a killed `etcdctl
/// elect`'s key stands until its session's lease expires (60 s, etcd's
/// default), which the next run must not wait behind.
fn elect_election(run: usize) -> String {
    format!("{}-elect-{run}", election())
}

/// What `etcdctl elect` proposes as its value.
const PROPOSAL: &str = "bench";

/// How long any one expected line may take before the bench gives up.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How long a new waiter is given to start and block before the leader
/// leaves: `elect` starts in a few milliseconds, but the machine is shared.
pub(crate) const SETTLE: Duration = Duration::from_millis(60);

/// The same on PostgreSQL, where a new `elect` connects, checks the schema
/// and `LISTEN`s before it blocks (as the PostgreSQL group's helper does).
pub(crate) const PG_SETTLE: Duration = Duration::from_millis(100);

/// The `election-bench helper print` child: prints its stamp, then waits
/// for a signal (SIGINT, SIGTERM or SIGKILL end it with their default
/// action).
pub(crate) fn print_child() -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", mono_ns())?;
    out.flush()?;
    drop(out);
    loop {
        std::thread::park();
    }
}

/// Who contends.
#[derive(Clone, Debug)]
pub(crate) enum Contender {
    /// `flock DIR CHILD` (util-linux `flock(1)`, which locks the directory
    /// itself with `flock(2)` and keeps the lock while CHILD runs).
    Flock {
        /// The directory locked.
        dir: PathBuf,
    },
    /// `PROGRAM ARGS... CHILD`: a floor of the bench's own
    /// (`election-bench helper pg-start URL`, PostgreSQL's start floor).
    Command {
        /// The program.
        program: PathBuf,
        /// Its arguments before CHILD.
        args: Vec<OsString>,
    },
    /// `elect run --backend URL --name cli [EXTRA...] -- CHILD`.
    Elect {
        /// The `elect` binary.
        bin: PathBuf,
        /// The backend URL.
        url: String,
        /// Extra `elect run` flags (`--ttl 3s`).
        extra: Vec<String>,
    },
    /// `etcdctl --endpoints=URL lock --ttl=TTL cli CHILD` (see `etcd`).
    Etcdctl {
        /// The `etcdctl` binary.
        bin: PathBuf,
        /// The etcd member's client URL.
        endpoint: String,
        /// The session TTL in seconds.
        ttl: u32,
    },
    /// `etcdctl --endpoints=URL elect cli-<pid>-elect-<run> PROPOSAL` (see
    /// [`elect_election`]), no child: its
    /// line is the first it prints once elected (the election key), which
    /// the bench stamps as it reads it.
    EtcdctlElect {
        /// The `etcdctl` binary.
        bin: PathBuf,
        /// The etcd member's client URL.
        endpoint: String,
    },
}

impl Contender {
    /// Whether its line is stamped by the bench on arrival (it runs no
    /// child to print a stamp of its own).
    fn stamped_on_arrival(&self) -> bool {
        matches!(self, Contender::EtcdctlElect { .. })
    }
}

/// What a contender's output line says, given whether it is stamped on
/// arrival: the child's `CLOCK_MONOTONIC` stamp, or `now` for the first
/// line of a contender that prints no stamp. `None`: not a line to report.
fn line_stamp(line: &str, on_arrival: bool, now: impl FnOnce() -> u64) -> Option<u64> {
    if on_arrival {
        (!line.trim().is_empty()).then(now)
    } else {
        line.trim().parse::<u64>().ok()
    }
}

/// A contender's first line: its index and the stamp it printed.
type Line = (usize, u64);

/// One running contender: its process (the group leader) and its index.
struct Running {
    child: Child,
    index: usize,
}

/// A set of contenders of one kind, their first lines arriving on one
/// channel as `(index, stamp)`.
pub(crate) struct Field {
    contender: Contender,
    child: Vec<OsString>,
    log: PathBuf,
    started: usize,
    /// The first index of the current run (a start or a chain).
    current: usize,
    /// How long a new waiter is given before the leader leaves.
    settle: Duration,
    lines: (Sender<Line>, Receiver<Line>),
}

impl Field {
    /// Contenders of `contender`'s kind, each running `child` (a program
    /// and its arguments: `election-bench helper print`), their stderr
    /// appended to `log`.
    pub(crate) fn new(contender: Contender, child: Vec<OsString>, log: &Path) -> Self {
        Field {
            contender,
            child,
            log: log.to_path_buf(),
            started: 0,
            current: 0,
            settle: SETTLE,
            lines: channel(),
        }
    }

    /// The same with `settle` instead of [`SETTLE`] for a new waiter.
    pub(crate) fn settling(self, settle: Duration) -> Self {
        Field { settle, ..self }
    }

    fn spawn(&mut self) -> Result<Running> {
        let index = self.started;
        self.started += 1;
        let mut cmd = match &self.contender {
            Contender::Flock { dir } => {
                let mut cmd = Command::new("flock");
                cmd.arg(dir);
                cmd
            }
            Contender::Command { program, args } => {
                let mut cmd = Command::new(program);
                cmd.args(args);
                cmd
            }
            Contender::Elect { bin, url, extra } => {
                let mut cmd = Command::new(bin);
                cmd.args(["run", "--backend", url, "--name", election()])
                    .args(extra)
                    .arg("--");
                if let Some(parent) = crate::cgroups::parent() {
                    cmd.env("ELECT_CGROUP_PARENT", parent);
                }
                cmd
            }
            Contender::Etcdctl { bin, endpoint, ttl } => {
                let mut cmd = Command::new(bin);
                cmd.env("ETCDCTL_API", "3")
                    .arg(format!("--endpoints={endpoint}"))
                    .args(["lock", &format!("--ttl={ttl}"), election()]);
                cmd
            }
            Contender::EtcdctlElect { bin, endpoint } => {
                let mut cmd = Command::new(bin);
                cmd.env("ETCDCTL_API", "3")
                    .arg(format!("--endpoints={endpoint}"))
                    .args(["elect", &elect_election(self.current), PROPOSAL]);
                cmd
            }
        };
        let on_arrival = self.contender.stamped_on_arrival();
        if !on_arrival {
            cmd.args(&self.child);
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            // A job of its own, as a shell starts it: Ctrl-C and kill -9
            // of the job reach its whole process group.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("start {:?}: {e}", cmd.get_program()))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let tx = self.lines.0.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // A contender stamped on arrival reports its first line
                // only (`etcdctl elect` prints the key, then the value).
                if on_arrival && sent {
                    continue;
                }
                if let Some(stamp) = line_stamp(&line, on_arrival, mono_ns) {
                    sent = true;
                    let _ = tx.send((index, stamp));
                }
            }
        });
        Ok(Running { child, index })
    }

    /// The next line of a contender of the current run. A line of a
    /// contender of an earlier run (one that won at the moment that run's
    /// contenders were all killed, its line read late) is skipped.
    fn next_line(&self) -> Result<(usize, u64)> {
        loop {
            let (i, stamp) = self
                .lines
                .1
                .recv_timeout(TIMEOUT)
                .map_err(|_| format!("no contender printed its line within {TIMEOUT:?}"))?;
            if i >= self.current {
                return Ok((i, stamp));
            }
        }
    }

    /// Fails if a contender of the current run printed a line while it
    /// should still wait (late lines of earlier runs are skipped).
    fn none_printed(&self) -> Result<()> {
        match self.lines.1.try_recv() {
            Ok((i, _)) if i < self.current => self.none_printed(),
            Ok((i, _)) => Err(format!("contender {i} printed while another led").into()),
            Err(_) => Ok(()),
        }
    }

    /// One uncontested start: spawn → the child's line (nanoseconds), then
    /// SIGINT to the group.
    fn start_once(&mut self) -> Result<u64> {
        self.current = self.started;
        let t0 = mono_ns();
        let mut r = self.spawn()?;
        let (i, t1) = self.next_line()?;
        if i != r.index {
            return Err(format!("contender {i} printed, {} expected", r.index).into());
        }
        leave(&mut r, Signal::SIGINT)?;
        Ok(t1.saturating_sub(t0))
    }

    /// `contenders` processes at once: the first has printed its line
    /// (leads), the others were started after it (wait).
    pub(crate) fn begin_chain(&mut self, contenders: usize) -> Result<Chain> {
        self.current = self.started;
        let mut chain = Chain {
            running: vec![self.spawn()?],
            leader: 0,
        };
        let (first, _) = self.next_line()?;
        chain.leader = first;
        while chain.running.len() < contenders {
            chain.running.push(self.spawn()?);
        }
        Ok(chain)
    }

    /// One round of `chain`: after the settle, the leader's group gets
    /// `signal` (SIGINT: a handover; SIGKILL: a failover) and the sample
    /// (nanoseconds) ends at the next leader's line; a new waiter is
    /// started so the count stays the same.
    pub(crate) fn chain_round(&mut self, chain: &mut Chain, signal: Signal) -> Result<u64> {
        std::thread::sleep(self.settle);
        self.none_printed()?;
        let at = chain
            .running
            .iter()
            .position(|r| r.index == chain.leader)
            .ok_or("the leader is not running")?;
        let mut old = chain.running.remove(at);
        let t0 = mono_ns();
        signal_group(&old, signal)?;
        let (next, t1) = self.next_line()?;
        if !chain.running.iter().any(|r| r.index == next) {
            return Err(format!("contender {next} printed but was not waiting").into());
        }
        gone(&mut old, signal)?;
        chain.leader = next;
        chain.running.push(self.spawn()?);
        Ok(t1.saturating_sub(t0))
    }
}

/// The processes of one field's handovers or failovers; every one is
/// killed (its whole group) when this is dropped.
pub(crate) struct Chain {
    running: Vec<Running>,
    /// The index of the contender that leads.
    leader: usize,
}

impl Drop for Chain {
    fn drop(&mut self) {
        for r in &mut self.running {
            let _ = signal_group(r, Signal::SIGKILL);
            let _ = r.child.wait();
        }
    }
}

fn signal_group(r: &Running, signal: Signal) -> Result<()> {
    killpg(
        Pid::from_raw(i32::try_from(r.child.id()).expect("a pid_t")),
        signal,
    )
    .map_err(|e| format!("kill -{signal} of contender {}'s group: {e}", r.index))?;
    Ok(())
}

/// Signals `r`'s group and waits for its leader process (see [`gone`]).
fn leave(r: &mut Running, signal: Signal) -> Result<()> {
    signal_group(r, signal)?;
    gone(r, signal)
}

/// Waits for `r`'s leader process, signalled with `signal`, at most
/// [`TIMEOUT`]: one that has not exited by then (it ignores the signal)
/// is killed with its group, and the row fails saying so.
fn gone(r: &mut Running, signal: Signal) -> Result<()> {
    let deadline = std::time::Instant::now() + TIMEOUT;
    while r.child.try_wait()?.is_none() {
        if std::time::Instant::now() >= deadline {
            let _ = signal_group(r, Signal::SIGKILL);
            let _ = r.child.wait();
            return Err(format!(
                "contender {} did not exit within {TIMEOUT:?} of {signal}",
                r.index
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// How many rounds each CLI row takes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    /// Uncontested starts, handovers and file failovers per row.
    pub(crate) rounds: usize,
    /// Crash failovers per row on a lease backend: each waits out a TTL.
    pub(crate) lease_failovers: usize,
    /// Unrecorded rounds before each row.
    pub(crate) warm: usize,
}

/// What the CLI rows need.
pub(crate) struct Setup<'a> {
    /// The bench's directory (the elections and flock's directory).
    pub(crate) dir: &'a Path,
    /// This binary: `helper print` is the child.
    pub(crate) exe: &'a Path,
    /// The release `elect`.
    pub(crate) elect_bin: &'a Path,
    /// Where the contenders' stderr goes.
    pub(crate) log: &'a Path,
    /// The rounds.
    pub(crate) counts: Counts,
}

/// The lease TTL given to `elect run` on SQLite, NATS and PostgreSQL (as
/// in issue 14's table; NATS's failover grace follows from it).
pub(crate) const LEASE_TTL: &str = "3s";

/// The three rows' measurements of one contender kind.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    /// Uncontested starts.
    pub(crate) start: Vec<u64>,
    /// `(signal, contenders, samples)`.
    pub(crate) chains: Vec<(Signal, usize, Vec<u64>)>,
}

impl Figures {
    /// The samples of the chain of `signal` with `contenders` processes.
    pub(crate) fn chain(&self, signal: Signal, contenders: usize) -> Result<&[u64]> {
        self.chains
            .iter()
            .find(|(sig, c, _)| *sig == signal && *c == contenders)
            .map(|(_, _, samples)| samples.as_slice())
            .ok_or_else(|| format!("no kill -{signal} with {contenders} processes measured").into())
    }
}

/// One kind of contender in a [`race`]: its field and the paths it is
/// measured on (every entrant on uncontested starts).
pub(crate) struct Entrant {
    /// The field.
    pub(crate) field: Field,
    /// Whether it is measured on clean handovers.
    pub(crate) handovers: bool,
    /// Crash failovers per process count (0: none).
    pub(crate) failovers: usize,
}

/// Measures `entrants` round by round in turn: one start of each, then
/// the next round (the first entrant of a round moves along each round,
/// so none is always first); then the handovers and failovers with two
/// and three processes, every entrant's processes running at once and
/// each round one round of each entrant. A row and its floor are then
/// milliseconds apart, not seconds: this VM's speed drifts within a
/// minute by as much as any change measured here. Returns each entrant's
/// figures, in order.
pub(crate) fn race(
    what: &str,
    entrants: &mut [Entrant],
    counts: Counts,
    plan: &[(Signal, usize)],
) -> Result<Vec<Figures>> {
    let k = entrants.len();
    let mut figures: Vec<Figures> = (0..k).map(|_| Figures::default()).collect();
    crate::step(&format!("cli: {what}: uncontested starts"), || {
        for round in 0..counts.warm + counts.rounds {
            for j in 0..k {
                let e = (round + j) % k;
                let sample = entrants[e].field.start_once()?;
                if round >= counts.warm {
                    figures[e].start.push(sample);
                }
            }
        }
        Ok(())
    })?;
    let warm = counts.warm.min(1);
    for &(signal, contenders) in plan {
        {
            let rounds = |e: &Entrant| match signal {
                Signal::SIGINT if e.handovers => counts.rounds,
                Signal::SIGKILL => e.failovers,
                _ => 0,
            };
            let taking: Vec<usize> = (0..k).filter(|&e| rounds(&entrants[e]) > 0).collect();
            if taking.is_empty() {
                continue;
            }
            let most = taking
                .iter()
                .map(|&e| rounds(&entrants[e]))
                .max()
                .unwrap_or(0);
            crate::step(
                &format!("cli: {what}: kill -{signal} of the leader, {contenders} processes"),
                || {
                    let mut chains = Vec::with_capacity(taking.len());
                    for &e in &taking {
                        chains.push((e, entrants[e].field.begin_chain(contenders)?));
                    }
                    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); k];
                    let n = chains.len();
                    for round in 0..warm + most {
                        for j in 0..n {
                            let (e, chain) = &mut chains[(round + j) % n];
                            if round >= warm + rounds(&entrants[*e]) {
                                continue;
                            }
                            let sample = entrants[*e].field.chain_round(chain, signal)?;
                            if round >= warm {
                                samples[*e].push(sample);
                            }
                        }
                    }
                    for &e in &taking {
                        figures[e].chains.push((
                            signal,
                            contenders,
                            std::mem::take(&mut samples[e]),
                        ));
                    }
                    Ok(())
                },
            )?;
        }
    }
    Ok(figures)
}

/// The handovers and failovers of the CLI rows: with two and with three
/// processes.
pub(crate) const CHAINS: [(Signal, usize); 4] = [
    (Signal::SIGINT, 2),
    (Signal::SIGINT, 3),
    (Signal::SIGKILL, 2),
    (Signal::SIGKILL, 3),
];

/// The backends of the CLI rows, in the order they run.
pub(crate) const BACKENDS: [&str; 5] = ["file", "sqlite", "nats", "postgres", "etcd"];

/// The process counts of the waiters' rows (issue 42, goal 1): K
/// processes, one leading and K - 1 waiting.
pub(crate) const WAITERS: [usize; 3] = [2, 10, 30];

/// Measures `elect run` on the file, SQLite, NATS, PostgreSQL and etcd backends
/// (one `nats-server`, one `postgres-testkit` server without a password),
/// each in a [`race`] with `flock(1)` and, when etcd is installed, with
/// `etcdctl lock` (and on PostgreSQL with its start floor), and adds a row
/// per backend and path beside `flock(1)`'s figure and beside `etcdctl
/// lock`'s; `etcdctl lock`'s own rows beside `flock(1)` come from the
/// file backend's race. The etcd backend's race has `etcdctl elect` too:
/// its rows beside `etcdctl lock`'s, and `elect run`'s beside its. Without
/// etcd: a note in `notes`, no such rows. Only the races of `backends`
/// (names of [`BACKENDS`]) run.
pub(crate) fn rows(
    s: &Setup<'_>,
    backends: &[&str],
    rows: &mut Vec<crate::Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let child: Vec<OsString> = vec![
        s.exe.as_os_str().to_owned(),
        "helper".into(),
        "print".into(),
    ];
    let flock_dir = s.dir.join("cli-flock");
    std::fs::create_dir_all(&flock_dir)?;
    let file_dir = s.dir.join("cli-file");
    std::fs::create_dir_all(&file_dir)?;
    let Stores {
        nats: server,
        pg,
        etcd,
        own_etcd,
        etcd_endpoint,
    } = Stores::start("cli", s.log, notes)?;
    let lease = |url: String| Contender::Elect {
        bin: s.elect_bin.to_path_buf(),
        url,
        extra: vec!["--ttl".into(), LEASE_TTL.into()],
    };
    let races = [
        (
            "file",
            Contender::Elect {
                bin: s.elect_bin.to_path_buf(),
                url: election_url::BackendUrl::file(file_dir).to_string(),
                extra: Vec::new(),
            },
            s.counts.rounds,
        ),
        (
            "sqlite",
            lease(crate::sqlite::sqlite_url(&s.dir.join("cli.db"))?.to_string()),
            s.counts.lease_failovers,
        ),
        ("nats", lease(server.url()), s.counts.lease_failovers),
        ("postgres", lease(pg.url()), s.counts.lease_failovers),
        (
            "etcd",
            lease(format!("etcd://{etcd_endpoint}/bench-cli")),
            s.counts.lease_failovers,
        ),
    ];
    let races = races
        .into_iter()
        .filter(|(backend, _, _)| backends.contains(backend));
    for (backend, contender, failovers) in races {
        let settle = if backend == "postgres" {
            PG_SETTLE
        } else {
            SETTLE
        };
        let mut entrants = vec![
            Entrant {
                field: Field::new(
                    Contender::Flock {
                        dir: flock_dir.clone(),
                    },
                    child.clone(),
                    s.log,
                ),
                handovers: true,
                failovers,
            },
            Entrant {
                field: Field::new(contender, child.clone(), s.log).settling(settle),
                handovers: true,
                failovers,
            },
        ];
        let etcd_at = etcd.as_ref().map(|etcd| {
            let contender = Contender::Etcdctl {
                bin: etcd.etcdctl().to_path_buf(),
                endpoint: etcd.endpoint().to_owned(),
                ttl: ETCD_TTL,
            };
            entrants.push(Entrant {
                field: Field::new(contender, child.clone(), s.log).settling(ETCD_SETTLE),
                handovers: true,
                failovers: 0,
            });
            entrants.len() - 1
        });
        let pg_floor = if backend == "postgres" {
            entrants.push(Entrant {
                field: pg_start_floor(s, &pg, &child)?,
                handovers: false,
                failovers: 0,
            });
            Some(entrants.len() - 1)
        } else {
            None
        };
        // `etcdctl elect` in the etcd backend's race only: on the member
        // `etcdctl lock` and `elect run` use.
        let elect_at = match (&etcd, backend) {
            (Some(etcd), "etcd") => {
                let contender = Contender::EtcdctlElect {
                    bin: etcd.etcdctl().to_path_buf(),
                    endpoint: etcd.endpoint().to_owned(),
                };
                entrants.push(Entrant {
                    field: Field::new(contender, child.clone(), s.log).settling(ETCD_SETTLE),
                    handovers: true,
                    failovers: 0,
                });
                Some(entrants.len() - 1)
            }
            _ => None,
        };
        let mut figures = race(
            &format!("elect run, {backend}"),
            &mut entrants,
            s.counts,
            &CHAINS,
        )?;
        let floor = std::mem::take(&mut figures[0]);
        let m = std::mem::take(&mut figures[1]);
        let ttl = if backend == "file" {
            String::new()
        } else {
            format!(", TTL {LEASE_TTL}")
        };
        let (start_floor, start_floor_samples) = match pg_floor {
            Some(i) => (PG_START_FLOOR, &figures[i].start),
            None => ("`flock DIR` (same child)", &floor.start),
        };
        rows.push(row(
            format!("cli: `elect run` ({backend}{ttl}): uncontested start → child's line"),
            &m.start,
            start_floor,
            start_floor_samples,
        )?);
        for (signal, contenders, samples) in &m.chains {
            let what = match signal {
                Signal::SIGINT => "clean handover: SIGINT to the leader's group",
                _ => "crash failover: SIGKILL of the leader's group",
            };
            rows.push(row(
                format!(
                    "cli: `elect run` ({backend}{ttl}): {what} → next child's line, \
                     {contenders} processes"
                ),
                samples,
                &format!("`flock DIR`, {contenders} processes"),
                floor.chain(*signal, *contenders)?,
            )?);
        }
        if let (Some(etcd), Some(at)) = (&etcd, etcd_at) {
            let etcd_figures = &figures[at];
            let etcdctl = format!("`etcdctl lock --ttl={ETCD_TTL}`");
            if backend == "file" {
                let us = format!("{etcdctl} (etcd {}, one local member)", etcd.version());
                start_and_handover_rows(&us, "", etcd_figures, "`flock DIR`", &floor, rows)?;
            }
            start_and_handover_rows(
                &format!("`elect run` ({backend}{ttl})"),
                ", beside etcd",
                &m,
                &etcdctl,
                etcd_figures,
                rows,
            )?;
            if let Some(elect_at) = elect_at {
                let elect_figures = &figures[elect_at];
                elect_rows(
                    etcd.version(),
                    (&etcdctl, etcd_figures),
                    elect_figures,
                    (&format!("`elect run` ({backend}{ttl})"), &m),
                    rows,
                )?;
                notes.push(elect_note(etcd_figures, elect_figures, &m)?);
            }
        }
    }
    drop(etcd);
    drop(own_etcd);
    drop(server);
    drop(pg);
    Ok(())
}

/// The waiters' rows (`--only cli-waiters`, and with the CLI group; issue
/// 42, goal 1): on each backend, clean handovers of `elect run` with K =
/// 2, 10 and 30 processes (one leading, the others waiting), raced round
/// by round beside `flock(1)` and `etcdctl lock` (when etcd is installed)
/// with as many processes; a row per backend and K beside `etcdctl lock`
/// (else `flock(1)`), and a note of each contender's medians with the
/// ratio of K = 30 to K = 2 (the goal: within 1.2×, and at most `etcdctl
/// lock`'s at every K).
pub(crate) fn waiter_rows(
    s: &Setup<'_>,
    rows: &mut Vec<crate::Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let child: Vec<OsString> = vec![
        s.exe.as_os_str().to_owned(),
        "helper".into(),
        "print".into(),
    ];
    let flock_dir = s.dir.join("cli-waiters-flock");
    std::fs::create_dir_all(&flock_dir)?;
    let file_dir = s.dir.join("cli-waiters-file");
    std::fs::create_dir_all(&file_dir)?;
    let Stores {
        nats: server,
        pg,
        etcd,
        own_etcd,
        etcd_endpoint,
    } = Stores::start("cli waiters", s.log, notes)?;
    let elect = |url: String, extra: Vec<String>| Contender::Elect {
        bin: s.elect_bin.to_path_buf(),
        url,
        extra,
    };
    let ttl = || vec!["--ttl".into(), LEASE_TTL.into()];
    let backends = [
        (
            "file",
            elect(
                election_url::BackendUrl::file(file_dir).to_string(),
                Vec::new(),
            ),
        ),
        (
            "sqlite",
            elect(
                crate::sqlite::sqlite_url(&s.dir.join("cli-waiters.db"))?.to_string(),
                ttl(),
            ),
        ),
        ("nats", elect(server.url(), ttl())),
        // A schema of its own: the store (a server from the same template
        // as the CLI rows', its epochs from 2 again) differs from theirs.
        (
            "postgres",
            elect(format!("{}?schema=waiters", pg.url()), ttl()),
        ),
        (
            "etcd",
            elect(format!("etcd://{etcd_endpoint}/bench-waiters"), ttl()),
        ),
    ];
    let plan: Vec<(Signal, usize)> = WAITERS.iter().map(|&k| (Signal::SIGINT, k)).collect();
    let ms = |v: &[u64]| -> Result<f64> {
        let summary = crate::stats::Summary::of(v).ok_or("no samples")?;
        Ok(summary.median_us() / 1000.0)
    };
    for (backend, contender) in backends {
        let settle = if backend == "postgres" {
            PG_SETTLE
        } else {
            SETTLE
        };
        let handovers = |field| Entrant {
            field,
            handovers: true,
            failovers: 0,
        };
        let mut entrants = vec![
            handovers(Field::new(
                Contender::Flock {
                    dir: flock_dir.clone(),
                },
                child.clone(),
                s.log,
            )),
            handovers(Field::new(contender, child.clone(), s.log).settling(settle)),
        ];
        if let Some(etcd) = &etcd {
            let contender = Contender::Etcdctl {
                bin: etcd.etcdctl().to_path_buf(),
                endpoint: etcd.endpoint().to_owned(),
                ttl: ETCD_TTL,
            };
            entrants.push(handovers(
                Field::new(contender, child.clone(), s.log).settling(ETCD_SETTLE),
            ));
        }
        let figures = race(
            &format!("elect run, {backend}, waiters"),
            &mut entrants,
            s.counts,
            &plan,
        )?;
        let ttl = if backend == "file" {
            String::new()
        } else {
            format!(", TTL {LEASE_TTL}")
        };
        let (peer, peer_figures) = match figures.get(2) {
            Some(f) => (format!("`etcdctl lock --ttl={ETCD_TTL}`"), f),
            None => ("`flock DIR`".to_owned(), &figures[0]),
        };
        let mut medians = Vec::new();
        for k in WAITERS {
            let measured = figures[1].chain(Signal::SIGINT, k)?;
            rows.push(row(
                format!(
                    "cli: `elect run` ({backend}{ttl}): clean handover with {k} processes                      ({} waiting): SIGINT to the leader's group → next child's line",
                    k - 1
                ),
                measured,
                &format!("{peer}, {k} processes"),
                peer_figures.chain(Signal::SIGINT, k)?,
            )?);
            medians.push((
                k,
                ms(measured)?,
                ms(peer_figures.chain(Signal::SIGINT, k)?)?,
            ));
        }
        let shown: Vec<String> = medians
            .iter()
            .map(|(k, m, p)| format!("K = {k}: {m:.2} ms ({peer} {p:.2} ms)"))
            .collect();
        let (first, last) = (medians[0], medians[medians.len() - 1]);
        notes.push(format!(
            "Waiters, `elect run` ({backend}{ttl}), clean handovers (median of each K): {}; \
             K = {} is {:.2}× K = {} ({peer}: {:.2}×); issue 42's goal: within 1.2×, and at \
             most `etcdctl lock`'s at every K.",
            shown.join(", "),
            last.0,
            last.1 / first.1,
            first.0,
            last.2 / first.2,
        ));
    }
    drop(etcd);
    drop(own_etcd);
    drop(server);
    drop(pg);
    Ok(())
}

/// The servers the CLI rows run on: one `nats-server`, one PostgreSQL
/// server, `etcdctl lock`'s member when etcd is installed, and the etcd
/// member `elect` runs on (that same one, else one etcd-testkit starts).
pub(crate) struct Stores {
    pub(crate) nats: nats_testkit::Server,
    pub(crate) pg: postgres_testkit::Server,
    pub(crate) etcd: Option<crate::etcd::Etcd>,
    pub(crate) own_etcd: Option<etcd_testkit::Member>,
    pub(crate) etcd_endpoint: String,
}

impl Stores {
    /// Starts them, each a step of `what`.
    pub(crate) fn start(what: &str, log: &Path, notes: &mut Vec<String>) -> Result<Stores> {
        let nats = crate::step(&format!("{what}: start one nats-server"), || {
            Ok(nats_testkit::Server::start()?)
        })?;
        let pg = crate::step(&format!("{what}: start one PostgreSQL server"), || {
            Ok(postgres_testkit::Server::start()?)
        })?;
        let etcd = crate::etcd::Etcd::start(log, notes)?;
        let own_etcd = match &etcd {
            Some(_) => None,
            None => Some(crate::step(
                &format!("{what}: start one etcd member"),
                || Ok(etcd_testkit::Member::start()?),
            )?),
        };
        let etcd_endpoint = match (&etcd, &own_etcd) {
            (Some(etcd), _) => etcd.endpoint().trim_start_matches("http://").to_owned(),
            (None, Some(member)) => member.endpoint(),
            (None, None) => return Err("no etcd member for the etcd rows".into()),
        };
        Ok(Stores {
            nats,
            pg,
            etcd,
            own_etcd,
            etcd_endpoint,
        })
    }
}

/// The start row and the two clean-handover rows of `what` (its rows'
/// name; `suffix` ends each) beside `floor` (`floor_figures`, the same
/// race): `etcdctl lock`'s own rows beside `flock(1)`, and each `elect
/// run` backend's beside `etcdctl lock`.
fn start_and_handover_rows(
    what: &str,
    suffix: &str,
    measured: &Figures,
    floor: &str,
    floor_figures: &Figures,
    rows: &mut Vec<crate::Row>,
) -> Result<()> {
    rows.push(row(
        format!("cli: {what}: uncontested start → child's line{suffix}"),
        &measured.start,
        &format!("{floor} (same child)"),
        &floor_figures.start,
    )?);
    for n in [2, 3] {
        rows.push(row(
            format!(
                "cli: {what}: clean handover: SIGINT to the leader's group → next child's \
                 line, {n} processes{suffix}"
            ),
            measured.chain(Signal::SIGINT, n)?,
            &format!("{floor}, {n} processes"),
            floor_figures.chain(Signal::SIGINT, n)?,
        )?);
    }
    Ok(())
}

/// The `etcdctl elect` rows: its uncontested start and clean handovers
/// (its leader line: it runs no child) beside `etcdctl lock`'s (`lock`,
/// its name and figures), then `elect run`'s on etcd (`elect_run`) beside
/// its; all from one race.
fn elect_rows(
    version: &str,
    lock: (&str, &Figures),
    elect: &Figures,
    elect_run: (&str, &Figures),
    rows: &mut Vec<crate::Row>,
) -> Result<()> {
    let us = format!("`etcdctl elect` (etcd {version}, one local member)");
    let (lock_name, lock) = lock;
    let (run_name, run) = elect_run;
    rows.push(row(
        format!("cli: {us}: uncontested start → its leader line"),
        &elect.start,
        &format!("{lock_name} → child's line"),
        &lock.start,
    )?);
    for n in [2, 3] {
        rows.push(row(
            format!(
                "cli: {us}: clean handover: SIGINT to the leader → the next one's leader line, \
                 {n} processes"
            ),
            elect.chain(Signal::SIGINT, n)?,
            &format!("{lock_name}, {n} processes (→ next child's line)"),
            lock.chain(Signal::SIGINT, n)?,
        )?);
    }
    rows.push(row(
        format!("cli: {run_name}: uncontested start → child's line, beside `etcdctl elect`"),
        &run.start,
        "`etcdctl elect` → its leader line",
        &elect.start,
    )?);
    for n in [2, 3] {
        rows.push(row(
            format!(
                "cli: {run_name}: clean handover: SIGINT to the leader's group → next child's \
                 line, {n} processes, beside `etcdctl elect`"
            ),
            run.chain(Signal::SIGINT, n)?,
            &format!("`etcdctl elect`, {n} processes (→ next leader line)"),
            elect.chain(Signal::SIGINT, n)?,
        )?);
    }
    Ok(())
}

/// The note under the `etcdctl elect` rows: the medians of `etcdctl lock`,
/// `etcdctl elect` and `elect run` on etcd in the same race.
fn elect_note(lock: &Figures, elect: &Figures, elect_run: &Figures) -> Result<String> {
    let median = |v: &[u64]| -> Result<String> {
        Ok(crate::rounds::ms(crate::summary(v, "median")?.median_ns))
    };
    let figures = |f: &Figures| -> Result<String> {
        Ok(format!(
            "start {}, handover {} (2 processes) and {} (3)",
            median(&f.start)?,
            median(f.chain(Signal::SIGINT, 2)?)?,
            median(f.chain(Signal::SIGINT, 3)?)?
        ))
    };
    Ok(format!(
        "`etcdctl elect` on the etcd member `etcdctl lock` and `elect run` use, in the same \
         race (medians): `etcdctl elect cli-PID-elect-RUN {PROPOSAL}` {}; `etcdctl lock \
         --ttl={ETCD_TTL}` {}; \
         `elect run` (etcd, TTL {LEASE_TTL}) {}. `etcdctl elect` runs no child: its line is the \
         election key it prints once elected, stamped by the bench as it reads it from the \
         pipe, where `etcdctl lock`'s and `elect run`'s lines are their child's own stamp (a \
         fork and exec later). SIGINT makes `etcdctl elect` resign (delete its key); its \
         session TTL, 60 s, is never waited for.",
        figures(elect)?,
        figures(lock)?,
        figures(elect_run)?,
    ))
}

/// What PostgreSQL's start floor is, in its rows.
const PG_START_FLOOR: &str = "a process that connects (sqlx), commits one `UPDATE`, then execs \
                              the same child (same server)";

/// PostgreSQL's start floor: `election-bench helper pg-start URL CHILD`
/// (one connection, one committed `UPDATE`, then `exec` of the same
/// child; [`crate::postgres::start_floor`]).
fn pg_start_floor(
    s: &Setup<'_>,
    pg: &postgres_testkit::Server,
    child: &[OsString],
) -> Result<Field> {
    crate::postgres::create_start_floor(pg)?;
    let contender = Contender::Command {
        program: s.exe.to_path_buf(),
        args: vec!["helper".into(), "pg-start".into(), pg.url().into()],
    };
    Ok(Field::new(contender, child.to_vec(), s.log))
}

/// A row of `measured` beside `floor_measured`.
pub(crate) fn row(
    what: String,
    measured: &[u64],
    floor: &str,
    floor_measured: &[u64],
) -> Result<crate::Row> {
    Ok(crate::Row {
        measured: crate::summary(measured, &what)?,
        what,
        floor: floor.to_owned(),
        floor_measured: Some(crate::summary(floor_measured, floor)?),
        ops_per_s: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `flock(1)` contenders (util-linux, present where the bench runs)
    /// through every path: starts, handovers and failovers with two and
    /// three at once. The child is a shell script printing a fixed number
    /// (the bench binary is not built for unit tests): only the plumbing
    /// is under test, not the figures.
    #[test]
    fn flock_contenders_run_every_path() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("lock");
        std::fs::create_dir(&lock).unwrap();
        let child = ["sh", "-c", "echo 1; exec sleep 1000"]
            .map(OsString::from)
            .to_vec();
        let field = Field::new(
            Contender::Flock { dir: lock },
            child,
            &dir.path().join("log"),
        );
        let counts = Counts {
            rounds: 2,
            lease_failovers: 2,
            warm: 1,
        };
        let mut alone = [Entrant {
            field,
            handovers: true,
            failovers: 2,
        }];
        let figures = race("test", &mut alone, counts, &CHAINS).unwrap();
        assert_eq!(figures[0].start.len(), 2);
        for signal in [Signal::SIGINT, Signal::SIGKILL] {
            for contenders in [2, 3] {
                assert_eq!(figures[0].chain(signal, contenders).unwrap().len(), 2);
            }
        }
    }

    /// A stamped line is the child's number; `etcdctl elect`'s first line
    /// (the key) is stamped on arrival, blank lines never.
    #[test]
    fn lines_are_stamped_by_the_child_or_on_arrival() {
        assert_eq!(line_stamp(" 42\n", false, || 7), Some(42));
        assert_eq!(line_stamp("cli-1-elect/694d9", false, || 7), None);
        assert_eq!(line_stamp("cli-1-elect/694d9", true, || 7), Some(7));
        assert_eq!(line_stamp("  ", true, || 7), None);
        // Each run its own name, none `etcdctl lock`'s.
        assert_ne!(elect_election(0), election());
        assert_ne!(elect_election(0), elect_election(3));
        assert!(elect_election(3).ends_with("-elect-3"));
    }

    /// The `etcdctl elect` rows pair each figure with the right floor:
    /// its own beside `etcdctl lock`'s, `elect run`'s beside its.
    #[test]
    fn elect_rows_pair_their_floors() {
        let figures = |base: u64| Figures {
            start: vec![base],
            chains: vec![
                (Signal::SIGINT, 2, vec![base + 2]),
                (Signal::SIGINT, 3, vec![base + 3]),
            ],
        };
        let (lock, elect, run) = (figures(100), figures(200), figures(300));
        let mut rows = Vec::new();
        elect_rows("3.4", ("lock", &lock), &elect, ("run", &run), &mut rows).unwrap();
        let got: Vec<(u64, u64)> = rows
            .iter()
            .map(|r| (r.measured.median_ns, r.floor_measured.unwrap().median_ns))
            .collect();
        assert_eq!(
            got,
            [
                (200, 100),
                (202, 102),
                (203, 103),
                (300, 200),
                (302, 202),
                (303, 203)
            ]
        );
        assert!(rows[0].what.contains("`etcdctl elect` (etcd 3.4,"));
        assert!(rows[3].what.starts_with("cli: run:") && rows[3].floor.contains("`etcdctl elect`"));
        let no_chain = Figures {
            start: vec![1],
            chains: Vec::new(),
        };
        assert!(elect_rows("3.4", ("lock", &lock), &no_chain, ("run", &run), &mut rows).is_err());
    }

    /// A race of three `flock(1)` fields on three directories: each is
    /// measured on exactly the paths it takes, as many rounds as asked.
    #[test]
    fn a_race_measures_each_entrant_on_its_own_paths() {
        let dir = tempfile::tempdir().unwrap();
        let child = ["sh", "-c", "echo 1; exec sleep 1000"]
            .map(OsString::from)
            .to_vec();
        let entrant = |name: &str, handovers: bool, failovers: usize| {
            let lock = dir.path().join(name);
            std::fs::create_dir(&lock).unwrap();
            Entrant {
                field: Field::new(
                    Contender::Flock { dir: lock },
                    child.clone(),
                    &dir.path().join("log"),
                ),
                handovers,
                failovers,
            }
        };
        let mut entrants = vec![
            entrant("a", true, 3),
            entrant("b", true, 1),
            entrant("c", false, 0),
        ];
        let counts = Counts {
            rounds: 2,
            lease_failovers: 1,
            warm: 1,
        };
        let figures = race("test", &mut entrants, counts, &CHAINS).unwrap();
        let paths = |f: &Figures| -> Vec<(Signal, usize, usize)> {
            f.chains.iter().map(|(s, c, v)| (*s, *c, v.len())).collect()
        };
        assert!(figures.iter().all(|f| f.start.len() == 2));
        use Signal::{SIGINT, SIGKILL};
        // Two handovers each with 2 and 3 processes, then `kills` failovers.
        let every = |kills: usize| {
            [2, 3]
                .map(|c| (SIGINT, c, 2))
                .into_iter()
                .chain([2, 3].map(|c| (SIGKILL, c, kills)))
                .collect::<Vec<_>>()
        };
        assert_eq!(paths(&figures[0]), every(3));
        assert_eq!(paths(&figures[1]), every(1));
        assert!(figures[2].chains.is_empty());
        assert_eq!(figures[1].chain(SIGKILL, 3).unwrap().len(), 1);
        assert!(figures[2].chain(SIGINT, 2).is_err());
    }
}
