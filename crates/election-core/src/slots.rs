//! N holders of one name (a semaphore): [`Slots`], [`SlotCandidate`],
//! [`SlotTerm`].
//!
//! A name with `N` slots is `N` ordinary elections, one per slot, named
//! `<name>#slot-<i>` ([`Slots::slot_name`]). A holder holds exactly one
//! slot, as a [`Term`] of that slot's election: its own epoch, its own
//! loss, its own fencing token (a resource fenced per slot, named after
//! the slot's election). Every rule of [`Claim`] holds per slot, so at most
//! one holder per slot and at most `N` holders at any instant, and a
//! holder's loss is reported before anyone else can win its slot (ADR
//! 0062).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::health::{CurrentTerm, HealthCheck};
use crate::{
    Candidate, Claim, ConfigError, Election, ElectionName, Error, Leader, MAX_NAME_LEN, Term,
};

/// The most slots a name can have.
///
/// A waiting [`SlotCandidate`] campaigns for every slot at once (one
/// backend wait per slot: a blocked thread per slot on the file backend, a
/// watch per slot on NATS), and every campaign first reads the slots above
/// its count: a bound keeps both small.
pub const MAX_SLOTS: u32 = 64;

/// How many reads of holders run at once (a SQL backend's pool has few
/// connections; its reads time out while queued for one).
const READS_AT_ONCE: usize = 2;

/// What separates a name from its slot number in a slot's election name.
const SLOT_MARK: &str = "#slot-";

/// A name with a number of slots: which elections its holders campaign
/// for, and which names a campaign reads to find the name used in another
/// shape (without slots, or with more of them).
///
/// ```
/// use election_core::Slots;
///
/// # fn main() -> Result<(), election_core::ConfigError> {
/// let workers = Slots::new("workers", 3)?;
/// assert_eq!(workers.count(), 3);
/// assert_eq!(workers.slot_name(2)?.as_str(), "workers#slot-2");
/// assert!(Slots::new("workers", 0).is_err()); // a typed ConfigError
/// assert!(Slots::new("workers", election_core::MAX_SLOTS + 1).is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    name: ElectionName,
    count: u32,
}

impl Slots {
    /// `name` with `count` slots. Refused with [`ConfigError::BadSetting`]
    /// (`setting: "slots"`) for 0 slots or more than [`MAX_SLOTS`], and with
    /// [`ConfigError::BadName`] for a name that is not an election name or
    /// too long to carry a slot number (at most 200 bytes with
    /// `#slot-63`).
    ///
    /// ```
    /// use election_core::{ConfigError, Slots};
    ///
    /// assert!(Slots::new("workers", 2).is_ok());
    /// assert!(matches!(Slots::new("workers", 0), Err(ConfigError::BadSetting { setting: "slots", .. })));
    /// assert!(matches!(Slots::new(&"x".repeat(200), 2), Err(ConfigError::BadName { .. })));
    /// ```
    pub fn new(name: impl AsRef<str>, count: u32) -> Result<Slots, ConfigError> {
        check_count(count)?;
        let name = ElectionName::new(name)?;
        if name.as_str().len() + SLOT_MARK.len() + digits(MAX_SLOTS - 1) > MAX_NAME_LEN {
            return Err(ConfigError::BadName {
                what: "election name",
                value: name.as_str().chars().take(64).collect(),
                reason: "it is too long to carry a slot number (at most 192 bytes with slots)",
            });
        }
        Ok(Slots { name, count })
    }

