//! An in-memory backend: many candidates in one process. For tests and
//! examples; it also injects faults and records every step, so the core's
//! tests can check the four rules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::Notify;

use election_core::{
    Claim, Claimed, ElectionName, End, Epoch, Error, Handover, HeldKey, HoldReporter, Identity,
    KeyedClaims, Leader, LeaderValue, LossReason, RenewalPolicy, Revocation, Revoked, TermReporter,
    TransferRequest, WatchGuard, Won,
};

/// A step of the [`Claim`] trait, as recorded and as faults are injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Step {
    /// [`Claim::open`].
    Open,
    /// [`Claim::try_claim`].
    TryClaim,
    /// [`Claim::watch`].
    Watch,
    /// [`Claim::release`].
    Release,
    /// [`Claim::confirm`] and [`KeyedClaims::confirm`].
    Confirm,
    /// [`KeyedClaims::renew`] (a keyed set's renewal).
    Renew,
    /// [`Election::leader`](election_core::Election::leader) and
    /// [`Claim::leader`]: reading who holds a name (faults only; reads are
    /// not recorded).
    Leader,
}

/// One recorded step, in the order the backend saw them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// An attempt was opened.
    Open {
        /// The attempt.
        attempt: u64,
    },
    /// A try won the claim with this epoch.
    Won {
        /// The attempt.
        attempt: u64,
        /// The epoch won.
        epoch: Epoch,
    },
    /// The backend took the claim away (after reporting the loss).
    Lost {
        /// The attempt.
        attempt: u64,
    },
    /// The claim was released.
    Release {
        /// The attempt.
        attempt: u64,
    },
    /// The attempt was closed.
    Close {
        /// The attempt.
        attempt: u64,
        /// How it ended.
        end: End,
    },
}

#[derive(Default)]
struct Slot {
    last_epoch: Option<Epoch>,
    holder: Option<Holding>,
    /// The revocation no term has followed yet (`Election::revoke`).
    revocation: Option<Revocation>,
    /// The handover no term has followed yet (`Term::transfer`), and the
    /// instant its reservation ends.
    handover: Option<(Handover, tokio::time::Instant)>,
    vacated: Arc<Notify>,
}

impl Slot {
    /// The handover whose reservation still stands.
    fn reservation(&self) -> Option<&(Handover, tokio::time::Instant)> {
        self.handover
            .as_ref()
            .filter(|(_, until)| tokio::time::Instant::now() < *until)
    }
}

struct Holding {
    attempt: u64,
    identity: Identity,
    epoch: Epoch,
    /// The wall-clock time of the win.
    since: SystemTime,
    /// When the win or the last renewal landed (monotonic): a lease runs
    /// out a full lease after it.
    landed: tokio::time::Instant,
    reporter: Option<Reporter>,
    /// The value the term published last (`Term::proclaim`).
    value: Option<LeaderValue>,
    /// The latest request to hand the term over, reported again to a
    /// watch that starts after it.
    transfer: Option<TransferRequest>,
}

/// Who hears of a holding's loss.
enum Reporter {
    Term(TermReporter),
    Key(HoldReporter),
}

#[derive(Default)]
struct Registry {
    slots: HashMap<ElectionName, Slot>,
    history: Vec<Event>,
    faults: HashMap<Step, u32>,
    /// Faults of one step on one name only ([`MemoryBackend::fail_on`]).
    named_faults: HashMap<(Step, String), u32>,
    next_attempt: u64,
    lease: Option<std::time::Duration>,
    /// The election (or key) of each attempt, for per-name epoch checks.
    names: HashMap<u64, ElectionName>,
}

/// An in-memory election backend shared by the candidates of one process.
///
/// Epochs survive "re-opening": every [`MemoryClaim`] made from clones of
/// one backend shares its state. Dropping a term gives the claim up at once
/// (close removes the holder).
///
/// For tests it can take a claim away ([`revoke`](MemoryBackend::revoke)),
/// make the next calls of a step fail ([`fail`](MemoryBackend::fail)), and
/// check the four rules against what it recorded
/// ([`check_rules`](MemoryBackend::check_rules)). Every step yields to the
/// scheduler once, so cancellation can hit it at an await point.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    registry: Arc<Mutex<Registry>>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend").finish_non_exhaustive()
    }
}

/// The claim of one candidate on a [`MemoryBackend`].
#[derive(Debug)]
pub struct MemoryClaim {
    backend: MemoryBackend,
    name: ElectionName,
    identity: Identity,
}

