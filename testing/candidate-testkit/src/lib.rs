//! Test support: one candidate binary for every backend,
//! `election-candidate --backend URL`, and the client that drives it over
//! its line protocol ([`protocol`]), so the multi-process tests of every
//! backend (in this crate's `tests/`), the torture suite's neighbours and
//! the benchmarks share one program and one driver.
//!
//! A candidate prints one [`Event`](protocol::Event) per line
//! (`campaigning`, `elected <epoch> <mono_ns>`, `resigning <mono_ns>`,
//! `lost <reason>`, ...) and reads [`Command`](protocol::Command)s from
//! stdin (`resign`, `exit`, ...):
//!
//! ```text
//! election-candidate --backend URL (--name NAME | --many N [--name PREFIX]
//!     [--at-once K]) [--identity ID] [--ttl-ms N] [--renew-ms N] [--grace-ms N]
//!     [--poll-ms N] [--try]
//! ```
//!
//! [`Proc`] is the one client: blocking (a thread reads the child's
//! stdout), so the benchmarks' synchronous code and the async tests (which
//! only drive processes while they wait) share it. Its `read_*` and
//! `write_line` methods return a [`ClientError`]; the short forms
//! (`line`, `expect`, `elected`, `send`, ...) fail the test instead.
//!
//! `URL` is any backend URL of `election-url` (`file:///dir`,
//! `sqlite:///path.db`, `nats://host:port?bucket=B&replicas=N`). A loss does
//! not end the process (a deposed leader can still be told to write, to
//! show the fence refusing it); end of input resigns, or exits with code 4
//! after a loss. `--many N` tries once for each of the elections `e0` ..
//! `e<N-1>` (`--name P --many N`: `P0` .. `P<N-1>`), `K` at a time with
//! `--at-once K` (default 1), prints `won <count>`,
//! then `lost <name>: <reason>` for each term it loses, answers `held`
//! with `held <count> <age_ns>` (the terms still held, and the time since
//! the oldest renewal among them landed), and resigns them all on
//! `resign`.
//!
//! The crate's second binary, `lease-set-node`, runs one lease set in a
//! process of its own and reports every change of what it holds
//! ([`lease_set`]), for the multi-process lease-set tests of every backend
//! (`tests/it/lease_set/`, a module per backend). Both binaries, and the torture suite's
//! `torture-candidate` and `torture-member`, parse their command lines
//! with clap, the flags they share being one struct ([`args::Common`]).
// Lints: [workspace.lints] in the root Cargo.toml, the one place (ADR 0056).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub mod args;
pub mod lease_set;
pub mod open;
pub mod protocol;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock candidates stamp events
/// with, the same in every process of the host.
pub use fencing::mono::mono_ns;

/// How long to wait for one line (or an exit) by default before failing.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Why driving a candidate process failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The process could not be started.
    #[error("{label}: cannot start {program}")]
    Spawn {
        /// The process's label.
        label: String,
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No line (or no exit) within the patience.
    #[error("{label}: silent for {patience:?}")]
    Silent {
        /// The process's label.
        label: String,
        /// How long it was given.
        patience: Duration,
    },
    /// The process closed its stdout (it exited).
    #[error("{label}: stdout closed ({status})")]
    Closed {
        /// The process's label.
        label: String,
        /// How it ended, as far as known.
        status: String,
    },
    /// A line other than the one expected.
    #[error("{label}: expected `{expected} ...`, got {line:?}")]
    Unexpected {
        /// The process's label.
        label: String,
        /// The word or event expected.
        expected: String,
        /// The line read.
        line: String,
    },
    /// Writing to, signalling or waiting for the process failed.
    #[error("{label}: {what}")]
    Io {
        /// The process's label.
        label: String,
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process exited with a failure.
    #[error("{label}: exited with {status}")]
    Failed {
        /// The process's label.
        label: String,
        /// Its exit status.
        status: ExitStatus,
    },
}

/// A running candidate process (or any process speaking the line
/// protocol), killed when dropped.
pub struct Proc {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    exited: Option<ExitStatus>,
    patience: Duration,
}

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proc")
            .field("label", &self.label)
            .field("pid", &self.child.id())
            .finish()
    }
}