    /// The name the slots belong to.
    ///
    /// ```
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// assert_eq!(election_core::Slots::new("workers", 2)?.name().as_str(), "workers");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &ElectionName {
        &self.name
    }

    /// How many slots.
    ///
    /// ```
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// assert_eq!(election_core::Slots::new("workers", 2)?.count(), 2);
    /// # Ok(()) }
    /// ```
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The election of slot `slot` (below [`count`](Slots::count)):
    /// `<name>#slot-<slot>`. Its epochs are the slot's; a resource fenced
    /// by the slot's holders keeps its high-water mark under this name
    /// (`fencing::ResourceName::for_key`). Refused with
    /// [`ConfigError::BadSetting`] for a slot not below the count.
    ///
    /// ```
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let workers = election_core::Slots::new("workers", 2)?;
    /// assert_eq!(workers.slot_name(1)?.as_str(), "workers#slot-1");
    /// assert!(workers.slot_name(2).is_err());
    /// # Ok(()) }
    /// ```
    pub fn slot_name(&self, slot: u32) -> Result<ElectionName, ConfigError> {
        if slot >= self.count {
            return Err(ConfigError::BadSetting {
                setting: "slot",
                reason: format!("slot {slot} of a name with {} slots", self.count),
            });
        }
        Ok(name_of(&self.name, slot))
    }

    /// The elections of every slot, slot 0 first.
    ///
    /// ```
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let names = election_core::Slots::new("w", 2)?.slot_names();
    /// assert_eq!(names.iter().map(|n| n.as_str()).collect::<Vec<_>>(), ["w#slot-0", "w#slot-1"]);
    /// # Ok(()) }
    /// ```
    pub fn slot_names(&self) -> Vec<ElectionName> {
        (0..self.count).map(|i| name_of(&self.name, i)).collect()
    }

    /// The names a campaign reads before it begins, to find the name in
    /// use in another shape: the name itself (used without slots), then
    /// the slots from [`count`](Slots::count) up to [`MAX_SLOTS`] (used
    /// with more slots).
    ///
    /// ```
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// let probes = election_core::Slots::new("w", 62)?.probe_names();
    /// assert_eq!(probes.iter().map(|n| n.as_str()).collect::<Vec<_>>(), ["w", "w#slot-62", "w#slot-63"]);
    /// # Ok(()) }
    /// ```
    pub fn probe_names(&self) -> Vec<ElectionName> {
        std::iter::once(self.name.clone())
            .chain((self.count..MAX_SLOTS).map(|i| name_of(&self.name, i)))
            .collect()
    }

    /// The name and slot of a slot's election name (`workers#slot-2`:
    /// `("workers", 2)`), or `None` for a name that is not one.
    ///
    /// ```
    /// use election_core::Slots;
    ///
    /// assert_eq!(Slots::parse_slot_name("workers#slot-2"), Some(("workers", 2)));
    /// assert_eq!(Slots::parse_slot_name("workers"), None);
    /// assert_eq!(Slots::parse_slot_name("workers#slot-64"), None);
    /// ```
    pub fn parse_slot_name(name: &str) -> Option<(&str, u32)> {
        let (base, number) = name.rsplit_once(SLOT_MARK)?;
        if base.is_empty()
            || number.is_empty()
            || !number.bytes().all(|b| b.is_ascii_digit())
            || (number.len() > 1 && number.starts_with('0'))
        {
            return None;
        }
        let slot: u32 = number.parse().ok()?;
        (slot < MAX_SLOTS).then_some((base, slot))
    }

    /// Judges what a campaign read of [`probe_names`](Slots::probe_names)
    /// (in that order: the name, then the slots above the count): `Err`
    /// ([`ConfigError::SlotsMismatch`]) if the name is held without slots
    /// or a slot above the count is held. Pure.
    ///
    /// ```
    /// use election_core::{ConfigError, Epoch, Identity, Leader, Slots};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let slots = Slots::new("w", 63)?;
    /// let holder = Leader { identity: Identity::new("b")?, epoch: Epoch::new(7).expect("above 0"), since: None, renewed: None, ttl: None, value: None };
    /// assert!(slots.judge(&[None, None]).is_ok());
    /// assert!(matches!(slots.judge(&[None, Some(holder)]), Err(ConfigError::SlotsMismatch { .. })));
    /// # Ok(()) }
    /// ```
    pub fn judge(&self, seen: &[Option<Leader>]) -> Result<(), ConfigError> {
        let mismatch = |seen: String| ConfigError::SlotsMismatch {
            name: self.name.as_str().to_owned(),
            asked: Some(self.count),
            seen,
        };
        if let Some(Some(l)) = seen.first() {
            return Err(mismatch(format!(
                "it is held without slots by {} in term {}",
                l.identity, l.epoch
            )));
        }
        for (slot, holder) in (self.count..).zip(seen.iter().skip(1)) {
            if let Some(l) = holder {
                return Err(mismatch(format!(
                    "its slot {slot} is held by {} in term {} (it is used with more than {} slots)",
                    l.identity, l.epoch, self.count
                )));
            }
        }
        Ok(())
    }
}

