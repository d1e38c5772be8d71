//! Settings of the NATS backend, validated.

use std::time::Duration;

use election_core::ConfigError;

/// The default bucket name: the bucket of every election that names none,
/// unless it holds elections of another TTL (see [`bucket_for_ttl`]).
pub const DEFAULT_BUCKET: &str = "elections";

/// The bucket of an election with lease TTL `ttl` that names none
/// ([`NatsOptions::bucket`] not called; `elect` without `?bucket=`) when
/// [`DEFAULT_BUCKET`] exists with another max age: `elections-ttl-<ttl>`.
/// A bucket's max age is the TTL of every lease in it, so each TTL needs a
/// bucket of its own; this way elections with different TTLs coexist on
/// one server without naming buckets (ADR 0064). When the election opens:
/// [`DEFAULT_BUCKET`] if it does not exist yet (it is created with this
/// TTL) or exists with this TTL as its max age, else this bucket. Every
/// candidate of one election must use the same TTL, as the same name.
///
/// ```
/// use std::time::Duration;
/// use election_nats::bucket_for_ttl;
///
/// assert_eq!(bucket_for_ttl(Duration::from_secs(3)), "elections-ttl-3s");
/// assert_eq!(bucket_for_ttl(Duration::from_millis(1500)), "elections-ttl-1500ms");
/// ```
pub fn bucket_for_ttl(ttl: Duration) -> String {
    let ms = ttl.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{DEFAULT_BUCKET}-ttl-{}s", ms / 1000)
    } else {
        format!("{DEFAULT_BUCKET}-ttl-{ms}ms")
    }
}
/// The default lease TTL (the bucket's max age): 15 s.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// Settings of a [`NatsElection`](crate::NatsElection).
///
/// - `ttl`: the bucket's max age. A lease lives that long after its last
///   renewal as the server saw it, then the server removes it.
/// - `renew_interval`: how often the holder renews (default a third of
///   the TTL).
/// - `request_timeout`: the bound on one KV request (default half the
///   renew interval, at most 2 s).
/// - `failover_grace`: after winning a claim, unless the vacancy was a
///   clean release (a resign) this process saw, how long the new term waits
///   before it begins (default a third of the TTL; see ADRs 0007, 0015).
///   An expiry, a key with no entry at all (also in a fresh bucket) or a
///   vacancy of unknown origin all get it. Meanwhile the key names the
///   winner with a pending mark: [`NatsElection::holder`](crate::NatsElection::holder)
///   shows it as pending, not leading (it may never lead: a loss or a
///   cancel during the grace gives the key up).
/// - `single_replica_ok`: silences the warning logged when an R1 bucket is
///   opened (see [`single_replica_ok`](NatsOptions::single_replica_ok)).
/// - `replicas`: the bucket's replicas (1, or 3 on a cluster).
/// - `adopt_own`: whether a candidate that finds a live key holding its
///   own identity (a restarted process) takes it over at once, with a new,
///   higher epoch. Off by default: identities must then be unique per
///   process.
///
/// The holder counts its lease valid until `ttl - margin` (margin: a tenth
/// of the TTL) after the instant before its last renewal was sent. Valid
/// when `ttl ≥ 1 s`, `2 × renew_interval ≤ ttl − margin`,
/// `request_timeout ≤ renew_interval`, `failover_grace ≤ renew_interval`.
///
/// ```
/// use std::time::Duration;
/// use election_nats::NatsOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let o = NatsOptions::new(Duration::from_secs(3))?;
/// assert_eq!(o.renew_every(), Duration::from_secs(1));
/// assert!(NatsOptions::new(Duration::from_millis(500)).is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsOptions {
    bucket: String,
    /// The bucket was named ([`NatsOptions::bucket`]); else it is the
    /// TTL's ([`bucket_for_ttl`]).
    bucket_named: bool,
    ttl: Duration,
    renew_interval: Duration,
    request_timeout: Duration,
    failover_grace: Duration,
    replicas: usize,
    adopt_own: bool,
    observer: bool,
    single_replica_ok: bool,
}

