//! The resources the candidates write to, guarded by a fence, and their
//! readers.
//!
//! A write is one record `<writer> <seq> <epoch>`: who wrote it, its
//! sequence number in that writer's history, and the epoch (fencing token)
//! it presented. Two resources, both local to the host:
//!
//! - [`FileLog`] (`file:<dir>`): a [`fencing::FileFence`] in `<dir>`
//!   (resource name `torture-log`); an accepted write appends the line
//!   `<writer> <seq> <epoch>` to `<dir>/log` and fsyncs it *inside*
//!   [`Fence::fenced`], so the check, the mark's advance and the append
//!   happen under one lock.
//! - [`SqlTable`] (`sqlite:<path>`): a SQLite database of its own (not the
//!   election's), table `torture_log`; a write is one `BEGIN IMMEDIATE`
//!   transaction with [`SqliteFence::advance_in`](election_sqlite::SqliteFence::advance_in) and the `INSERT`.
//!
//! - [`FencedLog`] (`sqlfence:<dir>`): a log file `<dir>/log` like
//!   [`FileLog`]'s, guarded by a [`SqliteFence`](election_sqlite::SqliteFence)
//!   in `<dir>/fence.db` through [`Fence::fenced`]: the append runs inside
//!   the fence's `BEGIN IMMEDIATE` transaction. [`FencedLog::write_then_drop`]
//!   drops the write's future right after the append ran (the `fdrop`
//!   fault): the mark must already be durable by then.
//!
//! In [`Mode::Unsafe`] the write skips the fence: the line is appended, the
//! row inserted, whatever the token. That mode exists only to show that the
//! checker catches what the fence prevents.
//!
//! The readers ([`FileLog::read`], [`SqlTable::read`], [`read_records`])
//! return the records in resource order: the log's lines in order, the
//! table's rows by id.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use fencing::{Fence, FileFence, ResourceName, Token};
use sqlx::Connection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// The fence's resource name, for both resources.
pub const RESOURCE_NAME: &str = "torture-log";
/// The log file of a [`FileLog`], inside its directory.
pub const LOG_FILE: &str = "log";
/// How long a [`SqlTable`] write waits for the database's write lock.
const SQL_BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether writes go through the fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every write is checked by the fence (the real thing).
    Safe,
    /// Writes skip the fence (only to prove the checker can fail).
    Unsafe,
}

/// Where the resource lives: `file:<dir>`, `sqlite:<path>` or
/// `sqlfence:<dir>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceSpec {
    /// A [`FileLog`] in this directory.
    File(PathBuf),
    /// A [`SqlTable`] in this database file.
    Sqlite(PathBuf),
    /// A [`FencedLog`] in this directory.
    SqliteFenced(PathBuf),
}

impl FromStr for ResourceSpec {
    type Err = ResourceError;

    /// Parses `file:<dir>` or `sqlite:<path>`.
    ///
    /// ```
    /// use torture::resource::ResourceSpec;
    /// let spec: ResourceSpec = "sqlite:/tmp/run/resource.db".parse().unwrap();
    /// assert_eq!(spec, ResourceSpec::Sqlite("/tmp/run/resource.db".into()));
    /// assert_eq!(spec.to_string(), "sqlite:/tmp/run/resource.db");
    /// assert!("s3:bucket".parse::<ResourceSpec>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, ResourceError> {
        let bad = || ResourceError::Spec(s.to_owned());
        let (scheme, path) = s.split_once(':').ok_or_else(bad)?;
        if path.is_empty() {
            return Err(bad());
        }
        match scheme {
            "file" => Ok(ResourceSpec::File(path.into())),
            "sqlite" => Ok(ResourceSpec::Sqlite(path.into())),
            "sqlfence" => Ok(ResourceSpec::SqliteFenced(path.into())),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for ResourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceSpec::File(dir) => write!(f, "file:{}", dir.display()),
            ResourceSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            ResourceSpec::SqliteFenced(dir) => write!(f, "sqlfence:{}", dir.display()),
        }
    }
}

/// One record of a resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The writer id (`c<slot>.<incarnation>`).
    pub writer: String,
    /// The write's sequence number in that writer's history.
    pub seq: u64,
    /// The epoch (token) the write presented.
    pub epoch: u64,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.writer, self.seq, self.epoch)
    }
}

