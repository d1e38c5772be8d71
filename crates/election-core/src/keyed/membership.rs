//! [`Membership`]: a balanced lease set's membership record and its view
//! of the live members, over any backend's [`Election`] (ADR 0061).
//!
//! A member holds one *slot* of its group: a single election named
//! `<group>~member-<i>` (the first free of [`MAX_MEMBERS`]), a term with
//! its own lease, whose holder identity is the member's record (its
//! identity, and its cap as `#max=<n>`). Every `every` it reads the
//! holders of all slots (`Election::leader`), hands the view to its set
//! ([`LeaseSet::balance_among`]), and campaigns again if its slot's term
//! was lost. A member that crashed drops out of every view once its slot's
//! lease has run out (its backend's TTL, plus a grace where it has one).

use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The membership task: keep a slot, read the view, balance the set.
///
/// Each round reads every slot's holder. For each slot held by another
/// member a *reaper* campaigns in the background (one campaign, so the
/// backend judges a silent holder across its polls): a member that crashed
/// loses its slot to the first reaper that finds its lease run out, which
/// gives the slot up at once, so the crashed member leaves every view
/// (SQL backends go on naming a dead holder until someone takes over). A
/// free slot is tried only while this member has none.
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
    loop {
        let me = set.member();
        if mine.as_ref().is_some_and(|(_, _, t)| t.is_lost()) {
            mine = None;
        }
        let mut view = vec![me.clone()];
        for (i, reaper) in reapers.iter_mut().enumerate() {
            if mine.as_ref().is_some_and(|(s, _, _)| *s == i) {
                continue;
            }
            let name = slot(&group, i);
            let holder = match election.leader(&name).await {
                Ok(holder) => holder,
                Err(e) => {
                    tracing::debug!(%group, slot = i, error = %e, "membership slot unreadable; left out of this round's view");
                    continue;
                }
            };
            match holder {
                None if mine.is_none() => {
                    if let Ok(c) = election.candidate(&name, &record(&me))
                        && let Ok(Some(term)) = c.try_campaign().await
                    {
                        mine = Some((i, c, term));
                    }
                }
                None => {}
                Some(leader) => {
                    view.extend(
                        parse(&leader.identity, me.offered).filter(|m| m.identity != me.identity),
                    );
                    if reaper.as_ref().is_none_or(JoinHandle::is_finished) {
                        *reaper = Some(tokio::spawn(reap(election.clone(), name, record(&me))));
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

/// This member's slot: its index, candidate and term.
type Slot<C> = (usize, Candidate<C>, Term<C>);

/// Campaigns for another member's slot `name` until it is won (its holder
/// left or its lease ran out), then gives it up at once.
async fn reap<E: Election>(election: Arc<E>, name: String, record: String) {
    let Ok(candidate) = election.candidate(&name, &record) else {
        return;
    };
    if let Ok(term) = candidate.campaign().await {
        tracing::info!(slot = %name, "membership slot of a member gone taken over and freed");
        let _ = term.resign().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
