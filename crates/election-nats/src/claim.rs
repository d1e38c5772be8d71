//! [`NatsClaim`]: the claim of one candidate, and its [`NatsAttempt`]:
//! winning, waiting (a watch of the key, or the poll), confirming,
//! releasing; the renewal loop is in `renewal.rs`.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{
    Claim, ElectionName, End, Identity, Leader, LeaderValue, TermReporter, WatchGuard, Won,
};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::{Error, is_kind};
use crate::renewal::{HeldTerm, Renewal, Shared};
use crate::requests::Requests;
use crate::store::bucket;
use crate::store::connection::Connection;
use crate::store::exact_read::ExactEntry;
use crate::store::key_watch::{KeyWatch, Seen, watch_key};
use crate::store::queue::{self, Waiter};
use crate::store::record::{self, ClaimRecord};
use crate::store::settled::settled;

/// A vacancy of the key an attempt saw: a delete or purge marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Vacancy {
    /// The marker's revision: the next claim expects it.
    revision: u64,
    /// A delete marker of a clean release (a resign): the previous holder
    /// stopped, so no failover grace. A purge (the TTL marker of an
    /// expiry) or a delete this process made of a write it could not use
    /// is not clean.
    clean: bool,
    /// The bucket incarnation this process last knew of before it saw (or
    /// wrote) the marker: the revision is expected only by a claim whose
    /// base, read before its write, is this one. A recreated bucket
    /// restarts its revisions at 1, so the same revision there may be a
    /// live holder's entry (the write's incarnation check proves only
    /// that the write landed in its base, not where the marker was).
    base: u64,
}

/// A handover's record (ADR 0112) an attempt saw reserve the name for
/// another candidate: its revision, and when this attempt first saw it.
/// The reservation ends for this attempt `window` after that, on its own
/// monotonic clock: never before `window` after the record was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reserved {
    revision: u64,
    seen: Instant,
    window: Duration,
    /// The attempt's key watch delivered it: a purge the same watch
    /// delivers next is its removal at the end of its window.
    watched: bool,
    /// The bucket incarnation this process knew of before it first saw
    /// the handover: a vacancy over it carries it ([`Vacancy::base`]).
    base: u64,
}

impl Reserved {
    /// When the reservation ends for the attempt that saw it.
    fn until(&self) -> Instant {
        self.seen + self.window
    }
}

/// Notes a sighting of the handover at `revision` reserving the name for
/// `window`: the first sighting of that revision counts, a later one of
/// the same revision keeps it.
fn sighted(
    reserved: &mut Option<Reserved>,
    revision: u64,
    window: Duration,
    base: u64,
) -> Reserved {
    match *reserved {
        Some(r) if r.revision == revision && r.base == base => r,
        _ => {
            let r = Reserved {
                revision,
                seen: Instant::now(),
                window,
                watched: false,
                base,
            };
            *reserved = Some(r);
            r
        }
    }
}

/// How a won write becomes a term.
#[derive(Clone, Copy, Debug)]
struct Begin {
    /// Wait out the failover grace first: the vacancy was not a clean
    /// release seen by this process (an expiry, or of unknown origin).
    grace: bool,
    /// Refresh the key (an update expecting the won revision) and count
    /// validity from that refresh: the win's own send instant is not
    /// known (an earlier create of this attempt that landed late).
    refresh: bool,
}

/// A write that landed: its revision and the bytes it wrote.
#[derive(Clone, Debug)]
struct Landed {
    revision: u64,
    value: bytes::Bytes,
}

/// The claim of one candidate in a [`NatsElection`](crate::NatsElection).
///
/// How a term ends: resign deletes the key, expecting the revision last
/// written (so it never deletes a successor's); a drop (or a cancelled or
/// failed step that may have won) starts the same delete in the
/// background; if it cannot run, the key ages out after the TTL. Waiting
/// candidates wake on the delete at once.
#[derive(Debug)]
pub struct NatsClaim {
    conn: Arc<Connection>,
    /// The transfer requests of the election handle's terms (one watch).
    requests: Arc<Requests>,
    name: ElectionName,
    identity: Identity,
    key: String,
    /// The delete marker of this claim's last resign: the next attempt
    /// claims the key with one update expecting it (in its incarnation).
    last_release: StdMutex<Option<Vacancy>>,
}

/// One attempt of a [`NatsClaim`].
pub struct NatsAttempt {
    nonce: u64,
    holding: Shared,
    /// A create may have landed (its outcome is not known to be "no").
    may_hold: bool,
    /// The last vacancy (delete or purge marker) seen; `None`: none seen,
    /// or the key was last seen held (the next claim expects "no entry").
    vacancy: Option<Vacancy>,
    /// The revision of a live key of this claim's own identity that a
    /// restarted process adopts ([`NatsOptions::adopt_own`](crate::NatsOptions::adopt_own)).
    adopting: Option<u64>,
    /// A won write had to be given up (it may belong to another bucket
    /// incarnation): claim again at once.
    retry: bool,
    watch: Option<KeyWatch>,
    /// This attempt's place in the waiters' queue (ADR 0106), from its
    /// first wait on: only the head watches the key and claims it.
    queue: Option<Queued>,
    /// The handover reserving the name for another candidate that this
    /// attempt saw last (ADR 0112).
    reserved: Option<Reserved>,
}

/// A waiting attempt in the queue: its waiter key, and what it watches.
struct Queued {
    waiter: Waiter,
    /// The watch of the waiter key just ahead; `None`: list the queue
    /// again.
    ahead: Option<KeyWatch>,
    /// The place this attempt had when it chose `ahead` (its key created
    /// again after a pause has another).
    listed_at: u64,
    /// First in the queue: watches the election key and claims it.
    head: bool,
    /// The election key's vacancy the backstop's last look saw (its
    /// marker's revision; 0: no entry).
    backstop: Option<u64>,
}

/// What waiting in line ended with.
enum InLine {
    /// First in the queue now.
    Head,
    /// The backstop saw the election key vacant on two looks a poll
    /// interval apart: the head did not claim it (dead, or cut off).
    Vacant(Option<Vacancy>),
    /// Still waiting; nothing to do but look again.
    Waiting,
    /// The queue cannot be read now: let a claim find out why.
    Unreadable,
}

impl std::fmt::Debug for NatsAttempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsAttempt")
            .field("nonce", &self.nonce)
            .field("may_hold", &self.may_hold)
            .field("vacancy", &self.vacancy)
            .field("watching", &self.watch.is_some())
            .field("queued", &self.queue.as_ref().map(|q| &q.waiter.key))
            .finish()
    }
}

fn unix_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}

impl NatsClaim {
    pub(crate) fn new(
        conn: Arc<Connection>,
        requests: Arc<Requests>,
        name: ElectionName,
        identity: Identity,
    ) -> Self {
        NatsClaim {
            key: record::key(&name),
            conn,
            requests,
            name,
            identity,
            last_release: StdMutex::new(None),
        }
    }

    fn core(&self, e: Error) -> election_core::Error {
        e.into_core(&self.name)
    }

