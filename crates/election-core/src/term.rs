//! The [`Term`] a winner holds and the [`TermLease`] view of it.

use std::sync::Arc;

use tokio::time::Instant;

use crate::claim::{End, WatchGuard};
use crate::term_state::TermState;
use crate::{
    Claim, ElectionName, Epoch, Error, Identity, LeaderValue, Lease, LeaseLost, LossReason,
    TransferRequest,
};

/// A cheap, cloneable view of a term: its epoch and lost signal, without
/// the power to resign. Hand it to tasks and to fencing.
#[derive(Clone, Debug)]
pub struct TermLease {
    state: Arc<TermState>,
}

/// A [`Lease`] read from the term's shared state (`self.state`).
macro_rules! lease_of_state {
    ($($head:tt)*) => {
        $($head)* {
            fn name(&self) -> &ElectionName {
                &self.state.name
            }
            fn identity(&self) -> &Identity {
                &self.state.identity
            }
            fn epoch(&self) -> Epoch {
                self.state.epoch
            }
            fn is_lost(&self) -> bool {
                self.state.is_lost()
            }
            fn loss(&self) -> Option<LeaseLost> {
                self.state.loss()
            }
            fn lost(&self) -> impl std::future::Future<Output = LeaseLost> + Send + '_ {
                self.state.lost()
            }
            fn valid_until(&self) -> Option<Instant> {
                self.state.valid_until()
            }
        }
    };
}
lease_of_state!(impl Lease for TermLease);
lease_of_state!(impl<C: Claim> Lease for Term<C>);

/// An open attempt: closed exactly once (rule 4), by [`close`](Self::close)
/// or, if the campaign's future is dropped first, with [`End::Cancelled`].
pub(crate) struct AttemptGuard<C: Claim> {
    pub(crate) claim: Arc<C>,
    pub(crate) attempt: Option<C::Attempt>,
}

impl<C: Claim> AttemptGuard<C> {
    pub(crate) fn attempt(&mut self) -> &mut C::Attempt {
        self.attempt.as_mut().expect("attempt present until closed")
    }

    pub(crate) fn close(&mut self, end: End) {
        if let Some(a) = self.attempt.take() {
            self.claim.close(a, end);
        }
    }
}

impl<C: Claim> Drop for AttemptGuard<C> {
    fn drop(&mut self) {
        if self.attempt.is_some() {
            tracing::debug!(name = %self.claim.name(), identity = %self.claim.identity(), "campaign cancelled; attempt closed");
            self.close(End::Cancelled);
        }
    }
}

/// A won claim and its watch; closes the attempt when dropped.
pub(crate) struct Held<C: Claim> {
    pub(crate) guard: AttemptGuard<C>,
    pub(crate) watch: Option<WatchGuard>,
    pub(crate) state: Arc<TermState>,
}

impl<C: Claim> Held<C> {
    fn close(&mut self, end: End) {
        self.watch.take();
        self.guard.close(end);
    }
}

impl<C: Claim> Drop for Held<C> {
    fn drop(&mut self) {
        if self.guard.attempt.is_some() {
            let end = match self.state.begin_end(LossReason::Dropped) {
                Ok(()) => End::Dropped,
                Err(_) => End::Lost,
            };
            if end == End::Dropped {
                tracing::info!(name = %self.state.name, identity = %self.state.identity, epoch = self.state.epoch.get(), "term dropped without resign; claim given up");
            }
            self.close(end);
        }
    }
}

