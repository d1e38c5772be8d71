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
//! page cache: rewritten in place (one `pwrite` at offset 0 of the whole
//! record, padded to a fixed length by a `pad=` line and ended by a
//! `check=` line, an FNV-1a 64 checksum of the text before it; ADR 0028),
//! without an fsync. A reader without the lock that catches a rewrite sees
//! a checksum mismatch and reads again. What makes this safe across an OS
//! crash or a power cut is the durable epoch ceiling beside it
//! ([`crate::store::ceiling`], ADR 0025). A repair writes it durably (temporary
//! file, fsync, rename). Older versions ignore the `pad` and `check` keys;
//! a record without `check` (older versions, or written by hand) is read
//! as before.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use election_core::{Epoch, Identity};

use crate::Error;

const HEADER: &str = "election-file/1";
/// Records are small; anything larger is not ours.
const MAX_LEN: u64 = MAX_BYTES as u64;
/// [`MAX_LEN`] as a buffer's length.
const MAX_BYTES: usize = 4096;
/// The length a record written in place is padded to (a multiple of it if
/// the text is longer), so a term's rewrite covers the whole file and never
/// shortens it.
const PADDED_LEN: usize = 256;
/// How many times a reader without the lock reads a record that does not
/// read (a checksum that does not match, or a record its winner has
/// created and not yet written) before calling it corrupt: it may have
/// caught a rewrite. The waits between reads double from 1 ms (63 ms in
/// all over six waits), so a writer descheduled in the middle of
/// its write on a busy machine finishes first: CI once saw a 5 × 1 ms
/// reader call a winner's first record corrupt.
const READ_TRIES: u32 = 7;

/// FNV-1a, 64 bits: the record's checksum.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Verifies the `check=` line that ends `text`: it must be the last line
/// and match the text before it. The error says what is wrong.
pub(crate) fn verify_check(text: &str) -> Result<(), String> {
    let at = text
        .find("\ncheck=")
        .ok_or_else(|| "no check line".to_owned())?;
    let (body, check) = text.split_at(at + 1);
    let value = check["check=".len()..].strip_suffix('\n');
    let sum = value
        .filter(|v| v.len() == 16)
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .ok_or_else(|| format!("the check line {check:?} is torn or not the last line"))?;
    if sum != fnv1a(body.as_bytes()) {
        return Err("the checksum does not match: the record is torn or damaged".into());
    }
    Ok(())
}

/// Appends the `check=` line to `text` (which ends in a newline).
pub(crate) fn with_check(mut text: String) -> String {
    let sum = fnv1a(text.as_bytes());
    text.push_str(&format!("check={sum:016x}\n"));
    text
}

/// One epoch record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) epoch: Epoch,
    pub(crate) identity: Identity,
    pub(crate) pid: Option<u32>,
    pub(crate) since_unix_ms: Option<u64>,
    /// A revocation's record (`revoked=1`, ADR 0111): no term holds this
    /// epoch; `identity` is who revoked. Older versions ignore the key.
    pub(crate) revoked: bool,
    /// The term of `epoch` ended handing the name to a successor
    /// (`handover_*` keys, ADR 0112): no term holds the name; `identity`
    /// is who handed it over. Older versions ignore the keys (and read the
    /// record as the last term, which no one holds).
    pub(crate) handover: Option<HandoverFields>,
}

/// What a handover adds to the record of the term it ended (ADR 0112).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HandoverFields {
    /// The successor the name is reserved for (`handover_to`).
    pub(crate) to: Identity,
    /// How long only `to` may win, counted by each candidate from when it
    /// first read the handover (`handover_window_ms`).
    pub(crate) window: Duration,
    /// When, by the holder's wall clock (`handover_at_unix_ms`): display
    /// only, never a deadline for a claim.
    pub(crate) at_unix_ms: Option<u64>,
    /// The kernel boot id it was written in (`handover_boot`): a handover
    /// does not outlive the boot (every process it concerned is gone).
    pub(crate) boot: Option<String>,
}

impl HandoverFields {
    /// Whether the handover still counts for a reader in the boot `boot`:
    /// not if it was written in another boot (both known and different).
    pub(crate) fn of_this_boot(&self, boot: Option<&str>) -> bool {
        match (self.boot.as_deref(), boot) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    /// When the handover was written, by the holder's wall clock.
    pub(crate) fn at(&self) -> Option<SystemTime> {
        UNIX_EPOCH.checked_add(Duration::from_millis(self.at_unix_ms?))
    }
}

impl Record {
    /// When the term began, as the winner's wall clock recorded it in the
    /// lock hold that won it (the record is written once per term).
    pub(crate) fn since(&self) -> Option<SystemTime> {
        UNIX_EPOCH.checked_add(Duration::from_millis(self.since_unix_ms?))
    }

    /// The record's text, ended by its `check=` line.
    pub(crate) fn to_text(&self) -> String {
        with_check(self.fields())
    }

