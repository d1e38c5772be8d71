//! [`EtcdOptions`]: the lease's timing and where the keys live.

use std::time::Duration;

use election_core::ConfigError;

/// The default lease TTL: 15 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// The default key prefix: every key this crate writes begins with
/// `election/`.
pub const DEFAULT_PREFIX: &str = "election";

/// Settings of an [`EtcdElection`](crate::EtcdElection).
///
/// - `ttl`: the etcd lease's TTL, whole seconds. etcd deletes a holder's
///   key that long after the last keep-alive it received (or longer: a
///   server may raise a TTL below its minimum, and a new etcd leader
///   extends every lease).
/// - `renew_interval`: how often the holder sends a keep-alive (default a
///   third of the TTL).
/// - `request_timeout`: the bound on one request (default half the renew
///   interval, at most 2 s).
/// - `prefix`: the key prefix (default [`DEFAULT_PREFIX`]).
///
/// The holder counts its lease valid until `ttl - margin` (margin: a tenth
/// of the TTL) after the instant *before* its last keep-alive (or the
/// lease's grant) was sent, on its monotonic clock; never from the TTL
/// etcd reports. Valid when `ttl` is at least 1 s and a whole number of
/// seconds, `2 × renew_interval ≤ ttl − margin`, and
/// `0 < request_timeout ≤ renew_interval`.
///
/// ```
/// use std::time::Duration;
/// use election_etcd::EtcdOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let o = EtcdOptions::new(Duration::from_secs(3))?;
/// assert_eq!(o.renew_every(), Duration::from_secs(1));
/// assert!(EtcdOptions::new(Duration::from_millis(1500)).is_err()); // not whole seconds
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdOptions {
    ttl: Duration,
    renew_interval: Duration,
    request_timeout: Duration,
    prefix: String,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions::new(DEFAULT_TTL).expect("the defaults are valid")
    }
}