/// The term a winning candidate holds: leadership for one epoch.
///
/// A term ends in one of three ways:
/// - [`resign`](Term::resign): the claim is released and the next candidate
///   can win at once;
/// - a loss: the backend took the claim away (or could no longer prove it
///   held it); [`lost`](Term::lost) resolves and the leader must stop;
/// - drop: dropping a term without resigning gives the claim up through the
///   backend's `close` (see [`End::Dropped`]); each backend documents how
///   (e.g. the file backend closes the locked file, which frees the lock at
///   once).
///
/// Whichever way it ends, every lease of the term ([`lease`](Term::lease),
/// the term itself) reads lost from that moment on: [`is_lost`](Term::is_lost)
/// is true and [`lost`](Term::lost) resolves, with a reason that says which
/// end it was, so no fencing token is issued from an ended term.
///
/// ```
/// use election_core::{Candidate};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let term = Candidate::new(backend.claim("jobs", "worker-1")?).campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
pub struct Term<C: Claim> {
    state: Arc<TermState>,
    held: tokio::sync::Mutex<Option<Held<C>>>,
    outcome: std::sync::OnceLock<Result<(), Error>>,
}

impl<C: Claim> std::fmt::Debug for Term<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Term")
            .field("name", &self.state.name)
            .field("identity", &self.state.identity)
            .field("epoch", &self.state.epoch)
            .field("lost", &self.state.is_lost())
            .finish()
    }
}

impl<C: Claim> Term<C> {
    pub(crate) fn new(held: Held<C>) -> Self {
        Term {
            state: held.state.clone(),
            held: tokio::sync::Mutex::new(Some(held)),
            outcome: std::sync::OnceLock::new(),
        }
    }

