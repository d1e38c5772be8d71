//! A claim and a lease set's claims of any backend, behind `dyn`:
//! [`AnyClaim`] implements [`Claim`] and [`AnyKeyedClaims`] implements
//! [`KeyedClaims`] by forwarding every step to the backend's own type, so
//! the core runs campaigns and lease sets over them unchanged (the four
//! rules are the backend's and the core's, untouched by the forwarding).
//!
//! A step's future is boxed: one allocation per step, beside a lock, a
//! transaction or a round trip.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use election_core::{
    Claim, Claimed, ConfigError, ElectionName, End, Epoch, Error, HeldKey, HoldReporter, Identity,
    KeyedClaims, Leader, LeaderValue, LossReason, RenewalPolicy, TermReporter, WatchGuard, Won,
};
use futures::FutureExt;
use futures::future::BoxFuture;

/// One attempt of an [`AnyClaim`]: the backend's own attempt, boxed.
pub struct AnyAttempt(Box<dyn Any + Send>);

impl fmt::Debug for AnyAttempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AnyAttempt").finish_non_exhaustive()
    }
}

/// The steps of a [`Claim`], object-safe.
trait DynClaim: Send + Sync + fmt::Debug + 'static {
    fn name(&self) -> &ElectionName;
    fn identity(&self) -> &Identity;
    fn backend(&self) -> &'static str;
    fn open(&self) -> BoxFuture<'_, Result<AnyAttempt, Error>>;
    fn try_claim<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<Option<Won>, Error>>;
    fn wait<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        poll: Duration,
    ) -> BoxFuture<'a, Result<(), Error>>;
    fn watch(&self, a: &mut AnyAttempt, won: Won, r: TermReporter) -> Result<WatchGuard, Error>;
    fn confirm<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<(), Error>>;
    fn proclaim<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        value: &'a LeaderValue,
    ) -> BoxFuture<'a, Result<(), Error>>;
    fn release<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<(), Error>>;
    fn transfers(&self) -> bool;
    fn release_to<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        to: &'a Identity,
        window: Duration,
    ) -> BoxFuture<'a, Result<(), Error>>;
    fn close(&self, a: AnyAttempt, end: End);
    fn leader(&self) -> BoxFuture<'_, Result<Option<Leader>, Error>>;
}

/// An attempt given to a claim of another backend (never happens through
/// the core, which hands a claim only its own attempts).
fn mismatch(name: &ElectionName) -> Error {
    Error::Config(ConfigError::BadSetting {
        setting: "attempt",
        reason: format!("election {name}: an attempt of another backend's claim"),
    })
}

impl<C: Claim + fmt::Debug> DynClaim for C {
    fn name(&self) -> &ElectionName {
        Claim::name(self)
    }
    fn identity(&self) -> &Identity {
        Claim::identity(self)
    }
    fn backend(&self) -> &'static str {
        Claim::backend(self)
    }
    fn open(&self) -> BoxFuture<'_, Result<AnyAttempt, Error>> {
        async move { Ok(AnyAttempt(Box::new(Claim::open(self).await?))) }.boxed()
    }
    fn try_claim<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<Option<Won>, Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::try_claim(self, a).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn wait<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        poll: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::wait(self, a, poll).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn watch(&self, a: &mut AnyAttempt, won: Won, r: TermReporter) -> Result<WatchGuard, Error> {
        match a.0.downcast_mut::<C::Attempt>() {
            Some(a) => Claim::watch(self, a, won, r),
            None => Err(mismatch(Claim::name(self))),
        }
    }
    fn confirm<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::confirm(self, a).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn proclaim<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        value: &'a LeaderValue,
    ) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::proclaim(self, a, value).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn release<'a>(&'a self, a: &'a mut AnyAttempt) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::release(self, a).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn transfers(&self) -> bool {
        Claim::transfers(self)
    }
    fn release_to<'a>(
        &'a self,
        a: &'a mut AnyAttempt,
        to: &'a Identity,
        window: Duration,
    ) -> BoxFuture<'a, Result<(), Error>> {
        async move {
            match a.0.downcast_mut::<C::Attempt>() {
                Some(a) => Claim::release_to(self, a, to, window).await,
                None => Err(mismatch(Claim::name(self))),
            }
        }
        .boxed()
    }
    fn close(&self, a: AnyAttempt, end: End) {
        // An attempt of another type was never this claim's to close.
        if let Ok(a) = a.0.downcast::<C::Attempt>() {
            Claim::close(self, *a, end);
        }
    }
    fn leader(&self) -> BoxFuture<'_, Result<Option<Leader>, Error>> {
        Claim::leader(self).boxed()
    }
}

