//! The claim file and the epoch record beside it: winning the claim.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use election_core::{Epoch, Identity};

use crate::Error;
use crate::store::ceiling::{self, Ceiling};
use crate::store::lock::{self, Kind};
use crate::store::record::Record;

/// The files of one election.
#[derive(Debug)]
pub(crate) struct Paths {
    pub(crate) dir: PathBuf,
    pub(crate) lock: PathBuf,
    pub(crate) record: PathBuf,
    pub(crate) tmp: PathBuf,
    /// The epoch ceiling (ADR 0025) and its temporary file.
    pub(crate) ceiling: PathBuf,
    pub(crate) ceiling_tmp: PathBuf,
    /// The leader value of the current term (ADR 0068, `store::value`).
    pub(crate) value: PathBuf,
}

/// Opens the claim file for locking, creating it if needed.
pub(crate) fn open_claim_file(path: &Path) -> Result<File, Error> {
    lock::open(path).map_err(|e| Error::io("open", path, e))
}

/// What the claim file holds once a term of its election was won: a
/// non-empty claim file with no epoch record means the record was lost.
const USED: &[u8] = b"election-file/1 claim: this election has had terms; see its .epoch record\n";

/// Marks the claim file `file` (at `path`, `len` bytes long) as used,
/// durably, once: from now on a missing epoch record is corrupt, not "no
/// term yet".
pub(crate) fn mark_used(file: &File, path: &Path, len: u64) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    if len == 0 {
        file.write_all_at(USED, 0)
            .map_err(|e| Error::io("write", path, e))?;
        file.sync_data().map_err(|e| Error::io("fsync", path, e))?;
    }
    Ok(())
}

/// True if `file` is the file now at `path` (it was not deleted or
/// replaced).
pub(crate) fn same_file(file: &File, path: &Path) -> Result<bool, Error> {
    let ours = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    same_as(&ours, path)
}

/// True if the file now at `path` is the one `ours` describes.
fn same_as(ours: &std::fs::Metadata, path: &Path) -> Result<bool, Error> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.dev() == ours.dev() && m.ino() == ours.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

fn unix_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}

/// What a claim under the lock came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Locked {
    /// Won with this epoch; the lock is kept.
    Won(Epoch),
    /// The claim file was replaced: the lock is worthless and was dropped.
    Replaced,
    /// Only when durable writes were not allowed: winning needs one (a new
    /// block of epochs, or the claim file's first mark). Nothing was
    /// written and the lock is kept: call again with durable writes
    /// allowed, off the async runtime.
    NeedsDurable,
}

/// With `file` exclusively locked: checks that it is still the claim file,
/// and hands out the next epoch for `identity` (rule 1: the epoch is
/// decided in the lock hold that wins the claim), with the running
/// kernel's boot id and blocks of [`ceiling::EPOCH_BLOCK`] epochs.
///
/// With `durable` false it only does page-cache work (a few system calls,
/// no wait for the disk, so it may run on the async runtime) and answers
/// [`Locked::NeedsDurable`] when an fsync would be needed. On an error the
/// lock is dropped.
pub(crate) fn claim_locked(
    paths: &Paths,
    identity: &Identity,
    file: &File,
    durable: bool,
) -> Result<Locked, Error> {
    claim_locked_with(
        paths,
        identity,
        file,
        ceiling::boot_id(),
        ceiling::EPOCH_BLOCK,
        durable,
    )
}

/// [`claim_locked`] with the boot id and block size given (tests simulate
/// a reboot with another boot id).
pub(crate) fn claim_locked_with(
    paths: &Paths,
    identity: &Identity,
    file: &File,
    boot: Option<&str>,
    block: u64,
    durable: bool,
) -> Result<Locked, Error> {
    let won = (|| {
        let ours = file
            .metadata()
            .map_err(|e| Error::io("stat", &paths.lock, e))?;
        if !same_as(&ours, &paths.lock)? {
            return Ok(Locked::Replaced);
        }
        let used = ours.len() > 0;
        if !used && !durable {
            return Ok(Locked::NeedsDurable);
        }
        let Some(epoch) = hand_out(paths, identity, used, boot, block, durable)? else {
            return Ok(Locked::NeedsDurable);
        };
        // After the record, so a failure here leaves a record, never a
        // marked claim file without one.
        mark_used(file, &paths.lock, ours.len())?;
        Ok(Locked::Won(epoch))
    })();
    if matches!(won, Ok(Locked::Replaced) | Err(_)) {
        let _ = lock::unlock(file);
    }
    won
}

