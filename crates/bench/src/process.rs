//! Child processes that speak the candidate line protocol: `campaigning`,
//! `elected <epoch> <mono_ns>`, `resigning <mono_ns>`, `resigned <mono_ns>`
//! on stdout; `resign` / `exit` on stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::Result;

/// How long any one expected line or exit may take before the bench gives
/// up: generous, since a stuck handover is a bug to report, not a sample.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

/// A running child and the lines it has printed.
pub(crate) struct Proc {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    exited: Option<ExitStatus>,
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
    /// Starts `cmd` with piped stdin and stdout; stderr goes where `cmd`
    /// says (the caller points it at a log file).
    pub(crate) fn spawn(label: String, mut cmd: Command) -> Result<Proc> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{label}: spawn {cmd:?}: {e}"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
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
        })
    }

    /// The label given at spawn, for messages.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The next line, waiting up to [`TIMEOUT`].
    fn next_line(&mut self) -> Result<String> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                Err(format!("{}: no output for {TIMEOUT:?}", self.label).into())
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait()?;
                Err(format!("{}: stdout closed ({status})", self.label).into())
            }
        }
    }

    /// A line printed so far, without waiting.
    pub(crate) fn try_line(&mut self) -> Option<String> {
        self.lines.try_recv().ok()
    }

    /// Reads the next line, which must start with `word`; returns the words
    /// after it.
    pub(crate) fn expect(&mut self, word: &str) -> Result<Vec<String>> {
        let line = self.next_line()?;
        let mut words = line.split_whitespace();
        if words.next() != Some(word) {
            return Err(format!("{}: expected `{word} ...`, got {line:?}", self.label).into());
        }
        Ok(words.map(str::to_owned).collect())
    }

    /// Reads `elected <epoch> <mono_ns>`.
    pub(crate) fn expect_elected(&mut self) -> Result<(u64, u64)> {
        let rest = self.expect("elected")?;
        match rest.as_slice() {
            [epoch, ns] => Ok((self.number(epoch)?, self.number(ns)?)),
            _ => Err(format!("{}: bad `elected` line: {rest:?}", self.label).into()),
        }
    }

    /// Reads `<word> <mono_ns>` (`resigning`, `resigned`).
    pub(crate) fn expect_stamp(&mut self, word: &str) -> Result<u64> {
        let rest = self.expect(word)?;
        match rest.as_slice() {
            [ns] => self.number(ns),
            _ => Err(format!("{}: bad `{word}` line: {rest:?}", self.label).into()),
        }
    }

    fn number(&self, text: &str) -> Result<u64> {
        text.parse()
            .map_err(|e| format!("{}: not a number {text:?}: {e}", self.label).into())
    }

    /// Sends one command line on stdin.
    pub(crate) fn send(&mut self, command: &str) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin already closed", self.label))?;
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: write {command:?}: {e}", self.label).into())
    }

    /// Sends SIGKILL.
    pub(crate) fn sigkill(&mut self) -> Result<()> {
        let pid = Pid::from_raw(i32::try_from(self.child.id())?);
        kill(pid, Signal::SIGKILL).map_err(|e| format!("{}: kill: {e}", self.label).into())
    }

    /// Waits up to [`TIMEOUT`] for the child to exit.
    pub(crate) fn wait(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.exited = Some(status);
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(format!("{}: did not exit within {TIMEOUT:?}", self.label).into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits for the child to exit and requires a zero exit code.
    pub(crate) fn wait_success(&mut self) -> Result<()> {
        let status = self.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{}: exited with {status}", self.label).into())
        }
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