/// One attempt on a [`MemoryBackend`].
#[derive(Debug)]
pub struct MemoryAttempt {
    id: u64,
    vacated: Arc<Notify>,
}

impl MemoryBackend {
    /// A new, empty backend.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new(); // clones share its state
    /// let term = Candidate::new(backend.clone().claim("jobs", "a")?).campaign().await?;
    /// assert_eq!(backend.holder("jobs").map(|l| l.epoch), Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A candidate's claim on election `name` with `identity`.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let a = Candidate::new(backend.claim("jobs", "a")?);
    /// let term = a.campaign().await?;
    /// assert!(backend.claim("a/b", "x").is_err()); // a bad name: Error::Config
    /// term.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<MemoryClaim, Error> {
        Ok(MemoryClaim {
            backend: self.clone(),
            name: ElectionName::new(name)?,
            identity: Identity::new(identity)?,
        })
    }

    /// Takes the claim of `name` away from its holder, the way a backend
    /// loses one: the loss is reported first, then the claim is freed.
    /// Returns false if nobody held it.
    ///
    /// ```
    /// use election_core::{Candidate, Error};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert!(backend.revoke("jobs"));
    /// term.lost().await; // reported first, then the claim was freed
    /// assert!(matches!(term.resign().await, Err(Error::Lost(_))));
    /// assert!(!backend.revoke("jobs")); // nobody holds it now
    /// # Ok(()) }
    /// ```
    pub fn revoke(&self, name: &str) -> bool {
        let Ok(name) = ElectionName::new(name) else {
            return false;
        };
        let mut reg = self.lock();
        let Registry {
            slots,
            history,
            names,
            ..
        } = &mut *reg;
        let Some(slot) = slots.get_mut(&name) else {
            return false;
        };
        let Some(holding) = slot.holder.take() else {
            return false;
        };
        let reason = LossReason::Revoked {
            detail: "revoked by the memory backend".into(),
        };
        match &holding.reporter {
            Some(Reporter::Term(r)) => {
                r.lose(reason);
            }
            Some(Reporter::Key(r)) => {
                r.lose(&name, holding.epoch, reason);
            }
            None => {}
        }
        // A stolen claim (no attempt of a candidate here) has no history.
        if reg_names_has(names, holding.attempt) {
            history.push(Event::Lost {
                attempt: holding.attempt,
            });
        }
        slot.vacated.notify_waiters();
        true
    }

    /// Gives the claim of `name` to `identity` *without* reporting a loss
    /// to the old holder, as a backend's view can move on before the old
    /// holder's watch hears of it. Only the commit-point check
    /// ([`Claim::confirm`]) finds out. Returns the new epoch.
    ///
    /// ```
    /// use election_core::{Candidate, Error};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let epoch = backend.steal("jobs", "b")?;
    /// assert!(epoch > term.epoch());
    /// assert!(!term.is_lost()); // its watch has not heard...
    /// assert!(matches!(term.confirm().await, Err(Error::Lost(_)))); // ...the commit point finds out
    /// # Ok(()) }
    /// ```
    pub fn steal(&self, name: &str, identity: &str) -> Result<Epoch, Error> {
        let name = ElectionName::new(name)?;
        let identity = Identity::new(identity)?;
        let mut reg = self.lock();
        reg.next_attempt += 1;
        let attempt = reg.next_attempt;
        let slot = reg.slots.entry(name).or_default();
        let epoch = Epoch::after(slot.last_epoch)?;
        slot.last_epoch = Some(epoch);
        slot.holder = Some(Holding {
            attempt,
            identity,
            epoch,
            since: SystemTime::now(),
            landed: tokio::time::Instant::now(),
            reporter: None,
            value: None,
            transfer: None,
        });
        Ok(epoch)
    }

    /// The lease of `name` runs out on the backend, as a server ages a key
    /// out: if a full [`lease`](Self::set_lease) has passed since the
    /// holder's win or last landed renewal, the claim goes to `identity`
    /// without a word to the old holder (its own deadline must have ended
    /// its hold already, rule 2). Returns the new epoch, or `None` if the
    /// lease has not run out (or no lease is set, or nobody holds it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// backend.set_lease(Some(Duration::from_secs(10)));
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert_eq!(backend.expire("jobs", "b")?, None); // not run out yet
    /// tokio::time::advance(Duration::from_secs(10)).await; // paused test time
    /// assert!(term.is_lost()); // the holder's own deadline ended its term first
    /// let epoch = backend.expire("jobs", "b")?;
    /// assert!(epoch > Some(term.epoch()));
    /// # Ok(()) }
    /// ```
    pub fn expire(&self, name: &str, identity: &str) -> Result<Option<Epoch>, Error> {
        let key = ElectionName::new(name)?;
        let ran_out = {
            let reg = self.lock();
            let holding = reg.slots.get(&key).and_then(|s| s.holder.as_ref());
            match (reg.lease, holding) {
                (Some(lease), Some(h)) => tokio::time::Instant::now() >= h.landed + lease,
                _ => false,
            }
        };
        if !ran_out {
            return Ok(None);
        }
        self.steal(name, identity).map(Some)
    }

    /// Makes the next `times` calls of `step` fail with
    /// [`Error::Unavailable`].
    ///
    /// ```
    /// use election_core::{Candidate, Error};
    /// use election_testkit::memory::{MemoryBackend, Step};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// backend.fail(Step::TryClaim, 1);
    /// let candidate = Candidate::new(backend.claim("jobs", "a")?);
    /// assert!(matches!(candidate.try_campaign().await, Err(Error::Unavailable { .. })));
    /// assert!(candidate.try_campaign().await?.is_some()); // the fault is used up
    /// # Ok(()) }
    /// ```
    pub fn fail(&self, step: Step, times: u32) {
        self.lock().faults.insert(step, times);
    }

    /// [`fail`](MemoryBackend::fail) for the calls of `step` on the name
    /// `name` only.
    ///
    /// ```
    /// use election_core::{Candidate, Error};
    /// use election_testkit::memory::{MemoryBackend, Step};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// backend.fail_on(Step::TryClaim, "jobs", 1);
    /// let other = Candidate::new(backend.claim("other", "a")?);
    /// assert!(other.try_campaign().await?.is_some()); // another name: no fault
    /// let jobs = Candidate::new(backend.claim("jobs", "a")?);
    /// assert!(matches!(jobs.try_campaign().await, Err(Error::Unavailable { .. })));
    /// # Ok(()) }
    /// ```
    pub fn fail_on(&self, step: Step, name: &str, times: u32) {
        self.lock()
            .named_faults
            .insert((step, name.to_owned()), times);
    }

    /// Makes won claims valid for `lease` only (never renewed), so tests can
    /// drive the core's handling of validity deadlines; `None` (the default)
    /// makes claims that do not expire.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Candidate, Lease};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// backend.set_lease(Some(Duration::from_secs(5))); // never renewed
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// assert!(term.lease().valid_until().is_some());
    /// term.lost().await; // at the deadline, on (paused) tokio time
    /// # Ok(()) }
    /// ```
    pub fn set_lease(&self, lease: Option<std::time::Duration>) {
        self.lock().lease = lease;
    }

    /// Every step recorded so far.
    ///
    /// ```
    /// use election_core::{Candidate, End};
    /// use election_testkit::memory::{Event, MemoryBackend};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// term.resign().await?;
    /// let history = backend.history();
    /// assert!(matches!(history.first(), Some(Event::Open { .. })));
    /// assert!(matches!(history.last(), Some(Event::Close { end: End::Resigned, .. })));
    /// # Ok(()) }
    /// ```
    pub fn history(&self) -> Vec<Event> {
        self.lock().history.clone()
    }

    /// The holder of `name`, straight from the backend's state; its
    /// [`since`](Leader::since) is the wall-clock time of the win.
    ///
    /// ```
    /// use election_core::Candidate;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// assert!(backend.holder("jobs").is_none());
    /// let term = Candidate::new(backend.claim("jobs", "a")?).campaign().await?;
    /// let holder = backend.holder("jobs");
    /// assert_eq!(holder.map(|l| (l.identity.to_string(), l.epoch)), Some(("a".into(), term.epoch())));
    /// # Ok(()) }
    /// ```
    pub fn holder(&self, name: &str) -> Option<Leader> {
        let name = ElectionName::new(name).ok()?;
        let reg = self.lock();
        let h = reg.slots.get(&name)?.holder.as_ref()?;
        Some(Leader {
            identity: h.identity.clone(),
            epoch: h.epoch,
            since: Some(h.since),
            renewed: None,
            ttl: None,
            value: h.value.clone(),
        })
    }

    /// Checks the recorded history against the rules the core must keep:
    /// won epochs strictly increase per election (per key); no release after a loss (rule 3); each
    /// opened attempt is closed exactly once, and last (rule 4, for attempts
    /// that have ended: pass `all_ended = true` once every candidate, term
    /// and campaign is gone).
    ///
    /// ```
    /// use election_core::{Candidate, Error};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// {
    ///     let candidate = Candidate::new(backend.claim("jobs", "a")?);
    ///     let term = candidate.campaign().await?;
    ///     backend.revoke("jobs");
    ///     // Not released after the loss (rule 3), only closed:
    ///     assert!(matches!(term.resign().await, Err(Error::Lost(_))));
    /// }
    /// backend.check_rules(true)?; // every attempt closed, last; no release after a loss
    /// # Ok(()) }
    /// ```
    pub fn check_rules(&self, all_ended: bool) -> Result<(), String> {
        let (history, names) = {
            let reg = self.lock();
            (reg.history.clone(), reg.names.clone())
        };
        let mut last_epochs: HashMap<Option<&ElectionName>, Epoch> = HashMap::new();
        let mut opened: HashMap<u64, (bool, bool)> = HashMap::new(); // (lost, closed)
        for (i, ev) in history.iter().enumerate() {
            match *ev {
                Event::Open { attempt } => {
                    if opened.insert(attempt, (false, false)).is_some() {
                        return Err(format!("#{i}: attempt {attempt} opened twice"));
                    }
                }
                Event::Won { attempt, epoch } => {
                    let last_epoch = last_epochs.insert(names.get(&attempt), epoch);
                    if last_epoch.is_some_and(|l| epoch <= l) {
                        return Err(format!(
                            "#{i}: attempt {attempt} won epoch {epoch} after {last_epoch:?}"
                        ));
                    }
                    check_open(&opened, attempt, i)?;
                }
                Event::Lost { attempt } => {
                    check_open(&opened, attempt, i)?;
                    if let Some(s) = opened.get_mut(&attempt) {
                        s.0 = true;
                    }
                }
                Event::Release { attempt } => {
                    check_open(&opened, attempt, i)?;
                    if opened[&attempt].0 {
                        return Err(format!(
                            "#{i}: attempt {attempt} released after its loss (rule 3)"
                        ));
                    }
                }
                Event::Close { attempt, .. } => {
                    check_open(&opened, attempt, i)?;
                    if let Some(s) = opened.get_mut(&attempt) {
                        s.1 = true;
                    }
                }
            }
        }
        if all_ended && let Some((a, _)) = opened.iter().find(|(_, s)| !s.1) {
            return Err(format!("attempt {a} was never closed (rule 4)"));
        }
        Ok(())
    }

    fn fault(&self, step: Step, name: &ElectionName) -> Result<(), Error> {
        let mut reg = self.lock();
        let named = (step, name.as_str().to_owned());
        let left = match reg.named_faults.get_mut(&named) {
            Some(n) if *n > 0 => Some(n),
            _ => reg.faults.get_mut(&step),
        };
        if let Some(n) = left
            && *n > 0
        {
            *n -= 1;
            return Err(Error::unavailable(
                name,
                std::io::Error::other(format!("injected fault in {step:?}")),
            ));
        }
        Ok(())
    }
}

