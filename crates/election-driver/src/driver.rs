//! The three traits a backend implements to be opened from a URL:
//! [`Driver`] (its schemes, in `election-url`'s table), [`Target`] (a URL
//! of its scheme, parsed) and [`Opened`] (the backend, open). What only
//! some backends have is a method with a default that says "not here".

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use election_core::{
    Clock, ConfigError, ElectionName, Epoch, Error as CoreError, Handover, Identity, Leader, Probe,
    Revocation, Revoked, StoreId, TransferRequest,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use crate::{AnyClaim, AnyKeyedClaims, Error, LeaseCheck, ParseError, Secret, Settings};

/// A stream of a name's leaders ([`ElectionSteps::observe`]): each change, the
/// leader or `None` for a vacancy.
pub type Leaders<'a> = BoxStream<'a, Result<Option<Leader>, CoreError>>;

/// A backend's entry in the table of schemes (`election-url`): what it
/// parses, and how its errors are recognized in a chain.
pub trait Driver: Send + Sync + 'static {
    /// The schemes it takes; the first is its name (`postgres`), the
    /// others spell the same (`postgresql`).
    ///
    /// ```
    /// # fn check(driver: &dyn election_driver::Driver) {
    /// assert!(!driver.schemes().is_empty());
    /// # }
    /// ```
    fn schemes(&self) -> &'static [&'static str];

    /// Parses what follows `scheme://`.
    ///
    /// ```
    /// # fn check(driver: &dyn election_driver::Driver) -> Result<(), election_driver::ParseError> {
    /// let target = driver.parse("/srv/app.db")?;
    /// assert_eq!(target.scheme(), driver.schemes()[0]);
    /// # Ok(()) }
    /// ```
    fn parse(&self, rest: &str) -> Result<Box<dyn Target>, ParseError>;

    /// The [`probe`](election_core::probe) of the backend's error type,
    /// for `election_url::classify`'s walk of an error chain.
    ///
    /// ```
    /// # fn check(driver: &dyn election_driver::Driver) {
    /// let e = std::io::Error::other("x");
    /// assert!(driver.probe()(&e).is_none()); // not the backend's error
    /// # }
    /// ```
    fn probe(&self) -> Probe;
}

/// Credentials a URL carries or a tool fills in from the environment or
/// files (never from a command line, which `ps` shows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Credentials {
    /// A user (`user:password@`).
    pub user: Option<String>,
    /// The user's password.
    pub password: Option<Secret>,
    /// A token (`?token=`).
    pub token: Option<Secret>,
    /// A credentials file (`?creds=`).
    pub creds_file: Option<PathBuf>,
}

