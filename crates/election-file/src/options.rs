//! Settings of the file backend: [`FileOptions`], checked when the
//! election is made ([`FileElection::with_options`](crate::FileElection::with_options)).

use std::time::Duration;

/// The default time between two checks that the claim file is still the
/// one the leader locked.
pub const DEFAULT_TAMPER_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Settings of a [`FileElection`](crate::FileElection), for [`FileElection::with_options`](crate::FileElection::with_options).
#[derive(Clone, Debug)]
pub struct FileOptions {
    pub(crate) allow_fuse: bool,
    pub(crate) allow_volatile: bool,
    pub(crate) allow_unknown_filesystem: bool,
    pub(crate) tamper_check_interval: Duration,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            allow_fuse: false,
            allow_volatile: false,
            allow_unknown_filesystem: false,
            tamper_check_interval: DEFAULT_TAMPER_CHECK_INTERVAL,
        }
    }
}

impl FileOptions {
    /// Accepts a directory on a FUSE filesystem, which is refused by
    /// default because many FUSE filesystems (sshfs, s3fs) are network
    /// ones. Only for local FUSE filesystems whose locks you trust. Such
    /// an election's leaders check their claim files every tamper check
    /// interval each (changes made by a FUSE daemon reach no inotify
    /// watch), not by the directory's events (ADR 0074).
    ///
    /// ```
    /// use election_file::{FileElection, FileOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// // A local FUSE filesystem whose locks you trust:
    /// let options = FileOptions::default().allow_fuse(true);
    /// let election = FileElection::with_options(tmp.path(), options)?;
    /// assert_eq!(election.dir(), tmp.path());
    /// # Ok(()) }
    /// ```
    pub fn allow_fuse(mut self, allow: bool) -> Self {
        self.allow_fuse = allow;
        self
    }

    /// Accepts a directory on a filesystem that a reboot empties (tmpfs,
    /// ramfs: `/run`, `/dev/shm`, `$XDG_RUNTIME_DIR`, often `/tmp`), which
    /// is refused by default ([`Error::VolatileFilesystem`](crate::Error::VolatileFilesystem)):
    /// the epoch record and its ceiling go with the reboot, so epochs
    /// start again at 2 and fencing tokens go backwards. Only where nothing
    /// fenced by this election outlives a reboot of this host either.
    ///
    /// ```
    /// use election_file::{FileElection, FileOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// // Tokens may restart after a reboot: nothing they fence outlives one.
    /// let options = FileOptions::default().allow_volatile(true);
    /// let election = FileElection::with_options(tmp.path(), options)?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn allow_volatile(mut self, allow: bool) -> Self {
        self.allow_volatile = allow;
        self
    }

    /// Accepts a directory on a filesystem of a type not known to be
    /// local, which is refused by default
    /// ([`Error::UnknownFilesystem`](crate::Error::UnknownFilesystem)):
    /// the check fails closed. Only for a filesystem whose locks you know
    /// to hold across every host that can reach it: on one whose locks are
    /// client-local (BeeGFS by default, for one), two hosts can both hold
    /// the lock, and both lead. Network filesystems the backend knows
    /// (NFS, SMB, Ceph, ...) stay refused, and so do tmpfs and ramfs
    /// (see [`allow_volatile`](FileOptions::allow_volatile)).
    ///
    /// ```
    /// use election_file::{FileElection, FileOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// // A local filesystem the backend does not know, whose locks you trust:
    /// let options = FileOptions::default().allow_unknown_filesystem(true);
    /// let election = FileElection::with_options(tmp.path(), options)?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn allow_unknown_filesystem(mut self, allow: bool) -> Self {
        self.allow_unknown_filesystem = allow;
        self
    }

    /// Which filesystem refusals these options lift.
    pub(crate) fn allowed(&self) -> crate::store::fstype::Allowed {
        crate::store::fstype::Allowed {
            fuse: self.allow_fuse,
            volatile: self.allow_volatile,
            unknown: self.allow_unknown_filesystem,
        }
    }

    /// Sets how often a leader checks that its election directory is
    /// still the one at its path (ADR 0074: a deleted or replaced claim
    /// file is seen at once by the directory's events; each claim file is
    /// also checked on its own every 60 intervals; between 10 ms and 1
    /// hour; checked by
    /// [`FileElection::with_options`](crate::FileElection::with_options)).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_file::{Error, FileElection, FileOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let options = FileOptions::default().tamper_check_interval(Duration::from_millis(200));
    /// let election = FileElection::with_options(tmp.path(), options)?;
    ///
    /// // Out of range (below 10 ms): refused when the election is made.
    /// let too_often = FileOptions::default().tamper_check_interval(Duration::from_millis(1));
    /// let refused = FileElection::with_options(tmp.path(), too_often);
    /// assert!(matches!(refused, Err(Error::Config(_))));
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn tamper_check_interval(mut self, interval: Duration) -> Self {
        self.tamper_check_interval = interval;
        self
    }
}
