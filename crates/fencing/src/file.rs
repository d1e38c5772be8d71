//! [`FileFence`]: high-water marks in files, safe across processes (Linux).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use election_core::{ConfigError, Epoch};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use tokio::sync::{OwnedMutexGuard, oneshot};

use crate::{Advance, Error, Fence, ResourceName, Token, WriteFn};

/// A [`Fence`] that keeps each resource's high-water mark in a file of one
/// directory, safe for writers in many processes of one host (and in many
/// threads and tasks of each).
///
/// # Layout
///
/// For resource `r` the directory holds:
/// - `r.fence`: the mark, one fixed-size line with a checksum,
///   `fencing-mark/1 <token as 20 digits> <FNV-1a 64 of the text before it,
///   16 hex digits>` and a newline, rewritten in place. A missing file means
///   "no mark yet" only while the lock file records no mark (below); a
///   file that does not read as a mark (a line torn by a power cut during
///   its write, or damaged) is [`Error::Corrupt`], never "no mark" and
///   never a lower mark. A mark in the older format, the token's decimal
///   text and a newline (`42\n`), is still read, and rewritten in the new
///   one at the next raise.
/// - `r.fence.lock`: the lock file, locked while a writer checks and
///   writes. Once the resource has a mark it holds one line saying so
///   (empty before, and in versions before this line), so cleaners of
///   empty files leave it alone.
///
/// Never delete either file, and never put the directory where a cleaner
/// of temporary files ages files out (`/tmp`, `/var/tmp`). A deleted file
/// is noticed: a missing lock file beside a mark file, or a missing mark
/// file beside a lock file that records a mark, is [`Error::Corrupt`] for
/// every writer (and a missing mark so recorded also for
/// [`high_water_mark`](Fence::high_water_mark)) until
/// [`repair`](FileFence::repair) sets the mark again. Both deleted leave
/// nothing to notice: the resource reads as new (ADR 0048).
///
/// # How a check-and-advance runs
///
/// The writer takes an exclusive open-file-description lock (`fcntl`
/// `F_OFD_SETLKW`) on the whole of `r.fence.lock`, then on `r.fence`. Such
/// locks conflict between different opens of the file, in other processes
/// and in this one, and the kernel drops one when its file is closed, also
/// when the process dies (even by `SIGKILL`), so a crashed writer never
/// leaves the resource locked. After locking each file it checks that the
/// file is still the one at its path (device and inode of the descriptor
/// and of the path), and starts again if it was replaced. The lock file is
/// created only for a resource without a mark file, and the mark file
/// only with `O_EXCL`: a writer that locked a lock file deleted since and
/// one that locked its successor still take turns on the one mark file,
/// so two writers are never inside at once (ADR 0048). Under the locks it
/// reads `r.fence`, decides with
/// [`Advance::decide`] and, if the mark goes up, writes the new line over
/// the old one in place (one `pwrite`) and `fdatasync`s it (the first
/// write of a resource also syncs the directory, and once per resource the
/// lock file's line is written and synced): one durable write, done before
/// the write runs (ADR 0025). The mark file is opened with
/// `O_NOATIME` so that the read does not dirty its inode before the sync;
/// where that flag is refused (the process neither owns the file nor has
/// `CAP_FOWNER`) it is opened without it and synced with a full `fsync`
/// instead (ADR 0034). [`fenced`](Fence::fenced) runs the
/// write while still holding the locks and unlocks (closes the files)
/// after it. Readers of the mark need no lock: one that catches a line being
/// rewritten sees a checksum mismatch and reads again (a few times, then
/// it is [`Error::Corrupt`]).
///
/// Within one `FileFence` (and its clones), writers of one resource also
/// take turns on an in-process lock first, so at most one thread per
/// resource waits in the kernel.
///
/// # Blocking
///
/// File I/O runs on tokio's blocking pool, not on the async runtime: the
/// lock is tried there without waiting and, if it is free, the check and
/// the durable write follow in the same hop. Only when another open of the
/// lock file holds it does the wait move to a short-lived thread of its
/// own. A lock wait in the kernel cannot be aborted: if the future is
/// dropped while waiting, the thread keeps waiting until it gets the lock,
/// sees that nobody wants it any more and releases it at once without
/// touching the mark. A writer that holds the lock forever (a hung
/// process) therefore keeps such threads waiting; they do not hold up the
/// runtime's shutdown.
///
/// # Where to put the directory
///
/// On a local filesystem of the host where all writers run, next to the
/// resource it protects. [`open`](FileFence::open) refuses NFS and SMB/CIFS
/// mounts, where these locks and writes are not reliable; FUSE mounts are
/// accepted (rootless containers use them), so do not point it at a
/// network FUSE filesystem (sshfs, s3fs, ...).
///
/// ```
/// use election_core::Epoch;
/// use fencing::{Fence, FileFence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let dir = tmp.path().join("fences");
/// let exports = ResourceName::new("exports")?;
/// let token = Token::from_epoch(Epoch::new(12).unwrap());
/// assert!(FileFence::open(&dir)?.advance(&exports, token).await?.raised());
///
/// // Another process (or handle) sees the same mark.
/// let fence = FileFence::open(&dir)?;
/// assert_eq!(fence.high_water_mark(&exports).await?, Some(token));
/// let line = std::fs::read_to_string(dir.join("exports.fence"))?;
/// assert!(line.starts_with("fencing-mark/1 00000000000000000012 "), "{line}");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct FileFence {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// The directory, open for syncing it after a mark file is created.
    dir_handle: File,
    turns: Mutex<HashMap<ResourceName, Arc<tokio::sync::Mutex<()>>>>,
}

/// The files of one resource.
struct Paths {
    lock: PathBuf,
    mark: PathBuf,
}

impl Paths {
    fn new(dir: &Path, resource: &ResourceName) -> Paths {
        Paths {
            lock: dir.join(format!("{resource}.fence.lock")),
            mark: dir.join(format!("{resource}.fence")),
        }
    }
}

/// A resource's locks, held across a write. Fields drop in order: the
/// mark file's lock, the lock file's, then the in-process turn.
struct Held {
    _mark: File,
    _lock: File,
    _turn: OwnedMutexGuard<()>,
}

/// A resource's files, both locked, and what the check came to.
struct Entered {
    lock: File,
    mark: File,
    advance: Advance,
}

/// The filesystems whose locks and durable writes are not reliable enough:
/// `(statfs magic, name)`.
const NETWORK_FILESYSTEMS: [(u64, &str); 4] = [
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
];

fn network_filesystem(magic: u64) -> Option<&'static str> {
    NETWORK_FILESYSTEMS
        .iter()
        .find(|(m, _)| *m == magic & 0xFFFF_FFFF)
        .map(|(_, name)| *name)
}

/// The longest mark file read, in bytes; a mark line takes [`MARK_LEN`].
const MAX_MARK_BYTES: usize = 64;

/// The mark line's first word.
const MARK_HEADER: &str = "fencing-mark/1";

/// The length of a mark line: header, space, 20 digits, space, 16 hex
/// digits, newline.
const MARK_LEN: usize = MARK_HEADER.len() + 1 + 20 + 1 + 16 + 1;

/// How many times a reader without the lock reads a mark line that does
/// not check out before calling it corrupt (it may have caught a write).
const READ_TRIES: usize = 5;

