//! The same-host lock (ADR 0026): one small file per election name beside
//! the database, `<database>-election-locks/<name>`, on which a candidate
//! holds an open file description (OFD) lock from before its claim can
//! commit until its attempt is closed (after the term ended: resigned, or
//! lost and the term dropped).
//!
//! What it is used for here: a wake-up. A waiting candidate blocks in the
//! kernel (`F_OFD_SETLKW`, on a thread of its own) and wakes the moment
//! the holder closes its attempt or its process dies, instead of polling.
//! The lease row alone still decides who may claim: the lock never lets a
//! candidate win a row it could not win without it.
//!
//! Where it is not used: a database with no file, or on a filesystem that
//! may be shared between hosts (NFS, SMB/CIFS, FUSE, 9p, and any whose
//! type cannot be read), where a kernel's lock says nothing about another
//! host's processes. There candidates poll as before.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use tokio::sync::oneshot;

use crate::error::Error;

/// Filesystem magic numbers (`statfs.f_type`) of filesystems that may be
/// shared between hosts, or whose locks may be lost or served elsewhere.
const SHARED_FILESYSTEMS: &[(i64, &str)] = &[
    (0x6969, "nfs"),
    (0x517B, "smb"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x6573_5546, "fuse"),
    (0x0102_1997, "9p"),
    (0x7461_636f, "ocfs2"),
    (0x0119_d3e5, "gfs2"),
    (0x5346_414f, "afs"),
    (0x6B41_4653, "afs (kafs)"),
    (0x0000_564c, "ncp"),
    (0x73757245, "coda"),
    (0x0BD0_0BD0, "lustre"),
    (0x00C3_6400, "ceph"),
];

/// Where the lock files of one database live.
#[derive(Clone, Debug)]
pub(crate) struct HostLocks {
    dir: PathBuf,
    /// The kernel's boot id; `None` if unreadable (then no lock id is
    /// written and no takeover shortcut taken).
    boot_id: Option<String>,
}

impl HostLocks {
    /// The lock directory for the database file at `db` (created if
    /// missing), named after `db`'s canonical path (symlinks and `..`
    /// resolved, so every spelling of one path shares it), or `Ok(None)`
    /// (and a log line saying why) where the lock cannot be trusted: a
    /// filesystem that may be shared between hosts, one whose type cannot
    /// be read, or a directory that cannot be made.
    ///
    /// Failure model: [`Error::PathUnresolvable`] if `db` cannot be
    /// resolved.
    pub(crate) fn for_database(db: &Path) -> Result<Result<HostLocks, String>, Error> {
        let db = std::fs::canonicalize(db).map_err(|source| Error::PathUnresolvable {
            path: db.to_owned(),
            source,
        })?;
        Ok(Self::for_canonical(&db))
    }

    /// The locks beside `db`, or why there are none (also logged).
    fn for_canonical(db: &Path) -> Result<HostLocks, String> {
        let mut dir = db.as_os_str().to_owned();
        dir.push("-election-locks");
        let dir = PathBuf::from(dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create the lock directory; candidates poll for the lease");
            return Err(format!(
                "cannot create the lock directory {}: {e}",
                dir.display()
            ));
        }
        match shared_filesystem(&dir) {
            Ok(None) => Ok(HostLocks {
                dir,
                boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                    .ok()
                    .map(|id| id.trim().to_owned())
                    .filter(|id| !id.is_empty() && !id.contains('/')),
            }),
            Ok(Some(kind)) => {
                tracing::warn!(dir = %dir.display(), filesystem = kind, "the database is on a filesystem that may be shared between hosts: no same-host lock, candidates poll for the lease");
                Err(format!(
                    "the database is on {kind}, a filesystem that may be shared between hosts"
                ))
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read the filesystem type; candidates poll for the lease");
                Err(format!(
                    "cannot read the filesystem type of {}: {e}",
                    dir.display()
                ))
            }
        }
    }

    /// What a term's winner records of the lock `file` it holds (ADR
    /// 0026): `<boot id>/<st_dev>/<st_ino>`, read from the open file
    /// itself. `None` without a boot id or if `fstat` fails.
    pub(crate) fn lock_identity(&self, file: &File) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let boot = self.boot_id.as_ref()?;
        let m = file.metadata().ok()?;
        Some(format!("{boot}/{}/{}", m.dev(), m.ino()))
    }

    /// The lock file of election `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// `Ok(Some(kind))` if the filesystem holding `path` may be shared between
