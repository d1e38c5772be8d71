//! [`EtcdClaim`]: one candidate's steps in one election, and its attempt
//! ([`EtcdAttempt`]).
//!
//! - **Win** (rule 1): a lease granted (or kept alive) first, the instant
//!   before it taken on the monotonic clock; then one transaction: if the
//!   election key does not exist (create revision 0), put it with the
//!   lease (and delete this attempt's waiter key). The transaction's
//!   revision is the key's create revision and the term's epoch.
//! - **Passed a term** (ADR 0119): the head of the waiters' line may find
//!   the election key put over with its own lease by the holder's release:
//!   it holds the term that put won, whose revision (the key's mod
//!   revision) is the epoch. Its validity counts from its lease's last
//!   keep-alive, sent before that put (rule 2).
//! - **A term is its lease**: every check that the term still holds the
//!   key (confirm, proclaim, renew, transfer) compares the key's lease
//!   with the term's. A lease is one attempt's alone and holds one term.
//! - **Wait**: in the waiters' line (`store/queue.rs`), by a watch; the
//!   poll interval is only a backstop: at each poll the wait reads the
//!   election key and waits on while another lease holds it (a claim's
//!   transaction is a raft write even when refused).
//! - **Renew** (rule 2): `renewal.rs`.
//! - **Release** (rule 3): never after a loss. If a waiter is in line, one
//!   transaction passes the term to the head (ADR 0119): while the key is
//!   on the term's lease and the head's waiter key is as read, put the key
//!   with the head's lease and record and delete that waiter key. Else, or
//!   if that does not land, a revoke of the term's lease, which deletes
//!   the key only while it is attached to that lease (the term's own:
//!   every other term puts it with its own lease). One write either way on
//!   the handover's path; after a pass, close revokes the lease, which
//!   then holds nothing.
//! - **Transfer** (ADR 0112): one transaction, if the key is still on the
//!   term's lease: delete it and put the handover
//!   key with a new lease whose TTL is the window (etcd deletes it then:
//!   server-side expiry, never early). Other candidates' claims compare the
//!   handover key's create revision to 0 and fail while it stands; the
//!   successor's claim compares its mod revision instead and deletes it,
//!   with the next epoch as every win. The holder's renewal task watches
//!   the transfer request key and reports requests.
//! - **Revoked** (ADR 0111, [`EtcdElection::revoke`](crate::EtcdElection::revoke)):
//!   every claim, the successor's too, also compares the revocation key's
//!   create revision to 0, so nobody wins until etcd deletes it (its
//!   lease, at least the deposed holder's TTL); the head of the waiters'
//!   line watches it. The deposed holder's watch sees its key deleted.
//! - **Close** (rule 4): revokes the attempt's lease in the background,
//!   which deletes every key attached to it: the election key if a
//!   dropped, cancelled or failed attempt still holds it, and its waiter
//!   key. A lease is this attempt's alone: revoking it never touches a
//!   successor's key.

use std::sync::Arc;
use std::time::Duration;

use election_core::{
    Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
    attempt_nonce,
};
use tokio::time::Instant;

use crate::error::Error;
use crate::renewal::{HeldTerm, Renewal};
use crate::store::client::{KeptAlive, Kind, Watched};
use crate::store::proto::{EVENT_DELETE, KeyValue, TxnRequest};
use crate::store::queue::{self, Ahead, Line};
use crate::store::record::{self, ClaimRecord, EpochAt};
use crate::store::{Store, created_at, delete_op, leased_by, modified_at, put_op, range_op, reads};

/// One candidate in one election on etcd; made by
/// [`EtcdElection::claim`](crate::EtcdElection::claim) and run by a
/// [`Candidate`](election_core::Candidate).
#[derive(Clone, Debug)]
pub struct EtcdClaim {
    store: Arc<Store>,
    name: ElectionName,
    identity: Identity,
    key: Vec<u8>,
    /// The handover key (ADR 0112).
    handover: Vec<u8>,
    /// The revocation key (ADR 0111).
    revocation: Vec<u8>,
}

