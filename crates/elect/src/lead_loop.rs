//! `elect run`'s lead loop as one pure machine: [`LeadLoop`], what it is
//! told ([`Input`]) and what it asks for ([`Command`]), with the kill
//! deadlines' arithmetic ([`KillTiming`]). `run.rs::lead` is its executor:
//! it turns the supervisor's lines, signals, the watchdog tick, the term's
//! loss and two deadlines into inputs, feeds the machine, and carries out
//! the commands (a line to the supervisor, an event, the take-over, the
//! cgroup's end, the resign, the exit). No I/O, no clock, no runtime: time
//! is the caller's `CLOCK_MONOTONIC` nanoseconds ([`At`]), the clock the
//! supervisor's `K` and `V` lines count in, in the manner of
//! `election_core::renewal::Renewal::decide` and the keyed engine's book
//! (ADR 0054, ADR 0098).
//!
//! A run goes: the supervisor's `P` (started) or its failure to start;
//! while COMMAND runs, signals are forwarded (`S`) and the watchdog's
//! deadline follows the lease's validity (`V`); COMMAND's exit, a loss of
//! the term or a kill grace after SIGINT/SIGTERM stops the tree (`K`);
//! the supervisor's `E` (the tree is empty), or its death or lateness
//! (then `elect` takes over and ends the tree itself); the term's cgroup
//! ended; then the resign, or the loss reported; then the exit code.
//!
//! Its invariants (property-tested below, rules 2 and 3 of the CLI):
//! - it never asks to resign once a loss was input, a loss was read at
//!   the end, or the lease's validity was seen to run out (rule 3);
//! - every `K` is no later than the kill grace from now, nor (unless
//!   `--allow-late-kill`) than the lease's known validity plus the bound,
//!   the earliest moment a successor can lead; after a revoked claim it
//!   is now (rule 2);
//! - once a `K` was told, no later `K` postpones it; the backstop never
//!   moves later, and is no later than the validity plus the bound (or
//!   now) unless `--allow-late-kill`;
//! - every `V` carries the validity read at that step (and the grace
//!   after it), only when it moved and the socket has caught up, never
//!   after a loss;
//! - it finishes once, and only after the tree was seen empty (the
//!   supervisor's `E`) or taken over.

use std::fmt;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::exit::{self, Failure};

/// When COMMAND's tree must be stopped, from the backend's timing; the
/// deadlines it gives are pure functions of the caller's `now`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KillTiming {
    /// How long after the end of the lease's known validity the earliest
    /// successor can lead: the safety margin (a tenth of the TTL), plus the
    /// failover grace on NATS. `None` on the file backend: no lease, the
    /// lock is held by COMMAND's tree until its last process exits.
    bound: Option<Duration>,
    /// SIGTERM to SIGKILL.
    grace: Duration,
    /// `--allow-late-kill`: the user accepts a grace past the bound.
    late_ok: bool,
}

/// A duration as nanoseconds (saturating).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl KillTiming {
    /// A kill `grace` (SIGTERM to SIGKILL), the `bound` after the lease's
    /// validity that it must not pass (`None`: no lease), and whether the
    /// user allowed it to (`late_ok`).
    pub(crate) fn new(bound: Option<Duration>, grace: Duration, late_ok: bool) -> KillTiming {
        KillTiming {
            bound,
            grace,
            late_ok,
        }
    }

    /// The earliest moment a successor can lead (the validity `valid_until`
    /// plus the bound), if the kill must not pass it.
    fn successor_at(&self, valid_until: Option<u64>) -> Option<u64> {
        match (valid_until, self.bound) {
            (Some(valid), Some(bound)) if !self.late_ok => Some(valid.saturating_add(nanos(bound))),
            _ => None,
        }
    }

    /// When the tree gets SIGKILL if it is stopped at `now`: the kill grace
    /// from now, but never after the earliest moment a successor can lead
    /// (the lease's known validity plus the bound), unless
    /// `--allow-late-kill`; at once after a revoked claim (another
    /// candidate may already lead).
    pub(crate) fn kill_at(&self, now: u64, valid_until: Option<u64>, revoked: bool) -> u64 {
        if revoked {
            return now;
        }
        let at = now.saturating_add(nanos(self.grace));
        self.successor_at(valid_until).map_or(at, |s| at.min(s))
    }

    /// When `elect` stops the tree itself if the supervisor, told at `now`
    /// to SIGKILL it at `kill_at`, has not said it is empty: 500 ms later,
    /// but not after the earliest moment a successor can lead (or now, if
    /// that has passed), unless `--allow-late-kill`.
    pub(crate) fn backstop(&self, now: u64, kill_at: u64, valid_until: Option<u64>) -> u64 {
        let at = kill_at
            .max(now)
            .saturating_add(nanos(Duration::from_millis(500)));
        self.successor_at(valid_until)
            .map_or(at, |s| at.min(s.max(now)))
    }
}

/// A message from the supervisor (one line on its socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Said {
    /// `P pid`: COMMAND started.
    Started(i32),
    /// `F errno`: COMMAND could not be started.
    CannotStart(i32),
    /// `W`: the watchdog's deadline passed: the tree was sent SIGTERM.
    Watchdog,
    /// `Z`: the tree did not end in time: SIGKILL.
    Killed,
    /// `U pids`: these processes of the tree do not end on SIGKILL.
    Unkillable(String),
    /// `X code`: COMMAND exited.
    Exited(u8),
    /// `E`: the tree is empty (the supervisor exits next).
    Empty,
}

/// The caller's instant, and what the lease says at it: `CLOCK_MONOTONIC`
/// nanoseconds, read by the executor when the input came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At {
    /// Now.
    pub(crate) now: u64,
    /// The lease's known validity (`Lease::valid_until`); `None`: the
    /// lease does not expire (the file backend).
    pub(crate) valid_until: Option<u64>,
}

/// What happened, as the executor tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// A line from the supervisor.
    Said(Said),
    /// The supervisor's socket reached its end: it died (or exited).
    SupervisorGone,
    /// SIGINT, SIGTERM or SIGHUP to `elect`.
    Signal {
        /// Which.
        signal: Signal,
        /// Sent by the kernel: a terminal's Ctrl-C, Ctrl-\ or hang-up, sent
        /// to the whole foreground process group at once.
        from_terminal: bool,
        /// COMMAND is in `elect`'s process group (a terminal's signal then
        /// reached it too).
        same_group: bool,
    },
    /// The watchdog tick (every 25 ms while the term is not lost).
    Tick {
        /// Every earlier line was taken by the socket (a `V` is told only
        /// then, so that lines queue up only from the few other messages).
        caught_up: bool,
    },
    /// The term was lost.
    Lost {
        /// Revoked: another candidate may lead already.
        revoked: bool,
        /// Why (the loss's whole chain of messages).
        reason: String,
    },
    /// A request to hand the term to `to` (ADR 0112) was reported.
    TransferRequested {
        /// The successor asked for.
        to: String,
    },
    /// The escalation deadline ([`Listen::escalation`]) came.
    Escalate,
    /// The backstop deadline ([`Listen::backstop`]) came.
    Backstop,
    /// The answer to [`Command::TakeOver`]: the tree is ended.
    TakenOver {
        /// COMMAND's exit code, if `elect` collected it.
        exited: Option<u8>,
    },
    /// The answer to [`Command::EndGroup`].
    Ended {
        /// The lease's loss read after the group's end (a validity that
        /// ran out counts), unless the holder ended the term.
        loss: Option<String>,
    },
    /// The answer to [`Command::Resign`].
    Resigned {
        /// Why it failed, if it did.
        error: Option<String>,
    },
}