/// A claim of any backend: what `election_url::Backend::claim` returns.
///
/// ```
/// use election_core::{Candidate, Claim};
/// use election_driver::AnyClaim;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let claim = AnyClaim::new(MemoryBackend::new().claim("jobs", "a")?);
/// assert_eq!(claim.backend(), "memory");
/// let term = Candidate::new(claim).campaign().await?;
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AnyClaim(Box<dyn DynClaim>);

impl AnyClaim {
    /// Wraps a backend's claim.
    ///
    /// ```
    /// use election_core::Claim;
    /// use election_driver::AnyClaim;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let claim = AnyClaim::new(MemoryBackend::new().claim("jobs", "a")?);
    /// assert_eq!(claim.name().as_str(), "jobs");
    /// # Ok(()) }
    /// ```
    pub fn new(claim: impl Claim + fmt::Debug) -> AnyClaim {
        AnyClaim(Box::new(claim))
    }
}

impl Claim for AnyClaim {
    type Attempt = AnyAttempt;

    fn name(&self) -> &ElectionName {
        self.0.name()
    }
    fn identity(&self) -> &Identity {
        self.0.identity()
    }
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    async fn open(&self) -> Result<AnyAttempt, Error> {
        self.0.open().await
    }
    async fn try_claim(&self, attempt: &mut AnyAttempt) -> Result<Option<Won>, Error> {
        self.0.try_claim(attempt).await
    }
    async fn wait(&self, attempt: &mut AnyAttempt, poll_interval: Duration) -> Result<(), Error> {
        self.0.wait(attempt, poll_interval).await
    }
    fn watch(
        &self,
        attempt: &mut AnyAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, Error> {
        self.0.watch(attempt, won, reporter)
    }
    async fn confirm(&self, attempt: &mut AnyAttempt) -> Result<(), Error> {
        self.0.confirm(attempt).await
    }
    async fn proclaim(&self, attempt: &mut AnyAttempt, value: &LeaderValue) -> Result<(), Error> {
        self.0.proclaim(attempt, value).await
    }
    fn transfers(&self) -> bool {
        self.0.transfers()
    }
    async fn release_to(
        &self,
        attempt: &mut AnyAttempt,
        successor: &Identity,
        window: Duration,
    ) -> Result<(), Error> {
        self.0.release_to(attempt, successor, window).await
    }
    async fn release(&self, attempt: &mut AnyAttempt) -> Result<(), Error> {
        self.0.release(attempt).await
    }
    fn close(&self, attempt: AnyAttempt, end: End) {
        self.0.close(attempt, end)
    }
    async fn leader(&self) -> Result<Option<Leader>, Error> {
        self.0.leader().await
    }
}

/// The steps of [`KeyedClaims`], object-safe.
trait DynKeyedClaims: Send + Sync + 'static {
    fn identity(&self) -> &Identity;
    fn backend(&self) -> &'static str;
    fn renewal(&self) -> Option<RenewalPolicy>;
    fn start(&self, reporter: HoldReporter);
    fn claim<'a>(&'a self, keys: &'a [ElectionName]) -> BoxFuture<'a, Vec<Result<Claimed, Error>>>;
    fn renew<'a>(
        &'a self,
        held: &'a [HeldKey],
    ) -> BoxFuture<'a, Result<Vec<(ElectionName, LossReason)>, Error>>;
    fn confirm<'a>(
        &'a self,
        key: &'a ElectionName,
        epoch: Epoch,
    ) -> BoxFuture<'a, Result<(), Error>>;
    fn release<'a>(&'a self, held: &'a [HeldKey]) -> BoxFuture<'a, ()>;
    fn give<'a>(&'a self, held: &'a [HeldKey]) -> BoxFuture<'a, ()>;
    fn pass<'a>(&'a self, keys: &'a [ElectionName]) -> BoxFuture<'a, ()>;
    fn wait(&self) -> BoxFuture<'_, ()>;
    fn close(&self) -> BoxFuture<'_, ()>;
}

