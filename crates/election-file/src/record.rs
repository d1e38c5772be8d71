//! The epoch record: the highest epoch handed out and who won it.
//!
//! ```text
//! election-file/1
//! epoch=42
//! identity=host-a/4711
//! pid=4711
//! since_unix_ms=1796000000000
//! ```
//!
//! Written only by the holder of the claim, once per term, through the
//! page cache: a temporary file is written and renamed over the record,
//! without an fsync (readers see the old record or the new one, never a
//! part). What makes that safe across an OS crash or a power cut is the
//! durable epoch ceiling beside it ([`crate::ceiling`], ADR 0025). A repair
//! writes it durably.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_core::{Epoch, Identity};

use crate::Error;

const HEADER: &str = "election-file/1";
/// Records are small; anything larger is not ours.
const MAX_LEN: u64 = 4096;

/// One epoch record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) epoch: Epoch,
    pub(crate) identity: Identity,
    pub(crate) pid: Option<u32>,
    pub(crate) since_unix_ms: Option<u64>,
}

impl Record {
    /// When the term began, as the winner's wall clock recorded it in the
    /// lock hold that won it (the record is written once per term).
    pub(crate) fn since(&self) -> Option<SystemTime> {
        UNIX_EPOCH.checked_add(Duration::from_millis(self.since_unix_ms?))
    }

    pub(crate) fn to_text(&self) -> String {
        let mut s = format!(
            "{HEADER}\nepoch={}\nidentity={}\n",
            self.epoch, self.identity
        );
        if let Some(pid) = self.pid {
            s.push_str(&format!("pid={pid}\n"));
        }
        if let Some(ms) = self.since_unix_ms {
            s.push_str(&format!("since_unix_ms={ms}\n"));
        }
        s
    }

