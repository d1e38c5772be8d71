//! The epoch ceiling: a durable bound on every epoch handed out, so the
//! per-term epoch record can be written through the page cache (ADR 0025).
//!
//! ```text
//! election-file-ceiling/1
//! ceiling=1066
//! boot_id=0d4c2a3e-1b7f-4e8a-9c1d-5f2e6b7a8c9d
//! ```
//!
//! Written only by the holder of the claim, durably (temporary file, fsync,
//! rename, fsync of the directory), and before any epoch above the old
//! ceiling is handed out. So after a power cut, when the epoch record may
//! be stale, torn or missing, every epoch ever handed out is at most the
//! ceiling on disk. The boot id is the kernel's
//! (`/proc/sys/kernel/random/boot_id`) when the ceiling was written: while
//! it is still the running kernel's, no page cache was lost since, and the
//! epoch record is exact.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::OnceLock;

use election_core::Epoch;

use crate::Error;
use crate::store::record::replace_durably;

const HEADER: &str = "election-file-ceiling/1";
const MAX_LEN: u64 = 4096;

/// How many epochs one durable write reserves.
pub(crate) const EPOCH_BLOCK: u64 = 1024;

/// The kernel's boot id, read once per process: `None` if it cannot be
/// read (then every term writes its ceiling durably, as if blocks held one
/// epoch).
pub(crate) fn boot_id() -> Option<&'static str> {
    static BOOT_ID: OnceLock<Option<String>> = OnceLock::new();
    BOOT_ID
        .get_or_init(|| {
            let read = std::fs::read_to_string("/proc/sys/kernel/random/boot_id");
            match read.map(|s| s.trim().to_owned()) {
                Ok(id) if valid_boot_id(&id) => Some(id),
                other => {
                    tracing::warn!(
                        ?other,
                        "no kernel boot id: every term of the file backend writes its epoch \
                         ceiling durably (two fsyncs per term)"
                    );
                    None
                }
            }
        })
        .as_deref()
}

/// A boot id as the kernel prints it: a UUID, so 36 characters of hex
/// digits and dashes. Anything else is not trusted.
fn valid_boot_id(id: &str) -> bool {
    id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// One ceiling record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ceiling {
    /// No epoch above this was handed out.
    pub(crate) ceiling: Epoch,
    /// The boot id of the kernel that wrote it, if it had one.
    pub(crate) boot_id: Option<String>,
}

impl Ceiling {
    pub(crate) fn to_text(&self) -> String {
        let mut s = format!("{HEADER}\nceiling={}\n", self.ceiling);
        if let Some(b) = &self.boot_id {
            s.push_str(&format!("boot_id={b}\n"));
        }
        s
    }

    /// Parses a ceiling; the error says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Ceiling, String> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("the first line is not {HEADER:?}"));
        }
        let (mut ceiling, mut boot_id) = (None, None);
        for line in lines {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line:?} is not key=value"))?;
            match key {
                "ceiling" => {
                    let e: Epoch = value.parse().map_err(|e| format!("{e}"))?;
                    if ceiling.replace(e).is_some() {
                        return Err("ceiling appears twice".into());
                    }
                }
                "boot_id" => {
                    if !valid_boot_id(value) {
                        return Err(format!("bad boot_id {value:?}"));
                    }
                    if boot_id.replace(value.to_owned()).is_some() {
                        return Err("boot_id appears twice".into());
                    }
                }
                _ => {} // later versions may add keys
            }
        }
        Ok(Ceiling {
            ceiling: ceiling.ok_or("no ceiling")?,
            boot_id,
        })
    }

    /// True if the page cache cannot have been lost since this ceiling was
    /// written: it names a boot id, and it is `boot`.
    pub(crate) fn same_boot(&self, boot: Option<&str>) -> bool {
        matches!((self.boot_id.as_deref(), boot), (Some(a), Some(b)) if a == b)
    }

    /// Reads the ceiling at `path`: `Ok(None)` if there is none.
    pub(crate) fn read(path: &Path) -> Result<Option<Ceiling>, Error> {
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
        let corrupt = |detail: String| Error::CorruptEpoch {
            path: path.to_owned(),
            detail,
        };
        if bytes.len() as u64 > MAX_LEN {
            return Err(corrupt(format!(
                "more than {MAX_LEN} bytes is too large for an epoch ceiling"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".into()))?;
        Ceiling::parse(&text).map(Some).map_err(corrupt)
    }

    /// Writes the ceiling durably (see [`replace_durably`]).
    pub(crate) fn write_durably(&self, dir: &Path, path: &Path, tmp: &Path) -> Result<(), Error> {
        replace_durably(dir, path, tmp, self.to_text().as_bytes())
    }
}

/// The ceiling to reserve for a term with `epoch`: `epoch + block - 1`
/// (at most [`Epoch::MAX`]), or `epoch` itself without a boot id.
pub(crate) fn reserve(epoch: Epoch, block: u64, boot: Option<&str>) -> Ceiling {
    let top = if boot.is_some() {
        epoch
            .get()
            .saturating_add(block.saturating_sub(1))
            .min(Epoch::MAX.get())
    } else {
        epoch.get()
    };
    Ceiling {
        ceiling: Epoch::new(top).unwrap_or(epoch),
        boot_id: boot.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BOOT: &str = "0d4c2a3e-1b7f-4e8a-9c1d-5f2e6b7a8c9d";

    #[test]
    fn round_trips_and_refuses_damage() {
        for c in [
            Ceiling {
                ceiling: Epoch::new(7).unwrap(),
                boot_id: Some(BOOT.into()),
            },
            Ceiling {
                ceiling: Epoch::MAX,
                boot_id: None,
            },
        ] {
            assert_eq!(Ceiling::parse(&c.to_text()).unwrap(), c);
        }
        for bad in [
            "",
            "ceiling=3\n",
            "election-file-ceiling/1\n",
            "election-file-ceiling/1\nceiling=0\n",
            "election-file-ceiling/1\nceiling=3\nceiling=4\n",
            "election-file-ceiling/1\nceiling=3\nboot_id=x\n",
            "election-file-ceiling/1\nceil",
        ] {
            assert!(Ceiling::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn the_running_kernel_has_a_boot_id() {
        // Linux always has one; the fallback is for sandboxes without /proc.
        assert!(boot_id().is_some_and(valid_boot_id));
    }

    #[test]
    fn reserving_without_a_boot_id_reserves_one_epoch() {
        let e = Epoch::new(10).unwrap();
        assert_eq!(reserve(e, 1024, Some(BOOT)).ceiling.get(), 1033);
        assert_eq!(reserve(e, 1024, None).ceiling, e);
        assert_eq!(reserve(Epoch::MAX, 1024, Some(BOOT)).ceiling, Epoch::MAX);
        let c = reserve(e, 1024, None);
        assert!(!c.same_boot(None), "no boot id is never the same boot");
        assert!(!c.same_boot(Some(BOOT)));
        assert!(reserve(e, 1024, Some(BOOT)).same_boot(Some(BOOT)));
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in ".{0,200}") {
            let _ = Ceiling::parse(&text);
        }
    }
}
