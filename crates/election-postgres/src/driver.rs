//! The PostgreSQL backend behind `election-url`'s boundary
//! ([`election_driver`]): `postgres://` (or `postgresql://`) URLs parsed
//! ([`PostgresUrl`]), the password found (the URL, `PGPASSWORD`, a
//! password file), opened, and the server's own notifications as an
//! observer's watch.

use std::any::Any;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use election_core::{Class, Classify, Clock, Disposition};
use election_driver::grammar::{
    decode_text, duration_value, encode, malformed, query, split_query,
};
use election_driver::{
    AnyKeyedClaims, Credentials, Driver, Error, LeaseCheck, LeaseTiming, Opened, ParseError,
    Secret, Settings, Target, Watch, format_duration,
};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::{PostgresElection, PostgresKeyedClaims, PostgresOptions};

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

/// The PostgreSQL backend's entry in `election-url`'s table of schemes:
/// `postgres://` and `postgresql://`.
///
/// ```
/// use election_driver::Driver;
///
/// let url = election_postgres::PostgresDriver.parse("app@db.internal/app?schema=jobs_election")?;
/// assert_eq!(url.scheme(), "postgres");
/// assert_eq!(url.shown(), "postgres://db.internal:5432/app?schema=jobs_election");
/// # Ok::<(), election_driver::ParseError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct PostgresDriver;

impl Driver for PostgresDriver {
    fn schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError> {
        parse_postgres(rest).map(|p| Box::new(p) as Box<dyn Target>)
    }

    fn probe(&self) -> election_core::Probe {
        probe
    }
}

/// The backend's error or a [`PassfileError`], as a `&dyn Classify`.
fn probe<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a dyn Classify> {
    election_core::probe::<crate::Error>(e).or_else(|| election_core::probe::<PassfileError>(e))
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
/// use election_driver::Driver;
/// use election_postgres::{PostgresDriver, PostgresUrl};
///
/// let url = PostgresDriver.parse("app:pw@db:5433/jobs?schema=jobs_election&ttl=9s&renew=3s")?;
/// let pg = url.as_any().downcast_ref::<PostgresUrl>().expect("a postgres URL");
/// assert_eq!((pg.host.as_str(), pg.port, pg.database.as_deref()), ("db", Some(5433), Some("jobs")));
/// assert_eq!(pg.ttl, Some(Duration::from_secs(9)));
/// assert_eq!(pg.password.as_ref().map(|p| p.expose()), Some("pw"));
/// # Ok::<(), election_driver::ParseError>(())
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
                .map(|pw| decode_text(pw, "the password").map(Secret::new))
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
                if let Err(e) = PostgresOptions::default().with_schema(&v) {
                    let reason = match e {
                        election_core::ConfigError::BadName { reason, .. } => reason.to_string(),
                        _ => "not a schema name".to_owned(),
                    };
                    return Err(bad(&format!("not a schema name: it {reason}")));
                }
                p.schema = Some(v)
            }
            "ttl" => p.ttl = Some(duration_value(&v).map_err(|e| bad(&e))?),
            "renew" => p.renew = Some(duration_value(&v).map_err(|e| bad(&e))?),
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

/// A password file named by `?passfile=` that cannot be used: it cannot
/// be read, or others than its owner may read it (libpq refuses such a
/// file too). Fix the file (its class is permanent, with the fix as the
/// hint).
///
/// ```
/// use election_core::{Classify, Disposition};
/// use election_postgres::PassfileError;
///
/// let e = PassfileError::new("/etc/pgpass", "No such file or directory (os error 2)");
/// assert_eq!(
///     e.to_string(),
///     "cannot use the password file /etc/pgpass: No such file or directory (os error 2)"
/// );
/// assert_eq!(e.class().disposition, Disposition::Permanent);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PassfileError {
    /// The file.
    pub path: PathBuf,
    /// Why (never a password).
    pub reason: String,
}

