//! Opening the backend a URL names.

use std::path::Path;
use std::time::Duration;

use election_file::FileElection;
use election_nats::{NatsElection, NatsOptions};
use election_postgres::{PostgresElection, PostgresOptions};
use election_sqlite::{SqliteElection, SqliteOptions};

use crate::{Backend, BackendUrl, Error, NatsUrl, PostgresUrl, Secret};

/// How to open a backend: lease timing (`None` keeps the backend's
/// default) and whether only to read.
///
/// The file backend has no lease timing (a lock is held until it is freed):
/// [`Settings::unused_by`] names the settings a scheme ignores, for a tool
/// to refuse or note them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The lease TTL (SQLite, NATS).
    pub ttl: Option<Duration>,
    /// The renew interval (SQLite, NATS); by default a third of the TTL.
    pub renew: Option<Duration>,
    /// The failover grace (NATS); lowered to the renew interval if only
    /// that is given.
    pub grace: Option<Duration>,
    /// Only read (who leads, changes): nothing is created. A missing
    /// directory, database or bucket is [`Error::Absent`].
    pub observer: bool,
    /// How long connecting to NATS may take (by default the NATS request
    /// timeout, at least a second).
    pub connect_timeout: Option<Duration>,
}

impl Settings {
    /// The settings given that the backend of `url` has no use for
    /// (`--ttl`-style names: `ttl`, `renew`, `grace`).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let settings = Settings {
    ///     ttl: Some(Duration::from_secs(9)),
    ///     ..Settings::default()
    /// };
    /// // A lock has no TTL: the file backend ignores it.
    /// let url: BackendUrl = "file:///run/my-service/elections".parse()?;
    /// assert_eq!(settings.unused_by(&url), ["ttl"]);
    /// let url: BackendUrl = "sqlite:///srv/app.db".parse()?;
    /// assert!(settings.unused_by(&url).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn unused_by(&self, url: &BackendUrl) -> Vec<&'static str> {
        let given = [
            ("ttl", self.ttl.is_some()),
            ("renew", self.renew.is_some()),
            ("grace", self.grace.is_some()),
        ];
        given
            .into_iter()
            .filter(|&(name, given)| {
                given
                    && match url {
                        BackendUrl::File(_) => true,
                        BackendUrl::Sqlite(_) | BackendUrl::Postgres(_) => name == "grace",
                        BackendUrl::Nats(_) => false,
                    }
            })
            .map(|(name, _)| name)
            .collect()
    }

    /// The SQLite options these settings give: the backend's defaults, a
    /// renew interval of a third of a given TTL.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::Settings;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let settings = Settings {
    ///     ttl: Some(Duration::from_secs(9)),
    ///     ..Settings::default()
    /// };
    /// let options = settings.sqlite_options()?;
    /// assert_eq!(options.renew_interval(), Duration::from_secs(3)); // a third of the TTL
    /// # Ok(()) }
    /// ```
    pub fn sqlite_options(&self) -> Result<SqliteOptions, Error> {
        Ok(match (self.ttl, self.renew) {
            (None, None) => SqliteOptions::default(),
            (Some(ttl), None) => SqliteOptions::new(ttl, ttl / 3)?,
            (None, Some(renew)) => SqliteOptions::new(election_sqlite::DEFAULT_TTL, renew)?,
            (Some(ttl), Some(renew)) => SqliteOptions::new(ttl, renew)?,
        })
    }

    /// The PostgreSQL options these settings and the URL's options
    /// (`?ttl=`, `?renew=`, `?schema=`) give: the backend's defaults, a
    /// renew interval of a third of a given TTL. A TTL or renew interval
    /// given both here and in the URL, with different values, is
    /// [`Error::Config`].
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "postgres://app@db.internal/app?schema=jobs_election&ttl=9s".parse()?;
    /// let BackendUrl::Postgres(pg) = &url else {
    ///     return Err("not a postgres:// URL".into());
    /// };
    /// let options = Settings::default().postgres_options(pg)?;
    /// assert_eq!(options.schema(), "jobs_election");
    /// assert_eq!(options.renew_interval(), Duration::from_secs(3));
    ///
    /// // A TTL given twice, differently: refused.
    /// let twice = Settings { ttl: Some(Duration::from_secs(6)), ..Settings::default() };
    /// assert!(twice.postgres_options(pg).is_err());
    /// # Ok(()) }
    /// ```
    pub fn postgres_options(&self, url: &PostgresUrl) -> Result<PostgresOptions, Error> {
        let pick = |setting: &'static str, ours: Option<Duration>, theirs: Option<Duration>| match (
            ours, theirs,
        ) {
            (Some(a), Some(b)) if a != b => Err(election_core::ConfigError::BadSetting {
                setting,
                reason: format!("{a:?} is given, and {b:?} in the URL"),
            }),
            (a, b) => Ok(a.or(b)),
        };
        let ttl = pick("ttl", self.ttl, url.ttl)?;
        let renew = pick("renew", self.renew, url.renew)?;
        let options = match (ttl, renew) {
            (None, None) => PostgresOptions::default(),
            (Some(ttl), None) => PostgresOptions::new(ttl, ttl / 3)?,
            (None, Some(renew)) => PostgresOptions::new(election_postgres::DEFAULT_TTL, renew)?,
            (Some(ttl), Some(renew)) => PostgresOptions::new(ttl, renew)?,
        };
        Ok(match &url.schema {
            Some(schema) => options.with_schema(schema)?,
            None => options,
        })
    }

    /// The NATS options these settings and the URL's options give.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "nats://n1:4222,n2:4222,n3:4222?bucket=jobs&replicas=3".parse()?;
    /// let BackendUrl::Nats(nats) = &url else {
    ///     return Err("not a nats:// URL".into());
    /// };
    /// let settings = Settings {
    ///     renew: Some(Duration::from_secs(2)),
    ///     ..Settings::default()
    /// };
    /// let options = settings.nats_options(nats)?;
    /// assert_eq!((options.bucket_name(), options.replica_count()), ("jobs", 3));
    /// assert_eq!(options.grace(), Duration::from_secs(2)); // lowered to the renew interval
    /// # Ok(()) }
    /// ```
    pub fn nats_options(&self, url: &NatsUrl) -> Result<NatsOptions, Error> {
        let mut options = match self.ttl {
            Some(ttl) => NatsOptions::new(ttl)?,
            None => NatsOptions::default(),
        };
        // The grace may not exceed the renew interval at any step: lowered
        // to a shorter renew interval if only that was given, and set
        // before the renew interval when it fits under the current one,
        // after it otherwise.
        let grace = self.grace.or(self.renew.map(|r| r.min(options.grace())));
        match (self.renew, grace) {
            (Some(renew), Some(grace)) if grace <= options.renew_every() => {
                options = options.failover_grace(grace)?.renew_interval(renew)?;
            }
            (renew, grace) => {
                if let Some(renew) = renew {
                    options = options.renew_interval(renew)?;
                }
                if let Some(grace) = grace {
                    options = options.failover_grace(grace)?;
                }
            }
        }
        options = options
            .observer(self.observer)
            .single_replica_ok(url.single_replica_ok);
        if let Some(bucket) = &url.bucket {
            options = options.bucket(bucket.clone())?;
        }
        if let Some(r) = url.replicas {
            options = options.replicas(r)?;
        }
        Ok(options)
    }
}

