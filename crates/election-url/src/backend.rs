//! [`Backend`]: the backend a URL names, opened, behind its driver's
//! [`Opened`]; and [`Opening`], an observer's open that may wait for its
//! store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use election_core::{Clock, ElectionName, Epoch, Error as CoreError, Leader, LeaseSet};
use election_driver::{
    AnyClaim, AnyKeyedClaims, Changes, EpochRepair, Holder, LeaseTiming, Opened, PendingOpen,
    Warning, Watch,
};
use futures::Stream;

use crate::Error;

/// A lease set of any backend.
pub type AnyLeaseSet = LeaseSet<AnyKeyedClaims>;

/// The backend a [`BackendUrl`](crate::BackendUrl) names, opened. It
/// implements [`election_core::Election`]: its claim is [`AnyClaim`], its
/// lease set [`AnyLeaseSet`]. Cloning shares the open backend.
///
/// ```
/// use election_core::Election;
/// use election_url::{BackendUrl, Settings};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let url = BackendUrl::file(tmp.path());
/// let backend = url.open(&Settings::default()).await?;
/// let term = backend.candidate("nightly-report", "host-a/4711")?.campaign().await?;
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Backend(Arc<dyn Opened>);

impl Backend {
    pub(crate) fn from_opened(opened: Box<dyn Opened>) -> Backend {
        Backend(Arc::from(opened))
    }

    /// The driver's open backend, for what [`Backend`] does not forward.
    pub(crate) fn opened(&self) -> &dyn Opened {
        &*self.0
    }