/// A URL of one backend's scheme, parsed: printed, checked against
/// [`Settings`], opened.
pub trait Target: Send + Sync + fmt::Debug + 'static {
    /// The scheme's name (`postgres` for `postgresql://` too).
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// assert!(!t.scheme().contains("://"));
    /// # }
    /// ```
    fn scheme(&self) -> &'static str;

    /// Prints the URL: with its secrets when `whole`, else each shown as
    /// [`REDACTED`](crate::REDACTED). It must parse back to the same URL.
    ///
    /// ```
    /// # use std::fmt;
    /// struct Shown<'a>(&'a dyn election_driver::Target);
    /// impl fmt::Display for Shown<'_> {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///         self.0.write(f, false)
    ///     }
    /// }
    /// ```
    fn write(&self, f: &mut fmt::Formatter<'_>, whole: bool) -> fmt::Result;

    /// A copy.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// assert_eq!(t.clone_target().scheme(), t.scheme());
    /// # }
    /// ```
    fn clone_target(&self) -> Box<dyn Target>;

    /// The lease settings (`ttl`, `renew`, `grace`) this backend uses.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// assert!(t.lease_settings().iter().all(|s| ["ttl", "renew", "grace"].contains(s)));
    /// # }
    /// ```
    fn lease_settings(&self) -> &'static [&'static str];

    /// The lease settings checked against the backend's bounds, defaults
    /// filled in (no I/O).
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// let _fits = t.check_lease(&election_driver::Settings::default()).is_ok();
    /// # }
    /// ```
    fn check_lease(&self, settings: &Settings) -> Result<(), LeaseCheck>;

    /// The settings turned into the backend's options, as opening would,
    /// without opening: the error opening would give.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// let _fits = t.check_settings(&election_driver::Settings::default()).is_ok();
    /// # }
    /// ```
    fn check_settings(&self, settings: &Settings) -> Result<(), Error>;

    /// What opening creates on this host, if anything (`the directory`,
    /// `the database`), for a tool to check first whether it may.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// if let Some((what, path)) = t.created_on_open() {
    ///     println!("opening creates {what} {}", path.display());
    /// }
    /// # }
    /// ```
    fn created_on_open(&self) -> Option<(&'static str, &Path)> {
        None
    }

    /// The URL as progress lines show it: no user, no secret, the options
    /// that say where (a bucket, a schema).
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// assert!(!t.shown().contains(election_driver::REDACTED));
    /// # }
    /// ```
    fn shown(&self) -> String;

    /// [`shown`](Target::shown), with what opening chose (a default
    /// bucket).
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target, opened: &dyn election_driver::Opened) {
    /// assert!(t.shown_opened(opened).starts_with(&t.shown()));
    /// # }
    /// ```
    fn shown_opened(&self, opened: &dyn Opened) -> String {
        let _ = opened;
        self.shown()
    }

    /// Opens the backend.
    ///
    /// Failure model: [`Error::Absent`] for an observer with nothing to
    /// observe, [`Error::Config`] for settings the backend refuses, the
    /// backend's error ([`Error::Backend`], [`Error::Opening`]) else.
    ///
    /// ```
    /// # async fn check(t: &dyn election_driver::Target) -> Result<(), election_driver::Error> {
    /// let opened = t.open(&election_driver::Settings::default()).await?;
    /// assert_eq!(opened.kind(), t.scheme());
    /// # Ok(()) }
    /// ```
    fn open<'a>(&'a self, settings: &'a Settings) -> BoxFuture<'a, Result<Box<dyn Opened>, Error>>;

    /// Opens the backend, or, for an observer whose store does not exist
    /// yet but may (a NATS bucket), a [`PendingOpen`] that keeps its
    /// connection and tries again. The default opens.
    ///
    /// ```
    /// # async fn check(t: &dyn election_driver::Target) -> Result<(), election_driver::Error> {
    /// use election_driver::Opening;
    /// match t.open_or_pending(&election_driver::Settings::default()).await? {
    ///     Opening::Ready(opened) => println!("{} open", opened.kind()),
    ///     Opening::Pending(pending) => println!("not yet: {pending:?}"),
    /// }
    /// # Ok(()) }
    /// ```
    fn open_or_pending<'a>(
        &'a self,
        settings: &'a Settings,
    ) -> BoxFuture<'a, Result<Opening, Error>> {
        self.open(settings).map(|r| r.map(Opening::Ready)).boxed()
    }

    /// The credentials the URL carries.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// let _has_token = t.credentials().token.is_some();
    /// # }
    /// ```
    fn credentials(&self) -> Credentials {
        Credentials::default()
    }

    /// The URL with its credentials replaced by `credentials`, or `None`
    /// if the backend takes none (the default).
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// let takes = t.with_credentials(election_driver::Credentials::default()).is_some();
    /// # let _ = takes;
    /// # }
    /// ```
    fn with_credentials(&self, credentials: Credentials) -> Option<Box<dyn Target>> {
        let _ = credentials;
        None
    }

    /// `self`, for a caller that knows the backend's own URL type.
    ///
    /// ```
    /// # fn check(t: &dyn election_driver::Target) {
    /// let _not_a_string = t.as_any().downcast_ref::<String>().is_none();
    /// # }
    /// ```
    fn as_any(&self) -> &dyn Any;
}

