//! The crate's errors, and their [`Class`].

use election_core::{Class, Classify, Disposition, probe};

/// Why a text is not a backend URL. Never quotes a password or a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// No `scheme://`.
    #[error("no scheme (file://, sqlite://, nats:// or postgres://)")]
    NoScheme,
    /// A scheme other than `file`, `sqlite`, `nats`, `postgres` and
    /// `postgresql`.
    #[error("unknown scheme {scheme:?} (file, sqlite, nats or postgres)")]
    UnknownScheme {
        /// The scheme given.
        scheme: String,
    },
    /// An option the scheme does not know.
    #[error("unknown option {option:?} ({})", if known.is_empty() { format!("{scheme}:// URLs take no options") } else { format!("{scheme}:// knows {}", known.join(", ")) })]
    UnknownOption {
        /// The scheme.
        scheme: &'static str,
        /// The option given (percent-decoded).
        option: String,
        /// The options the scheme knows.
        known: &'static [&'static str],
    },
    /// An option given twice.
    #[error("option {option:?} is given twice")]
    RepeatedOption {
        /// The option.
        option: String,
    },
    /// An option without `=`.
    #[error("an option is not key=value")]
    NotKeyValue,
    /// An option's value the option cannot take.
    #[error("{option}: the value is {reason}")]
    BadValue {
        /// The option.
        option: String,
        /// What is wrong with the value (never the value of a secret).
        reason: String,
    },
    /// The URL is not shaped as the grammar says (a relative path, a host
    /// without a port, a bad percent escape, a fragment, ...).
    #[error("{reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
}

/// Why a backend could not be opened (or a URL not parsed), grouped by
/// what the caller should do.
///
/// Each message says what failed and why: a backend's error is named
/// after a colon (`the SQLite backend: the database is busy (...)`) and
/// `source()` goes on with that error's own source, so a chain printer
/// shows each message once (ADR 0063); the backend's error itself is the
/// variant's field.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Fix the URL.
    Url(ParseError),
    /// Fix the settings (or the URL's options): the backend refuses them.
    Config(election_core::ConfigError),
    /// Fix the credentials file named by `?creds=`.
    Credentials {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The NATS servers could not be reached or refused the credentials
    /// (the kind tells which): retry later, or fix the credentials.
    Connect {
        /// The servers, comma-separated.
        servers: String,
        /// Why.
        source: async_nats::ConnectError,
    },
    /// An observer found nothing to observe: the directory, database (or
    /// its election tables) or bucket does not exist, so nobody was ever
    /// elected there. Nothing was created.
    Absent {
        /// What is missing.
        what: String,
    },
    /// Fix the password file named by `?passfile=`: it cannot be read, or
    /// others than its owner may read it (libpq refuses such a file too).
    Passfile {
        /// The file.
        path: std::path::PathBuf,
        /// Why (never a password).
        reason: String,
    },
    /// The file backend failed (its error says whether to fix or retry).
    File(election_file::Error),
    /// The SQLite backend failed.
    Sqlite(election_sqlite::Error),
    /// The NATS backend failed.
    Nats(election_nats::Error),
    /// The PostgreSQL backend failed (its error says whether to fix or
    /// retry: `Unavailable` and `TimedOut` for a server that cannot be
    /// reached, `Unusable` for a refused password or a missing database).
    Postgres(election_postgres::Error),
    /// A read of an open backend failed with the core's error, which
    /// names the election (e.g. [`Backend::holder`](crate::Backend::holder)
    /// on a backend whose reads speak the core's errors).
    Election(election_core::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Url(e) => write!(f, "bad backend URL: {e}"),
            Error::Config(e) => write!(f, "bad settings: {e}"),
            Error::Credentials { path, source } => write!(
                f,
                "cannot read the NATS credentials file {}: {source}",
                path.display()
            ),
            Error::Connect { servers, source } if refused(source) => {
                write!(f, "NATS at {servers} refused the credentials: {source}")
            }
            Error::Connect { servers, source } => {
                write!(f, "cannot connect to NATS at {servers}: {source}")
            }
            Error::Absent { what } => write!(f, "{what} does not exist: no election has run there"),
            Error::Passfile { path, reason } => write!(
                f,
                "cannot use the password file {}: {reason}",
                path.display()
            ),
            Error::File(e) => write!(f, "the file backend: {e}"),
            Error::Sqlite(e) => write!(f, "the SQLite backend: {e}"),
            Error::Nats(e) => write!(f, "the NATS backend: {e}"),
            Error::Postgres(e) => write!(f, "the PostgreSQL backend: {e}"),
            Error::Election(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Each inner error's message is in ours: the chain goes on below.
        match self {
            Error::Url(e) => e.source(),
            Error::Config(e) => e.source(),
            Error::Credentials { source, .. } => source.source(),
            Error::Connect { source, .. } => source.source(),
            Error::Absent { .. } | Error::Passfile { .. } => None,
            Error::File(e) => e.source(),
            Error::Sqlite(e) => e.source(),
            Error::Nats(e) => e.source(),
            Error::Postgres(e) => e.source(),
            Error::Election(e) => e.source(),
        }
    }
}

macro_rules! from {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        $(impl From<$ty> for Error {
            fn from(e: $ty) -> Self {
                Error::$variant(e)
            }
        })*
    };
}

