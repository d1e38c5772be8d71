//! Backend URLs and opening the backend they name.
//!
//! - `file:///dir`: one host; a directory on a local filesystem.
//! - `sqlite:///path/to/app.db`: a lease row in a SQLite database.
//! - `nats://[user:password@]host:port[,host:port...][?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]`.
//! - `postgres://user@host:port/db[?schema=S&ttl=D&renew=D&passfile=FILE&sslmode=M]`
//!   (or `postgresql://`): the password from `PGPASSWORD`, the passfile,
//!   `PGPASSFILE` or `~/.pgpass`, never needed on the command line.
//!
//! No URL: the file backend in the default directory, on a disk so that
//! epochs outlive a reboot: `$XDG_STATE_HOME/elect`, else `/var/lib/elect`
//! for root, else `$HOME/.local/state/elect` (mode 0700; see
//! [`default_dir`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use election_file::FileElection;
use election_nats::{NatsElection, NatsOptions};
use election_postgres::PostgresOptions;
use election_sqlite::{SqliteElection, SqliteOptions};
pub(crate) use election_url::Backend;
pub(crate) use election_url::BackendUrl as Url;

use crate::exit::{self, Failure};

/// Lease timing flags; `None` keeps the backend's default.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    pub(crate) ttl: Option<Duration>,
    pub(crate) renew: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    /// Only reads (`leader`, `observe`): accept the bucket's own TTL.
    pub(crate) observer: bool,
}

fn bad(url: &str, reason: impl std::fmt::Display) -> Failure {
    let url = election_url::redact(url);
    Failure::config(format!("bad backend URL {url:?}: {reason}")).hint(
        "use file:///dir, sqlite:///path/to/db, nats://host:port?bucket=name or \
         postgres://user@host:port/db (see elect --help); \
         write %XX for a '%', '?', '#' or '&' inside a path or value",
    )
}

/// Parses a backend URL (the grammar of `election-url`, see ADR 0018 and
/// ADR 0021); a bad one is a configuration error quoting the URL with its
/// secrets redacted.
pub(crate) fn parse_url(url: &str) -> Result<Url, Failure> {
    Url::parse(url).map_err(|e| bad(url, e))
}

/// How a URL is shown in progress lines: the servers and the bucket, no
/// credentials.
pub(crate) fn shown_url(url: &Url) -> String {
    match url {
        Url::File(p) => {
            let mut s = format!("file://{}", p.dir.display());
            let mut sep = '?';
            for (k, on) in [
                ("volatile_ok", p.volatile_ok),
                ("unknown_fs_ok", p.unknown_fs_ok),
            ] {
                if on {
                    s.push_str(&format!("{sep}{k}=1"));
                    sep = '&';
                }
            }
            s
        }
        Url::Sqlite(p) => format!("sqlite://{}", p.display()),
        Url::Nats(n) => {
            let mut s = n.server_urls().join(",");
            if let Some(b) = &n.bucket {
                s.push_str(&format!("?bucket={b}"));
            }
            s
        }
        Url::Postgres(p) => {
            let mut s = format!("postgres://{}", p.place());
            if let Some(schema) = &p.schema {
                s.push_str(&format!("?schema={schema}"));
            }
            s
        }
    }
}

/// An absolute, non-empty path in environment variable `var`.
fn absolute_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Where the default directory is (see [`default_dir`]), given the
/// environment's `XDG_STATE_HOME` and `HOME` (each only if absolute) and
/// whether the user is root. `None`: a user other than root without
/// either.
fn default_dir_for(
    state_home: Option<PathBuf>,
    home: Option<PathBuf>,
    root: bool,
) -> Option<PathBuf> {
    match (state_home, home) {
        (Some(state), _) => Some(state.join("elect")),
        _ if root => Some(PathBuf::from("/var/lib/elect")),
        (None, Some(home)) => Some(home.join(".local/state/elect")),
        (None, None) => None,
    }
}

/// Where the default directory is (see [`default_dir`]); a user other than
/// root with neither `XDG_STATE_HOME` nor `HOME` has none.
fn default_dir_path() -> Result<PathBuf, Failure> {
    let root = nix::unistd::getuid().is_root();
    default_dir_for(absolute_env("XDG_STATE_HOME"), absolute_env("HOME"), root).ok_or_else(|| {
        Failure::config(
            "no default directory for the file backend: neither XDG_STATE_HOME nor HOME is set \
             (to an absolute path)",
        )
        .hint(
            "pass --backend file:///some/dir on a disk you can write to, or set XDG_STATE_HOME \
             or HOME",
        )
    })
}