/// An opener that found no store yet (an observer's NATS bucket that no
/// candidate has created): [`ready`](PendingOpen::ready) tries again on
/// the same connection.
pub trait PendingOpen: Send + Sync + fmt::Debug + 'static {
    /// The backend once its store exists, `None` while it does not.
    ///
    /// ```
    /// # async fn check(p: &dyn election_driver::PendingOpen) -> Result<(), election_driver::Error> {
    /// if let Some(opened) = p.ready().await? {
    ///     println!("{} open", opened.kind());
    /// }
    /// # Ok(()) }
    /// ```
    fn ready(&self) -> BoxFuture<'_, Result<Option<Box<dyn Opened>>, Error>>;
}

/// What [`Target::open_or_pending`] found.
#[derive(Debug)]
pub enum Opening {
    /// The backend, open.
    Ready(Box<dyn Opened>),
    /// Not yet: the store does not exist.
    Pending(Box<dyn PendingOpen>),
}

/// The lease timing of an open backend whose claim expires: what a tool
/// needs to bound its own waits by the lease's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseTiming {
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
    /// How often the holder renews.
    pub renew: Duration,
    /// The part of the TTL the holder gives up for safety: it counts its
    /// lease lost this long before the backend could grant it again.
    pub margin: Duration,
    /// How long a new holder waits before it acts (NATS's failover
    /// grace; zero elsewhere).
    pub grace: Duration,
}

impl LeaseTiming {
    /// The timing of a lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_driver::LeaseTiming;
    ///
    /// let t = LeaseTiming::new(Duration::from_secs(15), Duration::from_secs(5), Duration::from_millis(1500), Duration::ZERO);
    /// assert_eq!(t.ttl, Duration::from_secs(15));
    /// ```
    pub fn new(ttl: Duration, renew: Duration, margin: Duration, grace: Duration) -> LeaseTiming {
        LeaseTiming {
            ttl,
            renew,
            margin,
            grace,
        }
    }

    /// How long a deposed holder may still act after its successor's term
    /// began: its margin and the successor's grace together bound the
    /// overlap a tool's kill timing must cover.
    ///
    /// ```
    /// use std::time::Duration;
    /// use election_driver::LeaseTiming;
    ///
    /// let t = LeaseTiming::new(Duration::from_secs(15), Duration::from_secs(5), Duration::from_secs(1), Duration::from_secs(5));
    /// assert_eq!(t.overlap_bound(), Duration::from_secs(6));
    /// ```
    pub fn overlap_bound(&self) -> Duration {
        self.margin + self.grace
    }
}

/// A warning an open backend gives about how it was set up (a NATS bucket
/// with one replica): the text, and values for a structured log.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The warning, for a person.
    pub text: String,
    /// Named values, for a structured log.
    pub values: Vec<(&'static str, u64)>,
}

impl Warning {
    /// A warning.
    ///
    /// ```
    /// let w = election_driver::Warning::new("one replica", vec![("replicas", 1)]);
    /// assert_eq!(w.values, [("replicas", 1)]);
    /// ```
    pub fn new(text: impl Into<String>, values: Vec<(&'static str, u64)>) -> Warning {
        Warning {
            text: text.into(),
            values,
        }
    }
}

/// Who holds a name, and whether their term may not have begun acting
/// (NATS's failover grace).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The leader.
    pub leader: Leader,
    /// The term is within its failover grace: the holder waits before it
    /// acts.
    pub pending: bool,
}

impl Holder {
    /// A holder.
    ///
    /// ```
    /// # fn check(leader: election_core::Leader) {
    /// let h = election_driver::Holder::new(leader, false);
    /// assert!(!h.pending);
    /// # }
    /// ```
    pub fn new(leader: Leader, pending: bool) -> Holder {
        Holder { leader, pending }
    }
}

/// The backend's own stream of a name's leaders (a NATS watch, a
/// PostgreSQL observation), and what it is called in messages.
#[non_exhaustive]
pub struct Watch<'a> {
    /// Each change: the leader, or `None` for a vacancy.
    pub changes: BoxStream<'a, Result<Option<Leader>, Error>>,
    /// What it is, for messages (`the NATS watch`).
    pub what: &'static str,
}