fn reg_names_has(names: &HashMap<u64, ElectionName>, attempt: u64) -> bool {
    names.contains_key(&attempt)
}

fn check_open(opened: &HashMap<u64, (bool, bool)>, attempt: u64, i: usize) -> Result<(), String> {
    match opened.get(&attempt) {
        None => Err(format!("#{i}: attempt {attempt} used before open")),
        Some((_, true)) => Err(format!("#{i}: attempt {attempt} used after close (rule 4)")),
        Some(_) => Ok(()),
    }
}

impl Claim for MemoryClaim {
    type Attempt = MemoryAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn open(&self) -> Result<MemoryAttempt, Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Open, &self.name)?;
        let mut reg = self.backend.lock();
        reg.next_attempt += 1;
        let id = reg.next_attempt;
        reg.history.push(Event::Open { attempt: id });
        reg.names.insert(id, self.name.clone());
        let vacated = reg
            .slots
            .entry(self.name.clone())
            .or_default()
            .vacated
            .clone();
        Ok(MemoryAttempt { id, vacated })
    }

    async fn try_claim(&self, attempt: &mut MemoryAttempt) -> Result<Option<Won>, Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::TryClaim, &self.name)?;
        let mut reg = self.backend.lock();
        let valid_until = reg.lease.map(|l| tokio::time::Instant::now() + l);
        let Registry { slots, history, .. } = &mut *reg;
        let slot = slots.entry(self.name.clone()).or_default();
        if slot.holder.is_some() {
            return Ok(None);
        }
        if let Some((handover, _)) = slot.reservation()
            && handover.to != self.identity
        {
            return Ok(None);
        }
        let epoch = Epoch::after(slot.last_epoch)?;
        slot.last_epoch = Some(epoch);
        slot.revocation = None;
        slot.handover = None;
        slot.holder = Some(Holding {
            attempt: attempt.id,
            identity: self.identity.clone(),
            epoch,
            since: SystemTime::now(),
            landed: tokio::time::Instant::now(),
            reporter: None,
            value: None,
            transfer: None,
        });
        history.push(Event::Won {
            attempt: attempt.id,
            epoch,
        });
        Ok(Some(Won { epoch, valid_until }))
    }

    async fn wait(
        &self,
        attempt: &mut MemoryAttempt,
        poll_interval: std::time::Duration,
    ) -> Result<(), Error> {
        let vacated = attempt.vacated.notified();
        tokio::pin!(vacated);
        vacated.as_mut().enable();
        let reserved_until = {
            let reg = self.backend.lock();
            let slot = reg.slots.get(&self.name);
            let held = slot.is_some_and(|s| s.holder.is_some());
            match slot.and_then(Slot::reservation) {
                Some((h, until)) if h.to != self.identity => Some(*until),
                _ if held => None,
                _ => return Ok(()),
            }
        };
        let pause = match reserved_until {
            Some(until) => until.min(tokio::time::Instant::now() + poll_interval),
            None => tokio::time::Instant::now() + poll_interval,
        };
        tokio::select! {
            () = vacated => {}
            () = tokio::time::sleep_until(pause) => {}
        }
        Ok(())
    }

    fn watch(
        &self,
        attempt: &mut MemoryAttempt,
        _won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, Error> {
        self.backend.fault(Step::Watch, &self.name)?;
        let mut reg = self.backend.lock();
        match reg
            .slots
            .get_mut(&self.name)
            .and_then(|s| s.holder.as_mut())
        {
            Some(h) if h.attempt == attempt.id => {
                if let Some(request) = h.transfer.clone() {
                    reporter.transfer_requested(request);
                }
                h.reporter = Some(Reporter::Term(reporter));
            }
            _ => {
                // Taken away between try_claim and watch.
                reporter.lose(LossReason::Revoked {
                    detail: "no longer the holder when the watch started".into(),
                });
            }
        }
        Ok(WatchGuard::none())
    }

    async fn confirm(&self, attempt: &mut MemoryAttempt) -> Result<(), Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Confirm, &self.name)?;
        if self.holder_attempt() == Some(attempt.id) {
            Ok(())
        } else {
            Err(Error::NotHeld {
                name: self.name.clone(),
            })
        }
    }

    /// Sets the holding's value if this attempt still holds the claim.
    async fn proclaim(
        &self,
        attempt: &mut MemoryAttempt,
        value: &LeaderValue,
    ) -> Result<(), Error> {
        tokio::task::yield_now().await;
        let mut reg = self.backend.lock();
        match reg
            .slots
            .get_mut(&self.name)
            .and_then(|s| s.holder.as_mut())
        {
            Some(h) if h.attempt == attempt.id => {
                h.value = Some(value.clone());
                Ok(())
            }
            _ => Err(Error::NotHeld {
                name: self.name.clone(),
            }),
        }
    }

    async fn release(&self, attempt: &mut MemoryAttempt) -> Result<(), Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Release, &self.name)?;
        let mut reg = self.backend.lock();
        reg.history.push(Event::Release {
            attempt: attempt.id,
        });
        self.vacate(&mut reg, attempt.id);
        Ok(())
    }

    fn transfers(&self) -> bool {
        true
    }

    /// Releases as [`release`](Claim::release) does (recorded as a
    /// release, faults of [`Step::Release`] apply) and reserves the name
    /// for `successor` for `window`.
    async fn release_to(
        &self,
        attempt: &mut MemoryAttempt,
        successor: &Identity,
        window: std::time::Duration,
    ) -> Result<(), Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Release, &self.name)?;
        let mut reg = self.backend.lock();
        reg.history.push(Event::Release {
            attempt: attempt.id,
        });
        if let Some(slot) = reg.slots.get_mut(&self.name)
            && let Some(h) = slot.holder.as_ref()
            && h.attempt == attempt.id
        {
            let handover = Handover::new(h.identity.clone(), successor.clone(), h.epoch, window);
            slot.handover = Some((handover, tokio::time::Instant::now() + window));
        }
        self.vacate(&mut reg, attempt.id);
        Ok(())
    }

    fn close(&self, attempt: MemoryAttempt, end: End) {
        let mut reg = self.backend.lock();
        // Whatever the end, an attempt that still holds the claim gives it
        // up: that is how a dropped term or a cancelled campaign frees it.
        self.vacate(&mut reg, attempt.id);
        reg.history.push(Event::Close {
            attempt: attempt.id,
            end,
        });
    }

    async fn leader(&self) -> Result<Option<Leader>, Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Leader, &self.name)?;
        Ok(self.backend.holder(self.name.as_str()))
    }
}

