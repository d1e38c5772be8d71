//! The history: every step a candidate took and every fault the
//! orchestrator injected, one line each, in files under the run directory.
//!
//! A line is `<mono_ns> <wall_ms> <event> [fields...]`, where `mono_ns` is
//! CLOCK_MONOTONIC in nanoseconds (one clock for every process of the host)
//! and `wall_ms` the wall clock in milliseconds (for people only; never
//! used to order or check anything).
//!
//! Candidate files: `candidate-<writer>.history`, where `<writer>` names one
//! process incarnation (`c2.3`: candidate slot 2, third start). Events:
//!
//! | event | fields | meaning |
//! | --- | --- | --- |
//! | `start` | `<pid>` | the process started |
//! | `campaigning` | | a campaign began |
//! | `elected` | `<epoch>` | a term began |
//! | `write` | `<seq> <epoch>` | a write attempt began (seq grows per writer); stamped before the writer's last check of its lease |
//! | `unguarded` | `<seq> <epoch>` | an unguarded write attempt began (a token from `election_core::unguarded`, no term) |
//! | `ok` | `<seq> <epoch>` | the resource acknowledged the write (durable) |
//! | `stale` | `<seq> <epoch> <mark>` | the fence refused it: the mark was higher |
//! | `error` | `<seq> <epoch> <text...>` | the outcome is unknown |
//! | `lost` | `<epoch> <text...>` | the term was lost |
//! | `resigned` | `<epoch>` | the term was resigned |
//!
//! The orchestrator's file, `faults.history`: `fault <kind> <target>` when a
//! fault begins, `heal <kind> <target>` when it ends (faults with no
//! duration, like a kill, heal at once), `spawn <writer> <pid>`, `end`.
//!
//! [`HistoryWriter`] writes these lines (one writer per file, each line
//! appended and handed to the kernel at once, so a killed process loses
//! nothing it recorded); [`read`] parses a file back into typed [`Line`]s
//! of [`CandidateEvent`] or [`FaultEvent`].
//!
//! ```
//! use torture::history::{self, CandidateEvent, HistoryWriter};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! let path = tmp.path().join(history::candidate_file_name("c1.1"));
//! let writer = HistoryWriter::create(&path)?;
//! writer.record(&CandidateEvent::Elected { epoch: 7 })?;
//! writer.record(&CandidateEvent::Write { seq: 1, epoch: 7 })?;
//! let lines = history::read::<CandidateEvent>(&path)?;
//! assert_eq!(lines[1].event, CandidateEvent::Write { seq: 1, epoch: 7 });
//! assert!(lines[0].mono_ns <= lines[1].mono_ns);
//! # Ok(()) }
//! ```

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The orchestrator's history file in a run directory.
pub const FAULTS_FILE: &str = "faults.history";

/// The prefix of a candidate's history file name.
const CANDIDATE_PREFIX: &str = "candidate-";
/// The suffix of every history file name.
const SUFFIX: &str = ".history";

/// The file name of writer `writer`'s history: `candidate-<writer>.history`.
///
/// ```
/// assert_eq!(torture::history::candidate_file_name("c2.3"), "candidate-c2.3.history");
/// ```
pub fn candidate_file_name(writer: &str) -> String {
    format!("{CANDIDATE_PREFIX}{writer}{SUFFIX}")
}

/// The writer named by a candidate history's file name, or `None` if the
/// name is not `candidate-<writer>.history`.
///
/// ```
/// use torture::history::writer_of;
/// assert_eq!(writer_of("candidate-c2.3.history"), Some("c2.3"));
/// assert_eq!(writer_of("faults.history"), None);
/// ```
pub fn writer_of(file_name: &str) -> Option<&str> {
    file_name
        .strip_prefix(CANDIDATE_PREFIX)?
        .strip_suffix(SUFFIX)
        .filter(|w| !w.is_empty())
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the host,
/// so the lines of different processes' files can be ordered (0 should the
/// clock ever fail, which the checker's ordering shows as a line from
/// before the run).
pub use fencing::mono::mono_ns;

/// The wall clock in milliseconds since the Unix epoch (0 before it): for
/// An error and its sources, on one line (`a: b: c`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Prints one protocol line on stdout and flushes it; a closed stdout
/// (the orchestrator gone) is ignored: the history is what counts.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// people reading a history, never for ordering or checking.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One parsed history line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line<E> {
    /// CLOCK_MONOTONIC nanoseconds when the line was recorded.
    pub mono_ns: u64,
    /// Wall-clock milliseconds, for people only.
    pub wall_ms: u64,
    /// What happened.
    pub event: E,
}

