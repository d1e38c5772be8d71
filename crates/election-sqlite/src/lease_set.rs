//! [`SqliteLeases`]: the keys of a lease set in one SQLite database, with
//! one loop and one transaction per step for all of them: a renewal
//! interval costs one write transaction however many keys are held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use election_core::{
    Asked, ConfigError, DEFAULT_POLL_INTERVAL, ElectionName, Epoch, Identity, KeyState,
    KeyedClaims, Leader,
};
use futures::FutureExt;
use tokio::time::Instant;

use crate::election::Inner;
use crate::row::{self, Found, Hold, Observed, Row, Take};
use crate::{Error, SqliteElection};

/// A [`LeaseSet`](election_core::LeaseSet) backend over one SQLite
/// database: one lease row per key (the same rows, protocol and timings as
/// [`SqliteClaim`](crate::SqliteClaim), so sets and single candidates can
/// contend for the same keys), driven by one loop for all keys.
///
/// - Every renewal interval, one `BEGIN IMMEDIATE` transaction renews every
///   held key (each conditional on its term's nonce and epoch). A key whose
///   row shows another term is lost at once; a key whose renewals fail is
///   lost when its validity (`ttl - margin`, counted from before the last
///   renewal that committed) runs out, which
///   [`held`](election_core::LeaseSet::held) sees by itself.
/// - Every poll interval, one read (no write lock) of the rows and epoch
///   state of the keys not held, then one transaction that claims every
///   key found released, never held, or seen unchanged (same holder, term
///   and renewal version; or its row seen gone, after a deletion by hand)
///   for a full TTL, each only if its row and epoch state are still exactly
///   as read. Each claim writes its epoch to the row and to the epoch state
///   in that transaction (the same rule as
///   [`SqliteClaim`](crate::SqliteClaim), shared code). A key whose next
///   epoch would be above [`Epoch::MAX`] fails with
///   [`ConfigError::EpochExhausted`], nothing written. A database file
///   deleted or replaced since it was opened: no key is claimed.
/// - [`guard`](election_core::LeaseSet::guard)'s commit-point check is one
///   conditional renewal of the key's row, as
///   [`SqliteClaim`](crate::SqliteClaim)'s `confirm`.
/// - On close, one transaction releases every held row (conditional on its
///   term's nonce, never a successor's claim). If it fails, the rows age
///   out: other candidates take them over once they have seen no renewal
///   for a full TTL. A process that dies leaves the same.
///
/// Made by [`SqliteElection::lease_set`] or [`SqliteLeases::new`].
#[derive(Debug)]
pub struct SqliteLeases {
    inner: Arc<Inner>,
    identity: Identity,
    poll_interval: Duration,
    /// `(nonce, epoch)` of each held key's term, for the commit point.
    terms: Mutex<HashMap<ElectionName, (i64, i64)>>,
}

#[derive(Debug)]
enum Status {
    Free(Option<Observed>),
    Held {
        nonce: i64,
        epoch: i64,
        valid_until: Instant,
    },
}

/// A key the poll decided to claim.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Its index in the loop's keys.
    index: usize,
    /// The new term's nonce.
    nonce: i64,
    /// `(version, epoch)` of its row as read; `None`: there was no row.
    seen: Option<(i64, i64)>,
    /// The recorded epoch as read; `None`: none.
    recorded: Option<i64>,
}

#[derive(Debug)]
struct Key {
    state: Arc<KeyState>,
    status: Status,
}

impl Key {
    fn is_held(&self) -> bool {
        matches!(self.status, Status::Held { .. })
    }
}

/// `error`, about election `name` (a batch failure concerns every key).
fn for_key(error: &election_core::Error, name: &ElectionName) -> election_core::Error {
    use election_core::Error as E;
    match error.clone() {
        E::Unavailable { source, .. } => E::Unavailable {
            name: name.clone(),
            source,
        },
        E::OutcomeUnknown { source, .. } => E::OutcomeUnknown {
            name: name.clone(),
            source,
        },
        E::Corrupt { source, .. } => E::Corrupt {
            name: name.clone(),
            source,
        },
        other => other,
    }
}

/// The holder a lease row shows, if any.
fn leader_of(r: &Row) -> Option<Leader> {
    Some(Leader {
        identity: Identity::new(r.holder.as_deref()?).ok()?,
        epoch: Epoch::new(u64::try_from(r.epoch).ok()?)?,
        since: r
            .acquired_unix_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .and_then(|ms| std::time::UNIX_EPOCH.checked_add(Duration::from_millis(ms))),
    })
}

