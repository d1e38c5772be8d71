//! The checker against real candidate processes, without the orchestrator:
//! two `torture-candidate`s on the SQLite backend; the test pauses the
//! leader (SIGSTOP) past the TTL until the other is elected and has
//! written, resumes it (SIGCONT), lets both go on, ends them, and checks
//! the run.
//!
//! With `--unsafe` (no fence, losses ignored) the resumed leader's writes
//! land after the new term's: the checker must report it. In safe mode the
//! same scenario must check clean, with the resumed leader's writes not
//! attempted or refused as stale.
//!
//! Check 6 the same way: with `--unsafe`, `cancel` does by hand what a
//! dropped `lead()` did before issue 11 (the term resigned while its write
//! still runs); the checker must report the write outliving the term.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use torture::check::{CheckOptions, Report, RunHistory, Violation, check};
use torture::history::{self, CandidateEvent, FaultEvent, FaultKind, HistoryWriter, Line};
use torture::resource::{ResourceSpec, read_records};

/// How long any awaited event may take: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);
/// The liveness bound given to the checker.
const BOUND: Duration = Duration::from_secs(10);

/// One `torture-candidate` process and what it said on stdout.
struct Proc {
    writer: String,
    history: PathBuf,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::Receiver<String>,
}

impl Proc {
    fn spawn(dir: &Path, writer: &str, unsafe_mode: bool) -> Proc {
        Proc::spawn_with(dir, writer, unsafe_mode, &[])
    }

    fn spawn_with(dir: &Path, writer: &str, unsafe_mode: bool, extra: &[&str]) -> Proc {
        let history = dir.join(history::candidate_file_name(writer));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_torture-candidate"));
        cmd.arg("--backend")
            .arg(format!("sqlite://{}", dir.join("election.db").display()))
            .args(["--writer", writer])
            .arg("--history")
            .arg(&history)
            .arg("--resource")
            .arg(format!("sqlite:{}", dir.join("resource.db").display()))
            .args(["--ttl-ms", "1000", "--renew-ms", "300", "--poll-ms", "50"]);
        if unsafe_mode {
            cmd.arg("--unsafe");
        }
        cmd.args(extra);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn torture-candidate");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Proc {
            writer: writer.to_owned(),
            history,
            stdin: child.stdin.take(),
            child,
            stdout: rx,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line on stdin.
    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write a command");
        stdin.flush().expect("flush the command");
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.pid()).expect("pid fits"));
        kill(pid, signal).expect("signal the candidate");
    }

    /// Waits for a stdout line starting with `word `; returns its words
    /// after `word`.
    fn expect(&self, word: &str) -> Vec<u64> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.stdout.recv_timeout(left).unwrap_or_else(|e| {
                panic!(
                    "{} did not say {word:?} within {PATIENCE:?}: {e}",
                    self.writer
                )
            });
            if let Some(rest) = line.strip_prefix(word).and_then(|r| r.strip_prefix(' ')) {
                return rest
                    .split_whitespace()
                    .map(|w| w.parse().expect("numbers"))
                    .collect();
            }
        }
    }

    fn history(&self) -> Vec<Line<CandidateEvent>> {
        history::read(&self.history).expect("read the candidate's history")
    }

    /// Waits until the history satisfies `done`.
    fn wait_history(&self, what: &str, done: impl Fn(&[Line<CandidateEvent>]) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(&self.history()) {
            assert!(
                Instant::now() < deadline,
                "{}: no {what} within {PATIENCE:?}; history:\n{}",
                self.writer,
                std::fs::read_to_string(&self.history).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `exit` and waits for a clean exit.
    fn close(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "exit");
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the candidate") {
                assert!(status.success(), "{} exited with {status}", self.writer);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {PATIENCE:?}",
                self.writer
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Never leave a stopped or running process behind a failed test.
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(
                Pid::from_raw(i32::try_from(self.child.id()).expect("a pid_t")),
                Signal::SIGCONT,
            );
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The process's state letter from `/proc/<pid>/stat` (`T`: stopped).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .unwrap_or('?')
}

/// Whether `pid` holds a POSIX write lock: SQLite's lock while a write
/// transaction is open (on the election's or the resource's database).
/// Stopped there, it would keep the other candidate from ever winning.
fn holds_write_lock(pid: u32) -> bool {
    let pid = pid.to_string();
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().filter(|w| *w != "->").collect();
        f.len() > 4 && f[1] == "POSIX" && f[3] == "WRITE" && f[4] == pid
    })
}

