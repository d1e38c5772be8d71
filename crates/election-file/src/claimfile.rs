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
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io("open", path, e))
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
        let previous = Record::read(&paths.record)?.map(|r| r.epoch);
        let epoch = Epoch::after(previous)?;
        Record {
            epoch,
            identity: identity.clone(),
            pid: Some(std::process::id()),
            since_unix_ms: unix_ms(),
        }
        .write_durably(&paths.dir, &paths.record, &paths.tmp)?;
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
