//! [`FileElection`], the façade: elections in one directory (making it,
//! candidates and claims, the leader, changes, repair, lease sets). The
//! claim of one candidate is in `claim.rs`, the options in `options.rs`,
//! the store underneath (claim file, epoch record, ceiling, locks) in
//! `store/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use election_core::{
    Candidate, Claim, ConfigError, ElectionName, Epoch, Identity, Leader, LeaseSet, PerKeyClaims,
};

use crate::Error;
use crate::claim::FileClaim;
use crate::options::FileOptions;
use crate::store::claim_file::Paths;
use crate::store::fstype;
use crate::store::record::Record;
use crate::store::value;
use crate::tamper::TamperWatch;

/// Elections among the processes of one host that share a directory.
///
/// For an election named `jobs` the directory holds:
/// - `jobs.lock`, the claim file: the leader holds an exclusive open file
///   description lock on it (`F_OFD_SETLK`). The kernel frees the lock when
///   the leader resigns, drops its term, or dies (also by `SIGKILL`).
/// - `jobs.epoch`, the epoch record: the highest epoch handed out and the
///   identity that won it, rewritten in place by each winner while it
///   holds the lock (one `pwrite` through the page cache, no fsync; a
///   checksum line lets readers tell a rewrite in progress, ADR 0028).
/// - `jobs.epoch-ceiling`, the epoch ceiling: a durable bound on every
///   epoch handed out and the kernel boot id it was written in, rewritten
///   (temp file, fsync, rename, fsync of the directory) once per block of
///   1024 epochs and after each restart of the OS, so epochs strictly grow
///   across power loss (see the crate docs and ADR 0025).
/// - `jobs.value`, the value the current term published
///   ([`Term::proclaim`](election_core::Term::proclaim)) with its epoch,
///   shown only with the term of that epoch (ADR 0068).
/// - `jobs.transfer`, the latest request that the current term be handed
///   to a successor ([`request_transfer`](FileElection::request_transfer),
///   ADR 0112) with its epoch, reported only to the term of that epoch.
///   A handover itself ([`Term::transfer`](election_core::Term::transfer))
///   is written into the epoch record (`handover_to=`, ...), in the lock
///   hold that ends the term.
///
/// Never delete or replace these files while candidates run. A leader
/// notices a claim file deleted or renamed over in the directory as soon
/// as the directory's inotify event is read (ADR 0074), the directory
/// itself replaced at its path within the tamper check interval, and
/// anything else (a mount over one file) within 60 intervals; it then
/// reports its term lost, but by then another candidate may already lead.
///
/// ```
/// use election_file::FileElection;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let election = FileElection::new(tmp.path().join("elections"))?;
/// let term = election.candidate("nightly-report", "worker-1")?.campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FileElection {
    dir: PathBuf,
    tamper_check_interval: Duration,
    /// The tamper watch of the terms its claims hold (ADR 0074).
    tamper: TamperWatch,
}

