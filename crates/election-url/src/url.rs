//! The grammar: parsing and printing backend URLs.

use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS};

use crate::ParseError;

/// What a backend URL names (see the crate docs for the grammar).
///
/// [`Display`](fmt::Display) and [`Debug`] never show a password or a
/// token ([`REDACTED`] stands in for them); [`BackendUrl::with_secrets`]
/// prints the URL whole, for a process that must be handed it.
///
/// ```
/// use election_url::BackendUrl;
///
/// let url: BackendUrl = "nats://u:pw@h1:4222,h2:4222?bucket=jobs&token=t0k".parse()?;
/// assert_eq!(url.to_string(), "nats://u:REDACTED@h1:4222,h2:4222?bucket=jobs&token=REDACTED");
/// let whole = url.with_secrets().to_string();
/// assert_eq!(whole.parse::<BackendUrl>()?, url);
/// # Ok::<(), election_url::ParseError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendUrl {
    /// `file:///dir[?volatile_ok=1&unknown_fs_ok=1]`: the file backend in
    /// a directory on a local filesystem.
    File(FileUrl),
    /// `sqlite:///path/to/app.db`: a lease row in a SQLite database file.
    Sqlite(PathBuf),
    /// `nats://...`: a NATS JetStream KV bucket.
    Nats(NatsUrl),
    /// `postgres://...` (or `postgresql://`): a lease row per name in a
    /// PostgreSQL database.
    Postgres(PostgresUrl),
}

/// A parsed `postgres://` (or `postgresql://`) URL:
/// `postgres://[user[:password]@]host[:port][/database][?option=value&...]`.
///
/// The host is a name, an IPv4 address, an IPv6 address in brackets, or
/// (percent-encoded, starting with `%2F`) the directory of the server's
/// unix socket. Without a password in the URL, the password comes from
/// `PGPASSWORD`, then the `?passfile=` file, then `PGPASSFILE` or
/// `~/.pgpass` (libpq's order): it never has to be on a command line.
///
/// ```
/// use std::time::Duration;
/// use election_url::BackendUrl;
///
/// let url: BackendUrl = "postgresql://app:pw@db:5433/jobs?schema=jobs_election&ttl=9s&renew=3s".parse()?;
/// let BackendUrl::Postgres(pg) = &url else { unreachable!() };
/// assert_eq!((pg.host.as_str(), pg.port, pg.database.as_deref()), ("db", Some(5433), Some("jobs")));
/// assert_eq!(pg.ttl, Some(Duration::from_secs(9)));
/// assert_eq!(url.to_string(), "postgres://app:REDACTED@db:5433/jobs?schema=jobs_election&ttl=9s&renew=3s");
/// # Ok::<(), election_url::ParseError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresUrl {
    /// The user (the server's default, the OS user, if `None`).
    pub user: Option<String>,
    /// The password given in the URL (better: `PGPASSWORD` or a passfile).
    pub password: Option<Secret>,
    /// The host name or address (an IPv6 address keeps its brackets), or
    /// the directory of the server's unix socket (an absolute path).
    pub host: String,
    /// The port (5432 if `None`).
    pub port: Option<u16>,
    /// The database (the server's default, the user's name, if `None`).
    pub database: Option<String>,
    /// `?schema=`: the schema of the election tables (the backend's
    /// default if `None`).
    pub schema: Option<String>,
    /// `?ttl=`: the lease TTL (`500ms`, `15s`, `2m`, `1h`).
    pub ttl: Option<Duration>,
    /// `?renew=`: the renew interval.
    pub renew: Option<Duration>,
    /// `?passfile=`: a password file in `~/.pgpass`'s format.
    pub passfile: Option<PathBuf>,
    /// `?sslmode=`: `disable`, `allow`, `prefer`, `require`, `verify-ca`
    /// or `verify-full` (libpq's meanings).
    pub sslmode: Option<String>,
}

/// The options `postgres://` knows, in the order they are printed.
pub const POSTGRES_OPTIONS: &[&str] = &["schema", "ttl", "renew", "passfile", "sslmode"];

const SSL_MODES: &[&str] = &[
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// Parses a `ttl` or `renew`: the one duration grammar
/// ([`crate::parse_duration`]: `500ms`, `1.5s`, `2m`, `1h`), at least 1 ms.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = crate::parse_duration(text).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(1) {
        return Err("below 1ms".to_owned());
    }
    Ok(d)
}

