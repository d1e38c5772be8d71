//! The steps a backend implements: [`Claim`].

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::{ConfigError, ElectionName, Epoch, Error, Identity, Leader, LeaderValue, TermReporter};

/// A claim won by [`Claim::try_claim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Won {
    /// The epoch of the term won, decided in the same atomic step that won
    /// the claim.
    pub epoch: Epoch,
    /// The monotonic instant until which the backend is known to hold the
    /// claim for this candidate, counted from *before* the winning request
    /// was sent; `None` for claims that do not expire (an OS lock).
    pub valid_until: Option<Instant>,
}

/// How an attempt ended, as passed to [`Claim::close`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum End {
    /// The term was resigned and [`Claim::release`] ran.
    Resigned,
    /// The term was lost (the backend took the claim away); release was not
    /// called and must not be.
    Lost,
    /// The term was dropped without resigning, or a resign was cancelled
    /// before its release finished. The backend gives the claim up in
    /// `close` (each backend documents how).
    Dropped,
    /// The attempt never won: it timed out, or it tried once and the claim
    /// was held.
    NeverWon,
    /// The campaign was cancelled (its future dropped) at an await point.
    /// The attempt may hold a claim it won an instant before: `close` must
    /// give it up.
    Cancelled,
    /// A step of the attempt failed. The attempt may hold a claim in an
    /// unknown state: `close` must give up whatever it may hold.
    Failed,
}

/// What keeps a backend's watch running; dropping it stops the watch.
///
/// The core drops the watch when the term ends, before it calls
/// [`Claim::release`] or [`Claim::close`].
pub struct WatchGuard {
    _guard: Option<Box<dyn Send + Sync>>,
}

impl WatchGuard {
    /// A watch with nothing to stop (for claims nothing can take away).
    ///
    /// ```
    /// use election_core::{Error, TermReporter, WatchGuard, Won};
    ///
    /// /// `Claim::watch` of a backend whose claim nothing can take away (an
    /// /// in-process lock): nothing to run, nothing to stop.
    /// fn watch(_won: Won, _reporter: TermReporter) -> Result<WatchGuard, Error> {
    ///     Ok(WatchGuard::none())
    /// }
    /// ```
    pub fn none() -> Self {
        WatchGuard { _guard: None }
    }

    /// A watch that stops when `guard` is dropped.
    ///
    /// ```
    /// use election_core::{Error, LossReason, TermReporter, WatchGuard, Won};
    /// use tokio::sync::{oneshot, watch};
    ///
    /// /// `Claim::watch` of a backend whose store pushes "still ours?" to
    /// /// `ours`: dropping the guard drops `stop`, which ends the watcher.
    /// fn watch(
    ///     _won: Won,
    ///     reporter: TermReporter,
    ///     mut ours: watch::Receiver<bool>,
    /// ) -> Result<WatchGuard, Error> {
    ///     let (stop, stopped) = oneshot::channel::<()>();
    ///     tokio::spawn(async move {
    ///         tokio::select! {
    ///             _ = stopped => {} // the term ended
    ///             _ = ours.wait_for(|ours| !*ours) => {
    ///                 let detail = "the store shows another holder".into();
    ///                 reporter.lose(LossReason::Revoked { detail });
    ///             }
    ///         }
    ///     });
    ///     Ok(WatchGuard::new(stop))
    /// }
    /// ```
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        WatchGuard {
            _guard: Some(Box::new(guard)),
        }
    }

    /// A watch run by a tokio task, aborted when the watch is dropped.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Epoch, Error, LossReason, TermReporter, WatchGuard, Won};
    /// use tokio::time::Instant;
    ///
    /// /// How long a landed renewal holds the claim (the TTL minus a margin).
    /// const VALIDITY: Duration = Duration::from_secs(9);
    /// # /// The store's conditional renewal: `Ok(false)` if another term holds it.
    /// # async fn renew_row(_epoch: Epoch) -> Result<bool, Error> { Ok(true) }
    ///
    /// /// `Claim::watch` of a lease backend: a task renews every 3 s until the
    /// /// term ends (the core drops the guard, which aborts the task). Real
    /// /// backends run `renewal::renew_until_lost`, which also reports the
    /// /// loss at the deadline; here the term's own deadline check does.
    /// fn watch(won: Won, reporter: TermReporter) -> Result<WatchGuard, Error> {
    ///     let task = tokio::spawn(async move {
    ///         loop {
    ///             tokio::time::sleep(Duration::from_secs(3)).await;
    ///             let sent = Instant::now(); // before the request (rule 2)
    ///             match renew_row(won.epoch).await {
    ///                 Ok(true) => reporter.renewed(sent + VALIDITY),
    ///                 Ok(false) => {
    ///                     let detail = "the row shows another term".into();
    ///                     reporter.lose(LossReason::Revoked { detail });
    ///                     return;
    ///                 }
    ///                 Err(e) => eprintln!("renewal failed, retrying: {e}"), // never extends
    ///             }
    ///         }
    ///     });
    ///     Ok(WatchGuard::task(task))
    /// }
    /// ```
    pub fn task(handle: tokio::task::JoinHandle<()>) -> Self {
        struct AbortOnDrop(tokio::task::JoinHandle<()>);
        impl Drop for AbortOnDrop {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        WatchGuard::new(AbortOnDrop(handle))
    }
}

