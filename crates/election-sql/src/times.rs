//! The lease times every SQL backend's options share: the TTL and the
//! renewal interval, with the margin and validity derived from them and
//! their checks ([`check_times`]).

use std::time::Duration;

use election_core::ConfigError;

use crate::lease_row::{check_times, margin, ttl_ms, validity};

/// The TTL and renewal interval of a SQL backend's leases. A backend's
/// options (`SqliteOptions`, `PostgresOptions`) hold one, checked with
/// the backend's request bound ([`check`](Self::check)), and dereference
/// to it: `options.validity()` is this type's.
///
/// ```
/// use std::time::Duration;
/// use election_sql::LeaseTimes;
///
/// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
/// assert_eq!(times.margin(), Duration::from_millis(1500)); // a tenth of the TTL
/// assert_eq!(times.validity(), times.ttl() - times.margin());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimes {
    ttl: Duration,
    renew_interval: Duration,
}

impl LeaseTimes {
    /// `ttl` and `renew_interval`, not yet checked ([`check`](Self::check)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// const TIMES: LeaseTimes = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert!(TIMES.check("busy_timeout", Duration::from_secs(1)).is_ok());
    /// ```
    pub const fn new(ttl: Duration, renew_interval: Duration) -> Self {
        LeaseTimes {
            ttl,
            renew_interval,
        }
    }

    /// Checks these times with the backend's request bound `timeout`
    /// (named `timeout_setting`): [`check_times`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::BadSetting`] naming the first setting that fails.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let s = Duration::from_secs;
    /// assert!(LeaseTimes::new(s(10), s(4)).check("busy_timeout", s(1)).is_ok());
    /// assert!(LeaseTimes::new(s(10), s(5)).check("busy_timeout", s(1)).is_err()); // no room for a margin
    /// ```
    pub fn check(
        &self,
        timeout_setting: &'static str,
        timeout: Duration,
    ) -> Result<(), ConfigError> {
        check_times(self.ttl, self.renew_interval, timeout_setting, timeout)
    }

    /// How long a lease lasts without renewal.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert_eq!(times.ttl(), Duration::from_secs(15));
    /// ```
    pub const fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often a held lease is renewed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert_eq!(times.renew_interval(), Duration::from_secs(5));
    /// ```
    pub const fn renew_interval(&self) -> Duration {
        self.renew_interval
    }

    /// The safety margin: a tenth of the TTL ([`margin`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert_eq!(times.margin(), Duration::from_millis(1500)); // of 15 s
    /// ```
    pub fn margin(&self) -> Duration {
        margin(self.ttl)
    }

    /// How long after the instant before a successful claim or renewal was
    /// sent the holder counts its lease as valid: `ttl - margin`
    /// ([`validity`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert_eq!(times.validity(), times.ttl() - times.margin());
    /// // Room for one failed renewal and its retry:
    /// assert!(times.renew_interval() * 2 <= times.validity());
    /// ```
    pub fn validity(&self) -> Duration {
        validity(self.ttl)
    }

    /// The TTL in milliseconds as stored ([`ttl_ms`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_sql::LeaseTimes;
    ///
    /// let times = LeaseTimes::new(Duration::from_secs(15), Duration::from_secs(5));
    /// assert_eq!(times.ttl_ms(), 15_000); // the lease row's ttl_ms column
    /// ```
    pub fn ttl_ms(&self) -> i64 {
        ttl_ms(self.ttl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Times accepted with a request bound leave room for one failed
        /// renewal and its retry within the validity, the bound fits in a
        /// renewal interval, and the margin is never zero: every SQL
        /// backend's options are checked with these.
        #[test]
        fn accepted_times_leave_room_for_one_retry(
            ttl_ms in 1u64..100_000,
            renew_ms in 1u64..100_000,
            timeout_ms in 1u64..100_000,
        ) {
            let times = LeaseTimes::new(Duration::from_millis(ttl_ms), Duration::from_millis(renew_ms));
            let timeout = Duration::from_millis(timeout_ms);
            if times.check("request_timeout", timeout).is_ok() {
                prop_assert!(times.renew_interval() * 2 <= times.validity());
                prop_assert!(timeout <= times.renew_interval());
                prop_assert!(times.validity() < times.ttl());
            }
        }
    }
}
