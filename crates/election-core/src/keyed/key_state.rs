//! [`KeyState`]: what a lease set knows about one key, kept by the
//! backend's renewal loop and read by [`LeaseSet::held`](crate::LeaseSet::held)
//! without a lock or a round trip.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::{ElectionName, Epoch, Error, Identity, Leader, lock};

/// Not held (`valid_until` of a key nobody here holds).
const NOT_HELD: u64 = 0;
/// Held with no expiry (an OS lock).
const FOREVER: u64 = u64::MAX;

/// The monotonic origin every [`KeyState`] of a set counts from, so a
/// deadline fits in one atomic word.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin(Instant);

impl Origin {
    pub(crate) fn now() -> Self {
        // One nanosecond before now, so "now" is never 0 (= not held).
        Origin(Instant::now() - std::time::Duration::from_nanos(1))
    }

    fn ticks(self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.0).as_nanos()).unwrap_or(FOREVER - 1)
    }
}

/// What the lease set last learned about a key, beyond "held or not".
#[derive(Clone, Debug, Default)]
struct Known {
    holder: Option<Leader>,
    error: Option<Error>,
}

/// One key of a [`LeaseSet`](crate::LeaseSet), as the engine's loop keeps
/// it.
///
/// The loop calls [`hold`](KeyState::hold) when it wins the key,
/// [`renewed`](KeyState::renewed) after each renewal,
/// [`end_hold`](KeyState::end_hold) the moment the key is lost or before it
/// is released, [`held_by`](KeyState::held_by) when another candidate holds
/// it, and [`failed`](KeyState::failed) when it could not find out. "Held" is a deadline on the monotonic clock: a hold whose
/// renewals stopped reads false once the deadline passes, without the loop
/// doing anything.
#[derive(Debug)]
pub(crate) struct KeyState {
    name: ElectionName,
    origin: Origin,
    /// Ticks after `origin` until which the key is held; 0 = not held.
    valid_until: AtomicU64,
    /// The epoch of the current hold (0 = none).
    epoch: AtomicU64,
    known: Mutex<Known>,
    /// Counts resolutions (win, holder seen, failure), for waiters.
    resolved: watch::Sender<u64>,
    /// False once released and not asked again (changed under the holds
    /// lock).
    wanted: AtomicBool,
    /// Asked again after a release, and not resolved since: the next
    /// answer (a claim's, or a deferral's) is awaited.
    asked_again: AtomicBool,
    /// Guards running under the key (entered under the holds lock).
    guards: watch::Sender<usize>,
    /// The hold ended to be given back, and the backend's release has not
    /// returned yet.
    giving: AtomicBool,
    /// Counts the ends of holds, for [`release`](crate::LeaseSet::release)'s
    /// wait.
    ends: watch::Sender<u64>,
}

impl KeyState {
    pub(crate) fn new(name: ElectionName, origin: Origin) -> Self {
        KeyState {
            name,
            origin,
            valid_until: AtomicU64::new(NOT_HELD),
            epoch: AtomicU64::new(0),
            known: Mutex::new(Known::default()),
            resolved: watch::channel(0).0,
            wanted: AtomicBool::new(true),
            giving: AtomicBool::new(false),
            asked_again: AtomicBool::new(false),
            guards: watch::channel(0).0,
            ends: watch::channel(0).0,
        }
    }

