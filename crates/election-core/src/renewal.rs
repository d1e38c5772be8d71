//! Rule 2 in one place: [`Renewal`], the pure state machine every renewal
//! loop runs (single claims and lease sets alike), its [`RenewalPolicy`],
//! and [`renew_until_lost`], the one driver that runs it on tokio time.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::config_error::check_setting;
use crate::instrument::{RenewalMetrics, failure_kind};
use crate::{ConfigError, Error, LossReason, TermReporter};

/// How a claim that expires is renewed: the numbers [`Renewal`] decides by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewalPolicy {
    validity: Duration,
    renew_every: Duration,
    retry_after: Duration,
    attempt_timeout: Duration,
}

impl RenewalPolicy {
    /// A policy for a claim known to be held for `validity` (the TTL minus
    /// the safety margin) after a renewal is *sent*, renewed every
    /// `renew_every` (below `validity`, above zero). A failed or timed-out
    /// renewal is retried after a quarter of `renew_every` (at least 1 ms);
    /// one attempt may take until the deadline at most. Change both with
    /// [`with_retry_after`](Self::with_retry_after) and
    /// [`with_attempt_timeout`](Self::with_attempt_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::RenewalPolicy;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let ttl = Duration::from_secs(10);
    /// let validity = ttl - ttl / 10; // the TTL less a safety margin
    /// let policy = RenewalPolicy::new(validity, Duration::from_secs(3))?;
    /// assert_eq!(policy.validity(), Duration::from_secs(9));
    /// assert!(RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(9)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(validity: Duration, renew_every: Duration) -> Result<Self, ConfigError> {
        if renew_every.is_zero() || renew_every >= validity {
            return Err(ConfigError::BadSetting {
                setting: "renew_every",
                reason: format!("{renew_every:?} is not above zero and below {validity:?}"),
            });
        }
        Ok(RenewalPolicy {
            validity,
            renew_every,
            retry_after: (renew_every / 4).max(Duration::from_millis(1)),
            attempt_timeout: validity,
        })
    }

    /// Sets the wait before a failed or timed-out renewal is retried
    /// (above zero).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::RenewalPolicy;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?
    ///     .with_retry_after(Duration::from_millis(200))?;
    /// # let _ = policy;
    /// # Ok(()) }
    /// ```
    pub fn with_retry_after(mut self, retry_after: Duration) -> Result<Self, ConfigError> {
        let ok = !retry_after.is_zero();
        self.retry_after = check_setting("retry_after", retry_after, ok, "zero")?;
        Ok(self)
    }

    /// Sets the longest time one renewal may take (above zero); it is cut
    /// to the time left before the deadline in any case.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::RenewalPolicy;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// // One renewal may take 2 s at most (and never past the deadline).
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?
    ///     .with_attempt_timeout(Duration::from_secs(2))?;
    /// # let _ = policy;
    /// # Ok(()) }
    /// ```
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        let ok = !timeout.is_zero();
        self.attempt_timeout = check_setting("attempt_timeout", timeout, ok, "zero")?;
        Ok(self)
    }

    /// How long a renewal holds the claim, counted from before it was sent.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::RenewalPolicy;
    /// use tokio::time::Instant;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
    /// let sent = Instant::now(); // taken right before the renewal was sent
    /// let valid_until = sent + policy.validity();
    /// # let _ = valid_until;
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// The renew interval.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::RenewalPolicy;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
    /// println!("renewing every {:?}", policy.renew_every());
    /// # Ok(()) }
    /// ```
    pub fn renew_every(&self) -> Duration {
        self.renew_every
    }
}

/// What happened, as the driver of a [`Renewal`] tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Nothing new: the driver woke up (a sleep ended) and asks what next.
    Due,
    /// The renewal sent at `sent` landed: the claim is held for the
    /// policy's validity from `sent`.
    Renewed {
        /// The instant taken right *before* the renewal was sent.
        sent: Instant,
    },
    /// The backend refused the renewal: it shows another holder or none.
    Refused,
    /// The renewal failed; it did not land (or its outcome is unknown).
    Failed,
    /// The renewal ran out of its time budget: its outcome is unknown.
    TimedOut,
}