/// A line to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// `S sig`: forward this signal to COMMAND.
    Signal(Signal),
    /// `K at`: stop the tree (SIGTERM now), SIGKILL at `at`.
    Kill(u64),
    /// `V term kill`: the watchdog's deadlines: SIGTERM to the tree at
    /// `term` (the lease's validity), SIGKILL at `kill`, unless told a
    /// later `V` first.
    Watchdog {
        /// The lease's validity.
        term: u64,
        /// A kill grace after it.
        kill: u64,
    },
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Signal(sig) => write!(f, "S {}", *sig as i32),
            Line::Kill(at) => write!(f, "K {at}"),
            Line::Watchdog { term, kill } => write!(f, "V {term} {kill}"),
        }
    }
}

/// What the executor does next, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// Tell the supervisor this line.
    Tell(Line),
    /// Report this event.
    Report(Event),
    /// Reap the supervisor (it exits by itself after `E` or a failure).
    WaitSupervisor,
    /// End the tree itself (the term's cgroup and every descendant of
    /// `elect`); answer [`Input::TakenOver`].
    TakeOver {
        /// COMMAND's pid, whose exit code is kept if collected.
        command: Option<i32>,
    },
    /// End the term's cgroup (report a failure unless `quiet`), then read
    /// the lease's loss; answer [`Input::Ended`].
    EndGroup {
        /// Say nothing if it fails (COMMAND never started).
        quiet: bool,
    },
    /// Give the term up; answer [`Input::Resigned`].
    Resign,
    /// Hand the term to `to` (`Term::transfer`) instead of resigning;
    /// answer [`Input::Resigned`].
    HandOver {
        /// The successor.
        to: String,
    },
    /// Return: the last command.
    Finish(Finish),
}

/// How `elect run` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// With this exit code (COMMAND's, or `--lost-exit-code`).
    Exit(u8),
    /// The supervisor died; `elect` stopped the tree, then gave the term up.
    SupervisorDied,
    /// COMMAND could not be started (the `exec`'s errno).
    CannotStart(i32),
    /// The supervisor ended without starting COMMAND.
    NotStarted,
}

impl Finish {
    /// The exit code or failure of `elect run` of `program`.
    pub(crate) fn into_result(self, program: &str) -> Result<u8, Failure> {
        match self {
            Finish::Exit(code) => Ok(code),
            Finish::SupervisorDied => Err(Failure::new(
                exit::INTERNAL,
                "the supervisor of the command died; elect stopped the command and every process it started, then gave the term up",
            )),
            Finish::CannotStart(errno) => {
                let e = std::io::Error::from_raw_os_error(errno);
                let code = match e.kind() {
                    std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                    std::io::ErrorKind::PermissionDenied => exit::CANNOT_EXECUTE,
                    _ => exit::INTERNAL,
                };
                Err(Failure::new(code, format!("cannot run {program:?}: {e}")))
            }
            Finish::NotStarted => Err(Failure::new(
                exit::INTERNAL,
                "the supervisor did not start the command",
            )),
        }
    }
}

/// An event of the run, reported as a line (see [`Event::render`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// COMMAND started.
    Started {
        /// Its pid.
        pid: i32,
    },
    /// COMMAND exited.
    Exited {
        /// Its exit code.
        code: u8,
    },
    /// The supervisor's watchdog sent SIGTERM (`W`).
    Watchdog,
    /// The supervisor sent SIGKILL (`Z`).
    Killed,
    /// Processes of the tree do not end on SIGKILL.
    Unkillable {
        /// Their pids, space-separated.
        pids: String,
    },
    /// A terminal's signal reached COMMAND too: not forwarded.
    NotForwarded {
        /// The signal.
        signal: Signal,
    },
    /// A signal forwarded to COMMAND.
    Forwarded {
        /// The signal.
        signal: Signal,
    },
    /// COMMAND did not exit within the kill grace of SIGINT/SIGTERM.
    Escalated {
        /// The signal `elect` received.
        signal: Signal,
        /// The kill grace.
        grace: Duration,
    },
    /// The term was lost while COMMAND ran: the tree is stopped.
    Lost {
        /// Why.
        reason: String,
        /// SIGKILL this long after now.
        kill_after: Duration,
    },
    /// The term was lost while the tree was ending (read at the end).
    LostWhileEnding {
        /// Why.
        reason: String,
    },
    /// The supervisor died: `elect` stops the tree itself.
    SupervisorDied,
    /// The supervisor did not stop the tree by its deadline: `elect` does.
    SupervisorLate,
    /// After a loss: the tree has stopped.
    Stopped {
        /// COMMAND's exit code (70 if unknown).
        code: u8,
    },
    /// The term was given up.
    Resigned,
    /// Giving the term up failed.
    ResignFailed {
        /// Why.
        error: String,
    },
    /// A transfer was asked for: COMMAND was sent `signal`.
    TransferRequested {
        /// The successor asked for.
        to: String,
        /// What COMMAND was sent.
        signal: Signal,
    },
    /// The term was handed to `to`.
    HandedOver {
        /// The successor.
        to: String,
    },
}

/// What events name: the election, the term and the command line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shown<'a> {
    /// The election (the slot's, with slots).
    pub(crate) name: &'a str,
    /// The term's epoch.
    pub(crate) epoch: u64,
    /// COMMAND and its arguments, joined by spaces.
    pub(crate) command: &'a str,
}

