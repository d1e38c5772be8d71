//! [`NatsElection`]: elections in one JetStream KV bucket.

use std::sync::Arc;
use std::time::Duration;

use election_core::{Candidate, ElectionName, Identity, Leader, LeaseSet};
use futures::{Stream, StreamExt};

use crate::claim::NatsClaim;
use crate::error::Error;
use crate::keyed::NatsKeyedClaims;
use crate::options::NatsOptions;
use crate::requests::Requests;
use crate::store::clients::{self, ClientKey, SharedClient};
use crate::store::connection::Connection;
use crate::store::record;
use crate::store::settled::settled;

/// Elections in a NATS JetStream key-value bucket: one key per election,
/// on one server or a clustered (R3) bucket.
///
/// - The value names the holder (identity, a random nonce per attempt).
/// - Winning is an atomic compare-and-set (an update expecting the last
///   vacancy seen, or "no entry"); the **epoch is the bucket's creation
///   time in microseconds plus the KV revision of that write**: it stays
///   the same through renewals, and every later term's epoch is higher,
///   also after the bucket is deleted and recreated (see the crate docs
///   for what that rests on, and for the single-server power-loss case).
///   The term begins only if the write is proven to be of the bucket
///   incarnation whose creation time was read before it was sent (rule 1):
///   by reading the creation time again after the write, or, when a watch
///   woke the claim, by that watch's consumer (known to be of that
///   incarnation) delivering the write (ADR 0030).
/// - The lease lives as long as the bucket's max age (the TTL) unless
///   renewed; renewal is an `update` that expects the revision last
///   written. The holder renews every renew interval and reports the loss
///   `margin` before the TTL could run out, counting from the monotonic
///   instant before the renewal request left. Each renewal also reads the
///   bucket's stream info: a recreated bucket, or a max age below the TTL,
///   loses the term.
/// - After a vacancy that was not a clean release this process saw (an
///   expiry, no entry at all, a write of unknown origin), a new term
///   waits the failover grace, then refreshes the key and counts validity
///   from that refresh.
/// - Waiting candidates queue in the order they first waited (a waiter
///   key each, ADR 0106); the first watches the key and tries again the
///   moment it is deleted (a resign) or purged (the server's TTL marker,
///   servers 2.11+, which this crate enables), and polls every poll
///   interval; the others watch only the waiter ahead, and look at the
///   key once a poll interval in case the first does not claim it.
/// - Dropping a term deletes its key in the background (expecting its last
///   revision); if that cannot run, the key ages out after the TTL.
/// - A transfer ([`Term::transfer`](election_core::Term::transfer), ADR
///   0112) is an update expecting the holder's revision that writes a
///   handover's record (no new epoch); the successor's watch sees it and
///   claims over it at once; every other candidate treats it as held until
///   it has seen it for the window on its own clock, or the server removed
///   it (its per-key TTL is the window when the window is at most the TTL;
///   a longer one stays until a claim replaces it). A transfer request
///   ([`request_transfer`](Self::request_transfer)) is a key of its own,
///   `t.<key>`, which the holder's term watches.
///
/// Identities must be unique per process: the value is how observers (and
/// a restarted process with [`NatsOptions::adopt_own`]) tell holders apart.
///
/// ```no_run
/// use election_nats::{NatsElection, NatsOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
/// let term = election.candidate("dispatcher", "host-a/4711")?.campaign().await?;
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct NatsElection {
    conn: Arc<Connection>,
    /// The transfer requests of this handle's terms, through one watch.
    requests: Arc<Requests>,
}