/// How a write ended.
#[derive(Debug)]
pub enum Outcome {
    /// The resource acknowledged it; it is durable.
    Ok,
    /// The fence refused it: the resource's high-water mark is higher.
    Stale {
        /// The high-water mark that refused it.
        mark: u64,
    },
    /// It failed in a way that leaves its outcome unknown (it may or may
    /// not have landed).
    Unknown(ResourceError),
}

impl Outcome {
    /// How the outcome of write `seq` in term `epoch` is recorded in a
    /// candidate's history.
    pub fn event(self, seq: u64, epoch: u64) -> crate::history::CandidateEvent {
        use crate::history::{CandidateEvent, error_chain};
        match self {
            Outcome::Ok => CandidateEvent::Ok { seq, epoch },
            Outcome::Stale { mark } => CandidateEvent::Stale { seq, epoch, mark },
            Outcome::Unknown(e) => CandidateEvent::Error {
                seq,
                epoch,
                text: error_chain(&e),
            },
        }
    }
}

/// What went wrong with a resource.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// Not `file:<dir>`, `sqlite:<path>` or `sqlfence:<dir>`.
    #[error("bad resource {0:?}: expected file:<dir>, sqlite:<path> or sqlfence:<dir>")]
    Spec(String),
    /// The file log failed.
    #[error("{what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// The fence failed (unavailable, corrupt mark, bad name).
    #[error("the fence failed")]
    Fence(#[from] fencing::Error),
    /// The SQLite database failed.
    #[error("the resource database failed")]
    Sql(#[from] sqlx::Error),
    /// The election crate's SQLite layer failed (creating the fence table).
    #[error("the resource database's fence table")]
    SqliteFence(#[from] election_sqlite::Error),
    /// The write's future was dropped after the write ran (the `fdrop`
    /// fault): its outcome is unknown.
    #[error("the write's future was dropped after the write ran")]
    Dropped,
    /// A record that cannot be read as `<writer> <seq> <epoch>`.
    #[error("{}: record {index}: {text:?} is not `<writer> <seq> <epoch>`", path.display())]
    Corrupt {
        /// The resource's file.
        path: PathBuf,
        /// The record's position, from 1.
        index: usize,
        /// What it holds.
        text: String,
    },
}

fn resource_name() -> Result<ResourceName, ResourceError> {
    Ok(ResourceName::new(RESOURCE_NAME).map_err(fencing::Error::from)?)
}

fn epoch_of(token: Token) -> u64 {
    token.epoch().get()
}

/// The file-backed log: `<dir>/log`, one line per accepted write, fenced
/// by a [`FileFence`] in `<dir>`.
#[derive(Clone, Debug)]
pub struct FileLog {
    fence: FileFence,
    log: PathBuf,
    name: ResourceName,
    mode: Mode,
}

impl FileLog {
    /// Opens (creating the directory if needed) the log in `dir`.
    ///
    /// Failure model: [`ResourceError::Fence`] if the fence's directory
    /// cannot be used.
    pub fn open(dir: impl AsRef<Path>, mode: Mode) -> Result<FileLog, ResourceError> {
        let fence = FileFence::open(dir.as_ref())?;
        let log = fence.dir().join(LOG_FILE);
        Ok(FileLog {
            fence,
            log,
            name: resource_name()?,
            mode,
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.log
    }

    /// Appends `<writer> <seq> <epoch>` with `token`'s epoch, fsynced; in
    /// [`Mode::Safe`] only if the fence accepts `token`, under its lock.
    pub async fn write(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        self.write_holding(writer, seq, token, Duration::ZERO).await
    }

    /// [`write`](FileLog::write), holding the fence's lock for `hold`
    /// before the append (the `fencefiles` fault's writer that is inside
    /// the fence when its lock file is deleted).
    pub async fn write_holding(
        &self,
        writer: &str,
        seq: u64,
        token: Token,
        hold: Duration,
    ) -> Outcome {
        let line = format!("{writer} {seq} {}\n", epoch_of(token));
        let append = || async {
            if !hold.is_zero() {
                tokio::time::sleep(hold).await;
            }
            append_synced(&self.log, &line)
        };
        let outcome = match self.mode {
            Mode::Unsafe => Ok(append().await),
            Mode::Safe => self.fence.fenced(&self.name, token, append).await,
        };
        match outcome {
            Ok(Ok(())) => Outcome::Ok,
            Ok(Err(e)) => Outcome::Unknown(e),
            Err(fencing::Error::Stale {
                high_water_mark, ..
            }) => Outcome::Stale {
                mark: epoch_of(high_water_mark),
            },
            Err(e) => Outcome::Unknown(e.into()),
        }
    }

    /// The records of the log in `dir`, in order (none if it has no log
    /// yet).
    ///
    /// Failure model: [`ResourceError::Io`] if the log cannot be read,
    /// [`ResourceError::Corrupt`] for a line that is not a record (also a
    /// last line without its newline).
    pub fn read(dir: impl AsRef<Path>) -> Result<Vec<Record>, ResourceError> {
        let path = dir.as_ref().join(LOG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(ResourceError::Io {
                    what: "cannot read",
                    path,
                    source,
                });
            }
        };
        let mut records = Vec::new();
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let index = records.len() + 1;
            let corrupt = |text: &str| ResourceError::Corrupt {
                path: path.clone(),
                index,
                text: text.to_owned(),
            };
            let Some((line, after)) = rest.split_once('\n') else {
                return Err(corrupt(rest));
            };
            rest = after;
            records.push(parse_record(line).ok_or_else(|| corrupt(line))?);
        }
        Ok(records)
    }
}

fn append_synced(path: &Path, line: &str) -> Result<(), ResourceError> {
    let io_error = |what| {
        move |source| ResourceError::Io {
            what,
            path: path.to_owned(),
            source,
        }
    };
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_error("cannot open"))?;
    file.write_all(line.as_bytes())
        .map_err(io_error("cannot append to"))?;
    file.sync_all().map_err(io_error("cannot fsync"))
}

fn parse_record(line: &str) -> Option<Record> {
    let mut words = line.split(' ');
    let (writer, seq, epoch) = (words.next()?, words.next()?, words.next()?);
    if writer.is_empty() || words.next().is_some() {
        return None;
    }
    Some(Record {
        writer: writer.to_owned(),
        seq: seq.parse().ok()?,
        epoch: epoch.parse().ok()?,
    })
}

/// The SQLite table `torture_log(id, writer, seq, epoch)` in a database of
/// its own, fenced by [`SqliteFence::advance_in`](election_sqlite::SqliteFence::advance_in) in each write's
/// transaction.
#[derive(Clone, Debug)]
pub struct SqlTable {
    pool: SqlitePool,
    fence: election_sqlite::SqliteFence,
    name: ResourceName,
    mode: Mode,
}

/// The table of a [`SqlTable`].
const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS torture_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    writer TEXT NOT NULL,
    seq INTEGER NOT NULL,
    epoch INTEGER NOT NULL)";

