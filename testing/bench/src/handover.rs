//! The cross-process rows, written once for every backend: chains of
//! processes that hand an election over from one to the next, by a clean
//! resign or a SIGKILL ([`Chain`]), and crash failovers of a whole lease set
//! ([`LeaseSets::failover`]). A process is a candidate opening a backend URL
//! (`election-candidate --backend URL`: which backend it is, the chain never
//! looks at) or a helper of this binary that speaks the same line protocol
//! (the bare OFD lock holder, the floor; a backend's own candidate).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::ofd::mono_ns;
use candidate_testkit::Proc;
use election_url::BackendUrl;

/// How long any one expected line or exit may take before the bench gives
/// up: generous, since a stuck handover is a bug to report, not a sample.
const TIMEOUT: Duration = Duration::from_secs(20);
use crate::Result;

/// How the leader leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// `resign` on stdin: latency from A's `resigning` stamp.
    Resign,
    /// SIGKILL: latency from the bench's stamp just before the kill.
    Kill,
}

impl Exit {
    /// The row name of the floor of a chain leaving this way: the bare OFD
    /// lock handover (or failover) between two helper processes.
    pub(crate) fn lock_floor(self) -> &'static str {
        match self {
            Exit::Resign => "bare OFD lock handover: unlock in A → F_OFD_SETLKW returns in B",
            Exit::Kill => "bare OFD lock failover: SIGKILL of A → F_OFD_SETLKW returns in B",
        }
    }
}

/// The floor of a cross-process row: `n` handovers (after `warmup`) as
/// `exit` says between `election-bench helper lock` processes on the lock
/// file `path`, each given `settle` to block before the holder leaves.
pub(crate) fn lock_floor(
    exe: &Path,
    path: &Path,
    log: &Path,
    exit: Exit,
    (n, warmup): (usize, usize),
    settle: Duration,
) -> Result<Vec<u64>> {
    Chain::new(Process::lock_helper(exe, path), log.to_path_buf()).measure(
        exit,
        n,
        warmup,
        settle,
        Duration::ZERO,
    )
}

/// What to start for each process of the chain.
#[derive(Clone, Debug)]
pub(crate) enum Process {
    /// `election-candidate --backend URL --name NAME --identity ID FLAGS...`:
    /// a candidate of any backend, through its URL.
    Candidate {
        /// The binary.
        bin: PathBuf,
        /// The backend URL, secrets included.
        url: String,
        /// The election name.
        name: String,
        /// The flags after the identity (lease timings).
        flags: Vec<String>,
    },
    /// `election-bench helper ARGS...`: a process of this binary that speaks
    /// the candidate line protocol.
    Helper {
        /// The election-bench binary (this one).
        exe: PathBuf,
        /// The arguments after `helper`.
        args: Vec<OsString>,
        /// Whether each process wins a higher epoch than the last (a bare
        /// lock's are all 0).
        epochs: bool,
    },
}

impl Process {
    /// A candidate of the backend at `url` for election `name`, given
    /// `flags` after its identity.
    pub(crate) fn candidate(bin: &Path, url: &BackendUrl, name: &str, flags: Vec<String>) -> Self {
        Process::Candidate {
            bin: bin.to_path_buf(),
            url: url.with_secrets().to_string(),
            name: name.to_owned(),
            flags,
        }
    }

    /// `election-bench helper lock PATH`: a bare OFD lock holder, the floor
    /// of the cross-process rows.
    pub(crate) fn lock_helper(exe: &Path, path: &Path) -> Self {
        Process::Helper {
            exe: exe.to_path_buf(),
            args: vec!["lock".into(), path.as_os_str().to_owned()],
            epochs: false,
        }
    }
}

/// The lease TTL, renewal interval and poll interval of a lease-based
/// candidate, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeaseTimings {
    /// How long a lease lasts without renewal.
    pub(crate) ttl_ms: u64,
    /// How often the holder renews.
    pub(crate) renew_ms: u64,
    /// How often a waiting contender polls the lease row.
    pub(crate) poll_ms: u64,
}

impl LeaseTimings {
    /// `--ttl-ms T --renew-ms R --poll-ms P`.
    pub(crate) fn flags(&self) -> Vec<String> {
        [
            ("--ttl-ms", self.ttl_ms),
            ("--renew-ms", self.renew_ms),
            ("--poll-ms", self.poll_ms),
        ]
        .into_iter()
        .flat_map(|(flag, ms)| [flag.to_owned(), ms.to_string()])
        .collect()
    }
}

/// The pause before the leader leaves in round `round`: `settle`, plus a
/// fraction of `spread` that walks evenly over `[0, 1)` from round to round
/// (the golden-ratio sequence), so that the leave lands at every phase of a
/// periodic process (a contender's polls, the leader's renewals) rather
/// than at one fixed phase.
pub(crate) fn pause(settle: Duration, spread: Duration, round: usize) -> Duration {
    const INVERSE_GOLDEN_RATIO: f64 = 0.618_033_988_749_894_9;
    let phase = ((round as f64 + 1.0) * INVERSE_GOLDEN_RATIO).fract();
    settle + spread.mul_f64(phase)
}

