//! The plain steps of a NATS lease set, one I/O operation (or a few in
//! parallel) each, over the [`KeyTable`] of what this process knows; the
//! core's keyed engine drives them through `KeyedClaims` (`keyed`):
//!
//! - open: the two buckets and this process's first session;
//! - claim many ([`Steps::claim_keys`]): read or claim each key as the key table
//!   says (a key in a failover grace answers "held by");
//! - renew many ([`Steps::renew_session`]): one write of the session renews
//!   every key it holds;
//! - release many ([`Steps::release_all`]): every key is given up and the
//!   session deleted, which frees them all at once;
//! - confirm one ([`Steps::confirm`]): the commit point of one key;
//! - wait ([`Steps::wait`]) for the wake-ups of the watches
//!   ([`Steps::follow_keys`], [`Steps::follow_sessions`]), which also
//!   report losses (a foreign record under a held key, the own session's
//!   end) to the core at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{
    Claimed, ElectionName, Epoch, HoldReporter, Identity, LeaseLost, LossReason, RenewalPolicy, Won,
};
use futures::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::keyed::key_table::{KeyTable, Liveness, LostKey, Next, Seen, seen_of};
use crate::store::bucket;
use crate::store::connection::Connection;
use crate::store::exact_read::{self, ExactEntry};
use crate::store::record::{self, SessionRecord};
use crate::store::session::{self, Renewal, Session};
use crate::store::settled::settled;

/// How many key reads or claims run at once.
const CONCURRENCY: usize = 64;

/// What one renewal of the own session found.
#[derive(Debug)]
pub(crate) enum SessionRenewal {
    /// Renewed: every key it holds is valid until the session is.
    Renewed,
    /// The session is over (gone, or its bucket recreated or shortened):
    /// every key it held is lost.
    Lost,
    /// No answer that counts; the session may still live.
    Failed(Error),
}

/// A lease set's connection, buckets and table, with the steps on them.
pub(crate) struct Steps {
    conn: Arc<Connection>,
    pub(crate) identity: Identity,
    sessions: kv::Store,
    keys: kv::Store,
    table: Mutex<KeyTable>,
    /// Serializes writes of the own session (renewals, restarts).
    session_writes: tokio::sync::Mutex<()>,
    /// Rung when another claim is worth making: a key was freed, or its
    /// holder's session died.
    wake: Notify,
    /// Where losses learned between steps go (set by `start`).
    reporter: Mutex<Option<HoldReporter>>,
    /// The highest revision the keys watch has delivered and applied (0
    /// again when the keys bucket is recreated): a renewal counts only
    /// once it reaches the bucket's last revision read after the session
    /// write ([`keys_caught_up`](Steps::keys_caught_up)).
    keys_delivered: AtomicU64,
    /// Rung at every entry the keys watch applies.
    keys_progress: Notify,
    /// The session's renewal policy: validity from before the write,
    /// renew interval, retries, request timeout.
    pub(crate) policy: RenewalPolicy,
}