impl<E: fmt::Display> fmt::Display for Line<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.mono_ns, self.wall_ms, self.event)
    }
}

impl<E: FromStr<Err = ParseError>> FromStr for Line<E> {
    type Err = ParseError;

    /// Parses `<mono_ns> <wall_ms> <event> [fields...]`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (head, rest) = fields(s, 2);
        let [mono, wall] = [head[0], head[1]];
        Ok(Line {
            mono_ns: number(mono, "mono_ns")?,
            wall_ms: number(wall, "wall_ms")?,
            event: rest.parse()?,
        })
    }
}

/// A line of a history that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ParseError {
    reason: String,
}

impl ParseError {
    fn new(reason: impl Into<String>) -> Self {
        ParseError {
            reason: reason.into(),
        }
    }
}

/// The first `n` whitespace-separated words of `s` (empty strings where
/// missing) and the rest, trimmed.
fn fields(s: &str, n: usize) -> (Vec<&str>, &str) {
    let mut words = Vec::with_capacity(n);
    let mut rest = s.trim_start();
    for _ in 0..n {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        words.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    (words, rest.trim_end())
}

fn number(word: &str, what: &str) -> Result<u64, ParseError> {
    if word.is_empty() {
        return Err(ParseError::new(format!("{what} is missing")));
    }
    word.parse()
        .map_err(|_| ParseError::new(format!("{what} {word:?} is not a number")))
}

fn word<'a>(word: &'a str, what: &str) -> Result<&'a str, ParseError> {
    if word.is_empty() {
        Err(ParseError::new(format!("{what} is missing")))
    } else {
        Ok(word)
    }
}

/// Text for the end of a line: one line, never empty.
fn one_line(text: &str) -> String {
    let t: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = t.trim();
    if t.is_empty() {
        "-".to_owned()
    } else {
        t.to_owned()
    }
}

/// An event of a candidate's history (`candidate-<writer>.history`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CandidateEvent {
    /// `start <pid>`: the process started.
    Start {
        /// Its process id.
        pid: u32,
    },
    /// `campaigning`: a campaign began.
    Campaigning,
    /// `elected <epoch>`: a term began.
    Elected {
        /// The term's epoch.
        epoch: u64,
    },
    /// `write <seq> <epoch>`: a write attempt began.
    Write {
        /// The writer's sequence number, from 1.
        seq: u64,
        /// The epoch (token) it presents.
        epoch: u64,
    },
    /// `unguarded <seq> <epoch>`: an unguarded write attempt began: its
    /// token came from `election_core::unguarded`, not from a term.
    Unguarded {
        /// The writer's sequence number (shared with `write`).
        seq: u64,
        /// The epoch (token) it presents.
        epoch: u64,
    },
    /// `ok <seq> <epoch>`: the resource acknowledged the write; it is
    /// durable.
    Ok {
        /// The write's sequence number.
        seq: u64,
        /// Its epoch.
        epoch: u64,
    },
    /// `stale <seq> <epoch> <mark>`: the fence refused the write.
    Stale {
        /// The write's sequence number.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// The resource's high-water mark that refused it.
        mark: u64,
    },
    /// `error <seq> <epoch> <text...>`: the write's outcome is unknown.
    Error {
        /// The write's sequence number.
        seq: u64,
        /// Its epoch.
        epoch: u64,
        /// What failed (one line).
        text: String,
    },
    /// `lost <epoch> <text...>`: the term was lost.
    Lost {
        /// The lost term's epoch.
        epoch: u64,
        /// Why (one line).
        text: String,
    },
    /// `resigned <epoch>`: the term was resigned.
    Resigned {
        /// The resigned term's epoch.
        epoch: u64,
    },
}

