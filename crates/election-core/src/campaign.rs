//! The campaign: [`Candidate`] runs any [`Claim`] until it wins a [`Term`].

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::claim::End;
use crate::config_error::{HOUR, check_setting};
use crate::health::{CurrentTerm, HealthCheck};
use crate::term::{AttemptGuard, Held};
use crate::term_state::TermState;
use crate::{Claim, ConfigError, Error, Leader, Term, TermReporter};

/// The default time between two tries on backends without a wake-up.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// The longest pause a waiting campaign makes between two tries while the
/// backend keeps failing (see [`retry_pause`]).
pub const MAX_RETRY_PAUSE: Duration = Duration::from_secs(5);

/// The pause a waiting campaign makes after `failures` transient errors in
/// a row ([`Error::Unavailable`], [`Error::OutcomeUnknown`]) before it tries
/// again: the poll interval or [`DEFAULT_POLL_INTERVAL`], whichever is
/// shorter, doubled with each further failure, never above
/// [`MAX_RETRY_PAUSE`] (ADR 0084, 0092). A server that is down is asked
/// again soon at first, then every few seconds. A backend with a wake-up
/// and a long poll interval (an hourly poll behind PostgreSQL's
/// notifications, say) is asked again within [`DEFAULT_POLL_INTERVAL`] of
/// one failed request: it is not left without a leader for the poll
/// interval, nor for [`MAX_RETRY_PAUSE`], while its waiter sleeps through
/// a release's wake-up.
///
/// ```
/// use std::time::Duration;
/// use election_core::{DEFAULT_POLL_INTERVAL, MAX_RETRY_PAUSE, retry_pause};
///
/// let poll = Duration::from_millis(100);
/// assert_eq!(retry_pause(poll, 1), poll);
/// assert_eq!(retry_pause(poll, 2), poll * 2);
/// assert_eq!(retry_pause(poll, 3), poll * 4);
/// assert_eq!(retry_pause(poll, 50), MAX_RETRY_PAUSE);
/// let hourly = Duration::from_secs(3600);
/// assert_eq!(retry_pause(hourly, 1), DEFAULT_POLL_INTERVAL);
/// assert_eq!(retry_pause(hourly, 2), DEFAULT_POLL_INTERVAL * 2);
/// assert_eq!(retry_pause(hourly, 50), MAX_RETRY_PAUSE);
/// ```
pub fn retry_pause(poll_interval: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    poll_interval
        .min(DEFAULT_POLL_INTERVAL)
        .checked_mul(1u32 << doublings)
        .unwrap_or(MAX_RETRY_PAUSE)
        .min(MAX_RETRY_PAUSE)
}

/// What a campaign's retries look like now ([`Candidate::retries`]): how
/// many tries failed with a transient error, in a row and in all, and the
/// last such error.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RetryState {
    /// Transient errors in a row, since the last try that reached the
    /// backend (0 while it answers).
    pub in_a_row: u32,
    /// Transient errors in all, over every campaign of this candidate.
    pub total: u64,
    /// The last transient error, kept also after the backend answered
    /// again.
    pub last_error: Option<Error>,
    /// The pause before the next try, while `in_a_row > 0`
    /// ([`retry_pause`]).
    pub next_pause: Option<Duration>,
}

