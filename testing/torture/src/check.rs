//! The checker: pure functions from a run's histories and the resource's
//! records to a [`Report`].
//!
//! [`RunHistory::load`] reads a run directory (every
//! `candidate-<writer>.history` and `faults.history`); the caller reads
//! the resource's records ([`crate::resource::read_records`]); [`check`]
//! proves the seven properties, or reports a [`Violation`] for each breach:
//!
//! 1. **Terms**: all `elected` events, in `mono_ns` order, have strictly
//!    increasing epochs (no epoch twice, never a lower one).
//! 2. **Fence**: the resource's records, in resource order, have
//!    non-decreasing epochs.
//! 3. **No late write**: no write of a term is accepted after a write of a
//!    later term (the same condition as 2, reported with both records).
//! 4. **Records match histories**: every `ok` is in the resource (writer,
//!    seq, epoch); every record was attempted (`write`) by that writer
//!    with that seq and epoch, only once, and not refused (`stale`).
//! 5. **Liveness**: after the last `heal`, a leader exists within the
//!    caller's bound: a term alive at the heal, or an `elected` at most
//!    `bound` after it.
//! 6. **One actor**: no writer begins a write of a term (its `write` line,
//!    stamped before its last check of the lease) after a later term was
//!    elected (reported once per writer and term); and no write of a term the writer gave up (`resigned`, which
//!    includes a dropped `lead()`) is still running when a later term is
//!    elected (its answer comes after that `elected`). A write already
//!    running when its term was *lost* may finish late: that is what the
//!    fence is for (checks 2-3).
//! 7. **Unguarded writes**: a write made with an `election_core::unguarded`
//!    token (`unguarded` line) never lands after a term's write: its token
//!    must be lower than every term's.
//!
//! ```
//! use std::time::Duration;
//! use torture::check::{check, CheckOptions, RunHistory};
//! use torture::history::{CandidateEvent, Line};
//! use torture::resource::Record;
//!
//! let line = |mono_ns, event| Line { mono_ns, wall_ms: 0, event };
//! let mut run = RunHistory::default();
//! run.candidates.insert("c0.1".into(), vec![
//!     line(10, CandidateEvent::Elected { epoch: 1 }),
//!     line(20, CandidateEvent::Write { seq: 1, epoch: 1 }),
//!     line(30, CandidateEvent::Ok { seq: 1, epoch: 1 }),
//! ]);
//! let records = [Record { writer: "c0.1".into(), seq: 1, epoch: 1 }];
//! let report = check(&run, &records, &CheckOptions::new(Duration::from_secs(5)));
//! assert!(report.is_safe(), "{report}");
//! assert_eq!((report.terms, report.writes_ok), (1, 1));
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::history::{
    self, CandidateEvent, FAULTS_FILE, FaultEvent, FaultKind, HistoryError, Line,
};
use crate::resource::Record;

/// How many violations a [`Report`]'s summary shows in full.
pub const VIOLATIONS_SHOWN: usize = 10;

/// Every history of one run, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunHistory {
    /// Each candidate process's history, by writer id.
    pub candidates: BTreeMap<String, Vec<Line<CandidateEvent>>>,
    /// The orchestrator's history (empty if the run has none).
    pub faults: Vec<Line<FaultEvent>>,
}

impl RunHistory {
    /// Reads every `candidate-<writer>.history` and `faults.history` in
    /// `dir` (a missing `faults.history` counts as empty).
    ///
    /// Failure model: [`HistoryError::Io`] if the directory or a file
    /// cannot be read, [`HistoryError::Parse`] for the first bad line.
    pub fn load(dir: &Path) -> Result<RunHistory, HistoryError> {
        let io_error = |source| HistoryError::Io {
            path: dir.to_owned(),
            source,
        };
        let mut run = RunHistory::default();
        for entry in std::fs::read_dir(dir).map_err(io_error)? {
            let entry = entry.map_err(io_error)?;
            let name = entry.file_name();
            let Some(writer) = name.to_str().and_then(history::writer_of) else {
                continue;
            };
            run.candidates
                .insert(writer.to_owned(), history::read(&entry.path())?);
        }
        let faults = dir.join(FAULTS_FILE);
        if faults.exists() {
            run.faults = history::read(&faults)?;
        }
        Ok(run)
    }
}

/// What the caller decides: the liveness bound, and what the summary
/// should say about reproducing the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Check 5: how soon after the last heal a leader must exist.
    pub liveness_bound: Duration,
    /// The run's seed, shown in the summary.
    pub seed: Option<u64>,
    /// The command that reproduces the run, shown when it failed.
    pub command: Option<String>,
}

impl CheckOptions {
    /// Options with this liveness bound, no seed and no command.
    pub fn new(liveness_bound: Duration) -> CheckOptions {
        CheckOptions {
            liveness_bound,
            seed: None,
            command: None,
        }
    }
}

/// An `elected` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elected {
    /// Who was elected.
    pub writer: String,
    /// The term's epoch.
    pub epoch: u64,
    /// When (CLOCK_MONOTONIC ns).
    pub mono_ns: u64,
}

impl fmt::Display for Elected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} elected in term {} at {}",
            self.writer, self.epoch, self.mono_ns
        )
    }
}

/// A record and its position in the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The position, from 1, in resource order.
    pub index: usize,
    /// The record.
    pub record: Record,
}

impl fmt::Display for Placed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.record;
        write!(
            f,
            "record #{} ({} seq {}, term {})",
            self.index, r.writer, r.seq, r.epoch
        )
    }
}

/// A breach of one of the checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Check 1: a term was elected after a term of an equal or higher
    /// epoch.
    TermsOutOfOrder {
        /// The highest term elected before `later`.
        earlier: Elected,
        /// The term whose epoch did not grow.
        later: Elected,
    },
    /// Check 1: a term had an operator's revocation's epoch, which no
    /// candidate may hold, or was elected after the revocation with an
    /// epoch below it (other than the deposed term's own, announced late).
    BelowRevocation {
        /// The revocation: its epoch, stamped when the orchestrator had it
        /// back (the `revoke` heal line; its writer names the deposed).
        revocation: Elected,
        /// The term.
        term: Elected,
    },
    /// Checks 2 and 3: the resource accepted a write of an older term
    /// after a write of a newer one.
    StaleWriteAccepted {
        /// The first record of the newest term before `older`.
        newer: Placed,
        /// The late record of an older term.
        older: Placed,
    },
    /// Check 4: a write its writer saw acknowledged is not in the
    /// resource.
    AckedWriteMissing {
        /// The writer.
        writer: String,
        /// The write's seq.
        seq: u64,
        /// The write's epoch.
        epoch: u64,
        /// When the writer recorded `ok`.
        mono_ns: u64,
    },
    /// Check 4: a record no writer attempted (no `write <seq> <epoch>` in
    /// its writer's history).
    RecordNotAttempted {
        /// The record.
        record: Placed,
    },
    /// Check 4: a record in the resource whose writer was told the fence
    /// refused it.
    RefusedWriteLanded {
        /// The record.
        record: Placed,
        /// The mark the writer was told refused it.
        mark: u64,
    },
    /// Check 4: one attempt is in the resource twice.
    DuplicateRecord {
        /// The first copy.
        first: Placed,
        /// The second copy.
        again: Placed,
    },
    /// Check 6: a writer began a write of its term after a later term was
    /// elected: it acted while deposed (the first such write of each of
    /// its terms).
    DeposedWrite {
        /// The writer.
        writer: String,
        /// The write's seq.
        seq: u64,
        /// Its term.
        epoch: u64,
        /// When it began (its `write` line).
        began_ns: u64,
        /// The first later term elected before it.
        newer: Elected,
    },
    /// Check 6: a write of a term its writer had given up (`resigned`)
    /// was still running when a later term was elected.
    WorkOutlivedTerm {
        /// The writer.
        writer: String,
        /// The write's seq.
        seq: u64,
        /// Its term.
        epoch: u64,
        /// When the writer gave the term up.
        resigned_ns: u64,
        /// When the write's answer came.
        answered_ns: u64,
        /// The later term elected before the answer.
        newer: Elected,
    },
    /// Check 7: an unguarded write landed after a term's write.
    UnguardedWriteAccepted {
        /// The first record of a term before it.
        guarded: Placed,
        /// The unguarded record.
        unguarded: Placed,
    },
    /// Check 8: a term handed to a named successor (`transfer`) was won
    /// by another candidate within the window, before the successor.
    ReservedNameTaken {
        /// Who handed its term over.
        from: String,
        /// The successor it named.
        to: String,
        /// When the orchestrator told it to (the handover was stored
        /// later).
        told_ns: u64,
        /// The window.
        window: Duration,
        /// The term won meanwhile.
        term: Elected,
    },
    /// Check 5: no leader within the bound after the last heal.
    NoLeaderAfterHeal {
        /// When the last fault healed.
        heal_ns: u64,
        /// The bound.
        bound: Duration,
        /// The first `elected` after the heal, if any.
        next_elected_ns: Option<u64>,
    },
}

