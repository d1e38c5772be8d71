//! [`NatsLeases`]: a lease set in two KV buckets, with one renewal per
//! process instead of one per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use election_core::{
    Asked, Closing, Epoch, Identity, KeyState, KeyedClaims, Leader, LeaseLost, LeaseSet, LossReason,
};
use futures::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::election::Inner;
use crate::latest::{self, Latest};
use crate::session::{self, Renewal, Session};
use crate::value::{self, Value};
use crate::{Error, NatsElection, bucket};

/// How many key reads or claims run at once.
const CONCURRENCY: usize = 64;

/// The latest record of a key, as this process last saw it.
#[derive(Clone, Debug)]
enum Seen {
    /// Not read yet, or a claim of ours failed and the key must be read.
    Unknown,
    /// No holder: never written (revision 0) or deleted.
    Vacant { revision: u64 },
    /// Written by the session `session` of `identity` at `revision` (the
    /// epoch of that term: keys are written once per term).
    Held {
        revision: u64,
        session: u64,
        identity: Identity,
    },
}

/// Whether another process's session lives, as this process last saw it.
#[derive(Clone, Copy, Debug)]
enum Liveness {
    Alive {
        seen: Instant,
    },
    /// Aged out or deleted; never alive again (its renewals now fail).
    Dead {
        since: Instant,
        clean: bool,
    },
}

#[derive(Debug)]
struct Entry {
    state: Arc<KeyState>,
    /// The revision (= epoch) of this process's term on the key.
    mine: Option<u64>,
    seen: Seen,
    /// Since when the holder's session has been unknown to this process.
    unknown_since: Option<Instant>,
    /// A read or claim for this key is running.
    busy: bool,
}

#[derive(Debug, Default)]
struct Book {
    /// Asked keys, by KV key.
    entries: HashMap<String, Entry>,
    sessions: HashMap<u64, Liveness>,
    /// This process's live session, if any.
    own: Option<Session>,
    /// The creation time (µs) of the keys bucket's incarnation: the base
    /// of every epoch of a key (`keys_base + revision`).
    keys_base: u64,
    /// The creation time (µs) of the sessions bucket's incarnation.
    sessions_base: u64,
}

/// What to do next about a key this process does not hold.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Claim it: an update expecting `revision`.
    Claim { revision: u64 },
    /// Read the key (and its holder's session) exactly.
    Read,
    /// Nothing before `at` (a failover grace, or a session in doubt);
    /// news from the watches may come first.
    At(Instant),
}

/// A [`LeaseSet`] backend in NATS KV for many keys per process: one
/// *session* key per process, renewed every renew interval, and one key per
/// lease naming the session that holds it.
///
/// - **Winning a key** is a compare-and-set on it (an update expecting the
///   revision last seen: 0 for a key never written, the delete marker or
///   the dead holder's record); the **epoch is the keys bucket's creation
///   time in microseconds plus the revision of that write** (keys are
///   written once per term, so later terms have higher revisions; a
///   recreated keys bucket has a later creation time, so its epochs are
///   higher still). The win counts only if the keys bucket's creation time
///   after the write is the one read before it.
/// - **Renewal** renews only the session (one request per renew interval
///   for all keys); every key naming it stays held. Validity is counted
///   from the monotonic instant before the session write, minus the margin
///   (`ttl − ttl/10`), as for single elections. Each renewal also reads
///   both buckets' stream info: a recreated sessions bucket, or a max age
///   below the TTL, loses the session (every key); a recreated keys bucket
///   loses every key held (they are claimed again in the new bucket).
/// - **Taking a key over** from another process needs its session dead:
///   aged out (the server's TTL marker) or deleted. After an age-out the
///   failover grace applies; after a delete (a clean close) it does not.
///   Session deaths are learned from a watch of the sessions bucket and
///   re-checked with exact reads (through the stream leader) for sessions
///   not seen for a TTL.
/// - **A guard** claims the key if it is free (waiting out a failover grace
///   that ends soon), renews the session first if less than half its
///   validity is left, then runs the commit-point check.
/// - **The commit-point check** of a guard reads the key and the session
///   through the stream leader (concurrently: one round trip): the key must
///   still carry this term, the session must still live.
/// - **Close** deletes the session: every key it held is free for others at
///   once. If the delete cannot be sent (or the process dies), the session
///   ages out after the TTL and the keys move after TTL + grace.
///
/// Buckets: `<bucket>-sessions` (max age = TTL, with TTL markers) and
/// `<bucket>-keys` (no max age). Identities must be unique per process.
pub struct NatsLeases {
    inner: Arc<Inner>,
    identity: Identity,
    sessions: kv::Store,
    keys: kv::Store,
    book: Mutex<Book>,
    /// Serializes writes of the own session (renewals, restarts).
    session_writes: tokio::sync::Mutex<()>,
    /// Wakes the claiming loop: a key was asked about, freed, or its
    /// holder's session died.
    wake: Notify,
}