impl fmt::Display for CandidateEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CandidateEvent::Start { pid } => write!(f, "start {pid}"),
            CandidateEvent::Campaigning => f.write_str("campaigning"),
            CandidateEvent::Elected { epoch } => write!(f, "elected {epoch}"),
            CandidateEvent::Write { seq, epoch } => write!(f, "write {seq} {epoch}"),
            CandidateEvent::Unguarded { seq, epoch } => write!(f, "unguarded {seq} {epoch}"),
            CandidateEvent::Ok { seq, epoch } => write!(f, "ok {seq} {epoch}"),
            CandidateEvent::Stale { seq, epoch, mark } => write!(f, "stale {seq} {epoch} {mark}"),
            CandidateEvent::Error { seq, epoch, text } => {
                write!(f, "error {seq} {epoch} {}", one_line(text))
            }
            CandidateEvent::Lost { epoch, text } => write!(f, "lost {epoch} {}", one_line(text)),
            CandidateEvent::Resigned { epoch } => write!(f, "resigned {epoch}"),
        }
    }
}

impl FromStr for CandidateEvent {
    type Err = ParseError;

    /// Parses `<event> [fields...]`, the part of a line after the clocks.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (w, rest) = fields(s, 4);
        let n = |i: usize, what: &str| number(w[i], what);
        // The text of `error` and `lost` starts after their numbers.
        let text_after = |count: usize| fields(s, count).1.to_owned();
        let event = match w[0] {
            "start" => CandidateEvent::Start {
                pid: u32::try_from(n(1, "pid")?)
                    .map_err(|_| ParseError::new(format!("pid {:?} is out of range", w[1])))?,
            },
            "campaigning" => CandidateEvent::Campaigning,
            "elected" => CandidateEvent::Elected {
                epoch: n(1, "epoch")?,
            },
            "write" => CandidateEvent::Write {
                seq: n(1, "seq")?,
                epoch: n(2, "epoch")?,
            },
            "unguarded" => CandidateEvent::Unguarded {
                seq: n(1, "seq")?,
                epoch: n(2, "epoch")?,
            },
            "ok" => CandidateEvent::Ok {
                seq: n(1, "seq")?,
                epoch: n(2, "epoch")?,
            },
            "stale" => CandidateEvent::Stale {
                seq: n(1, "seq")?,
                epoch: n(2, "epoch")?,
                mark: n(3, "mark")?,
            },
            "error" => CandidateEvent::Error {
                seq: n(1, "seq")?,
                epoch: n(2, "epoch")?,
                text: text_after(3),
            },
            "lost" => CandidateEvent::Lost {
                epoch: n(1, "epoch")?,
                text: text_after(2),
            },
            "resigned" => CandidateEvent::Resigned {
                epoch: n(1, "epoch")?,
            },
            "" => return Err(ParseError::new("the event is missing")),
            other => return Err(ParseError::new(format!("unknown event {other:?}"))),
        };
        let extra = match &event {
            CandidateEvent::Error { .. } | CandidateEvent::Lost { .. } => "",
            CandidateEvent::Campaigning => fields(s, 1).1,
            CandidateEvent::Start { .. }
            | CandidateEvent::Elected { .. }
            | CandidateEvent::Resigned { .. } => fields(s, 2).1,
            CandidateEvent::Write { .. }
            | CandidateEvent::Unguarded { .. }
            | CandidateEvent::Ok { .. } => fields(s, 3).1,
            CandidateEvent::Stale { .. } => rest,
        };
        if !extra.is_empty() {
            return Err(ParseError::new(format!(
                "unexpected {extra:?} after {}",
                w[0]
            )));
        }
        Ok(event)
    }
}