impl Event {
    /// The event's kind, its text for people and its fields for `--json`.
    pub(crate) fn render(&self, shown: &Shown<'_>) -> (&'static str, String, Value) {
        let Shown {
            name,
            epoch,
            command,
        } = *shown;
        let plain = || json!({ "name": name, "epoch": epoch });
        match self {
            Event::Started { pid } => (
                "started",
                format!("started {command:?} (pid {pid})"),
                json!({ "name": name, "epoch": epoch, "pid": pid }),
            ),
            Event::Exited { code } => (
                "exited",
                format!("the command exited (exit {code})"),
                json!({ "name": name, "epoch": epoch, "exit_code": code }),
            ),
            Event::Watchdog => (
                "watchdog",
                "the term's validity ran out while elect did not renew it: the command's processes were sent SIGTERM".into(),
                plain(),
            ),
            Event::Killed => (
                "killed",
                "the command did not exit in time: SIGKILL (to every process it started)".into(),
                plain(),
            ),
            Event::Unkillable { pids } => (
                "unkillable",
                format!("processes {pids} of the command do not end on SIGKILL (another user's?); elect waits until they end before it resigns or exits"),
                json!({ "name": name, "epoch": epoch, "pids": pids }),
            ),
            Event::NotForwarded { signal } => (
                "not-forwarded",
                format!("{signal} from the terminal reached the command too (same process group): not forwarding it"),
                json!({ "name": name, "signal": signal.as_str(), "from_terminal": true }),
            ),
            Event::Forwarded { signal } => (
                "forwarded",
                format!("forwarding {signal} to the command"),
                json!({ "name": name, "signal": signal.as_str() }),
            ),
            Event::Escalated { signal, grace } => (
                "killed",
                format!("the command did not exit within --kill-grace ({grace:?}) of {signal}: SIGKILL to it and every process it started"),
                json!({ "name": name, "epoch": epoch, "signal": signal.as_str(), "kill_grace_ms": crate::report::duration_ms(*grace) }),
            ),
            Event::Lost { reason, kill_after } => (
                "lost",
                format!("lost {name}, term {epoch}: {reason}; stopping the command and every process it started (SIGTERM, SIGKILL after {kill_after:?})"),
                json!({ "name": name, "epoch": epoch, "reason": reason, "kill_after_ms": crate::report::duration_ms(*kill_after) }),
            ),
            Event::LostWhileEnding { reason } => (
                "lost",
                format!("lost {name}, term {epoch}: {reason}"),
                json!({ "name": name, "epoch": epoch, "reason": reason }),
            ),
            Event::SupervisorDied => (
                "supervisor-died",
                "the supervisor of the command died: elect stops the command and every process it started itself before giving the term up".into(),
                plain(),
            ),
            Event::SupervisorLate => (
                "supervisor-late",
                "the supervisor of the command did not stop it by its deadline (stopped?): elect stops the command and every process it started itself before giving the term up".into(),
                plain(),
            ),
            Event::Stopped { code } => (
                "stopped",
                format!("the command stopped (exit {code}), and every process it started"),
                json!({ "name": name, "epoch": epoch, "exit_code": code }),
            ),
            Event::Resigned => ("resigned", format!("resigned {name}, term {epoch}"), plain()),
            Event::ResignFailed { error } => (
                "resign-failed",
                format!("resigning failed: {error} (the lease ends by itself)"),
                json!({ "name": name, "epoch": epoch, "error": error }),
            ),
            Event::TransferRequested { to, signal } => (
                "transfer-requested",
                format!("asked to hand {name} to {to}: sending {signal} to the command; the term goes to {to} once it exited"),
                json!({ "name": name, "epoch": epoch, "to": to, "signal": signal.as_str() }),
            ),
            Event::HandedOver { to } => (
                "handed-over",
                format!("handed {name}, term {epoch}, to {to}"),
                json!({ "name": name, "epoch": epoch, "to": to }),
            ),
        }
    }
}

/// What the executor waits for while no answer is due: the supervisor's
/// next line (always), and these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listen {
    /// Signals to `elect` ([`Input::Signal`]); left queued otherwise.
    pub(crate) signals: bool,
    /// The term's loss ([`Input::Lost`]) and the watchdog tick
    /// ([`Input::Tick`]).
    pub(crate) term: bool,
    /// A request to hand the term over ([`Input::TransferRequested`]).
    pub(crate) transfer: bool,
    /// When to input [`Input::Escalate`].
    pub(crate) escalation: Option<u64>,
    /// When to input [`Input::Backstop`].
    pub(crate) backstop: Option<u64>,
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the supervisor's `P`.
    Starting,
    /// COMMAND runs, or its tree is being stopped.
    Running,
    /// [`Command::TakeOver`] given: waiting for [`Input::TakenOver`].
    TakingOver,
    /// [`Command::EndGroup`] given: waiting for [`Input::Ended`].
    Ending,
    /// [`Command::Resign`] given: waiting for [`Input::Resigned`].
    Resigning,
    /// [`Command::Finish`] given: nothing more.
    Done,
}

/// Why the supervisor's own end (`E`) did not come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failed {
    /// Its socket ended.
    Died,
    /// It did not stop the tree by the backstop.
    Late,
}

/// `elect run`'s lead loop: what to do with each input while COMMAND runs
/// under a term, until the exit. See the module's documentation.
#[derive(Clone, Debug)]
pub(crate) struct LeadLoop {
    /// The kill deadlines.
    timing: KillTiming,
    /// `--lost-exit-code`.
    lost_exit_code: u8,
    /// Where the run is.
    phase: Phase,
    /// COMMAND's pid, once started.
    pid: Option<i32>,
    /// Why COMMAND did not start, if it did not.
    not_started: Option<Finish>,
    /// COMMAND's exit code, once known.
    exited: Option<u8>,
    /// A loss was input (or read at the end, or the validity was seen to
    /// run out there): never resign.
    lost: bool,
    /// The lease's validity was seen to have run out at some step: the
    /// term counts as lost (the core's lease says so at its next read).
    expired: bool,
    /// The tree is being stopped (a `K` was told).
    stopping: bool,
    /// The earliest `K` told.
    kill_at: Option<u64>,
    /// SIGINT or SIGTERM to `elect`: SIGKILL to the tree at this instant
    /// if COMMAND has not exited by then (as `consul lock` does).
    escalate: Option<(u64, Signal)>,
    /// After a stop: `elect` stops the tree itself if the supervisor has
    /// not said it is empty by then (stopped, hung).
    backstop: Option<u64>,
    /// Why the supervisor's own end did not come.
    failed: Option<Failed>,
    /// The validity last told as `V`.
    told_valid: Option<u64>,
    /// The signal COMMAND gets when a transfer is asked for.
    handover_signal: Signal,
    /// The successor asked for: the term is handed to it instead of
    /// resigned.
    successor: Option<String>,
}

impl LeadLoop {
    /// A run with these kill deadlines and `--lost-exit-code`, waiting for
    /// the supervisor's `P`.
    pub(crate) fn new(timing: KillTiming, lost_exit_code: u8) -> LeadLoop {
        LeadLoop {
            timing,
            lost_exit_code,
            phase: Phase::Starting,
            pid: None,
            not_started: None,
            exited: None,
            lost: false,
            expired: false,
            stopping: false,
            kill_at: None,
            escalate: None,
            backstop: None,
            failed: None,
            told_valid: None,
            handover_signal: Signal::SIGTERM,
            successor: None,
        }
    }

    /// A run that sends COMMAND `signal` when a transfer is asked for
    /// (`--handover-signal`; SIGTERM by default).
    pub(crate) fn with_handover_signal(mut self, signal: Signal) -> LeadLoop {
        self.handover_signal = signal;
        self
    }

    /// COMMAND's pid, once the supervisor said it started.
    pub(crate) fn command(&self) -> Option<i32> {
        self.pid
    }

    /// What to wait for next, when no answer to a command is due.
    pub(crate) fn listen(&self) -> Listen {
        let running = self.phase == Phase::Running;
        Listen {
            signals: running && !self.stopping,
            term: running && !self.lost,
            transfer: running && !self.lost && self.successor.is_none(),
            escalation: self
                .escalate
                .filter(|_| running && !self.stopping)
                .map(|(at, _)| at),
            backstop: self.backstop.filter(|_| running),
        }
    }

    /// Takes in what happened at `at` and returns what to do, in order.
    /// An input the machine does not wait for now is ignored.
    pub(crate) fn step(&mut self, at: At, input: Input) -> Vec<Command> {
        if at.valid_until.is_some_and(|v| at.now >= v) {
            self.expired = true;
        }
        let mut out = Vec::new();
        match self.phase {
            Phase::Starting => self.starting(input, &mut out),
            Phase::Running => self.running(at, input, &mut out),
            Phase::TakingOver => {
                if let Input::TakenOver { exited } = input {
                    if self.pid.is_some() && exited.is_some() {
                        self.exited = exited;
                    }
                    self.end_group(&mut out);
                }
            }
            Phase::Ending => {
                if let Input::Ended { loss } = input {
                    self.ended(loss, &mut out);
                }
            }
            Phase::Resigning => {
                if let Input::Resigned { error } = input {
                    self.resigned(error, &mut out);
                }
            }
            Phase::Done => {}
        }
        out
    }