async fn pool(path: &Path, create: bool) -> Result<SqlitePool, ResourceError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(create)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(SQL_BUSY_TIMEOUT);
    Ok(SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?)
}

impl SqlTable {
    /// Opens (creating if missing) the database at `path` (WAL,
    /// `synchronous = FULL`), its table and the fence's table.
    ///
    /// Failure model: [`ResourceError::Sql`] or
    /// [`ResourceError::SqliteFence`] if the database cannot be opened or
    /// set up.
    pub async fn open(path: impl AsRef<Path>, mode: Mode) -> Result<SqlTable, ResourceError> {
        let pool = pool(path.as_ref(), true).await?;
        sqlx::query(CREATE_TABLE).execute(&pool).await?;
        // Creates (or migrates) the fence's table.
        let fence = election_sqlite::SqliteFence::new(pool.clone()).await?;
        Ok(SqlTable {
            pool,
            fence,
            name: resource_name()?,
            mode,
        })
    }

    /// Inserts `(writer, seq, epoch)` with `token`'s epoch in one
    /// `BEGIN IMMEDIATE` transaction; in [`Mode::Safe`] the same
    /// transaction first checks and advances the fence, and rolls back if
    /// it refuses.
    pub async fn write(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        match self.try_write(writer, seq, token).await {
            Ok(()) => Outcome::Ok,
            Err(ResourceError::Fence(fencing::Error::Stale {
                high_water_mark, ..
            })) => Outcome::Stale {
                mark: epoch_of(high_water_mark),
            },
            Err(e) => Outcome::Unknown(e),
        }
    }