/// A parsed `file://` URL: `file:///dir[?volatile_ok=1&unknown_fs_ok=1]`.
///
/// The directory must be on a filesystem known to be local and on a disk;
/// the options accept, by name, what the file backend refuses otherwise
/// (see [`FileUrl::options`]).
///
/// ```
/// use election_url::{BackendUrl, FileUrl};
///
/// let url: BackendUrl = "file:///run/elect?volatile_ok=1".parse()?;
/// let BackendUrl::File(file) = &url else { unreachable!() };
/// assert_eq!(file.dir, std::path::Path::new("/run/elect"));
/// assert!(file.volatile_ok && !file.unknown_fs_ok);
/// let mut asked = FileUrl::new("/run/elect");
/// asked.volatile_ok = true;
/// assert_eq!(url, BackendUrl::File(asked));
/// assert_eq!(url.to_string(), "file:///run/elect?volatile_ok=1");
/// # Ok::<(), election_url::ParseError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileUrl {
    /// The directory (absolute).
    pub dir: PathBuf,
    /// `?volatile_ok=1`: accept a directory on tmpfs or ramfs, which a
    /// reboot empties (epochs start again after it):
    /// [`FileOptions::allow_volatile`](election_file::FileOptions::allow_volatile).
    pub volatile_ok: bool,
    /// `?unknown_fs_ok=1`: accept a directory on a filesystem of a type not
    /// known to be local:
    /// [`FileOptions::allow_unknown_filesystem`](election_file::FileOptions::allow_unknown_filesystem).
    pub unknown_fs_ok: bool,
}

impl FileUrl {
    /// `file://dir`, without options.
    ///
    /// ```
    /// use election_url::{BackendUrl, FileUrl};
    ///
    /// let url = BackendUrl::File(FileUrl::new("/var/lib/elect"));
    /// assert_eq!(url.to_string(), "file:///var/lib/elect");
    /// ```
    pub fn new(dir: impl Into<PathBuf>) -> FileUrl {
        FileUrl {
            dir: dir.into(),
            ..FileUrl::default()
        }
    }

    /// The file backend's options this URL gives.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("file://{}?volatile_ok=1", tmp.path().display()).parse()?;
    /// let BackendUrl::File(file) = &url else { unreachable!() };
    /// let election = election_file::FileElection::with_options(&file.dir, file.options())?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> election_file::FileOptions {
        election_file::FileOptions::default()
            .allow_volatile(self.volatile_ok)
            .allow_unknown_filesystem(self.unknown_fs_ok)
    }
}

impl From<PathBuf> for FileUrl {
    fn from(dir: PathBuf) -> FileUrl {
        FileUrl::new(dir)
    }
}

/// The options `file://` knows, in the order they are printed.
pub const FILE_OPTIONS: &[&str] = &["volatile_ok", "unknown_fs_ok"];

/// A parsed `nats://` URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NatsUrl {
    /// The servers, `host:port` each (at least one once parsed).
    pub servers: Vec<String>,
    /// `user:password@`.
    pub user: Option<(String, Secret)>,
    /// `?bucket=`: the bucket name (the backend's default if `None`).
    pub bucket: Option<String>,
    /// `?replicas=`: the bucket's replicas (the backend's default if
    /// `None`).
    pub replicas: Option<usize>,
    /// `?creds=`: a NATS credentials file (JWT and NKey seed).
    pub creds: Option<PathBuf>,
    /// `?token=`: a NATS token.
    pub token: Option<Secret>,
    /// `?single_replica_ok=1`: the user knows an R1 bucket can lose its
    /// last writes on a host crash (no warning).
    pub single_replica_ok: bool,
}

/// What stands in for a password or a token when a URL is shown.
pub const REDACTED: &str = "REDACTED";

/// A password or a token: shown as [`REDACTED`] by `Debug` and `Display`;
/// [`expose`](Secret::expose) gives the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    ///
    /// ```
    /// use election_url::Secret;
    ///
    /// let token = Secret::new("s3cr3t");
    /// assert_eq!(format!("{token} {token:?}"), "REDACTED REDACTED");
    /// ```
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, to hand to the server.
    ///
    /// ```
    /// use election_url::Secret;
    ///
    /// let token = Secret::new("s3cr3t");
    /// assert_eq!(token.expose(), "s3cr3t"); // for the server only, never a log
    /// ```
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// The options `nats://` knows, in the order they are printed.
pub const NATS_OPTIONS: &[&str] = &["bucket", "replicas", "creds", "token", "single_replica_ok"];

fn malformed(reason: impl Into<String>) -> ParseError {
    ParseError::Malformed {
        reason: reason.into(),
    }
}

