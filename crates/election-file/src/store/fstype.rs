//! Refusing network filesystems, where OS file locks are unreliable.

use std::path::Path;

use crate::Error;

/// Filesystems whose locks cannot be trusted for leader election: their
/// locks are emulated, advisory across hosts, or lost on reconnect.
const NETWORK_FILESYSTEMS: &[(u64, &str)] = &[
    (0x6969, "nfs"),
    (0x517B, "smb"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x0102_1997, "9p"),
    (0x5346_414F, "afs"),
    (0x6B41_4653, "kafs"),
    (0x7375_7245, "coda"),
    (0x00C3_6400, "ceph"),
    (0x0BD0_0BD0, "lustre"),
    (0x6573_5546, "fuse"),
    (0x6E63_7066, "ncpfs"),
];

/// The name of a network filesystem type, or `None` for a local one.
/// FUSE counts as network (sshfs, s3fs, gcsfuse are FUSE) unless `allow_fuse`.
pub(crate) fn network_filesystem(fs_type: u64, allow_fuse: bool) -> Option<&'static str> {
    NETWORK_FILESYSTEMS
        .iter()
        .find(|(t, name)| *t == fs_type && !(allow_fuse && *name == "fuse"))
        .map(|(_, name)| *name)
}

/// Refuses `dir` if it is on a network filesystem.
pub(crate) fn check_local(dir: &Path, allow_fuse: bool) -> Result<(), Error> {
    let st = nix::sys::statfs::statfs(dir)
        .map_err(|e| Error::io("statfs", dir, std::io::Error::from(e)))?;
    // The magic number's type differs between libcs; widen it.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let fs_type = (st.filesystem_type().0 as i64 as u64) & 0xFFFF_FFFF;
    match network_filesystem(fs_type, allow_fuse) {
        Some(fs_name) => Err(Error::NetworkFilesystem {
            path: dir.to_owned(),
            fs_name,
            fs_type,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_types_are_refused_and_local_ones_kept() {
        assert_eq!(network_filesystem(0x6969, false), Some("nfs"));
        assert_eq!(network_filesystem(0xFF53_4D42, false), Some("cifs"));
        assert_eq!(network_filesystem(0xFE53_4D42, false), Some("smb2"));
        assert_eq!(network_filesystem(0x6573_5546, false), Some("fuse"));
        assert_eq!(network_filesystem(0x6573_5546, true), None);
        assert_eq!(network_filesystem(0xEF53, false), None, "ext4 is local");
        assert_eq!(
            network_filesystem(0x0102_1994, false),
            None,
            "tmpfs is local"
        );
        assert_eq!(network_filesystem(0x5846_5342, false), None, "xfs is local");
    }

    #[test]
    fn the_temp_directory_is_local() {
        let dir = std::env::temp_dir();
        check_local(&dir, false).expect("temp dir is local");
    }
}
