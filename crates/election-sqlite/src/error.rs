//! Errors of the SQLite backend.

use std::path::PathBuf;

use election_core::{Class, Classify, ConfigError, Disposition, ElectionName};
use election_sql::IntoCore;

/// What can go wrong with the SQLite backend, grouped by what the caller
/// should do: fix the configuration (`Config`, `ReadOnly`, `SchemaTooNew`,
/// `NotAFile`, `PathUnresolvable`, `FileReplaced`, `SecondName`, `Unusable`; `Config` also carries
/// [`ConfigError::EpochExhausted`] when a name has used every epoch up to
/// [`Epoch::MAX`](election_core::Epoch::MAX)), repair the stored state (`CorruptRow`), retry later
/// (`Busy`, `Database`, `Io`), or treat the claim as not held
/// (`OutcomeUnknown`).
///
/// Inside a campaign these reach the caller as the `source` of an
/// [`election_core::Error`]: `Config`, `Corrupt`, `Unavailable` or
/// `OutcomeUnknown` respectively.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database stayed locked by another connection for longer than
    /// the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`). Retry later.
    #[error("the database is busy (locked by another connection past the busy timeout)")]
    Busy(#[source] sqlx::Error),
    /// The database cannot be written (read-only file or filesystem,
    /// permissions). Give the process write access.
    #[error("the database is read-only for this process")]
    ReadOnly(#[source] sqlx::Error),
    /// The database path is not a usable file (a directory, a missing
    /// parent directory).
    #[error("{path} is not a usable database file")]
    NotAFile {
        /// The path given.
        path: PathBuf,
        /// What the OS or SQLite said.
        #[source]
        source: Option<sqlx::Error>,
    },
    /// The database file's path cannot be resolved to its canonical form
    /// (a component vanished or cannot be searched), which names the
    /// same-host lock directory beside the database, so that every spelling
    /// of one path (symlinks, `..`) uses the same lock files. Fix the path
    /// or the permissions of its directories.
    #[error("cannot resolve the database path {path}")]
    PathUnresolvable {
        /// The path SQLite opened.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The database was written by a newer version of this crate.
    #[error(
        "the election schema is version {found}, newer than the {supported} this version supports; upgrade"
    )]
    SchemaTooNew {
        /// The version found in the database.
        found: i64,
        /// The newest version this crate knows.
        supported: i64,
    },
    /// The database file was deleted or replaced after it was opened: this
    /// process's connections still use the old file, while a process
    /// opening the path gets another database. No claim is made through
    /// them; reopen the database. If the new file lacks the old one's
    /// `election_epochs` table, its epochs start again and can repeat
    /// earlier ones (see the crate docs: never do this while candidates
    /// run).
    #[error(
        "the database file {path} was deleted or replaced after it was opened; reopen it (epochs in a replaced file can repeat)"
    )]
    FileReplaced {
        /// The path opened.
        path: PathBuf,
    },
    /// The database file has a second name, through which SQLite would keep
    /// a `-wal` and `-shm` file of its own (it names them after the path it
    /// was given): a second hard link, or a mount of the file on its own
    /// (a bind mount of the file, as `docker run -v
    /// /srv/app.db:/data/app.db` makes). Candidates on two names of one
    /// database do not exclude each other and can both be elected, with
    /// the same epoch (ADR 0046). Refused at open; a holder that finds one
    /// later loses its term, and no claim is made through the database
    /// while it lasts. Remove the second hard link; mount the directory,
    /// not the file.
    #[error("{path} {}", second_name_fix(*hard_links, *own_mount))]
    SecondName {
        /// The path opened.
        path: PathBuf,
        /// The file's hard links (`st_nlink`): more than 1 is a second name.
        hard_links: u64,
        /// The path is a mount of the file on its own.
        own_mount: bool,
    },
    /// A lease row holds values this crate never writes (a negative epoch,
    /// an epoch of 0 with a holder). No term is handed out from it.
    #[error("corrupt lease row for {name}: {detail}")]
    CorruptRow {
        /// The election.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// The file is not a usable election database, and retrying will not
    /// change that: not a SQLite file (`SQLITE_NOTADB`), a damaged one
    /// (`SQLITE_CORRUPT`), election tables of another shape or another SQL
    /// error in this crate's fixed statements (`SQLITE_ERROR`,
    /// `SQLITE_CONSTRAINT`, `SQLITE_MISMATCH`), or access SQLite refuses
    /// (`SQLITE_PERM`, `SQLITE_AUTH`). Point the backend at another file, or
    /// restore this one from a backup.
    #[error("the database file is not a usable election database")]
    Unusable(#[source] sqlx::Error),
    /// Another database error (a full disk, an I/O error, ...); retrying
    /// may help.
    #[error("a database statement failed: {0}")]
    Database(sqlx::Error),
    /// A statement did not finish within its bound; it may or may not have
    /// committed. The claim counts as not held.
    #[error("a database statement timed out after {after:?}; its outcome is unknown")]
    OutcomeUnknown {
        /// The bound that ran out.
        after: std::time::Duration,
    },
    /// A bad name, identity or setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What [`Error::SecondName`] says: what the second name is, why it is
/// refused and the fix.
fn second_name_fix(hard_links: u64, own_mount: bool) -> String {
    let why = "SQLite keeps a -wal and -shm file per name, so candidates on two names of one database do not exclude each other and can both be elected";
    match (hard_links > 1, own_mount) {
        (true, true) => format!(
            "has {hard_links} hard links and is a mount point of its own: {why}; remove the second hard link, and mount the directory, not the file"
        ),
        (true, false) => format!(
            "has {hard_links} hard links: {why}; remove the second hard link (keep one name for the database file)"
        ),
        _ => format!(
            "is a mount point of its own (the file, not its directory, is mounted here, as `docker run -v /srv/app.db:/data/app.db` does): {why}; mount the directory, not the file (e.g. -v /srv/db:/data)"
        ),
    }
}

/// What to do, with the fix named in the terms of a backend URL and of
/// `elect`, this backend's tool.
impl Classify for Error {
    fn class(&self) -> Class {
        let permanent = |hint: &str| Class::new(Disposition::Permanent).hint(hint);
        let transient = |hint: &str| Class::new(Disposition::Transient).hint(hint);
        match self {
            Error::Busy(_) => {
                transient("the database stayed locked by another connection; try again later")
            }
            Error::OutcomeUnknown { .. } => {
                transient("a database statement did not finish in time; try again later")
            }
            Error::Database(_) if self.is_disk_full() => {
                transient("the database's filesystem is full: free space, then try again")
            }
            Error::Database(_) => transient("the database failed; check the disk, then try again"),
            Error::Unusable(_) => permanent(
                "the file is not an election database elect can use (not SQLite, damaged, or \
                 election_* tables of another shape): point --backend at another file, or \
                 restore this one from a backup (never delete its election_epochs table)",
            ),
            Error::ReadOnly(_) => permanent(
                "give this user write access to the database file and its directory (SQLite \
                 writes -wal and -shm files beside it)",
            ),
            Error::NotAFile { .. } => permanent(
                "point --backend at a database file in an existing directory \
                 (sqlite:///path/to/app.db)",
            ),
            Error::PathUnresolvable { .. } => permanent(
                "the database path cannot be resolved: check that every directory on it exists \
                 and can be searched by this user",
            ),
            Error::SchemaTooNew { .. } => {
                permanent("upgrade elect: a newer version wrote this database")
            }
            Error::FileReplaced { .. } => permanent(
                "the database file was replaced while elect ran: never replace it while \
                 candidates run",
            ),
            Error::CorruptRow { .. } => permanent(
                "a lease row holds values elect never writes: restore the database from a backup",
            ),
            Error::SecondName {
                own_mount: true, ..
            } => permanent(
                "mount the directory that holds the database, not the file itself (docker: -v \
                 /srv/db:/data, not -v /srv/db/app.db:/data/app.db): SQLite names its -wal and \
                 -shm after the path it opens, so two names of one file elect two leaders",
            ),
            Error::SecondName { .. } => permanent(
                "remove the second hard link to the database file and use one name for it: \
                 SQLite names its -wal and -shm after the path it opens, so two names of one \
                 file elect two leaders",
            ),
            Error::Config(_) => Class::new(Disposition::Permanent),
        }
    }
}

/// SQLite's primary result codes we tell apart (extended codes are reduced
/// with `& 0xff`).
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_READONLY: i64 = 8;
const SQLITE_FULL: i64 = 13;
const SQLITE_CANTOPEN: i64 = 14;
/// Codes of a file or schema that retrying cannot fix.
const UNUSABLE: &[i64] = &[
    1,  // SQLITE_ERROR: SQL error, e.g. no such column
    3,  // SQLITE_PERM
    11, // SQLITE_CORRUPT
    19, // SQLITE_CONSTRAINT: a table of another shape
    20, // SQLITE_MISMATCH
    23, // SQLITE_AUTH
    24, // SQLITE_FORMAT
    26, // SQLITE_NOTADB
];

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        if matches!(e, sqlx::Error::PoolTimedOut) {
            // Every connection of the pool is in use: as transient as a
            // locked database.
            return Error::Busy(e);
        }
        let code = match &e {
            sqlx::Error::Database(d) => d.code().and_then(|c| c.parse::<i64>().ok()),
            _ => None,
        };
        match code.map(|c| c & 0xff) {
            Some(SQLITE_BUSY | SQLITE_LOCKED) => Error::Busy(e),
            Some(SQLITE_READONLY) => Error::ReadOnly(e),
            Some(SQLITE_CANTOPEN) => Error::NotAFile {
                path: PathBuf::new(),
                source: Some(e),
            },
            Some(c) if UNUSABLE.contains(&c) => Error::Unusable(e),
            _ => Error::Database(e),
        }
    }
}