impl Slots {
    /// The names a campaign for `name` itself (without slots) reads before
    /// it begins, to find the name in use with slots: every slot a name
    /// can have, `name#slot-0` up to `name#slot-63` ([`MAX_SLOTS`]). Slot
    /// 0 alone is not enough: a slotted use's holders may have left slot 0
    /// first. Empty for a name too long to have slots, or not a name.
    ///
    /// ```
    /// let probes = election_core::Slots::plain_probe_names("w");
    /// assert_eq!(probes.len(), election_core::MAX_SLOTS as usize);
    /// assert_eq!(probes[0].as_str(), "w#slot-0");
    /// assert_eq!(probes[63].as_str(), "w#slot-63");
    /// ```
    pub fn plain_probe_names(name: &str) -> Vec<ElectionName> {
        Slots::new(name, MAX_SLOTS)
            .map(|s| s.slot_names())
            .unwrap_or_default()
    }

    /// Judges what a campaign for `name` itself read of
    /// [`plain_probe_names`](Slots::plain_probe_names) (in that order):
    /// `Err` ([`ConfigError::SlotsMismatch`], `asked: None`) if any slot is
    /// held. Pure.
    ///
    /// ```
    /// use election_core::{ConfigError, Epoch, Identity, Leader, Slots};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let holder = Leader { identity: Identity::new("b")?, epoch: Epoch::new(7).expect("above 0"), since: None, renewed: None, ttl: None, value: None };
    /// assert!(Slots::judge_plain("w", &[None, None]).is_ok());
    /// // Slot 0 left, slot 1 still held: the name is in use with slots.
    /// let seen = [None, Some(holder)];
    /// assert!(matches!(Slots::judge_plain("w", &seen), Err(ConfigError::SlotsMismatch { asked: None, .. })));
    /// # Ok(()) }
    /// ```
    pub fn judge_plain(name: &str, seen: &[Option<Leader>]) -> Result<(), ConfigError> {
        match (0u32..)
            .zip(seen)
            .find_map(|(slot, h)| h.as_ref().map(|l| (slot, l)))
        {
            None => Ok(()),
            Some((slot, l)) => Err(ConfigError::SlotsMismatch {
                name: name.to_owned(),
                asked: None,
                seen: format!(
                    "its slot {slot} ({name}{SLOT_MARK}{slot}) is held by {} in term {} (it is used with --slots)",
                    l.identity, l.epoch
                ),
            }),
        }
    }

    /// Reads who holds each of [`plain_probe_names`](Slots::plain_probe_names)
    /// on `election` ([`Election::leaders`]: one request where the backend
    /// can) and [judges](Slots::judge_plain) them for `name`. A read that
    /// fails counts as every slot free: the campaign that follows meets the
    /// same backend and reports what fails.
    ///
    /// Cancel safety: cancel safe (reads).
    ///
    /// ```
    /// # use election_core::{Candidate, ConfigError, Error, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// assert!(Slots::check_plain("w", &backend).await.is_ok());
    /// let slot_1 = Candidate::new(backend.claim("w#slot-1", "b")?).campaign().await?;
    /// let refused = Slots::check_plain("w", &backend).await;
    /// assert!(matches!(refused, Err(Error::Config(ConfigError::SlotsMismatch { .. }))));
    /// # drop(slot_1);
    /// # Ok(()) }
    /// ```
    pub async fn check_plain<E: Election>(name: &str, election: &E) -> Result<(), Error> {
        let names = Slots::plain_probe_names(name);
        let seen = election.leaders(&names).await.unwrap_or_default();
        Ok(Slots::judge_plain(name, &seen)?)
    }
}

