//! `election-bench`: latency of the file, SQLite, NATS and PostgreSQL backends and of
//! fencing, each against a floor measured in the same run, written to
//! `docs/benchmarks.md`.
//!
//! Run it as `cargo xtask bench [ARGS]`: xtask builds the release binaries
//! (this one and the three candidates it starts) and runs
//! `election-bench ARGS`, which measures, prints and writes the report. A
//! debug build measures unoptimised library code, so it warns.
//!
//! `election-bench [--quick] [--out FILE] [--only GROUPS]` (GROUPS may
//! also name `postgres-fence`, the PostgreSQL fenced-write rows alone,
//! `waiters`, the handovers with 2, 10 and 30 candidates on every backend
//! with a server, and `cli-etcd`, the CLI rows of the etcd backend's race
//! alone); the hidden
//! `election-bench helper lock PATH` is the bare OFD lock holder the
//! cross-process floors start (see [`helper`]).

mod balance;
mod cgroups;
mod cli;
mod etcd;
mod fencing;
mod file;
mod handover;
mod helper;
mod host;
mod idle;
mod leases;
mod many;
mod nats;
mod ofd;
mod postgres;
mod report;
mod rolling;
mod rounds;
mod sqlite;
mod stats;
mod waiters;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use self::handover::{Chain, Exit, Process};
use self::report::{Header, Row};
use self::stats::Summary;

/// The error type of the benchmarks: any error, with its message.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// The result type of the benchmarks.
type Result<T, E = Error> = std::result::Result<T, E>;

/// The root of the workspace (two levels above `testing/bench`).
fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .expect("testing/bench lives two levels below the workspace root")
        .to_path_buf()
}

/// Default in-process iterations (campaigns, floors, file fence ops).
const IN_PROCESS: usize = 2000;
/// Default cross-process handovers and failovers.
const CROSS_PROCESS: usize = 200;
/// Memory fence ops per in-process iteration: they are cheap.
const MEMORY_FACTOR: usize = 10;
/// Unrecorded handovers before the recorded ones.
const CROSS_WARMUP: usize = 2;
/// How long a new waiter is given to block in its campaign before the
/// leader leaves.
const SETTLE: Duration = Duration::from_millis(20);
/// Default NATS renewals whose bytes are counted, per topology.
const NATS_BYTE_BATCH: usize = 200;
/// Default NATS crash failovers per topology: each takes about TTL + grace.
const NATS_FAILOVERS: usize = 10;
/// NATS crash failovers per topology with `--quick`.
const NATS_FAILOVERS_QUICK: usize = 3;
/// Handovers per chain with many waiters (`waiters`).
const WAITER_HANDOVERS: usize = 20;
/// The same with `--quick`.
const WAITER_HANDOVERS_QUICK: usize = 10;
/// Default PostgreSQL crash failovers: each takes about a TTL.
const PG_FAILOVERS: usize = 20;
/// PostgreSQL crash failovers with `--quick`.
const PG_FAILOVERS_QUICK: usize = 5;
/// Default etcd crash failovers: each takes about a TTL.
const ETCD_FAILOVERS: usize = 10;
/// etcd crash failovers with `--quick`.
const ETCD_FAILOVERS_QUICK: usize = 3;
/// Keys the lease-set figures hold in one process (issue 5's scale).
const LEASE_KEYS: usize = 10_000;
/// The lease-set steady-state window: several renew intervals (5 s).
const LEASE_WINDOW: Duration = Duration::from_secs(60);
/// The lease-set window with `--quick`.
const LEASE_WINDOW_QUICK: Duration = Duration::from_secs(15);
/// The release build the bench runs from, named in the report (`cargo
/// xtask bench` runs it: keep in step with `xtask/src/bench.rs`).
const BUILD: [&str; 9] = [
    "build",
    "--release",
    "-p",
    "candidate-testkit",
    "-p",
    "election-bench",
    "-p",
    "elect",
    "--bins",
];

/// What the waiters' rows ran, for the header.
fn cli_waiters_header(c: cli::Counts) -> String {
    format!(
        "; CLI waiters: {} clean handovers (+{} warm-up) per backend and K = {:?} processes \
         (one leading), each round beside a round of `flock(1)` and of `etcdctl lock` with as \
         many processes",
        c.rounds,
        c.warm.min(1),
        cli::WAITERS
    )
}

