//! [`Leader`]: who leads an election now.

use std::time::SystemTime;

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
}
