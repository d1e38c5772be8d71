//! The leader value (ADR 0068): what a term publishes
//! ([`Term::proclaim`](election_core::Term::proclaim)), in a file of its
//! own beside the epoch record, named for its election (`jobs.value`):
//!
//! ```text
//! election-file-value/1
//! epoch=42
//! value=10.0.3.17:8443
//! ```
//!
//! A reader shows the value only with the term of the same epoch (the
//! record's), so a value never outlives its term: a new term begins
//! without one, and a value a deposed holder wrote late never shows (its
//! epoch is not the record's, and epochs never repeat).
//!
//! A writer holds an exclusive open file description lock on the value
//! file from its check to its write: under it, its claim file must still
//! be the one at the path and the epoch record must still show its term.
//! A successor writes the record before it can proclaim, and its proclaim
//! waits for the lock, so a deposed holder's late write either saw the
//! successor's record (and was refused) or is overwritten by the
//! successor's value. Readers take a shared lock, so they never see a
//! write half done. Written through the page cache, no fsync: display
//! data; a value lost to a power cut reads as none.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use election_core::{Epoch, LeaderValue};

use crate::Error;
use crate::store::claim_file::{self, Paths};
use crate::store::lock::{self, Kind};
use crate::store::record::Record;

const HEADER: &str = "election-file-value/1";
/// A value file is small; anything larger is not ours (read as no value).
const MAX_BYTES: usize = 2 * LeaderValue::MAX_LEN + 256;

/// The text of a value file for term `epoch`.
fn text(epoch: Epoch, value: &LeaderValue) -> String {
    format!("{HEADER}\nepoch={epoch}\nvalue={value}\n")
}

/// Parses a value file's text: `None` if it is not one (torn, damaged).
fn parse(text: &str) -> Option<(Epoch, LeaderValue)> {
    let rest = text.strip_prefix(HEADER)?.strip_prefix('\n')?;
    let (epoch, rest) = rest.strip_prefix("epoch=")?.split_once('\n')?;
    let value = rest.strip_prefix("value=")?.strip_suffix('\n')?;
    Some((epoch.parse().ok()?, LeaderValue::new(value).ok()?))
}

/// Writes `value` for term `epoch` if `claim` (the attempt's locked claim
/// file) is still the claim file at its path and the epoch record still
/// shows `epoch`: `Ok(false)` (nothing written) otherwise. See the module
/// docs for why a deposed holder's value never shows.
pub(crate) fn proclaim(
    paths: &Paths,
    claim: &File,
    epoch: Epoch,
    value: &LeaderValue,
) -> Result<bool, Error> {
    let path = &paths.value;
    let file = lock::open(path).map_err(|e| Error::io("open", path, e))?;
    lock::lock_blocking(&file, Kind::Exclusive).map_err(|e| Error::io("lock", path, e))?;
    let ours = claim_file::same_file(claim, &paths.lock)?
        && Record::read(&paths.record)?.is_some_and(|r| r.epoch == epoch);
    if !ours {
        return Ok(false);
    }
    let text = text(epoch, value);
    file.set_len(0)
        .map_err(|e| Error::io("truncate", path, e))?;
    file.write_all_at(text.as_bytes(), 0)
        .map_err(|e| Error::io("write", path, e))?;
    // Closing the file (dropping it) frees the lock.
    Ok(true)
}

/// The value published in term `epoch`, if any: `None` when there is no
/// value file, it belongs to another term, or it does not read (display
/// data: never an error, but an I/O failure other than "not found" is).
pub(crate) fn read(path: &Path, epoch: Epoch) -> Result<Option<LeaderValue>, Error> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    lock::lock_blocking(&file, Kind::Shared).map_err(|e| Error::io("lock", path, e))?;
    let bytes = super::record::read_prefix(&file, path, MAX_BYTES + 1)?;
    let shown = std::str::from_utf8(&bytes)
        .ok()
        .and_then(parse)
        .filter(|(e, _)| *e == epoch)
        .map(|(_, v)| v);
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_value_reads_back_only_with_its_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.value");
        let (e7, e8) = (Epoch::new(7).unwrap(), Epoch::new(8).unwrap());
        assert_eq!(read(&path, e7).unwrap(), None);
        let v = LeaderValue::new("10.0.3.17:8443").unwrap();
        std::fs::write(&path, text(e7, &v)).unwrap();
        assert_eq!(read(&path, e7).unwrap(), Some(v.clone()));
        assert_eq!(read(&path, e8).unwrap(), None, "another term's value");
        std::fs::write(&path, &text(e7, &v)[..20]).unwrap();
        assert_eq!(read(&path, e7).unwrap(), None, "a torn value");
    }

    proptest! {
        #[test]
        fn any_value_round_trips(epoch in 1u64..=i64::MAX as u64, value in "[^\\p{Cc}]{0,100}") {
            let (epoch, value) = (Epoch::new(epoch).unwrap(), LeaderValue::new(&value).unwrap());
            prop_assert_eq!(parse(&text(epoch, &value)), Some((epoch, value)));
        }

        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in ".{0,200}") {
            let _ = parse(&text);
        }
    }
}
