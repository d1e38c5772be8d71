//! [`Membership`]: a balanced lease set's membership record and its view
//! of the live members, over any backend's [`Election`] (ADR 0061).
//!
//! A member holds one *slot* of its group: a single election named
//! `<group>~member-<i>` (the first free of [`MAX_MEMBERS`]), a term with
//! its own lease, whose holder identity is the member's record (its
//! identity, and its cap as `#max=<n>`). Every `every` it reads the
//! holders of the slots a member can be in (`Election::leader`; up to two
//! past the highest held, all of them every tenth round: ADR 0079), hands
//! the view to its set
//! ([`LeaseSet::balance_among`]), and campaigns again if its slot's term
//! was lost. A member that crashed drops out of every view once its slot's
//! lease has run out (its backend's TTL, plus a grace where it has one).
//!
//! Before that, a member whose slot shows no renewal for half its TTL
//! plus `every` (on backends whose `leader` reports the renewal and the
//! TTL: SQLite and PostgreSQL) is left out of this member's view as
//! *suspected* (ADR 0074): the others start claiming its keys then, so a
//! backend that judges expiry by watching a row unchanged for a full TTL
//! (PostgreSQL) has watched the keys' rows since then, not only since the
//! slot ran out. The keys still move only through each key's own rules:
//! a suspect that is alive keeps them by renewing, and is back in the view
//! at its next renewal.
//!
//! A slot whose read fails (a timed-out request on a busy server) stays
//! in the view as its last good read showed it for up to three rounds in
//! a row, then its member is left out until a read succeeds: a view that
//! dropped a live member for one failed read raised the others' shares,
//! and they took free keys meant for it (keys moved other than to a
//! newcomer).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::keyed::balance::SetMember;
use crate::{Candidate, ConfigError, Election, Identity, KeyedClaims, LeaseSet, Term, lock};

/// A set [`Membership`] balances: what its record says, and where the view
/// goes. [`LeaseSet`] implements it; so can a wrapper over one.
pub trait Balanced: Send + Sync + 'static {
    /// This member as its record says it ([`LeaseSet::member`]).
    ///
    /// ```
    /// use election_core::{Balanced, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert_eq!(Balanced::member(&set).identity.as_str(), "node-a");
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    fn member(&self) -> SetMember;

    /// Balances over `members` ([`LeaseSet::balance_among`]).
    ///
    /// ```
    /// use election_core::{Balanced, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// Balanced::balance_among(&set, &[]); // no view: every asked key is claimed
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    fn balance_among(&self, members: &[SetMember]);
}

impl<K: KeyedClaims> Balanced for LeaseSet<K> {
    fn member(&self) -> SetMember {
        LeaseSet::member(self)
    }

    fn balance_among(&self, members: &[SetMember]) {
        LeaseSet::balance_among(self, members);
    }
}

/// The most members a group has (slots read every round).
pub const MAX_MEMBERS: usize = 32;

/// The name of slot `i` of `group`.
fn slot(group: &str, i: usize) -> String {
    format!("{group}~member-{i}")
}

/// A member's record, as its slot's holder identity: `identity`, and
/// `#max=<n>` for a cap.
fn record(member: &SetMember) -> String {
    match member.max_keys {
        Some(n) => format!("{}#max={n}", member.identity),
        None => member.identity.to_string(),
    }
}

/// The member a slot's holder identity names (`offered` as given: records
/// do not carry it).
fn parse(holder: &Identity, offered: usize) -> Option<SetMember> {
    let text = holder.as_str();
    let (id, max) = match text.rsplit_once("#max=") {
        Some((id, n)) => (id, n.parse().ok()),
        None => (text, None),
    };
    Some(SetMember::new(Identity::new(id).ok()?, offered).with_max_keys(max))
}

