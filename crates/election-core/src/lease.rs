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
/// use election_core::{Lease, memory::MemoryBackend, Candidate};
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

    /// True once the term is lost, or once its known validity has run out.
    /// In doubt, a lease counts as lost.
    fn is_lost(&self) -> bool;

    /// The loss, if the term has been lost (or its known validity has run
    /// out, which counts as lost); `None` while it may still be held.
    fn loss(&self) -> Option<LeaseLost>;

    /// Resolves with the reason once the term is lost; pending forever if
    /// it ends by resign. Many tasks may await it at once.
    fn lost(&self) -> impl Future<Output = LeaseLost> + Send + '_;

    /// The monotonic instant until which the backend is known to hold the
    /// claim, or `None` for claims that do not expire.
    fn valid_until(&self) -> Option<Instant>;
}