fn at(path: &Path) -> String {
    path.display().to_string()
}

fn unavailable(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::unavailable(at(path), e)
}

impl FileFence {
    /// Opens the fence whose marks live in `dir`, creating the directory
    /// (and its parents) if it is missing.
    ///
    /// Fails with [`Error::Config`] if `dir` is not a directory or is on a
    /// network filesystem (NFS, SMB/CIFS), and with [`Error::Unavailable`]
    /// if it cannot be created or opened. This call blocks briefly on the
    /// filesystem; it does not lock anything.
    ///
    /// ```
    /// use fencing::{Error, FileFence};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fence = FileFence::open(tmp.path().join("a/b/fences"))?;
    /// assert!(fence.dir().is_dir());
    ///
    /// std::fs::write(tmp.path().join("plain"), "")?;
    /// assert!(matches!(FileFence::open(tmp.path().join("plain")), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<FileFence, Error> {
        let dir = dir.as_ref();
        let not_a_dir = || ConfigError::Location {
            reason: format!("{} is not a directory", dir.display()),
            source: None,
        };
        match fs::metadata(dir) {
            Ok(meta) if !meta.is_dir() => return Err(not_a_dir().into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(unavailable(dir))?;
                // Make the new directory's own entry durable.
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    File::open(parent)
                        .and_then(|p| p.sync_all())
                        .map_err(unavailable(parent))?;
                }
            }
            Err(e) => return Err(Error::unavailable(at(dir), e)),
        }
        let dir = fs::canonicalize(dir).map_err(unavailable(dir))?;
        let dir_handle = File::open(&dir).map_err(unavailable(&dir))?;
        if !dir_handle.metadata().map_err(unavailable(&dir))?.is_dir() {
            return Err(not_a_dir().into());
        }
        let stat = nix::sys::statfs::fstatfs(&dir_handle)
            .map_err(|e| Error::unavailable(at(&dir), io::Error::from(e)))?;
        #[allow(
            clippy::unnecessary_cast,
            clippy::cast_sign_loss,
            reason = "a bit pattern; the field's type differs between targets"
        )]
        let magic = stat.filesystem_type().0 as u64;
        if let Some(fs) = network_filesystem(magic) {
            return Err(ConfigError::Location {
                reason: format!(
                    "{} is on {fs}, where file locks are not reliable: use a local filesystem",
                    dir.display()
                ),
                source: None,
            }
            .into());
        }
        Ok(FileFence {
            inner: Arc::new(Inner {
                dir,
                dir_handle,
                turns: Mutex::default(),
            }),
        })
    }

    /// The directory of the mark files, as an absolute path.
    ///
    /// ```
    /// use fencing::FileFence;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fence = FileFence::open(tmp.path().join("fences"))?;
    /// println!("marks live in {}", fence.dir().display());
    /// assert!(fence.dir().is_absolute());
    /// # Ok(()) }
    /// ```
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Repairs the mark of `resource` after its files were deleted or
    /// damaged (a fence refuses every token with [`Error::Corrupt`] until
    /// then): durably sets the mark to `mark` and records in the lock file
    /// that the resource has a mark. Returns the mark that was still
    /// visible before, if any.
    ///
    /// Give a mark at least as high as any token the resource ever
    /// accepted (the highest epoch its writers' elections handed out will
    /// do): the fence then refuses every earlier writer. Refuses, changing
    /// nothing:
    /// - [`Error::Stale`] when `mark` is lower than the mark the file still
    ///   shows (its own if it reads, else the digits of its token field);
    /// - [`Error::Unavailable`] while a writer holds either file's lock:
    ///   stop every writer of the resource first. (A writer of an earlier
    ///   version locks only the lock file; if that was deleted, the repair
    ///   cannot see it: stop them all.)
    ///
    /// Never delete the files instead: a resource without them reads as
    /// new, and the fence would accept any token. Blocking file I/O (three
    /// fsyncs): call it from a tool or `spawn_blocking`.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Error, Fence, FileFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
    /// let fence = FileFence::open(tmp.path())?;
    /// let r = ResourceName::new("ledger")?;
    /// fence.advance(&r, t(5)).await?;
    /// std::fs::remove_file(tmp.path().join("ledger.fence"))?; // never do this
    /// assert!(matches!(fence.advance(&r, t(3)).await, Err(Error::Corrupt { .. })));
    ///
    /// // With every writer stopped: a mark at least as high as any token accepted.
    /// assert_eq!(fence.repair(&r, t(5))?, None, "nothing was left to see");
    /// assert!(matches!(fence.advance(&r, t(3)).await, Err(Error::Stale { .. })));
    /// assert!(matches!(fence.repair(&r, t(4)), Err(Error::Stale { .. })));
    /// # Ok(()) }
    /// ```
    pub fn repair(&self, resource: &ResourceName, mark: Token) -> Result<Option<Token>, Error> {
        let paths = Paths::new(&self.inner.dir, resource);
        let busy = |path: &Path| {
            Error::unavailable(
                at(path),
                io::Error::other(
                    "a writer holds the lock: stop every writer of the resource first",
                ),
            )
        };
        let replaced = |path: &Path| {
            Error::unavailable(
                at(path),
                io::Error::other("the file was replaced during the repair: try again"),
            )
        };
        let open = |path: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(unavailable(path))
        };
        let mut locked = Vec::new();
        for path in [&paths.lock, &paths.mark] {
            let file = open(path)?;
            if !try_lock_exclusive(&file).map_err(unavailable(path))? {
                return Err(busy(path));
            }
            if !is_at(&file.metadata().map_err(unavailable(path))?, path)? {
                return Err(replaced(path));
            }
            locked.push(file);
        }
        let (lock, mark_file) = (&locked[0], &locked[1]);
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut io::Read::take(mark_file, 4096), &mut bytes)
            .map_err(unavailable(&paths.mark))?;
        let visible = visible_mark(&bytes);
        if let Some(seen) = visible
            && mark < seen
        {
            return Err(Error::Stale {
                resource: resource.clone(),
                presented: mark,
                high_water_mark: seen,
            });
        }
        mark_file
            .write_all_at(mark_line(mark).as_bytes(), 0)
            .and_then(|()| mark_file.set_len(MARK_LEN as u64))
            .and_then(|()| mark_file.sync_all())
            .map_err(unavailable(&paths.mark))?;
        lock.write_all_at(LOCK_KEPT, 0)
            .and_then(|()| lock.set_len(LOCK_KEPT.len() as u64))
            .and_then(|()| lock.sync_all())
            .map_err(unavailable(&paths.lock))?;
        self.inner
            .dir_handle
            .sync_all()
            .map_err(unavailable(&self.inner.dir))?;
        Ok(visible)
    }

    fn turn(&self, resource: &ResourceName) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self
            .inner
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        turns.entry(resource.clone()).or_default().clone()
    }

    /// Takes the resource's locks, checks `token` and persists the raised
    /// mark; the locks are held until the returned guard drops.
    ///
    /// The file lock is first tried without waiting, on tokio's blocking
    /// pool (one hop, no thread started, no wait that could hold up the
    /// runtime's shutdown); only if another open of the lock file holds it
    /// does the wait move to a thread of its own ([`off_thread`]), since a
    /// wait in the kernel cannot be aborted.
    async fn lock(&self, resource: &ResourceName, token: Token) -> Result<(Held, Advance), Error> {
        let turn = self.turn(resource).lock_owned().await;
        let quick = match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let inner = Arc::clone(&self.inner);
                let resource = resource.clone();
                // Closed when this future is dropped: a dropped advance
                // whose task only starts later must not raise the mark.
                let (wanted, _waiting) = oneshot::channel::<()>();
                rt.spawn_blocking(move || {
                    let paths = Paths::new(&inner.dir, &resource);
                    // Closed when the caller is gone.
                    let still_wanted = || !wanted.is_closed();
                    enter(&inner, &paths, &resource, token, false, &still_wanted)
                })
                .await
                .map_err(|e| {
                    Error::unavailable("a blocking task for file I/O", io::Error::other(e))
                })??
            }
            Err(_) => None,
        };
        let entered = match quick {
            Some(entered) => entered,
            None => {
                let inner = Arc::clone(&self.inner);
                let resource = resource.clone();
                off_thread(move |wanted| {
                    let paths = Paths::new(&inner.dir, &resource);
                    enter(&inner, &paths, &resource, token, true, wanted)?.ok_or_else(|| {
                        Error::unavailable(at(&paths.lock), io::Error::other("no lock"))
                    })
                })
                .await?
            }
        };
        Ok((
            Held {
                _mark: entered.mark,
                _lock: entered.lock,
                _turn: turn,
            },
            entered.advance,
        ))
    }
}