impl std::fmt::Debug for NatsLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsLeases")
            .field("identity", &self.identity)
            .field("bucket", &self.inner.options.bucket_name())
            .finish_non_exhaustive()
    }
}

impl NatsElection {
    /// A [`LeaseSet`] of this process (`identity`) over this election's
    /// server(s) and options (TTL, renew interval, failover grace, request
    /// timeout, replicas); see [`NatsLeases`] for how it works.
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
    pub async fn lease_set(&self, identity: &str) -> Result<LeaseSet<NatsLeases>, Error> {
        let identity = Identity::new(identity)?;
        let inner = self.inner().clone();
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
        let leases = NatsLeases {
            inner,
            identity,
            sessions,
            keys,
            book: Mutex::new(Book {
                own: Some(own),
                keys_base: keys_shape.created_us,
                sessions_base: sessions_shape.created_us,
                ..Book::default()
            }),
            session_writes: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
        };
        Ok(LeaseSet::new(leases))
    }
}

impl Book {
    /// The epoch of a key's term won at `revision` in the keys bucket's
    /// current incarnation.
    fn epoch_of(&self, revision: u64) -> Option<Epoch> {
        bucket::epoch_at(self.keys_base, revision).ok()
    }

    /// The keys bucket was deleted and recreated (its creation time is now
    /// `base`): every key held here is lost (its record is gone, and its
    /// epoch belonged to the old incarnation), and every key is read again.
    fn keys_recreated(&mut self, base: u64) {
        tracing::warn!(
            old = self.keys_base,
            new = base,
            "the lease-set keys bucket was recreated: every key held is lost"
        );
        self.keys_base = base;
        for entry in self.entries.values_mut() {
            if entry.mine.take().is_some() {
                entry.state.release();
            }
            entry.seen = Seen::Unknown;
            entry.unknown_since = None;
        }
    }

    /// What to do about a key this process does not hold, at `now`.
    fn next(&self, entry: &Entry, now: Instant, ttl: Duration, grace: Duration) -> Next {
        match &entry.seen {
            Seen::Unknown => Next::Read,
            Seen::Vacant { revision } => Next::Claim {
                revision: *revision,
            },
            // A record of this process's live session that no claim of
            // it has resolved: refresh it (see `saw_key`).
            Seen::Held {
                revision, session, ..
            } if self.own.is_some_and(|o| o.id == *session) => Next::Claim {
                revision: *revision,
            },
            Seen::Held {
                revision, session, ..
            } => match self.sessions.get(session) {
                Some(Liveness::Dead { since, clean }) => {
                    let ready = if *clean { *since } else { *since + grace };
                    if now >= ready {
                        Next::Claim {
                            revision: *revision,
                        }
                    } else {
                        Next::At(ready)
                    }
                }
                Some(Liveness::Alive { seen }) => {
                    // Renewals show up every renew interval; none for a
                    // whole TTL means the watch may have missed the end.
                    let doubt = *seen + ttl + grace;
                    if now >= doubt {
                        Next::Read
                    } else {
                        Next::At(doubt)
                    }
                }
                None => {
                    let doubt = entry.unknown_since.unwrap_or(now) + ttl + grace;
                    if now >= doubt {
                        Next::Read
                    } else {
                        Next::At(doubt)
                    }
                }
            },
        }
    }