impl MemoryClaim {
    fn holder_attempt(&self) -> Option<u64> {
        let reg = self.backend.lock();
        reg.slots
            .get(&self.name)?
            .holder
            .as_ref()
            .map(|h| h.attempt)
    }

    fn vacate(&self, reg: &mut Registry, attempt: u64) {
        vacate(reg, &self.name, attempt);
    }
}

impl MemoryBackend {
    /// A lease set's keyed claims on this backend for `identity`: every
    /// key held is an attempt of its own in the [`history`](Self::history)
    /// (opened at the win, closed at its release or when the set closes),
    /// so [`check_rules`](Self::check_rules) checks rules 3 and 4 per key.
    /// With a [`lease`](Self::set_lease) set, holds expire and the core
    /// renews them (every third of the lease).
    ///
    /// ```
    /// use election_core::LeaseSet;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await;
    /// backend.check_rules(true)?; // per key: released once, closed last
    /// # Ok(()) }
    /// ```
    pub fn keys(&self, identity: &str) -> Result<MemoryKeys, Error> {
        Ok(MemoryKeys {
            backend: self.clone(),
            identity: Identity::new(identity)?,
            reporter: Mutex::new(None),
            attempts: Mutex::new(HashMap::new()),
        })
    }
}

/// The keyed claims of one lease set on a [`MemoryBackend`].
pub struct MemoryKeys {
    backend: MemoryBackend,
    identity: Identity,
    reporter: Mutex<Option<HoldReporter>>,
    /// This set's attempts not yet closed (with the epoch each won), by key.
    attempts: Mutex<HashMap<ElectionName, Vec<(u64, Epoch)>>>,
}