/// A candidate: runs campaigns for one [`Claim`] and hands the winner a
/// [`Term`].
///
/// The campaign is the same for every backend: open an attempt, try the
/// claim, wait (on the backend's wake-up, or the poll interval) and try
/// again until it wins or gives up, start the backend's watch on the won
/// claim, and hand it over as a term.
///
/// It never hands out a term the backend has already lost: a claim that
/// was lost, or whose validity ran out, before the term began is closed and
/// the campaign starts a new attempt.
///
/// ```
/// use election_core::{Candidate};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let a = Candidate::new(backend.claim("jobs", "a")?);
/// let b = Candidate::new(backend.claim("jobs", "b")?);
/// let term = a.campaign().await?;
/// assert!(b.try_campaign().await?.is_none());
/// term.resign().await?;
/// let next = b.try_campaign().await?.expect("free after resign");
/// assert!(next.epoch() > term.epoch());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Candidate<C: Claim> {
    claim: Arc<C>,
    poll_interval: Duration,
    on_retry: Option<RetryReport>,
    /// Called when a campaign first waits ([`Candidate::on_wait`]).
    on_wait: Option<WaitReport>,
    /// The retries so far ([`Candidate::retries`]).
    retries: Arc<std::sync::Mutex<RetryState>>,
    /// The term handed out last, for health checks.
    current: CurrentTerm,
    /// False for a lease set's per-key candidates: no per-key series.
    instrumented: bool,
    /// The priority of its terms ([`Candidate::with_priority`]).
    priority: u32,
}

/// What [`Candidate::on_retry`] calls: the transient error a waiting
/// campaign is about to ride out.
#[derive(Clone)]
struct RetryReport(Arc<dyn Fn(&Error) + Send + Sync>);

impl std::fmt::Debug for RetryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryReport")
    }
}

/// What [`Candidate::on_wait`] calls when a campaign first waits.
#[derive(Clone)]
struct WaitReport(Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for WaitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WaitReport")
    }
}

impl<C: Claim> Candidate<C> {
    /// A candidate for `claim`, with the default poll interval
    /// ([`DEFAULT_POLL_INTERVAL`]).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("nightly-report", "worker-1")?);
    /// let term = candidate.campaign().await?;
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn new(claim: C) -> Self {
        Candidate {
            claim: Arc::new(claim),
            poll_interval: DEFAULT_POLL_INTERVAL,
            on_retry: None,
            on_wait: None,
            retries: Arc::default(),
            current: CurrentTerm::default(),
            instrumented: true,
            priority: 0,
        }
    }

    /// A candidate whose terms have `priority` (0 by default): a term hears
    /// of a waiting preferred candidate ([`Term::preferred`](crate::Term::preferred))
    /// only if that candidate's priority is above this. Campaigning is not
    /// changed by it: who wins a free name is the race it always was; a
    /// preferred candidate asks the holder through
    /// [`Election::prefer`](crate::Election::prefer) while it waits, and the
    /// holder decides whether to yield (ADR 0112).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "zone-a/1")?).with_priority(10);
    /// assert_eq!(candidate.priority(), 10);
    /// # Ok(()) }
    /// ```
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// The priority of this candidate's terms ([`with_priority`](Self::with_priority)).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// assert_eq!(Candidate::new(MemoryBackend::new().claim("jobs", "a")?).priority(), 0);
    /// # Ok(()) }
    /// ```
    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// A candidate whose terms record no metrics (a lease set's per-key
    /// campaign: the set counts its keys, labelled per set, not per key).
    pub(crate) fn without_metrics(mut self) -> Self {
        self.instrumented = false;
        self
    }

    /// A liveness probe over every term this candidate wins (from any
    /// campaign, also one begun before this call): unhealthy while a term
    /// it handed out reads as leading but no renewal of it has landed for
    /// longer than `bound`. See [`HealthCheck`] for what "leading" means
    /// and how to pick the bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// let health = candidate.health_check(Duration::from_secs(10));
    /// let _term = candidate.campaign().await?;
    /// assert!(health.check().is_healthy());
    /// # Ok(()) }
    /// ```
    pub fn health_check(&self, bound: Duration) -> HealthCheck {
        HealthCheck::candidate(self.current.clone(), bound)
    }

    /// How the campaign's tries fare: transient errors in a row and in all,
    /// the last one and the pause before the next try. A program can show
    /// it (a status page, a readiness probe) or act on it (give up after
    /// N failures by dropping the campaign).
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::{MemoryBackend, Step};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// backend.fail(Step::TryClaim, 2); // the first two tries find the backend down
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// let term = candidate.campaign().await?;
    /// let retries = candidate.retries();
    /// assert_eq!((retries.in_a_row, retries.total), (0, 2));
    /// assert!(retries.last_error.is_some());
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn retries(&self) -> RetryState {
        crate::lock(&self.retries).clone()
    }