impl FileElection {
    /// Elections in `dir`, created if missing, with default options.
    ///
    /// Refuses an empty path, a path that is not a directory, a directory
    /// the process may not write, a directory on a network filesystem
    /// (NFS, SMB/CIFS, 9p, AFS, Ceph, Lustre, FUSE, ...), where OS locks
    /// cannot be trusted, one on a filesystem that a reboot empties (tmpfs,
    /// ramfs: [`Error::VolatileFilesystem`]), where epochs would start
    /// again, and one on a filesystem of a type not known to be local
    /// ([`Error::UnknownFilesystem`]); see [`FileOptions`] for asking for
    /// the last three by name.
    ///
    /// ```
    /// use election_file::{Error, FileElection};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path().join("elections"))?; // created if missing
    /// assert!(election.dir().is_dir());
    ///
    /// // A file where the directory belongs is refused:
    /// std::fs::write(tmp.path().join("plain-file"), "")?;
    /// let refused = FileElection::new(tmp.path().join("plain-file"));
    /// assert!(matches!(refused, Err(Error::NotADirectory { .. })));
    /// # Ok(()) }
    /// ```
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        Self::with_options(dir, FileOptions::default())
    }

    /// Elections in `dir` with `options`; refuses what [`new`](FileElection::new)
    /// refuses, and out-of-range options.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_file::{FileElection, FileOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let options = FileOptions::default().tamper_check_interval(Duration::from_secs(5));
    /// let election = FileElection::with_options(tmp.path(), options)?;
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(dir: impl Into<PathBuf>, options: FileOptions) -> Result<Self, Error> {
        let dir = dir.into();
        let interval = options.tamper_check_interval;
        if interval < Duration::from_millis(10) || interval > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "tamper_check_interval",
                reason: format!("{interval:?} is not between 10ms and 1h"),
            }
            .into());
        }
        if dir.as_os_str().is_empty() {
            return Err(ConfigError::BadSetting {
                setting: "directory",
                reason: "the path is empty".into(),
            }
            .into());
        }
        if std::fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::NotADirectory { path: dir });
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        let meta = std::fs::metadata(&dir).map_err(|e| Error::io("stat", &dir, e))?;
        if !meta.is_dir() {
            return Err(Error::NotADirectory { path: dir });
        }
        fstype::check_local(&dir, options.allowed())?;
        nix::unistd::access(
            &dir,
            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
        )
        .map_err(|e| Error::io("access", &dir, e.into()))?;
        // Read (and cached) now, not in the first claim's lock hold.
        let _ = crate::store::ceiling::boot_id();
        Ok(FileElection {
            tamper: TamperWatch::new(dir.clone(), interval, !options.allow_fuse),
            dir,
            tamper_check_interval: interval,
        })
    }

    /// The directory.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// println!("elections in {}", election.dir().display());
    /// assert_eq!(election.dir(), tmp.path());
    /// # Ok(()) }
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which store keeps this election's state: the device and inode of
    /// its directory, the same through every path that reaches it (a bind
    /// mount, a symlink). A directory deleted and made again is another
    /// store.
    ///
    /// Cancel safety: cancel safe (one `stat`). Failure model: the
    /// directory's `stat` failing (it was removed) is the I/O error.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// // The same directory through a symlink: the same store.
    /// std::os::unix::fs::symlink(tmp.path(), tmp.path().with_extension("link"))?;
    /// let linked = FileElection::new(tmp.path().with_extension("link"))?;
    /// assert_eq!(election.store_id()?, linked.store_id()?);
    /// # std::fs::remove_file(tmp.path().with_extension("link"))?;
    /// # Ok(()) }
    /// ```
    pub fn store_id(&self) -> Result<election_core::StoreId, Error> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&self.dir).map_err(|e| Error::io("stat", &self.dir, e))?;
        Ok(election_core::StoreId::new(
            "file",
            format_args!("dev={:x},ino={}", meta.dev(), meta.ino()),
        ))
    }

    /// The claim of candidate `identity` in election `name`.
    ///
    /// ```
    /// use election_core::{Candidate, Claim};
    /// use election_file::{Error, FileElection};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let claim = election.claim("jobs", "host-a/1")?;
    /// assert_eq!(claim.leader().await?, None); // nobody leads yet
    /// let candidate = Candidate::new(claim); // what `candidate` does
    /// let term = candidate.campaign().await?;
    /// term.resign().await?;
    ///
    /// // A name that is not a plain file name is refused:
    /// assert!(matches!(election.claim("../jobs", "host-a/1"), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<FileClaim, Error> {
        let name = ElectionName::new(name)?;
        let identity = Identity::new(identity)?;
        let file = |ext: &str| self.dir.join(format!("{name}.{ext}"));
        Ok(FileClaim {
            paths: Arc::new(Paths {
                dir: self.dir.clone(),
                lock: file("lock"),
                record: file("epoch"),
                tmp: file("epoch.tmp"),
                ceiling: file("epoch-ceiling"),
                ceiling_tmp: file("epoch-ceiling.tmp"),
                value: file("value"),
                transfer: file("transfer"),
                transfer_tmp: file("transfer.tmp"),
            }),
            name,
            identity,
            tamper_check_interval: self.tamper_check_interval,
            tamper: self.tamper.clone(),
        })
    }

    /// Sets the epoch record of election `name` to `epoch`, durably: the
    /// safe way out of [`Error::CorruptEpoch`]. The next term gets an epoch
    /// above `epoch`.
    ///
    /// Give an epoch at least as high as any fencing token that a resource
    /// of this election has seen (its high-water mark), so the next term's
    /// tokens are higher than every earlier one. Refuses, changing nothing:
    /// - [`Error::ClaimHeld`] while a candidate holds the claim (repair
    ///   with the election's processes stopped);
    /// - [`Error::EpochTooLow`] when `epoch` is lower than an epoch that
    ///   may have been handed out: one the record still shows (its own if
    ///   it parses, else the largest number after an `epoch=` in it or in a
    ///   leftover temporary record), or the epoch ceiling (ADR 0025)
    ///   whenever the record cannot be trusted: the ceiling was written
    ///   before an OS restart or without a boot id (the record may be
    ///   stale), or the record is damaged or missing. A damaged ceiling
    ///   counts with the largest number after a `ceiling=` in it. So a
    ///   repair never lets an epoch repeat (ADR 0048); after an OS restart
    ///   the next term's epoch may jump by up to 1024.
    ///
    /// It also writes the epoch ceiling durably: never lower than the
    /// ceiling it finds, or `epoch` if that is higher or the ceiling is
    /// damaged, with the running kernel's boot id.
    ///
    /// Never delete the record instead: epochs would start again at
    /// [`Epoch::FIRST`], and the library refuses to campaign on a missing
    /// record once the election has had terms. Blocking file I/O (four
    /// fsyncs): call it from a tool or `spawn_blocking`. The command line
    /// has it as `elect repair-epoch`.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use election_file::{Error, FileElection};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// std::fs::write(tmp.path().join("jobs.epoch"), "election-file/1\nepoch=41\nidentity=\n")?;
    /// assert!(election.candidate("jobs", "a")?.try_campaign().await.is_err()); // corrupt
    ///
    /// // Lower than the epoch the damaged record still shows: refused.
    /// let low = election.repair_epoch("jobs", Epoch::new(40).ok_or("not an epoch")?);
    /// assert!(matches!(low, Err(Error::EpochTooLow { .. })));
    /// election.repair_epoch("jobs", Epoch::new(1000).ok_or("not an epoch")?)?;
    /// let term = election.candidate("jobs", "a")?.campaign().await?;
    /// assert_eq!(term.epoch().get(), 1001);
    /// # Ok(()) }
    /// ```
    pub fn repair_epoch(&self, name: &str, epoch: Epoch) -> Result<crate::EpochRepair, Error> {
        let claim = self.claim(name, "repair")?;
        crate::repair::repair(&claim.paths, epoch)
    }

    /// A wake-up for whoever reads who leads election `name`: resolves
    /// when the election's files change, that is when a term begins or
    /// ends (see [`Changes`](crate::Changes) for what it sees and misses).
    /// `elect observe` uses it to print every change without polling.
    ///
    /// Must be called inside a tokio runtime. Fails with
    /// [`Error::Io`] if inotify is unavailable (or its limits are
    /// reached), [`Error::Config`] for a bad name.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let mut changes = election.changes("jobs")?;
    /// let term = election.candidate("jobs", "a")?.campaign().await?;
    /// changes.changed().await?; // the term began: read who leads
    /// let seen = election.claim("jobs", "observer")?.leader().await?;
    /// assert_eq!(seen.map(|l| l.epoch), Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub fn changes(&self, name: &str) -> Result<crate::Changes, Error> {
        let name = ElectionName::new(name)?;
        crate::Changes::new(
            self.dir.clone(),
            format!("{name}.lock").into(),
            format!("{name}.epoch").into(),
        )
    }

    /// The last term handed out in election `name`, from its epoch record
    /// (epoch, winner, start), whether or not it still runs: who leads
    /// *now* is [`Claim::leader`]. With [`changes`](FileElection::changes)
    /// an observer tells a term that began and ended before it could read
    /// the leader. `Ok(None)` before the first term.
    ///
    /// Blocking file read (one small file). Fails with
    /// [`Error::CorruptEpoch`] for a damaged record, [`Error::Config`] for
    /// a bad name.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// assert_eq!(election.last_term("jobs")?, None); // no term yet
    ///
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// term.resign().await?;
    /// // Nobody leads now, but the record still tells the last term:
    /// assert_eq!(election.leader("jobs").await?, None);
    /// let last = election.last_term("jobs")?;
    /// assert_eq!(last.map(|t| t.epoch), Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub fn last_term(&self, name: &str) -> Result<Option<Leader>, Error> {
        let claim = self.claim(name, "observer")?;
        let Some(r) = Record::read_unlocked(&claim.paths.record)? else {
            return Ok(None);
        };
        Ok(Some(Leader {
            since: r.since(),
            renewed: None,
            ttl: None,
            value: value::read(&claim.paths.value, r.epoch)?,
            identity: r.identity,
            epoch: r.epoch,
        }))
    }

    /// A [`Candidate`] for [`claim`](FileElection::claim).
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let candidate = election.candidate("jobs", "host-a/1")?;
    /// match candidate.try_campaign().await? {
    ///     Some(term) => {
    ///         println!("leading in term {}", term.epoch());
    ///         term.resign().await?;
    ///     }
    ///     None => println!("someone else leads"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<FileClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// A [`LeaseSet`] of this process (`identity`) over this directory:
    /// many keys, one claim file lock each (`<key>.lock`, `<key>.epoch`),
    /// with this election's options and the core's
    /// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL) as
    /// the backstop of each key's wait. Each asked key runs its own
    /// campaign ([`PerKeyClaims`]); a key held elsewhere is won the moment
    /// its lock is freed (see [`FileClaim`]). A lock cannot expire, so
    /// [`held`](LeaseSet::held) stays true until the set closes or the
    /// key's claim file is tampered with, and [`guard`](LeaseSet::guard)'s
    /// commit-point check is that the key's claim file is still the locked
    /// one (see [`FileClaim`]'s `confirm`).
    ///
    /// What [`close`](LeaseSet::close) does here: every held key's term is
    /// resigned, which unlocks and closes its claim file, so its lock is
    /// free at once and a candidate waiting for it (in any process) wins
    /// it straight away. Dropping the set does the same in the background.
    /// If the process dies, the kernel frees its locks at once, too.
    ///
    /// Must be called inside a tokio runtime (the set's loop is spawned on
    /// it); outside one this returns [`Error::Config`], as it does for an
    /// invalid identity.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path().join("shards"))?;
    /// let set = election.lease_set("node-a").await?;
    /// assert!(set.ask("shard-7").await?); // won: this process writes shard-7
    /// assert!(set.held("shard-7")); // no round trip
    ///
    /// let mut log = Vec::new();
    /// set.guard("shard-7", async |token| log.push((token.key().to_string(), token.epoch())))
    ///     .await?;
    /// assert_eq!(Some(log[0].1), set.epoch("shard-7"));
    ///
    /// set.close().await; // unlocks shard-7.lock: another node takes it at once
    /// assert!(!set.held("shard-7"));
    /// # Ok(()) }
    /// ```
    pub async fn lease_set(
        &self,
        identity: &str,
    ) -> Result<LeaseSet<PerKeyClaims<FileClaim>>, Error> {
        let identity = Identity::new(identity)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::BadSetting {
                setting: "runtime",
                reason: "a lease set must be started inside a tokio runtime".into(),
            }
            .into());
        }
        let election = self.clone();
        let id = identity.clone();
        Ok(LeaseSet::new(
            PerKeyClaims::new(identity, move |key| {
                election
                    .claim(key.as_str(), id.as_str())
                    .map_err(|e| e.into_core(key))
            })
            .with_backend("file"),
        ))
    }
}