/// The kinds of fault the orchestrator injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// `kill`: SIGKILL a candidate.
    Kill,
    /// `stop`: SIGSTOP a candidate past the TTL, then SIGCONT.
    Stop,
    /// `resign`: a resign storm.
    Resign,
    /// `server`: the NATS (or PostgreSQL) server killed, restarted.
    Server,
    /// `node`: one cluster node killed, restarted.
    Node,
    /// `meta`: the JetStream meta leader killed, restarted.
    Meta,
    /// `blackhole`: the proxy black-holes the leader's NATS connection.
    Blackhole,
    /// `drop`: the proxy drops the leader's NATS connection.
    Drop,
    /// `deafen`: the proxy passes the leader's bytes to the NATS server
    /// and discards the server's for 1.5 × TTL: its requests (renewals,
    /// confirms) land, their answers never arrive.
    Deafen,
    /// `clock`: a candidate's injected wall clock jumps (SQLite,
    /// PostgreSQL).
    Clock,
    /// `cancel`: the leader's work is cancelled mid-write: its `lead()`
    /// future is dropped while a task of the term is in a synchronous
    /// write.
    Cancel,
    /// `close`: the leader hands the election to a lease set and closes
    /// the set while a guarded write is in a synchronous section.
    Close,
    /// `unguarded`: a candidate makes one write with an
    /// `election_core::unguarded` token.
    Unguarded,
    /// `rowdel`: the election's lease row deleted by hand (SQLite, PostgreSQL).
    RowDelete,
    /// `recreate`: the NATS bucket deleted and recreated with the same
    /// configuration.
    Recreate,
    /// `maxage`: the NATS bucket recreated with a shorter max age (a
    /// third of the TTL), then recreated as it was.
    MaxAge,
    /// `fdrop`: a fenced write's future dropped after the write ran (the
    /// SQLite fence), while a deposed leader's write is frozen mid-way.
    FenceDrop,
    /// `rollback`: the single NATS server loses the tail of its stream:
    /// killed, its store replaced by a copy taken seconds earlier,
    /// restarted.
    Rollback,
    /// `pgterm`: `pg_terminate_backend` of the holder's PostgreSQL
    /// connections (pool and listener), found by the local ports of its
    /// process's TCP connections to the server; a random candidate's when
    /// no one leads.
    PgTerminate,
    /// `pgstop`: the PostgreSQL server SIGSTOPped past the TTL, then
    /// SIGCONT.
    PgStop,
    /// `supkill` (`--elect`): SIGKILL of the leader's supervisor alone
    /// (the child `elect run` forks), not of `elect` or the command.
    SupKill,
    /// `supstop` (`--elect`): SIGSTOP of the leader's supervisor alone,
    /// then a loss (`elect` stopped past the TTL and woken while the
    /// supervisor is still stopped), SIGCONT of the supervisor a TTL
    /// later.
    SupStop,
    /// `groupstop` (`--elect`): SIGSTOP of the leader's `elect` process
    /// group (elect, supervisor, command) past the TTL, then SIGCONT;
    /// what left the group (an escaped daemon) is not stopped.
    GroupStop,
    /// `fencefiles` (`--elect`, a `FileFence` resource): the fence's mark
    /// file deleted, then one write with a token below every term's; or
    /// (half the time) its lock file deleted while a late writer with the
    /// leader's token is inside the fence and the next term writes.
    FenceFiles,
    /// `fencerows` (`--elect`, SQLite): every row of the resource's
    /// `election_fences` deleted by hand, then one write with a token
    /// below every term's.
    FenceRows,
    /// `hardlink` (`--elect`, SQLite): a second hard link to the
    /// election's database; a candidate started on it for 3 TTLs.
    HardLink,
    /// `spellings` (`--elect`): one election reached two ways. Every
    /// candidate but the leader is started again in a mount namespace of
    /// its own where the election's directory (the file backend's, the
    /// SQLite database's) is bind-mounted under a second path, and
    /// reaches it there; the leader's whole process group is SIGKILLed,
    /// then the new leader's (whose command's escaped worker runs on),
    /// so that a term's leftovers must be ended by a successor that
    /// spells the election the other way.
    Spellings,
    /// `nested` (`--elect`): every candidate but the leader is started
    /// again with a command that is itself an `elect run` (of its own
    /// inner election, on the same backend) whose command writes with the
    /// outer term's token and escapes; the leader's whole group is
    /// SIGKILLed, then the nested leader's: the next outer term must end
    /// the inner job too.
    Nested,
    /// `reboot` (`--elect`, file): a host's reboot. The candidates keep
    /// the election in the default directory (no `--backend`,
    /// `XDG_STATE_HOME` and `XDG_RUNTIME_DIR` in the run directory); every
    /// candidate process (its whole group and what escaped it) is
    /// SIGKILLed, what a reboot empties is wiped (`XDG_RUNTIME_DIR`'s
    /// contents, the candidates' `TMPDIR`), and they start again.
    Reboot,
    /// `join` (`--lease-sets`): a new member joins the balanced group.
    Join,
    /// `leave` (`--lease-sets`): a member leaves the group cleanly (stops
    /// its membership, closes its set, exits).
    Leave,
    /// `keydel`: the election's key deleted by hand while its holder's
    /// lease runs (etcd): an operator's action after which only the
    /// fence protects until the holder hears (docs/safety.md, "What an
    /// operator must never touch").
    KeyDelete,
    /// `compact`: the store's history compacted up to its revision now
    /// (etcd): watches begun at an older revision are cancelled.
    Compact,
    /// `transfer`: the leader hands its term over (`Term::transfer`) to
    /// another live candidate, to one SIGKILLed right after it was named
    /// (the successor dies), or to an identity nobody has (a ghost); the
    /// name stays reserved for the window.
    Transfer,
    /// `revoke`: an operator's revoke (`Election::revoke`, from the
    /// orchestrator's own backend) while the leader's write is stalled
    /// between its `write` line and the fence; the fence is raised to the
    /// revocation's epoch (which no candidate holds) before the write
    /// resumes.
    Revoke,
    /// `prefer`: priorities flapping: the candidates' priorities are
    /// changed a few times; waiting candidates of a higher priority ask
    /// (`Election::prefer`) and leaders yield (`Term::transfer` to
    /// `Term::preferred().to`).
    Prefer,
}

