//! The claim file and the epoch record beside it: winning the claim.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use election_core::{Epoch, Identity};

use crate::Error;
use crate::store::ceiling::{self, Ceiling};
use crate::store::lock::{self, Kind};
use crate::store::record::{HandoverFields, Record};

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
    /// The latest request that the current term be handed over (ADR
    /// 0112, `store::transfer`) and its temporary file.
    pub(crate) transfer: PathBuf,
    pub(crate) transfer_tmp: PathBuf,
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
    /// The record shows a handover to another candidate (ADR 0112) that
    /// the caller has not waived (seen for its window): nothing was
    /// written and the lock is kept; the caller unlocks (or tries it for
    /// another candidate). The record as read.
    Reserved(Box<Record>),
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
///
/// A record that shows a handover to another candidate (ADR 0112) is
/// [`Locked::Reserved`], unless it is `waived`: the record of the handover
/// as the caller read it, which the caller has seen for its window on its
/// own monotonic clock.
pub(crate) fn claim_locked(
    paths: &Paths,
    identity: &Identity,
    waived: Option<&Record>,
    file: &File,
    durable: bool,
) -> Result<Locked, Error> {
    claim_locked_waiving(
        paths,
        identity,
        waived,
        file,
        ceiling::boot_id(),
        ceiling::EPOCH_BLOCK,
        durable,
    )
}

/// [`claim_locked`] with the boot id and block size given (tests simulate
/// a reboot with another boot id), nothing waived.
#[cfg(test)]
pub(crate) fn claim_locked_with(
    paths: &Paths,
    identity: &Identity,
    file: &File,
    boot: Option<&str>,
    block: u64,
    durable: bool,
) -> Result<Locked, Error> {
    claim_locked_waiving(paths, identity, None, file, boot, block, durable)
}