/// One attempt of an [`EtcdClaim`]: its lease, its place in the waiters'
/// line and the term it won.
#[derive(Debug)]
pub struct EtcdAttempt {
    nonce: u64,
    /// The attempt's lease, once granted.
    lease: Option<i64>,
    /// The instant before the last grant or keep-alive of `lease` that
    /// landed.
    lease_sent: Option<Instant>,
    /// The create revision of this attempt's waiter key.
    place: Option<i64>,
    /// The term won, until released or lost.
    held: Option<HeldTerm>,
    /// The value last proclaimed.
    value: Option<LeaderValue>,
    since_unix_ms: u64,
    /// The mod revision of a handover to this candidate that its wait saw
    /// (ADR 0112): its next claim goes over it at once, without first
    /// trying the free key (a write etcd would refuse and still commit).
    handed: Option<i64>,
    /// The election key as the wait saw it put on this attempt's lease: a
    /// release passed the term to it (ADR 0119).
    passed: Option<Box<KeyValue>>,
    /// The head of the waiters' line while this attempt holds a term, as
    /// its renewal task follows it: whom a release passes the term to.
    line: Line,
}

impl EtcdClaim {
    pub(crate) fn new(store: Arc<Store>, name: ElectionName, identity: Identity) -> Self {
        let key = store.election_key(&name);
        let handover = store.handover_key(&name);
        let revocation = store.revocation_key(&name);
        EtcdClaim {
            store,
            name,
            identity,
            key,
            handover,
            revocation,
        }
    }

    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    /// The attempt's record: a claim's (its epoch the create revision it
    /// wins), or a held term's, which names its epoch.
    fn record(&self, attempt: &EtcdAttempt) -> Vec<u8> {
        ClaimRecord {
            identity: self.identity.clone(),
            nonce: attempt.nonce,
            since_unix_ms: attempt.since_unix_ms,
            value: attempt.value.clone(),
            epoch_at: attempt
                .held
                .as_ref()
                .map_or(EpochAt::Created, |h| EpochAt::Is(h.epoch)),
        }
        .encode()
    }

    /// A live lease for the attempt: kept alive if it has one, granted if
    /// not; `lease_sent` is the instant before the request. A lease kept
    /// alive less than a renew interval ago (a waiter's, by its wait) is
    /// used as it is, its validity still counted from that keep-alive: a
    /// woken waiter claims without a round trip first, and its term's
    /// first renewal comes a renew interval after that keep-alive. If etcd
    /// lost it meanwhile, the claim's put is refused (`lease not found`)
    /// and the next try keeps it alive first ([`Self::claim_failed`]).
    async fn live_lease(&self, attempt: &mut EtcdAttempt) -> Result<i64, Error> {
        let sent = Instant::now();
        if let (Some(lease), Some(kept)) = (attempt.lease, attempt.lease_sent)
            && sent.saturating_duration_since(kept) < self.store.options.renew_every()
        {
            return Ok(lease);
        }
        if let Some(lease) = attempt.lease {
            match self.store.client.keep_alive(lease).await? {
                KeptAlive::Alive => {
                    attempt.lease_sent = Some(sent);
                    return Ok(lease);
                }
                KeptAlive::Gone => {
                    // Its waiter key went with it.
                    attempt.lease = None;
                    attempt.place = None;
                }
            }
        }
        let sent = Instant::now();
        let lease = self
            .store
            .client
            .grant(self.store.options.ttl_secs())
            .await?;
        attempt.lease = Some(lease);
        attempt.lease_sent = Some(sent);
        Ok(lease)
    }

    /// A claim's write failed: the next try keeps the lease alive (or
    /// grants one) before it claims, whatever [`Self::live_lease`] would
    /// reuse, so a lease etcd lost is replaced at once.
    fn claim_failed(&self, attempt: &mut EtcdAttempt, e: Error) -> election_core::Error {
        attempt.lease_sent = None;
        self.core(e)
    }

