//! Timing settings of the SQLite backend, validated.

use std::ops::Deref;
use std::time::Duration;

use election_core::ConfigError;
use election_sql::LeaseTimes;

/// The default lease TTL: 15 s (see ADR 0006).
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// The default renewal interval: a third of the default TTL.
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);
/// The default SQLite busy timeout: 1 s.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(1);

/// The lease timings of a [`SqliteElection`](crate::SqliteElection).
///
/// - `ttl`: how long a lease lasts without renewal. A contender takes over
///   only after it has seen no renewal for a full TTL on its own monotonic
///   clock.
/// - `renew_interval`: how often the holder renews.
/// - `busy_timeout`: how long one statement waits for SQLite's write lock.
/// - the safety margin is a tenth of the TTL: the holder counts its lease
///   as valid until `ttl - margin` after the instant *before* its last
///   successful renewal was sent, and reports the loss then.
///
/// Valid when `2 × renew_interval ≤ ttl − margin` (a renewal can fail once
/// and be retried before the lease runs out), `busy_timeout ≤
/// renew_interval`, and all are at least 1 ms. Sub-second values work.
/// The lease times (`ttl()`, `renew_interval()`, `margin()`, `validity()`)
/// are the shared SQL layer's [`LeaseTimes`], which the options
/// dereference to.
///
/// ```
/// use std::time::Duration;
/// use election_sqlite::SqliteOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let fast = SqliteOptions::new(Duration::from_millis(900), Duration::from_millis(300))?;
/// assert_eq!(fast.margin(), Duration::from_millis(90));
/// assert!(SqliteOptions::new(Duration::from_secs(1), Duration::from_secs(1)).is_err());
/// # Ok(()) }
/// ```
///
/// The lease times, through the options (ADR 0080):
///
/// ```
/// use std::time::Duration;
///
/// use election_sqlite::{DEFAULT_TTL, SqliteOptions};
///
/// let options = SqliteOptions::default();
/// assert_eq!(options.ttl(), DEFAULT_TTL);
/// assert_eq!(options.margin(), Duration::from_millis(1500)); // a tenth of the TTL
/// assert_eq!(options.validity(), options.ttl() - options.margin());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The TTL and renewal interval (shared with every SQL backend).
    pub(crate) times: LeaseTimes,
    busy_timeout: Duration,
}

impl Deref for SqliteOptions {
    type Target = LeaseTimes;

    fn deref(&self) -> &LeaseTimes {
        &self.times
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            times: LeaseTimes::new(DEFAULT_TTL, DEFAULT_RENEW_INTERVAL),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }
}

impl SqliteOptions {
    /// `ttl` and `renew_interval`, with a busy timeout of at most 1 s and
    /// at most half the renewal interval.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_sqlite::SqliteOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = SqliteOptions::new(Duration::from_secs(6), Duration::from_secs(2))?;
    /// assert_eq!(options.busy_timeout(), Duration::from_secs(1));
    ///
    /// // No room to retry a failed renewal before the lease runs out: refused.
    /// assert!(SqliteOptions::new(Duration::from_secs(6), Duration::from_secs(3)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(ttl: Duration, renew_interval: Duration) -> Result<Self, ConfigError> {
        let busy_timeout = DEFAULT_BUSY_TIMEOUT.min(renew_interval / 2);
        SqliteOptions {
            times: LeaseTimes::new(ttl, renew_interval),
            busy_timeout,
        }
        .validated()
    }

    /// Sets the busy timeout (validated again).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_sqlite::SqliteOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = SqliteOptions::default().with_busy_timeout(Duration::from_millis(250))?;
    /// assert_eq!(options.busy_timeout(), Duration::from_millis(250));
    ///
    /// // Longer than the renewal interval: refused.
    /// assert!(options.with_busy_timeout(options.renew_interval() * 2).is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_busy_timeout(self, busy_timeout: Duration) -> Result<Self, ConfigError> {
        SqliteOptions {
            busy_timeout,
            ..self
        }
        .validated()
    }

    fn validated(self) -> Result<Self, ConfigError> {
        self.times.check("busy_timeout", self.busy_timeout)?;
        Ok(self)
    }

    /// The busy timeout.
    ///
    /// ```
    /// use election_sqlite::{DEFAULT_BUSY_TIMEOUT, SqliteOptions};
    ///
    /// assert_eq!(SqliteOptions::default().busy_timeout(), DEFAULT_BUSY_TIMEOUT);
    /// ```
    pub fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The times' own checks are `LeaseTimes::check`'s (tested in
    /// `election-sql`); here, that the options run them with the busy
    /// timeout as the request bound.
    #[test]
    fn the_times_are_checked_with_the_busy_timeout() {
        let s = Duration::from_secs;
        assert!(SqliteOptions::default().validated().is_ok());
        assert!(
            SqliteOptions::new(s(10), s(5)).is_err(),
            "no room for a margin"
        );
        let options = SqliteOptions::new(s(10), s(4)).unwrap();
        assert_eq!(options.busy_timeout(), DEFAULT_BUSY_TIMEOUT);
        assert!(
            options.with_busy_timeout(s(5)).is_err(),
            "above the renewal interval"
        );
    }

    proptest! {
        /// `new` picks a busy timeout the times accept whenever they
        /// accept a bound of at most half the renewal interval.
        #[test]
        fn new_picks_an_accepted_busy_timeout(ttl_ms in 1u64..100_000, renew_ms in 2u64..100_000) {
            let times = LeaseTimes::new(Duration::from_millis(ttl_ms), Duration::from_millis(renew_ms));
            let half = times.renew_interval() / 2;
            prop_assert_eq!(
                SqliteOptions::new(times.ttl(), times.renew_interval()).is_ok(),
                times.check("busy_timeout", half.min(DEFAULT_BUSY_TIMEOUT)).is_ok()
            );
        }
    }
}