/// `Ok` for 1 to [`MAX_SLOTS`] slots.
fn check_count(count: u32) -> Result<(), ConfigError> {
    if (1..=MAX_SLOTS).contains(&count) {
        return Ok(());
    }
    Err(ConfigError::BadSetting {
        setting: "slots",
        reason: format!("{count} is not between 1 and {MAX_SLOTS}"),
    })
}

/// A slot's number from its index among the candidates.
#[allow(
    clippy::cast_possible_truncation,
    reason = "a `SlotCandidate` has at most `MAX_SLOTS` (64) candidates, one per slot"
)]
fn slot_number(index: usize) -> u32 {
    debug_assert!(index < MAX_SLOTS as usize);
    index as u32
}

/// Decimal digits of `n`.
fn digits(n: u32) -> usize {
    n.to_string().len()
}

/// `<name>#slot-<slot>`: valid whenever `name` is no longer than
/// [`Slots::new`] allows.
fn name_of(name: &ElectionName, slot: u32) -> ElectionName {
    ElectionName::new(format!("{name}{SLOT_MARK}{slot}"))
        .unwrap_or_else(|_| unreachable!("Slots::new checked the name's length"))
}

/// The slot a campaign tries first, then the others in order: `start`,
/// `start + 1`, ... wrapping at `count`. Pure.
pub(crate) fn try_order(start: u32, count: u32) -> impl Iterator<Item = u32> {
    (0..count).map(move |k| (start % count + k) % count)
}

/// What [`SlotCandidate::on_retry`] calls.
type Report = Arc<dyn Fn(&Error) + Send + Sync>;

/// A candidate for any one slot of a name with slots: a [`Candidate`] per
/// slot, campaigned for together; the term it hands out is one slot's
/// ([`SlotTerm`]).
///
/// Every campaign first reads [`Slots::probe_names`] and refuses with
/// [`Error::Config`] ([`ConfigError::SlotsMismatch`]) when the name is
/// held without slots or a slot above the count is held: the name used in
/// another shape, as far as one read can see (a use that holds nothing at
/// that moment is not seen; a candidate with fewer slots sees this one's
/// holders of its higher slots). Then it tries the slots one by one
/// from slot 0; if all are held (and it waits), it campaigns for all of
/// them at once and keeps the first it wins, giving up at once any other
/// it won in the same instant (the cancel safety of
/// [`Candidate::campaign`]).
///
/// ```
/// use election_core::{SlotCandidate, Slots};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let slots = Slots::new("workers", 2)?;
/// let make = |id: &'static str| SlotCandidate::new(slots.clone(), |n| backend.claim(n.as_str(), id));
/// let (a, b, c) = (make("a")?, make("b")?, make("c")?);
/// let ta = a.campaign().await?;
/// let tb = b.campaign().await?;
/// assert_ne!(ta.slot(), tb.slot());
/// assert!(c.try_campaign().await?.is_none()); // both slots held
/// ta.into_term().resign().await?;
/// let tc = c.try_campaign().await?.expect("a slot is free");
/// assert_eq!(tc.slot(), 0);
/// # Ok(()) }
/// ```
pub struct SlotCandidate<C: Claim> {
    slots: Slots,
    candidates: Vec<Candidate<C>>,
    /// Claims of [`Slots::probe_names`], only read (never campaigned for).
    probes: Vec<C>,
    /// The term handed out last, of any slot, for health checks.
    current: CurrentTerm,
    /// Between two reads of a check the backend failed.
    poll_interval: Duration,
    /// [`on_retry`](SlotCandidate::on_retry)'s report, for a failed check.
    on_retry: Option<Report>,
}

impl<C: Claim> std::fmt::Debug for SlotCandidate<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotCandidate")
            .field("slots", &self.slots)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

