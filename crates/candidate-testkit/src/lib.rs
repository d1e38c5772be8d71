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
//! election-candidate --backend URL (--name NAME | --many N) [--identity ID]
//!     [--ttl-ms N] [--renew-ms N] [--grace-ms N] [--poll-ms N] [--try]
//! ```
//!
//! `URL` is any backend URL of `election-url` (`file:///dir`,
//! `sqlite:///path.db`, `nats://host:port?bucket=B&replicas=N`). A loss does
//! not end the process (a deposed leader can still be told to write, to
//! show the fence refusing it); end of input resigns, or exits with code 4
//! after a loss. `--many N` tries once for each of the elections `e0` ..
//! `e<N-1>`, prints `won <count>`, and resigns them all on `resign`.
#![deny(missing_docs, unreachable_pub)]
#![warn(rust_2018_idioms)]

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long to wait for one line before failing the test.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub mod protocol;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock candidates stamp events
/// with, the same in every process of the host.
pub use mono_stamp::mono_ns;

/// A running candidate process, killed when dropped.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines<BufReader<ChildStdout>>,
    name: String,
}

impl Proc {
    /// Starts `bin` with `args`; `name` labels its failures.
    pub fn spawn(bin: &str, args: &[&str], name: &str) -> Proc {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {bin}: {e}"));
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        Proc {
            child,
            stdin,
            out,
            name: name.to_owned(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id().expect("running") as i32)
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap_or_else(|e| panic!("{}: {signal}: {e}", self.name));
    }

    /// The next line; fails the test after [`PATIENCE`] or at exit.
    pub async fn line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.out.next_line())
            .await
            .unwrap_or_else(|_| panic!("{}: silent for {PATIENCE:?}", self.name))
            .expect("read")
            .unwrap_or_else(|| panic!("{}: exited", self.name))
    }

    /// The next line, which must start with `word`; returns the rest.
    pub async fn expect(&mut self, word: &str) -> Vec<String> {
        let line = self.line().await;
        let mut parts = line.split(' ').map(str::to_owned);
        assert_eq!(
            parts.next().as_deref(),
            Some(word),
            "{}: got {line:?}",
            self.name
        );
        parts.collect()
    }

    /// The next line as an [`Event`](protocol::Event); fails the test on
    /// a line outside the protocol.
    pub async fn event(&mut self) -> protocol::Event {
        let line = self.line().await;
        line.parse()
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// Waits for `elected <epoch> <mono_ns>`: the epoch and the stamp.
    pub async fn elected(&mut self) -> (u64, u64) {
        match self.event().await {
            protocol::Event::Elected { epoch, at } => (epoch, at),
            other => panic!("{}: got {other:?}, not elected", self.name),
        }
    }

    /// Sends one [`Command`](protocol::Command).
    pub async fn command(&mut self, command: protocol::Command) {
        self.send(&command.to_string()).await;
    }

    /// Sends one command line.
    pub async fn send(&mut self, cmd: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .expect("write");
        stdin.flush().await.expect("flush");
    }

    /// Closes stdin (candidates resign at end of input).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }
}