    fn held(&self, attempt: &EtcdAttempt) -> Result<HeldTerm, election_core::Error> {
        attempt
            .held
            .clone()
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })
    }

    /// Waits for a handover naming `identity` to be put on the handover
    /// key the watch follows (ADR 0112), and returns its mod revision;
    /// never, without a watch. A broken watch waits forever (the poll
    /// interval is the backstop).
    async fn handed_to(
        identity: &Identity,
        watch: Option<&mut crate::store::client::Watch>,
    ) -> i64 {
        let Some(watch) = watch else {
            return std::future::pending().await;
        };
        loop {
            match watch.next().await {
                Ok(Watched::Events(events)) => {
                    let to_us = events.iter().rev().find_map(|e| {
                        let kv = e.kv.as_ref().filter(|_| e.r#type != EVENT_DELETE)?;
                        record::decode_handover(&kv.key, &kv.value)
                            .is_ok_and(|h| h.to == *identity)
                            .then_some(kv.mod_revision)
                    });
                    if let Some(revision) = to_us {
                        return revision;
                    }
                }
                Ok(Watched::Cancelled) | Err(_) => return std::future::pending().await,
            }
        }
    }

    /// A watch of the handover key for a waiter behind another in line,
    /// whose predecessor's key is not the election's: a handover names a
    /// successor anywhere in line, and the queue wakes only its head.
    /// `Err(mod_revision)`: a handover to this candidate stands already
    /// (claim over it now).
    async fn handover_watch(&self) -> Result<Option<crate::store::client::Watch>, i64> {
        let Ok((revision, kv)) = self.store.client.range(&self.handover, Kind::Read).await else {
            return Ok(None);
        };
        if let Some(kv) = kv.filter(|kv| {
            record::decode_handover(&kv.key, &kv.value).is_ok_and(|h| h.to == self.identity)
        }) {
            return Err(kv.mod_revision);
        }
        Ok(self
            .store
            .client
            .watch(&self.handover, &[], revision + 1)
            .await
            .ok())
    }

    /// Waits for the watch's key to be deleted (or the watch to end):
    /// `None`; or to be put on `lease`, this waiter's own (a release passed
    /// the term to it, ADR 0119): the key as put.
    async fn woken(
        key: &[u8],
        lease: i64,
        watch: &mut crate::store::client::Watch,
    ) -> Result<Option<KeyValue>, Error> {
        loop {
            match watch.next().await? {
                Watched::Cancelled => return Ok(None),
                Watched::Events(events) => {
                    for e in events {
                        let Some(kv) = e.kv.filter(|kv| kv.key == key) else {
                            continue;
                        };
                        if e.r#type == EVENT_DELETE {
                            return Ok(None);
                        }
                        if kv.lease == lease {
                            return Ok(Some(kv));
                        }
                    }
                }
            }
        }
    }

    /// Passes the term to `head`, the head of the waiters' line as the
    /// term's renewal task last saw it (ADR 0119), if it says who it is
    /// (`record::decode_waiter`): one transaction, while the election key
    /// is on the term's lease, the head's waiter key is still the one seen
    /// and no revocation or handover stands, puts the key over with the
    /// head's lease and record (its epoch the put's revision) and deletes
    /// the head's waiter key. `true` if it landed; `false` if it did not
    /// (the release then revokes the term's lease, which deletes the key
    /// only if it is still on it). Any error is `false`: a pass that
    /// landed unanswered leaves the key on the head's lease, which the
    /// revoke does not touch.
    async fn pass_on(&self, held: &HeldTerm, head: KeyValue) -> bool {
        if head.lease == 0 || head.lease == held.lease {
            return false;
        }
        let Ok((identity, nonce)) = record::decode_waiter(&head.key, &head.value) else {
            return false; // a waiter that cannot read a passed term
        };
        let value = ClaimRecord {
            identity,
            nonce,
            since_unix_ms: record::unix_ms(),
            value: None,
            epoch_at: EpochAt::Modified,
        }
        .encode();
        let passed = self
            .store
            .client
            .txn(
                "pass the term to the next waiter",
                Kind::Write,
                TxnRequest {
                    compare: vec![
                        leased_by(&self.key, held.lease),
                        created_at(&head.key, head.create_revision),
                        created_at(&self.revocation, 0),
                        created_at(&self.handover, 0),
                    ],
                    success: vec![put_op(&self.key, value, head.lease), delete_op(&head.key)],
                    failure: vec![],
                },
            )
            .await;
        match passed {
            Ok(r) => r.succeeded,
            Err(e) => {
                tracing::debug!(name = %self.name, error = %e, "the term was not passed on");
                false
            }
        }
    }
}

