//! Settings of the PostgreSQL backend, validated: the lease timings and the
//! schema the election tables live in.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use election_core::ConfigError;
use election_sql::LeaseTimes;

/// The default lease TTL: 15 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// The default renewal interval: a third of the default TTL.
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);
/// The default bound of one request (statement) to the server: 2 s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The default schema of the election tables.
pub const DEFAULT_SCHEMA: &str = "election";
/// The longest schema name accepted (the notification channel
/// `election:<schema>` must stay within PostgreSQL's 63-byte identifiers).
pub const MAX_SCHEMA_LEN: usize = 40;

/// The settings of a [`PostgresElection`](crate::PostgresElection).
///
/// - `ttl`: how long a lease lasts without renewal. A contender takes over
///   only after it has seen no renewal for a full TTL on its own monotonic
///   clock.
/// - `renew_interval`: how often the holder renews.
/// - `request_timeout`: how long one request to the server may take (a
///   claim, a read); a claim or renewal that does not answer in time has an
///   unknown outcome.
/// - the safety margin is a tenth of the TTL: the holder counts its lease
///   as valid until `ttl - margin` after the instant *before* its last
///   successful renewal was sent, and reports the loss then.
/// - `schema`: the PostgreSQL schema of the election tables (default
///   `election`): lower-case ASCII letters, digits and `_`, not starting
///   with a digit or `pg_`, at most [`MAX_SCHEMA_LEN`] bytes.
///
/// Valid when `2 × renew_interval ≤ ttl − margin` (a renewal can fail once
/// and be retried before the lease runs out), `request_timeout ≤
/// renew_interval`, all are at least 1 ms, the TTL at most a day, and the
/// core's [`RenewalPolicy`](election_core::RenewalPolicy) accepts them.
/// The lease times (`ttl()`, `renew_interval()`, `margin()`, `validity()`)
/// are the shared SQL layer's [`LeaseTimes`], which the options
/// dereference to.
///
/// ```
/// use std::time::Duration;
/// use election_postgres::PostgresOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let fast = PostgresOptions::new(Duration::from_millis(900), Duration::from_millis(300))?
///     .with_schema("jobs_election")?;
/// assert_eq!(fast.margin(), Duration::from_millis(90));
/// assert_eq!(fast.schema(), "jobs_election");
/// assert!(PostgresOptions::new(Duration::from_secs(1), Duration::from_secs(1)).is_err());
/// assert!(PostgresOptions::default().with_schema("Robert'); DROP TABLE x;--").is_err());
/// # Ok(()) }
/// ```
///
/// The lease times, through the options (ADR 0080):
///
/// ```
/// use election_postgres::{DEFAULT_RENEW_INTERVAL, PostgresOptions};
///
/// let options = PostgresOptions::default();
/// assert_eq!(options.renew_interval(), DEFAULT_RENEW_INTERVAL);
/// // Room for one failed renewal and its retry:
/// assert!(options.renew_interval() * 2 <= options.validity());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The TTL and renewal interval (shared with every SQL backend).
    pub(crate) times: LeaseTimes,
    request_timeout: Duration,
    schema: Arc<str>,
}

impl Deref for PostgresOptions {
    type Target = LeaseTimes;

    fn deref(&self) -> &LeaseTimes {
        &self.times
    }
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            times: LeaseTimes::new(DEFAULT_TTL, DEFAULT_RENEW_INTERVAL),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            schema: DEFAULT_SCHEMA.into(),
        }
    }
}

/// Checks a schema name: see [`PostgresOptions`].
pub(crate) fn check_schema(schema: &str) -> Result<(), ConfigError> {
    let bad = |reason| ConfigError::BadName {
        what: "schema",
        value: schema.chars().take(64).collect(),
        reason,
    };
    let mut chars = schema.chars();
    match chars.next() {
        None => return Err(bad("is empty")),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => {
            return Err(bad("must start with a lower-case ASCII letter or '_'"));
        }
        Some(_) => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(bad(
            "may hold only lower-case ASCII letters, digits and '_'",
        ));
    }
    if schema.len() > MAX_SCHEMA_LEN {
        return Err(bad("is longer than 40 bytes"));
    }
    if schema.starts_with("pg_") {
        return Err(bad("must not start with 'pg_' (reserved by PostgreSQL)"));
    }
    Ok(())
}

