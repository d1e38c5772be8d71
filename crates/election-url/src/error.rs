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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fix the URL.
    #[error("bad backend URL: {0}")]
    Url(#[from] ParseError),
    /// Fix the settings (or the URL's options): the backend refuses them.
    #[error("bad settings")]
    Config(#[from] election_core::ConfigError),
    /// Fix the credentials file named by `?creds=`.
    #[error("cannot read the NATS credentials file {}", path.display())]
    Credentials {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The NATS servers could not be reached or refused the credentials
    /// (the kind tells which): retry later, or fix the credentials.
    #[error("cannot connect to NATS at {servers}")]
    Connect {
        /// The servers, comma-separated.
        servers: String,
        /// Why.
        #[source]
        source: async_nats::ConnectError,
    },
    /// An observer found nothing to observe: the directory, database (or
    /// its election tables) or bucket does not exist, so nobody was ever
    /// elected there. Nothing was created.
    #[error("{what} does not exist: no election has run there")]
    Absent {
        /// What is missing.
        what: String,
    },
    /// Fix the password file named by `?passfile=`: it cannot be read, or
    /// others than its owner may read it (libpq refuses such a file too).
    #[error("cannot use the password file {}: {reason}", path.display())]
    Passfile {
        /// The file.
        path: std::path::PathBuf,
        /// Why (never a password).
        reason: String,
    },
    /// The file backend failed (its error says whether to fix or retry).
    #[error("the file backend")]
    File(#[from] election_file::Error),
    /// The SQLite backend failed.
    #[error("the SQLite backend")]
    Sqlite(#[from] election_sqlite::Error),
    /// The NATS backend failed.
    #[error("the NATS backend")]
    Nats(#[from] election_nats::Error),
    /// The PostgreSQL backend failed (its error says whether to fix or
    /// retry: `Unavailable` and `TimedOut` for a server that cannot be
    /// reached, `Unusable` for a refused password or a missing database).
    #[error("the PostgreSQL backend")]
    Postgres(#[from] election_postgres::Error),
}