impl NatsElection {
    /// Connects to the NATS server(s) at `urls` (comma-separated) and opens
    /// (or creates) the bucket. Every election of the process opened to the
    /// same servers (in any order) with the same request timeout and renew
    /// interval (which set the client's connect timeout and ping interval)
    /// shares one client, and so one connection, while any of them lives
    /// (ADR 0106); [`with_client`](NatsElection::with_client) uses the
    /// client given instead. Then it waits (up to 10 s) until the server it
    /// reached routes writes to the bucket's stream: a replicated bucket
    /// created a moment ago may not be reachable from every node yet. The
    /// check is a conditional write the stream always refuses (it expects
    /// revision `u64::MAX`), so nothing is written; it needs publish
    /// permission on the bucket's subjects, as every claim does.
    ///
    /// Cancel safety: cancel safe. Failure model: a malformed URL is
    /// [`Error::Config`]; an unreachable server is [`Error::Connect`] at
    /// once, with the cause as its source (connection refused, unknown
    /// host); a named bucket with another TTL [`Error::BucketMismatch`]; no
    /// JetStream, or a stream not reachable within 10 s,
    /// [`Error::Unavailable`]. Opening is one attempt: to wait for a server
    /// that is down at start, retry on [`Error::Connect`] with a backoff
    /// (e.g. [`election_core::retry_pause`]); once open, the client
    /// reconnects by itself and a campaign rides out the outage, counting
    /// its tries ([`Candidate::retries`](election_core::Candidate::retries)).
    ///
    /// Without a named bucket ([`NatsOptions::bucket`]), the bucket is the
    /// TTL's ([`bucket_for_ttl`](crate::bucket_for_ttl)), resolved here.
    ///
    /// ```no_run
    /// # use election_nats::{NatsElection, NatsOptions, Error};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let urls = "nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222";
    /// let election = NatsElection::connect(urls, NatsOptions::default().replicas(3)?).await?;
    /// println!("the bucket has {} replicas", election.replicas());
    ///
    /// // Nobody listens on port 1:
    /// let refused = NatsElection::connect("nats://127.0.0.1:1", NatsOptions::default()).await;
    /// assert!(matches!(refused, Err(Error::Connect { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn connect(urls: &str, options: NatsOptions) -> Result<Self, Error> {
        let addrs = urls
            .split(',')
            .map(|u| u.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| election_core::ConfigError::BadSetting {
                setting: "url",
                reason: format!("{urls:?} is not a list of NATS URLs: {e}"),
            })?;
        let timeout = options.timeout().max(Duration::from_secs(1));
        let key = ClientKey::new(
            urls.split(',').map(str::to_owned),
            timeout,
            options.renew_every(),
        );
        let connect = || {
            async_nats::ConnectOptions::new()
                .connection_timeout(timeout)
                .ping_interval(options.renew_every())
                .connect(addrs)
        };
        let (shared, client) =
            clients::shared(key, connect)
                .await
                .map_err(|source| Error::Connect {
                    url: urls.to_owned(),
                    source,
                })?;
        Self::with_shared(shared, client, options).await
    }

    /// Opens the bucket over the process's shared client `client`, holding
    /// `shared` (its registry entry) for as long as the election lives.
    pub(crate) async fn with_shared(
        shared: Arc<SharedClient>,
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Self, Error> {
        let mut conn = Connection::open(client, options).await?;
        conn.shared = Some(shared);
        Ok(NatsElection {
            conn: Arc::new(conn),
            requests: Arc::default(),
        })
    }

    /// Uses an existing client; opens (or creates) the bucket.
    ///
    /// Cancel safety and failure model as [`connect`](NatsElection::connect).
    ///
    /// ```no_run
    /// # use election_nats::{NatsElection, NatsOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = async_nats::connect("nats://127.0.0.1:4222").await?;
    /// let election = NatsElection::with_client(client, NatsOptions::default()).await?;
    /// println!("{:?}", election.leader("dispatcher").await?);
    /// # Ok(()) }
    /// ```
    pub async fn with_client(
        client: async_nats::Client,
        options: NatsOptions,
    ) -> Result<Self, Error> {
        Ok(NatsElection {
            conn: Arc::new(Connection::open(client, options).await?),
            requests: Arc::default(),
        })
    }

    /// The client, for the application's own use. An election opened with
    /// [`connect`](NatsElection::connect) shares it with every other
    /// election of the process opened to the same servers (ADR 0106):
    /// draining or closing it ends their connection too.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// // The application's own messages, on the election's connection:
    /// election.client().publish("jobs.started", "host-a/4711".into()).await?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &async_nats::Client {
        &self.conn.client
    }

    /// The options.
    ///
    /// ```no_run
    /// use election_nats::{DEFAULT_BUCKET, NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// println!("bucket {}, lease TTL {:?}", election.options().bucket_name(), election.options().ttl());
    /// assert_eq!(election.options().bucket_name(), DEFAULT_BUCKET);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &NatsOptions {
        &self.conn.options
    }

    /// How many replicas the bucket had when it was opened. With one, a
    /// host crash can lose the last acknowledged writes (see
    /// [`NatsOptions::single_replica_ok`]).
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// if election.replicas() == 1 {
    ///     eprintln!("an R1 bucket: a host crash can lose the last writes (and repeat an epoch)");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn replicas(&self) -> usize {
        self.conn.replicas()
    }

    /// The claim of candidate `identity` in election `name`.
    ///
    /// ```no_run
    /// use election_core::{Candidate, Claim};
    /// use election_nats::{Error, NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let url = "nats://127.0.0.1:4222";
    /// let election = NatsElection::connect(url, NatsOptions::default()).await?;
    /// let claim = election.claim("dispatcher", "host-a/4711")?;
    /// if let Some(leader) = claim.leader().await? {
    ///     println!("{} leads; waiting", leader.identity);
    /// }
    /// let term = Candidate::new(claim).campaign().await?; // what `candidate` does
    /// term.resign().await?;
    ///
    /// // An observer's election makes no claims:
    /// let observer = NatsElection::connect(url, NatsOptions::default().observer(true)).await?;
    /// assert!(matches!(observer.claim("dispatcher", "host-b/1"), Err(Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<NatsClaim, Error> {
        if self.conn.options.is_observer() {
            return Err(election_core::ConfigError::BadSetting {
                setting: "observer",
                reason:
                    "an observer's election cannot make claims (its TTL may not be the bucket's)"
                        .into(),
            }
            .into());
        }
        Ok(NatsClaim::new(
            self.conn.clone(),
            self.requests.clone(),
            ElectionName::new(name)?,
            Identity::new(identity)?,
        ))
    }

    /// A [`Candidate`] for [`claim`](NatsElection::claim).
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let candidate = election.candidate("dispatcher", "host-a/4711")?;
    /// match candidate.campaign_timeout(Duration::from_secs(30)).await? {
    ///     Some(term) => {
    ///         println!("leading in term {}", term.epoch());
    ///         term.resign().await?;
    ///     }
    ///     None => println!("another candidate still leads after 30 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<NatsClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// Who leads election `name` now, read from the bucket (through the
    /// stream leader, so never from a lagging replica), or `None`. `since`
    /// is the holder's wall clock at the create that won the term (before
    /// any failover grace); renewals keep it.
    ///
    /// Cancel safety: cancel safe. Failure model: [`Error::Unavailable`]
    /// when the bucket cannot be read.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// match election.leader("dispatcher").await? {
    ///     Some(leader) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///     None => println!("nobody leads dispatcher"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        self.conn.leader(&ElectionName::new(name)?).await
    }

    /// Which store keeps this election's state: the bucket's name and the
    /// creation time of its stream (µs), as opening it read them (or as a
    /// later check saw the bucket recreated). The same however the servers
    /// are reached (`localhost` or `127.0.0.1`, a cluster's servers in
    /// any order or any one of them). A deleted and recreated bucket is
    /// another store, and so is the bucket of another TTL (ADR 0064).
    ///
    /// Cancel safety: cancel safe (no request). Failure model: none today;
    /// `Result` for a backend that must ask.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let a = NatsElection::connect("nats://localhost:4222", NatsOptions::default()).await?;
    /// let b = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// assert_eq!(a.store_id()?, b.store_id()?);
    /// # Ok(()) }
    /// ```
    pub fn store_id(&self) -> Result<election_core::StoreId, Error> {
        Ok(election_core::StoreId::new(
            "nats",
            format_args!(
                "bucket={},created_us={}",
                self.conn.options.bucket_name(),
                self.conn.base()
            ),
        ))
    }

    /// Who holds the key of election `name` now, and whether that holder
    /// is still [`pending`](Holder::pending): it won the key after a
    /// vacancy that was not a clean release and waits out the failover
    /// grace, so its term has not begun (and it may never lead: a loss or a
    /// cancel during the grace gives the key up). [`leader`](Self::leader)
    /// names a pending holder as the leader; this tells them apart, from
    /// one read.
    ///
    /// Cancel safety: cancel safe. Failure model: [`Error::Unavailable`]
    /// when the bucket cannot be read.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// match election.holder("dispatcher").await? {
    ///     Some(h) if h.pending => println!("{} won the key, waits out the grace", h.leader.identity),
    ///     Some(h) => println!("{} leads in term {}", h.leader.identity, h.leader.epoch),
    ///     None => println!("vacant"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn holder(&self, name: &str) -> Result<Option<Holder>, Error> {
        let name = ElectionName::new(name)?;
        let key = record::key(&name);
        match self.conn.read_exact(&key).await? {
            Some(l) => Ok(
                record::leader_of(&key, l.operation, &l.value, l.revision)?.map(|leader| Holder {
                    leader,
                    pending: record::is_pending(&l.value),
                }),
            ),
            None => Ok(None),
        }
    }

    /// Every change of leadership of election `name`, as it happens: the
    /// current state first, then `Some(leader)` when a term begins and
    /// `None` when the key is deleted (resign) or purged (expiry). Renewals
    /// of the same term (same identity and epoch) are not repeated; each
    /// `Leader` carries `since` as [`leader`](NatsElection::leader) does.
    ///
    /// A vacancy shorter than the watch's delivery may go unreported: the
    /// bucket keeps one entry per key, so a waiting candidate's claim can
    /// replace the delete or purge marker before the watch is sent it (the
    /// next term is reported either way).
    ///
    /// Cancel safety: dropping the stream stops the watch. Failure model:
    /// a failed watch ends with one `Err`.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    ///
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let changes = election.observe("dispatcher").await?;
    /// let mut changes = std::pin::pin!(changes);
    /// // The current state first, then every change as it happens:
    /// while let Some(change) = changes.next().await {
    ///     match change? {
    ///         Some(leader) => println!("{} leads in term {}", leader.identity, leader.epoch),
    ///         None => println!("vacant"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn observe(
        &self,
        name: &str,
    ) -> Result<impl Stream<Item = Result<Option<Leader>, Error>> + Send + use<>, Error> {
        let name = ElectionName::new(name)?;
        let key = record::key(&name);
        // The watch first (new changes only), then the current state read
        // exactly: a change between the two shows up in both, and the
        // same-term filter drops the repeat.
        let watch = self
            .conn
            .kv
            .watch(&key)
            .await
            .map_err(|e| Error::unavailable("watch", e))?;
        let now = self.conn.leader(&name).await?;
        let mut last: Option<Option<Leader>> = Some(now.clone());
        let first = futures::stream::once(std::future::ready(Ok(now)));
        Ok(first.chain(watch.filter_map(move |entry| {
            let out = match entry {
                Err(e) => Some(Err(Error::unavailable("watch", e))),
                Ok(e) => match record::leader_of(&key, e.operation, &e.value, e.revision) {
                    Err(e) => Some(Err(e)),
                    Ok(now) if last.as_ref().is_some_and(|l| same_term(l, &now)) => None,
                    Ok(now) => {
                        last = Some(now.clone());
                        Some(Ok(now))
                    }
                },
            };
            std::future::ready(out)
        })))
    }

    /// A [`LeaseSet`] of this process (`identity`) over this election's
    /// server(s) and options (TTL, renew interval, failover grace, request
    /// timeout, replicas); see [`NatsKeyedClaims`] for how it works.
    ///
    /// Opens (or creates) the buckets `<bucket>-sessions` and
    /// `<bucket>-keys` and starts this process's session before it returns.
    ///
    /// Cancel safety: cancel safe (a session started by a cancelled call
    /// ages out). Failure model: [`Error::Config`] for a bad identity;
    /// [`Error::Unavailable`] / [`Error::OutcomeUnknown`] if the server
    /// cannot open the buckets or start the session;
    /// [`Error::BucketMismatch`] for buckets with other settings.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let stores = election.lease_set("host-a/4711").await?;
    /// if stores.ask("store-17").await? {
    ///     stores.guard("store-17", async |token| {
    ///         println!("writing to store-17 in term {}", token.epoch());
    ///     }).await?;
    /// }
    /// stores.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<NatsKeyedClaims>, Error> {
        Ok(LeaseSet::new(self.keyed_claims(identity).await?))
    }

    /// The keyed claims behind [`lease_set`](Self::lease_set), for
    /// [`LeaseSet::new`] by hand (a test kit's keyed suite, a wrapper of
    /// one's own). Opens the buckets and starts the session as
    /// [`lease_set`](Self::lease_set) does.
    ///
    /// Cancel safety and failure model as [`lease_set`](Self::lease_set).
    ///
    /// ```no_run
    /// use election_core::LeaseSet;
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let keyed = election.keyed_claims("host-a/4711").await?;
    /// let stores = LeaseSet::new(keyed); // what `lease_set` does
    /// if stores.ask("store-17").await? {
    ///     println!("writing store-17 in term {:?}", stores.epoch("store-17"));
    /// }
    /// stores.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn keyed_claims(&self, identity: &str) -> Result<NatsKeyedClaims, Error> {
        NatsKeyedClaims::open(self.conn.clone(), Identity::new(identity)?).await
    }
}

