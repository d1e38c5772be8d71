//! [`Token::issue`]: the token of a lease's term, refused once the lease
//! reads lost.

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
    /// use election_core::Candidate;
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

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::{Candidate, ElectionName, Epoch, Identity};
    use election_testkit::memory::MemoryBackend;

    #[tokio::test]
    async fn issue_uses_the_epoch_and_refuses_a_lost_lease_with_its_reason() {
        let backend = MemoryBackend::new();
        let claim = backend.claim("jobs", "a").unwrap();
        let term = Candidate::new(claim).campaign().await.unwrap();
        let token = Token::issue(&term).unwrap();
        assert_eq!(token.epoch(), term.epoch());
        assert_eq!(Token::issue(&term.lease()).unwrap(), token);

        assert!(backend.revoke("jobs"));
        match Token::issue(&term) {
            Err(Error::Lost(lost)) => {
                assert_eq!(lost.epoch, term.epoch());
                assert!(
                    matches!(&lost.reason, LossReason::Revoked { detail } if detail.contains("memory backend")),
                    "{lost:?}"
                );
            }
            other => panic!("expected Lost, got {other:?}"),
        }
    }

    /// A lease that says it is lost but gives no reason.
    struct Silent;
    impl Lease for Silent {
        fn name(&self) -> &ElectionName {
            static NAME: std::sync::OnceLock<ElectionName> = std::sync::OnceLock::new();
            NAME.get_or_init(|| ElectionName::new("silent").unwrap())
        }
        fn identity(&self) -> &Identity {
            static ID: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
            ID.get_or_init(|| Identity::new("me").unwrap())
        }
        fn epoch(&self) -> Epoch {
            Epoch::new(3).unwrap()
        }
        fn is_lost(&self) -> bool {
            true
        }
        fn loss(&self) -> Option<LeaseLost> {
            None
        }
        fn lost(&self) -> impl std::future::Future<Output = LeaseLost> + Send + '_ {
            std::future::pending()
        }
        fn valid_until(&self) -> Option<tokio::time::Instant> {
            None
        }
    }

    #[test]
    fn issue_without_a_reason_still_refuses() {
        let Err(Error::Lost(lost)) = Token::issue(&Silent) else {
            panic!("a lost lease got a token");
        };
        assert_eq!(lost.epoch.get(), 3);
        assert_eq!(lost.name.as_str(), "silent");
    }
}
