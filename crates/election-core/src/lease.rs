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
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = MemoryBackend::new();
/// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
/// guarded_write(&term).await?;
/// # Ok(()) }
/// ```
pub trait Lease: Send + Sync {
    /// The election.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    ///
    /// fn log_write(lease: &impl Lease, what: &str) {
    ///     println!("{} wrote {what} for {} in term {}", lease.identity(), lease.name(), lease.epoch());
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// log_write(&term.lease(), "report-2024-06");
    /// # Ok(()) }
    /// ```
    fn name(&self) -> &ElectionName;

    /// The identity of the holder.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "worker-1")?).campaign().await?;
    /// let lease = term.lease();
    /// assert_eq!(lease.identity().as_str(), "worker-1");
    /// # Ok(()) }
    /// ```
    fn identity(&self) -> &Identity;

    /// The epoch of the term.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// let row = ("report-2024-06", lease.epoch().get()); // store the writer's epoch beside the data
    /// assert_eq!(row.1, term.epoch().get());
    /// # Ok(()) }
    /// ```
    fn epoch(&self) -> Epoch;

    /// True once the holder must stop acting under this lease: the term is
    /// lost, its known validity has run out, or its holder ended it (a
    /// resign began, also one whose future was dropped, or the term was
    /// dropped). Once true it stays true. In doubt, a lease counts as lost.
    /// No fencing token may be issued from a lease that reads lost.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// assert!(!lease.is_lost());
    /// backend.revoke("jobs");
    /// lease.lost().await;
    /// assert!(lease.is_lost()); // and stays so
    /// # Ok(()) }
    /// ```
    fn is_lost(&self) -> bool;

    /// Why the lease reads lost ([`LossReason::is_end`](crate::LossReason::is_end)
    /// tells a resign or drop from a loss), or `None` while the term may
    /// still be held.
    ///
    /// ```
    /// use election_core::{Candidate, Lease, LossReason};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// assert!(lease.loss().is_none());
    /// term.resign().await?;
    /// let loss = lease.loss();
    /// assert!(matches!(loss.map(|l| l.reason), Some(LossReason::Resigned)));
    /// # Ok(()) }
    /// ```
    fn loss(&self) -> Option<LeaseLost>;

    /// Resolves with the reason once [`is_lost`](Lease::is_lost) turns
    /// true: also when the term ends by resign or drop (with
    /// [`LossReason::Resigned`](crate::LossReason::Resigned) or
    /// [`LossReason::Dropped`](crate::LossReason::Dropped)). Many tasks may
    /// await it at once.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// backend.revoke("jobs");
    /// tokio::select! {
    ///     lost = lease.lost() => eprintln!("stop: {lost}"),
    ///     () = std::future::pending::<()>() => {} // the job
    /// }
    /// # Ok(()) }
    /// ```
    fn lost(&self) -> impl Future<Output = LeaseLost> + Send + '_;

    /// The monotonic instant until which the backend is known to hold the
    /// claim, or `None` for claims that do not expire.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// // Start a step only if it can finish while the claim is known to be held.
    /// let step = Duration::from_secs(5);
    /// let fits = match lease.valid_until() {
    ///     Some(until) => tokio::time::Instant::now() + step < until,
    ///     None => !lease.is_lost(), // a claim that does not expire
    /// };
    /// assert!(fits);
    /// # Ok(()) }
    /// ```
    fn valid_until(&self) -> Option<Instant>;
}