/// Starts the processes of one chain, each with a fresh identity.
#[derive(Debug)]
pub(crate) struct Chain {
    kind: Process,
    log: PathBuf,
    started: usize,
}

impl Chain {
    /// A chain of `kind` whose children write their stderr to `log`.
    pub(crate) fn new(kind: Process, log: PathBuf) -> Self {
        Chain {
            kind,
            log,
            started: 0,
        }
    }

    fn spawn(&mut self) -> Result<Proc> {
        let id = format!("p{}", self.started);
        self.started += 1;
        let cmd = match &self.kind {
            Process::Candidate {
                bin,
                url,
                name,
                flags,
            } => {
                let mut cmd = Command::new(bin);
                cmd.args(["--backend", url, "--name", name, "--identity", &id])
                    .args(flags);
                cmd
            }
            Process::Helper { exe, args, .. } => {
                let mut cmd = Command::new(exe);
                cmd.arg("helper").args(args);
                cmd
            }
        };
        start(format!("process {id}"), cmd, &self.log)
    }

    fn checks_epochs(&self) -> bool {
        match &self.kind {
            Process::Candidate { .. } => true,
            Process::Helper { epochs, .. } => *epochs,
        }
    }

    /// Measures `n` handovers (after `warmup` unrecorded ones): each new
    /// process starts and waits while the current leader holds, a
    /// [`pause`] of `settle` plus part of `spread` later the leader leaves
    /// by `exit`, and the sample is from the leaver's stamp to the new
    /// leader's `elected` stamp. The new leader is the next round's leaver.
    /// Returns the samples in nanoseconds.
    pub(crate) fn measure(
        &mut self,
        exit: Exit,
        n: usize,
        warmup: usize,
        settle: Duration,
        spread: Duration,
    ) -> Result<Vec<u64>> {
        let mut leader = self.spawn()?;
        leader.read_expect("campaigning")?;
        let (mut epoch, _) = leader.read_elected()?;
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let mut next = self.spawn()?;
            next.read_expect("campaigning")?;
            std::thread::sleep(pause(settle, spread, round));
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
                    leader.write_line("resign")?;
                    leader.read_stamp("resigning")?
                }
                Exit::Kill => {
                    let t0 = mono_ns();
                    leader.sigkill()?;
                    t0
                }
            };
            let (next_epoch, t1) = next.read_elected()?;
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
                    leader.read_stamp("resigned")?;
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
        leader.write_line("resign")?;
        leader.read_stamp("resigning")?;
        leader.read_stamp("resigned")?;
        leader.wait_success()?;
        Ok(samples)
    }

    /// Measures `n` clean handovers (after `warmup` unrecorded ones) with
    /// `k` candidates at once: one leader and `k - 1` waiters. Each round,
    /// `settle` after the last waiter started, the leader resigns and the
    /// sample is from its `resigning` stamp to the `elected` stamp of
    /// whichever waiter wins (read from every waiter's lines); no other
    /// waiter may print anything. The winner leads the next round and a new
    /// waiter takes its place, so every round has `k` candidates. Returns
    /// the samples in nanoseconds.
    pub(crate) fn measure_waiters(
        &mut self,
        k: usize,
        n: usize,
        warmup: usize,
        settle: Duration,
    ) -> Result<Vec<u64>> {
        let mut leader = self.spawn()?;
        leader.read_expect("campaigning")?;
        let (mut epoch, _) = leader.read_elected()?;
        let mut waiters = Vec::with_capacity(k);
        while waiters.len() + 1 < k {
            let mut w = self.spawn()?;
            w.read_expect("campaigning")?;
            waiters.push(w);
        }
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            std::thread::sleep(settle);
            for w in &mut waiters {
                if let Some(line) = w.try_line() {
                    return Err(format!(
                        "{} printed {line:?} while {} still led",
                        w.label(),
                        leader.label()
                    )
                    .into());
                }
            }
            leader.write_line("resign")?;
            let t0 = leader.read_stamp("resigning")?;
            let deadline = std::time::Instant::now() + TIMEOUT;
            let (winner, line) = loop {
                if let Some(found) = waiters
                    .iter_mut()
                    .enumerate()
                    .find_map(|(i, w)| w.try_line().map(|l| (i, l)))
                {
                    break found;
                }
                if std::time::Instant::now() > deadline {
                    return Err(format!(
                        "none of {} waiters was elected within {TIMEOUT:?} of {}'s resign",
                        waiters.len(),
                        leader.label()
                    )
                    .into());
                }
                std::thread::sleep(Duration::from_micros(200));
            };
            let (next_epoch, t1) = match line.parse() {
                Ok(candidate_testkit::protocol::Event::Elected { epoch, at }) => (epoch, at),
                _ => {
                    return Err(format!(
                        "{} printed {line:?}, not `elected`",
                        waiters[winner].label()
                    )
                    .into());
                }
            };
            if t1 < t0 || next_epoch <= epoch {
                return Err(format!(
                    "{} elected at {t1} ns in epoch {next_epoch}; {} left at {t0} ns in \
                     epoch {epoch}",
                    waiters[winner].label(),
                    leader.label()
                )
                .into());
            }
            leader.read_stamp("resigned")?;
            leader.wait_success()?;
            if round >= warmup {
                samples.push(t1 - t0);
            }
            leader = waiters.swap_remove(winner);
            epoch = next_epoch;
            let mut w = self.spawn()?;
            w.read_expect("campaigning")?;
            waiters.push(w);
        }
        leader.write_line("resign")?;
        leader.read_stamp("resigning")?;
        leader.read_stamp("resigned")?;
        leader.wait_success()?;
        for w in &mut waiters {
            w.close_stdin();
        }
        Ok(samples)
    }
}