impl Default for NatsOptions {
    fn default() -> Self {
        NatsOptions::new(DEFAULT_TTL).expect("the defaults are valid")
    }
}

impl NatsOptions {
    /// Options for a lease TTL of `ttl`, every other setting derived from it.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = NatsOptions::new(Duration::from_secs(30))?;
    /// assert_eq!(options.renew_every(), Duration::from_secs(10)); // a third of the TTL
    /// assert_eq!(options.grace(), Duration::from_secs(10));
    /// assert_eq!(options.timeout(), Duration::from_secs(2)); // at most 2 s
    ///
    /// assert!(NatsOptions::new(Duration::from_millis(500)).is_err()); // below 1 s
    /// # Ok(()) }
    /// ```
    pub fn new(ttl: Duration) -> Result<Self, ConfigError> {
        let renew_interval = ttl / 3;
        NatsOptions {
            bucket: DEFAULT_BUCKET.to_owned(),
            bucket_named: false,
            ttl,
            renew_interval,
            request_timeout: (renew_interval / 2).min(Duration::from_secs(2)),
            failover_grace: ttl / 3,
            replicas: 1,
            adopt_own: false,
            observer: false,
            single_replica_ok: false,
        }
        .validated()
    }

    /// Sets the bucket name (letters, digits, `-` and `_`).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = NatsOptions::default().bucket("billing-elections")?;
    /// assert_eq!(options.bucket_name(), "billing-elections");
    /// assert!(NatsOptions::default().bucket("no spaces").is_err());
    /// # Ok(()) }
    /// ```
    pub fn bucket(mut self, bucket: impl Into<String>) -> Result<Self, ConfigError> {
        self.bucket = bucket.into();
        self.bucket_named = true;
        self.validated()
    }

    /// Whether the bucket was named ([`NatsOptions::bucket`]); if not, it
    /// is resolved when the election opens: [`DEFAULT_BUCKET`], or the
    /// TTL's own if that one holds another TTL ([`bucket_for_ttl`]).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// assert!(!NatsOptions::default().is_bucket_named());
    /// assert!(NatsOptions::default().bucket("billing")?.is_bucket_named());
    /// # Ok(()) }
    /// ```
    pub fn is_bucket_named(&self) -> bool {
        self.bucket_named
    }

    /// The bucket as resolved on opening (an unnamed one: see
    /// [`bucket_for_ttl`]); still not named.
    pub(crate) fn resolved(mut self, bucket: String) -> Self {
        self.bucket = bucket;
        self
    }

