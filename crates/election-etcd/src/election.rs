//! [`EtcdElection`]: elections under one key prefix of an etcd cluster.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use election_core::{
    Candidate, ConfigError, ElectionName, Handover, Identity, Leader, LeaseSet, Revocation,
    Revoked, TransferRequest,
};
use futures::{Stream, StreamExt};

use crate::claim::EtcdClaim;
use crate::error::Error;
use crate::keyed::EtcdKeyedClaims;
use crate::options::EtcdOptions;
use crate::store::client::{Client, Credentials, Kind, Watched};
use crate::store::clients::{self, ClientKey};
use crate::store::proto::EVENT_DELETE;
use crate::store::proto::TxnRequest;
use crate::store::record;
use crate::store::{Store, delete_op, leased_by, modified_at, put_op};

/// Elections under one key prefix of an etcd v3 cluster (one member, or
/// three or five).
///
/// A claim is one transaction: the election key is put with the
/// candidate's lease only if it does not exist; the transaction's revision
/// is the term's epoch (rule 1). The holder keeps its lease alive every
/// renew interval and counts it valid from before each keep-alive on its
/// monotonic clock (rule 2); etcd deletes the key when the lease runs out,
/// and waiting candidates, in line by their waiter keys, wake by a watch:
/// only the first in line (ADR 0109).
///
/// A transfer ([`Term::transfer`](election_core::Term::transfer), ADR
/// 0112) deletes the election key and puts `<prefix>/h/<name>` with a
/// lease of the window's TTL in one transaction conditioned on the term's
/// epoch: only the named successor may claim until etcd deletes it (its
/// claim compares the handover's mod revision and deletes it; the next
/// epoch as every win). A transfer request
/// ([`request_transfer`](Self::request_transfer)) is `<prefix>/t/<name>`,
/// put with the holder's lease; the holder watches it.
///
/// A revoke ([`revoke`](Self::revoke), ADR 0111) deletes the election key
/// and puts `<prefix>/r/<name>` in one transaction conditioned on the
/// term's epoch; that transaction's revision is the revocation's epoch.
/// Its lease lasts at least the deposed holder's TTL, and no claim wins
/// while it stands.
///
/// ```no_run
/// use election_etcd::{EtcdElection, EtcdOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let election = EtcdElection::connect("10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379", EtcdOptions::default()).await?;
/// let term = election.candidate("dispatcher", "host-a/4711")?.campaign().await?;
/// term.confirm().await?; // commit point: still ours
/// println!("leading in term {}", term.epoch());
/// term.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct EtcdElection {
    store: Arc<Store>,
}

