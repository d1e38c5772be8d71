//! The request that the current term be handed over (ADR 0112), in a file
//! of its own beside the epoch record, named for its election
//! (`jobs.transfer`):
//!
//! ```text
//! election-file-transfer/1
//! epoch=42
//! to=host-b/1
//! by=deploy/7
//! at_unix_ms=1796000000000
//! check=0123456789abcdef
//! ```
//!
//! A preferred candidate's ([`Election::prefer`](election_core::Election::prefer))
//! also has `priority=N`; its `to` and `by` are the candidate.
//!
//! Written by whoever asks ([`request`]), under the epoch record's own lock
//! and only while a term holds the claim, for that term's epoch: a
//! temporary file renamed over the request (atomic; no fsync: a request
//! lost to a power cut was for a term that is gone too). The holder's
//! tamper watch, which follows the directory, reads it at the rename's
//! event and reports it to the term if its epoch is the term's
//! ([`read_for`]): a request left over from an earlier term (its epoch is
//! lower, epochs never repeat) is never reported to a later one. Writing it
//! never touches the claim file or the record, so it is not tampering.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_core::{Epoch, Identity, TransferRequest};

use crate::Error;
use crate::store::claim_file::Paths;
use crate::store::lock::{self, Kind};
use crate::store::record::{self, Record};

const HEADER: &str = "election-file-transfer/1";
/// A request is small; anything larger is not ours (read as none).
const MAX_BYTES: usize = 1024;

/// The text of a request file.
fn text(r: &TransferRequest) -> String {
    let mut s = format!("{HEADER}\nepoch={}\nto={}\nby={}\n", r.epoch, r.to, r.by);
    if let Some(ms) =
        r.at.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_millis()).ok())
    {
        s.push_str(&format!("at_unix_ms={ms}\n"));
    }
    if let Some(p) = r.priority {
        s.push_str(&format!("priority={p}\n"));
    }
    record::with_check(s)
}

/// Parses a request file's text: `None` if it is not one (torn, damaged,
/// written by hand without its check line).
fn parse(text: &str) -> Option<TransferRequest> {
    record::verify_check(text).ok()?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return None;
    }
    let (mut epoch, mut to, mut by, mut at, mut priority) = (None, None, None, None, None);
    for line in lines {
        let (key, value) = line.split_once('=')?;
        match key {
            "epoch" => epoch = Some(value.parse::<Epoch>().ok()?),
            "to" => to = Some(Identity::new(value).ok()?),
            "by" => by = Some(Identity::new(value).ok()?),
            "at_unix_ms" => {
                let ms: u64 = value.parse().ok()?;
                at = UNIX_EPOCH.checked_add(Duration::from_millis(ms));
            }
            "priority" => priority = Some(value.parse::<u32>().ok()?),
            _ => {}
        }
    }
    let mut request = TransferRequest::new(to?, by?, epoch?, at);
    request.priority = priority;
    Some(request)
}

/// Asks the term that holds the claim of `paths` to hand it to `to`, on
/// behalf of `by`: under the epoch record's own lock, with the claim held
/// and the record showing a term (not a revocation, not a handover), the
/// request for that term's epoch replaces any earlier one. `Ok(None)`, and
/// nothing written: no term holds the claim.
pub(crate) fn request(
    paths: &Paths,
    to: &Identity,
    by: &Identity,
    priority: Option<u32>,
) -> Result<Option<TransferRequest>, Error> {
    let claim = match File::open(&paths.lock) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &paths.lock, e)),
    };
    let held = || lock::exclusively_held(&claim).map_err(|e| Error::io("lock", &paths.lock, e));
    if !held()? {
        return Ok(None);
    }
    let record_file = match File::options().read(true).write(true).open(&paths.record) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &paths.record, e)),
    };
    // The record's lock: no claim draws an epoch, no handover is written,
    // while the request is checked and stored (and requests are written
    // one at a time, so they never share the temporary file).
    lock::lock_blocking(&record_file, Kind::Exclusive)
        .map_err(|e| Error::io("lock", &paths.record, e))?;
    if !held()? {
        return Ok(None);
    }
    let (term, _) = Record::read_file(&record_file, &paths.record)?;
    if term.revoked || term.handover.is_some() {
        return Ok(None);
    }
    let mut request =
        TransferRequest::new(to.clone(), by.clone(), term.epoch, Some(SystemTime::now()));
    request.priority = priority;
    let written = (|| {
        let tmp = &paths.transfer_tmp;
        let mut f = File::create(tmp).map_err(|e| Error::io("create", tmp, e))?;
        f.write_all(text(&request).as_bytes())
            .map_err(|e| Error::io("write", tmp, e))?;
        drop(f);
        std::fs::rename(tmp, &paths.transfer).map_err(|e| Error::io("rename", &paths.transfer, e))
    })();
    if let Err(e) = written {
        if std::fs::symlink_metadata(&paths.transfer_tmp).is_ok_and(|m| !m.is_dir()) {
            let _ = std::fs::remove_file(&paths.transfer_tmp);
        }
        return Err(e);
    }
    Ok(Some(request))
}

/// The request stored for the term of `epoch`, if any: a request for
/// another epoch (an earlier term's, left over), a damaged file or one
/// that cannot be read is none.
pub(crate) fn read_for(path: &Path, epoch: Epoch) -> Option<TransferRequest> {
    let file = File::open(path).ok()?;
    let bytes = record::read_prefix(&file, path, MAX_BYTES + 1).ok()?;
    if bytes.len() > MAX_BYTES {
        return None;
    }
    parse(std::str::from_utf8(&bytes).ok()?).filter(|r| r.epoch == epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(epoch: u64) -> TransferRequest {
        TransferRequest::new(
            Identity::new("host/2").unwrap(),
            Identity::new("deploy/7").unwrap(),
            Epoch::new(epoch).unwrap(),
            UNIX_EPOCH.checked_add(Duration::from_millis(1_796_000_000_000)),
        )
    }

    #[test]
    fn a_request_round_trips_and_only_for_its_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.transfer");
        assert_eq!(read_for(&path, Epoch::FIRST), None);
        std::fs::write(&path, text(&req(42))).unwrap();
        assert_eq!(read_for(&path, Epoch::new(42).unwrap()), Some(req(42)));
        // Left over from term 42: never shown to term 43.
        assert_eq!(read_for(&path, Epoch::new(43).unwrap()), None);
        // A preferred candidate's keeps its priority.
        std::fs::write(&path, text(&req(42).with_priority(7))).unwrap();
        let read = read_for(&path, Epoch::new(42).unwrap()).unwrap();
        assert_eq!(read.priority, Some(7));
    }

    #[test]
    fn a_torn_or_damaged_request_is_none() {
        let whole = text(&req(42));
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut]), None, "cut at {cut}");
        }
        let edited = whole.replace("to=host/2", "to=host/3");
        assert_eq!(parse(&edited), None);
        assert_eq!(
            parse("election-file-transfer/1\nepoch=42\nto=a\nby=b\n"),
            None
        );
    }
}
