//! [`PostgresKeyedClaims`]: the keys of a lease set in one PostgreSQL database,
//! as the core's batch steps ([`KeyedClaims`](election_core::KeyedClaims)): claim many, renew many,
//! release many, confirm one, each one statement however many keys it
//! covers. The core's keyed engine decides when to call them; the steps
//! keep what the database needs between calls (each held key's term, each
//! contended key's observation).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use election_core::{Claimed, ElectionName};
use election_sql::{Answer, Basis, KeyedRows, SqlKeyedClaims, fail_each, failed_all};

use crate::error::Error;
use crate::store::context::PostgresStore;
use crate::store::context::Via;
use crate::store::notify::{self, Wakes};
use crate::store::row::{self, Take};

/// A [`LeaseSet`](crate::LeaseSet) backend over one PostgreSQL database: one lease row per
/// key (the same rows, protocol and timings as
/// [`PostgresClaim`](crate::PostgresClaim), so sets and single candidates
/// contend for the same keys).
///
/// - Every renewal interval, one statement renews every held key (each
///   conditional on its term's nonce and epoch). A key whose row shows
///   another term or none is lost at once; a key whose renewals fail or
///   time out is lost when its validity (`ttl - margin`, counted from
///   before the last renewal that landed was sent) runs out.
/// - Every poll interval, and whenever a notification names a key asked
///   and not held (a release or a win elsewhere), one statement reads the
///   rows and epoch records of the keys not held, then one statement
///   claims every key found released, never held, or seen unchanged for a
///   full TTL on this process's monotonic clock, each only if its row and
///   record are still exactly as read, with its epoch drawn from the
///   sequence in that statement (rule 1). A key whose next epoch would be
///   above [`Epoch::MAX`](election_core::Epoch::MAX) fails with [`ConfigError::EpochExhausted`](election_core::ConfigError::EpochExhausted).
///   A server that cannot be reached: the keys answer `Unavailable` and
///   are tried again at the next poll; a claim statement whose outcome is
///   unknown is released in the background (conditional on its nonces).
///   The core hands the keys over in batches of at most 512, each batch a
///   read and a claim statement, and halves the batch after one that
///   failed or timed out (ADR 0058): a server too slow to claim every key
///   within the request timeout still hands them out.
/// - [`guard`](crate::LeaseSet::guard)'s commit-point check is one conditional
///   renewal of the key's row, as [`PostgresClaim`](crate::PostgresClaim)'s
///   `confirm`.
/// - On close, one statement releases every held row (conditional on its
///   term's nonce) and notifies waiters; if it fails the rows age out. A
///   process that dies leaves its rows to age out: another candidate takes
///   each over once it has seen no renewal for a full TTL.
/// - Cancel safety of the steps: renew, confirm and release are cancel
///   safe (dropped in flight, each has renewed or released this set's own
///   terms or nothing; the core cuts a renewal off at its budget, an
///   unknown outcome); claim runs to completion (see its own docs).
///
/// Made by [`PostgresElection::lease_set`](crate::PostgresElection::lease_set)
/// or [`new`](SqlKeyedClaims::new) (the keys of a process in `election`'s
/// database, with its options and the core's
/// [`DEFAULT_POLL_INTERVAL`](election_core::DEFAULT_POLL_INTERVAL)), and
/// [`with_poll_interval`](SqlKeyedClaims::with_poll_interval) (how often the
/// keys not held are looked at when no notification comes: between 1 ms
/// and 1 h).
///
/// ```no_run
/// use std::time::Duration;
///
/// use election_core::Identity;
/// use election_postgres::{LeaseSet, PostgresElection, PostgresKeyedClaims, PostgresOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let url = "postgres://app@db.internal/app";
/// let election = PostgresElection::connect(url, PostgresOptions::default()).await?;
/// let leases = PostgresKeyedClaims::new(&election, Identity::new("node-a")?)
///     .with_poll_interval(Duration::from_millis(500))?;
/// let set = LeaseSet::new(leases);
/// set.ask("shard-1").await?;
/// set.close().await;
/// # Ok(()) }
/// ```
pub type PostgresKeyedClaims = SqlKeyedClaims<PostgresStore>;