impl std::fmt::Debug for FileFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileFence")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

/// Beyond the trait's contract: errors of the files are
/// [`Error::Unavailable`] with the [`io::Error`] as the source, and an
/// unreadable mark file is [`Error::Corrupt`]. See [`FileFence`] for what a
/// dropped future leaves running.
impl Fence for FileFence {
    /// [`Fence::advance`], under the OFD lock of `r.fence.lock`.
    ///
    /// Cancel safety, beyond the trait's: dropped while waiting for the
    /// lock, the waiting thread releases the lock once it gets it; dropped
    /// after the lock was taken, the thread finishes the check and the
    /// persisting of the mark, then unlocks.
    async fn advance(&self, resource: &ResourceName, token: Token) -> Result<Advance, Error> {
        let (held, advance) = self.lock(resource, token).await?;
        drop(held);
        Ok(advance)
    }

    /// [`Fence::fenced`], with the OFD lock of `r.fence.lock` held from
    /// the check to the end of `write`, which runs on the calling task.
    /// Cancel safety: as for [`advance`](Fence::advance) until `write`
    /// starts, then as the trait states.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Error, Fence, FileFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fence = FileFence::open(tmp.path().join("fences"))?;
    /// let out = tmp.path().join("out.txt");
    /// let r = ResourceName::new("out.txt")?;
    /// let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
    ///
    /// fence.fenced(&r, t(4), || async { std::fs::write(&out, "term 4") }).await??;
    /// let late = fence.fenced(&r, t(3), || async { std::fs::write(&out, "term 3") }).await;
    /// assert!(matches!(late, Err(Error::Stale { .. })));
    /// assert_eq!(std::fs::read_to_string(&out)?, "term 4");
    /// # Ok(()) }
    /// ```
    async fn fenced<W>(
        &self,
        resource: &ResourceName,
        token: Token,
        write: W,
    ) -> Result<W::Outcome, Error>
    where
        W: WriteFn + FnOnce() -> <W as WriteFn>::Future,
    {
        let (held, _advance) = self.lock(resource, token).await?;
        let out = write().await;
        drop(held);
        Ok(out)
    }

    /// Reads `r.fence` without locking. A missing `r.fence` is "no mark"
    /// only while `r.fence.lock` records none; else it is
    /// [`Error::Corrupt`] (the mark file was deleted, ADR 0048).
    ///
    /// Cancel safety: it only reads; a dropped read finishes on its thread.
    ///
    /// ```
    /// use fencing::{Fence, FileFence, ResourceName};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let fence = FileFence::open(tmp.path())?;
    /// assert_eq!(fence.high_water_mark(&ResourceName::new("new")?).await?, None);
    /// # Ok(()) }
    /// ```
    async fn high_water_mark(&self, resource: &ResourceName) -> Result<Option<Token>, Error> {
        let paths = Paths::new(&self.inner.dir, resource);
        off_thread(move |_| read_mark_unlocked(&paths)).await
    }
}

/// Runs `work` on a thread of its own and waits for its answer without
/// blocking the runtime. `work` gets a check that tells whether the caller
/// still waits; if the caller is gone, the answer (and any lock in it) is
/// dropped on that thread.
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce(&dyn Fn() -> bool) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let (tx, rx) = oneshot::channel();
    thread::Builder::new()
        .name("fencing-file".into())
        .spawn(move || {
            let wanted = || !tx.is_closed();
            let answer = work(&wanted);
            let _ = tx.send(answer);
        })
        .map_err(|e| Error::unavailable("a thread for file I/O", e))?;
    rx.await.unwrap_or_else(|_| {
        Err(Error::unavailable(
            "a thread for file I/O",
            io::Error::other("the thread ended without an answer"),
        ))
    })
}

/// How many times [`enter`] starts again when a file it locked is no longer
/// the one at its path (replaced under it) before it gives up.
const ENTER_ROUNDS: usize = 3;

/// The lock file's content once its resource has had a mark (ADR 0048):
/// written once, after the first mark is durable. From then on a missing
/// mark file is [`Error::Corrupt`], never "no mark", and the lock file is
/// never empty, so cleaners of empty files leave it alone. An empty lock
/// file (a resource without a mark yet, or one of a version before this
/// line) means nothing.
const LOCK_KEPT: &[u8] =
    b"fencing-lock/1 this resource has a high-water mark: never delete this file or its .fence\n";

/// The detail of [`Error::Corrupt`] for a fence whose files were deleted.
fn deleted(what: &str) -> String {
    format!(
        "{what}: the fence's files were deleted (by hand, or by a cleaner of temporary files), \
         so the mark cannot be trusted; stop every writer of the resource and repair it with \
         FileFence::repair, giving a mark at least as high as any token it accepted"
    )
}

/// True if the file now at `path` is the one `ours` describes (same device
/// and inode): it was not deleted or replaced since it was opened.
fn is_at(ours: &fs::Metadata, path: &Path) -> Result<bool, Error> {
    use std::os::unix::fs::MetadataExt;
    match fs::metadata(path) {
        Ok(m) => Ok(m.dev() == ours.dev() && m.ino() == ours.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::unavailable(at(path), e)),
    }
}

/// Opens the resource's lock file, creating it only if the resource has no
/// mark file: a lock file created beside an existing mark would be a second
/// lock (a writer may still hold the deleted one), so a missing lock file
/// beside a mark is [`Error::Corrupt`] (ADR 0048).
fn open_lock(paths: &Paths) -> Result<File, Error> {
    let open = |create: bool| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(&paths.lock)
    };
    match open(false) {
        Ok(file) => return Ok(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::unavailable(at(&paths.lock), e)),
    }
    match fs::symlink_metadata(&paths.mark) {
        // A writer creates the lock file before the mark file: if the mark
        // file is there, so is the lock file, unless it was deleted (a
        // first look may have come before a concurrent first writer made
        // both).
        Ok(_) => match open(false) {
            Ok(file) => Ok(file),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::corrupt(
                at(&paths.lock),
                deleted("the lock file is missing beside the mark file"),
            )),
            Err(e) => Err(Error::unavailable(at(&paths.lock), e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            open(true).map_err(unavailable(&paths.lock))
        }
        Err(e) => Err(Error::unavailable(at(&paths.mark), e)),
    }
}

