//! [`Changes`]: waking a reader of an election when its files change, so
//! an observer sees every term without polling.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::unix::AsyncFd;

use crate::Error;

/// The inotify instance, as tokio's `AsyncFd` wants it.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Wakes whoever reads an election's leader when one of its files changes
/// (Linux inotify on the election directory), from
/// [`FileElection::changes`](crate::FileElection::changes).
///
/// The files tell every change of leadership: a term begins with its
/// winner rewriting the epoch record (in place, and closing it, within
/// the lock hold that wins), and ends with the holder's claim file closed
/// (resign, drop, or the process's death: the kernel frees the lock in
/// the same final close). So after each [`changed`](Changes::changed) a
/// read of [`Claim::leader`](election_core::Claim::leader) sees the new
/// state; a term shorter than the read's delay (microseconds to
/// milliseconds) can still end before it is read, and its epoch is then
/// skipped. Wake-ups can be spurious (another candidate's attempt closing
/// its claim file): read again and compare.
///
/// Not seen: a lock released with the claim file still open (an
/// explicit unlock without close, which this crate only does just before
/// closing), and changes by processes in another mount namespace that
/// bind-mount the directory elsewhere (inotify watches the inode, so they
/// are seen). If the directory itself is removed, no further wake-up
/// comes: poll as a backstop.
pub struct Changes {
    fd: AsyncFd<Fd>,
    dir: PathBuf,
    names: [OsString; 2],
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes")
            .field("dir", &self.dir)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Changes {
    /// Watches `dir` for changes of `lock` and `record` (file names).
    pub(crate) fn new(dir: PathBuf, lock: OsString, record: OsString) -> Result<Self, Error> {
        Changes::watching(
            dir,
            [lock, record],
            AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE,
        )
    }

    /// Watches `dir` for writes to the files `names` (`IN_MODIFY`) and for
    /// their creation, deletion and renames, not for closes: a candidate
    /// that waits out a handover's window (ADR 0112) wakes when a term
    /// begins (its record is written) or the files are replaced, not when
    /// another candidate merely opens and closes them to look.
    pub(crate) fn writes(dir: PathBuf, names: [OsString; 2]) -> Result<Self, Error> {
        Changes::watching(
            dir,
            names,
            AddWatchFlags::IN_MODIFY
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_DELETE,
        )
    }

    fn watching(dir: PathBuf, names: [OsString; 2], mask: AddWatchFlags) -> Result<Self, Error> {
        let io = |op, e: nix::Error| Error::io(op, &dir, e.into());
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| io("inotify_init", e))?;
        inotify
            .add_watch(&dir, mask | AddWatchFlags::IN_ONLYDIR)
            .map_err(|e| io("inotify_add_watch", e))?;
        #[allow(unsafe_code)]
        // SAFETY: `Fd` owns the inotify descriptor (an `OwnedFd` inside
        // `Inotify`): it stays open, and the same, for as long as the
        // `AsyncFd` holds it, which closes it only when dropped.
        let fd = unsafe { AsyncFd::register(Fd(inotify)) }
            .map_err(|e| Error::io("register", &dir, e.into()))?;
        Ok(Changes { fd, dir, names })
    }

    /// Waits until a file of the election may have changed (see
    /// [`Changes`]); then read the leader again. Events that came while
    /// nobody waited are kept, so a change between a read and this call
    /// wakes it at once.
    ///
    /// Cancel safety: cancel safe; nothing is lost if dropped (an event
    /// being read when dropped counts as a spurious miss only if it was
    /// the last one: read after each wake-up or timeout anyway).
    ///
    /// Failure model: an error reading the inotify instance is
    /// [`Error::Io`]; also when the kernel's event queue overflowed, this
    /// returns `Ok` (something may have changed).
    ///
    /// ```
    /// use election_file::FileElection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let election = FileElection::new(tmp.path())?;
    /// let mut changes = election.changes("jobs")?;
    /// assert_eq!(election.leader("jobs").await?, None);
    ///
    /// let term = election.candidate("jobs", "host-a/1")?.campaign().await?;
    /// changes.changed().await?; // woken: read again
    /// let now = election.leader("jobs").await?;
    /// assert_eq!(now.map(|l| l.epoch), Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub async fn changed(&mut self) -> Result<(), Error> {
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|e| Error::io("poll", &self.dir, e))?;
            let read = guard.try_io(|fd| fd.get_ref().0.read_events().map_err(Into::into));
            let events = match read {
                Ok(Ok(events)) => events,
                Ok(Err(e)) => return Err(Error::io("read inotify events of", &self.dir, e)),
                Err(_would_block) => continue,
            };
            let ours = events.iter().any(|e| {
                e.mask
                    .intersects(AddWatchFlags::IN_Q_OVERFLOW | AddWatchFlags::IN_IGNORED)
                    || e.name.as_ref().is_some_and(|n| self.names.contains(n))
            });
            if ours {
                return Ok(());
            }
        }
    }
}
