//! [`EtcdKeyedClaims`]: a lease set's keys on etcd, all under one session
//! lease of the set (ADR 0109).
//!
//! - **Claim**: one transaction per key (the election key put with the
//!   session's lease if it does not exist; its revision is the key's
//!   epoch), many in flight at once; a key the watch shows held by
//!   another is answered without a round trip.
//! - **Renew**: one keep-alive of the session lease renews every held key;
//!   validity counted from the instant before it was sent (the core's
//!   renewal machine). A lease etcd no longer knows loses every key.
//! - **Watch**: one watch of the prefix's election keys keeps what this
//!   set knows of other holders, reports a held key deleted or replaced
//!   (by hand) as lost at once, and wakes [`wait`](KeyedClaims::wait) on
//!   every delete.
//! - **Release** and **give**: a transaction per key on its create
//!   revision; **close** revokes the session lease, which deletes what
//!   may still be held (a claim cancelled after its write landed).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::renewal::RenewalPolicy;
use election_core::{
    Claimed, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, HeldKey, HoldReporter, Identity,
    KeyedClaims, Leader, LossReason, Won, attempt_nonce,
};
use tokio::time::Instant;

use crate::error::Error;
use crate::store::client::{KeptAlive, Kind, Watched};
use crate::store::proto::{EVENT_DELETE, TxnRequest};
use crate::store::record::{self, ClaimRecord};
use crate::store::{Store, created_at, delete_op, first_read, leased_by, put_op, range_op};

/// How many claim or release transactions one step keeps in flight.
const IN_FLIGHT: usize = 64;

/// The set's session: its lease, and the instant before the last grant
/// or keep-alive of it that landed.
#[derive(Debug, Default)]
struct Session {
    lease: Option<i64>,
    sent: Option<Instant>,
}

/// What the set and its watch share.
#[derive(Debug, Default)]
struct Known {
    /// Keys held by this set, with their epochs.
    held: HashMap<ElectionName, Epoch>,
    /// Keys the watch shows held by another (never by this set).
    others: HashMap<ElectionName, Leader>,
}