impl Violation {
    /// Which of the checks this breaches (2 for checks 2 and 3).
    pub fn check(&self) -> u8 {
        match self {
            Violation::DeposedWrite { .. } | Violation::WorkOutlivedTerm { .. } => 6,
            Violation::UnguardedWriteAccepted { .. } => 7,
            Violation::TermsOutOfOrder { .. } | Violation::BelowRevocation { .. } => 1,
            Violation::StaleWriteAccepted { .. } => 2,
            Violation::AckedWriteMissing { .. }
            | Violation::RecordNotAttempted { .. }
            | Violation::RefusedWriteLanded { .. }
            | Violation::DuplicateRecord { .. } => 4,
            Violation::NoLeaderAfterHeal { .. } => 5,
            Violation::ReservedNameTaken { .. } => 8,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::TermsOutOfOrder { earlier, later } => write!(
                f,
                "check 1 (terms): {later}, after {earlier}: epochs must grow strictly"
            ),
            Violation::BelowRevocation { revocation, term } => write!(
                f,
                "check 1 (terms): {term}, against the revocation of epoch {} at {} ({}): no candidate holds a revocation's epoch, and later terms are above it",
                revocation.epoch, revocation.mono_ns, revocation.writer
            ),
            Violation::StaleWriteAccepted { newer, older } => write!(
                f,
                "checks 2-3 (fence): {older} was accepted after {newer}: a stale epoch got in"
            ),
            Violation::AckedWriteMissing {
                writer,
                seq,
                epoch,
                mono_ns,
            } => write!(
                f,
                "check 4 (records): {writer} seq {seq}, term {epoch} was acknowledged (ok at {mono_ns}) but is not in the resource"
            ),
            Violation::RecordNotAttempted { record } => write!(
                f,
                "check 4 (records): {record} was never attempted: no `write {} {}` in {}'s history",
                record.record.seq, record.record.epoch, record.record.writer
            ),
            Violation::RefusedWriteLanded { record, mark } => write!(
                f,
                "check 4 (records): {record} is in the resource, but its writer was told the fence refused it (mark {mark})"
            ),
            Violation::DuplicateRecord { first, again } => write!(
                f,
                "check 4 (records): {again} repeats {first}: one attempt landed twice"
            ),
            Violation::DeposedWrite {
                writer,
                seq,
                epoch,
                began_ns,
                newer,
            } => write!(
                f,
                "check 6 (one actor): {writer} began seq {seq} in term {epoch} at {began_ns}, after {newer}: a deposed leader acted"
            ),
            Violation::WorkOutlivedTerm {
                writer,
                seq,
                epoch,
                resigned_ns,
                answered_ns,
                newer,
            } => write!(
                f,
                "check 6 (one actor): {writer} gave term {epoch} up at {resigned_ns}, but its write seq {seq} ran until {answered_ns}, after {newer}: the term's work outlived it"
            ),
            Violation::UnguardedWriteAccepted { guarded, unguarded } => write!(
                f,
                "check 7 (unguarded): {unguarded}, an unguarded write, was accepted after {guarded}"
            ),
            Violation::ReservedNameTaken {
                from,
                to,
                told_ns,
                window,
                term,
            } => write!(
                f,
                "check 8 (transfer): {from}, told at {told_ns} to hand its term to {to} for {}, did; {term}, within the window: only the successor may win it",
                secs(*window)
            ),
            Violation::NoLeaderAfterHeal {
                heal_ns,
                bound,
                next_elected_ns,
            } => {
                write!(
                    f,
                    "check 5 (liveness): no leader within {} of the last heal at {heal_ns}",
                    secs(*bound)
                )?;
                match next_elected_ns {
                    Some(t) => write!(
                        f,
                        " (the next elected came {} after it)",
                        secs(Duration::from_nanos(t.saturating_sub(*heal_ns)))
                    ),
                    None => f.write_str(" (nobody was elected after it)"),
                }
            }
        }
    }
}

/// A time without a leader: from a term's end to the next `elected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// When the last live term ended (CLOCK_MONOTONIC ns).
    pub from_ns: u64,
    /// When the next term began.
    pub to_ns: u64,
}

impl Gap {
    /// How long it lasted.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.to_ns.saturating_sub(self.from_ns))
    }
}

/// What the checker found: the run's figures and every violation.
///
/// `Display` is the summary printed at the end of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The run's seed, if the caller gave it.
    pub seed: Option<u64>,
    /// The command that reproduces the run, if the caller gave it.
    pub command: Option<String>,
    /// From the first line of any history to the last.
    pub duration: Duration,
    /// How many candidate processes (histories) took part.
    pub candidates: usize,
    /// How many terms began (`elected` events).
    pub terms: usize,
    /// How many faults of each kind began.
    pub faults_by_kind: BTreeMap<FaultKind, usize>,
    /// Writes acknowledged (`ok`).
    pub writes_ok: usize,
    /// Writes the fence refused (`stale`).
    pub writes_stale: usize,
    /// Writes whose outcome is unknown (`error`).
    pub writes_unknown: usize,
    /// Writes attempted with no outcome recorded (the process died or the
    /// run ended first).
    pub writes_unanswered: usize,
    /// Records in the resource.
    pub records: usize,
    /// The longest time with no live term between a term's end and the
    /// next `elected`; `None` if there was none.
    pub longest_leaderless_gap: Option<Gap>,
    /// When the last fault healed, if any did.
    pub last_heal_ns: Option<u64>,
    /// How long after the last heal a leader existed (zero if a term was
    /// alive at the heal); `None` if no heal or no leader after it.
    pub leader_after_heal: Option<Duration>,
    /// The bound check 5 used.
    pub liveness_bound: Duration,
    /// Every violation found, by check.
    pub violations: Vec<Violation>,
    /// Deposed leaders that acted after a newer term was elected across an
    /// operator's action: a bucket recreated meanwhile, or the election's
    /// key deleted by hand (`keydel`) with no other fault since. Not a
    /// violation (docs/safety.md, "What an operator must never touch":
    /// only the fence protects there, ADR 0015), reported so a run shows
    /// the exposure.
    pub across_operator: Vec<Violation>,
}

impl Report {
    /// True if no check found a violation.
    pub fn is_safe(&self) -> bool {
        self.violations.is_empty()
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_safe() {
            writeln!(f, "torture: no violations")?;
        } else {
            writeln!(f, "torture: {} VIOLATIONS", self.violations.len())?;
        }
        if let Some(seed) = self.seed {
            writeln!(f, "  seed        {seed}")?;
        }
        writeln!(f, "  duration    {}", secs(self.duration))?;
        writeln!(f, "  candidates  {} processes", self.candidates)?;
        writeln!(f, "  terms       {}", self.terms)?;
        let faults: Vec<String> = self
            .faults_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if faults.is_empty() {
            writeln!(f, "  faults      none")?;
        } else {
            writeln!(f, "  faults      {}", faults.join(", "))?;
        }
        writeln!(
            f,
            "  writes      {} ok, {} stale, {} error (outcome unknown), {} unanswered",
            self.writes_ok, self.writes_stale, self.writes_unknown, self.writes_unanswered
        )?;
        writeln!(f, "  records     {} in the resource", self.records)?;
        match self.longest_leaderless_gap {
            Some(g) => writeln!(
                f,
                "  leaderless  longest gap {} (from {} to {})",
                secs(g.duration()),
                g.from_ns,
                g.to_ns
            )?,
            None => writeln!(f, "  leaderless  no gap between terms")?,
        }
        match (self.last_heal_ns, self.leader_after_heal) {
            (None, _) => writeln!(f, "  liveness    no fault healed; not checked")?,
            (Some(_), Some(d)) => writeln!(
                f,
                "  liveness    a leader {} after the last heal (bound {})",
                secs(d),
                secs(self.liveness_bound)
            )?,
            (Some(_), None) => writeln!(
                f,
                "  liveness    no leader after the last heal (bound {})",
                secs(self.liveness_bound)
            )?,
        }
        if let Some(first) = self.across_operator.first() {
            writeln!(
                f,
                "  operator    {} deposed leader(s) acted across an operator's action, a recreated bucket or a key deleted by hand (not a violation: only the fence protects there, ADR 0015; first: {first})",
                self.across_operator.len(),
            )?;
        }
        if self.is_safe() {
            writeln!(f, "  violations  none")?;
        } else {
            writeln!(
                f,
                "  violations  {} (times are CLOCK_MONOTONIC ns, as in the histories)",
                self.violations.len()
            )?;
            for (i, v) in self.violations.iter().take(VIOLATIONS_SHOWN).enumerate() {
                writeln!(f, "    {}. {v}", i + 1)?;
            }
            if self.violations.len() > VIOLATIONS_SHOWN {
                writeln!(
                    f,
                    "    ... and {} more",
                    self.violations.len() - VIOLATIONS_SHOWN
                )?;
            }
            if let Some(seed) = self.seed {
                writeln!(f, "  seed        {seed}")?;
            }
            if let Some(command) = &self.command {
                writeln!(f, "  reproduce   {command}")?;
            }
        }
        Ok(())
    }
}