/// Opens the epoch record for reading and writing: `None` if it does not
/// exist.
fn open_record(path: &Path) -> Result<Option<File>, Error> {
    match File::options().read(true).write(true).open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("open", path, e)),
    }
}

/// Under the lock: the next epoch, above every epoch handed out before,
/// also across an OS crash or power cut (ADR 0025).
///
/// - The ceiling was written in this boot (same kernel boot id): no page
///   cache was lost since, so the epoch record is exact, and the next
///   epoch follows it. A missing record on a used claim file, or a record
///   that does not read, is [`Error::CorruptEpoch`] as before: someone
///   tampered with it.
/// - No ceiling yet (a new election, or a record written durably by an
///   older version): the record is exact as well.
/// - The ceiling was written in another boot, or without a boot id: the
///   record may be stale, torn or missing, but no epoch above the ceiling
///   was handed out, so the next epoch is above both the ceiling and what
///   the record still shows.
///
/// If the epoch is above the ceiling, or the ceiling is from another boot,
/// a new ceiling `epoch + block - 1` with this boot id is written durably
/// first (or, with `durable` false, `Ok(None)` is returned and nothing is
/// written). Only then is the record rewritten in place, through the page
/// cache (ADR 0028).
fn hand_out(
    paths: &Paths,
    identity: &Identity,
    used: bool,
    boot: Option<&str>,
    block: u64,
    durable: bool,
) -> Result<Option<Epoch>, Error> {
    // The record's own lock first, before anything is read: a revocation
    // (`revoke`, ADR 0111) writes the record without the claim's lock,
    // under this one, so no epoch is drawn from a record it is rewriting.
    // Busy (a revocation is writing it now): a quick try says "needs
    // durable", so the claim is tried again on the blocking pool, which
    // waits here.
    let record_file = open_record(&paths.record)?;
    if let Some(f) = &record_file {
        let locked = if durable {
            lock::lock_blocking(f, Kind::Exclusive).map(|()| true)
        } else {
            lock::try_lock(f, Kind::Exclusive)
        };
        if !locked.map_err(|e| Error::io("lock", &paths.record, e))? {
            return Ok(None);
        }
    }
    let ceiling = Ceiling::read(&paths.ceiling)?;
    let exact = ceiling.as_ref().is_none_or(|c| c.same_boot(boot));
    let (record, old_len) = match &record_file {
        None => (Ok(None), 0),
        Some(f) => match Record::read_file(f, &paths.record) {
            Ok((r, len)) => (Ok(Some(r)), len),
            Err(e) => {
                let len = f
                    .metadata()
                    .map_err(|e| Error::io("stat", &paths.record, e))?
                    .len();
                (Err(e), len)
            }
        },
    };
    let previous = match ceiling.as_ref().filter(|_| !exact) {
        None => match record? {
            Some(r) => Some(r.epoch),
            None if used => {
                return Err(Error::CorruptEpoch {
                    path: paths.record.clone(),
                    detail: "the record is missing, but the claim file shows this election has \
                             had terms, so epochs would start again"
                        .into(),
                });
            }
            None => None,
        },
        Some(c) => {
            let seen = match record {
                Ok(r) => r.map(|r| r.epoch),
                // Torn or lost with the page cache: the ceiling covers it.
                Err(Error::CorruptEpoch { detail, .. }) => {
                    tracing::warn!(
                        record = %paths.record.display(),
                        %detail,
                        ceiling = %c.ceiling,
                        "the epoch record did not survive a restart of the OS; \
                         continuing above the durable ceiling"
                    );
                    None
                }
                Err(e) => return Err(e),
            };
            Some(seen.map_or(c.ceiling, |s| s.max(c.ceiling)))
        }
    };
    let epoch = Epoch::after(previous)?;
    let covered = exact && ceiling.as_ref().is_some_and(|c| epoch <= c.ceiling);
    if !covered {
        if !durable {
            return Ok(None);
        }
        ceiling::reserve(epoch, block, boot).write_durably(
            &paths.dir,
            &paths.ceiling,
            &paths.ceiling_tmp,
        )?;
    }
    let record_file = match record_file {
        Some(f) => f,
        None => File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&paths.record)
            .map_err(|e| Error::io("create", &paths.record, e))?,
    };
    Record {
        epoch,
        identity: identity.clone(),
        pid: Some(std::process::id()),
        since_unix_ms: unix_ms(),
        revoked: false,
    }
    .write_in_place(&record_file, &paths.record, old_len)?;
    Ok(Some(epoch))
}