/// A lease set's keyed claims on etcd; made by
/// [`EtcdElection::keyed_claims`](crate::EtcdElection::keyed_claims) and
/// run by a [`LeaseSet`](election_core::LeaseSet).
#[derive(Debug)]
pub struct EtcdKeyedClaims {
    store: Arc<Store>,
    identity: Identity,
    nonce: u64,
    since_unix_ms: u64,
    poll: Duration,
    session: tokio::sync::Mutex<Session>,
    known: Arc<Mutex<Known>>,
    woken: tokio::sync::Mutex<tokio::sync::watch::Receiver<u64>>,
    wake: Arc<tokio::sync::watch::Sender<u64>>,
    reporter: Arc<std::sync::OnceLock<HoldReporter>>,
    watch: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EtcdKeyedClaims {
    pub(crate) fn new(store: Arc<Store>, identity: Identity) -> Self {
        let (wake, woken) = tokio::sync::watch::channel(0);
        EtcdKeyedClaims {
            store,
            identity,
            nonce: attempt_nonce(),
            since_unix_ms: record::unix_ms(),
            poll: DEFAULT_POLL_INTERVAL,
            session: tokio::sync::Mutex::new(Session::default()),
            known: Arc::new(Mutex::new(Known::default())),
            woken: tokio::sync::Mutex::new(woken),
            wake: Arc::new(wake),
            reporter: Arc::new(std::sync::OnceLock::new()),
            watch: Mutex::new(None),
        }
    }

    /// Sets the backstop of [`wait`](KeyedClaims::wait) (the watch wakes it
    /// first): how long it waits without a delete seen.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use election_etcd::{EtcdElection, EtcdOptions};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let election = EtcdElection::connect("127.0.0.1:2379", EtcdOptions::default()).await?;
    /// let keys = election.keyed_claims("worker-1")?.with_poll_interval(Duration::from_secs(1))?;
    /// # drop(keys);
    /// # Ok(()) }
    /// ```
    pub fn with_poll_interval(mut self, poll: Duration) -> Result<Self, Error> {
        if poll < Duration::from_millis(10) {
            return Err(election_core::ConfigError::BadSetting {
                setting: "poll",
                reason: format!("{poll:?} is below 10ms"),
            }
            .into());
        }
        self.poll = poll;
        Ok(self)
    }

    fn core(&self, key: &ElectionName, e: Error) -> election_core::Error {
        e.into_core(key)
    }

    fn key_of(&self, name: &ElectionName) -> Vec<u8> {
        self.store.election_key(name)
    }

    /// A live session lease: granted, or kept alive if its last landed
    /// keep-alive is older than a renew interval. A lease etcd no longer
    /// knows took every held key with it: each is reported lost.
    async fn session(&self) -> Result<(i64, Instant), Error> {
        let mut session = self.session.lock().await;
        if let (Some(lease), Some(sent)) = (session.lease, session.sent) {
            if sent.elapsed() < self.store.options.renew_every() {
                return Ok((lease, sent));
            }
            let now = Instant::now();
            match self.store.client.keep_alive(lease).await? {
                KeptAlive::Alive => {
                    session.sent = Some(now);
                    return Ok((lease, now));
                }
                KeptAlive::Gone => {
                    session.lease = None;
                    self.lose_all("the set's etcd lease expired or was revoked");
                }
            }
        }
        let sent = Instant::now();
        let lease = self
            .store
            .client
            .grant(self.store.options.ttl_secs())
            .await?;
        *session = Session {
            lease: Some(lease),
            sent: Some(sent),
        };
        Ok((lease, sent))
    }

    fn lose_all(&self, why: &str) {
        let held: Vec<HeldKey> = lock(&self.known).held.drain().collect();
        if let Some(reporter) = self.reporter() {
            for (key, epoch) in held {
                reporter.lose(
                    &key,
                    epoch,
                    LossReason::Revoked {
                        detail: why.to_owned(),
                    },
                );
            }
        }
    }

    fn reporter(&self) -> Option<HoldReporter> {
        self.reporter.get().cloned()
    }

    /// One key's claim.
    async fn claim_one(
        &self,
        key: &ElectionName,
        lease: i64,
        sent: Instant,
    ) -> Result<Claimed, Error> {
        if let Some(holder) = lock(&self.known).others.get(key) {
            return Ok(Claimed::HeldBy(Some(holder.clone())));
        }
        let k = self.key_of(key);
        let revocation = self.store.revocation_key(key);
        let value = ClaimRecord {
            identity: self.identity.clone(),
            nonce: self.nonce,
            since_unix_ms: self.since_unix_ms,
            value: None,
            epoch_at: crate::store::record::EpochAt::Created,
        }
        .encode();
        let mut guard = Orphan {
            claims: self,
            key: Some(key.clone()),
        };
        let r = self
            .store
            .client
            .txn(
                "claim a key",
                Kind::Write,
                TxnRequest {
                    // Not while a revocation of the key stands (ADR 0111).
                    compare: vec![created_at(&k, 0), created_at(&revocation, 0)],
                    success: vec![put_op(&k, value, lease)],
                    failure: vec![range_op(&k)],
                },
            )
            .await;
        let r = match r {
            Ok(r) => r,
            Err(e @ Error::OutcomeUnknown { .. }) => return Err(e), // the guard cleans up
            Err(e) => {
                guard.key = None;
                return Err(e);
            }
        };
        guard.key = None;
        if !r.succeeded {
            let Some(kv) = first_read(r.responses) else {
                return Ok(Claimed::HeldBy(None)); // gone meanwhile
            };
            let ours = ClaimRecord::decode(&kv.key, &kv.value).is_ok_and(|r| r.nonce == self.nonce);
            if ours && kv.lease == lease && !lock(&self.known).held.contains_key(key) {
                // An earlier claim of this set whose answer never came (cut
                // off, or timed out): its term was never counted, so it is
                // given up, never adopted; the delete wakes the next try.
                self.store
                    .client
                    .txn(
                        "give up a key claimed by a cancelled claim",
                        Kind::Write,
                        TxnRequest {
                            compare: vec![created_at(&k, kv.create_revision), leased_by(&k, lease)],
                            success: vec![delete_op(&k)],
                            failure: vec![],
                        },
                    )
                    .await?;
                return Ok(Claimed::HeldBy(None));
            }
            return Ok(Claimed::HeldBy(Some(record::leader_of(&kv)?)));
        }
        let revision = r.header.map_or(0, |h| h.revision);
        let epoch = record::epoch_of(&k, revision)?;
        lock(&self.known).held.insert(key.clone(), epoch);
        Ok(Claimed::Won(Won {
            epoch,
            valid_until: Some(sent + self.store.options.validity()),
        }))
    }

    /// Deletes `key` if this set's lease holds it while the set does not
    /// count it held (a claim cancelled or timed out after its write).
    fn clean_up(&self, key: ElectionName) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the lease runs out, or close revokes it
        };
        let store = self.store.clone();
        let known = self.known.clone();
        let lease = self.session.try_lock().ok().and_then(|s| s.lease);
        let Some(lease) = lease else { return };
        runtime.spawn(async move {
            let k = store.election_key(&key);
            let Ok((_, Some(kv))) = store.client.range(&k, Kind::Read).await else {
                return;
            };
            if kv.lease != lease || lock(&known).held.contains_key(&key) {
                return;
            }
            let _ = store
                .client
                .txn(
                    "give up a key claimed by a cancelled claim",
                    Kind::Write,
                    TxnRequest {
                        compare: vec![created_at(&k, kv.create_revision), leased_by(&k, lease)],
                        success: vec![delete_op(&k)],
                        failure: vec![],
                    },
                )
                .await;
        });
    }

    /// Deletes each held key on its epoch; failures leave it to the lease.
    async fn delete_held(&self, held: &[HeldKey]) {
        {
            let mut known = lock(&self.known);
            for (key, epoch) in held {
                if known.held.get(key) == Some(epoch) {
                    known.held.remove(key);
                }
            }
        }
        for chunk in held.chunks(IN_FLIGHT) {
            let releases: Vec<_> = chunk
                .iter()
                .map(|(key, epoch)| self.release_one(key, *epoch))
                .collect();
            futures::future::join_all(releases).await;
        }
    }

    async fn release_one(&self, key: &ElectionName, epoch: Epoch) {
        let k = self.key_of(key);
        let r = self
            .store
            .client
            .txn(
                "release a key",
                Kind::Write,
                TxnRequest {
                    compare: vec![created_at(&k, epoch.get_i64())],
                    success: vec![delete_op(&k)],
                    failure: vec![],
                },
            )
            .await;
        if let Err(e) = r {
            tracing::debug!(%key, error = %e, "a key was not released; its lease ends it");
        }
    }
}

