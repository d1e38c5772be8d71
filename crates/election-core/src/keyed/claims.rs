//! [`KeyedClaims`]: the batch steps a backend implements for a
//! [`LeaseSet`](crate::LeaseSet) (claim many, renew many, confirm one,
//! release many, wait), and what they answer. The engine
//! ([`drive`](super::engine)) runs them as the [book](super::book) decides.

use std::future::Future;

use crate::renewal::RenewalPolicy;
use crate::{
    DEFAULT_POLL_INTERVAL, ElectionName, Epoch, Error, HoldReporter, Identity, Leader, LossReason,
    Won,
};

/// One key's answer to [`KeyedClaims::claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// Won: the epoch comes with the win (rule 1), and the validity counted
    /// from before the winning request was sent.
    Won(Won),
    /// Another candidate holds the key (`None`: someone does, who is not
    /// known).
    HeldBy(Option<Leader>),
}

/// A held key as the engine hands it to [`KeyedClaims::renew`] and
/// [`KeyedClaims::release`]: its name and the epoch of the term that holds
/// it.
pub type HeldKey = (ElectionName, Epoch);

/// The batch steps a backend implements to run a [`LeaseSet`](crate::LeaseSet);
/// the core's loop drives them.
///
/// The loop runs one step at a time (never two steps of one set at once,
/// except [`confirm`](KeyedClaims::confirm), which a guard calls
/// meanwhile): it claims the asked keys this process does not hold, then
/// waits ([`wait`](KeyedClaims::wait)) before it tries them again; it
/// renews every held key in one batch ([`renew`](KeyedClaims::renew)) on a
/// [`Renewal`](crate::renewal::Renewal) machine when the backend's holds expire
/// ([`renewal`](KeyedClaims::renewal)); and when the set closes it gives
/// the held keys up ([`release`](KeyedClaims::release)) and then calls
/// [`close`](KeyedClaims::close).
///
/// The core keeps its side of the rules of [`Claim`](crate::Claim) per key:
/// a key is held from the win with its epoch until the deadline of its
/// last landed renewal (`held` reads false from then on without a round
/// trip, rule 2); a key lost (refused renewal, [`HoldReporter::lose`], a
/// commit point that found it taken) is never released (rule 3); every
/// held key is released, then `close` runs once, when the set closes
/// (rule 4). The backend keeps the rest: the epoch comes with the win, and
/// a loss it sees between renewals is reported at once through the
/// [`HoldReporter`] it got in [`start`](KeyedClaims::start).
///
/// Cancellation: the loop runs each step to completion (bound your steps
/// with timeouts), except `wait`, which it drops at any await point, and
/// `renew`, which it cuts off at the attempt's budget (an unknown outcome:
/// the renewal is not counted).
pub trait KeyedClaims: Send + Sync + 'static {
    /// The identity of this process in every key's election.
    ///
    /// ```
    /// use election_core::KeyedClaims;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let keys = MemoryBackend::new().keys("node-a")?;
    /// assert_eq!(keys.identity().as_str(), "node-a");
    /// # Ok(()) }
    /// ```
    fn identity(&self) -> &Identity;

    /// A short name of the backend (`"file"`, `"sqlite"`, `"postgres"`,
    /// `"nats"`, `"memory"`), the `backend` label of every metric the
    /// core records for a lease set over these claims (as
    /// [`Claim::backend`](crate::Claim::backend) for a term); `"custom"`
    /// by default.
    ///
    /// ```
    /// use election_core::KeyedClaims;
    /// use election_testkit::memory::MemoryBackend;
    /// # fn main() -> Result<(), election_core::Error> {
    /// assert_eq!(MemoryBackend::new().keys("node-a")?.backend(), "memory");
    /// # Ok(()) }
    /// ```
    fn backend(&self) -> &'static str {
        "custom"
    }

    /// How held keys are renewed, or `None` (the default) when holds do not
    /// expire or renew themselves (locks, [`PerKeyClaims`](crate::PerKeyClaims)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::KeyedClaims;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// assert_eq!(backend.keys("node-a")?.renewal(), None); // holds that do not expire
    /// backend.set_lease(Some(Duration::from_secs(9)));
    /// let policy = backend.keys("node-a")?.renewal();
    /// assert_eq!(policy.map(|p| p.renew_every()), Some(Duration::from_secs(3)));
    /// # Ok(()) }
    /// ```
    fn renewal(&self) -> Option<RenewalPolicy> {
        None
    }

    /// Called once, before any other step, with the reporter for losses
    /// (and renewals) the backend sees outside the steps. The default
    /// drops it.
    ///
    /// ```
    /// use std::sync::{Mutex, PoisonError};
    /// use election_core::{ElectionName, Epoch, Error, HoldReporter, Identity, KeyedClaims};
    ///
    /// /// A backend that keeps the reporter for its watch of the store.
    /// struct Keys {
    ///     identity: Identity,
    ///     reporter: Mutex<Option<HoldReporter>>,
    /// }
    ///
    /// impl KeyedClaims for Keys {
    ///     fn identity(&self) -> &Identity {
    ///         &self.identity
    ///     }
    ///     fn start(&self, reporter: HoldReporter) {
    ///         // Called once, first: the watch reports foreign holders through it.
    ///         *self.reporter.lock().unwrap_or_else(PoisonError::into_inner) = Some(reporter);
    ///     }
    ///     async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<election_core::Claimed, Error>> {
    ///         keys.iter().map(|_| Ok(election_core::Claimed::HeldBy(None))).collect()
    ///     }
    ///     async fn confirm(&self, key: &ElectionName, _epoch: Epoch) -> Result<(), Error> {
    ///         Err(Error::NotHeld { name: key.clone() })
    ///     }
    ///     async fn release(&self, _held: &[(ElectionName, Epoch)]) {}
    /// }
    /// # fn main() -> Result<(), election_core::ConfigError> {
    /// # let _ = Keys { identity: Identity::new("node-a")?, reporter: Mutex::new(None) };
    /// # Ok(()) }
    /// ```
    fn start(&self, reporter: HoldReporter) {
        let _ = reporter;
    }

    /// Tries to win each of `keys` once: one answer per key, in order.
    /// After each wait the loop calls it for every asked key not held, in
    /// batches of at most 512 keys, one call after another: a call may
    /// cover only some of the keys the backend waits for. Answer
    /// [`Claimed::HeldBy`] from what the backend already knows (a
    /// watch of its records) without a round trip where it can, so the
    /// cost follows the keys that changed, not the keys asked.
    /// A key's error is recorded for it ([`LeaseSet::ask`](crate::LeaseSet::ask)
    /// returns it while nothing else is known); a permanent one
    /// ([`Error::is_permanent`]) stops the tries for that key. A batch
    /// with a key answering [`Error::OutcomeUnknown`] (a write timed out),
    /// or with every key answering it or [`Error::Unavailable`] (the
    /// request failed), did not get through: the next batch is at most
    /// half as large, and its keys come last in the next rounds (ADR 0058),
    /// so a claim whose cost grows with its keys still fits the backend's
    /// request timeout on a slow store. Such keys are not held; what the
    /// request may have written is the backend's to release or age out.
    ///
    /// ```
    /// use election_core::{Claimed, ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// // The engine's claim step, as a backend's test drives it:
    /// let keys = MemoryBackend::new().keys("node-a")?;
    /// let asked = [ElectionName::new("shard-1")?, ElectionName::new("shard-2")?];
    /// for (key, answer) in asked.iter().zip(keys.claim(&asked).await) {
    ///     match answer? {
    ///         Claimed::Won(won) => println!("{key}: won term {}", won.epoch),
    ///         Claimed::HeldBy(holder) => println!("{key}: held by {holder:?}"),
    ///     }
    /// }
    /// # keys.close().await;
    /// # Ok(()) }
    /// ```
    fn claim(
        &self,
        keys: &[ElectionName],
    ) -> impl Future<Output = Vec<Result<Claimed, Error>>> + Send;

    /// Renews every key of `held` in one go. `Ok(refused)` lists the keys
    /// the backend refused (another holder or none: each is lost at once,
    /// with its reason); every other key's renewal landed. `Err` when the
    /// renewal failed or its outcome is unknown: nothing is counted, it is
    /// retried until the deadline. Only called when
    /// [`renewal`](KeyedClaims::renewal) is `Some`; the default refuses
    /// nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::{Claimed, ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// backend.set_lease(Some(Duration::from_secs(9)));
    /// let keys = backend.keys("node-a")?;
    /// let key = ElectionName::new("shard-1")?;
    /// let won = keys.claim(std::slice::from_ref(&key)).await.remove(0)?;
    /// let Claimed::Won(won) = won else { return Ok(()) };
    /// // The engine's renewal step: every held key in one batch.
    /// let refused = keys.renew(&[(key.clone(), won.epoch)]).await?;
    /// assert!(refused.is_empty()); // landed for every key
    /// backend.revoke("shard-1");
    /// let refused = keys.renew(&[(key.clone(), won.epoch)]).await?;
    /// assert_eq!(refused.len(), 1); // shard-1 is lost
    /// # keys.close().await;
    /// # Ok(()) }
    /// ```
    fn renew(
        &self,
        held: &[HeldKey],
    ) -> impl Future<Output = Result<Vec<(ElectionName, LossReason)>, Error>> + Send {
        let _ = held;
        async { Ok(Vec::new()) }
    }

    /// The commit-point check of one key: proves, as exactly as the
    /// backend can, that this process holds `key` in term `epoch` *now*.
    /// [`Error::NotHeld`] / [`Error::Lost`] / [`Error::HeldElsewhere`] when
    /// it is taken (the core then counts the key lost);
    /// [`Error::Unavailable`] / [`Error::OutcomeUnknown`] when the backend
    /// cannot answer.
    ///
    /// ```
    /// use election_core::{Claimed, ElectionName, Error, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let backend = MemoryBackend::new();
    /// let keys = backend.keys("node-a")?;
    /// let key = ElectionName::new("shard-1")?;
    /// if let Claimed::Won(won) = keys.claim(std::slice::from_ref(&key)).await.remove(0)? {
    ///     keys.confirm(&key, won.epoch).await?; // held now: the guarded write may run
    ///     backend.steal("shard-1", "node-b")?;
    ///     assert!(matches!(keys.confirm(&key, won.epoch).await, Err(Error::NotHeld { .. })));
    /// }
    /// # keys.close().await;
    /// # Ok(()) }
    /// ```
    fn confirm(
        &self,
        key: &ElectionName,
        epoch: Epoch,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Gives the held keys up when the set closes (never a lost key, rule
    /// 3). Failures are the backend's to log: the keys then age out.
    ///
    /// ```
    /// use election_core::{Claimed, ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let keys = backend.keys("node-a")?;
    /// let key = ElectionName::new("shard-1")?;
    /// if let Claimed::Won(won) = keys.claim(std::slice::from_ref(&key)).await.remove(0)? {
    ///     // The engine's last steps when the set closes: release, then close.
    ///     keys.release(&[(key, won.epoch)]).await;
    /// }
    /// keys.close().await;
    /// assert!(backend.holder("shard-1").is_none());
    /// # Ok(()) }
    /// ```
    fn release(&self, held: &[HeldKey]) -> impl Future<Output = ()> + Send;

    /// Gives some held keys back while the set runs on
    /// ([`LeaseSet::release`](crate::LeaseSet::release), balancing): never
    /// a lost key (rule 3), never a successor's claim; each given key must
    /// be winnable by another candidate at once (no failover grace). The
    /// default is [`release`](KeyedClaims::release); a backend whose
    /// `release` ends more than the keys it names (a session) overrides it.
    /// Failures are the backend's to log.
    ///
    /// ```
    /// use election_core::{Claimed, ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let keys = backend.keys("node-a")?;
    /// let key = ElectionName::new("shard-1")?;
    /// if let Claimed::Won(won) = keys.claim(std::slice::from_ref(&key)).await.remove(0)? {
    ///     keys.give(&[(key, won.epoch)]).await; // one key back; the set runs on
    /// }
    /// assert!(backend.holder("shard-1").is_none());
    /// # keys.close().await;
    /// # Ok(()) }
    /// ```
    fn give(&self, held: &[HeldKey]) -> impl Future<Output = ()> + Send {
        self.release(held)
    }

    /// The set does not claim `keys` now (released, or past a balanced
    /// set's share) and holds none of them: stop any wait or background
    /// campaign for them, and give up whatever such a wait won meanwhile.
    /// Called at the decisions that leave them out of a claim; the default
    /// does nothing.
    ///
    /// ```
    /// use election_core::{ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let keys = MemoryBackend::new().keys("node-a")?;
    /// keys.pass(&[ElectionName::new("shard-9")?]).await; // not claimed now
    /// # keys.close().await;
    /// # Ok(()) }
    /// ```
    fn pass(&self, keys: &[ElectionName]) -> impl Future<Output = ()> + Send {
        let _ = keys;
        async {}
    }

    /// Waits until another [`claim`](KeyedClaims::claim) of the keys not
    /// held is worth making: the backend's wake-up where it has one. The
    /// default sleeps [`DEFAULT_POLL_INTERVAL`]. Must be cancel safe.
    ///
    /// ```
    /// use election_core::KeyedClaims;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let keys = MemoryBackend::new().keys("node-a")?;
    /// // The engine waits between two claim steps of the keys not held (and
    /// // may drop the wait at any await point):
    /// keys.wait().await;
    /// # Ok(()) }
    /// ```
    fn wait(&self) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(DEFAULT_POLL_INTERVAL)
    }

    /// Ends the set, last, once every held key was released (rule 4). The
    /// default does nothing.
    ///
    /// ```
    /// use election_core::{ElectionName, KeyedClaims};
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let keys = backend.keys("node-a")?;
    /// for answer in keys.claim(&[ElectionName::new("shard-1")?]).await {
    ///     answer?;
    /// }
    /// keys.close().await; // last, once: gives up whatever is still held
    /// assert!(backend.holder("shard-1").is_none());
    /// # Ok(()) }
    /// ```
    fn close(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}