/// Takes the resource's two locks, checks them and `token`, and persists
/// the raised mark: `Ok(None)` when `wait` is false and a lock is held
/// elsewhere. `wanted` says whether the caller still waits; once it does
/// not, nothing is written.
///
/// 1. The lock file is opened (created only for a resource without a mark
///    file) and locked; it must still be the file at its path (`fstat` of
///    the descriptor against `stat` of the path: device and inode), else it
///    was deleted or replaced while this writer waited, and it starts again.
/// 2. The mark file is opened (created with `O_EXCL` if missing and the
///    lock file records no mark) and locked too, and checked the same way.
///    Its lock is what keeps a writer that locked a deleted lock file from
///    running beside one that locked its successor: both must lock the one
///    mark file.
/// 3. The mark is read, decided on and, if it goes up, written durably;
///    then, once, the lock file records that the resource has a mark.
fn enter(
    inner: &Inner,
    paths: &Paths,
    resource: &ResourceName,
    token: Token,
    wait: bool,
    wanted: &dyn Fn() -> bool,
) -> Result<Option<Entered>, Error> {
    let stopped = || {
        Error::unavailable(
            at(&paths.lock),
            io::Error::other("the caller stopped waiting"),
        )
    };
    for _ in 0..ENTER_ROUNDS {
        let lock = open_lock(paths)?;
        if wait {
            lock_exclusive(&lock).map_err(unavailable(&paths.lock))?;
        } else if !try_lock_exclusive(&lock).map_err(unavailable(&paths.lock))? {
            return Ok(None); // held elsewhere: wait on a thread
        }
        if !wanted() {
            return Err(stopped());
        }
        let lock_meta = lock.metadata().map_err(unavailable(&paths.lock))?;
        if !is_at(&lock_meta, &paths.lock)? {
            continue; // deleted or replaced while we waited: start again
        }
        let kept = lock_meta.len() > 0;
        let (mark, created) = match open_no_atime(&paths.mark, |o| o.read(true).write(true)) {
            Ok(opened) => (opened, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if kept {
                    return Err(Error::corrupt(
                        at(&paths.mark),
                        deleted("the mark file is missing, but the lock file records a mark"),
                    ));
                }
                match open_no_atime(&paths.mark, |o| o.read(true).write(true).create_new(true)) {
                    Ok(opened) => (opened, true),
                    // Created by a writer that holds another lock file:
                    // start again (and wait for it on the mark's lock).
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(Error::unavailable(at(&paths.mark), e)),
                }
            }
            Err(e) => return Err(Error::unavailable(at(&paths.mark), e)),
        };
        // Once the lock file's lock is taken the check runs to its end,
        // also for a caller that stopped waiting: a mark file just created
        // is never left empty for that. Its lock waits only for a writer
        // that holds another lock file.
        if wait || created {
            lock_exclusive(&mark.file).map_err(unavailable(&paths.mark))?;
        } else if !try_lock_exclusive(&mark.file).map_err(unavailable(&paths.mark))? {
            return Ok(None);
        }
        let mark_meta = mark.file.metadata().map_err(unavailable(&paths.mark))?;
        if !is_at(&mark_meta, &paths.mark)? {
            continue;
        }
        let current = if created {
            None
        } else {
            Some(read_mark_file(&mark.file, &paths.mark)?)
        };
        if !kept && current.is_some() {
            // A mark left by a version before the lock file recorded it.
            record_kept(&lock, paths)?;
        }
        let advance = Advance::decide(resource, current.map(|(t, _)| t), token)?;
        if advance.raised() {
            let len = current.map_or(0, |(_, len)| len);
            if let Err(e) = write_mark(inner, paths, &mark, len, advance.current, created) {
                if created && is_at(&mark_meta, &paths.mark).unwrap_or(false) {
                    // Never leave an empty mark file (it reads as corrupt):
                    // the resource had no mark, and still has none.
                    let _ = fs::remove_file(&paths.mark);
                }
                return Err(e);
            }
            if !kept && created {
                record_kept(&lock, paths)?;
            }
        }
        return Ok(Some(Entered {
            lock,
            mark: mark.file,
            advance,
        }));
    }
    Err(Error::unavailable(
        at(&paths.lock),
        io::Error::other(
            "the fence's files were replaced again and again while this writer locked them",
        ),
    ))
}

/// Records in the lock file (locked by us) that its resource has a mark:
/// written once, made durable (ADR 0048).
fn record_kept(lock: &File, paths: &Paths) -> Result<(), Error> {
    lock.write_all_at(LOCK_KEPT, 0)
        .and_then(|()| lock.sync_data())
        .map_err(unavailable(&paths.lock))
}

/// An open mark file, and whether it was opened with `O_NOATIME`.
struct MarkFile {
    file: File,
    no_atime: bool,
}

/// Opens `path` with the options `options` sets, plus `O_NOATIME` where
/// permitted: reading the mark then does not update its access time, which
/// (under `relatime`, with the mark rewritten after every read) would dirty
/// the inode at every check and slow the `fdatasync` that follows (ADR
/// 0034). `O_NOATIME` is refused with `EPERM` to a process that neither
/// owns the file nor has `CAP_FOWNER`; the open is then retried without it,
/// silently.
fn open_no_atime(
    path: &Path,
    options: impl Fn(&mut OpenOptions) -> &mut OpenOptions,
) -> io::Result<MarkFile> {
    with_no_atime_fallback(|no_atime| {
        let mut o = OpenOptions::new();
        options(&mut o);
        if no_atime {
            o.custom_flags(libc::O_NOATIME);
        }
        o.open(path)
    })
}

/// Runs `open(true)` and, if that is refused with `EPERM`, `open(false)`.
fn with_no_atime_fallback(open: impl Fn(bool) -> io::Result<File>) -> io::Result<MarkFile> {
    match open(true) {
        Ok(file) => Ok(MarkFile {
            file,
            no_atime: true,
        }),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(MarkFile {
            file: open(false)?,
            no_atime: false,
        }),
        Err(e) => Err(e),
    }
}