impl Error {
    /// This error as the core's error, grouped by what the caller should do.
    ///
    /// ```
    /// use election_core::ElectionName;
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// // A directory where the database file belongs:
    /// let opened = SqliteElection::open(tmp.path(), SqliteOptions::default()).await;
    /// let err = opened.expect_err("a directory is not a database file");
    /// // As the core's error: `Config`, which no retry fixes (fix the path).
    /// let core = err.into_core(&ElectionName::new("jobs")?);
    /// assert!(matches!(core, election_core::Error::Config(_)));
    /// # Ok(()) }
    /// ```
    pub fn into_core(self, name: &ElectionName) -> election_core::Error {
        IntoCore::into_core(self, name)
    }

    /// True for a database whose disk is full (`SQLITE_FULL`): transient,
    /// as retrying helps once space is freed.
    ///
    /// ```
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # let path = tmp.path().join("app.db");
    /// match SqliteElection::open(&path, SqliteOptions::default()).await {
    ///     Ok(election) => println!("opened; options {:?}", election.options()),
    ///     // Transient: retry once space is freed.
    ///     Err(e) if e.is_disk_full() => eprintln!("disk full, retrying later: {e}"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(d)) => d
                .code()
                .and_then(|c| c.parse::<i64>().ok())
                .is_some_and(|c| c & 0xff == SQLITE_FULL),
            _ => false,
        }
    }

    /// True for a busy or locked database.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_sqlite::{SqliteElection, SqliteOptions};
    /// use sqlx::Connection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let path = tmp.path().join("app.db");
    /// let election = SqliteElection::open(&path, SqliteOptions::default()).await?;
    /// // Another connection holds the database's write lock...
    /// let mut other = election.pool().acquire().await?;
    /// let tx = other.begin_with("BEGIN IMMEDIATE").await?;
    ///
    /// // ...so a second open, which migrates in a write transaction, times out.
    /// let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(20))?;
    /// let err = SqliteElection::open(&path, options).await.expect_err("the write lock is taken");
    /// assert!(err.is_busy()); // transient: retry
    /// tx.rollback().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Busy(_))
    }
}

election_sql::impl_into_core!(Error {
    location: Error::ReadOnly(_)
        | Error::SchemaTooNew { .. }
        | Error::NotAFile { .. }
        | Error::PathUnresolvable { .. }
        | Error::Unusable(_)
        | Error::FileReplaced { .. }
        | Error::SecondName { .. },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_for_the_caller() {
        let name = ElectionName::new("n").unwrap();
        assert!(matches!(
            Error::SchemaTooNew {
                found: 9,
                supported: 1
            }
            .into_core(&name),
            election_core::Error::Config(_)
        ));
        // Corrupt rows and unknown outcomes: the shared mapping
        // (election_sql::impl_into_core!, tested there).
        assert!(matches!(
            Error::Database(sqlx::Error::PoolClosed).into_core(&name),
            election_core::Error::Unavailable { .. }
        ));
        assert!(Error::from(sqlx::Error::PoolTimedOut).is_busy());
    }
}
