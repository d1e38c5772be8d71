//! [`HealthCheck`]: a liveness probe for a leader whose renewals stopped.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::keyed::engine::Holds;
use crate::lock;
use crate::term_state::{Phase, TermState};

/// What a [`HealthCheck`] found.
///
/// ```
/// use std::time::Duration;
/// use election_core::Health;
///
/// let stuck = Health::Unhealthy {
///     since_last_renewal: Duration::from_secs(12),
///     bound: Duration::from_secs(10),
/// };
/// assert!(!stuck.is_healthy());
/// assert_eq!(stuck.to_string(), "unhealthy: leading, but no renewal landed for 12.000s (bound 10.000s)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// Not leading, leading on a claim that does not expire (an OS lock),
    /// or leading with a renewal that landed within the bound.
    Healthy,
    /// This process believes it leads (a term or a lease-set key that no
    /// loss was reported for and its holder did not end), but no renewal
    /// of it has landed for longer than the bound: a stuck leader that may
    /// keep everyone else waiting.
    Unhealthy {
        /// Time since the win or the last landed renewal (for a lease set,
        /// of its key renewed longest ago).
        since_last_renewal: Duration,
        /// The bound the check was made with.
        bound: Duration,
    },
}

impl Health {
    /// True for [`Health::Healthy`].
    ///
    /// ```
    /// assert!(election_core::Health::Healthy.is_healthy());
    /// ```
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy)
    }
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Health::Healthy => f.write_str("healthy"),
            Health::Unhealthy {
                since_last_renewal,
                bound,
            } => write!(
                f,
                "unhealthy: leading, but no renewal landed for {:.3}s (bound {:.3}s)",
                since_last_renewal.as_secs_f64(),
                bound.as_secs_f64()
            ),
        }
    }
}

/// The term a campaign handed out last, as its candidate's health checks
/// see it.
pub(crate) type CurrentTerm = Arc<Mutex<Weak<TermState>>>;

#[derive(Clone, Debug)]
enum Source {
    Candidate(CurrentTerm),
    Term(Weak<TermState>),
    LeaseSet(Weak<Holds>),
}

/// A liveness probe a service wires to its health endpoint: unhealthy
/// while this process believes it leads but no renewal has landed for
/// longer than a bound. Cheap to clone; [`check`](HealthCheck::check)
/// takes no lock a renewal waits on and makes no round trip.
///
/// Made by [`Candidate::health_check`](crate::Candidate::health_check)
/// (every term the candidate wins from then on),
/// [`Term::health_check`](crate::Term::health_check) (one term) and
/// [`LeaseSet::health_check`](crate::LeaseSet::health_check) (every key
/// the set holds). Time is tokio's monotonic clock, so a paused test clock
/// drives it.
///
/// "Believes it leads" is read without the core's deadline backstop: a
/// term whose renewal loop stalled without reporting anything reads
/// unhealthy even past its validity, until its holder ends it. A claim
/// that does not expire (the file backend's lock) has no renewals and
/// reads healthy while held. On lease backends the bound must be below the
/// renewal's validity (TTL minus margin) to catch renewals that fail or
/// hang: at the validity the renewal loop reports the loss and the check
/// reads healthy again (not leading).
///
/// ```
/// use std::time::Duration;
/// use election_core::{Candidate, Health};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let candidate = Candidate::new(backend.claim("jobs", "a")?);
/// let health = candidate.health_check(Duration::from_secs(20));
/// assert_eq!(health.check(), Health::Healthy); // not leading
/// let term = candidate.campaign().await?;
/// assert!(health.check().is_healthy()); // just won
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct HealthCheck {
    source: Source,
    bound: Duration,
}

impl HealthCheck {
    pub(crate) fn candidate(current: CurrentTerm, bound: Duration) -> Self {
        HealthCheck {
            source: Source::Candidate(current),
            bound,
        }
    }

    pub(crate) fn term(state: &Arc<TermState>, bound: Duration) -> Self {
        HealthCheck {
            source: Source::Term(Arc::downgrade(state)),
            bound,
        }
    }

    pub(crate) fn lease_set(holds: &Arc<Holds>, bound: Duration) -> Self {
        HealthCheck {
            source: Source::LeaseSet(Arc::downgrade(holds)),
            bound,
        }
    }