impl EtcdElection {
    /// Connects to the etcd members at `endpoints` (`host:port`,
    /// comma-separated) and checks that the cluster answers.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub async fn connect(endpoints: &str, options: EtcdOptions) -> Result<Self, Error> {
        Self::open(endpoints, options, None).await
    }

    /// Connects as `user` with `password` (etcd's authentication on).
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let password = std::env::var("ETCD_PASSWORD")?;
    /// let election = EtcdElection::connect_as("127.0.0.1:2379", "elect", &password, EtcdOptions::default()).await?;
    /// # drop(election);
    /// # Ok(()) }
    /// ```
    pub async fn connect_as(
        endpoints: &str,
        user: &str,
        password: &str,
        options: EtcdOptions,
    ) -> Result<Self, Error> {
        let credentials = Credentials {
            user: user.to_owned(),
            password: password.to_owned(),
        };
        Self::open(endpoints, options, Some(credentials)).await
    }

    async fn open(
        endpoints: &str,
        options: EtcdOptions,
        credentials: Option<Credentials>,
    ) -> Result<Self, Error> {
        // One channel per process for these endpoints, credentials and
        // timings (`store/clients.rs`); each opening still reads under its
        // own prefix, which proves the cluster answers and the user may.
        let key = ClientKey::new(
            endpoints,
            credentials.as_ref(),
            options.timeout(),
            options.renew_every(),
        );
        let (shared, client) = clients::shared(key, || {
            Client::connect(
                endpoints,
                options.timeout(),
                options.renew_every(),
                credentials,
            )
        })
        .await?;
        // The read and the version's check at once: one round trip.
        let prefix = format!("{}/", options.key_prefix());
        tokio::try_join!(client.probe(prefix.as_bytes()), client.checked_version())?;
        Ok(EtcdElection {
            store: Arc::new(Store {
                client,
                options,
                _shared: shared,
            }),
        })
    }

    /// The options.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// assert_eq!(election.options().key_prefix(), "election");
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &EtcdOptions {
        &self.store.options
    }

    /// The etcd cluster's ID, as its first answer gave it.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// println!("cluster {:x}", election.cluster_id());
    /// # Ok(()) }
    /// ```
    pub fn cluster_id(&self) -> u64 {
        self.store.client.cluster_id()
    }

    /// The etcd release the member that answered first runs, as it
    /// reported it (`3.7.2`); opening refuses one older than
    /// [`NEEDED_VERSION`](crate::NEEDED_VERSION) with
    /// [`Error::ServerTooOld`].
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// println!("etcd {}", election.server_version());
    /// # Ok(()) }
    /// ```
    pub fn server_version(&self) -> &str {
        self.store.client.version().unwrap_or_default()
    }

    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A claim for `identity` in the election `name`.
    ///
    /// ```no_run
    /// use election_core::Candidate;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let term = Candidate::new(election.claim("dispatcher", "host-a")?).campaign().await?;
    /// # drop(term);
    /// # Ok(()) }
    /// ```
    pub fn claim(&self, name: &str, identity: &str) -> Result<EtcdClaim, Error> {
        Ok(EtcdClaim::new(
            self.store.clone(),
            ElectionName::new(name)?,
            Identity::new(identity)?,
        ))
    }

    /// A candidate for `identity` in the election `name`.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// if let Some(term) = election.candidate("dispatcher", "host-a")?.try_campaign().await? {
    ///     println!("leading in term {}", term.epoch());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn candidate(&self, name: &str, identity: &str) -> Result<Candidate<EtcdClaim>, Error> {
        Ok(Candidate::new(self.claim(name, identity)?))
    }

    /// Who leads `name` now (a linearizable read), or `None`.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// match election.leader("dispatcher").await? {
    ///     Some(l) => println!("{} leads in term {}", l.identity, l.epoch),
    ///     None => println!("vacant"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self, name: &str) -> Result<Option<Leader>, Error> {
        self.store.leader(&ElectionName::new(name)?).await
    }

    /// The store's identity: the cluster ID and the prefix.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// assert!(election.store_id().as_str().starts_with("etcd:"));
    /// # Ok(()) }
    /// ```
    pub fn store_id(&self) -> election_core::StoreId {
        election_core::StoreId::new(
            "etcd",
            format_args!(
                "cluster={:x},prefix={}",
                self.store.client.cluster_id(),
                self.store.options.key_prefix()
            ),
        )
    }

    /// Who leads `name`, now and at every change: a watch of its key
    /// (no polling). The first item is the state now.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let mut changes = Box::pin(election.observe("dispatcher").await?);
    /// while let Some(leader) = changes.next().await {
    ///     println!("{:?}", leader?.map(|l| l.identity));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn observe(
        &self,
        name: &str,
    ) -> Result<impl Stream<Item = Result<Option<Leader>, Error>> + Send + use<>, Error> {
        let name = ElectionName::new(name)?;
        let key = self.store.election_key(&name);
        let (revision, kv) = self.store.client.range(&key, Kind::Read).await?;
        let now = kv.map(|kv| record::leader_of(&kv)).transpose()?;
        let watch = self.store.client.watch(&key, &[], revision + 1).await?;
        let store = self.store.clone();
        let state = (watch, key, Some(now.clone()), store);
        let first = futures::stream::once(std::future::ready(Ok(now)));
        let changes =
            futures::stream::unfold(state, |(mut watch, key, mut last, store)| async move {
                loop {
                    let now = match watch.next().await {
                        Err(e) => return Some((Err(e), (watch, key, last, store))),
                        Ok(Watched::Cancelled) => {
                            // Compacted past the watch: read again, watch anew.
                            let read = store.client.range(&key, Kind::Read).await;
                            let (revision, kv) = match read {
                                Ok(r) => r,
                                Err(e) => return Some((Err(e), (watch, key, last, store))),
                            };
                            match store.client.watch(&key, &[], revision + 1).await {
                                Ok(w) => watch = w,
                                Err(e) => return Some((Err(e), (watch, key, last, store))),
                            }
                            kv.map(|kv| record::leader_of(&kv)).transpose()
                        }
                        Ok(Watched::Events(events)) => match events.into_iter().last() {
                            Some(e) if e.r#type == EVENT_DELETE => Ok(None),
                            Some(e) => record::leader_of(&e.kv.unwrap_or_default()).map(Some),
                            None => continue,
                        },
                    };
                    match now {
                        Err(e) => return Some((Err(e), (watch, key, last, store))),
                        Ok(now) if last.as_ref().is_some_and(|l| same_term(l, &now)) => {}
                        Ok(now) => {
                            last = Some(now.clone());
                            return Some((Ok(now), (watch, key, last, store)));
                        }
                    }
                }
            });
        Ok(first.chain(changes))
    }

    /// A lease set for `identity`: its keys under one session lease
    /// ([`EtcdKeyedClaims`]).
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let set = election.lease_set("worker-1").await?;
    /// if set.ask("shard-7").await? {
    ///     println!("this process writes shard-7");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<EtcdKeyedClaims>, Error> {
        Ok(LeaseSet::new(self.keyed_claims(identity)?))
    }

    /// The keyed claims a [`LeaseSet`] runs.
    ///
    /// ```no_run
    /// use election_core::LeaseSet;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let set = LeaseSet::new(election.keyed_claims("worker-1")?);
    /// # drop(set);
    /// # Ok(()) }
    /// ```
    pub fn keyed_claims(&self, identity: &str) -> Result<EtcdKeyedClaims, Error> {
        let identity = Identity::new(identity)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::BadSetting {
                setting: "runtime",
                reason: "a lease set must be started inside a tokio runtime".into(),
            }
            .into());
        }
        Ok(EtcdKeyedClaims::new(self.store.clone(), identity))
    }
}