    fn set_session(&mut self, id: u64, liveness: Liveness) {
        match (self.sessions.get(&id), liveness) {
            // Dead is final: a late Put (stale read or watch) cannot revive it.
            (Some(Liveness::Dead { .. }), Liveness::Alive { .. }) => {}
            (Some(Liveness::Dead { .. }), Liveness::Dead { .. }) => {}
            _ => {
                self.sessions.insert(id, liveness);
            }
        }
    }

    /// Records the latest record of `kv_key`; a change under a key this
    /// process holds is a loss.
    fn saw_key(&mut self, kv_key: &str, seen: Seen, now: Instant) {
        let own = self.own;
        let keys_base = self.keys_base;
        let epoch_of = |revision| bucket::epoch_at(keys_base, revision).ok();
        let sessions = &self.sessions;
        let Some(entry) = self.entries.get_mut(kv_key) else {
            return;
        };
        let revision = match &seen {
            Seen::Unknown => 0,
            Seen::Vacant { revision } | Seen::Held { revision, .. } => *revision,
        };
        let current = match &entry.seen {
            Seen::Vacant { revision } | Seen::Held { revision, .. } => *revision,
            Seen::Unknown => 0,
        };
        if revision != 0 && revision < current {
            return; // older news
        }
        if let Some(mine) = entry.mine
            && revision != mine
            && revision != 0
        {
            tracing::warn!(key = %entry.state.name(), epoch = mine, revision, "lease-set key changed under its holder: lost");
            entry.state.release();
            entry.mine = None;
        }
        if let Seen::Held {
            session,
            identity,
            revision,
        } = &seen
        {
            if let Some(own) = own
                && own.id == *session
            {
                // Our own live session wrote it (a claim whose answer was
                // lost, or a racing claim of this process). Not adopted
                // here: which bucket incarnation it landed in is not known
                // (a recreated keys bucket restarts revisions), so its epoch
                // is not either. The claim loop refreshes it (an update
                // expecting its revision, checked like any claim).
                entry.seen = seen;
                return;
            }
            entry.unknown_since = match sessions.get(session) {
                None => entry.unknown_since.or(Some(now)),
                Some(_) => None,
            };
            entry.state.held_by(Some(Leader {
                identity: identity.clone(),
                epoch: epoch_of(*revision).unwrap_or(Epoch::FIRST),
                // Lease-set keys carry no start time.
                since: None,
            }));
        }
        entry.seen = seen;
    }

    /// The session `id` is over: every key it held is lost here.
    fn lose_session(&mut self, id: u64, now: Instant) {
        self.set_session(
            id,
            Liveness::Dead {
                since: now,
                clean: false,
            },
        );
        if self.own.is_some_and(|s| s.id == id) {
            self.own = None;
            for entry in self.entries.values_mut() {
                if entry.mine.take().is_some() {
                    entry.state.release();
                }
            }
            tracing::warn!(
                session = id,
                "lease-set session lost: every key it held is lost"
            );
        }
    }
}

fn seen_of(key: &str, operation: kv::Operation, revision: u64, value: &[u8]) -> Seen {
    match operation {
        kv::Operation::Put => match Value::decode(key, value) {
            Ok(v) => Seen::Held {
                revision,
                session: v.nonce,
                identity: v.identity,
            },
            // Not ours to interpret: treat as held by an unknown session
            // (it will be read again, never taken over blindly).
            Err(e) => {
                tracing::warn!(key, error = %e, "unreadable lease-set record");
                Seen::Unknown
            }
        },
        kv::Operation::Delete | kv::Operation::Purge => Seen::Vacant { revision },
    }
}

/// The error for a bucket recreated with an earlier creation time than
/// one seen before: epochs could go backwards.
fn recreated_earlier(which: &str, before: u64, now: u64) -> Error {
    Error::CorruptValue {
        key: format!("the lease-set {which} bucket"),
        detail: format!(
            "recreated with an earlier creation time ({now} µs, after {before} µs): the \
             server's clock went back, so epochs could repeat; refusing to claim"
        ),
    }
}