/// What the driver of a [`Renewal`] does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send one renewal now, taking `Instant::now()` right before, and give
    /// it at most `budget`; then report its outcome.
    Renew {
        /// The attempt's time budget: never past the deadline.
        budget: Duration,
    },
    /// Sleep until this instant, then report [`Input::Due`].
    SleepUntil(Instant),
    /// The claim is lost: report it now (rule 2). Every later decision is
    /// `Lose` too.
    Lose(Loss),
}

/// Why a [`Renewal`] lost its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// The deadline of the last renewal known to have landed has come.
    Expired,
    /// The backend refused a renewal.
    Refused,
}

/// Rule 2 as one pure state machine: when to renew, when to retry, and the
/// moment a claim counts as lost, from the caller's instants.
///
/// The claim is known held until its *deadline*: the validity counted from
/// before the last renewal known to have landed was sent (at first, the
/// win's `valid_until`). [`decide`](Renewal::decide) answers
/// [`Next::Lose`] at (never after) the deadline and never earlier unless a
/// renewal was refused; a failed or timed-out renewal never moves the
/// deadline; a renewal's budget never reaches past it.
///
/// ```
/// use std::time::Duration;
/// use election_core::renewal::{Input, Loss, Next, Renewal, RenewalPolicy};
/// use tokio::time::Instant;
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let policy = RenewalPolicy::new(Duration::from_secs(8), Duration::from_secs(2))?;
/// let t0 = Instant::now();
/// let mut r = Renewal::new(policy, t0 + Duration::from_secs(8));
/// assert_eq!(r.decide(Input::Due, t0), Next::SleepUntil(t0 + Duration::from_secs(2)));
/// let t2 = t0 + Duration::from_secs(2);
/// assert!(matches!(r.decide(Input::Due, t2), Next::Renew { .. }));
/// // It timed out: unknown, so the deadline stays at t0 + 8s.
/// r.decide(Input::TimedOut, t0 + Duration::from_secs(3));
/// assert_eq!(r.deadline(), t0 + Duration::from_secs(8));
/// assert_eq!(r.decide(Input::Due, t0 + Duration::from_secs(8)), Next::Lose(Loss::Expired));
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Renewal {
    policy: RenewalPolicy,
    deadline: Instant,
    next: Instant,
    lost: Option<Loss>,
}

impl Renewal {
    /// A machine for a claim won (or last renewed) with `valid_until`,
    /// counted from before the winning request was sent.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::renewal::{Input, Next, Renewal, RenewalPolicy};
    /// use tokio::time::Instant;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
    /// let sent = Instant::now(); // before the winning request was sent
    /// let mut renewal = Renewal::new(policy, sent + policy.validity());
    /// assert_eq!(renewal.decide(Input::Due, sent), Next::SleepUntil(sent + Duration::from_secs(3)));
    /// # Ok(()) }
    /// ```
    pub fn new(policy: RenewalPolicy, valid_until: Instant) -> Self {
        let sent = valid_until
            .checked_sub(policy.validity)
            .unwrap_or(valid_until);
        Renewal {
            policy,
            deadline: valid_until,
            next: sent + policy.renew_every,
            lost: None,
        }
    }