impl EtcdClaim {
    /// The claim of the election key handed over to this candidate
    /// (ADR 0112), over the handover of mod revision `handed`, deleting
    /// it: `success` (the claim's put and its waiter key's delete) if the
    /// key is free, no revocation stands and the handover is unchanged.
    /// `None`: not won (nothing written).
    async fn claim_handed(
        &self,
        mut success: Vec<crate::store::proto::RequestOp>,
        handed: i64,
    ) -> Result<Option<crate::store::proto::TxnResponse>, Error> {
        success.push(delete_op(&self.handover));
        let r = self
            .store
            .client
            .txn(
                "claim the election key handed over",
                Kind::Write,
                TxnRequest {
                    compare: vec![
                        created_at(&self.key, 0),
                        created_at(&self.revocation, 0),
                        modified_at(&self.handover, handed),
                    ],
                    success,
                    failure: vec![],
                },
            )
            .await?;
        Ok(r.succeeded.then_some(r))
    }

    /// The term won at `revision` on `lease` (kept alive at `sent`).
    fn won(
        &self,
        attempt: &mut EtcdAttempt,
        revision: i64,
        lease: i64,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        let epoch = record::epoch_of(&self.key, revision).map_err(|e| self.core(e))?;
        self.held_from(attempt, epoch, lease, sent)
    }

    /// The term a release passed to this attempt (ADR 0119): the election
    /// key `kv`, on this attempt's `lease` (kept alive at `sent`, before
    /// the put that passed it: etcd deletes the key no sooner than a TTL
    /// after it received that keep-alive). Its epoch is where its record
    /// says (the put's revision).
    fn passed(
        &self,
        attempt: &mut EtcdAttempt,
        kv: &KeyValue,
        lease: i64,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        let record = ClaimRecord::decode(&kv.key, &kv.value).map_err(|e| self.core(e))?;
        let epoch = record.epoch(kv).map_err(|e| self.core(e))?;
        attempt.since_unix_ms = record.since_unix_ms;
        attempt.value = record.value;
        self.held_from(attempt, epoch, lease, sent)
    }

    /// The term held at `epoch` on `lease`, valid from `sent`.
    fn held_from(
        &self,
        attempt: &mut EtcdAttempt,
        epoch: election_core::Epoch,
        lease: i64,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        attempt.place = None;
        attempt.held = Some(HeldTerm { epoch, lease });
        Ok(Some(Won {
            epoch,
            valid_until: Some(sent + self.store.options.validity()),
        }))
    }
}