/// `--lease-sets` mode: the single-election checks run once per key, on
/// that key's histories (`<dir>/keys/<key>/candidate-<writer>.history`),
/// the run's `faults.history` and that key's resource records: per key,
/// terms grow strictly (1), its fence let no stale epoch in (2, 3), its
/// records match its histories (4), a holder exists within the bound after
/// the last heal (5), no member began a write of a term after a later
/// term of that key was elected and no write of a term given back
/// (`resigned`: released by balancing or on leaving) outlived it (6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeysReport {
    /// The run's seed, if the caller gave it.
    pub seed: Option<u64>,
    /// The command that reproduces the run, if the caller gave it.
    pub command: Option<String>,
    /// Each key's report, by key.
    pub keys: BTreeMap<String, Report>,
}

impl KeysReport {
    /// True if no key's check found a violation.
    pub fn is_safe(&self) -> bool {
        self.keys.values().all(Report::is_safe)
    }

    /// Every violation, with its key.
    pub fn violations(&self) -> impl Iterator<Item = (&str, &Violation)> {
        self.keys
            .iter()
            .flat_map(|(k, r)| r.violations.iter().map(move |v| (k.as_str(), v)))
    }
}

impl fmt::Display for KeysReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.violations().count();
        if count == 0 {
            writeln!(f, "torture: lease sets: no violations")?;
        } else {
            writeln!(f, "torture: lease sets: {count} VIOLATIONS")?;
        }
        if let Some(seed) = self.seed {
            writeln!(f, "  seed        {seed}")?;
        }
        let sum = |g: fn(&Report) -> usize| self.keys.values().map(g).sum::<usize>();
        let writers: std::collections::BTreeSet<usize> =
            self.keys.values().map(|r| r.candidates).collect();
        writeln!(
            f,
            "  keys        {} (each checked alone: checks 1-7 per key), {} member processes",
            self.keys.len(),
            writers.last().copied().unwrap_or(0)
        )?;
        writeln!(f, "  terms       {} (all keys)", sum(|r| r.terms))?;
        if let Some(r) = self.keys.values().next() {
            let faults: Vec<String> = r
                .faults_by_kind
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            writeln!(
                f,
                "  faults      {}",
                if faults.is_empty() {
                    "none".to_owned()
                } else {
                    faults.join(", ")
                }
            )?;
        }
        writeln!(
            f,
            "  writes      {} ok, {} stale (refused by a key's fence), {} error, {} unanswered",
            sum(|r| r.writes_ok),
            sum(|r| r.writes_stale),
            sum(|r| r.writes_unknown),
            sum(|r| r.writes_unanswered)
        )?;
        writeln!(
            f,
            "  records     {} in the keys' resources",
            sum(|r| r.records)
        )?;
        if let Some((key, gap)) = self
            .keys
            .iter()
            .filter_map(|(k, r)| r.longest_leaderless_gap.map(|g| (k, g)))
            .max_by_key(|(_, g)| g.duration())
        {
            writeln!(
                f,
                "  leaderless  longest gap of a key {} ({key})",
                secs(gap.duration())
            )?;
        }
        if let Some((key, d)) = self
            .keys
            .iter()
            .filter_map(|(k, r)| r.leader_after_heal.map(|d| (k, d)))
            .max_by_key(|(_, d)| *d)
        {
            writeln!(
                f,
                "  liveness    every key held at most {} after the last heal ({key}; bound {})",
                secs(d),
                secs(self.keys[key].liveness_bound)
            )?;
        }
        if count == 0 {
            writeln!(f, "  violations  none")?;
        } else {
            writeln!(f, "  violations  {count} (times are CLOCK_MONOTONIC ns)")?;
            for (i, (key, v)) in self.violations().take(VIOLATIONS_SHOWN).enumerate() {
                writeln!(f, "    {}. {key}: {v}", i + 1)?;
            }
            if count > VIOLATIONS_SHOWN {
                writeln!(f, "    ... and {} more", count - VIOLATIONS_SHOWN)?;
            }
            if let Some(command) = &self.command {
                writeln!(f, "  reproduce   {command}")?;
            }
        }
        Ok(())
    }
}

/// Checks a `--lease-sets` run directory: each key of `records` (key ->
/// its resource's records, in resource order) with its own histories
/// under `<dir>/keys/<key>/` and the run's `faults.history`.
///
/// Failure model: [`HistoryError`] for the first history that cannot be
/// read or parsed.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::time::Duration;
/// use torture::check::{check_keys, CheckOptions};
/// use torture::history::{self, CandidateEvent, HistoryWriter};
/// use torture::resource::Record;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tmp = tempfile::tempdir()?;
/// let dir = tmp.path().join("keys/key-0000");
/// std::fs::create_dir_all(&dir)?;
/// let h = HistoryWriter::create(dir.join(history::candidate_file_name("m0.1")))?;
/// h.record(&CandidateEvent::Elected { epoch: 3 })?;
/// h.record(&CandidateEvent::Write { seq: 1, epoch: 3 })?;
/// h.record(&CandidateEvent::Ok { seq: 1, epoch: 3 })?;
/// let records = BTreeMap::from([(
///     "key-0000".to_owned(),
///     vec![Record { writer: "m0.1".into(), seq: 1, epoch: 3 }],
/// )]);
/// let report = check_keys(tmp.path(), &records, &CheckOptions::new(Duration::from_secs(5)))?;
/// assert!(report.is_safe(), "{report}");
/// assert_eq!(report.keys["key-0000"].writes_ok, 1);
/// # Ok(()) }
/// ```
pub fn check_keys(
    dir: &Path,
    records: &BTreeMap<String, Vec<Record>>,
    options: &CheckOptions,
) -> Result<KeysReport, HistoryError> {
    let faults = RunHistory::load(dir)?.faults;
    let mut keys = BTreeMap::new();
    for (key, records) in records {
        let mut run = RunHistory::load(&dir.join("keys").join(key))?;
        // Each key's own revocations (a heal line ending `key <k>`).
        run.faults = faults
            .iter()
            .filter(|line| revoked_key(&line.event).is_none_or(|k| k == key))
            .cloned()
            .collect();
        keys.insert(key.clone(), check(&run, records, options));
    }
    Ok(KeysReport {
        seed: options.seed,
        command: options.command.clone(),
        keys,
    })
}

/// The key a lease-set run's `revoke` heal line names (`... key <k>`).
fn revoked_key(event: &FaultEvent) -> Option<&str> {
    match event {
        FaultEvent::Heal {
            kind: FaultKind::Revoke,
            detail,
            ..
        } => match detail.split_whitespace().collect::<Vec<_>>().as_slice() {
            [.., "key", key] => Some(*key),
            _ => None,
        },
        _ => None,
    }
}

/// A term as the histories show it.
#[derive(Clone, Debug)]
struct TermSpan {
    start: u64,
    /// `None`: alive until the end of the run.
    end: Option<u64>,
}

impl TermSpan {
    fn alive_at(&self, t: u64) -> bool {
        self.start <= t && self.end.is_none_or(|e| e > t)
    }
}

/// Whether a fault's target names `writer` (its id, or its slot `c<n>`).
fn targets(target: &str, writer: &str) -> bool {
    target == writer
        || writer
            .split_once('.')
            .is_some_and(|(slot, _)| slot == target)
}

/// Reads a run directory and checks it against `records`: [`RunHistory::load`]
/// then [`check`].
pub fn check_dir(
    dir: &Path,
    records: &[Record],
    options: &CheckOptions,
) -> Result<Report, HistoryError> {
    Ok(check(&RunHistory::load(dir)?, records, options))
}