impl PassfileError {
    /// The file at `path` cannot be used, for `reason`.
    ///
    /// ```
    /// let e = election_postgres::PassfileError::new("/etc/pgpass", "group or others may read it");
    /// assert_eq!(e.path, std::path::Path::new("/etc/pgpass"));
    /// ```
    pub fn new(path: impl Into<PathBuf>, reason: impl Into<String>) -> PassfileError {
        PassfileError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for PassfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot use the password file {}: {}",
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for PassfileError {}

impl Classify for PassfileError {
    fn class(&self) -> Class {
        Class::new(Disposition::Permanent).hint(
            "make the password file readable by this user only (chmod 0600), or give the \
             password in PGPASSWORD",
        )
    }
}

/// The user's name as libpq defaults it (`$PGUSER`, else the effective
/// uid's name).
fn default_user() -> Option<String> {
    let os_user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.name);
    user_as_libpq(std::env::var("PGUSER").ok(), os_user)
}

/// libpq's default user: `PGUSER` if set and not empty, else the
/// operating system's user of the effective uid (not `$USER`, which `su`,
/// `sudo` and containers leave stale or unset).
fn user_as_libpq(pguser: Option<String>, os_user: Option<String>) -> Option<String> {
    pguser
        .filter(|u| !u.is_empty())
        .or(os_user)
        .filter(|u| !u.is_empty())
}

/// One field of a password file line, split at unescaped `:` (`\:` is a
/// colon, `\\` a backslash).
fn passfile_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one field").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

/// The password for (`host`, `port`, `database`, `user`) in the text of a
/// password file (libpq's format: `host:port:database:user:password` a
/// line, `*` matching anything, the first matching line winning).
fn passfile_lookup(text: &str, wanted: [&str; 4]) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(passfile_fields)
        .filter(|f| f.len() == 5)
        .find(|f| {
            f[..4]
                .iter()
                .zip(wanted)
                .all(|(field, want)| field == "*" || field == want)
        })
        .map(|f| f[4].clone())
}

/// A [`PostgresUrl`] printed with its password.
struct Whole<'a>(&'a PostgresUrl);

impl fmt::Display for Whole<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, true)
    }
}

impl PostgresUrl {
    /// Where the server is, for messages: `host:port/database` (never the
    /// user or password).
    ///
    /// ```
    /// use election_driver::Driver;
    /// use election_postgres::{PostgresDriver, PostgresUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = PostgresDriver.parse("app:pw@db.internal/app")?;
    /// let pg = url.as_any().downcast_ref::<PostgresUrl>().ok_or("not a postgres:// URL")?;
    /// assert_eq!(pg.place(), "db.internal:5432/app"); // no user, no password
    /// # Ok(()) }
    /// ```
    pub fn place(&self) -> String {
        format!(
            "{}:{}/{}",
            self.host,
            self.port.unwrap_or(5432),
            self.database.as_deref().unwrap_or("")
        )
    }