impl std::fmt::Debug for WatchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchGuard")
            .field("active", &self._guard.is_some())
            .finish()
    }
}

/// The steps a backend implements for one election and one candidate.
///
/// The [`Candidate`](crate::Candidate) runs these steps; a backend never
/// runs a campaign itself. One run of the steps is an *attempt*: `open`
/// makes an [`Attempt`](Claim::Attempt), `try_claim` (and `wait`) run on it
/// until it wins or gives up, `watch` watches a won claim for the length of
/// its term, `release` gives a won claim up on resign, and `close` ends the
/// attempt.
///
/// # The four rules
///
/// Every backend keeps these; the core keeps its side (3 and 4) and its
/// tests check all four against a fault-injecting backend
/// (the memory backend of `election-testkit`), and the test kit's
/// conformance suite checks each backend.
///
/// 1. **The epoch comes with the win.** `try_claim` returns the epoch of the
///    term it won, decided in the same atomic step (one lock hold, one
///    transaction, one compare-and-set) that wins the claim. Every epoch is
///    strictly higher than every epoch handed out before it for the same
///    election, across crashes and restarts of candidates and backend.
/// 2. **A loss is reported before the claim can go to another candidate.**
///    `watch` calls [`TermReporter::lose`] before the backend could grant
///    the claim to anyone else. A claim that expires is renewed early, and
///    its validity is counted on a monotonic clock from the instant *before*
///    the renewal was sent, minus a safety margin.
/// 3. **Release is never called after a loss.** Once a loss has been
///    reported, the core does not call `release` for that attempt: the
///    claim may already belong to another candidate.
/// 4. **Close runs after every end.** Every attempt that `open` returned is
///    passed to `close` exactly once, last: after a resign, a loss, a drop,
///    a failed step, a cancellation, or an attempt that never won.
///
/// # Cancellation
///
/// The core may drop any future returned by these steps at any await point
/// (the user dropped the campaign). The backend must leave the attempt in a
/// state that `close` can clean up: in particular a claim won by a
/// `try_claim` that was cancelled just before it returned must be given up
/// by `close(attempt, End::Cancelled)`.
pub trait Claim: Send + Sync + 'static {
    /// The resources of one attempt (a file handle, a connection).
    type Attempt: Send + 'static;

    /// The election this claim competes in.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "worker-1")?;
    /// assert_eq!(claim.name().as_str(), "jobs");
    /// # Ok(()) }
    /// ```
    fn name(&self) -> &ElectionName;

    /// The identity of the candidate.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "worker-1")?;
    /// assert_eq!(claim.identity().as_str(), "worker-1");
    /// # Ok(()) }
    /// ```
    fn identity(&self) -> &Identity;

    /// A short name of the backend (`"file"`, `"sqlite"`, `"postgres"`,
    /// `"nats"`), the `backend` label of every metric the core records for
    /// this claim's campaigns and terms. The default, `"custom"`, is for
    /// backends outside this workspace that do not name themselves.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "worker-1")?;
    /// assert_eq!(claim.backend(), "memory");
    /// # Ok(()) }
    /// ```
    fn backend(&self) -> &'static str {
        "custom"
    }

    /// Prepares one attempt.
    ///
    /// ```
    /// use election_core::{Claim, End};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "a")?;
    /// // The steps as a campaign runs them (a backend's own tests drive them so):
    /// let mut attempt = claim.open().await?;
    /// let won = claim.try_claim(&mut attempt).await;
    /// // Rule 4: every opened attempt is closed, whatever happened.
    /// claim.close(attempt, if matches!(won, Ok(Some(_))) { End::Dropped } else { End::NeverWon });
    /// # won?;
    /// # Ok(()) }
    /// ```
    fn open(&self) -> impl Future<Output = Result<Self::Attempt, Error>> + Send;

    /// Tries the claim once: `Ok(Some(won))` with the epoch of the new term
    /// (rule 1), or `Ok(None)` while another candidate holds it.
    ///
    /// ```
    /// use election_core::{Claim, End};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "a")?;
    /// let mut attempt = claim.open().await?;
    /// match claim.try_claim(&mut attempt).await {
    ///     Ok(Some(won)) => {
    ///         println!("won term {}", won.epoch);
    ///         let released = claim.release(&mut attempt).await;
    ///         claim.close(attempt, if released.is_ok() { End::Resigned } else { End::Failed });
    ///         released?;
    ///     }
    ///     Ok(None) => claim.close(attempt, End::NeverWon), // another candidate holds it
    ///     Err(e) => {
    ///         claim.close(attempt, End::Failed);
    ///         return Err(e);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    fn try_claim(
        &self,
        attempt: &mut Self::Attempt,
    ) -> impl Future<Output = Result<Option<Won>, Error>> + Send;

    /// Waits until another `try_claim` is worth making: the backend's own
    /// wake-up (a freed lock, a deleted key) where it has one. The default
    /// sleeps for `poll_interval`. It may return early (spurious wake-ups
    /// are fine); it must not wait past the moment the claim became free
    /// by more than `poll_interval`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Claim, End, Won};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let claim = MemoryBackend::new().claim("jobs", "a")?;
    /// let mut attempt = claim.open().await?;
    /// // Try, wait for the backend's wake-up (or the poll interval), try again.
    /// let won: Result<Won, election_core::Error> = async {
    ///     loop {
    ///         if let Some(won) = claim.try_claim(&mut attempt).await? {
    ///             return Ok(won);
    ///         }
    ///         claim.wait(&mut attempt, Duration::from_millis(250)).await?;
    ///     }
    /// }
    /// .await;
    /// claim.close(attempt, if won.is_ok() { End::Dropped } else { End::Failed });
    /// println!("won term {}", won?.epoch);
    /// # Ok(()) }
    /// ```
    fn wait(
        &self,
        attempt: &mut Self::Attempt,
        poll_interval: Duration,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = attempt;
        async move {
            tokio::time::sleep(poll_interval).await;
            Ok(())
        }
    }

    /// Starts watching a won claim for the length of its term. Reports a
    /// loss through `reporter` (rule 2) and each renewal through
    /// [`TermReporter::renewed`]. The returned [`WatchGuard`] is dropped when the
    /// term ends.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// // The core starts the watch when a campaign wins; its reports reach the term:
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// backend.revoke("jobs"); // the memory backend's watch reports the loss
    /// assert_eq!(term.lost().await.epoch, term.epoch());
    /// # Ok(()) }
    /// ```
    fn watch(
        &self,
        attempt: &mut Self::Attempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, Error>;

    /// The commit-point check: proves, as exactly as the backend can, that
    /// the attempt's won claim is still held *now*, right before an
    /// irreversible write ([`Term::confirm`](crate::Term::confirm) and the
    /// lease set's guard call it).
    ///
    /// Return [`Error::NotHeld`] when the backend shows the claim taken and
    /// [`Error::Unavailable`] / [`Error::OutcomeUnknown`] when it cannot
    /// answer. The default answers `Ok(())`: right only for claims that
    /// cannot be taken away without the watch reporting it at once. (The
    /// file backend's OS lock can be, by replacing its file: it checks.)
    /// Backends with leases override it with one exact round trip (a
    /// conditional renewal).
    ///
    /// ```
    /// use election_core::{Claim, End, Error};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// let claim = backend.claim("jobs", "a")?;
    /// let mut attempt = claim.open().await?;
    /// let won = claim.try_claim(&mut attempt).await?;
    /// assert!(won.is_some());
    /// assert!(claim.confirm(&mut attempt).await.is_ok()); // held: write now
    /// backend.steal("jobs", "b")?; // the backend moved on without a word
    /// assert!(matches!(claim.confirm(&mut attempt).await, Err(Error::NotHeld { .. })));
    /// claim.close(attempt, End::Failed);
    /// # Ok(()) }
    /// ```
    fn confirm(
        &self,
        attempt: &mut Self::Attempt,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = attempt;
        async { Ok(()) }
    }

    /// Publishes `value` for the term this attempt won
    /// ([`Term::proclaim`](crate::Term::proclaim)), so that
    /// [`leader`](Claim::leader) and every observer show it, without a new
    /// term (ADR 0068). Called only while the term is live, never after a
    /// loss or an end.
    ///
    /// Must be conditional on this attempt still holding the term it won,
    /// with that epoch, in one atomic step of the backend: a proclaim of a
    /// deposed holder (its lease expired and taken over, its claim file
    /// replaced) must never show, least of all over the new holder's value.
    /// A term begins without a value: a value never outlives its term.
    ///
    /// Failure model: [`Error::NotHeld`] (or [`Error::HeldElsewhere`]) when
    /// the backend shows the term taken or ended (the core then marks the
    /// term lost); [`Error::Unavailable`] / [`Error::OutcomeUnknown`] when
    /// it cannot tell (the value may or may not show). The default answers
    /// [`ConfigError::Unsupported`]: a custom backend without a place for
    /// a value.
    ///
    /// ```
    /// use election_core::{Candidate, LeaderValue};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// let term = candidate.campaign().await?;
    /// term.proclaim("10.0.3.17:8443").await?; // calls Claim::proclaim
    /// let leader = candidate.leader().await?.ok_or("nobody leads")?;
    /// assert_eq!(leader.value, Some(LeaderValue::new("10.0.3.17:8443")?));
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    fn proclaim(
        &self,
        attempt: &mut Self::Attempt,
        value: &LeaderValue,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = (attempt, value);
        let backend = self.backend();
        async move {
            Err(Error::Config(ConfigError::Unsupported {
                what: "proclaim (publishing a value of the term)",
                backend,
            }))
        }
    }

    /// Gives a won claim up handing it to `successor`
    /// ([`Term::transfer`](crate::Term::transfer)): in the same atomic step
    /// that releases the claim, stores a [`Handover`](crate::Handover)
    /// that reserves the name for `successor` for `window`. Until a
    /// candidate has seen the handover for `window` on its monotonic clock,
    /// only `successor` may win the next term ([`try_claim`](Claim::try_claim)
    /// of any other candidate answers "held"); `successor`'s claim wins at
    /// once. Never called after a loss (rule 3); the attempt is closed with
    /// [`End::Resigned`] after it, or [`End::Failed`] if it failed (close
    /// gives up whatever may be held; the reservation may or may not
    /// stand, and is bounded by `window` either way).
    ///
    /// The default says [`ConfigError::Unsupported`], and
    /// [`transfers`](Claim::transfers) false: the core then refuses the
    /// transfer before it ends the term.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Claim, End, Identity};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let (a, b, c) = (backend.claim("jobs", "a")?, backend.claim("jobs", "b")?, backend.claim("jobs", "c")?);
    /// let mut held = a.open().await?;
    /// assert!(a.try_claim(&mut held).await?.is_some());
    /// a.release_to(&mut held, &Identity::new("b")?, Duration::from_secs(60)).await?;
    /// a.close(held, End::Resigned);
    /// let mut other = c.open().await?;
    /// assert!(c.try_claim(&mut other).await?.is_none()); // reserved for b
    /// c.close(other, End::NeverWon);
    /// let mut next = b.open().await?;
    /// assert!(b.try_claim(&mut next).await?.is_some());
    /// b.close(next, End::Dropped);
    /// # Ok(()) }
    /// ```
    fn release_to(
        &self,
        attempt: &mut Self::Attempt,
        successor: &Identity,
        window: Duration,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let _ = (attempt, successor, window);
        let backend = self.backend();
        async move {
            Err(Error::Config(ConfigError::Unsupported {
                what: "transfer (handing the term to a successor)",
                backend,
            }))
        }
    }

    /// Whether [`release_to`](Claim::release_to) is implemented: checked by
    /// [`Term::transfer`](crate::Term::transfer) before it ends the term,
    /// so a backend without it leaves the term untouched. Default: false.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// assert!(MemoryBackend::new().claim("jobs", "a")?.transfers());
    /// # Ok(()) }
    /// ```
    fn transfers(&self) -> bool {
        false
    }

    /// Gives a won claim up on resign. Never called after a loss (rule 3).
    ///
    /// ```
    /// use election_core::{Claim, End};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let claim = backend.claim("jobs", "a")?;
    /// let mut attempt = claim.open().await?;
    /// if claim.try_claim(&mut attempt).await?.is_some() {
    ///     let released = claim.release(&mut attempt).await;
    ///     // A failed release leaves the claim in doubt: close gives it up.
    ///     claim.close(attempt, if released.is_ok() { End::Resigned } else { End::Failed });
    ///     released?;
    /// } else {
    ///     claim.close(attempt, End::NeverWon);
    /// }
    /// assert!(backend.holder("jobs").is_none());
    /// # Ok(()) }
    /// ```
    fn release(
        &self,
        attempt: &mut Self::Attempt,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Ends an attempt and frees its resources (rule 4). Runs exactly once
    /// per attempt, last, also from `Drop`: it must not block for long. If
    /// `end` is not [`End::Resigned`] or [`End::Lost`], the attempt may still
    /// hold a claim and `close` must give it up (e.g. by closing the locked
    /// file, or by starting a conditional release in the background).
    ///
    /// ```
    /// use election_core::{Claim, End};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let claim = backend.claim("jobs", "a")?;
    /// let mut attempt = claim.open().await?;
    /// let won = claim.try_claim(&mut attempt).await?;
    /// assert!(won.is_some());
    /// // Dropped without a release: close gives the claim up.
    /// claim.close(attempt, End::Dropped);
    /// assert!(backend.holder("jobs").is_none());
    /// # Ok(()) }
    /// ```
    fn close(&self, attempt: Self::Attempt, end: End);

    /// Who leads now, or `Ok(None)` when nobody does. Backends that cannot
    /// tell return `Ok(None)` and say so in their docs.
    ///
    /// ```
    /// use election_core::{Candidate, Claim};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let observer = backend.claim("jobs", "observer")?;
    /// assert!(observer.leader().await?.is_none());
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// if let Some(leader) = observer.leader().await? {
    ///     println!("{} leads in term {}", leader.identity, leader.epoch);
    ///     assert_eq!(leader.epoch, term.epoch());
    /// }
    /// # Ok(()) }
    /// ```
    fn leader(&self) -> impl Future<Output = Result<Option<Leader>, Error>> + Send;
}