impl NatsLeases {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn timeout(&self) -> Duration {
        self.inner.options.timeout()
    }

    /// Keeps the session alive; starts a new one after a loss.
    async fn keep_session(&self, closing: Closing) {
        let options = &self.inner.options;
        let mut ok = true;
        loop {
            // After a failure, retry soon: the deadline leaves room for
            // several tries (validity >= 2 renew intervals).
            let wait = if ok {
                options.renew_every()
            } else {
                options.renew_every() / 4
            };
            tokio::select! {
                biased;
                () = closing.closed() => return,
                () = tokio::time::sleep(wait) => {}
            }
            ok = self.renew_session().await;
        }
    }

    /// One renewal of the own session (or a new session if there is none);
    /// true if the session is renewed (or started).
    async fn renew_session(&self) -> bool {
        let options = &self.inner.options;
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
                if book.own.is_some_and(|o| o.id == s.id) {
                    book.own = Some(s);
                    for entry in book.entries.values() {
                        if let Some(mine) = entry.mine.and_then(|m| book.epoch_of(m)) {
                            entry.state.renewed(mine, s.valid_until);
                        }
                    }
                }
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
                () = tokio::time::sleep(self.inner.options.renew_every() / 4) => {}
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
        let record = Value {
            identity: self.identity.clone(),
            nonce: own.id,
            epoch: None,
            since_unix_ms: None,
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
                    Some(l) if l.is_attempts(kv_key, own.id) => l.revision,
                    _ => return self.read(kv_key).await,
                }
            }
        };
        // Rule 1: the write must belong to the incarnation whose creation
        // time is its epoch's base (read before the write was sent).
        let shape = bucket::shape(&self.keys, self.timeout()).await?;
        if shape.created_us != base {
            if shape.created_us < base {
                return Err(recreated_earlier("keys", base, shape.created_us));
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
        let mut book = self.book();
        let own_now = book.own;
        if book.keys_base != base {
            return Ok(());
        }
        let Some(entry) = book.entries.get_mut(kv_key) else {
            return Ok(());
        };
        entry.seen = Seen::Held {
            revision: won,
            session: own.id,
            identity: self.identity.clone(),
        };
        // If the session ended meanwhile, the key names a dead session:
        // not held.
        if let Some(o) = own_now.filter(|o| o.id == own.id) {
            entry.mine = Some(won);
            entry.state.hold(epoch, &self.identity, Some(o.valid_until));
            tracing::debug!(key = %entry.state.name(), epoch = epoch.get(), "lease-set key won");
        }
        Ok(())
    }

    /// Reads or claims every asked key that needs it; returns when the
    /// next look is due.
    async fn sweep(&self) -> Instant {
        let options = &self.inner.options;
        let now = Instant::now();
        let mut due = now + options.renew_every();
        let mut work = Vec::new();
        {
            let mut book = self.book();
            let live = book.own.is_some_and(|o| now < o.valid_until);
            // Only the keys with work now are cloned: a node waiting on
            // many keys held elsewhere mostly finds nothing to do.
            let b = &*book;
            for (key, e) in b
                .entries
                .iter()
                .filter(|(_, e)| e.mine.is_none() && !e.busy)
            {
                match b.next(e, now, options.ttl(), options.grace()) {
                    Next::Claim { .. } if !live => {
                        // Free, but no live session to claim it with: say
                        // so (once), so nobody waits on it in vain.
                        if e.state.error().is_none() {
                            e.state.failed(
                                Error::Unavailable {
                                    what: "claim a key (no live lease-set session)",
                                    source: None,
                                }
                                .into_core(e.state.name()),
                            );
                        }
                    }
                    Next::Claim { .. } | Next::Read => work.push(key.clone()),
                    Next::At(at) => due = due.min(at),
                }
            }
            for key in &work {
                if let Some(e) = book.entries.get_mut(key) {
                    e.busy = true;
                }
            }
        }
        futures::stream::iter(work)
            .for_each_concurrent(CONCURRENCY, |key| async move {
                let outcome = self.acquire(&key, false).await;
                let mut book = self.book();
                if let Some(e) = book.entries.get_mut(&key) {
                    e.busy = false;
                    if let Err(err) = outcome {
                        e.state.failed(err.into_core(e.state.name()));
                    }
                }
            })
            .await;
        due
    }

    async fn claim_loop(&self, closing: Closing) {
        loop {
            let due = self.sweep().await;
            tokio::select! {
                biased;
                () = closing.closed() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep_until(due) => {}
            }
        }
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
                let o = &self.inner.options;
                book.next(entry, Instant::now(), o.ttl(), o.grace())
            };
            match next {
                Next::Claim { revision } => self.claim(kv_key, revision).await?,
                Next::Read => self.read(kv_key).await?,
                // A failover grace ends soon: honour it, then claim.
                Next::At(at) if for_guard && at <= Instant::now() + self.inner.options.grace() => {
                    tokio::time::sleep_until(at).await;
                }
                Next::At(_) => return Ok(()),
            }
        }
        Ok(())
    }
}

