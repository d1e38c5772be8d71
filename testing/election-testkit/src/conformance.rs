//! The conformance suite every backend runs against itself.
//!
//! A backend crate implements [`Backend`] for a factory of its candidates and
//! calls [`conformance_tests!`](crate::conformance_tests) in one of its
//! integration tests; that expands to one `#[tokio::test]` per case below.
//! Each case panics with a message naming what went wrong. Waits are bounded
//! by [`PATIENCE`], a generous bound for events, not a timing goal.
//!
//! A backend crate's `tests/conformance.rs` is one line (here with the
//! memory backend; [the crate's docs](crate#writing-your-own-backend) show a
//! complete custom backend that passes the suite):
//!
//! ```
//! election_testkit::conformance_tests!(election_testkit::memory::MemoryBackend::new());
//! # fn main() {}
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use election_core::{Candidate, Claim, ConfigError, End, Error, Leader, LeaderValue, Lease};

/// What [`Backend::observe`] hands the cases: the items of a backend's
/// `Election::observe`, forwarded by a task that owns the election
/// ([`observe_election`]).
pub type Observed = tokio::sync::mpsc::UnboundedReceiver<Result<Option<Leader>, Error>>;

/// Runs `election.observe(name, every)` on a task that owns `election`
/// and forwards every item: how a [`Backend`] implements
/// [`observe`](Backend::observe) in one line. The task ends when the
/// receiver is dropped (at its next item) or the stream ends.
///
/// ```
/// use std::time::Duration;
/// use election_testkit::conformance::observe_election;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut changes = observe_election(MemoryBackend::new(), "jobs", Duration::from_millis(20));
/// assert_eq!(changes.recv().await.map(|c| c.ok()), Some(Some(None))); // nobody leads
/// # }
/// ```
pub fn observe_election<E: election_core::Election + 'static>(
    election: E,
    name: &str,
    every: Duration,
) -> Observed {
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let name = name.to_owned();
    tokio::spawn(async move {
        match election.observe(&name, every).await {
            Err(e) => {
                let _ = tx.send(Err(e));
            }
            Ok(changes) => {
                let mut changes = std::pin::pin!(changes);
                while let Some(change) = changes.next().await {
                    if tx.send(change).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// How long a case waits for an event (a handover, a loss) before failing.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A backend under test: makes candidates for the cases.
pub trait Backend: Send + Sync {
    /// The backend's claim.
    type Claim: Claim;

    /// A candidate for election `name` with `identity`. Each call opens the
    /// backend afresh (a new handle on the same stored state), so epochs
    /// must carry over between candidates made by different calls.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// // Two calls, two handles on one stored state: the epochs carry over.
    /// let first = Candidate::new(backend.candidate("jobs", "a").await?).campaign().await?;
    /// first.resign().await?;
    /// let second = Candidate::new(backend.candidate("jobs", "a").await?).campaign().await?;
    /// assert!(second.epoch() > first.epoch());
    /// # Ok(()) }
    /// ```
    fn candidate(
        &self,
        name: &str,
        identity: &str,
    ) -> impl Future<Output = Result<Self::Claim, Error>> + Send;

    /// Takes the claim of `name` away from its holder the way this backend
    /// can lose one. Returns false if the backend has no such way (the case
    /// then only checks that nothing is lost).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.candidate("jobs", "a").await?).campaign().await?;
    /// if backend.take_away("jobs").await {
    ///     let lost = term.lost().await; // the watch reported it
    ///     assert!(!lost.reason.is_end());
    /// }
    /// # Ok(()) }
    /// ```
    fn take_away(&self, name: &str) -> impl Future<Output = bool> + Send;

    /// Builds candidates from bad configurations (empty name, bad location,
    /// bad timings, ...). Every one must fail with a typed error.
    ///
    /// ```
    /// use election_core::Error;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// for made in MemoryBackend::new().bad_configurations().await {
    ///     assert!(matches!(made, Err(Error::Config(_))), "a bad configuration was accepted");
    /// }
    /// # }
    /// ```
    fn bad_configurations(&self) -> impl Future<Output = Vec<Result<Self::Claim, Error>>> + Send;

    /// Every change of leadership of `name` as the backend's
    /// `Election::observe` reports it (a fresh handle on the stored
    /// state), or `None` if the backend offers no observer (the observing
    /// case then checks `leader()` only). Implement it with
    /// [`observe_election`].
    ///
    /// ```
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut changes = MemoryBackend::new().observe("jobs").await.expect("the memory backend observes");
    /// let first = changes.recv().await.expect("the current state first");
    /// assert!(first.expect("read").is_none(), "nobody leads yet");
    /// # }
    /// ```
    fn observe(&self, name: &str) -> impl Future<Output = Option<Observed>> + Send {
        let _ = name;
        async { None }
    }

    /// Revokes `name`'s current term on behalf of `by` through the
    /// backend's `Election::revoke` (a fresh handle), or `None` if the
    /// backend cannot revoke (the revoke case then checks nothing).
    ///
    /// ```
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let by = election_core::Identity::new("ops").expect("identity");
    /// // Nobody leads: nothing to revoke.
    /// let none = Backend::revoke(&MemoryBackend::new(), "jobs", &by).await;
    /// assert!(matches!(none, Some(Ok(None))));
    /// # }
    /// ```
    fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> impl Future<Output = Option<Result<Option<election_core::Revoked>, Error>>> + Send {
        let _ = (name, by);
        async { None }
    }

    /// The revocation of `name` the backend shows
    /// (`Election::revocation`, a fresh handle); `None` where
    /// [`revoke`](Backend::revoke) is.
    ///
    /// ```
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let none = Backend::revocation(&MemoryBackend::new(), "jobs").await;
    /// assert!(matches!(none, Some(Ok(None))));
    /// # }
    /// ```
    fn revocation(
        &self,
        name: &str,
    ) -> impl Future<Output = Option<Result<Option<election_core::Revocation>, Error>>> + Send {
        let _ = name;
        async { None }
    }

    /// Asks `name`'s holder, on behalf of `by`, to hand its term to `to`
    /// through the backend's `Election::request_transfer` (a fresh
    /// handle), or `None` if the backend cannot carry requests (the
    /// request case then checks nothing).
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (to, by) = (Identity::new("b").expect("id"), Identity::new("ops").expect("id"));
    /// // Nobody leads: nobody to ask.
    /// let none = Backend::request_transfer(&MemoryBackend::new(), "jobs", &to, &by).await;
    /// assert!(matches!(none, Some(Ok(None))));
    /// # }
    /// ```
    fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> impl Future<Output = Option<Result<Option<election_core::TransferRequest>, Error>>> + Send
    {
        let _ = (name, to, by);
        async { None }
    }

    /// Tells `name`'s holder that `candidate` waits with `priority`
    /// through the backend's `Election::prefer` (a fresh handle), or
    /// `None` if the backend cannot (the preference case then checks
    /// nothing).
    ///
    /// ```
    /// use election_core::Identity;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let me = Identity::new("zone-a/1").expect("id");
    /// let none = Backend::prefer(&MemoryBackend::new(), "jobs", &me, 3).await;
    /// assert!(matches!(none, Some(Ok(None))));
    /// # }
    /// ```
    fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> impl Future<Output = Option<Result<Option<election_core::TransferRequest>, Error>>> + Send
    {
        let _ = (name, candidate, priority);
        async { None }
    }

    /// The handover of `name` the backend shows (`Election::handover`, a
    /// fresh handle), or `None` if the backend shows none.
    ///
    /// ```
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let none = Backend::handover(&MemoryBackend::new(), "jobs").await;
    /// assert!(matches!(none, Some(Ok(None))));
    /// # }
    /// ```
    fn handover(
        &self,
        name: &str,
    ) -> impl Future<Output = Option<Result<Option<election_core::Handover>, Error>>> + Send {
        let _ = name;
        async { None }
    }

    /// Claims of `identity` for each of `names`, in order, on one opened
    /// backend (the slot cases make a claim per slot and per name a slot
    /// candidate reads: up to 65 at once). The default calls
    /// [`candidate`](Backend::candidate) per name; a backend whose
    /// `candidate` opens a connection or pool overrides it to open one.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_testkit::conformance::Backend;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let claims = MemoryBackend::new().claims(&["w#slot-0", "w#slot-1"], "a").await?;
    /// assert_eq!(claims[1].name().as_str(), "w#slot-1");
    /// # Ok(()) }
    /// ```
    fn claims(
        &self,
        names: &[&str],
        identity: &str,
    ) -> impl Future<Output = Result<Vec<Self::Claim>, Error>> + Send {
        async move {
            let mut claims = Vec::with_capacity(names.len());
            for name in names {
                claims.push(self.candidate(name, identity).await?);
            }
            Ok(claims)
        }
    }
}

async fn candidate<B: Backend>(b: &B, name: &str, id: &str) -> Candidate<B::Claim> {
    Candidate::new(
        b.candidate(name, id)
            .await
            .unwrap_or_else(|e| panic!("candidate {id} for {name}: {e:?}")),
    )
    .with_poll_interval(Duration::from_millis(20))
    .expect("valid poll interval")
}

/// `op`'s answer, asking again every 250 ms for up to a minute while the
/// backend does not answer yet (`Unavailable`: in CI a freshly started or
/// loaded NATS cluster timed out looking up its bucket), as a service
/// does; any other error panics with `what`.
pub(crate) async fn answered<T, Fut>(what: &str, mut op: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Result<T, Error>>,
{
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match op().await {
            Ok(answer) => return answer,
            Err(Error::Unavailable { .. }) if tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
}

pub(crate) async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {PATIENCE:?}"))
}

/// A lone candidate wins at once, and `leader()` shows it.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::uncontested_win(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn uncontested_win<B: Backend>(b: &B) {
    let a = candidate(b, "uncontested", "a").await;
    let term = within("uncontested campaign", a.campaign())
        .await
        .expect("campaign");
    assert_eq!(term.identity().as_str(), "a");
    assert!(!term.is_lost());
    assert!(
        term.epoch().is_term(),
        "epoch {} is not a term's epoch: terms get Epoch::FIRST (2) to Epoch::MAX; \
         {} belongs to unguarded writes",
        term.epoch(),
        election_core::Epoch::UNGUARDED
    );
    term.resign().await.expect("resign");
}

/// While one candidate leads, another's `try_campaign` and bounded campaign
/// return `None`, and its `campaign` waits until the leader resigns.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::second_candidate_waits(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn second_candidate_waits<B: Backend>(b: &B) {
    let a = candidate(b, "waits", "a").await;
    let bc = candidate(b, "waits", "b").await;
    let first = within("a campaign", a.campaign()).await.expect("a wins");
    assert!(
        bc.try_campaign().await.expect("try").is_none(),
        "b won while a led"
    );
    assert!(
        bc.campaign_timeout(Duration::from_millis(100))
            .await
            .expect("bounded")
            .is_none(),
        "b won a bounded campaign while a led"
    );
    let waiting = tokio::spawn(async move { bc.campaign().await });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "b won while a led");
    assert!(!first.is_lost());
    first.resign().await.expect("resign");
    let second = within("b after a resigned", waiting)
        .await
        .expect("join")
        .expect("b wins");
    assert!(second.epoch() > first.epoch());
    second.resign().await.expect("resign");
}

/// Resign hands the claim to a waiting candidate, with a higher epoch.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::resign_hands_over(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn resign_hands_over<B: Backend>(b: &B) {
    let a = candidate(b, "resign", "a").await;
    let bc = candidate(b, "resign", "b").await;
    let first = within("a campaign", a.campaign()).await.expect("a wins");
    let epoch = first.epoch();
    let waiting = tokio::spawn(async move { bc.campaign().await });
    first.resign().await.expect("resign");
    first.resign().await.expect("second resign is a no-op");
    let second = within("handover on resign", waiting)
        .await
        .expect("join")
        .expect("b wins");
    assert!(second.epoch() > epoch);
    assert_eq!(second.identity().as_str(), "b");
    second.resign().await.expect("resign");
}

/// Dropping a term without resigning hands the claim over too.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::drop_hands_over(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn drop_hands_over<B: Backend>(b: &B) {
    let a = candidate(b, "drop", "a").await;
    let bc = candidate(b, "drop", "b").await;
    let first = within("a campaign", a.campaign()).await.expect("a wins");
    let epoch = first.epoch();
    let waiting = tokio::spawn(async move { bc.campaign().await });
    drop(first);
    let second = within("handover on drop", waiting)
        .await
        .expect("join")
        .expect("b wins");
    assert!(second.epoch() > epoch);
    second.resign().await.expect("resign");
}

/// Epochs strictly increase: when the same candidate wins again, and across
/// re-opening the backend.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::epochs_strictly_increase(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn epochs_strictly_increase<B: Backend>(b: &B) {
    let mut last = None;
    for round in 0..3 {
        let a = candidate(b, "epochs", "a").await;
        for _ in 0..3 {
            let term = within("campaign", a.campaign()).await.expect("wins");
            assert!(term.epoch().is_term(), "epoch {}", term.epoch());
            if let Some(l) = last {
                assert!(
                    term.epoch() > l,
                    "round {round}: epoch {} after {l}",
                    term.epoch()
                );
            }
            last = Some(term.epoch());
            if round == 1 {
                drop(term);
            } else {
                term.resign().await.expect("resign");
            }
        }
        drop(a);
        let other = candidate(b, "epochs", "reopened").await;
        let term = within("reopened campaign", other.campaign())
            .await
            .expect("reopened wins");
        assert!(term.epoch() > last.expect("set"));
        last = Some(term.epoch());
        term.resign().await.expect("resign");
    }
}

/// Polls `future` until it has returned `Pending` `budget` times, then drops
/// it at that await point: `Some(output)` if it finished first, `None` if it
/// was cancelled. Tests use it to cancel a future at every await point.
///
/// ```
/// use election_core::Candidate;
/// use election_testkit::conformance::cancel_after;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let candidate = Candidate::new(backend.claim("jobs", "a")?);
/// // Drop the campaign at its 1st, 2nd, ... await point until it finishes.
/// for budget in 1.. {
///     match cancel_after(candidate.campaign(), budget).await {
///         Some(term) => {
///             term?.resign().await?;
///             break;
///         }
///         None => assert!(backend.holder("jobs").is_none(), "cancelled, yet held"),
///     }
/// }
/// # Ok(()) }
/// ```
pub async fn cancel_after<F: Future>(future: F, budget: usize) -> Option<F::Output> {
    CancelAfter {
        inner: Some(Box::pin(future)),
        budget,
    }
    .await
}

struct CancelAfter<F> {
    inner: Option<Pin<Box<F>>>,
    budget: usize,
}

impl<F: Future> Future for CancelAfter<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if this.budget == 0 {
            this.inner = None;
            return Poll::Ready(None);
        }
        match inner.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending => {
                this.budget -= 1;
                if this.budget == 0 {
                    this.inner = None; // drop at this await point
                    return Poll::Ready(None);
                }
                Poll::Pending
            }
        }
    }
}