impl<C: Claim> SlotCandidate<C> {
    /// A candidate for any slot of `slots`; `claim` makes the backend's
    /// claim (no I/O) for each name the candidate uses: every slot's
    /// election, and each name of [`Slots::probe_names`], which it only
    /// reads. Fails with `claim`'s error.
    ///
    /// ```
    /// use election_core::{SlotCandidate, Slots};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("workers", 3)?, |n| backend.claim(n.as_str(), "a"))?;
    /// assert_eq!(candidate.slots().count(), 3);
    /// # Ok(()) }
    /// ```
    pub fn new<E>(
        slots: Slots,
        mut claim: impl FnMut(&ElectionName) -> Result<C, E>,
    ) -> Result<SlotCandidate<C>, E> {
        let current: CurrentTerm = Arc::new(Mutex::new(Weak::new()));
        let candidates = slots
            .slot_names()
            .iter()
            .map(|n| Ok(Candidate::new(claim(n)?).sharing_current(current.clone())))
            .collect::<Result<Vec<_>, E>>()?;
        let probes = slots
            .probe_names()
            .iter()
            .map(&mut claim)
            .collect::<Result<Vec<_>, E>>()?;
        Ok(SlotCandidate {
            slots,
            candidates,
            probes,
            current,
            poll_interval: crate::DEFAULT_POLL_INTERVAL,
            on_retry: None,
        })
    }

    /// The name and its slots.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("workers", 3)?, |n| backend.claim(n.as_str(), "a"))?;
    /// assert_eq!(candidate.slots().name().as_str(), "workers");
    /// # Ok(()) }
    /// ```
    pub fn slots(&self) -> &Slots {
        &self.slots
    }

    /// The candidate of each slot, slot 0 first (their claims name the
    /// slots' elections).
    ///
    /// ```
    /// # use election_core::{Claim, SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?;
    /// assert_eq!(candidate.candidates()[1].claim().name().as_str(), "w#slot-1");
    /// # Ok(()) }
    /// ```
    pub fn candidates(&self) -> &[Candidate<C>] {
        &self.candidates
    }

    /// Sets every slot candidate's poll interval
    /// ([`Candidate::with_poll_interval`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?
    ///     .with_poll_interval(Duration::from_millis(100))?;
    /// # let _ = candidate;
    /// # Ok(()) }
    /// ```
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, ConfigError> {
        self.candidates = self
            .candidates
            .into_iter()
            .map(|c| c.with_poll_interval(poll_interval))
            .collect::<Result<_, _>>()?;
        self.poll_interval = poll_interval;
        Ok(self)
    }

    /// Calls `report` with each transient error a waiting campaign of any
    /// slot rides out ([`Candidate::on_retry`]).
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?
    ///     .on_retry(|e| eprintln!("still waiting: {e}"));
    /// # let _ = candidate;
    /// # Ok(()) }
    /// ```
    pub fn on_retry(mut self, report: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        let report: Report = Arc::new(report);
        self.on_retry = Some(report.clone());
        self.candidates = self
            .candidates
            .into_iter()
            .map(|c| {
                let report = report.clone();
                c.on_retry(move |e| report(e))
            })
            .collect();
        self
    }

    /// A liveness probe over every term this candidate wins, of any slot
    /// ([`Candidate::health_check`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?;
    /// let health = candidate.health_check(Duration::from_secs(10));
    /// let _term = candidate.campaign().await?;
    /// assert!(health.check().is_healthy());
    /// # Ok(()) }
    /// ```
    pub fn health_check(&self, bound: Duration) -> HealthCheck {
        HealthCheck::candidate(self.current.clone(), bound)
    }

    /// Who holds each slot now (slot 0 first; `None`: free), as each
    /// slot's [`Claim::leader`] reads it.
    ///
    /// Cancel safety: cancel safe (reads). Failure model: the first
    /// failed read's error.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?;
    /// let term = candidate.campaign().await?;
    /// let holders = candidate.holders().await?;
    /// assert_eq!(holders[term.slot() as usize].as_ref().map(|l| l.epoch), Some(term.term().epoch()));
    /// # Ok(()) }
    /// ```
    pub async fn holders(&self) -> Result<Vec<Option<Leader>>, Error> {
        let claims: Vec<&C> = self.candidates.iter().map(Candidate::claim).collect();
        read_holders(&claims).await
    }