    /// The epoch of this term.
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// println!("leading in term {}", term.epoch()); // also the fencing token's value
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self) -> Epoch {
        self.state.epoch
    }

    /// The identity of the candidate that holds this term.
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "worker-1")?).campaign().await?;
    /// assert_eq!(term.identity().as_str(), "worker-1");
    /// # Ok(()) }
    /// ```
    pub fn identity(&self) -> &Identity {
        &self.state.identity
    }

    /// The election.
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "worker-1")?).campaign().await?;
    /// println!("leading {} in term {}", term.name(), term.epoch());
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &ElectionName {
        &self.state.name
    }

    /// True once this term's leader must stop acting: from the moment the
    /// backend reported a loss, the term's known validity ran out, or the
    /// holder began to end the term (a [`resign`](Term::resign) began, also
    /// one whose future was then dropped, or the term or its
    /// [`lead`](Term::lead) was dropped). Once true it stays true. It turns
    /// true *before* a resign sends its release, so no token is issued from
    /// a term whose release is in flight; [`loss`](Lease::loss) tells which
    /// end it was ([`LossReason::is_end`]).
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// for batch in 0..3 {
    ///     if term.is_lost() {
    ///         break; // stop acting for the group
    ///     }
    ///     println!("batch {batch} in term {}", term.epoch());
    /// }
    /// term.resign().await?;
    /// assert!(term.is_lost()); // an ended term reads lost too
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.state.is_lost()
    }

    /// Resolves with the reason once [`is_lost`](Term::is_lost) turns true:
    /// the backend's loss ([`LossReason::Expired`], [`LossReason::Revoked`],
    /// [`LossReason::Failed`]) or the holder's own end
    /// ([`LossReason::Resigned`], [`LossReason::Dropped`]), whichever came
    /// first. A validity that runs out resolves it too, even if the
    /// backend's watch is stalled. Many tasks may await it at once (also
    /// through [`lease`](Term::lease) clones): a task holding a lease stops
    /// when the term is resigned or dropped, not only when it is lost.
    ///
    /// Cancel safety: cancel safe; it only observes.
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// backend.revoke("jobs"); // the backend takes the claim away
    /// let lost = term.lost().await;
    /// assert_eq!(lost.epoch, term.epoch());
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) -> LeaseLost {
        self.state.lost().await
    }

    /// Resolves when the term has ended: resigned, dropped or lost.
    ///
    /// Cancel safety: cancel safe; it only observes.
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// term.resign().await?;
    /// term.ended().await; // resolves at once: the term is over
    /// # Ok(()) }
    /// ```
    pub async fn ended(&self) {
        self.state.ended().await
    }

    /// A liveness probe for this term alone: unhealthy while it reads as
    /// leading but no renewal has landed for longer than `bound` (see
    /// [`HealthCheck`](crate::HealthCheck);
    /// [`Candidate::health_check`](crate::Candidate::health_check) covers
    /// every term of a candidate).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert!(term.health_check(Duration::from_secs(5)).check().is_healthy());
    /// # Ok(()) }
    /// ```
    pub fn health_check(&self, bound: std::time::Duration) -> crate::HealthCheck {
        crate::HealthCheck::term(&self.state, bound)
    }

    /// A cloneable view of this term for tasks and fencing.
    ///
    /// ```
    /// use election_core::{Candidate, Lease};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let lease = term.lease();
    /// let worker = tokio::spawn(async move {
    ///     lease.lost().await; // stops when the term ends, however it ends
    /// });
    /// term.resign().await?;
    /// worker.await?;
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> TermLease {
        TermLease {
            state: self.state.clone(),
        }
    }

    /// Ends the term and gives the claim up, so the next candidate can win.
    ///
    /// From its first poll on, the term's leases read lost
    /// ([`LossReason::Resigned`]), before the release is sent.
    ///
    /// Idempotent: a second call waits for the first and returns its
    /// outcome. Returns [`Error::Lost`] if the term had been lost: then the
    /// claim is not released (it may be another candidate's, rule 3), only
    /// closed.
    ///
    /// Cancel safety: if the future is dropped before the release finished,
    /// the term stays ending (its leases read lost, [`LossReason::Resigned`];
    /// a loss the backend reports from now on is not recorded, as after any
    /// resign): a later call runs the release again, and dropping the term
    /// closes the attempt with [`End::Dropped`], which gives the claim up.
    ///
    /// Failure model: if the backend's release fails, the attempt is closed
    /// with [`End::Failed`] (which gives up whatever it may hold) and the
    /// error is returned.
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// term.resign().await?;
    /// term.resign().await?; // idempotent
    /// # Ok(()) }
    /// ```
    pub async fn resign(&self) -> Result<(), Error> {
        self.end_term(None).await
    }

    /// Ends the term handing the name to `to` (ADR 0112): the backend
    /// releases the claim and, in the same atomic step, reserves the name
    /// for `to` for `window` ([`Claim::release_to`]). Until then only `to`
    /// may win the next term; after it anyone may, so a successor that died
    /// holds the name up at most `window` (at most
    /// [`MAX_TRANSFER_WINDOW`](crate::MAX_TRANSFER_WINDOW)). The
    /// successor's term has a higher epoch, as every term: a fence refuses
    /// this term's tokens from the successor's first write.
    ///
    /// Everything else is [`resign`](Self::resign)'s: the leases read lost
    /// ([`LossReason::Resigned`]) from the first poll, before the handover
    /// is sent; a second call (or a resign) waits for the first and returns
    /// its outcome; [`Error::Lost`] if the term had been lost, and then
    /// nothing is released (rule 3).
    ///
    /// Cancel safety: as `resign`'s. A dropped call leaves the term ending;
    /// a later call runs the handover again; dropping the term closes the
    /// attempt with [`End::Dropped`], which gives the claim up without a
    /// reservation.
    ///
    /// Failure model: [`Error::Config`] before anything changes, if `to` is
    /// this term's own identity, `window` is zero or above the maximum, or
    /// the backend cannot transfer ([`Claim::transfers`]): the term goes
    /// on. If the backend's handover fails, the attempt is closed with
    /// [`End::Failed`] (which gives up whatever it may hold; a reservation
    /// may or may not stand, bounded by `window`) and the error is
    /// returned.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{Candidate, Identity};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "web-1")?).campaign().await?;
    /// let old = term.epoch();
    /// term.transfer(&Identity::new("web-2")?, Duration::from_secs(15)).await?;
    /// // Nobody else wins now; web-2 does, above the old epoch.
    /// assert!(Candidate::new(backend.claim("jobs", "web-3")?).try_campaign().await?.is_none());
    /// let next = Candidate::new(backend.claim("jobs", "web-2")?).campaign().await?;
    /// assert!(next.epoch() > old);
    /// # Ok(()) }
    /// ```
    pub async fn transfer(&self, to: &Identity, window: std::time::Duration) -> Result<(), Error> {
        let bad = |reason: String| {
            Err(Error::Config(crate::ConfigError::BadSetting {
                setting: "transfer",
                reason,
            }))
        };
        if to == &self.state.identity {
            return bad(format!("{to} cannot hand its own term to itself"));
        }
        if window.is_zero() || window > crate::MAX_TRANSFER_WINDOW {
            return bad(format!(
                "the window {window:?} must be above zero and at most {:?}",
                crate::MAX_TRANSFER_WINDOW
            ));
        }
        {
            let slot = self.held.lock().await;
            if let Some(held) = slot.as_ref() {
                let claim = &held.guard.claim;
                if !claim.transfers() {
                    return Err(Error::Config(crate::ConfigError::Unsupported {
                        what: "transfer (handing the term to a successor)",
                        backend: claim.backend(),
                    }));
                }
            }
        }
        self.end_term(Some((to, window))).await
    }

    /// Resolves with the first request that this term be handed over
    /// ([`Election::request_transfer`](crate::Election::request_transfer)),
    /// as the backend's watch reports it; at once if one was reported.
    /// Pending forever on a backend that cannot carry requests, and after
    /// the term ended (no request is reported then). A request only asks:
    /// the holder calls [`transfer`](Self::transfer) when its work is at a
    /// point to stop (`elect run` stops its command first).
    ///
    /// Cancel safety: cancel safe (a read of the term's state).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{Candidate, Election, Identity};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "web-1")?).campaign().await?;
    /// let to = Identity::new("web-2")?;
    /// backend.request_transfer("jobs", &to, &Identity::new("deploy")?).await?;
    /// let request = term.transfer_requested().await;
    /// term.transfer(&request.to, Duration::from_secs(15)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn transfer_requested(&self) -> TransferRequest {
        self.state.wait_transfer_request(false).await
    }

    /// The latest request that this term be handed over, if one was
    /// reported ([`transfer_requested`](Self::transfer_requested) without
    /// waiting).
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert!(term.transfer_request().is_none());
    /// # Ok(()) }
    /// ```
    pub fn transfer_request(&self) -> Option<TransferRequest> {
        self.state.transfer_request()
    }

    /// Resolves with the first request of a preferred candidate whose
    /// priority is above this term's ([`Candidate::with_priority`](crate::Candidate::with_priority);
    /// 0 without), as the backend's watch reports it
    /// ([`Election::prefer`](crate::Election::prefer)); at once if one was
    /// reported. Candidates of equal or lower priority are never reported:
    /// equal priorities keep today's race. The holder decides whether to
    /// yield ([`transfer`](Self::transfer) to the request's `to`); a term
    /// yields at most once, since yielding ends it, and a preferred
    /// candidate asks only once it has waited the time it states.
    ///
    /// Cancel safety: cancel safe (a read of the term's state).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{Candidate, Election, Identity};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "zone-b/1")?)
    ///     .with_priority(1)
    ///     .campaign()
    ///     .await?;
    /// // A candidate in the primary zone waits, with a higher priority.
    /// backend.prefer("jobs", &Identity::new("zone-a/1")?, 5).await?;
    /// let preferred = term.preferred().await;
    /// // ... let the work reach a safe point, then yield:
    /// term.transfer(&preferred.to, Duration::from_secs(15)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn preferred(&self) -> TransferRequest {
        self.state.wait_transfer_request(true).await
    }

    /// The latest preferred candidate's request above this term, if one
    /// was reported ([`preferred`](Self::preferred) without waiting).
    ///
    /// ```
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert!(term.preferred_request().is_none());
    /// # Ok(()) }
    /// ```
    pub fn preferred_request(&self) -> Option<TransferRequest> {
        self.state.preferred_request()
    }

    /// What [`resign`](Self::resign) and [`transfer`](Self::transfer)
    /// share: the term's end by its holder, releasing the claim (to a
    /// successor when `to` is given).
    async fn end_term(&self, to: Option<(&Identity, std::time::Duration)>) -> Result<(), Error> {
        if let Some(outcome) = self.outcome.get() {
            return outcome.clone();
        }
        let mut slot = self.held.lock().await;
        if let Some(outcome) = self.outcome.get() {
            return outcome.clone();
        }
        let Some(held) = slot.as_mut() else {
            return Ok(());
        };
        let outcome = match self.state.begin_end(LossReason::Resigned) {
            Err(lost) => {
                held.close(End::Lost);
                Err(Error::Lost(lost))
            }
            Ok(()) => {
                held.watch.take();
                let claim = held.guard.claim.clone();
                let released = match to {
                    None => claim.release(held.guard.attempt()).await,
                    Some((to, window)) => claim.release_to(held.guard.attempt(), to, window).await,
                };
                match released {
                    Ok(()) => {
                        held.close(End::Resigned);
                        match to {
                            None => {
                                tracing::info!(name = %self.state.name, identity = %self.state.identity, epoch = self.state.epoch.get(), "resigned")
                            }
                            Some((to, window)) => {
                                let yielded =
                                    self.state.preferred_request().is_some_and(|r| &r.to == to);
                                crate::instrument::term_transferred(
                                    &self.state.name,
                                    claim.backend(),
                                    yielded,
                                );
                                tracing::info!(name = %self.state.name, identity = %self.state.identity, epoch = self.state.epoch.get(), %to, ?window, "handed over")
                            }
                        }
                        Ok(())
                    }
                    Err(e) => {
                        held.close(End::Failed);
                        tracing::warn!(name = %self.state.name, identity = %self.state.identity, epoch = self.state.epoch.get(), error = %e, "release failed; attempt closed");
                        Err(e)
                    }
                }
            }
        };
        *slot = None;
        let _ = self.outcome.set(outcome.clone());
        outcome
    }
}

