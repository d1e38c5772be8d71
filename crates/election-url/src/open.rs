//! Opening the backend a URL names.

use std::path::Path;
use std::time::Duration;

use election_file::FileElection;
use election_nats::{NatsElection, NatsOptions};
use election_sqlite::{SqliteElection, SqliteOptions};

use crate::{Backend, BackendUrl, Error, NatsUrl};

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
                        BackendUrl::Sqlite(_) => name == "grace",
                        BackendUrl::Nats(_) => false,
                    }
            })
            .map(|(name, _)| name)
            .collect()
    }

    /// The SQLite options these settings give: the backend's defaults, a
    /// renew interval of a third of a given TTL.
    pub fn sqlite_options(&self) -> Result<SqliteOptions, Error> {
        Ok(match (self.ttl, self.renew) {
            (None, None) => SqliteOptions::default(),
            (Some(ttl), None) => SqliteOptions::new(ttl, ttl / 3)?,
            (None, Some(renew)) => SqliteOptions::new(election_sqlite::DEFAULT_TTL, renew)?,
            (Some(ttl), Some(renew)) => SqliteOptions::new(ttl, renew)?,
        })
    }

    /// The NATS options these settings and the URL's options give.
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
            servers: url.servers.join(","),
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
    /// [`Error::Nats`]) when it cannot be opened; [`Error::Connect`] and
    /// [`Error::Credentials`] for NATS.
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
            BackendUrl::File(dir) => {
                missing("the directory", dir)?;
                Ok(Backend::File(FileElection::new(dir.clone())?))
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
    pub async fn connect(
        &self,
        settings: &Settings,
    ) -> Result<(async_nats::Client, NatsOptions), Error> {
        let options = settings.nats_options(self)?;
        let client = connect(self, &options, settings.connect_timeout).await?;
        Ok((client, options))
    }
}