    /// Sets the renewal interval.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // The failover grace may not exceed the renew interval: lower it first.
    /// let options = NatsOptions::default()
    ///     .failover_grace(Duration::from_secs(4))?
    ///     .renew_interval(Duration::from_secs(4))?;
    /// assert_eq!(options.renew_every(), Duration::from_secs(4));
    ///
    /// // Two renewals must fit in the validity (15 s - 1.5 s): 7 s does not.
    /// assert!(NatsOptions::default().renew_interval(Duration::from_secs(7)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn renew_interval(mut self, every: Duration) -> Result<Self, ConfigError> {
        self.renew_interval = every;
        self.request_timeout = self.request_timeout.min(every);
        self.validated()
    }

    /// Sets the bound on one KV request.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = NatsOptions::default().request_timeout(Duration::from_millis(500))?;
    /// assert_eq!(options.timeout(), Duration::from_millis(500));
    ///
    /// // Above the renew interval (5 s): refused.
    /// assert!(NatsOptions::default().request_timeout(Duration::from_secs(6)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn request_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        self.request_timeout = timeout;
        self.validated()
    }

    /// Sets the failover grace.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = NatsOptions::default().failover_grace(Duration::from_secs(2))?;
    /// assert_eq!(options.grace(), Duration::from_secs(2));
    ///
    /// // Above the renew interval (5 s): refused.
    /// assert!(NatsOptions::default().failover_grace(Duration::from_secs(6)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn failover_grace(mut self, grace: Duration) -> Result<Self, ConfigError> {
        self.failover_grace = grace;
        self.validated()
    }

    /// Sets the bucket's replicas (1 to 5).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // An R3 bucket, on a cluster of at least three servers:
    /// let options = NatsOptions::default().replicas(3)?;
    /// assert_eq!(options.replica_count(), 3);
    /// assert!(NatsOptions::default().replicas(0).is_err());
    /// # Ok(()) }
    /// ```
    pub fn replicas(mut self, replicas: usize) -> Result<Self, ConfigError> {
        self.replicas = replicas;
        self.validated()
    }

    /// Lets a restarted process take over a live key holding its own
    /// identity (with a new, higher epoch).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// // Each process restarts with the same identity (e.g. a StatefulSet pod name):
    /// let options = NatsOptions::default().adopt_own(true);
    /// assert!(options.adopts_own());
    /// ```
    pub fn adopt_own(mut self, adopt: bool) -> Self {
        self.adopt_own = adopt;
        self
    }

    /// For processes that only read (`leader`, `observe`): accept an
    /// existing bucket whatever its max age (the TTL its candidates use),
    /// and never create it (a missing bucket is [`Error::NoBucket`](crate::Error::NoBucket)).
    /// Such an election refuses to make claims
    /// ([`NatsElection::claim`](crate::NatsElection::claim) is a
    /// configuration error): its TTL may not be the bucket's.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// // For `leader`/`observe` only: any bucket TTL, never creates the bucket.
    /// let options = NatsOptions::default().observer(true);
    /// assert!(options.is_observer());
    /// ```
    pub fn observer(mut self, observer: bool) -> Self {
        self.observer = observer;
        self
    }

    /// Says that a single-replica (R1) bucket is acceptable here, which
    /// silences the warning logged when one is opened.
    ///
    /// A nats-server acknowledges a write once it is in the operating
    /// system's page cache and syncs to disk every `sync_interval` (2
    /// minutes by default). If the host crashes or loses power, an R1
    /// bucket loses the writes since the last sync: later claims then
    /// reuse their revisions, so **two terms can get the same epoch** and a
    /// fence accepts both. No client can notice this afterwards. Say `true`
    /// only if the server runs with `jetstream { sync_interval: always }`
    /// (every write is synced before it is acknowledged), or if a repeated
    /// epoch after a host crash is acceptable (tests, development). An R3
    /// bucket on a cluster keeps every acknowledged write while a majority
    /// of its nodes survive. A killed server *process* loses nothing either
    /// way.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// // The server runs with `jetstream { sync_interval: always }`:
    /// let options = NatsOptions::default().single_replica_ok(true);
    /// assert!(options.is_single_replica_ok());
    /// ```
    pub fn single_replica_ok(mut self, ok: bool) -> Self {
        self.single_replica_ok = ok;
        self
    }

    /// Whether a single-replica bucket was accepted (see
    /// [`single_replica_ok`](NatsOptions::single_replica_ok)).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// assert!(!NatsOptions::default().is_single_replica_ok()); // warned about by default
    /// ```
    pub fn is_single_replica_ok(&self) -> bool {
        self.single_replica_ok
    }

    /// Whether this is an observer's options (see
    /// [`observer`](NatsOptions::observer)).
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// assert!(!NatsOptions::default().is_observer());
    /// assert!(NatsOptions::default().observer(true).is_observer());
    /// ```
    pub fn is_observer(&self) -> bool {
        self.observer
    }

    fn validated(self) -> Result<Self, ConfigError> {
        let bad =
            |setting: &'static str, reason: String| ConfigError::BadSetting { setting, reason };
        if self.bucket.is_empty()
            || self.bucket.len() > 64
            || !self
                .bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad(
                "bucket",
                format!("{:?} is not 1-64 letters, digits, - or _", self.bucket),
            ));
        }
        if self.ttl < Duration::from_secs(1) {
            return Err(bad(
                "ttl",
                format!(
                    "{:?} is below 1s (the server's marker granularity)",
                    self.ttl
                ),
            ));
        }
        if self.renew_interval.is_zero() || self.renew_interval * 2 > self.ttl - self.margin() {
            return Err(bad(
                "renew_interval",
                format!(
                    "ttl {:?} must exceed twice the renew_interval {:?} plus a margin of a tenth of the ttl",
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
        if self.failover_grace > self.renew_interval {
            return Err(bad(
                "failover_grace",
                format!(
                    "{:?} is above the renew_interval {:?} (the new term must still be valid after it)",
                    self.failover_grace, self.renew_interval
                ),
            ));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(bad("replicas", format!("{} is not 1 to 5", self.replicas)));
        }
        Ok(self)
    }

    /// The bucket name.
    ///
    /// ```
    /// use election_nats::{DEFAULT_BUCKET, NatsOptions};
    ///
    /// assert_eq!(NatsOptions::default().bucket_name(), DEFAULT_BUCKET);
    /// ```
    pub fn bucket_name(&self) -> &str {
        &self.bucket
    }
    /// The lease TTL (the bucket's max age).
    ///
    /// ```
    /// use election_nats::{DEFAULT_TTL, NatsOptions};
    ///
    /// assert_eq!(NatsOptions::default().ttl(), DEFAULT_TTL);
    /// ```
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// The renew interval.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// let options = NatsOptions::default();
    /// assert_eq!(options.renew_every(), options.ttl() / 3);
    /// ```
    pub fn renew_every(&self) -> Duration {
        self.renew_interval
    }
    /// The request timeout.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// assert_eq!(NatsOptions::default().timeout(), Duration::from_secs(2));
    /// ```
    pub fn timeout(&self) -> Duration {
        self.request_timeout
    }
    /// The failover grace.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// let options = NatsOptions::default();
    /// assert_eq!(options.grace(), options.ttl() / 3);
    /// ```
    pub fn grace(&self) -> Duration {
        self.failover_grace
    }
    /// The bucket's replicas.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// assert_eq!(NatsOptions::default().replica_count(), 1);
    /// ```
    pub fn replica_count(&self) -> usize {
        self.replicas
    }
    /// Whether own identities are adopted.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// assert!(!NatsOptions::default().adopts_own());
    /// ```
    pub fn adopts_own(&self) -> bool {
        self.adopt_own
    }
    /// The safety margin: a tenth of the TTL.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_nats::NatsOptions;
    ///
    /// assert_eq!(NatsOptions::default().margin(), Duration::from_millis(1500)); // of 15 s
    /// ```
    pub fn margin(&self) -> Duration {
        self.ttl / 10
    }
    /// How long after the instant before a successful claim or renewal was
    /// sent the holder counts its lease valid: `ttl - margin`.
    ///
    /// ```
    /// use election_nats::NatsOptions;
    ///
    /// let options = NatsOptions::default();
    /// assert_eq!(options.validity(), options.ttl() - options.margin());
    /// assert!(options.renew_every() * 2 <= options.validity());
    /// ```
    pub fn validity(&self) -> Duration {
        self.ttl - self.margin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn defaults_and_refusals() {
        let d = NatsOptions::default();
        assert_eq!(
            (d.ttl(), d.renew_every(), d.grace()),
            (
                Duration::from_secs(15),
                Duration::from_secs(5),
                Duration::from_secs(5)
            )
        );
        assert!(
            NatsOptions::new(Duration::from_secs(3))
                .unwrap()
                .renew_interval(Duration::from_secs(2))
                .is_err()
        );
        assert!(d.clone().bucket("bad.name").is_err());
        assert!(d.clone().bucket("").is_err());
        assert!(d.clone().replicas(0).is_err());
        assert!(d.clone().failover_grace(Duration::from_secs(60)).is_err());
        assert!(d.clone().request_timeout(Duration::from_secs(6)).is_err());
    }

    proptest! {
        #[test]
        fn accepted_options_leave_room_for_a_retry(ttl_ms in 0u64..100_000, renew_ms in 1u64..100_000) {
            if let Ok(o) = NatsOptions::new(Duration::from_millis(ttl_ms)).and_then(|o| o.renew_interval(Duration::from_millis(renew_ms))) {
                prop_assert!(o.renew_every() * 2 <= o.validity());
                prop_assert!(o.timeout() <= o.renew_every());
            }
        }
    }
}