    /// The PostgreSQL options `settings` and the URL's options (`?ttl=`,
    /// `?renew=`, `?schema=`) give: the backend's defaults, a renew
    /// interval of a third of a given TTL. A TTL or renew interval given
    /// both in `settings` and in the URL, with different values, is
    /// [`Error::Config`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_driver::{Driver, Settings};
    /// use election_postgres::{PostgresDriver, PostgresUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = PostgresDriver.parse("app@db.internal/app?schema=jobs_election&ttl=9s")?;
    /// let pg = url.as_any().downcast_ref::<PostgresUrl>().ok_or("not a postgres:// URL")?;
    /// let options = pg.options(&Settings::default())?;
    /// assert_eq!(options.schema(), "jobs_election");
    /// assert_eq!(options.renew_interval(), Duration::from_secs(3));
    ///
    /// // A TTL given twice, differently: refused.
    /// let mut twice = Settings::default();
    /// twice.ttl = Some(Duration::from_secs(6));
    /// assert!(pg.options(&twice).is_err());
    /// # Ok(()) }
    /// ```
    pub fn options(&self, settings: &Settings) -> Result<PostgresOptions, Error> {
        let pick = |setting: &'static str, ours: Option<Duration>, theirs: Option<Duration>| match (
            ours, theirs,
        ) {
            (Some(a), Some(b)) if a != b => Err(election_core::ConfigError::BadSetting {
                setting,
                reason: format!("{a:?} is given, and {b:?} in the URL"),
            }),
            (a, b) => Ok(a.or(b)),
        };
        let ttl = pick("ttl", settings.ttl, self.ttl)?;
        let renew = pick("renew", settings.renew, self.renew)?;
        let options = match (ttl, renew) {
            (None, None) => PostgresOptions::default(),
            (Some(ttl), None) => PostgresOptions::new(ttl, ttl / 3)?,
            (None, Some(renew)) => PostgresOptions::new(crate::DEFAULT_TTL, renew)?,
            (Some(ttl), Some(renew)) => PostgresOptions::new(ttl, renew)?,
        };
        Ok(match &self.schema {
            Some(schema) => options.with_schema(schema)?,
            None => options,
        })
    }

    /// The URL to hand to the driver, with the password filled in (a
    /// [`Secret`]: not to be shown). The password is the URL's own, else
    /// `PGPASSWORD` (left to the driver), else the `?passfile=` file's
    /// matching line; without any of these the driver looks in
    /// `PGPASSFILE` or `~/.pgpass` itself.
    ///
    /// Failure model: [`Error::Opening`] with a [`PassfileError`] when the
    /// `?passfile=` file cannot be read or others than its owner may read
    /// it (libpq ignores such a file; refusing says why the password is
    /// missing).
    ///
    /// ```
    /// use election_driver::Driver;
    /// use election_postgres::{PostgresDriver, PostgresUrl};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = PostgresDriver.parse("app:pw@db.internal/app?schema=jobs_election")?;
    /// let pg = url.as_any().downcast_ref::<PostgresUrl>().ok_or("not a postgres:// URL")?;
    /// let for_driver = pg.connect_url()?;
    /// println!("connecting with {for_driver}"); // prints REDACTED
    /// assert_eq!(for_driver.expose(), "postgres://app:pw@db.internal/app"); // our options removed
    /// # Ok(()) }
    /// ```
    pub fn connect_url(&self) -> Result<Secret, Error> {
        let mut password = self.password.clone();
        if password.is_none()
            && std::env::var_os("PGPASSWORD").is_none()
            && let Some(path) = &self.passfile
        {
            password = self
                .password_in_passfile(path)
                .map_err(Error::opening)?
                .map(Secret::new);
        }
        let mut whole = self.clone();
        whole.schema = None;
        whole.ttl = None;
        whole.renew = None;
        whole.passfile = None;
        if password.is_some() && whole.user.is_none() {
            whole.user = default_user();
        }
        whole.password = if whole.user.is_some() { password } else { None };
        Ok(Secret::new(Whole(&whole).to_string()))
    }

    fn password_in_passfile(&self, path: &Path) -> Result<Option<String>, PassfileError> {
        use std::os::unix::fs::PermissionsExt;
        let refuse = |reason: String| PassfileError::new(path, reason);
        let meta = std::fs::metadata(path).map_err(|e| refuse(e.to_string()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(refuse(
                "group or others may read it (chmod 0600 it, as libpq requires)".into(),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| refuse(e.to_string()))?;
        let user = self.user.clone().or_else(default_user).unwrap_or_default();
        let host = if self.host.starts_with('/') {
            "localhost".to_owned()
        } else {
            self.host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned()
        };
        let port = self.port.unwrap_or(5432).to_string();
        let database = self.database.clone().unwrap_or_else(|| user.clone());
        Ok(passfile_lookup(&text, [&host, &port, &database, &user]))
    }

    /// Whether the election schema exists (an observer's check: nothing is
    /// created). Cancel safe; bounded by four request timeouts.
    async fn schema_exists(
        &self,
        url: &Secret,
        options: &PostgresOptions,
    ) -> Result<bool, crate::Error> {
        use sqlx::{ConnectOptions, Connection};
        use std::str::FromStr;
        let unusable = |reason: &str, source| crate::Error::Unusable {
            reason: reason.to_owned(),
            source,
        };
        let connect = sqlx::postgres::PgConnectOptions::from_str(url.expose())
            .map_err(|e| unusable("the URL is not a valid postgres:// URL", e))?;
        let bound = options.request_timeout() * 4;
        let check = async {
            let mut conn = connect.connect().await?;
            let found: Option<i32> =
                sqlx::query_scalar("SELECT 1 FROM pg_namespace WHERE nspname = $1")
                    .bind(options.schema())
                    .fetch_optional(&mut conn)
                    .await?;
            let _ = conn.close().await;
            Ok::<_, sqlx::Error>(found.is_some())
        };
        match tokio::time::timeout(bound, check).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e @ sqlx::Error::Database(_))) => Err(unusable(
                "the server refused the connection or the check",
                e,
            )),
            Ok(Err(e)) => Err(crate::Error::Unavailable(e)),
            Err(_) => Err(crate::Error::TimedOut { after: bound }),
        }
    }
}