/// Cleans up after a claim that did not finish (cancelled, or timed out
/// with its outcome unknown).
struct Orphan<'a> {
    claims: &'a EtcdKeyedClaims,
    key: Option<ElectionName>,
}

impl Drop for Orphan<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.claims.clean_up(key);
        }
    }
}

/// The watch of every election key under the prefix, for one set.
struct KeyWatch {
    store: Arc<Store>,
    known: Arc<Mutex<Known>>,
    wake: Arc<tokio::sync::watch::Sender<u64>>,
    reporter: Arc<std::sync::OnceLock<HoldReporter>>,
    nonce: u64,
}

impl KeyWatch {
    fn name_of(&self, key: &[u8]) -> Option<ElectionName> {
        let prefix = format!("{}/e/", self.store.options.key_prefix());
        let name = std::str::from_utf8(key).ok()?.strip_prefix(&prefix)?;
        ElectionName::new(name).ok()
    }

    fn lose(&self, name: &ElectionName, why: &str) {
        let epoch = lock(&self.known).held.remove(name);
        if let (Some(epoch), Some(reporter)) = (epoch, self.reporter.get()) {
            reporter.lose(
                name,
                epoch,
                LossReason::Revoked {
                    detail: why.to_owned(),
                },
            );
        }
    }

    /// What one key shows now: held by this set in its epoch, by another,
    /// or by none.
    fn saw(&self, name: &ElectionName, kv: Option<&crate::store::proto::KeyValue>) {
        let ours = lock(&self.known).held.get(name).copied();
        match kv {
            None => {
                lock(&self.known).others.remove(name);
                if ours.is_some() {
                    self.lose(name, "the key was deleted");
                }
            }
            Some(kv) => {
                let mine =
                    ClaimRecord::decode(&kv.key, &kv.value).is_ok_and(|r| r.nonce == self.nonce);
                if let Some(epoch) = ours
                    && epoch.get_i64() != kv.create_revision
                {
                    self.lose(name, "the key shows another term");
                }
                if mine {
                    lock(&self.known).others.remove(name);
                } else if let Ok(leader) = record::leader_of(kv) {
                    lock(&self.known).others.insert(name.clone(), leader);
                }
            }
        }
    }

