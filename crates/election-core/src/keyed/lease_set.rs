//! [`LeaseSet`]: many keys, one lease each, held by whichever process asks
//! and can; the [`KeyedClaims`] a backend implements for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config_error::{HOUR, check_setting};
use crate::keyed::balance::{Balance, SetMember};
use crate::keyed::claims::KeyedClaims;
use crate::keyed::engine::{Guards, HoldReporter, Holds, drive};
use crate::keyed::events::KeyEvents;
use crate::keyed::key_state::{KeyState, Origin};
use crate::{
    ConfigError, ElectionName, Epoch, Error, Identity, Leader, LossReason, WriteToken, lock,
};

/// The default bound on how long [`LeaseSet::close`] waits for running
/// guards before it returns (the keys they write under stay held until they
/// finish, whatever the bound).
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

struct Shared {
    /// The keys asked about and held, as the engine's loop keeps them.
    holds: Arc<Holds>,
    closed: AtomicBool,
    origin: Origin,
    /// Guards admitted and not yet finished; once `closing` is set no
    /// guard is admitted, and the loop gives keys up only when the last
    /// running guard has finished ([`Guards::stop`]).
    guards: watch::Sender<Guards>,
}

impl Shared {
    /// Admits a guard unless the set is closing.
    fn admit(self: &Arc<Self>) -> Option<GuardPass> {
        let admitted = self.guards.send_if_modified(|g| {
            if g.closing {
                return false;
            }
            g.running += 1;
            true
        });
        admitted.then(|| GuardPass(self.clone()))
    }

    /// Stops admitting guards: the loop gives keys up now if no guard
    /// runs, else when the last one finishes.
    fn stop_guards(&self) {
        self.guards.send_modify(|g| g.closing = true);
    }
}

/// A running guard; dropped when its write finished or was dropped.
struct GuardPass(Arc<Shared>);

/// A guard running under one key: the key is not given back meanwhile.
struct KeyPass<'a> {
    holds: &'a Holds,
    state: Arc<KeyState>,
}

impl<'a> KeyPass<'a> {
    fn enter(holds: &'a Holds, state: &Arc<KeyState>) -> Self {
        holds.enter_guard(state);
        KeyPass {
            holds,
            state: state.clone(),
        }
    }
}

impl Drop for KeyPass<'_> {
    fn drop(&mut self) {
        self.state.leave_guard();
        if !self.state.wanted() {
            // Released meanwhile: given back now that no guard runs.
            self.holds.wake.notify_one();
        }
    }
}

impl Drop for GuardPass {
    fn drop(&mut self) {
        self.0.guards.send_modify(|g| g.running -= 1);
    }
}

/// Many keys, one lease each: one writer per shard, tenant or store.
///
/// A process *asks* about keys ([`held`](LeaseSet::held),
/// [`ask`](LeaseSet::ask), [`guard`](LeaseSet::guard)); from the first ask
/// on, the backend's background loop keeps trying to win each key this
/// process does not hold and renews those it holds, so a key whose holder
/// went away moves here. Every key is an election of its own, with epochs
/// that grow per key.
///
/// - [`held`](LeaseSet::held) answers from the state the loop keeps: no
///   lock, no round trip. It may lag the backend by up to one renewal
///   interval, and a hold whose renewals stopped reads false once its
///   lease could have run out (a deadline on the monotonic clock).
/// - [`guard`](LeaseSet::guard) acquires or renews, checks the claim at the
///   commit point, and only then runs the write, handing it a
///   [`WriteToken`] bound to the key and its epoch.
/// - [`close`](LeaseSet::close) turns `held` false at once for every key,
///   refuses new guards, waits for the running ones, then stops the loop,
///   which gives held keys up (each backend documents how: released at
///   once, or left to age out).
///
/// ```
/// use election_core::{LeaseSet, PerKeyClaims, Identity};
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let backend = MemoryBackend::new();
/// let me = Identity::new("node-a")?;
/// let set = LeaseSet::new(PerKeyClaims::new(me.clone(), move |key| {
///     backend.claim(key.as_str(), me.as_str())
/// }));
/// assert!(set.ask("store-1").await?); // won it
/// assert!(set.held("store-1")); // no round trip
/// let epoch = set.guard("store-1", async |token| token.epoch()).await?;
/// assert_eq!(set.epoch("store-1"), Some(epoch));
/// set.close().await;
/// assert!(!set.held("store-1"));
/// # Ok(()) }
/// ```
pub struct LeaseSet<K: KeyedClaims> {
    shared: Arc<Shared>,
    backend: Arc<K>,
    runner: Mutex<Option<JoinHandle<()>>>,
    close_timeout: Duration,
    balance: Balance,
}

