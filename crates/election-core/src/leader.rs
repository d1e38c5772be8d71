//! [`Leader`]: who leads an election now.

use std::time::{Duration, SystemTime};

use crate::{Epoch, Identity};

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
    /// server ages a dead holder's key out by itself). Display only, like
    /// [`since`](Leader::since).
    pub renewed: Option<SystemTime>,
    /// The TTL of the holder's lease: without a renewal for this long the
    /// lease has run out and a contender takes it over. `None` where
    /// [`renewed`](Leader::renewed) is `None`.
    pub ttl: Option<Duration>,
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
    /// };
    /// assert!(!leader.presumed_dead_at(renewed + Duration::from_secs(9)));
    /// assert!(leader.presumed_dead_at(renewed + Duration::from_secs(11)));
    /// // In a program: `leader.presumed_dead_at(std::time::SystemTime::now())`.
    /// # Ok(()) }
    /// ```
    pub fn presumed_dead_at(&self, now: SystemTime) -> bool {
        self.expires().is_some_and(|expires| expires < now)
    }
}
