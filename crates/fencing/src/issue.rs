//! Issuing a [`Token`] from a lease: refused once the lease reads lost.

use election_core::{Lease, LeaseLost, LossReason};

use crate::{Error, Token};

impl Token {
    /// The token of `lease`'s term, or [`Error::Lost`] if the lease reads
    /// lost: the term was lost, or it has ended by resign or drop (with
    /// [`LossReason::Resigned`] or [`LossReason::Dropped`]; from the moment
    /// the resign began, before its release is sent), also once a later
    /// term has begun.
    ///
    /// A token issued here is not a promise that the term still holds when
    /// the write arrives: that is what the store's high-water mark checks.
    /// Refusing lost leases only saves a write that would be pointless.
    ///
    /// To report why the lease was lost, this polls [`Lease::lost`] once,
    /// without waiting, when it runs inside a Tokio runtime; a lease whose
    /// reason is not ready at once (or a call outside a runtime) gets a
    /// generic [`LossReason::Revoked`].
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// use election_testkit::memory::MemoryBackend;
    /// use fencing::{Error, Token};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert_eq!(Token::issue(&term)?.epoch(), term.epoch());
    ///
    /// backend.revoke("jobs");
    /// assert!(matches!(Token::issue(&term), Err(Error::Lost(_))));
    /// # Ok(()) }
    /// ```
    pub fn issue(lease: &impl Lease) -> Result<Token, Error> {
        let epoch = lease.epoch();
        if lease.is_lost() {
            return Err(Error::Lost(loss_of(lease)));
        }
        Ok(Token::from_epoch(epoch))
    }
}

/// The reason a lease that reports itself lost was lost, without waiting.
fn loss_of(lease: &impl Lease) -> LeaseLost {
    lease.loss().unwrap_or_else(|| LeaseLost {
        name: lease.name().clone(),
        identity: lease.identity().clone(),
        epoch: lease.epoch(),
        reason: LossReason::Revoked {
            detail: "the lease reports itself lost without a reason".into(),
        },
    })
}