impl<'a> Watch<'a> {
    /// A watch.
    ///
    /// ```
    /// use futures::StreamExt;
    /// let w = election_driver::Watch::new(futures::stream::empty().boxed(), "nothing");
    /// assert_eq!(w.what, "nothing");
    /// ```
    pub fn new(changes: BoxStream<'a, Result<Option<Leader>, Error>>, what: &'static str) -> Self {
        Watch { changes, what }
    }
}

impl fmt::Debug for Watch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

/// Changes of a name's files seen by the operating system (the file
/// backend's inotify): each is a reason to look again.
pub struct Changes(BoxStream<'static, Result<(), Error>>);

impl fmt::Debug for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Changes").finish_non_exhaustive()
    }
}

impl Changes {
    /// Changes from a stream of them.
    ///
    /// ```
    /// use futures::StreamExt;
    /// let _changes = election_driver::Changes::new(futures::stream::pending().boxed());
    /// ```
    pub fn new(stream: BoxStream<'static, Result<(), Error>>) -> Changes {
        Changes(stream)
    }

    /// Waits for the next change. Cancel safety: cancel safe.
    ///
    /// ```
    /// use futures::StreamExt;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), election_driver::Error> {
    /// let mut changes = election_driver::Changes::new(futures::stream::iter([Ok(())]).boxed());
    /// changes.changed().await?;
    /// # Ok(()) }
    /// ```
    pub async fn changed(&mut self) -> Result<(), Error> {
        use futures::StreamExt;
        match self.0.next().await {
            Some(r) => r,
            // The source ended: nothing more will change it.
            None => futures::future::pending().await,
        }
    }
}

/// What a repair of a name's epoch record wrote (the file backend's
/// `repair-epoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EpochRepair {
    /// The epoch the record now holds: the next term gets a higher one.
    pub epoch: Epoch,
    /// The highest epoch found in what was there before, if any.
    pub highest_seen: Option<Epoch>,
}

impl EpochRepair {
    /// A repair.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let epoch: election_core::Epoch = "7".parse()?;
    /// let r = election_driver::EpochRepair::new(epoch, None);
    /// assert_eq!(r.epoch, epoch);
    /// # Ok(()) }
    /// ```
    pub fn new(epoch: Epoch, highest_seen: Option<Epoch>) -> EpochRepair {
        EpochRepair {
            epoch,
            highest_seen,
        }
    }
}

/// The steps every backend's façade already has as
/// [`Election`](election_core::Election), object-safe: implemented for
/// every `Election` whose error converts into [`Error`], so a backend's
/// [`Opened`] gets them without a line of its own.
pub trait ElectionSteps: Send + Sync {
    /// The claim of `identity` in election `name`.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// let claim = o.claim("jobs", "worker-1")?;
    /// # drop(claim); Ok(()) }
    /// ```
    fn claim(&self, name: &str, identity: &str) -> Result<AnyClaim, Error>;

    /// Who leads `name` ([`Election::leader`](election_core::Election::leader)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_core::Error> {
    /// let leader = o.leader("jobs").await?;
    /// # drop(leader); Ok(()) }
    /// ```
    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>, CoreError>>;