/// Runs the checks over `run` and the resource's `records` (in
/// resource order).
pub fn check(run: &RunHistory, records: &[Record], options: &CheckOptions) -> Report {
    let mut violations = Vec::new();
    let elected = elected_events(run);
    check_terms(&elected, &mut violations);
    check_revocations(run, &elected, &mut violations);
    check_transfers(run, &elected, &mut violations);
    let unguarded = unguarded_attempts(run);
    check_fence(records, &unguarded, &mut violations);
    check_records(run, records, &mut violations);
    let mut across_operator = Vec::new();
    check_one_actor(run, &elected, &mut violations, &mut across_operator);
    check_unguarded(records, &unguarded, &mut violations);
    let spans = term_spans(run);
    let last_heal_ns = run
        .faults
        .iter()
        .filter(|l| matches!(l.event, FaultEvent::Heal { .. }))
        .map(|l| l.mono_ns)
        .max();
    let mut leader_after_heal = None;
    if let Some(heal) = last_heal_ns {
        let next_elected = elected.iter().map(|e| e.mono_ns).find(|&t| t > heal);
        leader_after_heal = if spans.iter().any(|s| s.alive_at(heal)) {
            Some(Duration::ZERO)
        } else {
            next_elected.map(|t| Duration::from_nanos(t - heal))
        };
        if leader_after_heal.is_none_or(|d| d > options.liveness_bound) {
            violations.push(Violation::NoLeaderAfterHeal {
                heal_ns: heal,
                bound: options.liveness_bound,
                next_elected_ns: next_elected,
            });
        }
    }
    violations.sort_by_key(Violation::check);

    let mut report = Report {
        seed: options.seed,
        command: options.command.clone(),
        duration: duration(run),
        candidates: run.candidates.len(),
        terms: elected.len(),
        faults_by_kind: BTreeMap::new(),
        writes_ok: 0,
        writes_stale: 0,
        writes_unknown: 0,
        writes_unanswered: 0,
        records: records.len(),
        longest_leaderless_gap: longest_gap(&spans),
        last_heal_ns,
        leader_after_heal,
        liveness_bound: options.liveness_bound,
        violations,
        across_operator,
    };
    for line in &run.faults {
        if let FaultEvent::Fault { kind, .. } = line.event {
            *report.faults_by_kind.entry(kind).or_default() += 1;
        }
    }
    for lines in run.candidates.values() {
        let mut answered = HashSet::new();
        let mut attempted = 0;
        for line in lines {
            match &line.event {
                CandidateEvent::Write { .. } | CandidateEvent::Unguarded { .. } => attempted += 1,
                CandidateEvent::Ok { seq, .. } => {
                    report.writes_ok += 1;
                    answered.insert(*seq);
                }
                CandidateEvent::Stale { seq, .. } => {
                    report.writes_stale += 1;
                    answered.insert(*seq);
                }
                CandidateEvent::Error { seq, .. } => {
                    report.writes_unknown += 1;
                    answered.insert(*seq);
                }
                _ => {}
            }
        }
        report.writes_unanswered += attempted - answered.len().min(attempted);
    }
    report
}

fn elected_events(run: &RunHistory) -> Vec<Elected> {
    let mut elected: Vec<Elected> = run
        .candidates
        .iter()
        .flat_map(|(writer, lines)| {
            lines.iter().filter_map(move |l| match l.event {
                CandidateEvent::Elected { epoch } => Some(Elected {
                    writer: writer.clone(),
                    epoch,
                    mono_ns: l.mono_ns,
                }),
                _ => None,
            })
        })
        .collect();
    // Ties in time (never expected) are ordered by epoch, not reported.
    elected.sort_by_key(|e| (e.mono_ns, e.epoch));
    elected
}

/// Check 1.
fn check_terms(elected: &[Elected], violations: &mut Vec<Violation>) {
    let mut highest: Option<&Elected> = None;
    for e in elected {
        match highest {
            Some(h) if e.epoch <= h.epoch => violations.push(Violation::TermsOutOfOrder {
                earlier: h.clone(),
                later: e.clone(),
            }),
            _ => highest = Some(e),
        }
    }
}

