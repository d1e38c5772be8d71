//! [`SqliteKeyedClaims`]: the keys of a lease set in one SQLite database, as
//! the core's batch steps ([`KeyedClaims`](election_core::KeyedClaims)) over the store layer: claim
//! many, renew many, release many, confirm one, each one transaction
//! however many keys it covers. The core's keyed engine decides when to
//! call them; the steps keep what the database needs between calls (each
//! held key's term, each contended key's observation).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;

use election_core::{Claimed, ConfigError, ElectionName, HeldKey};
use election_sql::{Answer, Basis, Heartbeat, KeyedRows, SqlKeyedClaims, fail_each, failed_all};

use crate::error::Error;
use crate::store::context::SqliteStore;
use crate::store::host_lock;
use crate::store::row::{self, Found, HeldRow, Take};

/// At most this many threads of one set wait in the kernel for keys' locks
/// at a time; the other keys are polled.
const MAX_LOCK_WAITS: usize = 64;

/// At most this many keys' locks one set holds (one descriptor each): a
/// set of many keys must not run its process out of descriptors. Keys
/// beyond it are claimed without the lock (`lock_id` NULL: no wake-up
/// from them and no takeover shortcut for their successors).
const MAX_KEY_LOCKS: usize = 256;

/// The same-host locks of a set's keys (ADR 0029), shared with the threads
/// that wait for them: what a [`SqliteKeyedClaims`] keeps of SQLite's own
/// (its [`KeyedRows::KeyedWaiting`]).
#[derive(Debug, Default)]
pub struct KeyLocks {
    state: Mutex<LockState>,
    /// Told each time a waiting thread gets a key's lock.
    granted: Notify,
}

#[derive(Debug, Default)]
struct LockState {
    /// The locks this set holds, per key: taken before a claim of the key
    /// could commit, kept until the set closes.
    held: HashMap<ElectionName, File>,
    /// Keys a thread of this set waits in the kernel for.
    waiting: HashSet<ElectionName>,
    /// Keys asked and not held, with no lock: what [`KeyedClaims::wait`]
    /// waits for.
    wanted: Vec<ElectionName>,
    /// Closed: every lock is freed, and a thread that gets one drops it.
    closed: bool,
    /// Waiting failed once: the set polls from then on.
    failed: bool,
}