/// What a revocation wrote ([`revoke`]).
pub(crate) struct Revoked {
    /// The record of the term it ended.
    pub(crate) deposed: Record,
    /// The revocation's record.
    pub(crate) revocation: Record,
}

/// Revokes the term that holds the claim of `paths` (ADR 0111), on behalf
/// of `by`. The OS lock cannot be taken from its holder; instead, under
/// the epoch record's own lock (which [`hand_out`] takes too, so no claim
/// draws an epoch meanwhile), with the claim still held: the next epoch
/// after the record's, drawn as a claim draws one (a new durable ceiling
/// first if it is above the ceiling or the ceiling is of another boot),
/// written into the record in place with `revoked=1` and `by` as the
/// identity. The holder's tamper watch sees a later term in the record
/// and loses the term; the next claim (once the holder closed and freed
/// the lock) draws above the revocation's epoch. `Ok(None)`: the claim is
/// not held, or the record already shows a revocation.
pub(crate) fn revoke(paths: &Paths, by: &Identity) -> Result<Option<Revoked>, Error> {
    revoke_with(paths, by, ceiling::boot_id(), ceiling::EPOCH_BLOCK)
}

/// [`revoke`] with the boot id and block size given.
pub(crate) fn revoke_with(
    paths: &Paths,
    by: &Identity,
    boot: Option<&str>,
    block: u64,
) -> Result<Option<Revoked>, Error> {
    let claim = match File::open(&paths.lock) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &paths.lock, e)),
    };
    let held = || lock::exclusively_held(&claim).map_err(|e| Error::io("lock", &paths.lock, e));
    if !held()? {
        return Ok(None);
    }
    let Some(record_file) = open_record(&paths.record)? else {
        return Ok(None);
    };
    lock::lock_blocking(&record_file, Kind::Exclusive)
        .map_err(|e| Error::io("lock", &paths.record, e))?;
    let ours = record_file
        .metadata()
        .map_err(|e| Error::io("stat", &paths.record, e))?;
    // Still the record at the path (a repair replaces it, but only with
    // the claim free), and the claim still held under the record's lock:
    // no claim can draw an epoch until this returns.
    if !same_as(&ours, &paths.record)? || !held()? {
        return Ok(None);
    }
    let (deposed, old_len) = Record::read_file(&record_file, &paths.record)?;
    if deposed.revoked {
        return Ok(None);
    }
    let epoch = Epoch::after(Some(deposed.epoch))?;
    let ceiling = Ceiling::read(&paths.ceiling)?;
    let covered = ceiling
        .as_ref()
        .is_some_and(|c| c.same_boot(boot) && epoch <= c.ceiling);
    if !covered {
        let floor = ceiling.as_ref().map_or(epoch, |c| c.ceiling.max(epoch));
        ceiling::reserve(floor, block, boot).write_durably(
            &paths.dir,
            &paths.ceiling,
            &paths.ceiling_tmp,
        )?;
    }
    let revocation = Record {
        epoch,
        identity: by.clone(),
        pid: Some(std::process::id()),
        since_unix_ms: unix_ms(),
        revoked: true,
    };
    revocation.write_in_place(&record_file, &paths.record, old_len)?;
    Ok(Some(Revoked {
        deposed,
        revocation,
    }))
}

/// What one try of [`try_claim`] came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Tried {
    /// Won with this epoch: the attempt's file holds the lock.
    Won(Epoch),
    /// Someone else holds the claim.
    Held,
    /// See [`Locked::NeedsDurable`]: the attempt's file holds the lock;
    /// try again with durable writes allowed.
    NeedsDurable,
}

