//! Backend URLs and opening the backend they name.
//!
//! - `file:///dir`: one host; a directory on a local filesystem.
//! - `sqlite:///path/to/app.db`: a lease row in a SQLite database.
//! - `nats://[user:password@]host:port[,host:port...][?bucket=B&replicas=N&creds=FILE&token=T&single_replica_ok=1]`.
//!
//! No URL: the file backend in a per-user runtime directory
//! (`$XDG_RUNTIME_DIR/elect`, else `/tmp/elect-<uid>`, mode 0700).

use std::path::{Path, PathBuf};
use std::time::Duration;

use election_file::FileElection;
use election_nats::{NatsElection, NatsOptions};
use election_sqlite::{SqliteElection, SqliteOptions};

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

/// What a backend URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Url {
    File(PathBuf),
    Sqlite(PathBuf),
    Nats(NatsUrl),
}

/// A parsed `nats://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NatsUrl {
    /// `nats://host:port`, one per server.
    pub(crate) servers: Vec<String>,
    pub(crate) user: Option<(String, String)>,
    pub(crate) bucket: Option<String>,
    pub(crate) replicas: Option<usize>,
    pub(crate) creds: Option<PathBuf>,
    pub(crate) token: Option<String>,
    /// `single_replica_ok=1`: the user knows an R1 bucket can lose its last
    /// writes on a host crash (no warning).
    pub(crate) single_replica_ok: bool,
}

fn bad(url: &str, reason: impl std::fmt::Display) -> Failure {
    Failure::config(format!("bad backend URL {url:?}: {reason}")).hint(
        "use file:///dir, sqlite:///path/to/db or nats://host:port?bucket=name (see elect --help); \
         write %XX for a '%', '?', '#' or '&' inside a path or value",
    )
}

/// Percent-decodes `text` (`%3F` is `?`); `+` stays `+`. Refuses a `%`
/// not followed by two hex digits, and a decoded NUL byte.
fn decode(url: &str, text: &str, what: &str) -> Result<Vec<u8>, Failure> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    bad(
                        url,
                        format!("{what}: '%' must be followed by two hex digits (%25 for '%')"),
                    )
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(bad(url, format!("{what}: a NUL byte (%00) is not allowed")));
    }
    Ok(out)
}

/// Percent-decodes `text` as UTF-8 text.
fn decode_text(url: &str, text: &str, what: &str) -> Result<String, Failure> {
    String::from_utf8(decode(url, text, what)?)
        .map_err(|_| bad(url, format!("{what} is not UTF-8 once percent-decoded")))
}

/// The `key=value` pairs of a query, percent-decoded, each key once and
/// known to the scheme (in `known`).
fn query(
    url: &str,
    scheme: &str,
    text: Option<&str>,
    known: &[&str],
) -> Result<Vec<(String, String)>, Failure> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for pair in text.split('&') {
        if pair.is_empty() {
            return Err(bad(url, "an empty option (a stray '?' or '&')"));
        }
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad(url, format!("{pair:?} is not key=value")))?;
        let k = decode_text(url, k, "an option name")?;
        if !known.contains(&k.as_str()) {
            let expected = if known.is_empty() {
                format!("{scheme}:// URLs take no options")
            } else {
                format!("{scheme}:// knows {}", known.join(", "))
            };
            return Err(bad(url, format!("unknown option {k:?} ({expected})")));
        }
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(bad(url, format!("option {k:?} is given twice")));
        }
        let v = decode_text(url, v, &format!("the value of {k}"))?;
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Splits `rest` (after `scheme://`) into the part before the query and
/// the query; refuses a fragment.
fn split_query<'a>(url: &str, rest: &'a str) -> Result<(&'a str, Option<&'a str>), Failure> {
    if rest.contains('#') {
        return Err(bad(
            url,
            "a '#' fragment is not part of a backend URL (write %23 for a '#' in a path)",
        ));
    }
    Ok(match rest.split_once('?') {
        Some((before, q)) => (before, Some(q)),
        None => (rest, None),
    })
}