/// Dropping a campaign at every await point leaves nothing held, whether
/// the claim was free (the campaign may have just won) or held (the
/// campaign was waiting).
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::cancellation_at_every_step_leaves_nothing_held(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn cancellation_at_every_step_leaves_nothing_held<B: Backend>(b: &B) {
    // Free claim: cancel after 0, 1, 2, ... pendings until the campaign
    // finishes within its budget.
    let checker = candidate(b, "cancel-free", "checker").await;
    let mut budget = 1;
    loop {
        let a = candidate(b, "cancel-free", "a").await;
        let done = CancelAfter {
            inner: Some(Box::pin(a.campaign())),
            budget,
        }
        .await;
        if let Some(term) = done {
            term.expect("campaign").resign().await.expect("resign");
            break;
        }
        let probe = within("probe after cancel", checker.campaign_timeout(PATIENCE))
            .await
            .expect("probe")
            .unwrap_or_else(|| panic!("cancelled at pending #{budget}: the claim stayed held"));
        probe.resign().await.expect("resign probe");
        budget += 1;
        assert!(budget < 10_000, "campaign never finished");
    }
    // Held claim: a waiting campaign is cancelled at each of its first
    // await points; after the leader resigns, a third candidate wins.
    let leader = candidate(b, "cancel-held", "leader").await;
    let term = within("leader campaign", leader.campaign())
        .await
        .expect("leader wins");
    for budget in 1..8 {
        let w = candidate(b, "cancel-held", "waiter").await;
        let done = CancelAfter {
            inner: Some(Box::pin(w.campaign())),
            budget,
        }
        .await;
        assert!(done.is_none(), "waiter won while the leader held");
    }
    term.resign().await.expect("resign");
    let third = candidate(b, "cancel-held", "third").await;
    let t = within("third after cancelled waiters", third.campaign())
        .await
        .expect("third wins");
    assert!(t.epoch() > term.epoch());
    t.resign().await.expect("resign");
}

/// When the backend takes the claim away, `lost()` resolves for every
/// waiter, `is_lost()` turns true, resign reports the loss, and the next
/// winner gets a higher epoch.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::lost_fires_when_taken_away(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn lost_fires_when_taken_away<B: Backend>(b: &B) {
    let a = candidate(b, "lost", "a").await;
    let term = std::sync::Arc::new(within("a campaign", a.campaign()).await.expect("a wins"));
    let epoch = term.epoch();
    let watchers: Vec<_> = (0..3)
        .map(|_| {
            let lease = term.lease();
            tokio::spawn(async move { lease.lost().await })
        })
        .collect();
    if !b.take_away("lost").await {
        assert!(!term.is_lost());
        return;
    }
    let lost = within("lost() after take-away", term.lost()).await;
    assert_eq!(lost.epoch, epoch);
    for w in watchers {
        let l = within("lost() in other tasks", w).await.expect("join");
        assert_eq!(l.epoch, epoch);
    }
    assert!(term.is_lost());
    match term.resign().await {
        Err(Error::Lost(l)) => assert_eq!(l.epoch, epoch),
        other => panic!("resign after a loss returned {other:?}"),
    }
    let bc = candidate(b, "lost", "b").await;
    let next = within("b after the loss", bc.campaign())
        .await
        .expect("b wins");
    assert!(next.epoch() > epoch);
    next.resign().await.expect("resign");
}