    async fn try_write(&self, writer: &str, seq: u64, token: Token) -> Result<(), ResourceError> {
        let big = |n: u64| {
            i64::try_from(n).map_err(|_| {
                ResourceError::Sql(sqlx::Error::Protocol(format!(
                    "{n} does not fit an INTEGER"
                )))
            })
        };
        let (seq, epoch) = (big(seq)?, big(epoch_of(token))?);
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        if self.mode == Mode::Safe {
            self.fence.advance_in(&mut tx, &self.name, token).await?;
        }
        sqlx::query("INSERT INTO torture_log (writer, seq, epoch) VALUES (?1, ?2, ?3)")
            .bind(writer)
            .bind(seq)
            .bind(epoch)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The rows of the database at `path`, by id (none if it has no table
    /// yet).
    ///
    /// Failure model: [`ResourceError::Sql`] if it cannot be read,
    /// [`ResourceError::Corrupt`] for a row with a negative number.
    pub async fn read(path: impl AsRef<Path>) -> Result<Vec<Record>, ResourceError> {
        let path = path.as_ref();
        let pool = pool(path, false).await?;
        let exists: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'torture_log'",
        )
        .fetch_optional(&pool)
        .await?;
        if exists.is_none() {
            pool.close().await;
            return Ok(Vec::new());
        }
        let rows: Vec<(String, i64, i64)> =
            sqlx::query_as("SELECT writer, seq, epoch FROM torture_log ORDER BY id")
                .fetch_all(&pool)
                .await?;
        pool.close().await;
        rows.into_iter()
            .enumerate()
            .map(
                |(i, (writer, seq, epoch))| match (u64::try_from(seq), u64::try_from(epoch)) {
                    (Ok(seq), Ok(epoch)) => Ok(Record { writer, seq, epoch }),
                    _ => Err(ResourceError::Corrupt {
                        path: path.to_owned(),
                        index: i + 1,
                        text: format!("{writer} {seq} {epoch}"),
                    }),
                },
            )
            .collect()
    }
}

/// The log file `<dir>/log` guarded by a
/// [`SqliteFence`](election_sqlite::SqliteFence) in `<dir>/fence.db`
/// through [`Fence::fenced`].
#[derive(Clone, Debug)]
pub struct FencedLog {
    fence: election_sqlite::SqliteFence,
    log: PathBuf,
    name: ResourceName,
    mode: Mode,
}

/// The fence database of a [`FencedLog`], inside its directory.
pub const FENCE_DB: &str = "fence.db";

impl FencedLog {
    /// Opens (creating the directory and the database if needed) the log
    /// in `dir`.
    ///
    /// Failure model: [`ResourceError::Io`] if the directory cannot be
    /// created; [`ResourceError::Sql`] or [`ResourceError::SqliteFence`]
    /// if the fence's database cannot be opened or set up.
    pub async fn open(dir: impl AsRef<Path>, mode: Mode) -> Result<FencedLog, ResourceError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| ResourceError::Io {
            what: "cannot create",
            path: dir.to_owned(),
            source,
        })?;
        let pool = pool(&dir.join(FENCE_DB), true).await?;
        Ok(FencedLog {
            fence: election_sqlite::SqliteFence::new(pool).await?,
            log: dir.join(LOG_FILE),
            name: resource_name()?,
            mode,
        })
    }

    /// Appends `<writer> <seq> <epoch>`, fsynced; in [`Mode::Safe`] inside
    /// [`Fence::fenced`], only if the fence accepts `token`.
    pub async fn write(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        self.write_holding(writer, seq, token, Duration::ZERO).await
    }

    /// [`write`](FileLog::write), holding the fence's lock for `hold`
    /// before the append (the `fencefiles` fault's writer that is inside
    /// the fence when its lock file is deleted).
    pub async fn write_holding(
        &self,
        writer: &str,
        seq: u64,
        token: Token,
        hold: Duration,
    ) -> Outcome {
        let line = format!("{writer} {seq} {}\n", epoch_of(token));
        let append = || async {
            if !hold.is_zero() {
                tokio::time::sleep(hold).await;
            }
            append_synced(&self.log, &line)
        };
        let outcome = match self.mode {
            Mode::Unsafe => Ok(append().await),
            Mode::Safe => self.fence.fenced(&self.name, token, append).await,
        };
        fenced_outcome(outcome)
    }

    /// Like [`write`](FencedLog::write), but the future of
    /// [`Fence::fenced`] is dropped right after the append ran, before
    /// `fenced` could return: a caller's timeout or cancellation at the
    /// worst moment. The outcome is [`Outcome::Unknown`] (the append
    /// landed) unless the fence refused the token first.
    pub async fn write_then_drop(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        if self.mode == Mode::Unsafe {
            return self.write(writer, seq, token).await;
        }
        let line = format!("{writer} {seq} {}\n", epoch_of(token));
        let ran = std::sync::Arc::new(tokio::sync::Notify::new());
        let told = ran.clone();
        let log = self.log.clone();
        let fenced = self.fence.fenced(&self.name, token, move || async move {
            let appended = append_synced(&log, &line);
            told.notify_one();
            // Never returns: the caller drops the future first.
            std::future::pending::<()>().await;
            appended
        });
        tokio::select! {
            biased;
            () = ran.notified() => Outcome::Unknown(ResourceError::Dropped),
            outcome = fenced => fenced_outcome(outcome),
        }
    }
}