/// The default directory, where the file backend keeps its elections
/// without `--backend`: `$XDG_STATE_HOME/elect` if `XDG_STATE_HOME` is an
/// absolute path; else `/var/lib/elect` for root; else
/// `$HOME/.local/state/elect`. On a disk, not in a runtime directory: the
/// epoch records must outlive a reboot (a tmpfs there is refused by the
/// file backend, ADR 0097). Created with its parents (mode 0700) if
/// missing, and refused if another user owns it.
pub(crate) fn default_dir() -> Result<PathBuf, Failure> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid();
    let dir = default_dir_path()?;
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
    {
        return Err(Failure::config(format!(
            "cannot create the default directory {}: {e}",
            dir.display()
        ))
        .hint("pass --backend file:///some/dir you can write to"));
    }
    let meta =
        std::fs::metadata(&dir).map_err(|e| Failure::config(format!("{}: {e}", dir.display())))?;
    if meta.uid() != uid.as_raw() {
        return Err(Failure::config(format!(
            "the default directory {} belongs to another user",
            dir.display()
        ))
        .hint("pass --backend file:///some/dir of your own"));
    }
    Ok(dir)
}

/// An open backend.
pub(crate) enum Opened {
    /// The backend, open.
    Ready(Backend),
    /// NATS for an observer, whose bucket does not exist yet: nobody has
    /// ever been elected there. Opened again by [`Opened::ready`].
    NatsPending(Box<(async_nats::Client, NatsOptions)>),
    /// A read-only command's directory or database that does not exist
    /// (or has no election tables): nobody was ever elected there, and
    /// nothing is created. Opened again by [`Opened::ready`].
    Absent(Box<Absent>),
}

/// What [`Opened::Absent`] names.
pub(crate) struct Absent {
    /// The URL, to open it again (`None`: the default directory).
    url: Option<Url>,
    /// What is missing, for a note on stderr.
    pub(crate) note: String,
}

/// The first backend error in `error`'s source chain.
enum Cause<'a> {
    File(&'a election_file::Error),
    Sqlite(&'a election_sqlite::Error),
    Nats(&'a election_nats::Error),
    Postgres(&'a election_postgres::Error),
}

/// `e` itself, or the error inside if `e` is the core's shared
/// [`election_core::Source`]: an `Arc` is an error of its own whose
/// `source()` skips the error it holds.
fn unwrapped<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    match e.downcast_ref::<election_core::Source>() {
        Some(inner) => &**inner,
        None => e,
    }
}

/// The error below `e` in its chain, the backend's error included: the
/// core's errors name their backend error in their message and go on with
/// its source (ADR 0063), so the backend's error is taken from the field.
fn below<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    let cause = if let Some(core) = e.downcast_ref::<election_core::Error>() {
        core.backend_error()
    } else if let Some(lost) = e.downcast_ref::<election_core::LeaseLost>() {
        lost.reason.backend_error()
    } else if let Some(reason) = e.downcast_ref::<election_core::LossReason>() {
        reason.backend_error()
    } else if let Some(election_core::ConfigError::Location {
        source: Some(source),
        ..
    }) = e.downcast_ref::<election_core::ConfigError>()
    {
        Some(&**source)
    } else {
        return e.source();
    };
    match cause {
        Some(c) => Some(c),
        None => e.source(),
    }
}

fn cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<Cause<'a>> {
    let mut next = Some(error);
    while let Some(e) = next.map(unwrapped) {
        if let Some(f) = e.downcast_ref::<election_file::Error>() {
            return Some(Cause::File(f));
        }
        if let Some(s) = e.downcast_ref::<election_sqlite::Error>() {
            return Some(Cause::Sqlite(s));
        }
        if let Some(n) = e.downcast_ref::<election_nats::Error>() {
            return Some(Cause::Nats(n));
        }
        if let Some(p) = e.downcast_ref::<election_postgres::Error>() {
            return Some(Cause::Postgres(p));
        }
        next = below(e);
    }
    None
}

