//! One database, one name (ADR 0046). SQLite names a database's `-wal`
//! and `-shm` files after the path it was given. Two names of one inode
//! whose `-wal` names differ get two WALs and two sets of WAL-index locks:
//! their write transactions do not exclude each other and neither sees the
//! other's commits, so candidates on the two names can both be elected,
//! with the same epoch. Two ways give a file such a second name:
//!
//! - a second hard link (`st_nlink > 1`);
//! - a mount of the file on its own (a bind mount of the file, as `docker
//!   run -v /srv/app.db:/data/app.db` makes): the path opened is the root
//!   of a mount (`STATX_ATTR_MOUNT_ROOT`; on kernels before 5.8, a line of
//!   `/proc/self/mountinfo` whose mount point is the path). The other name
//!   (the host's path) may not show anything in its own mount namespace:
//!   the side on the file's own mount refuses.
//!
//! Symlinks are no second name: SQLite resolves them (every component)
//! before naming the `-wal` file. Nor is a directory mounted twice: the
//! `-wal` beside each name is then one file too.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::Error;

/// What [`look`] saw of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    /// Hard links (`st_nlink`).
    pub(crate) links: u64,
    /// The path is the root of a mount of its own.
    pub(crate) own_mount: bool,
}

/// The file at `path` (symlinks followed): its identity, its hard links,
/// and whether the path is a mount of its own.
pub(crate) fn look(path: &Path) -> io::Result<Seen> {
    match statx(path) {
        Ok(Some(seen)) => Ok(seen),
        // The kernel does not say whether the path is a mount root (before
        // 5.8), or statx is not allowed (an old seccomp profile).
        Ok(None) | Err(_) => {
            let m = std::fs::metadata(path)?;
            Ok(Seen {
                dev: m.dev(),
                ino: m.ino(),
                links: m.nlink(),
                own_mount: mounted_on_in_mountinfo(path),
            })
        }
    }
}

/// `Err(`[`Error::SecondName`]`)` if `seen` (of `path`) shows a second
/// name.
pub(crate) fn refuse_second_names(path: &Path, seen: &Seen) -> Result<(), Error> {
    if seen.links > 1 || seen.own_mount {
        return Err(Error::SecondName {
            path: path.to_owned(),
            hard_links: seen.links,
            own_mount: seen.own_mount,
        });
    }
    Ok(())
}

/// The file at `path`, refused if it has a second name
/// ([`Error::SecondName`]); [`Error::PathUnresolvable`] if it cannot be
/// looked at.
pub(crate) fn one_name(path: &Path) -> Result<Seen, Error> {
    let seen = look(path).map_err(|source| Error::PathUnresolvable {
        path: path.to_owned(),
        source,
    })?;
    refuse_second_names(path, &seen)?;
    Ok(seen)
}

/// The file a pool is configured to open, refused if it has a second name
/// (before any statement runs through it: SQLite may fail to read a
/// database whose other name has the WAL); `Ok` for a pool with no file or
/// whose file does not exist yet.
pub(crate) fn check_pool(pool: &sqlx::SqlitePool) -> Result<(), Error> {
    let options = pool.connect_options();
    let path = options.get_filename();
    if path.as_os_str().is_empty() || !path.exists() {
        return Ok(());
    }
    one_name(path).map(|_| ())
}

/// `statx(2)` of `path`; `Ok(None)` if the kernel does not report
/// `STATX_ATTR_MOUNT_ROOT`.
fn statx(path: &Path) -> io::Result<Option<Seen>> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call,
    // and `buf` points to writable memory of the size of `struct statx`,
    // which the kernel fills on success (zeroed before, so every field is
    // initialised either way).
    #[allow(unsafe_code)]
    let (rc, buf) = unsafe {
        let rc = libc::statx(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            libc::AT_STATX_SYNC_AS_STAT,
            libc::STATX_TYPE | libc::STATX_INO | libc::STATX_NLINK,
            buf.as_mut_ptr(),
        );
        (rc, buf.assume_init())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mount_root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if buf.stx_attributes_mask & mount_root == 0 {
        return Ok(None);
    }
    Ok(Some(Seen {
        dev: libc::makedev(buf.stx_dev_major, buf.stx_dev_minor),
        ino: buf.stx_ino,
        links: u64::from(buf.stx_nlink),
        own_mount: buf.stx_attributes & mount_root != 0,
    }))
}

/// True if a line of `/proc/self/mountinfo` has `path` (resolved) as its
/// mount point; false if it has none, or where either cannot be read.
fn mounted_on_in_mountinfo(path: &Path) -> bool {
    let Ok(path) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(info) = std::fs::read("/proc/self/mountinfo") else {
        return false;
    };
    let path = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    info.split(|b| *b == b'\n')
        .filter_map(|line| line.split(|b| *b == b' ').nth(4))
        .any(|mount_point| unescape(mount_point) == path)
}

/// A mount point of `mountinfo` with its octal escapes (`\040` for a space,
/// ...) decoded.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\'
            && let Some(octal) = field.get(i + 1..i + 4)
            && octal.iter().all(|d| (b'0'..=b'7').contains(d))
        {
            out.push(
                octal
                    .iter()
                    .fold(0u8, |n, d| n.wrapping_mul(8).wrapping_add(d - b'0')),
            );
            i += 4;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_link_is_one_name_and_a_second_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("app.db");
        std::fs::write(&db, b"").expect("file");
        let seen = one_name(&db).expect("one name");
        assert_eq!(seen.links, 1);
        assert!(!seen.own_mount);
        let m = std::fs::metadata(&db).expect("stat");
        assert_eq!((seen.dev, seen.ino), (m.dev(), m.ino()));
        std::fs::hard_link(&db, dir.path().join("link.db")).expect("link");
        match one_name(&db) {
            Err(e @ Error::SecondName { hard_links: 2, .. }) => {
                assert!(e.to_string().contains("remove the second hard link"), "{e}");
            }
            other => panic!("expected SecondName, got {other:?}"),
        }
    }

    #[test]
    fn a_symlink_is_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("app.db");
        std::fs::write(&db, b"").expect("file");
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&db, &link).expect("symlink");
        assert_eq!(
            one_name(&link).expect("one name"),
            one_name(&db).expect("one name")
        );
    }

    #[test]
    fn a_missing_file_is_unresolvable() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(matches!(
            one_name(&dir.path().join("gone.db")),
            Err(Error::PathUnresolvable { .. })
        ));
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(br"/srv/my\040app.db"), b"/srv/my app.db");
        assert_eq!(unescape(br"/a\134b"), b"/a\\b");
        assert_eq!(unescape(br"/plain\04"), br"/plain\04");
        // The root is a mount point in every namespace.
        assert!(mounted_on_in_mountinfo(Path::new("/")));
    }
}