impl std::fmt::Debug for MemoryKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryKeys")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl MemoryKeys {
    fn claim_one(&self, reg: &mut Registry, key: &ElectionName) -> Result<Claimed, Error> {
        let slot = reg.slots.entry(key.clone()).or_default();
        if let Some(h) = &slot.holder {
            return Ok(Claimed::HeldBy(Some(Leader {
                identity: h.identity.clone(),
                epoch: h.epoch,
                since: Some(h.since),
                renewed: None,
                ttl: None,
                value: None,
            })));
        }
        let epoch = Epoch::after(slot.last_epoch)?;
        slot.last_epoch = Some(epoch);
        reg.next_attempt += 1;
        let attempt = reg.next_attempt;
        let reporter = self.lock_reporter().clone().map(Reporter::Key);
        let valid_until = reg.lease.map(|l| tokio::time::Instant::now() + l);
        let slot = reg.slots.entry(key.clone()).or_default();
        slot.holder = Some(Holding {
            attempt,
            identity: self.identity.clone(),
            epoch,
            since: SystemTime::now(),
            landed: tokio::time::Instant::now(),
            reporter,
            value: None,
            transfer: None,
        });
        reg.history.push(Event::Open { attempt });
        reg.names.insert(attempt, key.clone());
        reg.history.push(Event::Won { attempt, epoch });
        self.lock_attempts()
            .entry(key.clone())
            .or_default()
            .push((attempt, epoch));
        Ok(Claimed::Won(Won { epoch, valid_until }))
    }

    fn lock_reporter(&self) -> MutexGuard<'_, Option<HoldReporter>> {
        self.reporter.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_attempts(&self) -> MutexGuard<'_, HashMap<ElectionName, Vec<(u64, Epoch)>>> {
        self.attempts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while the backend shows `key` held by this set in `epoch`.
    fn holds(reg: &Registry, key: &ElectionName, epoch: Epoch, attempts: &[(u64, Epoch)]) -> bool {
        reg.slots
            .get(key)
            .and_then(|s| s.holder.as_ref())
            .is_some_and(|h| attempts.contains(&(h.attempt, epoch)))
    }

    fn attempts_of(&self, key: &ElectionName) -> Vec<(u64, Epoch)> {
        self.lock_attempts().get(key).cloned().unwrap_or_default()
    }
}