    /// False once released and not asked again.
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }

    /// Released (`false`) or asked again (`true`); call with the holds
    /// lock held.
    pub(crate) fn set_wanted(&self, wanted: bool) {
        if wanted && !self.wanted.load(Ordering::Acquire) {
            self.asked_again.store(true, Ordering::Release);
        }
        self.wanted.store(wanted, Ordering::Release);
        self.ends.send_modify(|n| *n += 1);
    }

    /// The hold is being given back (`true`, before it ends), or the
    /// backend's release returned (`false`).
    pub(crate) fn set_giving(&self, giving: bool) {
        self.giving.store(giving, Ordering::Release);
        self.ends.send_modify(|n| *n += 1);
    }

    /// True while a guard runs under the key.
    pub(crate) fn busy(&self) -> bool {
        *self.guards.borrow() > 0
    }

    /// A guard starts under the key; call with the holds lock held (a
    /// decision to give the key back sees it, or the guard sees the hold
    /// ended).
    pub(crate) fn enter_guard(&self) {
        self.guards.send_modify(|n| *n += 1);
    }

    /// A guard under the key finished (or was dropped).
    pub(crate) fn leave_guard(&self) {
        self.guards.send_modify(|n| *n -= 1);
    }

    /// Resolves once no guard runs under the key and it is not held (or it
    /// was asked again): what [`release`](crate::LeaseSet::release) waits for.
    pub(crate) async fn given_back(&self) {
        let mut guards = self.guards.subscribe();
        let mut ends = self.ends.subscribe();
        loop {
            ends.borrow_and_update();
            let gone = !self.is_held() && !self.giving.load(Ordering::Acquire);
            if *guards.borrow_and_update() == 0 && (gone || self.wanted()) {
                return;
            }
            tokio::select! {
                _ = guards.changed() => {}
                _ = ends.changed() => {}
            }
        }
    }

    /// The key.
    pub(crate) fn name(&self) -> &ElectionName {
        &self.name
    }

    fn resolve(&self) {
        self.asked_again.store(false, Ordering::Release);
        self.resolved.send_modify(|n| *n += 1);
    }

    /// Records a won key: held in term `epoch` until `valid_until`
    /// (monotonic, counted from before the winning request; `None` for a
    /// claim that does not expire). The holder it records has no
    /// [`since`](Leader::since).
    pub(crate) fn hold(&self, epoch: Epoch, identity: &Identity, valid_until: Option<Instant>) {
        self.valid_until.store(NOT_HELD, Ordering::Release);
        self.epoch.store(epoch.get(), Ordering::Release);
        // `since` is not known here: the backend's own `leader()` reports it.
        let identity = identity.clone();
        self.learn(Some(Leader {
            identity,
            epoch,
            since: None,
            renewed: None,
            ttl: None,
            value: None,
        }));
        self.store_deadline(valid_until);
        self.resolve();
    }

    /// Records who holds the key; the latest news is not a failure.
    fn learn(&self, holder: Option<Leader>) {
        let mut known = lock(&self.known);
        known.holder = holder;
        known.error = None;
    }

    fn store_deadline(&self, valid_until: Option<Instant>) {
        let ticks = match valid_until {
            None => FOREVER,
            Some(t) => self.origin.ticks(t),
        };
        self.valid_until.store(ticks, Ordering::Release);
    }

    /// Records a renewal of the hold in term `epoch`: held until
    /// `valid_until`. Ignored if the key is no longer held in that term.
    pub(crate) fn renewed(&self, epoch: Epoch, valid_until: Instant) {
        if self.epoch.load(Ordering::Acquire) == epoch.get()
            && self.valid_until.load(Ordering::Acquire) != NOT_HELD
        {
            self.store_deadline(Some(valid_until));
        }
    }

    /// Ends the hold: the key is not held (any more), from the moment a
    /// loss is known or before the key is released. `held` reads false from
    /// here on.
    pub(crate) fn end_hold(&self) {
        self.valid_until.store(NOT_HELD, Ordering::Release);
        self.epoch.store(0, Ordering::Release);
        // This process was the holder last seen; who holds it now is not
        // known until the backend sees it.
        lock(&self.known).holder = None;
        self.ends.send_modify(|n| *n += 1);
    }

    /// Records that another candidate holds the key (`None`: someone does,
    /// but who is not known).
    pub(crate) fn held_by(&self, holder: Option<Leader>) {
        self.end_hold();
        self.learn(holder);
        self.resolve();
    }

    /// True if the latest news is that another candidate holds the key.
    pub(crate) fn elsewhere(&self) -> bool {
        !self.is_held() && self.resolutions() > 0 && lock(&self.known).error.is_none()
    }

    /// The set does not claim the key now (a balanced set's share is
    /// full): a first `ask` of it hears "not held", holder unknown.
    pub(crate) fn defer(&self) {
        if self.resolutions() == 0 || self.asked_again.load(Ordering::Acquire) {
            self.held_by(None);
        }
    }

    /// Records that the backend could not tell who holds the key. A hold
    /// the key had stays until its deadline (the loop reports a loss with
    /// [`end_hold`](KeyState::end_hold)).
    pub(crate) fn failed(&self, error: Error) {
        lock(&self.known).error = Some(error);
        self.resolve();
    }

    /// True while this process holds the key and its deadline has not
    /// passed. No lock, no round trip.
    pub(crate) fn is_held(&self) -> bool {
        let until = self.valid_until.load(Ordering::Acquire);
        until != NOT_HELD && (until == FOREVER || self.origin.ticks(Instant::now()) < until)
    }

    /// The epoch of the current hold, if the key is held.
    pub(crate) fn epoch(&self) -> Option<Epoch> {
        let epoch = Epoch::new(self.epoch.load(Ordering::Acquire))?;
        self.is_held().then_some(epoch)
    }

    /// The holder last seen (this process while it holds the key), if known.
    pub(crate) fn holder(&self) -> Option<Leader> {
        lock(&self.known).holder.clone()
    }

    /// True once the backend answered with a permanent error
    /// ([`Error::is_permanent`]): the loop no longer tries the key.
    pub(crate) fn given_up(&self) -> bool {
        lock(&self.known)
            .error
            .as_ref()
            .is_some_and(Error::is_permanent)
    }

    /// The last failure to find out, if the latest news was a failure.
    pub(crate) fn error(&self) -> Option<Error> {
        lock(&self.known).error.clone()
    }

    /// How many times the key was resolved so far.
    pub(crate) fn resolutions(&self) -> u64 {
        *self.resolved.borrow()
    }

    /// Resolves once the loop has resolved the key more than `seen` times
    /// (won it, seen another holder, or failed).
    pub(crate) async fn resolved_after(&self, seen: u64) {
        let mut rx = self.resolved.subscribe();
        let _ = rx.wait_for(|n| *n > seen).await;
    }

    /// The error a guard reports when this process does not hold the key:
    /// the last failure to find out if that is the latest news, else
    /// [`Error::HeldElsewhere`] naming the holder last seen.
    pub(crate) fn not_held_error(&self) -> Error {
        let known = lock(&self.known);
        match &known.error {
            Some(e) => e.clone(),
            None => Error::HeldElsewhere {
                name: self.name.clone(),
                holder: known.holder.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn state() -> KeyState {
        KeyState::new(ElectionName::new("k").unwrap(), Origin::now())
    }

    #[tokio::test(start_paused = true)]
    async fn hold_reads_false_once_its_deadline_passes() {
        let s = state();
        let me = Identity::new("me").unwrap();
        assert!(!s.is_held());
        let epoch = Epoch::new(3).unwrap();
        s.hold(epoch, &me, Some(Instant::now() + Duration::from_secs(10)));
        assert!(s.is_held());
        assert_eq!(s.epoch(), Some(epoch));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(s.is_held());
        s.renewed(epoch, Instant::now() + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(s.is_held(), "renewal moved the deadline");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!s.is_held(), "renewals stopped: false at the deadline");
        assert_eq!(s.epoch(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn renewal_of_an_old_term_does_not_revive_it() {
        let s = state();
        let me = Identity::new("me").unwrap();
        let old = Epoch::new(1).unwrap();
        s.hold(old, &me, Some(Instant::now() + Duration::from_secs(1)));
        s.end_hold();
        s.renewed(old, Instant::now() + Duration::from_secs(10));
        assert!(!s.is_held());
        s.hold(Epoch::new(2).unwrap(), &me, None);
        s.renewed(old, Instant::now() + Duration::from_millis(1));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(s.is_held(), "a lock hold does not expire");
    }

    #[test]
    fn not_held_error_names_the_holder() {
        let s = state();
        let leader = Leader {
            identity: Identity::new("other").unwrap(),
            epoch: Epoch::new(7).unwrap(),
            since: Some(std::time::SystemTime::UNIX_EPOCH),
            renewed: None,
            ttl: None,
            value: None,
        };
        s.held_by(Some(leader.clone()));
        match s.not_held_error() {
            Error::HeldElsewhere { holder, .. } => assert_eq!(holder, Some(leader)),
            e => panic!("unexpected {e:?}"),
        }
        s.failed(Error::NotHeld {
            name: s.name().clone(),
        });
        assert!(matches!(s.not_held_error(), Error::NotHeld { .. }));
    }
}