    /// Calls `report` with each transient error ([`Error::Unavailable`],
    /// [`Error::OutcomeUnknown`]) a waiting campaign rides out, before it
    /// pauses ([`retry_pause`]: the poll interval, at most
    /// [`DEFAULT_POLL_INTERVAL`], doubled with each failure in a row, at
    /// most [`MAX_RETRY_PAUSE`]) and tries again;
    /// [`Candidate::retries`] then counts it: a program can say why its
    /// campaign is not progressing (a full disk, a server down) instead of
    /// waiting silently. `report` runs on the campaign's task and must not
    /// block. Errors that end the campaign are returned, not reported here.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::{MemoryBackend, Step};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// backend.fail(Step::TryClaim, 1); // the first try finds the backend down
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?)
    ///     .on_retry(|e| eprintln!("campaign still waiting: {e}"));
    /// let term = candidate.campaign().await?; // reports once, then wins
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn on_retry(mut self, report: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(RetryReport(Arc::new(report)));
        self
    }

    /// Calls `report` when a campaign first finds the claim held by
    /// another candidate and begins to wait: once per call of
    /// [`campaign`](Candidate::campaign) or
    /// [`campaign_timeout`](Candidate::campaign_timeout) (never for
    /// [`try_campaign`](Candidate::try_campaign), which does not wait). A
    /// tool says there whom it waits for ([`Candidate::leader`]). `report`
    /// runs on the campaign's task: it must not block.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let held = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let waits = Arc::new(AtomicUsize::new(0));
    /// let seen = waits.clone();
    /// let candidate = Candidate::new(backend.claim("jobs", "b")?)
    ///     .on_wait(move || { seen.fetch_add(1, Ordering::Relaxed); });
    /// assert!(candidate.campaign_timeout(Duration::from_millis(50)).await?.is_none());
    /// assert_eq!(waits.load(Ordering::Relaxed), 1); // once, however many tries
    /// held.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn on_wait(mut self, report: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_wait = Some(WaitReport(Arc::new(report)));
        self
    }

    /// Sets the time between two tries on backends without a wake-up (and
    /// the backstop on those with one). Must be between 1 ms and 1 hour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let candidate =
    ///     Candidate::new(backend.claim("jobs", "a")?).with_poll_interval(Duration::from_secs(1))?;
    /// # let _ = candidate;
    /// assert!(Candidate::new(backend.claim("jobs", "b")?).with_poll_interval(Duration::ZERO).is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, ConfigError> {
        self.poll_interval = check_poll_interval(poll_interval)?;
        Ok(self)
    }

    /// A candidate whose terms are recorded in `current` (shared by a
    /// [`SlotCandidate`](crate::SlotCandidate)'s slots, for one health
    /// check over all of them).
    pub(crate) fn sharing_current(mut self, current: CurrentTerm) -> Self {
        self.current = current;
        self
    }

    /// Sets an interval the caller has already validated.
    pub(crate) fn with_poll_interval_unchecked(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = poll_interval;
        self
    }

    /// The interval between attempts while another holds the claim.
    pub(crate) fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// The claim this candidate campaigns with.
    ///
    /// ```
    /// use election_core::{Candidate, Claim};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let candidate = Candidate::new(MemoryBackend::new().claim("jobs", "worker-1")?);
    /// println!("{} campaigns in {}", candidate.claim().identity(), candidate.claim().name());
    /// # Ok(()) }
    /// ```
    pub fn claim(&self) -> &C {
        &self.claim
    }

    /// Campaigns until elected.
    ///
    /// Cancel safety: dropping the future at any await point never leaves a
    /// won claim held: the attempt is closed with [`End::Cancelled`], which
    /// gives up a claim won an instant before.
    ///
    /// Failure model: a failed backend step closes the attempt, so nothing
    /// is held. While the backend is unreachable ([`Error::Unavailable`],
    /// [`Error::OutcomeUnknown`]) the campaign keeps trying every poll
    /// interval, logging each failure, and resumes when the backend is back
    /// (bound it with [`campaign_timeout`](Candidate::campaign_timeout)).
    /// Other errors ([`Error::Config`], [`Error::Corrupt`], ...) are
    /// returned at once.
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert_eq!(term.epoch().get(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self) -> Result<Term<C>, Error> {
        let term = self.run(None, false).await?;
        Ok(term.expect("an unbounded campaign only returns with a term"))
    }

    /// Tries the claim once: `Ok(None)` if another candidate holds it.
    ///
    /// Cancel safety as [`campaign`](Candidate::campaign). Failure model:
    /// every error is returned, [`Error::Unavailable`] included, so the
    /// caller can tell "another candidate holds it" from "the backend cannot
    /// be reached".
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let first = Candidate::new(backend.claim("jobs", "a")?).try_campaign().await?;
    /// assert!(first.is_some());
    /// let second = Candidate::new(backend.claim("jobs", "b")?).try_campaign().await?;
    /// assert!(second.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_campaign(&self) -> Result<Option<Term<C>>, Error> {
        self.run(None, true).await
    }

    /// Campaigns for at most `timeout`: `Ok(None)` if another candidate
    /// still holds the claim then.
    ///
    /// Cancel safety and failure model as [`campaign`](Candidate::campaign).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let _leader = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let b = Candidate::new(backend.claim("jobs", "b")?);
    /// assert!(b.campaign_timeout(Duration::from_millis(20)).await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Option<Term<C>>, Error> {
        self.run(Some(Instant::now() + timeout), false).await
    }

    /// Who leads now (identity and epoch), or `Ok(None)` if nobody does,
    /// as far as the backend can tell.
    ///
    /// Cancel safety: cancel safe; it only reads.
    ///
    /// ```
    /// # use election_core::{Candidate};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let a = Candidate::new(backend.claim("jobs", "a")?);
    /// assert!(a.leader().await?.is_none());
    /// let term = a.campaign().await?;
    /// assert_eq!(a.leader().await?.map(|l| l.epoch), Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Leader>, Error> {
        self.claim.leader().await
    }

    /// Errors a waiting campaign rides out: the backend could not be
    /// reached, or a step's outcome is unknown (nothing is held either way:
    /// the attempt is closed, which gives up whatever it may hold).
    fn transient(e: &Error) -> bool {
        matches!(e, Error::Unavailable { .. } | Error::OutcomeUnknown { .. })
    }

    /// Counts a transient error and waits the backoff's pause (not past
    /// `deadline`); false if the deadline has passed.
    async fn pause_after(&self, e: &Error, deadline: Option<Instant>) -> bool {
        let pause = {
            let mut retries = crate::lock(&self.retries);
            retries.in_a_row = retries.in_a_row.saturating_add(1);
            retries.total = retries.total.saturating_add(1);
            retries.last_error = Some(e.clone());
            let pause = retry_pause(self.poll_interval, retries.in_a_row);
            retries.next_pause = Some(pause);
            pause
        };
        tracing::warn!(name = %self.claim.name(), identity = %self.claim.identity(), error = %e, ?pause, "backend unavailable; campaign retries");
        if let Some(report) = &self.on_retry {
            (report.0)(e);
        }
        self.pause_for(pause, deadline).await
    }

    /// The backend answered: no failures in a row.
    fn answered(&self) {
        let mut retries = crate::lock(&self.retries);
        retries.in_a_row = 0;
        retries.next_pause = None;
    }

    /// Waits one poll interval, at most [`DEFAULT_POLL_INTERVAL`] (the
    /// first [`retry_pause`]; ADR 0084, 0092), not past `deadline`; false if
    /// the deadline has passed.
    async fn pause_until(&self, deadline: Option<Instant>) -> bool {
        self.pause_for(retry_pause(self.poll_interval, 1), deadline)
            .await
    }

    /// Waits `pause`, not past `deadline`; false if the deadline has
    /// passed.
    async fn pause_for(&self, pause: Duration, deadline: Option<Instant>) -> bool {
        let until = Instant::now() + pause;
        tokio::time::sleep_until(deadline.map_or(until, |d| until.min(d))).await;
        !passed(deadline)
    }

    async fn run(&self, deadline: Option<Instant>, once: bool) -> Result<Option<Term<C>>, Error> {
        let claim = &self.claim;
        let started = Instant::now();
        tracing::info!(name = %claim.name(), identity = %claim.identity(), "campaign");
        if self.instrumented {
            // From the first second: a waiting candidate shows 0, so
            // "nobody leads" can be alerted on after a restart.
            crate::instrument::campaigning(claim.name(), claim.backend());
        }
        let mut waited_before = false;
        loop {
            let attempt = match claim.open().await {
                Ok(a) => a,
                Err(e) if !once && Self::transient(&e) => {
                    if !self.pause_after(&e, deadline).await {
                        return Ok(None);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut guard = AttemptGuard {
                claim: claim.clone(),
                attempt: Some(attempt),
            };
            loop {
                let won = match claim.try_claim(guard.attempt()).await {
                    Ok(won) => {
                        self.answered();
                        won
                    }
                    Err(e) if !once && Self::transient(&e) => {
                        guard.close(End::Failed);
                        if !self.pause_after(&e, deadline).await {
                            return Ok(None);
                        }
                        break;
                    }
                    Err(e) => {
                        guard.close(End::Failed);
                        return Err(e);
                    }
                };
                let Some(won) = won else {
                    if once || passed(deadline) {
                        guard.close(End::NeverWon);
                        return Ok(None);
                    }
                    if !waited_before {
                        waited_before = true;
                        if let Some(WaitReport(report)) = &self.on_wait {
                            report();
                        }
                    }
                    let wait = claim.wait(guard.attempt(), self.poll_interval);
                    let waited = match deadline {
                        None => wait.await,
                        Some(d) => tokio::time::timeout_at(d, wait).await.unwrap_or(Ok(())),
                    };
                    if let Err(e) = waited {
                        guard.close(End::Failed);
                        return Err(e);
                    }
                    continue;
                };
                let state = TermState::with_metrics(
                    claim.name().clone(),
                    claim.identity().clone(),
                    won.epoch,
                    won.valid_until,
                    claim.backend(),
                    self.instrumented,
                );
                state
                    .priority
                    .store(self.priority, std::sync::atomic::Ordering::Release);
                let watch =
                    match claim.watch(guard.attempt(), won, TermReporter::new(state.clone())) {
                        Ok(w) => w,
                        Err(e) => {
                            guard.close(End::Failed);
                            return Err(e);
                        }
                    };
                let held = Held {
                    guard,
                    watch: Some(watch),
                    state: state.clone(),
                };
                if !state.is_live() {
                    // Lost before the term began (a zombie claim): never hand
                    // it out. Dropping `held` closes it with End::Lost.
                    tracing::warn!(name = %claim.name(), identity = %claim.identity(), epoch = won.epoch.get(), "claim lost before its term began; new attempt");
                    drop(held);
                    if once || passed(deadline) {
                        return Ok(None);
                    }
                    // Back off before the new attempt, so a backend that
                    // keeps losing claims does not make the campaign spin.
                    self.pause_until(deadline).await;
                    break;
                }
                tracing::info!(name = %claim.name(), identity = %claim.identity(), epoch = won.epoch.get(), "elected");
                state.begin_leading(started.elapsed());
                *crate::lock(&self.current) = Arc::downgrade(&state);
                return Ok(Some(Term::new(held)));
            }
        }
    }
}

/// A poll interval between 1 ms and 1 hour, or why not.
/// True once `deadline` has passed.
fn passed(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

pub(crate) fn check_poll_interval(d: Duration) -> Result<Duration, ConfigError> {
    let ok = (Duration::from_millis(1)..=HOUR).contains(&d);
    check_setting("poll_interval", d, ok, "not between 1ms and 1h")
}