/// Starts `cmd` as `label`, its stderr appended to `log`.
fn start(label: String, cmd: Command, log: &Path) -> Result<Proc> {
    start_with_patience(label, cmd, log, TIMEOUT)
}

/// [`start`], with `patience` for each line awaited from the process.
pub(crate) fn start_with_patience(
    label: String,
    mut cmd: Command,
    log: &Path,
    patience: Duration,
) -> Result<Proc> {
    let file = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    cmd.stderr(file);
    Ok(Proc::start(label, cmd)?.with_patience(patience))
}

/// A chain of lease-set processes: `election-candidate --backend URL --set
/// k0,..,kN --identity sI FLAGS...`, any backend, through its URL.
#[derive(Debug)]
pub(crate) struct LeaseSets<'a> {
    /// The candidate binary.
    pub(crate) bin: &'a Path,
    /// The backend.
    pub(crate) url: &'a BackendUrl,
    /// The keys every set asks.
    pub(crate) keys: usize,
    /// The flags after the identity (lease timings).
    pub(crate) flags: Vec<String>,
    /// Where the children's stderr goes.
    pub(crate) log: &'a Path,
}

impl LeaseSets<'_> {
    fn spawn(&self, id: &str) -> Result<Proc> {
        let keys: Vec<String> = (0..self.keys).map(|i| format!("k{i}")).collect();
        let mut cmd = Command::new(self.bin);
        cmd.args(["--backend", &self.url.with_secrets().to_string()])
            .args(["--set", &keys.join(","), "--identity", id])
            .args(&self.flags);
        start(format!("set {id}"), cmd, self.log)
    }

    /// `n` crash failovers of a lease set (after `warmup`): set A holds
    /// every key, set B asks the same keys, a [`pause`] of `settle` plus
    /// part of `spread` after B waits A is killed, and the sample runs from
    /// the bench's stamp just before the kill to the moment the bench reads
    /// B's `won <keys>` (B looks at its held keys every millisecond, and
    /// has no stamp of its own: so this includes up to 1 ms of B's sampling
    /// and a pipe read).
    pub(crate) fn failover(
        &self,
        n: usize,
        warmup: usize,
        settle: Duration,
        spread: Duration,
    ) -> Result<Vec<u64>> {
        let mut started = 0;
        let mut next_id = || {
            started += 1;
            format!("s{started}")
        };
        let mut leader = self.spawn(&next_id())?;
        leader.read_expect("campaigning")?;
        until_holding(&mut leader, self.keys)?;
        let mut samples = Vec::with_capacity(n);
        for round in 0..warmup + n {
            let mut next = self.spawn(&next_id())?;
            next.read_expect("campaigning")?;
            until_holding(&mut next, 0)?;
            std::thread::sleep(pause(settle, spread, round));
            let t0 = mono_ns();
            leader.sigkill()?;
            let t1 = until_holding(&mut next, self.keys)?;
            leader.wait()?;
            if round >= warmup {
                samples.push(t1 - t0);
            }
            leader = next;
        }
        leader.write_line("resign")?;
        leader.read_stamp("resigning")?;
        leader.read_stamp("resigned")?;
        leader.wait_success()?;
        Ok(samples)
    }
}

/// Reads `p`'s `won <n>` lines until it holds `n` keys; the time it read
/// that line.
fn until_holding(p: &mut Proc, n: usize) -> Result<u64> {
    let want = format!("won {n}");
    loop {
        let line = p.read_line()?;
        if line == want {
            return Ok(mono_ns());
        }
        if !line.starts_with("won ") {
            return Err(format!("{}: unexpected {line:?}", p.label()).into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_cover_the_spread_evenly() {
        let ms = Duration::from_millis;
        assert_eq!(pause(ms(20), Duration::ZERO, 7), ms(20));
        let pauses: Vec<Duration> = (0..100).map(|r| pause(ms(20), ms(100), r)).collect();
        assert!(pauses.iter().all(|p| *p >= ms(20) && *p < ms(120)));
        // Every tenth of the spread is hit, none more than twice as often
        // as an even share.
        let mut buckets = [0usize; 10];
        for p in &pauses {
            buckets[((*p - ms(20)).as_millis() / 10) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (5..=20).contains(&b)),
            "{buckets:?}"
        );
    }
}