fn absolute(url: &str, scheme: &str, rest: &str) -> Result<PathBuf, Failure> {
    use std::os::unix::ffi::OsStringExt;
    let (path, q) = split_query(url, rest)?;
    query(url, scheme, q, &[])?;
    // `file:///dir` → `/dir`; `file://host/dir` is not supported.
    if !path.starts_with('/') {
        return Err(bad(
            url,
            "the path must be absolute (three slashes: scheme:///path)",
        ));
    }
    if path.len() == 1 {
        return Err(bad(url, "no path"));
    }
    let bytes = decode(url, path, "the path")?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

impl Url {
    /// Parses a backend URL: one grammar for every scheme (see ADR 0018).
    /// Paths and values are percent-decoded; unknown, repeated and empty
    /// options and fragments are refused.
    pub(crate) fn parse(url: &str) -> Result<Url, Failure> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad(url, "no scheme (file://, sqlite:// or nats://)"))?;
        match scheme {
            "file" => Ok(Url::File(absolute(url, scheme, rest)?)),
            "sqlite" => Ok(Url::Sqlite(absolute(url, scheme, rest)?)),
            "nats" => Self::parse_nats(url, rest).map(Url::Nats),
            other => Err(bad(
                url,
                format!("unknown scheme {other:?} (file, sqlite or nats)"),
            )),
        }
    }

    fn parse_nats(url: &str, rest: &str) -> Result<NatsUrl, Failure> {
        let (hosts, q) = split_query(url, rest)?;
        let hosts = hosts.trim_end_matches('/');
        let mut n = NatsUrl::default();
        let hosts = match hosts.rsplit_once('@') {
            Some((userinfo, hosts)) => {
                let (user, password) = userinfo
                    .split_once(':')
                    .ok_or_else(|| bad(url, "user info must be user:password"))?;
                n.user = Some((
                    decode_text(url, user, "the user")?,
                    decode_text(url, password, "the password")?,
                ));
                hosts
            }
            None => hosts,
        };
        for host in hosts.split(',') {
            let host = host.trim().trim_start_matches("nats://");
            let (name, port) = host
                .rsplit_once(':')
                .ok_or_else(|| bad(url, format!("{host:?} has no port")))?;
            if name.is_empty() || port.parse::<u16>().is_err() || host.contains(['/', '%']) {
                return Err(bad(url, format!("{host:?} is not host:port")));
            }
            n.servers.push(format!("nats://{host}"));
        }
        let known = ["bucket", "replicas", "creds", "token", "single_replica_ok"];
        for (k, v) in query(url, "nats", q, &known)? {
            match k.as_str() {
                "bucket" => n.bucket = Some(v),
                "replicas" => {
                    n.replicas = Some(
                        v.parse()
                            .map_err(|_| bad(url, format!("replicas={v:?} is not a number")))?,
                    )
                }
                "creds" => n.creds = Some(PathBuf::from(v)),
                "token" => n.token = Some(v),
                _ => {
                    n.single_replica_ok = match v.as_str() {
                        "1" | "true" => true,
                        "0" | "false" => false,
                        _ => {
                            return Err(bad(url, format!("single_replica_ok={v:?} is not 1 or 0")));
                        }
                    }
                }
            }
        }
        Ok(n)
    }

    /// How the URL is shown in progress lines (no password or token).
    pub(crate) fn shown(&self) -> String {
        match self {
            Url::File(p) => format!("file://{}", p.display()),
            Url::Sqlite(p) => format!("sqlite://{}", p.display()),
            Url::Nats(n) => {
                let mut s = n.servers.join(",");
                if let Some(b) = &n.bucket {
                    s.push_str(&format!("?bucket={b}"));
                }
                s
            }
        }
    }
}

/// Where the per-user default directory is (see [`default_dir`]).
fn default_dir_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => Path::new(&runtime).join("elect"),
        None => PathBuf::from(format!("/tmp/elect-{}", nix::unistd::getuid())),
    }
}

/// The per-user default directory: `$XDG_RUNTIME_DIR/elect`, else
/// `/tmp/elect-<uid>`; created with mode 0700 if missing, and refused if
/// another user owns it.
pub(crate) fn default_dir() -> Result<PathBuf, Failure> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid();
    let dir = default_dir_path();
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Failure::config(format!(
                "cannot create the default directory {}: {e}",
                dir.display()
            ))
            .hint("pass --backend file:///some/dir you can write to"));
        }
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
pub(crate) enum Backend {
    File(FileElection),
    Sqlite(SqliteElection),
    Nats(NatsElection),
    /// NATS for an observer, whose bucket does not exist yet: nobody has
    /// ever been elected there. Opened again by [`Backend::ready`].
    NatsPending(Box<(async_nats::Client, NatsOptions)>),
    /// A read-only command's directory or database that does not exist
    /// (or has no election tables): nobody was ever elected there, and
    /// nothing is created. Opened again by [`Backend::ready`].
    Absent(Box<Absent>),
}

/// What [`Backend::Absent`] names.
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
        next = e.source();
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
    })
}