/// An operator's revoke (ADR 0111) ends the holder's term, fenced: the
/// revocation's epoch is above the holder's, so a fence raised to it
/// refuses the deposed holder's next write (with its term's token) before
/// any new leader wrote; the holder's watch reports the loss; readers show
/// nobody and the revocation; the next candidate wins with an epoch above
/// the revocation's, and the revocation is no longer shown. A second
/// revoke of a revoked name finds nothing to revoke.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::conformance::revoke_is_fenced_and_the_next_term_is_above_it(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn revoke_is_fenced_and_the_next_term_is_above_it<B: Backend>(b: &B) {
    use fencing::{Fence, MemoryFence, ResourceName, Token};
    let a = candidate(b, "revoked", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let held = term.epoch();
    // The holder's token, taken while it led: what its next write carries.
    let token = Token::issue(&term).expect("a token of a live term");
    let fence = MemoryFence::new();
    let resource = ResourceName::new("orders").expect("resource");
    fence
        .advance(&resource, token)
        .await
        .expect("the holder's own write");
    let by = election_core::Identity::new("ops/alice").expect("identity");
    let Some(revoked) = b.revoke("revoked", &by).await else {
        term.resign().await.expect("resign");
        return;
    };
    let revoked = revoked.expect("revoke").expect("a term held the name");
    assert_eq!(revoked.deposed.identity.as_str(), "a");
    assert_eq!(revoked.deposed.epoch, held);
    assert_eq!(revoked.revocation.by, by);
    assert!(
        revoked.revocation.epoch > held,
        "the revocation took no epoch above the holder's: {} after {held}",
        revoked.revocation.epoch
    );
    // A fence that saw the revocation refuses the deposed holder at once.
    fence
        .advance(&resource, Token::from_epoch(revoked.revocation.epoch))
        .await
        .expect("the revocation's mark");
    let late = fence
        .fenced(&resource, token, || async { "the deposed holder's write" })
        .await;
    assert!(
        matches!(late, Err(fencing::Error::Stale { .. })),
        "a fence at the revocation's epoch accepted the deposed holder's write: {late:?}"
    );
    // Rule 2: the holder's watch reports the loss.
    let lost = within("lost() after the revoke", term.lost()).await;
    assert_eq!(lost.epoch, held);
    assert!(!lost.reason.is_end(), "a revoke is a loss, not an end");
    let observer = candidate(b, "revoked", "observer").await;
    assert_eq!(
        observer.leader().await.expect("leader"),
        None,
        "a leader shown after the revoke"
    );
    let shown = b
        .revocation("revoked")
        .await
        .expect("a backend that revokes shows revocations")
        .expect("read");
    assert_eq!(
        shown.map(|r| (r.by, r.epoch)),
        Some((by.clone(), revoked.revocation.epoch))
    );
    match b.revoke("revoked", &by).await {
        Some(Ok(None)) => {}
        other => panic!("a second revoke of a revoked name: {other:?}"),
    }
    drop(term);
    let next = within(
        "b after the revoke",
        candidate(b, "revoked", "b").await.campaign(),
    )
    .await
    .expect("b wins");
    assert!(
        next.epoch() > revoked.revocation.epoch,
        "the next term {} is not above the revocation {}",
        next.epoch(),
        revoked.revocation.epoch
    );
    assert_eq!(
        b.revocation("revoked").await.map(|r| r.expect("read")),
        Some(None),
        "the revocation is still shown in the next term"
    );
    fence
        .fenced(&resource, Token::issue(&next).expect("token"), || async {})
        .await
        .expect("the next leader's write passes the fence");
    next.resign().await.expect("resign");
}