    /// The record's text padded to at least `len` bytes (and to a multiple
    /// of [`PADDED_LEN`]) by a `pad=` line, ended by its `check=` line.
    pub(crate) fn to_padded_text(&self, len: usize) -> String {
        let mut fields = self.fields();
        // "pad=" + dots + "\n", then "check=" + 16 hex + "\n".
        let fixed = fields.len() + "pad=\n".len() + "check=\n".len() + 16;
        let target = len.max(fixed).div_ceil(PADDED_LEN) * PADDED_LEN;
        fields.push_str("pad=");
        fields.extend(std::iter::repeat_n('.', target - fixed));
        fields.push('\n');
        let text = with_check(fields);
        debug_assert_eq!(text.len(), target);
        text
    }

    fn fields(&self) -> String {
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
        if self.revoked {
            s.push_str("revoked=1\n");
        }
        if let Some(h) = &self.handover {
            s.push_str(&format!(
                "handover_to={}\nhandover_window_ms={}\n",
                h.to,
                h.window.as_millis()
            ));
            if let Some(ms) = h.at_unix_ms {
                s.push_str(&format!("handover_at_unix_ms={ms}\n"));
            }
            if let Some(boot) = &h.boot {
                s.push_str(&format!("handover_boot={boot}\n"));
            }
        }
        s
    }

    /// The handover this record shows (ADR 0112), if it still counts in the
    /// boot `boot` (see [`HandoverFields::of_this_boot`]).
    pub(crate) fn reservation(&self, boot: Option<&str>) -> Option<&HandoverFields> {
        self.handover.as_ref().filter(|h| h.of_this_boot(boot))
    }

    /// The core's view of the handover this record shows, if it still
    /// counts in the boot `boot`.
    pub(crate) fn handover_shown(&self, boot: Option<&str>) -> Option<election_core::Handover> {
        let h = self.reservation(boot)?;
        Some(election_core::Handover::new(
            self.identity.clone(),
            h.to.clone(),
            self.epoch,
            h.window,
        ))
    }