impl Target for PostgresUrl {
    fn scheme(&self) -> &'static str {
        "postgres"
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, whole: bool) -> fmt::Result {
        f.write_str("postgres://")?;
        if let Some(user) = &self.user {
            f.write_str(&encode(user.as_bytes(), false))?;
            if let Some(pw) = &self.password {
                write!(f, ":{}", pw.printed(whole))?;
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
            option(f, "ttl", format_duration(t))?;
        }
        if let Some(r) = self.renew {
            option(f, "renew", format_duration(r))?;
        }
        if let Some(pf) = &self.passfile {
            option(f, "passfile", encode(pf.as_os_str().as_bytes(), true))?;
        }
        if let Some(m) = &self.sslmode {
            option(f, "sslmode", m.clone())?;
        }
        Ok(())
    }

    fn clone_target(&self) -> Box<dyn Target> {
        Box::new(self.clone())
    }

    fn lease_settings(&self) -> &'static [&'static str] {
        &["ttl", "renew"]
    }

    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        let scheme = "postgres";
        if settings.grace.is_some() {
            return Err(LeaseCheck::NoGrace { scheme });
        }
        // An observer takes the store's own lease settings.
        if settings.observer {
            return Ok(());
        }
        let defaults = PostgresOptions::default();
        let ttl = settings.ttl.or(self.ttl).unwrap_or(defaults.ttl());
        let given = settings.ttl.is_some() || self.ttl.is_some();
        let renew = settings.renew.or(self.renew).unwrap_or(if given {
            ttl / 3
        } else {
            defaults.renew_interval()
        });
        election_driver::check_lease(
            scheme,
            settings.ttl.is_some(),
            ttl,
            renew,
            Duration::from_millis(10),
        )
    }

    fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        self.options(settings).map(drop)
    }

    fn shown(&self) -> String {
        let mut s = format!("postgres://{}", self.place());
        if let Some(schema) = &self.schema {
            s.push_str(&format!("?schema={schema}"));
        }
        s
    }

    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>> {
        async move {
            let options = self.options(settings)?;
            let url = self.connect_url()?;
            if settings.observer && !self.schema_exists(&url, &options).await? {
                return Err(Error::Absent {
                    what: format!("the schema {} in {}", options.schema(), self.place()),
                });
            }
            let election = PostgresElection::connect(url.expose(), options).await?;
            Ok(Box::new(election) as Box<dyn Opened>)
        }
        .boxed()
    }

    fn credentials(&self) -> Credentials {
        let mut c = Credentials::default();
        c.user = self.user.clone();
        c.password = self.password.clone();
        c
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Error {
        Error::backend("the PostgreSQL backend", e)
    }
}

impl Opened for PostgresElection {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>> {
        async move {
            let identity = election_sql::lease_set_identity(identity)?;
            let claims = PostgresKeyedClaims::new(self, identity);
            let claims = match poll {
                Some(poll) => claims.with_poll_interval(poll)?,
                None => claims,
            };
            Ok(AnyKeyedClaims::new(claims))
        }
        .boxed()
    }

