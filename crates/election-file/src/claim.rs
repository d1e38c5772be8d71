//! [`FileClaim`]: the claim of one candidate in a
//! [`FileElection`](crate::FileElection), and its [`FileAttempt`] (the open
//! claim file): winning the lock and the epoch, waiting (the kernel wakes
//! the waiter), watching the claim file in place, confirming, releasing.
//! No renewal: an OS lock has no deadline.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use election_core::{
    Claim, ElectionName, End, Epoch, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
};

use crate::Error;
use crate::store::claim_file::{self, Paths, Tried};
use crate::store::lock;
use crate::store::record::Record;
use crate::store::value;
use crate::store::waiter::{self, Waited};
use crate::tamper::{self, TamperWatch};

/// The claim of one candidate in a [`FileElection`](crate::FileElection).
///
/// How a term ends:
/// - resign unlocks the claim file, then closes it;
/// - a transfer (ADR 0112) writes a handover into the epoch record, then
///   unlocks and closes the claim file: only the successor may win until
///   the others have seen the handover for its window;
/// - dropping the term (or cancelling a campaign, or a failed step) closes
///   the claim file, which frees the lock at once;
/// - the process dying frees the lock too (the kernel closes its files).
///
/// A waiting candidate wakes as soon as the lock is freed, by any of these.
#[derive(Debug)]
pub struct FileClaim {
    pub(crate) paths: Arc<Paths>,
    pub(crate) name: ElectionName,
    pub(crate) identity: Identity,
    pub(crate) tamper_check_interval: Duration,
    pub(crate) tamper: TamperWatch,
}

/// One attempt of a [`FileClaim`]: the open claim file.
#[derive(Debug)]
pub struct FileAttempt {
    file: Option<File>,
    won_while_waiting: Option<(File, Epoch)>,
    /// The epoch this attempt won, once it won.
    epoch: Option<Epoch>,
    /// The handover to another candidate (ADR 0112) this attempt found
    /// first in the record (the record as read), and when, on this
    /// process's monotonic clock: the window is counted from then.
    reserved: Option<(Box<Record>, Instant)>,
}

impl FileAttempt {
    /// Notes a handover to another candidate read from the record: the
    /// first sighting of each handover is kept (a new one starts again).
    fn saw(&mut self, record: Box<Record>) {
        if self
            .reserved
            .as_ref()
            .is_none_or(|(seen, _)| *seen != record)
        {
            self.reserved = Some((record, Instant::now()));
        }
    }

    /// The handover this attempt has seen for its whole window, which its
    /// claim no longer respects.
    fn waived(&self) -> Option<Box<Record>> {
        let (seen, since) = self.reserved.as_ref()?;
        let window = seen.handover.as_ref()?.window;
        (since.elapsed() >= window).then(|| seen.clone())
    }
}

