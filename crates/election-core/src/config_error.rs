//! [`ConfigError`]: bad configuration, and the [`Source`] errors carry.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

/// A shareable error source, as backends hand them to the core.
pub type Source = Arc<dyn StdError + Send + Sync + 'static>;

/// Bad configuration: fix the configuration; retrying will not help.
///
/// A [`Location`](ConfigError::Location) with a `source` shows the
/// source's message as its `reason` and goes on with the source's own
/// source, so a chain printer shows each message once (ADR 0063).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// A name or identity cannot be used.
    BadName {
        /// What was named: `"election name"`, `"identity"`, ...
        what: &'static str,
        /// The value given (cut to 64 characters).
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A duration or count is out of range.
    BadSetting {
        /// The setting, e.g. `"poll_interval"`.
        setting: &'static str,
        /// Why it was refused, with the values involved.
        reason: String,
    },
    /// The backend refuses the place it was pointed at (a network
    /// filesystem, a path that is not a directory, ...).
    Location {
        /// What is wrong and what to do (the `source`'s message, when
        /// there is one).
        reason: String,
        /// The underlying error, if any (its message is the `reason`;
        /// `source()` goes on below it).
        source: Option<Source>,
    },
    /// Every epoch up to [`Epoch::MAX`](crate::Epoch::MAX) (`i64::MAX`) has
    /// been handed out, or the backend produced one above it.
    EpochExhausted,
    /// A name is used in another shape than asked: without slots while
    /// slots were asked for (or the other way round), or with more slots
    /// ([`Slots`](crate::Slots), ADR 0062). Detected by reading who holds
    /// the name and its slots, so only while the other use holds one.
    SlotsMismatch {
        /// The name.
        name: String,
        /// The number of slots asked for; `None`: asked without slots.
        asked: Option<u32>,
        /// What was seen held, and by whom.
        seen: String,
    },
    /// A leader value ([`LeaderValue`](crate::LeaderValue)) longer than
    /// the bound.
    ValueTooLong {
        /// Its length in bytes.
        len: usize,
        /// The bound, [`LeaderValue::MAX_LEN`](crate::LeaderValue::MAX_LEN).
        max: usize,
    },
    /// The backend does not offer this operation (a custom backend that
    /// does not implement it).
    Unsupported {
        /// The operation, e.g. `"proclaim"`.
        what: &'static str,
        /// The backend ([`Claim::backend`](crate::Claim::backend)).
        backend: &'static str,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::BadName {
                what,
                value,
                reason,
            } => write!(f, "bad {what} {value:?}: {reason}"),
            ConfigError::BadSetting { setting, reason } => {
                write!(f, "bad setting {setting}: {reason}")
            }
            ConfigError::Location { reason, .. } => write!(f, "unusable location: {reason}"),
            ConfigError::EpochExhausted => write!(
                f,
                "the epoch counter is exhausted: every epoch up to {} was handed out, so no new \
                 term can begin",
                i64::MAX
            ),
            ConfigError::SlotsMismatch { name, asked, seen } => match asked {
                Some(n) => write!(
                    f,
                    "election {name} is used otherwise than with {n} slots: {seen}"
                ),
                None => write!(
                    f,
                    "election {name} is used otherwise than without slots: {seen}"
                ),
            },
            ConfigError::ValueTooLong { len, max } => write!(
                f,
                "the leader value is {len} bytes long, more than the {max} a term may publish"
            ),
            ConfigError::Unsupported { what, backend } => {
                write!(f, "the {backend} backend does not support {what}")
            }
        }
    }
}

impl StdError for ConfigError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ConfigError::Location {
                source: Some(source),
                ..
            } => source.source(),
            _ => None,
        }
    }
}

/// One hour: the bound of the core's waits and intervals.
pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// `value` of `setting` if `ok`, else [`ConfigError::BadSetting`] saying
/// "`value` is `says`".
pub(crate) fn check_setting(
    setting: &'static str,
    value: Duration,
    ok: bool,
    says: &str,
) -> Result<Duration, ConfigError> {
    match ok {
        true => Ok(value),
        false => Err(ConfigError::BadSetting {
            setting,
            reason: format!("{value:?} is {says}"),
        }),
    }
}