    fn lease_timing(&self) -> Option<LeaseTiming> {
        let o = self.options();
        Some(LeaseTiming::new(
            o.ttl(),
            o.renew_interval(),
            o.margin(),
            Duration::ZERO,
        ))
    }

    /// The revocation, then each resource's mark in the schema's `fences`
    /// table raised to its epoch (a mark already above it stays).
    fn revoke_fencing<'a>(
        &'a self,
        name: &'a str,
        by: &'a election_core::Identity,
        resources: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<election_core::Revoked>, Error>> {
        async move {
            let resources = resources
                .iter()
                .map(|r| fencing::ResourceName::new(*r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    Error::Config(election_core::ConfigError::BadSetting {
                        setting: "fence",
                        reason: e.to_string(),
                    })
                })?;
            let Some(revoked) = PostgresElection::revoke(self, name, by).await? else {
                return Ok(None);
            };
            let fence = self.fence();
            let token = fencing::Token::from_epoch(revoked.revocation.epoch);
            for resource in &resources {
                match fencing::Fence::advance(&fence, resource, token).await {
                    Ok(_) | Err(fencing::Error::Stale { .. }) => {}
                    Err(e) => {
                        let name = election_core::ElectionName::new(name)?;
                        return Err(Error::Election(election_core::Error::unavailable(&name, e)));
                    }
                }
            }
            Ok(Some(revoked))
        }
        .boxed()
    }