    /// The backend's name, its URL scheme: `file`, `sqlite`, `nats`,
    /// `postgres`.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url = BackendUrl::file(tmp.path());
    /// let backend = url.open(&Settings::default()).await?;
    /// assert_eq!(backend.kind(), url.scheme());
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> &'static str {
        self.0.kind()
    }

    /// The backend's own type, if it is `T` (`election_file::FileElection`,
    /// …): for a caller that needs what only that backend has.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.downcast_ref::<election_file::FileElection>().is_some());
    /// # Ok(()) }
    /// ```
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// A lease set of `identity`, with `poll` (if given) as the interval
    /// at which keys held elsewhere are tried again; a backend that
    /// watches its keys instead (NATS) refuses `poll` with
    /// [`Error::Config`].
    ///
    /// Must be called inside a tokio runtime. Cancel safety: cancel safe.
    /// Failure model: [`Error::Config`] for an invalid identity or poll
    /// interval, the backend's error when it cannot set the set up.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}/app.db", tmp.path().display()).parse()?;
    /// let backend = url.open(&Settings::default()).await?;
    /// // Keys held elsewhere are tried again every 200 ms:
    /// let set = backend.lease_set_polling("node-a", Some(Duration::from_millis(200))).await?;
    /// assert!(set.ask("shard-1").await?);
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn lease_set_polling(
        &self,
        identity: &str,
        poll: Option<Duration>,
    ) -> Result<AnyLeaseSet, Error> {
        Ok(LeaseSet::new(self.0.keyed_claims(identity, poll).await?))
    }

    /// A file a child process may inherit, locked, to keep the claim of
    /// `name` while it runs (the file backend's lock, SQLite's same-host
    /// lock); `None` elsewhere.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert_eq!(backend.inheritable_lock("jobs"), Some(tmp.path().join("jobs.lock")));
    /// # Ok(()) }
    /// ```
    pub fn inheritable_lock(&self, name: &str) -> Option<PathBuf> {
        self.0.inheritable_lock(name)
    }

    /// The lease timing, where the claim expires (all but the file
    /// backend, whose lock is held until it is freed).
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}/app.db", tmp.path().display()).parse()?;
    /// let timing = url.open(&Settings::default()).await?.lease_timing().expect("a lease");
    /// assert!(timing.renew < timing.ttl);
    /// # Ok(()) }
    /// ```
    pub fn lease_timing(&self) -> Option<LeaseTiming> {
        self.0.lease_timing()
    }

    /// Warnings about how the backend is set up (a NATS bucket with a
    /// single replica).
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.warnings().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn warnings(&self) -> Vec<Warning> {
        self.0.warnings()
    }

    /// Closes what the backend keeps open (SQLite's pool and its WAL
    /// checkpoint, PostgreSQL's connections), waiting at most `bound`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}/app.db", tmp.path().display()).parse()?;
    /// url.open(&Settings::default()).await?.close_within(Duration::from_secs(1)).await;
    /// # Ok(()) }
    /// ```
    pub async fn close_within(&self, bound: Duration) {
        self.0.close_within(bound).await
    }

    /// Who holds `name`, and whether their term is within its failover
    /// grace (NATS: the holder waits before it acts).
    ///
    /// Cancel safety: cancel safe (reads only).
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.holder("jobs").await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn holder(&self, name: &str) -> Result<Option<Holder>, Error> {
        self.0.holder(name).await
    }

    /// Whether [`holder`](Backend::holder) may answer `pending`.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(!backend.may_be_pending());
    /// # Ok(()) }
    /// ```
    pub fn may_be_pending(&self) -> bool {
        self.0.may_be_pending()
    }

    /// The backend's own stream of `name`'s leaders (a NATS watch, a
    /// PostgreSQL observation), where it has one better than looking
    /// every `every`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.watch("jobs", Duration::from_secs(1)).await?.is_none());
    /// # Ok(()) }
    /// ```
    pub async fn watch(&self, name: &str, every: Duration) -> Result<Option<Watch<'_>>, Error> {
        self.0.watch(name, every).await
    }

    /// The operating system's changes of `name`'s files (the file
    /// backend's inotify), `None` where the backend is not files on this
    /// host.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.changes("jobs").is_some());
    /// # Ok(()) }
    /// ```
    pub fn changes(&self, name: &str) -> Option<Result<Changes, Error>> {
        self.0.changes(name)
    }

    /// The last term `name`'s epoch record shows, where the backend keeps
    /// one apart from the claim (the file backend); `None` elsewhere.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert!(backend.last_term("jobs")?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn last_term(&self, name: &str) -> Result<Option<Leader>, Error> {
        self.0.last_term(name)
    }

    /// The directory the backend keeps its files in, where it is one.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// assert_eq!(backend.local_path(), Some(tmp.path()));
    /// # Ok(()) }
    /// ```
    pub fn local_path(&self) -> Option<&Path> {
        self.0.local_path()
    }

    /// Sets `name`'s epoch record to at least `epoch`, where the backend
    /// has a record a person may repair (the file backend: `elect
    /// repair-epoch`); `None` elsewhere.
    ///
    /// ```
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let backend = BackendUrl::file(tmp.path()).open(&Settings::default()).await?;
    /// let repair = backend.repair_epoch("jobs", "7".parse()?).expect("a file record")?;
    /// assert!(repair.epoch.get() >= 7);
    /// # Ok(()) }
    /// ```
    pub fn repair_epoch(&self, name: &str, epoch: Epoch) -> Option<Result<EpochRepair, Error>> {
        self.0.repair_epoch(name, epoch)
    }

    /// Ends `name`'s current term on behalf of `by` and raises the marks
    /// of the fenced `resources` to the revocation's epoch, where the
    /// backend keeps fences in its store; [`Error::Config`] elsewhere
    /// (see [`Opened::revoke_fencing`](election_driver::Opened::revoke_fencing)).
    ///
    /// ```
    /// # async fn check(b: &election_url::Backend) -> Result<(), Box<dyn std::error::Error>> {
    /// let by = election_core::Identity::new("ops/alice")?;
    /// if let Some(r) = b.revoke_fencing("jobs", &by, &["orders"]).await? {
    ///     println!("orders fenced at {}", r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revoke_fencing(
        &self,
        name: &str,
        by: &election_core::Identity,
        resources: &[&str],
    ) -> Result<Option<election_core::Revoked>, Error> {
        self.0.revoke_fencing(name, by, resources).await
    }

    /// The backend reading `clock` instead of the system's (tests shift
    /// its wall clock, which only the times shown read); a backend that
    /// reads no injectable clock refuses with [`Error::Config`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use election_url::{BackendUrl, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let tmp = tempfile::tempdir()?;
    /// let url: BackendUrl = format!("sqlite://{}/app.db", tmp.path().display()).parse()?;
    /// let backend = url.open(&Settings::default()).await?;
    /// let backend = backend.with_clock(Arc::new(election_core::SystemClock))?;
    /// # drop(backend);
    /// # Ok(()) }
    /// ```
    pub fn with_clock(&self, clock: Arc<dyn Clock>) -> Result<Backend, Error> {
        self.0.with_clock(clock).map(Backend::from_opened)
    }
}

