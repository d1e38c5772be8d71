//! Errors of the file backend.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use election_core::{Class, Classify, ConfigError, Disposition, ElectionName, Epoch};

/// What can go wrong with the file backend, grouped by what the caller
/// should do: fix the configuration (`NetworkFilesystem`,
/// `VolatileFilesystem`, `UnknownFilesystem`, `NotADirectory`,
/// `PermissionDenied`, `Unusable`, `Config`), repair the stored state
/// (`CorruptEpoch`, with
/// [`FileElection::repair_epoch`](crate::FileElection::repair_epoch)),
/// give a repair what it needs (`ClaimHeld`, `EpochTooLow`), or retry later
/// (`NoSpace`, `Io`).
///
/// Inside a campaign these reach the caller as the `source` of an
/// [`election_core::Error`]: `Config` for the first group, `Corrupt` for
/// the second, `Unavailable` for the third.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The directory is on a network filesystem, where OS locks are not
    /// reliable. Use a local directory.
    NetworkFilesystem {
        /// The directory.
        path: PathBuf,
        /// The filesystem's name.
        fs_name: &'static str,
        /// The filesystem's magic number from `statfs`.
        fs_type: u64,
    },
    /// The directory is on a filesystem in memory (tmpfs, ramfs) that a
    /// reboot empties: the epoch record and its ceiling would go with it,
    /// epochs would start again at 2 and fencing tokens go backwards. Use a
    /// directory on a disk, or accept it by name
    /// ([`FileOptions::allow_volatile`](crate::FileOptions::allow_volatile))
    /// where nothing fenced outlives a reboot.
    VolatileFilesystem {
        /// The directory.
        path: PathBuf,
        /// The filesystem's name.
        fs_name: &'static str,
        /// The filesystem's magic number from `statfs`.
        fs_type: u64,
    },
    /// The directory is on a filesystem of a type not known to be local:
    /// the check fails closed, as a filesystem whose locks are
    /// client-local (BeeGFS by default, for one) lets two hosts both hold
    /// the lock. Use a directory on a local filesystem, or accept it by
    /// name
    /// ([`FileOptions::allow_unknown_filesystem`](crate::FileOptions::allow_unknown_filesystem))
    /// if its locks hold across every host that can reach it.
    UnknownFilesystem {
        /// The directory.
        path: PathBuf,
        /// The filesystem's magic number from `statfs` (as in
        /// `linux/magic.h`; `stat -f -c %t DIR` shows it in hex).
        fs_type: u64,
    },
    /// The path exists but is not a directory.
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// The process may not create, read or write a file it needs.
    PermissionDenied {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The epoch record cannot be read, or it is missing although the claim
    /// file shows that this election has had terms. No term is handed out
    /// until an operator sets it, with
    /// [`FileElection::repair_epoch`](crate::FileElection::repair_epoch)
    /// (`elect repair-epoch`), to an epoch at least as high as any fencing
    /// token a resource of this election has seen. Never delete the record:
    /// epochs would start again at 2 and tokens would go backwards.
    CorruptEpoch {
        /// The epoch file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A repair was refused because a candidate holds the claim: repair
    /// only while no process of this election runs.
    ClaimHeld {
        /// The claim file.
        path: PathBuf,
    },
    /// A repair was refused because the epoch given is lower than one that
    /// may have been handed out: one the record (or what is left of it)
    /// still shows, or, when the record cannot be trusted (damaged,
    /// missing, or written before an OS restart), the epoch ceiling (ADR
    /// 0048). Tokens would go back, and epochs repeat.
    EpochTooLow {
        /// The file that shows it: the epoch record or the epoch ceiling.
        path: PathBuf,
        /// The epoch the operator gave.
        given: Epoch,
        /// The lowest epoch the repair accepts.
        highest_seen: Epoch,
    },
    /// The filesystem is full (`ENOSPC`) or the user's quota is used up
    /// (`EDQUOT`). Retrying helps once space is freed; nothing was won (a
    /// temporary file written before the failure is removed).
    NoSpace {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A file of the election cannot be used, and retrying will not change
    /// that: a directory where a file belongs (`EISDIR`), a write past the
    /// process's file size limit (`EFBIG`, `ulimit -f`), a symlink loop or
    /// a name too long. Fix the path or the limit.
    Unusable {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Another I/O error; retrying may help.
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A bad name, identity or setting.
    Config(ConfigError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NetworkFilesystem {
                path,
                fs_name,
                fs_type,
            } => write!(
                f,
                "{} is on a network filesystem ({fs_name}, type {fs_type:#x}); use a local directory",
                path.display()
            ),
            Error::VolatileFilesystem {
                path,
                fs_name,
                fs_type,
            } => write!(
                f,
                "{} is on {fs_name} (type {fs_type:#x}), which a reboot empties: the epoch record \
                 would go with it and fencing tokens go backwards; use a directory on a disk, or \
                 accept it by name (allow_volatile) only if nothing fenced outlives a reboot",
                path.display()
            ),
            Error::UnknownFilesystem { path, fs_type } => write!(
                f,
                "{} is on a filesystem of type {fs_type:#x}, not known to be local; refused, as \
                 on one whose locks are client-local (such as BeeGFS by default) two hosts could \
                 both hold the lock: use a directory on a local filesystem, or accept it by name \
                 (allow_unknown_filesystem) only if its locks hold across every host that can \
                 reach it",
                path.display()
            ),
            Error::NotADirectory { path } => write!(f, "{} is not a directory", path.display()),
            Error::PermissionDenied { path, .. } => write!(
                f,
                "permission denied: {}; give this process read and write access",
                path.display()
            ),
            Error::CorruptEpoch { path, detail } => write!(
                f,
                "corrupt epoch record {}: {detail}; do not delete it: set it with `elect repair-epoch` \
                 (FileElection::repair_epoch) to an epoch at least as high as any token your resources hold",
                path.display()
            ),
            Error::ClaimHeld { path } => write!(
                f,
                "{} is locked by a running candidate; stop it before repairing the epoch record",
                path.display()
            ),
            Error::EpochTooLow {
                path,
                given,
                highest_seen,
            } => write!(
                f,
                "refusing to repair with epoch {given}: {} shows that epochs up to {highest_seen} \
                 may have been handed out; give at least that",
                path.display()
            ),
            Error::NoSpace { op, path, .. } => write!(
                f,
                "{op} {} failed: no space left (the filesystem or the quota is full)",
                path.display()
            ),
            Error::Unusable { op, path, source } => write!(
                f,
                "{op} {} failed: {source}; retrying will not help",
                path.display()
            ),
            Error::Io { op, path, source } => write!(f, "{op} {} failed: {source}", path.display()),
            Error::Config(e) => e.fmt(f),
        }
    }
}

/// The OS error is a `source` where the message names the failure in its
/// own words (`PermissionDenied`, `NoSpace`); where the message quotes it
/// (`Io`, `Unusable`), `source()` goes on below it, so a chain printer
/// shows each message once (ADR 0063). The OS error stays in the field.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::PermissionDenied { source, .. } | Error::NoSpace { source, .. } => Some(source),
            Error::Unusable { source, .. } | Error::Io { source, .. } => source.source(),
            Error::Config(e) => e.source(),
            Error::NetworkFilesystem { .. }
            | Error::VolatileFilesystem { .. }
            | Error::UnknownFilesystem { .. }
            | Error::NotADirectory { .. }
            | Error::CorruptEpoch { .. }
            | Error::ClaimHeld { .. }
            | Error::EpochTooLow { .. } => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

/// What to do, with the fix named in the terms of a backend URL
/// (`file:///dir?volatile_ok=1`) and of `elect`, this backend's tool.
/// A damaged epoch record ([`Error::CorruptEpoch`]) is
/// [`Disposition::Corrupt`] without a hint of its own: the tool names its
/// repair.
impl Classify for Error {
    fn class(&self) -> Class {
        let permanent = |hint: String| Class::new(Disposition::Permanent).hint(hint);
        match self {
            Error::NoSpace { path, .. } => Class::new(Disposition::Transient).hint(format!(
                "the filesystem of {} is full (or the quota is used up): free space, then try again",
                path.display()
            )),
            Error::Io { .. } => Class::new(Disposition::Transient)
                .hint("an I/O error on the election directory: check the disk, then try again"),
            Error::Unusable { path, source, .. } if source.raw_os_error() == Some(libc::EFBIG) => {
                permanent(format!(
                    "writing {} went past the file size limit: raise it (ulimit -f) in the shell \
                     that starts elect",
                    path.display()
                ))
            }
            Error::Unusable { path, source, .. } if source.raw_os_error() == Some(libc::EISDIR) => {
                permanent(format!(
                    "{} is a directory where elect keeps a file: move it out of the way (an \
                     .epoch record must never be deleted: if one is lost, use elect repair-epoch)",
                    path.display()
                ))
            }
            Error::Unusable { path, .. } => permanent(format!(
                "elect cannot use {}: fix the path (a symlink loop or a name too long)",
                path.display()
            )),
            Error::NotADirectory { path } => permanent(format!(
                "{} is not a directory: point --backend at a directory (file:///dir)",
                path.display()
            )),
            Error::PermissionDenied { path, .. } => permanent(format!(
                "give this user read and write access to {}, or point --backend at a directory \
                 it can write",
                path.display()
            )),
            Error::NetworkFilesystem { .. } => permanent(
                "use a directory on a local filesystem; for many hosts use postgres:// or nats:// (SQLite, like this backend, needs one host's local disk)"
                    .to_owned(),
            ),
            Error::VolatileFilesystem { path, .. } => permanent(format!(
                "epochs must outlive a reboot: point --backend (or XDG_STATE_HOME, for the \
                 default directory) at a directory on a disk; only if nothing the tokens fence \
                 outlives a reboot either, ask for this one by name: --backend \
                 'file://{}?volatile_ok=1'",
                path.display()
            )),
            Error::UnknownFilesystem { path, .. } => permanent(format!(
                "use a directory on a local filesystem (ext4, xfs, btrfs, zfs, ...); only if this \
                 filesystem's locks hold across every host that can reach it, ask for it by \
                 name: --backend 'file://{}?unknown_fs_ok=1'",
                path.display()
            )),
            Error::CorruptEpoch { .. } => Class::new(Disposition::Corrupt),
            Error::ClaimHeld { .. } => Class::new(Disposition::Transient)
                .hint("stop every process of this election first, then repair"),
            Error::EpochTooLow { .. } => permanent(
                "give an epoch at least the one named above, and at least as high as any token \
                 your resources hold"
                    .to_owned(),
            ),
            Error::Config(_) => Class::new(Disposition::Permanent),
        }
    }
}

impl Error {
    /// Classifies an I/O error on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::PermissionDenied
            || source.raw_os_error() == Some(libc::EROFS)
        {
            Error::PermissionDenied { path, source }
        } else if source.raw_os_error() == Some(libc::ENOTDIR) {
            Error::NotADirectory { path }
        } else if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            Error::NoSpace { op, path, source }
        } else if matches!(
            source.raw_os_error(),
            Some(libc::EISDIR | libc::EFBIG | libc::ELOOP | libc::ENAMETOOLONG)
        ) {
            Error::Unusable { op, path, source }
        } else {
            Error::Io { op, path, source }
        }
    }

    /// This error as the core's error, grouped by what the caller should do.
    ///
    /// ```
    /// use election_core::ElectionName;
    /// use election_file::FileElection;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// # std::fs::write(tmp.path().join("jobs.epoch"), "not an epoch record")?;
    /// let name = ElectionName::new("jobs")?;
    /// let err = election.last_term(name.as_str()).expect_err("a damaged record");
    /// // As the core's error: `Corrupt`, which no retry fixes (repair the record).
    /// let core = err.into_core(&name);
    /// assert!(matches!(core, election_core::Error::Corrupt { .. }));
    /// assert!(core.is_permanent());
    /// # Ok(()) }
    /// ```
    pub fn into_core(self, name: &ElectionName) -> election_core::Error {
        match self {
            Error::Config(c) => election_core::Error::Config(c),
            e @ (Error::NetworkFilesystem { .. }
            | Error::VolatileFilesystem { .. }
            | Error::UnknownFilesystem { .. }
            | Error::NotADirectory { .. }
            | Error::PermissionDenied { .. }
            | Error::Unusable { .. }) => election_core::Error::Config(ConfigError::Location {
                reason: e.to_string(),
                source: Some(Arc::new(e)),
            }),
            e @ (Error::CorruptEpoch { .. } | Error::EpochTooLow { .. }) => {
                election_core::Error::corrupt(name, e)
            }
            e => election_core::Error::unavailable(name, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 43, item 9: a network filesystem's hint sends many hosts to a
    /// backend made for them, never to SQLite (one host's disk too).
    #[test]
    fn a_network_filesystem_is_pointed_at_a_backend_for_many_hosts() {
        let e = Error::NetworkFilesystem {
            path: PathBuf::from("/mnt/nfs"),
            fs_name: "nfs",
            fs_type: 0x6969,
        };
        let hint = e.class().hint.unwrap_or_default();
        assert!(
            hint.contains("postgres://") && hint.contains("nats://"),
            "{hint}"
        );
        assert!(!hint.contains("use sqlite://"), "{hint}");
    }

    #[test]
    fn io_errors_are_classified() {
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(matches!(
            Error::io("open", "/x", denied),
            Error::PermissionDenied { .. }
        ));
        let rofs = io::Error::from_raw_os_error(libc::EROFS);
        assert!(matches!(
            Error::io("open", "/x", rofs),
            Error::PermissionDenied { .. }
        ));
        let notdir = io::Error::from_raw_os_error(libc::ENOTDIR);
        assert!(matches!(
            Error::io("open", "/x", notdir),
            Error::NotADirectory { .. }
        ));
        let other = io::Error::from_raw_os_error(libc::EIO);
        assert!(matches!(Error::io("open", "/x", other), Error::Io { .. }));
        for full in [libc::ENOSPC, libc::EDQUOT] {
            let e = Error::io("write", "/x", io::Error::from_raw_os_error(full));
            assert!(matches!(e, Error::NoSpace { .. }), "{e:?}");
        }
        for permanent in [libc::EISDIR, libc::EFBIG, libc::ELOOP, libc::ENAMETOOLONG] {
            let e = Error::io("read", "/x", io::Error::from_raw_os_error(permanent));
            assert!(matches!(e, Error::Unusable { .. }), "{e:?}");
        }
    }

    #[test]
    fn core_grouping() {
        let name = ElectionName::new("n").unwrap();
        let e = Error::CorruptEpoch {
            path: "/e".into(),
            detail: "x".into(),
        }
        .into_core(&name);
        assert!(matches!(e, election_core::Error::Corrupt { .. }));
        let e = Error::NotADirectory { path: "/e".into() }.into_core(&name);
        assert!(matches!(e, election_core::Error::Config(_)));
        for refused in [
            Error::VolatileFilesystem {
                path: "/e".into(),
                fs_name: "tmpfs",
                fs_type: 0x0102_1994,
            },
            Error::UnknownFilesystem {
                path: "/e".into(),
                fs_type: 0x1234_5678,
            },
        ] {
            let core = refused.into_core(&name);
            assert!(matches!(core, election_core::Error::Config(_)), "{core:?}");
            assert!(core.is_permanent());
        }
        let e = Error::Io {
            op: "fsync",
            path: "/e".into(),
            source: io::Error::other("x"),
        }
        .into_core(&name);
        assert!(matches!(e, election_core::Error::Unavailable { .. }));
        let full = Error::io("write", "/e", io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(matches!(
            full.into_core(&name),
            election_core::Error::Unavailable { .. }
        ));
        let dir = Error::io("read", "/e", io::Error::from_raw_os_error(libc::EISDIR));
        assert!(matches!(
            dir.into_core(&name),
            election_core::Error::Config(_)
        ));
    }
}
