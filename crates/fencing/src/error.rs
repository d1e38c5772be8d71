//! [`Error`]: every failure of fencing, grouped by what the caller should do.

use std::error::Error as StdError;

use election_core::{ConfigError, LeaseLost};

use crate::{ResourceName, Token};

/// A boxed error source, as stores hand their failures to [`Error`].
type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// The error of every fallible operation of this crate and of the
/// [`Fence`](crate::Fence) stores.
///
/// Variants are grouped by what the caller should do. Underlying failures
/// are kept as the [`source`](StdError::source), not repeated in the
/// message; an I/O failure of [`FileFence`](crate::FileFence) can be
/// downcast to [`std::io::Error`].
///
/// ```
/// use election_core::Epoch;
/// use fencing::{Error, Fence, MemoryFence, ResourceName, Token};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let fence = MemoryFence::new();
/// let ledger = ResourceName::new("ledger")?;
/// let (old, new) = (Epoch::new(1).unwrap(), Epoch::new(2).unwrap());
/// fence.advance(&ledger, Token::from_epoch(new)).await?;
/// match fence.advance(&ledger, Token::from_epoch(old)).await {
///     Err(Error::Stale { presented, high_water_mark, .. }) => {
///         assert_eq!((presented.epoch(), high_water_mark.epoch()), (old, new));
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A newer term has written to the resource: this writer is fenced off.
    /// Stop acting as leader; retrying with the same token will not help.
    Stale {
        /// The resource.
        resource: ResourceName,
        /// The token the writer presented.
        presented: Token,
        /// The highest token the resource has accepted.
        high_water_mark: Token,
    },
    /// The lease was already lost, or its term had ended by resign or drop
    /// ([`LossReason::is_end`](election_core::LossReason::is_end)), when a
    /// token was asked for: stop acting as leader.
    Lost(LeaseLost),
    /// The store could not be read or written (I/O, a lost connection):
    /// nothing was written. Retry later; the high-water mark may or may not
    /// have been raised, which never lets an older token in.
    Unavailable {
        /// Where it failed: a path, a database, a key.
        location: String,
        /// What failed (named in the message; `source()` goes on below
        /// it).
        source: BoxError,
    },
    /// A stored high-water mark cannot be read as a token. An operator must
    /// repair it: it is never taken as "no mark", which would let any token
    /// in.
    Corrupt {
        /// Where: a path, a database, a key.
        location: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A resource name, a directory or another setting cannot be used: fix
    /// the configuration; retrying will not help.
    Config(ConfigError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Stale {
                resource,
                presented,
                high_water_mark,
            } => write!(
                f,
                "resource {resource}: token {presented} is older than the high-water mark {high_water_mark}"
            ),
            Error::Lost(lost) => write!(f, "no token was issued: {lost}"),
            Error::Unavailable { location, source } => {
                write!(f, "the fence store failed at {location}: {source}")
            }
            Error::Corrupt { location, detail } => {
                write!(f, "the fence store is corrupt at {location}: {detail}")
            }
            Error::Config(e) => write!(f, "bad fencing configuration: {e}"),
        }
    }
}

/// Each inner error's message is in ours: `source()` goes on below it,
/// so a chain printer shows each message once (ADR 0063). The inner
/// error stays in the variant's field.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Lost(lost) => lost.source(),
            Error::Unavailable { source, .. } => source.source(),
            Error::Config(e) => e.source(),
            Error::Stale { .. } | Error::Corrupt { .. } => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl Error {
    /// Wraps a store failure at `location` as [`Error::Unavailable`].
    ///
    /// ```
    /// let io = std::io::Error::other("disk on fire");
    /// let err = fencing::Error::unavailable("/srv/fences/a.fence", io);
    /// assert_eq!(err.to_string(), "the fence store failed at /srv/fences/a.fence: disk on fire");
    /// ```
    pub fn unavailable(location: impl Into<String>, source: impl Into<BoxError>) -> Error {
        Error::Unavailable {
            location: location.into(),
            source: source.into(),
        }
    }

    /// Reports a damaged stored mark at `location` as [`Error::Corrupt`].
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Error, Token};
    ///
    /// /// A store reading its mark file: damage is `Corrupt`, never "no mark".
    /// fn parse_mark(path: &str, text: &str) -> Result<Option<Token>, Error> {
    ///     if text.is_empty() {
    ///         return Ok(None);
    ///     }
    ///     let epoch = text.trim().parse::<Epoch>().map_err(|e| Error::corrupt(path, e.to_string()))?;
    ///     Ok(Some(Token::from_epoch(epoch)))
    /// }
    ///
    /// assert!(matches!(parse_mark("/srv/fences/a.fence", "x7"), Err(Error::Corrupt { .. })));
    /// ```
    pub fn corrupt(location: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            location: location.into(),
            detail: detail.into(),
        }
    }

    /// True for errors that retrying cannot fix: a stale token, a lost
    /// lease, corruption, configuration.
    ///
    /// ```
    /// use election_core::Epoch;
    /// use fencing::{Error, Fence, MemoryFence, ResourceName, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let fence = MemoryFence::new();
    /// let ledger = ResourceName::new("ledger")?;
    /// let token = Token::from_epoch(Epoch::FIRST);
    /// match fence.fenced(&ledger, token, || async { /* the write */ }).await {
    ///     Ok(()) => {}
    ///     Err(e) if e.is_permanent() => return Err(e), // stale, lost or corrupt: do not retry
    ///     Err(e) => eprintln!("fence store down, retry later: {e}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_permanent(&self) -> bool {
        !matches!(self, Error::Unavailable { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::Epoch;

    #[test]
    fn source_chain_is_kept_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = Error::unavailable("/x/a.fence", io);
        assert_eq!(
            err.to_string(),
            "the fence store failed at /x/a.fence: denied"
        );
        // Named in the message, so not again as the source; kept in the field.
        assert!(err.source().is_none());
        let Error::Unavailable { source, .. } = &err else {
            panic!("{err:?}");
        };
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(!err.is_permanent());
    }

    #[test]
    fn stale_names_both_tokens_and_is_permanent() {
        let t = |n| Token::from_epoch(Epoch::new(n).unwrap());
        let err = Error::Stale {
            resource: ResourceName::new("ledger").unwrap(),
            presented: t(4),
            high_water_mark: t(9),
        };
        assert_eq!(
            err.to_string(),
            "resource ledger: token 4 is older than the high-water mark 9"
        );
        assert!(err.is_permanent());
        assert!(Error::corrupt("f", "bad").is_permanent());
    }

    #[test]
    fn bad_names_convert_into_config_errors_with_their_source() {
        let err = Error::from(ResourceName::new("").unwrap_err());
        assert!(matches!(err, Error::Config(ConfigError::BadName { .. })));
        assert!(
            err.to_string()
                .starts_with("bad fencing configuration: bad resource name \"\": "),
            "{err}"
        );
        assert!(err.to_string().contains("it is empty"), "{err}");
    }
}