/// The holder of an election's key, as [`NatsElection::holder`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The holder's identity, epoch and start, as
    /// [`NatsElection::leader`] shows them.
    pub leader: Leader,
    /// True while the holder waits out the failover grace: it won the key
    /// but its term has not begun, and it may never lead.
    pub pending: bool,
}

/// Whether two observations show the same term with the same value (or
/// both nobody): the identity, epoch and value decide
/// ([`Leader::shows_same`]), so a renewal is never a change, also from a
/// writer whose renewals rewrite `since`; a proclaimed value is.
fn same_term(a: &Option<Leader>, b: &Option<Leader>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.shows_same(b),
        _ => false,
    }
}

impl NatsElection {
    /// Revokes the current term of election `name` on behalf of `by`
    /// ([`Election::revoke`](election_core::Election::revoke), ADR 0111):
    /// one KV update of the election's key, expecting the revision of the
    /// holder's record as read, writes a revocation's record; its epoch is
    /// the bucket's creation time plus that write's revision (rule 1's
    /// scheme), so it is above the holder's and below the next term's. The
    /// holder's next renewal (an update expecting its own last revision)
    /// is refused and its term is lost; candidates treat the record as
    /// held until the server ages it out (the TTL), then wait the failover
    /// grace. `Ok(None)`: no term holds the key.
    ///
    /// A name that no election holds but that is a live key of a lease set
    /// (in `<bucket>-keys`) is revoked there the same way: an update of the
    /// key expecting the holder's revision, writing a revocation's record;
    /// its epoch is the keys bucket's creation time plus that write's
    /// revision. The holding member hears of it from its keys watch (its
    /// renewals count only once that watch has caught up, so it reports
    /// the loss within a TTL at the latest); members claim over the record
    /// once they have seen it for the TTL and the failover grace.
    ///
    /// Cancel safety: cancelled after the update was sent, it may have
    /// landed or not. Failure model: `Unavailable`, `OutcomeUnknown` (as a
    /// claim's); a bucket recreated meanwhile is `OutcomeUnknown` (the
    /// revocation's epoch cannot be told).
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://localhost:4222", NatsOptions::default()).await?;
    /// if let Some(r) = election.revoke("jobs", &Identity::new("ops")?).await? {
    ///     println!("{} deposed; fence at {}", r.deposed.identity, r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        use async_nats::jetstream::kv;
        let name = ElectionName::new(name)?;
        let core = |e: Error| e.into_core(&name);
        let key = record::key(&name);
        let timeout = self.conn.timeout();
        // No term of `name` in the elections bucket: none, or the name is
        // a lease set's key, revoked in the keys bucket.
        let no_term = || async { self.revoke_key(&name, &key, by).await.map_err(core) };
        for _ in 0..8 {
            let Some(entry) = self.conn.read_exact(&key).await.map_err(core)? else {
                return no_term().await;
            };
            let Some(deposed) =
                record::leader_of(&key, entry.operation, &entry.value, entry.revision)
                    .map_err(core)?
            else {
                return no_term().await;
            };
            let base = self.conn.base();
            let at = std::time::SystemTime::now();
            let since = at
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| u64::try_from(d.as_millis()).ok());
            let mut value = record::ClaimRecord {
                identity: by.clone(),
                nonce: election_core::attempt_nonce(),
                epoch: None,
                since_unix_ms: since,
                base: Some(base),
                value: None,
            }
            .encode()
            .to_vec();
            value.extend_from_slice(record::REVOKED.as_bytes());
            let value = bytes::Bytes::from(value);
            let update = settled(|| self.conn.kv.update(&key, value.clone(), entry.revision));
            let revision = match tokio::time::timeout(timeout, update).await {
                Ok(Ok(revision)) => revision,
                Ok(Err(e))
                    if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) =>
                {
                    continue;
                }
                Ok(Err(e)) => return Err(core(Error::unavailable("revoke the lease", e))),
                Err(_) => return Err(core(Error::OutcomeUnknown { after: timeout })),
            };
            // A bucket deleted and recreated meanwhile leaves the write's
            // epoch in doubt. Its max age is not the revoker's business
            // (an operator's open takes the bucket's own).
            let shape = crate::store::bucket::shape(&self.conn.kv, timeout)
                .await
                .map_err(core)?;
            if shape.created_us != base {
                return Err(core(Error::OutcomeUnknown { after: timeout }));
            }
            let epoch = crate::store::bucket::epoch_at(base, revision).map_err(core)?;
            return Ok(Some(
                election_core::Revoked::new(
                    deposed,
                    election_core::Revocation::new(by.clone(), epoch, Some(at)),
                )
                .counted(&name, "nats"),
            ));
        }
        Err(core(Error::OutcomeUnknown { after: timeout }))
    }

    /// The lease sets' keys bucket (`<bucket>-keys`) of this election's
    /// bucket, if it exists.
    async fn keys_bucket(&self) -> Result<Option<async_nats::jetstream::kv::Store>, Error> {
        use async_nats::jetstream::context::KeyValueErrorKind;
        let name = format!("{}-keys", self.conn.options.bucket_name());
        let timeout = self.conn.timeout();
        match tokio::time::timeout(timeout, self.conn.js.get_key_value(name)).await {
            Ok(Ok(keys)) => Ok(Some(keys)),
            Ok(Err(e))
                if e.kind() == KeyValueErrorKind::GetBucket
                    && crate::error::stream_not_found(&e) =>
            {
                Ok(None)
            }
            Ok(Err(e)) => Err(Error::unavailable("open the lease-set keys bucket", e)),
            Err(_) => Err(Error::Unavailable {
                what: "open the lease-set keys bucket (no answer in time)",
                source: None,
            }),
        }
    }

    /// The revoke of a lease set's key `key` (of `name`), see
    /// [`revoke`](Self::revoke): `Ok(None)` if no lease set holds it.
    async fn revoke_key(
        &self,
        name: &ElectionName,
        key: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, Error> {
        use async_nats::jetstream::kv;
        let Some(keys) = self.keys_bucket().await? else {
            return Ok(None);
        };
        let timeout = self.conn.timeout();
        for _ in 0..8 {
            // The incarnation read before the write: the base of its epoch.
            let base = crate::store::bucket::shape(&keys, timeout)
                .await?
                .created_us;
            let Some(entry) = crate::store::exact_read::read_exact(&keys, key, timeout).await?
            else {
                return Ok(None);
            };
            if entry.operation != kv::Operation::Put || record::is_revoked(&entry.value) {
                return Ok(None);
            }
            let held = record::SessionRecord::decode(key, &entry.value)?;
            let deposed = Leader {
                identity: held.identity,
                epoch: crate::store::bucket::epoch_at(held.base.unwrap_or(base), entry.revision)?,
                since: None,
                renewed: None,
                ttl: None,
                value: None,
            };
            let at = std::time::SystemTime::now();
            let at_ms = at
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| u64::try_from(d.as_millis()).ok());
            let value = record::encode_key_revocation(by, base, at_ms);
            let update = settled(|| keys.update(key, value.clone(), entry.revision));
            let revision = match tokio::time::timeout(timeout, update).await {
                Ok(Ok(revision)) => revision,
                Ok(Err(e))
                    if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) =>
                {
                    continue;
                }
                Ok(Err(e)) => return Err(Error::unavailable("revoke the lease-set key", e)),
                Err(_) => return Err(Error::OutcomeUnknown { after: timeout }),
            };
            // A keys bucket recreated meanwhile leaves the epoch in doubt.
            if crate::store::bucket::shape(&keys, timeout)
                .await?
                .created_us
                != base
            {
                return Err(Error::OutcomeUnknown { after: timeout });
            }
            let epoch = crate::store::bucket::epoch_at(base, revision)?;
            return Ok(Some(
                election_core::Revoked::new(
                    deposed,
                    election_core::Revocation::new(by.clone(), epoch, Some(at)),
                )
                .counted(name, "nats"),
            ));
        }
        Err(Error::OutcomeUnknown { after: timeout })
    }

    /// The revocation a lease set's key `key` shows, if any.
    async fn key_revocation(&self, key: &str) -> Result<Option<election_core::Revocation>, Error> {
        let Some(keys) = self.keys_bucket().await? else {
            return Ok(None);
        };
        let timeout = self.conn.timeout();
        let base = crate::store::bucket::opened_shape(&keys)?.created_us;
        let Some(entry) = crate::store::exact_read::read_exact(&keys, key, timeout).await? else {
            return Ok(None);
        };
        if entry.operation != async_nats::jetstream::kv::Operation::Put {
            return Ok(None);
        }
        let Some(r) = record::key_revocation_of(key, &entry.value)? else {
            return Ok(None);
        };
        let epoch = crate::store::bucket::epoch_at(base, entry.revision)?;
        let at = r
            .at_unix_ms
            .and_then(|ms| std::time::UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
        Ok(Some(election_core::Revocation::new(r.by, epoch, at)))
    }

    /// The revocation the key of `name` shows, until the next term
    /// ([`Election::revocation`](election_core::Election::revocation)).
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://localhost:4222", NatsOptions::default()).await?;
    /// if let Some(r) = election.revocation("jobs").await? {
    ///     println!("jobs: {r}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        let name = ElectionName::new(name)?;
        let key = record::key(&name);
        let core = |e: Error| e.into_core(&name);
        let shown = match self.conn.read_exact(&key).await.map_err(core)? {
            Some(l) => {
                record::revocation_of(&key, l.operation, &l.value, l.revision).map_err(core)?
            }
            None => None,
        };
        match shown {
            Some(r) => Ok(Some(r)),
            // A lease set's key (in `<bucket>-keys`) may show one instead.
            None => self.key_revocation(&key).await.map_err(core),
        }
    }
}