impl<C: Claim> Term<C> {
    /// The commit-point check: proves that this term still holds the claim
    /// *now*, right before an irreversible write, with the backend's exact
    /// check ([`Claim::confirm`]: a conditional renewal for lease backends,
    /// a check that the locked file is still in place for the file backend).
    ///
    /// Cancel safety: cancel safe; a dropped check proves nothing and
    /// changes nothing the renewal loop does not already resolve.
    ///
    /// Failure model: [`Error::Lost`] if the term is lost, or if the backend
    /// shows the claim taken (the term is then marked lost: the check found
    /// the loss first); [`Error::NotHeld`] once the term has ended by resign
    /// or drop; [`Error::Unavailable`] / [`Error::OutcomeUnknown`] if the
    /// backend cannot answer — the term goes on (its renewals decide), but
    /// the write must not run.
    ///
    /// ```
    /// # use election_core::{Candidate, Error};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// term.confirm().await?; // still ours: write now
    /// backend.revoke("jobs");
    /// assert!(matches!(term.confirm().await, Err(Error::Lost(_))));
    /// # Ok(()) }
    /// ```
    pub async fn confirm(&self) -> Result<(), Error> {
        self.on_the_attempt(Call::Confirm).await
    }

    /// Publishes `value` while this term leads (its address, a
    /// configuration version): [`Candidate::leader`](crate::Candidate::leader),
    /// every backend's `leader` and `observe`, and `elect leader` /
    /// `elect observe` show it with this term, without a new term. Each
    /// call replaces the value before it; a new term begins without one.
    /// One line of text, at most [`LeaderValue::MAX_LEN`] bytes (ADR 0068).
    ///
    /// The backend writes it only if this attempt still holds the term with
    /// its epoch, in one atomic step ([`Claim::proclaim`]): a deposed
    /// leader's value never shows, and never over its successor's.
    ///
    /// Cancel safety: cancel safe; a dropped call may or may not have
    /// published the value (as with [`Error::OutcomeUnknown`]); the term is
    /// unaffected.
    ///
    /// Failure model: [`Error::Config`] for a value too long
    /// ([`ConfigError::ValueTooLong`](crate::ConfigError::ValueTooLong)) or
    /// with a control character, before any I/O; [`Error::Lost`] if the
    /// term is lost, or if the backend shows it taken (the term is then
    /// marked lost); [`Error::NotHeld`] once the term ended by resign or
    /// drop; [`Error::Unavailable`] / [`Error::OutcomeUnknown`] if the
    /// backend cannot answer: the term goes on, the value may or may not
    /// show (call again).
    ///
    /// ```
    /// # use election_core::{Candidate, ConfigError, Error, LeaderValue};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// let term = candidate.campaign().await?;
    /// term.proclaim("10.0.3.17:8443").await?;
    /// let shown = candidate.leader().await?.and_then(|l| l.value);
    /// assert_eq!(shown, Some(LeaderValue::new("10.0.3.17:8443")?));
    /// let too_long = "x".repeat(LeaderValue::MAX_LEN + 1);
    /// assert!(matches!(
    ///     term.proclaim(&too_long).await,
    ///     Err(Error::Config(ConfigError::ValueTooLong { .. }))
    /// ));
    /// backend.revoke("jobs");
    /// assert!(matches!(term.proclaim("late").await, Err(Error::Lost(_))));
    /// # Ok(()) }
    /// ```
    pub async fn proclaim(&self, value: impl AsRef<str>) -> Result<(), Error> {
        let value = LeaderValue::new(value)?;
        self.on_the_attempt(Call::Proclaim(&value)).await?;
        tracing::debug!(name = %self.state.name, identity = %self.state.identity, epoch = self.state.epoch.get(), %value, "proclaimed");
        Ok(())
    }

