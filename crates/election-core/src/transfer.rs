//! Handing a term to a named successor ([`Handover`], [`TransferRequest`];
//! ADR 0112).
//!
//! A holder ends its term with [`Term::transfer`](crate::Term::transfer)
//! instead of [`resign`](crate::Term::resign): in the same atomic step that
//! releases the claim, the backend stores a *handover* that reserves the
//! name for the successor for a bounded window. Until the window has passed
//! only the successor may win the next term; after it, anyone may, so a
//! successor that died does not hold the name up. Candidates count the
//! window on their own monotonic clock from the moment they first read the
//! handover (as they count a silent holder's TTL), so nobody but the
//! successor wins before the window has passed in the store's time. The
//! successor's term takes the next epoch as every term does: a fence
//! refuses the old holder from the successor's first write.
//!
//! Anyone may *ask* the holder to hand over
//! ([`Election::request_transfer`](crate::Election::request_transfer)): the
//! backend stores the request beside the term, conditioned on the term's
//! epoch, and the holder's watch reports it
//! ([`Term::transfer_requested`](crate::Term::transfer_requested)). The
//! holder decides when: a request never ends a term by itself.

use std::time::{Duration, SystemTime};

use crate::{Epoch, Identity};

/// A request that the holder of a term hand it to a successor: what
/// [`Election::request_transfer`](crate::Election::request_transfer) stores
/// and [`Term::transfer_requested`](crate::Term::transfer_requested)
/// reports.
///
/// ```
/// use election_core::{Epoch, Identity, TransferRequest};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let r = TransferRequest::new(
///     Identity::new("web-2")?,
///     Identity::new("deploy/7")?,
///     Epoch::new(12).ok_or("epoch")?,
///     None,
/// );
/// assert_eq!(r.to_string(), "hand the term of epoch 12 to web-2 (asked by deploy/7)");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransferRequest {
    /// The successor asked for.
    pub to: Identity,
    /// Who asked (`elect transfer --identity`, or the successor itself).
    pub by: Identity,
    /// The epoch of the term asked: a request for an earlier term is never
    /// reported to a later one.
    pub epoch: Epoch,
    /// When, by the asker's wall clock, where the backend stores it
    /// (display only).
    pub at: Option<SystemTime>,
    /// `None`: an explicit request (`elect transfer`, `--take-over`).
    /// `Some(p)`: a preferred candidate with priority `p` waits
    /// ([`Election::prefer`](crate::Election::prefer)); the holder is
    /// told only if `p` is above its own term's priority
    /// ([`Term::preferred`](crate::Term::preferred)).
    pub priority: Option<u32>,
}

impl TransferRequest {
    /// A request by `by` that the term of `epoch` go to `to`.
    ///
    /// ```
    /// use election_core::{Epoch, Identity, TransferRequest};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let r = TransferRequest::new(Identity::new("b")?, Identity::new("b")?, Epoch::FIRST, None);
    /// assert_eq!(r.to, r.by);
    /// # Ok(()) }
    /// ```
    pub fn new(
        to: Identity,
        by: Identity,
        epoch: Epoch,
        at: Option<SystemTime>,
    ) -> TransferRequest {
        TransferRequest {
            to,
            by,
            epoch,
            at,
            priority: None,
        }
    }

    /// The same request from a preferred candidate of `priority`.
    ///
    /// ```
    /// use election_core::{Epoch, Identity, TransferRequest};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let id = Identity::new("zone-a/1")?;
    /// let r = TransferRequest::new(id.clone(), id, Epoch::FIRST, None).with_priority(10);
    /// assert_eq!(r.priority, Some(10));
    /// let shown = format!("hand the term of epoch {} to zone-a/1 (preferred, priority 10)", Epoch::FIRST);
    /// assert_eq!(r.to_string(), shown);
    /// # Ok(()) }
    /// ```
    pub fn with_priority(mut self, priority: u32) -> TransferRequest {
        self.priority = Some(priority);
        self
    }
}

impl std::fmt::Display for TransferRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.priority {
            None => write!(
                f,
                "hand the term of epoch {} to {} (asked by {})",
                self.epoch, self.to, self.by
            ),
            Some(p) => write!(
                f,
                "hand the term of epoch {} to {} (preferred, priority {p})",
                self.epoch, self.to
            ),
        }
    }
}

/// A handover stored by [`Term::transfer`](crate::Term::transfer) that no
/// term has followed yet: the name is reserved for [`to`](Self::to) for
/// [`window`](Self::window). Shown by `elect leader` and `elect observe`
/// ([`Election::handover`](crate::Election::handover)).
///
/// ```
/// use std::time::Duration;
/// use election_core::{Epoch, Handover, Identity};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let h = Handover::new(
///     Identity::new("web-1")?,
///     Identity::new("web-2")?,
///     Epoch::new(12).ok_or("epoch")?,
///     Duration::from_secs(15),
/// );
/// assert_eq!(h.to_string(), "handed by web-1 (epoch 12) to web-2, reserved for 15s");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Handover {
    /// The holder that handed the term over.
    pub from: Identity,
    /// The successor the name is reserved for.
    pub to: Identity,
    /// The epoch of the term that ended: the successor's is above it.
    pub epoch: Epoch,
    /// How long only the successor may win, as stored (candidates count it
    /// from when they first read the handover).
    pub window: Duration,
}

impl Handover {
    /// `from`'s term of `epoch`, handed to `to` for `window`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Epoch, Handover, Identity};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let h = Handover::new(Identity::new("a")?, Identity::new("b")?, Epoch::FIRST, Duration::from_secs(1));
    /// assert_eq!(h.to.as_str(), "b");
    /// # Ok(()) }
    /// ```
    pub fn new(from: Identity, to: Identity, epoch: Epoch, window: Duration) -> Handover {
        Handover {
            from,
            to,
            epoch,
            window,
        }
    }
}

impl std::fmt::Display for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "handed by {} (epoch {}) to {}, reserved for {:?}",
            self.from, self.epoch, self.to, self.window
        )
    }
}

/// The longest reservation a handover may ask for: a successor that never
/// comes holds the name up at most this long.
pub const MAX_TRANSFER_WINDOW: Duration = Duration::from_secs(3600);