impl FaultKind {
    /// Every kind, in the order of the spec.
    pub const ALL: [FaultKind; 36] = [
        FaultKind::Kill,
        FaultKind::Stop,
        FaultKind::Resign,
        FaultKind::Server,
        FaultKind::Node,
        FaultKind::Meta,
        FaultKind::Blackhole,
        FaultKind::Drop,
        FaultKind::Deafen,
        FaultKind::Clock,
        FaultKind::Cancel,
        FaultKind::Close,
        FaultKind::Unguarded,
        FaultKind::RowDelete,
        FaultKind::FenceDrop,
        FaultKind::Recreate,
        FaultKind::MaxAge,
        FaultKind::Rollback,
        FaultKind::PgTerminate,
        FaultKind::PgStop,
        FaultKind::SupKill,
        FaultKind::SupStop,
        FaultKind::GroupStop,
        FaultKind::FenceFiles,
        FaultKind::FenceRows,
        FaultKind::HardLink,
        FaultKind::Spellings,
        FaultKind::Nested,
        FaultKind::Reboot,
        FaultKind::Join,
        FaultKind::Leave,
        FaultKind::KeyDelete,
        FaultKind::Compact,
        FaultKind::Transfer,
        FaultKind::Revoke,
        FaultKind::Prefer,
    ];