fn epoch_of(name: &ElectionName, epoch: i64) -> Result<Epoch, election_core::Error> {
    u64::try_from(epoch)
        .ok()
        .and_then(Epoch::new)
        .ok_or_else(|| {
            Error::CorruptRow {
                name: name.to_string(),
                detail: format!("epoch {epoch}"),
            }
            .into_core(name)
        })
}

impl SqliteLeases {
    /// The keys of process `identity` in `election`'s database, with its
    /// [options](SqliteElection::options) and the core's
    /// [`DEFAULT_POLL_INTERVAL`].
    pub fn new(election: &SqliteElection, identity: Identity) -> Self {
        SqliteLeases {
            inner: election.inner.clone(),
            identity,
            poll_interval: DEFAULT_POLL_INTERVAL,
            terms: Mutex::new(HashMap::new()),
        }
    }

    /// Sets how often the keys not held are looked at (and a vacant or
    /// expired one claimed): between 1 ms and 1 h.
    pub fn with_poll_interval(mut self, poll_interval: Duration) -> Result<Self, Error> {
        if poll_interval < Duration::from_millis(1) || poll_interval > Duration::from_secs(3600) {
            return Err(ConfigError::BadSetting {
                setting: "poll_interval",
                reason: format!("{poll_interval:?} is not between 1ms and 1h"),
            }
            .into());
        }
        self.poll_interval = poll_interval;
        Ok(self)
    }

    fn terms(&self) -> std::sync::MutexGuard<'_, HashMap<ElectionName, (i64, i64)>> {
        self.terms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `key` as not held (lost, expired or given up).
    fn lose(&self, key: &mut Key, why: &str) {
        key.state.release();
        self.terms().remove(key.state.name());
        if let Status::Held { epoch, .. } = key.status {
            tracing::info!(name = %key.state.name(), epoch, identity = %self.identity, "lost: {why}");
        }
        key.status = Status::Free(None);
    }

    /// One renewal of every held key; returns when to renew next.
    async fn renew(&self, keys: &mut [Key]) -> Instant {
        let options = self.inner.options;
        let clock = &self.inner.clock;
        let sent = clock.now();
        let replaced = self.inner.db_file.as_ref().is_some_and(|db| !db.in_place());
        for key in keys.iter_mut() {
            if let Status::Held { valid_until, .. } = key.status {
                if replaced {
                    self.lose(key, "the database file was deleted or replaced");
                } else if valid_until <= sent {
                    self.lose(key, "its renewals failed until its validity ran out");
                }
            }
        }
        let mut deadline = None::<Instant>;
        let holds: Vec<Hold<'_>> = keys
            .iter()
            .filter_map(|k| match k.status {
                Status::Held {
                    nonce,
                    epoch,
                    valid_until,
                } => {
                    deadline = Some(deadline.map_or(valid_until, |d| d.min(valid_until)));
                    Some(Hold {
                        name: k.state.name().as_str(),
                        nonce,
                        epoch,
                    })
                }
                Status::Free(_) => None,
            })
            .collect();
        let Some(deadline) = deadline else {
            return sent + options.renew_interval();
        };
        let retry = sent + (options.renew_interval() / 4).max(Duration::from_millis(1));
        let renewal = row::renew_many(&self.inner.pool, &holds, clock.wall_unix_ms());
        let renewed = match tokio::time::timeout(deadline - sent, renewal).await {
            Ok(Ok(renewed)) => renewed,
            Ok(Err(e)) => {
                tracing::warn!(identity = %self.identity, keys = holds.len(), error = %e, "renewal failed; retrying until the leases run out");
                return retry.max(clock.now());
            }
            Err(_) => {
                // In doubt: each key keeps the validity of its last
                // committed renewal and is lost when that runs out.
                tracing::warn!(identity = %self.identity, keys = holds.len(), "renewal timed out; retrying until the leases run out");
                return clock.now();
            }
        };
        let valid_until = sent + options.validity();
        for key in keys.iter_mut() {
            if let Status::Held {
                epoch,
                valid_until: ref mut until,
                ..
            } = key.status
            {
                if renewed.contains(key.state.name().as_str()) {
                    *until = valid_until;
                    if let Ok(epoch) = epoch_of(key.state.name(), epoch) {
                        key.state.renewed(epoch, valid_until);
                    }
                } else {
                    self.lose(key, "the lease row shows another term");
                }
            }
        }
        sent + options.renew_interval()
    }

