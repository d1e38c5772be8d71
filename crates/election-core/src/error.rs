//! Errors of the core, grouped by what the caller should do.

use std::error::Error as StdError;
use std::sync::Arc;

use crate::{ConfigError, ElectionName, Epoch, Identity, Leader, Source};

/// Why a term's lease reads lost: the backend took the claim away, or could
/// no longer prove that it still held it; or the holder ended the term
/// itself ([`Resigned`](LossReason::Resigned), [`Dropped`](LossReason::Dropped)).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LossReason {
    /// The lease ran out: it could not be renewed before the backend could
    /// grant it to another candidate.
    #[error("the lease expired before it could be renewed")]
    Expired,
    /// The backend shows another holder, or no claim of ours.
    #[error("the backend no longer shows this claim as held: {detail}")]
    Revoked {
        /// What the backend showed instead.
        detail: String,
    },
    /// The backend failed in a way that leaves the claim in doubt; in doubt,
    /// the claim counts as not held.
    #[error("the backend failed and the claim is in doubt")]
    Failed(#[source] Source),
    /// The holder ended the term itself: it began to resign (also a resign
    /// whose future was dropped). The lease reads lost from the moment the
    /// resign began, before the release was sent.
    #[error("the term ended: its holder resigned")]
    Resigned,
    /// The holder ended the term itself: it dropped the term (or the
    /// [`lead`](crate::Term::lead) future) without resigning. The lease
    /// reads lost from that moment, while the claim may still be held until
    /// the term's work has stopped.
    #[error("the term ended: its holder dropped it")]
    Dropped,
}

impl LossReason {
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
#[derive(Clone, Debug, thiserror::Error)]
#[error("term {epoch} of election {name} (held by {identity}) was lost")]
pub struct LeaseLost {
    /// The election.
    pub name: ElectionName,
    /// The identity that held the term.
    pub identity: Identity,
    /// The epoch of the lost term.
    pub epoch: Epoch,
    /// Why it was lost.
    #[source]
    pub reason: LossReason,
}

/// The error of every fallible operation of the core and of the backends'
/// [`Claim`](crate::Claim) steps.
///
/// Variants are grouped by what the caller should do; backend errors are
/// kept as the `source` so they can be inspected with
/// [`std::error::Error::source`] and downcast.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fix the configuration; retrying will not help.
    #[error("bad configuration")]
    Config(#[from] ConfigError),
    /// The term was lost: stop acting as leader.
    #[error(transparent)]
    Lost(#[from] LeaseLost),
    /// The caller does not hold the claim (any more): do not act as leader.
    #[error("election {name}: the claim is not held")]
    NotHeld {
        /// The election.
        name: ElectionName,
    },
    /// Another candidate holds the claim: route the work to it, or wait.
    /// `holder` names it when the backend knows (its identity and epoch).
    #[error("election {name}: held by {}", match holder { Some(l) => format!("{} in term {}", l.identity, l.epoch), None => "another candidate".to_owned() })]
    HeldElsewhere {
        /// The election (or the lease set's key).
        name: ElectionName,
        /// Who holds it, when known.
        holder: Option<Leader>,
    },
    /// The backend cannot be reached or failed; nothing was won. Retry later.
    #[error("election {name}: the backend is unavailable")]
    Unavailable {
        /// The election.
        name: ElectionName,
        /// What failed.
        #[source]
        source: Source,
    },
    /// A step may or may not have taken effect (e.g. a timed-out write).
    /// The claim counts as not held; the backend's own safety (lock, TTL)
    /// frees it if it was won.
    #[error("election {name}: the outcome of a step is unknown")]
    OutcomeUnknown {
        /// The election.
        name: ElectionName,
        /// What failed.
        #[source]
        source: Source,
    },
    /// The backend's stored state is damaged (e.g. a corrupt epoch file);
    /// an operator must repair it. No term is handed out, so no epoch is
    /// reused.
    #[error("election {name}: stored state is corrupt")]
    Corrupt {
        /// The election.
        name: ElectionName,
        /// What is damaged.
        #[source]
        source: Source,
    },
    /// Guarded work did not drain within the configured bound and was
    /// cancelled before the claim was released.
    #[error("election {name}: leader's work did not drain within {drain_timeout:?}")]
    DrainTimedOut {
        /// The election.
        name: ElectionName,
        /// The configured bound.
        drain_timeout: std::time::Duration,
    },
}

impl Error {
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
        assert_eq!(err.to_string(), "election jobs: the backend is unavailable");
        let src = err.source().expect("source kept");
        assert_eq!(src.to_string(), "denied");
        assert!(!err.is_permanent());
        assert!(Error::from(ConfigError::EpochExhausted).is_permanent());
    }
}
