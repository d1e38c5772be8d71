//! The plain steps of a NATS lease set, one I/O operation (or a few in
//! parallel) each, over the [`Book`] of what this process knows:
//!
//! - open: the two buckets and this process's first session;
//! - ask: a key is wanted;
//! - claim many ([`Steps::plan`] then [`Steps::claim_many`]): read or claim
//!   every asked key the book says is due;
//! - renew many ([`Steps::renew_session`]): one write of the session renews
//!   every key it holds;
//! - release many ([`Steps::release_all`]): every key is given up and the
//!   session deleted, which frees them all at once;
//! - confirm one ([`Steps::confirm`]): the commit point of one key;
//! - wake-ups and loss notices from the watches ([`Steps::follow_keys`],
//!   [`Steps::follow_sessions`]), which ring [`Steps::wake`].
//!
//! The loop that drives them is in `lease_set`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{Closing, Epoch, Identity, KeyState, LeaseLost, LossReason};
use futures::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::book::{Book, Liveness, Next, Seen, seen_of};
use crate::bucket;
use crate::connection::Connection;
use crate::error::Error;
use crate::latest::{self, Latest};
use crate::session::{self, Renewal};
use crate::value::{self, SessionRecord};

/// How many key reads or claims run at once.
const CONCURRENCY: usize = 64;