/// The name of the lock + durable write floor.
const DURABLE_FLOOR: &str = "OFD lock + write tmp + fsync + rename + fsync dir + unlock";

/// The groups of rows, selectable with `--only`.
const GROUPS: [&str; 12] = [
    "campaign", "handover", "failover", "fencing", "sqlite", "nats", "leases", "balance", "cli",
    "postgres", "etcd", "many",
];
/// Many elections on one server (issue 42): candidate processes, each
/// holding names of its own.
const MANY: many::Counts = many::Counts {
    processes: 100,
    names: 100,
};
/// The same with `--quick`.
const MANY_QUICK: many::Counts = many::Counts {
    processes: 3,
    names: 10,
};
/// Keys of the balanced-set convergence figures (issue 25).
const BALANCE_KEYS: usize = 1000;
/// Rounds of join, leave, join, crash per backend.
const BALANCE_ROUNDS: usize = 3;
/// Rounds with `--quick`.
const BALANCE_ROUNDS_QUICK: usize = 1;
/// Parts of a group, selectable with `--only` but not run by default (their
/// group runs them): `postgres-fence`, the PostgreSQL fenced-write rows.
/// `waiters`, the handover chains with 2, 10 and 30 candidates on every
/// backend with a server (the `nats` and `postgres` groups run their own).
/// `cli-waiters`, `elect run`'s handovers with 2, 10 and 30 processes on
/// every backend beside `etcdctl lock`'s. `rolling`, rolling deploys of
/// three `elect run` replicas by `--take-over` on every backend.
/// `cli-etcd`, the CLI group's race on etcd alone: `elect run`, `etcdctl
/// lock` and `etcdctl elect` on one member.
const PARTS: [&str; 5] = [
    "postgres-fence",
    "waiters",
    "cli-waiters",
    "rolling",
    "cli-etcd",
];
/// Default CLI rounds per row (starts, handovers, file failovers).
const CLI_ROUNDS: usize = 100;
/// Default CLI crash failovers per row on a lease backend: each takes
/// about one TTL (plus NATS's grace).
const CLI_LEASE_FAILOVERS: usize = 5;
/// CLI crash failovers per lease row with `--quick`.
const CLI_LEASE_FAILOVERS_QUICK: usize = 2;

/// The iteration counts of a group of rows: every group takes the ones it
/// has rows for.
#[derive(Clone, Copy, Debug)]
struct Counts {
    /// In-process rounds (each with its floor).
    in_process: usize,
    /// Their warm-up rounds.
    warm: usize,
    /// Cross-process handovers.
    handovers: usize,
    /// Crash failovers.
    failovers: usize,
    /// Warm-up rounds of each chain.
    cross_warm: usize,
    /// Warm-up rounds of a failover chain where each costs a TTL (NATS).
    failover_warm: usize,
    /// Renewals in a batch whose bytes are counted (NATS).
    byte_batch: usize,
    /// Keys in a lease set (PostgreSQL).
    keys: usize,
    /// A lease set's steady-state window (PostgreSQL).
    window: Duration,
}

/// Where a group of rows runs and with what: one for every group.
#[derive(Debug)]
struct Setup<'a> {
    /// The bench directory.
    dir: &'a Path,
    /// `election-bench` itself, for its helpers (the bare OFD lock, a
    /// backend's own candidate).
    exe: &'a Path,
    /// `election-candidate`, any backend by `--backend URL`.
    candidate_bin: &'a Path,
    /// Where the children's stderr goes.
    log: &'a Path,
    /// How many of each.
    counts: Counts,
}