/// The exit code and hint for a backend error found in `error`'s source
/// chain: permanent errors exit 78 with a hint naming the fix, transient
/// ones 69 (see ADR 0018). `None` if the chain holds no backend error.
pub(crate) fn classify(error: &(dyn std::error::Error + 'static)) -> Option<(u8, String)> {
    Some(match cause(error)? {
        Cause::File(e) => file_class(e),
        Cause::Sqlite(e) => sqlite_class(e),
        Cause::Nats(e) => nats_class(e),
        Cause::Postgres(e) => postgres_class(e),
    })
}

const REPAIR_HINT: &str = "the stored election state is damaged; never delete it (epochs would \
    restart and tokens go back): on the file backend, stop the election's processes and run \
    `elect repair-epoch --name NAME --epoch N` with N at least the highest token your resources hold";

fn file_class(e: &election_file::Error) -> (u8, String) {
    use election_file::Error as E;
    let config = |hint: String| (exit::CONFIG, hint);
    match e {
        E::NoSpace { path, .. } => (
            exit::UNAVAILABLE,
            format!(
                "the filesystem of {} is full (or the quota is used up): free space, then try again",
                path.display()
            ),
        ),
        E::Io { .. } => (
            exit::UNAVAILABLE,
            "an I/O error on the election directory: check the disk, then try again".to_owned(),
        ),
        E::Unusable { path, source, .. } if source.raw_os_error() == Some(nix::libc::EFBIG) => {
            config(format!(
                "writing {} went past the file size limit: raise it (ulimit -f) in the shell that starts elect",
                path.display()
            ))
        }
        E::Unusable { path, source, .. } if source.raw_os_error() == Some(nix::libc::EISDIR) => {
            config(format!(
                "{} is a directory where elect keeps a file: move it out of the way (an .epoch record \
             must never be deleted: if one is lost, use elect repair-epoch)",
                path.display()
            ))
        }
        E::Unusable { path, .. } => config(format!(
            "elect cannot use {}: fix the path (a symlink loop or a name too long)",
            path.display()
        )),
        E::NotADirectory { path } => config(format!(
            "{} is not a directory: point --backend at a directory (file:///dir)",
            path.display()
        )),
        E::PermissionDenied { path, .. } => config(format!(
            "give this user read and write access to {}, or point --backend at a directory it can write",
            path.display()
        )),
        E::NetworkFilesystem { .. } => config(
            "use a directory on a local filesystem; for many hosts use sqlite:// or nats://"
                .to_owned(),
        ),
        E::VolatileFilesystem { path, .. } => config(format!(
            "epochs must outlive a reboot: point --backend (or XDG_STATE_HOME, for the default \
             directory) at a directory on a disk; only if nothing the tokens fence outlives a \
             reboot either, ask for this one by name: --backend 'file://{}?volatile_ok=1'",
            path.display()
        )),
        E::UnknownFilesystem { path, .. } => config(format!(
            "use a directory on a local filesystem (ext4, xfs, btrfs, zfs, ...); only if this \
             filesystem's locks hold across every host that can reach it, ask for it by name: \
             --backend 'file://{}?unknown_fs_ok=1'",
            path.display()
        )),
        E::CorruptEpoch { .. } => config(REPAIR_HINT.to_owned()),
        E::ClaimHeld { .. } => (
            exit::UNAVAILABLE,
            "stop every process of this election first, then repair".to_owned(),
        ),
        E::EpochTooLow { .. } => config(
            "give an epoch at least the one named above, and at least as high as any token \
                 your resources hold"
                .to_owned(),
        ),
        _ => config("fix the flags or the backend URL".to_owned()),
    }
}

pub(crate) fn file_failure(e: election_file::Error) -> Failure {
    let (code, hint) = file_class(&e);
    Failure::new(code, exit::chain(&e)).hint(hint)
}

fn sqlite_class(e: &election_sqlite::Error) -> (u8, String) {
    use election_sqlite::Error as E;
    let config = |hint: &str| (exit::CONFIG, hint.to_owned());
    match e {
        E::Busy(_) => (
            exit::UNAVAILABLE,
            "the database stayed locked by another connection; try again later".to_owned(),
        ),
        E::OutcomeUnknown { .. } => (
            exit::UNAVAILABLE,
            "a database statement did not finish in time; try again later".to_owned(),
        ),
        E::Database(_) if e.is_disk_full() => (
            exit::UNAVAILABLE,
            "the database's filesystem is full: free space, then try again".to_owned(),
        ),
        E::Database(_) => (
            exit::UNAVAILABLE,
            "the database failed; check the disk, then try again".to_owned(),
        ),
        E::Unusable(_) => config(
            "the file is not an election database elect can use (not SQLite, damaged, or \
             election_* tables of another shape): point --backend at another file, or restore \
             this one from a backup (never delete its election_epochs table)",
        ),
        E::ReadOnly(_) => config(
            "give this user write access to the database file and its directory (SQLite writes \
             -wal and -shm files beside it)",
        ),
        E::NotAFile { .. } => config(
            "point --backend at a database file in an existing directory (sqlite:///path/to/app.db)",
        ),
        E::PathUnresolvable { .. } => config(
            "the database path cannot be resolved: check that every directory on it exists and \
             can be searched by this user",
        ),
        E::SchemaTooNew { .. } => config("upgrade elect: a newer version wrote this database"),
        E::FileReplaced { .. } => config(
            "the database file was replaced while elect ran: never replace it while candidates run",
        ),
        E::CorruptRow { .. } => config(
            "a lease row holds values elect never writes: restore the database from a backup",
        ),
        E::SecondName {
            own_mount: true, ..
        } => config(
            "mount the directory that holds the database, not the file itself (docker: -v \
             /srv/db:/data, not -v /srv/db/app.db:/data/app.db): SQLite names its -wal and -shm \
             after the path it opens, so two names of one file elect two leaders",
        ),
        E::SecondName { .. } => config(
            "remove the second hard link to the database file and use one name for it: SQLite \
             names its -wal and -shm after the path it opens, so two names of one file elect \
             two leaders",
        ),
        _ => config("fix the flags or the backend URL"),
    }
}

pub(crate) fn sqlite_failure(e: election_sqlite::Error) -> Failure {
    let (code, hint) = sqlite_class(&e);
    Failure::new(code, exit::chain(&e)).hint(hint)
}

/// A JetStream error code in `e`'s source chain.
fn jetstream_code(e: &(dyn std::error::Error + 'static)) -> Option<u64> {
    let mut next = Some(e);
    while let Some(e) = next.map(unwrapped) {
        if let Some(js) = e.downcast_ref::<async_nats::jetstream::Error>() {
            return Some(js.error_code().0);
        }
        // Creating a bucket keeps the server's error in the kind.
        if let Some(c) = e.downcast_ref::<async_nats::jetstream::context::CreateStreamError>()
            && let async_nats::jetstream::context::CreateStreamErrorKind::JetStream(js) = c.kind()
        {
            return Some(js.error_code().0);
        }
        next = e.source();
    }
    None
}

fn nats_class(e: &election_nats::Error) -> (u8, String) {
    use async_nats::jetstream::ErrorCode as C;
    use election_nats::Error as E;
    let config = |hint: &str| (exit::CONFIG, hint.to_owned());
    let unavailable = || {
        (
            exit::UNAVAILABLE,
            "check that nats-server runs with JetStream enabled (nats-server -js) and is reachable"
                .to_owned(),
        )
    };
    match e {
        E::Connect { source, .. } => match source.kind() {
            async_nats::ConnectErrorKind::Authentication
            | async_nats::ConnectErrorKind::AuthorizationViolation => config(
                "give the credentials the server expects: ELECT_NATS_TOKEN or \
                     --nats-token-file; ELECT_NATS_USER with ELECT_NATS_PASSWORD or \
                     --nats-password-file; ELECT_NATS_CREDS or --nats-creds",
            ),
            async_nats::ConnectErrorKind::ServerParse => {
                config("fix the server addresses in the URL (nats://host:port,host:port)")
            }
            _ => unavailable(),
        },
        E::Unavailable { .. } => match jetstream_code(e).map(C) {
            Some(C::STREAM_REPLICAS_NOT_SUPPORTED) => config(
                "this server runs without a cluster: use ?replicas=1 (with ?single_replica_ok=1 \
                 once its risk is accepted), or point the URL at a cluster of at least that many \
                 servers",
            ),
            Some(C::JETSTREAM_NOT_ENABLED | C::JETSTREAM_NOT_ENABLED_FOR_ACCOUNT) => {
                config("enable JetStream on the server (nats-server -js) or for this account")
            }
            Some(
                C::STREAM_INVALID_CONFIG
                | C::STREAM_NAME_EXIST
                | C::CLUSTER_REQUIRED
                | C::MAXIMUM_STREAMS_LIMIT
                | C::ACCOUNT_RESOURCES_EXCEEDED,
            ) => config(
                "the server refuses the bucket's settings: change ?bucket=, ?replicas= or the \
                 account's limits",
            ),
            _ => unavailable(),
        },
        E::OutcomeUnknown { .. } => unavailable(),
        E::CorruptValue { .. } => config(
            "the bucket holds a value elect never writes: use another ?bucket= (never delete a \
             bucket in use: epochs would restart)",
        ),
        E::BucketMismatch {
            bucket,
            found,
            wanted,
        } => match (
            found.strip_prefix("max age "),
            wanted.strip_prefix("max age "),
        ) {
            // The same election runs there with another TTL.
            (Some(age), Some(ttl)) if age.contains(", where ") => {
                let age = age.split(',').next().unwrap_or(age);
                (
                    exit::CONFIG,
                    format!(
                        "this election runs in bucket {bucket} with --ttl {age}, and every \
                         candidate of an election must use the same TTL: give --ttl {age} \
                         (this one asked for {ttl}); to change its TTL, stop every candidate \
                         first"
                    ),
                )
            }
            // A bucket's max age is the TTL of every election in it.
            (Some(age), Some(ttl)) => (
                exit::CONFIG,
                format!(
                    "the elections in bucket {bucket} use a TTL of {age} (its max age), this one \
                     {ttl}: give --ttl {age} to join that bucket's elections, or leave ?bucket= \
                     out of the URL (elect then picks a bucket of this TTL's own, \
                     elections-ttl-{ttl}, when the default one has another), or name a new \
                     bucket with ?bucket=NEW-NAME; never delete or edit a bucket in use"
                ),
            ),
            _ => (
                exit::CONFIG,
                format!(
                    "bucket {bucket} was made with {found}; this election needs {wanted}: name \
                     another bucket with ?bucket=NEW-NAME (never delete or edit a bucket in use)"
                ),
            ),
        },
        _ => config("check the URL's options and the bucket's settings"),
    }
}

pub(crate) fn nats_failure(e: election_nats::Error) -> Failure {
    let (code, hint) = nats_class(&e);
    Failure::new(code, exit::chain(&e)).hint(hint)
}

fn postgres_class(e: &election_postgres::Error) -> (u8, String) {
    use election_postgres::Error as E;
    let config = |hint: &str| (exit::CONFIG, hint.to_owned());
    match e {
        E::Unavailable(_) | E::TimedOut { .. } | E::OutcomeUnknown { .. } | E::Database(_) => (
            exit::UNAVAILABLE,
            "check that the PostgreSQL server runs and the host and port in the URL are right, \
             then try again"
                .to_owned(),
        ),
        E::Unusable { .. } => config(
            "check the URL's user and database, the password (PGPASSWORD, ?passfile=, \
             PGPASSFILE or ~/.pgpass; never on the command line) and the user's privileges on \
             the database (CREATE on it for the election schema)",
        ),
        E::UnsafeSetting { .. } => config(
            "set synchronous_commit to on for this role or database (ALTER ROLE ... SET \
             synchronous_commit = on)",
        ),
        E::SchemaTooNew { .. } => config("upgrade elect: a newer version wrote this schema"),
        E::CorruptRow { .. } => config(
            "a lease row holds values elect never writes: restore the election schema from a \
             backup (never delete its epoch records)",
        ),
        _ => config("fix the flags or the backend URL"),
    }
}

pub(crate) fn postgres_failure(e: election_postgres::Error) -> Failure {
    let (code, hint) = postgres_class(&e);
    Failure::new(code, exit::chain(&e)).hint(hint)
}

fn refuse_timing(backend: &str, timing: &Timing) -> Result<(), Failure> {
    if timing.ttl.is_some() || timing.renew.is_some() || timing.grace.is_some() {
        return Err(Failure::config(format!(
            "--ttl, --renew and --grace have no meaning for the {backend} backend"
        ))
        .hint("a file lock is held until the process ends or resigns: drop those flags"));
    }
    Ok(())
}

/// A duration as the user writes it.
fn dur(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format!("{d:?}")
    }
}

/// Checks the lease flags in the user's own terms (`--ttl`, `--renew`,
/// `--grace`), before a library names its internal settings. `ttl` and
/// `renew` are the values in effect (given or derived).
fn check_lease_flags(
    backend: &str,
    timing: &Timing,
    ttl: Duration,
    renew: Duration,
    min_ttl: Duration,
) -> Result<(), Failure> {
    let given = |flag: &str, d: Option<Duration>| match d {
        Some(d) => format!("{flag} {}", dur(d)),
        None => format!("the default {flag} {}", dur(ttl)),
    };
    if ttl < min_ttl {
        return Err(Failure::config(format!(
            "{} is too short for the {backend} backend: at least {}",
            given("--ttl", timing.ttl),
            dur(min_ttl)
        ))
        .hint("give a longer --ttl, e.g. --ttl 15s"));
    }
    let min_renew = Duration::from_millis(2);
    if renew < min_renew {
        return Err(Failure::config(format!(
            "--renew {} is too short: at least {}",
            dur(renew),
            dur(min_renew)
        ))
        .hint("give a longer --renew, or leave it out (a third of --ttl)"));
    }
    let max_renew = (ttl - ttl / 10) / 2;
    if renew > max_renew {
        return Err(Failure::config(format!(
            "--renew {} is too long for {}: at most {} (a failed renewal must be retried before \
             the lease runs out: twice --renew plus a tenth of --ttl must fit in --ttl)",
            dur(renew),
            given("--ttl", timing.ttl),
            dur(max_renew)
        ))
        .hint("give a shorter --renew or a longer --ttl; without --renew it is a third of --ttl"));
    }
    Ok(())
}

/// A library's refusal of lease settings, in the user's flags.
fn flag_failure(e: &election_core::ConfigError) -> Failure {
    let text = exit::chain(e)
        .replace("renew_interval", "renew interval (--renew)")
        .replace("failover_grace", "--grace")
        .replace("busy_timeout", "busy timeout (half of --renew)")
        .replace("request_timeout", "request timeout (half of --renew)")
        .replace("setting ttl", "--ttl")
        .replace("ttl ", "--ttl ");
    Failure::config(text).hint("fix --ttl, --renew or --grace (see elect run --help)")
}

impl Opened {
    /// A backend that did not exist when opened, opened again: `None`
    /// while it still does not (a NATS bucket, or a read-only command's
    /// directory or database).
    pub(crate) async fn ready(&self) -> Result<Option<Opened>, Failure> {
        match self {
            Opened::NatsPending(pending) => {
                let (client, options) = &**pending;
                match NatsElection::with_client(client.clone(), options.clone()).await {
                    Ok(e) => Ok(Some(Opened::Ready(Backend::Nats(e)))),
                    Err(election_nats::Error::NoBucket { .. }) => Ok(None),
                    Err(e) => Err(nats_failure(e)),
                }
            }
            Opened::Absent(absent) => {
                let timing = Timing {
                    observer: true,
                    ..Timing::default()
                };
                match Opened::open(absent.url.as_ref(), timing, None).await? {
                    Opened::Absent(_) => Ok(None),
                    opened => Ok(Some(opened)),
                }
            }
            _ => Ok(None),
        }
    }

    /// Closes a SQLite or PostgreSQL backend before `elect` exits, waiting
    /// at most `bound`. SQLite: the last connection to close checkpoints
    /// the WAL into the database and removes it, so the next `elect` to
    /// open the database does not replay it (measured: about 6 ms of every
    /// start when each `elect` exited with its pool open). PostgreSQL: the
    /// close waits its grace after the release (ADR 0086), so the server's
    /// processes of this `elect`'s connections end after the successor's
    /// take, not during it, as they did when the exit closed them. Called
    /// after the term ended (resigned or lost, its release done or
    /// abandoned), never before. Other backends have nothing to close.
    ///
    /// Cancel safety: cancel safe (the pool stays closed). Failure model:
    /// none; a close that takes longer than `bound` is left to the exit.
    pub(crate) async fn close(&self, bound: Duration) {
        match self {
            Opened::Ready(Backend::Sqlite(election)) => {
                let _ = tokio::time::timeout(bound, election.pool().close()).await;
            }
            Opened::Ready(Backend::Postgres(election)) => {
                let _ = tokio::time::timeout(bound, election.close()).await;
            }
            _ => {}
        }
    }

    /// Not there yet (a bucket, a directory or a database): nobody was
    /// ever elected there.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self, Opened::NatsPending(..) | Opened::Absent(..))
    }

    /// `elect repair-epoch`: sets the file backend's epoch record of `name`
    /// to `epoch`; other backends keep their epochs in state the library
    /// never deletes and have no such record to repair.
    pub(crate) fn repair_epoch(
        &self,
        name: &str,
        epoch: election_core::Epoch,
        reporter: crate::report::Reporter,
    ) -> Result<u8, Failure> {
        let election = match self {
            Opened::Ready(Backend::File(election)) => election,
            Opened::Absent(absent) => {
                return Err(
                    Failure::config(format!("nothing to repair: {}", absent.note)).hint(
                        "check --backend: repair-epoch repairs an existing election directory \
                         (if the whole directory was lost, create it first: mkdir -p DIR)",
                    ),
                );
            }
            _ => {
                return Err(Failure::config(
                    "repair-epoch is for the file backend's epoch records only",
                )
                .hint("use --backend file:///dir (or no --backend for the default directory)"));
            }
        };
        let repaired = election.repair_epoch(name, epoch).map_err(file_failure)?;
        let seen = repaired
            .highest_seen
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        reporter.event(
            "repaired",
            &format!(
                "the epoch record of {name} now holds epoch {} (highest seen before: {seen}); \
                 the next term gets a higher one",
                repaired.epoch
            ),
            serde_json::json!({
                "name": name,
                "epoch": repaired.epoch.get(),
                "highest_seen": repaired.highest_seen.map(|e| e.get()),
            }),
        );
        Ok(exit::OK)
    }

    /// How the backend is shown in progress lines (no secrets).
    pub(crate) fn shown(&self, url: Option<&Url>) -> String {
        match (url, self) {
            // The bucket the TTL picked, when the URL names none.
            (Some(u @ Url::Nats(n)), Opened::Ready(Backend::Nats(e))) if n.bucket.is_none() => {
                format!("{}?bucket={}", shown_url(u), e.options().bucket_name())
            }
            (Some(u), _) => shown_url(u),
            (None, Opened::Ready(Backend::File(e))) => format!("file://{}", e.dir().display()),
            (None, _) => String::new(),
        }
    }

    /// Opens the backend `url` names (the default file backend for `None`).
    ///
    /// For a read-only command (`timing.observer`) nothing is created: a
    /// missing directory or database (or one without election tables)
    /// opens as [`Opened::Absent`]. For `run`, a directory or database
    /// that is created is said on stderr through `report`.
    pub(crate) async fn open(
        url: Option<&Url>,
        timing: Timing,
        report: Option<crate::report::Reporter>,
    ) -> Result<Opened, Failure> {
        let absent = |note: String| {
            Ok(Opened::Absent(Box::new(Absent {
                url: url.cloned(),
                note,
            })))
        };
        let created = |what: &str, path: &Path| {
            if let Some(report) = report {
                report.event(
                    "creating",
                    &format!("{what} {} does not exist: creating it", path.display()),
                    serde_json::json!({ "created": what, "path": path.display().to_string() }),
                );
            }
        };
        match url {
            None => {
                refuse_timing("file", &timing)?;
                let dir = if timing.observer {
                    let dir = default_dir_path()?;
                    if !dir.exists() {
                        return absent(format!(
                            "the default directory {} does not exist: no election has run there",
                            dir.display()
                        ));
                    }
                    dir
                } else {
                    default_dir()?
                };
                FileElection::new(dir)
                    .map(|e| Opened::Ready(Backend::File(e)))
                    .map_err(file_failure)
            }
            Some(Url::File(file)) => {
                let dir = &file.dir;
                refuse_timing("file", &timing)?;
                if std::fs::symlink_metadata(dir).is_err() {
                    if timing.observer {
                        return absent(format!(
                            "the directory {} does not exist: no election has run there \
                             (check --backend)",
                            dir.display()
                        ));
                    }
                    created("the directory", dir);
                }
                FileElection::with_options(dir.clone(), file.options())
                    .map(|e| Opened::Ready(Backend::File(e)))
                    .map_err(file_failure)
            }
            Some(Url::Sqlite(path)) => {
                if timing.grace.is_some() {
                    return Err(Failure::config(
                        "--grace has no meaning for the sqlite backend (a contender waits a full TTL)",
                    )
                    .hint("drop --grace"));
                }
                let defaults = SqliteOptions::default();
                let ttl = timing.ttl.unwrap_or(defaults.ttl());
                let renew = timing.renew.unwrap_or(if timing.ttl.is_some() {
                    ttl / 3
                } else {
                    defaults.renew_interval()
                });
                check_lease_flags("sqlite", &timing, ttl, renew, Duration::from_millis(10))?;
                let options = SqliteOptions::new(ttl, renew).map_err(|e| flag_failure(&e))?;
                let exists = std::fs::symlink_metadata(path).is_ok();
                if timing.observer {
                    if !exists {
                        return absent(format!(
                            "the database {} does not exist: no election has run there \
                             (check --backend)",
                            path.display()
                        ));
                    }
                    return match SqliteElection::open_read_only(path, options).await {
                        Ok(Some(e)) => Ok(Opened::Ready(Backend::Sqlite(e))),
                        Ok(None) => absent(format!(
                            "the database {} has no election tables: no election has run there",
                            path.display()
                        )),
                        Err(e) => Err(sqlite_failure(e)),
                    };
                }
                if !exists && path.parent().is_some_and(Path::is_dir) {
                    created("the database", path);
                }
                SqliteElection::open(path, options)
                    .await
                    .map(|e| Opened::Ready(Backend::Sqlite(e)))
                    .map_err(sqlite_failure)
            }
            Some(Url::Postgres(p)) => {
                if timing.grace.is_some() {
                    return Err(Failure::config(
                        "--grace has no meaning for the postgres backend (a contender waits a full TTL)",
                    )
                    .hint("drop --grace"));
                }
                let settings = election_url::Settings {
                    ttl: timing.ttl,
                    renew: timing.renew,
                    observer: timing.observer,
                    ..election_url::Settings::default()
                };
                if !timing.observer {
                    let defaults = PostgresOptions::default();
                    let ttl = timing.ttl.or(p.ttl).unwrap_or(defaults.ttl());
                    let renew = timing.renew.or(p.renew).unwrap_or(
                        if timing.ttl.is_some() || p.ttl.is_some() {
                            ttl / 3
                        } else {
                            defaults.renew_interval()
                        },
                    );
                    check_lease_flags("postgres", &timing, ttl, renew, Duration::from_millis(10))?;
                }
                match Url::Postgres(p.clone()).open(&settings).await {
                    Ok(backend) => Ok(Opened::Ready(backend)),
                    Err(election_url::Error::Absent { what }) => absent(format!(
                        "{what} does not exist: no election has run there (check --backend)"
                    )),
                    Err(election_url::Error::Config(e)) => Err(flag_failure(&e)),
                    Err(election_url::Error::Postgres(e)) => Err(postgres_failure(e)),
                    Err(e @ election_url::Error::Passfile { .. }) => {
                        Err(Failure::config(exit::chain(&e)).hint(
                            "make the password file readable by this user only (chmod 0600), \
                             or give the password in PGPASSWORD",
                        ))
                    }
                    Err(e) => Err(Failure::config(exit::chain(&e))),
                }
            }
            Some(Url::Nats(n)) => {
                let defaults = NatsOptions::default();
                if !timing.observer {
                    let ttl = timing.ttl.unwrap_or(defaults.ttl());
                    let renew = timing.renew.unwrap_or(ttl / 3);
                    check_lease_flags("nats", &timing, ttl, renew, Duration::from_secs(1))?;
                    let grace = timing.grace.unwrap_or((ttl / 3).min(renew));
                    if grace > renew {
                        return Err(Failure::config(format!(
                            "--grace {} is above the renew interval {} (--renew, by default a                              third of --ttl): a new term must still be valid after its grace",
                            dur(grace),
                            dur(renew)
                        ))
                        .hint("give a shorter --grace or a longer --renew"));
                    }
                }
                let settings = election_url::Settings {
                    ttl: timing.ttl,
                    renew: timing.renew,
                    grace: timing.grace,
                    observer: timing.observer,
                    connect_timeout: Some(Duration::from_secs(3)),
                };
                let config = |e: election_core::ConfigError| match e {
                    e @ election_core::ConfigError::BadSetting {
                        setting: "ttl" | "renew_interval" | "failover_grace" | "request_timeout",
                        ..
                    } => flag_failure(&e),
                    e => Failure::config(exit::chain(&e)).hint("fix the URL's options"),
                };
                let servers = n.server_urls().join(",");
                let (client, options) = match n.connect(&settings).await {
                    Ok(opened) => opened,
                    Err(election_url::Error::Config(e)) => return Err(config(e)),
                    Err(election_url::Error::Credentials { path, source }) => {
                        return Err(Failure::config(format!(
                            "cannot read the NATS credentials file {}: {source}",
                            path.display()
                        )));
                    }
                    Err(election_url::Error::Connect { source: e, .. }) => {
                        let message =
                            format!("cannot connect to NATS at {servers}: {}", exit::chain(&e));
                        return Err(match e.kind() {
                            async_nats::ConnectErrorKind::Authentication
                            | async_nats::ConnectErrorKind::AuthorizationViolation => {
                                // Retrying with the same credentials cannot help.
                                Failure::config(format!(
                                    "NATS at {servers} refused the credentials: {}",
                                    exit::chain(&e)
                                ))
                                .hint(
                                    "give the credentials the server expects: ELECT_NATS_TOKEN or \
                                     --nats-token-file; ELECT_NATS_USER with ELECT_NATS_PASSWORD or \
                                     --nats-password-file; ELECT_NATS_CREDS or --nats-creds",
                                )
                            }
                            _ => Failure::new(exit::UNAVAILABLE, message).hint(
                                "check that nats-server runs (with -js) and the address is right",
                            ),
                        });
                    }
                    Err(e) => return Err(Failure::config(exit::chain(&e))),
                };
                match NatsElection::with_client(client.clone(), options.clone()).await {
                    Ok(e) => Ok(Opened::Ready(Backend::Nats(e))),
                    Err(election_nats::Error::NoBucket { .. }) if options.is_observer() => {
                        Ok(Opened::NatsPending(Box::new((client, options))))
                    }
                    Err(e) => Err(nats_failure(e)),
                }
            }
        }
    }
}