from!(
    Url(ParseError),
    Config(election_core::ConfigError),
    File(election_file::Error),
    Sqlite(election_sqlite::Error),
    Nats(election_nats::Error),
    Postgres(election_postgres::Error),
    Election(election_core::Error),
);

/// Whether the NATS servers refused the credentials (retrying with the
/// same ones cannot help).
fn refused(e: &async_nats::ConnectError) -> bool {
    matches!(
        e.kind(),
        async_nats::ConnectErrorKind::Authentication
            | async_nats::ConnectErrorKind::AuthorizationViolation
    )
}

/// What to do: a backend's error classifies itself, the rest here, with
/// the fix in the terms of the URL (and of `elect`, the tool that takes
/// one).
impl Classify for Error {
    fn class(&self) -> Class {
        let permanent = Class::new(Disposition::Permanent);
        match self {
            Error::Url(_) | Error::Config(_) | Error::Credentials { .. } => permanent,
            Error::Connect { source, .. } if refused(source) => {
                permanent.hint(election_nats::CREDENTIALS_HINT)
            }
            Error::Connect { .. } => Class::new(Disposition::Transient)
                .hint("check that nats-server runs (with -js) and the address is right"),
            // Nobody was ever elected there: not an error to an observer.
            Error::Absent { .. } => Class::new(Disposition::Other),
            Error::Passfile { .. } => permanent.hint(
                "make the password file readable by this user only (chmod 0600), or give the \
                 password in PGPASSWORD",
            ),
            Error::File(e) => e.class(),
            Error::Sqlite(e) => e.class(),
            Error::Nats(e) => e.class(),
            Error::Postgres(e) => e.class(),
            // As the chain below it says (a backend's error steps in).
            Error::Election(e) => classify(e).unwrap_or_else(|| e.class()),
        }
    }
}

impl Error {
    /// The backend's error this error carries (named in its message), for
    /// a message without the backend's name: `None` for the errors of
    /// opening itself (a URL, settings, credentials).
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// # std::fs::write(tmp.path().join("not-a-dir"), "")?;
    /// let url = BackendUrl::file(tmp.path().join("not-a-dir"));
    /// let e = url.open(&Settings::default()).await.expect_err("a file, not a directory");
    /// let inner = e.backend_error().expect("the file backend's error");
    /// assert!(e.to_string().ends_with(&inner.to_string()));
    /// # Ok(()) }
    /// ```
    pub fn backend_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::File(e) => Some(e),
            Error::Sqlite(e) => Some(e),
            Error::Nats(e) => Some(e),
            Error::Postgres(e) => Some(e),
            Error::Config(e) => Some(e),
            Error::Election(e) => Some(e),
            _ => None,
        }
    }
}

/// The class of `error` (of any backend, through any of the core's errors
/// and this crate's: [`election_core::classify`] with every backend's
/// error recognized), for a tool to answer a failure in one place. `None`:
/// nothing in the chain classifies itself (not an error of an election).
///
/// ```
/// use election_core::Disposition;
/// use election_url::{BackendUrl, Settings, classify};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// # std::fs::write(tmp.path().join("not-a-dir"), "")?;
/// let url = BackendUrl::file(tmp.path().join("not-a-dir"));
/// let e = url.open(&Settings::default()).await.expect_err("not a directory");
/// let class = classify(&e).expect("an election's error");
/// assert_eq!(class.disposition, Disposition::Permanent); // retrying will not help
/// println!("hint: {}", class.hint.unwrap_or_default());
/// # Ok(()) }
/// ```
pub fn classify(error: &(dyn std::error::Error + 'static)) -> Option<Class> {
    election_core::classify(
        error,
        &[
            probe::<Error>,
            probe::<election_file::Error>,
            probe::<election_sqlite::Error>,
            probe::<election_nats::Error>,
            probe::<election_postgres::Error>,
        ],
    )
}