    /// The bound this check was made with.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// assert_eq!(candidate.health_check(Duration::from_secs(20)).bound(), Duration::from_secs(20));
    /// # Ok::<(), election_core::Error>(())
    /// ```
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Whether this process leads now, for a readiness probe or a
    /// leader-only route (`elect run --metrics` serves it at `/leader`):
    /// true while a term the source handed out (for a lease set: any key)
    /// is live, was not ended by its holder, had no loss reported, and
    /// its validity has not passed on the monotonic clock. Unlike
    /// [`check`](HealthCheck::check) it applies the deadline: a term whose
    /// renewals stopped reads not leading from its deadline on, even
    /// before the renewal loop reports the loss (unsure means not held).
    /// No lock a renewal waits on, no round trip.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::Candidate;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// let probe = candidate.health_check(Duration::from_secs(5));
    /// assert!(!probe.is_leading()); // waiting: not ready for leader-only work
    /// let term = candidate.campaign().await?;
    /// assert!(probe.is_leading());
    /// term.resign().await?;
    /// assert!(!probe.is_leading());
    /// # Ok(()) }
    /// ```
    pub fn is_leading(&self) -> bool {
        let now = Instant::now();
        match &self.source {
            Source::Candidate(current) => {
                let term = lock(current).upgrade();
                term.is_some_and(|t| term_leads(&t, now))
            }
            Source::Term(term) => term.upgrade().is_some_and(|t| term_leads(&t, now)),
            Source::LeaseSet(holds) => holds.upgrade().is_some_and(|h| h.holds_any(now)),
        }
    }

    /// Checks now: [`Health::Unhealthy`] while this process believes it
    /// leads and its last landed renewal (or the win) is older than the
    /// bound; [`Health::Healthy`] otherwise.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{Candidate, Health};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let health = term.health_check(Duration::from_secs(5));
    /// if let Health::Unhealthy { since_last_renewal, .. } = health.check() {
    ///     eprintln!("stuck: no renewal for {since_last_renewal:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn check(&self) -> Health {
        let now = Instant::now();
        let oldest = match &self.source {
            Source::Candidate(current) => {
                let term = lock(current).upgrade();
                term.and_then(|t| term_renewed_at(&t))
            }
            Source::Term(term) => term.upgrade().and_then(|t| term_renewed_at(&t)),
            Source::LeaseSet(holds) => holds.upgrade().and_then(|h| h.oldest_renewal()),
        };
        match oldest.map(|at| now.saturating_duration_since(at)) {
            Some(since) if since > self.bound => Health::Unhealthy {
                since_last_renewal: since,
                bound: self.bound,
            },
            _ => Health::Healthy,
        }
    }
}

/// Whether `term` leads now: live, not ended by its holder, and its
/// validity (if it has one) not passed on the monotonic clock `now`.
fn term_leads(term: &TermState, now: Instant) -> bool {
    let s = term.status();
    matches!(s.phase, Phase::Live) && s.ended.is_none() && s.valid_until.is_none_or(|v| v > now)
}

/// When a term its holder believes it leads was last renewed (or won);
/// `None` when it is not leading or does not expire.
fn term_renewed_at(term: &TermState) -> Option<Instant> {
    let s = term.status();
    let leading = matches!(s.phase, Phase::Live) && s.ended.is_none();
    (leading && s.valid_until.is_some()).then_some(s.renewed_at)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{ElectionName, Epoch, Identity, LossReason};

    fn term(valid_until: Option<Instant>) -> Arc<TermState> {
        TermState::new(
            ElectionName::new("jobs").unwrap(),
            Identity::new("a").unwrap(),
            Epoch::new(1).unwrap(),
            valid_until,
        )
    }

    /// `/leader`'s answer (issue 26 item 5): leading only while the term
    /// is live, not ended, and within its validity; the deadline applies
    /// even though nothing reported the loss, while `check()` (liveness)
    /// reads the same term unhealthy, not healthy.
    #[tokio::test(start_paused = true)]
    async fn leading_ends_at_the_deadline_a_loss_or_an_end() {
        let now = Instant::now();
        let live = term(Some(now + Duration::from_secs(9)));
        let probe = HealthCheck::term(&live, Duration::from_secs(5));
        assert!(probe.is_leading());
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(
            !probe.is_leading(),
            "at the deadline: unsure means not held"
        );
        assert!(!probe.check().is_healthy(), "stalled past the bound");

        let lost = term(Some(Instant::now() + Duration::from_secs(9)));
        let probe = HealthCheck::term(&lost, Duration::from_secs(5));
        lost.lose(LossReason::Expired);
        assert!(!probe.is_leading());

        let ended = term(None); // a lock: no deadline
        let probe = HealthCheck::term(&ended, Duration::from_secs(5));
        assert!(probe.is_leading());
        ended.retire(LossReason::Resigned);
        assert!(!probe.is_leading());
        drop(ended);
        assert!(!probe.is_leading(), "a term gone reads not leading");
    }
}
