//! [`ConfigError`]: bad configuration, and the [`Source`] errors carry.

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::Duration;

/// A shareable error source, as backends hand them to the core.
pub type Source = Arc<dyn StdError + Send + Sync + 'static>;

/// Bad configuration: fix the configuration; retrying will not help.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A name or identity cannot be used.
    #[error("bad {what} {value:?}: {reason}")]
    BadName {
        /// What was named: `"election name"`, `"identity"`, ...
        what: &'static str,
        /// The value given (cut to 64 characters).
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A duration or count is out of range.
    #[error("bad setting {setting}: {reason}")]
    BadSetting {
        /// The setting, e.g. `"poll_interval"`.
        setting: &'static str,
        /// Why it was refused, with the values involved.
        reason: String,
    },
    /// The backend refuses the place it was pointed at (a network
    /// filesystem, a path that is not a directory, ...).
    #[error("unusable location: {reason}")]
    Location {
        /// What is wrong and what to do.
        reason: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Source>,
    },
    /// Every epoch up to [`Epoch::MAX`](crate::Epoch::MAX) (`i64::MAX`) has
    /// been handed out, or the backend produced one above it.
    #[error("the epoch counter is exhausted")]
    EpochExhausted,
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
