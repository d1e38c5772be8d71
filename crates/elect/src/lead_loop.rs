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
                json!({ "name": name, "epoch": epoch, "signal": signal.as_str(), "kill_grace_ms": grace.as_millis() as u64 }),
            ),
            Event::Lost { reason, kill_after } => (
                "lost",
                format!("lost {name}, term {epoch}: {reason}; stopping the command and every process it started (SIGTERM, SIGKILL after {kill_after:?})"),
                json!({ "name": name, "epoch": epoch, "reason": reason, "kill_after_ms": kill_after.as_millis() as u64 }),
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
        }
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
            Input::Tick { caught_up } if listen.term => {
                if at.valid_until != self.told_valid {
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
            out.push(Command::Resign);
        }
    }

    /// The term is given up (or failed to be).
    fn resigned(&mut self, error: Option<String>, out: &mut Vec<Command>) {
        if let Some(not_started) = self.not_started {
            self.finish(not_started, out);
            return;
        }
        out.push(Command::Report(match error {
            None => Event::Resigned,
            Some(error) => Event::ResignFailed { error },
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