fn os_error(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut next = Some(e);
    while let Some(e) = next.map(unwrapped) {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        next = e.source();
    }
    None
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
        E::Unusable { path, .. } if os_error(e) == Some(nix::libc::EFBIG) => config(format!(
            "writing {} went past the file size limit: raise it (ulimit -f) in the shell that starts elect",
            path.display()
        )),
        E::Unusable { path, .. } if os_error(e) == Some(nix::libc::EISDIR) => config(format!(
            "{} is a directory where elect keeps a file: move it out of the way (an .epoch record \
             must never be deleted: if one is lost, use elect repair-epoch)",
            path.display()
        )),
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
        E::CorruptEpoch { .. } => config(REPAIR_HINT.to_owned()),
        E::ClaimHeld { .. } => (
            exit::UNAVAILABLE,
            "stop every process of this election first, then repair".to_owned(),
        ),
        E::EpochTooLow { .. } => {
            config("give an epoch at least as high as any token your resources hold".to_owned())
        }
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
        E::SchemaTooNew { .. } => config("upgrade elect: a newer version wrote this database"),
        E::FileReplaced { .. } => config(
            "the database file was replaced while elect ran: never replace it while candidates run",
        ),
        E::CorruptRow { .. } => config(
            "a lease row holds values elect never writes: restore the database from a backup",
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
        _ => config("check the URL's options and the bucket's settings"),
    }
}