/// Percent-decodes `text` (`%3F` is `?`); `+` stays `+`. Refuses a `%`
/// not followed by two hex digits (which [`percent_encoding`] would keep
/// as it is), and a decoded NUL byte.
fn decode(text: &str, what: &str) -> Result<Vec<u8>, ParseError> {
    let bytes = text.as_bytes();
    let bad_escape = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if bad_escape {
        return Err(malformed(format!(
            "{what}: '%' must be followed by two hex digits (%25 for '%')"
        )));
    }
    let out: Vec<u8> = percent_encoding::percent_decode(bytes).collect();
    if out.contains(&0) {
        return Err(malformed(format!(
            "{what}: a NUL byte (%00) is not allowed"
        )));
    }
    Ok(out)
}

/// Percent-decodes `text` as UTF-8 text.
fn decode_text(text: &str, what: &str) -> Result<String, ParseError> {
    String::from_utf8(decode(text, what)?)
        .map_err(|_| malformed(format!("{what} is not UTF-8 once percent-decoded")))
}

/// The bytes a path's or a value's printing percent-encodes besides those
/// above ASCII: control bytes, the space, and those the grammar gives a
/// meaning (`%`, `?`, `#`, `&`, `=`, `,`, `@`, `:`).
const MEANINGFUL: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'%')
    .add(b'?')
    .add(b'#')
    .add(b'&')
    .add(b'=')
    .add(b',')
    .add(b'@')
    .add(b':');

/// [`MEANINGFUL`] and `/`: for a value that is not a path.
const MEANINGFUL_AND_SLASH: &AsciiSet = &MEANINGFUL.add(b'/');

/// Percent-encodes the bytes of `bytes` that the grammar gives a meaning
/// (`%`, `?`, `#`, `&`, `=`, `,`, `@`, `:`, `/` where `slash` is false),
/// spaces, control bytes and every byte above ASCII.
fn encode(bytes: &[u8], slash: bool) -> String {
    let set = if slash {
        MEANINGFUL
    } else {
        MEANINGFUL_AND_SLASH
    };
    percent_encoding::percent_encode(bytes, set).to_string()
}

/// The `key=value` pairs of a query, percent-decoded, each key once and
/// known to the scheme.
fn query(
    scheme: &'static str,
    text: Option<&str>,
    known: &'static [&'static str],
) -> Result<Vec<(String, String)>, ParseError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    for pair in text.split('&') {
        if pair.is_empty() {
            return Err(malformed("an empty option (a stray '?' or '&')"));
        }
        let (k, v) = pair.split_once('=').ok_or(ParseError::NotKeyValue)?;
        let k = decode_text(k, "an option name")?;
        if !known.contains(&k.as_str()) {
            return Err(ParseError::UnknownOption {
                scheme,
                option: k,
                known,
            });
        }
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(ParseError::RepeatedOption { option: k });
        }
        let v = decode_text(v, &format!("the value of {k}"))?;
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Splits `rest` (after `scheme://`) into the part before the query and
/// the query; refuses a fragment.
fn split_query(rest: &str) -> Result<(&str, Option<&str>), ParseError> {
    if rest.contains('#') {
        return Err(malformed(
            "a '#' fragment is not part of a backend URL (write %23 for a '#' in a path)",
        ));
    }
    Ok(match rest.split_once('?') {
        Some((before, q)) => (before, Some(q)),
        None => (rest, None),
    })
}

/// `1`/`true` or `0`/`false`, the value of a yes-or-no option.
fn flag(option: &str, value: &str) -> Result<bool, ParseError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(ParseError::BadValue {
            option: option.to_owned(),
            reason: "not 1 or 0".to_owned(),
        }),
    }
}

fn parse_file(rest: &str) -> Result<FileUrl, ParseError> {
    let (path, q) = split_query(rest)?;
    let mut file = FileUrl::new(absolute(path)?);
    for (k, v) in query("file", q, FILE_OPTIONS)? {
        let on = flag(&k, &v)?;
        match k.as_str() {
            "volatile_ok" => file.volatile_ok = on,
            _ => file.unknown_fs_ok = on,
        }
    }
    Ok(file)
}

fn parse_sqlite(rest: &str) -> Result<PathBuf, ParseError> {
    let (path, q) = split_query(rest)?;
    query("sqlite", q, &[])?;
    absolute(path)
}