/// A transfer (ADR 0112) hands the name to the named successor: a
/// candidate that was already waiting does not win meanwhile, even though
/// the successor starts campaigning only after the handover; readers show
/// the handover, then the successor; the successor's epoch is above the
/// old term's, so a fence that saw the successor refuses the old holder;
/// when the successor resigns, the waiting candidate wins.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::conformance::transfer_hands_the_name_to_the_successor(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn transfer_hands_the_name_to_the_successor<B: Backend>(b: &B) {
    use fencing::{Fence, MemoryFence, ResourceName, Token};
    let a = candidate(b, "handed", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let old = term.epoch();
    let token = Token::issue(&term).expect("a token of a live term");
    let fence = MemoryFence::new();
    let resource = ResourceName::new("orders").expect("resource");
    fence.advance(&resource, token).await.expect("a's write");
    // c waits for the name before the handover.
    let c = candidate(b, "handed", "c").await;
    let waiting = tokio::spawn(async move { c.campaign().await });
    let successor = election_core::Identity::new("b").expect("identity");
    within(
        "a transfers",
        term.transfer(&successor, Duration::from_secs(120)),
    )
    .await
    .expect("a hands its term to b");
    let lost = term.lease().loss().expect("a's leases read lost");
    assert!(lost.reason.is_end(), "a transfer is an end: {lost:?}");
    // Anyone else trying now finds the name reserved.
    let d = candidate(b, "handed", "d").await;
    let tried = within("d tries once", d.try_campaign())
        .await
        .expect("d's try");
    assert!(tried.is_none(), "d won a name reserved for b");
    if let Some(shown) = b.handover("handed").await {
        let shown = shown.expect("handover read").expect("the handover shown");
        assert_eq!(
            (shown.from.as_str(), shown.to.as_str(), shown.epoch),
            ("a", "b", old)
        );
    }
    let next = within(
        "b after the transfer",
        candidate(b, "handed", "b").await.campaign(),
    )
    .await
    .expect("b wins");
    assert!(
        !waiting.is_finished(),
        "c won a name reserved for b: {:?}",
        waiting.await
    );
    assert!(
        next.epoch() > old,
        "b's term {} is not above {old}",
        next.epoch()
    );
    let observer = candidate(b, "handed", "observer").await;
    let shown = observer.leader().await.expect("leader").expect("a leader");
    assert_eq!((shown.identity.as_str(), shown.epoch), ("b", next.epoch()));
    if let Some(shown) = b.handover("handed").await {
        assert_eq!(
            shown.expect("handover read"),
            None,
            "a handover shown in b's term"
        );
    }
    fence
        .advance(&resource, Token::issue(&next).expect("b's token"))
        .await
        .expect("b's first write");
    let late = fence
        .fenced(&resource, token, || async { "a's write" })
        .await;
    assert!(
        matches!(late, Err(fencing::Error::Stale { .. })),
        "a fence that saw b accepted a's write: {late:?}"
    );
    next.resign().await.expect("b resigns");
    let third = within("c after b", waiting)
        .await
        .expect("join")
        .expect("c wins");
    assert!(third.epoch() > next.epoch());
    third.resign().await.expect("resign");
}

/// A transfer to a successor that never campaigns holds the name for its
/// window only: another candidate wins, but not before the window has
/// passed since the handover began.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::conformance::a_transfer_to_an_absent_successor_ends_with_its_window(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn a_transfer_to_an_absent_successor_ends_with_its_window<B: Backend>(b: &B) {
    let window = Duration::from_secs(2);
    let a = candidate(b, "absent", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let old = term.epoch();
    let c = candidate(b, "absent", "c").await;
    let waiting = tokio::spawn(async move { c.campaign().await });
    let ghost = election_core::Identity::new("ghost").expect("identity");
    let began = tokio::time::Instant::now();
    within("a transfers", term.transfer(&ghost, window))
        .await
        .expect("a hands its term to ghost");
    let next = within("c after the window", waiting)
        .await
        .expect("join")
        .expect("c wins");
    let waited = began.elapsed();
    assert!(
        waited >= window,
        "c won {waited:?} after a handover reserved for {window:?}"
    );
    assert!(next.epoch() > old);
    next.resign().await.expect("resign");
}