/// Connects to the servers of `url` with its credentials.
///
/// Cancel safety: cancel safe (nothing is kept). Failure model:
/// [`Error::Credentials`] for an unreadable creds file,
/// [`Error::Connect`] when no server answers or the credentials are
/// refused, [`Error::Config`] for a bad server address.
pub(crate) async fn connect(
    url: &NatsUrl,
    options: &NatsOptions,
    timeout: Option<Duration>,
) -> Result<async_nats::Client, Error> {
    let mut connect = async_nats::ConnectOptions::new()
        .connection_timeout(timeout.unwrap_or(options.timeout().max(Duration::from_secs(1))))
        .ping_interval(options.renew_every());
    if let Some((user, password)) = &url.user {
        connect = connect.user_and_password(user.clone(), password.expose().to_owned());
    }
    if let Some(token) = &url.token {
        connect = connect.token(token.expose().to_owned());
    }
    if let Some(creds) = &url.creds {
        connect = connect
            .credentials_file(creds)
            .await
            .map_err(|source| Error::Credentials {
                path: creds.clone(),
                source,
            })?;
    }
    let servers: Vec<async_nats::ServerAddr> = url
        .server_urls()
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| election_core::ConfigError::BadSetting {
            setting: "url",
            reason: format!("bad NATS server address: {e}"),
        })?;
    connect
        .connect(servers)
        .await
        .map_err(|source| Error::Connect {
            servers: url.server_urls().join(","),
            source,
        })
}