impl FileClaim {
    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Paths) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, election_core::Error> {
        let paths = self.paths.clone();
        tokio::task::spawn_blocking(move || f(&paths))
            .await
            .map_err(|e| election_core::Error::unavailable(&self.name, std::io::Error::other(e)))?
            .map_err(|e| self.core(e))
    }

    /// One try of [`Claim::try_claim`].
    async fn claim_once(
        &self,
        attempt: &mut FileAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let won = |epoch| {
            Some(Won {
                epoch,
                valid_until: None,
            })
        };
        if let Some((file, epoch)) = attempt.won_while_waiting.take() {
            attempt.file = Some(file);
            return Ok(won(epoch));
        }
        let waived = attempt.waived();
        let quick = claim_file::try_claim(
            &self.paths,
            &self.identity,
            waived.as_deref(),
            &mut attempt.file,
            false,
        );
        match quick.map_err(|e| self.core(e))? {
            Tried::Won(epoch) => return Ok(won(epoch)),
            Tried::Held => return Ok(None),
            Tried::Reserved(record) => {
                attempt.saw(record);
                return Ok(None);
            }
            Tried::NeedsDurable => {}
        }
        // Locked by this attempt's file: finish off the runtime.
        let mut file = attempt.file.take();
        let identity = self.identity.clone();
        let (file, tried) = self
            .blocking(move |p| {
                let tried = claim_file::try_claim(p, &identity, waived.as_deref(), &mut file, true);
                Ok((file, tried))
            })
            .await?;
        attempt.file = file;
        match tried.map_err(|e| self.core(e))? {
            Tried::Won(epoch) => Ok(won(epoch)),
            Tried::Reserved(record) => {
                attempt.saw(record);
                Ok(None)
            }
            Tried::Held | Tried::NeedsDurable => Ok(None),
        }
    }

    /// [`Claim::wait`] while the name is reserved for another candidate
    /// (ADR 0112) and this attempt has not yet seen the handover for its
    /// window: no lock is taken (it is free, and would be taken again at
    /// once). Sleeps until the window ends, or until the election's
    /// record or claim file is written, created, deleted or renamed (a
    /// term began: the successor won; inotify on the directory). Without
    /// inotify, at most `poll_interval`. `false`: the window has passed
    /// (or the record does not show the handover any more), so wait for
    /// the lock as usual.
    async fn wait_out_reservation(
        &self,
        attempt: &mut FileAttempt,
        poll_interval: Duration,
    ) -> bool {
        let Some((seen, since)) = attempt.reserved.as_ref() else {
            return false;
        };
        let Some(window) = seen.handover.as_ref().map(|h| h.window) else {
            return false;
        };
        let until = *since + window;
        if Instant::now() >= until {
            return false;
        }
        // Watch first, read after: a term that begins in between wakes
        // the sleep.
        let name = |p: &std::path::Path| p.file_name().unwrap_or_default().to_owned();
        let changes = crate::Changes::writes(
            self.paths.dir.clone(),
            [name(&self.paths.lock), name(&self.paths.record)],
        );
        match Record::read(&self.paths.record) {
            Ok(Some(now)) if now == **seen => {}
            // Torn (being written) or unreadable: the lock hold reads it.
            Err(_) => return false,
            // Another record: the handover was followed (or replaced).
            Ok(_) => {
                attempt.reserved = None;
                return false;
            }
        }
        match changes {
            Ok(mut changes) => {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {}
                    _ = changes.changed() => {}
                }
            }
            Err(e) => {
                tracing::debug!(name = %self.name, error = %e,
                    "no inotify: waiting out a handover by polling");
                tokio::time::sleep_until(until.min(Instant::now() + poll_interval)).await;
            }
        }
        true
    }
}