impl Steps {
    /// Opens (or creates) the buckets `<bucket>-sessions` and
    /// `<bucket>-keys` and starts this process's session (see
    /// [`NatsElection::lease_set`](crate::NatsElection::lease_set)).
    pub(crate) async fn open(conn: Arc<Connection>, identity: Identity) -> Result<Steps, Error> {
        let inner = conn;
        if inner.options.is_observer() {
            return Err(election_core::ConfigError::BadSetting {
                setting: "observer",
                reason: "an observer's election cannot hold leases".into(),
            }
            .into());
        }
        let options = &inner.options;
        let sessions_name = format!("{}-sessions", options.bucket_name());
        let keys_name = format!("{}-keys", options.bucket_name());
        let sessions = bucket::open(
            &inner.js,
            &inner.client,
            &bucket::Spec {
                name: &sessions_name,
                description: "lease-set sessions (election-nats); max age = the lease TTL",
                max_age: options.ttl(),
                replicas: options.replica_count(),
                markers: true,
                check_max_age: true,
                create: true,
                what: "open or create the sessions bucket (is JetStream enabled?)",
            },
        )
        .await?;
        let keys = bucket::open(
            &inner.js,
            &inner.client,
            &bucket::Spec {
                name: &keys_name,
                description: "lease-set keys (election-nats); held while their session lives",
                max_age: Duration::ZERO,
                replicas: options.replica_count(),
                markers: false,
                check_max_age: true,
                create: true,
                what: "open or create the lease-set keys bucket (is JetStream enabled?)",
            },
        )
        .await?;
        let (sessions_shape, keys_shape) = tokio::join!(
            bucket::shape(&sessions, options.timeout()),
            bucket::shape(&keys, options.timeout())
        );
        let (sessions_shape, keys_shape) = (sessions_shape?, keys_shape?);
        bucket::warn_if_single_replica(&keys_name, &keys_shape, options.is_single_replica_ok());
        let policy = RenewalPolicy::new(options.validity(), options.renew_every())
            .and_then(|p| {
                p.with_retry_after((options.renew_every() / 4).max(Duration::from_millis(10)))
            })
            .and_then(|p| p.with_attempt_timeout(options.timeout()))?;
        let own =
            session::start(&sessions, &identity, options.validity(), options.timeout()).await?;
        tracing::info!(identity = %identity, session = own.id, "lease-set session started");
        Ok(Steps {
            conn: inner,
            identity,
            sessions,
            keys,
            table: Mutex::new(KeyTable::new(
                own,
                keys_shape.created_us,
                sessions_shape.created_us,
            )),
            session_writes: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
            reporter: Mutex::new(None),
            keys_delivered: AtomicU64::new(0),
            keys_progress: Notify::new(),
            policy,
        })
    }

    /// Keeps `reporter` for the losses learned between steps.
    pub(crate) fn set_reporter(&self, reporter: HoldReporter) {
        *self.reporter.lock().unwrap_or_else(|p| p.into_inner()) = Some(reporter);
    }

    /// Tells the core of `losses` at once (rule 2).
    fn report(&self, losses: impl IntoIterator<Item = LostKey>) {
        let reporter = self.reporter.lock().unwrap_or_else(|p| p.into_inner());
        for (key, epoch, reason) in losses {
            if let Some(r) = reporter.as_ref() {
                r.lose(&key, epoch, reason);
            }
        }
    }