    /// Reads every election key, then watches them; read again after a
    /// broken watch. Runs until aborted.
    async fn run(self) {
        let prefix = format!("{}/e/", self.store.options.key_prefix()).into_bytes();
        let end = record::prefix_end(&prefix);
        loop {
            let read = self
                .store
                .client
                .range_with(crate::store::proto::RangeRequest {
                    key: prefix.clone(),
                    range_end: end.clone(),
                    ..Default::default()
                })
                .await;
            if let Ok((revision, kvs)) = read {
                let seen: HashMap<ElectionName, crate::store::proto::KeyValue> = kvs
                    .into_iter()
                    .filter_map(|kv| Some((self.name_of(&kv.key)?, kv)))
                    .collect();
                let before: Vec<ElectionName> = {
                    let known = lock(&self.known);
                    known
                        .held
                        .keys()
                        .chain(known.others.keys())
                        .cloned()
                        .collect()
                };
                for name in before {
                    if !seen.contains_key(&name) {
                        self.saw(&name, None);
                    }
                }
                for (name, kv) in &seen {
                    self.saw(name, Some(kv));
                }
                self.wake.send_modify(|n| *n += 1);
                if let Ok(mut watch) = self.store.client.watch(&prefix, &end, revision + 1).await {
                    while let Ok(Watched::Events(events)) = watch.next().await {
                        let mut deleted = false;
                        for e in events {
                            let Some(kv) = e.kv else { continue };
                            let Some(name) = self.name_of(&kv.key) else {
                                continue;
                            };
                            if e.r#type == EVENT_DELETE {
                                deleted = true;
                                self.saw(&name, None);
                            } else {
                                self.saw(&name, Some(&kv));
                            }
                        }
                        if deleted {
                            self.wake.send_modify(|n| *n += 1);
                        }
                    }
                }
            }
            tokio::time::sleep(self.store.options.renew_every() / 2).await;
        }
    }
}

