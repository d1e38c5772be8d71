//! The crate's errors.

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
);
