//! Opening for a tool: what opening creates on this host, an observer's
//! missing NATS bucket opened again on the same connection, and the URL
//! as progress lines show it (ADR 0100).

use std::path::Path;

use election_nats::{NatsElection, NatsOptions};

use crate::{Backend, BackendUrl, Error, Settings};

/// A backend opened by [`BackendUrl::open_or_pending`]: open, or not
/// there yet for an observer.
#[derive(Debug)]
pub enum Opening {
    /// The backend, open.
    Ready(Backend),
    /// An observer's store that does not exist yet (nobody was ever
    /// elected there), kept so as to open it again with
    /// [`Pending::ready`].
    Pending(Box<Pending>),
}

/// A store an observer waits for: a NATS bucket that does not exist yet,
/// with the connection kept.
#[derive(Debug)]
pub struct Pending {
    client: async_nats::Client,
    options: NatsOptions,
}

impl Pending {
    /// The backend, if the store exists now; `None` while it still does
    /// not.
    ///
    /// Cancel safety: cancel safe. Failure model: the backend's error
    /// when it cannot be read.
    ///
    /// ```no_run
    /// use election_url::{BackendUrl, Opening, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "nats://127.0.0.1:4222?bucket=jobs".parse()?;
    /// let observer = Settings { observer: true, ..Settings::default() };
    /// if let Opening::Pending(pending) = url.open_or_pending(&observer).await? {
    ///     while pending.ready().await?.is_none() {
    ///         tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ready(&self) -> Result<Option<Backend>, Error> {
        match NatsElection::with_client(self.client.clone(), self.options.clone()).await {
            Ok(e) => Ok(Some(Backend::Nats(e))),
            Err(election_nats::Error::NoBucket { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl BackendUrl {
    /// Opens the backend as [`open`](BackendUrl::open) does, but an
    /// observer's missing NATS bucket is [`Opening::Pending`], which keeps
    /// the connection to open it again; a missing directory, database or
    /// schema is still [`Error::Absent`].
    ///
    /// Cancel safety and failure model: as [`open`](BackendUrl::open).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Opening, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::file(tmp.path());
    /// let Opening::Ready(backend) = url.open_or_pending(&Settings::default()).await? else {
    ///     unreachable!("only an observer's NATS bucket is pending");
    /// };
    /// println!("opened a {} backend", backend.kind());
    /// # Ok(()) }
    /// ```
    pub async fn open_or_pending(&self, settings: &Settings) -> Result<Opening, Error> {
        let BackendUrl::Nats(n) = self else {
            return Ok(Opening::Ready(self.open(settings).await?));
        };
        let (client, options) = n.connect(settings).await?;
        match NatsElection::with_client(client.clone(), options.clone()).await {
            Ok(e) => Ok(Opening::Ready(Backend::Nats(e))),
            Err(election_nats::Error::NoBucket { .. }) if options.is_observer() => {
                Ok(Opening::Pending(Box::new(Pending { client, options })))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Checks the options opening builds from `settings` and the URL's
    /// own, without I/O (as [`open`](BackendUrl::open) would refuse them:
    /// [`Error::Config`]), so that a tool can refuse them before it says
    /// what it creates.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// let url: BackendUrl = "postgres://app@db.internal/app?ttl=9s".parse()?;
    /// let twice = Settings { ttl: Some(Duration::from_secs(6)), ..Settings::default() };
    /// assert!(url.check_settings(&twice).is_err()); // a TTL given twice, differently
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        match self {
            BackendUrl::File(_) => Ok(()),
            BackendUrl::Sqlite(_) => settings.sqlite_options().map(drop),
            BackendUrl::Postgres(p) => settings.postgres_options(p).map(drop),
            BackendUrl::Nats(n) => settings.nats_options(n).map(drop),
        }
    }

    /// What opening for a candidate creates on this host when it is
    /// missing, named for a person (`the directory`, `the database`), and
    /// its path: the file backend's directory, SQLite's database when its
    /// directory exists (else opening fails); `None` for a server.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url = BackendUrl::file("/var/lib/app/election");
    /// let (what, path) = url.created_on_open().expect("a directory");
    /// assert_eq!(what, "the directory");
    /// assert_eq!(path, std::path::Path::new("/var/lib/app/election"));
    /// ```
    pub fn created_on_open(&self) -> Option<(&'static str, &Path)> {
        match self {
            BackendUrl::File(file) => Some(("the directory", &file.dir)),
            BackendUrl::Sqlite(path) if path.parent().is_some_and(Path::is_dir) => {
                Some(("the database", path))
            }
            BackendUrl::Sqlite(_) | BackendUrl::Postgres(_) | BackendUrl::Nats(_) => None,
        }
    }

    /// The URL as a progress line shows it: the place, the servers and
    /// the bucket or schema, never a credential.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "nats://u:s3cret@h:1?token=t0ken&bucket=b".parse()?;
    /// assert_eq!(url.shown(), "nats://h:1?bucket=b");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn shown(&self) -> String {
        match self {
            BackendUrl::File(p) => {
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
            BackendUrl::Sqlite(p) => format!("sqlite://{}", p.display()),
            BackendUrl::Nats(n) => {
                let mut s = n.server_urls().join(",");
                if let Some(b) = &n.bucket {
                    s.push_str(&format!("?bucket={b}"));
                }
                s
            }
            BackendUrl::Postgres(p) => {
                let mut s = format!("postgres://{}", p.place());
                if let Some(schema) = &p.schema {
                    s.push_str(&format!("?schema={schema}"));
                }
                s
            }
        }
    }

    /// [`shown`](BackendUrl::shown), naming what the opened `backend`
    /// picked that the URL does not say (the NATS bucket its TTL names).
    ///
    /// ```
    /// # use election_url::{BackendUrl, Settings};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// assert_eq!(url.shown_opened(&backend), url.shown());
    /// # Ok(()) }
    /// ```
    pub fn shown_opened(&self, backend: &Backend) -> String {
        match (self, backend) {
            (BackendUrl::Nats(n), Backend::Nats(e)) if n.bucket.is_none() => {
                format!("{}?bucket={}", self.shown(), e.options().bucket_name())
            }
            _ => self.shown(),
        }
    }
}
