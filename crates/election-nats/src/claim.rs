//! The [`NatsClaim`] of one candidate: winning, renewing, releasing.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{
    Claim, ElectionName, End, Epoch, Identity, Leader, Lease, LossReason, LossReporter, Watch, Won,
};
use futures::StreamExt;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::Error;
use crate::election::{self, Inner};
use crate::latest::{self, Latest};
use crate::value::{self, Value};

/// The term an attempt holds: its epoch and the revision last written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Holding {
    pub(crate) epoch: Epoch,
    pub(crate) revision: u64,
    pub(crate) nonce: u64,
    /// The wall-clock time of the term's first write (the winning create),
    /// carried unchanged by every later write of the term.
    pub(crate) since_unix_ms: Option<u64>,
}

impl Holding {
    /// The value every write after the win carries: the epoch, and the
    /// term's start time (not the time of this write).
    fn value(&self, identity: &Identity) -> bytes::Bytes {
        Value {
            identity: identity.clone(),
            nonce: self.nonce,
            epoch: Some(self.epoch),
            since_unix_ms: self.since_unix_ms,
        }
        .encode()
    }
}

type Shared = Arc<Mutex<Option<Holding>>>;

/// The claim of one candidate in a [`NatsElection`](crate::NatsElection).
///
/// How a term ends: resign deletes the key, expecting the revision last
/// written (so it never deletes a successor's); a drop (or a cancelled or
/// failed step that may have won) starts the same delete in the
/// background; if it cannot run, the key ages out after the TTL. Waiting
/// candidates wake on the delete at once.
#[derive(Debug)]
pub struct NatsClaim {
    inner: Arc<Inner>,
    name: ElectionName,
    identity: Identity,
    key: String,
    /// The holding of this claim's current term, for the commit-point check.
    current: StdMutex<Option<Shared>>,
    /// The revision of the delete marker of this claim's last resign: the
    /// next attempt claims the key with one update expecting it.
    last_release: StdMutex<Option<u64>>,
}

/// One attempt of a [`NatsClaim`].
pub struct NatsAttempt {
    nonce: u64,
    holding: Shared,
    /// A create may have landed (its outcome is not known to be "no").
    may_hold: bool,
    /// This attempt saw another holder's key.
    saw_foreign: bool,
    /// The last vacancy seen was a clean delete (a resign).
    clean_release: bool,
    /// The revision of the last vacancy (delete or purge marker) seen.
    vacancy_revision: Option<u64>,
    watch: Option<kv::Watch>,
}

impl std::fmt::Debug for NatsAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsAttempt")
            .field("nonce", &self.nonce)
            .field("may_hold", &self.may_hold)
            .field("saw_foreign", &self.saw_foreign)
            .field("clean_release", &self.clean_release)
            .field("watching", &self.watch.is_some())
            .finish()
    }
}

fn unix_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}

fn is_kind<K: PartialEq + Clone + std::fmt::Debug + std::fmt::Display>(
    e: &async_nats::error::Error<K>,
    kind: K,
) -> bool {
    e.kind() == kind
}

impl NatsClaim {
    pub(crate) fn new(inner: Arc<Inner>, name: ElectionName, identity: Identity) -> Self {
        NatsClaim {
            key: value::key(&name),
            inner,
            name,
            identity,
            current: StdMutex::new(None),
            last_release: StdMutex::new(None),
        }
    }

    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    /// A value of this claim; `since_unix_ms` is the term's start (the
    /// time of its first write), never the time of a renewal.
    fn value(&self, nonce: u64, epoch: Option<Epoch>, since_unix_ms: Option<u64>) -> bytes::Bytes {
        Value {
            identity: self.identity.clone(),
            nonce,
            epoch,
            since_unix_ms,
        }
        .encode()
    }

    fn timeout(&self) -> Duration {
        self.inner.options.timeout()
    }

    /// Reads the key's latest entry through the stream leader (bounded).
    async fn latest(&self) -> Result<Option<Latest>, Error> {
        latest::latest(&self.inner.kv, &self.key, self.timeout()).await
    }

    /// The commit-point check: one compare-and-set round trip (an update
    /// expecting the revision last written) that proves `lease`'s term
    /// still holds the claim now. Run it right before an irreversible
    /// write; it also renews the lease.
    ///
    /// Cancel safety: if dropped, the update may or may not land; the
    /// renewal loop resolves its revision. Failure model:
    /// [`election_core::Error::Lost`] if the term is lost,
    /// [`election_core::Error::NotHeld`] if the bucket shows another holder
    /// (or this claim holds no term with that epoch),
    /// [`election_core::Error::Unavailable`] if the coordinator cannot
    /// answer: refuse the write then.
    ///
    /// ```no_run
    /// # use election_nats::{NatsElection, NatsOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let election = NatsElection::connect("nats://127.0.0.1:4222", NatsOptions::default()).await?;
    /// let candidate = election.candidate("ledger-writer", "host-a/1")?;
    /// let term = candidate.campaign().await?;
    /// candidate.claim().confirm(&term).await?; // still ours: write now
    /// # Ok(()) }
    /// ```
    pub async fn confirm(&self, lease: &impl Lease) -> Result<(), election_core::Error> {
        if let Some(lost) = lease.loss() {
            return Err(lost.into());
        }
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let shared = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(not_held)?;
        self.confirm_holding(&shared, Some(lease.epoch())).await?;
        if lease.is_lost() {
            return Err(not_held());
        }
        Ok(())
    }