    /// The deadline: the claim is known held until then, no longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::renewal::{Input, Renewal, RenewalPolicy};
    /// use tokio::time::Instant;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
    /// let t0 = Instant::now();
    /// let mut renewal = Renewal::new(policy, t0 + Duration::from_secs(9));
    /// let t3 = t0 + Duration::from_secs(3);
    /// renewal.decide(Input::Renewed { sent: t3 }, t3 + Duration::from_millis(20));
    /// assert_eq!(renewal.deadline(), t3 + Duration::from_secs(9)); // held until then, no longer
    /// # Ok(()) }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Takes in what happened at `now` and decides what to do next.
    ///
    /// Once it answered [`Next::Lose`] it answers nothing else: an answer
    /// that comes at or after the deadline cannot revive the claim, even
    /// for a renewal sent before it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::renewal::{Input, Loss, Next, Renewal, RenewalPolicy};
    /// use tokio::time::Instant;
    ///
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
    /// let t0 = Instant::now();
    /// let mut renewal = Renewal::new(policy, t0 + Duration::from_secs(9));
    /// let t3 = t0 + Duration::from_secs(3);
    /// match renewal.decide(Input::Due, t3) {
    ///     Next::Renew { budget } => assert!(budget <= Duration::from_secs(6)), // send one now
    ///     other => panic!("expected a renewal, got {other:?}"),
    /// }
    /// // The store refused it: another holder. Lost at once, and for good.
    /// assert_eq!(renewal.decide(Input::Refused, t3), Next::Lose(Loss::Refused));
    /// assert_eq!(renewal.decide(Input::Due, t3), Next::Lose(Loss::Refused));
    /// # Ok(()) }
    /// ```
    pub fn decide(&mut self, input: Input, now: Instant) -> Next {
        if self.lost.is_none() && now >= self.deadline {
            self.lost = Some(Loss::Expired);
        }
        if let Some(loss) = self.lost {
            return Next::Lose(loss);
        }
        match input {
            Input::Due => {}
            Input::Refused => {
                self.lost = Some(Loss::Refused);
                return Next::Lose(Loss::Refused);
            }
            Input::Failed | Input::TimedOut => self.next = now + self.policy.retry_after,
            Input::Renewed { sent } => {
                self.deadline = self.deadline.max(sent + self.policy.validity);
                self.next = self.next.max(sent + self.policy.renew_every);
            }
        }
        if now >= self.next {
            Next::Renew {
                budget: self.policy.attempt_timeout.min(self.deadline - now),
            }
        } else {
            Next::SleepUntil(self.next.min(self.deadline))
        }
    }
}

/// The outcome of one renewal, as a backend's renew step reports it to
/// [`renew_until_lost`].
#[derive(Debug)]
pub enum Renewed {
    /// It landed (and whatever the backend checks after it passed).
    Landed,
    /// The backend shows another holder or none: the claim is lost now.
    Refused(LossReason),
    /// It failed and did not land, or may have (an unknown outcome): it
    /// is retried until the deadline and never extends it.
    Failed(Error),
}

