//! [`Leader`]: who leads an election now, and [`LeaderValue`], what a
//! term publishes ([`Term::proclaim`](crate::Term::proclaim)).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::{ConfigError, Epoch, Identity};

/// What a term publishes while it leads (its address, a configuration
/// version), set by [`Term::proclaim`](crate::Term::proclaim) and shown by
/// every reader of the leader ([`Leader::value`]): one line of UTF-8 text
/// of at most [`LeaderValue::MAX_LEN`] bytes, without control characters
/// (ADR 0068). The empty string is a value (distinct from none).
///
/// ```
/// use election_core::{ConfigError, LeaderValue};
///
/// # fn main() -> Result<(), ConfigError> {
/// let value = LeaderValue::new("10.0.3.17:8443")?;
/// assert_eq!(value.as_str(), "10.0.3.17:8443");
/// assert!(matches!(
///     LeaderValue::new("x".repeat(LeaderValue::MAX_LEN + 1)),
///     Err(ConfigError::ValueTooLong { len: 1025, max: 1024 })
/// ));
/// assert!(LeaderValue::new("two\nlines").is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LeaderValue(Arc<str>);

impl LeaderValue {
    /// The largest value, in bytes of UTF-8: 1 KiB, enough for an address
    /// or a version and small enough for every backend's record (a NATS KV
    /// value, a file record, an SQL column) and for a renewal to carry it.
    pub const MAX_LEN: usize = 1024;

    /// Checks and wraps `value`: [`ConfigError::ValueTooLong`] above
    /// [`MAX_LEN`](LeaderValue::MAX_LEN) bytes, [`ConfigError::BadName`]
    /// (what: `"leader value"`) for a control character (a line break, a
    /// NUL, ...).
    ///
    /// ```
    /// use election_core::LeaderValue;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let v = LeaderValue::new("config v42")?;
    /// assert_eq!(v.to_string(), "config v42");
    /// # Ok(()) }
    /// ```
    pub fn new(value: impl AsRef<str>) -> Result<Self, ConfigError> {
        let value = value.as_ref();
        if value.len() > Self::MAX_LEN {
            return Err(ConfigError::ValueTooLong {
                len: value.len(),
                max: Self::MAX_LEN,
            });
        }
        if value.chars().any(char::is_control) {
            return Err(ConfigError::BadName {
                what: "leader value",
                value: value.chars().take(64).collect(),
                reason: "contains a control character (a value is one line of text)",
            });
        }
        Ok(LeaderValue(value.into()))
    }

    /// The value as text.
    ///
    /// ```
    /// use election_core::LeaderValue;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// assert_eq!(LeaderValue::new("v1")?.as_str(), "v1");
    /// # Ok(()) }
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for LeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for LeaderValue {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Who leads an election now, as [`Claim::leader`](crate::Claim::leader) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The identity of the holder.
    pub identity: Identity,
    /// The epoch of the holder's term.
    pub epoch: Epoch,
    /// The wall-clock time the term began (when the holder won the claim),
    /// if the backend knows it; `None` when it does not.
    ///
    /// For display only (logs, status pages). It comes from the wall clock
    /// of whichever process recorded it, which may be wrong or jump: never
    /// use it for lease arithmetic, ordering or fencing. Epochs order terms
    /// and each backend counts its leases on a monotonic clock.
    pub since: Option<SystemTime>,
    /// The wall-clock time of the holder's last renewal (or of its win, if
    /// it has not renewed since), as the holder's clock read it; `None`
    /// where the backend keeps none (the file backend's lock, NATS, whose
    /// server ages a dead holder's key out by itself, etcd, whose key goes
    /// with its lease). Display only, like [`since`](Leader::since).
    ///
    /// A backend that reports `None` frees a dead holder's term by itself,
    /// with no contender's campaign: a balanced lease set's membership
    /// relies on it and reaps only slots whose renewal it saw stop (ADR
    /// 0118).
    pub renewed: Option<SystemTime>,
    /// The TTL of the holder's lease: without a renewal for this long the
    /// lease has run out and a contender takes it over. `None` where
    /// [`renewed`](Leader::renewed) is `None`.
    pub ttl: Option<Duration>,
    /// The value the term published last
    /// ([`Term::proclaim`](crate::Term::proclaim)), or `None` if it
    /// published none (a term begins without one: a value never outlives
    /// the term that published it).
    pub value: Option<LeaderValue>,
}

impl Leader {
    /// When the holder's lease runs out if it does not renew again:
    /// [`renewed`](Leader::renewed) plus [`ttl`](Leader::ttl), on the
    /// holder's wall clock. Display only.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use election_core::{Epoch, Identity, Leader};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let renewed = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let leader = Leader {
    ///     identity: Identity::new("host-a/4711")?,
    ///     epoch: Epoch::new(7).ok_or("epoch")?,
    ///     since: None,
    ///     renewed: Some(renewed),
    ///     ttl: Some(Duration::from_secs(10)),
    ///     value: None,
    /// };
    /// assert_eq!(leader.expires(), Some(renewed + Duration::from_secs(10)));
    /// # Ok(()) }
    /// ```
    pub fn expires(&self) -> Option<SystemTime> {
        self.renewed?.checked_add(self.ttl?)
    }

    /// Whether the holder is presumed dead at `now` (a reader's wall
    /// clock): its lease ran out ([`expires`](Leader::expires) is before
    /// `now`) with no renewal recorded since. For display and monitoring
    /// only: it compares the reader's wall clock with the holder's, which
    /// may disagree by any amount, so a live holder can be presumed dead
    /// (or a dead one not yet) by a reader whose clock is off. No claim is
    /// ever decided by it: a contender takes a lease over only after its
    /// own monotonic clock saw no renewal for a full TTL. `false` where
    /// the backend keeps no renewal time.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use election_core::{Epoch, Identity, Leader};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let renewed = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let leader = Leader {
    ///     identity: Identity::new("host-a/4711")?,
    ///     epoch: Epoch::new(7).ok_or("epoch")?,
    ///     since: None,
    ///     renewed: Some(renewed),
    ///     ttl: Some(Duration::from_secs(10)),
    ///     value: None,
    /// };
    /// assert!(!leader.presumed_dead_at(renewed + Duration::from_secs(9)));
    /// assert!(leader.presumed_dead_at(renewed + Duration::from_secs(11)));
    /// // In a program: `leader.presumed_dead_at(std::time::SystemTime::now())`.
    /// # Ok(()) }
    /// ```
    pub fn presumed_dead_at(&self, now: SystemTime) -> bool {
        self.expires().is_some_and(|expires| expires < now)
    }

    /// Whether `other` shows what `self` shows to an observer: the same
    /// holder in the same term with the same [`value`](Leader::value).
    /// Renewals (and the display times) are not a change; a new term or a
    /// new value is. What every `observe` compares.
    ///
    /// ```
    /// use election_core::{Epoch, Identity, Leader, LeaderValue};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let a = Leader {
    ///     identity: Identity::new("host-a/4711")?,
    ///     epoch: Epoch::new(7).ok_or("epoch")?,
    ///     since: None,
    ///     renewed: None,
    ///     ttl: None,
    ///     value: None,
    /// };
    /// let proclaimed = Leader { value: Some(LeaderValue::new("10.0.3.17:8443")?), ..a.clone() };
    /// assert!(a.shows_same(&a.clone()));
    /// assert!(!a.shows_same(&proclaimed));
    /// # Ok(()) }
    /// ```
    pub fn shows_same(&self, other: &Leader) -> bool {
        self.identity == other.identity && self.epoch == other.epoch && self.value == other.value
    }
}
