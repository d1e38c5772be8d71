//! Open file description (OFD) locks on the claim file.
//!
//! OFD locks belong to the open file description: two opens conflict even
//! in one process, closing any *other* descriptor of the file does not drop
//! them (unlike classic `F_SETLK` locks), and the kernel frees them when the
//! last descriptor closes, also when the process is killed.

use std::fs::File;
use std::io;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};

/// The kind of lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Shared: only conflicts with `Exclusive`. Waiters use it.
    Shared,
    /// Exclusive: the claim.
    Exclusive,
}

/// Opens the file at `path` for locking (read and write), creating it if
/// needed and keeping its contents.
pub(crate) fn open(path: &std::path::Path) -> io::Result<File> {
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
fn flock(kind: Option<Kind>) -> libc::flock {
    let l_type = match kind {
        Some(Kind::Shared) => libc::F_RDLCK,
        Some(Kind::Exclusive) => libc::F_WRLCK,
        None => libc::F_UNLCK,
    };
    libc::flock {
        l_type: l_type as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0, // the whole file
        l_pid: 0,
    }
}

/// Tries to take a lock without waiting: `Ok(false)` if another open file
/// description holds a conflicting one.
pub(crate) fn try_lock(file: &File, kind: Kind) -> io::Result<bool> {
    match fcntl(file, FcntlArg::F_OFD_SETLK(&flock(Some(kind)))) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Waits for a lock, blocking the calling thread (retries on `EINTR`).
pub(crate) fn lock_blocking(file: &File, kind: Kind) -> io::Result<()> {
    loop {
        match fcntl(file, FcntlArg::F_OFD_SETLKW(&flock(Some(kind)))) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Drops this open file description's lock.
pub(crate) fn unlock(file: &File) -> io::Result<()> {
    fcntl(file, FcntlArg::F_OFD_SETLK(&flock(None)))?;
    Ok(())
}

/// True if another open file description holds the exclusive lock (a
/// shared lock held by a waiter does not count).
pub(crate) fn exclusively_held(file: &File) -> io::Result<bool> {
    let mut probe = flock(Some(Kind::Shared));
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe))?;
    Ok(i32::from(probe.l_type) != libc::F_UNLCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_opens_in_one_process_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let (a, b) = (open(&p).unwrap(), open(&p).unwrap());
        assert!(try_lock(&a, Kind::Exclusive).unwrap());
        assert!(!try_lock(&b, Kind::Exclusive).unwrap());
        assert!(!try_lock(&b, Kind::Shared).unwrap());
        assert!(exclusively_held(&b).unwrap());
        unlock(&a).unwrap();
        assert!(!exclusively_held(&b).unwrap());
        assert!(try_lock(&b, Kind::Shared).unwrap());
        assert!(
            !exclusively_held(&a).unwrap(),
            "a shared lock is not a holder"
        );
        assert!(
            !try_lock(&a, Kind::Exclusive).unwrap(),
            "a shared lock blocks the claim"
        );
    }

    #[test]
    fn closing_the_file_frees_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let a = open(&p).unwrap();
        assert!(try_lock(&a, Kind::Exclusive).unwrap());
        let b = open(&p).unwrap();
        drop(a);
        assert!(try_lock(&b, Kind::Exclusive).unwrap());
    }
}
