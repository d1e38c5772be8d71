//! The cross-process rows: clean handover (resign in A to elected in B) and
//! crash failover (SIGKILL of A to elected in B), for the election-file
//! candidate and for the bare OFD lock helper (their floor).

use std::fs::File;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::ofd::mono_ns;
use super::process::Proc;
use crate::Result;

/// How the leader leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// `resign` on stdin: latency from A's `resigning` stamp.
    Resign,
    /// SIGKILL: latency from the bench's stamp just before the kill.
    Kill,
}

/// What to start for each process of the chain.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// `election-file-candidate --dir DIR --name NAME --identity ID`.
    Candidate {
        /// The binary.
        bin: PathBuf,
        /// The election directory.
        dir: PathBuf,
        /// The election name.
        name: String,
    },
    /// `xtask bench-helper lock PATH`.
    LockHelper {
        /// The xtask binary (this one).
        exe: PathBuf,
        /// The lock file.
        path: PathBuf,
    },
}

/// Starts the processes of one chain, each with a fresh identity.
#[derive(Debug)]
pub(crate) struct Chain {
    kind: Kind,
    log: PathBuf,
    started: usize,
}

impl Chain {
    /// A chain of `kind` whose children write their stderr to `log`.
    pub(crate) fn new(kind: Kind, log: PathBuf) -> Self {
        Chain {
            kind,
            log,
            started: 0,
        }
    }

    fn spawn(&mut self) -> Result<Proc> {
        let id = format!("p{}", self.started);
        self.started += 1;
        let mut cmd = match &self.kind {
            Kind::Candidate { bin, dir, name } => {
                let mut cmd = Command::new(bin);
                cmd.arg("--dir")
                    .arg(dir)
                    .args(["--name", name, "--identity", &id]);
                cmd
            }
            Kind::LockHelper { exe, path } => {
                let mut cmd = Command::new(exe);
                cmd.args(["bench-helper", "lock"]).arg(path);
                cmd
            }
        };
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        cmd.stderr(log);
        Proc::spawn(format!("process {id}"), cmd)
    }

    fn checks_epochs(&self) -> bool {
        matches!(self.kind, Kind::Candidate { .. })
    }

    /// Measures `n` handovers (after `warmup` unrecorded ones): each new
    /// process starts and waits while the current leader holds, `settle`
    /// later the leader leaves by `exit`, and the sample is from the
    /// leaver's stamp to the new leader's `elected` stamp. The new leader
    /// is the next round's leaver. Returns the samples in nanoseconds.
    pub(crate) fn measure(
        &mut self,
        exit: Exit,
        n: usize,
        warmup: usize,
        settle: Duration,
    ) -> Result<Vec<u64>> {
        let mut leader = self.spawn()?;
        leader.expect("campaigning")?;
        let (mut epoch, _) = leader.expect_elected()?;
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let mut next = self.spawn()?;
            next.expect("campaigning")?;
            std::thread::sleep(settle);
            if let Some(line) = next.try_line() {
                return Err(format!(
                    "{} printed {line:?} while {} still led",
                    next.label(),
                    leader.label()
                )
                .into());
            }
            let t0 = match exit {
                Exit::Resign => {
                    leader.send("resign")?;
                    leader.expect_stamp("resigning")?
                }
                Exit::Kill => {
                    let t0 = mono_ns();
                    leader.sigkill()?;
                    t0
                }
            };
            let (next_epoch, t1) = next.expect_elected()?;
            if t1 < t0 {
                return Err(format!(
                    "{} elected at {t1} ns, before {} left at {t0} ns",
                    next.label(),
                    leader.label()
                )
                .into());
            }
            if self.checks_epochs() && next_epoch <= epoch {
                return Err(format!(
                    "{} won epoch {next_epoch}, not above the previous {epoch}",
                    next.label()
                )
                .into());
            }
            match exit {
                Exit::Resign => {
                    leader.expect_stamp("resigned")?;
                    leader.wait_success()?;
                }
                Exit::Kill => {
                    leader.wait()?;
                }
            }
            if round >= warmup {
                samples.push(t1 - t0);
            }
            leader = next;
            epoch = next_epoch;
        }
        leader.send("resign")?;
        leader.expect_stamp("resigning")?;
        leader.expect_stamp("resigned")?;
        leader.wait_success()?;
        Ok(samples)
    }
}