impl EtcdElection {
    /// Asks the holder of `name`'s current term, on behalf of `by`, to hand
    /// it to `to`
    /// ([`Election::request_transfer`](election_core::Election::request_transfer),
    /// ADR 0112): reads the election key, then one transaction, if it is
    /// still on the term's lease, puts the request at
    /// `<prefix>/t/<name>` with the holder's lease (so it goes with the
    /// term; the election key is not written, so nothing the holder checks
    /// moves). The holder's renewal task watches that key. If the term
    /// changed between the read and the transaction, the new term is
    /// asked. `Ok(None)`: no term holds the name (also while a handover
    /// reserves it).
    ///
    /// Cancel safety: a dropped call may or may not have stored the
    /// request; asking again is safe. Failure model: `Unavailable`,
    /// `OutcomeUnknown`, `Corrupt` for a value this crate did not write.
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let (to, by) = (Identity::new("web-2")?, Identity::new("deploy/7")?);
    /// if let Some(r) = election.request_transfer("jobs", &to, &by).await? {
    ///     println!("asked: {r}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<TransferRequest>, Error> {
        self.store_request(name, to, by, None).await
    }

    /// Tells the holder of `name`'s term that `candidate` waits with
    /// `priority` ([`Election::prefer`](election_core::Election::prefer),
    /// ADR 0112): stored as [`request_transfer`](Self::request_transfer)
    /// stores a request, marked preferred with its priority; the term
    /// hears it only if the priority is above its own.
    ///
    /// Cancel safety, failure model: as `request_transfer`'s.
    ///
    /// ```
    /// use election_core::Identity;
    ///
    /// /// A candidate in the primary zone says it waits, with priority 10.
    /// async fn say_preferred(election: &election_etcd::EtcdElection) -> Result<(), election_etcd::Error> {
    ///     election.prefer("jobs", &Identity::new("zone-a/1")?, 10).await?;
    ///     Ok(())
    /// }
    /// ```
    pub async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<TransferRequest>, Error> {
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
    ) -> Result<Option<TransferRequest>, Error> {
        let name = ElectionName::new(name)?;
        let key = self.store.election_key(&name);
        let requests = record::request_key(self.store.options.key_prefix(), &name);
        for _ in 0..4 {
            let (_, kv) = self.store.client.range(&key, Kind::Read).await?;
            let Some(kv) = kv else {
                return Ok(None);
            };
            let leader = record::leader_of(&kv)?;
            let mut request = TransferRequest::new(
                to.clone(),
                by.clone(),
                leader.epoch,
                Some(std::time::SystemTime::now()),
            );
            request.priority = priority;
            let r = self
                .store
                .client
                .txn(
                    "store a transfer request",
                    Kind::Write,
                    TxnRequest {
                        compare: vec![leased_by(&key, kv.lease)],
                        success: vec![put_op(
                            &requests,
                            record::encode_request(&request),
                            kv.lease,
                        )],
                        failure: vec![],
                    },
                )
                .await?;
            if r.succeeded {
                return Ok(Some(request));
            }
        }
        Ok(None)
    }

    /// The handover that reserves `name` for a successor now, if any
    /// ([`Election::handover`](election_core::Election::handover), ADR
    /// 0112): etcd deletes it when its window ends, or the successor's
    /// claim does.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// if let Some(h) = election.handover("jobs").await? {
    ///     println!("jobs: {h}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn handover(&self, name: &str) -> Result<Option<Handover>, Error> {
        let name = ElectionName::new(name)?;
        let (_, kv) = self
            .store
            .client
            .range(&self.store.handover_key(&name), Kind::Read)
            .await?;
        kv.map(|kv| record::decode_handover(&kv.key, &kv.value))
            .transpose()
    }
}