/// A transfer request reaches the holder's term, with the term's epoch
/// and who asked; with nobody leading there is nobody to ask. A bad
/// transfer (to the holder itself, a zero window) is refused before
/// anything changes: the term goes on.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::conformance::a_transfer_request_reaches_the_holder(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn a_transfer_request_reaches_the_holder<B: Backend>(b: &B) {
    let (to, by) = (
        election_core::Identity::new("b").expect("identity"),
        election_core::Identity::new("deploy/7").expect("identity"),
    );
    if let Some(none) = b.request_transfer("asked", &to, &by).await {
        assert_eq!(
            none.expect("request"),
            None,
            "a request stored with nobody leading"
        );
    }
    let a = candidate(b, "asked", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let me = election_core::Identity::new("a").expect("identity");
    assert!(matches!(
        term.transfer(&me, Duration::from_secs(5)).await,
        Err(Error::Config(_))
    ));
    assert!(matches!(
        term.transfer(&to, Duration::ZERO).await,
        Err(Error::Config(_))
    ));
    term.confirm()
        .await
        .expect("a bad transfer left the term as it was");
    let Some(stored) = b.request_transfer("asked", &to, &by).await else {
        term.resign().await.expect("resign");
        return;
    };
    let stored = stored.expect("request").expect("a term held the name");
    assert_eq!(
        (&stored.to, &stored.by, stored.epoch),
        (&to, &by, term.epoch())
    );
    let heard = within("the holder hears the request", term.transfer_requested()).await;
    assert_eq!(
        (&heard.to, &heard.by, heard.epoch),
        (&to, &by, term.epoch())
    );
    assert_eq!(term.transfer_request(), Some(heard));
    term.resign().await.expect("resign");
    match b.request_transfer("asked", &to, &by).await {
        Some(Ok(None)) => {}
        other => panic!("a request after the resign: {other:?}"),
    }
}

/// A preferred candidate (ADR 0112) is heard by a holder of a lower
/// priority, with its priority, and never by one of an equal priority;
/// the holder yields by transfer and the preferred candidate leads.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// election_testkit::conformance::a_preferred_candidate_above_the_holder_is_heard(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn a_preferred_candidate_above_the_holder_is_heard<B: Backend>(b: &B) {
    let a = candidate(b, "preferred", "a").await.with_priority(2);
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let (equal, higher) = (
        election_core::Identity::new("equal").expect("identity"),
        election_core::Identity::new("primary").expect("identity"),
    );
    let Some(stored) = b.prefer("preferred", &equal, 2).await else {
        term.resign().await.expect("resign");
        return;
    };
    let stored = stored.expect("prefer").expect("a term held the name");
    assert_eq!((stored.priority, stored.epoch), (Some(2), term.epoch()));
    let stored = b
        .prefer("preferred", &higher, 5)
        .await
        .expect("prefer")
        .expect("prefer")
        .expect("a term held the name");
    assert_eq!(stored.priority, Some(5));
    let heard = within("the holder hears the preferred candidate", term.preferred()).await;
    assert_eq!(
        (&heard.to, heard.priority),
        (&higher, Some(5)),
        "the first preferred candidate heard is not the one above the holder"
    );
    assert_eq!(
        term.transfer_request(),
        None,
        "a preference reported as a transfer request"
    );
    within(
        "a yields",
        term.transfer(&heard.to, Duration::from_secs(120)),
    )
    .await
    .expect("a yields to primary");
    let next = within(
        "primary after the yield",
        candidate(b, "preferred", "primary").await.campaign(),
    )
    .await
    .expect("primary wins");
    assert!(next.epoch() > term.epoch());
    next.resign().await.expect("resign");
}

/// `leader()` matches the holder: nobody, then the winner with its epoch,
/// then nobody after resign.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::leader_matches_holder(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn leader_matches_holder<B: Backend>(b: &B) {
    let a = candidate(b, "leader", "a").await;
    let observer = candidate(b, "leader", "observer").await;
    assert_eq!(
        observer.leader().await.expect("leader"),
        None,
        "a leader before any campaign"
    );
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let seen = observer.leader().await.expect("leader").expect("a leads");
    assert_eq!(seen.identity.as_str(), "a");
    assert_eq!(seen.epoch, term.epoch());
    term.resign().await.expect("resign");
    assert_eq!(
        observer.leader().await.expect("leader"),
        None,
        "a leader after resign"
    );
}

/// A term's lease reads lost once the term has ended by resign or drop
/// (with the end as its reason), from before the release is sent and on
/// into the next term, so no fencing token is issued from it.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::an_ended_terms_lease_reads_lost(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn an_ended_terms_lease_reads_lost<B: Backend>(b: &B) {
    let a = candidate(b, "ended", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let lease = term.lease();
    assert!(!lease.is_lost(), "a live term's lease reads lost");
    term.resign().await.expect("resign");
    assert!(lease.is_lost(), "a resigned term's lease reads live");
    let loss = lease
        .loss()
        .expect("a resigned term's lease gives a reason");
    assert!(
        matches!(loss.reason, election_core::LossReason::Resigned),
        "reason after resign: {loss:?}"
    );
    assert_eq!(loss.epoch, term.epoch());
    let bc = candidate(b, "ended", "b").await;
    let next = within("b after the resign", bc.campaign())
        .await
        .expect("b wins");
    assert!(lease.is_lost(), "the old lease reads live in the next term");
    assert!(!next.is_lost(), "the next term reads lost");
    let next_lease = next.lease();
    drop(next);
    assert!(next_lease.is_lost(), "a dropped term's lease reads live");
    assert!(
        next_lease.loss().is_some_and(|l| l.reason.is_end()),
        "reason after drop: {:?}",
        next_lease.loss()
    );
}

