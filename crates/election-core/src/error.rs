//! Errors of the core, grouped by what the caller should do.

use std::error::Error as StdError;
use std::sync::Arc;

use crate::{ConfigError, ElectionName, Epoch, Identity, Leader, Source};

/// Why a term's lease reads lost: the backend took the claim away, or could
/// no longer prove that it still held it; or the holder ended the term
/// itself ([`Resigned`](LossReason::Resigned), [`Dropped`](LossReason::Dropped)).
///
/// Its `Display` says why in words; [`Failed`](LossReason::Failed) adds
/// the backend's error after a colon, and its `source()` continues with
/// that error's own source (each message once in a chain, ADR 0063).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum LossReason {
    /// The lease ran out: it could not be renewed before the backend could
    /// grant it to another candidate.
    Expired,
    /// The backend shows another holder, or no claim of ours.
    Revoked {
        /// What the backend showed instead.
        detail: String,
    },
    /// The backend failed in a way that leaves the claim in doubt; in doubt,
    /// the claim counts as not held.
    Failed(Source),
    /// The holder ended the term itself: it began to resign (also a resign
    /// whose future was dropped). The lease reads lost from the moment the
    /// resign began, before the release was sent.
    Resigned,
    /// The holder ended the term itself: it dropped the term (or the
    /// [`lead`](crate::Term::lead) future) without resigning. The lease
    /// reads lost from that moment, while the claim may still be held until
    /// the term's work has stopped.
    Dropped,
}

impl std::fmt::Display for LossReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LossReason::Expired => f.write_str("the lease expired before it could be renewed"),
            LossReason::Revoked { detail } => write!(
                f,
                "the backend no longer shows this claim as held: {detail}"
            ),
            LossReason::Failed(source) => {
                write!(f, "the backend failed and the claim is in doubt: {source}")
            }
            LossReason::Resigned => f.write_str("the term ended: its holder resigned"),
            LossReason::Dropped => f.write_str("the term ended: its holder dropped it"),
        }
    }
}

impl StdError for LossReason {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            // Its message is in ours: the chain goes on below it.
            LossReason::Failed(source) => source.source(),
            _ => None,
        }
    }
}

impl LossReason {
    /// The backend's error behind a [`Failed`](LossReason::Failed) loss
    /// (its message is part of this reason's), for inspection and
    /// downcasting; `None` for the other reasons.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_core::LossReason;
    ///
    /// let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply");
    /// let reason = LossReason::Failed(Arc::new(io));
    /// assert_eq!(reason.to_string(), "the backend failed and the claim is in doubt: no reply");
    /// let cause = reason.backend_error().expect("failed");
    /// assert!(cause.downcast_ref::<std::io::Error>().is_some());
    /// assert!(LossReason::Expired.backend_error().is_none());
    /// ```
    pub fn backend_error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match self {
            LossReason::Failed(source) => Some(&**source),
            _ => None,
        }
    }

    /// True when the holder ended the term itself ([`Resigned`](LossReason::Resigned),
    /// [`Dropped`](LossReason::Dropped)), false when the backend took the
    /// claim away or could no longer prove it held it.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// backend.revoke("jobs");
    /// let lost = lease.lost().await;
    /// if lost.reason.is_end() {
    ///     println!("we ended the term ourselves");
    /// } else {
    ///     eprintln!("deposed: {}", lost.reason); // another candidate may lead now
    /// }
    /// assert!(!lost.reason.is_end());
    /// # Ok(()) }
    /// ```
    pub fn is_end(&self) -> bool {
        matches!(self, LossReason::Resigned | LossReason::Dropped)
    }
}

/// A term is over for the code that holds its lease: the backend took the
/// claim away (another candidate may lead now), or the holder ended the term
/// by resign or drop ([`LossReason::is_end`]). Either way the leader's work
/// must stop acting for the group, and no token may be issued from it.
///
/// Returned by [`Term::lost`](crate::Term::lost) and
/// [`Lease::loss`](crate::Lease::loss), and carried by [`Error::Lost`].
///
/// Its `Display` carries the reason: `term 11 of election jobs (held by
/// host-a/4711) was lost: the lease expired before it could be renewed`;
/// its `source()` is the reason's (a [`LossReason::Failed`] backend
/// error's own source), so a chain printer shows each message once.
#[derive(Clone, Debug)]
pub struct LeaseLost {
    /// The election.
    pub name: ElectionName,
    /// The identity that held the term.
    pub identity: Identity,
    /// The epoch of the lost term.
    pub epoch: Epoch,
    /// Why it was lost (in the message; the chain goes on with its source).
    pub reason: LossReason,
}

