//! An operator's revoke: ending the current term of a name from outside,
//! fenced ([`Revoked`], [`Revocation`]; ADR 0111).
//!
//! A revocation is stored like a term: the backend moves the name to a new
//! epoch above the holder's in one atomic step, drawn as a winning claim
//! draws its epoch (rule 1), and records who asked and when. No candidate
//! holds that epoch. The deposed holder's watch reports the loss (rule 2)
//! at its next renewal or check, at its lease's deadline at the latest;
//! candidates treat the revocation as a holder that stopped renewing (a
//! full TTL on the lease backends, the deposed holder's close on the file
//! backend), so nobody wins before the deposed holder's lease could have
//! run out, and the next term's epoch is above the revocation's. Raising a
//! fence's high-water mark to [`Revocation::epoch`] makes it refuse the
//! deposed holder at once, before any new leader writes.

use std::time::SystemTime;

use crate::{Epoch, Identity, Leader};

/// A revocation of a name, as stored until the next term begins: who
/// asked, when (their wall clock; display only) and its epoch.
///
/// ```
/// use election_core::{Epoch, Identity, Revocation};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let r = Revocation::new(Identity::new("ops/alice")?, Epoch::new(8).ok_or("epoch")?, None);
/// assert_eq!(r.to_string(), "revoked by ops/alice (epoch 8)");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revocation {
    /// Who asked for it (`elect revoke --identity`).
    pub by: Identity,
    /// Its epoch: above the deposed holder's, below the next term's. A
    /// fence raised to it refuses every token of the deposed term.
    pub epoch: Epoch,
    /// When, by the revoker's wall clock, where the backend stores it.
    pub at: Option<SystemTime>,
}

impl Revocation {
    /// A revocation by `by` in `epoch` at `at`.
    ///
    /// ```
    /// use election_core::{Epoch, Identity, Revocation};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let at = std::time::SystemTime::now();
    /// let r = Revocation::new(Identity::new("ops")?, Epoch::FIRST, Some(at));
    /// assert_eq!(r.at, Some(at));
    /// # Ok(()) }
    /// ```
    pub fn new(by: Identity, epoch: Epoch, at: Option<SystemTime>) -> Revocation {
        Revocation { by, epoch, at }
    }
}

impl std::fmt::Display for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "revoked by {} (epoch {})", self.by, self.epoch)
    }
}

/// What [`Election::revoke`](crate::Election::revoke) did: the term it
/// ended and the revocation it stored.
///
/// ```
/// use election_core::{Epoch, Identity, Leader, Revocation, Revoked};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let deposed = Leader {
///     identity: Identity::new("host-a/4711")?,
///     epoch: Epoch::new(7).ok_or("epoch")?,
///     since: None,
///     renewed: None,
///     ttl: None,
///     value: None,
/// };
/// let revocation = Revocation::new(Identity::new("ops")?, Epoch::new(8).ok_or("epoch")?, None);
/// let revoked = Revoked::new(deposed, revocation);
/// assert!(revoked.revocation.epoch > revoked.deposed.epoch);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Revoked {
    /// The holder whose term was ended, with that term's epoch.
    pub deposed: Leader,
    /// The revocation stored in its place.
    pub revocation: Revocation,
}

impl Revoked {
    /// The revocation `revocation` of `deposed`'s term.
    ///
    /// ```
    /// use election_core::{Epoch, Identity, Leader, Revocation, Revoked};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let deposed = Leader {
    ///     identity: Identity::new("a")?,
    ///     epoch: Epoch::FIRST,
    ///     since: None,
    ///     renewed: None,
    ///     ttl: None,
    ///     value: None,
    /// };
    /// let r = Revoked::new(deposed, Revocation::new(Identity::new("ops")?, Epoch::new(3).ok_or("epoch")?, None));
    /// assert_eq!(r.deposed.identity.as_str(), "a");
    /// # Ok(()) }
    /// ```
    pub fn new(deposed: Leader, revocation: Revocation) -> Revoked {
        Revoked {
            deposed,
            revocation,
        }
    }

    /// This revocation, counted in `election_revocations_total` (labels
    /// `name`, `backend`): a backend's `Election::revoke` calls it once the
    /// revocation of `name` landed, so an operator's tool or an admin
    /// service that embeds the library exports how many terms it took away.
    /// The deposed holder counts its own loss in
    /// `election_terms_lost_total` (reason `revoked`).
    ///
    /// ```
    /// use election_core::{ElectionName, Epoch, Identity, Leader, Revocation, Revoked};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let deposed = Leader {
    ///     identity: Identity::new("a")?,
    ///     epoch: Epoch::FIRST,
    ///     since: None,
    ///     renewed: None,
    ///     ttl: None,
    ///     value: None,
    /// };
    /// let epoch = Epoch::FIRST.next().ok_or("epoch")?;
    /// let r = Revoked::new(deposed, Revocation::new(Identity::new("ops")?, epoch, None))
    ///     .counted(&ElectionName::new("jobs")?, "memory");
    /// assert_eq!(r.revocation.epoch, epoch);
    /// # Ok(()) }
    /// ```
    pub fn counted(self, name: &crate::ElectionName, backend: &'static str) -> Revoked {
        crate::instrument::revoked(name, backend);
        self
    }
}