/// A lease set's connection, buckets and book, with the steps on them.
pub(crate) struct Steps {
    conn: Arc<Connection>,
    pub(crate) identity: Identity,
    sessions: kv::Store,
    keys: kv::Store,
    book: Mutex<Book>,
    /// Serializes writes of the own session (renewals, restarts).
    session_writes: tokio::sync::Mutex<()>,
    /// Rung when there may be work for [`plan`](Steps::plan): a key was
    /// asked about, freed, or its holder's session died; a new session.
    pub(crate) wake: Notify,
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
        let own =
            session::start(&sessions, &identity, options.validity(), options.timeout()).await?;
        tracing::info!(identity = %identity, session = own.id, "lease-set session started");
        Ok(Steps {
            conn: inner,
            identity,
            sessions,
            keys,
            book: Mutex::new(Book::new(
                own,
                keys_shape.created_us,
                sessions_shape.created_us,
            )),
            session_writes: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
        })
    }

    /// Ask: `state`'s key is wanted; the next [`plan`](Steps::plan) looks
    /// at it.
    pub(crate) fn ask(&self, state: Arc<KeyState>) {
        let kv_key = value::key(state.name());
        self.book().ask(kv_key, state);
        self.wake.notify_one();
    }

    /// Release many: nothing is held from here on, then the session ends,
    /// which frees every key it held (at once: no failover grace).
    pub(crate) async fn release_all(&self) {
        let own = self.book().release_all();
        let _writes = self.session_writes.lock().await;
        if let Some(own) = own {
            session::end(&self.sessions, own, self.timeout()).await;
        }
    }

    /// Which asked keys need a read or a claim now (marked busy until
    /// [`claim_many`](Steps::claim_many) is done with them), and when the
    /// next look is due at the latest.
    pub(crate) fn plan(&self) -> (Vec<String>, Instant) {
        let o = &self.conn.options;
        self.book()
            .plan(Instant::now(), o.ttl(), o.grace(), o.renew_every())
    }

    /// Claim many: reads and claims `work` (from [`plan`](Steps::plan)) as
    /// far as each can go now, [`CONCURRENCY`] at a time; a key that fails
    /// says so in its state.
    pub(crate) async fn claim_many(&self, work: Vec<String>) {
        futures::stream::iter(work)
            .for_each_concurrent(CONCURRENCY, |key| async move {
                let outcome = self.acquire(&key, false).await;
                self.book().done(&key, outcome);
            })
            .await;
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn timeout(&self) -> Duration {
        self.conn.options.timeout()
    }

    /// Renew many: one renewal of the own session, which renews every key
    /// it holds (or a new session if there is none); true if the session
    /// is renewed (or started). Validity counts from the instant before the
    /// write was sent; both buckets' stream info is checked after it.
    pub(crate) async fn renew_session(&self) -> bool {
        let options = &self.conn.options;
        let _writes = self.session_writes.lock().await;
        let own = self.book().own;
        let Some(own) = own else {
            // A new session only in a bucket whose max age is not below
            // the TTL counted with (an operator may have shortened it).
            match bucket::shape(&self.sessions, self.timeout()).await {
                Ok(shape) if shape.max_age.is_zero() || shape.max_age >= options.ttl() => {}
                Ok(shape) => {
                    tracing::warn!(
                        max_age = ?shape.max_age,
                        ttl = ?options.ttl(),
                        "the sessions bucket's max age is below the TTL: no new lease-set session"
                    );
                    return false;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading the sessions bucket failed");
                    return false;
                }
            }
            match session::start(
                &self.sessions,
                &self.identity,
                options.validity(),
                self.timeout(),
            )
            .await
            {
                Ok(s) => {
                    tracing::info!(identity = %self.identity, session = s.id, "new lease-set session");
                    self.book().own = Some(s);
                    self.wake.notify_one();
                    return true;
                }
                Err(e) => tracing::debug!(error = %e, "starting a lease-set session failed"),
            }
            return false;
        };
        let outcome = session::renew(
            &self.sessions,
            &self.identity,
            own,
            options.validity(),
            self.timeout(),
        )
        .await;
        let now = Instant::now();
        match outcome {
            Ok(Renewal::Renewed(s)) => {
                // Both buckets as the server describes them now: a
                // recreated bucket or a max age below the TTL ends the
                // session (or the keys' terms) instead of being counted on.
                let (sessions_shape, keys_shape) = tokio::join!(
                    bucket::shape(&self.sessions, self.timeout()),
                    bucket::shape(&self.keys, self.timeout())
                );
                let mut book = self.book();
                let (sessions_shape, keys_shape) = match (sessions_shape, keys_shape) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => {
                        // Landed but unchecked: learn the revision, keep
                        // the old validity.
                        tracing::debug!(error = %e, "checking the lease-set buckets failed");
                        if let Some(o) = book.own.as_mut().filter(|o| o.id == s.id) {
                            o.revision = s.revision;
                        }
                        return false;
                    }
                };
                if keys_shape.created_us != book.keys_base {
                    book.keys_recreated(keys_shape.created_us);
                }
                let ttl = options.ttl();
                let shorter = !sessions_shape.max_age.is_zero() && sessions_shape.max_age < ttl;
                if sessions_shape.created_us != book.sessions_base || shorter {
                    tracing::warn!(
                        session = s.id,
                        max_age = ?sessions_shape.max_age,
                        ?ttl,
                        "the sessions bucket was recreated or its max age shortened"
                    );
                    book.sessions_base = sessions_shape.created_us;
                    book.lose_session(s.id, now);
                    return false;
                }
                book.renewed(s);
                true
            }
            Ok(Renewal::Gone) => {
                self.book().lose_session(own.id, now);
                false
            }
            Err(e) => {
                // The update may have landed: learn its revision (a
                // successful write of ours), without extending validity.
                tracing::debug!(error = %e, "renewing the lease-set session failed");
                let read =
                    latest::latest(&self.sessions, &session::key(own.id), self.timeout()).await;
                let mut book = self.book();
                match read {
                    Ok(Some(l)) if l.operation == kv::Operation::Put => {
                        if let Some(o) = book.own.as_mut().filter(|o| o.id == own.id) {
                            o.revision = l.revision;
                        }
                    }
                    Ok(_) => book.lose_session(own.id, now),
                    Err(_) => {}
                }
                if book
                    .own
                    .is_some_and(|o| o.id == own.id && now >= o.valid_until)
                {
                    book.lose_session(own.id, now);
                }
                false
            }
        }
    }

    /// The options the lease set counts with.
    pub(crate) fn options(&self) -> &crate::options::NatsOptions {
        &self.conn.options
    }

    /// Follows the keys bucket until `closing`: a key freed wakes the
    /// claiming loop; a record under a held key that is not its term's is
    /// a loss notice.
    pub(crate) async fn follow_keys(&self, closing: &Closing) {
        self.follow(&self.keys, closing, Self::apply_key).await;
    }

    /// Follows the sessions bucket until `closing`: a session's end wakes
    /// the claiming loop (its keys may be taken over); the end of this
    /// process's own session loses every key.
    pub(crate) async fn follow_sessions(&self, closing: &Closing) {
        self.follow(&self.sessions, closing, Self::apply_session)
            .await;
    }

    /// Follows one bucket with a watch (restarted when it ends), applying
    /// each entry.
    async fn follow(&self, store: &kv::Store, closing: &Closing, apply: impl Fn(&Self, kv::Entry)) {
        loop {
            match store.watch_with_history(">").await {
                Ok(mut watch) => loop {
                    tokio::select! {
                        biased;
                        () = closing.closed() => return,
                        entry = watch.next() => match entry {
                            Some(Ok(entry)) => apply(self, entry),
                            Some(Err(e)) => { tracing::debug!(error = %e, "lease-set watch failed"); break; }
                            None => break,
                        },
                    }
                },
                Err(e) => tracing::debug!(error = %e, "starting a lease-set watch failed"),
            }
            tokio::select! {
                biased;
                () = closing.closed() => return,
                () = tokio::time::sleep(self.conn.options.renew_every() / 4) => {}
            }
        }
    }

    fn apply_key(&self, entry: kv::Entry) {
        let seen = seen_of(&entry.key, entry.operation, entry.revision, &entry.value);
        let vacant = matches!(seen, Seen::Vacant { .. });
        self.book().saw_key(&entry.key, seen, Instant::now());
        if vacant {
            self.wake.notify_one();
        }
    }

    fn apply_session(&self, entry: kv::Entry) {
        let Some(id) = session::id_of(&entry.key) else {
            return;
        };
        let now = Instant::now();
        let mut book = self.book();
        match entry.operation {
            kv::Operation::Put => book.set_session(id, Liveness::Alive { seen: now }),
            op => {
                if book.own.is_some_and(|o| o.id == id) {
                    book.lose_session(id, now);
                } else {
                    let clean = op == kv::Operation::Delete;
                    book.set_session(id, Liveness::Dead { since: now, clean });
                }
                drop(book);
                self.wake.notify_one();
            }
        }
    }

    /// Reads `kv_key` exactly, and its holder's session if in doubt.
    async fn read(&self, kv_key: &str) -> Result<(), Error> {
        let latest = latest::latest(&self.keys, kv_key, self.timeout()).await?;
        let seen = match latest {
            None => Seen::Vacant { revision: 0 },
            Some(Latest {
                revision,
                operation,
                value,
            }) => seen_of(kv_key, operation, revision, &value),
        };
        if let Seen::Held { session: id, .. } = &seen {
            let doubt = {
                let book = self.book();
                !matches!(book.sessions.get(id), Some(Liveness::Dead { .. }))
                    && book.own.is_none_or(|o| o.id != *id)
            };
            if doubt {
                let s = latest::latest(&self.sessions, &session::key(*id), self.timeout()).await?;
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
                self.book().set_session(*id, liveness);
            }
        }
        let mut book = self.book();
        if let Some(entry) = book.entries.get_mut(kv_key)
            && matches!(seen, Seen::Vacant { revision: 0 })
        {
            // An exact read replaces whatever the watch said.
            entry.seen = Seen::Unknown;
        }
        book.saw_key(kv_key, seen, Instant::now());
        Ok(())
    }

    /// Claims `kv_key` with an update expecting `revision`.
    async fn claim(&self, kv_key: &str, revision: u64) -> Result<(), Error> {
        let Some(own) = self.book().own.filter(|o| Instant::now() < o.valid_until) else {
            return Err(Error::Unavailable {
                what: "claim a key (no live lease-set session)",
                source: None,
            });
        };
        let base = self.book().keys_base;
        let record = SessionRecord {
            identity: self.identity.clone(),
            session: own.id,
            base: Some(base),
        }
        .encode();
        let update = self.keys.update(kv_key, record, revision);
        let won = match tokio::time::timeout(self.timeout(), update).await {
            Ok(Ok(rev)) => rev,
            Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                // Someone else moved it first: read it again.
                return self.read(kv_key).await;
            }
            Ok(Err(e)) => return Err(Error::unavailable("claim a lease-set key", e)),
            Err(_) => {
                // It may have landed: the record names our session if so.
                match latest::latest(&self.keys, kv_key, self.timeout()).await? {
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
            let delete = self.keys.delete_expect_revision(kv_key, Some(won));
            let _ = tokio::time::timeout(self.timeout(), delete).await;
            let mut book = self.book();
            if book.keys_base == base {
                book.keys_recreated(shape.created_us);
            }
            return Ok(());
        }
        let epoch = bucket::epoch_at(base, won)?;
        self.book()
            .won(kv_key, base, won, epoch, own.id, &self.identity);
        Ok(())
    }

    fn lost(&self, state: &KeyState, epoch: Epoch, reason: LossReason) -> election_core::Error {
        election_core::Error::Lost(LeaseLost {
            name: state.name().clone(),
            identity: self.identity.clone(),
            epoch,
            reason,
        })
    }

    /// Reads and claims `kv_key` as far as it can now (for a guard, also
    /// waiting out a failover grace that ends soon); returns with the book
    /// updated either way.
    async fn acquire(&self, kv_key: &str, for_guard: bool) -> Result<(), Error> {
        for _ in 0..3 {
            let next = {
                let book = self.book();
                let Some(entry) = book.entries.get(kv_key) else {
                    return Ok(());
                };
                if entry.mine.is_some() {
                    return Ok(());
                }
                let o = &self.conn.options;
                book.next(entry, Instant::now(), o.ttl(), o.grace())
            };
            match next {
                Next::Claim { revision } => self.claim(kv_key, revision).await?,
                Next::Read => self.read(kv_key).await?,
                // A failover grace ends soon: honour it, then claim.
                Next::At(at) if for_guard && at <= Instant::now() + self.conn.options.grace() => {
                    tokio::time::sleep_until(at).await;
                }
                Next::At(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// Confirm one: claims the key if it is free (waiting out a failover
    /// grace that ends soon), renews the session first if less than half
    /// its validity is left, then runs the commit-point check: the key and
    /// the session read through the stream leader (concurrently).
    pub(crate) async fn confirm(
        &self,
        state: &Arc<KeyState>,
    ) -> Result<Epoch, election_core::Error> {
        let name = state.name();
        let kv_key = value::key(name);
        let core = |e: Error| e.into_core(name);
        self.acquire(&kv_key, true).await.map_err(core)?;
        // Renew first if less than half the validity is left, so the write
        // starts with a fresh lease (renewals are serialized with the loop's).
        let stale = self.book().own.is_some_and(|o| {
            o.valid_until.saturating_duration_since(Instant::now())
                < self.conn.options.validity() / 2
        });
        if stale {
            self.renew_session().await;
        }
        let (mine, own) = {
            let book = self.book();
            (book.entries.get(&kv_key).and_then(|e| e.mine), book.own)
        };
        let (Some(mine), Some(own)) = (mine, own) else {
            return Err(state.not_held_error());
        };
        let epoch = self
            .book()
            .epoch_of(mine)
            .ok_or_else(|| state.not_held_error())?;
        // The commit point: the key still carries this term and the session
        // still lives, both read through the stream leader.
        let session_key = session::key(own.id);
        let (key_now, session_now) = tokio::join!(
            latest::latest(&self.keys, &kv_key, self.timeout()),
            latest::latest(&self.sessions, &session_key, self.timeout()),
        );
        let key_now = key_now.map_err(core)?;
        let session_now = session_now.map_err(core)?;
        let now = Instant::now();
        if !session_now.is_some_and(|l| l.is_sessions(&session_key, own.id)) {
            self.book().lose_session(own.id, now);
            return Err(self.lost(
                state,
                epoch,
                LossReason::Revoked {
                    detail: "the lease-set session is gone".into(),
                },
            ));
        }
        match key_now {
            Some(l) if l.revision == mine && l.is_sessions(&kv_key, own.id) => {}
            other => {
                let seen = match other {
                    Some(l) => seen_of(&kv_key, l.operation, l.revision, &l.value),
                    None => Seen::Vacant { revision: 0 },
                };
                let mut book = self.book();
                if let Some(e) = book.entries.get_mut(&kv_key)
                    && e.mine == Some(mine)
                {
                    e.mine = None;
                    e.state.release();
                }
                book.saw_key(&kv_key, seen, now);
                return Err(self.lost(
                    state,
                    epoch,
                    LossReason::Revoked {
                        detail: "the key carries another term".into(),
                    },
                ));
            }
        }
        if state.epoch() != Some(epoch) {
            return Err(self.lost(state, epoch, LossReason::Expired));
        }
        Ok(epoch)
    }
}