pub(crate) fn nats_failure(e: election_nats::Error) -> Failure {
    let (code, hint) = nats_class(&e);
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

impl Backend {
    /// A backend that did not exist when opened, opened again: `None`
    /// while it still does not (a NATS bucket, or a read-only command's
    /// directory or database).
    pub(crate) async fn ready(&self) -> Result<Option<Backend>, Failure> {
        match self {
            Backend::NatsPending(pending) => {
                let (client, options) = &**pending;
                match NatsElection::with_client(client.clone(), options.clone()).await {
                    Ok(e) => Ok(Some(Backend::Nats(e))),
                    Err(election_nats::Error::NoBucket { .. }) => Ok(None),
                    Err(e) => Err(nats_failure(e)),
                }
            }
            Backend::Absent(absent) => {
                let timing = Timing {
                    observer: true,
                    ..Timing::default()
                };
                match Backend::open(absent.url.as_ref(), timing, None).await? {
                    Backend::Absent(_) => Ok(None),
                    opened => Ok(Some(opened)),
                }
            }
            _ => Ok(None),
        }
    }

    /// Not there yet (a bucket, a directory or a database): nobody was
    /// ever elected there.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self, Backend::NatsPending(..) | Backend::Absent(..))
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
            Backend::File(election) => election,
            Backend::Absent(absent) => {
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
            (Some(u), _) => u.shown(),
            (None, Backend::File(e)) => format!("file://{}", e.dir().display()),
            (None, _) => String::new(),
        }
    }

    /// Opens the backend `url` names (the default file backend for `None`).
    ///
    /// For a read-only command (`timing.observer`) nothing is created: a
    /// missing directory or database (or one without election tables)
    /// opens as [`Backend::Absent`]. For `run`, a directory or database
    /// that is created is said on stderr through `report`.
    pub(crate) async fn open(
        url: Option<&Url>,
        timing: Timing,
        report: Option<crate::report::Reporter>,
    ) -> Result<Backend, Failure> {
        let absent = |note: String| {
            Ok(Backend::Absent(Box::new(Absent {
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
                    let dir = default_dir_path();
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
                    .map(Backend::File)
                    .map_err(file_failure)
            }
            Some(Url::File(dir)) => {
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
                FileElection::new(dir.clone())
                    .map(Backend::File)
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
                        Ok(Some(e)) => Ok(Backend::Sqlite(e)),
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
                    .map(Backend::Sqlite)
                    .map_err(sqlite_failure)
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
                let mut options = match timing.ttl {
                    Some(ttl) => NatsOptions::new(ttl),
                    None => Ok(defaults),
                }
                .map_err(|e| flag_failure(&e))?;
                let config = |e: election_core::ConfigError| match e {
                    e @ election_core::ConfigError::BadSetting {
                        setting: "ttl" | "renew_interval" | "failover_grace" | "request_timeout",
                        ..
                    } => flag_failure(&e),
                    e => Failure::config(exit::chain(&e)).hint("fix the URL's options"),
                };
                // The grace must not exceed the renew interval: lower it
                // first (to the renew interval if only that was given).
                let grace = timing
                    .grace
                    .or(timing.renew.map(|r| r.min(options.grace())));
                if let Some(grace) = grace {
                    options = options.failover_grace(grace).map_err(config)?;
                }
                if let Some(renew) = timing.renew {
                    options = options.renew_interval(renew).map_err(config)?;
                }
                options = options
                    .observer(timing.observer)
                    .single_replica_ok(n.single_replica_ok);
                if let Some(bucket) = &n.bucket {
                    options = options.bucket(bucket.clone()).map_err(config)?;
                }
                if let Some(r) = n.replicas {
                    options = options.replicas(r).map_err(config)?;
                }
                let mut connect = async_nats::ConnectOptions::new()
                    .connection_timeout(Duration::from_secs(3))
                    .ping_interval(options.renew_every());
                if let Some((user, password)) = &n.user {
                    connect = connect.user_and_password(user.clone(), password.clone());
                }
                if let Some(token) = &n.token {
                    connect = connect.token(token.clone());
                }
                if let Some(creds) = &n.creds {
                    connect = connect.credentials_file(creds).await.map_err(|e| {
                        Failure::config(format!(
                            "cannot read the NATS credentials file {}: {e}",
                            creds.display()
                        ))
                    })?;
                }
                let servers: Vec<async_nats::ServerAddr> = n
                    .servers
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<_, _>>()
                    .map_err(|e| Failure::config(format!("bad NATS server address: {e}")))?;
                let client = connect.connect(servers).await.map_err(|e| {
                    let message = format!(
                        "cannot connect to NATS at {}: {}",
                        n.servers.join(","),
                        exit::chain(&e)
                    );
                    match e.kind() {
                        async_nats::ConnectErrorKind::Authentication
                        | async_nats::ConnectErrorKind::AuthorizationViolation => {
                            // Retrying with the same credentials cannot help.
                            Failure::config(format!(
                                "NATS at {} refused the credentials: {}",
                                n.servers.join(","),
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
                    }
                })?;
                match NatsElection::with_client(client.clone(), options.clone()).await {
                    Ok(e) => Ok(Backend::Nats(e)),
                    Err(election_nats::Error::NoBucket { .. }) if options.is_observer() => {
                        Ok(Backend::NatsPending(Box::new((client, options))))
                    }
                    Err(e) => Err(nats_failure(e)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_why_not() {
        assert_eq!(
            Url::parse("file:///var/lib/x").unwrap(),
            Url::File("/var/lib/x".into())
        );
        assert_eq!(
            Url::parse("sqlite:///srv/app.db").unwrap(),
            Url::Sqlite("/srv/app.db".into())
        );
        let Url::Nats(n) =
            Url::parse("nats://u:p@h1:4222,h2:4223?bucket=jobs&replicas=3&creds=/c").unwrap()
        else {
            panic!("not nats");
        };
        assert_eq!(n.servers, ["nats://h1:4222", "nats://h2:4223"]);
        assert_eq!(n.user, Some(("u".into(), "p".into())));
        assert_eq!((n.bucket.as_deref(), n.replicas), (Some("jobs"), Some(3)));
        assert_eq!(n.creds, Some(PathBuf::from("/c")));
        assert!(!n.single_replica_ok);
        let Url::Nats(n) = Url::parse("nats://h:1?single_replica_ok=1").unwrap() else {
            panic!("not nats");
        };
        assert!(n.single_replica_ok);
        for bad in [
            "/tmp/x",
            "file://relative",
            "file:///",
            "ftp://x",
            "nats://host",
            "nats://h:99999",
            "nats://h:4222?colour=red",
            "nats://h:4222?replicas=three",
            "nats://h:4222?single_replica_ok=yes",
        ] {
            let f = Url::parse(bad).unwrap_err();
            assert_eq!(f.code, exit::CONFIG, "{bad}");
            assert!(f.hint.is_some());
        }
        for bad in [
            "file:///d/fb?x=1",
            "sqlite:///d/app.db?mode=ro",
            "file:///d/fb?",
            "file:///d/fb#x",
            "file:///d/f%zz",
            "file:///d/f%2",
            "file:///d/f%00b",
            "nats://h:1?bucket=a&bucket=b",
            "nats://h:1?bucket=a&&replicas=1",
            "nats://h:1?bucket",
            "nats://h%41:1",
            "nats://u:p%ZZ@h:1",
        ] {
            let f = Url::parse(bad).unwrap_err();
            assert_eq!(f.code, exit::CONFIG, "{bad}");
            assert!(
                f.message.starts_with("bad backend URL"),
                "{bad}: {}",
                f.message
            );
        }
        assert_eq!(
            Url::parse("file:///d/f%3Fx%3D1%20%25").unwrap(),
            Url::File("/d/f?x=1 %".into())
        );
        assert_eq!(
            Url::parse("sqlite:///srv/a+b%23.db").unwrap(),
            Url::Sqlite("/srv/a+b#.db".into())
        );
        let Url::Nats(n) =
            Url::parse("nats://us%40r:p%3Aw%26@h:1?token=a%26b&creds=/c%20d&bucket=j").unwrap()
        else {
            panic!("not nats");
        };
        assert_eq!(n.user, Some(("us@r".into(), "p:w&".into())));
        assert_eq!(n.token.as_deref(), Some("a&b"));
        assert_eq!(n.creds, Some(PathBuf::from("/c d")));
        let shown = Url::parse("nats://u:secret@h:1?token=t0k&bucket=b")
            .unwrap()
            .shown();
        assert!(
            !shown.contains("secret") && !shown.contains("t0k"),
            "{shown}"
        );
    }
}
