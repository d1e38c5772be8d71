//! Test support: drives the backends' candidate binaries (the
//! `election-*-candidate` programs) over their line protocol, so the
//! multi-process tests of every backend share one driver.
//!
//! A candidate prints one event per line (`campaigning`, `elected <epoch>
//! <mono_ns>`, `resigning <mono_ns>`, `lost <reason>`, ...) and reads
//! commands from stdin (`resign`, `exit`, ...); see each binary's docs.
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

/// `CLOCK_MONOTONIC` in nanoseconds: the clock candidates stamp events
/// with, the same in every process of the host.
pub fn mono_ns() -> u128 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u128 * 1_000_000_000 + t.tv_nsec() as u128
}

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

    /// Waits for `elected <epoch> <mono_ns>`.
    pub async fn elected(&mut self) -> (u64, u128) {
        let rest = self.expect("elected").await;
        (
            rest[0].parse().expect("epoch"),
            rest[1].parse().expect("ns"),
        )
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