impl FileElection {
    /// Who leads election `name` now (the holder of its lock, with the
    /// epoch and start from its record), or `None`: the same read as
    /// [`Claim::leader`] on any candidate's claim, without one.
    ///
    /// Cancel safety: cancel safe (a blocking read on tokio's blocking
    /// pool). Failure model: [`election_core::Error::Config`] for an
    /// invalid name, `Unavailable` when the files cannot be read, `Corrupt`
    /// for a damaged epoch record.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// assert_eq!(election.leader("jobs").await?, None);
    ///
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// if let Some(leader) = election.leader("jobs").await? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    ///     assert_eq!(leader.epoch, term.epoch());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        claim.leader().await
    }
}

impl FileElection {
    /// Revokes the current term of election `name` on behalf of `by`
    /// ([`Election::revoke`](election_core::Election::revoke), ADR 0111).
    /// The OS lock cannot be taken from its holder: under the epoch
    /// record's own lock, with the claim still held, the next epoch after
    /// the holder's is drawn as a claim draws one (a durable ceiling first
    /// where needed) and written into the record with `by` and
    /// `revoked=1`. The holder's tamper watch sees a later term in the
    /// record at once (an inotify event; the sweep as the backstop) and
    /// loses the term; the next candidate wins once the holder closed its
    /// claim (which frees the lock), with an epoch above the revocation's.
    /// `Ok(None)`: nobody holds the name.
    ///
    /// Cancel safety: the work runs on the blocking pool and completes
    /// even if the future is dropped. Failure model:
    /// [`election_core::Error::Config`] for a bad name, `Unavailable` for
    /// an I/O error, `Corrupt` for a record that does not read.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// let revoked = election.revoke("jobs", &Identity::new("ops")?).await?.expect("held");
    /// assert!(revoked.revocation.epoch > term.epoch());
    /// let lost = term.lost().await; // the tamper watch saw the later term
    /// assert_eq!(lost.epoch, revoked.deposed.epoch);
    /// # Ok(()) }
    /// ```
    pub async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        let paths = claim.paths.clone();
        let by = by.clone();
        let done =
            tokio::task::spawn_blocking(move || crate::store::claim_file::revoke(&paths, &by))
                .await
                .map_err(|e| election_core::Error::unavailable(&name_, std::io::Error::other(e)))?
                .map_err(|e| e.into_core(&name_))?;
        Ok(done.map(|d| {
            let deposed = Leader {
                since: d.deposed.since(),
                renewed: None,
                ttl: None,
                value: None,
                identity: d.deposed.identity,
                epoch: d.deposed.epoch,
            };
            election_core::Revoked::new(
                deposed,
                election_core::Revocation::new(
                    d.revocation.identity.clone(),
                    d.revocation.epoch,
                    d.revocation.since(),
                ),
            )
            .counted(&name_, "file")
        }))
    }

    /// The revocation the epoch record of `name` shows, until the next
    /// term ([`Election::revocation`](election_core::Election::revocation)).
    ///
    /// Cancel safety: cancel safe (a read). Failure model: as
    /// [`last_term`](Self::last_term)'s, as the core's error.
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// assert_eq!(election.revocation("jobs").await?, None);
    /// # Ok(()) }
    /// ```
    pub async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        let record = Record::read_unlocked(&claim.paths.record).map_err(|e| e.into_core(&name_))?;
        Ok(record.filter(|r| r.revoked).map(|r| {
            let at = r.since();
            election_core::Revocation::new(r.identity, r.epoch, at)
        }))
    }
}