    /// Parses a record; the error says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Record, String> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("the first line is not {HEADER:?}"));
        }
        let (mut epoch, mut identity, mut pid, mut since) = (None, None, None, None);
        for line in lines {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line:?} is not key=value"))?;
            let dup = |k: &str| format!("{k} appears twice");
            match key {
                "epoch" => {
                    let e: Epoch = value.parse().map_err(|e| format!("{e}"))?;
                    if epoch.replace(e).is_some() {
                        return Err(dup(key));
                    }
                }
                "identity" => {
                    let i = Identity::new(value).map_err(|e| e.to_string())?;
                    if identity.replace(i).is_some() {
                        return Err(dup(key));
                    }
                }
                "pid" => pid = Some(value.parse().map_err(|_| format!("bad pid {value:?}"))?),
                "since_unix_ms" => {
                    since = Some(
                        value
                            .parse()
                            .map_err(|_| format!("bad since_unix_ms {value:?}"))?,
                    )
                }
                _ => {} // later versions may add keys
            }
        }
        Ok(Record {
            epoch: epoch.ok_or("no epoch")?,
            identity: identity.ok_or("no identity")?,
            pid,
            since_unix_ms: since,
        })
    }

    /// Reads the record at `path`: `Ok(None)` if there is none yet.
    pub(crate) fn read(path: &Path) -> Result<Option<Record>, Error> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let mut bytes = Vec::new();
        (&file)
            .take(MAX_LEN + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", path, e))?;
        if bytes.len() as u64 > MAX_LEN {
            return Err(Error::CorruptEpoch {
                path: path.to_owned(),
                detail: format!("more than {MAX_LEN} bytes is too large for an epoch record"),
            });
        }
        let text = String::from_utf8(bytes).map_err(|_| Error::CorruptEpoch {
            path: path.to_owned(),
            detail: "not UTF-8".into(),
        })?;
        Record::parse(&text)
            .map(Some)
            .map_err(|detail| Error::CorruptEpoch {
                path: path.to_owned(),
                detail,
            })
    }

    /// Writes the record through the page cache: temp file, rename; no
    /// fsync. A failed step before the rename removes the temporary file.
    pub(crate) fn write_cached(&self, path: &Path, tmp: &Path) -> Result<(), Error> {
        let written = (|| {
            let mut f = File::create(tmp).map_err(|e| Error::io("create", tmp, e))?;
            f.write_all(self.to_text().as_bytes())
                .map_err(|e| Error::io("write", tmp, e))?;
            drop(f);
            std::fs::rename(tmp, path).map_err(|e| Error::io("rename", path, e))
        })();
        if written.is_err() && std::fs::symlink_metadata(tmp).is_ok_and(|m| !m.is_dir()) {
            let _ = std::fs::remove_file(tmp);
        }
        written
    }

    /// Writes the record durably: temp file, fsync, rename, fsync of `dir`.
    ///
    /// If a step before the rename fails (a full disk, say), the temporary
    /// file is removed, so no failure leaves one behind; the record itself
    /// is untouched.
    pub(crate) fn write_durably(&self, dir: &Path, path: &Path, tmp: &Path) -> Result<(), Error> {
        let written = (|| {
            let mut f = File::create(tmp).map_err(|e| Error::io("create", tmp, e))?;
            f.write_all(self.to_text().as_bytes())
                .map_err(|e| Error::io("write", tmp, e))?;
            f.sync_all().map_err(|e| Error::io("fsync", tmp, e))?;
            drop(f);
            std::fs::rename(tmp, path).map_err(|e| Error::io("rename", path, e))
        })();
        if let Err(e) = written {
            // Only a file: a directory at `tmp` is the operator's to move.
            if std::fs::symlink_metadata(tmp).is_ok_and(|m| !m.is_dir()) {
                let _ = std::fs::remove_file(tmp);
            }
            return Err(e);
        }
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("fsync", dir, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(epoch: u64) -> Record {
        Record {
            epoch: Epoch::new(epoch).unwrap(),
            identity: Identity::new("host/1").unwrap(),
            pid: Some(1),
            since_unix_ms: Some(5),
        }
    }

    #[test]
    fn round_trips() {
        let r = rec(42);
        assert_eq!(Record::parse(&r.to_text()).unwrap(), r);
    }

    #[test]
    fn since_is_the_recorded_wall_clock_time() {
        assert_eq!(rec(1).since(), Some(UNIX_EPOCH + Duration::from_millis(5)));
        let none = Record {
            since_unix_ms: None,
            ..rec(1)
        };
        assert_eq!(none.since(), None);
    }

    #[test]
    fn damaged_records_are_refused() {
        for bad in [
            "",
            "epoch=3\nidentity=a\n",
            "election-file/1\nidentity=a\n",
            "election-file/1\nepoch=0\nidentity=a\n",
            "election-file/1\nepoch=-1\nidentity=a\n",
            "election-file/1\nepoch=3\n",
            "election-file/1\nepoch=3\nepoch=4\nidentity=a\n",
            "election-file/1\nepoch=3\nidentity=a\ngarbage\n",
        ] {
            assert!(Record::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn durable_write_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.epoch");
        assert_eq!(Record::read(&path).unwrap(), None);
        rec(7)
            .write_durably(dir.path(), &path, &dir.path().join("e.tmp"))
            .unwrap();
        assert_eq!(Record::read(&path).unwrap(), Some(rec(7)));
        std::fs::write(&path, b"\xff\xfe").unwrap();
        assert!(matches!(
            Record::read(&path),
            Err(Error::CorruptEpoch { .. })
        ));
        std::fs::write(&path, vec![b'x'; 5000]).unwrap();
        assert!(matches!(
            Record::read(&path),
            Err(Error::CorruptEpoch { .. })
        ));
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let (path, tmp) = (dir.path().join("e.epoch"), dir.path().join("e.tmp"));
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        std::os::unix::fs::symlink("/dev/full", &tmp).unwrap();
        let e = rec(3).write_durably(dir.path(), &path, &tmp).unwrap_err();
        assert!(matches!(e, Error::NoSpace { .. }), "{e:?}");
        assert!(std::fs::symlink_metadata(&tmp).is_err(), "temp file left");
        assert_eq!(Record::read(&path).unwrap(), None);
        // The record path is a directory: refused as unusable, not retried.
        std::fs::create_dir(&path).unwrap();
        let e = Record::read(&path).unwrap_err();
        assert!(matches!(e, Error::Unusable { .. }), "{e:?}");
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in ".{0,200}") {
            let _ = Record::parse(&text);
        }

        #[test]
        fn any_record_round_trips(epoch in 1u64..=i64::MAX as u64, pid in proptest::option::of(any::<u32>())) {
            let r = Record { pid, ..rec(epoch) };
            prop_assert_eq!(Record::parse(&r.to_text()).unwrap(), r);
        }
    }
}