    /// Before the supervisor's `P`.
    fn starting(&mut self, input: Input, out: &mut Vec<Command>) {
        let why = match input {
            Input::Said(Said::Started(pid)) => {
                self.pid = Some(pid);
                self.phase = Phase::Running;
                out.push(Command::Report(Event::Started { pid }));
                return;
            }
            Input::Said(Said::CannotStart(errno)) => Finish::CannotStart(errno),
            Input::Said(_) | Input::SupervisorGone => Finish::NotStarted,
            _ => return,
        };
        // A supervisor that died between COMMAND's exec and its `P` may
        // have left processes COMMAND forked (now elect's).
        self.not_started = Some(why);
        out.push(Command::WaitSupervisor);
        self.take_over(out);
    }

    /// While COMMAND runs, or its tree is being stopped.
    fn running(&mut self, at: At, input: Input, out: &mut Vec<Command>) {
        let listen = self.listen();
        match input {
            Input::Said(said) => match said {
                Said::Exited(code) => {
                    self.exited = Some(code);
                    out.push(Command::Report(Event::Exited { code }));
                    if !self.stopping {
                        // What it left behind stops before the term ends.
                        let kill = self.timing.kill_at(at.now, at.valid_until, false);
                        self.stop(at, kill, out);
                    }
                }
                Said::Watchdog => out.push(Command::Report(Event::Watchdog)),
                Said::Killed => out.push(Command::Report(Event::Killed)),
                Said::Unkillable(pids) => out.push(Command::Report(Event::Unkillable { pids })),
                Said::Empty => self.end_group(out),
                Said::Started(_) | Said::CannotStart(_) => {}
            },
            Input::SupervisorGone => self.fail(Failed::Died, out),
            Input::Backstop if listen.backstop.is_some() => self.fail(Failed::Late, out),
            Input::Signal {
                signal,
                from_terminal,
                same_group,
            } if listen.signals => {
                if from_terminal && same_group {
                    // Ctrl-C and friends: the kernel sent it to the command
                    // too; forwarding it would deliver it twice.
                    out.push(Command::Report(Event::NotForwarded { signal }));
                } else {
                    out.push(Command::Report(Event::Forwarded { signal }));
                    out.push(Command::Tell(Line::Signal(signal)));
                }
                if self.escalate.is_none() && matches!(signal, Signal::SIGINT | Signal::SIGTERM) {
                    let grace = nanos(self.timing.grace);
                    self.escalate = Some((at.now.saturating_add(grace), signal));
                }
            }
            Input::TransferRequested { to } if listen.transfer => {
                self.successor = Some(to.clone());
                if !self.stopping {
                    let signal = self.handover_signal;
                    out.push(Command::Report(Event::TransferRequested { to, signal }));
                    out.push(Command::Tell(Line::Signal(signal)));
                    if self.escalate.is_none() {
                        let grace = nanos(self.timing.grace);
                        self.escalate = Some((at.now.saturating_add(grace), signal));
                    }
                }
            }
            Input::Escalate if listen.escalation.is_some() => {
                let signal = self.escalate.map_or(Signal::SIGTERM, |(_, s)| s);
                out.push(Command::Report(Event::Escalated {
                    signal,
                    grace: self.timing.grace,
                }));
                self.stop(at, at.now, out);
            }
            Input::Lost { revoked, reason } if listen.term => {
                let kill = self.timing.kill_at(at.now, at.valid_until, revoked);
                // Never later than a `K` already told (the supervisor
                // keeps the earliest anyway).
                let kill = self.kill_at.map_or(kill, |k| k.min(kill));
                let kill_after = Duration::from_nanos(kill.saturating_sub(at.now));
                out.push(Command::Report(Event::Lost { reason, kill_after }));
                self.lost = true;
                self.stop(at, kill, out);
            }
            // The validity moved since the last `V`.
            Input::Tick { caught_up } if listen.term && at.valid_until != self.told_valid => {
                match at.valid_until {
                    Some(term) if caught_up => {
                        let kill = term.saturating_add(nanos(self.timing.grace));
                        out.push(Command::Tell(Line::Watchdog { term, kill }));
                        self.told_valid = at.valid_until;
                    }
                    // Not caught up: told at a later tick.
                    Some(_) => {}
                    None => self.told_valid = None,
                }
            }
            _ => {}
        }
    }

    /// Stops the tree: SIGKILL at `kill` (never later than a `K` told
    /// before), and the backstop `elect` keeps.
    fn stop(&mut self, at: At, kill: u64, out: &mut Vec<Command>) {
        let kill = self.kill_at.map_or(kill, |k| k.min(kill));
        self.kill_at = Some(kill);
        self.stopping = true;
        let stop_by = self.timing.backstop(at.now, kill, at.valid_until);
        self.backstop = Some(self.backstop.map_or(stop_by, |b| b.min(stop_by)));
        out.push(Command::Tell(Line::Kill(kill)));
    }

    /// The supervisor died or is late: `elect` ends the tree itself before
    /// the term is given up (ADR 0049).
    fn fail(&mut self, why: Failed, out: &mut Vec<Command>) {
        self.failed = Some(why);
        out.push(Command::Report(match why {
            Failed::Died => Event::SupervisorDied,
            Failed::Late => Event::SupervisorLate,
        }));
        self.take_over(out);
    }

    /// `elect` ends the tree itself.
    fn take_over(&mut self, out: &mut Vec<Command>) {
        self.phase = Phase::TakingOver;
        out.push(Command::TakeOver { command: self.pid });
    }

    /// The tree is empty: the term's cgroup is ended.
    fn end_group(&mut self, out: &mut Vec<Command>) {
        self.phase = Phase::Ending;
        out.push(Command::EndGroup {
            quiet: self.pid.is_none(),
        });
    }

    /// The cgroup is ended; `loss` is the lease's, read after.
    fn ended(&mut self, loss: Option<String>, out: &mut Vec<Command>) {
        if let Some(not_started) = self.not_started {
            if loss.is_some() || self.lost || self.expired {
                // Not resigned: a lost term's claim may be another's (rule 3).
                self.finish(not_started, out);
            } else {
                self.phase = Phase::Resigning;
                out.push(Command::Resign);
            }
            return;
        }
        if !self.lost {
            // Lost while the tree was ending (the watchdog stopped it while
            // elect was stopped, and the supervisor's end came first).
            let reason = loss.or_else(|| {
                self.expired
                    .then(|| "the lease's known validity ran out".to_owned())
            });
            if let Some(reason) = reason {
                out.push(Command::Report(Event::LostWhileEnding { reason }));
                self.lost = true;
            }
        }
        if self.lost {
            let code = self.exited.unwrap_or(exit::INTERNAL);
            out.push(Command::WaitSupervisor);
            out.push(Command::Report(Event::Stopped { code }));
            self.finish(Finish::Exit(self.lost_exit_code), out);
        } else {
            self.phase = Phase::Resigning;
            out.push(match self.successor.clone() {
                Some(to) => Command::HandOver { to },
                None => Command::Resign,
            });
        }
    }