impl Claim for FileClaim {
    type Attempt = FileAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "file"
    }

    /// Opens (creating if needed) the claim file: one `open`, on the
    /// calling task (page-cache work, no wait for the disk).
    async fn open(&self) -> Result<FileAttempt, election_core::Error> {
        let file = claim_file::open_claim_file(&self.paths.lock).map_err(|e| self.core(e))?;
        Ok(FileAttempt {
            file: Some(file),
            won_while_waiting: None,
            epoch: None,
            reserved: None,
        })
    }

    /// Takes the lock without waiting; while holding it, reads the epoch
    /// record and writes the next epoch, above every earlier one also after
    /// a power cut (rule 1; ADR 0025). A corrupt record
    /// is [`election_core::Error::Corrupt`] and nothing is won.
    ///
    /// Runs on the calling task while it only needs the page cache (the
    /// lock, the reads, the record rewritten in place: a few system calls,
    /// ADR 0028); the rare try that must write durably (a new block of
    /// epochs, after an OS restart, or an election's first term) continues
    /// on tokio's blocking pool with the lock held.
    ///
    /// Cancel safety: the blocking part owns the claim file; if this future
    /// is dropped, the file is closed when that part ends, which frees a
    /// lock it may have won.
    async fn try_claim(
        &self,
        attempt: &mut FileAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let won = self.claim_once(attempt).await?;
        if let Some(w) = won {
            attempt.epoch = Some(w.epoch);
            attempt.reserved = None;
        }
        Ok(won)
    }

    /// Waits in the kernel for the lock to be freed; a thread of this
    /// process wins the claim for this attempt the moment it is (see
    /// [`FileClaim`]). `poll_interval` is only a backstop.
    ///
    /// While the name is reserved for another candidate by a handover
    /// (ADR 0112) that this attempt has read, it does not wait for the
    /// lock (the lock is free: it would be taken again at once): it sleeps
    /// until the handover's window ends on this process's monotonic clock,
    /// counted from when this attempt first read it, or until a term
    /// begins (the successor's: an inotify event of the record); then it
    /// waits for the lock as before. The successor waits for the lock as
    /// for any release, and wins at the handover.
    ///
    /// Cancel safety: a claim won for a cancelled wait is dropped, which
    /// frees the lock at once.
    async fn wait(
        &self,
        attempt: &mut FileAttempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        if self.wait_out_reservation(attempt, poll_interval).await {
            return Ok(());
        }
        let won = waiter::wait_for_claim(&self.paths, &self.identity, attempt.waived());
        tokio::select! {
            won = won => match won {
                Ok(Ok(Waited::Won(file, epoch))) => attempt.won_while_waiting = Some((file, epoch)),
                Ok(Ok(Waited::Reserved(record))) => attempt.saw(record),
                Ok(Err(e)) => return Err(self.core(e)),
                Err(_) => {} // the waiter gave up: try again
            },
            () = tokio::time::sleep(poll_interval) => {}
        }
        Ok(())
    }

    /// An OS lock cannot expire, so the only way to lose it is tampering:
    /// the election's tamper watch (ADR 0074) checks that the claim file is
    /// still the locked one and that no higher epoch was recorded: at once
    /// when the directory's inotify events name either file, every tamper
    /// check interval for the directory itself, and each term at least
    /// once every 60 intervals. Without inotify (the per-user limit of
    /// instances, or an election that accepts FUSE), this term checks both
    /// every interval on its own.
    fn watch(
        &self,
        attempt: &mut FileAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        let file = attempt
            .file
            .as_ref()
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })?;
        let ours = file
            .metadata()
            .map_err(|e| self.core(Error::io("stat", &self.paths.lock, e)))?;
        let (dev, ino) = (ours.dev(), ours.ino());
        let (paths, epoch) = (self.paths.clone(), won.epoch);
        match self
            .tamper
            .watch(paths.clone(), dev, ino, epoch, reporter.clone())
        {
            Ok(guard) => Ok(guard),
            Err(e) => {
                tracing::debug!(name = %self.name, error = %e,
                    "tamper watch: no inotify; this term polls its claim file");
                let interval = self.tamper_check_interval;
                Ok(tamper::poll(paths, dev, ino, epoch, interval, reporter))
            }
        }
    }

    /// The commit-point check: the claim file at the election's path is
    /// still the file this attempt locked (two `stat`s, no I/O to the
    /// disk). An OS lock cannot expire or be taken away, so that is the
    /// only way another candidate can hold the claim: by locking a file
    /// that replaced this one (deleted, or renamed over). The tamper watch
    /// finds the same within its check interval; this finds it at once.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the file was
    /// deleted or replaced, or if this attempt holds no claim file; then
    /// the core marks the term lost. [`election_core::Error::Unavailable`]
    /// if the path cannot be examined (an I/O error other than "not
    /// found").
    ///
    /// Cancel safety: cancel safe; it changes nothing.
    async fn confirm(&self, attempt: &mut FileAttempt) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let file = attempt.file.as_ref().ok_or_else(not_held)?;
        match claim_file::same_file(file, &self.paths.lock) {
            Ok(true) => Ok(()),
            Ok(false) => Err(not_held()),
            Err(e) => Err(self.core(e)),
        }
    }

    /// Writes the value file (`store::value`) if this attempt's locked claim
    /// file is still the one at the path and the epoch record still shows
    /// its term: both checked under the value file's lock, so a deposed
    /// holder's value never shows (ADR 0068). [`election_core::Error::NotHeld`]
    /// when either check fails.
    async fn proclaim(
        &self,
        attempt: &mut FileAttempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let (Some(file), Some(epoch)) = (attempt.file.as_ref(), attempt.epoch) else {
            return Err(not_held());
        };
        let file = file
            .try_clone()
            .map_err(|e| self.core(Error::io("dup", &self.paths.lock, e)))?;
        let value = value.clone();
        let written = self
            .blocking(move |p| value::proclaim(p, &file, epoch, &value))
            .await?;
        if written { Ok(()) } else { Err(not_held()) }
    }

    /// Unlocks the claim file.
    async fn release(&self, attempt: &mut FileAttempt) -> Result<(), election_core::Error> {
        if let Some(f) = &attempt.file {
            lock::unlock(f).map_err(|e| self.core(Error::io("unlock", &self.paths.lock, e)))?;
        }
        Ok(())
    }

    /// Hands the term to `successor` (ADR 0112): under the epoch record's
    /// own lock, with the claim's lock still held and the record still
    /// showing this attempt's term, the record is rewritten in place with
    /// the handover (the successor, the window, the holder's wall clock and
    /// the kernel's boot id; no new epoch); then the claim file is
    /// unlocked. Every claim reads the record under the same two locks, so
    /// none finds the claim free without the handover. A candidate other
    /// than `successor` that finds it answers "held" until it has seen that
    /// handover for `window` on its own monotonic clock; `successor` wins
    /// at once, and its record (as every winner's) ends the reservation. A
    /// handover does not outlive the boot of the OS it was written in.
    ///
    /// If the process dies part way, the kernel frees the lock: the record
    /// shows the term (as after any crash: the next claim wins) or the
    /// handover (reserved for its window): both are safe.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] (nothing written,
    /// the lock dropped) if the claim file was replaced, another attempt
    /// holds the claim, or the record shows a later term (a revocation);
    /// `Unavailable` for an I/O error, `Corrupt` for a record that does not
    /// read. Cancel safety: the work runs on the blocking pool and
    /// completes even if the future is dropped.
    async fn release_to(
        &self,
        attempt: &mut FileAttempt,
        successor: &Identity,
        window: Duration,
    ) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let (Some(file), Some(epoch)) = (attempt.file.as_ref(), attempt.epoch) else {
            return Err(not_held());
        };
        let file = file
            .try_clone()
            .map_err(|e| self.core(Error::io("dup", &self.paths.lock, e)))?;
        let to = successor.clone();
        let written = self
            .blocking(move |p| claim_file::release_to(p, &file, epoch, &to, window))
            .await?;
        if written { Ok(()) } else { Err(not_held()) }
    }

    /// True: see [`release_to`](Claim::release_to).
    fn transfers(&self) -> bool {
        true
    }

    /// Closes the claim file; the kernel frees any lock on it at once.
    fn close(&self, attempt: FileAttempt, end: End) {
        tracing::trace!(name = %self.name, identity = %self.identity, ?end, "close");
        drop(attempt);
    }

    /// Reads who holds the lock (`F_OFD_GETLK`) and, if someone does, the
    /// epoch record. During a handover (between a winner's lock and its
    /// record write, a `pwrite` long, or two fsyncs when a new block of epochs
    /// is reserved) it may still name the previous holder.
    /// `since` is the record's `since_unix_ms`: the winner's wall clock in
    /// the lock hold that won the term (`None` if the record has none).
    /// A holder that dies loses its lock with its last process, so a dead
    /// holder is never shown: no renewal time is kept (`renewed` and `ttl`
    /// are `None`, never presumed dead). `value` is the value file's, if it
    /// belongs to the record's term (ADR 0068).
    ///
    /// Whether anyone holds the lock (an `open` and an `F_OFD_GETLK`, both
    /// page-cache work) is read on the calling task; only a held claim's
    /// record, which a read may retry with a backoff, is read on tokio's
    /// blocking pool. So asking about a name nobody holds (`elect run`'s
    /// slot-0 check before every campaign, ADR 0083) starts no thread.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        let held = || -> Result<bool, Error> {
            let p = &self.paths;
            let file = match File::open(&p.lock) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(Error::io("open", &p.lock, e)),
            };
            lock::exclusively_held(&file).map_err(|e| Error::io("lock", &p.lock, e))
        };
        if !held().map_err(|e| self.core(e))? {
            return Ok(None);
        }
        self.blocking(|p| {
            // Read without the lock: `read_unlocked` reads a record caught
            // half written again (backing off) before it calls it corrupt.
            let read = Record::read_unlocked(&p.record);
            let Some(r) = read? else {
                return Ok(None);
            };
            if r.revoked || r.handover.is_some() {
                // Revoked (ADR 0111): the deposed holder still has the
                // lock until it closes, but nobody leads. Handed over (ADR
                // 0112): the lock is a candidate's, looking at the
                // reservation; nobody leads until the next term.
                return Ok(None);
            }
            Ok(Some(Leader {
                since: r.since(),
                renewed: None,
                ttl: None,
                value: value::read(&p.value, r.epoch)?,
                identity: r.identity,
                epoch: r.epoch,
            }))
        })
        .await
    }
}