/// The parsed flags.
#[derive(Debug)]
struct Options {
    quick: bool,
    out: PathBuf,
    only: Vec<String>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options> {
        let mut o = Options {
            quick: false,
            out: PathBuf::from("docs/benchmarks.md"),
            only: GROUPS.iter().map(|g| g.to_string()).collect(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
                _ => (arg.as_str(), None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            match flag {
                "--quick" if inline.is_none() => o.quick = true,
                "--out" => o.out = PathBuf::from(value("--out")?),
                "--only" => {
                    let list = value("--only")?;
                    o.only = list.split(',').map(|g| g.trim().to_owned()).collect();
                    if let Some(bad) = o
                        .only
                        .iter()
                        .find(|g| !GROUPS.contains(&g.as_str()) && !PARTS.contains(&g.as_str()))
                    {
                        return Err(format!(
                            "--only: unknown group {bad:?} (groups: {}; parts: {})",
                            GROUPS.join(","),
                            PARTS.join(",")
                        )
                        .into());
                    }
                }
                _ => return Err(format!("bench: unknown argument {arg:?}").into()),
            }
        }
        if o.out.is_relative() {
            o.out = repo_root().join(&o.out);
        }
        Ok(o)
    }

    fn wants(&self, group: &str) -> bool {
        self.only.iter().any(|g| g == group)
    }

    fn scale(&self, n: usize) -> usize {
        if self.quick { (n / 10).max(1) } else { n }
    }
}

/// The cargo target directory.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => repo_root().join(dir),
        None => repo_root().join("target"),
    }
}