impl<K: KeyedClaims> std::fmt::Debug for LeaseSet<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseSet")
            .field("identity", self.backend.identity())
            .field("keys", &self.shared.holds.keys.len())
            .field("closed", &self.shared.closed.load(Ordering::Relaxed))
            .finish()
    }
}

impl<K: KeyedClaims> LeaseSet<K> {
    /// Starts a lease set over `backend`: spawns its background loop on the
    /// current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (as `tokio::spawn` does).
    ///
    /// ```
    /// use election_core::LeaseSet;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?); // inside a tokio runtime
    /// if set.ask("shard-1").await? {
    ///     println!("this node writes shard-1");
    /// }
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn new(backend: K) -> Self {
        let backend = Arc::new(backend);
        let shared = Arc::new(Shared {
            holds: Arc::new(Holds::new(backend.identity().as_str(), backend.backend())),
            closed: AtomicBool::new(false),
            origin: Origin::now(),
            guards: watch::channel(Guards::default()).0,
        });
        backend.start(HoldReporter::new(&shared.holds));
        let runner = tokio::spawn(drive(
            backend.clone(),
            shared.holds.clone(),
            shared.guards.subscribe(),
        ));
        LeaseSet {
            shared,
            backend,
            runner: Mutex::new(Some(runner)),
            close_timeout: DEFAULT_CLOSE_TIMEOUT,
            balance: Balance::default(),
        }
    }

    /// Sets how long [`close`](LeaseSet::close) waits for running guards
    /// before it returns ([`DEFAULT_CLOSE_TIMEOUT`] by default). At most 1
    /// hour. Whatever the bound, a key is not given up while a guarded
    /// write under it runs.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?).with_close_timeout(Duration::from_secs(30))?;
    /// set.close().await; // waits up to 30 s for running guards
    /// # Ok(()) }
    /// ```
    pub fn with_close_timeout(mut self, close_timeout: Duration) -> Result<Self, ConfigError> {
        let ok = close_timeout <= HOUR;
        self.close_timeout = check_setting("close_timeout", close_timeout, ok, "above 1h")?;
        Ok(self)
    }

    /// A liveness probe over every key this set holds: unhealthy while it
    /// holds an expiring key whose last landed renewal (or win) is older
    /// than `bound`. See [`HealthCheck`](crate::HealthCheck).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let health = set.health_check(Duration::from_secs(5));
    /// assert!(set.ask("store-1").await?);
    /// assert!(health.check().is_healthy());
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn health_check(&self, bound: Duration) -> crate::HealthCheck {
        crate::HealthCheck::lease_set(&self.shared.holds, bound)
    }

    /// The identity of this process in every key's election.
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert_eq!(set.identity().as_str(), "node-a");
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn identity(&self) -> &Identity {
        self.backend.identity()
    }

    fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The state of `key`, asking about it the first time.
    fn key(&self, key: &str) -> Result<Arc<KeyState>, Error> {
        let keys = self.shared.holds.keys.pin();
        if let Some(state) = keys.get(key) {
            return Ok(state.clone());
        }
        let name = ElectionName::new(key)?;
        let fresh = Arc::new(KeyState::new(name, self.shared.origin));
        match keys.try_insert(Arc::from(key), fresh) {
            Ok(state) => {
                // Once the loop has stopped (closing), nothing is won for
                // this key, and `held` stays false.
                self.shared.holds.wake.notify_one();
                Ok(state.clone())
            }
            Err(occupied) => Ok(occupied.current.clone()),
        }
    }

    /// True while this process holds `key`: no lock contention, no round
    /// trip. The first call for a key asks about it (the background loop
    /// starts trying to win it) and answers false; use
    /// [`ask`](LeaseSet::ask) to wait for the first answer.
    ///
    /// It may lag the backend by up to one renewal interval; it never
    /// answers true after the hold's deadline (the moment the lease could
    /// have run out, on the monotonic clock) or after
    /// [`close`](LeaseSet::close). An invalid key is never held.
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert!(!set.held("shard-1")); // first call: asks about it, answers false
    /// set.ask("shard-1").await?; // wait for the first answer
    /// if set.held("shard-1") {
    ///     println!("route shard-1's requests here"); // no round trip
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn held(&self, key: &str) -> bool {
        if self.is_closed() {
            return false;
        }
        if let Some(state) = self.shared.holds.keys.pin().get(key) {
            return state.is_held() && !self.is_closed();
        }
        let _ = self.key(key);
        false
    }