impl EtcdElection {
    /// Revokes the current term of election `name` on behalf of `by`
    /// ([`Election::revoke`](election_core::Election::revoke), ADR 0111).
    ///
    /// Reads the election key and the TTL the holder's lease was granted
    /// with (`LeaseTimeToLive`); grants a new lease of the longer of that
    /// and this election's TTL (whole seconds, rounded up); then one
    /// transaction, if the key is still as read (its mod revision): delete
    /// the election key and put the revocation key
    /// `<prefix>/r/<name>` (who asked, when) with the new lease. That
    /// transaction's revision is the revocation's epoch: above the
    /// holder's, and below any later term's, since etcd's revision grows
    /// across the cluster. The new lease is then kept alive once, so its
    /// TTL counts from after the transaction (should that keep-alive
    /// fail, the deposed holder's margin, a tenth of its TTL, still covers
    /// the round trip between the grant and the transaction).
    ///
    /// The deposed holder's watch sees its key deleted and reports the
    /// loss; its renewal fails on the read that follows a keep-alive; a
    /// holder cut off from etcd loses at its validity, which ends before
    /// etcd deletes the revocation key. Every claim requires that key
    /// absent, so nobody wins before the deposed lease could have run out
    /// (rule 2); the head of the waiters' line watches it and claims once
    /// etcd deletes it, with an epoch above the revocation's.
    ///
    /// `Ok(None)`: no term holds the name (also while a handover or a
    /// revocation stands; nothing is written). If the term changed
    /// between the read and the transaction, the new term is revoked
    /// (`Unavailable` after four such races).
    ///
    /// Cancel safety: not cancel safe: cancelled after the transaction was
    /// sent, the revocation may or may not have been stored (read
    /// [`revocation`](Self::revocation)); a lease granted for nothing runs
    /// out by itself. Failure model: `Config` for a bad name;
    /// `Unavailable`, `OutcomeUnknown` (the transaction sent, no answer);
    /// `CorruptValue` for a value this crate did not write.
    ///
    /// ```no_run
    /// use election_core::Identity;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// if let Some(r) = election.revoke("jobs", &Identity::new("ops/alice")?).await? {
    ///     println!("{} deposed; fence at {}", r.deposed.identity, r.revocation.epoch);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revoke(&self, name: &str, by: &Identity) -> Result<Option<Revoked>, Error> {
        let name = ElectionName::new(name)?;
        let key = self.store.election_key(&name);
        let revocation_key = self.store.revocation_key(&name);
        let client = &self.store.client;
        let own_ttl = {
            let ttl = self.store.options.ttl();
            ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)
        };
        let own_ttl = i64::try_from(own_ttl).unwrap_or(i64::MAX);
        for _ in 0..4 {
            let (_, kv) = client.range(&key, Kind::Read).await?;
            let Some(kv) = kv else {
                return Ok(None);
            };
            let mut deposed = record::leader_of(&kv)?;
            // The deposed lease's TTL as granted (a holder elsewhere may
            // have another TTL than ours); a lease gone took the key.
            let holder_ttl = if kv.lease == 0 {
                own_ttl // put by hand without a lease
            } else {
                match client.granted_ttl(kv.lease).await? {
                    Some(ttl) => ttl,
                    None => continue,
                }
            };
            deposed.ttl = u64::try_from(holder_ttl).ok().map(Duration::from_secs);
            let lease = client.grant(holder_ttl.max(own_ttl)).await?;
            let at = SystemTime::now();
            let r = client
                .txn(
                    "revoke the term",
                    Kind::Write,
                    TxnRequest {
                        compare: vec![modified_at(&key, kv.mod_revision)],
                        success: vec![
                            delete_op(&key),
                            put_op(&revocation_key, record::encode_revocation(by, at), lease),
                        ],
                        failure: vec![],
                    },
                )
                .await?;
            if !r.succeeded {
                // Another term, or none: the lease holds nothing.
                if let Err(e) = client.revoke(lease).await {
                    tracing::debug!(%name, error = %e, "an unused lease was not revoked; it runs out");
                }
                continue;
            }
            let revision = r.header.map_or(0, |h| h.revision);
            let epoch = record::epoch_of(&revocation_key, revision)?;
            // Its TTL from now: the deposed holder's validity was counted
            // from a keep-alive sent before the transaction.
            if let Err(e) = client.keep_alive(lease).await {
                tracing::debug!(%name, error = %e, "the revocation's lease was not kept alive");
            }
            return Ok(Some(
                Revoked::new(deposed, Revocation::new(by.clone(), epoch, Some(at)))
                    .counted(&name, "etcd"),
            ));
        }
        Err(Error::Unavailable {
            what: "revoke the term",
            source: Some("the term changed before every try of the transaction".into()),
        })
    }

    /// The revocation that stands on `name` now, if any
    /// ([`Election::revocation`](election_core::Election::revocation), ADR
    /// 0111): the revocation key, its epoch its mod revision. It stands
    /// until etcd deletes it (its lease: at least the deposed holder's
    /// TTL); no term begins before, and a revoked name no term followed is
    /// shown as nobody leading afterwards.
    ///
    /// Cancel safety: cancel safe (one read). Failure model: as
    /// [`leader`](Self::leader)'s.
    ///
    /// ```no_run
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// if let Some(r) = election.revocation("jobs").await? {
    ///     println!("jobs: {r}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn revocation(&self, name: &str) -> Result<Option<Revocation>, Error> {
        let name = ElectionName::new(name)?;
        let (_, kv) = self
            .store
            .client
            .range(&self.store.revocation_key(&name), Kind::Read)
            .await?;
        kv.map(|kv| record::revocation_of(&kv)).transpose()
    }
}