fn fenced_outcome(outcome: Result<Result<(), ResourceError>, fencing::Error>) -> Outcome {
    match outcome {
        Ok(Ok(())) => Outcome::Ok,
        Ok(Err(e)) => Outcome::Unknown(e),
        Err(fencing::Error::Stale {
            high_water_mark, ..
        }) => Outcome::Stale {
            mark: epoch_of(high_water_mark),
        },
        Err(e) => Outcome::Unknown(e.into()),
    }
}

/// An open resource of any kind.
#[derive(Clone, Debug)]
pub enum Resource {
    /// A [`FileLog`].
    File(FileLog),
    /// A [`SqlTable`].
    Sqlite(SqlTable),
    /// A [`FencedLog`].
    SqliteFenced(FencedLog),
}

impl Resource {
    /// Opens the resource `spec` names.
    pub async fn open(spec: &ResourceSpec, mode: Mode) -> Result<Resource, ResourceError> {
        Ok(match spec {
            ResourceSpec::File(dir) => Resource::File(FileLog::open(dir, mode)?),
            ResourceSpec::Sqlite(path) => Resource::Sqlite(SqlTable::open(path, mode).await?),
            ResourceSpec::SqliteFenced(dir) => {
                Resource::SqliteFenced(FencedLog::open(dir, mode).await?)
            }
        })
    }

    /// Writes one record; see [`FileLog::write`], [`SqlTable::write`] and
    /// [`FencedLog::write`].
    pub async fn write(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        match self {
            Resource::File(log) => log.write(writer, seq, token).await,
            Resource::Sqlite(table) => table.write(writer, seq, token).await,
            Resource::SqliteFenced(log) => log.write(writer, seq, token).await,
        }
    }

    /// Writes one record and drops the write's future right after it ran
    /// ([`FencedLog::write_then_drop`]); on the other resources, a plain
    /// [`write`](Resource::write).
    pub async fn write_then_drop(&self, writer: &str, seq: u64, token: Token) -> Outcome {
        match self {
            Resource::SqliteFenced(log) => log.write_then_drop(writer, seq, token).await,
            other => other.write(writer, seq, token).await,
        }
    }

    /// Writes one record holding the fence for `hold` before the write
    /// ([`FileLog::write_holding`]); on the other resources, a plain
    /// [`write`](Resource::write).
    pub async fn write_holding(
        &self,
        writer: &str,
        seq: u64,
        token: Token,
        hold: Duration,
    ) -> Outcome {
        match self {
            Resource::File(log) => log.write_holding(writer, seq, token, hold).await,
            other => other.write(writer, seq, token).await,
        }
    }
}