impl EtcdOptions {
    /// Options for a lease TTL of `ttl`, every other setting derived from it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_etcd::EtcdOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = EtcdOptions::new(Duration::from_secs(30))?;
    /// assert_eq!(options.renew_every(), Duration::from_secs(10)); // a third of the TTL
    /// assert_eq!(options.timeout(), Duration::from_secs(2)); // at most 2 s
    /// assert!(EtcdOptions::new(Duration::ZERO).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(ttl: Duration) -> Result<Self, ConfigError> {
        let renew_interval = ttl / 3;
        EtcdOptions {
            ttl,
            renew_interval,
            request_timeout: (renew_interval / 2).min(Duration::from_secs(2)),
            prefix: DEFAULT_PREFIX.to_owned(),
        }
        .validated()
    }

    /// Sets how often the holder renews its lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_etcd::EtcdOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = EtcdOptions::new(Duration::from_secs(10))?.renew_interval(Duration::from_secs(2))?;
    /// assert_eq!(options.renew_every(), Duration::from_secs(2));
    /// // The TTL must leave room for two renewals and the margin.
    /// assert!(EtcdOptions::new(Duration::from_secs(10))?.renew_interval(Duration::from_secs(5)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn renew_interval(mut self, every: Duration) -> Result<Self, ConfigError> {
        self.renew_interval = every;
        self.request_timeout = self.request_timeout.min(every);
        self.validated()
    }

    /// Sets the bound on one request to etcd.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_etcd::EtcdOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = EtcdOptions::default().request_timeout(Duration::from_millis(500))?;
    /// assert_eq!(options.timeout(), Duration::from_millis(500));
    /// assert!(EtcdOptions::default().request_timeout(Duration::ZERO).is_err());
    /// # Ok(()) }
    /// ```
    pub fn request_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.request_timeout = timeout;
        self.validated()
    }

    /// Sets the key prefix: 1 to 200 bytes without control characters;
    /// leading and trailing `/` are dropped.
    ///
    /// ```
    /// use election_etcd::EtcdOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = EtcdOptions::default().prefix("/apps/billing/")?;
    /// assert_eq!(options.key_prefix(), "apps/billing");
    /// assert!(EtcdOptions::default().prefix("/").is_err());
    /// # Ok(()) }
    /// ```
    pub fn prefix(mut self, prefix: &str) -> Result<Self, ConfigError> {
        self.prefix = prefix.trim_matches('/').to_owned();
        self.validated()
    }

    fn validated(self) -> Result<Self, ConfigError> {
        let bad =
            |setting: &'static str, reason: String| ConfigError::BadSetting { setting, reason };
        if self.prefix.is_empty()
            || self.prefix.len() > 200
            || self.prefix.chars().any(char::is_control)
        {
            return Err(bad(
                "prefix",
                format!(
                    "{:?} is not 1-200 bytes without control characters",
                    self.prefix
                ),
            ));
        }
        if self.ttl < Duration::from_secs(1) || self.ttl.subsec_nanos() != 0 {
            return Err(bad(
                "ttl",
                format!(
                    "{:?} is not a whole number of seconds of at least 1s (an etcd lease's TTL is \
                     in seconds)",
                    self.ttl
                ),
            ));
        }
        if self.renew_interval.is_zero() || self.renew_interval * 2 > self.ttl - self.margin() {
            return Err(bad(
                "renew_interval",
                format!(
                    "ttl {:?} must exceed twice the renew_interval {:?} plus a margin of a tenth \
                     of the ttl",
                    self.ttl, self.renew_interval
                ),
            ));
        }
        if self.request_timeout.is_zero() || self.request_timeout > self.renew_interval {
            return Err(bad(
                "request_timeout",
                format!(
                    "{:?} must be above zero and at most the renew_interval {:?}",
                    self.request_timeout, self.renew_interval
                ),
            ));
        }
        Ok(self)
    }

    /// The lease TTL.
    ///
    /// ```
    /// use election_etcd::{DEFAULT_TTL, EtcdOptions};
    ///
    /// assert_eq!(EtcdOptions::default().ttl(), DEFAULT_TTL);
    /// ```
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The renew interval.
    ///
    /// ```
    /// use election_etcd::EtcdOptions;
    ///
    /// let options = EtcdOptions::default();
    /// assert_eq!(options.renew_every(), options.ttl() / 3);
    /// ```
    pub fn renew_every(&self) -> Duration {
        self.renew_interval
    }

    /// The request timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_etcd::EtcdOptions;
    ///
    /// assert_eq!(EtcdOptions::default().timeout(), Duration::from_secs(2));
    /// ```
    pub fn timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The key prefix, without leading or trailing `/`.
    ///
    /// ```
    /// use election_etcd::{DEFAULT_PREFIX, EtcdOptions};
    ///
    /// assert_eq!(EtcdOptions::default().key_prefix(), DEFAULT_PREFIX);
    /// ```
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The safety margin: a tenth of the TTL.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_etcd::EtcdOptions;
    ///
    /// assert_eq!(EtcdOptions::default().margin(), Duration::from_millis(1500)); // of 15 s
    /// ```
    pub fn margin(&self) -> Duration {
        self.ttl / 10
    }

    /// How long after the instant before a grant or keep-alive was sent the
    /// holder counts its lease valid: `ttl - margin`.
    ///
    /// ```
    /// use election_etcd::EtcdOptions;
    ///
    /// let options = EtcdOptions::default();
    /// assert_eq!(options.validity(), options.ttl() - options.margin());
    /// assert!(options.renew_every() * 2 <= options.validity());
    /// ```
    pub fn validity(&self) -> Duration {
        self.ttl - self.margin()
    }

    /// The TTL in etcd's unit, whole seconds.
    pub(crate) fn ttl_secs(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn accepted_options_leave_room_for_two_renewals(ttl_s in 0u64..100, renew_ms in 1u64..100_000) {
            if let Ok(o) = EtcdOptions::new(Duration::from_secs(ttl_s))
                .and_then(|o| o.renew_interval(Duration::from_millis(renew_ms)))
            {
                prop_assert!(o.renew_every() * 2 <= o.validity());
                prop_assert!(o.timeout() <= o.renew_every());
                prop_assert!(o.validity() < o.ttl());
            }
        }
    }
}
