//! The [`Lease`] trait: what fencing and user code need from a term.

use std::future::Future;

use tokio::time::Instant;

use crate::{ElectionName, Epoch, Identity, LeaseLost};

/// What fencing and user code need from a term: its epoch, its lost
/// signal and, where the backend has one, the instant until which it is
/// known to hold.
///
/// [`Term`](crate::Term) and [`TermLease`](crate::TermLease) implement it.
///
/// ```
/// use election_core::{Lease, Candidate};
/// use election_testkit::memory::MemoryBackend;
///
/// async fn guarded_write(lease: &impl Lease) -> Result<(), String> {
///     if lease.is_lost() {
///         return Err(format!("term {} is over", lease.epoch()));
///     }
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let backend = MemoryBackend::new();
/// let term = Candidate::new(backend.claim("jobs", "a").unwrap()).campaign().await.unwrap();
/// guarded_write(&term).await.unwrap();
/// # }
/// ```
pub trait Lease: Send + Sync {
    /// The election.
    fn name(&self) -> &ElectionName;

    /// The identity of the holder.
    fn identity(&self) -> &Identity;

    /// The epoch of the term.
    fn epoch(&self) -> Epoch;

    /// True once the holder must stop acting under this lease: the term is
    /// lost, its known validity has run out, or its holder ended it (a
    /// resign began, also one whose future was dropped, or the term was
    /// dropped). Once true it stays true. In doubt, a lease counts as lost.
    /// No fencing token may be issued from a lease that reads lost.
    fn is_lost(&self) -> bool;

    /// Why the lease reads lost ([`LossReason::is_end`](crate::LossReason::is_end)
    /// tells a resign or drop from a loss), or `None` while the term may
    /// still be held.
    fn loss(&self) -> Option<LeaseLost>;

    /// Resolves with the reason once [`is_lost`](Lease::is_lost) turns
    /// true: also when the term ends by resign or drop (with
    /// [`LossReason::Resigned`](crate::LossReason::Resigned) or
    /// [`LossReason::Dropped`](crate::LossReason::Dropped)). Many tasks may
    /// await it at once.
    fn lost(&self) -> impl Future<Output = LeaseLost> + Send + '_;

    /// The monotonic instant until which the backend is known to hold the
    /// claim, or `None` for claims that do not expire.
    fn valid_until(&self) -> Option<Instant>;
}