/// A write (exclusive) lock on the whole file, for `fcntl`'s OFD locks.
#[allow(
    clippy::cast_possible_truncation,
    reason = "fcntl's lock types and SEEK_SET are 0 to 2, flock's fields c_short"
)]
fn whole_file_write_lock() -> libc::flock {
    libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Waits for an exclusive OFD lock on the whole file.
fn lock_exclusive(file: &File) -> io::Result<()> {
    let whole = whole_file_write_lock();
    loop {
        match fcntl(file, FcntlArg::F_OFD_SETLKW(&whole)) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Takes an exclusive OFD lock on the whole file without waiting:
/// `Ok(false)` if another open of the file holds a lock on it.
fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    match fcntl(file, FcntlArg::F_OFD_SETLK(&whole_file_write_lock())) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The mark in `path`: `None` if the file does not exist.
fn read_mark(path: &Path) -> Result<Option<Token>, Error> {
    let opened = match open_no_atime(path, |o| o.read(true)) {
        Ok(opened) => opened,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::unavailable(at(path), e)),
    };
    read_mark_file(&opened.file, path).map(|(token, _)| Some(token))
}

/// The mark in the open `file` (at `path`), read with `pread` from offset
/// 0, and the number of bytes read.
fn read_mark_file(file: &File, path: &Path) -> Result<(Token, u64), Error> {
    let mut text = [0u8; MAX_MARK_BYTES];
    let mut len = 0;
    while len < text.len() {
        let want = text.len() - len;
        match file.read_at(&mut text[len..], len as u64) {
            Ok(0) => break,
            // A regular file reads short only at its end: no second read
            // to find it.
            Ok(n) if n < want => {
                len += n;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::unavailable(at(path), e)),
        }
    }
    parse_mark(&text[..len])
        .map(|token| (token, len as u64))
        .map_err(|detail| Error::corrupt(at(path), detail))
}

/// FNV-1a, 64 bits: the mark line's checksum.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The mark line of `token` (exactly [`MARK_LEN`] bytes).
fn mark_line(token: Token) -> String {
    let head = format!("{MARK_HEADER} {:020} ", token.epoch().get());
    let line = format!("{head}{:016x}\n", fnv1a(head.as_bytes()));
    debug_assert_eq!(line.len(), MARK_LEN);
    line
}

/// A mark line (checked), or a mark in the older format: a token,
/// optionally followed by one newline.
fn parse_mark(text: &[u8]) -> Result<Token, String> {
    if text.starts_with(MARK_HEADER.as_bytes()) {
        return parse_mark_line(text);
    }
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            format!(
                "expected a mark line ({MARK_HEADER} ...) or a token (decimal text from 1 up) \
                 and a newline, found {:?}",
                String::from_utf8_lossy(text)
            )
        })
}

fn parse_mark_line(text: &[u8]) -> Result<Token, String> {
    let bad = |why: &str| {
        format!(
            "{why}: the mark line is torn or damaged, found {:?}",
            String::from_utf8_lossy(text)
        )
    };
    if text.len() != MARK_LEN || text[MARK_LEN - 1] != b'\n' {
        return Err(bad(&format!("not {MARK_LEN} bytes ending in a newline")));
    }
    let head = &text[..MARK_LEN - 17];
    let sum = std::str::from_utf8(&text[MARK_LEN - 17..MARK_LEN - 1])
        .ok()
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| bad("no checksum"))?;
    if sum != fnv1a(head) {
        return Err(bad("the checksum does not match"));
    }
    let digits = &head[MARK_HEADER.len() + 1..head.len() - 1];
    std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.trim_start_matches('0').parse().ok())
        .ok_or_else(|| bad("not a token"))
}