/// What a [`PostgresKeyedClaims`] keeps of PostgreSQL's own (its
/// [`KeyedRows::KeyedWaiting`]): its wake-ups and the keys they concern.
#[derive(Debug)]
pub struct KeyWakes {
    /// The keys asked and not won by the last claim of each: what a
    /// notification wakes [`KeyedClaims::wait`](election_core::KeyedClaims::wait) for.
    wanted: Arc<Mutex<HashSet<String>>>,
    /// Wake-ups, subscribed when the set is made.
    wakes: tokio::sync::Mutex<Wakes>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The claim statement of a poll: fills in `answers` for `takes`
/// (each `(index in keys, take)`).
async fn take(
    set: &PostgresKeyedClaims,
    keys: &[ElectionName],
    takes: Vec<(usize, Take<'_>)>,
    answers: &mut [Answer],
) {
    let ctx = set.store();
    let batch: Vec<Take<'_>> = takes.iter().map(|(_, t)| t.clone()).collect();
    let sent = ctx.clock.now();
    // On the pool, not the session: a claim of a batch of keys may run
    // long (and on past its timeout), and must not hold up the renewals
    // of the process's terms (ADR 0105).
    let won = match ctx
        .claim_many_via(Via::Pool, &batch, set.state().identity().as_str())
        .await
    {
        Ok(won) => won,
        Err(e) => {
            if !matches!(e, Error::Unavailable(sqlx::Error::PoolTimedOut)) {
                // Sent: it may have committed.
                ctx.release_in_background(
                    batch.iter().map(|t| (t.name.to_owned(), t.nonce)).collect(),
                );
            }
            let at: Vec<usize> = takes.iter().map(|(i, _)| *i).collect();
            fail_each(e, keys, &at, answers);
            return;
        }
    };
    let valid_until = sent + ctx.options.validity();
    let won: HashMap<&str, i64> = won.iter().map(|(n, e)| (n.as_str(), *e)).collect();
    for (i, take) in takes {
        let name = &keys[i];
        set.state().unobserve(name);
        // Not won: its row changed since it was read; looked at again.
        let Some(&epoch) = won.get(name.as_str()) else {
            continue;
        };
        answers[i] = match row::epoch_of(name.as_str(), epoch) {
            Ok(e) => Ok(set.state().won(name, take.nonce, epoch, e, valid_until)),
            Err(e) => Err(e.into_core(name)),
        };
    }
}

/// The claim statement of a poll (see `take` below) and the rest of
/// PostgreSQL's keyed steps.
impl KeyedRows for PostgresStore {
    type KeyedWaiting = KeyWakes;

    fn keyed_waiting(&self) -> KeyWakes {
        KeyWakes {
            wanted: Arc::new(Mutex::new(HashSet::new())),
            wakes: tokio::sync::Mutex::new(self.notifier.subscribe()),
        }
    }

    /// Claim many: one read of the rows and epoch records of `keys`, then
    /// one claim statement for every key that may be taken (see
    /// [`PostgresKeyedClaims`]). Answers: `Won` with the epoch the statement
    /// drew; `HeldBy` the holder read (also for a key whose row changed
    /// between the read and the claim: looked at again at the next poll);
    /// `Err(Config)` for exhausted epochs; `Err(Unavailable)` /
    /// `Err(OutcomeUnknown)` when the server could not answer.
    ///
    /// Cancel safety: run to completion (the core does); dropped after the
    /// claim statement was sent, a claim may commit unrecorded and then
    /// ages out.
    async fn claim_keys(set: &PostgresKeyedClaims, keys: &[ElectionName]) -> Vec<Answer> {
        if let Ok(mut wakes) = set.waiting().wakes.try_lock() {
            notify::drain(&mut wakes);
        }
        let names: Vec<&str> = keys.iter().map(ElectionName::as_str).collect();
        let rows = match set.store().read_many_via(Via::Pool, &names).await {
            Ok(rows) => rows,
            Err(e) => return failed_all(e, keys),
        };
        let now = set.store().clock.now();
        let ttl = set.store().options.ttl();
        let mut answers: Vec<Answer> = Vec::with_capacity(keys.len());
        let mut takes: Vec<(usize, Take<'_>)> = Vec::new();
        {
            for (i, name) in keys.iter().enumerate() {
                let seen = rows.get(name.as_str()).cloned().unwrap_or_default();
                let basis =
                    set.state()
                        .may_claim_basis(name, &seen.found(), seen.heartbeat, ttl, now);
                let may = basis.is_some();
                let leader = seen.lease.as_ref().and_then(|r| r.leader().ok().flatten());
                answers.push(Ok(Claimed::HeldBy(leader)));
                if may {
                    let nonce = election_core::attempt_nonce().cast_signed();
                    match Take::new(name.as_str(), nonce, &seen) {
                        Ok(mut take) => {
                            if let Some(Basis::Heartbeat { version }) = basis {
                                take.by_heartbeat = Some(version);
                            }
                            takes.push((i, take));
                        }
                        Err(e) => {
                            tracing::error!(%name, "every epoch up to Epoch::MAX has been handed out; the key cannot be won again");
                            answers[i] = Err(e.into_core(name));
                        }
                    }
                }
            }
        }
        if !takes.is_empty() {
            take(set, keys, takes, &mut answers).await;
        }
        // The core claims in batches (ADR 0058): each batch updates its
        // own keys, and the keys of the other batches stay wanted.
        let mut wanted = lock(&set.waiting().wanted);
        for (key, answer) in keys.iter().zip(&answers) {
            if matches!(answer, Ok(Claimed::Won(_))) {
                wanted.remove(key.as_str());
            } else {
                wanted.insert(key.as_str().to_owned());
            }
        }
        drop(wanted);
        answers
    }

    /// Waits for a notification naming a key asked and not held (a
    /// release or a win elsewhere), at most the poll interval.
    ///
    /// Cancel safety: cancel safe.
    async fn wait_keys(set: &PostgresKeyedClaims) {
        set.store().notifier.start();
        let mut wakes = set.waiting().wakes.lock().await;
        let wanted = set.waiting().wanted.clone();
        let woken = notify::woken(&mut wakes, |n| lock(&wanted).contains(n));
        let _ = tokio::time::timeout(set.state().poll_interval(), woken).await;
    }
}