impl NatsElection {
    /// Asks the holder of election `name`'s current term, on behalf of
    /// `by`, to hand it to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer),
    /// ADR 0112): reads the term exactly, then puts the request (the
    /// term's epoch) under the election's request key `t.<key>`, a key of
    /// its own, so the revision the holder's renewals expect does not move.
    /// The holder's term watches that key and reports the request at once.
    /// A read after the put checks the term still holds the name (a KV
    /// write cannot be conditioned on another key): if another term took
    /// it meanwhile, the request is asked again of that one (a request for
    /// an ended term is ignored by any later one). `Ok(None)`: no term
    /// holds the name (a handover's or a revocation's record holds none).
    /// The request ages out of the bucket with its max age (the lease
    /// TTL); the term keeps it once reported.
    ///
    /// Cancel safety: a dropped call may or may not have stored the
    /// request; asking again is safe. Failure model: `Unavailable`,
    /// `OutcomeUnknown` (a put without an answer in time).
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://localhost:4222", NatsOptions::default()).await?;
    /// let (to, by) = (Identity::new("web-2")?, Identity::new("deploy/7")?);
    /// match election.request_transfer("jobs", &to, &by).await? {
    ///     Some(r) => println!("asked: {r}"),
    ///     None => println!("nobody leads jobs"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        self.store_request(name, to, by, None).await
    }

    /// Tells the holder of `name`'s term that `candidate` waits with
    /// `priority` ([`Election::prefer`](election_core::Election::prefer),
    /// ADR 0112): stored as [`request_transfer`](Self::request_transfer)
    /// stores a request, with a `priority` line; the term hears it only if
    /// the priority is above its own.
    ///
    /// Cancel safety, failure model: as `request_transfer`'s.
    ///
    /// ```
    /// use election_core::Identity;
    ///
    /// /// A candidate in the primary zone says it waits, with priority 10.
    /// async fn say_preferred(election: &election_nats::NatsElection) -> Result<(), election_core::Error> {
    ///     election.prefer("jobs", &Identity::new("zone-a/1")?, 10).await?;
    ///     Ok(())
    /// }
    /// ```
    pub async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        self.store_request(name, candidate, candidate, Some(priority))
            .await
    }

    /// What `request_transfer` and `prefer` share.
    async fn store_request(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
        priority: Option<u32>,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        let name = ElectionName::new(name)?;
        let core = |e: Error| e.into_core(&name);
        let timeout = self.conn.timeout();
        let rkey = record::request_key(&record::key(&name));
        let mut asked: Option<election_core::TransferRequest> = None;
        for _ in 0..4 {
            let Some(leader) = self.conn.leader(&name).await.map_err(core)? else {
                return Ok(None);
            };
            if let Some(r) = asked.as_ref().filter(|r| r.epoch == leader.epoch) {
                return Ok(Some(r.clone()));
            }
            let mut request = election_core::TransferRequest::new(
                to.clone(),
                by.clone(),
                leader.epoch,
                Some(std::time::SystemTime::now()),
            );
            request.priority = priority;
            let put = self.conn.kv.put(&rkey, record::encode_request(&request));
            match tokio::time::timeout(timeout, put).await {
                Ok(Ok(_)) => asked = Some(request),
                Ok(Err(e)) => {
                    return Err(core(Error::unavailable("store the transfer request", e)));
                }
                Err(_) => return Err(core(Error::OutcomeUnknown { after: timeout })),
            }
        }
        Err(core(Error::OutcomeUnknown { after: timeout }))
    }

    /// The handover the key of `name` shows, until a term follows it or
    /// the server removes it at the end of its window
    /// ([`Election::handover`](election_core::Election::handover), ADR
    /// 0112).
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```no_run
    /// use election_nats::{NatsElection, NatsOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = NatsElection::connect("nats://localhost:4222", NatsOptions::default()).await?;
    /// if let Some(h) = election.handover("jobs").await? {
    ///     println!("jobs: {h}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        let name = ElectionName::new(name)?;
        let key = record::key(&name);
        let core = |e: Error| e.into_core(&name);
        match self.conn.read_exact(&key).await.map_err(core)? {
            Some(l) => record::handover_of(&key, l.operation, &l.value, l.revision).map_err(core),
            None => Ok(None),
        }
    }
}

impl election_core::Election for NatsElection {
    type Claim = NatsClaim;
    type LeaseSet = election_core::LeaseSet<crate::NatsKeyedClaims>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<NatsClaim, Error> {
        NatsElection::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        NatsElection::leader(self, name)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    /// The bucket's watch ([`NatsElection::observe`]); `every` is unused.
    async fn observe(
        &self,
        name: &str,
        _every: std::time::Duration,
    ) -> Result<
        impl Stream<Item = Result<Option<Leader>, election_core::Error>> + Send + '_,
        election_core::Error,
    > {
        let name_ = ElectionName::new(name)?;
        let changes = NatsElection::observe(self, name)
            .await
            .map_err(|e| e.into_core(&name_))?;
        Ok(changes.map(move |c| c.map_err(|e| e.into_core(&name_))))
    }

    async fn lease_set(
        &self,
        identity: &str,
    ) -> Result<election_core::LeaseSet<crate::NatsKeyedClaims>, Error> {
        NatsElection::lease_set(self, identity).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        NatsElection::store_id(self)
    }

    async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<election_core::Revoked>, election_core::Error> {
        NatsElection::revoke(self, name, by).await
    }

    async fn revocation(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Revocation>, election_core::Error> {
        NatsElection::revocation(self, name).await
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        NatsElection::request_transfer(self, name, to, by).await
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<election_core::TransferRequest>, election_core::Error> {
        NatsElection::prefer(self, name, candidate, priority).await
    }

    async fn handover(
        &self,
        name: &str,
    ) -> Result<Option<election_core::Handover>, election_core::Error> {
        NatsElection::handover(self, name).await
    }

    /// The reads pipelined on the one connection, a few at a time.
    async fn leaders(
        &self,
        names: &[ElectionName],
    ) -> Result<Vec<Option<Leader>>, election_core::Error> {
        let mut seen = Vec::with_capacity(names.len());
        for chunk in names.chunks(16) {
            let reads = futures::future::join_all(
                chunk
                    .iter()
                    .map(|n| async move { self.conn.leader(n).await.map_err(|e| e.into_core(n)) }),
            )
            .await;
            for read in reads {
                seen.push(read?);
            }
        }
        Ok(seen)
    }
}