impl KeyedClaims for MemoryKeys {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    fn renewal(&self) -> Option<RenewalPolicy> {
        let lease = self.backend.lock().lease?;
        RenewalPolicy::new(lease, lease / 3).ok()
    }

    fn start(&self, reporter: HoldReporter) {
        *self.lock_reporter() = Some(reporter);
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, Error>> {
        tokio::task::yield_now().await;
        let mut answers = Vec::with_capacity(keys.len());
        for key in keys {
            let answer = match self.backend.fault(Step::TryClaim, key) {
                Ok(()) => self.claim_one(&mut self.backend.lock(), key),
                Err(e) => Err(e),
            };
            answers.push(answer);
        }
        answers
    }

    async fn renew(&self, held: &[HeldKey]) -> Result<Vec<(ElectionName, LossReason)>, Error> {
        tokio::task::yield_now().await;
        if let Some((key, _)) = held.first() {
            self.backend.fault(Step::Renew, key)?;
        }
        let mut reg = self.backend.lock();
        let mut refused = Vec::new();
        for (key, epoch) in held {
            if Self::holds(&reg, key, *epoch, &self.attempts_of(key)) {
                if let Some(h) = reg.slots.get_mut(key).and_then(|s| s.holder.as_mut()) {
                    h.landed = tokio::time::Instant::now();
                }
            } else {
                let detail = "the memory backend shows another holder or none".into();
                refused.push((key.clone(), LossReason::Revoked { detail }));
            }
        }
        Ok(refused)
    }

    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), Error> {
        tokio::task::yield_now().await;
        self.backend.fault(Step::Confirm, key)?;
        if Self::holds(&self.backend.lock(), key, epoch, &self.attempts_of(key)) {
            Ok(())
        } else {
            Err(Error::NotHeld { name: key.clone() })
        }
    }

