//! What a caller or a tool may do with an error: its [`Disposition`], with
//! a hint naming the fix ([`Class`]), given by the error itself
//! ([`Classify`]) and found in a chain by [`classify`] (ADR 0100).

use std::error::Error as StdError;

use crate::{ConfigError, Error, LeaseLost, LossReason, Source};

/// What a caller or a tool may do with an error. A tool maps it to its
/// own answer (an exit code, an HTTP status) in one place; the backend
/// that failed decides it, through [`Classify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Disposition {
    /// The store cannot be reached or failed in a way retrying can fix
    /// (a server down, a locked database, a full disk): retry later.
    Transient,
    /// A step may or may not have taken effect; the claim counts as not
    /// held. Retry later.
    OutcomeUnknown,
    /// Bad configuration or a store the backend cannot use (a bad
    /// setting, refused credentials, a directory on a network
    /// filesystem): retrying will not help; the hint names the fix.
    Permanent,
    /// The stored election state is damaged: an operator must repair it
    /// (never by deleting it: epochs would restart).
    Corrupt,
    /// Another candidate holds the claim, or the caller does not hold it:
    /// not elected.
    Conflict,
    /// The term was lost: stop acting as leader.
    Lost,
    /// None of the above (e.g. guarded work that did not drain in time).
    Other,
}

/// An error's [`Disposition`] and, where the one that failed knows it, a
/// hint naming the fix (one sentence, for a person).
///
/// ```
/// use election_core::{Class, Disposition};
///
/// let class = Class::new(Disposition::Permanent).hint("give this user write access to /srv/db");
/// assert_eq!(class.disposition, Disposition::Permanent);
/// assert_eq!(class.hint.as_deref(), Some("give this user write access to /srv/db"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Class {
    /// What to do with the error.
    pub disposition: Disposition,
    /// The fix, when known.
    pub hint: Option<String>,
}

impl Class {
    /// A class without a hint.
    ///
    /// ```
    /// use election_core::{Class, Disposition};
    ///
    /// assert_eq!(Class::new(Disposition::Transient).hint, None);
    /// ```
    pub fn new(disposition: Disposition) -> Self {
        Class {
            disposition,
            hint: None,
        }
    }

    /// This class with `hint`.
    ///
    /// ```
    /// use election_core::{Class, Disposition};
    ///
    /// let class = Class::new(Disposition::Transient).hint("free space, then try again");
    /// assert_eq!(class.hint.as_deref(), Some("free space, then try again"));
    /// ```
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// An error that says what may be done with it: the core's errors and
/// every backend's error implement it, so a tool needs no knowledge of a
/// backend to answer a failure.
///
/// ```
/// use election_core::{Classify, ConfigError, Disposition};
///
/// let e = ConfigError::EpochExhausted;
/// assert_eq!(e.class().disposition, Disposition::Permanent);
/// ```
pub trait Classify {
    /// The error's class: what to do with it, and the fix when known.
    ///
    /// ```
    /// use election_core::{Class, Classify, Disposition};
    ///
    /// /// An application's own error, classified for the same tools.
    /// #[derive(Debug)]
    /// struct Throttled;
    ///
    /// impl Classify for Throttled {
    ///     fn class(&self) -> Class {
    ///         Class::new(Disposition::Transient).hint("wait a minute, then try again")
    ///     }
    /// }
    ///
    /// assert_eq!(Throttled.class().disposition, Disposition::Transient);
    /// ```
    fn class(&self) -> Class;
}

/// How [`classify`] recognizes the errors of one crate in a chain of
/// `dyn Error`: [`probe`] of the crate's error type.
pub type Probe = for<'a> fn(&'a (dyn StdError + 'static)) -> Option<&'a dyn Classify>;

/// The [`Probe`] of error type `T`: `e` as a `&dyn Classify` if it is a `T`.
///
/// ```
/// use election_core::{Classify, ConfigError, Disposition, probe};
///
/// let e = ConfigError::EpochExhausted;
/// let found = probe::<ConfigError>(&e).map(|c| c.class().disposition);
/// assert_eq!(found, Some(Disposition::Permanent));
/// assert!(probe::<ConfigError>(&std::fmt::Error).is_none());
/// ```
pub fn probe<'a, T: Classify + StdError + 'static>(
    e: &'a (dyn StdError + 'static),
) -> Option<&'a dyn Classify> {
    e.downcast_ref::<T>().map(|t| t as &dyn Classify)
}

impl Classify for Error {
    fn class(&self) -> Class {
        Class::new(match self {
            Error::Config(_) => Disposition::Permanent,
            Error::Lost(_) => Disposition::Lost,
            Error::NotHeld { .. } | Error::HeldElsewhere { .. } => Disposition::Conflict,
            Error::Unavailable { .. } => Disposition::Transient,
            Error::OutcomeUnknown { .. } => Disposition::OutcomeUnknown,
            Error::Corrupt { .. } => Disposition::Corrupt,
            Error::DrainTimedOut { .. } => Disposition::Other,
        })
    }
}

impl Classify for ConfigError {
    fn class(&self) -> Class {
        Class::new(Disposition::Permanent)
    }
}

