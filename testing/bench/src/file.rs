//! The in-process rows of the file backend: an uncontested campaign (and
//! campaign + resign), and their floors: a bare OFD lock + unlock, and an
//! OFD lock around a durable write (what a campaign did per term to persist
//! the epoch before ADR 0025; now it writes the record through the page
//! cache and pays a durable write once per block of 1024 epochs, so the
//! lock floor is the one to compare with).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use election_url::{BackendUrl, Settings};

use super::ofd::OfdFile;
use super::rounds::{Campaigns, runtime};
use super::stats::ns;
use crate::Result;

/// Samples of the uncontested campaign, in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct CampaignSamples {
    /// `candidate.campaign()` alone.
    pub(crate) campaign: Vec<u64>,
    /// `candidate.campaign()` then `term.resign()`.
    pub(crate) campaign_resign: Vec<u64>,
}

/// Campaigns `warmup + n` times for an election nobody else contests,
/// resigning each term, in one process, through the backend opened from
/// its URL: the file backend's own cost.
pub(crate) fn campaign(dir: &Path, n: usize, warmup: usize) -> Result<CampaignSamples> {
    std::fs::create_dir_all(dir)?;
    runtime()?.block_on(async {
        let backend = BackendUrl::file(dir).open(&Settings::default()).await?;
        let (campaign, campaign_resign) = Campaigns::new(&backend, "bench", "a")?
            .rounds(n, warmup)
            .await?;
        Ok(CampaignSamples {
            campaign,
            campaign_resign,
        })
    })
}

/// Floor: OFD lock + unlock on one open file description, reused.
pub(crate) fn floor_lock(dir: &Path, n: usize, warmup: usize) -> Result<Vec<u64>> {
    let lock = OfdFile::open(&dir.join("floor-lock.lock"))?;
    let mut samples = Vec::with_capacity(n);
    for round in 0..warmup + n {
        let t0 = Instant::now();
        lock.try_lock()?;
        lock.unlock()?;
        let t1 = Instant::now();
        if round >= warmup {
            samples.push(ns(t1 - t0));
        }
    }
    Ok(samples)
}

/// An OFD lock around a durable write: write a small temp file, fsync it,
/// rename it over the target, fsync the directory. The lock's and the
/// directory's descriptors are opened once and reused.
#[derive(Debug)]
pub(crate) struct DurableWrite {
    lock: OfdFile,
    dir: File,
    tmp: PathBuf,
    target: PathBuf,
}

impl DurableWrite {
    /// Prepares durable writes in `dir` (created if missing).
    pub(crate) fn new(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(DurableWrite {
            lock: OfdFile::open(&dir.join("lock"))?,
            dir: File::open(dir)?,
            tmp: dir.join("value.tmp"),
            target: dir.join("value"),
        })
    }

    /// Lock, durably write `value`, unlock.
    pub(crate) fn once(&self, value: u64) -> Result<()> {
        self.lock.try_lock()?;
        let mut f = File::create(&self.tmp)?;
        writeln!(f, "{value}")?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&self.tmp, &self.target)?;
        self.dir.sync_all()?;
        self.lock.unlock()?;
        Ok(())
    }
}

/// Floor: [`DurableWrite::once`], timed `n` times after `warmup`.
pub(crate) fn floor_durable(dir: &Path, n: usize, warmup: usize) -> Result<Vec<u64>> {
    let w = DurableWrite::new(&dir.join("floor-durable"))?;
    let mut samples = Vec::with_capacity(n);
    for round in 0..warmup + n {
        let t0 = Instant::now();
        w.once(round as u64 + 1)?;
        let t1 = Instant::now();
        if round >= warmup {
            samples.push(ns(t1 - t0));
        }
    }
    Ok(samples)
}
/// How to read the file backend's rows: its section of the report's notes after
/// the table (see [`report::document`](super::report::document)).
pub(crate) const READING: &str = "File backend (`election-file`):

- *uncontested campaign*: `Candidate::campaign()` on a `FileClaim` nobody
  else contests, in process; *+ resign* adds `Term::resign()`. The campaign
  takes the OFD lock and rewrites the epoch record in place through the
  page cache on the calling task (ADR 0028; a durable write of the epoch
  ceiling only once per 1024 terms, ADR 0025), so the floor to compare
  with is a bare `F_OFD_SETLK` + `F_UNLCK` on an open file; the same lock
  around write temp file + fsync + rename + fsync directory is what a term
  cost before ADR 0025.
- *clean handover*: separate `election-candidate --backend file://` processes; from A's
  `resigning` stamp to B's `elected` stamp (both `CLOCK_MONOTONIC`), B
  having waited in its campaign for at least 20 ms.
- *crash failover*: from the bench's stamp just before `kill(A, SIGKILL)`
  to B's `elected` stamp.
- floor of both: the same handover between two `election-bench helper lock`
  processes that only hold an OFD lock (B blocked in `F_OFD_SETLKW`).

";