/// The absolute path of `scheme://path` (after the query is split off).
fn absolute(path: &str) -> Result<PathBuf, ParseError> {
    // `file:///dir` → `/dir`; `file://host/dir` is not supported.
    if !path.starts_with('/') {
        return Err(malformed(
            "the path must be absolute (three slashes: scheme:///path)",
        ));
    }
    if path.len() == 1 {
        return Err(malformed("no path"));
    }
    let bytes = decode(path, "the path")?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

fn parse_nats(rest: &str) -> Result<NatsUrl, ParseError> {
    let (hosts, q) = split_query(rest)?;
    let hosts = hosts.trim_end_matches('/');
    let mut n = NatsUrl::default();
    let hosts = match hosts.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = userinfo
                .split_once(':')
                .ok_or_else(|| malformed("user info must be user:password"))?;
            n.user = Some((
                decode_text(user, "the user")?,
                Secret(decode_text(password, "the password")?),
            ));
            hosts
        }
        None => hosts,
    };
    for host in hosts.split(',') {
        let host = host.trim().trim_start_matches("nats://");
        let (name, port) = host
            .rsplit_once(':')
            .ok_or_else(|| malformed(format!("{host:?} has no port")))?;
        if name.is_empty()
            || port.parse::<u16>().is_err()
            || host.contains(['/', '%', '@', '?', '&', '=', ' '])
        {
            return Err(malformed(format!("{host:?} is not host:port")));
        }
        n.servers.push(host.to_owned());
    }
    for (k, v) in query("nats", q, NATS_OPTIONS)? {
        let bad = |reason: &str| ParseError::BadValue {
            option: k.clone(),
            reason: reason.to_owned(),
        };
        match k.as_str() {
            "bucket" => n.bucket = Some(v),
            "replicas" => n.replicas = Some(v.parse().map_err(|_| bad("not a number"))?),
            "creds" => n.creds = Some(PathBuf::from(v)),
            "token" => n.token = Some(Secret(v)),
            _ => n.single_replica_ok = flag(&k, &v)?,
        }
    }
    Ok(n)
}

impl BackendUrl {
    /// Parses a backend URL: one grammar for every scheme (see the crate
    /// docs). Paths and values are percent-decoded; unknown, repeated and
    /// empty options, and fragments, are refused with a [`ParseError`]
    /// naming what is wrong (never a secret).
    ///
    /// ```
    /// use std::path::Path;
    ///
    /// use election_url::{BackendUrl, ParseError};
    ///
    /// let url = BackendUrl::parse("sqlite:///srv/my%20app.db")?;
    /// assert_eq!(url, BackendUrl::Sqlite(Path::new("/srv/my app.db").into()));
    ///
    /// let typo = BackendUrl::parse("nats://h:4222?buckets=jobs");
    /// assert!(matches!(typo, Err(ParseError::UnknownOption { .. })));
    /// # Ok::<(), ParseError>(())
    /// ```
    pub fn parse(url: &str) -> Result<BackendUrl, ParseError> {
        let (scheme, rest) = url.split_once("://").ok_or(ParseError::NoScheme)?;
        match scheme {
            "file" => parse_file(rest).map(BackendUrl::File),
            "sqlite" => parse_sqlite(rest).map(BackendUrl::Sqlite),
            "nats" => parse_nats(rest).map(BackendUrl::Nats),
            "postgres" | "postgresql" => parse_postgres(rest).map(BackendUrl::Postgres),
            other => Err(ParseError::UnknownScheme {
                scheme: other.to_owned(),
            }),
        }
    }

    /// `file://dir` without options: the file backend in `dir`.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// assert_eq!(BackendUrl::file("/srv/elect").to_string(), "file:///srv/elect");
    /// ```
    pub fn file(dir: impl Into<PathBuf>) -> BackendUrl {
        BackendUrl::File(FileUrl::new(dir))
    }

