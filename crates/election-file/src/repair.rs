//! The safe way out of a corrupt or missing epoch record: set it to an
//! epoch the operator gives, never lower than any epoch still visible.
//!
//! Removing the record is never a repair: the next term would get
//! [`Epoch::FIRST`] again and every fencing token issued since would be
//! higher than the new leader's, so fenced resources would refuse the new
//! leader, or, worse, accept a deposed one.

use std::fs::File;
use std::io::Read;

use election_core::{Epoch, Identity};

use crate::Error;
use crate::ceiling::Ceiling;
use crate::claimfile::{Paths, open_claim_file};
use crate::lock::{self, Kind};
use crate::record::Record;

/// What [`FileElection::repair_epoch`](crate::FileElection::repair_epoch)
/// did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochRepair {
    /// The epoch the record now holds: the next term gets a higher one.
    pub epoch: Epoch,
    /// The highest epoch found in what was there before (a readable record,
    /// or the digits after `epoch=` in a damaged one), if any.
    pub highest_seen: Option<Epoch>,
}

/// The highest epoch visible in the record's bytes, read or not: the
/// record's own epoch if it parses, else the largest number that follows an
/// `epoch=` anywhere in it.
fn highest_visible(bytes: &[u8]) -> Option<Epoch> {
    let text = String::from_utf8_lossy(bytes);
    if let Ok(record) = Record::parse(&text) {
        return Some(record.epoch);
    }
    text.match_indices("epoch=")
        .filter_map(|(at, key)| {
            let digits: String = text[at + key.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        // A number above Epoch::MAX cannot have been handed out; the
        // operator is told below what was seen either way.
        .filter_map(|v| Epoch::new(v.min(Epoch::MAX.get())))
        .max()
}

fn read_all(path: &std::path::Path) -> Result<Option<Vec<u8>>, Error> {
    match File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            (&mut f)
                .take(1 << 20)
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io("read", path, e))?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("open", path, e)),
    }
}

/// With nobody holding the claim: durably sets the record of `paths` to
/// `epoch`, refusing an epoch lower than any visible one.
pub(crate) fn repair(paths: &Paths, epoch: Epoch) -> Result<EpochRepair, Error> {
    let file = open_claim_file(&paths.lock)?;
    if !lock::try_lock(&file, Kind::Exclusive).map_err(|e| Error::io("lock", &paths.lock, e))? {
        return Err(Error::ClaimHeld {
            path: paths.lock.clone(),
        });
    }
    let mut highest_seen = None;
    for path in [&paths.record, &paths.tmp] {
        if let Some(bytes) = read_all(path)? {
            highest_seen = highest_seen.max(highest_visible(&bytes));
        }
    }
    if let Some(seen) = highest_seen
        && epoch < seen
    {
        return Err(Error::EpochTooLow {
            path: paths.record.clone(),
            given: epoch,
            highest_seen: seen,
        });
    }
    Record {
        epoch,
        identity: Identity::new("repair").expect("a valid identity"),
        pid: Some(std::process::id()),
        since_unix_ms: None,
    }
    .write_durably(&paths.dir, &paths.record, &paths.tmp)?;
    // The ceiling never goes down: it may cover epochs the damaged record
    // no longer shows (ADR 0025). A damaged ceiling is replaced.
    let old = Ceiling::read(&paths.ceiling).ok().flatten();
    Ceiling {
        ceiling: old.map_or(epoch, |c| c.ceiling.max(epoch)),
        boot_id: crate::ceiling::boot_id().map(str::to_owned),
    }
    .write_durably(&paths.dir, &paths.ceiling, &paths.ceiling_tmp)?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", &paths.lock, e))?
        .len();
    crate::claimfile::mark_used(&file, &paths.lock, len)?;
    // Closing `file` frees the lock.
    Ok(EpochRepair {
        epoch,
        highest_seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_the_epoch_of_a_damaged_record() {
        let e = |v| Epoch::new(v);
        assert_eq!(
            highest_visible(b"election-file/1\nepoch=7\nidentity=a\n"),
            e(7)
        );
        assert_eq!(
            highest_visible(b"election-file/1\nepoch=7\nidentity=\x01\n"),
            e(7)
        );
        assert_eq!(highest_visible(b"garbage epoch=12 epoch=9 epoch=x"), e(12));
        assert_eq!(highest_visible(b"epoch=banana"), None);
        assert_eq!(highest_visible(b""), None);
        assert_eq!(
            highest_visible(b"epoch=99999999999999999999999"),
            None,
            "too long to be a u64"
        );
        assert_eq!(
            highest_visible(b"epoch=18446744073709551615"),
            Some(Epoch::MAX)
        );
    }
}