    /// The kind's word in a history line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Stop => "stop",
            FaultKind::Resign => "resign",
            FaultKind::Server => "server",
            FaultKind::Node => "node",
            FaultKind::Meta => "meta",
            FaultKind::Blackhole => "blackhole",
            FaultKind::Drop => "drop",
            FaultKind::Deafen => "deafen",
            FaultKind::Clock => "clock",
            FaultKind::Cancel => "cancel",
            FaultKind::Close => "close",
            FaultKind::Unguarded => "unguarded",
            FaultKind::RowDelete => "rowdel",
            FaultKind::FenceDrop => "fdrop",
            FaultKind::Recreate => "recreate",
            FaultKind::MaxAge => "maxage",
            FaultKind::Rollback => "rollback",
            FaultKind::PgTerminate => "pgterm",
            FaultKind::PgStop => "pgstop",
            FaultKind::SupKill => "supkill",
            FaultKind::SupStop => "supstop",
            FaultKind::GroupStop => "groupstop",
            FaultKind::FenceFiles => "fencefiles",
            FaultKind::FenceRows => "fencerows",
            FaultKind::HardLink => "hardlink",
            FaultKind::Spellings => "spellings",
            FaultKind::Nested => "nested",
            FaultKind::Reboot => "reboot",
            FaultKind::Join => "join",
            FaultKind::Leave => "leave",
            FaultKind::KeyDelete => "keydel",
            FaultKind::Compact => "compact",
            FaultKind::Transfer => "transfer",
            FaultKind::Revoke => "revoke",
            FaultKind::Prefer => "prefer",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ParseError::new(format!("unknown fault kind {s:?}")))
    }
}

/// An event of the orchestrator's history (`faults.history`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultEvent {
    /// `spawn <writer> <pid>`: a candidate process started.
    Spawn {
        /// Its writer id (`c<slot>.<incarnation>`).
        writer: String,
        /// Its process id.
        pid: u32,
    },
    /// `fault <kind> <target> [detail...]`: a fault began.
    Fault {
        /// What kind.
        kind: FaultKind,
        /// What it hit: a writer id for faults on candidates, else a
        /// server or node name.
        target: String,
        /// Anything more (a clock jump's seconds); empty if nothing.
        detail: String,
    },
    /// `heal <kind> <target> [detail...]`: a fault ended.
    Heal {
        /// What kind.
        kind: FaultKind,
        /// What it had hit.
        target: String,
        /// Anything more; empty if nothing.
        detail: String,
    },
    /// `end`: the run is over and every fault is healed.
    End,
}

impl FaultEvent {
    /// A fault's beginning (`begins`) or its heal.
    pub fn fault_or_heal(
        begins: bool,
        kind: FaultKind,
        target: impl Into<String>,
        detail: impl Into<String>,
    ) -> FaultEvent {
        let (target, detail) = (target.into(), detail.into());
        if begins {
            FaultEvent::Fault {
                kind,
                target,
                detail,
            }
        } else {
            FaultEvent::Heal {
                kind,
                target,
                detail,
            }
        }
    }
}

impl fmt::Display for FaultEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (word, kind, target, detail) = match self {
            FaultEvent::Spawn { writer, pid } => return write!(f, "spawn {writer} {pid}"),
            FaultEvent::End => return f.write_str("end"),
            FaultEvent::Fault {
                kind,
                target,
                detail,
            } => ("fault", kind, target, detail),
            FaultEvent::Heal {
                kind,
                target,
                detail,
            } => ("heal", kind, target, detail),
        };
        write!(f, "{word} {kind} {target}")?;
        if !detail.trim().is_empty() {
            write!(f, " {}", one_line(detail))?;
        }
        Ok(())
    }
}

impl FromStr for FaultEvent {
    type Err = ParseError;