    /// The term is given up (or failed to be).
    fn resigned(&mut self, error: Option<String>, out: &mut Vec<Command>) {
        if let Some(not_started) = self.not_started {
            self.finish(not_started, out);
            return;
        }
        out.push(Command::Report(match (error, self.successor.clone()) {
            (None, None) => Event::Resigned,
            (None, Some(to)) => Event::HandedOver { to },
            (Some(error), _) => Event::ResignFailed { error },
        }));
        out.push(Command::WaitSupervisor);
        let finish = match self.failed {
            Some(Failed::Died) => Finish::SupervisorDied,
            _ => Finish::Exit(self.exited.unwrap_or(exit::INTERNAL)),
        };
        self.finish(finish, out);
    }

    /// The last command.
    fn finish(&mut self, finish: Finish, out: &mut Vec<Command>) {
        self.phase = Phase::Done;
        out.push(Command::Finish(finish));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A millisecond in nanoseconds.
    const MS: u64 = 1_000_000;
    /// The run's start on the model's clock (1,000 s after boot).
    const T0: u64 = 1_000_000 * MS;
    /// The pid the supervisor says.
    const PID: i32 = 42;

    /// `n` milliseconds.
    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A 1 s bound, a 500 ms grace.
    fn timing() -> KillTiming {
        KillTiming::new(Some(ms(1000)), ms(500), false)
    }

    /// `now`, the lease valid until `valid_until`.
    fn at(now: u64, valid_until: u64) -> At {
        At {
            now,
            valid_until: Some(valid_until),
        }
    }

    /// A machine whose command started at `T0`, the lease valid 2 s.
    fn started(timing: KillTiming) -> LeadLoop {
        let mut m = LeadLoop::new(timing, exit::LOST);
        let out = m.step(at(T0, T0 + 2000 * MS), Input::Said(Said::Started(PID)));
        assert_eq!(out, [Command::Report(Event::Started { pid: PID })]);
        assert_eq!(m.command(), Some(PID));
        m
    }

    /// Whether `out` asks for a resign.
    fn has_resign(out: &[Command]) -> bool {
        out.contains(&Command::Resign)
    }

    /// A loss: `K` a grace later (within the bound), signals and the term
    /// no longer listened to; then `E`: the group ended, the loss read,
    /// the tree reported stopped, the lost exit code; no resign.
    #[test]
    fn a_loss_then_empty_exits_lost_without_resigning() {
        let mut m = started(timing());
        let now = T0 + 100 * MS;
        let out = m.step(
            at(now, T0 + 2000 * MS),
            Input::Lost {
                revoked: false,
                reason: "expired".into(),
            },
        );
        assert_eq!(
            out,
            [
                Command::Report(Event::Lost {
                    reason: "expired".into(),
                    kill_after: ms(500)
                }),
                Command::Tell(Line::Kill(now + 500 * MS)),
            ]
        );
        let listen = m.listen();
        assert!(!listen.signals && !listen.term);
        assert_eq!(listen.backstop, Some(now + 1000 * MS));
        let out = m.step(at(now + MS, T0 + 2000 * MS), Input::Said(Said::Empty));
        assert_eq!(out, [Command::EndGroup { quiet: false }]);
        let out = m.step(
            at(now + 2 * MS, T0 + 2000 * MS),
            Input::Ended {
                loss: Some("expired".into()),
            },
        );
        assert!(!has_resign(&out));
        assert_eq!(
            out,
            [
                Command::WaitSupervisor,
                Command::Report(Event::Stopped {
                    code: exit::INTERNAL
                }),
                Command::Finish(Finish::Exit(exit::LOST)),
            ]
        );
        assert!(m.step(at(now, now), Input::Said(Said::Empty)).is_empty());
    }

    /// COMMAND exits: what it left is stopped (`K`); `E`: the group ended,
    /// the term resigned, COMMAND's exit code.
    #[test]
    fn an_exit_stops_the_tree_then_resigns_with_the_commands_code() {
        let mut m = started(timing());
        let now = T0 + 10 * MS;
        let out = m.step(at(now, T0 + 2000 * MS), Input::Said(Said::Exited(3)));
        assert_eq!(
            out,
            [
                Command::Report(Event::Exited { code: 3 }),
                Command::Tell(Line::Kill(now + 500 * MS)),
            ]
        );
        // Still watching the term (a `V` may follow), no more signals.
        assert!(m.listen().term && !m.listen().signals);
        let valid = T0 + 2000 * MS;
        let out = m.step(at(now, valid), Input::Said(Said::Empty));
        assert_eq!(out, [Command::EndGroup { quiet: false }]);
        let out = m.step(at(now, valid), Input::Ended { loss: None });
        assert_eq!(out, [Command::Resign]);
        let out = m.step(at(now, valid), Input::Resigned { error: None });
        assert_eq!(
            out,
            [
                Command::Report(Event::Resigned),
                Command::WaitSupervisor,
                Command::Finish(Finish::Exit(3)),
            ]
        );
    }

    /// The supervisor dies: `elect` takes over (keeping COMMAND's code if it
    /// collects it), then resigns, and fails with the internal error.
    #[test]
    fn a_dead_supervisor_is_taken_over_then_the_term_resigned_and_elect_fails() {
        let mut m = started(timing());
        let v = T0 + 2000 * MS;
        let out = m.step(at(T0, v), Input::SupervisorGone);
        assert_eq!(
            out,
            [
                Command::Report(Event::SupervisorDied),
                Command::TakeOver { command: Some(PID) },
            ]
        );
        let out = m.step(at(T0, v), Input::TakenOver { exited: Some(9) });
        assert_eq!(out, [Command::EndGroup { quiet: false }]);
        assert_eq!(
            m.step(at(T0, v), Input::Ended { loss: None }),
            [Command::Resign]
        );
        let out = m.step(
            at(T0, v),
            Input::Resigned {
                error: Some("gone".into()),
            },
        );
        assert_eq!(
            out,
            [
                Command::Report(Event::ResignFailed {
                    error: "gone".into()
                }),
                Command::WaitSupervisor,
                Command::Finish(Finish::SupervisorDied),
            ]
        );
        let failure = Finish::SupervisorDied.into_result("job").unwrap_err();
        assert_eq!(failure.code, exit::INTERNAL);
    }

    /// A terminal's signal reached COMMAND too when it is in `elect`'s
    /// group: not forwarded; from elsewhere, or to another group, it is.
    #[test]
    fn a_terminals_signal_to_the_same_group_is_not_forwarded() {
        let mut m = started(timing());
        let v = T0 + 2000 * MS;
        let signal = |from_terminal, same_group| Input::Signal {
            signal: Signal::SIGHUP,
            from_terminal,
            same_group,
        };
        assert_eq!(
            m.step(at(T0, v), signal(true, true)),
            [Command::Report(Event::NotForwarded {
                signal: Signal::SIGHUP
            })]
        );
        for (from_terminal, same_group) in [(true, false), (false, true), (false, false)] {
            let out = m.step(at(T0, v), signal(from_terminal, same_group));
            assert_eq!(
                out,
                [
                    Command::Report(Event::Forwarded {
                        signal: Signal::SIGHUP
                    }),
                    Command::Tell(Line::Signal(Signal::SIGHUP)),
                ]
            );
        }
        // SIGHUP does not escalate.
        assert_eq!(m.listen().escalation, None);
        assert_eq!(Line::Signal(Signal::SIGTERM).to_string(), "S 15");
    }

    /// SIGINT: forwarded, and a kill grace later SIGKILL to the tree
    /// (`K` now) if COMMAND has not exited; later signals wait.
    #[test]
    fn sigint_escalates_to_sigkill_after_the_kill_grace() {
        let mut m = started(timing());
        let v = T0 + 2000 * MS;
        let out = m.step(
            at(T0, v),
            Input::Signal {
                signal: Signal::SIGINT,
                from_terminal: false,
                same_group: false,
            },
        );
        assert_eq!(out[1], Command::Tell(Line::Signal(Signal::SIGINT)));
        assert_eq!(m.listen().escalation, Some(T0 + 500 * MS));
        // A SIGTERM after it does not move the escalation.
        m.step(
            at(T0 + 100 * MS, v),
            Input::Signal {
                signal: Signal::SIGTERM,
                from_terminal: false,
                same_group: false,
            },
        );
        assert_eq!(m.listen().escalation, Some(T0 + 500 * MS));
        let now = T0 + 500 * MS;
        let out = m.step(at(now, v), Input::Escalate);
        assert_eq!(
            out,
            [
                Command::Report(Event::Escalated {
                    signal: Signal::SIGINT,
                    grace: ms(500)
                }),
                Command::Tell(Line::Kill(now)),
            ]
        );
        let listen = m.listen();
        assert_eq!(listen.escalation, None);
        assert!(!listen.signals);
        assert_eq!(listen.backstop, Some(now + 500 * MS));
    }

    /// A revoked claim: SIGKILL at once. A validity close to its end: the
    /// kill comes by the earliest moment a successor can lead, unless
    /// `--allow-late-kill`.
    #[test]
    fn the_kill_never_passes_the_successors_earliest_start() {
        let t = KillTiming::new(Some(ms(1000)), ms(5000), false);
        assert_eq!(t.kill_at(T0, Some(T0 + 100 * MS), true), T0);
        assert_eq!(t.kill_at(T0, Some(T0 + 100 * MS), false), T0 + 1100 * MS);
        assert_eq!(t.kill_at(T0, None, false), T0 + 5000 * MS);
        let late = KillTiming::new(Some(ms(1000)), ms(5000), true);
        assert_eq!(late.kill_at(T0, Some(T0 + 100 * MS), false), T0 + 5000 * MS);
        // The backstop: 500 ms after the kill, but by the successor's start
        // (or now, if it has passed).
        assert_eq!(
            t.backstop(T0, T0 + 1100 * MS, Some(T0 + 100 * MS)),
            T0 + 1100 * MS
        );
        assert_eq!(t.backstop(T0, T0, Some(T0 + 5000 * MS)), T0 + 500 * MS);
        assert_eq!(t.backstop(T0 + 3000 * MS, T0, Some(T0)), T0 + 3000 * MS);

        let mut m = started(t);
        let out = m.step(
            at(T0 + 10 * MS, T0 + 2000 * MS),
            Input::Lost {
                revoked: true,
                reason: "revoked".into(),
            },
        );
        assert_eq!(out[1], Command::Tell(Line::Kill(T0 + 10 * MS)));
    }

    /// A loss after COMMAND's exit never postpones the `K` told at the exit
    /// (the lease was renewed meanwhile).
    #[test]
    fn a_loss_after_the_exit_does_not_postpone_the_kill() {
        let mut m = started(timing());
        m.step(at(T0, T0 + 2000 * MS), Input::Said(Said::Exited(0)));
        let out = m.step(
            at(T0 + 400 * MS, T0 + 5000 * MS),
            Input::Lost {
                revoked: false,
                reason: "failed".into(),
            },
        );
        assert_eq!(
            out,
            [
                Command::Report(Event::Lost {
                    reason: "failed".into(),
                    kill_after: ms(100)
                }),
                Command::Tell(Line::Kill(T0 + 500 * MS)),
            ]
        );
        assert_eq!(m.listen().backstop, Some(T0 + 1000 * MS));
    }

    /// `V` follows the validity: told when it moved and the socket caught
    /// up, not again for the same validity, none without a lease.
    #[test]
    fn watchdog_lines_follow_the_validity() {
        let mut m = started(timing());
        let tick = |caught_up| Input::Tick { caught_up };
        let v1 = T0 + 2000 * MS;
        assert!(m.step(at(T0, v1), tick(false)).is_empty());
        let line = Line::Watchdog {
            term: v1,
            kill: v1 + 500 * MS,
        };
        assert_eq!(m.step(at(T0, v1), tick(true)), [Command::Tell(line)]);
        assert_eq!(line.to_string(), format!("V {v1} {}", v1 + 500 * MS));
        assert!(m.step(at(T0 + MS, v1), tick(true)).is_empty());
        let v2 = v1 + 300 * MS;
        assert_eq!(m.step(at(T0 + 2 * MS, v2), tick(true)).len(), 1);
        let none = At {
            now: T0 + 3 * MS,
            valid_until: None,
        };
        assert!(m.step(none, tick(true)).is_empty());
    }

    /// Lost while the tree ended (read after the group's end): reported,
    /// not resigned.
    #[test]
    fn a_loss_read_at_the_end_is_reported_and_not_resigned() {
        let mut m = started(timing());
        let v = T0 + 2000 * MS;
        m.step(at(T0, v), Input::Said(Said::Exited(0)));
        m.step(at(T0, v), Input::Said(Said::Empty));
        let out = m.step(
            at(T0, v),
            Input::Ended {
                loss: Some("revoked".into()),
            },
        );
        assert_eq!(
            out,
            [
                Command::Report(Event::LostWhileEnding {
                    reason: "revoked".into()
                }),
                Command::WaitSupervisor,
                Command::Report(Event::Stopped { code: 0 }),
                Command::Finish(Finish::Exit(exit::LOST)),
            ]
        );
    }

    /// COMMAND cannot be started: the supervisor reaped, whatever it left
    /// taken over, the group ended quietly, the term resigned; 127.
    #[test]
    fn a_command_that_cannot_start_is_cleaned_up_then_fails() {
        let mut m = LeadLoop::new(timing(), exit::LOST);
        let v = T0 + 2000 * MS;
        assert_eq!(
            m.listen(),
            Listen {
                signals: false,
                term: false,
                transfer: false,
                escalation: None,
                backstop: None
            }
        );
        let out = m.step(at(T0, v), Input::Said(Said::CannotStart(2)));
        assert_eq!(
            out,
            [Command::WaitSupervisor, Command::TakeOver { command: None }]
        );
        let out = m.step(at(T0, v), Input::TakenOver { exited: Some(1) });
        assert_eq!(out, [Command::EndGroup { quiet: true }]);
        assert_eq!(
            m.step(at(T0, v), Input::Ended { loss: None }),
            [Command::Resign]
        );
        let out = m.step(at(T0, v), Input::Resigned { error: None });
        assert_eq!(out, [Command::Finish(Finish::CannotStart(2))]);
        let failure = Finish::CannotStart(2).into_result("nope").unwrap_err();
        assert_eq!(failure.code, exit::NOT_FOUND);
        assert!(
            failure.message.starts_with("cannot run \"nope\": "),
            "{}",
            failure.message
        );
    }

    /// A transfer request sends COMMAND the handover signal (SIGUSR1 here)
    /// with the kill grace's escalation; once the tree is empty the term is
    /// handed to the successor, not resigned; a second request is not
    /// listened for; the run exits with COMMAND's code.
    #[test]
    fn a_transfer_request_signals_the_command_then_hands_over() {
        let mut m = LeadLoop::new(timing(), exit::LOST).with_handover_signal(Signal::SIGUSR1);
        m.step(at(T0, T0 + 3000 * MS), Input::Said(Said::Started(PID)));
        assert!(m.listen().transfer);
        let out = m.step(
            at(T0 + MS, T0 + 3000 * MS),
            Input::TransferRequested { to: "web-2".into() },
        );
        assert!(
            out.contains(&Command::Tell(Line::Signal(Signal::SIGUSR1))),
            "{out:?}"
        );
        assert!(!m.listen().transfer, "a second request listened for");
        assert!(
            m.listen().escalation.is_some(),
            "no kill grace after the request"
        );
        m.step(
            at(T0 + 2 * MS, T0 + 3000 * MS),
            Input::Said(Said::Exited(0)),
        );
        let out = m.step(at(T0 + 3 * MS, T0 + 3000 * MS), Input::Said(Said::Empty));
        assert!(matches!(out[..], [Command::EndGroup { .. }]), "{out:?}");
        let out = m.step(at(T0 + 4 * MS, T0 + 3000 * MS), Input::Ended { loss: None });
        assert_eq!(out, [Command::HandOver { to: "web-2".into() }]);
        let out = m.step(
            at(T0 + 5 * MS, T0 + 3000 * MS),
            Input::Resigned { error: None },
        );
        assert!(out.contains(&Command::Report(Event::HandedOver { to: "web-2".into() })));
        assert_eq!(out.last(), Some(&Command::Finish(Finish::Exit(0))));
    }

    /// The texts are the ones `elect run` has always printed.
    #[test]
    fn events_keep_their_texts_and_fields() {
        let shown = Shown {
            name: "jobs",
            epoch: 7,
            command: "sleep 1",
        };
        let (kind, text, fields) = Event::Lost {
            reason: "r".into(),
            kill_after: ms(1500),
        }
        .render(&shown);
        assert_eq!(kind, "lost");
        assert_eq!(
            text,
            "lost jobs, term 7: r; stopping the command and every process it started (SIGTERM, SIGKILL after 1.5s)"
        );
        assert_eq!(fields["kill_after_ms"], 1500);
        let (kind, text, _) = Event::Started { pid: 5 }.render(&shown);
        assert_eq!(
            (kind, text.as_str()),
            ("started", "started \"sleep 1\" (pid 5)")
        );
        let (_, _, fields) = Event::NotForwarded {
            signal: Signal::SIGINT,
        }
        .render(&shown);
        assert_eq!(
            fields,
            json!({ "name": "jobs", "signal": "SIGINT", "from_terminal": true })
        );
    }

    /// One step of a random run: time passes (the lease maybe renewed),
    /// then something happens (if the machine listens for it; an answer
    /// due comes first, made from `bits`).
    #[derive(Clone, Debug)]
    struct Step {
        /// Time passes by this much.
        wait_ms: u64,
        /// The lease renewed this long from now (while live).
        renew_ms: Option<u64>,
        /// What happens.
        kind: Kind,
        /// Random bits: an answer's content, a `Said`'s payload.
        bits: u8,
    }

    /// What happens in a [`Step`] (fed only if the machine listens).
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        /// A line of the supervisor (which one, by number).
        Said(u8),
        /// The supervisor's death.
        Gone,
        /// SIGINT, SIGTERM or SIGHUP (by number).
        Signal {
            /// Which.
            which: u8,
            /// From the terminal.
            from_terminal: bool,
            /// COMMAND in `elect`'s group.
            same_group: bool,
        },
        /// The watchdog tick (caught up or not).
        Tick(bool),
        /// The term's loss (revoked or not).
        Lost(bool),
        /// The escalation deadline, at it.
        Escalate,
        /// The backstop deadline, at it.
        Backstop,
        /// A request to hand the term over.
        Transfer,
    }

