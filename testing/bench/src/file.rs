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

use election_core::Candidate;
use election_file::FileElection;

use super::ofd::OfdFile;
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
/// resigning each term, in one process: the file backend's own cost.
pub(crate) fn campaign(dir: &Path, n: usize, warmup: usize) -> Result<CampaignSamples> {
    std::fs::create_dir_all(dir)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let election = FileElection::new(dir)?;
        let candidate = Candidate::new(election.claim("bench", "a")?);
        let mut out = CampaignSamples::default();
        let mut last_epoch = 0;
        for round in 0..warmup + n {
            let t0 = Instant::now();
            let term = candidate.campaign().await?;
            let t1 = Instant::now();
            term.resign().await?;
            let t2 = Instant::now();
            let epoch = term.epoch().get();
            if epoch <= last_epoch {
                return Err(format!("epoch {epoch} after {last_epoch}: not increasing").into());
            }
            last_epoch = epoch;
            if round >= warmup {
                out.campaign.push(ns(t1 - t0));
                out.campaign_resign.push(ns(t2 - t0));
            }
        }
        Ok(out)
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
