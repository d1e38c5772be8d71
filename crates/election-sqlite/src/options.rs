//! Timing settings of the SQLite backend, validated.

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// The TTL and renewal interval (shared with every SQL backend).
    pub(crate) times: LeaseTimes,
    busy_timeout: Duration,
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

    /// The lease TTL.
    ///
    /// ```
    /// use election_sqlite::{DEFAULT_TTL, SqliteOptions};
    ///
    /// assert_eq!(SqliteOptions::default().ttl(), DEFAULT_TTL);
    /// ```
    pub fn ttl(&self) -> Duration {
        self.times.ttl()
    }

    /// The renewal interval.
    ///
    /// ```
    /// use election_sqlite::{DEFAULT_RENEW_INTERVAL, SqliteOptions};
    ///
    /// assert_eq!(SqliteOptions::default().renew_interval(), DEFAULT_RENEW_INTERVAL);
    /// ```
    pub fn renew_interval(&self) -> Duration {
        self.times.renew_interval()
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

    /// The safety margin: a tenth of the TTL.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_sqlite::SqliteOptions;
    ///
    /// assert_eq!(SqliteOptions::default().margin(), Duration::from_millis(1500)); // of 15 s
    /// ```
    pub fn margin(&self) -> Duration {
        self.times.margin()
    }

    /// How long after the instant before a successful claim or renewal was
    /// sent the holder counts its lease as valid: `ttl - margin`.
    ///
    /// ```
    /// use election_sqlite::SqliteOptions;
    ///
    /// let options = SqliteOptions::default();
    /// assert_eq!(options.validity(), options.ttl() - options.margin());
    /// // Room for one failed renewal and its retry:
    /// assert!(options.renew_interval() * 2 <= options.validity());
    /// ```
    pub fn validity(&self) -> Duration {
        self.times.validity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn defaults_are_valid() {
        let d = SqliteOptions::default();
        assert!(d.validated().is_ok());
        assert_eq!(d.margin(), Duration::from_millis(1500));
    }

    #[test]
    fn refuses_a_ttl_not_above_the_renew_interval() {
        let s = Duration::from_secs;
        assert!(SqliteOptions::new(s(10), s(10)).is_err());
        assert!(
            SqliteOptions::new(s(10), s(5)).is_err(),
            "no room for a margin"
        );
        assert!(SqliteOptions::new(s(10), s(4)).is_ok());
        assert!(SqliteOptions::new(Duration::ZERO, s(1)).is_err());
        assert!(SqliteOptions::new(s(10), Duration::ZERO).is_err());
        assert!(
            SqliteOptions::new(s(10), s(4))
                .unwrap()
                .with_busy_timeout(s(5))
                .is_err()
        );
    }

    proptest! {
        #[test]
        fn accepted_options_leave_room_for_one_retry(ttl_ms in 1u64..100_000, renew_ms in 1u64..100_000) {
            if let Ok(o) = SqliteOptions::new(Duration::from_millis(ttl_ms), Duration::from_millis(renew_ms)) {
                prop_assert!(o.renew_interval() * 2 <= o.validity());
                prop_assert!(o.busy_timeout() <= o.renew_interval());
                prop_assert!(o.validity() < o.ttl());
            }
        }
    }
}
