//! Which filesystems the election directory may be on (ADR 0097): only
//! types known to be local and on a disk. Network filesystems are refused
//! (their locks are emulated, advisory across hosts, or lost on
//! reconnect), and so are memory filesystems that a reboot empties (the
//! epoch record would go with them, and fencing tokens backwards); an
//! unknown type is refused too (fail closed), each unless the options ask
//! for it by name.

use std::path::Path;

use crate::Error;

/// `statfs` magic numbers (`linux/magic.h`) of filesystems whose locks
/// cannot be trusted for leader election: their locks are emulated,
/// advisory across hosts, or lost on reconnect. Named in the refusal.
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
    (FUSE, "fuse"),
    (0x6E63_7066, "ncpfs"),
];

/// FUSE's magic number: a network filesystem unless `allow_fuse` (sshfs,
/// s3fs and gcsfuse are FUSE ones).
const FUSE: u64 = 0x6573_5546;

/// Filesystems in memory, emptied by a reboot (devtmpfs reports tmpfs's
/// number).
const VOLATILE_FILESYSTEMS: &[(u64, &str)] = &[(0x0102_1994, "tmpfs"), (0x8584_58F6, "ramfs")];

/// Filesystems known to be local to this host and kept on a disk: the
/// only ones accepted by default.
const LOCAL_FILESYSTEMS: &[(u64, &str)] = &[
    (0xEF53, "ext2/ext3/ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0xF2F5_2010, "f2fs"),
    (0x2FC1_2FC1, "zfs"),
    (0xCA45_1A4E, "bcachefs"),
    (0x794C_7630, "overlayfs"),
    (0x5265_4973, "reiserfs"),
    (0x3153_464A, "jfs"),
    (0x3434, "nilfs2"),
    (0x4D44, "vfat"),
    (0x2011_BAB0, "exfat"),
    (0x7366_746E, "ntfs3"),
    (0x5346_544E, "ntfs"),
    (0x482B, "hfsplus"),
    (0xF15F, "ecryptfs"),
];

/// Which refusals the options lift (from
/// [`FileOptions`](crate::FileOptions)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Allowed {
    /// `allow_fuse`: FUSE counts as local.
    pub(crate) fuse: bool,
    /// `allow_volatile`: tmpfs and ramfs are accepted.
    pub(crate) volatile: bool,
    /// `allow_unknown_filesystem`: a type on none of the lists is accepted.
    pub(crate) unknown: bool,
}

