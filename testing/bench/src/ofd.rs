//! Open-file-description locks (Linux `F_OFD_SETLK(W)`) and the monotonic
//! clock: the raw material of the floors.

use std::fs::{File, OpenOptions};
use std::path::Path;

use nix::fcntl::{FcntlArg, fcntl};

use crate::Result;

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the host.
pub(crate) use fencing::mono::mono_ns;

/// A whole-file lock request of `l_type` (`F_WRLCK` or `F_UNLCK`). OFD
/// locks require `l_pid` to be zero.
#[allow(
    clippy::cast_possible_truncation,
    reason = "fcntl's lock types and SEEK_SET are 0 to 2, flock's fields c_short"
)]
fn whole_file(l_type: libc::c_int) -> libc::flock {
    libc::flock {
        l_type: l_type as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// A file opened for OFD locking; the open description (and so the lock)
/// lives as long as this value.
#[derive(Debug)]
pub(crate) struct OfdFile {
    file: File,
}

impl OfdFile {
    /// Opens (creating if needed) `path` for reading and writing.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| format!("open {}: {e}", path.display()))?;
        Ok(OfdFile { file })
    }

    /// The open file, for writes and fsync.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Takes the exclusive lock without waiting; an error if it is held.
    pub(crate) fn try_lock(&self) -> Result<()> {
        let fl = whole_file(libc::F_WRLCK);
        fcntl(&self.file, FcntlArg::F_OFD_SETLK(&fl)).map_err(|e| format!("F_OFD_SETLK: {e}"))?;
        Ok(())
    }

    /// Takes the exclusive lock, waiting as long as another holds it.
    pub(crate) fn lock_wait(&self) -> Result<()> {
        let fl = whole_file(libc::F_WRLCK);
        loop {
            match fcntl(&self.file, FcntlArg::F_OFD_SETLKW(&fl)) {
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(format!("F_OFD_SETLKW: {e}").into()),
            }
        }
    }

    /// Releases the lock.
    pub(crate) fn unlock(&self) -> Result<()> {
        let fl = whole_file(libc::F_UNLCK);
        fcntl(&self.file, FcntlArg::F_OFD_SETLK(&fl))
            .map_err(|e| format!("F_OFD_SETLK(F_UNLCK): {e}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_description_cannot_take_a_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let a = OfdFile::open(&path).unwrap();
        let b = OfdFile::open(&path).unwrap();
        a.try_lock().unwrap();
        assert!(
            b.try_lock().is_err(),
            "OFD locks conflict within one process"
        );
        a.unlock().unwrap();
        b.try_lock().unwrap();
        drop(b);
        a.try_lock().unwrap();
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a && a > 0);
    }
}
