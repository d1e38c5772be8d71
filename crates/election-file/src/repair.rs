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
use crate::store::ceiling::Ceiling;
use crate::store::claim_file::{Paths, open_claim_file};
use crate::store::lock::{self, Kind};
use crate::store::record::Record;

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
    largest_after(&text, "epoch=")
}

/// The largest number that follows `key` anywhere in `text` (a number
/// above [`Epoch::MAX`] counts as [`Epoch::MAX`]; one too long for a `u64`
/// does not count).
fn largest_after(text: &str, key: &str) -> Option<Epoch> {
    text.match_indices(key)
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

/// What the repair found of the epoch ceiling (ADR 0025).
enum OldCeiling {
    /// None: a new election, one of a version before the ceiling, or a
    /// deleted ceiling.
    Missing,
    /// A ceiling that reads.
    Read(Ceiling),
    /// A ceiling that does not read, and the largest number after a
    /// `ceiling=` in it, if any.
    Damaged(Option<Epoch>),
}

impl OldCeiling {
    fn read(path: &std::path::Path) -> Result<OldCeiling, Error> {
        match Ceiling::read(path) {
            Ok(None) => Ok(OldCeiling::Missing),
            Ok(Some(c)) => Ok(OldCeiling::Read(c)),
            Err(Error::CorruptEpoch { .. }) => {
                let bytes = read_all(path)?.unwrap_or_default();
                Ok(OldCeiling::Damaged(largest_after(
                    &String::from_utf8_lossy(&bytes),
                    "ceiling=",
                )))
            }
            Err(e) => Err(e),
        }
    }
}

/// The lowest epoch a repair may set, from the ceiling: epochs up to the
/// ceiling may have been handed out unless the record is known exact, that
/// is unless it reads and the ceiling was written in this boot (`boot`)
/// (or there is no ceiling: an election of a version before it, whose
/// records were written durably).
///
/// - A ceiling from another boot, or without a boot id: the record may be
///   stale (the page cache was lost with the OS): the ceiling.
/// - A ceiling of this boot with a record that does not read or is
///   missing (tampering): the ceiling, since the record was the only exact
///   account of the epochs below it.
/// - A damaged ceiling: the largest number left in it (its boot cannot be
///   known).
fn ceiling_floor(old: &OldCeiling, record_reads: bool, boot: Option<&str>) -> Option<Epoch> {
    match old {
        OldCeiling::Missing => None,
        OldCeiling::Read(c) if record_reads && c.same_boot(boot) => None,
        OldCeiling::Read(c) => Some(c.ceiling),
        OldCeiling::Damaged(seen) => *seen,
    }
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
/// `epoch`, refusing an epoch lower than any visible one or than any that
/// may have been handed out (see [`ceiling_floor`]).
pub(crate) fn repair(paths: &Paths, epoch: Epoch) -> Result<EpochRepair, Error> {
    repair_with(paths, epoch, crate::store::ceiling::boot_id())
}

/// [`repair`] as the kernel with boot id `boot` would run it (tests
/// simulate an OS restart with another boot id).
pub(crate) fn repair_with(
    paths: &Paths,
    epoch: Epoch,
    boot: Option<&str>,
) -> Result<EpochRepair, Error> {
    let file = open_claim_file(&paths.lock)?;
    if !lock::try_lock(&file, Kind::Exclusive).map_err(|e| Error::io("lock", &paths.lock, e))? {
        return Err(Error::ClaimHeld {
            path: paths.lock.clone(),
        });
    }
    let mut highest_seen = None;
    let mut record_reads = false;
    for path in [&paths.record, &paths.tmp] {
        if let Some(bytes) = read_all(path)? {
            if path == &paths.record {
                record_reads = Record::parse(&String::from_utf8_lossy(&bytes)).is_ok();
            }
            highest_seen = highest_seen.max(highest_visible(&bytes));
        }
    }
    let old = OldCeiling::read(&paths.ceiling)?;
    let floors = [
        highest_seen.map(|e| (e, &paths.record)),
        ceiling_floor(&old, record_reads, boot).map(|e| (e, &paths.ceiling)),
    ];
    if let Some((floor, path)) = floors.into_iter().flatten().max_by_key(|(e, _)| *e)
        && epoch < floor
    {
        return Err(Error::EpochTooLow {
            path: path.clone(),
            given: epoch,
            highest_seen: floor,
        });
    }
    Record {
        epoch,
        identity: Identity::new("repair").expect("a valid identity"),
        pid: Some(std::process::id()),
        since_unix_ms: None,
        revoked: false,
        handover: None,
    }
    .write_durably(&paths.dir, &paths.record, &paths.tmp)?;
    // The ceiling never goes down: it may cover epochs the damaged record
    // no longer shows (ADR 0025). A damaged one is replaced; `epoch` is at
    // least every number left in it. Stamped with this boot's id it makes
    // the record exact, which it now is: `epoch` is at least every epoch
    // that may have been handed out (ADR 0048).
    let old_ceiling = match old {
        OldCeiling::Read(c) => Some(c.ceiling),
        OldCeiling::Missing | OldCeiling::Damaged(_) => None,
    };
    Ceiling {
        ceiling: old_ceiling.map_or(epoch, |c| c.max(epoch)),
        boot_id: boot.map(str::to_owned),
    }
    .write_durably(&paths.dir, &paths.ceiling, &paths.ceiling_tmp)?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", &paths.lock, e))?
        .len();
    crate::store::claim_file::mark_used(&file, &paths.lock, len)?;
    // Closing `file` frees the lock.
    Ok(EpochRepair {
        epoch,
        highest_seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::claim_file::tests::paths;
    use crate::store::claim_file::{Locked, claim_locked_with};
    use crate::store::lock::Kind;

    const BOOT_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
    const BOOT_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";
    const BLOCK: u64 = 1024;

    /// Wins one term as the kernel with boot id `boot` would.
    fn term(paths: &Paths, boot: Option<&str>) -> Result<Epoch, Error> {
        let file = open_claim_file(&paths.lock)?;
        assert!(lock::try_lock(&file, Kind::Exclusive).unwrap());
        let id = Identity::new("host/1").unwrap();
        match claim_locked_with(paths, &id, &file, boot, BLOCK, true)? {
            Locked::Won(epoch) => Ok(epoch),
            other => panic!("the claim file is ours: {other:?}"),
        }
    }

    fn e(v: u64) -> Epoch {
        Epoch::new(v).unwrap()
    }

    /// What a power cut may leave of the record: an older version of it.
    fn stale_record(paths: &Paths, epoch: u64) {
        std::fs::write(
            &paths.record,
            format!("election-file/1\nepoch={epoch}\nidentity=host/1\n"),
        )
        .unwrap();
    }

    /// Epochs 2 to 11 handed out in boot A: returns the ceiling reserved.
    fn ten_terms(p: &Paths, boot: Option<&str>) -> Epoch {
        for want in 2..=11 {
            assert_eq!(term(p, boot).unwrap(), e(want));
        }
        Ceiling::read(&p.ceiling).unwrap().unwrap().ceiling
    }

    /// The floor a refused repair named.
    fn refused_at(out: Result<EpochRepair, Error>) -> (Epoch, std::path::PathBuf) {
        match out {
            Err(Error::EpochTooLow {
                highest_seen, path, ..
            }) => (highest_seen, path),
            other => panic!("expected EpochTooLow, got {other:?}"),
        }
    }

    /// Issue 23, item 3, with the boot id of the repairing kernel given:
    /// after an OS restart the record may be stale, so a repair never goes
    /// below the old boot's ceiling, and the next term is above every
    /// epoch handed out.
    #[test]
    fn after_an_os_restart_a_repair_never_goes_below_the_old_ceiling() {
        for boot_before in [Some(BOOT_A), None] {
            let dir = tempfile::tempdir().unwrap();
            let p = paths(dir.path());
            let ceiling = ten_terms(&p, boot_before);
            stale_record(&p, 5);
            let out = repair_with(&p, e(5), Some(BOOT_B));
            if let Ok(done) = &out {
                let next = term(&p, Some(BOOT_B)).unwrap();
                assert!(
                    next > e(11),
                    "epoch {next} handed out again after a repair with {} \
                     (epochs 2 to 11 were handed out before the restart)",
                    done.epoch
                );
            }
            let (floor, path) = refused_at(out);
            assert_eq!((floor, path), (ceiling, p.ceiling.clone()));
            // Refused, nothing changed: the next term would still go past
            // the ceiling.
            let done = repair_with(&p, ceiling, Some(BOOT_B)).unwrap();
            assert_eq!(done.highest_seen, Some(e(5)));
            let next = term(&p, Some(BOOT_B)).unwrap();
            assert_eq!(next.get(), ceiling.get() + 1);
        }
    }

    /// The same boot: an exact record is the floor; a damaged or missing
    /// one is not exact any more, and the ceiling is.
    #[test]
    fn in_the_same_boot_only_a_record_that_reads_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let ceiling = ten_terms(&p, Some(BOOT_A));
        let (floor, path) = refused_at(repair_with(&p, e(10), Some(BOOT_A)));
        assert_eq!((floor, path), (e(11), p.record.clone()));
        repair_with(&p, e(11), Some(BOOT_A)).unwrap();
        assert_eq!(term(&p, Some(BOOT_A)).unwrap(), e(12));
        assert_eq!(
            Ceiling::read(&p.ceiling).unwrap().unwrap().ceiling,
            ceiling,
            "the ceiling never goes down"
        );

        for damage in [None, Some("election-file/1\nepoch=12\nidentity=\n")] {
            match damage {
                None => std::fs::remove_file(&p.record).unwrap(),
                Some(text) => std::fs::write(&p.record, text).unwrap(),
            }
            let (floor, path) = refused_at(repair_with(&p, e(13), Some(BOOT_A)));
            assert_eq!((floor, path), (ceiling, p.ceiling.clone()), "{damage:?}");
        }
        repair_with(&p, ceiling, Some(BOOT_A)).unwrap();
        assert_eq!(term(&p, Some(BOOT_A)).unwrap().get(), ceiling.get() + 1);
    }

    /// No ceiling (an election of an older version, or a deleted one): the
    /// record is exact as the claim reads it, or, if it is gone too, only
    /// the operator knows; a repair writes a ceiling of this boot.
    #[test]
    fn without_a_ceiling_the_record_is_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        ten_terms(&p, Some(BOOT_A));
        std::fs::remove_file(&p.ceiling).unwrap();
        let (floor, _) = refused_at(repair_with(&p, e(10), Some(BOOT_B)));
        assert_eq!(floor, e(11));
        repair_with(&p, e(20), Some(BOOT_B)).unwrap();
        let c = Ceiling::read(&p.ceiling).unwrap().unwrap();
        assert_eq!(c.ceiling, e(20));
        assert!(c.same_boot(Some(BOOT_B)));
        assert_eq!(term(&p, Some(BOOT_B)).unwrap(), e(21));
    }

    /// A damaged ceiling: its boot cannot be known, so the largest number
    /// left in it is a floor; the repair replaces it.
    #[test]
    fn a_damaged_ceiling_is_a_floor_by_what_is_left_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let ceiling = ten_terms(&p, Some(BOOT_A));
        std::fs::write(
            &p.ceiling,
            format!("election-file-ceiling/1\nceiling={ceiling}\nboot_id=x"),
        )
        .unwrap();
        assert!(Ceiling::read(&p.ceiling).is_err());
        let (floor, path) = refused_at(repair_with(&p, e(11), Some(BOOT_A)));
        assert_eq!((floor, path), (ceiling, p.ceiling.clone()));
        repair_with(&p, ceiling, Some(BOOT_A)).unwrap();
        assert_eq!(term(&p, Some(BOOT_A)).unwrap().get(), ceiling.get() + 1);
        // Nothing readable left in it: the record's epoch is the floor.
        std::fs::write(&p.ceiling, "garbage").unwrap();
        let (floor, path) = refused_at(repair_with(&p, e(3), Some(BOOT_A)));
        assert_eq!((floor, path), (e(ceiling.get() + 1), p.record.clone()));
    }

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