    /// A random [`Step`].
    fn step() -> impl Strategy<Value = Step> {
        let kind = prop_oneof![
            4 => (0u8..7).prop_map(Kind::Said),
            1 => Just(Kind::Gone),
            3 => (0u8..3, any::<bool>(), any::<bool>()).prop_map(|(which, from_terminal, same_group)| Kind::Signal { which, from_terminal, same_group }),
            6 => any::<bool>().prop_map(Kind::Tick),
            2 => any::<bool>().prop_map(Kind::Lost),
            2 => Just(Kind::Escalate),
            1 => Just(Kind::Backstop),
            1 => Just(Kind::Transfer),
        ];
        (
            0u64..800,
            proptest::option::of(0u64..3000),
            kind,
            any::<u8>(),
        )
            .prop_map(|(wait_ms, renew_ms, kind, bits)| Step {
                wait_ms,
                renew_ms,
                kind,
                bits,
            })
    }

    /// What the model knows of a run.
    #[derive(Debug, Default)]
    struct Model {
        /// A loss was input (the term's, or read at the end).
        lost: bool,
        /// The lease's validity was seen to have run out.
        expired: bool,
        /// The supervisor said `E`, or `elect` took the tree over.
        tree_empty: bool,
        /// The supervisor said `P`.
        started: bool,
        /// A resign (or a handover) was asked for.
        resigned: bool,
        /// A transfer was requested (and taken in).
        requested: bool,
        /// How many times the machine finished.
        finishes: usize,
        /// The answer due.
        due: Option<&'static str>,
        /// The earliest `K` told.
        kill: Option<u64>,
        /// The last `V`'s validity.
        told_valid: Option<u64>,
        /// The last backstop.
        backstop: Option<u64>,
    }