impl std::fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "term {} of election {} (held by {}) was lost: {}",
            self.epoch, self.name, self.identity, self.reason
        )
    }
}

impl StdError for LeaseLost {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.reason.source()
    }
}

/// The error of every fallible operation of the core and of the backends'
/// [`Claim`](crate::Claim) steps.
///
/// Variants are grouped by what the caller should do. Each `Display` says
/// what happened and why: [`Unavailable`](Error::Unavailable),
/// [`OutcomeUnknown`](Error::OutcomeUnknown) and [`Corrupt`](Error::Corrupt)
/// name the backend's error after a colon (`election jobs: the backend is
/// unavailable: the database is busy (...)`), and their `source()` goes on
/// with that error's own source, so a chain printer shows each message
/// once (ADR 0063). The backend's error itself is the variant's `source`
/// field ([`Error::cause`]), to inspect and downcast.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Fix the configuration; retrying will not help. Shown as the
    /// [`ConfigError`] itself.
    Config(ConfigError),
    /// The term was lost: stop acting as leader. Shown as the
    /// [`LeaseLost`] itself (with its reason).
    Lost(LeaseLost),
    /// The caller does not hold the claim (any more): do not act as leader.
    NotHeld {
        /// The election.
        name: ElectionName,
    },
    /// Another candidate holds the claim: route the work to it, or wait.
    /// `holder` names it when the backend knows (its identity and epoch).
    HeldElsewhere {
        /// The election (or the lease set's key).
        name: ElectionName,
        /// Who holds it, when known.
        holder: Option<Leader>,
    },
    /// The backend cannot be reached or failed; nothing was won. Retry later.
    Unavailable {
        /// The election.
        name: ElectionName,
        /// What failed (named in the message).
        source: Source,
    },
    /// A step may or may not have taken effect (e.g. a timed-out write).
    /// The claim counts as not held; the backend's own safety (lock, TTL)
    /// frees it if it was won.
    OutcomeUnknown {
        /// The election.
        name: ElectionName,
        /// What failed (named in the message).
        source: Source,
    },
    /// The backend's stored state is damaged (e.g. a corrupt epoch file);
    /// an operator must repair it. No term is handed out, so no epoch is
    /// reused.
    Corrupt {
        /// The election.
        name: ElectionName,
        /// What is damaged (named in the message).
        source: Source,
    },
    /// Guarded work did not drain within the configured bound and was
    /// cancelled before the claim was released.
    DrainTimedOut {
        /// The election.
        name: ElectionName,
        /// The configured bound.
        drain_timeout: std::time::Duration,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(e) => e.fmt(f),
            Error::Lost(e) => e.fmt(f),
            Error::NotHeld { name } => write!(
                f,
                "election {name}: the claim is not held (this process never won it, or its term ended)"
            ),
            Error::HeldElsewhere { name, holder } => match holder {
                Some(l) => write!(
                    f,
                    "election {name}: held by {} in term {}",
                    l.identity, l.epoch
                ),
                None => write!(f, "election {name}: held by another candidate"),
            },
            Error::Unavailable { name, source } => write!(
                f,
                "election {name}: the backend is unavailable (nothing was won): {source}"
            ),
            Error::OutcomeUnknown { name, source } => write!(
                f,
                "election {name}: the outcome of a step is unknown (the claim counts as not held): {source}"
            ),
            Error::Corrupt { name, source } => write!(
                f,
                "election {name}: stored state is corrupt (no term is handed out until it is repaired): {source}"
            ),
            Error::DrainTimedOut {
                name,
                drain_timeout,
            } => write!(
                f,
                "election {name}: the leader's work did not drain within {drain_timeout:?} and was cancelled before the claim was released"
            ),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Config(e) => e.source(),
            Error::Lost(e) => e.source(),
            // The backend's message is in ours: the chain goes on below it.
            Error::Unavailable { source, .. }
            | Error::OutcomeUnknown { source, .. }
            | Error::Corrupt { source, .. } => source.source(),
            Error::NotHeld { .. } | Error::HeldElsewhere { .. } | Error::DrainTimedOut { .. } => {
                None
            }
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl From<LeaseLost> for Error {
    fn from(e: LeaseLost) -> Self {
        Error::Lost(e)
    }
}

impl Error {
    /// The backend's error behind [`Unavailable`](Error::Unavailable),
    /// [`OutcomeUnknown`](Error::OutcomeUnknown), [`Corrupt`](Error::Corrupt),
    /// a [`Lost`](Error::Lost) term whose reason is [`LossReason::Failed`]
    /// or a [`ConfigError::Location`] with a source: named in this error's
    /// message, and here to inspect and downcast. `None` otherwise.
    ///
    /// ```
    /// use election_core::{ElectionName, Error};
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("jobs")?;
    /// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    /// let err = Error::unavailable(&name, io);
    /// assert_eq!(
    ///     err.to_string(),
    ///     "election jobs: the backend is unavailable (nothing was won): connection refused"
    /// );
    /// let io = err.backend_error().and_then(|c| c.downcast_ref::<std::io::Error>());
    /// assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::ConnectionRefused));
    /// # Ok(()) }
    /// ```
    pub fn backend_error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match self {
            Error::Unavailable { source, .. }
            | Error::OutcomeUnknown { source, .. }
            | Error::Corrupt { source, .. } => Some(&**source),
            Error::Lost(lost) => lost.reason.backend_error(),
            Error::Config(ConfigError::Location {
                source: Some(source),
                ..
            }) => Some(&**source),
            _ => None,
        }
    }

    /// Wraps a backend failure as [`Error::Unavailable`].
    ///
    /// ```
    /// use election_core::{ElectionName, Error};
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("jobs")?;
    /// // In a backend step: the store could not be reached, nothing was won.
    /// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connect");
    /// let err = Error::unavailable(&name, io);
    /// assert!(!err.is_permanent()); // the campaign retries it
    /// # Ok(()) }
    /// ```
    pub fn unavailable(name: &ElectionName, source: impl StdError + Send + Sync + 'static) -> Self {
        Error::Unavailable {
            name: name.clone(),
            source: Arc::new(source),
        }
    }

    /// Wraps a backend failure as [`Error::OutcomeUnknown`].
    ///
    /// ```
    /// use election_core::{ElectionName, Error};
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("jobs")?;
    /// // In a backend step: the write timed out, it may or may not have landed.
    /// let timeout = std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply in 2s");
    /// let err = Error::outcome_unknown(&name, timeout);
    /// assert!(matches!(err, Error::OutcomeUnknown { .. }));
    /// # Ok(()) }
    /// ```
    pub fn outcome_unknown(
        name: &ElectionName,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Error::OutcomeUnknown {
            name: name.clone(),
            source: Arc::new(source),
        }
    }

    /// Wraps damaged stored state as [`Error::Corrupt`].
    ///
    /// ```
    /// use election_core::{ElectionName, Error};
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let name = ElectionName::new("jobs")?;
    /// // In a backend step: the stored epoch cannot be read; hand out no term.
    /// let bad = "epoch record".parse::<u64>().map_err(|e| Error::corrupt(&name, e));
    /// assert!(bad.is_err_and(|e| e.is_permanent()));
    /// # Ok(()) }
    /// ```
    pub fn corrupt(name: &ElectionName, source: impl StdError + Send + Sync + 'static) -> Self {
        Error::Corrupt {
            name: name.clone(),
            source: Arc::new(source),
        }
    }

    /// True for errors that retrying cannot fix (configuration, corruption).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// match candidate.try_campaign().await {
    ///     Ok(term) => println!("won: {}", term.is_some()),
    ///     Err(e) if e.is_permanent() => return Err(e), // fix the configuration or the store
    ///     Err(e) => eprintln!("try again later: {e}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_permanent(&self) -> bool {
        matches!(self, Error::Config(_) | Error::Corrupt { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_chain_is_kept_not_repeated() {
        let name = ElectionName::new("jobs").unwrap();
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = Error::unavailable(&name, io);
        assert_eq!(
            err.to_string(),
            "election jobs: the backend is unavailable (nothing was won): denied"
        );
        // "denied" is in the message: the chain goes on below it (nothing).
        assert!(err.source().is_none());
        let cause = err.backend_error().expect("the backend's error kept");
        assert_eq!(cause.to_string(), "denied");
        assert!(!err.is_permanent());
        assert!(Error::from(ConfigError::EpochExhausted).is_permanent());
    }
}