fn same_term(a: &Option<Leader>, b: &Option<Leader>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.shows_same(b),
        _ => false,
    }
}

impl election_core::Election for EtcdElection {
    type Claim = EtcdClaim;
    type LeaseSet = LeaseSet<EtcdKeyedClaims>;
    type Error = Error;

    fn claim(&self, name: &str, identity: &str) -> Result<EtcdClaim, Error> {
        EtcdElection::claim(self, name, identity)
    }

    async fn leader(&self, name: &str) -> Result<Option<Leader>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::leader(self, name)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    /// One read-only transaction for up to 64 names (a range step each).
    async fn leaders(
        &self,
        names: &[ElectionName],
    ) -> Result<Vec<Option<Leader>>, election_core::Error> {
        let Some(first) = names.first() else {
            return Ok(Vec::new());
        };
        self.store
            .leaders(names)
            .await
            .map_err(|e| e.into_core(first))
    }

    async fn observe(
        &self,
        name: &str,
        _every: std::time::Duration,
    ) -> Result<
        impl Stream<Item = Result<Option<Leader>, election_core::Error>> + Send + '_,
        election_core::Error,
    > {
        let name_ = ElectionName::new(name)?;
        let changes = EtcdElection::observe(self, name)
            .await
            .map_err(|e| e.into_core(&name_))?;
        Ok(changes.map(move |c| c.map_err(|e| e.into_core(&name_))))
    }

    async fn lease_set(&self, identity: &str) -> Result<Self::LeaseSet, Error> {
        EtcdElection::lease_set(self, identity).await
    }

    async fn store_id(&self) -> Result<election_core::StoreId, Error> {
        Ok(EtcdElection::store_id(self))
    }

    async fn request_transfer(
        &self,
        name: &str,
        to: &Identity,
        by: &Identity,
    ) -> Result<Option<TransferRequest>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::request_transfer(self, name, to, by)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    async fn prefer(
        &self,
        name: &str,
        candidate: &Identity,
        priority: u32,
    ) -> Result<Option<TransferRequest>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::prefer(self, name, candidate, priority)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    async fn revoke(
        &self,
        name: &str,
        by: &Identity,
    ) -> Result<Option<Revoked>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::revoke(self, name, by)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    async fn revocation(&self, name: &str) -> Result<Option<Revocation>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::revocation(self, name)
            .await
            .map_err(|e| e.into_core(&name_))
    }

    async fn handover(&self, name: &str) -> Result<Option<Handover>, election_core::Error> {
        let name_ = ElectionName::new(name)?;
        EtcdElection::handover(self, name)
            .await
            .map_err(|e| e.into_core(&name_))
    }
}