impl PostgresOptions {
    /// `ttl` and `renew_interval`, with a request timeout of at most
    /// [`DEFAULT_REQUEST_TIMEOUT`] and at most half the renewal interval,
    /// in schema [`DEFAULT_SCHEMA`].
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_postgres::{DEFAULT_SCHEMA, PostgresOptions};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::new(Duration::from_secs(6), Duration::from_secs(2))?;
    /// assert_eq!(options.request_timeout(), Duration::from_secs(1)); // half the renewal interval
    /// assert_eq!(options.schema(), DEFAULT_SCHEMA);
    ///
    /// // No room to retry a failed renewal before the lease runs out: refused.
    /// assert!(PostgresOptions::new(Duration::from_secs(6), Duration::from_secs(3)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(ttl: Duration, renew_interval: Duration) -> Result<Self, ConfigError> {
        PostgresOptions {
            times: LeaseTimes::new(ttl, renew_interval),
            request_timeout: DEFAULT_REQUEST_TIMEOUT.min(renew_interval / 2),
            schema: DEFAULT_SCHEMA.into(),
        }
        .validated()
    }

    /// Sets the request timeout (validated again).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_postgres::PostgresOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_request_timeout(Duration::from_millis(500))?;
    /// assert_eq!(options.request_timeout(), Duration::from_millis(500));
    ///
    /// // Longer than the renewal interval: refused.
    /// let too_long = options.renew_interval() * 2;
    /// assert!(options.with_request_timeout(too_long).is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_request_timeout(self, request_timeout: Duration) -> Result<Self, ConfigError> {
        PostgresOptions {
            request_timeout,
            ..self
        }
        .validated()
    }

    /// Sets the schema of the election tables ([`ConfigError::BadName`]
    /// for a name that is not a plain lower-case identifier).
    ///
    /// ```
    /// use election_postgres::PostgresOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = PostgresOptions::default().with_schema("billing_election")?;
    /// assert_eq!(options.schema(), "billing_election");
    /// assert!(PostgresOptions::default().with_schema("Billing").is_err()); // upper case
    /// assert!(PostgresOptions::default().with_schema("pg_election").is_err()); // reserved
    /// # Ok(()) }
    /// ```
    pub fn with_schema(self, schema: &str) -> Result<Self, ConfigError> {
        check_schema(schema)?;
        Ok(PostgresOptions {
            schema: schema.into(),
            ..self
        })
    }

    fn validated(self) -> Result<Self, ConfigError> {
        self.times.check("request_timeout", self.request_timeout)?;
        if self.ttl() > Duration::from_secs(86_400) {
            return Err(ConfigError::BadSetting {
                setting: "ttl",
                reason: format!("{:?} is longer than a day", self.ttl()),
            });
        }
        // The core's renewal machine must accept them too.
        election_core::RenewalPolicy::new(self.validity(), self.renew_interval())?;
        Ok(self)
    }

    /// The bound of one request to the server.
    ///
    /// ```
    /// use election_postgres::{DEFAULT_REQUEST_TIMEOUT, PostgresOptions};
    ///
    /// assert_eq!(PostgresOptions::default().request_timeout(), DEFAULT_REQUEST_TIMEOUT);
    /// ```
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The schema of the election tables.
    ///
    /// ```
    /// use election_postgres::{DEFAULT_SCHEMA, PostgresOptions};
    ///
    /// assert_eq!(PostgresOptions::default().schema(), DEFAULT_SCHEMA);
    /// ```
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The times' own checks are `LeaseTimes::check`'s (tested in
    /// `election-sql`); here, the request bound, the longest TTL and the
    /// default schema.
    #[test]
    fn the_times_are_checked_with_the_request_timeout() {
        let s = Duration::from_secs;
        let d = PostgresOptions::default();
        assert!(d.clone().validated().is_ok());
        assert_eq!(d.schema(), "election");
        assert!(
            PostgresOptions::new(s(100_000), s(4)).is_err(),
            "over a day"
        );
        let options = PostgresOptions::new(s(10), s(4)).unwrap();
        assert_eq!(options.request_timeout(), DEFAULT_REQUEST_TIMEOUT);
        assert!(
            options.with_request_timeout(s(5)).is_err(),
            "above the renewal interval"
        );
    }

    #[test]
    fn schema_names() {
        for good in ["election", "_x", "a1_b2", &"a".repeat(40)] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1a",
            "A",
            "a-b",
            "a b",
            "a\"b",
            "pg_x",
            "é",
            &"a".repeat(41),
        ] {
            assert!(
                matches!(
                    check_schema(bad),
                    Err(ConfigError::BadName { what: "schema", .. })
                ),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn accepted_schema_names_need_no_quoting(s in "\\PC{0,50}") {
            if check_schema(&s).is_ok() {
                prop_assert!(s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
                prop_assert!(!s.is_empty() && s.len() <= MAX_SCHEMA_LEN);
            }
        }
    }
}