impl KeyedClaims for NatsLeases {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn run(self: Arc<Self>, mut asked: Asked) {
        let closing = asked.closing();
        let keys = async {
            self.follow(&self.keys, &closing, Self::apply_key).await;
        };
        let sessions = async {
            self.follow(&self.sessions, &closing, Self::apply_session)
                .await;
        };
        let asks = async {
            while let Some(state) = asked.next().await {
                let kv_key = value::key(state.name());
                self.book().entries.entry(kv_key).or_insert(Entry {
                    state,
                    mine: None,
                    seen: Seen::Unknown,
                    unknown_since: None,
                    busy: false,
                });
                self.wake.notify_one();
            }
        };
        tokio::join!(
            keys,
            sessions,
            asks,
            self.keep_session(closing.clone()),
            self.claim_loop(closing.clone())
        );
        // Closing: nothing is held from here on, then the session ends,
        // which frees every key it held.
        let own = {
            let mut book = self.book();
            for entry in book.entries.values_mut() {
                if entry.mine.take().is_some() {
                    entry.state.release();
                }
            }
            book.own.take()
        };
        let _writes = self.session_writes.lock().await;
        if let Some(own) = own {
            session::end(&self.sessions, own, self.timeout()).await;
        }
    }

    async fn commit(&self, state: &Arc<KeyState>) -> Result<Epoch, election_core::Error> {
        let name = state.name();
        let kv_key = value::key(name);
        let core = |e: Error| e.into_core(name);
        self.acquire(&kv_key, true).await.map_err(core)?;
        // Renew first if less than half the validity is left, so the write
        // starts with a fresh lease (renewals are serialized with the loop's).
        let stale = self.book().own.is_some_and(|o| {
            o.valid_until.saturating_duration_since(Instant::now())
                < self.inner.options.validity() / 2
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
        if !session_now.is_some_and(|l| l.is_attempts(&session_key, own.id)) {
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
            Some(l) if l.revision == mine && l.is_attempts(&kv_key, own.id) => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use election_core::ElectionName;

    const TTL: Duration = Duration::from_secs(3);
    const GRACE: Duration = Duration::from_secs(1);

    fn entry(seen: Seen) -> Entry {
        Entry {
            state: Arc::new(KeyState::detached(ElectionName::new("k").unwrap())),
            mine: None,
            seen,
            unknown_since: None,
            busy: false,
        }
    }

    fn held_by(session: u64) -> Seen {
        Seen::Held {
            revision: 7,
            session,
            identity: Identity::new("other").unwrap(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_taken_over_only_from_a_dead_session() {
        let now = Instant::now();
        let mut book = Book::default();
        assert_eq!(
            book.next(&entry(Seen::Unknown), now, TTL, GRACE),
            Next::Read
        );
        assert_eq!(
            book.next(&entry(Seen::Vacant { revision: 4 }), now, TTL, GRACE),
            Next::Claim { revision: 4 }
        );
        // A live session: nothing until it could have been missed.
        book.set_session(1, Liveness::Alive { seen: now });
        assert_eq!(
            book.next(&entry(held_by(1)), now, TTL, GRACE),
            Next::At(now + TTL + GRACE)
        );
        assert_eq!(
            book.next(&entry(held_by(1)), now + TTL + GRACE, TTL, GRACE),
            Next::Read
        );
        // Aged out: the grace first.
        book.set_session(
            1,
            Liveness::Dead {
                since: now,
                clean: false,
            },
        );
        assert_eq!(
            book.next(&entry(held_by(1)), now, TTL, GRACE),
            Next::At(now + GRACE)
        );
        assert_eq!(
            book.next(&entry(held_by(1)), now + GRACE, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
        // Dead is final.
        book.set_session(1, Liveness::Alive { seen: now });
        assert!(matches!(book.sessions.get(&1), Some(Liveness::Dead { .. })));
        // Deleted cleanly: no grace.
        book.set_session(
            2,
            Liveness::Dead {
                since: now,
                clean: true,
            },
        );
        assert_eq!(
            book.next(&entry(held_by(2)), now, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
        // Never seen: a full TTL (+ grace) of doubt, then an exact read.
        let mut unknown = entry(held_by(3));
        unknown.unknown_since = Some(now);
        assert_eq!(
            book.next(&unknown, now, TTL, GRACE),
            Next::At(now + TTL + GRACE)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_foreign_record_under_a_held_key_is_a_loss() {
        let now = Instant::now();
        let mut book = Book {
            own: Some(Session {
                id: 9,
                revision: 1,
                valid_until: now + TTL,
            }),
            ..Book::default()
        };
        let mut e = entry(Seen::Unknown);
        e.mine = Some(5);
        e.state.hold(
            Epoch::new(5).unwrap(),
            &Identity::new("me").unwrap(),
            Some(now + TTL),
        );
        let state = e.state.clone();
        book.entries.insert("k".into(), e);
        assert!(state.is_held());
        book.saw_key("k", held_by(1), now);
        assert!(!state.is_held(), "another session's record under our key");
        assert_eq!(book.entries["k"].mine, None);
    }

    /// A record of our own session seen on the watch (or by a read) is not
    /// held until a claim refreshed and checked it: it may have landed in
    /// a recreated keys bucket, where its revision gives no epoch.
    #[tokio::test(start_paused = true)]
    async fn an_own_record_is_refreshed_not_adopted() {
        let now = Instant::now();
        let mut book = Book {
            own: Some(Session {
                id: 9,
                revision: 1,
                valid_until: now + TTL,
            }),
            keys_base: 1_000_000,
            ..Book::default()
        };
        let e = entry(Seen::Unknown);
        let state = e.state.clone();
        book.entries.insert("k".into(), e);
        book.saw_key("k", held_by(9), now);
        assert!(!state.is_held(), "adopted without a refresh");
        assert_eq!(book.entries["k"].mine, None);
        assert_eq!(
            book.next(&book.entries["k"], now, TTL, GRACE),
            Next::Claim { revision: 7 }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn losing_the_session_loses_every_key() {
        let now = Instant::now();
        let mut book = Book {
            own: Some(Session {
                id: 9,
                revision: 1,
                valid_until: now + TTL,
            }),
            ..Book::default()
        };
        let mut states = Vec::new();
        for (i, k) in ["a", "b"].into_iter().enumerate() {
            let mut e = entry(Seen::Unknown);
            e.mine = Some(i as u64 + 1);
            e.state.hold(
                Epoch::new(i as u64 + 1).unwrap(),
                &Identity::new("me").unwrap(),
                Some(now + TTL),
            );
            states.push(e.state.clone());
            book.entries.insert(k.into(), e);
        }
        book.lose_session(9, now);
        assert!(states.iter().all(|s| !s.is_held()));
        assert!(book.own.is_none());
    }
}