/// A lease set's membership in a balanced group: its slot, and a task that
/// reads the group's view every round and balances the set over it. Stop
/// it ([`stop`](Membership::stop)) before closing the set, so the others
/// see this member leave.
#[derive(Debug)]
pub struct Membership {
    stop: Arc<Notify>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Membership {
    /// Joins `set` to the balanced group `group` over `election` (the
    /// same backend as the set's), rereading the live members every
    /// `every` (also how long a change of members takes to be seen, on top
    /// of a crashed member's lease running out).
    ///
    /// Every member of a group must ask the same keys (shares count as if
    /// each offered as many as this one); a key only some members ask goes
    /// only to those. A cap: [`LeaseSet::with_balance`].
    ///
    /// Errors: [`ConfigError`] for a group name that is not a valid
    /// election name, or an `every` of zero or above an hour.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use election_core::{LeaseSet, Membership};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = MemoryBackend::new();
    /// let set = Arc::new(LeaseSet::new(backend.keys("node-a")?));
    /// for k in 0..8 {
    ///     set.held(&format!("shard-{k}"));
    /// }
    /// let member = Membership::start(backend.clone(), "shards", set.clone(), Duration::from_millis(100))?;
    /// // ... serve the shards this node holds ...
    /// member.stop().await; // gives the slot up: the others rebalance
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn start<E, S>(
        election: E,
        group: &str,
        set: Arc<S>,
        every: Duration,
    ) -> Result<Membership, ConfigError>
    where
        E: Election + 'static,
        S: Balanced + ?Sized,
    {
        crate::check_key_name("group", &slot(group, MAX_MEMBERS))?;
        if every.is_zero() || every > crate::config_error::HOUR {
            return Err(ConfigError::BadSetting {
                setting: "every",
                reason: "must be above zero and at most 1h".into(),
            });
        }
        let stop = Arc::new(Notify::new());
        let task = tokio::spawn(run(election, group.to_owned(), set, every, stop.clone()));
        Ok(Membership {
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// Leaves the group: gives the slot up (so the others see this member
    /// leave at their next round) and stops balancing. Returns once done.
    ///
    /// Cancel safety: the task is told to stop at the first poll; dropping
    /// the future stops waiting, and the slot is given up in the
    /// background.
    ///
    /// Failure model: none; a slot that cannot be given up ages out.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use election_core::{LeaseSet, Membership};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// # let set = Arc::new(LeaseSet::new(backend.keys("node-a")?));
    /// let member = Membership::start(backend.clone(), "shards", set.clone(), Duration::from_secs(1))?;
    /// member.stop().await;
    /// assert!(backend.holder("shards~member-0").is_none());
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn stop(&self) {
        self.stop.notify_one();
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// Slots read past the highest one seen held each round (ADR 0079): a
/// member that joins takes the first free slot, so one or two joining at
/// once are found at the next round.
pub(crate) const SPARE_SLOTS: usize = 2;
/// Every this many rounds (and at the first) all [`MAX_MEMBERS`] slots
/// are read (ADR 0079): the backstop for more members joining at once
/// than [`SPARE_SLOTS`].
pub(crate) const FULL_READ_ROUNDS: u32 = 10;

/// The slots a round reads, `0..bound` (ADR 0079): all of them at the
/// first round, every [`FULL_READ_ROUNDS`]th round, and while this member
/// has no slot; else up to [`SPARE_SLOTS`] past the highest slot the last
/// round saw held or could not read, and past this member's own.
pub(crate) fn slots_to_read(round: u32, highest: Option<usize>, mine: Option<usize>) -> usize {
    if round.is_multiple_of(FULL_READ_ROUNDS) || mine.is_none() {
        return MAX_MEMBERS;
    }
    let top = highest.max(mine).map_or(0, |h| h + 1);
    (top + SPARE_SLOTS).min(MAX_MEMBERS)
}

/// The membership task: keep a slot, read the view, balance the set.
///
/// Each round reads the holders of the slots [`slots_to_read`] names. For
/// each slot held by another member that is suspected, a *reaper*
/// campaigns in the background (one campaign, so the backend judges a
/// silent holder across its polls): a member that crashed loses its slot
/// to the first reaper that finds its lease run out, which gives the slot
/// up at once, so the crashed member leaves every view (SQL backends go on
/// naming a dead holder until someone takes over). A member that renews
/// its slot is not reaped (ADR 0079), nor one on a backend whose `leader`
/// reports no renewal (file, NATS, etcd): such a backend frees a dead
/// holder's term by itself, and the slot leaves the view when it does
/// (ADR 0118). A free slot is tried only while this member has none.
async fn run<E: Election + 'static, S: Balanced + ?Sized>(
    election: E,
    group: String,
    set: Arc<S>,
    every: Duration,
    stop: Arc<Notify>,
) {
    let election = Arc::new(election);
    let mut reapers: Vec<Option<JoinHandle<()>>> = (0..MAX_MEMBERS).map(|_| None).collect();
    let mut mine: Option<Slot<E::Claim>> = None;
    let mut seen: Vec<SlotSeen> = (0..MAX_MEMBERS).map(|_| SlotSeen::default()).collect();
    let mut highest: Option<usize> = None;
    let mut round: u32 = 0;
    loop {
        let me = set.member();
        if mine.as_ref().is_some_and(|(_, _, t)| t.is_lost()) {
            mine = None;
        }
        let bound = slots_to_read(round, highest, mine.as_ref().map(|(s, _, _)| *s));
        round = round.wrapping_add(1);
        highest = None;
        let mut view = vec![me.clone()];
        for (i, reaper) in reapers.iter_mut().enumerate() {
            if mine.as_ref().is_some_and(|(s, _, _)| *s == i) {
                continue;
            }
            if i >= bound {
                // Not read this round: what it showed starts again when it is.
                seen[i].forget();
                continue;
            }
            let name = slot(&group, i);
            let holder = match election.leader(&name).await {
                Ok(holder) => holder,
                Err(e) => {
                    highest = Some(i);
                    let state = &mut seen[i];
                    state.failed += 1;
                    if state.failed <= UNREAD_ROUNDS_KEPT {
                        tracing::debug!(%group, slot = i, error = %e, "membership slot unreadable; kept in this round's view as last seen");
                        view.extend(state.members.iter().cloned());
                    } else {
                        state.forget();
                        tracing::debug!(%group, slot = i, error = %e, "membership slot unreadable; left out of this round's view");
                    }
                    continue;
                }
            };
            let state = &mut seen[i];
            state.failed = 0;
            match holder {
                None if mine.is_none() => {
                    state.forget();
                    if let Ok(c) = election.candidate(&name, &record(&me))
                        && let Ok(Some(term)) = c.try_campaign().await
                    {
                        mine = Some((i, c, term));
                    }
                }
                None => state.forget(),
                Some(leader) => {
                    highest = Some(i);
                    let now = Instant::now();
                    let sighting = Sighting::see(&mut state.sighting, &leader, now);
                    let members = &mut state.members;
                    members.clear();
                    let suspected = sighting.suspected(now, leader.ttl, every);
                    if suspected {
                        tracing::debug!(%group, slot = i, holder = %leader.identity,
                            "membership slot not renewed for half its TTL: its member is left out of the view");
                    } else {
                        members.extend(
                            parse(&leader.identity, me.offered)
                                .filter(|m| m.identity != me.identity),
                        );
                        view.extend(members.iter().cloned());
                    }
                    // Only a suspect's slot is reaped: a backend whose
                    // `leader` reports no renewal frees a dead holder's
                    // term by itself (ADR 0118), so a reaper there only
                    // polled a live member's slot.
                    if suspected && reaper.as_ref().is_none_or(JoinHandle::is_finished) {
                        *reaper = Some(tokio::spawn(reap(
                            election.clone(),
                            name,
                            record(&me),
                            every,
                        )));
                    }
                }
            }
        }
        set.balance_among(&view);
        tokio::select! {
            () = stop.notified() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    for reaper in reapers.into_iter().flatten() {
        reaper.abort();
        let _ = reaper.await;
    }
    if let Some((_, _, term)) = mine {
        let _ = term.resign().await;
    }
}

/// How many rounds in a row a slot whose read fails stays in the view as
/// its last good read showed it; after that its member is left out until a
/// read succeeds.
const UNREAD_ROUNDS_KEPT: u32 = 3;

/// What the rounds last saw of another member's slot: its term's
/// sighting, the members its last good read put in the view (kept there
/// while reads fail, up to [`UNREAD_ROUNDS_KEPT`] rounds: a slot that does
/// not answer for a round or two, a busy server, a timed-out request,
/// keeps its member's share from being taken for free keys), and how many
/// reads in a row have failed.
#[derive(Default)]
struct SlotSeen {
    sighting: Option<Sighting>,
    members: Vec<SetMember>,
    failed: u32,
}

impl SlotSeen {
    /// Nothing seen: the slot is free, not read this round, or unreadable
    /// for too long.
    fn forget(&mut self) {
        self.sighting = None;
        self.members.clear();
    }
}

/// This member's slot: its index, candidate and term.
type Slot<C> = (usize, Candidate<C>, Term<C>);

/// What this member last saw of one slot's term: its epoch and renewal,
/// and when it first saw them (this process's monotonic clock).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sighting {
    epoch: crate::Epoch,
    renewed: Option<SystemTime>,
    since: Instant,
}

impl Sighting {
    /// Records a read of the slot's holder at `now`; the sighting kept
    /// (`since` moves only when the term or its renewal changed).
    fn see(slot: &mut Option<Sighting>, leader: &crate::Leader, now: Instant) -> Sighting {
        match slot {
            Some(s) if s.epoch == leader.epoch && s.renewed == leader.renewed => *s,
            _ => *slot.insert(Sighting {
                epoch: leader.epoch,
                renewed: leader.renewed,
                since: now,
            }),
        }
    }

    /// True if the holder has shown no renewal for half of `ttl` plus
    /// `every` (the slack of seeing a renewal only at a round): it missed
    /// a renewal, since every backend renews more often than half its TTL.
    /// Never for a backend that reports no renewal or no TTL.
    fn suspected(&self, now: Instant, ttl: Option<Duration>, every: Duration) -> bool {
        match (self.renewed, ttl) {
            (Some(_), Some(ttl)) => now.saturating_duration_since(self.since) > ttl / 2 + every,
            _ => false,
        }
    }
}

/// Campaigns for another member's slot `name` until it is won (its holder
/// left or its lease ran out), then gives it up at once. It polls no more
/// often than the rounds read the slots (`every`, ADR 0079): a win between
/// two rounds is seen at the next one either way.
async fn reap<E: Election>(election: Arc<E>, name: String, record: String, every: Duration) {
    let Ok(candidate) = election.candidate(&name, &record) else {
        return;
    };
    let poll = candidate.poll_interval().max(every);
    let candidate = candidate.with_poll_interval_unchecked(poll);
    if let Ok(term) = candidate.campaign().await {
        tracing::info!(slot = %name, "membership slot of a member gone taken over and freed");
        let _ = term.resign().await;
    }
}

#[cfg(test)]
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "test schedules: milliseconds of at most a few minutes, fractions in 0..=1"
)]
mod tests {
    use super::*;

    fn leader(epoch: u64, renewed_ms: u64) -> crate::Leader {
        crate::Leader {
            identity: Identity::new("b").unwrap(),
            epoch: crate::Epoch::new(epoch).unwrap(),
            since: None,
            renewed: Some(SystemTime::UNIX_EPOCH + Duration::from_millis(renewed_ms)),
            ttl: Some(Duration::from_secs(3)),
            value: None,
        }
    }

    proptest::proptest! {
        /// A holder that renews at least every `renew ≤ ttl / 2`, read at
        /// rounds at most `every` apart, is never suspected; once it stops
        /// renewing, it is suspected by the first round after
        /// `ttl / 2 + 2 × every`.
        #[test]
        fn only_a_slot_that_stopped_renewing_is_suspected(
            ttl_ms in 100u64..20_000,
            every_ms in 1u64..2_000,
            gaps in proptest::collection::vec((0.0f64..=1.0, 0.0f64..=1.0), 1..60),
            stop_after in 0usize..60,
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let every = Duration::from_millis(every_ms);
            let renew = ttl / 2;
            let t0 = Instant::now();
            // The holder's renewals (ms after t0), until it stops.
            let mut renewals = vec![0u64];
            for (g, _) in gaps.iter().take(stop_after) {
                let last = *renewals.last().unwrap();
                renewals.push(last + 1 + (g * (renew.as_millis() as f64 - 1.0)) as u64);
            }
            let stopped = *renewals.last().unwrap();
            let mut slot = None;
            let mut at = 0u64;
            let mut rounds = gaps.iter().map(|(_, r)| r).cycle();
            let end = stopped + (ttl / 2 + every * 2).as_millis() as u64 + 1;
            let mut suspected_at = None;
            while at <= end + every_ms {
                let shown = *renewals.iter().rev().find(|&&r| r <= at).unwrap();
                let now = t0 + Duration::from_millis(at);
                let seen = Sighting::see(&mut slot, &leader(3, shown), now);
                if seen.suspected(now, Some(ttl), every) {
                    proptest::prop_assert!(at > stopped + renew.as_millis() as u64,
                        "suspected at {at} ms, last renewal {shown} ms, stopped {stopped} ms");
                    suspected_at.get_or_insert(at);
                }
                at += 1 + (rounds.next().unwrap() * (every_ms as f64 - 1.0)) as u64;
            }
            proptest::prop_assert!(suspected_at.is_some_and(|s| s <= end + every_ms),
                "not suspected by {} ms after it stopped at {stopped} ms", end + every_ms);
        }
    }

    proptest::proptest! {
        /// Members join by taking the first free slots: up to
        /// [`SPARE_SLOTS`] joining at once are read at every round after
        /// the round that saw the slots before (ADR 0079); any slot is read
        /// at least once every [`FULL_READ_ROUNDS`] rounds; a member
        /// without a slot reads them all.
        #[test]
        fn a_round_reads_every_slot_a_joiner_can_take(
            held in proptest::collection::btree_set(0usize..MAX_MEMBERS, 1..MAX_MEMBERS),
            mine_at in 0usize..MAX_MEMBERS,
            joining in 0usize..=SPARE_SLOTS,
            round in 0u32..1_000,
        ) {
            let held: Vec<usize> = held.into_iter().collect();
            let mine = held[mine_at % held.len()];
            // What the last round saw: every held slot but this member's.
            let highest = held.iter().copied().filter(|&s| s != mine).max();
            let bound = slots_to_read(round, highest, Some(mine));
            for s in &held {
                proptest::prop_assert!(*s < bound || *s == mine, "held slot {} not read (bound {})", s, bound);
            }
            let joined: Vec<usize> = (0..MAX_MEMBERS).filter(|s| !held.contains(s)).take(joining).collect();
            for s in joined {
                proptest::prop_assert!(s < bound, "a joiner's slot {} not read (bound {})", s, bound);
            }
            let full = (round..round + FULL_READ_ROUNDS)
                .any(|r| slots_to_read(r, highest, Some(mine)) == MAX_MEMBERS);
            proptest::prop_assert!(full, "no full read within {} rounds of {}", FULL_READ_ROUNDS, round);
            proptest::prop_assert_eq!(slots_to_read(round, highest, None), MAX_MEMBERS);
        }
    }

    #[test]
    fn no_renewal_or_no_ttl_is_never_suspected() {
        let t0 = Instant::now();
        let mut slot = None;
        let mut l = leader(3, 0);
        l.renewed = None;
        let seen = Sighting::see(&mut slot, &l, t0);
        assert!(!seen.suspected(
            t0 + Duration::from_secs(3600),
            l.ttl,
            Duration::from_millis(1)
        ));
        let seen = Sighting::see(&mut slot, &leader(3, 0), t0);
        assert!(!seen.suspected(
            t0 + Duration::from_secs(3600),
            None,
            Duration::from_millis(1)
        ));
    }

    #[test]
    fn a_record_carries_the_cap() {
        let me = SetMember::new(Identity::new("host-a/1").unwrap(), 9).with_max_keys(Some(3));
        let id = Identity::new(record(&me)).unwrap();
        assert_eq!(parse(&id, 9), Some(me));
        let plain = SetMember::new(Identity::new("b").unwrap(), 4);
        assert_eq!(
            parse(&Identity::new(record(&plain)).unwrap(), 4),
            Some(plain)
        );
    }
}