    /// The scheme: `file`, `sqlite`, `nats` or `postgres`.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "postgresql://app@db.internal/app".parse()?;
    /// assert_eq!(url.scheme(), "postgres");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn scheme(&self) -> &'static str {
        match self {
            BackendUrl::File(_) => "file",
            BackendUrl::Sqlite(_) => "sqlite",
            BackendUrl::Nats(_) => "nats",
            BackendUrl::Postgres(_) => "postgres",
        }
    }

    /// The URL with its secrets, for `Display` (to hand to another
    /// process; never to a log).
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "nats://h:4222?token=t0k".parse()?;
    /// assert_eq!(url.to_string(), "nats://h:4222?token=REDACTED"); // for logs
    /// // For a child process's environment, never a log:
    /// let whole = url.with_secrets().to_string();
    /// assert_eq!(whole, "nats://h:4222?token=t0k");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn with_secrets(&self) -> WithSecrets<'_> {
        WithSecrets(self)
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, secrets: bool) -> fmt::Result {
        let path = |p: &Path| encode(p.as_os_str().as_bytes(), true);
        match self {
            BackendUrl::File(p) => {
                write!(f, "file://{}", path(&p.dir))?;
                let mut sep = '?';
                for (k, on) in [
                    ("volatile_ok", p.volatile_ok),
                    ("unknown_fs_ok", p.unknown_fs_ok),
                ] {
                    if on {
                        write!(f, "{sep}{k}=1")?;
                        sep = '&';
                    }
                }
                Ok(())
            }
            BackendUrl::Sqlite(p) => write!(f, "sqlite://{}", path(p)),
            BackendUrl::Nats(n) => {
                let shown = |s: &Secret| {
                    if secrets {
                        encode(s.0.as_bytes(), false)
                    } else {
                        REDACTED.to_owned()
                    }
                };
                f.write_str("nats://")?;
                if let Some((user, password)) = &n.user {
                    write!(f, "{}:{}@", encode(user.as_bytes(), false), shown(password))?;
                }
                f.write_str(&n.servers.join(","))?;
                let mut sep = '?';
                let mut option = |f: &mut fmt::Formatter<'_>, k: &str, v: String| {
                    let r = write!(f, "{sep}{k}={v}");
                    sep = '&';
                    r
                };
                if let Some(b) = &n.bucket {
                    option(f, "bucket", encode(b.as_bytes(), false))?;
                }
                if let Some(r) = n.replicas {
                    option(f, "replicas", r.to_string())?;
                }
                if let Some(c) = &n.creds {
                    option(f, "creds", encode(c.as_os_str().as_bytes(), true))?;
                }
                if let Some(t) = &n.token {
                    option(f, "token", shown(t))?;
                }
                if n.single_replica_ok {
                    option(f, "single_replica_ok", "1".to_owned())?;
                }
                Ok(())
            }
            BackendUrl::Postgres(p) => p.write(f, secrets),
        }
    }
}

fn parse_postgres(rest: &str) -> Result<PostgresUrl, ParseError> {
    let (before, q) = split_query(rest)?;
    let (authority, database) = match before.split_once('/') {
        Some((a, d)) => (a, Some(d)),
        None => (before, None),
    };
    let mut p = PostgresUrl::default();
    let hostport = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, pw)) => (u, Some(pw)),
                None => (userinfo, None),
            };
            if user.is_empty() {
                return Err(malformed("an empty user before '@'"));
            }
            p.user = Some(decode_text(user, "the user")?);
            p.password = password
                .map(|pw| decode_text(pw, "the password").map(Secret))
                .transpose()?;
            hostport
        }
        None => authority,
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| malformed("an IPv6 address without its ']'"))?;
        if addr.is_empty()
            || !addr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(malformed("not an IPv6 address in brackets"));
        }
        match after {
            "" => (format!("[{addr}]"), None),
            _ => match after.strip_prefix(':') {
                Some(port) => (format!("[{addr}]"), Some(port)),
                None => return Err(malformed("after an IPv6 address: ':port' or nothing")),
            },
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, port)) => (decode_text(h, "the host")?, Some(port)),
            None => (decode_text(hostport, "the host")?, None),
        }
    };
    if host.is_empty() {
        return Err(malformed("no host (postgres://host[:port]/database)"));
    }
    if !host.starts_with('/')
        && !host.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    {
        return Err(malformed(
            "the host is a name, an address, or a socket directory (%2F...)",
        ));
    }
    p.host = host;
    p.port = port
        .map(|port| {
            port.parse::<u16>()
                .ok()
                .filter(|&n| n != 0)
                .ok_or_else(|| malformed("the port is not a number from 1 to 65535"))
        })
        .transpose()?;
    p.database = match database {
        None | Some("") => None,
        Some(d) => Some(decode_text(d, "the database")?),
    };
    for (k, v) in query("postgres", q, POSTGRES_OPTIONS)? {
        let bad = |reason: &str| ParseError::BadValue {
            option: k.clone(),
            reason: reason.to_owned(),
        };
        match k.as_str() {
            "schema" => {
                if let Err(e) = election_postgres::PostgresOptions::default().with_schema(&v) {
                    let reason = match e {
                        election_core::ConfigError::BadName { reason, .. } => reason.to_string(),
                        _ => "not a schema name".to_owned(),
                    };
                    return Err(bad(&format!("not a schema name: it {reason}")));
                }
                p.schema = Some(v)
            }
            "ttl" => p.ttl = Some(parse_duration(&v).map_err(|e| bad(&e))?),
            "renew" => p.renew = Some(parse_duration(&v).map_err(|e| bad(&e))?),
            "passfile" => {
                if !v.starts_with('/') {
                    return Err(bad("not an absolute path"));
                }
                p.passfile = Some(PathBuf::from(v))
            }
            _ => {
                if !SSL_MODES.contains(&v.as_str()) {
                    return Err(bad(
                        "not one of disable, allow, prefer, require, verify-ca, verify-full",
                    ));
                }
                p.sslmode = Some(v)
            }
        }
    }
    Ok(p)
}