    /// Tells the core that every key held is valid until the own session
    /// is (after a renewal made by a step other than `renew`).
    fn report_renewed(&self) {
        let (held, own) = {
            let table = self.table();
            (table.held(), table.own)
        };
        let reporter = self.reporter.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(r), Some(own)) = (reporter.as_ref(), own) {
            for (key, epoch) in held {
                r.renewed(&key, epoch, own.valid_until);
            }
        }
    }

    /// Claim many: reads and claims each of `names` as far as it can go
    /// now ([`CONCURRENCY`] at a time), after making sure of a live session
    /// with at least half its validity left. One answer per key, in order:
    /// won (valid while the session is), held by another (also during a
    /// failover grace), or the error that kept it from being decided.
    pub(crate) async fn claim_keys(
        &self,
        names: &[ElectionName],
    ) -> Vec<Result<Claimed, election_core::Error>> {
        let kv_keys: Vec<String> = names.iter().map(record::key).collect();
        {
            let mut table = self.table();
            for (kv_key, name) in kv_keys.iter().zip(names) {
                table.ask(kv_key, name);
                // The core asks only for keys it does not hold: one the
                // table still counts (expired at the core's deadline) is
                // claimed afresh, never answered with its old term.
                table.forget(kv_key);
            }
        }
        let session = self.fresh_session().await;
        if let Err(e) = &session {
            tracing::warn!(error = %e, "no live lease-set session to claim keys with");
        }
        let outcomes: Vec<Result<(), Error>> = match &session {
            Ok(_) => {
                futures::stream::iter(kv_keys.clone())
                    .map(|key| async move { self.acquire(&key).await })
                    .buffered(CONCURRENCY)
                    .collect()
                    .await
            }
            Err(_) => kv_keys.iter().map(|_| Ok(())).collect(),
        };
        let table = self.table();
        kv_keys
            .iter()
            .zip(names)
            .zip(outcomes)
            .map(|((kv_key, name), outcome)| {
                outcome.map_err(|e| e.into_core(name))?;
                let entry = table.entries.get(kv_key).ok_or_else(|| not_held(name))?;
                match (entry.mine.and_then(|m| table.epoch_of(m)), table.own) {
                    (Some(epoch), Some(own)) => Ok(Claimed::Won(Won {
                        epoch,
                        valid_until: Some(own.valid_until),
                    })),
                    _ => match (&entry.seen, &session) {
                        // Free, but no live session to claim it with.
                        (Seen::Vacant { .. }, Err(_)) => Err(no_session().into_core(name)),
                        _ => Ok(Claimed::HeldBy(table.holder(entry))),
                    },
                }
            })
            .collect()
    }

    /// Wait: returns when another claim of the keys not held is worth
    /// making: a watch saw a key freed or a session die, or a failover
    /// grace or a doubt ends, or a renew interval passed. Cancel safe.
    pub(crate) async fn wait(&self) {
        let o = &self.conn.options;
        let due = self
            .table()
            .due(Instant::now(), o.ttl(), o.grace(), o.renew_every());
        tokio::select! {
            () = self.wake.notified() => {}
            () = tokio::time::sleep_until(due) => {}
        }
    }

    /// Release many: nothing is held from here on, then the session ends,
    /// which frees every key it held (at once: no failover grace).
    pub(crate) async fn release_all(&self) {
        let own = self.table().release_all();
        let _writes = self.session_writes.lock().await;
        if let Some(own) = own {
            session::end(&self.sessions, own, self.timeout()).await;
        }
    }

    /// Release some: each of `held` this session still holds in that term
    /// is not held here from now on, and its record is deleted expecting
    /// the revision of that term (never a successor's record). A delete
    /// that fails leaves the key named by this live session: it is free
    /// when the session ends (logged).
    pub(crate) async fn release_keys(&self, held: &[(ElectionName, Epoch)]) {
        let deletes: Vec<(String, u64)> = {
            let mut table = self.table();
            let keys_base = table.keys_base;
            held.iter()
                .filter_map(|(name, epoch)| {
                    let kv_key = record::key(name);
                    let entry = table.entries.get_mut(&kv_key)?;
                    let mine = entry.mine?;
                    if bucket::epoch_at(keys_base, mine).ok() != Some(*epoch) {
                        return None;
                    }
                    entry.mine = None;
                    Some((kv_key, mine))
                })
                .collect()
        };
        for (kv_key, revision) in deletes {
            let delete = settled(|| self.keys.delete_expect_revision(&kv_key, Some(revision)));
            match tokio::time::timeout(self.timeout(), delete).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(key = %kv_key, error = %e, "giving a lease-set key back failed; it is free when the session ends");
                }
                Err(_) => {
                    tracing::warn!(key = %kv_key, "giving a lease-set key back timed out; it is free when the session ends");
                }
            }
        }
    }

    /// A live session with at least half its validity left, renewed or
    /// started for it if need be.
    async fn fresh_session(&self) -> Result<Session, Error> {
        let now = Instant::now();
        let own = self.table().own;
        let stale =
            |o: Session| o.valid_until.saturating_duration_since(now) < self.policy.validity() / 2;
        if let Some(o) = own
            && stale(o)
            && matches!(self.renew_session().await, SessionRenewal::Renewed)
        {
            self.report_renewed();
        }
        if self.table().own.is_none() {
            self.start_session().await?;
        }
        self.table()
            .own
            .filter(|o| Instant::now() < o.valid_until)
            .ok_or_else(no_session)
    }

    /// Starts a new session (the last one is over), in a bucket whose max
    /// age is not below the TTL counted with (an operator may have
    /// shortened it).
    async fn start_session(&self) -> Result<(), Error> {
        let options = &self.conn.options;
        let _writes = self.session_writes.lock().await;
        if self.table().own.is_some() {
            return Ok(()); // started meanwhile
        }
        let shape = bucket::shape(&self.sessions, self.timeout()).await?;
        if let Some(why) = bucket::max_age_below(&shape, options.ttl()) {
            tracing::warn!(%why, "no new lease-set session");
            return Err(Error::BucketMismatch {
                bucket: self.sessions.name.clone(),
                found: why,
                wanted: format!("max age {:?}", options.ttl()),
            });
        }
        let s = session::start(
            &self.sessions,
            &self.identity,
            options.validity(),
            self.timeout(),
        )
        .await?;
        tracing::info!(identity = %self.identity, session = s.id, "new lease-set session");
        self.table().own = Some(s);
        Ok(())
    }

    fn table(&self) -> std::sync::MutexGuard<'_, KeyTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn timeout(&self) -> Duration {
        self.conn.options.timeout()
    }

    /// Renew many: one renewal of the own session, which renews every key
    /// it holds. Validity counts from the instant before the write was
    /// sent; both buckets' stream info is checked after it (a recreated
    /// keys bucket loses every key, a recreated or shortened sessions
    /// bucket the session). Losses found are reported to the core.
    ///
    /// The whole renewal (the update, a look at the session key after a
    /// "wrong last revision", the checks) runs within one budget: the
    /// core's attempt timeout, counted from the call, so the core never
    /// cuts it off half-way for lack of time it gave. A session given up
    /// here while its key may still be live (a late renewal of ours landed)
    /// is deleted, so it never stays live beside the next one.
    pub(crate) async fn renew_session(&self) -> SessionRenewal {
        let deadline = Instant::now() + self.timeout();
        let left = || deadline.saturating_duration_since(Instant::now());
        let options = &self.conn.options;
        let _writes = self.session_writes.lock().await;
        let Some(own) = self.table().own else {
            return SessionRenewal::Lost;
        };
        let outcome = session::renew(
            &self.sessions,
            &self.identity,
            own,
            options.validity(),
            deadline,
        )
        .await;
        let now = Instant::now();
        match outcome {
            Ok(Renewal::Renewed(s)) => self.check_renewed(s, now, left()).await,
            Ok(Renewal::Lost) => {
                // The key is gone or carries another record: nothing of
                // ours to delete.
                let lost = self.table().lose_session(own.id, now);
                self.report(lost);
                SessionRenewal::Lost
            }
            Err(e) => {
                // The update may have landed: learn its revision (a
                // successful write of ours), without extending validity.
                // Without budget left, the next renewal's look after a
                // "wrong last revision" learns it.
                let read = session::read_own(&self.sessions, &self.identity, own.id, left()).await;
                let mut table = self.table();
                let gone = match read {
                    Ok(Some(revision)) => {
                        if let Some(o) = table.own.as_mut().filter(|o| o.id == own.id) {
                            o.revision = revision;
                        }
                        false
                    }
                    Ok(None) => true,
                    Err(_) => false,
                };
                let expired = table
                    .own
                    .is_some_and(|o| o.id == own.id && now >= o.valid_until);
                if gone || expired {
                    let lost = table.lose_session(own.id, now);
                    drop(table);
                    self.report(lost);
                    if !gone {
                        self.retire(own.id);
                    }
                    return SessionRenewal::Lost;
                }
                SessionRenewal::Failed(e)
            }
        }
    }

    /// Deletes session `id`, given up here after its keys' losses were
    /// reported, in the background (bounded by the request timeout).
    fn retire(&self, id: u64) {
        let (store, timeout) = (self.sessions.clone(), self.timeout());
        tokio::spawn(async move { session::retire(&store, id, timeout).await });
    }

    /// After the session's update landed as `s`: both buckets as the server
    /// describes them now (read within `budget`). A recreated bucket or a
    /// max age below the TTL ends the session (or the keys' terms) instead
    /// of being counted on.
    async fn check_renewed(&self, s: Session, now: Instant, budget: Duration) -> SessionRenewal {
        let ttl = self.conn.options.ttl();
        let deadline = Instant::now() + budget;
        let (sessions_shape, keys_shape) = tokio::join!(
            bucket::shape(&self.sessions, budget),
            bucket::shape(&self.keys, budget)
        );
        // The keys watch must have caught up with the keys bucket as read
        // after the write (ADR 0111): else the renewal does not count.
        let behind = match &keys_shape {
            // An empty stream (purged by hand) has nothing to deliver.
            Ok(k) if k.created_us == self.table().keys_base && !k.empty => {
                !self.keys_caught_up(k.last_sequence, deadline).await
            }
            // A recreated bucket loses every key below; nothing to prove.
            _ => false,
        };
        let mut table = self.table();
        let (sessions_shape, keys_shape) = match (sessions_shape, keys_shape) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                // Landed but unchecked: learn the revision, keep the old
                // validity.
                if let Some(o) = table.own.as_mut().filter(|o| o.id == s.id) {
                    o.revision = s.revision;
                }
                return SessionRenewal::Failed(e);
            }
        };
        if behind {
            if let Some(o) = table.own.as_mut().filter(|o| o.id == s.id) {
                o.revision = s.revision;
            }
            tracing::warn!(
                session = s.id,
                last = keys_shape.last_sequence,
                delivered = self.keys_delivered.load(Ordering::SeqCst),
                "the lease-set keys watch has not caught up: the renewal does not count"
            );
            return SessionRenewal::Failed(Error::Unavailable {
                what: "the lease-set keys watch did not catch up with the keys bucket in time",
                source: None,
            });
        }
        let mut lost = Vec::new();
        if keys_shape.created_us != table.keys_base {
            lost = table.keys_recreated(keys_shape.created_us);
            // The new incarnation's revisions start again at 1.
            self.keys_delivered.store(0, Ordering::SeqCst);
        }
        let shorter = bucket::max_age_below(&sessions_shape, ttl);
        let renewed = if sessions_shape.created_us != table.sessions_base || shorter.is_some() {
            tracing::warn!(
                session = s.id,
                max_age = ?sessions_shape.max_age,
                ?ttl,
                "the sessions bucket was recreated or its max age shortened"
            );
            table.sessions_base = sessions_shape.created_us;
            lost.extend(table.lose_session(s.id, now));
            SessionRenewal::Lost
        } else if table.renewed(s) {
            SessionRenewal::Renewed
        } else {
            SessionRenewal::Lost
        };
        drop(table);
        self.report(lost);
        if matches!(renewed, SessionRenewal::Lost) {
            // Just written, so live: not beside the next session.
            self.retire(s.id);
        }
        renewed
    }

    /// The keys held here now, with their epochs.
    pub(crate) fn held(&self) -> Vec<(ElectionName, Epoch)> {
        self.table().held()
    }

    /// Follows the keys bucket (until dropped): a key freed wakes
    /// [`wait`](Steps::wait); a record under a held key that is not its
    /// term's is a loss, reported at once.
    pub(crate) async fn follow_keys(&self) {
        self.follow(&self.keys, Self::apply_key).await;
    }

    /// Follows the sessions bucket (until dropped): a session's end wakes
    /// [`wait`](Steps::wait) (its keys may be taken over); the end of this
    /// process's own session loses every key, reported at once.
    pub(crate) async fn follow_sessions(&self) {
        self.follow(&self.sessions, Self::apply_session).await;
    }

    /// Follows one bucket with a watch (restarted when it ends), applying
    /// each entry.
    async fn follow(&self, store: &kv::Store, apply: impl Fn(&Self, kv::Entry)) {
        loop {
            match store.watch_with_history(">").await {
                Ok(mut watch) => loop {
                    match watch.next().await {
                        Some(Ok(entry)) => apply(self, entry),
                        Some(Err(e)) => {
                            tracing::debug!(error = %e, "lease-set watch failed");
                            break;
                        }
                        None => break,
                    }
                },
                Err(e) => tracing::debug!(error = %e, "starting a lease-set watch failed"),
            }
            tokio::time::sleep(self.conn.options.renew_every() / 4).await;
        }
    }

    fn apply_key(&self, entry: kv::Entry) {
        let seen = seen_of(&entry.key, entry.operation, entry.revision, &entry.value);
        let vacant = matches!(seen, Seen::Vacant { .. });
        let lost = self.table().saw_key(&entry.key, seen, Instant::now());
        self.report(lost);
        // Applied (a loss reported) before it counts as delivered.
        self.keys_delivered
            .fetch_max(entry.revision, Ordering::SeqCst);
        self.keys_progress.notify_waiters();
        if vacant {
            self.wake.notify_one();
        }
    }

    /// Waits until the keys watch has delivered and applied every entry up
    /// to `last` (the keys bucket's last revision, read after a session
    /// write was sent), at most until `deadline`; whether it did.
    ///
    /// A session renewal counts only then (rule 2): every write to the
    /// keys bucket that landed before the session write was sent, a
    /// revocation of a key held here among them (ADR 0111), is then known
    /// here, its loss reported. A watch that stalled or lags therefore
    /// stops extending the keys' validity, and they run out within a TTL
    /// of any record it missed: before a member that saw that record may
    /// claim over it (after the TTL and the grace).
    async fn keys_caught_up(&self, last: u64, deadline: Instant) -> bool {
        loop {
            let progress = self.keys_progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            if self.keys_delivered.load(Ordering::SeqCst) >= last {
                return true;
            }
            if tokio::time::timeout_at(deadline, progress).await.is_err() {
                return self.keys_delivered.load(Ordering::SeqCst) >= last;
            }
        }
    }

    fn apply_session(&self, entry: kv::Entry) {
        let Some(id) = session::id_of(&entry.key) else {
            return;
        };
        let now = Instant::now();
        let mut table = self.table();
        match entry.operation {
            kv::Operation::Put => table.set_session(id, Liveness::Alive { seen: now }),
            op => {
                let mut lost = Vec::new();
                if table.own.is_some_and(|o| o.id == id) {
                    lost = table.lose_session(id, now);
                } else {
                    let clean = op == kv::Operation::Delete;
                    table.set_session(id, Liveness::Dead { since: now, clean });
                }
                drop(table);
                self.report(lost);
                self.wake.notify_one();
            }
        }
    }

    /// Reads `kv_key` exactly, and its holder's session if in doubt.
    async fn read(&self, kv_key: &str) -> Result<(), Error> {
        let latest = exact_read::read_exact(&self.keys, kv_key, self.timeout()).await?;
        let seen = match latest {
            None => Seen::Vacant { revision: 0 },
            Some(ExactEntry {
                revision,
                operation,
                value,
            }) => seen_of(kv_key, operation, revision, &value),
        };
        if let Seen::Held { session: id, .. } = &seen {
            let doubt = {
                let table = self.table();
                !matches!(table.sessions.get(id), Some(Liveness::Dead { .. }))
                    && table.own.is_none_or(|o| o.id != *id)
            };
            if doubt {
                let s = exact_read::read_exact(&self.sessions, &session::key(*id), self.timeout())
                    .await?;
                let now = Instant::now();
                let liveness = match s {
                    Some(l) if l.operation == kv::Operation::Put => Liveness::Alive { seen: now },
                    Some(l) => Liveness::Dead {
                        since: now,
                        clean: l.operation == kv::Operation::Delete,
                    },
                    None => Liveness::Dead {
                        since: now,
                        clean: false,
                    },
                };
                self.table().set_session(*id, liveness);
            }
        }
        let mut table = self.table();
        if let Some(entry) = table.entries.get_mut(kv_key)
            && matches!(seen, Seen::Vacant { revision: 0 })
        {
            // An exact read replaces whatever the watch said.
            entry.seen = Seen::Unknown;
        }
        let lost = table.saw_key(kv_key, seen, Instant::now());
        drop(table);
        self.report(lost);
        Ok(())
    }

    /// Claims `kv_key` with an update expecting `revision`.
    async fn claim(&self, kv_key: &str, revision: u64) -> Result<(), Error> {
        let Some(own) = self.table().own.filter(|o| Instant::now() < o.valid_until) else {
            return Err(Error::Unavailable {
                what: "claim a key (no live lease-set session)",
                source: None,
            });
        };
        let base = self.table().keys_base;
        let record = SessionRecord {
            identity: self.identity.clone(),
            session: own.id,
            base: Some(base),
        }
        .encode();
        let update = settled(|| self.keys.update(kv_key, record.clone(), revision));
        let won = match tokio::time::timeout(self.timeout(), update).await {
            Ok(Ok(rev)) => rev,
            Ok(Err(e)) if crate::error::cas_refused(&e, kv::UpdateErrorKind::WrongLastRevision) => {
                // Someone else moved it first: read it again.
                return self.read(kv_key).await;
            }
            Ok(Err(e)) => return Err(Error::unavailable("claim a lease-set key", e)),
            Err(_) => {
                // It may have landed: the record names our session if so.
                match exact_read::read_exact(&self.keys, kv_key, self.timeout()).await? {
                    Some(l) if l.is_sessions(kv_key, own.id) => l.revision,
                    _ => return self.read(kv_key).await,
                }
            }
        };
        // Rule 1: the write must belong to the incarnation whose creation
        // time is its epoch's base (read before the write was sent).
        let shape = bucket::shape(&self.keys, self.timeout()).await?;
        if shape.created_us != base {
            if shape.created_us < base {
                return Err(bucket::recreated_earlier(
                    self.keys.name.as_str(),
                    base,
                    shape.created_us,
                ));
            }
            // Not used: delete it (expecting its revision), read again.
            let delete = settled(|| self.keys.delete_expect_revision(kv_key, Some(won)));
            let _ = tokio::time::timeout(self.timeout(), delete).await;
            let lost = {
                let mut table = self.table();
                if table.keys_base == base {
                    table.keys_recreated(shape.created_us)
                } else {
                    Vec::new()
                }
            };
            self.report(lost);
            return Ok(());
        }
        bucket::epoch_at(base, won)?;
        self.table().won(kv_key, base, won, own.id, &self.identity);
        Ok(())
    }

    fn lost(&self, name: &ElectionName, epoch: Epoch, detail: &str) -> election_core::Error {
        election_core::Error::Lost(LeaseLost {
            name: name.clone(),
            identity: self.identity.clone(),
            epoch,
            reason: LossReason::Revoked {
                detail: detail.into(),
            },
        })
    }

    /// Reads and claims `kv_key` as far as it can now (never waiting out a
    /// failover grace: the key answers "held by" until it ends); returns
    /// with the key table updated either way.
    async fn acquire(&self, kv_key: &str) -> Result<(), Error> {
        for _ in 0..3 {
            let next = {
                let table = self.table();
                let Some(entry) = table.entries.get(kv_key) else {
                    return Ok(());
                };
                if entry.mine.is_some() {
                    return Ok(());
                }
                let o = &self.conn.options;
                table.next(entry, Instant::now(), o.ttl(), o.grace())
            };
            match next {
                Next::Claim { revision } => self.claim(kv_key, revision).await?,
                Next::Read => self.read(kv_key).await?,
                Next::At(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// Confirm one: renews the session first if less than half its
    /// validity is left (so the write starts with a fresh lease), then runs
    /// the commit-point check: the key and the session read through the
    /// stream leader (concurrently: one round trip). The key must still
    /// carry term `epoch` of this session, and the session must live.
    ///
    /// Failure model: [`election_core::Error::NotHeld`] if the key table holds no
    /// such term; [`election_core::Error::Lost`] if the check finds the key
    /// or the session gone (the other keys of a gone session are reported
    /// lost at once); `Unavailable` if a read fails.
    pub(crate) async fn confirm(
        &self,
        name: &ElectionName,
        epoch: Epoch,
    ) -> Result<(), election_core::Error> {
        let kv_key = record::key(name);
        let core = |e: Error| e.into_core(name);
        let stale = self.table().own.is_some_and(|o| {
            o.valid_until.saturating_duration_since(Instant::now()) < self.policy.validity() / 2
        });
        if stale && matches!(self.renew_session().await, SessionRenewal::Renewed) {
            self.report_renewed();
        }
        let (mine, own) = {
            let table = self.table();
            let mine = table.entries.get(&kv_key).and_then(|e| e.mine);
            (
                mine.filter(|&m| table.epoch_of(m) == Some(epoch)),
                table.own,
            )
        };
        let (Some(mine), Some(own)) = (mine, own) else {
            return Err(not_held(name));
        };
        let session_key = session::key(own.id);
        let (key_now, session_now) = tokio::join!(
            exact_read::read_exact(&self.keys, &kv_key, self.timeout()),
            exact_read::read_exact(&self.sessions, &session_key, self.timeout()),
        );
        let key_now = key_now.map_err(core)?;
        let session_now = session_now.map_err(core)?;
        let now = Instant::now();
        if !session_now.is_some_and(|l| l.is_sessions(&session_key, own.id)) {
            let lost = self.table().lose_session(own.id, now);
            self.report(lost);
            return Err(self.lost(name, epoch, "the lease-set session is gone"));
        }
        match key_now {
            Some(l) if l.revision == mine && l.is_sessions(&kv_key, own.id) => Ok(()),
            other => {
                let seen = match other {
                    Some(l) => seen_of(&kv_key, l.operation, l.revision, &l.value),
                    None => Seen::Vacant { revision: 0 },
                };
                let lost = {
                    let mut table = self.table();
                    table.forget(&kv_key);
                    table.saw_key(&kv_key, seen, now)
                };
                self.report(lost);
                Err(self.lost(name, epoch, "the key carries another term"))
            }
        }
    }
}

/// The error for a key free to claim while this process has no live
/// session to claim it with.
fn no_session() -> Error {
    Error::Unavailable {
        what: "claim a key (no live lease-set session)",
        source: None,
    }
}

/// The answer for key `name` that this process does not hold.
fn not_held(name: &ElectionName) -> election_core::Error {
    election_core::Error::NotHeld { name: name.clone() }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use election_core::{Claimed, ElectionName, Identity};

    use super::{SessionRenewal, Steps};
    use crate::NatsOptions;
    use crate::store::connection::Connection;
    use crate::store::record;

    /// ADR 0111: a renewal counts only once the keys watch has delivered
    /// the keys bucket up to its last revision read after the session
    /// write. Here the watch is stopped (in life: a consumer gone
    /// unnoticed, or one that lags) and an operator revokes the key: the
    /// renewal must not count, or the member would keep the revoked key
    /// for as long as its session is renewed. Before the proof, this
    /// renewal answered `Renewed` and the key stayed held. Once the watch
    /// runs again, it delivers the revocation: the key is lost here, and
    /// renewals count again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_renewal_counts_only_once_the_keys_watch_caught_up() {
        let server = nats_testkit::Server::start().expect("nats-server");
        let options = NatsOptions::new(Duration::from_secs(3)).expect("options");
        let client = async_nats::connect(server.url()).await.expect("connect");
        let conn = Arc::new(Connection::open(client, options).await.expect("open"));
        let steps = Arc::new(
            Steps::open(conn, Identity::new("a").unwrap())
                .await
                .expect("steps"),
        );
        let watch = tokio::spawn({
            let steps = steps.clone();
            async move { steps.follow_keys().await }
        });
        let name = ElectionName::new("k").unwrap();
        let claimed = steps.claim_keys(std::slice::from_ref(&name)).await;
        assert!(
            matches!(claimed.as_slice(), [Ok(Claimed::Won(_))]),
            "{claimed:?}"
        );
        assert!(matches!(
            steps.renew_session().await,
            SessionRenewal::Renewed
        ));
        watch.abort();
        let _ = watch.await;
        // The operator's revocation, as `NatsElection::revoke` writes it.
        let kv_key = record::key(&name);
        let entry = steps
            .keys
            .entry(&kv_key)
            .await
            .expect("read")
            .expect("held");
        let base = crate::store::bucket::opened_shape(&steps.keys)
            .expect("shape")
            .created_us;
        let revocation = record::encode_key_revocation(&Identity::new("ops").unwrap(), base, None);
        steps
            .keys
            .update(&kv_key, revocation, entry.revision)
            .await
            .expect("revoke");
        let renewal = steps.renew_session().await;
        assert!(
            matches!(renewal, SessionRenewal::Failed(_)),
            "a renewal counted while the keys watch missed a revocation: {renewal:?}"
        );
        assert_eq!(steps.held().len(), 1, "nothing told of the loss yet");
        let watch = tokio::spawn({
            let steps = steps.clone();
            async move { steps.follow_keys().await }
        });
        assert!(matches!(
            steps.renew_session().await,
            SessionRenewal::Renewed
        ));
        assert!(steps.held().is_empty(), "the revoked key is still held");
        watch.abort();
    }
}