    /// One step: the input fed at `at`, and every property checked on
    /// what it gave.
    fn check(
        m: &mut LeadLoop,
        model: &mut Model,
        t: &KillTiming,
        at: At,
        input: Input,
    ) -> Result<(), TestCaseError> {
        match &input {
            Input::Lost { .. } | Input::Ended { loss: Some(_) } => model.lost = true,
            Input::Said(Said::Empty) | Input::TakenOver { .. } => model.tree_empty = true,
            Input::TransferRequested { .. } => model.requested = true,
            _ => {}
        }
        if at.valid_until.is_some_and(|v| at.now >= v) {
            model.expired = true;
        }
        let running = m.command().is_some();
        let out = m.step(at, input.clone());
        model.started = m.command().is_some();
        if model.finishes > 0 {
            prop_assert!(out.is_empty(), "{:?} after the finish", out);
        }
        let grace = nanos(t.grace);
        let successor = t.successor_at(at.valid_until);
        if running && matches!(input, Input::Lost { .. }) && model.finishes == 0 {
            prop_assert!(
                out.iter()
                    .any(|c| matches!(c, Command::Tell(Line::Kill(_)))),
                "a loss without a K: {:?}",
                out
            );
        }
        for c in &out {
            match c {
                Command::Tell(Line::Kill(k)) => {
                    prop_assert!(
                        *k <= at.now + grace,
                        "K {} past the grace from {}",
                        k,
                        at.now
                    );
                    // Now at the latest: it cannot be earlier than now.
                    if let Some(s) = successor {
                        prop_assert!(
                            *k <= s.max(at.now),
                            "K {} past the successor's start {}",
                            k,
                            s
                        );
                    }
                    if let Input::Lost { revoked: true, .. } = input {
                        prop_assert!(*k <= at.now, "K {} not at once after a revoke", k);
                    }
                    if let Some(earlier) = model.kill {
                        prop_assert!(*k <= earlier, "K {} postpones K {}", k, earlier);
                    }
                    model.kill = Some(*k);
                }
                Command::Tell(Line::Watchdog { term, kill }) => {
                    prop_assert_eq!(
                        Some(*term),
                        at.valid_until,
                        "a V not of the latest validity"
                    );
                    prop_assert_eq!(*kill, *term + grace);
                    prop_assert!(!model.lost, "a V after the loss");
                    prop_assert_eq!(&input, &Input::Tick { caught_up: true });
                    prop_assert_ne!(model.told_valid, Some(*term), "the same V twice");
                    model.told_valid = Some(*term);
                }
                Command::Tell(Line::Signal(s)) => {
                    let forwardable = matches!(input, Input::Signal { signal, from_terminal, same_group } if signal == *s && !(from_terminal && same_group));
                    let handover =
                        matches!(input, Input::TransferRequested { .. }) && *s == Signal::SIGTERM;
                    prop_assert!(forwardable || handover, "S {:?} on {:?}", s, input);
                }
                Command::Resign | Command::HandOver { .. } => {
                    prop_assert!(!model.lost, "resigned after a loss");
                    prop_assert!(!model.expired, "resigned after the validity ran out");
                    // Handed over exactly when a transfer was requested.
                    prop_assert_eq!(
                        matches!(c, Command::HandOver { .. }),
                        model.requested,
                        "{:?} with a request {}",
                        c,
                        model.requested
                    );
                    model.resigned = true;
                    model.due = Some("resigned");
                }
                Command::TakeOver { .. } => model.due = Some("taken over"),
                Command::EndGroup { .. } => model.due = Some("ended"),
                Command::Finish(f) => {
                    model.finishes += 1;
                    prop_assert!(model.tree_empty, "finished before the tree was empty");
                    // Not resigned (it never is after a loss): lost.
                    if model.started && !model.resigned {
                        prop_assert_eq!(*f, Finish::Exit(exit::LOST));
                    }
                    if !model.started {
                        prop_assert!(matches!(f, Finish::CannotStart(_) | Finish::NotStarted));
                    }
                }
                Command::Report(_) | Command::WaitSupervisor => {}
            }
        }
        prop_assert!(model.finishes <= 1, "finished twice");
        if let Some(b) = m.listen().backstop {
            if let Some(s) = successor {
                prop_assert!(
                    b <= s.max(at.now),
                    "backstop {} past the successor's start {}",
                    b,
                    s
                );
            }
            if let Some(earlier) = model.backstop {
                prop_assert!(b <= earlier, "the backstop moved later");
            }
            model.backstop = Some(b);
        }
        Ok(())
    }