impl BackendUrl {
    /// Opens the backend this URL names with `settings`.
    ///
    /// For an observer ([`Settings::observer`]) nothing is created: a
    /// missing directory or database, a database without election tables
    /// and a missing NATS bucket are [`Error::Absent`]. Otherwise a
    /// missing directory, database or bucket is created.
    ///
    /// Cancel safety: cancel safe (a connection being made is dropped).
    /// Failure model: [`Error::Config`] for settings the backend refuses;
    /// the backend's error (as [`Error::File`], [`Error::Sqlite`] or
    /// [`Error::Nats`], [`Error::Postgres`]) when it cannot be opened;
    /// [`Error::Connect`] and [`Error::Credentials`] for NATS;
    /// [`Error::Passfile`] for a PostgreSQL password file that cannot be
    /// used. An unreachable PostgreSQL server is
    /// [`Error::Postgres`]`(Unavailable | TimedOut)` after at most four
    /// request timeouts.
    ///
    /// ```
    /// use election_url::{BackendUrl, Error, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::Sqlite(tmp.path().join("app.db")); // or "sqlite:///srv/app.db".parse()?
    /// // An observer creates nothing: no database yet.
    /// let observer = Settings { observer: true, ..Settings::default() };
    /// assert!(matches!(url.open(&observer).await, Err(Error::Absent { .. })));
    ///
    /// let backend = url.open(&Settings::default()).await?; // creates the database
    /// println!("opened {url} ({})", backend.kind());
    /// # Ok(()) }
    /// ```
    pub async fn open(&self, settings: &Settings) -> Result<Backend, Error> {
        let missing = |what: &str, path: &Path| {
            if settings.observer && std::fs::symlink_metadata(path).is_err() {
                Err(Error::Absent {
                    what: format!("{what} {}", path.display()),
                })
            } else {
                Ok(())
            }
        };
        match self {
            BackendUrl::File(file) => {
                missing("the directory", &file.dir)?;
                Ok(Backend::File(FileElection::with_options(
                    file.dir.clone(),
                    file.options(),
                )?))
            }
            BackendUrl::Sqlite(path) => {
                let options = settings.sqlite_options()?;
                missing("the database", path)?;
                if settings.observer {
                    return match SqliteElection::open_read_only(path, options).await? {
                        Some(e) => Ok(Backend::Sqlite(e)),
                        None => Err(Error::Absent {
                            what: format!("the election tables of {}", path.display()),
                        }),
                    };
                }
                Ok(Backend::Sqlite(SqliteElection::open(path, options).await?))
            }
            BackendUrl::Postgres(p) => {
                let options = settings.postgres_options(p)?;
                let url = p.connect_url()?;
                if settings.observer && !p.schema_exists(&url, &options).await? {
                    return Err(Error::Absent {
                        what: format!("the schema {} in {}", options.schema(), p.place()),
                    });
                }
                Ok(Backend::Postgres(
                    PostgresElection::connect(url.expose(), options).await?,
                ))
            }
            BackendUrl::Nats(n) => {
                let options = settings.nats_options(n)?;
                let client = connect(n, &options, settings.connect_timeout).await?;
                match NatsElection::with_client(client, options.clone()).await {
                    Ok(e) => Ok(Backend::Nats(e)),
                    Err(election_nats::Error::NoBucket { .. }) if options.is_observer() => {
                        Err(Error::Absent {
                            what: format!("the bucket {}", options.bucket_name()),
                        })
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }
}

impl NatsUrl {
    /// Connects to the servers of this URL with its credentials, and gives
    /// the NATS options of `settings` and the URL's options: for a tool
    /// that opens the election itself (e.g. to open a missing bucket
    /// again later with [`NatsElection::with_client`]).
    ///
    /// Cancel safety and failure model: as
    /// [`BackendUrl::open`]'s connection step ([`Error::Config`],
    /// [`Error::Credentials`], [`Error::Connect`]).
    ///
    /// ```no_run
    /// use election_nats::NatsElection;
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "nats://127.0.0.1:4222?bucket=jobs".parse()?;
    /// let BackendUrl::Nats(nats) = &url else {
    ///     return Err("not a nats:// URL".into());
    /// };
    /// let (client, options) = nats.connect(&Settings::default()).await?;
    /// let election = NatsElection::with_client(client, options).await?;
    /// println!("{:?}", election.leader("dispatcher").await?);
    /// # Ok(()) }
    /// ```
    pub async fn connect(
        &self,
        settings: &Settings,
    ) -> Result<(async_nats::Client, NatsOptions), Error> {
        let options = settings.nats_options(self)?;
        let client = connect(self, &options, settings.connect_timeout).await?;
        Ok((client, options))
    }
}

/// The user's name as libpq defaults it (`$PGUSER`, else `$USER`).
fn default_user() -> Option<String> {
    std::env::var("PGUSER")
        .or_else(|_| std::env::var("USER"))
        .ok()
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

impl PostgresUrl {
    /// Where the server is, for messages: `host:port/database` (never the
    /// user or password).
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "postgres://app:pw@db.internal/app".parse()?;
    /// let BackendUrl::Postgres(pg) = &url else {
    ///     return Err("not a postgres:// URL".into());
    /// };
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

    /// The URL to hand to the driver, with the password filled in (a
    /// [`Secret`]: not to be shown). The password is the URL's own, else
    /// `PGPASSWORD` (left to the driver), else the `?passfile=` file's
    /// matching line; without any of these the driver looks in
    /// `PGPASSFILE` or `~/.pgpass` itself.
    ///
    /// Failure model: [`Error::Passfile`] when the `?passfile=` file cannot
    /// be read or others than its owner may read it (libpq ignores such a
    /// file; refusing says why the password is missing).
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "postgres://app:pw@db.internal/app?schema=jobs_election".parse()?;
    /// let BackendUrl::Postgres(pg) = &url else {
    ///     return Err("not a postgres:// URL".into());
    /// };
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
            password = self.password_in_passfile(path)?.map(Secret::new);
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
        Ok(Secret::new(
            BackendUrl::Postgres(whole).with_secrets().to_string(),
        ))
    }

    fn password_in_passfile(&self, path: &Path) -> Result<Option<String>, Error> {
        use std::os::unix::fs::PermissionsExt;
        let refuse = |reason: String| Error::Passfile {
            path: path.to_owned(),
            reason,
        };
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
    async fn schema_exists(&self, url: &Secret, options: &PostgresOptions) -> Result<bool, Error> {
        use sqlx::{ConnectOptions, Connection};
        use std::str::FromStr;
        let unusable = |reason: &str, source| {
            Error::Postgres(election_postgres::Error::Unusable {
                reason: reason.to_owned(),
                source,
            })
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
            Ok(Err(e)) => Err(Error::Postgres(election_postgres::Error::Unavailable(e))),
            Err(_) => Err(Error::Postgres(election_postgres::Error::TimedOut {
                after: bound,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