    /// Who leads each of `names` ([`Election::leaders`](election_core::Election::leaders)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened, names: &[election_core::ElectionName]) -> Result<(), election_core::Error> {
    /// assert_eq!(o.leaders(names).await?.len(), names.len());
    /// # Ok(()) }
    /// ```
    fn leaders<'a>(
        &'a self,
        names: &'a [ElectionName],
    ) -> BoxFuture<'a, Result<Vec<Option<Leader>>, CoreError>>;

    /// Each change of `name`'s leader ([`Election::observe`](election_core::Election::observe)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_core::Error> {
    /// let changes = o.observe("jobs", std::time::Duration::from_secs(1)).await?;
    /// # drop(changes); Ok(()) }
    /// ```
    fn observe<'a, 'b>(
        &'a self,
        name: &'b str,
        every: Duration,
    ) -> BoxFuture<'b, Result<Leaders<'a>, CoreError>>
    where
        'a: 'b;

    /// Which store keeps the elections ([`Election::store_id`](election_core::Election::store_id)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// let id = o.store_id().await?;
    /// # drop(id); Ok(()) }
    /// ```
    fn store_id(&self) -> BoxFuture<'_, Result<StoreId, Error>>;

    /// Ends `name`'s current term on behalf of `by`, fenced
    /// ([`Election::revoke`](election_core::Election::revoke); a backend
    /// whose `Election` does not override it says
    /// [`ConfigError::Unsupported`]).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), Box<dyn std::error::Error>> {
    /// let by = election_core::Identity::new("ops/alice")?;
    /// if let Some(r) = o.revoke("jobs", &by).await? {
    ///     println!("{} deposed in epoch {}", r.deposed.identity, r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    fn revoke<'a>(
        &'a self,
        name: &'a str,
        by: &'a Identity,
    ) -> BoxFuture<'a, Result<Option<Revoked>, CoreError>>;

    /// The revocation of `name` no term has followed yet
    /// ([`Election::revocation`](election_core::Election::revocation)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_core::Error> {
    /// if let Some(r) = o.revocation("jobs").await? {
    ///     println!("{r}");
    /// }
    /// # Ok(()) }
    /// ```
    fn revocation<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Revocation>, CoreError>>;

    /// Asks `name`'s holder, on behalf of `by`, to hand the term to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer);
    /// a backend whose `Election` does not override it says
    /// [`ConfigError::Unsupported`]).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), Box<dyn std::error::Error>> {
    /// let (to, by) = (election_core::Identity::new("web-2")?, election_core::Identity::new("deploy")?);
    /// if let Some(r) = o.request_transfer("jobs", &to, &by).await? {
    ///     println!("{r}");
    /// }
    /// # Ok(()) }
    /// ```
    fn request_transfer<'a>(
        &'a self,
        name: &'a str,
        to: &'a Identity,
        by: &'a Identity,
    ) -> BoxFuture<'a, Result<Option<TransferRequest>, CoreError>>;

    /// Tells `name`'s holder that `candidate` waits with `priority`
    /// ([`Election::prefer`](election_core::Election::prefer)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), Box<dyn std::error::Error>> {
    /// let me = election_core::Identity::new("zone-a/1")?;
    /// o.prefer("jobs", &me, 10).await?;
    /// # Ok(()) }
    /// ```
    fn prefer<'a>(
        &'a self,
        name: &'a str,
        candidate: &'a Identity,
        priority: u32,
    ) -> BoxFuture<'a, Result<Option<TransferRequest>, CoreError>>;

    /// The handover of `name` no term has followed yet
    /// ([`Election::handover`](election_core::Election::handover)).
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_core::Error> {
    /// if let Some(h) = o.handover("jobs").await? {
    ///     println!("{h}");
    /// }
    /// # Ok(()) }
    /// ```
    fn handover<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Handover>, CoreError>>;
}

impl<E> ElectionSteps for E
where
    E: election_core::Election + Send + Sync + 'static,
    E::Claim: fmt::Debug,
    E::Error: Into<Error>,
{
    fn claim(&self, name: &str, identity: &str) -> Result<AnyClaim, Error> {
        Ok(AnyClaim::new(
            election_core::Election::claim(self, name, identity).map_err(Into::into)?,
        ))
    }

    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>, CoreError>> {
        election_core::Election::leader(self, name).boxed()
    }

    fn leaders<'a>(
        &'a self,
        names: &'a [ElectionName],
    ) -> BoxFuture<'a, Result<Vec<Option<Leader>>, CoreError>> {
        election_core::Election::leaders(self, names).boxed()
    }

    fn observe<'a, 'b>(
        &'a self,
        name: &'b str,
        every: Duration,
    ) -> BoxFuture<'b, Result<Leaders<'a>, CoreError>>
    where
        'a: 'b,
    {
        async move {
            use futures::StreamExt;
            Ok(election_core::Election::observe(self, name, every)
                .await?
                .boxed())
        }
        .boxed()
    }

    fn store_id(&self) -> BoxFuture<'_, Result<StoreId, Error>> {
        async move {
            election_core::Election::store_id(self)
                .await
                .map_err(Into::into)
        }
        .boxed()
    }

    fn revoke<'a>(
        &'a self,
        name: &'a str,
        by: &'a Identity,
    ) -> BoxFuture<'a, Result<Option<Revoked>, CoreError>> {
        election_core::Election::revoke(self, name, by).boxed()
    }

    fn revocation<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Revocation>, CoreError>> {
        election_core::Election::revocation(self, name).boxed()
    }

    fn request_transfer<'a>(
        &'a self,
        name: &'a str,
        to: &'a Identity,
        by: &'a Identity,
    ) -> BoxFuture<'a, Result<Option<TransferRequest>, CoreError>> {
        election_core::Election::request_transfer(self, name, to, by).boxed()
    }

    fn prefer<'a>(
        &'a self,
        name: &'a str,
        candidate: &'a Identity,
        priority: u32,
    ) -> BoxFuture<'a, Result<Option<TransferRequest>, CoreError>> {
        election_core::Election::prefer(self, name, candidate, priority).boxed()
    }

    fn handover<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Handover>, CoreError>> {
        election_core::Election::handover(self, name).boxed()
    }
}

