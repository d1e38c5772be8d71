//! Facts about the run for the report header: date, kernel, filesystem.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::sys::statfs::{self, statfs};

/// The current UTC time as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(i64::MAX));
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).expect("a day of the month");
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).expect("a month");
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// The output of `uname -r`.
pub(crate) fn kernel_release() -> String {
    Command::new("uname")
        .arg("-r")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown (`uname -r` failed)".into())
}

/// The filesystem type of `dir`: the name from the mount table (which tells
/// ext4 from ext2/3, that share a magic number) and the `statfs` magic.
/// The flag is true for a memory-backed filesystem (tmpfs, ramfs), where
/// fsync costs nothing and the file rows do not mean what they say.
#[allow(
    clippy::unnecessary_cast,
    clippy::cast_sign_loss,
    reason = "the magic is a bit pattern; its type differs between targets"
)]
pub(crate) fn filesystem(dir: &Path) -> (String, bool) {
    let magic = match statfs(dir) {
        Ok(st) => st.filesystem_type(),
        Err(e) => return (format!("unknown (statfs failed: {e})"), false),
    };
    let in_memory = magic == statfs::TMPFS_MAGIC || magic.0 as u64 == 0x8584_58f6; // ramfs
    let name = mount_fstype(dir)
        .or_else(|| magic_name(magic).map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    (
        format!("{name} (statfs f_type {:#x})", magic.0 as u64),
        in_memory,
    )
}

/// The type of the mount that holds `dir`, from `/proc/self/mounts`: the
/// longest mount point that is a prefix of it (the last one listed on a
/// tie, as later mounts hide earlier ones).
fn mount_fstype(dir: &Path) -> Option<String> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_dev), Some(point), Some(fstype)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let point = point.replace("\\040", " ");
        if dir.starts_with(&point) && best.as_ref().is_none_or(|(len, _)| point.len() >= *len) {
            best = Some((point.len(), fstype.to_owned()));
        }
    }
    best.map(|(_, t)| t)
}

fn magic_name(magic: statfs::FsType) -> Option<&'static str> {
    let known = [
        (statfs::EXT4_SUPER_MAGIC, "ext2/ext3/ext4"),
        (statfs::XFS_SUPER_MAGIC, "xfs"),
        (statfs::BTRFS_SUPER_MAGIC, "btrfs"),
        (statfs::TMPFS_MAGIC, "tmpfs"),
        (statfs::OVERLAYFS_SUPER_MAGIC, "overlayfs"),
        (statfs::F2FS_SUPER_MAGIC, "f2fs"),
        (statfs::NFS_SUPER_MAGIC, "nfs"),
        (statfs::FUSE_SUPER_MAGIC, "fuse"),
    ];
    known.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
    }

    #[test]
    fn names_the_filesystem_of_a_real_dir() {
        let (name, _) = filesystem(Path::new(env!("CARGO_MANIFEST_DIR")));
        assert!(name.contains("statfs f_type 0x"), "{name}");
    }
}