    /// Reads [`Slots::probe_names`] and judges them ([`Slots::judge`]):
    /// [`Error::Config`] with [`ConfigError::SlotsMismatch`] when the name
    /// is seen used without slots or with more slots. Every campaign does
    /// this first.
    ///
    /// Cancel safety: cancel safe (reads). Failure model: the first
    /// failed read's error.
    ///
    /// ```
    /// # use election_core::{Candidate, ConfigError, Error, SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let plain = Candidate::new(backend.claim("w", "a")?).campaign().await?; // without slots
    /// let slotted = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "b"))?;
    /// assert!(matches!(slotted.check().await, Err(Error::Config(ConfigError::SlotsMismatch { .. }))));
    /// # drop(plain);
    /// # Ok(()) }
    /// ```
    pub async fn check(&self) -> Result<(), Error> {
        let probes: Vec<&C> = self.probes.iter().collect();
        let seen = read_holders(&probes).await?;
        Ok(self.slots.judge(&seen)?)
    }

    /// Campaigns until one slot is won.
    ///
    /// Cancel safety: dropping the future at any await point never leaves
    /// a won slot held (each slot's campaign is [`Candidate::campaign`]).
    ///
    /// Failure model: as [`Candidate::campaign`] per slot (transient
    /// failures are ridden out, also those of the first
    /// [`check`](SlotCandidate::check), read again every poll interval);
    /// [`Error::Config`] with [`ConfigError::SlotsMismatch`] from the
    /// check before anything is tried.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let candidate = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?;
    /// let held = candidate.campaign().await?;
    /// println!("slot {} in term {}", held.slot(), held.term().epoch());
    /// held.into_term().resign().await?;
    /// # Ok(()) }
    /// ```
    pub async fn campaign(&self) -> Result<SlotTerm<C>, Error> {
        let term = self.run(None, false).await?;
        Ok(term.expect("an unbounded campaign only returns with a term"))
    }