impl<K: KeyedClaims> DynKeyedClaims for K {
    fn identity(&self) -> &Identity {
        KeyedClaims::identity(self)
    }
    fn backend(&self) -> &'static str {
        KeyedClaims::backend(self)
    }
    fn renewal(&self) -> Option<RenewalPolicy> {
        KeyedClaims::renewal(self)
    }
    fn start(&self, reporter: HoldReporter) {
        KeyedClaims::start(self, reporter)
    }
    fn claim<'a>(&'a self, keys: &'a [ElectionName]) -> BoxFuture<'a, Vec<Result<Claimed, Error>>> {
        KeyedClaims::claim(self, keys).boxed()
    }
    fn renew<'a>(
        &'a self,
        held: &'a [HeldKey],
    ) -> BoxFuture<'a, Result<Vec<(ElectionName, LossReason)>, Error>> {
        KeyedClaims::renew(self, held).boxed()
    }
    fn confirm<'a>(
        &'a self,
        key: &'a ElectionName,
        epoch: Epoch,
    ) -> BoxFuture<'a, Result<(), Error>> {
        KeyedClaims::confirm(self, key, epoch).boxed()
    }
    fn release<'a>(&'a self, held: &'a [HeldKey]) -> BoxFuture<'a, ()> {
        KeyedClaims::release(self, held).boxed()
    }
    fn give<'a>(&'a self, held: &'a [HeldKey]) -> BoxFuture<'a, ()> {
        KeyedClaims::give(self, held).boxed()
    }
    fn pass<'a>(&'a self, keys: &'a [ElectionName]) -> BoxFuture<'a, ()> {
        KeyedClaims::pass(self, keys).boxed()
    }
    fn wait(&self) -> BoxFuture<'_, ()> {
        KeyedClaims::wait(self).boxed()
    }
    fn close(&self) -> BoxFuture<'_, ()> {
        KeyedClaims::close(self).boxed()
    }
}

/// A lease set's claims of any backend: `election_url::AnyLeaseSet` is a
/// `LeaseSet<AnyKeyedClaims>`.
///
/// ```
/// use election_core::LeaseSet;
/// use election_driver::AnyKeyedClaims;
/// use election_testkit::memory::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), election_core::Error> {
/// let claims = MemoryBackend::new().keys("node-a")?;
/// let set = LeaseSet::new(AnyKeyedClaims::new(claims));
/// assert!(set.ask("shard-1").await?);
/// set.close().await;
/// # Ok(()) }
/// ```
pub struct AnyKeyedClaims(Box<dyn DynKeyedClaims>);

impl fmt::Debug for AnyKeyedClaims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyKeyedClaims")
            .field("backend", &self.0.backend())
            .field("identity", self.0.identity())
            .finish_non_exhaustive()
    }
}

impl AnyKeyedClaims {
    /// Wraps a backend's keyed claims.
    ///
    /// ```
    /// use election_core::KeyedClaims;
    /// use election_driver::AnyKeyedClaims;
    /// use election_testkit::memory::MemoryBackend;
    ///
    /// # fn main() -> Result<(), election_core::Error> {
    /// let claims = AnyKeyedClaims::new(MemoryBackend::new().keys("node-a")?);
    /// assert_eq!(claims.identity().as_str(), "node-a");
    /// # Ok(()) }
    /// ```
    pub fn new(claims: impl KeyedClaims) -> AnyKeyedClaims {
        AnyKeyedClaims(Box::new(claims))
    }
}

impl KeyedClaims for AnyKeyedClaims {
    fn identity(&self) -> &Identity {
        self.0.identity()
    }
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    fn renewal(&self) -> Option<RenewalPolicy> {
        self.0.renewal()
    }
    fn start(&self, reporter: HoldReporter) {
        self.0.start(reporter)
    }
    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, Error>> {
        self.0.claim(keys).await
    }
    async fn renew(&self, held: &[HeldKey]) -> Result<Vec<(ElectionName, LossReason)>, Error> {
        self.0.renew(held).await
    }
    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), Error> {
        self.0.confirm(key, epoch).await
    }
    async fn release(&self, held: &[HeldKey]) {
        self.0.release(held).await
    }
    async fn give(&self, held: &[HeldKey]) {
        self.0.give(held).await
    }
    async fn pass(&self, keys: &[ElectionName]) {
        self.0.pass(keys).await
    }
    async fn wait(&self) {
        self.0.wait().await
    }
    async fn close(&self) {
        self.0.close().await
    }
}