impl Claim for EtcdClaim {
    type Attempt = EtcdAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn backend(&self) -> &'static str {
        "etcd"
    }

    async fn open(&self) -> Result<EtcdAttempt, election_core::Error> {
        Ok(EtcdAttempt {
            nonce: attempt_nonce(),
            lease: None,
            lease_sent: None,
            place: None,
            held: None,
            value: None,
            since_unix_ms: 0,
            handed: None,
            passed: None,
            line: Line::default(),
        })
    }

    async fn try_claim(
        &self,
        attempt: &mut EtcdAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let lease = self.live_lease(attempt).await.map_err(|e| self.core(e))?;
        let sent = attempt.lease_sent.unwrap_or_else(Instant::now);
        // A term a release passed to this attempt, as its wait saw it (on
        // a lease that is still this attempt's, kept alive at `sent`).
        if let Some(kv) = attempt.passed.take()
            && kv.lease == lease
        {
            return self.passed(attempt, &kv, lease, sent);
        }
        attempt.since_unix_ms = record::unix_ms();
        attempt.value = None;
        // The attempt's waiter key goes with the win (if it has one: a
        // join cut off by its bound may have put it unseen), waking the
        // next in line.
        let waiter = record::waiter_key(self.store.options.key_prefix(), &self.name, lease);
        let success = vec![
            put_op(&self.key, self.record(attempt), lease),
            delete_op(&waiter),
        ];
        // A handover to this candidate its wait saw: over it at once.
        if let Some(handed) = attempt.handed.take()
            && let Some(r) = self
                .claim_handed(success.clone(), handed)
                .await
                .map_err(|e| self.claim_failed(attempt, e))?
        {
            return self.won(attempt, r.header.map_or(0, |h| h.revision), lease, sent);
        }
        // Free, no revocation stands (ADR 0111) and no handover reserves
        // it (ADR 0112); else read the handover, which may name this
        // candidate, and the key, which a release may have passed to this
        // attempt unseen by its wait (ADR 0119).
        let mut r = self
            .store
            .client
            .txn(
                "claim the election key",
                Kind::Write,
                TxnRequest {
                    compare: vec![
                        created_at(&self.key, 0),
                        created_at(&self.revocation, 0),
                        created_at(&self.handover, 0),
                    ],
                    success: success.clone(),
                    failure: vec![range_op(&self.handover), range_op(&self.key)],
                },
            )
            .await
            .map_err(|e| self.claim_failed(attempt, e))?;
        if !r.succeeded {
            let mut read = reads(std::mem::take(&mut r.responses));
            let (handover, key) = (read.next().flatten(), read.next().flatten());
            if let Some(kv) = key.filter(|kv| kv.lease == lease) {
                return self.passed(attempt, &kv, lease, sent);
            }
            let Some(handover) = handover else {
                return Ok(None);
            };
            let h = record::decode_handover(&handover.key, &handover.value)
                .map_err(|e| self.core(e))?;
            if h.to != self.identity {
                return Ok(None);
            }
            // The successor: over the handover as read.
            match self
                .claim_handed(success, handover.mod_revision)
                .await
                .map_err(|e| self.claim_failed(attempt, e))?
            {
                Some(handed) => r = handed,
                None => return Ok(None),
            }
        }
        self.won(attempt, r.header.map_or(0, |h| h.revision), lease, sent)
    }

    async fn wait(
        &self,
        attempt: &mut EtcdAttempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        let mut deadline = Instant::now() + poll_interval;
        let Some(lease) = attempt.lease else {
            tokio::time::sleep_until(deadline).await;
            return Ok(());
        };
        // Keep the lease (and so the place in line) alive while waiting.
        let renew_every = self.store.options.renew_every();
        let mut next_keep_alive = Instant::now() + renew_every;
        loop {
            let line = async {
                let place = match attempt.place {
                    Some(place) => place,
                    None => {
                        queue::join(
                            &self.store,
                            &self.name,
                            lease,
                            &self.identity,
                            attempt.nonce,
                        )
                        .await?
                    }
                };
                attempt.place = Some(place);
                queue::ahead(&self.store, &self.name, place, &self.identity, lease).await
            };
            let ahead = match tokio::time::timeout_at(deadline, line).await {
                Err(_) => return Ok(()),
                Ok(Ok(ahead)) => ahead,
                Ok(Err(e)) => {
                    // No watch: poll, the backstop.
                    tracing::debug!(name = %self.name, error = %e, "waiting without a watch");
                    tokio::time::sleep_until(deadline).await;
                    return Ok(());
                }
            };
            let (key, mut watch) = match ahead {
                Ahead::Watching(key, watch) => (key, watch),
                Ahead::Passed(kv) => {
                    attempt.passed = Some(kv);
                    return Ok(());
                }
                Ahead::Free => return Ok(()),
            };
            // Behind another waiter: a handover to this candidate wakes it too.
            let behind = key != self.key && key != self.handover && key != self.revocation;
            let mut handovers = if behind {
                match tokio::time::timeout_at(deadline, self.handover_watch()).await {
                    Err(_) => return Ok(()),
                    Ok(Err(handed)) => {
                        attempt.handed = Some(handed);
                        return Ok(());
                    }
                    Ok(Ok(w)) => w,
                }
            } else {
                None
            };
            loop {
                tokio::select! {
                    woken = Self::woken(&key, lease, &mut watch) => {
                        match woken {
                            Ok(Some(passed)) => {
                                attempt.passed = Some(Box::new(passed));
                                return Ok(());
                            }
                            // The waiter ahead left (most often: it won, by
                            // a pass or a claim): find the line again,
                            // without a claim (ADR 0121). A refused claim
                            // is a raft write, and it ran beside the start
                            // of the term just passed.
                            Ok(None) if behind => {
                                deadline = deadline.max(Instant::now() + poll_interval);
                                break;
                            }
                            Ok(None) => return Ok(()),
                            Err(e) => {
                                tracing::debug!(name = %self.name, error = %e, "the watch broke");
                                tokio::time::sleep_until(deadline).await;
                                return Ok(());
                            }
                        }
                    }
                    handed = Self::handed_to(&self.identity, handovers.as_mut()) => {
                        attempt.handed = Some(handed);
                        return Ok(());
                    }
                    () = tokio::time::sleep_until(deadline), if !behind => {
                        // The head's backstop, should the watch have missed
                        // a change: one read of the election key, not a
                        // claim (a claim's transaction is a raft write,
                        // refused or not: thirty waiters polling four times
                        // a second made 120 of them). Held on another
                        // lease: wait on, with the same watch. Free,
                        // unreadable, or passed to this attempt: return,
                        // and the core tries. A waiter behind another reads
                        // nothing at its polls (ADR 0121): the key ahead's
                        // deletion, a handover to it or a broken watch
                        // wakes it, and a pass goes only to the head.
                        match self.store.client.range(&self.key, Kind::Read).await {
                            Ok((_, Some(kv))) if kv.lease == lease => {
                                attempt.passed = Some(Box::new(kv));
                                return Ok(());
                            }
                            Ok((_, Some(_))) => deadline = Instant::now() + poll_interval,
                            Ok((_, None)) | Err(_) => return Ok(()),
                        }
                    }
                    () = tokio::time::sleep_until(next_keep_alive) => {
                        let sent = Instant::now();
                        next_keep_alive = sent + renew_every;
                        match self.store.client.keep_alive(lease).await {
                            Ok(KeptAlive::Alive) => attempt.lease_sent = Some(sent),
                            Ok(KeptAlive::Gone) => {
                                attempt.lease = None;
                                attempt.lease_sent = None;
                                attempt.place = None;
                                return Ok(());
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
        }
    }

    fn watch(
        &self,
        attempt: &mut EtcdAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        let held = self.held(attempt)?;
        let renewal = Renewal {
            store: self.store.clone(),
            name: self.name.clone(),
            key: self.key.clone(),
            requests: record::request_key(self.store.options.key_prefix(), &self.name),
            held,
            line: attempt.line.clone(),
        };
        let valid_until = won
            .valid_until
            .unwrap_or_else(|| Instant::now() + self.store.options.validity());
        Ok(WatchGuard::task(tokio::spawn(
            renewal.run(valid_until, reporter),
        )))
    }

    async fn confirm(&self, attempt: &mut EtcdAttempt) -> Result<(), election_core::Error> {
        let held = self.held(attempt)?;
        let r = self
            .store
            .client
            .txn(
                "confirm the term",
                Kind::Read,
                TxnRequest {
                    compare: vec![leased_by(&self.key, held.lease)],
                    success: vec![],
                    failure: vec![],
                },
            )
            .await
            .map_err(|e| self.core(e))?;
        if r.succeeded {
            Ok(())
        } else {
            Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            })
        }
    }

    async fn proclaim(
        &self,
        attempt: &mut EtcdAttempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        let held = self.held(attempt)?;
        let before = attempt.value.replace(value.clone());
        let r = self
            .store
            .client
            .txn(
                "proclaim a value",
                Kind::Write,
                TxnRequest {
                    compare: vec![leased_by(&self.key, held.lease)],
                    success: vec![put_op(&self.key, self.record(attempt), held.lease)],
                    failure: vec![],
                },
            )
            .await;
        match r {
            Ok(r) if r.succeeded => Ok(()),
            Ok(_) => {
                attempt.value = before;
                Err(election_core::Error::NotHeld {
                    name: self.name.clone(),
                })
            }
            Err(e) => {
                attempt.value = before;
                Err(self.core(e))
            }
        }
    }

    /// Passes the term to the head of the waiters' line if one waits (ADR
    /// 0119): one transaction, with the head the term's renewal task
    /// followed (no read first), and the head holds the term without a
    /// write of its own; close then revokes the term's lease, which holds
    /// nothing any more. Else revokes the term's lease:
    /// one write, which deletes exactly the keys attached to it (the
    /// election key while it is still this term's; a key of any other
    /// term is on that term's own lease), as `etcdctl lock`'s session
    /// close does; close then has nothing left to do.
    async fn release(&self, attempt: &mut EtcdAttempt) -> Result<(), election_core::Error> {
        let Some(held) = attempt.held.take() else {
            return Ok(());
        };
        let head = attempt
            .line
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(head) = head
            && self.pass_on(&held, head).await
        {
            return Ok(());
        }
        self.store
            .client
            .revoke(held.lease)
            .await
            .map_err(|e| self.core(e))?;
        if attempt.lease == Some(held.lease) {
            attempt.lease = None;
            attempt.lease_sent = None;
        }
        Ok(())
    }

    fn transfers(&self) -> bool {
        true
    }

    /// Grants the handover's lease (TTL: `window` rounded up to whole
    /// seconds; etcd may raise a TTL below its minimum, never lower one),
    /// then one transaction, if the key is still on the term's lease:
    /// delete the election key, put the handover key with that lease. The term's own lease goes at close, as after a release.
    /// `NotHeld` if the term no longer holds the key (the new lease is
    /// revoked). A failed or unanswered transaction leaves the term held
    /// here: the core closes the attempt with `End::Failed`, which revokes
    /// the term's lease (a handover that landed stays, bounded by its
    /// lease).
    async fn release_to(
        &self,
        attempt: &mut EtcdAttempt,
        successor: &Identity,
        window: Duration,
    ) -> Result<(), election_core::Error> {
        let held = self.held(attempt)?;
        let secs = (window.as_secs() + u64::from(window.subsec_nanos() > 0)).max(1);
        let ttl = i64::try_from(secs).unwrap_or(i64::MAX);
        let lease = self
            .store
            .client
            .grant(ttl)
            .await
            .map_err(|e| self.core(e))?;
        let handover = election_core::Handover::new(
            self.identity.clone(),
            successor.clone(),
            held.epoch,
            window,
        );
        let r = self
            .store
            .client
            .txn(
                "hand the election key over",
                Kind::Write,
                TxnRequest {
                    compare: vec![leased_by(&self.key, held.lease)],
                    success: vec![
                        delete_op(&self.key),
                        put_op(&self.handover, record::encode_handover(&handover), lease),
                    ],
                    failure: vec![],
                },
            )
            .await
            .map_err(|e| self.core(e))?;
        attempt.held = None;
        if r.succeeded {
            return Ok(());
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            let _ = store.client.revoke(lease).await;
        });
        Err(election_core::Error::NotHeld {
            name: self.name.clone(),
        })
    }

    fn close(&self, attempt: EtcdAttempt, end: End) {
        let Some(lease) = attempt.lease else {
            return;
        };
        // Every end: the lease is this attempt's alone, so revoking it gives
        // up exactly what the attempt may hold (its key after a drop, a
        // cancel or a failure; its waiter key) and never a successor's. A
        // lost term's lease is gone already or holds no key of the term.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: the lease runs out by itself
        };
        let store = self.store.clone();
        let name = self.name.clone();
        runtime.spawn(async move {
            if let Err(e) = store.client.revoke(lease).await {
                tracing::debug!(%name, ?end, error = %e, "the lease was not revoked; it runs out");
            }
        });
    }

    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        self.store
            .leader(&self.name)
            .await
            .map_err(|e| self.core(e))
    }
}