    /// Tries each slot once, from slot 0: `Ok(None)` if every slot is
    /// held by another candidate.
    ///
    /// Cancel safety as [`campaign`](SlotCandidate::campaign). Failure
    /// model: as [`Candidate::try_campaign`]; when no slot was won and a
    /// slot could not be tried (the backend failed), that error is
    /// returned rather than `Ok(None)`, since that slot may be free.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let one = |id: &'static str| SlotCandidate::new(Slots::new("w", 1).unwrap(), |n| backend.claim(n.as_str(), id));
    /// let first = one("a")?.try_campaign().await?;
    /// assert!(first.is_some());
    /// assert!(one("b")?.try_campaign().await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn try_campaign(&self) -> Result<Option<SlotTerm<C>>, Error> {
        self.run(None, true).await
    }

    /// Campaigns for at most `timeout`: `Ok(None)` if every slot is still
    /// held by another candidate then.
    ///
    /// Cancel safety and failure model as
    /// [`campaign`](SlotCandidate::campaign).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let one = |id: &'static str| SlotCandidate::new(Slots::new("w", 1).unwrap(), |n| backend.claim(n.as_str(), id));
    /// let _held = one("a")?.campaign().await?;
    /// assert!(one("b")?.campaign_timeout(Duration::from_millis(20)).await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn campaign_timeout(&self, timeout: Duration) -> Result<Option<SlotTerm<C>>, Error> {
        self.run(Some(Instant::now() + timeout), false).await
    }

    async fn run(
        &self,
        deadline: Option<Instant>,
        once: bool,
    ) -> Result<Option<SlotTerm<C>>, Error> {
        // The shape check; a waiting campaign rides out a backend that
        // cannot be read (as each slot's campaign does), not past the
        // deadline.
        loop {
            match self.check().await {
                Ok(()) => break,
                Err(e)
                    if !once
                        && matches!(
                            e,
                            Error::Unavailable { .. } | Error::OutcomeUnknown { .. }
                        ) =>
                {
                    tracing::warn!(name = %self.slots.name, error = %e, "cannot read the slots' holders; campaign retries");
                    if let Some(report) = &self.on_retry {
                        report(&e);
                    }
                    let until = Instant::now() + self.poll_interval;
                    tokio::time::sleep_until(deadline.map_or(until, |d| until.min(d))).await;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        // One pass, slot by slot: a free slot is won without waiting on
        // (and briefly winning) the others.
        let mut failed = None;
        for slot in try_order(0, self.slots.count) {
            match self.candidates[slot as usize].try_campaign().await {
                Ok(Some(term)) => return Ok(Some(self.held(slot, term))),
                Ok(None) => {}
                Err(e) if e.is_permanent() => return Err(e),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if once {
            return failed.map_or(Ok(None), Err);
        }
        // Every slot is held (or could not be tried): wait for all of
        // them at once; the first won is kept, the other campaigns are
        // dropped, which gives up a slot won in the same instant.
        let mut racing: FuturesUnordered<_> = self
            .candidates
            .iter()
            .enumerate()
            .map(|(slot, c)| async move { (slot_number(slot), c.campaign().await) })
            .collect();
        let first = async {
            match racing.next().await {
                Some((slot, Ok(term))) => Ok(self.held(slot, term)),
                Some((_, Err(e))) => Err(e),
                None => unreachable!("a name has at least one slot"),
            }
        };
        match deadline {
            None => first.await.map(Some),
            Some(d) => match tokio::time::timeout_at(d, first).await {
                Ok(held) => held.map(Some),
                Err(_) => Ok(None),
            },
        }
    }

    fn held(&self, slot: u32, term: Term<C>) -> SlotTerm<C> {
        SlotTerm {
            name: self.slots.name.clone(),
            slot,
            term,
        }
    }
}

/// Who holds each of `claims`' elections, [`READS_AT_ONCE`] reads at a
/// time.
async fn read_holders<C: Claim>(claims: &[&C]) -> Result<Vec<Option<Leader>>, Error> {
    let mut seen = Vec::with_capacity(claims.len());
    for chunk in claims.chunks(READS_AT_ONCE) {
        let reads = futures::future::join_all(chunk.iter().map(|c| c.leader())).await;
        for read in reads {
            seen.push(read?);
        }
    }
    Ok(seen)
}

/// One slot of a name with slots, held: the slot's number and its
/// [`Term`] (of the slot's election, [`Slots::slot_name`]): its epoch, its
/// loss, its fencing token. Resign or drop it as any term.
///
/// ```
/// # use election_core::{SlotCandidate, Slots};
/// # use election_testkit::memory::MemoryBackend;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// # let backend = MemoryBackend::new();
/// let candidate = SlotCandidate::new(Slots::new("workers", 2)?, |n| backend.claim(n.as_str(), "a"))?;
/// let held = candidate.campaign().await?;
/// assert_eq!(held.name().as_str(), "workers");
/// assert_eq!(held.term().name().as_str(), "workers#slot-0"); // the slot's election
/// held.into_term().resign().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SlotTerm<C: Claim> {
    name: ElectionName,
    slot: u32,
    term: Term<C>,
}

impl<C: Claim> SlotTerm<C> {
    /// The slot held (below the name's slot count).
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let held = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?.campaign().await?;
    /// assert_eq!(held.slot(), 0);
    /// # Ok(()) }
    /// ```
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The name the slots belong to (not the slot's election).
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let held = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?.campaign().await?;
    /// assert_eq!(held.name().as_str(), "w");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &ElectionName {
        &self.name
    }

    /// The slot's term.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let held = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?.campaign().await?;
    /// assert!(!held.term().is_lost());
    /// # Ok(()) }
    /// ```
    pub fn term(&self) -> &Term<C> {
        &self.term
    }

    /// The slot's term, to lead, resign or drop.
    ///
    /// ```
    /// # use election_core::{SlotCandidate, Slots};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let held = SlotCandidate::new(Slots::new("w", 2)?, |n| backend.claim(n.as_str(), "a"))?.campaign().await?;
    /// held.into_term().resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn into_term(self) -> Term<C> {
        self.term
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn slot_names_parse_back_and_never_collide(
            base in "[a-z][a-z0-9._#-]{0,40}",
            count in 1u32..=MAX_SLOTS,
            a in 0u32..MAX_SLOTS,
            b in 0u32..MAX_SLOTS,
        ) {
            let slots = Slots::new(&base, count).unwrap();
            let (na, nb) = (name_of(slots.name(), a), name_of(slots.name(), b));
            prop_assert_eq!(Slots::parse_slot_name(na.as_str()), Some((base.as_str(), a)));
            prop_assert_eq!(a == b, na == nb);
            prop_assert_ne!(na.as_str(), base.as_str());
            // The slots and the probes are disjoint, and cover the name and every slot up to the cap.
            let used: Vec<_> = slots.slot_names().into_iter().chain(slots.probe_names()).collect();
            prop_assert_eq!(used.len(), MAX_SLOTS as usize + 1);
            let distinct: std::collections::HashSet<_> = used.iter().collect();
            prop_assert_eq!(distinct.len(), used.len());
        }

        #[test]
        fn counts_outside_one_to_the_cap_are_refused(count in any::<u32>()) {
            let made = Slots::new("w", count);
            prop_assert_eq!(made.is_ok(), (1..=MAX_SLOTS).contains(&count));
            if let Err(e) = made {
                let slots_setting = matches!(e, ConfigError::BadSetting { setting: "slots", .. });
                prop_assert!(slots_setting);
            }
        }

        #[test]
        fn the_try_order_visits_every_slot_once(start in any::<u32>(), count in 1u32..=MAX_SLOTS) {
            let mut seen: Vec<u32> = try_order(start, count).collect();
            prop_assert_eq!(seen[0], start % count);
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..count).collect::<Vec<_>>());
        }

        #[test]
        fn judge_refuses_exactly_a_plain_holder_or_one_above_the_count(
            count in 1u32..=MAX_SLOTS,
            held in proptest::collection::vec(any::<bool>(), (MAX_SLOTS as usize) + 1),
        ) {
            let slots = Slots::new("w", count).unwrap();
            let leader = holder();
            let probes = slots.probe_names().len();
            let seen: Vec<Option<Leader>> =
                held[..probes].iter().map(|h| h.then(|| leader.clone())).collect();
            let any = seen.iter().any(Option::is_some);
            let judged = slots.judge(&seen);
            prop_assert_eq!(judged.is_err(), any);
            if let Err(e) = judged {
                let mismatch = matches!(e, ConfigError::SlotsMismatch { asked: Some(c), .. } if c == count);
                prop_assert!(mismatch);
            }
        }
    }

    /// A holder of a probed name, as a read shows it.
    fn holder() -> Leader {
        Leader {
            identity: crate::Identity::new("x").unwrap(),
            epoch: crate::Epoch::new(3).unwrap(),
            since: None,
            renewed: None,
            ttl: None,
            value: None,
        }
    }

    proptest! {
        #[test]
        fn judge_plain_refuses_exactly_a_held_slot_and_names_the_first(
            held in proptest::collection::vec(any::<bool>(), MAX_SLOTS as usize),
        ) {
            let leader = holder();
            prop_assert_eq!(Slots::plain_probe_names("w").len(), held.len());
            let seen: Vec<Option<Leader>> = held.iter().map(|h| h.then(|| leader.clone())).collect();
            let judged = Slots::judge_plain("w", &seen);
            prop_assert_eq!(judged.is_err(), held.contains(&true));
            if let Err(ConfigError::SlotsMismatch { asked, seen, .. }) = judged {
                let first = held.iter().position(|h| *h).unwrap();
                prop_assert_eq!(asked, None);
                let shown = format!("w#slot-{first})");
                prop_assert!(seen.contains(&shown));
            }
        }
    }

    #[test]
    fn names_too_long_for_a_slot_number_are_refused() {
        let longest = "x".repeat(MAX_NAME_LEN - SLOT_MARK.len() - 2);
        assert!(Slots::new(&longest, MAX_SLOTS).is_ok());
        let slots = Slots::new(&longest, MAX_SLOTS).unwrap();
        assert_eq!(slots.slot_names().len(), MAX_SLOTS as usize);
        assert!(matches!(
            Slots::new(format!("{longest}x"), 1),
            Err(ConfigError::BadName { .. })
        ));
        assert!(Slots::parse_slot_name("w#slot-07").is_none());
        assert!(Slots::parse_slot_name("#slot-1").is_none());
        assert!(Slots::parse_slot_name("w#slot-").is_none());
    }
}