    /// Looks at every key not held: records who holds it, and claims those
    /// found vacant or seen unchanged for a full TTL.
    async fn poll(&self, keys: &mut [Key]) {
        let names: Vec<&str> = keys
            .iter()
            .filter(|k| !k.is_held())
            .map(|k| k.state.name().as_str())
            .collect();
        if names.is_empty() {
            return;
        }
        if let Err(e) = self.inner.check_in_place() {
            let error = e.into_core(keys[0].state.name());
            for key in keys.iter().filter(|k| !k.is_held()) {
                key.state.failed(for_key(&error, key.state.name()));
            }
            return;
        }
        let rows = match row::read_many(&self.inner.pool, &names).await {
            Ok(rows) => rows,
            Err(e) => {
                let error = e.into_core(keys[0].state.name());
                for key in keys.iter().filter(|k| !k.is_held()) {
                    key.state.failed(for_key(&error, key.state.name()));
                }
                return;
            }
        };
        drop(names);
        let now = self.inner.clock.now();
        let ttl = self.inner.options.ttl();
        let mut takes: Vec<Pending> = Vec::new();
        for (i, key) in keys.iter_mut().enumerate() {
            let Status::Free(observed) = &mut key.status else {
                continue;
            };
            let name = key.state.name();
            let seen = rows.get(name.as_str()).cloned().unwrap_or_default();
            let found = Found::of(seen.lease.as_ref(), seen.recorded);
            if !row::may_claim(observed, &found, ttl, now) {
                key.state.held_by(seen.lease.as_ref().and_then(leader_of));
                continue;
            }
            takes.push(Pending {
                index: i,
                nonce: election_core::attempt_nonce() as i64,
                seen: seen.lease.map(|r| (r.version, r.epoch)),
                recorded: seen.recorded.map(|r| r.epoch),
            });
        }
        if takes.is_empty() {
            return;
        }
        self.claim(keys, takes).await;
    }

    /// Claims the keys of `takes` in one transaction.
    async fn claim(&self, keys: &mut [Key], takes: Vec<Pending>) {
        let options = self.inner.options;
        let clock = &self.inner.clock;
        let batch: Vec<Take<'_>> = takes
            .iter()
            .map(|p| Take {
                name: keys[p.index].state.name().as_str(),
                nonce: p.nonce,
                seen: p.seen,
                recorded: p.recorded,
            })
            .collect();
        let sent = clock.now();
        let mut may_commit = false;
        let result = row::claim_many(
            &self.inner.pool,
            &batch,
            self.identity.as_str(),
            options.ttl_ms(),
            clock.wall_unix_ms(),
            || may_commit = true,
        )
        .await;
        let in_doubt = || {
            batch
                .iter()
                .map(|t| (t.name.to_owned(), t.nonce))
                .collect::<Vec<_>>()
        };
        let (won, exhausted): (HashMap<String, i64>, Vec<String>) = match result {
            Ok(claimed) => (claimed.won.into_iter().collect(), claimed.exhausted),
            Err(e) if e.is_busy() && !may_commit => {
                tracing::debug!(identity = %self.identity, error = %e, "database busy; claiming again at the next poll");
                return;
            }
            Err(e) => {
                if may_commit {
                    self.release_in_background(in_doubt());
                }
                let error = e.into_core(keys[takes[0].index].state.name());
                drop(batch);
                for p in &takes {
                    let state = &keys[p.index].state;
                    state.failed(for_key(&error, state.name()));
                }
                return;
            }
        };
        let valid_until = sent + options.validity();
        drop(batch);
        for Pending { index, nonce, .. } in takes {
            let key = &mut keys[index];
            key.status = Status::Free(None);
            if exhausted.iter().any(|n| n == key.state.name().as_str()) {
                let name = key.state.name();
                tracing::error!(%name, "every epoch up to Epoch::MAX has been handed out; the key cannot be won again");
                key.state
                    .failed(Error::Config(ConfigError::EpochExhausted).into_core(name));
                continue;
            }
            let Some(&epoch) = won.get(key.state.name().as_str()) else {
                // Changed since it was read: looked at again next poll.
                continue;
            };
            match epoch_of(key.state.name(), epoch) {
                Ok(e) => {
                    key.status = Status::Held {
                        nonce,
                        epoch,
                        valid_until,
                    };
                    self.terms()
                        .insert(key.state.name().clone(), (nonce, epoch));
                    key.state.hold(e, &self.identity, Some(valid_until));
                    tracing::info!(name = %key.state.name(), epoch, identity = %self.identity, "elected");
                }
                Err(e) => key.state.failed(e),
            }
        }
    }