/// [`read_mark`] without the resource's lock: a line that does not check
/// out is read again a few times (a writer may be rewriting it in place).
/// A missing mark file is "no mark" only while the lock file records none
/// (ADR 0048).
fn read_mark_unlocked(paths: &Paths) -> Result<Option<Token>, Error> {
    let mut tries = 0;
    loop {
        match read_mark(&paths.mark) {
            Err(Error::Corrupt { .. }) if tries + 1 < READ_TRIES => {
                tries += 1;
                thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(None) => {
                return match fs::metadata(&paths.lock) {
                    Ok(m) if m.len() > 0 => Err(Error::corrupt(
                        at(&paths.mark),
                        deleted("the mark file is missing, but the lock file records a mark"),
                    )),
                    Ok(_) => Ok(None),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(Error::unavailable(at(&paths.lock), e)),
                };
            }
            other => return other,
        }
    }
}

/// The highest mark still visible in a mark file's bytes, read or not: the
/// mark if it reads, else the number in a mark line's token field, or the
/// leading digits of an older-format mark. A number too long for a `u64`
/// was never a token and does not count.
fn visible_mark(bytes: &[u8]) -> Option<Token> {
    if let Ok(token) = parse_mark(bytes) {
        return Some(token);
    }
    let rest = bytes
        .strip_prefix(MARK_HEADER.as_bytes())
        .map_or(bytes, |r| r.strip_prefix(b" ").unwrap_or(r));
    let digits: String = rest
        .iter()
        .map(|b| char::from(*b))
        .take_while(char::is_ascii_digit)
        .collect();
    let value = digits.parse::<u64>().ok()?;
    Epoch::new(value.min(Epoch::MAX.get())).map(Token::from_epoch)
}

/// Raises the mark durably: the new line written over the old in place
/// (`mark`, the open and locked mark file, whose read found `len` bytes),
/// then `fdatasync` (`fsync` where `O_NOATIME` was refused); a new file's
/// directory entry (`created`) is synced too.
fn write_mark(
    inner: &Inner,
    paths: &Paths,
    mark: &MarkFile,
    len: u64,
    token: Token,
    created: bool,
) -> Result<(), Error> {
    let MarkFile { file, no_atime } = mark;
    let line = mark_line(token);
    file.write_all_at(line.as_bytes(), 0)
        .map_err(unavailable(&paths.mark))?;
    // A mark in the older format is shorter; anything longer was refused
    // as corrupt before. Never shorten a file while a reader may look.
    if len > MARK_LEN as u64 {
        file.set_len(MARK_LEN as u64)
            .map_err(unavailable(&paths.mark))?;
    }
    // Where reads may have dirtied the access time (no `O_NOATIME`), a
    // full `fsync` measured faster than `fdatasync` (ADR 0034); both make
    // the line durable.
    if *no_atime {
        file.sync_data()
    } else {
        file.sync_all()
    }
    .map_err(unavailable(&paths.mark))?;
    if created {
        inner
            .dir_handle
            .sync_all()
            .map_err(unavailable(&inner.dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{drop_during_the_write, res, t};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    /// A fence in a new temporary directory (kept as long as the first).
    fn fresh() -> (tempfile::TempDir, FileFence) {
        let tmp = tempfile::tempdir().unwrap();
        let fence = FileFence::open(tmp.path()).unwrap();
        (tmp, fence)
    }

    /// Tries to lock `path` from a new open of the file, without waiting:
    /// `Some(file)` holds the lock, `None` means someone else holds it.
    fn try_lock(path: &Path) -> Option<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        match fcntl(&file, FcntlArg::F_OFD_SETLK(&whole_file_write_lock())) {
            Ok(_) => Some(file),
            Err(Errno::EAGAIN | Errno::EACCES) => None,
            Err(e) => panic!("probe failed: {e}"),
        }
    }

    #[tokio::test]
    async fn marks_survive_reopening_and_refuse_older_tokens() {
        let tmp = tempfile::tempdir().unwrap();
        let r = res("orders");
        {
            let fence = FileFence::open(tmp.path()).unwrap();
            assert_eq!(fence.advance(&r, t(7)).await.unwrap().previous, None);
        }
        let fence = FileFence::open(tmp.path()).unwrap();
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(7)));
        let err = fence.advance(&r, t(6)).await.unwrap_err();
        assert!(
            matches!(err, Error::Stale { presented, high_water_mark, .. }
                if presented == t(6) && high_water_mark == t(7)),
            "{err:?}"
        );
        let same = fence.advance(&r, t(7)).await.unwrap();
        assert_eq!((same.previous, same.raised()), (Some(t(7)), false));
        fence.advance(&r, t(8)).await.unwrap();
        assert_eq!(
            fs::read_to_string(tmp.path().join("orders.fence")).unwrap(),
            mark_line(t(8))
        );
        assert!(!tmp.path().join("orders.fence.tmp").exists());
        assert!(tmp.path().join("orders.fence.lock").exists());
    }

    #[tokio::test]
    async fn the_lock_is_held_across_the_write_and_the_mark_is_durable_first() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let lock_path = tmp.path().join("r.fence.lock");
        let mark_path = tmp.path().join("r.fence");
        fence
            .fenced(&r, t(3), || async {
                assert!(
                    try_lock(&lock_path).is_none(),
                    "lock not held during the write"
                );
                assert_eq!(fs::read_to_string(&mark_path).unwrap(), mark_line(t(3)));
            })
            .await
            .unwrap();
        assert!(try_lock(&lock_path).is_some(), "lock kept after the write");
    }

    #[tokio::test]
    async fn a_stale_write_never_runs() {
        let (tmp, fence) = fresh();
        let r = res("r");
        fence.advance(&r, t(5)).await.unwrap();
        let ran = AtomicBool::new(false);
        let out = fence
            .fenced(&r, t(1), || async { ran.store(true, Ordering::SeqCst) })
            .await;
        assert!(matches!(out, Err(Error::Stale { .. })), "{out:?}");
        assert!(!ran.load(Ordering::SeqCst));
        assert!(try_lock(&tmp.path().join("r.fence.lock")).is_some());
    }

    #[tokio::test]
    async fn an_unreadable_mark_is_corrupt_never_absent() {
        let (tmp, fence) = fresh();
        let r = res("r");
        for bad in [
            "",
            "\n",
            "0\n",
            "-3\n",
            "7\n\n",
            " 7",
            "seven",
            "99999999999999999999\n",
        ] {
            fs::write(tmp.path().join("r.fence"), bad).unwrap();
            let ran = AtomicBool::new(false);
            let out = fence
                .fenced(&r, t(9), || async { ran.store(true, Ordering::SeqCst) })
                .await;
            assert!(
                matches!(out, Err(Error::Corrupt { .. })),
                "{bad:?}: {out:?}"
            );
            assert!(!ran.load(Ordering::SeqCst));
            let read = fence.high_water_mark(&r).await;
            assert!(
                matches!(read, Err(Error::Corrupt { .. })),
                "{bad:?}: {read:?}"
            );
            assert!(out.unwrap_err().is_permanent());
            assert_eq!(
                fs::read(tmp.path().join("r.fence")).unwrap(),
                bad.as_bytes()
            );
        }
        // Hand-written marks without the newline are fine.
        fs::write(tmp.path().join("r.fence"), "4").unwrap();
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(4)));
        let mut big = vec![b'1'; 10_000];
        big.push(b'\n');
        fs::write(tmp.path().join("r.fence"), big).unwrap();
        assert!(matches!(
            fence.advance(&r, t(1)).await,
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn mark_lines_round_trip_at_a_fixed_size() {
        for n in [1, 2, 42, i64::MAX as u64] {
            let line = mark_line(t(n));
            assert_eq!(line.len(), MARK_LEN, "{line}");
            assert_eq!(parse_mark(line.as_bytes()), Ok(t(n)));
        }
        assert_eq!(
            mark_line(t(12)),
            "fencing-mark/1 00000000000000000012 ".to_owned()
                + &format!("{:016x}\n", fnv1a(b"fencing-mark/1 00000000000000000012 "))
        );
    }

    /// A power cut during the in-place rewrite of a mark leaves any prefix
    /// of the new line over the old one (or over an older-format mark):
    /// the mark then reads as corrupt, or as the old mark when the bytes
    /// written so far did not differ (as the new one when the rest did
    /// not); never anything else, and never lower.
    #[tokio::test]
    async fn a_torn_mark_is_corrupt_and_never_lowers_the_mark() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let path = tmp.path().join("r.fence");
        for old in [mark_line(t(7)).into_bytes(), b"7\n".to_vec()] {
            let new = mark_line(t(9)).into_bytes();
            let mut corrupt = 0;
            for cut in 1..new.len() {
                let mut torn = new[..cut].to_vec();
                torn.extend_from_slice(old.get(cut..).unwrap_or_default());
                fs::write(&path, &torn).unwrap();
                let read = fence.high_water_mark(&r).await;
                if torn == old || torn == new {
                    // The bytes written so far did not differ from the old
                    // line's, or the rest did not: a whole line.
                    let m = read.unwrap().unwrap();
                    assert_eq!(m, if torn == new { t(9) } else { t(7) }, "cut at {cut}");
                    continue;
                }
                assert!(
                    matches!(read, Err(Error::Corrupt { .. })),
                    "cut at {cut}: {read:?}"
                );
                corrupt += 1;
                // Nothing is accepted, not even a token above both.
                let ran = AtomicBool::new(false);
                let out = fence
                    .fenced(&r, t(100), || async { ran.store(true, Ordering::SeqCst) })
                    .await;
                assert!(matches!(out, Err(Error::Corrupt { .. })), "{out:?}");
                assert!(!ran.load(Ordering::SeqCst));
                let low = fence.advance(&r, t(8)).await;
                assert!(matches!(low, Err(Error::Corrupt { .. })), "{low:?}");
                assert_eq!(fs::read(&path).unwrap(), torn, "the torn mark was touched");
            }
            assert!(corrupt > 0);
        }
        // A flipped digit (bit rot) is caught by the checksum.
        let mut rot = mark_line(t(7)).into_bytes();
        rot[MARK_HEADER.len() + 19] = b'3';
        fs::write(&path, &rot).unwrap();
        assert!(matches!(
            fence.high_water_mark(&r).await,
            Err(Error::Corrupt { .. })
        ));
    }

    #[tokio::test]
    async fn an_older_format_mark_is_read_and_rewritten_at_the_next_raise() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let path = tmp.path().join("r.fence");
        fs::write(&path, "5\n").unwrap();
        // The empty lock file that version left beside it.
        let lock = tmp.path().join("r.fence.lock");
        fs::write(&lock, "").unwrap();
        assert!(matches!(
            fence.advance(&r, t(4)).await,
            Err(Error::Stale { .. })
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), "5\n");
        assert_eq!(fs::read(&lock).unwrap(), LOCK_KEPT, "the mark is recorded");
        fence.advance(&r, t(6)).await.unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), mark_line(t(6)));
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(6)));
    }

    #[tokio::test]
    async fn io_failures_are_unavailable_with_the_io_error() {
        let (tmp, fence) = fresh();
        // A directory where the mark file should be cannot be read (beside
        // a lock file: without one, a mark file is a deleted lock file).
        fs::write(tmp.path().join("r.fence.lock"), "").unwrap();
        fs::create_dir(tmp.path().join("r.fence")).unwrap();
        let err = fence.advance(&res("r"), t(1)).await.unwrap_err();
        let Error::Unavailable { location, source } = &err else {
            panic!("{err:?}")
        };
        assert!(location.ends_with("r.fence"), "{location}");
        assert!(source.downcast_ref::<io::Error>().is_some());
        assert!(!err.is_permanent());
        assert!(try_lock(&tmp.path().join("r.fence.lock")).is_some());
    }

    #[tokio::test]
    async fn dropping_fenced_during_the_write_unlocks() {
        let (tmp, fence) = fresh();
        let r = res("r");
        drop_during_the_write(&fence, &r, t(2)).await;
        assert!(try_lock(&tmp.path().join("r.fence.lock")).is_some());
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(2)));
    }

    #[tokio::test]
    async fn an_abandoned_waiter_releases_the_lock_and_leaves_the_mark() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let other = try_lock(&tmp.path().join("r.fence.lock")).expect("free at first");
        {
            let waiting = fence.advance(&r, t(9));
            tokio::pin!(waiting);
            for _ in 0..3 {
                assert!(
                    futures_poll_once(waiting.as_mut()).await.is_none(),
                    "got a lock that another open holds"
                );
            }
        } // dropped while its thread waits in the kernel
        drop(other);
        let bound = Duration::from_secs(30);
        let next = tokio::time::timeout(bound, fence.advance(&r, t(5))).await;
        assert_eq!(next.expect("lock leaked").unwrap().previous, None);
        let again = tokio::time::timeout(
            bound,
            FileFence::open(tmp.path()).unwrap().advance(&r, t(5)),
        )
        .await
        .expect("lock leaked")
        .unwrap();
        assert_eq!(
            again.previous,
            Some(t(5)),
            "the abandoned token was written"
        );
    }

    /// Polls `fut` once, yielding to the runtime first.
    async fn futures_poll_once<F: Future + Unpin>(mut fut: F) -> Option<F::Output> {
        tokio::task::yield_now().await;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
                std::task::Poll::Ready(out) => Some(out),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tasks_sharing_one_handle_write_one_at_a_time() {
        let (_tmp, fence) = fresh();
        let inside = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for n in 1..=8 {
            let (fence, inside) = (fence.clone(), Arc::clone(&inside));
            tasks.spawn(async move {
                let r = res("shared");
                let _ = fence
                    .fenced(&r, t(n), || async {
                        assert_eq!(
                            inside.fetch_add(1, Ordering::SeqCst),
                            0,
                            "two writers inside"
                        );
                        tokio::task::yield_now().await;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await;
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        assert_eq!(
            fence.high_water_mark(&res("shared")).await.unwrap(),
            Some(t(8))
        );
    }

    /// Checks and raises read the mark with `O_NOATIME` (the test process
    /// owns the file): its access time stays where it was, so the inode is
    /// not dirtied before the `fdatasync` (ADR 0034). Under `relatime` a
    /// plain read would move an access time older than the last write.
    #[tokio::test]
    async fn checking_the_mark_leaves_its_access_time_alone() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let path = tmp.path().join("r.fence");
        fence.advance(&r, t(1)).await.unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_times(fs::FileTimes::new().set_accessed(old))
            .unwrap();
        fence.advance(&r, t(2)).await.unwrap();
        assert!(!fence.advance(&r, t(2)).await.unwrap().raised());
        assert!(fence.advance(&r, t(1)).await.is_err());
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(2)));
        let accessed = fs::metadata(&path).unwrap().accessed().unwrap();
        assert_eq!(accessed, old, "a check or a read moved the access time");
        assert_eq!(fs::read_to_string(&path).unwrap(), mark_line(t(2)));
    }

    #[test]
    fn a_refused_no_atime_open_is_retried_without_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("m");
        fs::write(&path, "x").unwrap();
        let tries = Mutex::new(Vec::new());
        let opened = with_no_atime_fallback(|no_atime| {
            tries.lock().unwrap().push(no_atime);
            if no_atime {
                Err(io::Error::from_raw_os_error(libc::EPERM))
            } else {
                File::open(&path)
            }
        })
        .unwrap();
        assert!(!opened.no_atime);
        assert_eq!(*tries.lock().unwrap(), [true, false]);
        // Other errors are not retried.
        tries.lock().unwrap().clear();
        let err = with_no_atime_fallback(|no_atime| {
            tries.lock().unwrap().push(no_atime);
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        })
        .err()
        .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(*tries.lock().unwrap(), [true]);
        assert!(
            with_no_atime_fallback(|_| File::open(&path))
                .unwrap()
                .no_atime
        );
    }

    #[test]
    fn open_refuses_files_and_creates_missing_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("plain");
        fs::write(&file, "").unwrap();
        let err = FileFence::open(&file).unwrap_err();
        assert!(
            matches!(err, Error::Config(ConfigError::Location { .. })),
            "{err:?}"
        );
        let err = FileFence::open(file.join("below")).unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
        let fence = FileFence::open(tmp.path().join("x/y")).unwrap();
        assert!(fence.dir().is_absolute());
        assert_eq!(fence.dir(), tmp.path().join("x/y").canonicalize().unwrap());
        assert!(format!("{fence:?}").starts_with("FileFence { dir: "));
    }

    /// Appends `line` to the file at `path`: the protected resource of the
    /// deletion tests, a real file.
    fn append(path: &Path, line: &str) {
        use std::io::Write;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    /// Issue 23, item 4: with the mark file removed, token 3 was accepted
    /// after mark 5 ("no mark"). A fence that has had a mark never reads
    /// "no mark" again.
    #[tokio::test]
    async fn a_deleted_mark_file_is_corrupt_never_no_mark() {
        let (tmp, fence) = fresh();
        let r = res("r");
        fence.advance(&r, t(5)).await.unwrap();
        fs::remove_file(tmp.path().join("r.fence")).unwrap();
        for fence in [fence.clone(), FileFence::open(tmp.path()).unwrap()] {
            let ran = AtomicBool::new(false);
            let out = fence
                .fenced(&r, t(3), || async { ran.store(true, Ordering::SeqCst) })
                .await;
            assert!(
                !ran.load(Ordering::SeqCst),
                "token 3 accepted after mark 5 with the mark file deleted: {out:?}"
            );
            assert!(matches!(out, Err(Error::Corrupt { .. })), "{out:?}");
            let read = fence.high_water_mark(&r).await;
            assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
            let high = fence.advance(&r, t(9)).await;
            assert!(matches!(high, Err(Error::Corrupt { .. })), "{high:?}");
        }
        assert!(!tmp.path().join("r.fence").exists(), "nothing recreated it");
    }

    /// Issue 23, item 4: with the lock file removed while a writer runs,
    /// the next writer locked a fresh inode and ran beside it: a token-3
    /// write landed after a token-5 write. Two handles (as two processes
    /// would), two real concurrent writers, one real output file.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_deleted_lock_file_never_lets_a_second_writer_in() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fences");
        let out = tmp.path().join("resource.log");
        let r = res("r");
        let (first, second) = (
            FileFence::open(&dir).unwrap(),
            FileFence::open(&dir).unwrap(),
        );
        first.advance(&r, t(2)).await.unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let (entered_tx, entered_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let slow = {
            let (r, out, inside) = (r.clone(), out.clone(), Arc::clone(&inside));
            tokio::spawn(async move {
                first
                    .fenced(&r, t(3), || async move {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                        entered_tx.send(()).unwrap();
                        go_rx.await.unwrap();
                        append(&out, "3");
                        inside.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
            })
        };
        entered_rx.await.unwrap();
        fs::remove_file(dir.join("r.fence.lock")).unwrap();
        let second_inside = Arc::clone(&inside);
        let fast = tokio::time::timeout(
            Duration::from_secs(60),
            second.fenced(&r, t(5), || async {
                let others = second_inside.fetch_add(1, Ordering::SeqCst);
                append(&out, "5");
                second_inside.fetch_sub(1, Ordering::SeqCst);
                others
            }),
        )
        .await
        .expect("the second writer neither entered nor was refused");
        go_tx.send(()).unwrap();
        let slow = slow.await.unwrap();
        let log = fs::read_to_string(&out).unwrap();
        assert!(
            log != "5\n3\n",
            "a token-3 write landed after a token-5 write (lock file deleted while the \
             token-3 writer ran; the second writer was inside beside it: {fast:?})"
        );
        assert!(
            matches!(fast, Err(Error::Corrupt { .. })),
            "the second writer was not refused: {fast:?}"
        );
        slow.unwrap();
        assert_eq!(log, "3\n");
        // Still refused until repaired.
        let again = FileFence::open(&dir).unwrap().advance(&r, t(6)).await;
        assert!(matches!(again, Err(Error::Corrupt { .. })), "{again:?}");
    }

    /// Waits (bounded) until the kernel shows a writer blocked on an OFD
    /// lock of the file at `path` (`/proc/locks` lists waiters with `->`),
    /// or until `done` is true: returns whether one was blocked.
    async fn blocked_on(path: &Path, done: impl Fn() -> bool) -> bool {
        use std::os::unix::fs::MetadataExt;
        let ino = format!(":{} ", fs::metadata(path).unwrap().ino());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let locks = fs::read_to_string("/proc/locks").unwrap();
            if locks
                .lines()
                .any(|l| l.contains("->") && l.contains("OFDLCK") && l.contains(&ino))
            {
                return true;
            }
            if done() {
                return false;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "neither blocked nor done"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// A lock file deleted while a writer runs and then created again (by
    /// hand, or by an earlier version of this crate): a second writer locks
    /// the new one, but waits on the mark file's lock until the writer
    /// inside is done, and then sees its mark.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_writer_on_a_recreated_lock_file_waits_for_the_one_inside() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("fences");
        let out = tmp.path().join("resource.log");
        let r = res("r");
        let (first, second) = (
            FileFence::open(&dir).unwrap(),
            FileFence::open(&dir).unwrap(),
        );
        first.advance(&r, t(2)).await.unwrap();
        let (entered_tx, entered_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let slow = {
            let (r, out) = (r.clone(), out.clone());
            tokio::spawn(async move {
                first
                    .fenced(&r, t(3), || async move {
                        entered_tx.send(()).unwrap();
                        go_rx.await.unwrap();
                        append(&out, "3");
                    })
                    .await
            })
        };
        entered_rx.await.unwrap();
        fs::remove_file(dir.join("r.fence.lock")).unwrap();
        fs::write(dir.join("r.fence.lock"), "").unwrap();
        let fast = {
            let (r, out) = (r.clone(), out.clone());
            tokio::spawn(async move {
                second
                    .fenced(&r, t(5), || async move { append(&out, "5") })
                    .await
            })
        };
        let waited = blocked_on(&dir.join("r.fence"), || fast.is_finished()).await;
        let early = fs::read_to_string(&out).unwrap_or_default();
        assert!(
            waited,
            "the token-5 writer ran while the token-3 writer was inside (log {early:?})"
        );
        go_tx.send(()).unwrap();
        slow.await.unwrap().unwrap();
        fast.await.unwrap().unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "3\n5\n");
    }

    #[tokio::test]
    async fn a_repair_sets_the_mark_never_below_what_is_left() {
        let (tmp, fence) = fresh();
        let r = res("r");
        let (lock, mark) = (tmp.path().join("r.fence.lock"), tmp.path().join("r.fence"));
        fence.advance(&r, t(5)).await.unwrap();
        assert_eq!(fs::read(&lock).unwrap(), LOCK_KEPT);
        // A writer holds the lock: refused, nothing changed.
        let held = try_lock(&lock).unwrap();
        let busy = fence.repair(&r, t(9));
        assert!(matches!(busy, Err(Error::Unavailable { .. })), "{busy:?}");
        drop(held);
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(5)));

        // The lock file deleted: refused until repaired, never below 5.
        fs::remove_file(&lock).unwrap();
        let refused = fence.advance(&r, t(6)).await;
        assert!(matches!(refused, Err(Error::Corrupt { .. })), "{refused:?}");
        let low = fence.repair(&r, t(4));
        assert!(
            matches!(low, Err(Error::Stale { presented, high_water_mark, .. })
                if presented == t(4) && high_water_mark == t(5)),
            "{low:?}"
        );
        assert_eq!(fence.repair(&r, t(5)).unwrap(), Some(t(5)));
        assert_eq!(fs::read(&lock).unwrap(), LOCK_KEPT);
        assert!(matches!(
            fence.advance(&r, t(4)).await,
            Err(Error::Stale { .. })
        ));
        assert!(fence.advance(&r, t(6)).await.unwrap().raised());

        // A torn mark: the digits left in its token field are the floor.
        fs::write(&mark, "fencing-mark/1 0000000000000000009").unwrap();
        assert!(matches!(
            fence.advance(&r, t(10)).await,
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(fence.repair(&r, t(8)), Err(Error::Stale { .. })));
        assert_eq!(fence.repair(&r, t(9)).unwrap(), Some(t(9)), "what was left");
        assert_eq!(fs::read_to_string(&mark).unwrap(), mark_line(t(9)));

        // The mark file deleted: nothing is left to see; the operator's
        // mark is taken.
        fs::remove_file(&mark).unwrap();
        assert_eq!(fence.repair(&r, t(12)).unwrap(), None);
        assert!(matches!(
            fence.advance(&r, t(11)).await,
            Err(Error::Stale { .. })
        ));
        assert_eq!(fence.high_water_mark(&r).await.unwrap(), Some(t(12)));
    }

    /// Cleaners of temporary files delete empty files: once a resource has
    /// a mark its lock file is never empty, and deleting every empty file
    /// of the directory leaves the fence whole.
    #[tokio::test]
    async fn an_empty_file_cleaner_leaves_a_fence_with_a_mark_alone() {
        let (tmp, fence) = fresh();
        let r = res("r");
        fence.advance(&r, t(5)).await.unwrap();
        for entry in fs::read_dir(tmp.path()).unwrap() {
            let entry = entry.unwrap();
            if entry.metadata().unwrap().len() == 0 {
                fs::remove_file(entry.path()).unwrap();
            }
        }
        assert!(
            tmp.path().join("r.fence.lock").exists(),
            "the lock file was empty, and deleted"
        );
        assert!(matches!(
            fence.advance(&r, t(3)).await,
            Err(Error::Stale { .. })
        ));
        assert!(fence.advance(&r, t(6)).await.unwrap().raised());
    }

    #[test]
    fn network_filesystems_are_recognised() {
        assert_eq!(network_filesystem(0x6969), Some("NFS"));
        assert_eq!(network_filesystem(0xFF53_4D42), Some("CIFS"));
        // statfs may sign-extend the 32-bit magic.
        assert_eq!(network_filesystem(0xFFFF_FFFF_FE53_4D42), Some("SMB2"));
        assert_eq!(network_filesystem(0xEF53), None); // ext4
        assert_eq!(network_filesystem(0x6573_5546), None); // FUSE
    }
}