/// The one renewal loop: runs [`Renewal`] on tokio time for a won claim
/// valid until `valid_until`, calling `renew_once(budget)` for each renewal
/// and reporting each landed renewal and the loss through `reporter`.
/// Returns the reason once the loss is reported (at the deadline, also if
/// the term's own deadline check got there first); returns `None` as soon
/// as it sees that the term was lost some other way (e.g. its watch
/// reported a foreign holder).
///
/// `renew_once` sends one renewal (and makes whatever checks the backend
/// needs after it); the driver takes `Instant::now()` right before calling
/// it and cuts it off at `budget` (an unknown outcome, retried). It may
/// itself catch up on an earlier renewal whose answer was lost.
///
/// Cancel safety: cancel safe (drop it to stop renewing, e.g. when the
/// [`WatchGuard`](crate::WatchGuard) is dropped); a renewal cut off mid-flight has an
/// unknown outcome, which is safe: only landed renewals count.
///
/// ```
/// use std::time::Duration;
/// use election_core::renewal::{RenewalPolicy, Renewed, renew_until_lost};
/// use election_core::{Epoch, Error, LossReason, TermReporter, WatchGuard, Won};
///
/// # /// The store's conditional renewal: `Ok(false)` if another term holds it.
/// # async fn renew_row(_epoch: Epoch) -> Result<bool, Error> { Ok(true) }
/// /// `Claim::watch` of a lease backend: renew in a task until the term is lost.
/// fn watch(won: Won, reporter: TermReporter) -> Result<WatchGuard, Error> {
///     let policy = RenewalPolicy::new(Duration::from_secs(9), Duration::from_secs(3))?;
///     let Some(valid_until) = won.valid_until else {
///         return Ok(WatchGuard::none()); // a claim that does not expire
///     };
///     let epoch = won.epoch;
///     let task = tokio::spawn(async move {
///         // One conditional renewal per call; the driver cuts it off at `_budget`.
///         let reason = renew_until_lost(policy, valid_until, &reporter, |_budget| async move {
///             match renew_row(epoch).await {
///                 Ok(true) => Renewed::Landed,
///                 Ok(false) => Renewed::Refused(LossReason::Revoked {
///                     detail: "the row shows another term".into(),
///                 }),
///                 Err(e) => Renewed::Failed(e), // retried; never extends the deadline
///             }
///         })
///         .await;
///         if let Some(reason) = reason {
///             eprintln!("term {} lost: {reason}", reporter.epoch());
///         }
///     });
///     Ok(WatchGuard::task(task))
/// }
/// # let _ = watch;
/// ```
pub async fn renew_until_lost<F>(
    policy: RenewalPolicy,
    valid_until: Instant,
    reporter: &TermReporter,
    mut renew_once: impl FnMut(Duration) -> F,
) -> Option<LossReason>
where
    F: Future<Output = Renewed>,
{
    let mut machine = Renewal::new(policy, valid_until);
    let metrics =
        RenewalMetrics::term(reporter.name(), reporter.backend(), reporter.instrumented());
    let mut input = Input::Due;
    let mut refused = None;
    loop {
        let before = machine.deadline();
        let next = machine.decide(input, Instant::now());
        if !matches!(next, Next::Lose(_)) {
            if reporter.is_lost() {
                return None;
            }
            if machine.deadline() > before {
                reporter.renewed(machine.deadline());
            }
        }
        input = match next {
            Next::SleepUntil(at) => {
                tokio::time::sleep_until(at).await;
                Input::Due
            }
            Next::Renew { budget } => {
                let renew = async {
                    match renew_once(budget).await {
                        Renewed::Failed(e) => Err(e),
                        answer => Ok(answer),
                    }
                };
                let what = format!("term {}", reporter.epoch());
                match attempt(budget, &what, renew).await {
                    Ok((_, Renewed::Refused(reason))) => {
                        metrics.failed("refused");
                        refused = Some(reason);
                        Input::Refused
                    }
                    Ok((sent, _)) => {
                        metrics.landed(sent.elapsed());
                        Input::Renewed { sent }
                    }
                    Err(failure) => {
                        metrics.failed(failure.kind);
                        failure.input
                    }
                }
            }
            Next::Lose(loss) => {
                let reason = match loss {
                    Loss::Refused => refused.take().unwrap_or(LossReason::Revoked {
                        detail: "the renewal was refused".into(),
                    }),
                    Loss::Expired => LossReason::Expired,
                };
                reporter.lose(reason.clone());
                return Some(reason);
            }
        };
    }
}

/// A renewal attempt that did not land: what the [`Renewal`] machine is
/// told, and the `kind` its failure is counted as.
pub(crate) struct Failure {
    pub(crate) input: Input,
    pub(crate) kind: &'static str,
}