impl election_core::Election for Backend {
    type Claim = AnyClaim;
    type LeaseSet = AnyLeaseSet;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<AnyClaim, Error> {
        self.0.claim(name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, CoreError> {
        self.0.leader(name).await
    }

    async fn observe(
        &self,
        name: &str,
        every: Duration,
    ) -> Result<impl Stream<Item = Result<Option<Leader>, CoreError>> + Send + '_, CoreError> {
        self.0.observe(name, every).await
    }

    async fn lease_set(&self, identity: &str) -> Result<AnyLeaseSet, Error> {
        self.lease_set_polling(identity, None).await
    }

    async fn leaders(&self, names: &[ElectionName]) -> Result<Vec<Option<Leader>>, CoreError> {
        self.0.leaders(names).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        self.0.store_id().await
    }

    async fn revoke(
        &self,
        name: &str,
        by: &election_core::Identity,
    ) -> Result<Option<election_core::Revoked>, CoreError> {
        self.0.revoke(name, by).await
    }

    async fn revocation(&self, name: &str) -> Result<Option<election_core::Revocation>, CoreError> {
        self.0.revocation(name).await
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &election_core::Identity,
        by: &election_core::Identity,
    ) -> Result<Option<election_core::TransferRequest>, CoreError> {
        self.0.request_transfer(name, to, by).await
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &election_core::Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, CoreError> {
        self.0.prefer(name, candidate, priority).await
    }

    async fn handover(&self, name: &str) -> Result<Option<election_core::Handover>, CoreError> {
        self.0.handover(name).await
    }
}

/// What [`BackendUrl::open_or_pending`](crate::BackendUrl::open_or_pending)
/// found.
#[derive(Debug)]
pub enum Opening {
    /// The backend, open.
    Ready(Backend),
    /// An observer's store does not exist yet (a NATS bucket no candidate
    /// has created): [`Pending::ready`] tries again on the same
    /// connection.
    Pending(Box<Pending>),
}

/// An observer's open that found no store yet.
#[derive(Debug)]
pub struct Pending(Box<dyn PendingOpen>);

impl Pending {
    pub(crate) fn new(pending: Box<dyn PendingOpen>) -> Pending {
        Pending(pending)
    }

    /// The backend once its store exists, `None` while it does not.
    ///
    /// Cancel safety: cancel safe.
    ///
    /// ```no_run
    /// use election_url::{BackendUrl, Opening, Settings};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url: BackendUrl = "nats://127.0.0.1:4222?bucket=jobs".parse()?;
    /// let settings = Settings { observer: true, ..Settings::default() };
    /// if let Opening::Pending(pending) = url.open_or_pending(&settings).await? {
    ///     while pending.ready().await?.is_none() {
    ///         tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ready(&self) -> Result<Option<Backend>, Error> {
        Ok(self.0.ready().await?.map(Backend::from_opened))
    }
}