    /// The epoch of this process's term on `key`, if it holds it (for
    /// fencing).
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert_eq!(set.epoch("shard-1"), None); // not held (not even asked yet)
    /// set.ask("shard-1").await?;
    /// if let Some(epoch) = set.epoch("shard-1") {
    ///     println!("holding shard-1 in term {epoch}");
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self, key: &str) -> Option<Epoch> {
        if self.is_closed() {
            return None;
        }
        self.shared.holds.keys.pin().get(key)?.epoch()
    }

    /// Who holds `key` as far as this process last learned (this process
    /// while it holds it); `None` if not known or never asked about. Its
    /// [`since`](Leader::since) is what the backend reported for another
    /// holder, and `None` while this process holds the key.
    ///
    /// ```
    /// # use election_core::{Candidate, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let _b = Candidate::new(backend.claim("shard-2", "node-b")?).campaign().await?;
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// if !set.ask("shard-2").await? {
    ///     match set.holder("shard-2") {
    ///         Some(leader) => println!("forward shard-2's writes to {}", leader.identity),
    ///         None => println!("shard-2's holder is not known yet"),
    ///     }
    /// }
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn holder(&self, key: &str) -> Option<Leader> {
        self.shared.holds.keys.pin().get(key)?.holder()
    }

    /// The keys this process holds now.
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// set.ask("shard-1").await?;
    /// set.ask("shard-2").await?;
    /// for key in set.held_keys() {
    ///     println!("serving {key}");
    /// }
    /// # assert_eq!(set.held_keys().len(), 2);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn held_keys(&self) -> Vec<ElectionName> {
        if self.is_closed() {
            return Vec::new();
        }
        let keys = self.shared.holds.keys.pin();
        keys.values()
            .filter(|s| s.is_held())
            .map(|s| s.name().clone())
            .collect()
    }

    /// Asks about `key` and waits for the first answer: `Ok(true)` if this
    /// process holds it, `Ok(false)` if another does (the loop keeps
    /// trying). Later calls answer from the loop's state at once, except
    /// the first after a [`release`](LeaseSet::release), which asks the
    /// key again and waits for the next answer.
    ///
    /// Cancel safety: cancel safe; the key stays asked about.
    ///
    /// Failure model: [`Error::Config`] for an invalid key; the backend's
    /// error (e.g. [`Error::Unavailable`]) if its first attempt failed and
    /// nothing is known yet; [`Error::NotHeld`] once the set is closed.
    ///
    /// ```
    /// # use election_core::{LeaseSet, PerKeyClaims};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let _other = election_core::Candidate::new(backend.claim("store-2", "node-b")?).campaign().await?;
    /// let set = LeaseSet::new(PerKeyClaims::new(election_core::Identity::new("node-a")?, move |key| {
    ///     backend.claim(key.as_str(), "node-a")
    /// }));
    /// assert!(!set.ask("store-2").await?);
    /// assert_eq!(set.holder("store-2").map(|l| l.identity.to_string()).as_deref(), Some("node-b"));
    /// # Ok(()) }
    /// ```
    pub async fn ask(&self, key: &str) -> Result<bool, Error> {
        self.refuse_if_closed(key)?;
        let state = self.key(key)?;
        let mut seen = 0;
        if !state.wanted() {
            // Released before: asked again, and answered by the next claim
            // (or deferral) of it.
            seen = state.resolutions();
            self.shared.holds.want(&state, true);
        }
        self.resolved_after(&state, seen).await?;
        if state.is_held() && !self.is_closed() {
            return Ok(true);
        }
        match state.error() {
            Some(e) if state.holder().is_none() => Err(e),
            _ => Ok(false),
        }
    }

    /// [`Error::NotHeld`] once the set is closed, before `key` is asked
    /// about (a closing set's loop must not start on a new key).
    fn refuse_if_closed(&self, key: &str) -> Result<(), Error> {
        if self.is_closed() {
            return Err(Error::NotHeld {
                name: ElectionName::new(key)?,
            });
        }
        Ok(())
    }

    /// Waits until `state` was resolved more than `seen` times, or the set
    /// began to close.
    async fn resolved_after(&self, state: &KeyState, seen: u64) -> Result<(), Error> {
        // From the moment close begins (not when the loop is told to stop,
        // which waits for running guards, this one included).
        let mut guards = self.shared.guards.subscribe();
        tokio::select! {
            biased;
            () = async { let _ = guards.wait_for(|g| g.closing).await; } => Err(Error::NotHeld { name: state.name().clone() }),
            () = state.resolved_after(seen) => Ok(()),
        }
    }

    /// Runs `write` only if this process holds `key` at the commit point:
    /// acquires or renews the key (honouring the backend's failover grace),
    /// re-checks the claim with the backend right before the write, and
    /// hands `write` a [`WriteToken`] bound to the key and the epoch of the
    /// term that holds it. The token cannot leave the call.
    ///
    /// Cancel safety: cancelling before `write` started runs nothing;
    /// after, `write` is dropped at its own await point (and with it, what
    /// it was doing: [`close`](LeaseSet::close) stops waiting for it).
    ///
    /// While `write` runs, [`close`](LeaseSet::close) does not give the
    /// key up (it waits for every running guard), so no other process can
    /// win the key before the write has finished or was dropped — short of
    /// a loss (the backend takes the key away, e.g. this process stopped
    /// renewing), which only a fence at the resource guards against.
    ///
    /// Failure model (nothing written in each case):
    /// [`Error::HeldElsewhere`] when another node holds the key (naming it
    /// when known); [`Error::Lost`] when the commit-point check found the
    /// key taken; [`Error::Unavailable`] / [`Error::OutcomeUnknown`] when
    /// the coordinator cannot answer (in doubt, not held);
    /// [`Error::NotHeld`] once the set is closed; [`Error::Config`] for an
    /// invalid key.
    ///
    /// ```
    /// # use election_core::{LeaseSet, PerKeyClaims, Identity, Error, WriteToken};
    /// # use election_testkit::memory::MemoryBackend;
    /// struct Shard { rows: Vec<u64> }
    /// impl Shard {
    ///     fn append(&mut self, token: &WriteToken<'_>, row: u64) {
    ///         assert_eq!(token.key().as_str(), "shard-1");
    ///         self.rows.push(row);
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(PerKeyClaims::new(Identity::new("node-a")?, move |key| {
    ///     backend.claim(key.as_str(), "node-a")
    /// }));
    /// let mut shard = Shard { rows: vec![] };
    /// set.guard("shard-1", async |token| shard.append(&token, 42)).await?;
    /// assert_eq!(shard.rows, [42]);
    /// # Ok(()) }
    /// ```
    pub async fn guard<R>(
        &self,
        key: &str,
        write: impl AsyncFnOnce(WriteToken<'_>) -> R,
    ) -> Result<R, Error> {
        self.refuse_if_closed(key)?;
        let state = self.key(key)?;
        let not_held = || Error::NotHeld {
            name: state.name().clone(),
        };
        // Counted from here until the write finished or was dropped: close
        // gives no key up before.
        let Some(_pass) = self.shared.admit() else {
            return Err(not_held());
        };
        // Entered under the holds lock: the key is not given back while
        // this guard runs (and a released key is asked again).
        let _key_pass = KeyPass::enter(&self.shared.holds, &state);
        self.resolved_after(&state, 0).await?;
        // Counted before the check: a win of the loop's in between is then
        // a later answer, not one the nudged claim (which skips held keys)
        // would have to give.
        let seen = state.resolutions();
        if !state.is_held() && state.error().is_none() {
            // Acquire: one more claim by the loop, then its answer (a
            // failure to find out is reported as it is).
            self.shared.holds.wake.notify_one();
            self.resolved_after(&state, seen).await?;
        }
        let Some(epoch) = state.epoch() else {
            return Err(state.not_held_error());
        };
        if let Err(e) = self.backend.confirm(state.name(), epoch).await {
            if matches!(
                e,
                Error::NotHeld { .. } | Error::Lost(_) | Error::HeldElsewhere { .. }
            ) {
                let reason = LossReason::Revoked {
                    detail: format!("the commit point found the key taken: {e}"),
                };
                self.shared.holds.lose(state.name(), epoch, &reason);
            }
            return Err(e);
        }
        if self.is_closed() || state.epoch() != Some(epoch) {
            return Err(not_held());
        }
        let token = WriteToken::guarded(state.name(), self.backend.identity(), epoch);
        Ok(write(token).await)
    }

    /// Gives `key` back: stops asking for it (until it is asked again by
    /// [`ask`](LeaseSet::ask) or [`guard`](LeaseSet::guard); `held` does
    /// not ask a released key again), waits for the guards running under
    /// it to finish, and then the loop releases it as at
    /// [`close`](LeaseSet::close) (a [`KeyEvent::Released`](crate::KeyEvent::Released)),
    /// so another process can win it. Returns once the backend's release
    /// returned, or the key was not held, or it was asked again.
    ///
    /// The wait is bounded by the close timeout
    /// ([`with_close_timeout`](LeaseSet::with_close_timeout)): past it,
    /// `release` logs a warning and returns, and the key is given back in
    /// the background once its last guard finished, never before. A claim
    /// of the key already on its way may still win it: it is then given
    /// back at once (`Won`, then `Released`). A key lost meanwhile is not
    /// released (rule 3).
    ///
    /// Cancel safety: the key is released from the first poll on;
    /// dropping the future only stops waiting.
    ///
    /// Failure model: [`Error::Config`] for an invalid key;
    /// [`Error::NotHeld`] once the set is closed. A key never asked about
    /// is `Ok` (nothing to give back).
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// assert!(set.ask("shard-1").await?);
    /// set.release("shard-1").await?;
    /// assert!(!set.held("shard-1")); // and not asked again by `held`
    /// assert!(backend.holder("shard-1").is_none()); // given back
    /// assert!(set.ask("shard-1").await?); // asked again: won again
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, key: &str) -> Result<(), Error> {
        self.refuse_if_closed(key)?;
        let name = ElectionName::new(key)?;
        let Some(state) = self.shared.holds.keys.pin().get(name.as_str()).cloned() else {
            return Ok(());
        };
        self.shared.holds.want(&state, false);
        if tokio::time::timeout(self.close_timeout, state.given_back())
            .await
            .is_err()
        {
            tracing::warn!(identity = %self.identity(), key = %name, close_timeout = ?self.close_timeout, "lease-set key released: guarded writes still run past the close timeout; the key stays held until they finish");
        }
        Ok(())
    }

    /// Sets how this member takes part when balanced
    /// ([`balance_among`](LeaseSet::balance_among)): its cap.
    ///
    /// ```
    /// use election_core::{Balance, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?)
    ///     .with_balance(Balance::default().with_max_keys(Some(40))?);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_balance(mut self, balance: Balance) -> Self {
        self.balance = balance;
        self
    }

    /// This member as its membership record says it: identity, the number
    /// of keys asked, and its cap ([`with_balance`](LeaseSet::with_balance)).
    ///
    /// ```
    /// # use election_core::LeaseSet;
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// set.held("shard-1");
    /// assert_eq!(set.member().offered, 1);
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn member(&self) -> SetMember {
        SetMember::new(self.identity().clone(), self.shared.holds.keys.len())
            .with_max_keys(self.balance.max_keys())
    }

    /// Balances this set's keys among the live `members` (every member of
    /// the set, as their membership records say; this one is counted even
    /// if missing): from now on the set aims at its fair share of the keys
    /// it asks — with K keys and P members ⌊K/P⌋ or ⌈K/P⌉, less if capped
    /// (ADR 0061). It claims free keys only while under its share, those
    /// it ranks highest (rendezvous hashing), and gives back the ones it
    /// ranks lowest while over it, each only once no guard runs under it,
    /// as [`release`](LeaseSet::release) does; the taker wins them with a
    /// higher epoch. Call it again whenever the view changes; an empty
    /// view ends balancing (every asked key is claimed again).
    ///
    /// Keys that only some members ask go only to those members (a
    /// member claims only what it asks); shares are computed as if every
    /// member offered the most keys any member offers.
    ///
    /// ```
    /// use election_core::{LeaseSet, SetMember};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let (a, b) = (LeaseSet::new(backend.keys("node-a")?), LeaseSet::new(backend.keys("node-b")?));
    /// for k in 0..4 {
    ///     a.held(&format!("shard-{k}"));
    ///     b.held(&format!("shard-{k}"));
    /// }
    /// let view = [a.member(), b.member()];
    /// a.balance_among(&view);
    /// b.balance_among(&view);
    /// // Soon each holds two of the four keys.
    /// # set_wait(&a, &b).await;
    /// # a.close().await; b.close().await;
    /// # async fn set_wait<K: election_core::KeyedClaims>(a: &LeaseSet<K>, b: &LeaseSet<K>) {
    /// #     while a.held_keys().len() != 2 || b.held_keys().len() != 2 {
    /// #         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    /// #     }
    /// # }
    /// # Ok(()) }
    /// ```
    pub fn balance_among(&self, members: &[SetMember]) {
        self.shared
            .holds
            .balance_among(self.identity(), self.balance.max_keys(), members);
    }

    /// A stream of this set's [`KeyEvent`](crate::KeyEvent)s: first a
    /// `Won` for each key held now, then every key won, lost or given back,
    /// in order, with its epoch; it ends once the set has closed and given
    /// its keys up. Start a key's worker on `Won`, stop it on `Lost` (at
    /// once: the key may already be another's) or `Released`. Every loss is
    /// reported; a term is never reported won after its loss. Nothing is
    /// dropped: each stream queues without bound until read.
    ///
    /// ```
    /// use election_core::{KeyEvent, LeaseSet};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// let set = LeaseSet::new(backend.keys("node-a")?);
    /// let mut events = set.events();
    /// set.ask("shard-1").await?;
    /// set.release("shard-1").await?;
    /// let mut seen = Vec::new();
    /// while let Some(event) = events.try_next() {
    ///     match &event {
    ///         KeyEvent::Won { key, epoch } => println!("start {key} in term {epoch}"),
    ///         KeyEvent::Lost { key, .. } | KeyEvent::Released { key, .. } => println!("stop {key}"),
    ///         _ => {}
    ///     }
    ///     seen.push(event);
    /// }
    /// assert!(matches!(seen[..], [KeyEvent::Won { .. }, KeyEvent::Released { .. }]));
    /// # set.close().await;
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> KeyEvents {
        self.shared.holds.events()
    }

    fn begin_close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.stop_guards();
    }

    /// Closes the set: [`held`](LeaseSet::held) answers false at once for
    /// every key and new guards are refused; then it waits for the running
    /// guards' writes to finish (or be dropped), and only then stops the
    /// background loop, which gives held keys up as the backend documents;
    /// returns once the loop has finished.
    ///
    /// The wait for running guards is bounded by the close timeout
    /// ([`with_close_timeout`](LeaseSet::with_close_timeout),
    /// [`DEFAULT_CLOSE_TIMEOUT`]). Past it, `close` logs a warning and
    /// returns, but gives nothing up early: the loop goes on renewing every
    /// held key until the last running guard finished, then gives the keys
    /// up in the background. So a key never goes to another process while a
    /// guarded write of this one runs (short of a loss); a write that never
    /// ends keeps its keys held until this process exits (the lock or lease
    /// is then freed as for any crash).
    ///
    /// Cancel safety: the set is closed from the first poll on; dropping
    /// the future only stops waiting, and the keys are given up in the
    /// background once the guards finished. Idempotent.
    ///
    /// ```
    /// # use election_core::{LeaseSet, PerKeyClaims, Identity};
    /// # use election_testkit::memory::MemoryBackend;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_core::Error> {
    /// # let backend = MemoryBackend::new();
    /// # let b = backend.clone();
    /// let set = LeaseSet::new(PerKeyClaims::new(Identity::new("a")?, move |k| b.claim(k.as_str(), "a")));
    /// assert!(set.ask("k").await?);
    /// set.close().await;
    /// assert!(!set.held("k"));
    /// assert!(backend.holder("k").is_none()); // the memory backend releases at once
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        self.begin_close();
        let mut guards = self.shared.guards.subscribe();
        let waited = tokio::time::timeout(self.close_timeout, async {
            let _ = guards.wait_for(|g| g.running == 0).await;
        })
        .await;
        if waited.is_err() {
            let running = self.shared.guards.borrow().running;
            tracing::warn!(identity = %self.identity(), running, close_timeout = ?self.close_timeout, "lease set closing: guarded writes still run past the close timeout; their keys stay held until they finish");
            return;
        }
        let runner = lock(&self.runner).take();
        if let Some(runner) = runner {
            let _ = runner.await;
        }
    }
}

impl<K: KeyedClaims> Drop for LeaseSet<K> {
    /// Dropping the set closes it; the loop gives held keys up in the
    /// background. (No guard can run then: a guard borrows the set.)
    fn drop(&mut self) {
        self.begin_close();
    }
}