/// Quotes `arg` for a shell if it needs it.
fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=,:@+".contains(&b));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// How the bench was started, for the report's header: `--via COMMAND`
/// first (as `cargo xtask bench` passes it), else `election-bench`, then the
/// arguments, quoted for a shell.
fn command_line(via: &str, args: &[String]) -> String {
    std::iter::once(via.to_owned())
        .chain(args.iter().map(|a| shell_word(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Gives SIGINT and SIGQUIT their default actions in this process, and so
/// in every process it starts. A shell starts a background job of a
/// non-interactive script with both ignored, and an ignored signal stays
/// ignored across fork and exec: every contender, and the child it runs,
/// then ignored the SIGINT of a clean handover, and the bench waited for
/// it forever. The rows measure what Ctrl-C does from a terminal, where
/// both have their default actions.
#[allow(unsafe_code)]
fn default_dispositions() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in [Signal::SIGINT, Signal::SIGQUIT] {
        // SAFETY: called first in `main`, before any thread starts; the
        // default action replaces no handler of this program.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
}

fn main() -> ExitCode {
    default_dispositions();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.as_slice() {
        // Hidden: a bare OFD lock holder, the floor of the cross-process rows.
        [helper, rest @ ..] if helper == "helper" => helper::run(rest),
        [via, command, rest @ ..] if via == "--via" => measure(command, rest),
        rest => measure("election-bench", rest),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("election-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Times `f`, printing what it does and how long it took on stderr.
fn step<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    eprint!("bench: {what} ... ");
    let t = Instant::now();
    let out = f().map_err(|e| format!("{what}: {e}"))?;
    eprintln!("{:.1} s", t.elapsed().as_secs_f64());
    Ok(out)
}

fn summary(samples: &[u64], what: &str) -> Result<Summary> {
    Summary::of(samples).ok_or_else(|| format!("{what}: no samples").into())
}

/// Measures, prints the report and writes it; `via` and `args` name the
/// command in the report's header.
fn measure(via: &str, args: &[String]) -> Result<()> {
    let o = Options::parse(args)?;
    // Every `elect run` of this bench under a cgroup parent of its own.
    let _cgroups = cgroups::OwnParent::make();
    if cfg!(debug_assertions) {
        eprintln!("bench: warning: measuring from a debug build; use `cargo xtask bench`");
    }
    let command = command_line(via, args);
    let target = target_dir();
    // One candidate binary for every backend (`--backend URL`).
    let candidate_bin = target.join("release").join("election-candidate");
    let elect_bin = target.join("release").join("elect");
    for (bin, needed) in [
        (
            &elect_bin,
            ["cli", "cli-waiters", "rolling", "cli-etcd"]
                .iter()
                .any(|g| o.wants(g)),
        ),
        (
            &candidate_bin,
            [
                "handover", "failover", "sqlite", "nats", "postgres", "etcd", "waiters", "many",
            ]
            .iter()
            .any(|g| o.wants(g)),
        ),
    ] {
        if needed && !bin.is_file() {
            return Err(format!(
                "{} is missing: run `cargo {}` first (or `cargo xtask bench`)",
                bin.display(),
                BUILD.join(" ")
            )
            .into());
        }
    }
    let exe = std::env::current_exe()?;

    let in_process = o.scale(IN_PROCESS);
    let cross = o.scale(CROSS_PROCESS);
    let memory_ops = in_process * MEMORY_FACTOR;
    let warm = (in_process / 10).max(1);
    let cross_warm = CROSS_WARMUP;
    let window = if o.quick {
        LEASE_WINDOW_QUICK
    } else {
        LEASE_WINDOW
    };
    let counts = Counts {
        in_process,
        warm,
        handovers: cross,
        // A killed SQLite or file holder is replaced at once (the same-host
        // lock), not after a TTL: as many failovers as handovers.
        failovers: cross,
        cross_warm,
        failover_warm: cross_warm,
        byte_batch: o.scale(NATS_BYTE_BATCH),
        keys: LEASE_KEYS,
        window,
    };
    let sqlite_counts = counts;
    let nats_counts = Counts {
        failovers: if o.quick {
            NATS_FAILOVERS_QUICK
        } else {
            NATS_FAILOVERS
        },
        failover_warm: 1,
        ..counts
    };
    let pg_counts = Counts {
        failovers: if o.quick {
            PG_FAILOVERS_QUICK
        } else {
            PG_FAILOVERS
        },
        ..counts
    };

    let etcd_counts = Counts {
        failovers: if o.quick {
            ETCD_FAILOVERS_QUICK
        } else {
            ETCD_FAILOVERS
        },
        failover_warm: 1,
        ..counts
    };

    let cli_counts = cli::Counts {
        rounds: o.scale(CLI_ROUNDS),
        lease_failovers: if o.quick {
            CLI_LEASE_FAILOVERS_QUICK
        } else {
            CLI_LEASE_FAILOVERS
        },
        warm: cross_warm,
    };

    let bench = tempfile::Builder::new()
        .prefix("election-bench-")
        .tempdir_in(&target)
        .map_err(|e| format!("create a bench dir in {}: {e}", target.display()))?;
    let dir = bench.path();
    let (filesystem, in_memory) = host::filesystem(dir);
    if in_memory {
        eprintln!(
            "bench: warning: {} is memory-backed ({filesystem}): fsync costs nothing here",
            dir.display()
        );
    }
    eprintln!("bench: in {} ({filesystem})", dir.display());

    let mut rows = Vec::new();
    if o.wants("campaign") {
        campaign_rows(dir, in_process, warm, &mut rows)?;
    }
    let log = dir.join("children.stderr");
    for (group, exit) in [("handover", Exit::Resign), ("failover", Exit::Kill)] {
        if o.wants(group) {
            cross_rows(
                dir,
                &exe,
                &candidate_bin,
                exit,
                cross,
                cross_warm,
                &log,
                &mut rows,
            )
            .map_err(|e| with_log_tail(e, &log))?;
        }
    }
    if o.wants("fencing") {
        fencing_rows(dir, in_process, memory_ops, warm, &mut rows)?;
    }
    let mut notes = Vec::new();
    let setup = |counts| Setup {
        dir,
        exe: &exe,
        candidate_bin: &candidate_bin,
        log: &log,
        counts,
    };
    if o.wants("sqlite") {
        sqlite::rows(&setup(sqlite_counts), &mut rows, &mut notes)?;
    }
    if o.wants("nats") {
        nats::rows(&setup(nats_counts), &mut rows, &mut notes)?;
    }
    for kind in waiters::kinds().filter(|k| o.wants("waiters") || o.wants(k.name())) {
        let n = if o.quick {
            WAITER_HANDOVERS_QUICK
        } else {
            WAITER_HANDOVERS
        };
        waiters::rows(&setup(nats_counts), kind, n, &mut rows, &mut notes)?;
    }
    if o.wants("leases") {
        let counts = leases::Counts {
            keys: LEASE_KEYS,
            window,
            held_run: Duration::from_secs(2),
        };
        leases::notes(counts, &mut notes)?;
        leases::sqlite_notes(counts, dir, &mut notes)?;
    }
    if o.wants("balance") {
        let node_bin = target.join("release").join("lease-set-node");
        if !node_bin.is_file() {
            return Err(format!(
                "{} is missing: run `cargo {}` first (or `cargo xtask bench`)",
                node_bin.display(),
                BUILD.join(" ")
            )
            .into());
        }
        let counts = balance::Counts {
            keys: BALANCE_KEYS,
            rounds: if o.quick {
                BALANCE_ROUNDS_QUICK
            } else {
                BALANCE_ROUNDS
            },
            cpu_keys: LEASE_KEYS,
            window,
        };
        balance::notes(dir, &node_bin, &log, counts, &mut notes)
            .map_err(|e| with_log_tail(e, &log))?;
    }

    if o.wants("postgres") {
        postgres::rows(&setup(pg_counts), &mut rows, &mut notes)?;
    } else if o.wants("postgres-fence") {
        postgres::fence_rows(pg_counts, &mut rows)?;
    }
    if o.wants("etcd") {
        etcd::library::rows(&setup(etcd_counts), &mut rows, &mut notes)?;
    }

    if o.wants("cli") || o.wants("cli-etcd") {
        let setup = cli::Setup {
            dir,
            exe: &exe,
            elect_bin: &elect_bin,
            log: &log,
            counts: cli_counts,
        };
        let backends: &[&str] = if o.wants("cli") {
            &cli::BACKENDS
        } else {
            &["etcd"]
        };
        cli::rows(&setup, backends, &mut rows, &mut notes).map_err(|e| with_log_tail(e, &log))?;
    }
    if o.wants("cli") || o.wants("cli-waiters") {
        let setup = cli::Setup {
            dir,
            exe: &exe,
            elect_bin: &elect_bin,
            log: &log,
            counts: cli_counts,
        };
        cli::waiter_rows(&setup, &mut rows, &mut notes).map_err(|e| with_log_tail(e, &log))?;
    }
    if o.wants("cli") || o.wants("rolling") {
        let setup = cli::Setup {
            dir,
            exe: &exe,
            elect_bin: &elect_bin,
            log: &log,
            counts: cli_counts,
        };
        rolling::rows(&setup, &mut rows, &mut notes).map_err(|e| with_log_tail(e, &log))?;
    }

    let many_counts = if o.quick { MANY_QUICK } else { MANY };
    if o.wants("many") {
        many::rows(&setup(counts), many_counts, &mut rows, &mut notes)?;
    }

    let header = Header {
        command,
        date: host::utc_now(),
        kernel: host::kernel_release(),
        filesystem,
        iterations: format!(
            "{in_process} in-process campaigns, lock floors and file-fence ops \
             (+{warm} warm-up); {cross} cross-process handovers and {cross} failovers, \
             each floor too (+{cross_warm} warm-up); {memory_ops} memory-fence ops \
             (+{warm} warm-up){}{}{}{}{}{}{}{}",
            if o.wants("sqlite") {
                format!(
                    "; SQLite: {in_process} in-process campaigns, renewals and fenced \
                     writes, each interleaved with as many floor transactions \
                     (+{warm} warm-up), {cross} handovers (floor: {in_process} \
                     transactions) and {} failovers (+{cross_warm} warm-up each)",
                    sqlite_counts.failovers
                )
            } else {
                String::new()
            },
            if o.wants("nats") {
                let n = nats_counts;
                format!(
                    "; NATS, on one node and then on an R3 cluster, each: {} in-process \
                     campaigns and renewals, each interleaved with its floor requests, and \
                     {} rounds of the handover floors (+{} warm-up each), a batch of {} \
                     renewals for the bytes, {} handovers (+{} warm-up) and {} failovers \
                     (+{} warm-up)",
                    n.in_process,
                    n.in_process,
                    n.warm,
                    n.byte_batch,
                    n.handovers,
                    n.cross_warm,
                    n.failovers,
                    n.failover_warm
                )
            } else {
                String::new()
            },
            if o.wants("balance") {
                format!(
                    "; balanced lease sets, each backend: {} round(s) of join, clean leave, \
                     join, SIGKILL with {BALANCE_KEYS} keys and up to 4 members, then \
                     {LEASE_KEYS} keys over 4 members for a {} s CPU window{}",
                    if o.quick {
                        BALANCE_ROUNDS_QUICK
                    } else {
                        BALANCE_ROUNDS
                    },
                    if o.quick {
                        LEASE_WINDOW_QUICK
                    } else {
                        LEASE_WINDOW
                    }
                    .as_secs(),
                    if o.quick {
                        format!(
                            " (--quick: {BALANCE_ROUNDS_QUICK} round instead of {BALANCE_ROUNDS}, a {} s window instead of {} s)",
                            LEASE_WINDOW_QUICK.as_secs(),
                            LEASE_WINDOW.as_secs()
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            },
            if o.wants("cli") || o.wants("cli-etcd") {
                format!(
                    "; CLI{}: {} uncontested starts, handovers and file failovers per row \
                     (+{} warm-up), {} crash failovers per SQLite, NATS and PostgreSQL row, \
                     each round of `elect run` beside a round of `flock(1)` (and of \
                     `etcdctl lock`, and of PostgreSQL's start floor), in turn (a SIGINT or \
                     SIGKILL to the leader's process group, a new waiter started after each \
                     round, {} ms to settle, {} ms on PostgreSQL)",
                    if o.wants("cli") {
                        ""
                    } else {
                        " (the etcd backend's race alone)"
                    },
                    cli_counts.rounds,
                    cli_counts.warm,
                    cli_counts.lease_failovers,
                    cli::SETTLE.as_millis(),
                    cli::PG_SETTLE.as_millis()
                ) + &etcd::header()
                    + &if o.wants("cli") {
                        cli_waiters_header(cli_counts)
                    } else {
                        String::new()
                    }
            } else if o.wants("cli-waiters") {
                cli_waiters_header(cli_counts) + &etcd::header()
            } else {
                String::new()
            },
            if !o.wants("postgres") && o.wants("postgres-fence") {
                format!(
                    "; PostgreSQL (one local server): {} rounds of the fenced writes, each \
                     interleaved with their floor (+{} warm-up)",
                    pg_counts.in_process, pg_counts.warm
                )
            } else if o.wants("postgres") {
                let p = pg_counts;
                format!(
                    "; PostgreSQL (one local server): {} in-process campaigns, renewals, \
                     double floor transactions and fenced writes, each interleaved with its \
                     floor (+{} warm-up), {} handovers and {} failovers (+{} warm-up each), \
                     {} keys in one lease set for a {} s window",
                    p.in_process,
                    p.warm,
                    p.handovers,
                    p.failovers,
                    p.cross_warm,
                    p.keys,
                    p.window.as_secs()
                )
            } else {
                String::new()
            },
            if o.wants("etcd") {
                let e = etcd_counts;
                format!(
                    "; etcd (one member): {} in-process campaigns, each interleaved with its \
                     floor requests (+{} warm-up), {} handovers (+{} warm-up) and {} failovers \
                     (+{} warm-up), {} rounds of the handover floor in a loop and {} after \
                     idleness",
                    e.in_process,
                    e.warm,
                    e.handovers,
                    e.cross_warm,
                    e.failovers,
                    e.failover_warm,
                    e.in_process,
                    e.handovers
                )
            } else {
                String::new()
            },
            if o.wants("many") {
                format!(
                    "; many names: {} `election-candidate --many {}` processes on one \
                     PostgreSQL server, then on one nats-server, default TTL, a window of {} \
                     TTLs after all are held and one renew interval{}",
                    many_counts.processes,
                    many_counts.names,
                    many::WINDOW_TTLS,
                    if o.quick {
                        format!(
                            " (--quick: {} × {} instead of {} × {})",
                            MANY_QUICK.processes, MANY_QUICK.names, MANY.processes, MANY.names
                        )
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            },
            if o.quick {
                format!(
                    " (--quick: a tenth of the default{})",
                    if o.wants("nats") {
                        format!("; NATS failovers: {NATS_FAILOVERS_QUICK}")
                    } else {
                        String::new()
                    } + &if o.wants("etcd") {
                        format!("; etcd failovers: {ETCD_FAILOVERS_QUICK}")
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            }
        ),
        build: format!("cargo {}", BUILD.join(" ")),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let reading = [
        file::READING,
        sqlite::READING,
        nats::READING,
        postgres::READING,
        etcd::library::READING,
        waiters::READING,
        many::READING,
    ];
    let doc = report::document(&header, &rows, &notes, &reading);
    print!("{doc}");
    if let Some(parent) = o.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&o.out, &doc).map_err(|e| format!("write {}: {e}", o.out.display()))?;
    eprintln!("bench: wrote {}", o.out.display());
    Ok(())
}

/// Adds the last lines the child processes wrote on stderr to `e`.
fn with_log_tail(e: crate::Error, log: &Path) -> crate::Error {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
    if tail.is_empty() {
        e
    } else {
        format!("{e}\nlast lines the child processes wrote on stderr:\n{tail}").into()
    }
}

fn campaign_rows(dir: &Path, n: usize, warm: usize, rows: &mut Vec<Row>) -> Result<()> {
    let lock = step("floor: OFD lock + unlock", || {
        file::floor_lock(dir, n, warm)
    })?;
    let durable = step("floor: OFD lock + durable write + unlock", || {
        file::floor_durable(dir, n, warm)
    })?;
    let c = step("uncontested campaign + resign", || {
        file::campaign(&dir.join("campaign"), n, warm)
    })?;
    let lock = summary(&lock, "lock floor")?;
    let durable = summary(&durable, "durable floor")?;
    let campaign = summary(&c.campaign, "campaign")?;
    let both = summary(&c.campaign_resign, "campaign + resign")?;
    for (what, measured) in [
        ("file: uncontested campaign (in-process)", campaign),
        ("file: uncontested campaign + resign (in-process)", both),
    ] {
        for (floor, floor_measured) in [
            ("OFD lock + unlock", lock),
            (
                "OFD lock + write tmp + fsync + rename + fsync dir + unlock",
                durable,
            ),
        ] {
            rows.push(Row {
                what: what.into(),
                measured,
                floor: floor.into(),
                floor_measured: Some(floor_measured),
                ops_per_s: None,
            });
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn cross_rows(
    dir: &Path,
    exe: &Path,
    candidate_bin: &Path,
    exit: Exit,
    n: usize,
    warm: usize,
    log: &Path,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let (what, tag) = match exit {
        Exit::Resign => (
            "file: clean handover: resign in A → elected in B (processes)",
            "handover",
        ),
        Exit::Kill => (
            "file: crash failover: SIGKILL of A → elected in B (processes)",
            "failover",
        ),
    };
    let floor_what = exit.lock_floor();
    let floor = step(&format!("floor: bare OFD lock {tag}"), || {
        let lock = dir.join(format!("{tag}-floor.lock"));
        handover::lock_floor(exe, &lock, log, exit, (n, warm), SETTLE)
    })?;
    let election_dir = dir.join(format!("{tag}-election"));
    std::fs::create_dir_all(&election_dir)?;
    let url = election_url::BackendUrl::file(election_dir);
    let mut chain = Chain::new(
        Process::candidate(candidate_bin, &url, "bench", Vec::new()),
        log.to_path_buf(),
    );
    let measured = step(&format!("election-file {tag}"), || {
        chain.measure(exit, n, warm, SETTLE, Duration::ZERO)
    })?;
    rows.push(Row {
        what: what.into(),
        measured: summary(&measured, what)?,
        floor: floor_what.into(),
        floor_measured: Some(summary(&floor, floor_what)?),
        ops_per_s: None,
    });
    Ok(())
}

fn fencing_rows(
    dir: &Path,
    n: usize,
    memory_ops: usize,
    warm: usize,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let memory_floor = step("floor: uncontended std Mutex", || {
        fencing::memory_floor(memory_ops, warm)
    })?;
    let memory = step("MemoryFence::advance", || fencing::memory(memory_ops, warm))?;
    let file_floor = step("floor: OFD lock + pwrite + fsync + unlock", || {
        fencing::file_floor(dir, n, warm)
    })?;
    let durable_floor = step("floor: OFD lock + durable write + unlock", || {
        fencing::durable_floor(dir, n, warm)
    })?;
    let file = step("FileFence::advance", || fencing::file(dir, n, warm))?;
    for (what, m, floor_what, f) in [
        (
            "fence advance: MemoryFence",
            &memory,
            "uncontended std Mutex lock + unlock",
            &memory_floor,
        ),
        (
            "fence advance: FileFence",
            &file,
            "OFD lock + pwrite + fsync + unlock",
            &file_floor,
        ),
        (
            "fence advance: FileFence",
            &file,
            DURABLE_FLOOR,
            &durable_floor,
        ),
    ] {
        rows.push(Row {
            what: what.into(),
            measured: summary(&m.per_op, what)?,
            floor: floor_what.into(),
            floor_measured: Some(summary(&f.per_op, floor_what)?),
            ops_per_s: Some((m.ops_per_s, Some(f.ops_per_s))),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_flags() {
        let o = Options::parse(&args(&["--quick", "--out", "x.md"])).unwrap();
        assert!(o.quick);
        assert_eq!(o.out, repo_root().join("x.md"));
        assert_eq!(o.scale(2000), 200);
        let o = Options::parse(&args(&["--out=/tmp/y.md", "--only", "fencing"])).unwrap();
        assert!(!o.quick && o.wants("fencing") && !o.wants("campaign"));
        assert_eq!(o.out, PathBuf::from("/tmp/y.md"));
        assert!(Options::parse(&args(&["--only", "nope"])).is_err());
        let o = Options::parse(&args(&["--only", "postgres-fence"])).unwrap();
        assert!(o.wants("postgres-fence") && !o.wants("postgres"));
        assert!(!Options::parse(&args(&[])).unwrap().wants("postgres-fence"));
        let o = Options::parse(&args(&["--quick", "--only", "sqlite"])).unwrap();
        assert!(o.wants("sqlite") && !o.wants("handover"));
        assert!(Options::parse(&args(&[])).unwrap().wants("sqlite"));
        let o = Options::parse(&args(&["--only", "nats,sqlite"])).unwrap();
        assert!(o.wants("nats") && o.wants("sqlite") && !o.wants("campaign"));
        assert!(Options::parse(&args(&[])).unwrap().wants("nats"));
        let o = Options::parse(&args(&["--quick", "--only", "cli"])).unwrap();
        assert!(o.wants("cli") && !o.wants("nats") && o.scale(CLI_ROUNDS) == 10);
        let o = Options::parse(&args(&["--quick", "--only", "postgres"])).unwrap();
        assert!(o.wants("postgres") && !o.wants("sqlite") && !o.wants("leases"));
        assert!(Options::parse(&args(&[])).unwrap().wants("postgres"));
        let o = Options::parse(&args(&["--quick", "--only", "many"])).unwrap();
        assert!(o.wants("many") && !o.wants("postgres"));
        assert!(Options::parse(&args(&[])).unwrap().wants("many"));
        let o = Options::parse(&args(&["--quick", "--only", "etcd,cli-etcd"])).unwrap();
        assert!(o.wants("etcd") && o.wants("cli-etcd") && !o.wants("cli"));
        assert!(Options::parse(&args(&[])).unwrap().wants("etcd"));
        assert!(!Options::parse(&args(&[])).unwrap().wants("cli-etcd"));
        assert!(Options::parse(&args(&["--out"])).is_err());
        // `--via` is taken only first, by `main`: anywhere else it is unknown.
        assert!(Options::parse(&args(&["--quick", "--via", "c"])).is_err());
    }

    #[test]
    fn quotes_shell_words() {
        assert_eq!(shell_word("--out"), "--out");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(
            command_line("cargo xtask bench", &args(&["--only", "a b"])),
            "cargo xtask bench --only 'a b'"
        );
    }

    #[test]
    fn lock_floors_run() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(file::floor_lock(dir.path(), 5, 1).unwrap().len(), 5);
        assert_eq!(file::floor_durable(dir.path(), 3, 1).unwrap().len(), 3);
        assert_eq!(
            fencing::file_floor(dir.path(), 3, 1).unwrap().per_op.len(),
            3
        );
        assert_eq!(fencing::memory_floor(5, 1).unwrap().per_op.len(), 5);
    }
}