/// One try without waiting: lock, then [`claim_locked`]. `file` is the
/// attempt's claim file, opened (or reopened, if it was replaced) here.
/// Locking a file this attempt already locked succeeds again (the lock
/// belongs to its open file description), so after
/// [`Tried::NeedsDurable`] the same `file` is simply tried again with
/// `durable`.
pub(crate) fn try_claim(
    paths: &Paths,
    identity: &Identity,
    file: &mut Option<File>,
    durable: bool,
) -> Result<Tried, Error> {
    // Two rounds: if the claim file was replaced under us, reopen once.
    for _ in 0..2 {
        let f = match file {
            Some(f) => f,
            None => file.insert(open_claim_file(&paths.lock)?),
        };
        if !lock::try_lock(f, Kind::Exclusive).map_err(|e| Error::io("lock", &paths.lock, e))? {
            return Ok(Tried::Held);
        }
        match claim_locked(paths, identity, f, durable)? {
            Locked::Won(epoch) => return Ok(Tried::Won(epoch)),
            Locked::NeedsDurable => return Ok(Tried::NeedsDurable),
            Locked::Replaced => *file = None, // closing frees the lock on the stale file
        }
    }
    Ok(Tried::Held)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::lock::Kind;
    use proptest::prelude::*;

    const BOOT_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";

    fn boot(n: u32) -> String {
        format!("{n:08x}-0000-4000-8000-000000000000")
    }

    /// The files of election `e` in `dir` (also used by `repair`'s tests).
    pub(crate) fn paths(dir: &Path) -> Paths {
        let file = |ext: &str| dir.join(format!("e.{ext}"));
        Paths {
            dir: dir.to_owned(),
            lock: file("lock"),
            record: file("epoch"),
            tmp: file("epoch.tmp"),
            ceiling: file("epoch-ceiling"),
            ceiling_tmp: file("epoch-ceiling.tmp"),
            value: file("value"),
        }
    }

    /// Wins one term as the kernel with boot id `boot` would, blocks of
    /// `block` epochs; the lock is dropped after.
    fn term(paths: &Paths, boot: Option<&str>, block: u64) -> Result<Epoch, Error> {
        let file = open_claim_file(&paths.lock)?;
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let id = Identity::new("host/1").unwrap();
        match claim_locked_with(paths, &id, &file, boot, block, true)? {
            Locked::Won(epoch) => Ok(epoch),
            other => panic!("the claim file is ours: {other:?}"),
        }
    }

    /// What the epoch record may hold on disk after a power cut: it is
    /// never fsynced, so any version written before, or nothing, or a
    /// part of one (only the ceiling and the claim file's mark are durable).
    #[derive(Clone, Debug)]
    enum Lost {
        /// The directory entry never reached the disk.
        Missing,
        /// The rename did, the data did not.
        Empty,
        /// Half of the last record.
        Torn,
        /// An older version: index into the versions written (modulo).
        Older(usize),
        /// The record is rewritten in place (ADR 0028): the first half of
        /// the last version over the rest of an older one (modulo).
        Mixed(usize),
    }

    /// Cuts the power: the record on disk becomes `lost`, the page cache's
    /// version is gone. `versions` are every record text written so far.
    fn power_cut(paths: &Paths, versions: &[Vec<u8>], lost: &Lost) {
        let last = std::fs::read(&paths.record).unwrap_or_default();
        if versions.is_empty() {
            return; // no record was ever written: none can be on disk
        }
        match lost {
            Lost::Missing => {
                let _ = std::fs::remove_file(&paths.record);
            }
            Lost::Empty => std::fs::write(&paths.record, b"").unwrap(),
            Lost::Torn => std::fs::write(&paths.record, &last[..last.len() / 2]).unwrap(),
            Lost::Older(i) => std::fs::write(&paths.record, &versions[i % versions.len()]).unwrap(),
            Lost::Mixed(i) => {
                let older = &versions[i % versions.len()];
                let half = last.len() / 2;
                let mut mixed = last[..half].to_vec();
                mixed.extend_from_slice(older.get(half..).unwrap_or_default());
                std::fs::write(&paths.record, mixed).unwrap();
            }
        }
    }

    #[test]
    fn after_a_power_cut_the_next_epoch_is_above_every_epoch_handed_out() {
        for lost in [
            Lost::Missing,
            Lost::Empty,
            Lost::Torn,
            Lost::Older(0),
            Lost::Mixed(0),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let p = paths(dir.path());
            let mut versions = Vec::new();
            let mut highest = None;
            for _ in 0..5 {
                let e = term(&p, Some(BOOT_A), ceiling::EPOCH_BLOCK).unwrap();
                assert!(Some(e) > highest, "{e} after {highest:?}");
                highest = Some(e);
                versions.push(std::fs::read(&p.record).unwrap());
            }
            // The record was written through the page cache: only the first
            // term paid for a durable write (the ceiling).
            let c = Ceiling::read(&p.ceiling).unwrap().unwrap();
            assert_eq!(
                c.ceiling.get(),
                Epoch::FIRST.get() + ceiling::EPOCH_BLOCK - 1
            );
            power_cut(&p, &versions, &lost);
            let next = term(&p, Some(&boot(2)), ceiling::EPOCH_BLOCK).unwrap();
            assert!(Some(next) > highest, "{lost:?}: {next} after {highest:?}");
            assert!(next > c.ceiling, "{lost:?}: {next} not past the ceiling");
            // The new boot's ceiling is durable, with the new boot id.
            let c2 = Ceiling::read(&p.ceiling).unwrap().unwrap();
            assert!(c2.ceiling >= next && c2.same_boot(Some(&boot(2))), "{c2:?}");
        }
    }

    /// The claim as the async runtime makes it (ADR 0028): page-cache work
    /// only; whatever needs an fsync is left for a second call.
    fn quick_term(paths: &Paths, boot: Option<&str>, block: u64) -> Result<Tried, Error> {
        let id = Identity::new("host/1").unwrap();
        let mut file = None;
        let tried = try_claim(paths, &id, &mut file, false)?;
        if tried == Tried::NeedsDurable {
            // Still locked by this attempt: nobody else can win meanwhile.
            let other = open_claim_file(&paths.lock)?;
            assert!(!lock::try_lock(&other, Kind::Exclusive).unwrap());
            let again = claim_locked_with(paths, &id, file.as_ref().unwrap(), boot, block, true)?;
            let Locked::Won(epoch) = again else {
                panic!("{again:?}")
            };
            return Ok(Tried::Won(epoch));
        }
        Ok(tried)
    }

    #[test]
    fn the_quick_claim_writes_nothing_durable_and_defers_what_must_be() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let id = Identity::new("host/1").unwrap();
        let boot = ceiling::boot_id();
        // A new election: the ceiling and the claim file's mark are due, so
        // the quick claim defers, writing nothing.
        let file = open_claim_file(&p.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let quick = claim_locked_with(&p, &id, &file, boot, 4, false).unwrap();
        assert_eq!(quick, Locked::NeedsDurable);
        assert!(!p.record.exists() && !p.ceiling.exists());
        assert_eq!(std::fs::metadata(&p.lock).unwrap().len(), 0);
        assert_eq!(
            claim_locked_with(&p, &id, &file, boot, 4, true).unwrap(),
            Locked::Won(Epoch::FIRST)
        );
        drop(file);
        // Below the ceiling: won without a durable write.
        let first = Epoch::FIRST.get();
        for n in first + 1..first + 4 {
            let file = open_claim_file(&p.lock).unwrap();
            assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
            let won = claim_locked_with(&p, &id, &file, boot, 4, false).unwrap();
            assert_eq!(won, Locked::Won(Epoch::new(n).unwrap()));
        }
        // Past the ceiling: deferred again, the record untouched.
        let before = std::fs::read(&p.record).unwrap();
        let file = open_claim_file(&p.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let quick = claim_locked_with(&p, &id, &file, boot, 4, false).unwrap();
        assert_eq!(quick, Locked::NeedsDurable);
        assert_eq!(std::fs::read(&p.record).unwrap(), before);
        let ceiling = |p: &Paths| Ceiling::read(&p.ceiling).unwrap().unwrap().ceiling.get();
        assert_eq!(ceiling(&p), first + 3);
        drop(file);
        assert_eq!(
            quick_term(&p, boot, 4).unwrap(),
            Tried::Won(Epoch::new(first + 4).unwrap())
        );
        assert_eq!(ceiling(&p), first + 7);
        // In place: the record keeps its padded length, and reads back.
        let r = Record::read(&p.record).unwrap().unwrap();
        assert_eq!(r.epoch.get(), first + 4);
        assert_eq!(std::fs::metadata(&p.record).unwrap().len() % 256, 0);
    }

    #[test]
    fn within_one_boot_a_damaged_record_is_still_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        term(&p, Some(BOOT_A), 8).unwrap();
        std::fs::write(&p.record, b"election-file/1\nepoch=").unwrap();
        let e = term(&p, Some(BOOT_A), 8).unwrap_err();
        assert!(matches!(e, Error::CorruptEpoch { .. }), "{e:?}");
        std::fs::remove_file(&p.record).unwrap();
        let e = term(&p, Some(BOOT_A), 8).unwrap_err();
        assert!(matches!(e, Error::CorruptEpoch { .. }), "{e:?}");
    }

    #[test]
    fn a_damaged_ceiling_is_corrupt_in_any_boot() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        term(&p, Some(BOOT_A), 8).unwrap();
        for bad in [&b""[..], b"election-file-ceiling/1\nceil", b"\xff"] {
            std::fs::write(&p.ceiling, bad).unwrap();
            for b in [Some(BOOT_A), Some(&*boot(3)), None] {
                let e = term(&p, b, 8).unwrap_err();
                assert!(matches!(e, Error::CorruptEpoch { .. }), "{bad:?}: {e:?}");
            }
        }
    }

    #[test]
    fn a_record_of_an_older_version_without_a_ceiling_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        std::fs::write(&p.record, "election-file/1\nepoch=41\nidentity=a\n").unwrap();
        std::fs::write(&p.lock, USED).unwrap();
        assert_eq!(term(&p, Some(BOOT_A), 8).unwrap().get(), 42);
        let c = Ceiling::read(&p.ceiling).unwrap().unwrap();
        assert_eq!(c.ceiling.get(), 49);
        assert_eq!(term(&p, Some(BOOT_A), 8).unwrap().get(), 43);
    }

    #[test]
    fn without_a_boot_id_every_term_writes_its_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        for n in 0..4 {
            let e = term(&p, None, 1024).unwrap();
            assert_eq!(e.get(), Epoch::FIRST.get() + n);
            let c = Ceiling::read(&p.ceiling).unwrap().unwrap();
            assert_eq!((c.ceiling, c.boot_id), (e, None));
        }
        // A kernel with a boot id later: the ceiling written without one is
        // never trusted to mean "the same boot", so the next epoch is past it.
        let e = term(&p, Some(BOOT_A), 1024).unwrap();
        assert_eq!(e.get(), Epoch::FIRST.get() + 4);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Term,
        /// The process dies: its page cache survives; nothing to simulate.
        ProcessCrash,
        PowerCut(Lost),
        /// The OS restarts without a boot id file (a sandbox without /proc).
        PowerCutNoBootId(Lost),
    }

    fn lost() -> impl Strategy<Value = Lost> {
        prop_oneof![
            Just(Lost::Missing),
            Just(Lost::Empty),
            Just(Lost::Torn),
            any::<usize>().prop_map(Lost::Older),
            any::<usize>().prop_map(Lost::Mixed),
        ]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => Just(Step::Term),
            1 => Just(Step::ProcessCrash),
            2 => lost().prop_map(Step::PowerCut),
            1 => lost().prop_map(Step::PowerCutNoBootId),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any mix of terms, process crashes and power cuts (the record
        /// lost, emptied, torn or any older version; a new boot id, or
        /// none), with small blocks so that reservations run out: every
        /// term's epoch is above every epoch handed out before it.
        #[test]
        fn epochs_strictly_grow_across_power_cuts(
            block in 1u64..6,
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let p = paths(dir.path());
            let mut current = Some(boot(0));
            let mut boots = 0;
            let mut versions = Vec::new();
            let mut highest: Option<Epoch> = None;
            for s in &steps {
                match s {
                    Step::Term => {
                        let e = term(&p, current.as_deref(), block).unwrap();
                        prop_assert!(Some(e) > highest, "{} after {:?} ({:?})", e, highest, steps);
                        highest = Some(e);
                        versions.push(std::fs::read(&p.record).unwrap());
                    }
                    Step::ProcessCrash => {}
                    Step::PowerCut(l) | Step::PowerCutNoBootId(l) => {
                        power_cut(&p, &versions, l);
                        boots += 1;
                        current = matches!(s, Step::PowerCut(_)).then(|| boot(boots));
                    }
                }
            }
        }
    }
}