/// Sets its flag when dropped, so a blocking task never outlives a failed
/// case.
struct SetOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Dropping [`Term::lead`](election_core::Term::lead) while a task of the term is in
/// a synchronous section (it cannot see the abort) keeps the claim until the
/// task has really stopped: another candidate cannot win before, and wins
/// after with a higher epoch.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::dropped_lead_holds_the_claim_until_its_tasks_stopped(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn dropped_lead_holds_the_claim_until_its_tasks_stopped<B: Backend>(b: &B) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let a = candidate(b, "lead-drop", "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let epoch = term.epoch();
    let lease = term.lease();
    let release = Arc::new(AtomicBool::new(false));
    let _unblock = SetOnDrop(release.clone());
    let finished = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let lead = tokio::spawn({
        let (release, finished) = (release.clone(), finished.clone());
        term.lead(
            election_core::LeadOptions::default(),
            move |leadership| async move {
                leadership.spawn(async move {
                    let _ = started_tx.send(());
                    // Blocking work: it cannot see the abort.
                    while !release.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    finished.store(true, Ordering::Release);
                });
                std::future::pending::<()>().await
            },
        )
    });
    within("the task to start", started).await.expect("started");
    lead.abort();
    assert!(lead.await.expect_err("aborted").is_cancelled());
    assert!(
        lease.loss().is_some_and(|l| l.reason.is_end()),
        "the dropped lead's lease: {:?}",
        lease.loss()
    );

    let bc = candidate(b, "lead-drop", "b").await;
    assert!(
        within("b's try", bc.try_campaign())
            .await
            .expect("try")
            .is_none(),
        "b won while the dropped lead's task still ran"
    );
    assert_eq!(
        within("leader", bc.leader())
            .await
            .expect("leader")
            .map(|l| l.epoch),
        Some(epoch),
        "a still leads while its task runs"
    );
    let waiting = tokio::spawn(async move { bc.campaign().await });
    release.store(true, Ordering::Release);
    let next = within("b once the task stopped", waiting)
        .await
        .expect("join")
        .expect("campaign");
    assert!(
        finished.load(Ordering::Acquire),
        "b won before the task finished"
    );
    assert!(next.epoch() > epoch);
    next.resign().await.expect("resign");
}