    /// Parses `<event> [fields...]`, the part of a line after the clocks.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (w, rest) = fields(s, 3);
        match w[0] {
            "spawn" => {
                if !rest.is_empty() {
                    return Err(ParseError::new(format!("unexpected {rest:?} after spawn")));
                }
                Ok(FaultEvent::Spawn {
                    writer: word(w[1], "writer")?.to_owned(),
                    pid: u32::try_from(number(w[2], "pid")?)
                        .map_err(|_| ParseError::new(format!("pid {:?} is out of range", w[2])))?,
                })
            }
            "end" => match fields(s, 1).1 {
                "" => Ok(FaultEvent::End),
                extra => Err(ParseError::new(format!("unexpected {extra:?} after end"))),
            },
            "fault" | "heal" => {
                let kind = word(w[1], "fault kind")?.parse()?;
                let target = word(w[2], "target")?.to_owned();
                Ok(FaultEvent::fault_or_heal(
                    w[0] == "fault",
                    kind,
                    target,
                    rest,
                ))
            }
            "" => Err(ParseError::new("the event is missing")),
            other => Err(ParseError::new(format!("unknown event {other:?}"))),
        }
    }
}

/// A history file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading the file (or listing the run directory) failed.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// A line does not parse.
    #[error("{}:{line}: {text:?}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        #[source]
        source: ParseError,
    },
}

/// Reads and parses a whole history file.
///
/// Failure model: [`HistoryError::Io`] if it cannot be read,
/// [`HistoryError::Parse`] for the first line that does not parse (also a
/// last line without its newline: every writer ends each line with one in
/// a single write, so a torn line means something else wrote the file).
pub fn read<E: FromStr<Err = ParseError>>(path: &Path) -> Result<Vec<Line<E>>, HistoryError> {
    let io_error = |source| HistoryError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_error)?);
    let mut lines = Vec::new();
    let mut buf = String::new();
    for number in 1.. {
        buf.clear();
        if reader.read_line(&mut buf).map_err(io_error)? == 0 {
            break;
        }
        let parse_error = |source| HistoryError::Parse {
            path: path.to_owned(),
            line: number,
            text: buf.trim_end().to_owned(),
            source,
        };
        let Some(text) = buf.strip_suffix('\n') else {
            return Err(parse_error(ParseError::new("the line has no end")));
        };
        if text.trim().is_empty() {
            continue;
        }
        lines.push(text.parse().map_err(parse_error)?);
    }
    Ok(lines)
}