    /// What [`confirm`](Self::confirm) and [`proclaim`](Self::proclaim)
    /// share: refused at once if the term is lost or ended; else `call` on
    /// the held attempt (under the term's lock, so never beside a release),
    /// and a backend that finds the claim taken ends the term (`Revoked`).
    /// A success is reported only if the term was not lost meanwhile.
    async fn on_the_attempt(&self, call: Call<'_>) -> Result<(), Error> {
        let not_held = || Error::NotHeld {
            name: self.state.name.clone(),
        };
        // The backend's loss, else NotHeld if the holder ended the term.
        let refused = || match self.state.backend_loss() {
            Some(lost) => Some(Error::Lost(lost)),
            None => self.state.is_lost().then(not_held),
        };
        if let Some(e) = refused() {
            return Err(e);
        }
        let mut slot = self.held.lock().await;
        let Some(held) = slot.as_mut() else {
            return Err(not_held());
        };
        if !self.state.is_live() {
            return Err(refused().unwrap_or_else(not_held));
        }
        let claim = held.guard.claim.clone();
        let attempt = held.guard.attempt.as_mut().ok_or_else(not_held)?;
        let outcome = match call {
            Call::Confirm => claim.confirm(attempt).await,
            Call::Proclaim(value) => claim.proclaim(attempt, value).await,
        };
        match outcome {
            Ok(()) => match refused() {
                Some(e) => Err(e),
                None => Ok(()),
            },
            Err(Error::NotHeld { .. }) | Err(Error::HeldElsewhere { .. }) => {
                self.state.lose(LossReason::Revoked {
                    detail: match call {
                        Call::Confirm => "the commit-point check found the claim taken",
                        Call::Proclaim(_) => "a proclaim found the claim taken",
                    }
                    .into(),
                });
                Err(refused().unwrap_or_else(not_held))
            }
            Err(e) => Err(e),
        }
    }

    pub(crate) fn state(&self) -> &Arc<TermState> {
        &self.state
    }
}

/// The calls a term makes on its held attempt ([`Term::confirm`],
/// [`Term::proclaim`]).
#[derive(Clone, Copy)]
enum Call<'v> {
    Confirm,
    Proclaim(&'v LeaderValue),
}