    /// One compare-and-set proving that the holding in `shared` (of term
    /// `epoch`, if given) still holds the key now.
    async fn confirm_holding(
        &self,
        shared: &Shared,
        epoch: Option<Epoch>,
    ) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let mut holding = shared.lock().await;
        let Some(h) = holding
            .as_mut()
            .filter(|h| epoch.is_none_or(|e| h.epoch == e))
        else {
            return Err(not_held());
        };
        let update = self
            .inner
            .kv
            .update(&self.key, h.value(&self.identity), h.revision);
        match tokio::time::timeout(self.timeout(), update).await {
            Ok(Ok(rev)) => {
                h.revision = rev;
                Ok(())
            }
            Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::WrongLastRevision) => Err(not_held()),
            Ok(Err(e)) => Err(self.core(Error::unavailable("confirm the lease", e))),
            Err(_) => Err(self.core(Error::OutcomeUnknown {
                after: self.timeout(),
            })),
        }
    }

    /// Won at `revision` (the epoch) by a write carrying `since_unix_ms`
    /// (the term's start, kept by every later write). Applies the failover
    /// grace if the previous holder did not resign cleanly, then refreshes
    /// the lease.
    async fn won(
        &self,
        attempt: &mut NatsAttempt,
        revision: u64,
        sent: Instant,
        since_unix_ms: Option<u64>,
    ) -> Result<Option<Won>, election_core::Error> {
        let epoch = Epoch::new(revision).ok_or_else(|| {
            self.core(Error::CorruptValue {
                key: self.key.clone(),
                detail: "revision 0".into(),
            })
        })?;
        let mut valid_from = sent;
        let mut revision = revision;
        let grace = self.inner.options.grace();
        if attempt.saw_foreign && !attempt.clean_release && !grace.is_zero() {
            tracing::info!(name = %self.name, identity = %self.identity, epoch = epoch.get(), ?grace, "failover grace before the term begins");
            tokio::time::sleep(grace).await;
            let refreshed = Instant::now();
            let update = self.inner.kv.update(
                &self.key,
                self.value(attempt.nonce, Some(epoch), since_unix_ms),
                revision,
            );
            match tokio::time::timeout(self.timeout(), update).await {
                Ok(Ok(rev)) => {
                    revision = rev;
                    valid_from = refreshed;
                }
                Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                    // Lost during the grace: not ours any more.
                    attempt.may_hold = false;
                    return Ok(None);
                }
                Ok(Err(e)) => {
                    return Err(self.core(Error::unavailable("refresh after the grace", e)));
                }
                Err(_) => {
                    return Err(self.core(Error::OutcomeUnknown {
                        after: self.timeout(),
                    }));
                }
            }
        }
        *attempt.holding.lock().await = Some(Holding {
            epoch,
            revision,
            nonce: attempt.nonce,
            since_unix_ms,
        });
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(attempt.holding.clone());
        attempt.saw_foreign = false;
        Ok(Some(Won {
            epoch,
            valid_until: Some(valid_from + self.inner.options.validity()),
        }))
    }

    /// After a create whose outcome is unknown: is the key ours?
    async fn resolve_unknown(
        &self,
        attempt: &mut NatsAttempt,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        match self.latest().await {
            Ok(Some(e)) if e.is_attempts(&self.key, attempt.nonce) => {
                // The start time the landed create carries.
                let since = Value::decode(&self.key, &e.value)
                    .ok()
                    .and_then(|v| v.since_unix_ms);
                self.won(attempt, e.revision, sent, since).await
            }
            Ok(_) => {
                attempt.may_hold = false;
                Ok(None)
            }
            Err(_) => Err(self.core(Error::OutcomeUnknown {
                after: self.timeout(),
            })),
        }
    }
}

impl Claim for NatsClaim {
    type Attempt = NatsAttempt;