    /// Records a release for every key asked (a release after a loss
    /// then shows in [`check_rules`](MemoryBackend::check_rules)) and gives
    /// up those still held.
    async fn release(&self, held: &[HeldKey]) {
        tokio::task::yield_now().await;
        let mut reg = self.backend.lock();
        for (key, epoch) in held {
            let mut attempts = self.lock_attempts();
            let Some(ids) = attempts.get_mut(key) else {
                continue;
            };
            let Some(&(attempt, _)) = ids.iter().find(|(_, e)| e == epoch) else {
                continue;
            };
            ids.retain(|(a, _)| *a != attempt);
            drop(attempts);
            reg.history.push(Event::Release { attempt });
            vacate(&mut reg, key, attempt);
            reg.history.push(Event::Close {
                attempt,
                end: End::Resigned,
            });
        }
    }

    async fn wait(&self) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    /// Closes every attempt of this set (giving up any claim still held,
    /// as a dropped term does).
    async fn close(&self) {
        let attempts = std::mem::take(&mut *self.lock_attempts());
        let mut reg = self.backend.lock();
        for (key, ids) in attempts {
            for (attempt, _) in ids {
                let holds = reg
                    .slots
                    .get(&key)
                    .and_then(|s| s.holder.as_ref())
                    .is_some_and(|h| h.attempt == attempt);
                vacate(&mut reg, &key, attempt);
                let end = if holds { End::Dropped } else { End::Lost };
                reg.history.push(Event::Close { attempt, end });
            }
        }
    }
}

fn vacate(reg: &mut Registry, key: &ElectionName, attempt: u64) {
    if let Some(slot) = reg.slots.get_mut(key)
        && slot.holder.as_ref().is_some_and(|h| h.attempt == attempt)
    {
        slot.holder = None;
        slot.vacated.notify_waiters();
    }
}