impl FileElection {
    /// Asks the holder of election `name`'s current term, on behalf of
    /// `by`, to hand it to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer),
    /// ADR 0112). Under the epoch record's own lock, while a term holds the
    /// claim (its lock held, the record showing it, not a revocation or a
    /// handover), the request for that term's epoch is written to
    /// `<name>.transfer` (a temporary file renamed over it: a later request
    /// replaces an earlier one). The holder's tamper watch reads it at the
    /// rename's inotify event (ADR 0074; at the latest with its sweep, or
    /// every tamper check interval where the term polls) and reports it
    /// ([`Term::transfer_requested`](election_core::Term::transfer_requested)).
    /// The claim file and the record are not touched: the holder keeps its
    /// term. A request is only reported to the term of its epoch, so one
    /// left over from an earlier term never reaches a later one.
    /// `Ok(None)`: no term holds the name.
    ///
    /// Cancel safety: the work runs on the blocking pool and completes
    /// even if the future is dropped; asking again is safe. Failure model:
    /// [`election_core::Error::Config`] for a bad name, `Unavailable` for
    /// an I/O error, `Corrupt` for a record that does not read.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Identity;
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let (to, by) = (Identity::new("host-b/1")?, Identity::new("deploy/7")?);
    /// assert_eq!(election.request_transfer("jobs", &to, &by).await?, None); // nobody leads
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// let asked = election.request_transfer("jobs", &to, &by).await?.expect("a term holds it");
    /// assert_eq!(asked.epoch, term.epoch());
    /// let heard = term.transfer_requested().await; // the holder's watch read it
    /// term.transfer(&heard.to, Duration::from_secs(15)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        self.store_request(name, to, by, None).await
    }

    /// Tells the holder of `name`'s term that `candidate` waits with
    /// `priority` ([`Election::prefer`](election_core::Election::prefer),
    /// ADR 0112): stored as [`request_transfer`](Self::request_transfer)
    /// stores a request, with its priority; the term hears it only if the
    /// priority is above its own.
    ///
    /// Cancel safety, failure model: as `request_transfer`'s.
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let term = election.candidate("jobs", "host-b/1")?.with_priority(1).campaign().await?;
    /// let me = Identity::new("host-a/1")?;
    /// let asked = election.prefer("jobs", &me, 5).await?.expect("a term holds it");
    /// assert_eq!(asked.priority, Some(5));
    /// assert_eq!(term.preferred().await.to, me);
    /// # Ok(()) }
    /// ```
    pub async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        self.store_request(name, candidate, candidate, Some(priority))
            .await
    }

    /// What `request_transfer` and `prefer` share.
    async fn store_request(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
        priority: Option<u32>,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        let paths = claim.paths.clone();
        let (to, by) = (to.clone(), by.clone());
        tokio::task::spawn_blocking(move || {
            crate::store::transfer::request(&paths, &to, &by, priority)
        })
        .await
        .map_err(|e| election_core::Error::unavailable(&name_, std::io::Error::other(e)))?
        .map_err(|e| e.into_core(&name_))
    }

    /// The handover of election `name` that no term has followed yet
    /// ([`Election::handover`](election_core::Election::handover), ADR
    /// 0112): what the epoch record shows, if it was written in this boot
    /// of the OS and its window has not passed by the wall clock since the
    /// holder wrote it (display only: a candidate counts the window on its
    /// own monotonic clock from when it first read the handover, so it may
    /// still wait a little after the handover is no longer shown).
    ///
    /// Cancel safety: cancel safe (a read). Failure model: as
    /// [`last_term`](Self::last_term)'s, as the core's error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Identity;
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// assert_eq!(election.handover("jobs").await?, None);
    /// term.transfer(&Identity::new("host-b/1")?, Duration::from_secs(15)).await?;
    /// let shown = election.handover("jobs").await?.expect("reserved for host-b/1");
    /// assert_eq!((shown.to.as_str(), shown.epoch), ("host-b/1", term.epoch()));
    /// assert_eq!(election.leader("jobs").await?, None); // nobody leads meanwhile
    /// # Ok(()) }
    /// ```
    pub async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        let claim = self
            .claim(name, "observer")
            .map_err(|e| e.into_core(&name_))?;
        let paths = claim.paths.clone();
        let record = tokio::task::spawn_blocking(move || Record::read_unlocked(&paths.record))
            .await
            .map_err(|e| election_core::Error::unavailable(&name_, std::io::Error::other(e)))?
            .map_err(|e| e.into_core(&name_))?;
        let Some(record) = record else {
            return Ok(None);
        };
        let boot = crate::store::ceiling::boot_id();
        let Some(shown) = record.handover_shown(boot) else {
            return Ok(None);
        };
        let passed = record
            .handover
            .as_ref()
            .and_then(|h| h.at())
            .and_then(|at| std::time::SystemTime::now().duration_since(at).ok())
            .is_some_and(|since| since >= shown.window);
        Ok((!passed).then_some(shown))
    }
}

impl election_core::Election for FileElection {
    type Claim = FileClaim;
    type LeaseSet = LeaseSet<PerKeyClaims<FileClaim>>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<FileClaim, Error> {
        FileElection::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        FileElection::leader(self, name).await
    }

    async fn lease_set(&self, identity: &str) -> Result<LeaseSet<PerKeyClaims<FileClaim>>, Error> {
        FileElection::lease_set(self, identity).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        FileElection::store_id(self)
    }

    async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        FileElection::revoke(self, name, by).await
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        FileElection::revocation(self, name).await
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        FileElection::request_transfer(self, name, to, by).await
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        FileElection::prefer(self, name, candidate, priority).await
    }

    async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        FileElection::handover(self, name).await
    }
}
