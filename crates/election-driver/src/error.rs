//! The errors of opening and using a backend through its driver, and
//! their [`Class`].

use election_core::{Class, Classify, Disposition};

use crate::ParseError;

/// An error a backend's own crate defines, as the boundary carries it: it
/// says what a caller may do with it ([`Classify`]).
pub trait Failure: std::error::Error + Classify + Send + Sync + 'static {
    /// `self` as a plain error, for its `source` chain.
    ///
    /// ```
    /// use election_driver::Failure;
    ///
    /// let e = election_core::ConfigError::Unsupported { what: "proclaim", backend: "x" };
    /// assert_eq!(e.as_error().to_string(), e.to_string());
    /// ```
    fn as_error(&self) -> &(dyn std::error::Error + 'static);
}

impl<T: std::error::Error + Classify + Send + Sync + 'static> Failure for T {
    fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        self
    }
}

/// Opening or using the backend a URL names failed.
///
/// What a caller may do with it is its [`Class`] ([`Classify`]): a
/// backend's own error says it; `election_url::classify` walks a chain.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The URL does not parse.
    Url(ParseError),
    /// A setting does not fit the backend.
    Config(election_core::ConfigError),
    /// An observer found nothing to observe: the directory, database,
    /// schema or bucket does not exist (no election has run there).
    Absent {
        /// What is missing, named for a person.
        what: String,
    },
    /// The backend failed; printed after `backend` (`the SQLite backend:
    /// …`).
    Backend {
        /// The backend, as messages name it (`the NATS backend`).
        backend: &'static str,
        /// The backend's error.
        error: Box<dyn Failure>,
    },
    /// Reaching the backend failed before it was open (a server refused
    /// the connection, a credentials or password file is unusable): the
    /// error is printed as it is.
    Opening(Box<dyn Failure>),
    /// An election failed.
    Election(election_core::Error),
}

impl Error {
    /// A backend's error, printed after `backend` (`the SQLite backend`).
    ///
    /// ```
    /// use election_driver::Error;
    ///
    /// let inner = election_core::ConfigError::Unsupported { what: "proclaim", backend: "x" };
    /// let e = Error::backend("the X backend", inner);
    /// assert!(e.to_string().starts_with("the X backend: "));
    /// ```
    pub fn backend(backend: &'static str, error: impl Failure) -> Error {
        Error::Backend {
            backend,
            error: Box::new(error),
        }
    }

    /// An error reaching the backend, printed as it is.
    ///
    /// ```
    /// use election_driver::Error;
    ///
    /// let inner = election_core::ConfigError::Unsupported { what: "proclaim", backend: "x" };
    /// assert_eq!(Error::opening(inner.clone()).to_string(), inner.to_string());
    /// ```
    pub fn opening(error: impl Failure) -> Error {
        Error::Opening(Box::new(error))
    }

    /// The backend's own error this error carries, if it is a `T`.
    ///
    /// ```
    /// use election_driver::Error;
    ///
    /// let inner = election_core::ConfigError::Unsupported { what: "proclaim", backend: "x" };
    /// let e = Error::backend("the X backend", inner);
    /// assert!(e.downcast_ref::<election_core::ConfigError>().is_some());
    /// ```
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Backend { error, .. } | Error::Opening(error) => {
                error.as_error().downcast_ref::<T>()
            }
            _ => None,
        }
    }

    /// The error of the backend (or the settings, or the election) this
    /// error wraps, for a message that names only the cause.
    ///
    /// ```
    /// use election_driver::Error;
    ///
    /// let e = Error::Absent { what: "the bucket elections".into() };
    /// assert!(e.backend_error().is_none());
    /// ```
    pub fn backend_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Backend { error, .. } => Some(error.as_error()),
            Error::Config(e) => Some(e),
            Error::Election(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Url(e) => write!(f, "bad backend URL: {e}"),
            Error::Config(e) => write!(f, "bad settings: {e}"),
            Error::Absent { what } => write!(f, "{what} does not exist: no election has run there"),
            Error::Backend { backend, error } => write!(f, "{backend}: {error}"),
            Error::Opening(e) => write!(f, "{e}"),
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
            Error::Absent { .. } => None,
            Error::Backend { error, .. } => error.source(),
            Error::Opening(e) => e.source(),
            Error::Election(e) => e.source(),
        }
    }
}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Self {
        Error::Url(e)
    }
}

impl From<election_core::ConfigError> for Error {
    fn from(e: election_core::ConfigError) -> Self {
        Error::Config(e)
    }
}

impl From<election_core::Error> for Error {
    fn from(e: election_core::Error) -> Self {
        Error::Election(e)
    }
}

/// The class of the error itself; an [`Error::Election`] is classed by the
/// core error alone (`election_url::classify` steps into the backend's
/// error it carries).
impl Classify for Error {
    fn class(&self) -> Class {
        match self {
            Error::Url(_) | Error::Config(_) => Class::new(Disposition::Permanent),
            // Nobody was ever elected there: not an error to an observer.
            Error::Absent { .. } => Class::new(Disposition::Other),
            Error::Backend { error, .. } => error.class(),
            Error::Opening(e) => e.class(),
            Error::Election(e) => e.class(),
        }
    }
}