    fn name(&self) -> &ElectionName {
        &self.name
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn open(&self) -> Result<NatsAttempt, election_core::Error> {
        Ok(NatsAttempt {
            nonce: election_core::attempt_nonce(),
            holding: Arc::new(Mutex::new(None)),
            may_hold: false,
            saw_foreign: false,
            clean_release: false,
            vacancy_revision: *self.last_release.lock().unwrap_or_else(|p| p.into_inner()),
            watch: None,
        })
    }

    /// An atomic `create` of the key; its revision is the epoch (rule 1).
    /// A create that times out is resolved by reading the key back (the
    /// value carries this attempt's nonce).
    async fn try_claim(
        &self,
        attempt: &mut NatsAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        let sent = Instant::now();
        // Expect the revision of the last vacancy seen (0: no entry at all).
        // The server checks it: no read of a possibly stale replica decides.
        let mut expected = attempt.vacancy_revision.unwrap_or(0);
        for _ in 0..3 {
            attempt.may_hold = true;
            // The term's start, if this create wins: every later write of
            // the term carries the same time.
            let since = unix_ms();
            let create =
                self.inner
                    .kv
                    .update(&self.key, self.value(attempt.nonce, None, since), expected);
            match tokio::time::timeout(self.timeout(), create).await {
                Ok(Ok(revision)) => return self.won(attempt, revision, sent, since).await,
                Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                    attempt.may_hold = false;
                }
                Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::InvalidKey) => {
                    attempt.may_hold = false;
                    return Err(self.core(Error::CorruptValue {
                        key: self.key.clone(),
                        detail: e.to_string(),
                    }));
                }
                Ok(Err(_)) | Err(_) => return self.resolve_unknown(attempt, sent).await,
            }
            // Someone wrote since: read the key through the stream leader.
            let latest = self.latest().await.map_err(|e| self.core(e))?;
            match latest {
                None => expected = 0,
                Some(l) if l.operation != kv::Operation::Put => {
                    attempt.vacancy_revision = Some(l.revision);
                    attempt.clean_release = l.operation == kv::Operation::Delete;
                    expected = l.revision;
                }
                Some(l) => {
                    let v = Value::decode(&self.key, &l.value).map_err(|e| self.core(e))?;
                    if v.nonce == attempt.nonce {
                        attempt.may_hold = true;
                        return self.won(attempt, l.revision, sent, v.since_unix_ms).await;
                    }
                    if v.identity == self.identity && self.inner.options.adopts_own() {
                        // A restarted process adopts its own key, with a new,
                        // higher epoch: the revision of this update.
                        expected = l.revision;
                        continue;
                    }
                    attempt.saw_foreign = true;
                    attempt.clean_release = false;
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }

    /// Watches the key and returns the moment it is deleted (resign) or
    /// purged (TTL marker); the poll interval is the backstop, also for
    /// servers without TTL markers.
    async fn wait(
        &self,
        attempt: &mut NatsAttempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        if attempt.watch.is_none() {
            attempt.watch = self.inner.kv.watch(&self.key).await.ok();
        }
        let Some(watch) = attempt.watch.as_mut() else {
            tokio::time::sleep(poll_interval).await;
            return Ok(());
        };
        let vacancy = async {
            loop {
                match watch.next().await {
                    Some(Ok(e)) if e.operation == kv::Operation::Delete => {
                        return Some((true, e.revision));
                    }
                    Some(Ok(e)) if e.operation == kv::Operation::Purge => {
                        return Some((false, e.revision));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => return None,
                }
            }
        };
        tokio::select! {
            v = vacancy => match v {
                Some((clean, revision)) => {
                    attempt.clean_release = clean;
                    attempt.vacancy_revision = Some(revision);
                }
                None => attempt.watch = None,
            },
            () = tokio::time::sleep(poll_interval) => {}
        }
        Ok(())
    }

    /// Starts the renewal task.
    fn watch(
        &self,
        attempt: &mut NatsAttempt,
        won: Won,
        reporter: LossReporter,
    ) -> Result<Watch, election_core::Error> {
        let valid_until = won
            .valid_until
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })?;
        let renewal = Renewal {
            inner: self.inner.clone(),
            name: self.name.clone(),
            key: self.key.clone(),
            identity: self.identity.clone(),
            nonce: attempt.nonce,
            holding: attempt.holding.clone(),
        };
        Ok(Watch::task(tokio::spawn(
            renewal.run(valid_until, reporter),
        )))
    }

    /// Deletes the key, expecting the revision last written.
    /// One compare-and-set (an update expecting the revision last
    /// written), as [`NatsClaim::confirm`].
    async fn confirm(&self, attempt: &mut NatsAttempt) -> Result<(), election_core::Error> {
        self.confirm_holding(&attempt.holding, None).await
    }

    async fn release(&self, attempt: &mut NatsAttempt) -> Result<(), election_core::Error> {
        let held = attempt.holding.lock().await.take();
        let Some(h) = held else {
            return Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            });
        };
        // A delete marker published by hand (what `delete_expect_revision`
        // sends), so its acknowledgement tells the marker's revision.
        let kv = &self.inner.kv;
        let subject = format!(
            "{}{}",
            kv.put_prefix.as_deref().unwrap_or(&kv.prefix),
            self.key
        );
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("KV-Operation", "DEL");
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            h.revision.to_string().as_str(),
        );
        let js = &self.inner.js;
        let delete = async move {
            js.publish_with_headers(subject, headers, bytes::Bytes::new())
                .await?
                .await
        };
        match tokio::time::timeout(self.timeout(), delete).await {
            Ok(Ok(ack)) => {
                attempt.may_hold = false;
                *self.last_release.lock().unwrap_or_else(|p| p.into_inner()) = Some(ack.sequence);
                Ok(())
            }
            Ok(Err(e))
                if e.kind()
                    == async_nats::jetstream::context::PublishErrorKind::WrongLastSequence =>
            {
                attempt.may_hold = false;
                Err(election_core::Error::NotHeld {
                    name: self.name.clone(),
                })
            }
            Ok(Err(e)) => {
                *attempt.holding.lock().await = Some(h);
                Err(self.core(Error::unavailable("delete the lease", e)))
            }
            Err(_) => {
                *attempt.holding.lock().await = Some(h);
                Err(self.core(Error::OutcomeUnknown {
                    after: self.timeout(),
                }))
            }
        }
    }

    /// After a drop, a cancelled or a failed step that may have won:
    /// deletes the key in the background if it is still this attempt's.
    fn close(&self, attempt: NatsAttempt, end: End) {
        {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if current
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &attempt.holding))
            {
                *current = None;
            }
        }
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if !(attempt.may_hold && gives_up) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(name = %self.name, "no runtime to release on; the lease ages out after its TTL");
            return;
        };
        let (kv, key, name, timeout) = (
            self.inner.kv.clone(),
            self.key.clone(),
            self.name.clone(),
            self.timeout(),
        );
        let (nonce, holding) = (attempt.nonce, attempt.holding.clone());
        rt.spawn(async move {
            let known = holding.lock().await.map(|h| h.revision);
            let revision = match known {
                Some(r) => Some(r),
                None => match latest::latest(&kv, &key, timeout).await {
                    Ok(Some(e)) if e.is_attempts(&key, nonce) => Some(e.revision),
                    _ => None,
                },
            };
            if let Some(rev) = revision
                && let Err(e) = kv.delete_expect_revision(&key, Some(rev)).await
            {
                tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
            }
        });
    }

    /// The holder and epoch as the bucket shows them.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        election::leader(&self.inner, &self.name)
            .await
            .map_err(|e| self.core(e))
    }
}

