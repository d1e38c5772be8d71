//! The claim file and the epoch record beside it: winning the claim.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use election_core::{Epoch, Identity};

use crate::Error;
use crate::lock::{self, Kind};
use crate::record::Record;

/// The files of one election.
#[derive(Debug)]
pub(crate) struct Paths {
    pub(crate) dir: PathBuf,
    pub(crate) lock: PathBuf,
    pub(crate) record: PathBuf,
    pub(crate) tmp: PathBuf,
}

/// Opens the claim file for locking, creating it if needed.
pub(crate) fn open_claim_file(path: &Path) -> Result<File, Error> {
    lock::open(path).map_err(|e| Error::io("open", path, e))
}

/// What the claim file holds once a term of its election was won: a
/// non-empty claim file with no epoch record means the record was lost.
const USED: &[u8] = b"election-file/1 claim: this election has had terms; see its .epoch record\n";

/// Marks the claim file `file` (at `path`) as used, durably, once: from now
/// on a missing epoch record is corrupt, not "no term yet".
pub(crate) fn mark_used(file: &File, path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
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

/// With `file` exclusively locked: checks that it is still the claim file,
/// reads the epoch record and durably writes the next epoch for `identity`
/// (rule 1: the epoch is decided in the lock hold that wins the claim).
///
/// `Ok(None)` if the claim file was replaced (the lock is worthless; drop
/// `file`). On an error the lock is dropped.
pub(crate) fn claim_locked(
    paths: &Paths,
    identity: &Identity,
    file: &File,
) -> Result<Option<Epoch>, Error> {
    let won = (|| {
        if !same_file(file, &paths.lock)? {
            return Ok(None);
        }
        let previous = match Record::read(&paths.record)? {
            Some(r) => Some(r.epoch),
            None if file
                .metadata()
                .map_err(|e| Error::io("stat", &paths.lock, e))?
                .len()
                > 0 =>
            {
                return Err(Error::CorruptEpoch {
                    path: paths.record.clone(),
                    detail: "the record is missing, but the claim file shows this election has \
                             had terms, so epochs would start again"
                        .into(),
                });
            }
            None => None,
        };
        let epoch = Epoch::after(previous)?;
        Record {
            epoch,
            identity: identity.clone(),
            pid: Some(std::process::id()),
            since_unix_ms: unix_ms(),
        }
        .write_durably(&paths.dir, &paths.record, &paths.tmp)?;
        // After the record, so a failure here leaves a record, never a
        // marked claim file without one.
        mark_used(file, &paths.lock)?;
        Ok(Some(epoch))
    })();
    if !matches!(won, Ok(Some(_))) {
        let _ = lock::unlock(file);
    }
    won
}

/// One try without waiting: lock, then [`claim_locked`]. `file` is the
/// attempt's claim file, opened (or reopened, if it was replaced) here.
pub(crate) fn try_claim(
    paths: &Paths,
    identity: &Identity,
    file: &mut Option<File>,
) -> Result<Option<Epoch>, Error> {
    // Two rounds: if the claim file was replaced under us, reopen once.
    for _ in 0..2 {
        let f = match file {
            Some(f) => f,
            None => file.insert(open_claim_file(&paths.lock)?),
        };
        if !lock::try_lock(f, Kind::Exclusive).map_err(|e| Error::io("lock", &paths.lock, e))? {
            return Ok(None);
        }
        match claim_locked(paths, identity, f)? {
            Some(epoch) => return Ok(Some(epoch)),
            None => *file = None, // closing frees the lock on the stale file
        }
    }
    Ok(None)
}