impl Resource {
    /// Raises the resource's fence to `token` with no write
    /// (`Fence::advance`), as an operator does with a revocation's epoch
    /// (`elect revoke --fence`): every token below it is refused from then
    /// on. Returns the mark it replaced (0 for none).
    ///
    /// Failure model: [`ResourceError::Fence`] if the fence refused
    /// (`token` below its mark) or its store failed.
    pub async fn advance(&self, token: Token) -> Result<u64, ResourceError> {
        let name = resource_name()?;
        let advanced = match self {
            Resource::File(log) => log.fence.advance(&name, token).await?,
            Resource::Sqlite(table) => table.fence.advance(&name, token).await?,
            Resource::SqliteFenced(log) => log.fence.advance(&name, token).await?,
        };
        Ok(advanced.previous.map_or(0, epoch_of))
    }
}

/// The records of the resource `spec` names, in resource order.
pub async fn read_records(spec: &ResourceSpec) -> Result<Vec<Record>, ResourceError> {
    match spec {
        ResourceSpec::File(dir) | ResourceSpec::SqliteFenced(dir) => FileLog::read(dir),
        ResourceSpec::Sqlite(path) => SqlTable::read(path).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::Epoch;

    fn t(n: u64) -> Token {
        Token::from_epoch(Epoch::new(n).unwrap())
    }

    fn record(writer: &str, seq: u64, epoch: u64) -> Record {
        Record {
            writer: writer.into(),
            seq,
            epoch,
        }
    }

    /// Two writers in safe mode (the stale one refused), then a write in
    /// unsafe mode (accepted, no check): the resource reads back exactly
    /// the accepted records.
    async fn fences_and_reads_back(spec: ResourceSpec) {
        let safe = Resource::open(&spec, Mode::Safe).await.unwrap();
        assert!(read_records(&spec).await.unwrap().is_empty());
        assert!(matches!(safe.write("c0.1", 1, t(2)).await, Outcome::Ok));
        assert!(matches!(safe.write("c1.1", 1, t(3)).await, Outcome::Ok));
        assert!(matches!(
            safe.write("c0.1", 2, t(2)).await,
            Outcome::Stale { mark: 3 }
        ));
        let unsafe_ = Resource::open(&spec, Mode::Unsafe).await.unwrap();
        assert!(matches!(unsafe_.write("c0.1", 3, t(2)).await, Outcome::Ok));
        assert_eq!(
            read_records(&spec).await.unwrap(),
            [
                record("c0.1", 1, 2),
                record("c1.1", 1, 3),
                record("c0.1", 3, 2)
            ]
        );
    }

    #[tokio::test]
    async fn file_log_fences_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        fences_and_reads_back(ResourceSpec::File(tmp.path().join("res"))).await;
    }

    #[tokio::test]
    async fn fenced_log_fences_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        fences_and_reads_back(ResourceSpec::SqliteFenced(tmp.path().join("res"))).await;
    }

    /// A write dropped after it ran: it landed and is reported unknown;
    /// a refused one is still stale.
    #[tokio::test]
    async fn a_dropped_fenced_write_landed_and_is_unknown() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = ResourceSpec::SqliteFenced(tmp.path().join("res"));
        let log = Resource::open(&spec, Mode::Safe).await.unwrap();
        assert!(matches!(log.write("c0.1", 1, t(3)).await, Outcome::Ok));
        assert!(matches!(
            log.write_then_drop("c1.1", 1, t(4)).await,
            Outcome::Unknown(ResourceError::Dropped)
        ));
        assert!(matches!(
            log.write_then_drop("c2.1", 1, t(2)).await,
            Outcome::Stale { mark: 3 | 4 }
        ));
        assert_eq!(
            read_records(&spec).await.unwrap(),
            [record("c0.1", 1, 3), record("c1.1", 1, 4)]
        );
    }

    #[tokio::test]
    async fn sql_table_fences_and_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        fences_and_reads_back(ResourceSpec::Sqlite(tmp.path().join("resource.db"))).await;
    }

    #[test]
    fn a_torn_or_foreign_log_line_is_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(LOG_FILE), "c0.1 1 2\nc0.1 2").unwrap();
        assert!(matches!(
            FileLog::read(tmp.path()),
            Err(ResourceError::Corrupt { index: 2, .. })
        ));
        std::fs::write(tmp.path().join(LOG_FILE), "c0.1 1 2\nhello\n").unwrap();
        assert!(matches!(
            FileLog::read(tmp.path()),
            Err(ResourceError::Corrupt { index: 2, .. })
        ));
    }
}
