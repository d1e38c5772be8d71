//! The cross-process rows: clean handover (resign in A to elected in B) and
//! crash failover (SIGKILL of A to elected in B), for the election-file
//! candidate, the bare OFD lock helper (its floor), the election-sqlite
//! candidate, the election-nats candidate and the election-postgres helper.

use std::fs::File;
use std::path::PathBuf;
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

/// What to start for each process of the chain.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// `election-candidate --backend file:///DIR --name NAME --identity ID`.
    Candidate {
        /// The binary.
        bin: PathBuf,
        /// The election directory.
        dir: PathBuf,
        /// The election name.
        name: String,
    },
    /// `election-candidate --backend sqlite:///DB --name NAME --identity ID
    /// --ttl-ms T --renew-ms R --poll-ms P`.
    SqliteCandidate {
        /// The binary.
        bin: PathBuf,
        /// The database file.
        db: PathBuf,
        /// The election name.
        name: String,
        /// The lease timings every process of the chain is given.
        timings: LeaseTimings,
    },
    /// `election-candidate --backend nats://URLS?replicas=N --name NAME --identity ID
    /// --ttl-ms T --poll-ms P` (the default bucket, and the
    /// failover grace the TTL implies).
    NatsCandidate {
        /// The binary.
        bin: PathBuf,
        /// The servers' URLs, comma-separated.
        urls: String,
        /// The election name.
        name: String,
        /// The lease TTL (the bucket's max age), in milliseconds.
        ttl_ms: u64,
        /// The bucket's replicas.
        replicas: usize,
        /// How often a waiting contender polls (a backstop to its watch),
        /// in milliseconds.
        poll_ms: u64,
    },
    /// `election-bench helper postgres URL NAME TTL_MS RENEW_MS POLL_MS
    /// [LINGER_MS]`.
    PostgresHelper {
        /// The election-bench binary (this one).
        exe: PathBuf,
        /// The server's URL.
        url: String,
        /// The election name.
        name: String,
        /// The lease timings every process of the chain is given.
        timings: LeaseTimings,
        /// How long a process that resigned waits before it closes its
        /// connections and exits.
        linger_ms: u64,
    },
    /// `election-bench helper lock PATH`.
    LockHelper {
        /// The election-bench binary (this one).
        exe: PathBuf,
        /// The lock file.
        path: PathBuf,
    },
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
                cmd.arg("--backend")
                    .arg(BackendUrl::file(dir.clone()).to_string())
                    .args(["--name", name, "--identity", &id]);
                cmd
            }
            Kind::SqliteCandidate {
                bin,
                db,
                name,
                timings,
            } => {
                let mut cmd = Command::new(bin);
                cmd.arg("--backend").arg(sqlite_url(db)).args([
                    "--name",
                    name,
                    "--identity",
                    &id,
                    "--ttl-ms",
                    &timings.ttl_ms.to_string(),
                    "--renew-ms",
                    &timings.renew_ms.to_string(),
                    "--poll-ms",
                    &timings.poll_ms.to_string(),
                ]);
                cmd
            }
            Kind::NatsCandidate {
                bin,
                urls,
                name,
                ttl_ms,
                replicas,
                poll_ms,
            } => {
                let sep = if urls.contains('?') { '&' } else { '?' };
                let url = BackendUrl::parse(&format!("{urls}{sep}replicas={replicas}"))
                    .map_err(|e| format!("bad NATS URLs {urls:?}: {e}"))?;
                let mut cmd = Command::new(bin);
                cmd.args([
                    "--backend",
                    &url.with_secrets().to_string(),
                    "--name",
                    name,
                    "--identity",
                    &id,
                    "--ttl-ms",
                    &ttl_ms.to_string(),
                    "--poll-ms",
                    &poll_ms.to_string(),
                ]);
                cmd
            }
            Kind::PostgresHelper {
                exe,
                url,
                name,
                timings,
                linger_ms,
            } => {
                let mut cmd = Command::new(exe);
                cmd.args(["helper", "postgres", url, name])
                    .arg(timings.ttl_ms.to_string())
                    .arg(timings.renew_ms.to_string())
                    .arg(timings.poll_ms.to_string())
                    .arg(linger_ms.to_string());
                cmd
            }
            Kind::LockHelper { exe, path } => {
                let mut cmd = Command::new(exe);
                cmd.args(["helper", "lock"]).arg(path);
                cmd
            }
        };
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        cmd.stderr(log);
        Ok(Proc::start(format!("process {id}"), cmd)?.with_patience(TIMEOUT))
    }

    fn checks_epochs(&self) -> bool {
        matches!(
            self.kind,
            Kind::Candidate { .. }
                | Kind::SqliteCandidate { .. }
                | Kind::NatsCandidate { .. }
                | Kind::PostgresHelper { .. }
        )
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

/// The `sqlite://` URL of the database at `db`.
pub(crate) fn sqlite_url(db: &std::path::Path) -> String {
    BackendUrl::new(election_sqlite::SqliteUrl::new(db)).to_string()
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