impl Proc {
    /// Starts `cmd` with piped stdin and stdout (stderr goes where `cmd`
    /// says); `label` names it in errors. Waits up to [`PATIENCE`] for
    /// each line unless [`with_patience`](Proc::with_patience) says
    /// otherwise.
    pub fn start(label: impl Into<String>, mut cmd: Command) -> Result<Proc, ClientError> {
        let label = label.into();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|source| ClientError::Spawn {
                label: label.clone(),
                program: format!("{:?}", cmd.get_program()),
                source,
            })?;
        let stdout = child.stdout.take().ok_or_else(|| ClientError::Io {
            label: label.clone(),
            what: "no stdout pipe".into(),
            source: std::io::Error::other("stdout is not piped"),
        })?;
        let stdin = child.stdin.take();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Proc {
            label,
            child,
            stdin,
            lines: rx,
            exited: None,
            patience: PATIENCE,
        })
    }

    /// Starts `bin` with `args`; `name` labels its failures. Fails the
    /// test if it cannot start.
    pub fn spawn(bin: &str, args: &[&str], name: &str) -> Proc {
        let mut cmd = Command::new(bin);
        cmd.args(args);
        Proc::start(name, cmd).unwrap_or_else(|e| panic!("{e}"))
    }

    /// How long each wait for a line or an exit may take.
    pub fn with_patience(mut self, patience: Duration) -> Proc {
        self.patience = patience;
        self
    }

    /// The label given at start, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The process id.
    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX))
    }

    /// The next line, waiting up to the patience.
    pub fn read_line(&mut self) -> Result<String, ClientError> {
        match self.lines.recv_timeout(self.patience) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Silent {
                label: self.label.clone(),
                patience: self.patience,
            }),
            Err(RecvTimeoutError::Disconnected) => {
                let status = match self.wait() {
                    Ok(status) => status.to_string(),
                    Err(e) => e.to_string(),
                };
                Err(ClientError::Closed {
                    label: self.label.clone(),
                    status,
                })
            }
        }
    }

    /// A line printed so far, without waiting.
    pub fn try_line(&mut self) -> Option<String> {
        self.lines.try_recv().ok()
    }

    /// The next line as an [`Event`](protocol::Event).
    pub fn read_event(&mut self) -> Result<protocol::Event, ClientError> {
        let line = self.read_line()?;
        line.parse().map_err(|_| ClientError::Unexpected {
            label: self.label.clone(),
            expected: "an event".into(),
            line,
        })
    }

    /// The next line, which must start with `word`; the words after it.
    pub fn read_expect(&mut self, word: &str) -> Result<Vec<String>, ClientError> {
        let line = self.read_line()?;
        let mut words = line.split(' ');
        if words.next() != Some(word) {
            return Err(ClientError::Unexpected {
                label: self.label.clone(),
                expected: word.into(),
                line,
            });
        }
        Ok(words.map(str::to_owned).collect())
    }

    /// Reads `elected <epoch> <mono_ns>`: the epoch and the stamp.
    pub fn read_elected(&mut self) -> Result<(u64, u64), ClientError> {
        match self.read_event()? {
            protocol::Event::Elected { epoch, at } => Ok((epoch, at)),
            other => Err(ClientError::Unexpected {
                label: self.label.clone(),
                expected: "elected".into(),
                line: other.to_string(),
            }),
        }
    }

    /// Reads `<word> <mono_ns>` (`resigning`, `resigned`): the stamp.
    pub fn read_stamp(&mut self, word: &str) -> Result<u64, ClientError> {
        let rest = self.read_expect(word)?;
        match rest.as_slice() {
            [ns] => ns.parse().map_err(|_| ClientError::Unexpected {
                label: self.label.clone(),
                expected: format!("{word} <mono_ns>"),
                line: format!("{word} {}", rest.join(" ")),
            }),
            _ => Err(ClientError::Unexpected {
                label: self.label.clone(),
                expected: format!("{word} <mono_ns>"),
                line: format!("{word} {}", rest.join(" ")),
            }),
        }
    }

    /// Sends one command line.
    pub fn write_line(&mut self, command: &str) -> Result<(), ClientError> {
        let io = |what: String| {
            let label = self.label.clone();
            move |source| ClientError::Io {
                label,
                what,
                source,
            }
        };
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            io("stdin already closed".into())(std::io::ErrorKind::BrokenPipe.into())
        })?;
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .map_err(io(format!("write {command:?}")))
    }

    /// Sends `signal` to the process.
    pub fn kill_with(&self, signal: Signal) -> Result<(), ClientError> {
        kill(self.pid(), signal).map_err(|e| ClientError::Io {
            label: self.label.clone(),
            what: signal.to_string(),
            source: e.into(),
        })
    }

    /// Sends SIGKILL.
    pub fn sigkill(&self) -> Result<(), ClientError> {
        self.kill_with(Signal::SIGKILL)
    }

    /// Closes stdin (candidates resign at end of input).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits up to the patience for the process to exit.
    pub fn wait(&mut self) -> Result<ExitStatus, ClientError> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let deadline = Instant::now() + self.patience;
        loop {
            let polled = self.child.try_wait().map_err(|source| ClientError::Io {
                label: self.label.clone(),
                what: "wait".into(),
                source,
            })?;
            if let Some(status) = polled {
                self.exited = Some(status);
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(ClientError::Silent {
                    label: self.label.clone(),
                    patience: self.patience,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits for the process to exit and requires success.
    pub fn wait_success(&mut self) -> Result<(), ClientError> {
        let status = self.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(ClientError::Failed {
                label: self.label.clone(),
                status,
            })
        }
    }

    // The short forms for tests: a failure fails the test.

    /// [`read_line`](Proc::read_line), failing the test on an error.
    pub fn line(&mut self) -> String {
        self.read_line().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`read_event`](Proc::read_event), failing the test on an error.
    pub fn event(&mut self) -> protocol::Event {
        self.read_event().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`read_expect`](Proc::read_expect), failing the test on an error.
    pub fn expect(&mut self, word: &str) -> Vec<String> {
        self.read_expect(word).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`read_elected`](Proc::read_elected), failing the test on an
    /// error.
    pub fn elected(&mut self) -> (u64, u64) {
        self.read_elected().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`write_line`](Proc::write_line), failing the test on an error.
    pub fn send(&mut self, command: &str) {
        self.write_line(command).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sends one [`Command`](protocol::Command), failing the test on an
    /// error.
    pub fn command(&mut self, command: protocol::Command) {
        self.send(&command.to_string());
    }

    /// [`kill_with`](Proc::kill_with), failing the test on an error.
    pub fn signal(&self, signal: Signal) {
        self.kill_with(signal).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