    /// Parses a record; the error says what is wrong. A `check=` line
    /// must be the last line and match the text before it.
    pub(crate) fn parse(text: &str) -> Result<Record, String> {
        if text.contains("\ncheck=") {
            verify_check(text)?;
        }
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("the first line is not {HEADER:?}"));
        }
        let (mut epoch, mut identity, mut pid, mut since) = (None, None, None, None);
        let mut revoked = false;
        let (mut to, mut window, mut at, mut boot) = (None, None, None, None);
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
                "revoked" => revoked = value == "1",
                "handover_to" => {
                    to = Some(Identity::new(value).map_err(|e| format!("handover_to: {e}"))?)
                }
                "handover_window_ms" => {
                    let ms: u64 = value
                        .parse()
                        .map_err(|_| format!("bad handover_window_ms {value:?}"))?;
                    window = Some(Duration::from_millis(ms));
                }
                "handover_at_unix_ms" => {
                    at = Some(
                        value
                            .parse()
                            .map_err(|_| format!("bad handover_at_unix_ms {value:?}"))?,
                    )
                }
                "handover_boot" => boot = Some(value.to_owned()),
                // check: verified above; pad: filler; later versions may
                // add keys.
                _ => {}
            }
        }
        Ok(Record {
            epoch: epoch.ok_or("no epoch")?,
            identity: identity.ok_or("no identity")?,
            pid,
            since_unix_ms: since,
            revoked,
            handover: match (to, window) {
                (Some(to), Some(window)) => Some(HandoverFields {
                    to,
                    window,
                    at_unix_ms: at,
                    boot,
                }),
                (None, None) => None,
                _ => return Err("a handover needs both handover_to and handover_window_ms".into()),
            },
        })
    }

    /// Reads the record at `path`: `Ok(None)` if there is none yet.
    pub(crate) fn read(path: &Path) -> Result<Option<Record>, Error> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        Record::read_file(&file, path).map(|(r, _)| Some(r))
    }

    /// [`read`](Record::read) for a reader without the lock: a record that
    /// does not read is read again a few times (a winner may be rewriting
    /// it in place), then it is [`Error::CorruptEpoch`].
    pub(crate) fn read_unlocked(path: &Path) -> Result<Option<Record>, Error> {
        let mut tries = 0;
        loop {
            match Record::read(path) {
                Err(Error::CorruptEpoch { .. }) if tries + 1 < READ_TRIES => {
                    std::thread::sleep(Duration::from_millis(1 << tries));
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// Reads the record from the open `file` (at `path`, for errors) with
    /// `pread`s from offset 0: the record and the file's length.
    pub(crate) fn read_file(file: &File, path: &Path) -> Result<(Record, u64), Error> {
        let bytes = read_prefix(file, path, MAX_BYTES + 1)?;
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
            .map(|r| (r, text.len() as u64))
            .map_err(|detail| Error::CorruptEpoch {
                path: path.to_owned(),
                detail,
            })
    }

    /// Rewrites the record in place through the page cache, by the holder
    /// of the claim: one `pwrite` at offset 0 of the padded text, at least
    /// `old_len` bytes long so it covers the whole file; no fsync, no
    /// rename. `file` is the record open for writing (created if it was
    /// missing).
    pub(crate) fn write_in_place(
        &self,
        file: &File,
        path: &Path,
        old_len: u64,
    ) -> Result<(), Error> {
        if old_len > MAX_LEN {
            // Only after a power cut damaged it (it was not readable, and
            // the ceiling covers it): start the file again.
            file.set_len(0)
                .map_err(|e| Error::io("truncate", path, e))?;
        }
        let text = self.to_padded_text(
            usize::try_from(old_len)
                .ok()
                .filter(|&n| n <= MAX_BYTES)
                .unwrap_or(0),
        );
        file.write_all_at(text.as_bytes(), 0)
            .map_err(|e| Error::io("write", path, e))
    }

    /// Writes the record durably (see [`replace_durably`]).
    pub(crate) fn write_durably(&self, dir: &Path, path: &Path, tmp: &Path) -> Result<(), Error> {
        replace_durably(dir, path, tmp, self.to_text().as_bytes())
    }
}

/// Replaces `path` with `bytes` durably: temp file, fsync, rename, fsync of
/// `dir`. If a step before the rename fails (a full disk, say), the
/// temporary file is removed, so no failure leaves one behind; `path`
/// itself is untouched.
pub(crate) fn replace_durably(
    dir: &Path,
    path: &Path,
    tmp: &Path,
    bytes: &[u8],
) -> Result<(), Error> {
    let written = (|| {
        let mut f = File::create(tmp).map_err(|e| Error::io("create", tmp, e))?;
        f.write_all(bytes).map_err(|e| Error::io("write", tmp, e))?;
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

/// The first `limit` bytes of `file` (at `path`, for errors), or all of it
/// if it is shorter, read with `pread`s from offset 0 (an interrupted read
/// is retried). Reading `limit` = the largest valid size + 1 tells a file
/// that is too long.
pub(crate) fn read_prefix(file: &File, path: &Path, limit: usize) -> Result<Vec<u8>, Error> {
    let mut bytes = vec![0; limit];
    let mut len = 0;
    while len < bytes.len() {
        match file.read_at(&mut bytes[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", path, e)),
        }
    }
    bytes.truncate(len);
    Ok(bytes)
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
            revoked: false,
            handover: None,
        }
    }

    #[test]
    fn a_handover_round_trips_and_counts_only_in_its_boot() {
        let r = Record {
            handover: Some(HandoverFields {
                to: Identity::new("host/2").unwrap(),
                window: Duration::from_millis(15_000),
                at_unix_ms: Some(7),
                boot: Some("boot-a".into()),
            }),
            ..rec(42)
        };
        assert_eq!(Record::parse(&r.to_text()).unwrap(), r);
        assert_eq!(Record::parse(&r.to_padded_text(0)).unwrap(), r);
        let shown = r.handover_shown(Some("boot-a")).unwrap();
        assert_eq!(
            (shown.from.as_str(), shown.to.as_str(), shown.epoch.get()),
            ("host/1", "host/2", 42)
        );
        assert!(r.reservation(Some("boot-b")).is_none(), "another boot");
        assert!(r.reservation(None).is_some(), "no boot id: it counts");
        let half = "election-file/1\nepoch=3\nidentity=a\nhandover_to=b\n";
        assert!(
            Record::parse(half).is_err(),
            "a handover without its window"
        );
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
    fn a_rewrite_caught_half_way_is_refused_never_misread() {
        let (old, new) = (rec(99).to_padded_text(0), rec(100).to_padded_text(0));
        assert_eq!(old.len(), new.len());
        for cut in 1..new.len() {
            let seen = format!("{}{}", &new[..cut], &old[cut..]);
            if seen != old && seen != new {
                assert!(Record::parse(&seen).is_err(), "cut at {cut}: {seen:?}");
            }
        }
    }

    #[test]
    fn in_place_rewrites_never_shorten_the_file_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.epoch");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        let long = Record {
            identity: Identity::new("x".repeat(200)).unwrap(),
            ..rec(7)
        };
        long.write_in_place(&file, &path, 0).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(len % PADDED_LEN as u64, 0);
        assert_eq!(Record::read_file(&file, &path).unwrap(), (long, len));
        rec(8).write_in_place(&file, &path, len).unwrap();
        assert_eq!(Record::read_file(&file, &path).unwrap(), (rec(8), len));
        assert_eq!(Record::read_unlocked(&path).unwrap(), Some(rec(8)));
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