impl MemoryBackend {
    /// What `request_transfer` and `prefer` share: the request of `by`
    /// (with `priority`, a preferred candidate's) recorded on the holding
    /// of `name` and reported to its watch; `None` with no holder.
    async fn store_request(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
        priority: Option<u32>,
    ) -> Result<Option<TransferRequest>, Error> {
        let name = ElectionName::new(name)?;
        tokio::task::yield_now().await;
        self.fault(Step::Leader, &name)?;
        let mut reg = self.lock();
        let Some(holding) = reg.slots.get_mut(&name).and_then(|s| s.holder.as_mut()) else {
            return Ok(None);
        };
        let mut request = TransferRequest::new(
            to.clone(),
            by.clone(),
            holding.epoch,
            Some(SystemTime::now()),
        );
        request.priority = priority;
        holding.transfer = Some(request.clone());
        if let Some(Reporter::Term(r)) = &holding.reporter {
            r.transfer_requested(request.clone());
        }
        Ok(Some(request))
    }
}

/// The memory backend as an [`Election`](election_core::Election): claims,
/// the holder as `leader`, lease sets over [`MemoryKeys`].
impl election_core::Election for MemoryBackend {
    type Claim = MemoryClaim;
    type LeaseSet = election_core::LeaseSet<MemoryKeys>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<MemoryClaim, Error> {
        MemoryBackend::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        self.fault(Step::Leader, &ElectionName::new(name)?)?;
        Ok(self.holder(name))
    }

    async fn lease_set(
        &self,
        identity: &str,
    ) -> Result<election_core::LeaseSet<MemoryKeys>, Error> {
        Ok(election_core::LeaseSet::new(self.keys(identity)?))
    }

    /// Ends the current term of `name` (ADR 0111): the next epoch is drawn
    /// for the revocation, the holder's loss reported, the name freed (one
    /// process: the loss is heard before any claim can win), and the
    /// revocation kept until the next win.
    async fn revoke(&self, name: &str, by: &Identity) -> Result<Option<Revoked>, Error> {
        let name = ElectionName::new(name)?;
        tokio::task::yield_now().await;
        self.fault(Step::Leader, &name)?;
        let mut reg = self.lock();
        let Registry {
            slots,
            history,
            names,
            ..
        } = &mut *reg;
        let Some(slot) = slots.get_mut(&name) else {
            return Ok(None);
        };
        if slot.holder.is_none() {
            return Ok(None);
        }
        let epoch = Epoch::after(slot.last_epoch)?;
        let Some(holding) = slot.holder.take() else {
            return Ok(None);
        };
        slot.last_epoch = Some(epoch);
        let revocation = Revocation::new(by.clone(), epoch, Some(SystemTime::now()));
        slot.revocation = Some(revocation.clone());
        let reason = LossReason::Revoked {
            detail: revocation.to_string(),
        };
        match &holding.reporter {
            Some(Reporter::Term(r)) => {
                r.lose(reason);
            }
            Some(Reporter::Key(r)) => {
                r.lose(&name, holding.epoch, reason);
            }
            None => {}
        }
        if reg_names_has(names, holding.attempt) {
            history.push(Event::Lost {
                attempt: holding.attempt,
            });
        }
        slot.vacated.notify_waiters();
        let deposed = Leader {
            identity: holding.identity,
            epoch: holding.epoch,
            since: Some(holding.since),
            renewed: None,
            ttl: None,
            value: holding.value,
        };
        Ok(Some(
            Revoked::new(deposed, revocation).counted(&name, "memory"),
        ))
    }

    /// Records the request on the holding and reports it to the holder's
    /// watch (at once, or when its watch starts).
    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<TransferRequest>, Error> {
        self.store_request(name, to, by, None).await
    }

    /// As `request_transfer`, from `candidate` itself, with `priority`.
    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<TransferRequest>, Error> {
        self.store_request(name, candidate, candidate, Some(priority))
            .await
    }

    async fn handover(&self, name: &str) -> Result<Option<Handover>, Error> {
        let name = ElectionName::new(name)?;
        self.fault(Step::Leader, &name)?;
        Ok(self
            .lock()
            .slots
            .get(&name)
            .and_then(|s| s.reservation().map(|(h, _)| h.clone())))
    }

    async fn revocation(&self, name: &str) -> Result<Option<Revocation>, Error> {
        let name = ElectionName::new(name)?;
        self.fault(Step::Leader, &name)?;
        Ok(self
            .lock()
            .slots
            .get(&name)
            .and_then(|s| s.revocation.clone()))
    }

    /// One store per backend value and its clones: this process and the
    /// registry's address.
    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        Ok(election_core::StoreId::new(
            "memory",
            format_args!(
                "pid={},registry={:p}",
                std::process::id(),
                Arc::as_ptr(&self.registry)
            ),
        ))
    }
}