impl PostgresUrl {
    fn write(&self, f: &mut fmt::Formatter<'_>, secrets: bool) -> fmt::Result {
        f.write_str("postgres://")?;
        if let Some(user) = &self.user {
            f.write_str(&encode(user.as_bytes(), false))?;
            if let Some(pw) = &self.password {
                if secrets {
                    write!(f, ":{}", encode(pw.0.as_bytes(), false))?;
                } else {
                    write!(f, ":{REDACTED}")?;
                }
            }
            f.write_str("@")?;
        }
        if self.host.starts_with('[') {
            f.write_str(&self.host)?;
        } else {
            f.write_str(&encode(self.host.as_bytes(), false))?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        if let Some(db) = &self.database {
            write!(f, "/{}", encode(db.as_bytes(), false))?;
        }
        let mut sep = '?';
        let mut option = |f: &mut fmt::Formatter<'_>, k: &str, v: String| {
            let r = write!(f, "{sep}{k}={v}");
            sep = '&';
            r
        };
        if let Some(s) = &self.schema {
            option(f, "schema", s.clone())?;
        }
        if let Some(t) = self.ttl {
            option(f, "ttl", crate::format_duration(t))?;
        }
        if let Some(r) = self.renew {
            option(f, "renew", crate::format_duration(r))?;
        }
        if let Some(pf) = &self.passfile {
            option(f, "passfile", encode(pf.as_os_str().as_bytes(), true))?;
        }
        if let Some(m) = &self.sslmode {
            option(f, "sslmode", m.clone())?;
        }
        Ok(())
    }
}

impl NatsUrl {
    /// The servers as `nats://host:port` each.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "nats://n1:4222,nats://n2:4222".parse()?;
    /// let BackendUrl::Nats(nats) = &url else {
    ///     return Err("not a nats:// URL".into());
    /// };
    /// assert_eq!(nats.server_urls(), ["nats://n1:4222", "nats://n2:4222"]);
    /// # Ok(()) }
    /// ```
    pub fn server_urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| format!("nats://{s}")).collect()
    }
}

impl FromStr for BackendUrl {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BackendUrl::parse(s)
    }
}

/// Prints the URL without its secrets: [`REDACTED`] stands for a password
/// or a token.
impl fmt::Display for BackendUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, false)
    }
}

/// A [`BackendUrl`] printed whole, secrets included (from
/// [`BackendUrl::with_secrets`]).
#[derive(Clone, Copy)]
pub struct WithSecrets<'a>(&'a BackendUrl);

impl fmt::Display for WithSecrets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, true)
    }
}

/// Redacted, like [`BackendUrl`]'s `Display`.
impl fmt::Debug for WithSecrets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}