/// One renewal attempt of `what`, cut off at `budget` (a timed-out
/// attempt's outcome is unknown): the instant it was sent (before the
/// request) and its answer, or what the machine is told of a failed or
/// timed-out attempt, which is logged and never extends the deadline.
pub(crate) async fn attempt<T>(
    budget: Duration,
    what: &str,
    renew: impl Future<Output = Result<T, Error>>,
) -> Result<(Instant, T), Failure> {
    let sent = Instant::now();
    match tokio::time::timeout(budget, renew).await {
        Ok(Ok(answer)) => Ok((sent, answer)),
        Ok(Err(e)) => {
            tracing::warn!(%what, error = %e, "renewal failed; retrying until the deadline");
            Err(Failure {
                input: Input::Failed,
                kind: failure_kind(&e),
            })
        }
        Err(_) => {
            tracing::warn!(%what, "renewal timed out (outcome unknown); retrying until the deadline");
            Err(Failure {
                input: Input::TimedOut,
                kind: "unknown",
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn policy() -> RenewalPolicy {
        RenewalPolicy::new(ms(1000), ms(300))
            .unwrap()
            .with_attempt_timeout(ms(400))
            .unwrap()
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// Time passes by this many ms, then the driver asks.
        Wait(u64),
        /// A renewal sent this many ms ago (clamped) landed.
        Landed(u64),
        Refused,
        Failed,
        TimedOut,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u64..700).prop_map(Step::Wait),
            3 => (0u64..500).prop_map(Step::Landed),
            1 => Just(Step::Refused),
            2 => Just(Step::Failed),
            2 => Just(Step::TimedOut),
        ]
    }

    proptest! {
        /// Every invariant of rule 2, on random runs with injected time:
        /// the loss comes at (never after, never before) the deadline of
        /// the last renewal known to have landed; failures and timeouts
        /// never extend it; a refusal loses at once and for good; a
        /// renewal's budget never reaches past the deadline; sleeps end by
        /// the deadline.
        #[test]
        fn the_loss_comes_at_the_deadline_of_the_last_landed_renewal(steps in proptest::collection::vec(step(), 1..60)) {
            let p = policy();
            let t0 = Instant::now();
            let mut now = t0;
            let mut r = Renewal::new(p, t0 + p.validity());
            // The model: the deadline of the last landed renewal.
            let mut deadline = t0 + p.validity();
            let mut lost = false;
            for s in steps {
                let input = match s {
                    Step::Wait(d) => { now += ms(d); Input::Due }
                    Step::Landed(ago) => {
                        let sent = now.checked_sub(ms(ago)).unwrap_or(t0).max(t0);
                        if !lost && now < deadline { deadline = deadline.max(sent + p.validity()); }
                        Input::Renewed { sent }
                    }
                    Step::Refused => { if now < deadline { lost = true; } Input::Refused }
                    Step::Failed => Input::Failed,
                    Step::TimedOut => Input::TimedOut,
                };
                if !lost && now >= deadline { lost = true; }
                let next = r.decide(input, now);
                prop_assert_eq!(r.deadline().max(deadline), deadline, "the deadline never passes the model's");
                if lost {
                    prop_assert!(matches!(next, Next::Lose(_)), "{:?} after the loss", next);
                    continue;
                }
                prop_assert_eq!(r.deadline(), deadline);
                match next {
                    Next::Lose(l) => prop_assert!(false, "lost early: {:?}", l),
                    Next::Renew { budget } => {
                        prop_assert!(!budget.is_zero());
                        prop_assert!(now + budget <= deadline, "the budget reaches past the deadline");
                        prop_assert!(budget <= ms(400));
                    }
                    Next::SleepUntil(at) => {
                        prop_assert!(at > now);
                        prop_assert!(at <= deadline, "sleeps past the deadline");
                    }
                }
            }
        }

        /// A run of failures and timeouts alone loses exactly at the win's
        /// deadline, renewing in between.
        #[test]
        fn failures_alone_lose_at_the_first_deadline(gaps in proptest::collection::vec(1u64..200, 1..40)) {
            let p = policy();
            let t0 = Instant::now();
            let mut r = Renewal::new(p, t0 + p.validity());
            let mut now = t0;
            for (i, g) in gaps.iter().enumerate() {
                now += ms(*g);
                let input = if i % 2 == 0 { Input::Failed } else { Input::TimedOut };
                let next = r.decide(input, now);
                prop_assert_eq!(now >= t0 + p.validity(), matches!(next, Next::Lose(Loss::Expired)));
            }
        }
    }

    #[test]
    fn a_late_answer_does_not_revive_a_lost_claim() {
        let p = policy();
        let t0 = Instant::now();
        let mut r = Renewal::new(p, t0 + p.validity());
        let deadline = t0 + p.validity();
        // Sent before the deadline, answered at it: too late.
        let sent = deadline - ms(1);
        assert_eq!(
            r.decide(Input::Renewed { sent }, deadline),
            Next::Lose(Loss::Expired)
        );
        assert_eq!(r.deadline(), deadline);
        assert_eq!(
            r.decide(Input::Renewed { sent }, deadline + ms(1)),
            Next::Lose(Loss::Expired)
        );
    }

    fn term_reporter(
        valid_until: Instant,
    ) -> (TermReporter, std::sync::Arc<crate::term_state::TermState>) {
        let state = crate::term_state::TermState::new(
            crate::ElectionName::new("jobs").unwrap(),
            crate::Identity::new("a").unwrap(),
            crate::Epoch::FIRST,
            Some(valid_until),
        );
        (TermReporter::new(state.clone()), state)
    }

    /// The driver: one landed renewal (sent at 300 ms) moves the deadline
    /// to 1,300 ms; every later renewal fails; the loss is reported at
    /// exactly that deadline, as `Expired`.
    #[tokio::test(start_paused = true)]
    async fn the_driver_loses_at_the_deadline_of_the_last_landed_renewal() {
        let t0 = Instant::now();
        let (reporter, state) = term_reporter(t0 + ms(1000));
        let mut calls = 0;
        let lost = renew_until_lost(policy(), t0 + ms(1000), &reporter, |_| {
            calls += 1;
            let first = calls == 1;
            async move {
                tokio::time::sleep(ms(50)).await;
                if first {
                    Renewed::Landed
                } else {
                    Renewed::Failed(crate::Error::NotHeld {
                        name: crate::ElectionName::new("jobs").unwrap(),
                    })
                }
            }
        })
        .await;
        assert!(matches!(lost, Some(LossReason::Expired)), "{lost:?}");
        assert_eq!(Instant::now(), t0 + ms(1300));
        assert!(reporter.is_lost());
        assert_eq!(state.valid_until(), Some(t0 + ms(1300)));
    }

    /// A renewal that never answers is cut off at its budget (never past
    /// the deadline) and does not count: the loss comes at the win's
    /// deadline. A refused renewal loses at once with its reason.
    #[tokio::test(start_paused = true)]
    async fn the_driver_cuts_off_hung_renewals_and_loses_at_once_when_refused() {
        let t0 = Instant::now();
        let (reporter, _) = term_reporter(t0 + ms(1000));
        let lost = renew_until_lost(policy(), t0 + ms(1000), &reporter, |_| {
            std::future::pending::<Renewed>()
        })
        .await;
        assert!(matches!(lost, Some(LossReason::Expired)));
        assert_eq!(Instant::now(), t0 + ms(1000));

        let t1 = Instant::now();
        let (reporter, _) = term_reporter(t1 + ms(1000));
        let lost = renew_until_lost(policy(), t1 + ms(1000), &reporter, |_| async {
            Renewed::Refused(LossReason::Revoked {
                detail: "another holder".into(),
            })
        })
        .await;
        assert!(matches!(lost, Some(LossReason::Revoked { .. })));
        assert_eq!(Instant::now(), t1 + ms(300), "lost at the first renewal");
    }

    #[test]
    fn bad_policies_are_refused() {
        assert!(RenewalPolicy::new(ms(100), ms(100)).is_err());
        assert!(RenewalPolicy::new(ms(100), Duration::ZERO).is_err());
        assert!(policy().with_retry_after(Duration::ZERO).is_err());
        assert!(policy().with_attempt_timeout(Duration::ZERO).is_err());
    }
}