/// A term publishes a value ([`Term::proclaim`](election_core::Term::proclaim))
/// that `leader()` shows with the same term, each proclaim replacing the
/// last; a value too long or with a line break is refused with a typed
/// error and changes nothing; the next term begins without a value (a
/// value never outlives its term).
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::proclaim_shows_with_the_term(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn proclaim_shows_with_the_term<B: Backend>(b: &B) {
    let a = candidate(b, "proclaim", "a").await;
    let observer = candidate(b, "proclaim", "observer").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let shown = |l: Option<Leader>| l.map(|l| (l.identity.to_string(), l.epoch, l.value));
    let value = |v: &str| Some(LeaderValue::new(v).expect("a valid value"));
    assert_eq!(
        shown(observer.leader().await.expect("leader")),
        Some(("a".into(), term.epoch(), None)),
        "a term begins without a value"
    );
    term.proclaim("10.0.3.17:8443").await.expect("proclaim");
    assert_eq!(
        shown(observer.leader().await.expect("leader")),
        Some(("a".into(), term.epoch(), value("10.0.3.17:8443"))),
        "the proclaimed value, in the same term"
    );
    term.proclaim("config v2 \u{2713}")
        .await
        .expect("proclaim again");
    let too_long = "x".repeat(LeaderValue::MAX_LEN + 1);
    match term.proclaim(&too_long).await {
        Err(Error::Config(ConfigError::ValueTooLong { len, max })) => {
            assert_eq!((len, max), (LeaderValue::MAX_LEN + 1, LeaderValue::MAX_LEN));
        }
        other => panic!("a value above the bound: {other:?}"),
    }
    let longest = "y".repeat(LeaderValue::MAX_LEN);
    assert!(
        matches!(term.proclaim("two\nlines").await, Err(Error::Config(_))),
        "a line break was accepted"
    );
    assert_eq!(
        shown(observer.leader().await.expect("leader")),
        Some(("a".into(), term.epoch(), value("config v2 \u{2713}"))),
        "refused values changed nothing"
    );
    term.proclaim(&longest)
        .await
        .expect("a value of MAX_LEN bytes");
    assert_eq!(
        shown(observer.leader().await.expect("leader")).and_then(|l| l.2),
        value(&longest)
    );
    assert!(!term.is_lost(), "proclaims do not end the term");
    term.resign().await.expect("resign");
    assert!(
        matches!(term.proclaim("after").await, Err(Error::NotHeld { .. })),
        "a proclaim after resign"
    );
    let bc = candidate(b, "proclaim", "b").await;
    let next = within("b campaign", bc.campaign()).await.expect("b wins");
    assert_eq!(
        shown(observer.leader().await.expect("leader")),
        Some(("b".into(), next.epoch(), None)),
        "the next term shows the last term's value"
    );
    next.resign().await.expect("resign");
}

/// A proclaim of a deposed holder is refused by the backend itself (not
/// only by the core's check of the term) and never shows: the claim of
/// `a` wins and proclaims at the [`Claim`] level (no term, so nothing but
/// the backend decides); its claim is taken away
/// ([`Backend::take_away`]); `a`'s next proclaim is refused and not shown;
/// `b` wins the next term and proclaims; `a`'s proclaim after that is
/// refused again and `leader()` still shows `b`'s value. Backends that
/// cannot take a claim away check the first half only.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::a_deposed_holders_proclaim_is_refused(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn a_deposed_holders_proclaim_is_refused<B: Backend>(b: &B) {
    let name = "stale-proclaim";
    let claim = b.candidate(name, "a").await.expect("claim of a");
    let mut attempt = claim.open().await.expect("open");
    let won = within("a wins", async {
        loop {
            if let Some(won) = claim.try_claim(&mut attempt).await.expect("try_claim") {
                return won;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let value = |v: &str| LeaderValue::new(v).expect("a valid value");
    claim
        .proclaim(&mut attempt, &value("a-1"))
        .await
        .expect("a proclaims while it holds the claim");
    let seen = claim.leader().await.expect("leader").expect("a leads");
    assert_eq!((seen.epoch, seen.value), (won.epoch, Some(value("a-1"))));
    if !b.take_away(name).await {
        claim.close(attempt, End::Resigned);
        return;
    }
    let refused = |r: Result<(), Error>, when: &str| match r {
        Err(Error::NotHeld { .. } | Error::HeldElsewhere { .. } | Error::Lost(_)) => {}
        other => panic!("a deposed holder's proclaim {when}: {other:?}"),
    };
    refused(
        claim.proclaim(&mut attempt, &value("stale-1")).await,
        "after its claim was taken",
    );
    if let Some(l) = claim.leader().await.expect("leader") {
        assert!(
            l.epoch != won.epoch && l.value != Some(value("stale-1")),
            "a deposed holder's value shows: {l:?}"
        );
    }
    let bc = candidate(b, name, "b").await;
    let next = within("b campaign", bc.campaign()).await.expect("b wins");
    assert!(next.epoch() > won.epoch);
    next.proclaim("b-1").await.expect("b proclaims");
    refused(
        claim.proclaim(&mut attempt, &value("stale-2")).await,
        "after the next term began",
    );
    let seen = claim.leader().await.expect("leader").expect("b leads");
    assert_eq!(
        (seen.identity.as_str(), seen.epoch, seen.value),
        ("b", next.epoch(), Some(value("b-1"))),
        "a stale proclaim overwrote the new leader's value"
    );
    claim.close(attempt, End::Lost);
    next.resign().await.expect("resign");
}

/// Observers see a proclaimed value: the backend's `observe` (where
/// [`Backend::observe`] offers it) reports the term with each new value,
/// then the vacancy after resign.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::observers_see_a_proclaimed_value(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn observers_see_a_proclaimed_value<B: Backend>(b: &B) {
    let name = "observed-value";
    let Some(mut changes) = b.observe(name).await else {
        return;
    };
    let a = candidate(b, name, "a").await;
    let term = within("a campaign", a.campaign()).await.expect("a wins");
    let epoch = term.epoch();
    let with = |v: Option<&'static str>| {
        move |l: &Option<Leader>| {
            l.as_ref()
                .is_some_and(|l| l.epoch == epoch && l.value.as_ref().map(LeaderValue::as_str) == v)
        }
    };
    observed(&mut changes, "the term without a value", with(None)).await;
    term.proclaim("v1").await.expect("proclaim");
    observed(&mut changes, "the term with v1", with(Some("v1"))).await;
    term.proclaim("v2").await.expect("proclaim");
    observed(&mut changes, "the term with v2", with(Some("v2"))).await;
    term.resign().await.expect("resign");
    observed(&mut changes, "the vacancy", |l: &Option<Leader>| {
        l.is_none()
    })
    .await;
}

/// Reads `changes` until one is `want`ed; panics after [`PATIENCE`].
async fn observed(changes: &mut Observed, what: &str, want: impl Fn(&Option<Leader>) -> bool) {
    within(what, async {
        loop {
            let change = changes.recv().await.expect("the observer ended");
            if want(&change.expect("an observed change")) {
                return;
            }
        }
    })
    .await
}

/// Bad configuration is refused with a typed error, never a panic.
///
/// ```
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() {
/// // One case by hand (conformance_tests! runs every case as a #[tokio::test]);
/// // it panics with a message naming what went wrong.
/// election_testkit::conformance::bad_configuration_is_refused(&MemoryBackend::new()).await;
/// # }
/// ```
pub async fn bad_configuration_is_refused<B: Backend>(b: &B) {
    let attempts = b.bad_configurations().await;
    assert!(
        !attempts.is_empty(),
        "the backend listed no bad configurations"
    );
    for (i, r) in attempts.into_iter().enumerate() {
        match r {
            Err(Error::Config(_)) => {}
            Err(other) => panic!("bad configuration #{i}: not a configuration error: {other:?}"),
            Ok(_) => panic!("bad configuration #{i} was accepted"),
        }
    }
    assert!(b.candidate("", "a").await.is_err(), "empty name accepted");
    assert!(
        b.candidate("x", "").await.is_err(),
        "empty identity accepted"
    );
}

/// Expands to one `#[tokio::test]` per conformance case, each with a
/// backend made by `$factory` (an expression evaluated per test).
///
/// ```
/// // tests/conformance.rs (needs tokio with `macros` and `rt-multi-thread`):
/// election_testkit::conformance_tests!(election_testkit::memory::MemoryBackend::new());
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@case $factory;
            uncontested_win,
            second_candidate_waits,
            resign_hands_over,
            drop_hands_over,
            epochs_strictly_increase,
            cancellation_at_every_step_leaves_nothing_held,
            lost_fires_when_taken_away,
            revoke_is_fenced_and_the_next_term_is_above_it,
            transfer_hands_the_name_to_the_successor,
            a_transfer_to_an_absent_successor_ends_with_its_window,
            a_transfer_request_reaches_the_holder,
            a_preferred_candidate_above_the_holder_is_heard,
            leader_matches_holder,
            bad_configuration_is_refused,
            an_ended_terms_lease_reads_lost,
            dropped_lead_holds_the_claim_until_its_tasks_stopped,
            proclaim_shows_with_the_term,
            a_deposed_holders_proclaim_is_refused,
            observers_see_a_proclaimed_value
        );
    };
    (@case $factory:expr; $($case:ident),*) => {
        $crate::__cases!(conformance, $factory; $($case),*);
        $crate::__cases!(slots, $factory;
            slots_n_candidates_all_hold,
            slots_one_more_waits_for_a_freed_slot,
            slots_bad_input_is_refused
        );
    };
}

/// One `#[tokio::test]` per case of `$module`: the suites' shared expansion.
#[doc(hidden)]
#[macro_export]
macro_rules! __cases {
    ($module:ident, $factory:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let backend = $factory;
                $crate::$module::$case(&backend).await;
            }
        )*
    };
}

/// The memory backend, as a [`Backend`] (used by the core's own tests).
impl Backend for crate::memory::MemoryBackend {
    type Claim = crate::memory::MemoryClaim;

    async fn candidate(&self, name: &str, identity: &str) -> Result<Self::Claim, Error> {
        self.claim(name, identity)
    }