impl From<election_core::Error> for Failure {
    /// Sorts every error into permanent (78, with a hint naming the fix)
    /// or transient (69): by the backend error in the source chain where
    /// there is one, else by the core's grouping (see ADR 0018).
    fn from(e: election_core::Error) -> Self {
        use election_core::Error as E;
        let message = exit::chain(&e);
        match e {
            E::HeldElsewhere { .. } | E::NotHeld { .. } => {
                return Failure::new(exit::NOT_ELECTED, message);
            }
            E::Lost(_) => return Failure::new(exit::LOST, message),
            _ => {}
        }
        if let Some((code, hint)) = classify(&e) {
            return Failure::new(code, message).hint(hint);
        }
        match e {
            E::Config(_) => Failure::config(message).hint("fix the flags or the backend URL"),
            E::Unavailable { .. } | E::OutcomeUnknown { .. } => Failure::new(exit::UNAVAILABLE, message)
                .hint("check that the backend is reachable (server running, disk not full), then try again"),
            E::Corrupt { .. } => Failure::new(exit::CONFIG, message).hint(REPAIR_HINT),
            _ => Failure::new(exit::INTERNAL, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_configuration_errors_with_a_hint() {
        // The grammar itself is election-url's (and tested there).
        for bad in [
            "/tmp/x",
            "file://relative",
            "ftp://x",
            "nats://host",
            "nats://h:4222?colour=red",
            "file:///d/fb?x=1",
            "file:///d/f%zz",
            "nats://h:1?bucket=a&bucket=b",
        ] {
            let f = parse_url(bad).unwrap_err();
            assert_eq!(f.code, exit::CONFIG, "{bad}");
            assert!(
                f.message.starts_with(&format!("bad backend URL {bad:?}: ")),
                "{bad}: {}",
                f.message
            );
            assert!(f.hint.is_some());
        }
    }

    #[test]
    fn the_default_directory_is_on_a_disk_and_root_has_its_own() {
        let p = |s: &str| Some(PathBuf::from(s));
        // XDG_STATE_HOME wins, for root too (set explicitly).
        assert_eq!(
            default_dir_for(p("/st"), p("/home/u"), false),
            p("/st/elect")
        );
        assert_eq!(default_dir_for(p("/st"), p("/root"), true), p("/st/elect"));
        // Else root's is /var/lib/elect, whatever HOME is.
        assert_eq!(default_dir_for(None, p("/root"), true), p("/var/lib/elect"));
        assert_eq!(default_dir_for(None, None, true), p("/var/lib/elect"));
        // Else $HOME/.local/state/elect; without HOME, none.
        assert_eq!(
            default_dir_for(None, p("/home/u"), false),
            p("/home/u/.local/state/elect")
        );
        assert_eq!(default_dir_for(None, None, false), None);
    }

    #[test]
    fn secrets_are_not_shown() {
        let f = parse_url("nats://u:s3cret@h:1?token=t0ken&colour=red").unwrap_err();
        assert!(
            !f.message.contains("s3cret") && !f.message.contains("t0ken"),
            "{}",
            f.message
        );
        assert!(f.message.contains("colour"), "{}", f.message);
        let shown = shown_url(&parse_url("nats://u:s3cret@h:1?token=t0ken&bucket=b").unwrap());
        assert_eq!(shown, "nats://h:1?bucket=b");
    }

    #[test]
    fn errors_map_to_what_the_caller_should_do() {
        let name = election_core::ElectionName::new("jobs").unwrap();
        let io = std::io::Error::other("connection refused");
        let f = Failure::from(election_core::Error::unavailable(&name, io));
        assert_eq!(f.code, exit::UNAVAILABLE);
        assert!(f.message.contains("connection refused"), "{}", f.message);
        let bad = election_core::Error::from(election_core::ConfigError::EpochExhausted);
        assert_eq!(Failure::from(bad).code, exit::CONFIG);
    }
}