    /// Releases claims whose commit is in doubt, conditional on their
    /// nonces, in the background; if that fails they age out.
    fn release_in_background(&self, holds: Vec<(String, i64)>) {
        let pool = self.inner.pool.clone();
        tokio::spawn(async move {
            let holds: Vec<Hold<'_>> = holds
                .iter()
                .map(|(name, nonce)| Hold {
                    name,
                    nonce: *nonce,
                    epoch: 0,
                })
                .collect();
            if let Err(e) = row::release_many(&pool, &holds).await {
                tracing::warn!(error = %e, "releasing claims in doubt failed; they age out after the TTL");
            }
        });
    }

    /// Gives every held key up: not held from here on, then one
    /// transaction releases the rows.
    async fn release_all(&self, keys: &mut [Key]) {
        let mut holds = Vec::new();
        for key in keys.iter_mut() {
            if let Status::Held { nonce, epoch, .. } = key.status {
                key.state.release();
                holds.push((key.state.name().clone(), nonce, epoch));
                key.status = Status::Free(None);
            }
        }
        self.terms().clear();
        if holds.is_empty() {
            return;
        }
        let batch: Vec<Hold<'_>> = holds
            .iter()
            .map(|(name, nonce, epoch)| Hold {
                name: name.as_str(),
                nonce: *nonce,
                epoch: *epoch,
            })
            .collect();
        let bound = self.inner.options.validity();
        match tokio::time::timeout(bound, row::release_many(&self.inner.pool, &batch)).await {
            Ok(Ok(())) => {
                tracing::info!(identity = %self.identity, keys = batch.len(), "resigned");
            }
            Ok(Err(e)) => {
                tracing::warn!(identity = %self.identity, error = %e, "release failed; the leases age out after the TTL");
            }
            Err(_) => {
                tracing::warn!(identity = %self.identity, "release timed out; the leases age out after the TTL");
            }
        }
    }
}

impl KeyedClaims for SqliteLeases {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    async fn run(self: Arc<Self>, mut asked: Asked) {
        let clock = self.inner.clock.clone();
        let mut keys: Vec<Key> = Vec::new();
        let mut next_renew = clock.now();
        let mut next_poll = clock.now();
        'run: loop {
            let any_held = keys.iter().any(Key::is_held);
            let any_free = keys.iter().any(|k| !k.is_held());
            let wake = match (any_held, any_free) {
                (true, true) => next_renew.min(next_poll),
                (true, false) => next_renew,
                (false, true) => next_poll,
                (false, false) => clock.now() + Duration::from_secs(3600),
            };
            tokio::select! {
                biased;
                key = asked.next() => {
                    let Some(key) = key else { break 'run };
                    keys.push(Key { state: key, status: Status::Free(None) });
                    // Take every key already asked, then look at them at once.
                    loop {
                        match asked.next().now_or_never() {
                            Some(Some(key)) => keys.push(Key { state: key, status: Status::Free(None) }),
                            Some(None) => break 'run,
                            None => break,
                        }
                    }
                    next_poll = clock.now();
                }
                () = tokio::time::sleep_until(wake) => {}
            }
            if keys.iter().any(Key::is_held) && clock.now() >= next_renew {
                next_renew = self.renew(&mut keys).await;
            }
            if clock.now() >= next_poll {
                self.poll(&mut keys).await;
                next_poll = clock.now() + self.poll_interval;
                if !any_held && keys.iter().any(Key::is_held) {
                    next_renew = clock.now() + self.inner.options.renew_interval();
                }
            }
        }
        self.release_all(&mut keys).await;
    }

    /// One conditional renewal of the key's row (see
    /// [`SqliteClaim`](crate::SqliteClaim)'s `confirm` for what a success
    /// proves). A row that shows another term marks the key lost at once.
    async fn commit(&self, key: &Arc<KeyState>) -> Result<Epoch, election_core::Error> {
        let name = key.name();
        let Some((nonce, epoch)) = self.terms().get(name).copied() else {
            return Err(key.not_held_error());
        };
        let not_held = || election_core::Error::NotHeld { name: name.clone() };
        if let Some(db) = &self.inner.db_file
            && !db.in_place()
        {
            key.release();
            return Err(not_held());
        }
        let bound = self.inner.options.validity();
        let renewal = row::renew(
            &self.inner.pool,
            name.as_str(),
            nonce,
            epoch,
            self.inner.clock.wall_unix_ms(),
        );
        match tokio::time::timeout(bound, renewal).await {
            Ok(Ok(true)) => epoch_of(name, epoch),
            Ok(Ok(false)) => {
                if self.terms().get(name) == Some(&(nonce, epoch)) {
                    self.terms().remove(name);
                    key.release();
                }
                Err(not_held())
            }
            Ok(Err(e)) => Err(e.into_core(name)),
            Err(_) => Err(Error::OutcomeUnknown { after: bound }.into_core(name)),
        }
    }
}