    fn close_within(&self, bound: Duration) -> BoxFuture<'_, ()> {
        async move {
            // Waits its close grace after the release (ADR 0086).
            let _ = tokio::time::timeout(bound, self.close()).await;
        }
        .boxed()
    }

    fn watch<'a, 'b>(
        &'a self,
        name: &'b str,
        every: Duration,
    ) -> BoxFuture<'b, Result<Option<Watch<'a>>, Error>>
    where
        'a: 'b,
    {
        async move {
            use futures::StreamExt;
            let stream = PostgresElection::observe(self, name, every)
                .await
                .map_err(Error::Election)?
                .map(|c| c.map_err(Error::Election))
                .boxed();
            Ok(Some(Watch::new(stream, "the PostgreSQL observation")))
        }
        .boxed()
    }

    fn with_clock(&self, clock: Arc<dyn Clock>) -> Result<Box<dyn Opened>, Error> {
        Ok(Box::new(self.clone().with_clock(clock)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use election_driver::{REDACTED, redact};
    use election_testkit::display::assert_chains;
    use election_testkit::driver::{absolute_path, round_trip, text};
    use proptest::prelude::*;

    use super::*;

    fn pg(rest: &str) -> PostgresUrl {
        match PostgresDriver.parse(rest) {
            Ok(t) => t
                .as_any()
                .downcast_ref::<PostgresUrl>()
                .expect("a postgres URL")
                .clone(),
            Err(e) => panic!("{rest}: {e}"),
        }
    }

    /// Parses `url`, a whole `postgres://` or `postgresql://` URL.
    fn parse(url: &str) -> Result<PostgresUrl, ParseError> {
        let (scheme, rest) = url.split_once("://").expect("a scheme");
        assert!(PostgresDriver.schemes().contains(&scheme), "{url}");
        PostgresDriver.parse(rest).map(|t| {
            t.as_any()
                .downcast_ref::<PostgresUrl>()
                .expect("a postgres URL")
                .clone()
        })
    }

    struct Printed<'a>(&'a PostgresUrl, bool);

    impl fmt::Display for Printed<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.write(f, self.1)
        }
    }

    #[test]
    fn postgres_urls_parse_or_say_why_not() {
        let p = pg(
            "app:s3%3Acret@db.internal:5433/jobs?schema=jobs_election&ttl=9s&renew=1500ms&passfile=/etc/pgpass&sslmode=require",
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
            parse("postgresql://h/db").unwrap(),
            parse("postgres://h/db").unwrap()
        );
        assert_eq!(
            Printed(&parse("postgresql://h/db").unwrap(), false).to_string(),
            "postgres://h/db"
        );
        let p = pg("h");
        assert_eq!((p.user, p.port, p.database), (None, None, None));
        let p = pg("u@[::1]:5432/");
        assert_eq!((p.host.as_str(), p.port), ("[::1]", Some(5432)));
        assert_eq!(p.database, None);
        let p = pg("u@%2Frun%2Fpostgresql/app?ttl=2m");
        assert_eq!(p.host, "/run/postgresql");
        assert_eq!(p.ttl, Some(Duration::from_secs(120)));
        assert_eq!(
            Printed(&p, false).to_string(),
            "postgres://u@%2Frun%2Fpostgresql/app?ttl=120s"
        );
        // The command line's grammar (`elect --ttl 1.5s`) is the URL's.
        assert_eq!(pg("h/db?ttl=1.5s").ttl, Some(Duration::from_millis(1500)));
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
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
        assert_eq!(
            parse("postgres://h/db?pasword=x"),
            Err(ParseError::UnknownOption {
                scheme: "postgres",
                option: "pasword".into(),
                known: POSTGRES_OPTIONS,
            })
        );
    }

    #[test]
    fn postgres_passwords_are_never_shown() {
        let url = parse("postgres://app:s3cret@h:1/db?schema=s").unwrap();
        let shown = format!("{} {url:?} {}", Printed(&url, false), url.shown());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(
            Printed(&url, false).to_string(),
            "postgres://app:REDACTED@h:1/db?schema=s"
        );
        assert_eq!(url.shown(), "postgres://h:1/db?schema=s");
        assert!(Printed(&url, true).to_string().contains("s3cret"));
        assert_eq!(
            url.credentials().password.as_ref().map(Secret::expose),
            Some("s3cret")
        );
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
            let e = parse(bad).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("s3cret"), "{bad}: {e}");
        }
    }

    #[test]
    fn printing_parses_back() {
        let url = parse(
            "postgres://us%40r:p%3Aw@[::1]:5433/d%20b?schema=s&ttl=9s&renew=3s&passfile=/p%20f&sslmode=require",
        )
        .unwrap();
        let whole = Printed(&url, true).to_string();
        assert_eq!(
            whole,
            "postgres://us%40r:p%3Aw@[::1]:5433/d%20b?schema=s&ttl=9s&renew=3s&passfile=/p%20f&sslmode=require"
        );
        assert_eq!(parse(&whole).unwrap(), url);
    }

    fn duration() -> impl Strategy<Value = Duration> {
        (1u64..100_000_000).prop_map(Duration::from_millis)
    }

    fn pg_host() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9][a-z0-9._-]{0,10}",
            Just("[::1]".to_owned()),
            // A unix socket directory.
            absolute_path()
                .prop_map(|p| format!("/{}", p.to_string_lossy().trim_start_matches('/'))),
        ]
    }

    /// Any `postgres://` URL.
    fn postgres() -> impl Strategy<Value = PostgresUrl> {
        (
            (
                prop::option::of(("[^\u{0}]{1,12}", prop::option::of(text()))),
                pg_host(),
                prop::option::of(1u16..),
                prop::option::of("[^\u{0}]{1,12}"),
            ),
            (
                prop::option::of("[a-z_][a-z0-9_]{0,20}"),
                prop::option::of(duration()),
                prop::option::of(duration()),
                prop::option::of(absolute_path()),
                prop::option::of(prop::sample::select(vec![
                    "disable",
                    "require",
                    "verify-full",
                ])),
            ),
        )
            .prop_filter("not a pg_ schema", |(_, (s, ..))| {
                s.as_deref().is_none_or(|s| !s.starts_with("pg_"))
            })
            .prop_map(
                |((user, host, port, database), (schema, ttl, renew, passfile, sslmode))| {
                    let mut p = PostgresUrl::default();
                    if let Some((u, pw)) = user {
                        p.user = Some(u);
                        p.password = pw.map(Secret::new);
                    }
                    p.host = host;
                    p.port = port;
                    p.database = database;
                    p.schema = schema;
                    p.ttl = ttl;
                    p.renew = renew;
                    p.passfile = passfile.map(|c| PathBuf::from(c.to_string_lossy().into_owned()));
                    p.sslmode = sslmode.map(str::to_owned);
                    p
                },
            )
    }

    proptest! {
        #[test]
        fn print_then_parse_is_the_same_url(url in postgres()) {
            round_trip(&PostgresDriver, &url)?;
            let whole = Printed(&url, true).to_string();
            prop_assert_eq!(parse(&whole), Ok(url.clone()), "{}", whole);
            // Redacted, the URL still says where: the host, the database.
            let shown = Printed(&url, false).to_string();
            let p = parse(&shown);
            prop_assert!(p.is_ok(), "{}", shown);
            let p = p.expect("a PostgreSQL URL");
            prop_assert_eq!(&p.host, &url.host);
            prop_assert_eq!(&p.database, &url.database);
            prop_assert!(p.password.iter().all(|t| t.expose() == REDACTED));
        }
    }

    #[test]
    fn the_postgres_backends_errors_say_what_and_why() {
        assert_chains([
            (
                Error::opening(PassfileError::new(
                    "/etc/app.pass",
                    "others may read it (mode 0644)",
                )),
                "cannot use the password file /etc/app.pass: others may read it (mode 0644)",
            ),
            (
                Error::from(crate::Error::TimedOut {
                    after: Duration::from_secs(2),
                }),
                "the PostgreSQL backend: a read from PostgreSQL did not answer within 2s",
            ),
        ]);
    }

    #[test]
    // `Settings` may be `#[non_exhaustive]`: no struct literal.
    #[allow(clippy::field_reassign_with_default)]
    fn the_lease_settings_are_checked() {
        let url = pg("app@db:5432/app");
        let ms = Duration::from_millis;
        let mut s = Settings::default();
        s.grace = Some(ms(1));
        assert_eq!(
            url.check_lease(&s),
            Err(LeaseCheck::NoGrace { scheme: "postgres" })
        );
        s.grace = None;
        s.ttl = Some(ms(3000));
        assert_eq!(url.check_lease(&s), Ok(()));
        s.ttl = Some(ms(5));
        assert!(matches!(
            url.check_lease(&s),
            Err(LeaseCheck::TtlTooShort {
                scheme: "postgres",
                ..
            })
        ));
        // An observer's lease settings are the store's.
        s.observer = true;
        assert_eq!(url.check_lease(&s), Ok(()));
    }

    /// Issue 43, item 5: the default user is libpq's: PGUSER, else the
    /// operating system's user (never `$USER`).
    #[test]
    fn the_default_user_is_libpqs() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(user_as_libpq(some("pg"), some("os")), some("pg"));
        assert_eq!(user_as_libpq(some(""), some("os")), some("os"));
        assert_eq!(user_as_libpq(None, some("os")), some("os"));
        assert_eq!(user_as_libpq(None, None), None);
        // This process's own user, whatever $USER says.
        let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.name);
        if std::env::var_os("PGUSER").is_none() {
            assert_eq!(default_user(), me);
        }
    }

    #[test]
    fn passfile_lines_match_as_libpq_reads_them() {
        let text = "# comment\n\
                    other:5432:db:u:no\n\
                    db.internal:5432:app:u:p\\:w\\\\x\n\
                    *:*:*:u:fallback\n";
        assert_eq!(
            passfile_lookup(text, ["db.internal", "5432", "app", "u"]).as_deref(),
            Some("p:w\\x")
        );
        assert_eq!(
            passfile_lookup(text, ["h", "1", "d", "u"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(passfile_lookup(text, ["h", "1", "d", "v"]), None);
    }

    #[test]
    fn an_unusable_passfile_says_so() {
        let mut url = pg("app@db/app");
        url.passfile = Some(PathBuf::from("/nonexistent/pgpass"));
        if std::env::var_os("PGPASSWORD").is_some() {
            return; // the file is not read then
        }
        let e = url.connect_url().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot use the password file /nonexistent/pgpass: "),
            "{e}"
        );
        let class = election_core::Classify::class(&e);
        assert_eq!(class.disposition, Disposition::Permanent);
    }
}