/// [`claim_locked`] with everything given.
pub(crate) fn claim_locked_waiving(
    paths: &Paths,
    identity: &Identity,
    waived: Option<&Record>,
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
        let epoch = match hand_out(paths, identity, waived, used, boot, block, durable)? {
            HandOut::Epoch(epoch) => epoch,
            HandOut::NeedsDurable => return Ok(Locked::NeedsDurable),
            HandOut::Reserved(record) => return Ok(Locked::Reserved(record)),
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

/// What [`hand_out`] came to.
enum HandOut {
    /// The epoch drawn and recorded.
    Epoch(Epoch),
    /// A durable write is needed and was not allowed: nothing written.
    NeedsDurable,
    /// The record shows a handover to another candidate: nothing written.
    Reserved(Box<Record>),
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
///
/// Before anything is drawn: a record that shows a handover (ADR 0112) to
/// another candidate than `identity`, written in this boot, and not
/// `waived` by the caller, is [`HandOut::Reserved`]; nothing is written.
/// The successor's claim (and a waived one) goes on, and its record, like
/// every winner's, has no handover: the reservation ends with it.
fn hand_out(
    paths: &Paths,
    identity: &Identity,
    waived: Option<&Record>,
    used: bool,
    boot: Option<&str>,
    block: u64,
    durable: bool,
) -> Result<HandOut, Error> {
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
            return Ok(HandOut::NeedsDurable);
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
    if let Ok(Some(r)) = &record
        && let Some(h) = r.reservation(boot)
        && h.to != *identity
        && waived != Some(r)
    {
        return Ok(HandOut::Reserved(Box::new(r.clone())));
    }
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
            return Ok(HandOut::NeedsDurable);
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
        handover: None,
    }
    .write_in_place(&record_file, &paths.record, old_len)?;
    Ok(HandOut::Epoch(epoch))
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
    // Revoked already, or handed over (ADR 0112: no term holds the name;
    // the claim's lock is a contender's, looking at the reservation).
    if deposed.revoked || deposed.handover.is_some() {
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
        handover: None,
    };
    revocation.write_in_place(&record_file, &paths.record, old_len)?;
    Ok(Some(Revoked {
        deposed,
        revocation,
    }))
}

/// Ends the term of `epoch` that `claim` (the attempt's claim file, which
/// holds the claim's lock) won, handing it to `to` for `window` (ADR
/// 0112): under the epoch record's own lock (as [`hand_out`] and
/// [`revoke`] take it), with the claim's lock still held, the record of
/// the term is rewritten in place with the handover (no new epoch: the
/// successor's term draws the next one as every claim does); then the
/// claim's lock is dropped. A claim reads the record under both locks,
/// so it sees the term or its handover, never a free claim without it. A
/// request to hand the term over (`store::transfer`) is answered: its file
/// is removed (best effort).
///
/// `Ok(false)`, nothing written (and the lock dropped): the term is no
/// longer this attempt's: the claim file was replaced, another attempt
/// holds the claim, or the record shows a later epoch (a revocation).
/// Called again after a call that was dropped part way, it writes the
/// same handover again if no claim came between, or answers `false`.
///
/// If the process dies part way, the kernel drops the lock: the record
/// shows either the term (as after a crash: the next claim wins) or the
/// handover (the reservation stands, for its window).
pub(crate) fn release_to(
    paths: &Paths,
    claim: &File,
    epoch: Epoch,
    to: &Identity,
    window: std::time::Duration,
) -> Result<bool, Error> {
    release_to_with(paths, claim, epoch, to, window, ceiling::boot_id())
}

/// [`release_to`] with the boot id given.
pub(crate) fn release_to_with(
    paths: &Paths,
    claim: &File,
    epoch: Epoch,
    to: &Identity,
    window: std::time::Duration,
    boot: Option<&str>,
) -> Result<bool, Error> {
    let written = (|| -> Result<bool, Error> {
        let Some(record_file) = open_record(&paths.record)? else {
            return Ok(false);
        };
        lock::lock_blocking(&record_file, Kind::Exclusive)
            .map_err(|e| Error::io("lock", &paths.record, e))?;
        // Under the record's lock, the claim's: taken again by its own
        // file if it still holds it (a lock of the same open file
        // description), refused if another one does. If nobody does (a
        // call dropped after its unlock), taking it is safe: the record
        // is checked to show this term below, so no claim came between.
        if !lock::try_lock(claim, Kind::Exclusive).map_err(|e| Error::io("lock", &paths.lock, e))? {
            return Ok(false);
        }
        if !same_file(claim, &paths.lock)? {
            return Ok(false);
        }
        let ours = record_file
            .metadata()
            .map_err(|e| Error::io("stat", &paths.record, e))?;
        if !same_as(&ours, &paths.record)? {
            return Ok(false);
        }
        let (term, old_len) = Record::read_file(&record_file, &paths.record)?;
        if term.epoch != epoch || term.revoked {
            return Ok(false);
        }
        Record {
            handover: Some(HandoverFields {
                to: to.clone(),
                window,
                at_unix_ms: unix_ms(),
                boot: boot.map(str::to_owned),
            }),
            ..term
        }
        .write_in_place(&record_file, &paths.record, old_len)?;
        // The request (if any) is answered; a later term never reads it
        // anyway (its epoch is this term's).
        let _ = std::fs::remove_file(&paths.transfer);
        Ok(true)
    })();
    // Whatever came of it: the claim is given up (closing the attempt
    // frees the lock as well, if this fails).
    let unlocked = lock::unlock(claim).map_err(|e| Error::io("unlock", &paths.lock, e));
    let written = written?;
    unlocked?;
    Ok(written)
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
    /// See [`Locked::Reserved`]: the lock was dropped; the record as read.
    Reserved(Box<Record>),
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
    waived: Option<&Record>,
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
        match claim_locked(paths, identity, waived, f, durable)? {
            Locked::Won(epoch) => return Ok(Tried::Won(epoch)),
            Locked::NeedsDurable => return Ok(Tried::NeedsDurable),
            Locked::Reserved(record) => {
                if lock::unlock(f).is_err() {
                    *file = None; // closing frees the lock
                }
                return Ok(Tried::Reserved(record));
            }
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
            transfer: file("transfer"),
            transfer_tmp: file("transfer.tmp"),
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

    fn id(s: &str) -> Identity {
        Identity::new(s).unwrap()
    }

    /// `who` tries the claim once, as a fresh attempt, in boot `boot`,
    /// waiving `waived`; a won lock is dropped after.
    fn claim_as(paths: &Paths, who: &str, waived: Option<&Record>, boot: Option<&str>) -> Locked {
        let file = open_claim_file(&paths.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap(), "free");
        claim_locked_waiving(paths, &id(who), waived, &file, boot, 8, true).unwrap()
    }

    /// `a` wins a term in boot `boot` and hands it to `b` for a minute;
    /// `a`'s claim file is closed after (as the kernel closes it if `a`
    /// dies after the handover's write: the same state).
    fn handed_to_b(paths: &Paths, boot: Option<&str>) -> Epoch {
        let file = open_claim_file(&paths.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let Locked::Won(epoch) =
            claim_locked_waiving(paths, &id("a"), None, &file, boot, 8, true).unwrap()
        else {
            panic!("won")
        };
        let minute = std::time::Duration::from_secs(60);
        assert!(release_to_with(paths, &file, epoch, &id("b"), minute, boot).unwrap());
        let other = open_claim_file(&paths.lock).unwrap();
        assert!(!lock::exclusively_held(&other).unwrap(), "unlocked");
        epoch
    }

    #[test]
    fn a_handover_reserves_the_name_for_its_successor_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let old = handed_to_b(&p, Some(BOOT_A));
        let shown = Record::read(&p.record).unwrap().unwrap();
        assert_eq!((shown.epoch, shown.identity.as_str()), (old, "a"));
        assert_eq!(shown.handover.as_ref().unwrap().to.as_str(), "b");
        // c (and a itself) find it reserved; nothing is written.
        for who in ["c", "a"] {
            let Locked::Reserved(seen) = claim_as(&p, who, None, Some(BOOT_A)) else {
                panic!("{who} won a name reserved for b")
            };
            assert_eq!(*seen, shown);
        }
        assert_eq!(Record::read(&p.record).unwrap().unwrap(), shown);
        // b wins at once, above the old term; its record ends the
        // reservation.
        let Locked::Won(next) = claim_as(&p, "b", None, Some(BOOT_A)) else {
            panic!("b did not win")
        };
        assert!(next > old);
        assert_eq!(Record::read(&p.record).unwrap().unwrap().handover, None);
        assert!(matches!(claim_as(&p, "c", None, Some(BOOT_A)), Locked::Won(e) if e > next));
    }

    #[test]
    fn a_candidate_that_saw_the_handover_for_its_window_wins() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let old = handed_to_b(&p, Some(BOOT_A));
        let Locked::Reserved(seen) = claim_as(&p, "c", None, Some(BOOT_A)) else {
            panic!("reserved")
        };
        // Waiving another handover (an earlier one, or this term's handed
        // over again) waives nothing.
        let mut other = (*seen).clone();
        if let Some(h) = other.handover.as_mut() {
            h.at_unix_ms = h.at_unix_ms.map(|ms| ms + 1);
        }
        let got = claim_as(&p, "c", Some(&other), Some(BOOT_A));
        assert!(matches!(got, Locked::Reserved(_)), "{got:?}");
        let Locked::Won(next) = claim_as(&p, "c", Some(&seen), Some(BOOT_A)) else {
            panic!("c waited the window out")
        };
        assert!(next > old);
    }

    #[test]
    fn a_handover_does_not_outlive_the_boot_it_was_written_in() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let old = handed_to_b(&p, Some(BOOT_A));
        // After an OS restart every process it concerned is gone.
        let Locked::Won(next) = claim_as(&p, "c", None, Some(&boot(2))) else {
            panic!("a handover of another boot reserved the name")
        };
        assert!(next > old);
    }

    #[test]
    fn a_holder_that_died_before_its_handover_was_written_leaves_a_free_claim() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let file = open_claim_file(&p.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let won = claim_locked_waiving(&p, &id("a"), None, &file, Some(BOOT_A), 8, true).unwrap();
        let Locked::Won(old) = won else { panic!("won") };
        drop(file); // the kernel frees the lock of a process that died
        assert!(matches!(claim_as(&p, "c", None, Some(BOOT_A)), Locked::Won(e) if e > old));
    }

    #[test]
    fn a_handover_is_never_written_over_a_later_term_or_by_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let file = open_claim_file(&p.lock).unwrap();
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let won = claim_locked_waiving(&p, &id("a"), None, &file, Some(BOOT_A), 8, true).unwrap();
        let Locked::Won(epoch) = won else {
            panic!("won")
        };
        let minute = std::time::Duration::from_secs(60);
        // Another open of the claim file does not hold the claim.
        let other = open_claim_file(&p.lock).unwrap();
        assert!(!release_to_with(&p, &other, epoch, &id("b"), minute, Some(BOOT_A)).unwrap());
        // Revoked: the record shows a later epoch; a's handover would take
        // it back.
        let revoked = revoke_with(&p, &id("ops"), Some(BOOT_A), 8)
            .unwrap()
            .unwrap();
        assert!(!release_to_with(&p, &file, epoch, &id("b"), minute, Some(BOOT_A)).unwrap());
        assert_eq!(
            Record::read(&p.record).unwrap().unwrap(),
            revoked.revocation
        );
        assert!(
            !lock::exclusively_held(&other).unwrap(),
            "the lock was dropped"
        );
        assert!(
            matches!(claim_as(&p, "c", None, Some(BOOT_A)), Locked::Won(e) if e > revoked.revocation.epoch)
        );
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
        let tried = try_claim(paths, &id, None, &mut file, false)?;
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