    /// A value of this claim; `since_unix_ms` is the term's start (the
    /// time of its first write), never the time of a renewal.
    /// With `pending`, the value says its writer waits out the failover
    /// grace before its term begins ([`record::PENDING`]).
    fn value(
        &self,
        nonce: u64,
        base: u64,
        since_unix_ms: Option<u64>,
        pending: bool,
    ) -> bytes::Bytes {
        let encoded = ClaimRecord {
            identity: self.identity.clone(),
            nonce,
            epoch: None,
            since_unix_ms,
            base: Some(base),
            value: None,
        }
        .encode();
        if !pending {
            return encoded;
        }
        let mut bytes = encoded.to_vec();
        bytes.extend_from_slice(record::PENDING.as_bytes());
        bytes.into()
    }

    /// Publishes a delete marker of the key expecting `revision` (what
    /// `delete_expect_revision` sends), so the acknowledgement tells the
    /// marker's revision: `Ok(Some(marker))` if it landed, `Ok(None)` if
    /// the key had moved on (not ours). With `purge`, the marker is a purge
    /// instead, which candidates do not take for a clean release (they
    /// wait the failover grace): for a write given up because the vacancy
    /// it replaced is of unknown origin.
    async fn delete_marker(&self, revision: u64, purge: bool) -> Result<Option<u64>, Error> {
        let kv = &self.conn.kv;
        let subject = format!(
            "{}{}",
            kv.put_prefix.as_deref().unwrap_or(&kv.prefix),
            self.key
        );
        let mut headers = async_nats::HeaderMap::new();
        if purge {
            headers.insert("KV-Operation", "PURGE");
            headers.insert("Nats-Rollup", "sub");
        } else {
            headers.insert("KV-Operation", "DEL");
        }
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            revision.to_string().as_str(),
        );
        let js = &self.conn.js;
        let delete = settled(|| {
            let (subject, headers) = (subject.clone(), headers.clone());
            async move {
                js.publish_with_headers(subject, headers, bytes::Bytes::new())
                    .await?
                    .await
            }
        });
        match tokio::time::timeout(self.timeout(), delete).await {
            Ok(Ok(ack)) => Ok(Some(ack.sequence)),
            Ok(Err(e))
                if crate::error::cas_refused(
                    &e,
                    async_nats::jetstream::context::PublishErrorKind::WrongLastSequence,
                ) =>
            {
                Ok(None)
            }
            Ok(Err(e)) => Err(Error::unavailable("delete the lease", e)),
            Err(_) => Err(Error::OutcomeUnknown {
                after: self.timeout(),
            }),
        }
    }

    fn timeout(&self) -> Duration {
        self.conn.options.timeout()
    }

    /// Writes a handover's record `value` over the term's record, expecting
    /// `revision` (a compare-and-set, as a renewal), with the per-key TTL
    /// `ttl` (the `Nats-TTL` header: a duration, or `never`) if given:
    /// `Ok(Some(revision written))`, `Ok(None)` if the key's latest entry
    /// is at another revision.
    async fn write_handover(
        &self,
        value: bytes::Bytes,
        revision: u64,
        ttl: Option<&str>,
    ) -> Result<Option<u64>, Error> {
        let kv = &self.conn.kv;
        let subject = format!(
            "{}{}",
            kv.put_prefix.as_deref().unwrap_or(&kv.prefix),
            self.key
        );
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            revision.to_string().as_str(),
        );
        if let Some(ttl) = ttl {
            headers.insert("Nats-TTL", ttl);
        }
        let js = &self.conn.js;
        let write = settled(|| {
            let (subject, headers, value) = (subject.clone(), headers.clone(), value.clone());
            async move {
                js.publish_with_headers(subject, headers, value)
                    .await?
                    .await
            }
        });
        match tokio::time::timeout(self.timeout(), write).await {
            Ok(Ok(ack)) => Ok(Some(ack.sequence)),
            Ok(Err(e))
                if crate::error::cas_refused(
                    &e,
                    async_nats::jetstream::context::PublishErrorKind::WrongLastSequence,
                ) =>
            {
                Ok(None)
            }
            Ok(Err(e)) => Err(Error::unavailable("hand the lease over", e)),
            Err(_) => Err(Error::OutcomeUnknown {
                after: self.timeout(),
            }),
        }
    }

    /// Runs `write` (a compare-and-set of the term `h`'s key expecting a
    /// revision: `Ok(Some(_))` done, `Ok(None)` refused) expecting the
    /// revision last written. If refused while the key's latest entry is
    /// still the term's own record (a write of its own that landed
    /// unanswered: a renewal cut off by its attempt timeout, an earlier
    /// confirm that timed out), catches up on that entry's revision and
    /// runs `write` once more. `Ok(None)`: refused, the key moved on.
    async fn catching_up<T, F>(
        &self,
        h: &mut HeldTerm,
        write: impl Fn(u64) -> F,
    ) -> Result<Option<T>, Error>
    where
        F: Future<Output = Result<Option<T>, Error>>,
    {
        if let Some(done) = write(h.revision).await? {
            return Ok(Some(done));
        }
        match self.conn.own_revision(&self.key, h.nonce).await? {
            Some(revision) => {
                h.revision = revision;
                write(revision).await
            }
            None => Ok(None),
        }
    }

    /// One update of the term's record `value` expecting `revision`,
    /// bounded by the request timeout: `Ok(Some(revision written))`, or
    /// `Ok(None)` if the key's latest entry is at another revision.
    async fn update(&self, value: bytes::Bytes, revision: u64) -> Result<Option<u64>, Error> {
        let update = settled(|| self.conn.kv.update(&self.key, value.clone(), revision));
        match tokio::time::timeout(self.timeout(), update).await {
            Ok(Ok(rev)) => Ok(Some(rev)),
            Ok(Err(e)) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                Ok(None)
            }
            Ok(Err(e)) => Err(Error::unavailable("confirm the lease", e)),
            Err(_) => Err(Error::OutcomeUnknown {
                after: self.timeout(),
            }),
        }
    }

    /// Opens a [`KeyWatch`] of the key: subscribes an inbox, creates a push
    /// consumer of the key's new entries delivering to it, then reads the
    /// bucket's incarnation: if it is the one read before the consumer was
    /// created, the consumer belongs to it. `None` if the watch cannot be
    /// made (the claim polls instead).
    async fn key_watch(&self) -> Option<KeyWatch> {
        self.watch_of(&self.key, true).await
    }

    /// A [`KeyWatch`] of `key`; with `prove`, it reads the bucket's
    /// incarnation after the consumer is made (see [`key_watch`](Self::key_watch)).
    async fn watch_of(&self, key: &str, prove: bool) -> Option<KeyWatch> {
        watch_key(&self.conn, key, prove).await
    }

    /// The incarnation check after a write won at `revision` with the base
    /// `base` (rule 1): `Ok(None)` if the write is of the incarnation
    /// `base`, else why not (see [`Connection::check_incarnation`]).
    ///
    /// The stream info read ([`Connection::check_incarnation`]) races the
    /// attempt's watch: a consumer known to belong to the incarnation
    /// `base` that delivers the write at `revision`, with the bytes this
    /// claim wrote (this attempt's nonce, and a base or epoch no other
    /// write of the attempt carries with them), proves the write is of
    /// that incarnation too (a consumer never outlives its stream, and is
    /// never moved to another), so the term need not wait for the read.
    /// The bucket's max age is then checked by the term's first renewal,
    /// one renew interval later, as between any two renewals (ADR 0030).
    async fn incarnation_of_write(
        &self,
        attempt: &mut NatsAttempt,
        revision: u64,
        written: &[u8],
        base: u64,
    ) -> Result<Option<String>, Error> {
        let check = self.conn.check_incarnation(base);
        let Some(watch) = attempt
            .watch
            .as_mut()
            .filter(|w| w.incarnation == Some(base))
        else {
            return check.await;
        };
        tokio::pin!(check);
        let delivered = tokio::select! {
            biased;
            checked = &mut check => return checked,
            delivered = watch.delivers(revision, written) => delivered,
        };
        if delivered { Ok(None) } else { check.await }
    }

    /// Reads the key's latest entry through the stream leader (bounded).
    async fn read_exact(&self) -> Result<Option<ExactEntry>, Error> {
        self.conn.read_exact(&self.key).await
    }

    /// With no bucket named: refuses a name whose key is live in another
    /// elections bucket of the server, i.e. the same election run with
    /// another TTL (ADR 0064). Best effort: two candidates with different
    /// TTLs that both find the name free at once are not caught.
    async fn live_elsewhere(&self) -> Result<(), Error> {
        for (other, age) in &self.conn.others {
            let entry = tokio::time::timeout(self.timeout(), other.entry(self.key.as_str()))
                .await
                .map_err(|_| Error::OutcomeUnknown {
                    after: self.timeout(),
                })?
                .map_err(|e| Error::unavailable("read another elections bucket", e))?;
            if entry.is_some_and(|e| e.operation == kv::Operation::Put) {
                return Err(Error::BucketMismatch {
                    bucket: other.name.clone(),
                    found: format!("max age {age:?}, where {} is held now", self.name),
                    wanted: format!("max age {:?}", self.conn.options.ttl()),
                });
            }
        }
        Ok(())
    }

    /// Won at `revision` in the incarnation `base` (the epoch is
    /// `base + revision`) by a write carrying `since_unix_ms` (the term's
    /// start, kept by every later write), sent at `sent`.
    ///
    /// Waits out the failover grace if `begin.grace` and refreshes the key
    /// after it (or at once if `begin.refresh`), counting validity from
    /// the refresh; then checks the bucket is still the incarnation `base`
    /// (rule 1: the epoch's base and the winning revision must belong to
    /// the same incarnation). If it is not, no term begins and
    /// `attempt.retry` is set: a write that is still the key's latest
    /// entry is claimed again over in place (the name never vacant), any
    /// other is deleted first.
    async fn won(
        &self,
        attempt: &mut NatsAttempt,
        landed: Landed,
        base: u64,
        sent: Instant,
        since_unix_ms: Option<u64>,
        begin: Begin,
    ) -> Result<Option<Won>, election_core::Error> {
        let Landed {
            revision,
            value: mut written,
        } = landed;
        let epoch = bucket::epoch_at(base, revision).map_err(|e| self.core(e))?;
        let mut valid_from = sent;
        let mut revision = revision;
        let grace = self.conn.options.grace();
        let mut refresh = begin.refresh;
        if begin.grace && !grace.is_zero() {
            tracing::info!(name = %self.name, identity = %self.identity, epoch = epoch.get(), ?grace, "failover grace before the term begins");
            tokio::time::sleep(grace).await;
            refresh = true;
        }
        let holding = HeldTerm {
            epoch,
            revision,
            nonce: attempt.nonce,
            base,
            since_unix_ms,
            value: None,
        };
        if refresh {
            let refreshed = Instant::now();
            let value = holding.value(&self.identity);
            let update = settled(|| self.conn.kv.update(&self.key, value.clone(), revision));
            match tokio::time::timeout(self.timeout(), update).await {
                Ok(Ok(rev)) => {
                    revision = rev;
                    written = value;
                    valid_from = refreshed;
                }
                Ok(Err(e))
                    if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) =>
                {
                    // Lost during the grace: not ours any more.
                    attempt.may_hold = false;
                    return Ok(None);
                }
                Ok(Err(e)) => {
                    return Err(self.core(Error::unavailable("refresh the won lease", e)));
                }
                Err(_) => {
                    return Err(self.core(Error::OutcomeUnknown {
                        after: self.timeout(),
                    }));
                }
            }
        }
        let checked = self
            .incarnation_of_write(attempt, revision, &written, base)
            .await
            .map_err(|e| self.core(e))?;
        // The watch has done its work; a term's own renewals would only
        // pile up in it.
        attempt.watch = None;
        if let Some(why) = checked {
            tracing::warn!(name = %self.name, identity = %self.identity, revision, %why, "a won write is not used");
            // Recreated: the write may belong to another incarnation than
            // its base; delete it (expecting its revision) and claim again.
            // Else the max age is below the TTL: a configuration error.
            let known = self.conn.base();
            let recreated = known != base;
            if recreated && self.own_latest(attempt.nonce, revision).await {
                // The write is the latest entry of the incarnation known
                // now (it carries this attempt's nonce), only its base
                // was stale: claim again over it, in place. The name is
                // never vacant meanwhile (a handover's successor keeps
                // it), and the new write's epoch is of this incarnation.
                attempt.vacancy = Some(Vacancy {
                    revision,
                    clean: true,
                    base: known,
                });
                attempt.retry = true;
                return Ok(None);
            }
            return match self.delete_marker(revision, true).await {
                Ok(marker) if recreated => {
                    attempt.may_hold = false;
                    attempt.vacancy = marker.map(|revision| Vacancy {
                        revision,
                        clean: false,
                        base: known,
                    });
                    attempt.retry = marker.is_some();
                    Ok(None)
                }
                Ok(_) => {
                    attempt.may_hold = false;
                    Err(self.core(Error::BucketMismatch {
                        bucket: self.conn.options.bucket_name().to_owned(),
                        found: why,
                        wanted: format!("max age {:?}", self.conn.options.ttl()),
                    }))
                }
                Err(e) => Err(self.core(e)),
            };
        }
        *attempt.holding.lock().await = Some(HeldTerm {
            revision,
            ..holding
        });
        attempt.adopting = None;
        // Out of the queue: the next waiter moves up.
        if let Some(q) = attempt.queue.take() {
            q.waiter.remove();
        }
        Ok(Some(Won {
            epoch,
            valid_until: Some(valid_from + self.conn.options.validity()),
        }))
    }

    /// Whether the key's latest entry is this attempt's (`nonce`) write at
    /// `revision`, read through the stream leader: `false` if not, or if
    /// it cannot be read.
    async fn own_latest(&self, nonce: u64, revision: u64) -> bool {
        matches!(
            self.read_exact().await,
            Ok(Some(e)) if e.revision == revision && e.is_attempts(&self.key, nonce)
        )
    }

    /// An earlier write of this attempt (`entry`, carrying its nonce)
    /// landed although its answer was lost: adopt it, but only after a
    /// refresh, counting validity from the refresh's send instant (the
    /// server ages the key from when it stored it, which may be long
    /// before this call), and after the failover grace (which vacancy it
    /// replaced is not known).
    async fn adopt_landed(
        &self,
        attempt: &mut NatsAttempt,
        entry: &ExactEntry,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        let v = ClaimRecord::decode(&self.key, &entry.value).map_err(|e| self.core(e))?;
        let base = v.base.unwrap_or_else(|| self.conn.base());
        let begin = Begin {
            grace: true,
            refresh: true,
        };
        attempt.may_hold = true;
        self.won(
            attempt,
            Landed {
                revision: entry.revision,
                value: entry.value.clone(),
            },
            base,
            sent,
            v.since_unix_ms,
            begin,
        )
        .await
    }

    /// After a create whose outcome is unknown: is the key ours?
    async fn resolve_unknown(
        &self,
        attempt: &mut NatsAttempt,
        sent: Instant,
    ) -> Result<Option<Won>, election_core::Error> {
        match self.read_exact().await {
            Ok(Some(e)) if e.is_attempts(&self.key, attempt.nonce) => {
                self.adopt_landed(attempt, &e, sent).await
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

    /// Whether a delete marker at `revision` is a clean release: not a
    /// delete this process made of a write it could not use (`known`).
    fn clean_delete(&self, known: Option<Vacancy>, revision: u64) -> bool {
        known.is_none_or(|v| v.revision != revision || v.clean)
    }

    /// Whether the key's live entry `value` at `revision` is a handover's
    /// record this attempt may claim over (ADR 0112): `None` if it is no
    /// handover; `Some(true)` if it names this candidate, or this attempt
    /// has seen it for its window (the vacancy to expect is then set,
    /// clean); `Some(false)` while it reserves the name for another (the
    /// sighting is noted). `base`: the bucket incarnation known before the
    /// entry was read.
    fn handover_claimable(
        &self,
        attempt: &mut NatsAttempt,
        value: &[u8],
        revision: u64,
        base: u64,
    ) -> Result<Option<bool>, Error> {
        let Some((to, window)) = record::handover_in(&self.key, value)? else {
            attempt.reserved = None;
            return Ok(None);
        };
        let mut reserved = sighted(&mut attempt.reserved, revision, window, base);
        // A watch made before this read delivers every entry after it.
        if attempt.watch.is_some() {
            reserved.watched = true;
            attempt.reserved = Some(reserved);
        }
        let claimable = to == self.identity || Instant::now() >= reserved.until();
        if claimable {
            attempt.vacancy = Some(Vacancy {
                revision,
                clean: true,
                base,
            });
        }
        Ok(Some(claimable))
    }

    /// Whether the marker at `marker` (the key's latest entry) is the
    /// server's removal of the handover this attempt's watch delivered
    /// last, at the end of its window: the watch delivers it next (after
    /// entries up to the handover's revision), within the request timeout.
    /// Then the vacancy is clean: its holder ended its term by the
    /// handover. (The attempt's own clock and the server's removal end a
    /// window at about the same moment; this tells the two apart.)
    async fn removed_handover(&self, attempt: &mut NatsAttempt, marker: u64) -> bool {
        let Some(reserved) = attempt.reserved.filter(|r| r.watched) else {
            return false;
        };
        let Some(watch) = attempt.watch.as_mut() else {
            return false;
        };
        let next = async {
            loop {
                match watch.next().await {
                    Seen::Entry(_, r, _) | Seen::AgedOut(r) if r <= reserved.revision => continue,
                    // Only the server's marker: a client's purge may have
                    // rolled up a term that followed the handover.
                    Seen::AgedOut(r) => return r == marker,
                    Seen::Entry(..) | Seen::Ended => return false,
                }
            }
        };
        let removed = tokio::time::timeout(self.timeout(), next)
            .await
            .unwrap_or(false);
        if !removed {
            // The watch went past entries a later wait would need.
            attempt.watch = None;
            if let Some(r) = attempt.reserved.as_mut() {
                r.watched = false;
            }
        }
        removed
    }

    /// After a wait: if the reservation this attempt saw has ended on its
    /// clock, the vacancy to claim over is its handover (clean).
    fn reservation_ended(&self, attempt: &mut NatsAttempt) -> bool {
        match attempt.reserved {
            Some(r) if Instant::now() >= r.until() => {
                attempt.vacancy = Some(Vacancy {
                    revision: r.revision,
                    clean: true,
                    base: r.base,
                });
                true
            }
            _ => false,
        }
    }

    /// Waits behind another waiter (see [`wait`](Claim::wait)) for up to
    /// `poll_interval`: lists the queue when the waiter ahead is not known,
    /// watches its key, and at the end of the interval looks at the
    /// election key once (the backstop).
    async fn in_line(&self, q: &mut Queued, poll_interval: Duration) -> InLine {
        let deadline = Instant::now() + poll_interval;
        loop {
            let mine = q.waiter.place();
            if q.ahead.is_none() || q.listed_at != mine {
                q.ahead = None;
                let Ok(waiters) = queue::list(&self.conn, &self.key).await else {
                    return InLine::Unreadable;
                };
                let Some(ahead) = queue::predecessor(&waiters, mine) else {
                    return InLine::Head;
                };
                let Some(watch) = self.watch_of(ahead, false).await else {
                    return InLine::Unreadable;
                };
                // The watch first, then one exact read: a key gone before
                // the watch was made is seen by the read.
                match self.conn.read_exact(ahead).await {
                    Ok(Some(l)) if l.operation == kv::Operation::Put => {
                        q.ahead = Some(watch);
                        q.listed_at = mine;
                    }
                    Ok(_) => continue,
                    Err(_) => return InLine::Unreadable,
                }
            }
            let Some(watch) = q.ahead.as_mut() else {
                continue;
            };
            tokio::select! {
                seen = watch.next() => match seen {
                    // A renewal of the waiter ahead.
                    Seen::Entry(kv::Operation::Put, ..) => {}
                    Seen::Entry(..) | Seen::AgedOut(_) | Seen::Ended => q.ahead = None,
                },
                () = tokio::time::sleep_until(deadline) => {
                    let known = self.conn.base();
                    return match self.read_exact().await {
                        // A handover to this candidate: it claims at once
                        // (the head waits the reservation out).
                        Ok(Some(l))
                            if l.operation == kv::Operation::Put
                                && record::handover_in(&self.key, &l.value)
                                    .ok()
                                    .flatten()
                                    .is_some_and(|(to, _)| to == self.identity) =>
                        {
                            q.backstop = None;
                            InLine::Vacant(Some(Vacancy {
                                revision: l.revision,
                                clean: true,
                                base: known,
                            }))
                        }
                        Ok(Some(l)) if l.operation == kv::Operation::Put => {
                            q.backstop = None;
                            InLine::Waiting
                        }
                        Ok(found) => {
                            let revision = found.as_ref().map_or(0, |l| l.revision);
                            if q.backstop == Some(revision) {
                                q.backstop = None;
                                InLine::Vacant(found.map(|l| Vacancy {
                                    revision: l.revision,
                                    clean: l.operation == kv::Operation::Delete,
                                    base: known,
                                }))
                            } else {
                                q.backstop = Some(revision);
                                InLine::Waiting
                            }
                        }
                        Err(_) => InLine::Unreadable,
                    };
                }
            }
        }
    }

    /// Watches the election key and returns the moment it is deleted
    /// (resign) or purged (TTL marker), or a handover names this candidate
    /// (ADR 0112); the poll interval is the backstop, also for servers
    /// without TTL markers. A handover that reserves the name for another
    /// candidate is waited out: the wait returns when this attempt has
    /// seen it for its window (or a term followed it).
    async fn wait_on_key(
        &self,
        attempt: &mut NatsAttempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        if self.reservation_ended(attempt) {
            return Ok(());
        }
        if attempt.watch.is_none() {
            attempt.watch = self.key_watch().await;
        }
        let poll_end = Instant::now() + poll_interval;
        let end_of =
            |reserved: Option<Reserved>| reserved.map_or(poll_end, |r| r.until().min(poll_end));
        let Some(watch) = attempt.watch.as_mut() else {
            tokio::time::sleep_until(end_of(attempt.reserved)).await;
            self.reservation_ended(attempt);
            return Ok(());
        };
        // A delete this process made of a write it could not use is not
        // a clean release, also when the watch reports it.
        let known = attempt.vacancy;
        let base = watch.known_before;
        loop {
            let deadline = end_of(attempt.reserved);
            tokio::select! {
                seen = watch.next() => match seen {
                    Seen::Entry(kv::Operation::Delete, revision, _) => {
                        let clean = known.is_none_or(|v| v.revision != revision || v.clean);
                        attempt.vacancy = Some(Vacancy {
                            revision,
                            clean,
                            base,
                        });
                        return Ok(());
                    }
                    Seen::AgedOut(revision) => {
                        // The server removed a handover's record at the
                        // end of its window (its per-key TTL), the watch
                        // having delivered everything since: no holder to
                        // wait out, its term ended by that write. Any
                        // other marker (an expiry) is not clean.
                        let clean = attempt
                            .reserved
                            .is_some_and(|r| r.watched && revision > r.revision);
                        attempt.vacancy = Some(Vacancy {
                            revision,
                            clean,
                            base,
                        });
                        return Ok(());
                    }
                    Seen::Entry(kv::Operation::Purge, revision, _) => {
                        // A client's purge (an operator's, or a write given
                        // up): it rolls up entries the watch may not have
                        // delivered (a term after a handover), so it is
                        // never clean.
                        attempt.vacancy = Some(Vacancy {
                            revision,
                            clean: false,
                            base,
                        });
                        return Ok(());
                    }
                    // An entry from before the handover last read.
                    Seen::Entry(kv::Operation::Put, revision, _)
                        if attempt.reserved.is_some_and(|r| revision < r.revision) => {}
                    Seen::Entry(_, revision, value) => {
                        match record::handover_in(&self.key, &value) {
                            Ok(Some((to, _))) if to == self.identity => {
                                attempt.vacancy = Some(Vacancy {
                                    revision,
                                    clean: true,
                                    base,
                                });
                                return Ok(());
                            }
                            Ok(Some((_, window))) => {
                                sighted(&mut attempt.reserved, revision, window, base);
                                if let Some(r) = attempt.reserved.as_mut() {
                                    r.watched = true;
                                }
                            }
                            // A term (a renewal, a new holder), or a
                            // record a claim will report as corrupt.
                            _ => attempt.reserved = None,
                        }
                    }
                    Seen::Ended => {
                        attempt.watch = None;
                        // A later watch may miss entries between the two.
                        if let Some(r) = attempt.reserved.as_mut() {
                            r.watched = false;
                        }
                        return Ok(());
                    }
                },
                () = tokio::time::sleep_until(deadline) => {
                    self.reservation_ended(attempt);
                    return Ok(());
                }
            }
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

    fn backend(&self) -> &'static str {
        "nats"
    }

    async fn open(&self) -> Result<NatsAttempt, election_core::Error> {
        Ok(NatsAttempt {
            nonce: election_core::attempt_nonce(),
            holding: Arc::new(Mutex::new(None)),
            may_hold: false,
            // This claim's own resign is a clean release.
            vacancy: *self.last_release.lock().unwrap_or_else(|p| p.into_inner()),
            adopting: None,
            retry: false,
            watch: None,
            queue: None,
            reserved: None,
        })
    }

    /// An atomic compare-and-set of the key expecting the last vacancy
    /// seen (0: no entry); its epoch is the bucket incarnation's creation
    /// time plus the write's revision, checked against the incarnation
    /// after the write (rule 1). A write that times out is resolved by
    /// reading the key back (the value carries this attempt's nonce).
    async fn try_claim(
        &self,
        attempt: &mut NatsAttempt,
    ) -> Result<Option<Won>, election_core::Error> {
        self.live_elsewhere().await.map_err(|e| self.core(e))?;
        let sent = Instant::now();
        // Expect the revision of the last vacancy seen (0: no entry at all),
        // with the incarnation it was seen in (`None` with 0: no entry is
        // no entry in any incarnation). The server checks it: no read of a
        // possibly stale replica decides.
        let expecting = |v: Option<Vacancy>| (v.map_or(0, |v| v.revision), v.map(|v| v.base));
        let (mut expected, mut seen_in) = expecting(attempt.vacancy);
        for _ in 0..3 {
            attempt.may_hold = true;
            attempt.retry = false;
            // The term's start, if this write wins: every later write of
            // the term carries the same time.
            let since = unix_ms();
            // The base read before the write is sent (rule 1).
            let base = self.conn.base();
            if seen_in.is_some_and(|seen| seen != base) {
                // Seen in another incarnation than the one this write is
                // checked against (a release before the bucket was
                // recreated): there that revision may be a live holder's
                // entry. Expect no entry, and read what is there if any.
                attempt.vacancy = None;
                attempt.adopting = None;
                expected = 0;
            }
            // No grace only after a clean release this process saw (the
            // server checks it is still the latest entry), or when
            // adopting its own key. A write that will wait out the grace
            // says so (readers show its writer as pending, not leading).
            let clean = attempt
                .vacancy
                .is_some_and(|v| v.clean && v.revision == expected)
                || attempt.adopting == Some(expected);
            let pending = !clean && !self.conn.options.grace().is_zero();
            let value = self.value(attempt.nonce, base, since, pending);
            let create = settled(|| self.conn.kv.update(&self.key, value.clone(), expected));
            match tokio::time::timeout(self.timeout(), create).await {
                Ok(Ok(revision)) => {
                    // The bucket incarnation's first write ever (revision 1
                    // over no entry): no term of this incarnation can have
                    // existed, so there is no holder for the grace to wait
                    // out (ADR 0064). Its pending mark is refreshed away.
                    let first = expected == 0 && revision == 1;
                    let begin = Begin {
                        grace: !clean && !first,
                        refresh: pending && first,
                    };
                    let won = self
                        .won(
                            attempt,
                            Landed { revision, value },
                            base,
                            sent,
                            since,
                            begin,
                        )
                        .await?;
                    if won.is_none() && attempt.retry {
                        (expected, seen_in) = expecting(attempt.vacancy);
                        continue;
                    }
                    return Ok(won);
                }
                Ok(Err(e))
                    if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) =>
                {
                    attempt.may_hold = false;
                }
                Ok(Err(e)) if is_kind(&e, kv::UpdateErrorKind::InvalidKey) => {
                    attempt.may_hold = false;
                    return Err(self.core(Error::CorruptValue {
                        key: self.key.clone(),
                        detail: e.to_string(),
                    }));
                }
                Ok(Err(_)) | Err(_) => {
                    let won = self.resolve_unknown(attempt, sent).await?;
                    if won.is_none() && attempt.retry {
                        (expected, seen_in) = expecting(attempt.vacancy);
                        continue;
                    }
                    return Ok(won);
                }
            }
            // Someone wrote since: read the key through the stream leader.
            let known = self.conn.base();
            let latest = self.read_exact().await.map_err(|e| self.core(e))?;
            attempt.adopting = None;
            match latest {
                None => {
                    // No entry at all: never written, a marker that aged
                    // out, or a recreated bucket. Of unknown origin.
                    attempt.vacancy = None;
                    (expected, seen_in) = (0, None);
                }
                Some(l) if l.operation != kv::Operation::Put => {
                    let clean = l.operation == kv::Operation::Delete
                        || self.removed_handover(attempt, l.revision).await;
                    attempt.vacancy = Some(Vacancy {
                        revision: l.revision,
                        clean,
                        base: known,
                    });
                    (expected, seen_in) = (l.revision, Some(known));
                }
                Some(l) => {
                    if let Some(claimable) = self
                        .handover_claimable(attempt, &l.value, l.revision, known)
                        .map_err(|e| self.core(e))?
                    {
                        if claimable {
                            // A handover to this candidate, or one whose
                            // window it has seen pass: claim over it, as
                            // after a clean release (its holder ended its
                            // term by that very write).
                            expected = l.revision;
                            continue;
                        }
                        attempt.vacancy = None;
                        return Ok(None);
                    }
                    let v = ClaimRecord::decode(&self.key, &l.value).map_err(|e| self.core(e))?;
                    if v.nonce == attempt.nonce {
                        let won = self.adopt_landed(attempt, &l, sent).await?;
                        if won.is_none() && attempt.retry {
                            (expected, seen_in) = expecting(attempt.vacancy);
                            continue;
                        }
                        return Ok(won);
                    }
                    if v.identity == self.identity && self.conn.options.adopts_own() {
                        // A restarted process adopts its own key, with a new,
                        // higher epoch: the revision of this update.
                        (expected, seen_in) = (l.revision, Some(known));
                        attempt.adopting = Some(l.revision);
                        continue;
                    }
                    // Held by another: its end is not seen yet.
                    attempt.vacancy = None;
                    return Ok(None);
                }
            }
        }
        Ok(None)
    }

    /// Waits in the waiters' queue (ADR 0106): the first wait puts the
    /// attempt in it (a waiter key); an attempt behind another watches
    /// only that one's waiter key, and moves up when it goes (a win, a
    /// close, an expiry); the head watches the election key and returns
    /// the moment it is deleted (resign) or purged (TTL marker). Behind the
    /// head, the backstop is one exact read of the election key every poll
    /// interval: a vacancy seen on two looks in a row (the head did not
    /// claim within a poll interval) returns, so a claim is tried. Without
    /// a queue (the waiter key could not be written), every attempt waits
    /// as the head does.
    async fn wait(
        &self,
        attempt: &mut NatsAttempt,
        poll_interval: Duration,
    ) -> Result<(), election_core::Error> {
        if attempt.queue.is_none() && attempt.watch.is_none() {
            match Waiter::enqueue(self.conn.clone(), &self.key, attempt.nonce).await {
                Ok(waiter) => {
                    attempt.queue = Some(Queued {
                        listed_at: waiter.place(),
                        waiter,
                        ahead: None,
                        head: false,
                        backstop: None,
                    });
                }
                Err(e) => {
                    tracing::debug!(name = %self.name, error = %e, "no waiter key; waiting on the election key");
                }
            }
        }
        let mut became_head = false;
        if let Some(q) = attempt.queue.as_mut() {
            while !q.head {
                match self.in_line(q, poll_interval).await {
                    InLine::Head => {
                        q.head = true;
                        became_head = true;
                    }
                    InLine::Vacant(vacancy) => {
                        attempt.vacancy = vacancy.map(|v| Vacancy {
                            clean: v.clean && self.clean_delete(attempt.vacancy, v.revision),
                            ..v
                        });
                        return Ok(());
                    }
                    InLine::Waiting => {}
                    InLine::Unreadable => return Ok(()),
                }
            }
        }
        if became_head {
            // The watch first, then one exact read: a vacancy from before
            // the watch was made is seen by the read.
            if attempt.watch.is_none() {
                attempt.watch = self.key_watch().await;
            }
            let known = self.conn.base();
            match self.read_exact().await {
                Ok(Some(l)) if l.operation == kv::Operation::Put => {
                    if let Ok(Some(true)) =
                        self.handover_claimable(attempt, &l.value, l.revision, known)
                    {
                        return Ok(());
                    }
                }
                Ok(Some(l)) => {
                    let clean = l.operation == kv::Operation::Delete
                        && self.clean_delete(attempt.vacancy, l.revision);
                    attempt.vacancy = Some(Vacancy {
                        revision: l.revision,
                        clean,
                        base: known,
                    });
                    return Ok(());
                }
                Ok(None) => {
                    attempt.vacancy = None;
                    return Ok(());
                }
                Err(_) => return Ok(()),
            }
        }
        self.wait_on_key(attempt, poll_interval).await
    }

    /// Starts the renewal task.
    fn watch(
        &self,
        attempt: &mut NatsAttempt,
        won: Won,
        reporter: TermReporter,
    ) -> Result<WatchGuard, election_core::Error> {
        let valid_until = won
            .valid_until
            .ok_or_else(|| election_core::Error::NotHeld {
                name: self.name.clone(),
            })?;
        let renewal = Renewal {
            conn: self.conn.clone(),
            name: self.name.clone(),
            key: self.key.clone(),
            identity: self.identity.clone(),
            nonce: attempt.nonce,
            holding: attempt.holding.clone(),
        };
        let conn = self.conn.clone();
        let hub = self.requests.clone();
        let key = record::request_key(&self.key);
        let follower = reporter.clone();
        let requests = async move {
            let _following = hub.follow(&conn, key, follower).await;
            std::future::pending::<()>().await;
        };
        Ok(WatchGuard::task(tokio::spawn(async move {
            // The requests' watch lives as long as the renewals.
            tokio::select! {
                () = renewal.run(valid_until, reporter) => {}
                () = requests => {}
            }
        })))
    }

    /// The commit-point check behind [`Term::confirm`](election_core::Term::confirm):
    /// one compare-and-set (an update expecting the revision last written)
    /// proving the term still holds the key now, then one read of the
    /// bucket's stream info proving the write landed in the term's bucket
    /// incarnation, whose max age is not below the TTL (two round trips).
    /// The update resets the key's age on the server (the holder's own
    /// validity is extended only by the renewal loop). If dropped, the
    /// update may or may not land; the renewal loop resolves its revision.
    /// A refusal while the key's latest entry is still this term's record
    /// (a write of its own that landed unanswered) catches up on that
    /// entry's revision and updates again, as a renewal does.
    async fn confirm(&self, attempt: &mut NatsAttempt) -> Result<(), election_core::Error> {
        let not_held = || election_core::Error::NotHeld {
            name: self.name.clone(),
        };
        let mut holding = attempt.holding.lock().await;
        let Some(h) = holding.as_mut() else {
            return Err(not_held());
        };
        let value = h.value(&self.identity);
        let updated = self
            .catching_up(h, |revision| self.update(value.clone(), revision))
            .await;
        let base = h.base;
        match updated {
            Ok(Some(revision)) => h.revision = revision,
            Ok(None) => return Err(not_held()),
            Err(e) => return Err(self.core(e)),
        }
        drop(holding);
        // The write proves the term only in its own incarnation, with the
        // TTL it counts with.
        match self.conn.check_incarnation(base).await {
            Ok(None) => Ok(()),
            Ok(Some(why)) => {
                tracing::warn!(name = %self.name, %why, "the commit-point check failed");
                Err(not_held())
            }
            Err(e) => Err(self.core(e)),
        }
    }

    /// Publishes `value` (ADR 0068): the term's record with the value, as
    /// an update expecting the revision last written (a compare-and-set,
    /// as [`confirm`](Claim::confirm) writes it, with the same check of the
    /// bucket incarnation after it), so a deposed holder's value is never
    /// written. Every later write of the term (renewals, checks) carries
    /// the value; a new term's record begins without one. The update also
    /// renews the key's age, like any write of the holder.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the key moved on
    /// (another holder, a delete, a recreated bucket);
    /// [`election_core::Error::Unavailable`] /
    /// [`election_core::Error::OutcomeUnknown`] otherwise, after which the
    /// value may still show (the term's next renewal writes it).
    /// Cancel safety: cancel safe, as `confirm`.
    async fn proclaim(
        &self,
        attempt: &mut NatsAttempt,
        value: &LeaderValue,
    ) -> Result<(), election_core::Error> {
        {
            let mut holding = attempt.holding.lock().await;
            let Some(h) = holding.as_mut() else {
                return Err(election_core::Error::NotHeld {
                    name: self.name.clone(),
                });
            };
            h.value = Some(value.clone());
        }
        self.confirm(attempt).await
    }

    /// Deletes the key, expecting the revision last written; refused, and
    /// the key's latest entry is still this term's record (a write of its
    /// own that landed unanswered), it deletes expecting that entry's
    /// revision instead. `NotHeld` only when the key moved on.
    async fn release(&self, attempt: &mut NatsAttempt) -> Result<(), election_core::Error> {
        let held = attempt.holding.lock().await.take();
        let Some(mut h) = held else {
            return Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            });
        };
        let known = self.conn.base();
        let deleted = self
            .catching_up(&mut h, |revision| self.delete_marker(revision, false))
            .await;
        match deleted {
            Ok(Some(marker)) => {
                attempt.may_hold = false;
                *self.last_release.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vacancy {
                    revision: marker,
                    clean: true,
                    base: known,
                });
                Ok(())
            }
            Ok(None) => {
                attempt.may_hold = false;
                Err(election_core::Error::NotHeld {
                    name: self.name.clone(),
                })
            }
            Err(e) => {
                *attempt.holding.lock().await = Some(h);
                Err(self.core(e))
            }
        }
    }

    fn transfers(&self) -> bool {
        true
    }

    /// Hands the term to `successor` (ADR 0112): one compare-and-set of
    /// the key expecting the revision last written (as
    /// [`release`](Claim::release)'s delete), writing a handover's record
    /// (this holder, the ended epoch, the successor, the window; a fresh
    /// nonce). No new epoch: the successor's claim, an update expecting the
    /// handover's revision, gets a higher revision.
    ///
    /// How long the record stays: a window up to the bucket's max age (the
    /// lease TTL) is its per-key TTL, rounded up to whole seconds (the
    /// server removes it then, and a waiting candidate's watch sees the
    /// marker). A longer window cannot be a per-key TTL (the server caps
    /// those at the max age): the record is written to stay (`Nats-TTL:
    /// never`) until a claim replaces it, the successor's at once, another
    /// candidate's once it has seen it for the window on its own clock.
    /// Per-key TTLs need nats-server 2.11+ and a bucket with TTL markers
    /// (this crate creates its buckets so); on a bucket without them the
    /// record ages out with the max age, so a window above the TTL is
    /// [`ConfigError::Unsupported`](election_core::ConfigError::Unsupported)
    /// there, before anything is written.
    ///
    /// Failure model: `NotHeld` if the key moved on; `Unavailable` or
    /// `OutcomeUnknown` otherwise (the core then closes the attempt with
    /// `End::Failed`, whose background delete expects the term's revision:
    /// it removes the term's record, never a handover that landed).
    async fn release_to(
        &self,
        attempt: &mut NatsAttempt,
        successor: &Identity,
        window: Duration,
    ) -> Result<(), election_core::Error> {
        let per_key_ttl = self.conn.kv.stream.cached_info().config.allow_message_ttl;
        // Whole seconds, rounded up: never before the window.
        let secs = (window.as_secs() + u64::from(window.subsec_nanos() > 0)).max(1);
        let ttl = match (
            per_key_ttl,
            Duration::from_secs(secs) <= self.conn.options.ttl(),
        ) {
            (true, true) => Some(format!("{secs}s")),
            (true, false) => Some("never".to_owned()),
            (false, _) if window <= self.conn.options.ttl() => None,
            (false, _) => {
                return Err(election_core::Error::Config(
                    election_core::ConfigError::Unsupported {
                        what: "a transfer window above the lease TTL on a bucket without \
                               per-key TTLs (nats-server 2.11+)",
                        backend: "nats",
                    },
                ));
            }
        };
        let held = attempt.holding.lock().await.take();
        let Some(mut h) = held else {
            return Err(election_core::Error::NotHeld {
                name: self.name.clone(),
            });
        };
        let holder = ClaimRecord {
            identity: self.identity.clone(),
            nonce: election_core::attempt_nonce(),
            epoch: Some(h.epoch),
            since_unix_ms: unix_ms(),
            base: Some(h.base),
            value: None,
        };
        let value = record::encode_handover(&holder, successor, window);
        let written = self
            .catching_up(&mut h, |revision| {
                self.write_handover(value.clone(), revision, ttl.as_deref())
            })
            .await;
        match written {
            Ok(Some(revision)) => {
                attempt.may_hold = false;
                tracing::debug!(name = %self.name, %successor, ?window, revision, "handed over");
                Ok(())
            }
            Ok(None) => {
                attempt.may_hold = false;
                Err(election_core::Error::NotHeld {
                    name: self.name.clone(),
                })
            }
            Err(e) => {
                *attempt.holding.lock().await = Some(h);
                Err(self.core(e))
            }
        }
    }

    /// After a drop, a cancelled or a failed step that may have won:
    /// deletes the key in the background if it is still this attempt's.
    fn close(&self, mut attempt: NatsAttempt, end: End) {
        if let Some(q) = attempt.queue.take() {
            q.waiter.remove();
        }
        let gives_up = matches!(end, End::Dropped | End::Cancelled | End::Failed);
        if !(attempt.may_hold && gives_up) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(name = %self.name, "no runtime to release on; the lease ages out after its TTL");
            return;
        };
        let (conn, key, name) = (self.conn.clone(), self.key.clone(), self.name.clone());
        let (nonce, holding) = (attempt.nonce, attempt.holding.clone());
        rt.spawn(async move {
            let known = holding.lock().await.as_ref().map(|h| h.revision);
            let revision = match known {
                Some(r) => Some(r),
                None => conn.own_revision(&key, nonce).await.ok().flatten(),
            };
            if let Some(rev) = revision
                && let Err(e) = settled(|| conn.kv.delete_expect_revision(&key, Some(rev))).await
            {
                tracing::warn!(%name, error = %e, "background release failed; the lease ages out after its TTL");
            }
        });
    }

    /// The holder and epoch as the bucket shows them.
    async fn leader(&self) -> Result<Option<Leader>, election_core::Error> {
        self.conn.leader(&self.name).await.map_err(|e| self.core(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::NatsOptions;
    use crate::store::exact_read;

    /// Issue 14 (ADR 0030): after a won write, the attempt's watch may
    /// prove the write's bucket incarnation in place of a stream info
    /// read, but only for the incarnation its consumer belongs to. A write
    /// that landed in a recreated bucket, at the very revision and with
    /// the very bytes the proof waits for, is still found out.
    #[tokio::test]
    async fn a_watch_proves_only_writes_of_its_own_incarnation() {
        let server = nats_testkit::Server::start().expect("nats-server");
        let options = NatsOptions::new(Duration::from_secs(3)).expect("options");
        let client = async_nats::connect(server.url()).await.expect("connect");
        let conn = Arc::new(
            Connection::open(client, options.clone())
                .await
                .expect("open"),
        );
        let claim = NatsClaim::new(
            conn.clone(),
            Arc::default(),
            ElectionName::new("jobs").unwrap(),
            Identity::new("svc-1").unwrap(),
        );
        let base = conn.base();
        let value = bytes::Bytes::from(format!(
            "election-nats/1\nidentity=svc-1\nnonce=7\nbase={base}\n"
        ));

        // The same incarnation: the delivery proves the write.
        let mut attempt = claim.open().await.expect("open");
        attempt.watch = claim.key_watch().await;
        assert_eq!(
            attempt.watch.as_ref().and_then(|w| w.incarnation),
            Some(base),
            "the watch's consumer is known to be of the bucket read at open"
        );
        let revision = conn.kv.create("jobs", value.clone()).await.expect("write");
        assert_eq!(
            claim
                .incarnation_of_write(&mut attempt, revision, &value, base)
                .await
                .expect("checked"),
            None
        );

        // The bucket is deleted and recreated after the watch was made; the
        // write lands in the new incarnation.
        let mut attempt = claim.open().await.expect("open");
        attempt.watch = claim.key_watch().await;
        assert_eq!(
            attempt.watch.as_ref().and_then(|w| w.incarnation),
            Some(base)
        );
        let js = async_nats::jetstream::new(conn.client.clone());
        js.delete_key_value("elections").await.expect("delete");
        let other = async_nats::connect(server.url()).await.expect("connect");
        let recreated = Connection::open(other, options).await.expect("recreate");
        assert!(recreated.base() > base);
        let revision = recreated
            .kv
            .create("jobs", value.clone())
            .await
            .expect("write");
        let why = claim
            .incarnation_of_write(&mut attempt, revision, &value, base)
            .await
            .expect("checked");
        assert!(
            why.as_deref().is_some_and(|w| w.contains("recreated")),
            "a write in a recreated bucket passed for one of the term's incarnation: {why:?}"
        );
    }

    /// Item 10: a create of this attempt whose answer was lost and that
    /// landed later (an "orphan", written here by the test with the
    /// attempt's nonce) is found by a later `try_claim`. The server ages
    /// the key from when it stored it, so the term must refresh the key
    /// before it begins and count validity from that refresh, never from
    /// the later call's start.
    #[tokio::test]
    async fn a_landed_orphan_is_refreshed_before_it_is_adopted() {
        let server = nats_testkit::Server::start().expect("nats-server");
        let options = NatsOptions::new(Duration::from_secs(3))
            .and_then(|o| o.failover_grace(Duration::from_millis(200)))
            .expect("options");
        let client = async_nats::connect(server.url()).await.expect("connect");
        let conn = Arc::new(Connection::open(client, options).await.expect("open"));
        let claim = NatsClaim::new(
            conn.clone(),
            Arc::default(),
            ElectionName::new("jobs").unwrap(),
            Identity::new("svc-1").unwrap(),
        );
        let mut attempt = claim.open().await.expect("open");
        // The orphan: what this attempt's create would have written.
        let orphan = format!(
            "election-nats/1\nidentity=svc-1\nnonce={}\nbase={}\n",
            attempt.nonce,
            conn.base()
        );
        let orphan_revision = conn
            .kv
            .create("jobs", orphan.into())
            .await
            .expect("the orphan lands");
        let before = Instant::now();
        let won = claim
            .try_claim(&mut attempt)
            .await
            .expect("try_claim")
            .expect("the landed orphan is this attempt's");
        let latest = exact_read::read_exact(&conn.kv, "jobs", Duration::from_secs(5))
            .await
            .expect("read")
            .expect("an entry");
        assert!(
            latest.revision > orphan_revision,
            "the orphan (revision {orphan_revision}) was adopted without a refresh: \
             the key's last write is still revision {}",
            latest.revision
        );
        assert!(latest.is_attempts("jobs", attempt.nonce));
        let valid_until = won.valid_until.expect("a validity");
        assert!(valid_until > before, "validity counted from the refresh");
        assert_eq!(
            attempt.holding.lock().await.as_ref().map(|h| h.revision),
            Some(latest.revision),
            "the term holds the refreshed revision"
        );
        claim.close(attempt, End::Dropped);
    }
}