/// Check 1 for operators' revocations (`revoke`): their epoch is drawn
/// like a term's but held by no candidate. Each `heal revoke` line's
/// detail `deposed <identity> <epoch> revocation <epoch> ...` gives them:
/// no candidate's term has the revocation's epoch, and every term elected
/// after the heal line is above it (but the deposed term itself, whose
/// `elected` line may come late).
fn check_revocations(run: &RunHistory, elected: &[Elected], violations: &mut Vec<Violation>) {
    for line in &run.faults {
        let FaultEvent::Heal {
            kind: FaultKind::Revoke,
            detail,
            ..
        } = &line.event
        else {
            continue;
        };
        let words: Vec<&str> = detail.split_whitespace().collect();
        let (Some(&"deposed"), Some(who), Some(deposed), Some(&"revocation"), Some(epoch)) = (
            words.first(),
            words.get(1),
            words.get(2).and_then(|w| w.parse::<u64>().ok()),
            words.get(3),
            words.get(4).and_then(|w| w.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let revocation = Elected {
            writer: format!("revoked from {who} in term {deposed}"),
            epoch,
            mono_ns: line.mono_ns,
        };
        for term in elected {
            let below_after =
                term.mono_ns > line.mono_ns && term.epoch < epoch && term.epoch != deposed;
            if term.epoch == epoch || below_after {
                violations.push(Violation::BelowRevocation {
                    revocation: revocation.clone(),
                    term: term.clone(),
                });
            }
        }
    }
}

/// Check 8: a transfer reserves the name for its successor. Each `fault
/// transfer <writer> to <successor> <how> window <ms>ms` line whose
/// writer's next end of a term is `resigned` (the transfer was made; a
/// refused one leaves the term going on, a failed one is `lost`): no
/// other candidate is elected within the window of the line (the
/// handover was stored after it), until the successor is.
fn check_transfers(run: &RunHistory, elected: &[Elected], violations: &mut Vec<Violation>) {
    for line in &run.faults {
        let FaultEvent::Fault {
            kind: FaultKind::Transfer,
            target,
            detail,
        } = &line.event
        else {
            continue;
        };
        let words: Vec<&str> = detail.split_whitespace().collect();
        let (Some(&"to"), Some(to), Some(&"window"), Some(ms)) = (
            words.first(),
            words.get(1),
            words.get(3),
            words
                .get(4)
                .and_then(|w| w.strip_suffix("ms"))
                .and_then(|w| w.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let told = line.mono_ns;
        let handed_over = run.candidates.get(target).is_some_and(|lines| {
            lines
                .iter()
                .filter(|l| l.mono_ns > told)
                .find(|l| {
                    matches!(
                        l.event,
                        CandidateEvent::Resigned { .. } | CandidateEvent::Lost { .. }
                    )
                })
                .is_some_and(|l| matches!(l.event, CandidateEvent::Resigned { .. }))
        });
        if !handed_over {
            continue;
        }
        let window = Duration::from_millis(ms);
        let until = told.saturating_add(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX));
        for term in elected
            .iter()
            .filter(|e| e.mono_ns > told && e.mono_ns < until)
        {
            if term.writer == *to {
                break;
            }
            violations.push(Violation::ReservedNameTaken {
                from: target.clone(),
                to: (*to).to_owned(),
                told_ns: told,
                window,
                term: term.clone(),
            });
        }
    }
}

/// Checks 2 and 3 (unguarded records are check 7's).
fn check_fence(
    records: &[Record],
    unguarded: &HashSet<(&str, u64)>,
    violations: &mut Vec<Violation>,
) {
    let mut newest: Option<Placed> = None;
    for (i, record) in records.iter().enumerate() {
        if unguarded.contains(&(record.writer.as_str(), record.seq)) {
            continue;
        }
        let placed = Placed {
            index: i + 1,
            record: record.clone(),
        };
        match &newest {
            Some(n) if record.epoch < n.record.epoch => {
                violations.push(Violation::StaleWriteAccepted {
                    newer: n.clone(),
                    older: placed,
                })
            }
            Some(n) if record.epoch == n.record.epoch => {}
            _ => newest = Some(placed),
        }
    }
}

/// The (writer, seq) of every unguarded attempt.
fn unguarded_attempts(run: &RunHistory) -> HashSet<(&str, u64)> {
    run.candidates
        .iter()
        .flat_map(|(writer, lines)| {
            lines.iter().filter_map(move |l| match l.event {
                CandidateEvent::Unguarded { seq, .. } => Some((writer.as_str(), seq)),
                _ => None,
            })
        })
        .collect()
}

/// Check 7.
fn check_unguarded(
    records: &[Record],
    unguarded: &HashSet<(&str, u64)>,
    violations: &mut Vec<Violation>,
) {
    let mut first_guarded: Option<Placed> = None;
    for (i, record) in records.iter().enumerate() {
        let placed = Placed {
            index: i + 1,
            record: record.clone(),
        };
        if !unguarded.contains(&(record.writer.as_str(), record.seq)) {
            first_guarded.get_or_insert(placed);
        } else if let Some(guarded) = &first_guarded {
            violations.push(Violation::UnguardedWriteAccepted {
                guarded: guarded.clone(),
                unguarded: placed,
            });
        }
    }
}

/// Check 6. A deposed write whose newer term was elected across an
/// operator's action goes to `across_operator` instead: a bucket recreated
/// (or its max age shortened) after the deposed term began and before the
/// newer one was elected, or the election's key deleted by hand (`keydel`)
/// then, the write begun before any later fault. After either only the
/// fence protects the resource (docs/safety.md, "What an operator must
/// never touch"; ADR 0015), which checks 2 and 4 still check.
fn check_one_actor(
    run: &RunHistory,
    elected: &[Elected],
    violations: &mut Vec<Violation>,
    across_operator: &mut Vec<Violation>,
) {
    let began: Vec<(u64, FaultKind)> = run
        .faults
        .iter()
        .filter_map(|l| match &l.event {
            FaultEvent::Fault { kind, .. } => Some((l.mono_ns, *kind)),
            _ => None,
        })
        .collect();
    // True if an operator's action came after term `epoch` began and
    // before `newer` was elected, and (a hand delete) no other fault
    // began between it and the write at `write_ns`.
    let across = |epoch: u64, newer: &Elected, write_ns: u64| {
        let Some(term) = elected.iter().find(|e| e.epoch == epoch).map(|e| e.mono_ns) else {
            return false;
        };
        began.iter().any(|&(t, kind)| {
            let between = term < t && t <= newer.mono_ns;
            match kind {
                FaultKind::Recreate | FaultKind::MaxAge => between,
                FaultKind::KeyDelete => {
                    between && !began.iter().any(|&(u, _)| t < u && u <= write_ns)
                }
                _ => false,
            }
        })
    };
    // The first term above `epoch` elected before `t`, if any.
    let newer_before = |epoch: u64, t: u64| {
        elected
            .iter()
            .take_while(|e| e.mono_ns < t)
            .find(|e| e.epoch > epoch)
    };
    for (writer, lines) in &run.candidates {
        // seq -> (epoch, began) of writes not answered yet.
        let mut running: HashMap<u64, (u64, u64)> = HashMap::new();
        // The term this writer gave up, and when.
        let mut resigned: HashMap<u64, u64> = HashMap::new();
        // Terms already reported as deposed writers.
        let mut deposed: HashSet<u64> = HashSet::new();
        for line in lines {
            match &line.event {
                CandidateEvent::Write { seq, epoch } => {
                    running.insert(*seq, (*epoch, line.mono_ns));
                    // The first such write of each term is reported.
                    if let Some(newer) = newer_before(*epoch, line.mono_ns)
                        && deposed.insert(*epoch)
                    {
                        let found = Violation::DeposedWrite {
                            writer: writer.clone(),
                            seq: *seq,
                            epoch: *epoch,
                            began_ns: line.mono_ns,
                            newer: newer.clone(),
                        };
                        if across(*epoch, newer, line.mono_ns) {
                            across_operator.push(found);
                        } else {
                            violations.push(found);
                        }
                    }
                }
                CandidateEvent::Resigned { epoch } => {
                    resigned.entry(*epoch).or_insert(line.mono_ns);
                }
                CandidateEvent::Ok { seq, .. }
                | CandidateEvent::Stale { seq, .. }
                | CandidateEvent::Error { seq, .. } => {
                    let Some((epoch, _)) = running.remove(seq) else {
                        continue;
                    };
                    let Some(&resigned_ns) = resigned.get(&epoch) else {
                        continue;
                    };
                    if let Some(newer) = newer_before(epoch, line.mono_ns)
                        && newer.mono_ns > resigned_ns
                    {
                        violations.push(Violation::WorkOutlivedTerm {
                            writer: writer.clone(),
                            seq: *seq,
                            epoch,
                            resigned_ns,
                            answered_ns: line.mono_ns,
                            newer: newer.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
    }
}

/// How a writer's attempt ended, as its history says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Pending,
    Ok,
    Stale(u64),
    Unknown,
}

/// Check 4.
fn check_records(run: &RunHistory, records: &[Record], violations: &mut Vec<Violation>) {
    // (writer, seq) -> (epoch, answer) of every attempt.
    let mut attempts: HashMap<(&str, u64), (u64, Answer)> = HashMap::new();
    let mut acked = Vec::new();
    for (writer, lines) in &run.candidates {
        for line in lines {
            let (seq, answer) = match &line.event {
                CandidateEvent::Write { seq, epoch } | CandidateEvent::Unguarded { seq, epoch } => {
                    attempts.insert((writer, *seq), (*epoch, Answer::Pending));
                    continue;
                }
                CandidateEvent::Ok { seq, epoch } => {
                    acked.push((writer, *seq, *epoch, line.mono_ns));
                    (*seq, Answer::Ok)
                }
                CandidateEvent::Stale { seq, mark, .. } => (*seq, Answer::Stale(*mark)),
                CandidateEvent::Error { seq, .. } => (*seq, Answer::Unknown),
                _ => continue,
            };
            if let Some(a) = attempts.get_mut(&(writer.as_str(), seq)) {
                a.1 = answer;
            }
        }
    }
    let mut seen: HashMap<(&str, u64), Placed> = HashMap::new();
    let mut present = HashSet::new();
    for (i, record) in records.iter().enumerate() {
        let placed = Placed {
            index: i + 1,
            record: record.clone(),
        };
        present.insert((record.writer.as_str(), record.seq, record.epoch));
        let key = (record.writer.as_str(), record.seq);
        match attempts.get(&key) {
            Some(&(epoch, answer)) if epoch == record.epoch => {
                if let Answer::Stale(mark) = answer {
                    violations.push(Violation::RefusedWriteLanded {
                        record: placed.clone(),
                        mark,
                    });
                }
            }
            _ => violations.push(Violation::RecordNotAttempted {
                record: placed.clone(),
            }),
        }
        match seen.get(&key) {
            Some(first) => violations.push(Violation::DuplicateRecord {
                first: first.clone(),
                again: placed,
            }),
            None => {
                seen.insert(key, placed);
            }
        }
    }
    for (writer, seq, epoch, mono_ns) in acked {
        if !present.contains(&(writer.as_str(), seq, epoch)) {
            violations.push(Violation::AckedWriteMissing {
                writer: writer.clone(),
                seq,
                epoch,
                mono_ns,
            });
        }
    }
}

/// Every term with its start and end: `lost`, `resigned`, or its process
/// killed (a `fault kill` naming its writer while it was alive).
fn term_spans(run: &RunHistory) -> Vec<TermSpan> {
    let kills: Vec<(u64, &str)> = run
        .faults
        .iter()
        .filter_map(|l| match &l.event {
            FaultEvent::Fault {
                kind: FaultKind::Kill,
                target,
                ..
            } => Some((l.mono_ns, target.as_str())),
            _ => None,
        })
        .collect();
    let mut spans = Vec::new();
    for (writer, lines) in &run.candidates {
        let mut open: Option<(u64, u64)> = None; // (epoch, start)
        for line in lines {
            match line.event {
                CandidateEvent::Elected { epoch } => {
                    if let Some((_, start)) = open.take() {
                        spans.push(TermSpan {
                            start,
                            end: Some(line.mono_ns),
                        });
                    }
                    open = Some((epoch, line.mono_ns));
                }
                CandidateEvent::Lost { epoch, .. } | CandidateEvent::Resigned { epoch } => {
                    if let Some((open_epoch, start)) = open
                        && open_epoch == epoch
                    {
                        spans.push(TermSpan {
                            start,
                            end: Some(line.mono_ns),
                        });
                        open = None;
                    }
                }
                _ => {}
            }
        }
        if let Some((_, start)) = open {
            let killed = kills
                .iter()
                .filter(|(t, target)| *t >= start && targets(target, writer))
                .map(|(t, _)| *t)
                .min();
            spans.push(TermSpan { start, end: killed });
        }
    }
    spans.sort_by_key(|s| s.start);
    spans
}

fn longest_gap(spans: &[TermSpan]) -> Option<Gap> {
    let mut longest: Option<Gap> = None;
    // The end of the union of the terms so far; `None` inside: open-ended.
    let mut covered_until: Option<Option<u64>> = None;
    for span in spans {
        if let Some(Some(until)) = covered_until
            && span.start > until
        {
            let gap = Gap {
                from_ns: until,
                to_ns: span.start,
            };
            if longest.is_none_or(|l| gap.duration() > l.duration()) {
                longest = Some(gap);
            }
        }
        covered_until = Some(match (covered_until, span.end) {
            (None, end) => end,
            (Some(None), _) | (_, None) => None,
            (Some(Some(a)), Some(b)) => Some(a.max(b)),
        });
    }
    longest
}

fn duration(run: &RunHistory) -> Duration {
    let times = run
        .candidates
        .values()
        .flatten()
        .map(|l| l.mono_ns)
        .chain(run.faults.iter().map(|l| l.mono_ns));
    let (min, max) = times.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
    Duration::from_nanos(max.saturating_sub(min))
}

#[cfg(test)]
mod tests {
    use super::*;
    use CandidateEvent as C;

    const MS: u64 = 1_000_000;
    const BOUND: Duration = Duration::from_secs(2);

    fn line<E>(ms: u64, event: E) -> Line<E> {
        Line {
            mono_ns: ms * MS,
            wall_ms: 0,
            event,
        }
    }

    fn rec(writer: &str, seq: u64, epoch: u64) -> Record {
        Record {
            writer: writer.into(),
            seq,
            epoch,
        }
    }

    fn fault(ms: u64, heal: bool, kind: FaultKind, target: &str) -> Line<FaultEvent> {
        line(ms, FaultEvent::fault_or_heal(!heal, kind, target, ""))
    }

    /// A clean failover: c0.1 leads term 1, is stopped past the TTL, c1.1
    /// leads term 2; c0.1's late write is refused.
    fn clean() -> (RunHistory, Vec<Record>) {
        let mut run = RunHistory::default();
        run.candidates.insert(
            "c0.1".into(),
            vec![
                line(0, C::Start { pid: 10 }),
                line(1, C::Campaigning),
                line(10, C::Elected { epoch: 1 }),
                line(20, C::Write { seq: 1, epoch: 1 }),
                line(25, C::Ok { seq: 1, epoch: 1 }),
                line(40, C::Write { seq: 2, epoch: 1 }),
                line(
                    3000,
                    C::Stale {
                        seq: 2,
                        epoch: 1,
                        mark: 2,
                    },
                ),
                line(
                    3001,
                    C::Lost {
                        epoch: 1,
                        text: "the lease expired".into(),
                    },
                ),
                line(3002, C::Campaigning),
            ],
        );
        run.candidates.insert(
            "c1.1".into(),
            vec![
                line(0, C::Start { pid: 11 }),
                line(1, C::Campaigning),
                line(1500, C::Elected { epoch: 2 }),
                line(1520, C::Write { seq: 1, epoch: 2 }),
                line(1525, C::Ok { seq: 1, epoch: 2 }),
                line(1540, C::Write { seq: 2, epoch: 2 }),
                line(
                    1545,
                    C::Error {
                        seq: 2,
                        epoch: 2,
                        text: "busy".into(),
                    },
                ),
                line(1560, C::Write { seq: 3, epoch: 2 }),
                line(4000, C::Resigned { epoch: 2 }),
            ],
        );
        run.faults = vec![
            line(
                0,
                FaultEvent::Spawn {
                    writer: "c0.1".into(),
                    pid: 10,
                },
            ),
            fault(30, false, FaultKind::Stop, "c0.1"),
            fault(2900, true, FaultKind::Stop, "c0.1"),
            line(3900, FaultEvent::End),
        ];
        // c1.1's seq 2 (error) landed, seq 3 (unanswered) did not.
        let records = vec![rec("c0.1", 1, 1), rec("c1.1", 1, 2), rec("c1.1", 2, 2)];
        (run, records)
    }

    /// c0.1 begins seq 3 of term 1 at 2000 ms, after c1.1's term 2 began
    /// (its lease checked), and the fence refuses it.
    fn late_write_of_term_1(run: &mut RunHistory) {
        let c0 = run.candidates.get_mut("c0.1").unwrap();
        c0.insert(7, line(2000, C::Write { seq: 3, epoch: 1 }));
        c0.insert(
            8,
            line(
                2001,
                C::Stale {
                    seq: 3,
                    epoch: 1,
                    mark: 2,
                },
            ),
        );
    }

    fn checked(run: &RunHistory, records: &[Record]) -> Report {
        check(run, records, &CheckOptions::new(BOUND))
    }

    fn only(report: &Report) -> &Violation {
        assert_eq!(report.violations.len(), 1, "{report}");
        &report.violations[0]
    }

    #[test]
    fn a_clean_history_has_no_violations_and_its_figures() {
        let (run, records) = clean();
        let report = checked(&run, &records);
        assert!(report.is_safe(), "{report}");
        assert_eq!(report.terms, 2);
        assert_eq!(report.candidates, 2);
        assert_eq!(
            (
                report.writes_ok,
                report.writes_stale,
                report.writes_unknown,
                report.writes_unanswered
            ),
            (2, 1, 1, 1)
        );
        assert_eq!(report.records, 3);
        assert_eq!(
            report.faults_by_kind,
            BTreeMap::from([(FaultKind::Stop, 1)])
        );
        assert_eq!(report.duration, Duration::from_millis(4000));
        assert_eq!(report.last_heal_ns, Some(2900 * MS));
        assert_eq!(report.leader_after_heal, Some(Duration::ZERO));
        // The terms overlap in the histories (c0.1 learns late): no gap.
        assert_eq!(report.longest_leaderless_gap, None);
        let summary = report.to_string();
        assert!(summary.contains("no violations"), "{summary}");
        assert!(summary.contains("stop 1"), "{summary}");
    }

    #[test]
    fn an_empty_run_is_clean() {
        let report = checked(&RunHistory::default(), &[]);
        assert!(report.is_safe(), "{report}");
        assert_eq!(report.terms, 0);
    }

    #[test]
    fn check_1_an_epoch_twice_is_found() {
        let (mut run, records) = clean();
        run.candidates
            .get_mut("c1.1")
            .unwrap()
            .push(line(5000, C::Elected { epoch: 2 }));
        let report = checked(&run, &records);
        match only(&report) {
            Violation::TermsOutOfOrder { earlier, later } => {
                assert_eq!((earlier.epoch, later.epoch), (2, 2));
                assert_eq!(later.mono_ns, 5000 * MS);
            }
            other => panic!("{other}"),
        }
        assert!(!report.is_safe());
    }

    #[test]
    fn check_1_a_lower_epoch_later_is_found() {
        let (mut run, records) = clean();
        run.candidates
            .insert("c2.1".into(), vec![line(2000, C::Elected { epoch: 1 })]);
        let report = checked(&run, &records);
        match only(&report) {
            Violation::TermsOutOfOrder { earlier, later } => {
                assert_eq!(earlier.writer, "c1.1");
                assert_eq!((later.writer.as_str(), later.epoch), ("c2.1", 1));
            }
            other => panic!("{other}"),
        }
        assert_eq!(report.violations[0].check(), 1);
    }

    #[test]
    fn checks_2_and_3_a_stale_record_after_a_newer_one_is_found() {
        let (mut run, mut records) = clean();
        // The unsafe outcome: c0.1's late write was accepted.
        let c0 = run.candidates.get_mut("c0.1").unwrap();
        c0[6] = line(3000, C::Ok { seq: 2, epoch: 1 });
        records.push(rec("c0.1", 2, 1));
        let report = checked(&run, &records);
        match only(&report) {
            Violation::StaleWriteAccepted { newer, older } => {
                assert_eq!((newer.index, newer.record.epoch), (2, 2));
                assert_eq!((older.index, older.record.clone()), (4, rec("c0.1", 2, 1)));
            }
            other => panic!("{other}"),
        }
        let summary = report.to_string();
        assert!(summary.contains("1 VIOLATIONS"), "{summary}");
        assert!(
            summary.contains("record #4 (c0.1 seq 2, term 1)"),
            "{summary}"
        );
    }

    #[test]
    fn check_4_an_acknowledged_write_missing_from_the_resource_is_found() {
        let (run, mut records) = clean();
        records.remove(1);
        let report = checked(&run, &records);
        assert_eq!(
            only(&report),
            &Violation::AckedWriteMissing {
                writer: "c1.1".into(),
                seq: 1,
                epoch: 2,
                mono_ns: 1525 * MS,
            }
        );
    }

    #[test]
    fn check_4_a_record_nobody_attempted_is_found() {
        for bogus in [rec("c9.1", 1, 2), rec("c1.1", 7, 2), rec("c1.1", 3, 3)] {
            let (run, mut records) = clean();
            records.push(bogus.clone());
            let report = checked(&run, &records);
            let found: Vec<_> = report.violations.iter().map(Violation::check).collect();
            assert!(
                report.violations.iter().any(|v| matches!(
                    v,
                    Violation::RecordNotAttempted { record } if record.record == bogus
                )),
                "{report}"
            );
            assert!(found.iter().all(|c| *c == 4), "{report}");
        }
    }

    #[test]
    fn check_4_a_refused_write_that_landed_is_found() {
        let (run, mut records) = clean();
        records.insert(2, rec("c0.1", 2, 1));
        let report = checked(&run, &records);
        // It also breaks the fence's order.
        assert!(
            report.violations.iter().any(|v| matches!(
                v,
                Violation::RefusedWriteLanded { record, mark: 2 } if record.index == 3
            )),
            "{report}"
        );
        assert!(
            report
                .violations
                .iter()
                .any(|v| matches!(v, Violation::StaleWriteAccepted { .. })),
            "{report}"
        );
    }

    #[test]
    fn check_4_a_write_that_landed_twice_is_found() {
        let (run, mut records) = clean();
        records.push(rec("c1.1", 1, 2));
        let report = checked(&run, &records);
        match only(&report) {
            Violation::DuplicateRecord { first, again } => {
                assert_eq!((first.index, again.index), (2, 4));
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn check_5_no_leader_after_the_last_heal_is_found() {
        let (mut run, records) = clean();
        // c1.1 is killed (its term ends), nobody is elected after the heal.
        run.faults.push(fault(4100, false, FaultKind::Kill, "c1.1"));
        run.faults.push(fault(4100, true, FaultKind::Kill, "c1.1"));
        let c1 = run.candidates.get_mut("c1.1").unwrap();
        c1.pop(); // no resign: the kill ends the term at 4100
        let report = checked(&run, &records);
        assert_eq!(
            only(&report),
            &Violation::NoLeaderAfterHeal {
                heal_ns: 4100 * MS,
                bound: BOUND,
                next_elected_ns: None,
            }
        );
        // A late election (past the bound) is still a violation...
        run.candidates
            .get_mut("c0.1")
            .unwrap()
            .push(line(4100 + 2500, C::Elected { epoch: 3 }));
        let report = checked(&run, &records);
        assert!(matches!(
            only(&report),
            Violation::NoLeaderAfterHeal {
                next_elected_ns: Some(_),
                ..
            }
        ));
        assert_eq!(report.leader_after_heal, Some(Duration::from_millis(2500)));
        // ...one within the bound is not.
        let c0 = run.candidates.get_mut("c0.1").unwrap();
        c0.pop();
        c0.push(line(4100 + 1500, C::Elected { epoch: 3 }));
        let report = checked(&run, &records);
        assert!(report.is_safe(), "{report}");
        assert_eq!(
            report.longest_leaderless_gap,
            Some(Gap {
                from_ns: 4100 * MS,
                to_ns: 5600 * MS
            })
        );
    }

    #[test]
    fn a_kill_by_slot_ends_the_term_and_a_gap_is_measured() {
        let mut run = RunHistory::default();
        run.candidates
            .insert("c0.1".into(), vec![line(10, C::Elected { epoch: 1 })]);
        run.candidates.insert(
            "c1.1".into(),
            vec![
                line(100, C::Elected { epoch: 2 }),
                line(200, C::Resigned { epoch: 2 }),
                line(900, C::Elected { epoch: 3 }),
            ],
        );
        run.faults = vec![
            fault(50, false, FaultKind::Kill, "c0"),
            fault(50, true, FaultKind::Kill, "c0"),
        ];
        let report = checked(&run, &[]);
        assert!(report.is_safe(), "{report}");
        assert_eq!(
            report.longest_leaderless_gap,
            Some(Gap {
                from_ns: 200 * MS,
                to_ns: 900 * MS
            })
        );
    }

    #[test]
    fn the_summary_of_a_failed_run_names_seed_and_command() {
        let (run, mut records) = clean();
        records.remove(0);
        let options = CheckOptions {
            seed: Some(42),
            command: Some("cargo xtask torture --seed 42".into()),
            ..CheckOptions::new(BOUND)
        };
        let summary = check(&run, &records, &options).to_string();
        assert!(summary.contains("seed        42"), "{summary}");
        assert!(
            summary.contains("reproduce   cargo xtask torture --seed 42"),
            "{summary}"
        );
    }

    /// A transfer made reserves the name for its successor for the
    /// window.
    #[test]
    fn check_8_reserves_a_transferred_name_for_its_successor() {
        // c1.1 resigned term 2 at 4000 ms, told at 3990 ms to hand it to
        // `to` for `ms`; c0.1 campaigns again after 3002 ms.
        let run_with = |to: &str, ms: u64, elected_at: u64| {
            let (mut run, records) = clean();
            run.faults.push(line(
                3990,
                FaultEvent::fault_or_heal(
                    true,
                    FaultKind::Transfer,
                    "c1.1",
                    format!("to {to} live window {ms}ms"),
                ),
            ));
            let c0 = run.candidates.get_mut("c0.1").expect("c0.1");
            c0.push(line(elected_at, C::Elected { epoch: 3 }));
            (run, records)
        };
        let (run, records) = run_with("c0.1", 1000, 4010);
        assert!(checked(&run, &records).is_safe());
        // Another candidate within the window.
        let (run, records) = run_with("c2.1", 1000, 4010);
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert_eq!(report.violations[0].check(), 8, "{report}");
        assert!(
            report.to_string().contains("to hand its term to c2.1"),
            "{report}"
        );
        // After the window, anyone.
        let (run, records) = run_with("c2.1", 1000, 5100);
        assert!(checked(&run, &records).is_safe());
        // Not made (the holder's term went on): nothing reserved.
        let (mut run, records) = run_with("c2.1", 1000, 4010);
        let c1 = run.candidates.get_mut("c1.1").expect("c1.1");
        c1.retain(|l| !matches!(l.event, C::Resigned { .. }));
        assert!(checked(&run, &records).is_safe());
    }

    /// A lease-set run's revocation names its key last; every other line
    /// (a single election's revocation, other faults) names none.
    #[test]
    fn a_lease_set_revocation_names_its_key() {
        let heal =
            |detail: &str| FaultEvent::fault_or_heal(false, FaultKind::Revoke, "operator", detail);
        assert_eq!(
            revoked_key(&heal("deposed m1.1 7 revocation 9 fence 7->9 key key-0003")),
            Some("key-0003")
        );
        assert_eq!(revoked_key(&heal("nobody key key-0001")), Some("key-0001"));
        assert_eq!(
            revoked_key(&heal("deposed c1.1 2 revocation 3 fence 2->3")),
            None
        );
        let begin = FaultEvent::fault_or_heal(true, FaultKind::Revoke, "operator", "key k");
        assert_eq!(revoked_key(&begin), None);
    }

    /// A revocation's epoch is held by no candidate, and the terms after
    /// it are above it.
    #[test]
    fn check_1_holds_terms_above_a_revocation() {
        let revoke = |run: &mut RunHistory, ms: u64, detail: &str| {
            run.faults.push(line(
                ms - 5,
                FaultEvent::fault_or_heal(true, FaultKind::Revoke, "c0.1", ""),
            ));
            run.faults.push(line(
                ms,
                FaultEvent::fault_or_heal(false, FaultKind::Revoke, "c0.1", detail),
            ));
        };
        // Revoked from c1.1 after its term 2: nothing after it.
        let (mut run, records) = clean();
        revoke(&mut run, 2000, "deposed c1.1 2 revocation 3 fence 2->3");
        let report = checked(&run, &records);
        assert!(report.is_safe(), "{report}");
        // A candidate elected with the revocation's epoch.
        let (mut run, records) = clean();
        revoke(&mut run, 500, "deposed c0.1 1 revocation 2 fence 1->2");
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(
            report
                .to_string()
                .contains("against the revocation of epoch 2"),
            "{report}"
        );
        // A term elected after the revocation, below its epoch.
        let (mut run, records) = clean();
        revoke(&mut run, 500, "deposed c0.1 1 revocation 3 fence 1->3");
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert_eq!(report.violations[0].check(), 1, "{report}");
        // A revoke that found nobody says so, and checks nothing.
        let (mut run, records) = clean();
        revoke(&mut run, 500, "nobody");
        assert!(checked(&run, &records).is_safe());
    }

    #[test]
    fn check_6_spares_a_deposed_write_across_a_recreated_bucket_and_shows_it() {
        let (mut run, records) = clean();
        late_write_of_term_1(&mut run);
        // The bucket was deleted and recreated after term 1 began and
        // before term 2 was elected: only the fence protects there.
        run.faults
            .insert(1, fault(500, false, FaultKind::Recreate, "bucket"));
        run.faults
            .insert(2, fault(510, true, FaultKind::Recreate, "bucket"));
        let report = checked(&run, &records);
        assert!(report.is_safe(), "{report}");
        assert_eq!(report.across_operator.len(), 1, "{report}");
        assert!(
            report.to_string().contains("operator    1 deposed"),
            "{report}"
        );
        // A recreate before term 1 began does not excuse it.
        run.faults[1].mono_ns = 5 * MS;
        run.faults[2].mono_ns = 6 * MS;
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(report.across_operator.is_empty(), "{report}");
    }

    #[test]
    fn check_6_spares_a_deposed_write_right_after_a_hand_delete_only() {
        let (mut run, records) = clean();
        // c0.1 began seq 3 at 2000 ms, after c1.1's term 2 (2 s).
        late_write_of_term_1(&mut run);
        // The key deleted by hand after term 1 began, before term 2.
        run.faults
            .insert(1, fault(500, false, FaultKind::KeyDelete, "c0.1"));
        run.faults
            .insert(2, fault(510, true, FaultKind::KeyDelete, "c0.1"));
        let report = checked(&run, &records);
        assert!(report.is_safe(), "{report}");
        assert_eq!(report.across_operator.len(), 1, "{report}");
        // Another fault between the delete and the write: not excused.
        run.faults
            .insert(3, fault(1500, false, FaultKind::Stop, "c0.1"));
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(report.across_operator.is_empty(), "{report}");
        // A delete before term 1 began excuses nothing either.
        run.faults.remove(3);
        run.faults[1].mono_ns = 5 * MS;
        run.faults[2].mono_ns = 6 * MS;
        let report = checked(&run, &records);
        assert_eq!(report.violations.len(), 1, "{report}");
    }

    #[test]
    fn check_6_a_write_begun_after_a_later_term_is_found() {
        let (mut run, records) = clean();
        // c0.1 began seq 3 (its lease checked) after c1.1's term 2 began.
        late_write_of_term_1(&mut run);
        let report = checked(&run, &records);
        match only(&report) {
            Violation::DeposedWrite {
                writer,
                seq,
                epoch,
                began_ns,
                newer,
            } => {
                assert_eq!((writer.as_str(), *seq, *epoch), ("c0.1", 3, 1));
                assert_eq!(*began_ns, 2000 * MS);
                assert_eq!((newer.writer.as_str(), newer.epoch), ("c1.1", 2));
            }
            other => panic!("{other}"),
        }
        assert_eq!(report.violations[0].check(), 6);
        // The frozen write of the clean run (begun at 40 ms, answered
        // after term 2 began, the term then lost) is what the fence is for.
        assert!(checked(&clean().0, &clean().1).is_safe());
    }

    #[test]
    fn check_6_work_running_past_a_given_up_term_is_found() {
        let mut run = RunHistory::default();
        run.candidates.insert(
            "c0.1".into(),
            vec![
                line(10, C::Elected { epoch: 2 }),
                line(20, C::Write { seq: 1, epoch: 2 }),
                line(30, C::Resigned { epoch: 2 }),
                line(
                    400,
                    C::Stale {
                        seq: 1,
                        epoch: 2,
                        mark: 3,
                    },
                ),
            ],
        );
        run.candidates.insert(
            "c1.1".into(),
            vec![
                line(35, C::Elected { epoch: 3 }),
                line(40, C::Write { seq: 1, epoch: 3 }),
                line(45, C::Ok { seq: 1, epoch: 3 }),
            ],
        );
        let records = [rec("c1.1", 1, 3)];
        let report = checked(&run, &records);
        match only(&report) {
            Violation::WorkOutlivedTerm {
                writer,
                resigned_ns,
                answered_ns,
                newer,
                ..
            } => {
                assert_eq!(writer, "c0.1");
                assert_eq!((*resigned_ns, *answered_ns), (30 * MS, 400 * MS));
                assert_eq!(newer.epoch, 3);
            }
            other => panic!("{other}"),
        }
        // Answered before the next term began: clean.
        let c1 = run.candidates.get_mut("c1.1").unwrap();
        for l in c1.iter_mut() {
            l.mono_ns += 500 * MS;
        }
        assert!(checked(&run, &records).is_safe());
    }

    #[test]
    fn check_7_an_unguarded_write_after_a_term_s_write_is_found() {
        let (mut run, mut records) = clean();
        let c2 = vec![
            line(5, C::Unguarded { seq: 1, epoch: 1 }),
            line(6, C::Ok { seq: 1, epoch: 1 }),
            line(1600, C::Unguarded { seq: 2, epoch: 1 }),
            line(1601, C::Ok { seq: 2, epoch: 1 }),
        ];
        run.candidates.insert("c2.1".into(), c2);
        // Before any term's write: fine; after one: check 7 (not check 2).
        records.insert(0, rec("c2.1", 1, 1));
        records.push(rec("c2.1", 2, 1));
        let report = checked(&run, &records);
        match only(&report) {
            Violation::UnguardedWriteAccepted { guarded, unguarded } => {
                assert_eq!(guarded.record, rec("c0.1", 1, 1));
                assert_eq!((unguarded.index, unguarded.record.seq), (5, 2));
            }
            other => panic!("{other}"),
        }
        assert_eq!(report.violations[0].check(), 7);
    }

    #[test]
    fn a_run_directory_is_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        let w = crate::history::HistoryWriter::create(
            tmp.path().join(history::candidate_file_name("c0.1")),
        )
        .unwrap();
        w.record(&C::Elected { epoch: 1 }).unwrap();
        let f = crate::history::HistoryWriter::create(tmp.path().join(FAULTS_FILE)).unwrap();
        f.record(&FaultEvent::End).unwrap();
        std::fs::write(tmp.path().join("candidates.stderr"), "noise").unwrap();
        let run = RunHistory::load(tmp.path()).unwrap();
        assert_eq!(run.candidates.len(), 1);
        assert_eq!(run.faults.len(), 1);
        let report = check_dir(tmp.path(), &[], &CheckOptions::new(BOUND)).unwrap();
        assert_eq!(report.terms, 1);
    }

    /// `--lease-sets`: each key is checked alone, so a member that wrote
    /// key-b after losing it to another member is reported under key-b,
    /// although the same member held key-a meanwhile (a process-wide view
    /// would see one writer per process, not per key).
    #[test]
    fn check_keys_reports_a_deposed_write_under_its_key() {
        let tmp = tempfile::tempdir().unwrap();
        let mut writers = HashMap::new();
        let mut write = |key: &str, writer: &str, lines: &[C]| {
            let h = writers
                .entry((key.to_owned(), writer.to_owned()))
                .or_insert_with(|| {
                    let dir = tmp.path().join("keys").join(key);
                    std::fs::create_dir_all(&dir).unwrap();
                    crate::history::HistoryWriter::create(
                        dir.join(history::candidate_file_name(writer)),
                    )
                    .unwrap()
                });
            for event in lines {
                h.record(event).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        // m0.1 holds key-a throughout and key-b in term 1 until m1.1 wins
        // term 2; m0.1 then writes key-b in term 1 (unfenced: it landed).
        write(
            "key-a",
            "m0.1",
            &[
                C::Elected { epoch: 1 },
                C::Write { seq: 1, epoch: 1 },
                C::Ok { seq: 1, epoch: 1 },
            ],
        );
        write("key-b", "m0.1", &[C::Elected { epoch: 1 }]);
        write(
            "key-b",
            "m1.1",
            &[
                C::Elected { epoch: 2 },
                C::Write { seq: 1, epoch: 2 },
                C::Ok { seq: 1, epoch: 2 },
            ],
        );
        write(
            "key-b",
            "m0.1",
            &[C::Write { seq: 2, epoch: 1 }, C::Ok { seq: 2, epoch: 1 }],
        );
        let records = BTreeMap::from([
            ("key-a".to_owned(), vec![rec("m0.1", 1, 1)]),
            (
                "key-b".to_owned(),
                vec![rec("m1.1", 1, 2), rec("m0.1", 2, 1)],
            ),
        ]);
        let report = check_keys(tmp.path(), &records, &CheckOptions::new(BOUND)).unwrap();
        assert!(!report.is_safe());
        assert!(report.keys["key-a"].is_safe(), "{report}");
        let checks: Vec<(&str, u8)> = report.violations().map(|(k, v)| (k, v.check())).collect();
        assert_eq!(checks, [("key-b", 2), ("key-b", 6)], "{report}");
        assert!(report.to_string().contains("key-b: check 6"), "{report}");
    }
}