/// hosts.
fn shared_filesystem(path: &Path) -> io::Result<Option<&'static str>> {
    let fs = nix::sys::statfs::statfs(path)?;
    #[allow(clippy::useless_conversion)]
    let magic = i64::from(fs.filesystem_type().0);
    // f_type is signed on some targets: compare the low 32 bits too.
    let low = magic & 0xFFFF_FFFF;
    Ok(SHARED_FILESYSTEMS
        .iter()
        .find(|(m, _)| *m == magic || *m == low)
        .map(|(_, kind)| *kind))
}

fn open(path: &Path) -> io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

#[allow(
    clippy::cast_possible_truncation,
    reason = "fcntl's lock types and SEEK_SET are 0 to 2, flock's fields c_short"
)]
fn exclusive() -> libc::flock {
    libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Takes the lock at `path` without waiting: `Ok(None)` if another open
/// file description holds it.
pub(crate) fn try_take(path: &Path) -> io::Result<Option<File>> {
    let file = open(path)?;
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&exclusive())) {
        Ok(_) => Ok(Some(file)),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Waits for the lock at `path` on a thread of its own (a blocked lock
/// call cannot be cancelled, so not on the runtime's blocking pool) and
/// hands the locked file over. If the receiver is gone by then, the file
/// is dropped and the lock freed at once. If no thread can be started, the
/// receiver resolves at once with the error.
pub(crate) fn wait_for(path: PathBuf) -> oneshot::Receiver<io::Result<File>> {
    let (tx, rx) = oneshot::channel();
    // A closed receiver drops the file: the lock goes at once. If no thread
    // starts, the sender goes with the closure: the receiver sees it closed.
    wait_then(path, move |taken| drop(tx.send(taken)));
    rx
}

/// Waits for the lock at `path` on a thread of its own, as
/// [`wait_for`], and gives the outcome to `done` on that thread (which
/// drops the file, freeing the lock, unless it keeps it). False (and
/// `done` never called) if no thread could be started.
pub(crate) fn wait_then(
    path: PathBuf,
    done: impl FnOnce(io::Result<File>) + Send + 'static,
) -> bool {
    let spawned = std::thread::Builder::new()
        .name("election-sqlite-lock".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let taken = open(&path).and_then(|file| {
                loop {
                    match fcntl(&file, FcntlArg::F_OFD_SETLKW(&exclusive())) {
                        Ok(_) => return Ok(file),
                        Err(Errno::EINTR) => continue,
                        Err(e) => return Err(io::Error::from(e)),
                    }
                }
            });
            done(taken);
        });
    if spawned.is_err() {
        tracing::debug!("no thread for the same-host lock wait; polling");
    }
    spawned.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_cannot_be_resolved_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("no-such-dir/app.db");
        match HostLocks::for_database(&gone) {
            Err(Error::PathUnresolvable { path, .. }) => assert_eq!(path, gone),
            other => panic!("expected PathUnresolvable, got {other:?}"),
        }
    }

    #[test]
    fn a_second_open_waits_until_the_first_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        std::fs::write(&db, b"").unwrap();
        let locks = HostLocks::for_database(&db)
            .expect("resolved")
            .expect("local fs");
        let path = locks.path("jobs");
        let held = try_take(&path).unwrap().expect("free");
        assert!(try_take(&path).unwrap().is_none(), "two opens conflict");
        let mut rx = wait_for(path.clone());
        assert!(rx.try_recv().is_err(), "still held");
        drop(held);
        let got = rx
            .blocking_recv()
            .expect("thread answered")
            .expect("locked");
        assert!(try_take(&path).unwrap().is_none());
        drop(got);
        assert!(try_take(&path).unwrap().is_some());
    }

    #[test]
    fn a_dropped_wait_frees_the_lock_it_gets() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.db");
        std::fs::write(&db, b"").unwrap();
        let locks = HostLocks::for_database(&db).unwrap().unwrap();
        let path = locks.path("jobs");
        let held = try_take(&path).unwrap().unwrap();
        drop(wait_for(path.clone()));
        drop(held);
        // The thread gets the lock and drops it: poll for it with a bound.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if try_take(&path).unwrap().is_some() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "lock never freed");
            std::thread::yield_now();
        }
    }
}