/// Why a filesystem type is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A network filesystem, by name.
    Network(&'static str),
    /// A filesystem in memory, by name.
    Volatile(&'static str),
    /// A type on none of the lists.
    Unknown,
}

fn named(list: &[(u64, &'static str)], fs_type: u64) -> Option<&'static str> {
    list.iter()
        .find(|(t, _)| *t == fs_type)
        .map(|(_, name)| *name)
}

/// The verdict on filesystem type `fs_type`: `None` to accept it. A pure
/// function of the magic number and the options.
pub(crate) fn refusal(fs_type: u64, allowed: Allowed) -> Option<Refusal> {
    if fs_type == FUSE && allowed.fuse {
        return None;
    }
    if let Some(name) = named(NETWORK_FILESYSTEMS, fs_type) {
        return Some(Refusal::Network(name));
    }
    if let Some(name) = named(VOLATILE_FILESYSTEMS, fs_type) {
        return (!allowed.volatile).then_some(Refusal::Volatile(name));
    }
    if named(LOCAL_FILESYSTEMS, fs_type).is_some() || allowed.unknown {
        return None;
    }
    Some(Refusal::Unknown)
}

/// Refuses `dir` unless its filesystem is accepted (see [`refusal`]).
pub(crate) fn check_local(dir: &Path, allowed: Allowed) -> Result<(), Error> {
    let st = nix::sys::statfs::statfs(dir)
        .map_err(|e| Error::io("statfs", dir, std::io::Error::from(e)))?;
    // The magic number's type differs between libcs; widen it.
    #[allow(
        clippy::unnecessary_cast,
        clippy::useless_conversion,
        clippy::cast_sign_loss,
        reason = "a bit pattern, kept to its low 32 bits; its type differs between libcs"
    )]
    let fs_type = (st.filesystem_type().0 as i64 as u64) & 0xFFFF_FFFF;
    let path = dir.to_owned();
    match refusal(fs_type, allowed) {
        None => Ok(()),
        Some(Refusal::Network(fs_name)) => Err(Error::NetworkFilesystem {
            path,
            fs_name,
            fs_type,
        }),
        Some(Refusal::Volatile(fs_name)) => Err(Error::VolatileFilesystem {
            path,
            fs_name,
            fs_type,
        }),
        Some(Refusal::Unknown) => Err(Error::UnknownFilesystem { path, fs_type }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: Allowed = Allowed {
        fuse: false,
        volatile: false,
        unknown: false,
    };
    const TMPFS: u64 = 0x0102_1994;
    const RAMFS: u64 = 0x8584_58F6;
    const SYSFS: u64 = 0x6265_6572;
    /// On no list (no filesystem of ours has it).
    const UNLISTED: u64 = 0x1234_5678;

    #[test]
    fn network_types_are_refused_whatever_else_is_allowed() {
        let all_but_fuse = Allowed {
            fuse: false,
            volatile: true,
            unknown: true,
        };
        for (fs_type, name) in [
            (0x6969, "nfs"),
            (0xFF53_4D42, "cifs"),
            (0xFE53_4D42, "smb2"),
            (0x00C3_6400, "ceph"),
            (FUSE, "fuse"),
        ] {
            assert_eq!(refusal(fs_type, NONE), Some(Refusal::Network(name)));
            assert_eq!(refusal(fs_type, all_but_fuse), Some(Refusal::Network(name)));
        }
        let fuse = Allowed { fuse: true, ..NONE };
        assert_eq!(refusal(FUSE, fuse), None, "allow_fuse accepts FUSE");
        assert_eq!(refusal(0x6969, fuse), Some(Refusal::Network("nfs")));
    }

    #[test]
    fn known_local_disk_types_are_accepted() {
        for fs_type in [
            0xEF53,
            0x5846_5342,
            0x9123_683E,
            0xF2F5_2010,
            0x2FC1_2FC1,
            0xCA45_1A4E,
            0x794C_7630,
            0x5265_4973,
            0x3153_464A,
            0x3434,
            0x4D44,
            0x2011_BAB0,
            0x7366_746E,
            0x482B,
        ] {
            assert_eq!(refusal(fs_type, NONE), None, "{fs_type:#x}");
        }
    }

    #[test]
    fn memory_types_are_refused_unless_allowed_by_name() {
        assert_eq!(refusal(TMPFS, NONE), Some(Refusal::Volatile("tmpfs")));
        assert_eq!(refusal(RAMFS, NONE), Some(Refusal::Volatile("ramfs")));
        let unknown = Allowed {
            unknown: true,
            ..NONE
        };
        assert_eq!(
            refusal(TMPFS, unknown),
            Some(Refusal::Volatile("tmpfs")),
            "tmpfs is known: allowing unknown types does not allow it"
        );
        let volatile = Allowed {
            volatile: true,
            ..NONE
        };
        assert_eq!(refusal(TMPFS, volatile), None);
        assert_eq!(refusal(RAMFS, volatile), None);
    }

    #[test]
    fn unknown_types_fail_closed_unless_allowed() {
        for fs_type in [SYSFS, UNLISTED, 0, 0xFFFF_FFFF] {
            assert_eq!(
                refusal(fs_type, NONE),
                Some(Refusal::Unknown),
                "{fs_type:#x}"
            );
            let volatile = Allowed {
                volatile: true,
                fuse: true,
                ..NONE
            };
            assert_eq!(refusal(fs_type, volatile), Some(Refusal::Unknown));
            let unknown = Allowed {
                unknown: true,
                ..NONE
            };
            assert_eq!(refusal(fs_type, unknown), None, "{fs_type:#x}");
        }
    }

    #[test]
    fn the_lists_do_not_overlap() {
        for (t, name) in LOCAL_FILESYSTEMS.iter().chain(VOLATILE_FILESYSTEMS) {
            assert!(named(NETWORK_FILESYSTEMS, *t).is_none(), "{name}");
        }
        for (t, name) in VOLATILE_FILESYSTEMS {
            assert!(named(LOCAL_FILESYSTEMS, *t).is_none(), "{name}");
        }
    }

    #[test]
    fn the_build_directory_is_local() {
        // The build's own target directory is on a disk (ext4 here, and on CI).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        check_local(dir, Allowed::default()).expect("the source tree is on a local disk");
    }
}