fn fault(kind: FaultKind, target: &str, heal: bool) -> FaultEvent {
    FaultEvent::fault_or_heal(!heal, kind, target, "")
}

/// What a scenario left to look at.
struct Outcome {
    report: Report,
    /// The old leader's writer id and epoch, and when it was resumed.
    old: (String, u64),
    heal_ns: u64,
    old_history: Vec<Line<CandidateEvent>>,
}

/// Leader c0.1 is paused past the TTL until c1.1 is elected and has
/// written, then resumed; both run on, are closed, and the run is checked.
fn scenario(unsafe_mode: bool) -> Outcome {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let dir = tmp.path();
    let faults = HistoryWriter::create(dir.join(history::FAULTS_FILE)).expect("faults history");
    let note = |event: &FaultEvent| faults.record(event).expect("record a fault line");

    let mut c0 = Proc::spawn(dir, "c0.1", unsafe_mode);
    note(&FaultEvent::Spawn {
        writer: c0.writer.clone(),
        pid: c0.pid(),
    });
    let old_epoch = c0.expect("elected")[0];
    let mut c1 = Proc::spawn(dir, "c1.1", unsafe_mode);
    note(&FaultEvent::Spawn {
        writer: c1.writer.clone(),
        pid: c1.pid(),
    });
    c1.expect("campaigning");
    c0.wait_history("acknowledged write", |h| {
        h.iter()
            .any(|l| matches!(l.event, CandidateEvent::Ok { .. }))
    });

    // Pause the leader, but not inside a SQLite write transaction (that
    // would hold the database's lock, and no one could win): if it stopped
    // there, resume it and try again.
    let mut tries = 0;
    loop {
        tries += 1;
        assert!(tries < 1000, "could not stop c0.1 outside a transaction");
        note(&fault(FaultKind::Stop, &c0.writer, false));
        c0.signal(Signal::SIGSTOP);
        let deadline = Instant::now() + PATIENCE;
        while state(c0.pid()) != 'T' {
            assert!(Instant::now() < deadline, "c0.1 did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
        if !holds_write_lock(c0.pid()) {
            break;
        }
        c0.signal(Signal::SIGCONT);
        note(&fault(FaultKind::Stop, &c0.writer, true));
        std::thread::sleep(Duration::from_millis(3));
    }

    // Past the TTL: c1.1 wins a later term and writes in it.
    let new_epoch = c1.expect("elected")[0];
    assert!(new_epoch > old_epoch, "{new_epoch} > {old_epoch}");
    c1.wait_history("acknowledged write in the new term", |h| {
        h.iter()
            .any(|l| matches!(l.event, CandidateEvent::Ok { epoch, .. } if epoch == new_epoch))
    });

    c0.signal(Signal::SIGCONT);
    let heal_ns = note(&fault(FaultKind::Stop, &c0.writer, true));

    // Both run on: c0.1 learns of its loss (and, unsafe, keeps writing
    // with its old epoch); c1.1 keeps writing.
    c0.wait_history("loss after the resume", |h| {
        h.iter()
            .any(|l| matches!(l.event, CandidateEvent::Lost { epoch, .. } if epoch == old_epoch))
    });
    if unsafe_mode {
        c0.wait_history("old-term write acknowledged after the resume", |h| {
            h.iter().any(|l| {
                l.mono_ns > heal_ns
                    && matches!(l.event, CandidateEvent::Ok { epoch, .. } if epoch == old_epoch)
            })
        });
    } else {
        c0.expect("campaigning");
    }
    c1.wait_history("five writes after the resume", |h| {
        h.iter()
            .filter(|l| l.mono_ns > heal_ns && matches!(l.event, CandidateEvent::Ok { .. }))
            .count()
            >= 5
    });
    c0.close();
    c1.close();
    faults.record(&FaultEvent::End).expect("record end");

    let run = RunHistory::load(dir).expect("load the run");
    let spec = ResourceSpec::Sqlite(dir.join("resource.db"));
    let records = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(read_records(&spec))
        .expect("read the resource");
    let report = check(&run, &records, &CheckOptions::new(BOUND));
    eprintln!("{}unsafe: {report}", if unsafe_mode { "" } else { "not " });
    Outcome {
        report,
        old: (c0.writer.clone(), old_epoch),
        heal_ns,
        old_history: c0.history(),
    }
}

#[test]
fn unsafe_mode_a_resumed_leader_s_stale_write_is_reported() {
    let outcome = scenario(true);
    let report = &outcome.report;
    let (old_writer, old_epoch) = &outcome.old;
    assert!(!report.is_safe(), "{report}");
    assert!(
        report.violations.iter().any(|v| matches!(
            v,
            Violation::StaleWriteAccepted { newer, older }
                if older.record.writer == *old_writer
                    && older.record.epoch == *old_epoch
                    && newer.record.epoch > *old_epoch
        )),
        "a stale epoch accepted after a later one: {report}"
    );
    assert!(report.to_string().contains("VIOLATIONS"), "{report}");
}

#[test]
fn safe_mode_the_same_scenario_checks_clean() {
    let outcome = scenario(false);
    let report = &outcome.report;
    assert!(report.is_safe(), "{report}");
    assert_eq!(
        report
            .faults_by_kind
            .get(&FaultKind::Stop)
            .copied()
            .map(|n| n >= 1),
        Some(true)
    );
    assert!(report.terms >= 2, "{report}");
    assert!(report.writes_ok >= 2, "{report}");
    // The resumed leader's writes in its old term: none attempted after the
    // resume, or each refused as stale.
    let (_, old_epoch) = outcome.old;
    let h = &outcome.old_history;
    for (i, line) in h.iter().enumerate() {
        if let CandidateEvent::Write { seq, epoch } = line.event
            && epoch == old_epoch
            && line.mono_ns > outcome.heal_ns
        {
            let answer = h[i + 1..].iter().find_map(|l| match l.event {
                CandidateEvent::Ok { seq: s, .. } if s == seq => Some("ok"),
                CandidateEvent::Stale { seq: s, .. } if s == seq => Some("stale"),
                CandidateEvent::Error { seq: s, .. } if s == seq => Some("error"),
                _ => None,
            });
            assert_eq!(
                answer,
                Some("stale"),
                "seq {seq} of the old term, attempted after the resume"
            );
        }
    }
}

/// `cancel` with `--unsafe`: c0.1's term is resigned while its write (a
/// 3 s synchronous section) still runs; another term begins meanwhile. The
/// checker must report check 6, the term's work outliving it.
#[test]
fn unsafe_mode_work_outliving_a_given_up_term_is_reported() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let dir = tmp.path();
    let hold = ["--hold-ms", "3000"];
    let mut c0 = Proc::spawn_with(dir, "c0.1", true, &hold);
    let old_epoch = c0.expect("elected")[0];
    let mut c1 = Proc::spawn_with(dir, "c1.1", true, &hold);
    c1.expect("campaigning");
    c0.wait_history("acknowledged write", |h| {
        h.iter()
            .any(|l| matches!(l.event, CandidateEvent::Ok { .. }))
    });
    c0.send("cancel");
    // The slow write is answered after the term was resigned.
    c0.wait_history("the slow write's answer after the resign", |h| {
        let Some(resigned) = h.iter().position(
            |l| matches!(l.event, CandidateEvent::Resigned { epoch } if epoch == old_epoch),
        ) else {
            return false;
        };
        h[resigned..].iter().any(|l| {
            matches!(
                l.event,
                CandidateEvent::Ok { epoch, .. } | CandidateEvent::Stale { epoch, .. }
                    if epoch == old_epoch
            )
        })
    });
    c0.close();
    c1.close();

    let run = RunHistory::load(dir).expect("load the run");
    let spec = ResourceSpec::Sqlite(dir.join("resource.db"));
    let records = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(read_records(&spec))
        .expect("read the resource");
    let report = check(&run, &records, &CheckOptions::new(BOUND));
    eprintln!("{report}");
    assert!(
        report.violations.iter().any(|v| matches!(
            v,
            Violation::WorkOutlivedTerm { writer, epoch, newer, .. }
                if writer == "c0.1" && *epoch == old_epoch && newer.epoch > old_epoch
        )),
        "the write outliving its resigned term: {report}"
    );
}