impl KeyLocks {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A [`LeaseSet`](election_core::LeaseSet) backend over one SQLite
/// database: one lease row per key (the same rows, protocol and timings as
/// [`SqliteClaim`](crate::SqliteClaim), so sets and single candidates can
/// contend for the same keys). It implements the core's batch steps
/// ([`KeyedClaims`](election_core::KeyedClaims)); the core's keyed engine drives them for all keys at
/// once.
///
/// - Every renewal interval, one `BEGIN IMMEDIATE` transaction renews every
///   held key (each conditional on its term's nonce and epoch). A key whose
///   row shows another term, or every key when the database file was
///   deleted or replaced or got a second name (ADR 0046), is lost at once; a key whose renewals fail or
///   time out is lost when its validity (`ttl - margin`, counted from
///   before the last renewal that committed) runs out, which
///   [`held`](election_core::LeaseSet::held) sees by itself. A failed
///   renewal is retried after a quarter of the renewal interval.
/// - Every poll interval (and whenever keys are newly asked, or one was
///   lost), one read (no write lock) of the rows and epoch
///   state of the keys not held, then one transaction that claims every
///   key found released, never held, or seen unchanged (same holder, term
///   and renewal version; or its row seen gone, after a deletion by hand)
///   for a full TTL, each only if its row and epoch state are still exactly
///   as read. Each claim writes its epoch to the row and to the epoch state
///   in that transaction (the same rule as
///   [`SqliteClaim`](crate::SqliteClaim), shared code). A key whose next
///   epoch would be above [`Epoch::MAX`](election_core::Epoch::MAX) fails with
///   [`ConfigError::EpochExhausted`], nothing written. A database file
///   deleted or replaced since it was opened, or with a second name (a
///   hard link, a mount of its own): no key is claimed (a configuration
///   error, so the set stops asking). A database busy past
///   its busy timeout: the keys it was claiming answer `Unavailable`, and
///   are claimed again at the next poll.
/// - [`guard`](election_core::LeaseSet::guard)'s commit-point check is one
///   conditional renewal of the key's row, as
///   [`SqliteClaim`](crate::SqliteClaim)'s `confirm`.
/// - On close, one transaction releases every held row (conditional on its
///   term's nonce, never a successor's claim), given at most the lease's
///   validity. If it fails, the rows age
///   out: other candidates take them over once they have seen no renewal
///   for a full TTL. A process that dies leaves the same.
/// - Cancel safety of the steps: renew, confirm and release are cancel
///   safe (dropped in flight, each has renewed or released this set's own
///   terms or nothing; the core cuts a renewal off at its budget, an
///   unknown outcome); claim runs to completion (see its own docs).
///
/// Made by [`SqliteElection::lease_set`](crate::SqliteElection::lease_set) or
/// [`new`](SqlKeyedClaims::new) (the keys of a process
/// in `election`'s database, with its options and the core's
/// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL)), and
/// [`with_poll_interval`](SqlKeyedClaims::with_poll_interval) (between 1 ms
/// and 1 h).
///
/// ```
/// use std::time::Duration;
///
/// use election_core::Identity;
/// use election_sqlite::{LeaseSet, SqliteElection, SqliteKeyedClaims, SqliteOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let tmp = tempfile::tempdir()?;
/// let election = SqliteElection::open(tmp.path().join("app.db"), SqliteOptions::default()).await?;
/// // What `election.lease_set("node-a")` builds, with another poll interval:
/// let leases = SqliteKeyedClaims::new(&election, Identity::new("node-a")?)
///     .with_poll_interval(Duration::from_millis(250))?;
/// let set = LeaseSet::new(leases);
/// assert!(set.ask("shard-1").await?);
/// set.close().await;
/// # Ok(()) }
/// ```
pub type SqliteKeyedClaims = SqlKeyedClaims<SqliteStore>;

/// The same-host lock of each of `keys` (ADR 0029), as its identity
/// for `lock_id` (`None`: not held): takes the ones that are free and
/// no thread of this set waits for; the others stay as they are.
fn take_locks(set: &SqliteKeyedClaims, keys: &[ElectionName]) -> Vec<Option<String>> {
    let Some(host) = set.store().host_locks.as_ref() else {
        return vec![None; keys.len()];
    };
    let mut state = set.waiting().state();
    if state.closed {
        return vec![None; keys.len()];
    }
    keys.iter()
        .map(|key| {
            if !state.held.contains_key(key)
                && !state.waiting.contains(key)
                && state.held.len() + state.waiting.len() < MAX_KEY_LOCKS
            {
                match host_lock::try_take(&host.path(key.as_str())) {
                    Ok(Some(file)) => {
                        state.held.insert(key.clone(), file);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(%key, error = %e, "same-host lock failed; polling");
                    }
                }
            }
            state.held.get(key).and_then(|f| host.lock_identity(f))
        })
        .collect()
}

/// Starts a thread waiting in the kernel for the lock of each key asked
/// and not held (up to [`MAX_LOCK_WAITS`] at a time). Each lock a
/// thread gets becomes the set's, and tells [`KeyLocks::granted`].
fn start_lock_waits(set: &SqliteKeyedClaims) {
    let Some(host) = set.store().host_locks.as_ref() else {
        return;
    };
    let mut state = set.waiting().state();
    if state.closed || state.failed {
        return;
    }
    let wanted = std::mem::take(&mut state.wanted);
    for key in wanted {
        if state.waiting.len() >= MAX_LOCK_WAITS
            || state.held.len() + state.waiting.len() >= MAX_KEY_LOCKS
        {
            break;
        }
        if state.held.contains_key(&key) || !state.waiting.insert(key.clone()) {
            continue;
        }
        let locks: Weak<KeyLocks> = Arc::downgrade(set.waiting());
        let for_key = key.clone();
        let started = host_lock::wait_then(host.path(key.as_str()), move |taken| {
            // The set is gone: the file drops here and the lock with it.
            let Some(locks) = locks.upgrade() else {
                return;
            };
            let mut state = locks.state();
            state.waiting.remove(&for_key);
            match taken {
                Ok(file) if !state.closed => {
                    state.held.insert(for_key, file);
                    drop(state);
                    locks.granted.notify_one();
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(key = %for_key, error = %e, "same-host lock wait failed; polling");
                    state.failed = true;
                }
            }
        });
        if !started {
            state.waiting.remove(&key);
            state.failed = true;
            break;
        }
    }
}

/// The claim transaction of a poll: fills in `answers` for the keys of
/// `takes` (each `(index in names, take)`).
async fn take(
    set: &SqliteKeyedClaims,
    names: &[ElectionName],
    takes: Vec<(usize, Take<'_>)>,
    answers: &mut [Answer],
) {
    let ctx = &set.store();
    let batch: Vec<Take<'_>> = takes.iter().map(|(_, t)| *t).collect();
    let sent = ctx.clock.now();
    let mut may_commit = false;
    let result = row::claim_many(
        &ctx.pool,
        &batch,
        set.state().identity().as_str(),
        ctx.options.times.ttl_ms(),
        ctx.clock.wall_unix_ms(),
        || may_commit = true,
    )
    .await;
    let claimed = match result {
        Ok(claimed) => claimed,
        Err(e) => {
            if e.is_busy() && !may_commit {
                tracing::debug!(identity = %set.state().identity(), error = %e, "database busy; claiming again at the next poll");
            } else if may_commit {
                release_in_background(set, &batch);
            }
            let at: Vec<usize> = takes.iter().map(|(i, _)| *i).collect();
            fail_each(e, names, &at, answers);
            return;
        }
    };
    let valid_until = sent + ctx.options.validity();
    let won: HashMap<&str, i64> = claimed.won.iter().map(|(n, e)| (n.as_str(), *e)).collect();
    for (i, take) in takes {
        let name = &names[i];
        set.state().unobserve(name);
        if claimed.exhausted.iter().any(|n| n == name.as_str()) {
            tracing::error!(%name, "every epoch up to Epoch::MAX has been handed out; the key cannot be won again");
            answers[i] = Err(Error::Config(ConfigError::EpochExhausted).into_core(name));
            continue;
        }
        // Not won: its row changed since it was read (someone else
        // claimed, renewed or released it); looked at again next poll.
        let Some(&epoch) = won.get(name.as_str()) else {
            continue;
        };
        answers[i] = match row::epoch_of(name.as_str(), epoch) {
            Ok(e) => Ok(set.state().won(name, take.nonce, epoch, e, valid_until)),
            Err(e) => Err(e.into_core(name)),
        };
    }
}

/// Releases claims whose commit is in doubt, conditional on their
/// nonces, in the background; if that fails they age out.
fn release_in_background(set: &SqliteKeyedClaims, batch: &[Take<'_>]) {
    let pool = set.store().pool.clone();
    let holds: Vec<(String, i64)> = batch.iter().map(|t| (t.name.to_owned(), t.nonce)).collect();
    tokio::spawn(async move {
        let holds: Vec<HeldRow<'_>> = holds
            .iter()
            .map(|(name, nonce)| HeldRow {
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

impl KeyedRows for SqliteStore {
    type KeyedWaiting = Arc<KeyLocks>;

    fn keyed_waiting(&self) -> Arc<KeyLocks> {
        Arc::new(KeyLocks::default())
    }

    /// Claim many: one read (no write lock) of the rows and epoch state of
    /// `keys`, then one `BEGIN IMMEDIATE` transaction that claims every key
    /// found released, never held, or seen unchanged for a full TTL, each
    /// only if its row and epoch state are still exactly as read.
    ///
    /// Answers: `Won` with the epoch the transaction wrote; `HeldBy` the
    /// holder read (also for a key seen held for less than a full TTL, and
    /// for one whose row changed between the read and the transaction:
    /// looked at again at the next poll); `Err(Config)` if the database
    /// file was deleted or replaced, or the key's epochs are exhausted;
    /// `Err(Unavailable)` if the database was busy (retried).
    ///
    /// A commit in doubt (the transaction failed after its writes) releases
    /// those claims in the background, conditional on their nonces.
    ///
    /// Cancel safety: run to completion (the core does); dropped after the
    /// writes, a claim may commit unrecorded and then ages out.
    async fn claim_keys(set: &SqliteKeyedClaims, keys: &[ElectionName]) -> Vec<Answer> {
        if let Err(e) = set.store().check_in_place() {
            return failed_all(e, keys);
        }
        let strs: Vec<&str> = keys.iter().map(ElectionName::as_str).collect();
        let rows = match row::read_many(&set.store().pool, &strs).await {
            Ok(rows) => rows,
            Err(e) => return failed_all(e, keys),
        };
        let now = set.store().clock.now();
        let ttl = set.store().options.ttl();
        let locks = take_locks(set, keys);
        let mut answers: Vec<Answer> = Vec::with_capacity(keys.len());
        let mut takes: Vec<(usize, Take<'_>)> = Vec::new();
        {
            for (i, name) in keys.iter().enumerate() {
                let seen = rows.get(name.as_str()).cloned().unwrap_or_default();
                let found = Found::of(seen.lease.as_ref(), seen.recorded);
                let lock = locks[i].as_deref();
                // Never the shortcut over this set's own term: a key it lost
                // (its renewals did not land in time) may still name it in
                // the row, with its lock, while the lost term's work winds
                // down; that waits a full TTL, as before.
                let own = seen
                    .lease
                    .as_ref()
                    .and_then(|r| r.holder.as_deref())
                    .is_some_and(|h| h == set.state().identity().as_str());
                let basis = set
                    .state()
                    .may_claim_basis(name, &found, seen.heartbeat, ttl, now)
                    .or_else(|| {
                        let gone = !own && seen.holder_gone(lock);
                        if gone {
                            tracing::info!(%name, ?found, "the holder's same-host lock is free: its term ended or its process died; taking over without waiting out the TTL");
                        }
                        gone.then_some(Basis::AsRead)
                    });
                let may = basis.is_some();
                let leader = seen.lease.as_ref().and_then(|r| r.leader().ok().flatten());
                answers.push(Ok(Claimed::HeldBy(leader)));
                if may {
                    takes.push((
                        i,
                        Take {
                            name: name.as_str(),
                            nonce: election_core::attempt_nonce().cast_signed(),
                            seen: seen.lease.map(|r| (r.version, r.epoch)),
                            recorded: seen.recorded.map(|r| r.epoch),
                            lock,
                            by_heartbeat: match basis {
                                Some(Basis::Heartbeat { version }) => {
                                    seen.heartbeat.map(|m| Heartbeat { id: m.id, version })
                                }
                                _ => None,
                            },
                        },
                    ));
                }
            }
        }
        let tried: Vec<usize> = takes.iter().map(|(i, _)| *i).collect();
        if !takes.is_empty() {
            take(set, keys, takes, &mut answers).await;
        }
        // A take that did not win found its row changed since the read
        // (most often: the holder released it and freed its same-host
        // lock, which this set then took). With the lock in hand no lock
        // wait will wake the set again, so look again at once instead of
        // at the next poll (at most once per such change: a take fails
        // only when another writer changed the row in between).
        if tried
            .iter()
            .any(|i| !matches!(answers[*i], Ok(Claimed::Won(_))))
        {
            set.waiting().granted.notify_one();
        }
        // What `wait` waits for: the locks of the keys still not won (the
        // core claims in batches, ADR 0058: each batch updates its own
        // keys, and the keys of the other batches stay wanted).
        {
            let mut state = set.waiting().state();
            let still: Vec<ElectionName> = keys
                .iter()
                .zip(&answers)
                .filter(|(key, answer)| {
                    !matches!(answer, Ok(Claimed::Won(_))) && !state.held.contains_key(*key)
                })
                .map(|(key, _)| key.clone())
                .collect();
            let batch: HashSet<&ElectionName> = keys.iter().collect();
            state.wanted.retain(|key| !batch.contains(key));
            state.wanted.extend(still);
        }
        answers
    }

    /// A key given back while the set runs: its same-host lock goes too,
    /// waking a waiter on this host (at close, `close` frees all).
    fn released(set: &SqliteKeyedClaims, held: &[HeldKey]) {
        let mut state = set.waiting().state();
        for (key, _) in held {
            state.held.remove(key);
        }
    }

    /// Waits in the kernel for the same-host lock of each key asked and
    /// not held (ADR 0029; one thread per key, at most 64 per set, and at
    /// most 256 key locks held or waited for per set), and returns as soon as one is granted: its
    /// holder resigned or closed, or its process died. The poll interval
    /// is the backstop (and the only wake-up where the lock cannot be
    /// trusted, or for keys beyond the threads' limit).
    ///
    /// Cancel safety: cancel safe; a thread that gets a lock after the
    /// wait was dropped keeps it for the set (and the next wait returns at
    /// once).
    async fn wait_keys(set: &SqliteKeyedClaims) {
        start_lock_waits(set);
        tokio::select! {
            () = set.waiting().granted.notified() => {}
            () = tokio::time::sleep(set.state().poll_interval()) => {}
        }
    }

    /// Frees every same-host lock of the set, after its keys were released
    /// (the waiters it wakes find the rows released).
    async fn close_keys(set: &SqliteKeyedClaims) {
        let mut state = set.waiting().state();
        state.closed = true;
        state.held.clear();
        state.wanted.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use election_core::{Epoch, Identity, KeyedClaims};

    use super::*;
    use crate::options::SqliteOptions;

    async fn context() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().expect("dir");
        // The renewal interval is never waited for here: every step is
        // called by hand.
        let options =
            SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10)).expect("options");
        let ctx = SqliteStore::open(&dir.path().join("app.db"), options)
            .await
            .expect("open");
        (dir, Arc::new(ctx))
    }

    fn set(ctx: &Arc<SqliteStore>, identity: &str) -> SqliteKeyedClaims {
        SqliteKeyedClaims::over(ctx.clone(), Identity::new(identity).expect("identity"))
    }

    fn key(name: &str) -> ElectionName {
        ElectionName::new(name).expect("name")
    }

    /// `(holder, epoch, version)` of `name`'s row.
    async fn row(ctx: &SqliteStore, name: &str) -> (Option<String>, i64, i64) {
        sqlx::query_as("SELECT holder, epoch, version FROM election_leases WHERE name = ?1")
            .bind(name)
            .fetch_one(&ctx.pool)
            .await
            .expect("select")
    }

    fn won(answer: &Answer) -> Epoch {
        match answer {
            Ok(Claimed::Won(won)) => won.epoch,
            other => panic!("expected a win, got {other:?}"),
        }
    }

    fn not_held(result: Result<(), election_core::Error>) -> bool {
        matches!(result, Err(election_core::Error::NotHeld { .. }))
    }

    #[tokio::test]
    async fn the_steps_claim_renew_confirm_and_release_many_keys() {
        let (_dir, ctx) = context().await;
        let (a, b) = (set(&ctx, "a"), set(&ctx, "b"));
        let (k1, k2) = (key("k1"), key("k2"));
        let first = Epoch::FIRST;

        let claimed = a.claim(&[k1.clone(), k2.clone()]).await;
        assert_eq!(claimed.len(), 2);
        assert_eq!(won(&claimed[0]), first);
        assert_eq!(won(&claimed[1]), first);
        match &b.claim(std::slice::from_ref(&k1)).await[..] {
            [Ok(Claimed::HeldBy(Some(leader)))] => {
                assert_eq!(leader.identity.as_str(), "a");
                assert_eq!(leader.epoch, first);
            }
            other => panic!("expected k1 held by a, got {other:?}"),
        }

        // One renewal of both keys bumps each version once.
        let before = (row(&ctx, "k1").await.2, row(&ctx, "k2").await.2);
        let held = [(k1.clone(), first), (k2.clone(), first)];
        assert!(a.renew(&held).await.expect("renewed").is_empty());
        assert_eq!(row(&ctx, "k1").await.2, before.0 + 1);
        assert_eq!(row(&ctx, "k2").await.2, before.1 + 1);

        // A row deleted by hand: its key is refused at the next renewal,
        // and its term forgotten; the other key goes on.
        sqlx::query("DELETE FROM election_leases WHERE name = 'k2'")
            .execute(&ctx.pool)
            .await
            .expect("delete");
        let refused = a.renew(&held).await.expect("renewed");
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, k2);
        assert!(not_held(a.confirm(&k2, first).await));
        a.confirm(&k1, first).await.expect("still held");
        assert!(not_held(a.confirm(&k1, Epoch::MAX).await), "another term");

        // Another term in the row: the commit point finds the loss.
        sqlx::query("UPDATE election_leases SET nonce = 0 WHERE name = 'k1'")
            .execute(&ctx.pool)
            .await
            .expect("take k1");
        assert!(not_held(a.confirm(&k1, first).await));
        assert_eq!(a.state().terms().len(), 0, "both terms forgotten");
    }

    /// A key the set still names in its row (a term the engine counted
    /// lost, say, whose renewals did not land) is not taken back by the
    /// same-host shortcut, though the set holds the key's lock: that term's
    /// work may still run. Another set holding the lock would take over.
    #[tokio::test]
    async fn no_shortcut_over_the_sets_own_term() {
        let (_dir, ctx) = context().await;
        assert!(ctx.host_locks.is_some(), "a local filesystem");
        let a = set(&ctx, "a");
        let k1 = key("k1");
        assert_eq!(
            won(&a.claim(std::slice::from_ref(&k1)).await[0]),
            Epoch::FIRST
        );
        let lock_id: Option<String> =
            sqlx::query_scalar("SELECT lock_id FROM election_leases WHERE name = 'k1'")
                .fetch_one(&ctx.pool)
                .await
                .expect("select");
        assert!(lock_id.is_some(), "the win recorded its lock");
        // The engine asks for the key again as if its term were lost.
        match &a.claim(std::slice::from_ref(&k1)).await[..] {
            [Ok(Claimed::HeldBy(Some(leader)))] => assert_eq!(leader.identity.as_str(), "a"),
            other => panic!("expected k1 still held (a full TTL to wait), got {other:?}"),
        }
    }

    #[tokio::test]
    async fn release_gives_only_this_sets_terms_up() {
        let (_dir, ctx) = context().await;
        let (a, b) = (set(&ctx, "a"), set(&ctx, "b"));
        let (k1, k2) = (key("k1"), key("k2"));
        a.claim(std::slice::from_ref(&k1)).await;
        b.claim(std::slice::from_ref(&k2)).await;
        // a never held k2: its release leaves b's row alone.
        a.release(&[(k1.clone(), Epoch::FIRST), (k2.clone(), Epoch::FIRST)])
            .await;
        assert_eq!(row(&ctx, "k1").await.0, None, "released");
        assert_eq!(row(&ctx, "k2").await.0.as_deref(), Some("b"));
        assert!(not_held(a.confirm(&k1, Epoch::FIRST).await));
        // Released: won at once elsewhere, with the next epoch.
        let claimed = b.claim(std::slice::from_ref(&k1)).await;
        assert_eq!(won(&claimed[0]).get(), Epoch::FIRST.get() + 1);
    }

    /// The engine has no "not now" answer: a busy database answers
    /// `Unavailable` for the keys a poll would claim (retried after the
    /// poll interval), and the holder it read for the others.
    #[tokio::test]
    async fn a_busy_database_answers_unavailable_for_the_keys_being_claimed() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("app.db");
        let options = SqliteOptions::new(Duration::from_secs(30), Duration::from_secs(10))
            .and_then(|o| o.with_busy_timeout(Duration::from_millis(50)))
            .expect("options");
        let ctx = Arc::new(SqliteStore::open(&path, options).await.expect("open"));
        let (a, b) = (set(&ctx, "a"), set(&ctx, "b"));
        let (k1, k2) = (key("k1"), key("k2"));
        a.claim(std::slice::from_ref(&k1)).await;

        let mut other = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
            "sqlite://{}",
            path.display()
        ))
        .await
        .expect("connect");
        let lock = sqlx::Connection::begin_with(&mut other, "BEGIN IMMEDIATE")
            .await
            .expect("lock");
        match &b.claim(&[k1.clone(), k2.clone()]).await[..] {
            [
                Ok(Claimed::HeldBy(Some(holder))),
                Err(election_core::Error::Unavailable { name, .. }),
            ] => {
                assert_eq!(holder.identity.as_str(), "a");
                assert_eq!(name, &k2, "about the key it concerns");
            }
            other => panic!("expected k1 held by a and k2 unavailable, got {other:?}"),
        }
        lock.rollback().await.expect("unlock");
        assert_eq!(
            won(&b.claim(std::slice::from_ref(&k2)).await[0]),
            Epoch::FIRST
        );
    }

    #[tokio::test]
    async fn a_replaced_database_file_fails_every_step() {
        let (dir, ctx) = context().await;
        let a = set(&ctx, "a");
        let (k1, k2) = (key("k1"), key("k2"));
        a.claim(std::slice::from_ref(&k1)).await;
        let path = dir.path().join("app.db");
        std::fs::rename(&path, dir.path().join("moved.db")).expect("move");
        std::fs::write(&path, b"").expect("replace");

        match &a.claim(std::slice::from_ref(&k2)).await[..] {
            [Err(election_core::Error::Config(_))] => {}
            other => panic!("expected a configuration failure, got {other:?}"),
        }
        let refused = a.renew(&[(k1.clone(), Epoch::FIRST)]).await;
        assert_eq!(refused.expect("answered").len(), 1, "every key lost");
        assert!(not_held(a.confirm(&k1, Epoch::FIRST).await));
    }
}