/// Appends lines to one history file: each line is stamped with
/// [`mono_ns`] and [`wall_ms`] and handed to the kernel in one write
/// before the call returns (a killed process loses none of them).
///
/// One writer per file: [`create`](HistoryWriter::create) refuses a file
/// that exists. The writer can be shared between threads and tasks (each
/// line is written whole under a lock); stamps are taken under the lock,
/// so the lines of one file are in `mono_ns` order.
#[derive(Debug)]
pub struct HistoryWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl HistoryWriter {
    /// Creates the history file `path`, which must not exist yet.
    ///
    /// Failure model: the `io::Error` of creating it
    /// (`ErrorKind::AlreadyExists` if it exists).
    pub fn create(path: impl AsRef<Path>) -> io::Result<HistoryWriter> {
        let path = path.as_ref().to_owned();
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)?;
        Ok(HistoryWriter {
            path,
            file: Mutex::new(file),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `<mono_ns> <wall_ms> <event>` stamped now; returns the
    /// `mono_ns` stamp (the same number a caller can report elsewhere,
    /// such as on stdout).
    ///
    /// `event` is a [`CandidateEvent`] or a [`FaultEvent`] (or anything
    /// whose `Display` is one line in their format).
    pub fn record(&self, event: &impl fmt::Display) -> io::Result<u64> {
        self.record_at(None, event)
    }

    /// Like [`record`](HistoryWriter::record), stamped with `mono` (taken
    /// earlier with [`mono_ns`]) if given: a `write` is stamped before the
    /// writer's last check of its lease, so the checker sees when the
    /// writer last believed it led.
    ///
    /// Failure model: as [`record`](HistoryWriter::record).
    pub fn record_at(&self, mono: Option<u64>, event: &impl fmt::Display) -> io::Result<u64> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let mono = mono.unwrap_or_else(mono_ns);
        let line = format!("{mono} {} {event}\n", wall_ms());
        file.write_all(line.as_bytes())?;
        file.flush()?;
        Ok(mono)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<E>(event: E)
    where
        E: FromStr<Err = ParseError> + fmt::Display + fmt::Debug + PartialEq + Clone,
    {
        let line = Line {
            mono_ns: 12,
            wall_ms: 34,
            event: event.clone(),
        };
        let text = line.to_string();
        assert_eq!(text.parse::<Line<E>>(), Ok(line), "{text}");
    }

    #[test]
    fn candidate_events_round_trip() {
        for e in [
            CandidateEvent::Start { pid: 4711 },
            CandidateEvent::Campaigning,
            CandidateEvent::Elected { epoch: 3 },
            CandidateEvent::Write { seq: 1, epoch: 3 },
            CandidateEvent::Unguarded { seq: 9, epoch: 1 },
            CandidateEvent::Ok { seq: 1, epoch: 3 },
            CandidateEvent::Stale {
                seq: 2,
                epoch: 3,
                mark: 4,
            },
            CandidateEvent::Error {
                seq: 3,
                epoch: 3,
                text: "database is busy: locked".into(),
            },
            CandidateEvent::Lost {
                epoch: 3,
                text: "the lease expired".into(),
            },
            CandidateEvent::Resigned { epoch: 3 },
        ] {
            round_trip(e);
        }
    }

    #[test]
    fn fault_events_round_trip() {
        for e in [
            FaultEvent::Spawn {
                writer: "c0.1".into(),
                pid: 99,
            },
            FaultEvent::Fault {
                kind: FaultKind::Clock,
                target: "c1.2".into(),
                detail: "-3600".into(),
            },
            FaultEvent::Heal {
                kind: FaultKind::Meta,
                target: "n2".into(),
                detail: String::new(),
            },
            FaultEvent::End,
        ] {
            round_trip(e);
        }
        for k in FaultKind::ALL {
            assert_eq!(k.name().parse(), Ok(k));
        }
    }

    #[test]
    fn text_is_kept_on_one_line() {
        let e = CandidateEvent::Lost {
            epoch: 1,
            text: "first\nsecond".into(),
        };
        assert_eq!(e.to_string(), "lost 1 first second");
        let e = CandidateEvent::Error {
            seq: 1,
            epoch: 1,
            text: String::new(),
        };
        assert_eq!(e.to_string(), "error 1 1 -");
    }

    #[test]
    fn bad_lines_are_refused() {
        for bad in [
            "",
            "12",
            "12 34",
            "x 34 campaigning",
            "12 34 elected",
            "12 34 elected x",
            "12 34 elected 1 2",
            "12 34 write 1",
            "12 34 stale 1 2",
            "12 34 wrote 1 2",
            "12 34 campaigning now",
        ] {
            assert!(bad.parse::<Line<CandidateEvent>>().is_err(), "{bad:?}");
        }
        for bad in [
            "12 34 fault",
            "12 34 fault fire c1",
            "12 34 heal kill",
            "12 34 spawn c1.1",
            "12 34 end now",
        ] {
            assert!(bad.parse::<Line<FaultEvent>>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn writer_appends_lines_in_order_and_refuses_a_second_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FAULTS_FILE);
        let w = HistoryWriter::create(&path).unwrap();
        let a = w
            .record(&FaultEvent::Spawn {
                writer: "c0.1".into(),
                pid: 1,
            })
            .unwrap();
        let b = w.record(&FaultEvent::End).unwrap();
        assert!(a <= b && a > 0);
        let lines = read::<FaultEvent>(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].mono_ns, b);
        assert_eq!(lines[1].event, FaultEvent::End);
        let again = HistoryWriter::create(&path).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn a_torn_or_bad_line_names_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("candidate-c0.1.history");
        std::fs::write(&path, "1 2 campaigning\n3 4 elected 1").unwrap();
        match read::<CandidateEvent>(&path) {
            Err(HistoryError::Parse { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        std::fs::write(&path, "1 2 campaigning\n\n3 4 elected 1\n").unwrap();
        assert_eq!(read::<CandidateEvent>(&path).unwrap().len(), 2);
    }
}