/// The holder's renewal loop.
struct Renewal {
    inner: Arc<Inner>,
    name: ElectionName,
    key: String,
    identity: Identity,
    nonce: u64,
    holding: Shared,
}

impl Renewal {
    /// Renews every renew interval, each update expecting the revision last
    /// written; retries until the validity deadline; reports the loss at
    /// the deadline or when the bucket shows another holder.
    async fn run(self, mut valid_until: Instant, reporter: LossReporter) {
        let options = &self.inner.options;
        let retry = (options.renew_every() / 4).max(Duration::from_millis(10));
        let mut next = valid_until - options.validity() + options.renew_every();
        loop {
            tokio::time::sleep_until(next.min(valid_until)).await;
            let sent = Instant::now();
            if sent >= valid_until {
                reporter.lose(LossReason::Expired);
                self.holding.lock().await.take();
                return;
            }
            let mut holding = self.holding.lock().await;
            let Some(h) = holding.as_mut() else { return };
            let budget = options.timeout().min(valid_until - sent);
            // The same value every time: the term's epoch and start time.
            let update = self
                .inner
                .kv
                .update(&self.key, h.value(&self.identity), h.revision);
            match tokio::time::timeout(budget, update).await {
                Ok(Ok(rev)) => {
                    h.revision = rev;
                    valid_until = sent + options.validity();
                    reporter.renewed(valid_until);
                    next = sent + options.renew_every();
                }
                Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                    // An earlier update whose answer was lost may have
                    // landed: if the key still carries our nonce, catch up.
                    match latest::latest(&self.inner.kv, &self.key, budget).await {
                        Ok(Some(e)) if e.is_attempts(&self.key, self.nonce) => {
                            h.revision = e.revision;
                            next = Instant::now();
                        }
                        Ok(_) => {
                            holding.take();
                            reporter.lose(LossReason::Revoked {
                                detail: "the bucket shows another holder, or none".into(),
                            });
                            return;
                        }
                        _ => next = Instant::now() + retry,
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(name = %self.name, error = %e, "renewal failed; retrying until the lease runs out");
                    next = Instant::now() + retry;
                }
                Err(_) => {
                    tracing::warn!(name = %self.name, "renewal timed out; retrying until the lease runs out");
                    next = Instant::now() + retry;
                }
            }
        }
    }
}