/// `text`, a URL as given (perhaps not one that parses), with what looks
/// like a password (`user:password@`) or a token (`token=...`) replaced by
/// [`REDACTED`]: for error messages that quote what the user typed.
///
/// ```
/// assert_eq!(
///     election_url::redact("nats://u:pw@h?token=t&colour=red"),
///     "nats://u:REDACTED@h?token=REDACTED&colour=red"
/// );
/// assert_eq!(election_url::redact("file:///d?x=1"), "file:///d?x=1");
/// ```
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    if let Some((scheme, rest)) = text.split_once("://") {
        let end = rest.find(['?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            out = format!("{scheme}://{}:{REDACTED}{}", &rest[..colon], &rest[at..]);
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let (head, query) = match out.split_once('?') {
        Some((h, q)) => (h.to_owned(), Some(q.to_owned())),
        None => (out.clone(), None),
    };
    let Some(query) = query else { return out };
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((k, _)) if decode_text(k, "").is_ok_and(|k| k == "token") => {
                parts.push(format!("{k}={REDACTED}"))
            }
            _ => parts.push(pair.to_owned()),
        }
    }
    format!("{head}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nats(url: &str) -> NatsUrl {
        match BackendUrl::parse(url) {
            Ok(BackendUrl::Nats(n)) => n,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn urls_parse_or_say_why_not() {
        assert_eq!(
            BackendUrl::parse("file:///var/lib/x").unwrap(),
            BackendUrl::file("/var/lib/x")
        );
        let file = |url: &str| match BackendUrl::parse(url) {
            Ok(BackendUrl::File(f)) => f,
            other => panic!("{url}: {other:?}"),
        };
        let f = file("file:///run/elect?volatile_ok=1");
        assert_eq!((f.volatile_ok, f.unknown_fs_ok), (true, false));
        let f = file("file:///mnt/x?unknown_fs_ok=true&volatile_ok=0");
        assert_eq!((f.volatile_ok, f.unknown_fs_ok), (false, true));
        assert_eq!(f.dir, PathBuf::from("/mnt/x"));
        assert_eq!(
            BackendUrl::parse("sqlite:///srv/app.db").unwrap(),
            BackendUrl::Sqlite("/srv/app.db".into())
        );
        let n = nats("nats://u:p@h1:4222,h2:4223?bucket=jobs&replicas=3&creds=/c");
        assert_eq!(n.servers, ["h1:4222", "h2:4223"]);
        assert_eq!(n.server_urls(), ["nats://h1:4222", "nats://h2:4223"]);
        assert_eq!(n.user, Some(("u".into(), Secret::new("p"))));
        assert_eq!((n.bucket.as_deref(), n.replicas), (Some("jobs"), Some(3)));
        assert_eq!(n.creds, Some(PathBuf::from("/c")));
        assert!(!n.single_replica_ok);
        assert!(nats("nats://h:1?single_replica_ok=1").single_replica_ok);
        assert_eq!(
            nats("nats://nats://h1:1,nats://h2:2").servers,
            ["h1:1", "h2:2"]
        );
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
            "file:///d/fb?x=1",
            "file:///d/fb?volatile_ok=yes",
            "file:///d/fb?volatile_ok=1&volatile_ok=1",
            "file:///d/fb?fuse_ok=1",
            "sqlite:///d/app.db?volatile_ok=1",
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
            assert!(BackendUrl::parse(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(
            BackendUrl::parse("file:///d/f%3Fx%3D1%20%25").unwrap(),
            BackendUrl::file("/d/f?x=1 %")
        );
        assert_eq!(
            BackendUrl::parse("sqlite:///srv/a+b%23.db").unwrap(),
            BackendUrl::Sqlite("/srv/a+b#.db".into())
        );
        let n = nats("nats://us%40r:p%3Aw%26@h:1?token=a%26b&creds=/c%20d&bucket=j");
        assert_eq!(n.user, Some(("us@r".into(), Secret::new("p:w&"))));
        assert_eq!(n.token.as_ref().map(Secret::expose), Some("a&b"));
        assert_eq!(n.creds, Some(PathBuf::from("/c d")));
    }

    fn pg(url: &str) -> PostgresUrl {
        match BackendUrl::parse(url) {
            Ok(BackendUrl::Postgres(p)) => p,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn postgres_urls_parse_or_say_why_not() {
        let p = pg(
            "postgres://app:s3%3Acret@db.internal:5433/jobs?schema=jobs_election&ttl=9s&renew=1500ms&passfile=/etc/pgpass&sslmode=require",
        );
        assert_eq!(p.user.as_deref(), Some("app"));
        assert_eq!(p.password, Some(Secret::new("s3:cret")));
        assert_eq!((p.host.as_str(), p.port), ("db.internal", Some(5433)));
        assert_eq!(p.database.as_deref(), Some("jobs"));
        assert_eq!(p.schema.as_deref(), Some("jobs_election"));
        assert_eq!(p.ttl, Some(Duration::from_secs(9)));
        assert_eq!(p.renew, Some(Duration::from_millis(1500)));
        assert_eq!(p.passfile, Some(PathBuf::from("/etc/pgpass")));
        assert_eq!(p.sslmode.as_deref(), Some("require"));
        // `postgresql://` is the same URL; printed as `postgres://`.
        assert_eq!(
            BackendUrl::parse("postgresql://h/db").unwrap(),
            BackendUrl::parse("postgres://h/db").unwrap()
        );
        let p = pg("postgres://h");
        assert_eq!((p.user, p.port, p.database), (None, None, None));
        let p = pg("postgres://u@[::1]:5432/");
        assert_eq!((p.host.as_str(), p.port), ("[::1]", Some(5432)));
        assert_eq!(p.database, None);
        let p = pg("postgres://u@%2Frun%2Fpostgresql/app?ttl=2m");
        assert_eq!(p.host, "/run/postgresql");
        assert_eq!(p.ttl, Some(Duration::from_secs(120)));
        assert_eq!(
            BackendUrl::Postgres(p).to_string(),
            "postgres://u@%2Frun%2Fpostgresql/app?ttl=120s"
        );
        // The command line's grammar (`elect --ttl 1.5s`) is the URL's.
        assert_eq!(
            pg("postgres://h/db?ttl=1.5s").ttl,
            Some(Duration::from_millis(1500))
        );
        for bad in [
            "postgres://",
            "postgres:///db",
            "postgres://h:0/db",
            "postgres://h:65536/db",
            "postgres://h:x/db",
            "postgres://:pw@h/db",
            "postgres://h/db?colour=red",
            "postgres://h/db?ttl=10",
            "postgres://h/db?ttl=0s",
            "postgres://h/db?ttl=0.5ms",
            "postgres://h/db?renew=-1s",
            "postgres://h/db?schema=Bad",
            "postgres://h/db?schema=pg_x",
            "postgres://h/db?passfile=relative",
            "postgres://h/db?sslmode=sometimes",
            "postgres://h/db?schema=a&schema=b",
            "postgres://h/db#x",
            "postgres://h%20x/db",
            "postgres://[::1/db",
            "postgres://[zz]/db",
            "postgres://[::1]x/db",
        ] {
            assert!(BackendUrl::parse(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(
            BackendUrl::parse("postgres://h/db?pasword=x"),
            Err(ParseError::UnknownOption {
                scheme: "postgres",
                option: "pasword".into(),
                known: POSTGRES_OPTIONS,
            })
        );
    }

    #[test]
    fn postgres_passwords_are_never_shown() {
        let url = BackendUrl::parse("postgres://app:s3cret@h:1/db?schema=s").unwrap();
        let shown = format!("{url} {url:?} {:?}", url.with_secrets());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(url.to_string(), "postgres://app:REDACTED@h:1/db?schema=s");
        assert!(url.with_secrets().to_string().contains("s3cret"));
        assert_eq!(
            redact("postgresql://app:s3cret@h:1/db?colour=red"),
            "postgresql://app:REDACTED@h:1/db?colour=red"
        );
        for bad in [
            "postgres://app:s3cret@h:1/db?colour=red",
            "postgres://app:s3cret@h:x/db",
            "postgres://app:s3cret@h:1/db?ttl=s3cret",
            "postgres://app:s3%ZZcret@h:1/db",
        ] {
            let e = BackendUrl::parse(bad).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("s3cret"), "{bad}: {e}");
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(
            BackendUrl::parse("nats://h:4222?colour=red"),
            Err(ParseError::UnknownOption {
                scheme: "nats",
                option: "colour".into(),
                known: NATS_OPTIONS,
            })
        );
        let e = BackendUrl::parse("file:///d?x=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown option \"x\" (file:// knows volatile_ok, unknown_fs_ok)"
        );
        let e = BackendUrl::parse("sqlite:///d?x=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown option \"x\" (sqlite:// URLs take no options)"
        );
        assert_eq!(
            BackendUrl::parse("nats://h:1?bucket=a&bucket=b"),
            Err(ParseError::RepeatedOption {
                option: "bucket".into()
            })
        );
        assert_eq!(
            BackendUrl::parse("redis://h:1"),
            Err(ParseError::UnknownScheme {
                scheme: "redis".into()
            })
        );
        assert_eq!(BackendUrl::parse("nowhere"), Err(ParseError::NoScheme));
        // No error quotes a secret.
        for bad in [
            "nats://u:s3cret@h?colour=red",
            "nats://u:s3cret@h:1?replicas=x",
            "nats://u:s3cret@h:1?token=s3cret&token=s3cret",
            "nats://u:s3cret@h:1?token=s3cret&single_replica_ok=s3cret",
            "nats://u:s3cret@h:1?token%s3cret",
            "nats://u:s3cret@h:1?tokens3cret",
        ] {
            let e = BackendUrl::parse(bad).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("s3cret"), "{bad}: {e}");
        }
    }

    #[test]
    fn secrets_are_never_shown() {
        let url = BackendUrl::parse("nats://u:s3cret@h:1?token=t0ken&bucket=b").unwrap();
        let shown = format!("{url} {url:?} {:?}", url.with_secrets());
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert!(shown.contains(REDACTED));
        let whole = url.with_secrets().to_string();
        assert!(
            whole.contains("s3cret") && whole.contains("t0ken"),
            "{whole}"
        );
        assert_eq!(
            redact("nats://u:s3cret@h:1?to%6Ben=t0ken"),
            "nats://u:REDACTED@h:1?to%6Ben=REDACTED"
        );
        assert_eq!(redact("nats://h:1,h:2"), "nats://h:1,h:2");
    }

    #[test]
    fn printing_encodes_what_the_grammar_gives_a_meaning() {
        use std::os::unix::ffi::OsStringExt;
        let path = PathBuf::from(std::ffi::OsString::from_vec(
            b"/a b/%?#&=,@:\xff\x01".to_vec(),
        ));
        let url = BackendUrl::file(path);
        let printed = url.to_string();
        assert_eq!(printed, "file:///a%20b/%25%3F%23%26%3D%2C%40%3A%FF%01");
        assert_eq!(BackendUrl::parse(&printed).unwrap(), url);
    }
}
