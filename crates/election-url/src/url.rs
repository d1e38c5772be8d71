//! [`BackendUrl`]: a URL of any compiled-in backend, parsed by its driver,
//! printed, checked and opened.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use election_driver::{Credentials, LeaseCheck, Opening as DriverOpening, Target};

use crate::{Backend, Error, Opening, ParseError, Pending, Settings, table};

/// What a backend URL names (see the crate docs for the grammar), parsed
/// by the driver of its scheme.
///
/// [`Display`](fmt::Display) and [`Debug`] never show a password or a
/// token ([`REDACTED`](crate::REDACTED) stands in for them);
/// [`BackendUrl::with_secrets`] prints the URL whole, for a process that
/// must be handed it. Two URLs are equal when they print the same whole.
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
pub struct BackendUrl(Box<dyn Target>);

impl BackendUrl {
    /// Parses a backend URL: one grammar for every scheme (see the crate
    /// docs). Paths and values are percent-decoded; unknown, repeated and
    /// empty options, and fragments, are refused with a [`ParseError`]
    /// naming what is wrong (never a secret).
    ///
    /// ```
    /// use election_url::{BackendUrl, ParseError};
    ///
    /// let url = BackendUrl::parse("sqlite:///srv/my%20app.db")?;
    /// assert_eq!(url.to_string(), "sqlite:///srv/my%20app.db");
    ///
    /// let typo = BackendUrl::parse("nats://h:4222?buckets=jobs");
    /// assert!(matches!(typo, Err(ParseError::UnknownOption { .. })));
    /// # Ok::<(), ParseError>(())
    /// ```
    pub fn parse(url: &str) -> Result<BackendUrl, ParseError> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| ParseError::NoScheme {
            schemes: table::schemes(),
        })?;
        let driver = table::driver(scheme).ok_or_else(|| ParseError::UnknownScheme {
            scheme: scheme.to_owned(),
            schemes: table::schemes(),
        })?;
        driver.parse(rest).map(BackendUrl)
    }

    /// `file://dir` without options: the file backend in `dir`, the
    /// embedded default.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// assert_eq!(BackendUrl::file("/srv/elect").to_string(), "file:///srv/elect");
    /// ```
    #[cfg(feature = "file")]
    pub fn file(dir: impl Into<PathBuf>) -> BackendUrl {
        BackendUrl(Box::new(election_file::FileUrl::new(dir)))
    }

    /// A URL of a backend's own type (`election_sqlite::SqliteUrl`, …).
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url = BackendUrl::new(election_file::FileUrl::new("/srv/elect"));
    /// assert_eq!(url.scheme(), "file");
    /// ```
    pub fn new(target: impl Target) -> BackendUrl {
        BackendUrl(Box::new(target))
    }

    /// The scheme's name: `file`, `sqlite`, `nats`, `postgres` (also for
    /// `postgresql://`), or another compiled-in backend's.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "postgresql://app@db.internal/app".parse()?;
    /// assert_eq!(url.scheme(), "postgres");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn scheme(&self) -> &'static str {
        self.0.scheme()
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
    /// assert_eq!(url.with_secrets().to_string(), "nats://h:4222?token=t0k");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn with_secrets(&self) -> WithSecrets<'_> {
        WithSecrets(self)
    }

    /// The backend's own URL type, if it is `T`.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url = BackendUrl::file("/srv/elect");
    /// let file = url.downcast_ref::<election_file::FileUrl>().expect("a file URL");
    /// assert_eq!(file.dir, std::path::Path::new("/srv/elect"));
    /// ```
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// The settings given that this backend has no use for (`--ttl`-style
    /// names: `ttl`, `renew`, `grace`).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let settings = Settings { ttl: Some(Duration::from_secs(9)), ..Settings::default() };
    /// // A lock has no TTL: the file backend ignores it.
    /// let url: BackendUrl = "file:///run/my-service/elections".parse()?;
    /// assert_eq!(url.unused_settings(&settings), ["ttl"]);
    /// let url: BackendUrl = "sqlite:///srv/app.db".parse()?;
    /// assert!(url.unused_settings(&settings).is_empty());
    /// # Ok(()) }
    /// ```
    pub fn unused_settings(&self, settings: &Settings) -> Vec<&'static str> {
        settings.given_except(self.0.lease_settings())
    }

    /// The lease settings checked against this backend's bounds before it
    /// is opened (no I/O), defaults filled in: a tool words the
    /// [`LeaseCheck`] in its own terms.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, LeaseCheck, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "file:///srv/elect".parse()?;
    /// let settings = Settings { ttl: Some(Duration::from_secs(9)), ..Settings::default() };
    /// assert_eq!(url.check_lease(&settings), Err(LeaseCheck::NoLease { scheme: "file" }));
    /// # Ok(()) }
    /// ```
    pub fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck> {
        self.0.check_lease(settings)
    }

    /// The settings turned into the backend's options without opening it:
    /// the [`Error::Config`] opening would give.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "sqlite:///srv/app.db".parse()?;
    /// url.check_settings(&Settings::default())?;
    /// # Ok(()) }
    /// ```
    pub fn check_settings(&self, settings: &Settings) -> Result<(), Error> {
        self.0.check_settings(settings)
    }

    /// What opening creates on this host (`the directory`, `the
    /// database`), if anything.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url = BackendUrl::file("/srv/elect");
    /// assert_eq!(url.created_on_open(), Some(("the directory", std::path::Path::new("/srv/elect"))));
    /// ```
    pub fn created_on_open(&self) -> Option<(&'static str, &Path)> {
        self.0.created_on_open()
    }

    /// The URL as progress lines show it: no user, no secret.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "nats://u:s3cret@h:1?token=t0ken&bucket=b".parse()?;
    /// assert_eq!(url.shown(), "nats://h:1?bucket=b");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn shown(&self) -> String {
        self.0.shown()
    }

    /// [`shown`](BackendUrl::shown), with what opening chose (a NATS
    /// bucket's default name).
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// assert_eq!(url.shown_opened(&backend), url.shown());
    /// # Ok(()) }
    /// ```
    pub fn shown_opened(&self, backend: &Backend) -> String {
        self.0.shown_opened(backend.opened())
    }

    /// The credentials the URL carries.
    ///
    /// ```
    /// use election_url::BackendUrl;
    ///
    /// let url: BackendUrl = "nats://h:1?token=t0k".parse()?;
    /// assert_eq!(url.credentials().token.map(|t| t.expose().to_owned()).as_deref(), Some("t0k"));
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn credentials(&self) -> Credentials {
        self.0.credentials()
    }

    /// The URL with its credentials replaced, or `None` if the backend
    /// takes none this way.
    ///
    /// ```
    /// use election_url::{BackendUrl, Credentials, Secret};
    ///
    /// let url: BackendUrl = "nats://h:1".parse()?;
    /// let mut creds = Credentials::default();
    /// creds.token = Some(Secret::new("t0k"));
    /// let with = url.with_credentials(creds).expect("NATS takes a token");
    /// assert_eq!(with.with_secrets().to_string(), "nats://h:1?token=t0k");
    /// # Ok::<(), election_url::ParseError>(())
    /// ```
    pub fn with_credentials(&self, credentials: Credentials) -> Option<BackendUrl> {
        self.0.with_credentials(credentials).map(BackendUrl)
    }

    /// Opens the backend with `settings`.
    ///
    /// Cancel safety: cancel safe (nothing is held until it returns).
    /// Failure model: [`Error::Absent`] for an observer with nothing to
    /// observe, [`Error::Config`] for settings the backend refuses, the
    /// backend's error else.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}/app.db", tmp.path().display()).parse()?;
    /// let backend = url.open(&Settings::default()).await?;
    /// assert_eq!(backend.kind(), "sqlite");
    /// # Ok(()) }
    /// ```
    pub async fn open(&self, settings: &Settings) -> Result<Backend, Error> {
        Ok(Backend::from_opened(self.0.open(settings).await?))
    }

    /// Opens the backend, or, for an observer whose store does not exist
    /// yet but may (a NATS bucket), a [`Pending`] that keeps its
    /// connection and tries again.
    ///
    /// ```
    /// use election_url::{BackendUrl, Opening, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::file(tmp.path());
    /// assert!(matches!(url.open_or_pending(&Settings::default()).await?, Opening::Ready(_)));
    /// # Ok(()) }
    /// ```
    pub async fn open_or_pending(&self, settings: &Settings) -> Result<Opening, Error> {
        Ok(match self.0.open_or_pending(settings).await? {
            DriverOpening::Ready(opened) => Opening::Ready(Backend::from_opened(opened)),
            DriverOpening::Pending(p) => Opening::Pending(Box::new(Pending::new(p))),
        })
    }
}

impl Clone for BackendUrl {
    fn clone(&self) -> BackendUrl {
        BackendUrl(self.0.clone_target())
    }
}

impl PartialEq for BackendUrl {
    fn eq(&self, other: &BackendUrl) -> bool {
        self.scheme() == other.scheme()
            && self.with_secrets().to_string() == other.with_secrets().to_string()
    }
}

impl Eq for BackendUrl {}

/// The URL without its secrets, as `Display` prints it.
impl fmt::Debug for BackendUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BackendUrl")
            .field(&format_args!("{self}"))
            .finish()
    }
}

impl FromStr for BackendUrl {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BackendUrl::parse(s)
    }
}

/// Prints the URL without its secrets: [`REDACTED`](crate::REDACTED)
/// stands for a password or a token.
impl fmt::Display for BackendUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write(f, false)
    }
}

/// A [`BackendUrl`] printed whole, secrets included (from
/// [`BackendUrl::with_secrets`]).
#[derive(Clone, Copy)]
pub struct WithSecrets<'a>(&'a BackendUrl);

impl fmt::Display for WithSecrets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.0.write(f, true)
    }
}

/// Redacted, like [`BackendUrl`]'s `Display`.
impl fmt::Debug for WithSecrets<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}