/// An open backend: its elections ([`ElectionSteps`]), lease sets, and
/// what only some backends have, as methods whose default says "not here".
pub trait Opened: ElectionSteps + fmt::Debug + 'static {
    /// The backend's name, its URL scheme (`file`, `postgres`).
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// println!("a {} backend", o.kind());
    /// # }
    /// ```
    fn kind(&self) -> &'static str;

    /// The claims of a lease set of `identity`, with `poll` (if given) as
    /// the interval at which keys held elsewhere are tried again; a
    /// backend without one refuses `poll` with
    /// `ConfigError::BadSetting { setting: "poll" }`.
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// let set = election_core::LeaseSet::new(o.keyed_claims("node-a", None).await?);
    /// set.close().await;
    /// # Ok(()) }
    /// ```
    fn keyed_claims<'a>(
        &'a self,
        identity: &'a str,
        poll: Option<Duration>,
    ) -> BoxFuture<'a, Result<AnyKeyedClaims, Error>>;

    /// A file a child process may inherit, locked, to keep the claim of
    /// `name` while it runs (the file backend's lock, SQLite's same-host
    /// lock); `None` where the claim is not a lock on this host.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// let _lock = o.inheritable_lock("jobs");
    /// # }
    /// ```
    fn inheritable_lock(&self, name: &str) -> Option<PathBuf> {
        let _ = name;
        None
    }

    /// The lease timing, where the claim expires.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// if let Some(t) = o.lease_timing() { println!("ttl {:?}", t.ttl); }
    /// # }
    /// ```
    fn lease_timing(&self) -> Option<LeaseTiming> {
        None
    }

    /// Warnings about how the backend is set up.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// for w in o.warnings() { eprintln!("warning: {}", w.text); }
    /// # }
    /// ```
    fn warnings(&self) -> Vec<Warning> {
        Vec::new()
    }

    /// Closes what the backend keeps open (a pool, a checkpoint), waiting
    /// at most `bound`. The default has nothing to close.
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) {
    /// o.close_within(std::time::Duration::from_secs(1)).await;
    /// # }
    /// ```
    fn close_within(&self, bound: Duration) -> BoxFuture<'_, ()> {
        let _ = bound;
        futures::future::ready(()).boxed()
    }

    /// Who holds `name`, and whether their term is pending. The default is
    /// [`leader`](ElectionSteps::leader), never pending.
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// if let Some(h) = o.holder("jobs").await? { println!("{} (pending: {})", h.leader.identity, h.pending); }
    /// # Ok(()) }
    /// ```
    fn holder<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Holder>, Error>> {
        async move {
            Ok(self
                .leader(name)
                .await
                .map_err(Error::Election)?
                .map(|leader| Holder::new(leader, false)))
        }
        .boxed()
    }

    /// Whether [`holder`](Opened::holder) may answer `pending`.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// let _grace = o.may_be_pending();
    /// # }
    /// ```
    fn may_be_pending(&self) -> bool {
        false
    }

    /// The backend's own stream of `name`'s leaders, where it has one
    /// better than looking every `every`.
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// if let Some(w) = o.watch("jobs", std::time::Duration::from_secs(1)).await? { println!("{}", w.what); }
    /// # Ok(()) }
    /// ```
    fn watch<'a, 'b>(
        &'a self,
        name: &'b str,
        every: Duration,
    ) -> BoxFuture<'b, Result<Option<Watch<'a>>, Error>>
    where
        'a: 'b,
    {
        let _ = (name, every);
        futures::future::ready(Ok(None)).boxed()
    }

    /// The operating system's changes of `name`'s files, where the backend
    /// is files on this host.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// let _inotify = o.changes("jobs").is_some();
    /// # }
    /// ```
    fn changes(&self, name: &str) -> Option<Result<Changes, Error>> {
        let _ = name;
        None
    }

    /// The last term `name`'s epoch record shows, where the backend keeps
    /// one apart from the claim (the file backend).
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) -> Result<(), election_driver::Error> {
    /// let _last = o.last_term("jobs")?;
    /// # Ok(()) }
    /// ```
    fn last_term(&self, name: &str) -> Result<Option<Leader>, Error> {
        let _ = name;
        Ok(None)
    }

    /// The directory the backend keeps its files in, where it is one.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// if let Some(dir) = o.local_path() { println!("{}", dir.display()); }
    /// # }
    /// ```
    fn local_path(&self) -> Option<&Path> {
        None
    }

    /// Sets `name`'s epoch record to at least `epoch`, where the backend
    /// has a record a person may repair (the file backend).
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened, epoch: election_core::Epoch) {
    /// match o.repair_epoch("jobs", epoch) {
    ///     None => println!("nothing to repair on a {} backend", o.kind()),
    ///     Some(r) => println!("{r:?}"),
    /// }
    /// # }
    /// ```
    fn repair_epoch(&self, name: &str, epoch: Epoch) -> Option<Result<EpochRepair, Error>> {
        let _ = (name, epoch);
        None
    }

    /// Ends `name`'s current term on behalf of `by`, as
    /// [`revoke`](ElectionSteps::revoke) does, and raises the high-water
    /// mark of each fenced resource in `resources` to the revocation's
    /// epoch, where the backend keeps fences in its own store (ADR 0111):
    /// every token of the deposed term is refused by those fences from
    /// then on. `Ok(None)`: no term holds the name, and no mark was
    /// raised. A backend whose fences live elsewhere says
    /// [`ConfigError::Unsupported`] (the default), before revoking.
    ///
    /// ```
    /// # async fn check(o: &dyn election_driver::Opened) -> Result<(), Box<dyn std::error::Error>> {
    /// let by = election_core::Identity::new("ops/alice")?;
    /// if let Some(r) = o.revoke_fencing("jobs", &by, &["orders"]).await? {
    ///     println!("orders fenced at {}", r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    fn revoke_fencing<'a>(
        &'a self,
        name: &'a str,
        by: &'a Identity,
        resources: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<Revoked>, Error>> {
        let _ = (name, by, resources);
        let kind = self.kind();
        async move {
            Err(Error::Config(ConfigError::Unsupported {
                what: "fences kept in the election's store",
                backend: kind,
            }))
        }
        .boxed()
    }

    /// The backend reading `clock` instead of the system's (tests shift
    /// its wall clock); [`ConfigError::Unsupported`] where the backend
    /// reads no injectable clock (the default).
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// let shifted = o.with_clock(std::sync::Arc::new(election_core::SystemClock));
    /// # drop(shifted);
    /// # }
    /// ```
    fn with_clock(&self, clock: Arc<dyn Clock>) -> Result<Box<dyn Opened>, Error> {
        let _ = clock;
        Err(Error::Config(ConfigError::Unsupported {
            what: "an injected clock",
            backend: self.kind(),
        }))
    }

    /// `self`, for a caller that knows the backend's own type.
    ///
    /// ```
    /// # fn check(o: &dyn election_driver::Opened) {
    /// let _not_a_string = o.as_any().downcast_ref::<String>().is_none();
    /// # }
    /// ```
    fn as_any(&self) -> &dyn Any;
}