impl Classify for LeaseLost {
    fn class(&self) -> Class {
        Class::new(Disposition::Lost)
    }
}

impl Classify for LossReason {
    fn class(&self) -> Class {
        Class::new(Disposition::Lost)
    }
}

/// `e` itself, or the error inside if `e` is a shared [`Source`]: an `Arc`
/// is an error of its own whose `source()` skips the error it holds.
fn unwrapped<'a>(e: &'a (dyn StdError + 'static)) -> &'a (dyn StdError + 'static) {
    match e.downcast_ref::<Source>() {
        Some(inner) => &**inner,
        None => e,
    }
}

/// One of the core's own errors in a chain, and the error it names in
/// its message (whose `source()` it skips, ADR 0063).
fn core_error<'a>(
    e: &'a (dyn StdError + 'static),
) -> Option<(&'a dyn Classify, Option<&'a (dyn StdError + 'static)>)> {
    let held = |s: Option<&'a (dyn StdError + Send + Sync + 'static)>| {
        s.map(|s| s as &(dyn StdError + 'static))
    };
    if let Some(core) = e.downcast_ref::<Error>() {
        Some((core, held(core.backend_error())))
    } else if let Some(lost) = e.downcast_ref::<LeaseLost>() {
        Some((lost, held(lost.reason.backend_error())))
    } else if let Some(reason) = e.downcast_ref::<LossReason>() {
        Some((reason, held(reason.backend_error())))
    } else if let Some(config) = e.downcast_ref::<ConfigError>() {
        let source = match config {
            ConfigError::Location {
                source: Some(source),
                ..
            } => Some(&**source as &(dyn StdError + 'static)),
            _ => None,
        };
        Some((config, source))
    } else {
        None
    }
}

/// The class of `error`, found in its chain: the first error that `probes`
/// (a backend's, see [`probe`]) recognize classifies it. The core's own
/// errors on the way step aside for the backend's error they carry
/// ([`Error::backend_error`]), except a [`Conflict`](Disposition::Conflict)
/// or a [`Lost`](Disposition::Lost) term, which stays one whatever failed
/// below; with no backend's error in the chain, the first of the core's
/// errors classifies it. `None`: nothing in the chain classifies itself.
///
/// ```
/// use election_core::{ConfigError, Disposition, Error, ElectionName, classify};
///
/// # fn main() -> Result<(), ConfigError> {
/// let name = ElectionName::new("jobs")?;
/// let io = std::io::Error::other("connection refused");
/// let e = Error::unavailable(&name, io);
/// let class = classify(&e, &[]).expect("the core's own error");
/// assert_eq!(class.disposition, Disposition::Transient);
/// // A backend's probes find its error below the core's: here, a
/// // configuration error carried as the source of `Unavailable`.
/// let e = Error::unavailable(&name, ConfigError::EpochExhausted);
/// let class = classify(&e, &[election_core::probe::<ConfigError>]);
/// assert_eq!(class.map(|c| c.disposition), Some(Disposition::Permanent));
/// assert!(classify(&std::fmt::Error, &[]).is_none());
/// # Ok(()) }
/// ```
pub fn classify(error: &(dyn StdError + 'static), probes: &[Probe]) -> Option<Class> {
    let mut fallback = None;
    let mut next = Some(error);
    while let Some(e) = next.map(unwrapped) {
        if let Some(class) = probes.iter().find_map(|p| p(e)).map(Classify::class) {
            return Some(class);
        }
        next = match core_error(e) {
            Some((core, held)) => {
                let class = core.class();
                if matches!(class.disposition, Disposition::Conflict | Disposition::Lost) {
                    return Some(class);
                }
                fallback.get_or_insert(class);
                held.or_else(|| e.source())
            }
            None => e.source(),
        };
    }
    fallback
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ElectionName, Epoch, Identity};

    #[derive(Debug, thiserror::Error)]
    #[error("the disk is full")]
    struct Full;

    impl Classify for Full {
        fn class(&self) -> Class {
            Class::new(Disposition::Transient).hint("free space")
        }
    }

    #[test]
    fn the_backends_error_classifies_a_core_error_unless_the_term_is_lost() {
        let name = ElectionName::new("jobs").unwrap();
        let probes: &[Probe] = &[probe::<Full>];
        let e = Error::corrupt(&name, Full);
        let class = classify(&e, probes).unwrap();
        assert_eq!(class, Class::new(Disposition::Transient).hint("free space"));
        // Without the backend's probe: the core's grouping.
        assert_eq!(classify(&e, &[]).unwrap().disposition, Disposition::Corrupt);
        let lost = Error::Lost(LeaseLost {
            name: name.clone(),
            identity: Identity::new("a").unwrap(),
            epoch: Epoch::new(3).expect("an epoch"),
            reason: LossReason::Failed(std::sync::Arc::new(Full)),
        });
        assert_eq!(
            classify(&lost, probes).unwrap().disposition,
            Disposition::Lost
        );
        let held = Error::HeldElsewhere { name, holder: None };
        assert_eq!(
            classify(&held, probes).unwrap().disposition,
            Disposition::Conflict
        );
    }
}