impl KeyedClaims for EtcdKeyedClaims {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "etcd"
    }

    fn renewal(&self) -> Option<RenewalPolicy> {
        let o = &self.store.options;
        RenewalPolicy::new(o.validity(), o.renew_every())
            .and_then(|p| p.with_retry_after((o.renew_every() / 4).max(Duration::from_millis(10))))
            .and_then(|p| p.with_attempt_timeout(o.timeout()))
            .ok()
    }

    fn start(&self, reporter: HoldReporter) {
        let _ = self.reporter.set(reporter);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let watch = KeyWatch {
            store: self.store.clone(),
            known: self.known.clone(),
            wake: self.wake.clone(),
            reporter: self.reporter.clone(),
            nonce: self.nonce,
        };
        *lock(&self.watch) = Some(runtime.spawn(watch.run()));
    }

    async fn claim(&self, keys: &[ElectionName]) -> Vec<Result<Claimed, election_core::Error>> {
        let (lease, sent) = match self.session().await {
            Ok(s) => s,
            Err(e) => {
                return keys
                    .iter()
                    .map(|k| Err(self.core(k, clone_error(&e))))
                    .collect();
            }
        };
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(IN_FLIGHT) {
            let claims: Vec<_> = chunk
                .iter()
                .map(|key| self.claim_one(key, lease, sent))
                .collect();
            let answers = futures::future::join_all(claims).await;
            out.extend(
                chunk
                    .iter()
                    .zip(answers)
                    .map(|(key, a)| a.map_err(|e| self.core(key, e))),
            );
        }
        out
    }

    async fn renew(
        &self,
        held: &[HeldKey],
    ) -> Result<Vec<(ElectionName, LossReason)>, election_core::Error> {
        let Some((key, _)) = held.first() else {
            return Ok(Vec::new());
        };
        let mut session = self.session.lock().await;
        let Some(lease) = session.lease else {
            return Ok(held
                .iter()
                .map(|(k, _)| {
                    (
                        k.clone(),
                        LossReason::Revoked {
                            detail: "the set has no etcd lease".into(),
                        },
                    )
                })
                .collect());
        };
        let sent = Instant::now();
        match self.store.client.keep_alive(lease).await {
            Ok(KeptAlive::Alive) => {
                session.sent = Some(sent);
                Ok(Vec::new())
            }
            Ok(KeptAlive::Gone) => {
                session.lease = None;
                let mut known = lock(&self.known);
                Ok(held
                    .iter()
                    .map(|(k, _)| {
                        known.held.remove(k);
                        (
                            k.clone(),
                            LossReason::Revoked {
                                detail: "the set's etcd lease expired or was revoked".into(),
                            },
                        )
                    })
                    .collect())
            }
            Err(e @ Error::ClusterChanged { .. }) => Ok(held
                .iter()
                .map(|(k, _)| {
                    (
                        k.clone(),
                        LossReason::Revoked {
                            detail: e.to_string(),
                        },
                    )
                })
                .collect()),
            Err(e) => Err(self.core(key, e)),
        }
    }

    async fn confirm(&self, key: &ElectionName, epoch: Epoch) -> Result<(), election_core::Error> {
        let lease = self.session.lock().await.lease;
        let Some(lease) = lease else {
            return Err(election_core::Error::NotHeld { name: key.clone() });
        };
        let k = self.key_of(key);
        let r = self
            .store
            .client
            .txn(
                "confirm a key",
                Kind::Read,
                TxnRequest {
                    compare: vec![created_at(&k, epoch.get_i64()), leased_by(&k, lease)],
                    success: vec![],
                    failure: vec![],
                },
            )
            .await
            .map_err(|e| self.core(key, e))?;
        if r.succeeded {
            Ok(())
        } else {
            Err(election_core::Error::NotHeld { name: key.clone() })
        }
    }

    async fn release(&self, held: &[HeldKey]) {
        self.delete_held(held).await;
    }

    async fn wait(&self) {
        let mut woken = self.woken.lock().await;
        let _ = tokio::time::timeout(self.poll, woken.changed()).await;
    }

    async fn close(&self) {
        if let Some(task) = lock(&self.watch).take() {
            task.abort();
        }
        let lease = self.session.lock().await.lease.take();
        if let Some(lease) = lease
            && let Err(e) = self.store.client.revoke(lease).await
        {
            tracing::debug!(error = %e, "the set's lease was not revoked; it runs out");
        }
    }
}

impl Drop for EtcdKeyedClaims {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.watch).take() {
            task.abort();
        }
    }
}

/// The same error again, for each key of a batch (the client's errors do
/// not clone: the copy keeps the message).
fn clone_error(e: &Error) -> Error {
    match e {
        Error::OutcomeUnknown { what, after, .. } => Error::OutcomeUnknown {
            what,
            after: *after,
            source: Some(e.to_string().into()),
        },
        Error::ClusterChanged { was, now } => Error::ClusterChanged {
            was: *was,
            now: *now,
        },
        Error::Config(c) => Error::Config(c.clone()),
        _ => Error::Unavailable {
            what: "open the set's lease",
            source: Some(e.to_string().into()),
        },
    }
}