    async fn take_away(&self, name: &str) -> bool {
        self.revoke(name)
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::Revoked>, Error>> {
        Some(election_core::Election::revoke(self, name, by).await)
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Option<Result<Option<election_core::Revocation>, Error>> {
        Some(election_core::Election::revocation(self, name).await)
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        Some(election_core::Election::request_transfer(self, name, to, by).await)
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Option<Result<Option<election_core::TransferRequest>, Error>> {
        Some(election_core::Election::prefer(self, name, candidate, priority).await)
    }

    async fn handover(&self, name: &str) -> Option<Result<Option<election_core::Handover>, Error>> {
        Some(election_core::Election::handover(self, name).await)
    }

    async fn observe(&self, name: &str) -> Option<Observed> {
        Some(observe_election(
            self.clone(),
            name,
            Duration::from_millis(20),
        ))
    }

    async fn bad_configurations(&self) -> Vec<Result<Self::Claim, Error>> {
        vec![
            self.claim("a/b", "x"),
            self.claim("ok", "bad\nidentity"),
            Candidate::new(self.claim("ok", "x").expect("valid"))
                .with_poll_interval(Duration::ZERO)
                .map(|_| unreachable!("zero poll interval accepted"))
                .map_err(Error::from),
        ]
    }
}

/// Fails if any of `keys` is held by both sets at this moment.
fn assert_disjoint<K: election_core::KeyedClaims>(
    a: &election_core::LeaseSet<K>,
    b: &election_core::LeaseSet<K>,
    keys: &[String],
) {
    for k in keys {
        // b first: a key moving from a to b can only make b true later.
        let by_b = b.held(k);
        let by_a = a.held(k);
        assert!(!(by_a && by_b), "{k} is held by both sets");
    }
}

/// Polls `f` until it holds; panics after [`PATIENCE`].
pub(crate) async fn until(what: &str, mut f: impl FnMut() -> bool) {
    within(what, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// The lease-set scenario every backend runs: two sets of one backend
/// (identities `node-a` and `node-b`) share `keys`. Each wins the half it
/// asks about first; then both want every key and, for `window`, nothing
/// may move (no key held by both, no term of `a` ended); then `a` closes:
/// `held` turns false at once and `b` takes every key. A task checks the
/// whole time that no key is held by both sets.
///
/// Returns the epochs `a` held its half in, for the caller's own check of
/// the backend's records (`b` must hold them in later terms).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use election_core::LeaseSet;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let a = Arc::new(LeaseSet::new(backend.keys("node-a")?));
/// let b = Arc::new(LeaseSet::new(backend.keys("node-b")?));
/// let keys: Vec<String> = (0..4).map(|i| format!("shard-{i}")).collect();
/// let a_epochs =
///     election_testkit::conformance::lease_sets_share_keys(a, b.clone(), &keys, Duration::from_millis(50)).await;
/// // Now check the backend's own records: b holds a's half in later terms.
/// for (key, epoch) in keys.iter().zip(a_epochs) {
///     assert!(b.epoch(key) > epoch);
/// }
/// b.close().await;
/// # Ok(()) }
/// ```
pub async fn lease_sets_share_keys<K: election_core::KeyedClaims>(
    a: std::sync::Arc<election_core::LeaseSet<K>>,
    b: std::sync::Arc<election_core::LeaseSet<K>>,
    keys: &[String],
    window: Duration,
) -> Vec<Option<election_core::Epoch>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let (first, second) = keys.split_at(keys.len() / 2);
    // a asks the first half first, b the second half: each wins its half.
    for k in first {
        assert!(!a.held(k), "the first ask answers false");
    }
    until("a to win the first half", || {
        first.iter().all(|k| a.held(k))
    })
    .await;
    for k in second {
        b.held(k);
    }
    until("b to win the second half", || {
        second.iter().all(|k| b.held(k))
    })
    .await;
    // Now both want every key.
    for k in keys {
        a.held(k);
        b.held(k);
    }
    for k in second {
        assert!(!a.ask(k).await.expect("ask"), "{k} is b's");
        assert_eq!(
            a.holder(k).expect("known").identity.as_str(),
            "node-b",
            "{k}"
        );
    }
    // A checker reads both sets over and over while the keys move.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let checks = std::sync::Arc::new(AtomicUsize::new(0));
    let checker = tokio::spawn({
        let (a, b, keys, stop, checks) = (
            a.clone(),
            b.clone(),
            keys.to_vec(),
            stop.clone(),
            checks.clone(),
        );
        async move {
            while !stop.load(Ordering::Acquire) {
                assert_disjoint(&a, &b, &keys);
                checks.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        }
    });
    // Both sets contend for every key: nothing may move (a window, so a
    // sleep; the checker runs meanwhile).
    let held_before: Vec<Option<election_core::Epoch>> = first.iter().map(|k| a.epoch(k)).collect();
    tokio::time::sleep(window).await;
    assert!(first.iter().all(|k| a.held(k)), "a kept its half");
    assert!(second.iter().all(|k| b.held(k)), "b kept its half");
    assert_eq!(
        first.iter().map(|k| a.epoch(k)).collect::<Vec<_>>(),
        held_before,
        "no term of a ended"
    );

    a.close().await;
    assert!(keys.iter().all(|k| !a.held(k)), "held is false at once");
    until("b to take every key", || keys.iter().all(|k| b.held(k))).await;
    stop.store(true, Ordering::Release);
    checker.await.expect("the checker found no key held twice");
    assert!(checks.load(Ordering::Relaxed) > 10, "the checker ran");
    held_before
}

/// The guard scenario every lease-set backend runs: `a` (identity
/// `node-a`) guards `key` and its write receives the key, `a`'s epoch and
/// identity; `b`'s guard of the same key is refused with
/// [`Error::HeldElsewhere`] naming `a` in that term, and `b`'s write does
/// not run. Returns the epoch, for the caller's check of the backend's
/// records; closes neither set.
///
/// ```
/// use election_core::LeaseSet;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let a = LeaseSet::new(backend.keys("node-a")?);
/// let b = LeaseSet::new(backend.keys("node-b")?);
/// let epoch = election_testkit::conformance::guard_names_the_holder(&a, &b, "shard-1").await;
/// // The backend's records agree:
/// assert_eq!(backend.holder("shard-1").map(|l| l.epoch), Some(epoch));
/// a.close().await;
/// b.close().await;
/// # Ok(()) }
/// ```
pub async fn guard_names_the_holder<K: election_core::KeyedClaims>(
    a: &election_core::LeaseSet<K>,
    b: &election_core::LeaseSet<K>,
    key: &str,
) -> election_core::Epoch {
    let (epoch, seen_key, identity) = a
        .guard(key, async |t| {
            (t.epoch(), t.key().to_string(), t.identity().cloned())
        })
        .await
        .expect("a's guard");
    assert_eq!(a.epoch(key), Some(epoch));
    assert_eq!(seen_key, key);
    assert_eq!(identity.expect("guarded").as_str(), "node-a");

    let mut ran = false;
    match b.guard(key, async |_t| ran = true).await {
        Err(Error::HeldElsewhere { name, holder }) => {
            assert_eq!(name.as_str(), key);
            let holder = holder.expect("the holder is known");
            assert_eq!(holder.identity.as_str(), "node-a");
            assert_eq!(holder.epoch, epoch);
        }
        other => panic!("expected HeldElsewhere, got {other:?}"),
    }
    assert!(!ran, "b's write must not run");
    epoch
}