    /// The answer to the command given last, made from `bits`.
    fn answer(due: &str, bits: u8) -> Input {
        match due {
            "taken over" => Input::TakenOver {
                exited: (bits & 1 == 1).then_some(bits >> 1),
            },
            "ended" => Input::Ended {
                loss: bits.is_multiple_of(3).then(|| "lost".to_owned()),
            },
            _ => Input::Resigned {
                error: bits.is_multiple_of(5).then(|| "failed".to_owned()),
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The CLI's rules 2 and 3 on random runs with random times, fed
        /// as the executor feeds the machine (only what it listens for; an
        /// answer right after its command): no resign after a loss or a
        /// validity seen to run out; every `K` within the grace from now
        /// and (unless `--allow-late-kill`) by the successor's earliest
        /// start, at once after a revoke, never postponing an earlier one;
        /// the backstop likewise, and never later; every `V` of the latest
        /// validity, never after a loss; one finish, after the tree was
        /// seen empty, with the lost exit code after a loss.
        #[test]
        fn the_lead_loop_keeps_rules_2_and_3(
            steps in proptest::collection::vec(step(), 1..80),
            lease in any::<bool>(),
            late_ok in any::<bool>(),
            bound_ms in 1u64..3000,
            grace_ms in 1u64..3000,
            first_ms in 0u64..3000,
        ) {
            let t = KillTiming::new(lease.then(|| ms(bound_ms)), ms(grace_ms), late_ok);
            let mut m = LeadLoop::new(t, exit::LOST);
            let mut model = Model::default();
            let mut now = T0;
            let mut valid = T0 + first_ms * MS;
            for s in steps {
                now += s.wait_ms * MS;
                // Renewed while live: never after the loss or the deadline.
                if let Some(r) = s.renew_ms && !model.lost && now < valid {
                    valid = valid.max(now + r * MS);
                }
                let input = if let Some(due) = model.due.take() {
                    answer(due, s.bits)
                } else {
                    let listen = m.listen();
                    match s.kind {
                        _ if !model.started && s.bits % 8 != 0 => Input::Said(Said::Started(PID)),
                        Kind::Said(n) => Input::Said(match n {
                            0 => Said::Started(PID),
                            1 => Said::CannotStart(i32::from(s.bits % 20)),
                            2 => Said::Watchdog,
                            3 => Said::Killed,
                            4 => Said::Unkillable("7 8".into()),
                            5 => Said::Exited(s.bits),
                            _ => Said::Empty,
                        }),
                        Kind::Gone => Input::SupervisorGone,
                        Kind::Signal { which, from_terminal, same_group } if listen.signals => Input::Signal {
                            signal: [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP][usize::from(which)],
                            from_terminal,
                            same_group,
                        },
                        Kind::Tick(caught_up) if listen.term => Input::Tick { caught_up },
                        Kind::Lost(revoked) if listen.term => Input::Lost { revoked, reason: "lost".into() },
                        Kind::Transfer if listen.transfer => Input::TransferRequested { to: "b".into() },
                        Kind::Escalate => match listen.escalation {
                            Some(e) => { now = now.max(e); Input::Escalate }
                            None => continue,
                        },
                        Kind::Backstop => match listen.backstop {
                            Some(b) => { now = now.max(b); Input::Backstop }
                            None => continue,
                        },
                        _ => continue,
                    }
                };
                let at = At { now, valid_until: lease.then_some(valid) };
                check(&mut m, &mut model, &t, at, input)?;
            }
            // The end: the supervisor says `E` (or is gone), and every
            // answer comes; the run finishes, once.
            for i in 0..8u8 {
                if model.finishes > 0 {
                    break;
                }
                let input = match model.due.take() {
                    Some(due) => answer(due, i),
                    None => Input::Said(Said::Empty),
                };
                let at = At { now, valid_until: lease.then_some(valid) };
                check(&mut m, &mut model, &t, at, input)?;
            }
            prop_assert_eq!(model.finishes, 1, "no finish");
        }
    }
}
